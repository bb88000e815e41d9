"""What an `LLMAnalysis` subclass overrides that its results do not read.

The mirrored system built its totals from its own `get_*` methods, so a subclass could change a count by
overriding one (`get_num_params_per_layer_mlp`, say). Here every figure comes from the operator description
(`LayerDescriber`): `inference()`, `training()`, `serve()` and the other `get_*` methods never call an
overridden `get_*` method. A subclass that overrides one therefore changes that method's own answers only;
it is told so when the class is defined, with the way that does reach every figure (docs/custom-architectures.md)."""

from __future__ import annotations

import logging
from llm_analysis.errors import warn

logger = logging.getLogger("llm_analysis")


def warn_unread_overrides(cls, base) -> None:
    """Log one warning naming the mirrored `get_*` methods `cls` (a subclass of `base`, LLMAnalysis) overrides."""
    overridden = sorted(name for name, value in vars(cls).items()
                        if name.startswith("get_") and callable(getattr(base, name, None)) and value is not
                        getattr(base, name))
    if overridden:
        warn(logger, "%s overrides %s: inference(), training(), serve() and the other get_* methods do not call "
                     "it (every figure comes from the operator description), so only its own answers change; to "
                     "change the model, override the operators of a LayerDescriber subclass set as the class's "
                     "describer_class (docs/custom-architectures.md)", cls.__name__, ", ".join(overridden))


__all__ = ["warn_unread_overrides"]
