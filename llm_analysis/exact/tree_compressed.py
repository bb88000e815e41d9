"""Pairs and cache of compressed attention cores (DeepSeek-V4 CSA / HCA), torch-free.

The `compressed` field of an attention core (derive_compressed.py): one entry per `rate`
tokens emitted so far; the core attends to them besides its window keys (or, `only`, to
them alone: the lightning indexer's scorer); `topk` caps the entries a serving kernel
attends to per query (CSA's selected blocks). Conventions as the other cores:
* eager (transformers): every query multiplies against every entry emitted so far,
  q_len x floor(kv_len / rate), masked afterwards;
* causal (serving kernels): the query at position p sees (p + 1) // rate entries (those
  whole windows before it), at most `topk`.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple


def _causal_sum(n: int, rate: int) -> int:
    """sum over j = 1 .. n of j // rate."""
    q, r = divmod(n, rate)
    return rate * q * (q - 1) // 2 + q * (r + 1)


def _capped_sum(n: int, rate: int, cap: Optional[int]) -> int:
    """sum over j = 1 .. n of min(cap, j // rate)."""
    if cap is None or n < cap * rate:
        return _causal_sum(n, rate)
    below = cap * rate - 1  # j // rate < cap up to here
    return _causal_sum(below, rate) + cap * (n - below)


def compressed_pairs(comp: Dict[str, Any], q_len: int, past_len: int, causal: bool) -> int:
    """(query, entry) pairs of the queries at positions past_len .. past_len + q_len - 1."""
    kv_len = past_len + q_len
    if not causal:
        return q_len * (kv_len // comp["rate"])
    cap = comp.get("topk")
    return _capped_sum(kv_len, comp["rate"], cap) - _capped_sum(past_len, comp["rate"], cap)


def entries(comp: Dict[str, Any], kv_len: int) -> int:
    return kv_len // comp["rate"]


def cache_elems(comp: Dict[str, Any], seq_len: int) -> int:
    """Elements one sequence keeps for the compressed part of a core after seq_len tokens:
    the entries, the tokens not yet pooled (their kv and gate projections) and, once an
    entry exists, the overlap state (CSA)."""
    n = seq_len // comp["rate"]
    return (n * comp["entry_elems"] + (seq_len % comp["rate"]) * comp["buffer_elems"]
            + (comp["overlap_elems"] if n else 0))


def with_compressed(comp: Optional[Dict[str, Any]], window_pairs: int, q_len: int, past_len: int, causal: bool
                    ) -> Tuple[int, int]:
    """(pairs of the core including its compressed entries, entries each sequence reads
    from the cache when the phase continues a context); the window pairs unchanged for a
    core without them, dropped for a core over the entries `only`."""
    if not comp:
        return window_pairs, 0
    pairs = (0 if comp["only"] else window_pairs) + compressed_pairs(comp, q_len, past_len, causal)
    read = entries(comp, past_len + q_len)
    if causal and comp.get("topk"):
        read = min(read, comp["topk"])
    return pairs, (read if past_len > 0 else 0)
