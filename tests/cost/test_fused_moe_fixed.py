"""A fused MoE layer's fixed time at decode sizes (cost/calibrated.py `moe_gemm_fixed_s`): at one token
per reached expert a fused MoE takes a fixed time beyond streaming the reached experts' weights (block
scales, the activations' per-token-group quantization, the sorted-token alignment), read off measured
fused-MoE tables by benchmarks/moe_fixed_values.py and added to each of the layer's three expert GEMMs.
Expected values are derived by hand, or are aiconfigurator's measured kernels (cited per test)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.cost.calibrated import moe_gemm_fixed_key, moe_gemm_fixed_s
from llm_analysis.cost.profiles import load_profile
from llm_analysis.errors import ConfigError
from llm_analysis.model import Phase
from llm_analysis.serving.engine import engine_settings

REPO = Path(__file__).resolve().parents[2]
MINIMAX = "MiniMaxAI/MiniMax-M2.5"


def test_fixed_time_falls_back_family_then_vllm_then_zero():
    assert moe_gemm_fixed_s({}, "fp8", None) == 0.0  # no key: the model before the key existed
    vllm = {"moe_fp8_gemm_fixed_s": 7e-6}
    assert moe_gemm_fixed_s(vllm, "fp8", "vllm") == 7e-6
    assert moe_gemm_fixed_s(vllm, "fp8", "trtllm") == 0.0  # no TensorRT-LLM key: never vLLM's
    assert moe_gemm_fixed_s(vllm, "fp8", "sglang_wide_ep") == 0.0
    assert moe_gemm_fixed_s(vllm, "16-bit", None) == 0.0  # another precision's key is not read
    sglang = {**vllm, "moe_fp8_gemm_fixed_s_sglang": 2e-6}
    assert moe_gemm_fixed_s(sglang, "fp8", "sglang_wide_ep") == 2e-6  # wide EP -> SGLang's
    assert moe_gemm_fixed_key("fp4", "trtllm") == "moe_fp4_gemm_fixed_s_trtllm"
    with pytest.raises(ConfigError, match="moe_kernels = 'tgi'"):
        moe_gemm_fixed_s(vllm, "fp8", "tgi")


def _decode_moe(gpu: str, tp: int, batch: int, profile_values=None):
    """(the vLLM-served decode step's routed expert gate projection, its cost model, the step's expert_*
    operators in seconds per layer) of MiniMax-M2.5 fp8 at a context of 1,024."""
    a = LLMAnalysis(get_model_config_by_name(MINIMAX), get_gpu_config_by_name(gpu), get_dtype_config_by_name("fp8"),
                    ParallelismConfig(tp_size=tp), perf_model="calibrated")
    if profile_values is not None:
        a = LLMAnalysis(get_model_config_by_name(MINIMAX), get_gpu_config_by_name(gpu),
                        get_dtype_config_by_name("fp8"), ParallelismConfig(tp_size=tp),
                        perf_model=a.profile.with_values(profile_values, "test"))
    a = a.with_conventions(a.conventions_named(None))
    engine = engine_settings(a, "vllm", {})
    cm = a.cost_model.with_moe_kernels(engine.moe_kernels).with_launch("graph")
    ops = list(a.describer_for(engine.kv_cache_bytes).weighted_ops(Phase("decode", batch, 1, 1024)))
    gate = next(op for _, op in ops if op.name == "expert_gate_proj")
    layers = sum(rep for rep, op in ops if op.name == "expert_down_proj")
    moe_s = sum(rep * sum(cm.op_split_s(op)) for rep, op in ops if op.name.startswith("expert_")) / layers
    return gate, cm, moe_s


def test_decode_expert_gemm_streams_then_adds_the_fixed_time():
    """MiniMax-M2.5 on 4 H200s at 4 sequences: 32 token-expert pairs over 256 experts (one per reached
    expert); the gate projection takes its bytes at H200's 4.8 TB/s x vLLM's fp8 fused-MoE streaming
    rate (none measured and written: the dense hbm_efficiency), saturating, plus the fixed time."""
    fixed_s = 5e-6
    values = load_profile("hopper").values
    gate, cm, _ = _decode_moe("h200-sxm-141gb", 4, 4, {"moe_fp8_gemm_fixed_s": fixed_s})
    compute_s, memory_s, _ = cm.op_split_s(gate)
    stream_s = (gate.bytes_per_gpu + values["hbm_half_saturation_bytes"]) / (4.8e12 * values["hbm_efficiency"])
    assert compute_s == 0.0
    assert memory_s == pytest.approx(stream_s + fixed_s, rel=1e-12)
    _, cm_none, _ = _decode_moe("h200-sxm-141gb", 4, 4, {"moe_fp8_gemm_fixed_s": 0.0})
    assert sum(cm_none.op_split_s(gate)) == pytest.approx(stream_s, rel=1e-12)


@pytest.mark.parametrize("batch, measured_us", [(1, 37.1), (4, 64.6), (8, 90.3)])
def test_minimax_fused_moe_on_h200_near_vllms_measured_kernel(batch, measured_us):
    """The fused MoE layer of MiniMax-M2.5 (hidden 3072, expert width 1536 / moe_tp 4, 256 experts top-8,
    block FP8) at 1 / 4 / 8 tokens on H200, as vLLM 0.24.0 runs it (Triton's fused_moe,
    `vllm_fp8moe_triton_tritonexperts`, balanced routing): 37.1 / 64.6 / 90.3 us
    (github:ai-dynamo/aiconfigurator@095f58a51c4c aic-core/src/aiconfigurator_core/systems/data/h200_sxm/moe/
    vllm/0.24.0/moe_perf.parquet, Apache-2.0). The model's routed experts, top-k, sort, activation and
    combine, under CUDA graphs, within 15% (without the fixed time: 17.7 / 37.1 / 60.4 us, 0.52-0.67 of it).
    Uniform routing reaches slightly fewer experts than balanced (30.1 of 32 at 4 tokens)."""
    _, _, moe_s = _decode_moe("h200-sxm-141gb", 4, batch)
    assert moe_s * 1e6 == pytest.approx(measured_us, rel=0.15)


def test_model_time_without_fixed_is_floors_plus_streaming():
    """benchmarks/moe_fixed_values.py's model of a decode cell, by hand: 4 graph floors of 2.5 us and three
    GEMMs of 9 MB each at 0.8 of 4.8 TB/s with 1 MB half-saturation: (9 + 1) MB / 3.84 TB/s = 2.604 us
    each (above the floor): 10 + 7.8125 = 17.8125 us."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from moe_fixed_values import model_time_without_fixed_s
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    values = {"kernel_floor_graph_s": 2.5e-6, "hbm_half_saturation_bytes": 1e6}
    assert model_time_without_fixed_s(values, 4.8e12, 0.8, 9e6) == pytest.approx(17.8125e-6, rel=1e-12)
    # a GEMM below the floor takes the floor
    assert model_time_without_fixed_s(values, 4.8e12, 0.8, 1e3) == pytest.approx(7 * 2.5e-6, rel=1e-12)
