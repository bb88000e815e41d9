"""Sliding-chunk attention over inputs padded to a window multiple (Longformer).

Longformer (Beltagy et al. 2020, arXiv 2004.05150, sec. 3.1 and its "sliding chunks"
implementation in transformers' `LongformerSelfAttention`) attends each token to a
window of w keys on either side (w = `attention_window / 2`, the module's
`one_sided_attn_window_size`). What transformers computes, and FlopCounterMode counts:

* padding: `LongformerModel._pad_to_window_size` pads every input to a multiple of
  m = max(attention_window) = 2 x the largest w, so the embedding and every layer (all
  projections) run on L = ceil(T / m) x m tokens per sequence; the padding is cut off
  before the LM head, which runs on the T tokens given;
* scores: keys and queries are cut into L/w - 1 overlapping chunks of 2w tokens, and
  each chunk computes a full 2w x 2w score block: 2 x heads x (L/w - 1) x (2w)^2 x d_qk
  FLOPs per sequence (`_sliding_chunks_query_key_matmul`; the same call on the mask has
  a contraction of width 1, an outer product FlopCounterMode does not count);
* values: the probabilities, laid out as L/w chunks of w queries x 3w keys, multiply
  the values: 2 x heads x (L/w) x w x 3w x d_v FLOPs per sequence
  (`_sliding_chunks_matmul_attn_probs_value`).

Global attention (tokens chosen by the caller's `global_attention_mask`) is not part
of the description: a forward without that mask (the masked-LM call this describes)
has none. Longformer is an encoder: it has no decode step, and the analysis treats it
as it treats every encoder (inference/run.py: one forward pass, num_tokens_to_generate
> 1 refused, no decode time); the placeholder step with cached context it still builds
for the decode-activation bound is left unpadded and its core read as the encoders'
eager one (one query against every key, more than the 2w + 1 a chunk holds).
Torch-free: the functions read attributes of live modules or a description.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

from llm_analysis.errors import UnsupportedArchitectureError


def chunk_window(module: Any) -> Optional[int]:
    """w, the one-sided window of a sliding-chunk attention module, or None."""
    w = getattr(module, "one_sided_attn_window_size", None)
    return w if isinstance(w, int) and not isinstance(w, bool) and w > 0 else None


def pad_multiple(lm: Any) -> int:
    """m = 2 x the largest one-sided window over the model's modules (what transformers
    pads every input to), or 0 when no module attends in sliding chunks."""
    windows = [chunk_window(m) for _, m in lm.named_modules()]
    return 2 * max((w for w in windows if w), default=0)


def padded_len(seq_len: int, multiple: int) -> int:
    return -(-seq_len // multiple) * multiple if multiple else seq_len


def is_padded(rows: List[int], batch: int, seq_len: int, multiple: int) -> bool:
    """True when every call saw the padded tokens of every sequence."""
    return bool(multiple) and bool(rows) and all(r == batch * padded_len(seq_len, multiple) for r in rows)


def pad_of(desc: Dict[str, Any]) -> int:
    return int(desc.get("pad_to_multiple") or 0)


def padded_phase(phase: Any, multiple: int) -> Any:
    """The phase the embedding and the layers run: the new tokens padded to a multiple
    of `multiple`; a phase with cached context unchanged (module docstring)."""
    if not multiple or phase.past_len > 0:
        return phase
    q = padded_len(phase.q_len, multiple)
    return replace(phase, q_len=q, kv_len=q)


def chunk_core_spec(core: Dict[str, Any], window: int) -> Dict[str, Any]:
    """The attention-core spec of a sliding-chunk module: no KV cache (an encoder)."""
    return dict(core, chunk_window=int(window), window=None, cache_elems=0, causal=False)


def is_chunked(spec: Dict[str, Any], phase: Any) -> bool:
    """True when `spec` is a sliding-chunk core and `phase` a forward without cache."""
    return bool(spec.get("chunk_window")) and phase.past_len == 0


def chunk_core_flops(spec: Dict[str, Any], phase: Any) -> float:
    """FLOPs of one sliding-chunk attention core over the (padded) phase (module
    docstring): scores of L/w - 1 chunks of 2w x 2w, values of L/w chunks of w x 3w."""
    w, length = spec["chunk_window"], phase.q_len
    if length % (2 * w):
        raise UnsupportedArchitectureError(
            f"{spec['name']}: sliding-chunk attention needs inputs padded to a multiple of {2 * w} tokens; got "
            f"{phase.q_len}")
    chunks = length // w
    scores = 2 * spec["heads"] * (chunks - 1) * (2 * w) ** 2 * spec["d_qk"]
    values = 2 * spec["heads"] * chunks * w * 3 * w * spec["d_v"]
    return float(phase.batch * (scores + values) * spec["calls"])


def position_table(lm: Any) -> Optional[Tuple[int, int]]:
    """(rows, padding_idx) of a RoBERTa-style position table, or None. Positions count
    from padding_idx + 1 (`create_position_ids_from_input_ids`), so it takes inputs of at
    most rows - padding_idx - 1 tokens (padded positions take padding_idx itself)."""
    for name, module in lm.named_modules():
        rows, pad = getattr(module, "num_embeddings", None), getattr(module, "padding_idx", None)
        if name.endswith("position_embeddings") and isinstance(rows, int) and isinstance(pad, int):
            return rows, pad
    return None


def chunked_input_limit(desc: Dict[str, Any], lm: Any) -> None:
    """Record in `desc` the longest input of a padded sliding-chunk model (the position
    table's), with the reason the analysis gives when a phase asks for more."""
    table = position_table(lm) if pad_of(desc) else None
    if table is None:
        return
    rows, pad = table
    limit = rows - pad - 1
    if desc.get("max_input_len") and desc["max_input_len"] <= limit:
        return
    desc["max_input_len"] = limit
    desc["max_input_reason"] = (
        f"its position table ({rows} rows, positions counted from padding_idx + 1 = {pad + 1}) holds at most "
        f"{limit} tokens per input; transformers cannot run a longer one")
