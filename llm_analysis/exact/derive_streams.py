"""N-stream self-attention decoders (ProphetNet, Qi et al. 2020, arXiv 2001.04063).

ProphetNet's decoder runs, next to the main stream of T tokens, `ngram` predicting
streams of T tokens each (sec. 2.2): the layers' projections see (1 + ngram) x T rows
per sequence, and modules that treat the streams separately (the output projection,
the relative-position projection) are called once on the main stream's T rows and once
on the ngram x T predicting rows. Such a module sees a whole number of rows per token on
every call, but not the same number: its matmul FLOPs are a whole number per token per
layer, described as `row_flops` (derive_specs.row_flops_spec) and checked at two lengths.

What the description covers, and what it refuses:
* the longest input: transformers buffers the relative-position buckets of the first
  `max_target_positions` - 1 positions and cuts the predicting streams' buckets from
  its second half, which holds max_target_positions - 2 columns, so an input of more
  than max_target_positions - 2 tokens fails in transformers itself (the "shape
  '[1, 16, 512, -1]' is invalid" of a 512-token input); the analysis refuses it;
* a decode step: with a cache, the predicting streams attend to the cached main-stream
  keys plus their own, which the probes (prefill only) never measured: refused.

Torch-free: reads attributes of live modules.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple


def stream_rows(rows: List[int], tokens: int, streams: bool) -> int:
    """In an n-stream decoder (`streams`), the largest number of rows per token when every
    call saw a whole, but not always the same, number of rows per token (a module run
    once per stream type); else 0."""
    if not streams or not tokens or not rows or any(r % tokens for r in rows):
        return 0
    multiples = {r // tokens for r in rows}
    return max(multiples) if len(multiples) > 1 and min(multiples) >= 1 else 0


def stream_decoder(lm: Any) -> Optional[Tuple[int, int]]:
    """(max_target_positions, ngram) of the model's n-stream decoder module, or None."""
    for _, module in lm.named_modules():
        positions, ngram = getattr(module, "max_target_positions", None), getattr(module, "ngram", None)
        if isinstance(positions, int) and isinstance(ngram, int) and ngram > 0:
            return positions, ngram
    return None


def ngram_stream_limits(desc: Dict[str, Any], lm: Any) -> None:
    """Record in `desc` the longest input and the refused decode step of an n-stream
    decoder (module docstring); nothing for other models."""
    found = stream_decoder(lm)
    if found is None:
        return
    positions, ngram = found
    limit = positions - 2
    if not desc.get("max_input_len") or desc["max_input_len"] > limit:
        desc["max_input_len"] = limit
        desc["max_input_reason"] = (
            f"transformers buffers relative-position buckets for {positions - 1} positions "
            f"(max_position_embeddings {positions} - 1) and the predicting streams' buckets hold {limit} of them, "
            f"so it cannot run an input of more than {limit} tokens")
    desc.setdefault("refused_phases", {})["decode"] = (
        f"with a cache, each of the {ngram} predicting streams (ProphetNet, arXiv 2001.04063) attends to the "
        "cached main-stream keys plus its own, which the prefill probes did not measure; decode steps are not "
        "described")
