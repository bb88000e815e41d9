"""Refusal reasons that name a model's own limits (used by `derive.py`; reads the live
modules and config, imports nothing heavy).

* A config with routed experts and no routing top-k (DeepSeek-V2's default config:
  `num_experts_per_tok = None`): transformers itself cannot run it; the refusal says
  which key to set.
* Experts run densely (Llama 4's `Llama4TextMoe`: every token goes through all E
  experts, each output scaled by its router score, zero outside the top-k) with no
  routing top-k in the config: nothing says which routed computation the model stands
  for. With a top-k, the description states the routed FLOPs and the verification
  reconciles them with transformers' dense count (derive_dense_experts.py).
"""

from __future__ import annotations

from typing import Any, List, Optional

from llm_analysis.exact.derive_roles import _TOPK_KEYS, num_experts, rows_per_token, top_k


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


def dense_experts(module: Any, rows: List[int], tokens: int) -> Optional[int]:
    """E when a fused experts module ([E, ...] weights) sees E rows per token: every
    token through every expert."""
    counts = {int(p.shape[0]) for p in module.parameters(recurse=False) if p.dim() == 3}
    per_token = rows_per_token(rows, tokens)
    return per_token if len(counts) == 1 and per_token > 1 and per_token in counts else None


def dense_experts_reason(path: str, cls: str, experts: int, k: Optional[int]) -> str:
    """Why a densely run experts module without a routing top-k is refused (with one it
    is described as routed: derive_dense_experts.py)."""
    return (f"{path} ({cls}) runs every token through all {experts} experts, each output scaled by its "
            "router score, but the config sets no routing top-k: the routed computation the model stands "
            f"for is undefined (transformers computes all {experts} experts per token); set the number of "
            "experts each token uses (num_experts_per_tok)")
