"""A refusal reason that names a model's own limit (used by `derive.py`; reads the config).

A config with routed experts and no routing top-k (DeepSeek-V2's default config:
`num_experts_per_tok = None`): transformers itself cannot run it; the refusal says which
key to set. (Experts run densely without a top-k are refused in dense_experts.py.)
"""

from __future__ import annotations

from typing import Any, Optional

from llm_analysis.exact.derive_roles import _TOPK_KEYS, num_experts, top_k


def missing_top_k(cfg: Any) -> Optional[str]:
    """Why a config with routed experts cannot route, or None."""
    experts = num_experts(cfg)
    if not experts or top_k(cfg) is not None:
        return None
    unset = [k for k in _TOPK_KEYS if k in getattr(cfg, "__dict__", {}) and getattr(cfg, k) is None]
    if not unset:
        return None
    return (f"its config has {experts} routed experts but {unset[0]} = None, so no expert routing is defined "
            f"and transformers itself cannot run it; set {unset[0]} to the experts each token uses, a whole number "
            f"from 1 to {experts}")
