"""Layers of a Funnel Transformer, read from its module tree (derive path; live modules).

Funnel Transformer (Dai et al. 2020, arXiv 2006.03236) pools the sequence between
blocks of layers and upsamples it back before a short decoder at full length, so its
layers see neither every token nor one row per sequence: the generic walk
(derive.py) cannot name their rows. This module describes each layer with the rows of
its pooling stage (tree_pooling.py, torch-free, has the row counts and the relative
attention FLOPs the analysis uses):

* a layer of encoder block b runs at stage b (its hidden states pooled b times); the
  first layer of a pooled block takes its queries at stage b and, when pool_q_only
  (the default), its keys and values at stage b - 1; decoder layers run at stage 0;
* each projection's stage is read from the rows the probe saw it take (no module
  name decides it): the query stage's or the key stage's rows per sequence;
* the attention module's own FLOPs are one pooled relative attention core, its
  relative-position kernel and biases are parameters (`param`).

Options the description does not carry are refused: `block_repeats` other than 1 (a
repeated layer would run pooled once, then unpooled). Everything is then verified like any
derived description (per module at the probe, in total at the long probe).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from llm_analysis.errors import UnsupportedArchitectureError
from llm_analysis.exact.derive_roles import assign_tp_roles, block_group
from llm_analysis.exact.derive_specs import module_specs, new_params
from llm_analysis.exact.tree_pooling import stage_rows

_OPTIONS = ("separate_cls", "truncate_seq", "pool_q_only")
_LINEAR_OPS = ("linear", "conv")


@dataclass
class PooledLayer:
    path: str
    block: int
    q_stage: int
    kv_stage: int


@dataclass
class PooledModel:
    options: Dict[str, Any]
    stacks: List[str]
    layers: List[PooledLayer]


def _funnel_attention(module: Any) -> Optional[Any]:
    """The relative attention module of a Funnel layer (its block index and its
    relative-position kernel [d_model, heads, d_head]), else None."""
    attn = getattr(module, "attention", None)
    kernel = getattr(attn, "r_kernel", None)
    if isinstance(getattr(attn, "block_index", None), int) and getattr(kernel, "dim", lambda: 0)() == 3:
        return attn
    return None


def _stack_of(lm: Any, path: str) -> str:
    """The layer list holding `path`: its parent, or the grandparent when the parent is
    itself one block of a list of blocks."""
    import torch
    parent = path.rsplit(".", 1)[0]
    grand = parent.rsplit(".", 1)[0] if "." in parent else ""
    nested = grand and isinstance(lm.get_submodule(grand), torch.nn.ModuleList)
    return grand if nested else parent


def pooled_model(lm: Any, cfg: Any) -> Optional[PooledModel]:
    """The pooled layers of a Funnel model, or None for any other model."""
    layers = [(p, m) for p, m in lm.named_modules() if _funnel_attention(m) is not None]
    if not layers or not all(isinstance(getattr(cfg, k, None), bool) for k in _OPTIONS):
        return None
    name = getattr(cfg, "model_type", None)
    if getattr(cfg, "attention_type", None) not in ("relative_shift", "factorized"):
        raise UnsupportedArchitectureError(
            f"{name}: attention_type={getattr(cfg, 'attention_type', None)!r} is not described; 'relative_shift' "
            "and 'factorized' (arXiv 2006.03236 appendix A.2) are")
    repeats = list(getattr(cfg, "block_repeats", None) or [])
    if any(r != 1 for r in repeats):
        raise UnsupportedArchitectureError(
            f"{name}: block_repeats={repeats} is not described (a repeated first layer of a block runs pooled "
            "once, then unpooled); only block_repeats of 1 are")
    opts = {k: bool(getattr(cfg, k)) for k in _OPTIONS}
    if cfg.attention_type == "factorized":
        opts["factorized"] = True
    out: List[PooledLayer] = []
    for path, module in layers:
        b = int(_funnel_attention(module).block_index)
        first = path.rsplit(".", 1)[-1] == "0"
        kv = b - 1 if b > 0 and first and opts["pool_q_only"] else b
        out.append(PooledLayer(path, b, b, kv))
    stacks = list(dict.fromkeys(_stack_of(lm, p.path) for p in out))
    return PooledModel(opts, stacks, out)


def pooled_kinds(w: Any, model: PooledModel) -> Tuple[List[List[Dict[str, Any]]], List[List[Any]]]:
    """(kinds, layers) of the description (derive.py's module docstring), every layer
    running once."""
    kinds: List[List[Dict[str, Any]]] = []
    index: Dict[str, int] = {}
    order: List[List[Any]] = []
    for layer in model.layers:
        if w.probe.calls.get(layer.path, 0) != 1:
            raise UnsupportedArchitectureError(f"layer {layer.path}: runs {w.probe.calls.get(layer.path, 0)} "
                                               "times in one forward; a pooled layer is described running once")
        specs = _layer_specs(w, layer, model.options)
        sig = json.dumps(specs, sort_keys=True)
        index.setdefault(sig, len(kinds))
        if index[sig] == len(kinds):
            kinds.append(specs)
        order.append([index[sig], True])
    return kinds, order


def _stage_of(w: Any, path: str, layer: PooledLayer, opts: Dict[str, Any]) -> int:
    """The stage whose rows the module at `path` took on every call."""
    batch, seq = w.probe.batch, w.probe.seq_len
    per_seq = {r // batch if r % batch == 0 else -1 for r in w.probe.tokens.get(path, [])}
    for stage in (layer.q_stage, layer.kv_stage):
        if per_seq == {stage_rows(seq, stage, opts)}:
            return stage
    if not per_seq:  # never ran with a tensor input (a parameter-only module): the query stage
        return layer.q_stage
    raise UnsupportedArchitectureError(
        f"{path}: takes {sorted(per_seq)} rows per sequence, neither its queries' stage {layer.q_stage} "
        f"({stage_rows(seq, layer.q_stage, opts)} rows) nor its keys' stage {layer.kv_stage}")


def _core(rel: str, attn: Any, layer: PooledLayer) -> Dict[str, Any]:
    d_model, heads, d_head = (int(x) for x in attn.r_kernel.shape)
    segments = int(attn.seg_embed.shape[0]) if getattr(attn, "seg_embed", None) is not None else 0
    return {"name": rel, "op": "attention", "params": 0, "calls": 1, "group": "attention", "heads": heads,
            "kv_heads": heads, "d_qk": d_head, "d_v": d_head, "window": None, "cache_elems": 0, "causal": False,
            "pooling": {"block": layer.block, "q_stage": layer.q_stage, "kv_stage": layer.kv_stage,
                        "d_model": d_model, "segments": segments}}


def _layer_specs(w: Any, layer: PooledLayer, opts: Dict[str, Any]) -> List[Dict[str, Any]]:
    prefix = layer.path + "."
    attn = _funnel_attention(w.lm.get_submodule(layer.path))
    attn_rel = next(p[len(prefix):] for p, m in w.modules if m is attn and p.startswith(prefix))
    group_of = lambda name: block_group(name, [attn_rel])  # noqa: E731
    ctx = {"hidden": w.hidden, "vocab": w.vocab, "experts": None, "group_of": group_of, "top_k": None}
    specs: List[Dict[str, Any]] = []
    for path, module in [(layer.path, w.lm.get_submodule(layer.path))] + \
            [(p, m) for p, m in w.modules if p.startswith(prefix)]:
        rel = path[len(prefix):]
        own = w.own_flops(path, module) if path in w.probe.flops else 0
        fresh = new_params(module, w.seen)
        if not own and not any(fresh.values()) and module is not attn:
            continue  # dropouts, activations: no parameters, no FLOPs
        stage = _stage_of(w, path, layer, opts)
        calls = w.probe.calls.get(path, 0)
        mine = module_specs(rel, module, fresh, f"pool:{stage}", calls, ctx) if fresh else []
        if module is attn:
            mine[:0] = [_core(rel, attn, layer)]
        elif own and not any(s["op"] in _LINEAR_OPS for s in mine):
            raise UnsupportedArchitectureError(
                f"{path}: computes {own:,} FLOPs the pooled layer description does not explain "
                f"({type(module).__name__})")
        for i, s in enumerate(mine):
            s["module"], s["probe_flops"] = rel, int(own) if i == 0 else 0
        specs += mine
    assign_tp_roles(specs, w.hidden, next(s for s in specs if s["op"] == "attention"))
    return specs
