"""Llama 4's chunked local attention layers (`chunked_attention` in its layer types).

Llama 4 (Meta's model card, https://github.com/meta-llama/llama-models/blob/main/models/llama4/MODEL_CARD.md;
transformers' `create_chunked_causal_mask`) splits the sequence into chunks of
`attention_chunk_size` tokens in its RoPE layers: a query at position p attends to the
keys of its own chunk up to itself, p mod C + 1 keys. transformers' eager forward
computes the whole score matrix of a prompt and masks it, and its cache keeps the last
C - 1 tokens of such a layer (`DynamicSlidingWindowLayer` with window C), so a decode
step multiplies against min(context, C) keys. The description therefore gives the core
`window` C (eager prefill, decode steps, cached tokens exactly as transformers) and the
`ChunkedLocal` variant, so that the causal (serving-kernel) convention counts the chunked
pairs below instead of a sliding window's.

(Its experts, which transformers runs densely, are read by the generic walk:
exact/dense_experts.py.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from llm_analysis.exact.architectures.family import AttentionVariant, ClassRule


@dataclass(frozen=True)
class ChunkedLocal(AttentionVariant):
    chunk: int  # C, attention_chunk_size

    def _prefix_pairs(self, n: int) -> int:
        """Pairs of the first n positions: sum over p < n of (p mod C) + 1."""
        full, rest = divmod(n, self.chunk)
        return full * self.chunk * (self.chunk + 1) // 2 + rest * (rest + 1) // 2

    def causal_pairs(self, q_len: int, past_len: int, window: Optional[int]) -> int:
        """(query, key) pairs of queries at positions past_len .. past_len + q_len - 1."""
        return self._prefix_pairs(past_len + q_len) - self._prefix_pairs(past_len)


def _chunk_size(cfg: Any, layer_idx: Optional[int]) -> Optional[int]:
    """C when layer `layer_idx` of `cfg` is a chunked-attention layer, else None."""
    types = getattr(cfg, "layer_types", None)
    size = getattr(cfg, "attention_chunk_size", None)
    if layer_idx is None or not isinstance(types, (list, tuple)) or layer_idx >= len(types):
        return None
    if types[layer_idx] != "chunked_attention" or not isinstance(size, int) or size <= 0:
        return None
    return size


def _attention_core(core: Dict[str, Any], module: Any, cfg: Any, layer_index: Optional[int]) -> Dict[str, Any]:
    size = _chunk_size(cfg, layer_index)
    if not size:
        return core
    return dict(core, window=size, variant=ChunkedLocal(size))  # transformers caches C - 1 tokens


RULES = {"Llama4TextAttention": ClassRule(attention_core=_attention_core)}
RECORDS = (ChunkedLocal,)
