"""Tensor parallelism moves the 16-bit residual stream (cost/calibrated.py `_tp_payload_scale`): with
activations quantised to fp8 or FP4 for the GEMMs, the calibrated model still times each TP collective at 2
bytes per element (TensorRT-LLM / vLLM all-reduce the bf16 hidden states, the norm after it quantises for the
next GEMM). Expected values: NCCL's measured figure at the 16-bit size, read from the shipped table by hand;
other groups and 16-bit dtypes keep the operator's bytes; the roofline (a lower bound) keeps them too."""

import json
from pathlib import Path

import pytest

from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name
from llm_analysis.cost.calibrated import CalibratedCostModel
from llm_analysis.cost.model import RooflineCostModel
from llm_analysis.cost.profiles import profile_for_gpu

MEASURED = Path(__file__).resolve().parents[2] / "llm_analysis" / "cost" / "profiles" / "measured"
GPU = "h100-sxm-80gb"


def _measured_s(kind: str, n: int, nbytes: int, gpu: str = GPU) -> float:
    """nccl-tests' convention on the shipped table: bus bytes over the stated bus bandwidth."""
    curve = json.loads((MEASURED / f"{gpu}.json").read_text())["nccl"][kind][str(n)]
    rate = get_gpu_config_by_name(gpu).intra_node_bandwidth_in_GB_per_sec * 1e9
    busbw = curve["busbw_over_line_rate"][curve["bytes"].index(nbytes)] * rate
    return (2 if kind == "all_reduce" else 1) * (n - 1) / n * nbytes / busbw


def _model(dtype: str, gpu_name: str = GPU, **par) -> CalibratedCostModel:
    gpu = get_gpu_config_by_name(gpu_name)
    return CalibratedCostModel(gpu, get_dtype_config_by_name(dtype), ParallelismConfig(**par), profile_for_gpu(gpu),
                               "graph")


@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "reduce_scatter"])
def test_fp8_tp_collective_is_timed_at_the_16_bit_payload(kind):
    elements = 1 << 22  # an fp8 operator states 1 byte per element: 4 MiB; the wire carries 8 MiB
    t = _model("fp8", tp_size=8).collective_s(kind, elements * 1, 8, "tp")
    assert t == pytest.approx(_measured_s(kind, 8, elements * 2), rel=1e-12)


def test_fp4_tp_collective_is_timed_at_the_16_bit_payload():
    dtype = get_dtype_config_by_name("nvfp4")
    elements = 1 << 21
    stated = elements * dtype.activation_bytes_per_element  # 4.5 bits per element, with the block scales
    t = _model("nvfp4", "b200-180gb", tp_size=8).collective_s("all_reduce", stated, 8, "tp")
    assert t == pytest.approx(_measured_s("all_reduce", 8, elements * 2, "b200-180gb"), rel=1e-12)


def test_16_bit_activations_and_other_groups_keep_the_operators_bytes():
    nbytes = 1 << 23
    assert _model("w16a16e16", tp_size=8).collective_s("all_reduce", nbytes, 8, "tp") == \
        pytest.approx(_measured_s("all_reduce", 8, nbytes), rel=1e-12)
    # a data-parallel gradient all-reduce carries what its operator states (gradients, not the residual)
    fp8_dp = _model("fp8", dp_size=8).collective_s("all_reduce", nbytes, 8, "dp")
    bf16_dp = _model("w16a16e16", dp_size=8).collective_s("all_reduce", nbytes, 8, "dp")
    assert fp8_dp == pytest.approx(bf16_dp, rel=1e-12)


def test_the_roofline_keeps_the_stated_bytes():
    """The lower bound charges the least the wire could carry: the operator's own bytes."""
    gpu = get_gpu_config_by_name(GPU)
    par = ParallelismConfig(tp_size=8)
    fp8 = RooflineCostModel(gpu, get_dtype_config_by_name("fp8"), par)
    bf16 = RooflineCostModel(gpu, get_dtype_config_by_name("w16a16e16"), par)
    assert fp8.collective_s("all_reduce", 1 << 22, 8, "tp") == pytest.approx(
        bf16.collective_s("all_reduce", 1 << 22, 8, "tp"), rel=1e-12)


def _notes(dtype: str, tp: int, perf_model: str = "calibrated") -> list:
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import get_model_config_by_name
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name(GPU),
                    get_dtype_config_by_name(dtype), ParallelismConfig(tp_size=tp), perf_model=perf_model)
    return [n for n in a.inference(batch_size_per_gpu=1, seq_len=128, num_tokens_to_generate=4)["notes"]
            if "tensor-parallel collectives are timed at 16 bits" in n]


def test_the_summary_says_so_where_it_applies():
    assert len(_notes("fp8", 4)) == 1
    assert _notes("fp8", 1) == [] and _notes("w16a16e16", 4) == [] and _notes("fp8", 4, "roofline") == []
