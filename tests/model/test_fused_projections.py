"""Sibling projections fused under serving conventions (`Conventions.projections`).

Serving engines run the projections that read the same input as one GEMM: vLLM's QKVParallelLinear
(output per GPU (num_heads + 2 x num_kv_heads) / tp x head_dim) and MergedColumnParallelLinear
(gate and up, 2 x intermediate_size / tp), DeepSeek's fused_qkv_a_proj (q_lora_rank + kv_lora_rank
+ qk_rope_head_dim, replicated), and SGLang's and TensorRT-LLM's equivalents. The eager forward
FlopCounterMode measures ("transformers") keeps them separate. Expected shapes are derived by hand
from the published configs below; the fused operator must hold exactly the parameters and FLOPs of
the separate ones and read its input once.
"""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.errors import ConfigError
from llm_analysis.model import Phase
from llm_analysis.model.records import Conventions

GPU = get_gpu_config_by_name("h100-sxm-80gb")
BF16 = get_dtype_config_by_name("w16a16e16")


def _layer_ops(model: str, tp: int, conventions: str, batch: int = 8, moe: bool = False, **overrides):
    a = LLMAnalysis(get_model_config_by_name(model), GPU, BF16, ParallelismConfig(tp_size=tp))
    d = a.with_conventions(Conventions.named(conventions, **overrides)).describer
    kind = next(k for k in d.layer_groups if k.moe == moe)
    return {o.name: o for o in d.layer_ops(Phase("decode", batch, 1, 512), kind)}


def test_llama_qkv_and_gate_up_fused_by_hand():
    """Llama-3.1-70B (hidden 8192, 64 heads of 128, 8 KV heads, intermediate 28672) at tp 4."""
    ops = _layer_ops("meta-llama/Llama-3.1-70B", 4, "serving", batch=8)
    for separate in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"):
        assert separate not in ops
    qkv, gate_up = ops["qkv_proj"], ops["gate_up_proj"]
    assert qkv.kernel_dims == (8, (64 + 2 * 8) * 128 // 4, 8192)
    assert gate_up.kernel_dims == (8, 2 * 28672 // 4, 8192)
    assert qkv.params == 8192 * (64 * 128 + 2 * 8 * 128)
    assert gate_up.params == 8192 * 2 * 28672
    assert qkv.flops_per_gpu == 2 * 8 * 8192 * (64 + 2 * 8) * 128 / 4
    # the input (8 tokens x 8192, bf16) read once beside the weights; the outputs written once each
    assert qkv.bytes_read_per_gpu == qkv.params / 4 * 2 + 8 * 8192 * 2
    assert qkv.bytes_written_per_gpu == 8 * (64 + 2 * 8) * 128 / 4 * 2
    assert gate_up.bytes_read_per_gpu == gate_up.params / 4 * 2 + 8 * 8192 * 2


def test_transformers_conventions_keep_the_modules_separate():
    ops = _layer_ops("meta-llama/Llama-3.1-70B", 4, "transformers")
    assert {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"} <= set(ops)
    assert "qkv_proj" not in ops and "gate_up_proj" not in ops


@pytest.mark.parametrize("model,tp", [("meta-llama/Llama-3.1-70B", 8), ("Qwen/Qwen3-30B-A3B", 2)])
def test_fusion_keeps_parameters_and_flops(model, tp):
    """Fusing changes kernels, never what is counted: per layer the same parameters and FLOPs."""
    moe = model.startswith("Qwen/Qwen3-30B")
    fused = _layer_ops(model, tp, "serving", moe=moe)
    separate = _layer_ops(model, tp, "serving", moe=moe, projections="separate")
    for key in ("params", "params_per_gpu", "flops", "flops_per_gpu", "weight_bytes_per_gpu"):
        assert sum(getattr(o, key) for o in fused.values()) == pytest.approx(
            sum(getattr(o, key) for o in separate.values()), rel=1e-12)


def test_deepseek_fused_qkv_a_proj_by_hand():
    """DeepSeek-V3: q_lora_rank 1536, kv_lora_rank 512, qk_rope_head_dim 64, hidden 7168; the down
    projections are replicated over TP, so the fused one is whole on every GPU."""
    ops = _layer_ops("deepseek-ai/DeepSeek-V3", 8, "serving", batch=4, moe=True)
    assert "q_a_proj" not in ops and "kv_a_proj" not in ops
    fused = ops["fused_qkv_a_proj"]
    assert fused.kernel_dims == (4, 1536 + 512 + 64, 7168)
    assert fused.params == fused.params_per_gpu == 7168 * (1536 + 512 + 64)


def test_routed_experts_keep_their_operators():
    """A fused MoE's routed experts stay three GEMM operators (their measured shares are per operator);
    the shared experts, dense, are fused."""
    ops = _layer_ops("deepseek-ai/DeepSeek-V3", 8, "serving", batch=4, moe=True)
    assert {"expert_gate_proj", "expert_up_proj", "expert_down_proj"} <= set(ops)
    assert "shared_expert_gate_up_proj" in ops and "shared_expert_gate_proj" not in ops


def test_fused_decode_is_not_slower():
    """One GEMM of the summed width pays one kernel floor where three paid three: the calibrated decode
    step of a small batch is faster fused, and never slower."""
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-70B"), GPU, BF16, ParallelismConfig(tp_size=8),
                    perf_model="calibrated")
    times = {}
    for projections in ("fused", "separate"):
        v = a.with_conventions(Conventions.named("serving", projections=projections))
        phase = Phase("decode", 1, 1, 512)
        times[projections] = sum(n * sum(v.cost_model.op_split_s(op)) for n, op in v.describer.weighted_ops(phase))
    assert times["fused"] < times["separate"]


def test_bad_projections_value_names_the_choices():
    with pytest.raises(ConfigError, match="projections = 'merged'; valid: 'separate', 'fused'"):
        Conventions.named("serving", projections="merged")


@pytest.mark.parametrize("gpu,dtype,tp", [("a100-sxm-80gb", "w16a16e16", 8), ("a100-sxm-80gb", "fp8", 4),
                                          ("h100-sxm-80gb", "fp8", 2), ("b200-180gb", "nvfp4", 4)])
def test_fused_gemm_never_slower_than_its_parts(gpu, dtype, tp):
    """The calibrated time of the fused qkv and gate_up GEMMs is at most that of q, k, v and gate, up run
    one after another, at every M from a decode step's few rows to a long prefill (a GEMM library tiles the
    whole; the profile's coarse tile set alone made N = 7168 slower than two N = 3584 at M = 128 on A100)."""
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-70B"), get_gpu_config_by_name(gpu),
                    get_dtype_config_by_name(dtype), ParallelismConfig(tp_size=tp), perf_model="calibrated")
    fused = a.with_conventions(Conventions.named("serving"))
    separate = a.with_conventions(Conventions.named("serving", projections="separate"))
    kind = next(iter(fused.describer.layer_groups))
    groups = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}
    for phase in [Phase("decode", b, 1, 512) for b in (1, 8, 64, 256)] + \
                 [Phase("prefill", 1, s, s) for s in (16, 128, 200, 1000, 4096)]:
        ops_f = {o.name: o for o in fused.describer.layer_ops(phase, kind)}
        ops_s = {o.name: o for o in separate.describer.layer_ops(phase, kind)}
        for name, parts in groups.items():
            whole_s = sum(fused.cost_model.op_split_s(ops_f[name]))
            parts_s = sum(sum(separate.cost_model.op_split_s(ops_s[p])) for p in parts)
            assert whole_s <= parts_s * (1 + 1e-12), (phase, name)
