"""Routed experts timed at the grouped GEMM share of the serving engine's own MoE kernels (issues 25,
26; engine profile `moe_kernels`, cost/calibrated.py `moe_gemm_share`).

Rules checked, each by a change a broken rule would not show:
- serve() times routed experts at the share its engine's profile names: a profile whose SGLang share
  is tiny slows SGLang's prefill and leaves vLLM's and TensorRT-LLM's answers unchanged to the bit;
- experts split over expert-parallel ranks take the engine's wide-EP share, experts that are not take
  its fused-MoE share (one of them tiny slows only the layouts that use it);
- inference() (no engine) keeps vLLM's share.
"""

from __future__ import annotations

import pytest

from llm_analysis.config import get_gpu_config_by_name
from llm_analysis.cost.profiles import profile_for_gpu
from llm_analysis.serving.engine import engine_settings

MOE = "Qwen/Qwen3-30B-A3B"  # 128 experts top-8, hidden 2048, expert width 768
GPU = "h200-sxm-141gb"
# a prefill-heavy request: 4096 prompt tokens x 8 experts each reach all 128 experts of a layer, 256 tokens
# apiece: the grouped GEMMs are compute-bound, so their time scales as 1 / share
LOAD = dict(concurrency=1, input_len=4096, output_len=2, num_requests=0)
TINY = 1e-3


def _profile(**shares):
    base = profile_for_gpu(get_gpu_config_by_name(GPU))
    return base.with_values(shares, "test: one MoE kernel family's share made tiny") if shares else base


def _serve(analysis_builder, profile, framework, **layout):
    a = analysis_builder(MOE, gpu=GPU, dtype="fp8", perf_model=profile, **(layout or {"tp_size": 2}))
    return a.serve(framework=framework, **LOAD)


def test_engine_profiles_name_their_moe_kernels(analysis_builder):
    """vLLM's fused MoE is the fallback family; SGLang and TensorRT-LLM run their own, and SGLang its
    wide-EP kernels when experts are split over ranks (TensorRT-LLM's wide-EP table is not read: the
    profiles' sources say why)."""
    a = analysis_builder(MOE, gpu=GPU, dtype="fp8", tp_size=2)
    got = {fw: (engine_settings(a, fw, {}).moe_kernels, engine_settings(a, fw, {}).moe_kernels_wide_ep)
           for fw in ("vllm", "sglang", "trtllm")}
    assert got == {"vllm": ("vllm", "vllm"), "sglang": ("sglang", "sglang_wide_ep"),
                   "trtllm": ("trtllm", "trtllm")}


def test_a_tiny_sglang_share_slows_sglang_only(analysis_builder):
    """Hopper has a measured fp8 share for SGLang's fused MoE; made 1e-3 (a few hundred times smaller),
    SGLang's prefill of 4096 tokens takes seconds more, vLLM and TensorRT-LLM answer as before."""
    base, tiny = _profile(), _profile(moe_gemm_fp8_share_sglang=TINY)
    assert "moe_gemm_fp8_share_sglang" in base.values  # measured for this generation
    slow = _serve(analysis_builder, tiny, "sglang")
    normal = _serve(analysis_builder, base, "sglang")
    # 48 layers x 3 GEMMs x 2 x 4096 x 8 x 768 x 2048 FLOPs on 2 GPUs (tp 2 halves N or K): 0.93 TFLOP a GPU
    # at <= the fp8 peak (1979 TFLOP/s) x 1e-3: >= 0.47 s more
    assert slow["ttft_s"] - normal["ttft_s"] > 0.4
    for framework in ("vllm", "trtllm"):
        assert _serve(analysis_builder, tiny, framework)["ttft_s"] == _serve(analysis_builder, base, framework)["ttft_s"]


def test_expert_parallel_layouts_take_the_wide_ep_share(analysis_builder):
    """A tiny SGLang wide-EP share slows SGLang on a worker whose experts are split over 2 ranks
    (moe_ep_size 2) and leaves the tensor-parallel worker (experts not split) unchanged; a tiny fused-MoE
    share does the opposite."""
    ep = dict(tp_size=2, moe_tp_size=1, moe_ep_size=2)
    tp = dict(tp_size=2)
    base = _profile()
    wide_tiny = _profile(moe_gemm_fp8_share_sglang_wide_ep=TINY)
    fused_tiny = _profile(moe_gemm_fp8_share_sglang=TINY)
    ttft = {(name, which): _serve(analysis_builder, prof, "sglang", **layout)["ttft_s"]
            for name, prof in (("base", base), ("wide", wide_tiny), ("fused", fused_tiny))
            for which, layout in (("ep", ep), ("tp", tp))}
    assert ttft[("wide", "tp")] == ttft[("base", "tp")]
    assert ttft[("wide", "ep")] - ttft[("base", "ep")] > 0.4
    assert ttft[("fused", "ep")] == ttft[("base", "ep")]
    assert ttft[("fused", "tp")] - ttft[("base", "tp")] > 0.4


def test_inference_keeps_the_vllm_share(analysis_builder):
    """inference() has no engine: a tiny SGLang share does not change its prefill."""
    kw = dict(batch_size_per_gpu=1, seq_len=4096, num_tokens_to_generate=2)
    a = analysis_builder(MOE, gpu=GPU, dtype="fp8", perf_model=_profile(), tp_size=2).inference(**kw)
    b = analysis_builder(MOE, gpu=GPU, dtype="fp8", perf_model=_profile(moe_gemm_fp8_share_sglang=TINY),
                         tp_size=2).inference(**kw)
    assert a["prefill_latency"] == b["prefill_latency"]
