"""Latent-array models (Perceiver), read from the module tree (derive path; live modules).

Perceiver IO (Jaegle et al. 2021, arXiv 2107.14795, sec. 2) does not run its layers
over the input tokens: an encoder layer cross-attends from a fixed array of N learned
latents (config.num_latents) to the inputs, a stack of self-attention layers runs on
the latents only (num_self_attends_per_block layers, applied num_blocks times with the
same weights), and a decoder layer cross-attends from a fixed set of M output queries
back to the latents. transformers' PerceiverForMaskedLM queries M =
max_position_embeddings positions whatever the input length (its trainable output
position encoding), and its logits are M rows per sequence. Work therefore scales
with N x seq (encoder cross-attention) and not with seq^2.

The generic walk (derive.py) reads such a model with three hooks from here:
* `latent_model`: the layers (both cross-attention layers and the latent stack) and
  the modules that see a fixed number of rows per sequence: the same rows at the
  probe's length and at another, and not the tokens (a second meta forward);
* those modules' specs see `rows:N` (tree_latents.py: batch x N rows in any phase);
* an attention module among them is one core whose queries and keys/values each
  see their own rows (`q_tokens`, `kv_tokens`: the query and key projections'
  sources), heads and head widths read from the projections (queries and keys share
  qk_channels / heads, values have v_channels / heads); any other computing module
  among them is a `row_flops` spec per fixed row (the MLM head's matmul with the
  input embedding).
Verification is the usual one: per module at the probe, in total at the long probe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from llm_analysis.errors import UnsupportedArchitectureError


@dataclass
class LatentModel:
    layers: List[str]
    extra_stacks: List[str]
    fixed: Dict[str, int] = field(default_factory=dict)  # module path -> rows per sequence


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


def fixed_rows(probe: Any, other: Any) -> Dict[str, int]:
    """{path: N} of the modules that saw the same N rows per sequence at both lengths."""
    out = {}
    for path, rows in probe.tokens.items():
        n = _per_sequence(rows, probe.batch)
        if not path or n is None:
            continue
        if _per_sequence(other.tokens.get(path, []), other.batch) == n:
            out[path] = n
    return out


def latent_model(lm: Any, cfg: Any, probe: Any, stack_layers: List[str]) -> Optional[LatentModel]:
    """The latent layers of a model whose config declares a latent array, else None."""
    if not all(isinstance(getattr(cfg, k, None), int) for k in ("num_latents", "d_latents")):
        return None
    from llm_analysis.exact.probe import run_probe
    other, why = run_probe(lm, probe.batch, probe.seq_len + 8)
    if other is None:
        raise UnsupportedArchitectureError(f"{type(lm).__name__}: a second length does not run on meta tensors ({why})")
    layers = [p for p, m in lm.named_modules() if _is_layer(m)]
    inside = lambda p: any(p == s or p.startswith(s + ".") for s in stack_layers)  # noqa: E731
    extra = [p for p in layers if not inside(p)]
    return LatentModel(layers, extra, fixed_rows(probe, other))


def fixed_source(model: Optional[LatentModel], path: str) -> Optional[str]:
    if model is None or path not in model.fixed:
        return None
    return f"rows:{model.fixed[path]}"


def _source(model: LatentModel, path: str, probe: Any) -> str:
    fixed = fixed_source(model, path)
    if fixed:
        return fixed
    if all(r == probe.batch * probe.seq_len for r in probe.tokens.get(path, [None])):
        return "all"
    raise UnsupportedArchitectureError(f"{path}: sees rows that are neither every token nor a fixed number per "
                                       "sequence")


def latent_sites(model: LatentModel, path: str, rel: str, module: Any, own_per_exec: int, per_exec: int,
                 probe: Any) -> List[Dict[str, Any]]:
    """[the attention core] of an attention module with fixed rows, or [a row_flops spec
    per fixed row] of any other module computing with weights it does not own."""
    if not _attention_core(module):
        n = model.fixed[path]
        units = probe.batch * n * max(per_exec, 1)
        if own_per_exec % units:
            return [{"name": rel, "op": "unexplained", "params": 0, "calls": per_exec, "group": "other",
                     "class": type(module).__name__}]
        return [{"name": rel, "op": "row_flops", "params": 0, "tokens": f"rows:{n}", "calls": int(per_exec),
                 "group": "other", "flops_per_row": own_per_exec // units, "tp": "unknown"}]
    heads = int(module.num_heads)
    d_qk, d_v = int(module.query.out_features) // heads, int(module.value.out_features) // heads
    return [{"name": rel, "op": "attention", "params": 0, "calls": int(per_exec), "group": "attention",
             "heads": heads, "kv_heads": heads, "d_qk": d_qk, "d_v": d_v, "window": None, "cache_elems": 0,
             "causal": False, "q_tokens": _source(model, f"{path}.query", probe),
             "kv_tokens": _source(model, f"{path}.key", probe)}]
