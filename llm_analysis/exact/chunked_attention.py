"""Chunked local attention (Llama 4's `chunked_attention` layers), torch-free.

Llama 4 (Meta's model card, https://github.com/meta-llama/llama-models/blob/main/models/llama4/MODEL_CARD.md;
transformers' `create_chunked_causal_mask`) splits the sequence into chunks of
`attention_chunk_size` tokens in its RoPE layers: a query at position p attends to the
keys of its own chunk up to itself, p mod C + 1 keys. transformers' eager forward
computes the whole score matrix of a prompt and masks it, and its cache keeps the last
C - 1 tokens of such a layer (`DynamicSlidingWindowLayer` with window C), so a decode
step multiplies against min(context, C) keys. The description therefore gives the core
`window` C (eager prefill, decode steps, cached tokens exactly as transformers) and
marks it `chunked`, so that the causal (serving-kernel) convention counts the chunked
pairs below instead of a sliding window's.
"""

from __future__ import annotations

from typing import Any, Optional


def chunk_size(cfg: Any, layer_idx: Optional[int]) -> Optional[int]:
    """C when layer `layer_idx` of `cfg` is a chunked-attention layer, else None."""
    types = getattr(cfg, "layer_types", None)
    size = getattr(cfg, "attention_chunk_size", None)
    if layer_idx is None or not isinstance(types, (list, tuple)) or layer_idx >= len(types):
        return None
    if types[layer_idx] != "chunked_attention" or not isinstance(size, int) or size <= 0:
        return None
    return size


def _prefix_pairs(n: int, chunk: int) -> int:
    """Pairs of the first n positions: sum over p < n of (p mod C) + 1."""
    full, rest = divmod(n, chunk)
    return full * chunk * (chunk + 1) // 2 + rest * (rest + 1) // 2


def chunked_pairs(q_len: int, past_len: int, chunk: int) -> int:
    """(query, key) pairs of queries at positions past_len .. past_len + q_len - 1."""
    return _prefix_pairs(past_len + q_len, chunk) - _prefix_pairs(past_len, chunk)
