"""The phase a view is asked about, from the user's arguments."""

from __future__ import annotations

from typing import Optional

from llm_analysis.errors import ConfigError
from llm_analysis.model import Phase
from llm_analysis.quantities.arguments import count

ONE_TOKEN = Phase("prefill", 1, 1, 1, shapes_only=True)  # shapes do not matter for parameter and weight views


def make_phase(phase: str, batch_size: int, seq_len: int, context_len: Optional[int] = None) -> Phase:
    batch_size = count(batch_size, "batch_size")
    seq_len = count(seq_len, "seq_len")
    if context_len is not None:  # (checked for every phase: a prefill ignores it, a slip is still refused)
        context_len = count(context_len, "context_len")
    if phase in ("prefill", "train"):
        return Phase(phase, batch_size, seq_len, seq_len)
    if phase == "decode":
        c = seq_len + 1 if context_len is None else context_len
        return Phase("decode", batch_size, 1, c)
    raise ConfigError(f"phase = {phase!r}; valid: 'prefill', 'decode', 'train'")


def layer_mean(a, ph: Phase, per_kind) -> float:
    """Mean over the model's layers of `per_kind(layer operators)`."""
    d = a.describer
    total = 0.0
    for kind, n in d.layer_groups.items():
        total += n * per_kind(d.layer_ops(ph, kind))
    return total / a.model_config.num_layers


def as_count(x: float):
    return int(x) if float(x).is_integer() else x
