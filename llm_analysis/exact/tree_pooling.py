"""Rows and relative attention of a Funnel Transformer's pooled blocks (torch-free).

Funnel Transformer (Dai et al. 2020, arXiv 2006.03236, sec. 2.2 and appendix A.2.1)
pools the hidden states between blocks of layers (stride 2 along the sequence), so
block b's layers see fewer rows than the input has tokens; the decoder upsamples back
to full length. A description (derive_pooling.py) records the options under
`pooling`, and its specs name the pooling stage whose rows they see:

* `tokens: "pool:k"`: a projection, norm or MLP seeing the hidden states after k
  poolings, L_k rows per sequence, with L_0 = the input length and, as transformers'
  `FunnelEncoder` computes it: when L_{k-1} > 2 (separate_cls) or > 1, L_k =
  ceil(L_{k-1} / 2), or ceil((L_{k-1} + 1) / 2) with separate_cls and not
  truncate_seq (the <cls> row is prepended before pooling); otherwise L_k = L_{k-1};
* an attention spec with `pooling` {"block", "q_stage", "kv_stage", "d_model",
  "segments"}: queries of stage q_stage attend to keys of stage kv_stage (the first
  layer of a pooled block pools its queries only when pool_q_only). Its scores add
  Transformer-XL style relative-position terms (Dai et al. 2019, arXiv 1901.02860,
  as Funnel's appendix A.2.1 "relative shift" writes them): the R relative-position
  embeddings are projected per head (2 R d_model H d_head FLOPs, once per call for the
  whole batch), every query is scored against all R of them (2 B H Lq R d_head), and
  against the `segments` token-type embeddings (2 B H Lq segments d_head); R follows
  from the position lists transformers builds (`relative_rows`). With `attention_type`
  "factorized" (appendix A.2.2; `factorized` in the options) the position terms are
  instead the queries projected into d_model sinusoid channels and scored against two
  sinusoid tables of the keys (`_factorized_flops`). Two cases follow
  what transformers computes: over a single key (a stage of one row), scores x values
  is an element-wise product in torch's einsum (no matmul FLOPs); an input too short
  for the relative shift (fewer than keys + shift positions: with separate_cls and
  truncate_seq, 2..2^(blocks-1) tokens) fails in transformers and is refused.

A decode step has no meaning for this encoder-only model (the library generates no
tokens with one); a phase continuing a context is refused here all the same.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from llm_analysis.errors import UnsupportedArchitectureError

_Pos = Tuple[Optional[int], range]  # a position list: an optional leading <cls> position, then a range


def _pool_len(rows: int, opts: Dict[str, Any]) -> int:
    if opts["separate_cls"] and not opts["truncate_seq"]:
        rows += 1  # transformers prepends the <cls> row and keeps the last one
    return -(-rows // 2)


def stage_rows(seq_len: int, stage: int, opts: Dict[str, Any]) -> int:
    """Rows per sequence after `stage` poolings of a `seq_len`-token input (module docstring)."""
    rows = seq_len
    for _ in range(stage):
        if rows > (2 if opts["separate_cls"] else 1):
            rows = _pool_len(rows, opts)
    return rows


def _pooled_pos(pos: _Pos, block: int, opts: Dict[str, Any]) -> _Pos:
    """transformers' `stride_pool_pos`: every second position, the <cls> one kept apart."""
    cls, body = pos
    if not opts["separate_cls"]:
        return None, body[::2]
    if opts["truncate_seq"]:
        rest = body[:-1] if cls is not None else body[1:-1]
    else:
        rest = body if cls is not None else body[1:]
    return 1 - 2 ** block, rest[::2]


def _first(pos: _Pos) -> int:
    return pos[0] if pos[0] is not None else pos[1][0]


def _last(pos: _Pos) -> int:
    return pos[1][-1] if len(pos[1]) else pos[0]


def _count(pos: _Pos) -> int:
    return len(pos[1]) + (pos[0] is not None)


def _relative_count(pos: _Pos, stride: int, pooled: Optional[_Pos] = None, shift: int = 1) -> int:
    """Length of transformers' `relative_pos` arange between `pos` and `pooled`."""
    pooled = pooled or pos
    max_dist = _first(pooled) - _first(pos) + shift * _count(pooled) * stride
    min_dist = _first(pooled) - _last(pos)
    return len(range(max_dist, min_dist - 1, -stride))


def relative_rows(seq_len: int, block: int, shift: int, opts: Dict[str, Any]) -> int:
    """R: relative-position embeddings block `block` uses, for queries pooled against
    unpooled keys (shift 2) or not (shift 1), as `get_position_embeds` builds them."""
    pos: _Pos = (None, range(seq_len))
    rows = {}
    for b in range(block + 1):
        pooled = pos
        if b > 0:
            pooled = _pooled_pos(pos, b, opts)
            rows[2] = _relative_count(pos, 2 ** (b - 1), pooled, shift=2)
        pos = pooled
        rows[1] = _relative_count(pos, 2 ** b)
    if shift not in rows:
        raise UnsupportedArchitectureError(f"block {block}: no relative positions for pooled queries")
    return rows[shift]


def pooled_tokens(desc: Dict[str, Any], phase: Any, source: str) -> int:
    """Rows a `pool:k` spec sees over the phase's sequences."""
    check_phase(desc, phase)
    return phase.batch * stage_rows(phase.q_len, int(source.split(":", 1)[1]), desc["pooling"])


def check_phase(desc: Dict[str, Any], phase: Any) -> None:
    if phase.past_len > 0:
        raise UnsupportedArchitectureError(
            f"{desc.get('model_type')}: pooled encoder blocks (Funnel Transformer) describe a forward over "
            "whole sequences only; a phase continuing a cached context is not described")


def pooled_core_flops(desc: Dict[str, Any], phase: Any, s: Dict[str, Any]) -> Tuple[float, int, int]:
    """(FLOPs, query rows, key rows per sequence) of one pooled relative attention core."""
    check_phase(desc, phase)
    p, opts = s["pooling"], desc["pooling"]
    lq = stage_rows(phase.q_len, p["q_stage"], opts)
    lk = stage_rows(phase.q_len, p["kv_stage"], opts)
    b, h, d = phase.batch, s["heads"], s["d_qk"]
    # scores x values over a single key: torch's einsum multiplies element-wise (no matmul)
    d_v = s["d_v"] if lk > 1 else 0
    common = (2 * b * h * lq * lk * (d + d_v)  # content scores and scores x values
              + 2 * b * h * lq * p["segments"] * d)  # queries against the token-type embeddings
    if opts.get("factorized"):
        return float((common + _factorized_flops(b, h, d, lq, lk, p["d_model"])) * s["calls"]), lq, lk
    shift = 2 if lq != lk else 1
    r = relative_rows(phase.q_len, p["block"], shift, opts)
    if r - shift < lk:
        raise UnsupportedArchitectureError(
            f"{desc.get('model_type')}: an input of {phase.q_len} tokens leaves block {p['block']} with {r} relative "
            f"positions for {lk} keys; transformers' Funnel attention cannot run it (its relative shift needs at "
            f"least keys + {shift}). Use a longer input.")
    flops = (common + 2 * r * p["d_model"] * h * d  # relative-position embeddings projected per head
             + 2 * b * h * lq * r * d)  # queries against every relative position
    return float(flops * s["calls"]), lq, lk


def _factorized_flops(b: int, h: int, d: int, lq: int, lk: int, d_model: int) -> int:
    """The factorized relative attention (appendix A.2.2): every query projected by the
    relative kernel into d_model sinusoid channels (2 B Lq H d_head d_model), then scored
    against the keys' two sinusoid tables psi and omega (2 x 2 B H Lq Lk d_model)."""
    return 2 * b * lq * h * d * d_model + 2 * 2 * b * h * lq * lk * d_model


def pooled_core_op(describer: Any, phase: Any, s: Dict[str, Any]) -> Any:
    """The Operator of a pooled relative attention core (heads split over TP)."""
    from llm_analysis.model import Operator
    from llm_analysis.schema.options import ActivationRecomputation as AR
    flops, lq, lk = pooled_core_flops(describer.description, phase, s)
    heads_gpu = s["heads"] / describer.tp
    b, a = phase.batch, describer.a_bytes
    read = b * heads_gpu * (lq * s["d_qk"] + lk * (s["d_qk"] + s["d_v"])) * a
    return Operator(name=f"{s['name']}.core", group="attention", kind="attention", flops=flops,
                    flops_per_gpu=flops / describer.tp, bytes_read_per_gpu=read,
                    bytes_written_per_gpu=b * lq * heads_gpu * s["d_v"] * a, recompute_class=AR.ATTN_COMPUTE,
                    shapes=f"{heads_gpu:g} heads x {lq} q x {lk} kv (pooled), d={s['d_qk']}/{s['d_v']}, "
                           "relative positions")

