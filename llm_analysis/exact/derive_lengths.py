"""Models whose forward takes another code path above some input length (torch-free).

BigBird (Zaheer et al. 2020, arXiv 2007.14062) computes block-sparse attention only for
inputs longer than (5 + 2 x num_random_blocks) x block_size tokens (704 by default);
shorter ones switch the model to full attention for good. Block-sparse attention pads
to whole blocks and gathers random blocks, which no operator carries; so the
full-attention path is described (`attention_type="original_full"`, same parameters)
with the longest input it runs: longer forwards are refused (`check_input_len`), and
decode steps (one token: full attention over the cache) are described.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, Optional, Tuple

from llm_analysis.errors import UnsupportedArchitectureError


def _get(cfg: Any, key: str) -> Any:
    return cfg.get(key) if isinstance(cfg, dict) else getattr(cfg, key, None)


def full_attention_path(hf_config: Any) -> Tuple[Any, Optional[int]]:
    """(config of the code path to describe, longest input it runs or None when the
    model has one path for every length)."""
    block, rand = _get(hf_config, "block_size"), _get(hf_config, "num_random_blocks")
    if _get(hf_config, "attention_type") != "block_sparse" or not isinstance(block, int) \
            or not isinstance(rand, int):
        return hf_config, None
    cfg = copy.deepcopy(hf_config)
    if isinstance(cfg, dict):
        cfg["attention_type"] = "original_full"
    else:
        cfg.attention_type = "original_full"
    return cfg, (5 + 2 * rand) * block


def check_input_len(desc: Dict[str, Any], new_tokens: int) -> None:
    """UnsupportedArchitectureError when a forward over `new_tokens` new tokens per
    sequence would take a code path the description does not carry."""
    limit = desc.get("max_input_len")
    if limit and new_tokens > limit:
        if desc.get("max_input_reason"):  # a limit a family recorded (architectures/: Longformer, ProphetNet)
            raise UnsupportedArchitectureError(
                f"{desc.get('model_type')}: an input of {new_tokens} tokens is not described: "
                f"{desc['max_input_reason']}. Use seq_len <= {limit}.")
        raise UnsupportedArchitectureError(
            f"{desc.get('model_type')}: an input of {new_tokens} tokens runs block-sparse attention in "
            f"transformers (inputs above {limit} tokens = (5 + 2 x num_random_blocks) x block_size, padded to "
            f"whole blocks, with random blocks), which is not described; the description covers inputs of at "
            f"most {limit} tokens (full attention) and decode steps. Use seq_len <= {limit}.")


def check_score_width(core: Dict[str, Any], phase: Any) -> None:
    """UnsupportedArchitectureError for a forward with cached context (a decode step)
    through an attention core whose scores have extra terms (`score_width`, XLNet's
    relative positions: derive_sites.attention_sites): verified for a forward without
    cache only (prefill, training), where the relative positions are 2 x the tokens."""
    if core.get("score_width") is not None and phase.past_len > 0:
        raise UnsupportedArchitectureError(
            f"{core['name']}: its attention scores include relative-position terms (score width "
            f"{core['score_width']} per query-key pair instead of {core['d_qk']}), verified for a forward "
            "without cache (prefill, training) only; a decode step with cached context is not described")
