"""Roles of the modules of a transformers model, read from its module tree and config.

Used by `derive.py` (needs the live modules, hence torch, but imports nothing
itself). Each parameter-owning module becomes one operator spec (a JSON-able dict):

    {"name": path inside its layer (or model), "op": linear | experts | conv | norm |
     embedding | param, "params": new parameters (0 when tied to an earlier one),
     "in", "out", "bias", "copies", "tokens": all | batch | routed | none,
     "calls": runs per forward, "group": attention | mlp | experts | router | norm |
     embedding | lm_head | other, "expert_role": routed | shared | None,
     "tp": column | row | replicated | vocab | unknown}

How a module is read: by its class (Embedding, *Norm*, Conv1d, a 2-D `weight`
used as a projection, 3-D parameters of fused experts) and its place in the tree
(under an attention module, an `experts` list, a `shared` expert). The heuristics
are only proposals: `derive.py` checks every spec against the parameters and
FlopCounterMode's per-module FLOPs and refuses what does not match.
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Optional

_ATTN_PATH = re.compile(r"attn|attention", re.IGNORECASE)
_EXPERT_LIST = re.compile(r"(^|\.)experts?\.(\d+)(\.|$)")
_DOWN_NAME = re.compile(r"down|(^|_)w2|fc2|(^|_)wo($|_)|out", re.IGNORECASE)
_TOPK_KEYS = ("num_experts_per_tok", "num_experts_per_token", "moe_top_k", "moe_topk", "top_k", "moe_k",
              "num_selected_experts", "experts_per_token", "router_top_k", "topk", "moe_router_topk",
              "num_activated_experts", "n_activated_experts")
_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", "num_routed_experts")


def config_int(cfg: Any, keys, default: Optional[int] = None) -> Optional[int]:
    for k in keys:
        try:
            v = getattr(cfg, k, None)
        except Exception:  # noqa: BLE001 - per-layer attributes refuse global access (dots3)
            v = None
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return default


def top_k(cfg: Any) -> Optional[int]:
    return config_int(cfg, _TOPK_KEYS)


def num_experts(cfg: Any) -> Optional[int]:
    return config_int(cfg, _EXPERT_KEYS)


def is_norm(module: Any) -> bool:
    name = type(module).__name__.lower()
    return "norm" in name and "embedding" not in name


def is_embedding(module: Any) -> bool:
    return "embedding" in type(module).__name__.lower() and getattr(module, "weight", None) is not None \
        and module.weight.dim() == 2


def is_conv1d(module: Any) -> bool:
    import torch
    return isinstance(module, torch.nn.Conv1d)


def linear_shape(module: Any, weight: Any) -> Optional[tuple]:
    """(in, out) of a projection-like module with a 2-D weight, else None."""
    if weight is None or weight.dim() != 2:
        return None
    if hasattr(module, "in_features") and hasattr(module, "out_features"):
        return int(module.in_features), int(module.out_features)
    from transformers.pytorch_utils import Conv1D
    if isinstance(module, Conv1D):  # GPT-2 style: weight is [in, out]
        return int(weight.shape[0]), int(weight.shape[1])
    return int(weight.shape[1]), int(weight.shape[0])  # F.linear convention: [out, in]


def expert_shape(name: str, shape, hidden: int, last: bool) -> tuple:
    """(in, out) of one expert of a fused [E, a, b] weight: the first projection
    reads the hidden state, the last (down) one writes it."""
    a, b = int(shape[1]), int(shape[2])
    if _DOWN_NAME.search(name) or last:
        return (b, a) if a == hidden else (a, b)
    return (b, a) if b == hidden else (a, b)


def token_source(rows: List[int], batch: int, seq_len: int) -> str:
    """all | batch | none | unknown for the rows a module saw on each call."""
    if not rows:
        return "none"
    if all(r == batch * seq_len for r in rows):
        return "all"
    if all(r == batch for r in rows):
        return "batch"
    return "unknown"


def rows_per_token(rows: List[int], tokens: int) -> int:
    """m when every call saw m rows per token (m a whole number), else 0."""
    multiples = {r // tokens if tokens and r % tokens == 0 else 0 for r in rows}
    return multiples.pop() if len(multiples) == 1 else 0


def block_group(path: str, attention_sites: List[str]) -> str:
    """attention | mlp for a projection inside a layer (experts/router/norm decided elsewhere)."""
    if any(path == s or path.startswith(s + ".") for s in attention_sites):
        return "attention"
    return "attention" if _ATTN_PATH.search(path) else "mlp"


def expert_role(path: str) -> Optional[str]:
    if "shared" in path.lower():
        return "shared"
    if _EXPERT_LIST.search(path) or re.search(r"(^|\.)experts(\.|$)", path):
        return "routed"
    return None


def fold_expert_index(path: str) -> str:
    return _EXPERT_LIST.sub(lambda m: f"{m.group(1)}experts.#{m.group(3)}", path)


def assign_tp_roles(specs: List[Dict[str, Any]], hidden: int, heads: Optional[Dict[str, int]]) -> None:
    """Column/row-parallel roles of a layer's projections (Megatron layout): in
    attention, projections from the hidden state to whole heads are column-parallel
    and the last one back to the hidden state row-parallel; in an MLP (or expert),
    projections from the hidden state are column-, those back to it row-parallel.
    Routers and 1-wide gates are replicated; anything else is `unknown` (refused
    when tp_size > 1)."""
    by_block: Dict[str, List[Dict[str, Any]]] = {}
    for s in specs:
        if s["op"] in ("linear", "experts"):
            by_block.setdefault(s["group"] + str(s.get("expert_role")), []).append(s)
    for block in by_block.values():
        last_to_hidden = max((i for i, s in enumerate(block) if s["out"] == hidden), default=None)
        for i, s in enumerate(block):
            s["tp"] = _tp_role(s, hidden, heads, i == last_to_hidden)


def _tp_role(s: Dict[str, Any], hidden: int, heads: Optional[Dict[str, int]], last_to_hidden: bool) -> str:
    if s["group"] == "router" or s["out"] == 1:
        return "replicated"
    if last_to_hidden:
        return "row"
    if s["in"] != hidden:
        return "unknown"
    if s["group"] != "attention":
        return "column"
    if heads and heads["d_qk"]:
        h, kv, d = heads["heads"], heads["kv_heads"], heads["d_qk"]
        whole = {h, kv, h + 2 * kv, 2 * kv, h + kv}
        if s["out"] % d == 0 and s["out"] // d in whole:
            return "column"
    return "unknown"


def numel(shape) -> int:
    return int(math.prod(shape)) if len(shape) else 1
