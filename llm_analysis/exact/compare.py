"""Compare the engine's description of a model with the real model's figures (torch-free):
a truth record (`truth.architecture_truth`, or its cached JSON) against the public
`LLMAnalysis` views; differences are listed per part and layer.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List

from llm_analysis.exact.module_tree import main_stack, numel

# engine groups (Operator.group) as parts of the real model
_VISION_PART = "vision tower and projector"
_ENGINE_PARTS = {"embedding": "outside", "lm_head": "outside", "attention": "attention",
                 "mlp": "mlp", "experts": "mlp", "router": "router", "norm": "norm",
                 "vision tower": _VISION_PART, "projector": _VISION_PART}
_NORM = re.compile(r"(^|[._])(\w*norm\w*|ln_?\w*|layernorm)(\.|$)", re.IGNORECASE)
_ROUTER = re.compile(r"(^|\.)(gate|router|wg|switch)(\.weight|\.bias|\.e_score_correction_bias|$)")
_ATTN = re.compile(r"attn|attention|self_attn|q_proj|k_proj|v_proj|o_proj|query|key|value|qkv|"
                   r"c_attn|wqkv|kv_a|kv_b|q_a|q_b|sinks", re.IGNORECASE)
_MLP = re.compile(r"mlp|ffn|feed_forward|expert|moe|intermediate|output|fc\d|c_fc|c_proj|"
                  r"gate_proj|up_proj|down_proj|w\d|dense", re.IGNORECASE)


def layer_group(rest: str) -> str:
    """attention | mlp | norm | router | other for a parameter name inside a layer."""
    module = rest.rsplit(".", 1)[0] if "." in rest else rest
    last = module.rsplit(".", 1)[-1]
    if _NORM.search(module) and not last.endswith(("proj", "dense")):
        return "norm"
    if _ROUTER.search(rest) and "expert" not in rest.split(".")[-2:][0]:
        return "router"
    if _ATTN.search(module):
        return "attention"
    if _MLP.search(module):
        return "mlp"
    return "other"


def truth_layer_groups(params: Dict[str, Any]) -> Dict[str, int]:
    """Parameters of the main layer stack per group, summed over its layers."""
    stack_name = main_stack(params)
    out: Dict[str, int] = {}
    if stack_name is None:
        return out
    for kind in params["stacks"][stack_name]["kinds"]:
        repeat = len(kind["indices"])
        for rest, (shape, mult) in kind["params"].items():
            g = layer_group(rest)
            out[g] = out.get(g, 0) + repeat * mult * numel(shape)
    return out


def truth_params_for(analysis: Any, truth: Dict[str, Any]) -> Dict[str, Any]:
    """The breakdown the engine should match: the LM, or the bare backbone when the
    engine describes a model without an LM head (BERT-style encoders)."""
    return truth["base_params"] if describes_backbone(analysis, truth) else truth["params"]


def engine_parts(analysis: Any) -> Dict[str, int]:
    """The engine's parameters per part: outside (embeddings, head, final norm is in
    `norm` there), attention, mlp, norm, router (all layers)."""
    parts: Dict[str, int] = {}
    for group, n in analysis.get_num_params_breakdown().items():
        key = _ENGINE_PARTS.get(group, group)
        parts[key] = parts.get(key, 0) + int(n)
    last_norm = int(analysis.get_num_params_last_layernorm())
    parts["norm"] = parts.get("norm", 0) - last_norm
    parts["outside"] = parts.get("outside", 0) + last_norm
    return {k: v for k, v in parts.items() if v}


def truth_parts(params: Dict[str, Any]) -> Dict[str, int]:
    layer = truth_layer_groups(params)
    stack_name = main_stack(params)
    other_stacks = sum(s["total"] for p, s in params["stacks"].items() if p != stack_name)
    parts = dict(layer)
    parts["outside"] = params["total"] - sum(layer.values())
    towers = params.get("towers")  # a vision-language class built whole (truth.py)
    if towers:
        parts[_VISION_PART] = towers["total"]
        parts["outside"] -= towers["total"] - towers["in_stacks"]
        other_stacks -= towers["in_stacks"]
    if other_stacks:
        parts["other stacks"] = other_stacks
    parts["outside"] -= other_stacks + (towers["in_stacks"] if towers else 0)
    return {k: v for k, v in parts.items() if v}


def part_differences(engine: Dict[str, int], real: Dict[str, int]) -> List[str]:
    """Human-readable differences, largest first: 'mlp: engine 4.19e9, model 5.64e9 (-25.6%)'."""
    rows = []
    for part in sorted(set(engine) | set(real)):
        e, r = engine.get(part, 0), real.get(part, 0)
        if e != r:
            rel = f"{(e - r) / r:+.1%}" if r else "absent in the model"
            rows.append((abs(e - r), f"{part}: engine {e:,}, model {r:,} ({rel})"))
    return [text for _, text in sorted(rows, reverse=True)]


def engine_matmul_flops(analysis: Any, batch_size: int, seq_len: int) -> int:
    """FLOPs of the engine's matmuls and attention cores for one prefill: what
    FlopCounterMode counts (it does not count element-wise operations), with the mixers'
    convolutions and scans (model/mixers.py)."""
    rows = analysis.operators("prefill", batch_size, seq_len, per_layer=False)
    return int(sum(r["flops"] for r in rows if r["kind"] in ("matmul", "attention", "conv", "scan")))


def compare(analysis: Any, truth: Dict[str, Any]) -> Dict[str, Any]:
    """{"params_exact", "engine_params", "model_params", "param_differences",
    "flops_exact" (None when the model's FLOPs are unknown), "engine_flops",
    "model_flops", "flops_note"}."""
    params = truth_params_for(analysis, truth)
    engine_total = int(analysis.get_num_params_total())
    out: Dict[str, Any] = {"engine_params": engine_total, "model_params": params["total"],
                           "params_exact": engine_total == params["total"], "param_differences": []}
    if not out["params_exact"]:
        out["param_differences"] = part_differences(engine_parts(analysis), truth_parts(params))
    out.update(_flops_verdict(analysis, truth))
    return out


def _flops_verdict(analysis: Any, truth: Dict[str, Any]) -> Dict[str, Any]:
    phase = truth.get("phase") or {"batch_size": 1, "seq_len": 16}
    if describes_backbone(analysis, truth):
        flops, error = truth.get("base_flops"), truth.get("base_flops_error")
    else:
        flops, error = truth.get("flops"), truth.get("flops_error")
    if not flops:
        return {"flops_exact": None, "engine_flops": None, "model_flops": None,
                "flops_note": error or "the model's FLOPs were not counted"}
    engine = engine_matmul_flops(analysis, phase["batch_size"], phase["seq_len"])
    return {"flops_exact": engine == flops["total"], "engine_flops": engine,
            "model_flops": flops["total"], "flops_note": None}


def describes_backbone(analysis: Any, truth: Dict[str, Any]) -> bool:
    """True when the engine describes the bare backbone (no LM head) and the truth
    has one: compare with the backbone's figures then."""
    return not bool(getattr(analysis.model_config, "lm_head", True)) and bool(truth.get("base_params"))
