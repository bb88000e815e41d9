"""Fixed rows per sequence and attention between row sets (torch-free; derive_latents.py).

Perceiver IO (Jaegle et al. 2021, arXiv 2107.14795) runs most of its work on N latents
and decodes M output queries, both fixed per sequence whatever its length:
* a spec whose `tokens` is `rows:N` sees batch x N rows in every phase;
* an attention core with `q_tokens` / `kv_tokens` has its queries and keys/values on
  those sources (`rows:N` or `all`: every token of the phase): 2 x batch x heads x
  Lq x Lk x (d_qk + d_v) FLOPs per call, Lq and Lk the rows per sequence (the eager
  q.k^T and scores x values, no mask saves work). Encoder cross-attention from N
  latents to s tokens is N x s per head, not s^2.
A phase continuing a context is refused: the encoder-only model has no decode step;
so is an input longer than the learned input position table (`max_seq_len`).
"""

from __future__ import annotations

import logging
from typing import Any, Dict

from llm_analysis.errors import UnsupportedArchitectureError

logger = logging.getLogger(__name__)


def _check(phase: Any) -> None:
    if phase.past_len > 0:
        raise UnsupportedArchitectureError(
            "latent cross-attention (Perceiver) is described for a forward over whole sequences only; a phase "
            "continuing a cached context is not described")


def _check_input(desc: Dict[str, Any], phase: Any) -> None:
    """transformers' Perceiver text preprocessor adds a learned position embedding per input
    token (max_position_embeddings rows): a longer input has no position to embed."""
    limit = desc.get("max_seq_len")
    if limit and phase.q_len > limit:
        raise UnsupportedArchitectureError(
            f"{desc.get('model_type')}: an input of {phase.q_len} tokens exceeds max_position_embeddings = {limit} "
            f"(learned input positions); use at most {limit} tokens")


def rows_per_seq(phase: Any, source: str) -> int:
    """Rows per sequence of `rows:N` (N) or `all` (the phase's new tokens)."""
    _check(phase)
    if source == "all":
        return phase.q_len
    return int(source.split(":", 1)[1])


def fixed_tokens(phase: Any, source: str) -> int:
    return phase.batch * rows_per_seq(phase, source)


def latent_core_op(describer: Any, phase: Any, s: Dict[str, Any]) -> Any:
    """The Operator of an attention core between two row sets (heads split over TP)."""
    from llm_analysis.model import Operator
    from llm_analysis.schema.options import ActivationRecomputation as AR
    _check_input(describer.description, phase)
    lq, lk = rows_per_seq(phase, s["q_tokens"]), rows_per_seq(phase, s["kv_tokens"])
    b, h = phase.batch, s["heads"]
    flops = 2.0 * b * h * lq * lk * (s["d_qk"] + s["d_v"]) * s["calls"]
    heads_gpu = h / describer.tp
    a = describer.a_bytes
    return Operator(name=f"{s['name']}.core", group="attention", kind="attention", flops=flops,
                    flops_per_gpu=flops / describer.tp,
                    bytes_read_per_gpu=b * heads_gpu * (lq * s["d_qk"] + lk * (s["d_qk"] + s["d_v"])) * a,
                    bytes_written_per_gpu=b * lq * heads_gpu * s["d_v"] * a, recompute_class=AR.ATTN_COMPUTE,
                    shapes=f"{heads_gpu:g} heads x {lq} q x {lk} kv ({s['q_tokens']} -> {s['kv_tokens']}), "
                           f"d={s['d_qk']}/{s['d_v']}")


def rows_note(desc: Dict[str, Any]) -> str:
    """Says that training's activation-memory estimate (Korthikanti et al. 2022, per layer
    at the input length) does not follow layers whose rows are not the tokens (Funnel's
    pooled stages, Perceiver's latents and output queries); parameters, FLOPs, bytes
    moved and inference memory do (they come from the operators)."""
    sources = {str(s.get(k, "")) for kind in desc["kinds"] for s in kind for k in ("tokens", "q_tokens")}
    if not any(x.startswith(("pool:", "rows:")) for x in sources):
        return ""
    return ("; some layers see fewer or more rows than the input has tokens (pooled stages or a latent array): "
            "training's activation-memory estimate assumes every layer sees the input length")


def warn_train_rows(describer: Any, phase: Any) -> None:
    """Log `rows_note` (when it applies) once per describer, at its first training phase."""
    if phase.name != "train":
        return
    checked = describer.memoized(("rows_note_checked",), lambda: [False])
    if checked[0]:
        return
    checked[0] = True
    note = rows_note(describer.description)
    if note:
        logger.warning("%s: FLOPs and bytes follow each layer's rows%s", describer.description.get("model_type"),
                       note)
