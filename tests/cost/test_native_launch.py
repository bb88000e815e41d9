"""C++ engines launching without CUDA graphs ("native" launches) and the sustained compute share of
inference() (issue 27: the FasterTransformer fold of the leave-one-source-out validation).

Hand derivations on tiny cases; the profile values are read from the shipped Ampere profile (or set
in a trial Profile), the expected times written out from the rules the docstrings state:
- a kernel launched natively takes at least `kernel_floor_native_s` (its own floor, not the eager
  PyTorch one); a profile without that key floors it as an eager one;
- a collective launched natively waits one native floor before its transfer: its time is the
  CUDA-graph time of the same collective plus `kernel_floor_native_s`;
- inference() with kernels launched without CUDA graphs computes at `training_compute_efficiency` of the
  benchmarks' rate (the power-limited sustained clock, as training does); under CUDA graphs (the
  default) it keeps the model serve() times its steps with, as does the analysis' own cost model.
"""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name
from llm_analysis.cost.calibrated import CalibratedCostModel
from llm_analysis.cost.gemm import launch_floor_s
from llm_analysis.cost.profiles import load_profile
from llm_analysis.errors import ConfigError

A100 = get_gpu_config_by_name("a100-sxm-80gb")
FP16 = get_dtype_config_by_name("w16a16e16")
AMPERE = load_profile("ampere")


def _model(launch: str, profile=AMPERE, tp: int = 1, **kw) -> CalibratedCostModel:
    return CalibratedCostModel(A100, FP16, ParallelismConfig(tp_size=tp), profile, launch, **kw)


def test_a_tiny_kernel_launched_natively_takes_the_native_floor():
    # 1 KiB streamed: (1024 + 1 MiB half-saturation) / (2,039 GB/s x 0.79) ~ 0.65 us, below every floor
    profile = AMPERE.with_values({"kernel_floor_native_s": 7e-6, "kernel_floor_eager_s": 30e-6}, "trial")
    assert _model("native", profile).memory_pass_s(1024) == pytest.approx(7e-6)
    assert _model("eager", profile).memory_pass_s(1024) == pytest.approx(30e-6)


def test_a_profile_without_a_native_floor_floors_native_launches_as_eager_ones():
    values = {k: v for k, v in AMPERE.values.items() if k != "kernel_floor_native_s"}
    assert launch_floor_s(values, "native") == AMPERE.values["kernel_floor_eager_s"]
    with pytest.raises(ConfigError, match="launch = 'cuda'; valid: graph, eager, native"):
        launch_floor_s(AMPERE.values, "cuda")


def test_a_natively_launched_collective_waits_one_floor_before_its_transfer():
    floor_s = 11e-6
    profile = AMPERE.with_values({"kernel_floor_native_s": floor_s}, "trial")
    graph, native = _model("graph", profile, tp=8), _model("native", profile, tp=8)
    for nbytes in (12 * 1024, 6 * 2 ** 20):  # a batch-1 decode all-reduce (hidden 6144, fp16) and a prefill one
        expected = graph.collective_s("all_reduce", nbytes, 8, "tp") + floor_s
        assert native.collective_s("all_reduce", nbytes, 8, "tp") == pytest.approx(expected, rel=1e-12)
    # views of one model share their NCCL timers: the native view must not leak its floor into graph's
    assert native.with_launch("graph").collective_s("all_reduce", 12 * 1024, 8, "tp") == \
        graph.collective_s("all_reduce", 12 * 1024, 8, "tp")


def test_sustained_view_computes_at_the_training_share_and_streams_at_full_rate():
    share = 0.6
    profile = AMPERE.with_values({"training_compute_efficiency": share}, "trial")
    plain, sustained = _model("graph", profile), _model("graph", profile).for_inference()
    flops = 1e12  # a large matmul known only by its FLOPs: the 16-bit plateau of the A100's 312 TFLOP/s
    expected_s = flops / (312e12 * share * profile.values["gemm_plateau_efficiency"])
    assert sustained.kernel_split_s(flops, 0.0)[0] == pytest.approx(expected_s, rel=1e-12)
    assert plain.kernel_split_s(flops, 0.0)[0] == pytest.approx(expected_s * share, rel=1e-12)
    nbytes = 1e9  # HBM streaming does not follow the SM clock
    assert sustained.kernel_split_s(0.0, nbytes) == plain.kernel_split_s(0.0, nbytes)


def test_native_inference_prefill_matmuls_take_one_over_the_share_longer_and_graph_inference_does_not():
    # a wide, shallow model whose prefill matmuls at 64 x 2048 tokens are compute-bound
    model = ModelConfig(name="wide", num_layers=2, n_head=32, hidden_dim=4096, vocab_size=32000,
                        ffn_embed_dim=16384, max_seq_len=4096)
    times = {}
    for launch in ("native", None):
        for share in (1.0, 0.5):
            profile = AMPERE.with_values({"training_compute_efficiency": share}, "trial")
            a = LLMAnalysis(model, A100, FP16, perf_model=profile, kernel_launch=launch)
            out = a.inference(batch_size_per_gpu=64, seq_len=2048, num_tokens_to_generate=1)
            mlp = out["prefill_latency_breakdown"]["mlp"]
            times[launch, share] = (mlp["compute_s"], mlp["memory_s"])  # the GEMMs; the activation streams
            assert not a.cost_model.sustained  # serve() times steps with this one: unscaled
    assert times["native", 1.0][0] > 10 * times["native", 1.0][1]  # compute-bound, as the case means
    assert times["native", 0.5][0] == pytest.approx(2 * times["native", 1.0][0], rel=1e-9)
    assert times["native", 0.5][1] == pytest.approx(times["native", 1.0][1], rel=1e-9)
    # under CUDA graphs (the default, the serving engines) inference() is serve()'s model: no share
    assert times[None, 0.5] == times[None, 1.0]
