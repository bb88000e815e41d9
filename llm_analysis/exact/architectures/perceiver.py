"""Perceiver: layers on a latent array and output queries, a fixed number of rows per sequence.

Perceiver IO (Jaegle et al. 2021, arXiv 2107.14795, sec. 2) does not run its layers
over the input tokens: an encoder layer cross-attends from a fixed array of N learned
latents (config.num_latents) to the inputs, a stack of self-attention layers runs on
the latents only (num_self_attends_per_block layers, applied num_blocks times with the
same weights), and a decoder layer cross-attends from a fixed set of M output queries
back to the latents (PerceiverForMaskedLM: M = max_position_embeddings whatever the
input length, so its logits are M rows per sequence). Work scales with N x seq, not seq^2.

The family changes the generic walk (derive.py) in three places (`_LatentModel`):
* the layers: both cross-attention layers and the latent stack;
* the modules that see a fixed number of rows per sequence (the same rows at the probe's
  length and at another, and not the tokens: a second meta forward) read `FixedRows(N)`:
  batch x N rows in any phase;
* an attention module among them is one core with the `LatentAttention` variant: its
  queries and keys/values each see their own rows (the query and key projections'
  sources, `FixedRows` or `InputTokens`), heads and head widths read from the projections
  (queries and keys share qk_channels / heads, values have v_channels / heads):
  2 x batch x heads x Lq x Lk x (d_qk + d_v) FLOPs per call, Lq and Lk the rows per
  sequence (the eager q.k^T and scores x values, no mask saves work); encoder
  cross-attention from N latents to s tokens is N x s per head, not s^2. Any other
  computing module among them is a `row_flops` spec per fixed row (the MLM head's matmul
  with the input embedding).
A phase continuing a context (no decode step) and an input longer than the learned
position table (`max_seq_len`) are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from llm_analysis.errors import UnsupportedArchitectureError
from llm_analysis.exact.architectures.family import AttentionVariant, ClassRule, ModelRule, RowSource


def _check(phase: Any) -> None:
    if phase.past_len > 0:
        raise UnsupportedArchitectureError(
            "latent cross-attention (Perceiver) is described for a forward over whole sequences only; a phase "
            "continuing a cached context is not described")


@dataclass(frozen=True)
class FixedRows(RowSource):
    """N rows per sequence whatever its length (latents, output queries)."""

    per_sequence: int
    differs_from_tokens = True

    def rows_per_sequence(self, phase: Any) -> int:
        _check(phase)
        return self.per_sequence

    def rows(self, phase: Any, description: Dict[str, Any]) -> int:
        return phase.batch * self.rows_per_sequence(phase)

    def __str__(self) -> str:  # as operator shapes name it
        return f"rows:{self.per_sequence}"


@dataclass(frozen=True)
class InputTokens(RowSource):
    """Every token of the phase (the inputs the encoder cross-attends to)."""

    def rows_per_sequence(self, phase: Any) -> int:
        _check(phase)
        return phase.q_len

    def rows(self, phase: Any, description: Dict[str, Any]) -> int:
        return phase.batch * self.rows_per_sequence(phase)

    def __str__(self) -> str:
        return "all"


@dataclass(frozen=True)
class LatentAttention(AttentionVariant):
    """An attention core between two row sets."""

    queries: RowSource
    keys: RowSource

    def operator(self, describer: Any, phase: Any, s: Dict[str, Any]) -> Any:
        """The Operator of the core (heads split over TP)."""
        from llm_analysis.model import Operator
        from llm_analysis.schema.options import ActivationRecomputation as AR
        _check_input(describer.description, phase)
        lq, lk = self.queries.rows_per_sequence(phase), self.keys.rows_per_sequence(phase)
        b, h = phase.batch, s["heads"]
        flops = 2.0 * b * h * lq * lk * (s["d_qk"] + s["d_v"]) * s["calls"]
        heads_gpu = h / describer.tp
        a = describer.a_bytes
        return Operator(name=f"{s['name']}.core", group="attention", kind="attention", flops=flops,
                        flops_per_gpu=flops / describer.tp,
                        bytes_read_per_gpu=b * heads_gpu * (lq * s["d_qk"] + lk * (s["d_qk"] + s["d_v"])) * a,
                        bytes_written_per_gpu=b * lq * heads_gpu * s["d_v"] * a, recompute_class=AR.ATTN_COMPUTE,
                        shapes=f"{heads_gpu:g} heads x {lq} q x {lk} kv ({self.queries} -> {self.keys}), "
                               f"d={s['d_qk']}/{s['d_v']}")


def _check_input(desc: Dict[str, Any], phase: Any) -> None:
    """transformers' Perceiver text preprocessor adds a learned position embedding per input
    token (max_position_embeddings rows): a longer input has no position to embed."""
    limit = desc.get("max_seq_len")
    if limit and phase.q_len > limit:
        raise UnsupportedArchitectureError(
            f"{desc.get('model_type')}: an input of {phase.q_len} tokens exceeds max_position_embeddings = {limit} "
            f"(learned input positions); use at most {limit} tokens")


# ------------------------------------------------------- reading the layers
def _attention_core(module: Any) -> bool:
    """A module computing multi-head attention from its own query/key/value projections."""
    return isinstance(getattr(module, "num_heads", None), int) and all(
        hasattr(getattr(module, n, None), "out_features") for n in ("query", "key", "value"))


def _is_layer(module: Any) -> bool:
    attn = getattr(module, "attention", None)
    return getattr(module, "mlp", None) is not None and _attention_core(getattr(attn, "self", None))


def _per_sequence(rows: List[int], batch: int) -> Optional[int]:
    per = {r // batch if r % batch == 0 else -1 for r in rows}
    return per.pop() if len(per) == 1 and -1 not in per else None


def _fixed_rows(probe: Any, other: Any) -> Dict[str, int]:
    """{path: N} of the modules that saw the same N rows per sequence at both lengths."""
    out = {}
    for path, rows in probe.tokens.items():
        n = _per_sequence(rows, probe.batch)
        if not path or n is None:
            continue
        if _per_sequence(other.tokens.get(path, []), other.batch) == n:
            out[path] = n
    return out


class _LatentModel(ModelRule):
    def __init__(self, lm: Any, cfg: Any, probe: Any, module: Any):
        self.lm, self.cfg, self.probe = lm, cfg, probe
        self.fixed: Dict[str, int] = {}  # module path -> rows per sequence

    def layers(self, walk: Any, stacks: List[str], layers: List[str]) -> Tuple[List[str], List[str]]:
        """Only for a model whose config declares a latent array."""
        if not all(isinstance(getattr(self.cfg, k, None), int) for k in ("num_latents", "d_latents")):
            return stacks, layers
        from llm_analysis.exact.probe import run_probe
        other, why = run_probe(self.lm, self.probe.batch, self.probe.seq_len + 8)
        if other is None:
            raise UnsupportedArchitectureError(
                f"{type(self.lm).__name__}: a second length does not run on meta tensors ({why})")
        latent_layers = [p for p, m in self.lm.named_modules() if _is_layer(m)]
        inside = lambda p: any(p == s or p.startswith(s + ".") for s in stacks)  # noqa: E731
        self.fixed = _fixed_rows(self.probe, other)
        return stacks + [p for p in latent_layers if not inside(p)], latent_layers

    def token_source(self, path: str) -> Optional[RowSource]:
        return FixedRows(self.fixed[path]) if path in self.fixed else None

    def _source(self, path: str) -> RowSource:
        fixed = self.token_source(path)
        if fixed:
            return fixed
        if all(r == self.probe.batch * self.probe.seq_len for r in self.probe.tokens.get(path, [None])):
            return InputTokens()
        raise UnsupportedArchitectureError(f"{path}: sees rows that are neither every token nor a fixed number per "
                                           "sequence")

    def site_specs(self, walk: Any, path: str, rel: str, module: Any, own_per_exec: int,
                   per_exec: int) -> Optional[List[Dict[str, Any]]]:
        """[the attention core] of an attention module with fixed rows, or [a row_flops spec
        per fixed row] of any other module computing with weights it does not own."""
        if path not in self.fixed:
            return None
        if not _attention_core(module):
            n = self.fixed[path]
            units = self.probe.batch * n * max(per_exec, 1)
            if own_per_exec % units:
                return [{"name": rel, "op": "unexplained", "params": 0, "calls": per_exec, "group": "other",
                         "class": type(module).__name__}]
            return [{"name": rel, "op": "row_flops", "params": 0, "tokens": FixedRows(n), "calls": int(per_exec),
                     "group": "other", "flops_per_row": own_per_exec // units, "tp": "unknown"}]
        heads = int(module.num_heads)
        d_qk, d_v = int(module.query.out_features) // heads, int(module.value.out_features) // heads
        return [{"name": rel, "op": "attention", "params": 0, "calls": int(per_exec), "group": "attention",
                 "heads": heads, "kv_heads": heads, "d_qk": d_qk, "d_v": d_v, "window": None, "cache_elems": 0,
                 "causal": False,
                 "variant": LatentAttention(self._source(f"{path}.query"), self._source(f"{path}.key"))}]


RULES = {"PerceiverLayer": ClassRule(model=_LatentModel)}
RECORDS = (FixedRows, InputTokens, LatentAttention)
