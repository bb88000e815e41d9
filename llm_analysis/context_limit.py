"""Whether a model can encode the positions a request needs.

A learned absolute-position table (GPT-2, OPT, BERT) has one row per position:
a token at a position past the table has no embedding, so the request cannot
run at all and is refused. Rotary (RoPE) and ALiBi encode any position; past
the trained context quality depends on the scaling the config declares
(`rope_scaling`, e.g. YaRN or Llama-3 scaling), so a warning names it.
"""

from __future__ import annotations

import logging

from .errors import ConfigError

logger = logging.getLogger(__name__)


def check_context(model, positions: int, what: str) -> None:
    """Refuse (learned positions) or warn (RoPE/ALiBi) when `positions` exceed
    the model's max_seq_len. `what` says how `positions` was counted."""
    max_len = model.max_seq_len
    if max_len is None or positions <= max_len:
        return
    if model.position_embedding_type == "learned":
        table = model.num_position_embeddings or max_len
        raise ConfigError(
            f"{what} = {positions} exceeds {model.name}'s max_seq_len = {max_len}: it has learned absolute "
            f"positions ({table} rows) and cannot encode position {positions}; use at most {max_len} tokens")
    scaling = getattr(model, "rope_scaling", None)
    declared = f"declares rope_scaling = {scaling}" if scaling else "declares no rope_scaling"
    logger.warning("%s = %d exceeds %s's max_seq_len = %d (%s positions; the config %s): quality past the "
                   "trained context is not modelled", what, positions, model.name, max_len,
                   model.position_embedding_type, declared)
