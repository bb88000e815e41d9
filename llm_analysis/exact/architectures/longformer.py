"""Longformer: sliding-chunk attention over inputs padded to a window multiple.

Longformer (Beltagy et al. 2020, arXiv 2004.05150, sec. 3.1 and its "sliding chunks"
implementation in transformers' `LongformerSelfAttention`) attends each token to a
window of w keys on either side (w = `attention_window / 2`, the module's
`one_sided_attn_window_size`). What transformers computes, and FlopCounterMode counts:

* padding: `LongformerModel._pad_to_window_size` pads every input to a multiple of
  m = max(attention_window) = 2 x the largest w, so the embedding and every layer (all
  projections) run on L = ceil(T / m) x m tokens per sequence (the description's
  `pad_to_multiple`: layer_phase.padded_phase); the padding is cut off before the LM head,
  which runs on the T tokens given;
* scores: keys and queries are cut into L/w - 1 overlapping chunks of 2w tokens, and
  each chunk computes a full 2w x 2w score block: 2 x heads x (L/w - 1) x (2w)^2 x d_qk
  FLOPs per sequence (`_sliding_chunks_query_key_matmul`; the same call on the mask has
  a contraction of width 1, an outer product FlopCounterMode does not count);
* values: the probabilities, laid out as L/w chunks of w queries x 3w keys, multiply
  the values: 2 x heads x (L/w) x w x 3w x d_v FLOPs per sequence
  (`_sliding_chunks_matmul_attn_probs_value`).

Global attention (the caller's `global_attention_mask`) is not described: the
masked-LM call has none. As an encoder it has no decode step (inference/run.py); the
placeholder step with cached context built for the decode-activation bound is left
unpadded, its core read as the encoders' eager one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from llm_analysis.errors import UnsupportedArchitectureError
from llm_analysis.exact.architectures.family import AttentionVariant, ClassRule, ModelRule
from llm_analysis.exact.layer_phase import is_padded


@dataclass(frozen=True)
class SlidingChunks(AttentionVariant):
    """The attention core of a sliding-chunk module (one-sided window w); no KV cache."""

    one_sided_window: int
    fits_remainder = False  # its FLOPs are the chunks', never the eager core's

    def core_flops(self, spec: Dict[str, Any], phase: Any) -> Optional[float]:
        """FLOPs over the (padded) phase without cache (module docstring): scores of L/w - 1
        chunks of 2w x 2w, values of L/w chunks of w x 3w."""
        if phase.past_len > 0:
            return None
        w, length = self.one_sided_window, phase.q_len
        if length % (2 * w):
            raise UnsupportedArchitectureError(
                f"{spec['name']}: sliding-chunk attention needs inputs padded to a multiple of {2 * w} tokens; got "
                f"{phase.q_len}")
        chunks = length // w
        scores = 2 * spec["heads"] * (chunks - 1) * (2 * w) ** 2 * spec["d_qk"]
        values = 2 * spec["heads"] * chunks * w * 3 * w * spec["d_v"]
        return float(phase.batch * (scores + values) * spec["calls"])


def _window(module: Any) -> Optional[int]:
    """w, the one-sided window of a sliding-chunk attention module, or None."""
    w = getattr(module, "one_sided_attn_window_size", None)
    return w if isinstance(w, int) and not isinstance(w, bool) and w > 0 else None


def _attention_core(core: Dict[str, Any], module: Any, cfg: Any, layer_index: Optional[int]) -> Dict[str, Any]:
    w = _window(module)
    if not w:
        return core
    return dict(core, variant=SlidingChunks(int(w)), window=None, cache_elems=0, causal=False)


def _position_table(lm: Any) -> Optional[Tuple[int, int]]:
    """(rows, padding_idx) of a RoBERTa-style position table, or None. Positions count
    from padding_idx + 1 (`create_position_ids_from_input_ids`), so it takes inputs of at
    most rows - padding_idx - 1 tokens (padded positions take padding_idx itself)."""
    for name, module in lm.named_modules():
        rows, pad = getattr(module, "num_embeddings", None), getattr(module, "padding_idx", None)
        if name.endswith("position_embeddings") and isinstance(rows, int) and isinstance(pad, int):
            return rows, pad
    return None


class _PaddedModel(ModelRule):
    def __init__(self, lm: Any, cfg: Any, probe: Any, module: Any):
        self.lm = lm
        # m = 2 x the largest one-sided window over the model's modules: what transformers pads every input to
        windows = [_window(m) for _, m in lm.named_modules()]
        self.multiple = 2 * max((w for w in windows if w), default=0)

    def reads_every_token(self, rows: List[int], batch: int, seq_len: int) -> bool:
        return is_padded(rows, batch, seq_len, self.multiple)

    def description_fields(self) -> Dict[str, Any]:
        return {"pad_to_multiple": self.multiple} if self.multiple else {}

    def finish(self, desc: Dict[str, Any]) -> None:
        """The longest input (the position table's), with the reason the analysis gives when
        a phase asks for more."""
        table = _position_table(self.lm) if self.multiple else None
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


RULES = {"LongformerSelfAttention": ClassRule(attention_core=_attention_core, model=_PaddedModel)}
RECORDS = (SlidingChunks,)
