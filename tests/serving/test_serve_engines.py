"""Engine profiles as data, and the KV pool sized as each engine sizes it (expectations from the
engines' own defaults, quoted in the profiles, and the model's shapes by hand)."""

from __future__ import annotations

import json

import pytest

from llm_analysis.serving.engine import FRAMEWORKS, PROFILE_DIR, engine_settings

FITTED = ("api_latency_s", "step_overhead_s", "step_overhead_per_seq_s", "benchmark_rounds")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_profile_value_states_its_source(framework):
    profile = json.loads((PROFILE_DIR / f"{framework}.json").read_text())
    assert profile["framework"] == framework
    entries = {k: v for k, v in profile.items() if isinstance(v, dict)}
    assert {"scheduling", "max_num_batched_tokens", "max_num_seqs", "memory_share", "block_size", "cuda_graphs",
            "kv_cache_dtype", "host_overlap", *FITTED} <= set(entries)
    for key, entry in entries.items():
        assert len(entry.get("source", "")) > 30, key
    overlap = profile["host_overlap"]["value"]
    assert isinstance(overlap, bool)
    for key in FITTED:
        # an overlapping engine's host step per sequence hides under the GPU's at the measured batches: stated
        # from a measurement, not fitted
        stated = overlap and key == "step_overhead_per_seq_s"
        assert profile[key]["source"].startswith("fitted") != stated, key
        assert profile[key]["value"] >= 0
    # fitted per engine, or marked "fitted": false with the measured reason it is not (fit_engine_profiles.py
    # skips those)
    for key in ("step_overhead_per_layer_s", "expert_spread_scale"):
        entry = profile[key]
        assert entry["value"] >= 0, key
        assert entry["source"].startswith("fitted") == entry.get("fitted", True), key


def _settings(analysis_builder, framework, gpu, dtype="w16a16e16", tp=1, **options):
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu=gpu, dtype=dtype, tp_size=tp)
    return engine_settings(a, framework, options)


@pytest.mark.parametrize("gpu,budget,seqs", [
    # vllm/engine/arg_utils.py get_batch_defaults (OpenAI server): >= 70 GiB and not an A100: 8192 / 1024
    ("h100-sxm-80gb", 8192, 1024), ("b200-180gb", 8192, 1024),
    ("a100-sxm-80gb", 2048, 256), ("a100-sxm-40gb", 2048, 256), ("l40s-48gb", 2048, 256)])
def test_vllm_defaults_by_gpu(analysis_builder, gpu, budget, seqs):
    e = _settings(analysis_builder, "vllm", gpu)
    assert (e.token_budget, e.max_num_seqs, e.memory_share, e.block_size) == (budget, seqs, 0.9, 16)
    assert e.mixed_batches and e.chunked_prefill and e.admission == "on_demand"


# SGLang v0.5.x ServerArgs._handle_gpu_memory_settings: mem_fraction_static = (GPU MiB - reserved) / GPU MiB,
# reserved = 512 + 1.5 x chunked_prefill_size + tp / 8 x 1024 + 2 x cuda_graph_max_bs MiB (at least 10 GiB above
# 60 GiB); chunked_prefill_size 8192 on H100 / H200, 16384 on B200; cuda_graph_max_bs 256 below tp 4, else 512
# (512 on B200). By hand: H100 tp1: (81920 - (512 + 12288 + 128 + 512)) / 81920 = 0.836
@pytest.mark.parametrize("gpu,tp,share", [
    ("h100-sxm-80gb", 1, 0.836),  # reserved 13440 MiB
    ("h100-sxm-80gb", 8, 0.819),  # 512 + 12288 + 1024 + 1024 = 14848 MiB of 81920
    ("h200-sxm-141gb", 8, 0.897),  # 14848 MiB of 144384
    ("b200-180gb", 4, 0.856)])  # 512 + 24576 + 512 + 1024 = 26624 MiB of 184320
def test_sglang_static_memory_share_by_gpu_memory_and_tp(analysis_builder, gpu, tp, share):
    e = _settings(analysis_builder, "sglang", gpu, tp=tp)
    assert e.memory_share == share and not e.mixed_batches


@pytest.mark.parametrize("gpu,tp,graph_max_batch", [("h100-sxm-80gb", 2, 256), ("h100-sxm-80gb", 4, 512),
                                                    ("b200-180gb", 1, 512), ("a100-sxm-40gb", 1, 32)])
def test_sglang_cuda_graph_max_batch_by_gpu_memory_and_tp(analysis_builder, gpu, tp, graph_max_batch):
    assert _settings(analysis_builder, "sglang", gpu, tp=tp).graph_decode_max_batch == graph_max_batch


@pytest.mark.parametrize("gpu,chunk", [("a10-pcie-28gb", 2048), ("h100-sxm-80gb", 8192), ("b200-180gb", 16384)])
def test_sglang_chunked_prefill_size_by_gpu_memory(analysis_builder, gpu, chunk):
    assert _settings(analysis_builder, "sglang", gpu).token_budget == chunk


@pytest.mark.parametrize("framework,gpu,dtype,kv_bytes", [
    ("trtllm", "h100-sxm-80gb", "fp8", 1.0),  # a ModelOpt FP8 checkpoint quantises its KV cache to FP8
    ("trtllm", "h100-sxm-80gb", "w16a16e16", 2.0),
    ("trtllm", "a100-sxm-80gb", "w8a8e16", 2.0),  # int8 weights: the model dtype
    # vLLM >= 0.13 (PR #29980): 'auto' takes the checkpoint's kv_cache_quant_algo; ModelOpt FP8 / NVFP4 state FP8
    ("vllm", "h100-sxm-80gb", "fp8", 1.0),
    ("vllm", "b200-180gb", "nvfp4", 1.0),
    ("vllm", "h100-sxm-80gb", "w16a16e16", 2.0),
    ("vllm", "b200-180gb", "w4a8e16-mxfp4", 2.0),  # gpt-oss's MXFP4 checkpoint states no KV quantisation
    # SGLang ModelRunner.configure_kv_cache_dtype: 'auto' takes FP8 when the checkpoint states
    # kv_cache_quant_algo FP8; every ModelOpt NVFP4 hf_quant_config.json aiconfigurator ships (17) does, the
    # vendors' own FP8 checkpoints its rows serve (DeepSeek-R1, Qwen3-235B-A22B-FP8, ...) do not
    ("sglang", "h100-sxm-80gb", "fp8", 2.0),
    ("sglang", "b200-180gb", "nvfp4", 1.0),
    ("sglang", "b200-180gb", "w4a8e16-mxfp4", 2.0)])
def test_default_kv_cache_dtype(analysis_builder, framework, gpu, dtype, kv_bytes):
    assert _settings(analysis_builder, framework, gpu, dtype).kv_cache_bytes == kv_bytes


def test_options_override_the_profile(analysis_builder):
    e = _settings(analysis_builder, "vllm", "h100-sxm-80gb", max_num_batched_tokens=2048, max_num_seqs=64,
                  gpu_memory_utilization=0.8, block_size=32, kv_cache_dtype="fp8")
    assert (e.token_budget, e.max_num_seqs, e.memory_share, e.block_size, e.kv_cache_bytes) == (2048, 64, 0.8, 32, 1.0)


GB = 1e9
LLAMA_8B_KV_BYTES_PER_TOKEN = 32 * 2 * 8 * 128 * 2  # layers x (K, V) x KV heads x head dim x bf16


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_kv_pool_by_hand(analysis_builder, framework):
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb")
    s = a.serve(concurrency=1, input_len=1024, output_len=128, framework=framework, num_requests=0)
    e = engine_settings(a, framework, {})
    mem, weights = 80 * 2**30, 2 * a.get_num_params_total()  # 16-bit weights
    per_block = LLAMA_8B_KV_BYTES_PER_TOKEN * e.block_size
    pool = s["kv_pool_bytes_per_gpu"]
    if framework == "sglang":  # mem_fraction_static holds weights and the KV pool
        assert pool == pytest.approx(0.836 * mem - weights, rel=1e-12)  # H100 tp1: 0.836 (above, by hand)
    else:
        # vLLM: 0.9 of all memory for weights, workspace and pool; TensorRT-LLM: 0.9 of what weights and
        # workspace leave. The workspace holds at least the sampler's float32 logits for max_num_seqs,
        # the CUDA-graph pool and the runtime's buffers (profile), and one token budget's residual stream
        floor = (e.max_num_seqs * 128256 * 4 + e.graph_pool_bytes + e.runtime_reserved_bytes
                 + e.token_budget * 4096 * 2)
        most = 0.9 * mem - weights - floor if framework == "vllm" else 0.9 * (mem - weights - floor)
        assert 0.95 * most < pool < most
    assert s["kv_pool_tokens_per_replica"] == int(pool // per_block) * e.block_size


def test_reserving_engines_hold_whole_requests_and_never_preempt(analysis_builder):
    """TensorRT-LLM reserves a request's whole length on admission (GUARANTEED_NO_EVICT): with a pool of
    B blocks of 32 tokens it runs floor(B / ceil((I + O) / 32)) requests and never preempts; vLLM takes
    blocks as requests grow, so its pool holds requests at their mean length I + O / 2, and preempts
    when they outgrow it."""
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb")
    kw = dict(concurrency=400, input_len=2000, output_len=2000, gpu_memory_utilization=0.4, block_size=32,
              num_requests=600)
    trt = a.serve(framework="trtllm", **kw)
    assert trt["max_running_requests_per_replica"] == trt["kv_pool_tokens_per_replica"] // 32 // 125  # 4000 / 32
    assert trt["preemptions"] == 0
    vllm = a.serve(framework="vllm", **kw)
    assert vllm["max_running_requests_per_replica"] == vllm["kv_pool_tokens_per_replica"] // 32 // 94  # 3000 / 32
    assert vllm["kv_occupancy"] > 0.8 and vllm["preemptions"] > 0


def test_a_multi_head_latent_cache_is_whole_on_every_gpu(analysis_builder):
    """MLA caches one latent (kv_lora_rank 512 + rope 64 per layer) per token that every TP rank keeps
    whole: DeepSeek-V2-Lite, 27 layers, bf16."""
    for tp in (1, 2):
        a = analysis_builder("deepseek-ai/DeepSeek-V2-Lite", gpu="h100-sxm-80gb", tp_size=tp)
        s = a.serve(concurrency=1, input_len=1024, output_len=128, framework="sglang", num_requests=0)
        assert s["kv_pool_tokens_per_replica"] == int(s["kv_pool_bytes_per_gpu"] // (27 * 576 * 2))


def test_sglang_admits_against_an_estimate_of_the_output_to_come(analysis_builder):
    """SGLang's PrefillAdder admits a request while the pool, less new_token_ratio (0.098 once it has decayed)
    x each running request's remaining output (counted up to 4096 tokens), holds the newcomer's prompt and
    output (up to 4096). By hand for I = 1000, O = 6000 on a pool of P one-token slots: a running request
    holds on average I + O / 2 = 4000 and keeps 0.098 x E[min(remaining, 4096)] free, E = 4096 - 4096^2 /
    (2 x 6000) = 2697.87; the newcomer needs 1000 + 4096; so n = 1 + floor((P - 5096) / (4000 + 264.39))."""
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb")
    s = a.serve(concurrency=8, input_len=1000, output_len=6000, framework="sglang", gpu_memory_utilization=0.3,
                num_requests=0)
    pool = s["kv_pool_tokens_per_replica"]
    assert s["block_size"] == 1
    remaining = 4096 - 4096 ** 2 / (2 * 6000)
    assert s["max_running_requests_per_replica"] == 1 + int((pool - 5096) // (4000 + 0.098 * remaining))
    # fewer than a pool of requests at their mean length holds (vLLM-style admission): the estimate binds
    assert s["max_running_requests_per_replica"] < pool // 4000


def test_a_request_holds_whole_blocks(analysis_builder):
    """A request of I + O tokens holds ceil((I + O) / block_size) blocks: 33 tokens in blocks of 32 take 2,
    so a reserving engine (TensorRT-LLM) with a pool of B blocks runs floor(B / 2) of them, not B (a pool
    small enough that max_num_seqs does not cap either)."""
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb")
    s = a.serve(framework="trtllm", concurrency=8, input_len=20, output_len=13, block_size=32,
                gpu_memory_utilization=0.2, num_requests=0)
    blocks = s["kv_pool_tokens_per_replica"] // 32
    assert blocks // 2 < s["max_num_seqs"] < blocks  # the pool decides, and one block each would not fit
    assert s["max_running_requests_per_replica"] == blocks // 2


@pytest.mark.parametrize("framework,decoders,chunks", [
    # vLLM (mixed steps, chunked prefill): the running decodes take their tokens of the 2048 budget first
    # and the prompt's chunk fills the rest (vLLM docs, "Chunked prefill": decode requests are scheduled
    # first, then prefills in the leftover budget): 5000 tokens in chunks of 2048 - 48 = 2000
    ("vllm", 48, [(2000, 0), (2000, 2000), (1000, 4000)]),
    ("vllm", 0, [(2048, 0), (2048, 2048), (904, 4096)]),
    # SGLang prefills in steps of their own (the decodes wait): the whole budget, whatever decodes
    ("sglang", 48, [(2048, 0), (2048, 2048), (904, 4096)]),
])
def test_a_prompts_chunks_take_the_budget_the_decodes_leave(analysis_builder, framework, decoders, chunks):
    from llm_analysis.serving.steady_state import RequestShape, prefill_chunks
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb")
    e = engine_settings(a, framework, {"max_num_batched_tokens": 2048})
    assert prefill_chunks(e, RequestShape(5000, 100, 0), decoders) == chunks
