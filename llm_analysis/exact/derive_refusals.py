"""Refusal reasons that name a model's own limits (used by `derive.py`; reads the live
modules and config, imports nothing heavy).

* A config with routed experts and no routing top-k (DeepSeek-V2's default config:
  `num_experts_per_tok = None`): transformers itself cannot run it; the refusal says
  which key to set.
* Experts run densely (Llama 4's `Llama4TextMoe`: every token goes through all E
  experts, each output scaled by its router score, zero outside the top-k): the
  model's output depends on top-k routing while transformers computes E/k times the
  expert FLOPs. The description would have to state one of the two as "what the
  model computes"; the exact path refuses instead, naming both.
"""

from __future__ import annotations

from typing import Any, List, Optional

from .derive_roles import _TOPK_KEYS, num_experts, rows_per_token, top_k


def missing_top_k(cfg: Any) -> Optional[str]:
    """Why a config with routed experts cannot route, or None."""
    experts = num_experts(cfg)
    if not experts or top_k(cfg) is not None:
        return None
    unset = [k for k in _TOPK_KEYS if k in getattr(cfg, "__dict__", {}) and getattr(cfg, k) is None]
    if not unset:
        return None
    return (f"its config has {experts} routed experts but {unset[0]} = None, so no expert routing is defined "
            f"and transformers itself cannot run it; set {unset[0]} (the experts each token uses)")


def dense_experts(module: Any, rows: List[int], tokens: int) -> Optional[int]:
    """E when a fused experts module ([E, ...] weights) sees E rows per token: every
    token through every expert."""
    counts = {int(p.shape[0]) for p in module.parameters(recurse=False) if p.dim() == 3}
    per_token = rows_per_token(rows, tokens)
    return per_token if len(counts) == 1 and per_token > 1 and per_token in counts else None


def dense_experts_reason(path: str, cls: str, experts: int, k: Optional[int]) -> str:
    routed = f"top-{k}" if k else "top-k"
    ratio = f" = {experts / k:g}" if k else ""
    return (f"{path} ({cls}) runs every token through all {experts} experts, each output scaled by its "
            f"router score (zero outside the {routed}): the output depends on {routed} routing, but "
            f"transformers computes E/k{ratio} times those expert FLOPs (what FlopCounterMode counts). "
            "The exact path would have to describe one of the two as what the model computes; it refuses "
            "rather than choose")
