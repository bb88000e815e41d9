"""A checkpoint that stores only its routed experts in a low-bit format (gpt-oss: MXFP4 experts, every other
weight bf16, config.json's quantization_config.modules_to_not_convert) runs its other linears on the 16-bit
tensor cores: no activation-quantize kernel or low-bit prologue before them, the 16-bit GEMM plateau and peak.
Only its experts run at the dtype's precision (on Blackwell the engines' W4A8 MXFP4 x MXFP8 MoE kernels).

Checked against the same kernel under a 16-bit dtype and under the low-bit dtype applied to every linear
(the cost model's two rule sets, each already checked on measured kernels in this folder), not against
numbers of its own."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from builders import build_analysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name
from llm_analysis.cost.calibrated import CalibratedCostModel
from llm_analysis.cost.profiles import profile_for_gpu

GPU = "b200-180gb"


def _model(dtype_name, dense_16bit=False):
    gpu = get_gpu_config_by_name(GPU)
    return CalibratedCostModel(gpu, get_dtype_config_by_name(dtype_name), ParallelismConfig(), profile_for_gpu(gpu),
                               dense_16bit=dense_16bit)


def _linear(m, n, k, role=None, weight_bytes=2.0):
    return SimpleNamespace(kind="matmul", expert_role=role, kernel_dims=(m, n, k), fused_widths=(),
                           params_per_gpu=(128 if role else 1) * n * k, flops_per_gpu=2.0 * m * n * k,
                           bytes_per_gpu=weight_bytes * n * k + 2.0 * m * (n + k), kv_cache_bytes_read_per_gpu=0.0)


@pytest.mark.parametrize("m", [4, 64, 4096])  # a decode step's few rows (streaming) to a prefill's (compute)
def test_a_dense_linear_runs_as_a_16_bit_one(m):
    """gpt-oss-120b's q projection (N 4096, K 2880), bf16 weights: under W4A8 MXFP4 with dense_16bit it takes
    the time the same kernel takes under a 16-bit dtype; applied to every linear, the fp8 rules time it
    otherwise (an activation-quantize kernel at decode sizes, the fp8 peak and plateau at prefill sizes)."""
    op = _linear(m, 4096, 2880)
    args = (op, op.flops_per_gpu, op.bytes_per_gpu, 0.0)
    split = _model("w4a8e16-mxfp4", dense_16bit=True).op_kernel_split_s(*args)
    assert split == pytest.approx(_model("w16a16e16").op_kernel_split_s(*args), rel=1e-12)
    assert sum(_model("w4a8e16-mxfp4").op_kernel_split_s(*args)) != pytest.approx(sum(split), rel=1e-3)


@pytest.mark.parametrize("m", [16, 8192])
def test_routed_experts_keep_the_dtypes_precision(m):
    """The MXFP4 experts (N 5760, K 2880) run as under the low-bit dtype applied to every linear."""
    op = _linear(m, 5760, 2880, role="routed", weight_bytes=4.25 / 8)
    args = (op, op.flops_per_gpu, op.bytes_per_gpu, 0.0)
    assert _model("w4a8e16-mxfp4", dense_16bit=True).op_kernel_split_s(*args) == pytest.approx(
        _model("w4a8e16-mxfp4").op_kernel_split_s(*args), rel=1e-12)


def test_the_analysis_holds_dense_linears_at_16_bits_only_for_such_checkpoints():
    """gpt-oss's MXFP4 checkpoint under its own format: dense_16bit; Llama (a 16-bit checkpoint) quantised to
    the same dtype by the caller: every linear at the dtype's precision."""
    assert build_analysis("openai/gpt-oss-120b", gpu=GPU, dtype="w4a8e16-mxfp4",
                          perf_model="calibrated").cost_model.dense_16bit
    assert not build_analysis("meta-llama/Llama-3.1-8B", gpu=GPU, dtype="w4a8e16-mxfp4",
                              perf_model="calibrated").cost_model.dense_16bit
