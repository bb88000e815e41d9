"""The KV pool of models with sliding-window layers, as each engine caches them (serving/kv_pool.py
`sliding_window_terms`; the rules and their sources are in the engine profiles' `sliding_window_cache`):

- vLLM's hybrid manager groups layers of one type by g (the fewest of a type; the most when below 1.5 x the
  fewest), pads each type to whole groups; a full group holds every token, a sliding group the blocks of its
  last window - 1 tokens and the current one (ceil((window - 1) / block) + 1 blocks);
- SGLang gives gpt-oss (and a few others) a window pool of 0.8 x the full layers' tokens from the same budget,
  and caches Gemma 2 / 3 as full attention;
- TensorRT-LLM, without a per-layer attention window, caches every layer as full attention.

Expected bytes are written out by hand from the published configs (gpt-oss-120b: 36 layers alternating
sliding (window 128) and full, 8 KV heads of 64; Gemma-3-27B: 62 layers, every sixth full, window 1024,
16 KV heads of 128), not taken from the code."""

from __future__ import annotations

import math

import pytest

from builders import build_analysis
from llm_analysis.config import ParallelismConfig
from llm_analysis.errors import ConfigError
from llm_analysis.serving import simulation
from llm_analysis.serving.engine import engine_settings
from llm_analysis.serving.kv_pool import sliding_window_terms
from llm_analysis.serving.rank import build_rank
from llm_analysis.serving.workload import make_workload

GPT_OSS_LAYER_BYTES = 8 * (64 + 64) * 2  # per token per layer: 8 KV heads x (K + V of 64) x bf16, one GPU
GEMMA3_LAYER_BYTES = 16 * (128 + 128) * 2


def _terms(model, framework, longest=4096, dtype="w16a16e16", **options):
    a = build_analysis(model, gpu="h100-sxm-80gb", dtype=dtype)
    engine = engine_settings(a, framework, options)
    terms = sliding_window_terms(a, a.describer_for(engine.kv_cache_bytes), engine, longest)
    return (None if terms is None else tuple(terms[:2])), engine  # (bytes per token, bytes per request)


def test_vllm_groups_gpt_oss_by_hand():
    (per_token, per_request), engine = _terms("openai/gpt-oss-120b", "vllm", dtype="w4a16")
    assert engine.kv_cache_bytes == 2 and engine.block_size == 16
    # 18 full and 18 sliding layers: groups of 18, one of each; the sliding group keeps ceil(127 / 16) + 1 = 9
    # blocks of 16 tokens
    assert per_token == 18 * GPT_OSS_LAYER_BYTES
    assert per_request == 18 * GPT_OSS_LAYER_BYTES * 9 * 16


def test_vllm_groups_gemma3_pad_the_sliding_layers():
    (per_token, per_request), _ = _terms("google/gemma-3-27b-pt", "vllm")
    # 10 full, 52 sliding: groups of 10 (52 is not below 1.5 x 10); the sliding layers fill 6 groups (60 pages,
    # 8 of them padding), each holding ceil(1023 / 16) + 1 = 65 blocks
    assert per_token == 10 * GEMMA3_LAYER_BYTES
    assert per_request == 60 * GEMMA3_LAYER_BYTES * 65 * 16


def test_vllm_short_requests_hold_their_own_length_of_window():
    (_, per_request), _ = _terms("google/gemma-3-27b-pt", "vllm", longest=300)
    assert per_request == 60 * GEMMA3_LAYER_BYTES * math.ceil(300 / 16) * 16


def test_vllm_group_size_is_the_larger_count_when_close():
    """12 full and 16 sliding layers: 16 < 1.5 x 12, so groups of 16; the full layers pad to one group of 16."""
    base = build_analysis("openai/gpt-oss-20b", gpu="h100-sxm-80gb", dtype="w4a16").model_config
    types = ["full_attention"] * 12 + ["sliding_attention"] * 16
    model = type(base)(**{**base.model_dump(exclude_unset=True), "num_layers": 28, "layer_types": types})
    (per_token, per_request), _ = _terms(model, "vllm", dtype="w4a16")
    assert per_token == 16 * GPT_OSS_LAYER_BYTES
    assert per_request == 16 * GPT_OSS_LAYER_BYTES * 9 * 16


def test_sglang_window_pool_for_gpt_oss_and_full_cache_for_gemma3():
    (per_token, per_request), engine = _terms("openai/gpt-oss-120b", "sglang", dtype="w4a16")
    assert engine.window_pool_ratio == 0.8
    assert per_token == pytest.approx(18 * GPT_OSS_LAYER_BYTES + 0.8 * 18 * GPT_OSS_LAYER_BYTES, rel=1e-12)
    assert per_request == 0
    assert _terms("google/gemma-3-27b-pt", "sglang")[0] is None  # not one of SGLang's hybrid-SWA architectures


def test_trtllm_and_the_full_option_cache_every_layer():
    assert _terms("openai/gpt-oss-120b", "trtllm", dtype="w4a16")[0] is None
    assert _terms("openai/gpt-oss-120b", "vllm", dtype="w4a16", sliding_window_cache="full")[0] is None


def test_serve_pool_follows_the_rule():
    """serve()'s pool in tokens and its running requests follow the per-token and per-request bytes above."""
    a = build_analysis("openai/gpt-oss-120b", gpu="h100-sxm-80gb", dtype="w4a16", perf_model="calibrated")
    grouped = a.serve(concurrency=512, input_len=2048, output_len=512, num_requests=0)
    full = a.serve(concurrency=512, input_len=2048, output_len=512, num_requests=0, sliding_window_cache="full")
    pool = grouped["kv_pool_bytes_per_gpu"]
    assert pool == full["kv_pool_bytes_per_gpu"]  # the same memory, held differently
    assert grouped["kv_pool_tokens_per_replica"] == pool // (18 * GPT_OSS_LAYER_BYTES * 16) * 16
    assert full["kv_pool_tokens_per_replica"] == pool // (36 * GPT_OSS_LAYER_BYTES * 16) * 16
    # requests grow to 2,560 tokens: the grouped pool holds close to twice as many (each also keeps 144
    # window tokens in its sliding group)
    assert 1.7 < grouped["max_running_requests_per_replica"] / full["max_running_requests_per_replica"] < 2.0


def test_bad_choice_is_refused():
    a = build_analysis("openai/gpt-oss-120b", gpu="h100-sxm-80gb", dtype="w4a16")
    with pytest.raises(ConfigError, match="sliding_window_cache = 'window_pool' is not valid"):
        a.serve(concurrency=8, input_len=128, output_len=16, sliding_window_cache="window_pool")  # (vLLM's)
    with pytest.raises(ConfigError, match="sliding_window_cache = 'sliding' is not valid"):
        a.serve(concurrency=8, input_len=128, output_len=16, framework="sglang", sliding_window_cache="sliding")


def test_simulation_charges_each_request_its_window_blocks(monkeypatch):
    """The simulation's pool holds each running request's tokens and its sliding group's 144 window tokens
    (in tokens of the grouped pool: 18 layers each); a run that forgot the window would admit more requests
    than the pool holds. Checked after every decode stretch (a prefill step may overshoot until the next
    preemption) of a run the pool binds (a small memory share)."""
    a = build_analysis("openai/gpt-oss-120b", gpu="h100-sxm-80gb", dtype="w4a16", perf_model="calibrated")
    a = a.with_conventions(a.conventions_named(None))  # as serve() runs it
    lengths = make_workload(a.model_config, 256, None, 512, 256, None).lengths
    replica, _ = build_rank(a, a.parallelism_config, "vllm",
                            {"num_requests": 300, "gpu_memory_utilization": 0.8}, lengths)
    capacity = replica.pool.capacity_tokens
    held = []
    stretch = simulation._Replica.decode_stretch

    def checked(rep, *args, **kw):
        stretch(rep, *args, **kw)
        tokens = sum(r.past + (rep.ticks - r.join_tick if r.finish_tick >= 0 else 0) for r in rep.running.values())
        held.append(tokens + 144 * len(rep.running))

    monkeypatch.setattr(simulation._Replica, "decode_stretch", checked)
    replica.simulate(concurrency=256, seed=1)
    assert capacity < 200 * 768  # the pool, not the 256 clients, binds
    assert max(held) <= capacity
    assert max(held) > 0.95 * capacity  # and the run filled it


def test_the_notes_say_how_the_sliding_layers_hold_the_cache():
    a = build_analysis("openai/gpt-oss-120b", gpu="h100-sxm-80gb", dtype="w4a16", perf_model="calibrated")

    def notes(model_analysis, framework):
        return " ".join(model_analysis.serve(concurrency=8, input_len=512, output_len=64, framework=framework,
                                             num_requests=0)["notes"])
    assert "vLLM's hybrid KV cache manager" in notes(a, "vllm")
    assert "SGLang's hybrid SWA pool" in notes(a, "sglang")
    assert "sliding-window layers hold every token" in notes(a, "trtllm")
    llama = build_analysis("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", perf_model="calibrated")
    assert "sliding-window" not in notes(llama, "trtllm")


def test_sglang_window_pool_binds_short_requests():
    """Gemma 4 (SGLang window pool; window 1,024, ratio 0.8): a request of 640 tokens holds 640 in each pool; the
    window pool is 0.8 x the full pool's tokens, so it fits 0.8 x as many: per full-pool token the cost is
    1 / 0.8 of the long-request cost. A 4,096-token request holds 1,024 of the window pool, 1,024 / 0.8 = 1,280
    below its 4,096 in the full pool: the full pool binds."""
    (long_token, _), _ = _terms("google/gemma-4-26B-A4B", "sglang", longest=4096)
    (short_token, _), _ = _terms("google/gemma-4-26B-A4B", "sglang", longest=640)
    assert short_token == pytest.approx(long_token / 0.8, rel=1e-12)
    (edge_token, _), _ = _terms("google/gemma-4-26B-A4B", "sglang", longest=1280)  # 1,024 / 0.8: both bind
    assert edge_token == pytest.approx(long_token, rel=1e-12)


@pytest.mark.parametrize("framework", ["vllm", "sglang"])
def test_a_disaggregated_transfer_moves_the_real_cache(framework):
    """gpt-oss-120b's prompt of 2,048 tokens moves 18 full layers x 2,048 tokens and 18 sliding layers x its last
    128 tokens (the window) from a tp-1 prefill GPU to a tp-1 decode GPU, whatever the pool's own accounting
    (vLLM's window blocks, SGLang's 0.8 share of a window pool per token)."""
    a = build_analysis("openai/gpt-oss-120b", gpu="h100-sxm-80gb", dtype="w4a16", perf_model="calibrated")
    one = ParallelismConfig(tp_size=1)
    s = a.serve(concurrency=4, input_len=2048, output_len=64, framework=framework,
                disaggregated={"prefill": {"workers": 1, "parallelism": one},
                               "decode": {"workers": 1, "parallelism": one}})
    assert s["kv_transfer_bytes_per_gpu"] == 18 * GPT_OSS_LAYER_BYTES * 2048 + 18 * GPT_OSS_LAYER_BYTES * 128
