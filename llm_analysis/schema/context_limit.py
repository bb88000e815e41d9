"""Whether a model can encode the positions a request needs, and the RoPE scaling a
config declares.

A learned absolute-position table (GPT-2, OPT, BERT) has one row per position:
a token at a position past the table has no embedding, so the request cannot
run at all and is refused. Rotary (RoPE) and ALiBi encode any position; past
the trained context quality depends on the scaling the config declares
(`ModelConfig.rope_scaling`: Hugging Face's `rope_scaling` / `rope_parameters`, e.g.
Llama 3.1's 'llama3' x8 or Qwen's YaRN x4), so a warning names it.
"""

from __future__ import annotations

import logging
import math
from typing import Annotated, Any, Dict, Optional

from pydantic import AfterValidator

from llm_analysis.errors import ConfigError, warn

logger = logging.getLogger(__name__)

__all__ = ["RopeScaling", "check_context", "check_rope_scaling", "describe_rope_scaling",
           "rope_scaling_from_hf"]

# keys of Hugging Face's rope dicts that are not scaling: the base frequency, the rotated
# fraction of the head, and `type` (the old spelling of `rope_type`)
_NOT_SCALING = ("rope_theta", "partial_rotary_factor", "type")


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
    declared = describe_rope_scaling(getattr(model, "rope_scaling", None))
    warn(logger, "%s = %d exceeds %s's max_seq_len = %d (%s positions; the config %s): quality past the "
                 "trained context is not modelled", what, positions, model.name, max_len,
                 model.position_embedding_type, declared)


# transformers 5.23's ROPE_INIT_FUNCTIONS (modeling_rope_utils.py, Apache-2.0) and 'default', with the spellings its
# configs still convert: 'su' (longrope's old name) and 'mrope' (Qwen2-VL: default RoPE over sections); any other
# name transformers refuses to build (KeyError), so it is refused here too, not read as some scaling
KNOWN_ROPE_TYPES = frozenset(("default", "dynamic", "linear", "llama3", "longrope", "proportional", "yarn", "su",
                              "mrope"))


def rope_scaling_from_hf(value: Any) -> Optional[Dict[str, Any]]:
    """The scaling a Hugging Face `rope_scaling` / `rope_parameters` dict declares, or
    None for plain RoPE (rope_type 'default', or no dict). Per-layer-type dicts (Gemma 3:
    {'full_attention': {...}, 'sliding_attention': {...}}) keep the types that scale."""
    if not isinstance(value, dict) or not value:
        return None
    if all(isinstance(v, dict) for v in value.values()):
        nested = {str(k): s for k, v in value.items() if (s := rope_scaling_from_hf(v)) is not None}
        return nested or None
    rope_type = value.get("rope_type") or value.get("type")
    if rope_type is not None and rope_type not in KNOWN_ROPE_TYPES:
        raise ConfigError(f"rope_scaling rope_type = {rope_type!r} is not a RoPE scaling transformers builds; valid: "
                          f"{', '.join(sorted(KNOWN_ROPE_TYPES))}")
    if rope_type == "default" or (rope_type is None and value.get("factor") is None):
        return None
    out = {str(k): v for k, v in value.items() if k not in _NOT_SCALING}
    if rope_type is not None:
        out["rope_type"] = rope_type
    return out


def describe_rope_scaling(scaling: Optional[Dict[str, Any]]) -> str:
    """'declares rope_scaling llama3 x8 (from 8192 positions)' or 'declares no rope_scaling'."""
    if not scaling:
        return "declares no rope_scaling"
    if all(isinstance(v, dict) for v in scaling.values()):
        return "declares rope_scaling " + "; ".join(f"{k}: {_one(v)}" for k, v in scaling.items())
    return f"declares rope_scaling {_one(scaling)}"


def _one(s: Dict[str, Any]) -> str:
    text = str(s.get("rope_type", "of unstated type"))
    if s.get("factor") is not None:
        text += f" x{s['factor']:g}" if isinstance(s["factor"], (int, float)) else f" x{s['factor']}"
    if s.get("original_max_position_embeddings") is not None:
        text += f" (from {s['original_max_position_embeddings']} positions)"
    return text


def check_rope_scaling(value: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Validator of ModelConfig.rope_scaling: a dict of names to strings, booleans,
    finite numbers or lists of them, or one level of such dicts per layer type."""
    if value is None:
        return None
    for key, v in value.items():
        if isinstance(v, dict):
            if any(isinstance(x, dict) for x in v.values()):
                raise ValueError(f"field 'rope_scaling' nests too deep under {key!r}")
            check_rope_scaling(v)
            continue
        for x in (v if isinstance(v, list) else [v]):
            if not (x is None or isinstance(x, (str, bool, int, float))):
                raise ValueError(f"field 'rope_scaling' entry {key!r} = {v!r}: give strings, booleans or numbers")
            if isinstance(x, float) and not math.isfinite(x):
                raise ValueError(f"field 'rope_scaling' entry {key!r} = {v!r} must be finite")
    return value


# the type of ModelConfig.rope_scaling: None, or a dict `check_rope_scaling` accepts
RopeScaling = Annotated[Optional[Dict[str, Any]], AfterValidator(check_rope_scaling)]
