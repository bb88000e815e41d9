"""Operator specs of the modules of a transformers model, read from its module tree and config.

Used by `derive.py` (needs the live modules, hence torch, imported inside functions).
Each parameter-owning module becomes one operator spec (a JSON-able dict):

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
FlopCounterMode's per-module FLOPs and refuses what does not match. An attention
core's spec (`attention_spec`) gets its family's variant from the walk
(architectures.attention_core).
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Optional, Set

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


def missing_top_k(cfg: Any) -> Optional[str]:
    """Why a config with routed experts cannot route (DeepSeek-V2's default config:
    `num_experts_per_tok = None`, which transformers itself cannot run), or None."""
    experts = num_experts(cfg)
    if not experts or top_k(cfg) is not None:
        return None
    unset = [k for k in _TOPK_KEYS if k in getattr(cfg, "__dict__", {}) and getattr(cfg, k) is None]
    if not unset:
        return None
    return (f"its config has {experts} routed experts but {unset[0]} = None, so no expert routing is defined "
            f"and transformers itself cannot run it; set {unset[0]} to the experts each token uses, a whole number "
            f"from 1 to {experts}")


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


def new_params(module: Any, seen: Set[int]) -> Dict[str, int]:
    """{parameter name: numel} of the module's own parameters, 0 for one already
    owned by an earlier module (a tied weight counts once, as named_parameters does)."""
    out = {}
    for name, p in module.named_parameters(recurse=False):
        out[name] = 0 if id(p) in seen else numel(p.shape)
        seen.add(id(p))
    return out


def base_spec(name: str, op: str, params: int, tokens: str, calls: int, group: str) -> Dict[str, Any]:
    """A spec with every field at its default (no width, no bias, one copy, replicated)."""
    return {"name": name, "op": op, "params": int(params), "tokens": tokens, "calls": int(calls),
            "group": group, "in": 0, "out": 0, "bias": False, "copies": 1, "expert_role": None,
            "tp": "replicated"}


def module_specs(name: str, module: Any, fresh: Dict[str, int], tokens: str, calls: int,
                 ctx: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Specs of one module owning parameters. `ctx`: hidden, vocab, experts (E or None),
    group_of(name) -> attention | mlp."""
    total = sum(fresh.values())
    weight = getattr(module, "weight", None)
    if tokens == "unknown" and not _computes(module):
        tokens = "all"  # a lookup or norm over per-head rows: bytes only, no FLOPs to count
    if is_embedding(module):
        s = base_spec(name, "embedding", total, tokens, calls, "embedding")
        s["in"], s["out"] = int(weight.shape[0]), int(weight.shape[1])  # rows, width
        s["tp"] = "vocab" if s["in"] == ctx["vocab"] else "replicated"
        return [s]
    params = dict(module.named_parameters(recurse=False))
    if is_norm(module) or (all(p.dim() <= 1 for p in params.values()) and "weight" in params
                           and params["weight"].dim() == 1):
        s = base_spec(name, "norm", total, tokens, calls, "norm")
        s["in"] = s["out"] = numel(params["weight"].shape) if "weight" in params else 0
        s["bias"] = "bias" in params
        return [s]
    if is_conv1d(module):
        s = base_spec(name, "conv", total, tokens, calls, ctx["group_of"](name))
        s.update({"in": int(module.in_channels), "out": int(module.out_channels), "bias": module.bias is not None,
                  "kernel": int(module.kernel_size[0]), "conv_groups": int(module.groups),
                  "padding": int(module.padding[0]) if isinstance(module.padding, tuple) else 0})
        return [s]
    grouped = grouped_linear_spec(name, params, total, tokens, calls,
                                  bool(ctx["experts"]) or expert_role(name) is not None, ctx["group_of"](name))
    if grouped is not None:
        return [grouped]
    if any(p.dim() == 3 for p in params.values()) and (ctx["experts"] or ctx.get("top_k")
                                                       or expert_role(name) is not None):
        return _fused_expert_specs(name, params, fresh, tokens, calls, ctx)
    shape = linear_shape(module, weight) if "weight" in params else None
    if shape is None:
        return [base_spec(name, "param", total, tokens, calls, ctx["group_of"](name))]
    return [_linear_spec(name, shape, "bias" in params, total, tokens, calls, ctx)]


def _computes(module: Any) -> bool:
    return not (is_embedding(module) or is_norm(module)) and any(
        p.dim() >= 2 for p in module.parameters(recurse=False))


def _linear_spec(name: str, shape, bias: bool, total: int, tokens: str, calls: int,
                 ctx: Dict[str, Any]) -> Dict[str, Any]:
    role = expert_role(name)
    if role is not None:
        group = "experts"
    elif ctx["experts"] and shape[1] == ctx["experts"] and shape[0] == ctx["hidden"]:
        group = "router"
    else:
        group = ctx["group_of"](name)
    s = base_spec(name, "linear", total, tokens, calls, group)
    s.update({"in": shape[0], "out": shape[1], "bias": bias, "expert_role": role})
    if role == "routed":
        s["tokens"] = "routed"
    return s


def _fused_expert_specs(name: str, params: Dict[str, Any], fresh: Dict[str, int], tokens: str, calls: int,
                        ctx: Dict[str, Any]) -> List[Dict[str, Any]]:
    """One spec per 3-D weight [E, a, b] of a fused experts module (its [E, out] bias
    folded in); any other parameter is a plain `param` spec."""
    weights = [n for n, p in params.items() if p.dim() == 3]
    specs, used = [], set()
    for i, wname in enumerate(weights):
        p = params[wname]
        d_in, d_out = expert_shape(wname, p.shape, ctx["hidden"], i == len(weights) - 1)
        bias = next((b for b in (f"{wname}_bias", f"{wname}.bias") if b in params and params[b].dim() == 2), None)
        total = fresh[wname] + (fresh[bias] if bias else 0)
        used.update({wname, bias})
        role = "shared" if "shared" in name.lower() else "routed"
        # shared experts stacked in one tensor (Inkling's [n_shared, ...] bmm): every token
        # runs through every copy, as through one wider MLP
        s = base_spec(f"{name}.{wname}", "experts", total, "routed" if tokens == "all" and role == "routed" else tokens,
                  calls, "experts")
        s.update({"in": d_in, "out": d_out, "bias": bias is not None, "copies": int(p.shape[0]), "expert_role": role})
        specs.append(s)
    for pname, n in fresh.items():
        if pname not in used:
            specs.append(base_spec(f"{name}.{pname}", "param", n, tokens, calls, "experts"))
    return specs


def attention_spec(name: str, module: Any, cfg: Any, layer_idx: Optional[int], calls: int,
                   encoder: bool) -> Dict[str, Any]:
    """The attention core computed inside `module`: heads and head widths read from the
    module's attributes, else from the config (checked later against FlopCounterMode)."""
    hidden = config_int(cfg, ("hidden_size", "d_model", "n_embd", "dim", "embed_dim"))
    heads = _first_int(module, ("num_heads", "num_attention_heads", "n_head", "n_heads", "n_local_heads"),
                       cfg, ("num_attention_heads", "n_head", "num_heads", "n_heads", "encoder_attention_heads"))
    head_dim = _first_int(module, ("head_dim", "attention_head_size", "head_size", "qk_head_dim"), cfg,
                          ("head_dim",)) or (hidden // heads if heads else 0)
    d_v = config_int(cfg, ("v_head_dim",), head_dim)
    kv = _first_int(module, ("num_key_value_heads", "num_kv_heads", "n_kv_heads"), cfg,
                    ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num"))
    groups = getattr(module, "num_key_value_groups", None)
    if not kv:
        kv = heads // groups if isinstance(groups, int) and groups > 0 and heads else heads
    # what transformers' cache holds per token: keys and values of every KV head (for MLA
    # too: its eager code caches the expanded per-head keys and values, not the latent)
    cache = 0 if encoder else kv * (head_dim + d_v)
    if isinstance(getattr(module, "index_topk", None), int):
        # a sparse-attention indexer (DeepSeek-V3.2 DSA, arXiv 2512.02556): per head, q . k
        # against one shared key per token, then the heads' scores summed with per-token
        # weights (one multiply-add per head and pair: a "value" width of 1); it caches
        # that key. Which keys it selects changes a kernel, not what eager computes.
        kv, d_v, cache = 1, 1, 0 if encoder else head_dim
    return {"name": name, "op": "attention", "params": 0, "calls": int(calls), "group": "attention",
            "heads": int(heads or 0), "kv_heads": int(kv or 0), "d_qk": int(head_dim), "d_v": int(d_v),
            "window": _window(module, cfg, layer_idx), "cache_elems": int(cache), "causal": not encoder}


def _first_int(module: Any, attrs, cfg: Any, keys) -> Optional[int]:
    for a in attrs:
        v = getattr(module, a, None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return config_int(cfg, keys)


def _window(module: Any, cfg: Any, layer_idx: Optional[int]) -> Optional[int]:
    w = getattr(module, "sliding_window", None)
    if isinstance(w, int) and not isinstance(w, bool) and w > 0:
        return w
    types = getattr(cfg, "layer_types", None)
    if layer_idx is not None and isinstance(types, (list, tuple)) and layer_idx < len(types) \
            and types[layer_idx] == "sliding_attention":
        return config_int(cfg, ("sliding_window",))
    return None


def row_flops_spec(name: str, cls: str, rows: List[int], calls: int, flops_per_exec: int, batch: int,
                   seq_len: int) -> Dict[str, Any]:
    """Matmul FLOPs a module computes without owning the weight (`row_flops`: FLOPs per
    token, or per sequence for a module that sees one row per sequence), or `unexplained`
    when the rows it saw are neither or the FLOPs do not divide evenly (no per-token
    description fits). The input may hold several rows per token (AltUp's streams)."""
    tokens = batch * seq_len
    source = ("all" if rows and all(r % tokens == 0 for r in rows)
              else "batch" if rows and all(r == batch for r in rows) else None)
    units = {"all": tokens, "batch": batch}.get(source, 0) * max(calls, 1)
    s = {"name": name, "op": "unexplained", "params": 0, "calls": int(calls), "group": "other", "class": cls}
    if units and flops_per_exec % units == 0:
        s.update({"op": "row_flops", "tokens": source, "flops_per_row": flops_per_exec // units, "tp": "unknown"})
    return s


def grouped_linear_spec(name: str, params: Dict[str, Any], total: int, tokens: str, calls: int,
                        routed: bool, group: str) -> Dict[str, Any] | None:
    """A grouped linear layer (ConvBERT's `GroupedLinearLayer`, arXiv 2008.02496 sec. 3.3:
    the input split into G groups, each projected by its own [in/G, out/G] block) as the
    spec of a kernel-1 convolution with G groups: 2 x out x in/G FLOPs per token, the same
    parameters. Only a module outside any expert structure (`routed` False), with a
    3-D `weight` [G, in/G, out/G] and at most a 1-D bias of `out`; else None."""
    weight, bias = params.get("weight"), params.get("bias")
    if routed or weight is None or weight.dim() != 3 or set(params) - {"weight", "bias"}:
        return None
    g, d_in, d_out = (int(x) for x in weight.shape)
    if bias is not None and (bias.dim() != 1 or int(bias.shape[0]) != g * d_out):
        return None
    return dict(base_spec(name, "conv", total, tokens, calls, group), **{"in": g * d_in, "out": g * d_out},
                bias=bias is not None, kernel=1, conv_groups=g, padding=0)
