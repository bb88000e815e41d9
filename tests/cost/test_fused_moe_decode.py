"""Routed experts at a decode step's few tokens per expert (cost/calibrated.py): the fused MoE's grid
runs the reached experts' tiles side by side (each expert's GEMM on its share of the SMs), so the layer
streams the reached experts' weights, at the fused MoE's own measured rate (`moe_stream_efficiency`),
instead of idling most SMs on one expert's few tiles. Expected times are derived by hand: the bytes a
GEMM reads over HBM spec x efficiency, saturating (bytes + half-saturation bytes), never below the
graph kernel floor."""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.cost.calibrated import GROUPED_TILE_TOKENS, expert_sms, moe_stream_efficiency
from llm_analysis.cost.profiles import load_profile
from llm_analysis.errors import ConfigError
from llm_analysis.model import Phase


def test_expert_sms_shares_the_gpu_evenly():
    assert expert_sms(148, 1) == 148
    assert expert_sms(148, 40) == 4  # 3.7 SMs each, rounded
    assert expert_sms(132, 256) == 1  # never below one SM
    assert expert_sms(132, 0.3) == 132  # fewer than one expert reached: the whole GPU


def test_stream_efficiency_falls_back_family_then_vllm_then_dense_streaming():
    dense = {"hbm_efficiency": 0.8}
    assert moe_stream_efficiency(dense, "fp8", "sglang") == 0.8
    assert moe_stream_efficiency({**dense, "moe_fp8_stream_efficiency": 0.7}, "fp8", "trtllm") == 0.7
    sglang = {**dense, "moe_fp8_stream_efficiency_sglang": 0.6}
    assert moe_stream_efficiency(sglang, "fp8", "sglang_wide_ep") == 0.6  # wide EP -> SGLang's
    assert moe_stream_efficiency(sglang, "fp8", "vllm") == 0.8
    assert moe_stream_efficiency(sglang, "16-bit", "sglang") == 0.8  # another precision's key is not read
    with pytest.raises(ConfigError, match="moe_kernels = 'tgi'"):
        moe_stream_efficiency(dense, "fp8", "tgi")


def _routed_gate(model: str, gpu: str, dtype: str, tp: int, batch: int):
    a = LLMAnalysis(get_model_config_by_name(model), get_gpu_config_by_name(gpu), get_dtype_config_by_name(dtype),
                    ParallelismConfig(tp_size=tp), perf_model="calibrated")
    kind = next(k for k in a.describer.layer_groups if k.moe)
    op = next(o for o in a.describer.layer_ops(Phase("decode", batch, 1, 100), kind) if o.name == "expert_gate_proj")
    return a, op


@pytest.mark.parametrize("batch", [4, 32])
def test_decode_experts_stream_their_weights_at_the_measured_rate(batch):
    """Qwen3.5-397B-A17B on 8 B200s (bf16, SGLang's kernels): 512 experts top-10, each split 8 ways; at
    4 or 32 sequences (40 / 320 token-expert pairs, one or two per reached expert) the gate projection
    takes its bytes at B200's 8 TB/s x SGLang's measured 16-bit fused-MoE streaming efficiency."""
    a, op = _routed_gate("Qwen/Qwen3.5-397B-A17B", "b200-180gb", "w16a16e16", 8, batch)
    values = load_profile("blackwell").values
    eff = values["moe_stream_efficiency_sglang"]
    cm = a.cost_model.with_moe_kernels("sglang").with_launch("graph")
    compute_s, memory_s, _ = cm.op_split_s(op)
    expected_s = max((op.bytes_per_gpu + values["hbm_half_saturation_bytes"]) / (8e12 * eff),
                     values["kernel_floor_graph_s"])
    assert compute_s == 0.0  # bound by the weights, not the GEMM's tiles
    assert memory_s == pytest.approx(expected_s, rel=1e-12)


def test_many_tokens_per_expert_keep_the_fitted_per_expert_rule():
    """At >= GROUPED_TILE_TOKENS tokens per expert (a prefill) the grouped GEMM is timed as the shares were
    fitted: compute-bound at the per-expert shape on the whole GPU; the SM share does not apply there."""
    a, op = _routed_gate("Qwen/Qwen3.5-397B-A17B", "b200-180gb", "w16a16e16", 8, 8192)
    cm = a.cost_model.with_moe_kernels("sglang").with_launch("graph")
    m, n, k = op.kernel_dims[:3]
    assert m / 512 >= GROUPED_TILE_TOKENS  # all 512 experts reached, 160 tokens each
    compute_s, memory_s, _ = cm.op_split_s(op)
    assert memory_s == 0.0 and compute_s > 0.0
    assert cm.routed_expert_eff(op, op.kernel_dims) == pytest.approx(
        cm.gemm_shape(n, k)(round(m / 512)) * load_profile("blackwell").values["moe_gemm_share_sglang"], rel=1e-9)
