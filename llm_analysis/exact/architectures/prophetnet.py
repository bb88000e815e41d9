"""ProphetNet's n-stream self-attention decoder (Qi et al. 2020, arXiv 2001.04063).

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
"""

from __future__ import annotations

from typing import Any, Dict, List

from llm_analysis.exact.architectures.family import ClassRule, ModelRule


class _StreamDecoder(ModelRule):
    def __init__(self, positions: int, ngram: int):
        self.positions, self.ngram = positions, ngram  # max_target_positions, predicting streams

    def rows_per_token(self, rows: List[int], tokens: int) -> int:
        """The largest number of rows per token when every call saw a whole, but not always
        the same, number of rows per token (a module run once per stream type); else 0."""
        if not tokens or not rows or any(r % tokens for r in rows):
            return 0
        multiples = {r // tokens for r in rows}
        return max(multiples) if len(multiples) > 1 and min(multiples) >= 1 else 0

    def finish(self, desc: Dict[str, Any]) -> None:
        """The longest input and the refused decode step (module docstring)."""
        positions, limit = self.positions, self.positions - 2
        if not desc.get("max_input_len") or desc["max_input_len"] > limit:
            desc["max_input_len"] = limit
            desc["max_input_reason"] = (
                f"transformers buffers relative-position buckets for {positions - 1} positions "
                f"(max_position_embeddings {positions} - 1) and the predicting streams' buckets hold {limit} of "
                f"them, so it cannot run an input of more than {limit} tokens")
        desc.setdefault("refused_phases", {})["decode"] = (
            f"with a cache, each of the {self.ngram} predicting streams (ProphetNet, arXiv 2001.04063) attends to "
            "the cached main-stream keys plus its own, which the prefill probes did not measure; decode steps are "
            "not described")


def _stream_decoder(lm: Any, cfg: Any, probe: Any, decoder: Any) -> ModelRule:
    positions, ngram = getattr(decoder, "max_target_positions", None), getattr(decoder, "ngram", None)
    if isinstance(positions, int) and isinstance(ngram, int) and ngram > 0:
        return _StreamDecoder(positions, ngram)
    return ModelRule()  # no predicting stream: a plain decoder


RULES = {"ProphetNetDecoder": ClassRule(model=_stream_decoder)}
RECORDS = ()
