"""One request alone (one closed-loop client) is inference()'s request: its time to first token is
inference()'s prefill, each later token inference()'s mean decode step (the same cost model: the
serving engine runs the same operators, one sequence per step), plus what the engine profile adds
on top (API latency once, host overheads per step), derived here by hand."""

from __future__ import annotations

import pytest

ZERO = dict(api_latency_s=0.0, step_overhead_s=0.0, step_overhead_per_seq_s=0.0, step_overhead_per_layer_s=0.0, benchmark_rounds=0.0)
SETUPS = [  # (model, dtype, tolerance): a dense model timed from its phase table in inference(); an MoE with
    # multi-head latent attention built operator by operator; sequence operators on a 5% grid of lengths
    ("meta-llama/Llama-3.1-8B", "w16a16e16", 1e-5),
    ("deepseek-ai/DeepSeek-V2-Lite", "w16a16e16", 3e-3),
]
IN, OUT = 256, 64  # a prompt under vLLM's CUDA-graph capture size: every step runs in graphs, as inference()


@pytest.mark.parametrize("perf_model", ["roofline", "calibrated"])
@pytest.mark.parametrize("model,dtype,tol", SETUPS)
def test_one_client_is_inference(analysis_builder, model, dtype, tol, perf_model):
    a = analysis_builder(model, gpu="h100-sxm-80gb", dtype=dtype, perf_model=perf_model)
    inf = a.inference(batch_size_per_gpu=1, seq_len=IN, num_tokens_to_generate=OUT)
    s = a.serve(concurrency=1, input_len=IN, output_len=OUT, num_requests=20, **ZERO)
    assert s["ttft_s"] == pytest.approx(inf["prefill_latency"], rel=tol)
    assert s["tpot_s"] == pytest.approx(inf["decode_latency"], rel=tol)
    assert s["e2e_s"] == pytest.approx(inf["total_latency"], rel=tol)
    # the simulation of the same client: every request the same
    for q in (50, 99):
        assert s[f"ttft_p{q}_s"] == pytest.approx(inf["prefill_latency"], rel=tol)
        assert s[f"tpot_p{q}_s"] == pytest.approx(inf["decode_latency"], rel=tol)
    assert s["requests_per_s"] == pytest.approx(1 / inf["total_latency"], rel=tol)
    assert s["output_tokens_per_s"] == pytest.approx(OUT / inf["total_latency"], rel=tol)


def test_profile_costs_add_by_hand(analysis_builder):
    """API latency once per request; per step a fixed overhead, one per sequence in it (one here) and one per
    layer (Llama-3.1-8B: 32)."""
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", perf_model="calibrated")
    inf = a.inference(batch_size_per_gpu=1, seq_len=IN, num_tokens_to_generate=OUT)
    api, step, per_seq, per_layer = 0.030, 0.002, 0.0005, 0.00002
    s = a.serve(concurrency=1, input_len=IN, output_len=OUT, num_requests=0, api_latency_s=api, step_overhead_s=step,
                step_overhead_per_seq_s=per_seq, step_overhead_per_layer_s=per_layer,
                benchmark_rounds=1.0)  # no other client: no burst
    assert s["ttft_s"] == pytest.approx(api + inf["prefill_latency"] + step + per_seq + 32 * per_layer, rel=1e-6)
    assert s["tpot_s"] == pytest.approx(inf["decode_latency"] + step + per_seq + 32 * per_layer, rel=1e-6)
    assert s["e2e_s"] == pytest.approx(s["ttft_s"] + (OUT - 1) * s["tpot_s"], rel=1e-12)


def test_per_layer_time_adds_once_per_layer_per_step_by_hand(analysis_builder):
    """step_overhead_per_layer_s c: Llama-3.1-8B runs 32 layers, so every step (the prefill's and each
    decode's) takes 32 c more than its operators; with no other engine cost, one client's TTFT and TPOT
    are inference()'s prefill and decode step + 32 c."""
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", perf_model="roofline")
    inf = a.inference(batch_size_per_gpu=1, seq_len=IN, num_tokens_to_generate=OUT)
    c = 40e-6
    s = a.serve(concurrency=1, input_len=IN, output_len=OUT, num_requests=0,
                **{**ZERO, "step_overhead_per_layer_s": c})
    assert s["ttft_s"] == pytest.approx(inf["prefill_latency"] + 32 * c, rel=1e-5)
    assert s["tpot_s"] == pytest.approx(inf["decode_latency"] + 32 * c, rel=1e-5)


def test_overlapped_host_shows_only_when_longer_than_the_gpu_step_by_hand(analysis_builder):
    """TensorRT-LLM's overlap scheduler (host_overlap): a step takes max(GPU step + the exposed per-step
    overhead, the host's own step = per-sequence time x sequences). One client, one sequence per step: with
    a host step shorter than the GPU's only the exposed part shows; with a longer one the host's step is the
    step. The GPU step is the same call with no host time at all."""
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", perf_model="calibrated")
    call = dict(concurrency=1, input_len=IN, output_len=OUT, framework="trtllm", num_requests=0,
                api_latency_s=0.0, benchmark_rounds=0.0)
    gpu = a.serve(step_overhead_s=0.0, step_overhead_per_seq_s=0.0, step_overhead_per_layer_s=0.0, **call)
    exposed = 0.002
    hidden = a.serve(step_overhead_s=exposed, step_overhead_per_seq_s=0.0005, **call)  # 0.5 ms < the GPU's step
    assert 0.0005 < gpu["tpot_s"]
    assert hidden["tpot_s"] == pytest.approx(gpu["tpot_s"] + exposed, rel=1e-9)
    assert hidden["ttft_s"] == pytest.approx(gpu["ttft_s"] + exposed, rel=1e-9)
    host_bound = a.serve(step_overhead_s=exposed, step_overhead_per_seq_s=1.0, **call)  # 1 s per step > the GPU's
    assert gpu["ttft_s"] + exposed < 1.0
    assert host_bound["tpot_s"] == pytest.approx(1.0, rel=1e-9)
    assert host_bound["ttft_s"] == pytest.approx(1.0, rel=1e-9)


def test_prefix_cache_skips_whole_blocks(analysis_builder):
    """prefix_cache_share h: the first floor(h I / block) blocks are cached; the rest is prefilled after them
    (a chunk of I - cached tokens attending to the whole prompt): between inference()'s prefill of I - cached
    tokens and its prefill of I."""
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb")
    cached = (int(0.5 * 1000) // 16) * 16  # 496 tokens in 31 blocks of vLLM's 16
    s = a.serve(concurrency=1, input_len=1000, output_len=2, prefix_cache_share=0.5, num_requests=0, **ZERO)
    short = a.inference(batch_size_per_gpu=1, seq_len=1000 - cached, num_tokens_to_generate=1)["prefill_latency"]
    whole = a.inference(batch_size_per_gpu=1, seq_len=1000, num_tokens_to_generate=1)["prefill_latency"]
    assert short < s["ttft_s"] < whole


def test_one_client_of_one_token_is_inference_prefill(analysis_builder):
    """A prefill-only request (one output token) alone: its time to first token, and its end-to-end time, is
    inference()'s prefill (vLLM runs a 256-token prefill step in CUDA graphs, as inference() times it), and
    one client completes one request per prefill: it never waits for another's step."""
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", perf_model="calibrated")
    prefill = a.inference(batch_size_per_gpu=1, seq_len=IN, num_tokens_to_generate=1)["prefill_latency"]
    s = a.serve(concurrency=1, input_len=IN, output_len=1, num_requests=20, **ZERO)
    assert s["ttft_s"] == pytest.approx(prefill, rel=1e-5)
    assert s["e2e_s"] == pytest.approx(prefill, rel=1e-5)
    assert s["ttft_p99_s"] == pytest.approx(prefill, rel=1e-5)
    assert s["requests_per_s"] == pytest.approx(1 / prefill, rel=1e-5)
