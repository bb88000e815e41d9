"""Which forward an analysis counts (`records.Conventions`: "transformers" or "serving"),
and the analyses it derives under other conventions or encoder lengths.

The views and training count the eager forward ("transformers", what FlopCounterMode
measures); `inference()` defaults to "serving". A `conventions` name given to the
constructor sets both; its attention_flops / logits / mla_attention, when given,
override parts of either (`ConventionChoice`). `with_conventions` / `with_encoder_seq_len`
return shallow copies of the analysis, made once each and kept in its `Variants`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

from llm_analysis.model.cross_attention import check_encoder_seq_len
from llm_analysis.model.records import Conventions


@dataclass(frozen=True)
class ConventionChoice:
    """The constructor's convention arguments, resolved once: `counted` is what the views
    and training count, `inference` what inference() counts unless a call names others."""

    attention_flops: Optional[str]
    logits: Optional[str]
    mla: Optional[str]
    counted: Conventions
    inference: Conventions

    @classmethod
    def from_arguments(cls, conventions: Optional[str], attention_flops: Optional[str], logits: Optional[str],
                       mla_attention: Optional[str]) -> "ConventionChoice":
        parts = dict(attention_flops=attention_flops, logits=logits, mla=mla_attention)
        return cls(counted=Conventions.named(conventions or "transformers", **parts),
                   inference=Conventions.named(conventions or "serving", **parts), **parts)

    def for_inference(self, name: Optional[str]) -> Conventions:
        """The inference conventions for `name` (None: the constructor's), with the overridden parts."""
        if name is None:
            return self.inference  # the same object each call: Variants finds it by identity
        return Conventions.named(name, attention_flops=self.attention_flops, logits=self.logits, mla=self.mla)


Make = Callable[..., Any]  # make(**fields): a copy of the analysis with `fields` replaced, its derived state rebuilt


@dataclass(eq=False)  # (compared and hashed by identity, as the analyses holding it)
class Variants:
    """The analyses one analysis derives (shallow copies made by the analysis' `make`, one
    per conventions or encoder length), kept until its configuration changes. Views of the
    analysis that copy its attributes (cost/choice.py `with_cost_model`) share this cache."""

    by_conventions: Dict[Conventions, Any] = field(default_factory=dict)
    by_encoder_seq_len: Dict[int, Any] = field(default_factory=dict)
    # (conventions, asked by, variant) of the previous call, found by identity without hashing; the
    # asker is part of it because the views sharing this cache each answer for themselves
    last: Optional[Tuple[Conventions, Any, Any]] = None

    def under_conventions(self, analysis, conventions: Conventions, make: Make):
        """`analysis` counted under `conventions` (itself when it already counts them)."""
        last = self.last
        if last is not None and last[0] is conventions and last[1] is analysis:
            return last[2]
        if conventions == analysis.conventions:
            variant = analysis
        else:
            variant = self.by_conventions.get(conventions)
            if variant is None:
                variant = self.by_conventions[conventions] = make(conventions=conventions)
        self.last = (conventions, analysis, variant)
        return variant

    def with_encoder_seq_len(self, analysis, encoder_seq_len: Optional[int], make: Make):
        """`analysis` with cross-attention over `encoder_seq_len` encoder positions (None, the
        current length, or 0 for a model without cross-attention: `analysis` itself; any other
        length for such a model is a ConfigError)."""
        n = check_encoder_seq_len(analysis.model_config, encoder_seq_len)
        if n is None or n == analysis.encoder_seq_len or not analysis.model_config.cross_attention:
            return analysis
        if n not in self.by_encoder_seq_len:
            self.by_encoder_seq_len[n] = make(encoder_seq_len=n)
        return self.by_encoder_seq_len[n]
