"""The facade's counting conventions: which forward the FLOPs, bytes and times
describe (`operators.records.Conventions`: "transformers" or "serving"), and the
encoder length a cross-attention decoder attends to (`encoder_seq_len`)."""

from __future__ import annotations

import copy
from typing import Optional

from llm_analysis.model import Conventions
from llm_analysis.model.cross_attention import check_encoder_seq_len


class ConventionsMixin:
    """Mixin of `LLMAnalysis`. The views and training count the eager forward
    ("transformers", what FlopCounterMode measures); `inference()` defaults to
    "serving". A `conventions` name given to the constructor sets both; its
    attention_flops / logits / mla_attention, when given, override parts of either."""

    encoder_seq_len: Optional[int] = None  # None: cross-attention work is refused (operators/cross_attention.py)

    def _set_conventions(self, conventions: Optional[str], attention_flops: Optional[str],
                         logits: Optional[str], mla_attention: Optional[str]) -> None:
        self._convention_overrides = dict(attention_flops=attention_flops, logits=logits, mla=mla_attention)
        self.conventions = Conventions.named(conventions or "transformers", **self._convention_overrides)
        self.inference_conventions = Conventions.named(conventions or "serving", **self._convention_overrides)

    def conventions_named(self, name: Optional[str]) -> Conventions:
        """The inference conventions for `name` (None: the constructor's), with its overrides."""
        if name is None:
            return self.inference_conventions
        return Conventions.named(name, **self._convention_overrides)

    def with_conventions(self, conventions: Conventions):
        """This analysis counted under other conventions (a cached shallow copy; every
        view of the copy, FLOPs included, follows them)."""
        cache = self.__dict__.setdefault("_by_conventions", {})
        # (conventions, asked by, view) of the previous call, found by identity without hashing; the
        # asker is part of it because shallow copies of an analysis share this cache
        last = cache.get("last")
        if last is not None and last[0] is conventions and last[1] is self:
            return last[2]
        if conventions == self.conventions:
            cache["last"] = (conventions, self, self)
            return self
        if conventions not in cache:
            cache[conventions] = self._variant(conventions=conventions)
        cache["last"] = (conventions, self, cache[conventions])
        return cache[conventions]

    def with_encoder_seq_len(self, encoder_seq_len: Optional[int]):
        """This analysis with cross-attention over `encoder_seq_len` encoder positions (a
        cached shallow copy; None: this analysis). A model without cross-attention accepts
        only 0 (ConfigError otherwise)."""
        n = check_encoder_seq_len(self.model_config, encoder_seq_len)
        if n is None or n == self.encoder_seq_len or not self.model_config.cross_attention:
            return self  # (0 for a model without cross-attention changes nothing)
        cache = self.__dict__.setdefault("_by_encoder_seq_len", {})
        if n not in cache:
            cache[n] = self._variant(encoder_seq_len=n)
        return cache[n]

    def _variant(self, **fields):
        """A shallow copy with `fields` replaced and its derived state rebuilt; the view
        caches stay with the original (a variant builds its own)."""
        other = copy.copy(self)
        other.__dict__ = {k: v for k, v in self.__dict__.items()
                          if k not in ("_by_conventions", "_by_encoder_seq_len")}
        other.__dict__.update(fields)
        other._reset()
        return other
