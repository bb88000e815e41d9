"""Operator specs of one parameter-owning module, and of one attention core.

See `derive_roles.py` for the spec fields. Needs the live module (torch), imports
nothing at module level. A family's variant of the attention core is added by the walk
(architectures.attention_core).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

from llm_analysis.exact.derive_sites import grouped_linear_spec
from llm_analysis.exact.derive_roles import (config_int, expert_role, expert_shape, is_conv1d, is_embedding, is_norm,
                           linear_shape, numel)


def new_params(module: Any, seen: Set[int]) -> Dict[str, int]:
    """{parameter name: numel} of the module's own parameters, 0 for one already
    owned by an earlier module (a tied weight counts once, as named_parameters does)."""
    out = {}
    for name, p in module.named_parameters(recurse=False):
        out[name] = 0 if id(p) in seen else numel(p.shape)
        seen.add(id(p))
    return out


def _base(name: str, op: str, params: int, tokens: str, calls: int, group: str) -> Dict[str, Any]:
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
        s = _base(name, "embedding", total, tokens, calls, "embedding")
        s["in"], s["out"] = int(weight.shape[0]), int(weight.shape[1])  # rows, width
        s["tp"] = "vocab" if s["in"] == ctx["vocab"] else "replicated"
        return [s]
    params = dict(module.named_parameters(recurse=False))
    if is_norm(module) or (all(p.dim() <= 1 for p in params.values()) and "weight" in params
                           and params["weight"].dim() == 1):
        s = _base(name, "norm", total, tokens, calls, "norm")
        s["in"] = s["out"] = numel(params["weight"].shape) if "weight" in params else 0
        s["bias"] = "bias" in params
        return [s]
    if is_conv1d(module):
        s = _base(name, "conv", total, tokens, calls, ctx["group_of"](name))
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
        return [_base(name, "param", total, tokens, calls, ctx["group_of"](name))]
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
    s = _base(name, "linear", total, tokens, calls, group)
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
        s = _base(f"{name}.{wname}", "experts", total, "routed" if tokens == "all" and role == "routed" else tokens,
                  calls, "experts")
        s.update({"in": d_in, "out": d_out, "bias": bias is not None, "copies": int(p.shape[0]), "expert_role": role})
        specs.append(s)
    for pname, n in fresh.items():
        if pname not in used:
            specs.append(_base(f"{name}.{pname}", "param", n, tokens, calls, "experts"))
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
