"""Name the architecture features behind a parameter mismatch (torch-free): the real
model's layer parameters against the engine's ModelConfig, most structural cause first.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List

from llm_analysis.exact.compare import layer_group, truth_parts
from llm_analysis.exact.module_tree import main_stack

MIXER_PARAMS = re.compile(r"A_log|conv1d|(^|\.)conv\.|short_conv|dt_proj|x_proj|linear_attn|mlstm|slstm|"
                    r"time_decay|time_mix|recurrent|rg_lru|(^|\.)mamba|ssm", re.IGNORECASE)
_CROSS = re.compile(r"encoder_attn|crossattention|cross_attn|cross_attention", re.IGNORECASE)
_MLA = re.compile(r"kv_a_proj|kv_b_proj|q_a_proj|q_b_proj|kv_a_layernorm")
_QK_NORM = re.compile(r"(^|\.)(q_norm|k_norm|q_layernorm|k_layernorm|query_norm|key_norm)\.")
_GATE = re.compile(r"gate_proj|gate_up|(^|\.)w3\.|wi_0|(^|\.)gate_up_proj|fc1_gate|(^|\.)w13")

CAUSES = ("non-attention mixer (SSM/conv/recurrent)", "cross-attention", "MLA",
          "MoE (experts/keys)", "layer count / shared layers", "per-layer widths",
          "gated MLP undetected", "FFN width (other key)", "norms / qk-norm",
          "attention shape or biases", "embeddings / head")


def _layer_names(params: Dict[str, Any]) -> List[str]:
    stack = main_stack(params)
    if stack is None:
        return []
    return [rest for kind in params["stacks"][stack]["kinds"] for rest in kind["params"]]


def _experts(params: Dict[str, Any]) -> int:
    """Routed experts per MoE layer of the real model (0 when none)."""
    stack = main_stack(params)
    best = 0
    for kind in (params["stacks"][stack]["kinds"] if stack else []):
        for rest, (shape, mult) in kind["params"].items():
            if "experts" in rest and "shared" not in rest:
                best = max(best, mult if "#" in rest else (shape[0] if len(shape) == 3 else 1))
    return best


def _mlp_inner_widths(params: Dict[str, Any], hidden: int) -> set:
    stack = main_stack(params)
    widths = set()
    for kind in (params["stacks"][stack]["kinds"] if stack else []):
        for rest, (shape, _mult) in kind["params"].items():
            if layer_group(rest) == "mlp" and "expert" not in rest and len(shape) == 2 \
                    and shape[0] == hidden and shape[1] != hidden:
                widths.add(shape[1])
    return widths


def mismatched_features(cfg: Any, params: Dict[str, Any], engine: Dict[str, int]) -> List[str]:
    """Causes (from CAUSES) that explain why `engine` (parts) differs from `params`."""
    names = _layer_names(params)
    joined = "\n".join(names)
    real = truth_parts(params)
    causes = []
    if MIXER_PARAMS.search(joined):
        causes.append(CAUSES[0])
    if _CROSS.search(joined):
        causes.append(CAUSES[1])
    if bool(_MLA.search(joined)) != bool(getattr(cfg, "kv_lora_rank", None)):
        causes.append(CAUSES[2])
    experts = _experts(params)
    if (experts > 1 or cfg.moe_num_experts > 1) and experts != cfg.moe_num_experts:
        causes.append(CAUSES[3])
    stack = main_stack(params)
    if stack and params["stacks"][stack]["count"] != cfg.num_layers:
        causes.append(CAUSES[4])
    if stack and len({tuple(sorted(k["params"])) for k in params["stacks"][stack]["kinds"]}) == 1 \
            and len(params["stacks"][stack]["kinds"]) > 1:
        causes.append(CAUSES[5])
    if _GATE.search(joined) and not cfg.mlp_gated_linear_units:
        causes.append(CAUSES[6])
    widths = _mlp_inner_widths(params, cfg.hidden_dim)
    if widths and cfg.ffn_embed_dim not in widths and CAUSES[5] not in causes:
        causes.append(CAUSES[7])
    if bool(_QK_NORM.search(joined)) != bool(cfg.qk_norm) or engine.get("norm", 0) != real.get("norm", 0):
        causes.append(CAUSES[8])
    if engine.get("attention", 0) != real.get("attention", 0) and not set(causes) & set(CAUSES[:3]):
        causes.append(CAUSES[9])
    if engine.get("outside", 0) != real.get("outside", 0):
        causes.append(CAUSES[10])
    return causes

