"""Inference analysis: worked figures of the seeds, published decode speeds,
hand-derived communication terms, per-step KV growth, max batch, invariants."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import assume, given, settings, strategies as st

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.planner.capacity import plan_capacity
from llm_analysis.config import (DtypeConfig, GPUConfig, ParallelismConfig, get_dtype_config_by_name,
                                 get_gpu_config_by_name, get_model_config_by_name)
from llm_analysis.errors import ConfigError, DoesNotFitError
from llm_analysis.inference import sum_max_affine
from llm_analysis.model import Phase
from llm_analysis.model.records import Conventions

VALIDATION = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "validation" / "published_measurements.json"


def make(model, gpu, dtype="w16a16e16", **par):
    return LLMAnalysis(get_model_config_by_name(model), get_gpu_config_by_name(gpu) if isinstance(gpu, str) else gpu,
                       get_dtype_config_by_name(dtype) if isinstance(dtype, str) else dtype, ParallelismConfig(**par))


# --------------------------------------------------------------------------- seed 000
def test_seed000_llama2_70b_a100_40gb_tp8():
    """seeds/000 (llm_profiler README): Llama-2-70B, A100-SXM 40 GB, tp 8, batch 20,
    prompt 1024, 1024 generated: KV cache per GPU 1.68 GB, weights ~17 GB, decode max batch 271."""
    a = make("upstage_Llama-2-70b-instruct-v2", "a100-sxm-40gb", tp_size=8)
    s = a.inference(batch_size_per_gpu=20, seq_len=1024, num_tokens_to_generate=1024)
    # hand derivation: batch x context x layers x (K and V) x kv heads per GPU x head dim x 2 bytes
    kv_hand = 20 * (1024 + 1024) * 80 * 2 * (8 // 8) * 128 * 2
    assert s["kv_cache_memory_per_gpu"] == kv_hand
    assert s["kv_cache_memory_per_gpu"] / 1e9 == pytest.approx(1.68, abs=0.005)  # the seed's figure
    # weights: 68.98e9 params, all sharded 8 ways except norms (replicated): with the
    # real untied head the seed's 17.18 GB (68.71e9 params, tied) becomes ~17.25 GB
    params = 68_976_648_192
    norm_params = (2 * 80 + 1) * 8192
    weights_hand = (params - norm_params) * 2 / 8 + norm_params * 2
    assert s["weight_memory_per_gpu"] == pytest.approx(weights_hand, rel=1e-6)
    assert s["weight_memory_per_gpu"] / 1e9 == pytest.approx(17.18, rel=0.01)
    # decode max batch: the A100's 40 GiB of HBM less the weights, over one sequence's KV cache
    # (2048 tokens) plus its decode activations (a few hidden-size vectors: under 64 KiB). The seed
    # prints 271, dividing 40e9 bytes; an "40 GB" A100 holds 40 GiB (CUDA reports 42.41e9 bytes).
    free_hand = 40 * 2**30 - weights_hand
    kv_per_seq = kv_hand / 20
    assert math.floor(free_hand / (kv_per_seq + 65536)) <= s["decode_max_batch_size_per_gpu"] \
        <= math.floor(free_hand / kv_per_seq)
    assert s["decode_max_batch_size_per_gpu"] == 306
    # 19.93 of 42.95 GB used: well under the 90% a serving framework leaves for itself, no note
    assert not any("may not fit in practice" in n for n in s["notes"])


# --------------------------------------------------------------------------- seed 002
def test_seed002_per_token_kv_bytes_llama_13b_65b():
    """seeds/002 §2.3: 'each token consumes about 1 MB' (LLaMA-13B) and 'about 2.5 MB'
    (LLaMA-65B) of KV cache in fp16. Exact: 2 x layers x hidden x 2 bytes."""
    a13 = make("decapoda-research_llama-13b-hf", "v100-sxm-32gb")
    a65 = make("decapoda-research_llama-65b-hf", "v100-sxm-32gb")
    kv13, kv65 = a13.get_memory_kv_cache_per_gpu(1, 1), a65.get_memory_kv_cache_per_gpu(1, 1)
    assert kv13 == 2 * 40 * 5120 * 2
    assert kv65 == 2 * 80 * 8192 * 2
    assert kv13 / 1e6 == pytest.approx(1.0, rel=0.25)  # the seed rounds 0.82 MB up to "about 1 MB"
    assert kv65 / 1e6 == pytest.approx(2.5, rel=0.05)


def test_seed002_batch_upper_bound_llama13b_8xv100():
    """seeds/002 §2.3: batch upper bound of LLaMA-13B on 8 x V100-32GB at context 2048 =
    (total memory - weights) / memory per request. The seed gets 115.7 with its rounded
    1 MB/token; with exact per-token bytes the same formula gives the hand bound below, and
    ours may only be lower by the (small) activation memory."""
    a = make("decapoda-research_llama-13b-hf", "v100-sxm-32gb", tp_size=8)
    s = a.inference(batch_size_per_gpu=1, seq_len=512, num_tokens_to_generate=1536)
    weights_total = a.get_num_params_total() * 2
    per_request = 2048 * 2 * 40 * 5120 * 2
    hand_bound = (8 * 32 * 2**30 - weights_total) / per_request  # a "32 GB" V100 holds 32 GiB of HBM2
    seed_bound = (32 * 8 - 24.6) / 2  # the seed's own arithmetic with 1 MB/token
    assert s["decode_max_batch_size_per_gpu"] <= hand_bound
    assert s["decode_max_batch_size_per_gpu"] >= math.floor(hand_bound) - 2
    assert s["decode_max_batch_size_per_gpu"] > seed_bound  # exact per-token bytes are smaller than 1 MB


# --------------------------------------------------------------------------- published decode speeds
_MODELS = {"Llama-2-7B": "meta-llama_Llama-2-7b-hf", "Llama-2-70B": "meta-llama_Llama-2-70b-hf",
           "Llama-3.1-8B": "meta-llama_Llama-3.1-8B", "Llama-3.1-70B": "meta-llama_Llama-3.1-70B",
           "Llama-3.1-405B": "meta-llama_Llama-3.1-405B"}


def _gpu_for(record) -> GPUConfig:
    desc = record["setup"]["gpu"]
    if "MI250X" in desc:
        # one GCD is half of the MI250X package (AMD spec: 2 GCDs, 3.2768 TB/s, 128 GB in all)
        pkg = get_gpu_config_by_name("mi250x-128gb")
        return pkg.model_copy(update=dict(name="mi250x-one-gcd", mem_per_GPU_in_GB=pkg.mem_per_GPU_in_GB / 2,
                                          hbm_bandwidth_in_GB_per_sec=pkg.hbm_bandwidth_in_GB_per_sec / 2,
                                          peak_fp16_TFLOPS=pkg.peak_fp16_TFLOPS / 2))
    assert "A100-SXM4-80GB" in desc, desc
    return get_gpu_config_by_name("a100-sxm-80gb")


def _dtype_for(record) -> DtypeConfig:
    w = record["setup"]["weights"] if "weights" in record["setup"] else ""
    rid = record["id"]
    if "4-bit" in rid or "int4" in w:
        return DtypeConfig(name="w4a16-g32", weight_bits=4, weight_format="int", quant_group_size=32)
    if "8-bit" in rid or "int8" in w:
        return DtypeConfig(name="w8a16", weight_bits=8, weight_format="int")
    return DtypeConfig()


def _decode_records():
    if not VALIDATION.exists():
        return []
    return [r for r in json.loads(VALIDATION.read_text())
            if r["kind"] == "inference" and r["setup"].get("model") in _MODELS]


@pytest.mark.skipif(not VALIDATION.exists(), reason="shared/validation not present")
@pytest.mark.parametrize("record", _decode_records(), ids=lambda r: r["id"])
def test_published_decode_is_never_faster_than_our_lower_bound(record):
    """gpt-fast (github:pytorch-labs/gpt-fast README @c9f683edd4): batch-1 decode is
    memory-bound; with efficiencies of 1 our time per token is a lower bound, so it must not
    exceed the measured time. OOM records must not fit."""
    setup = record["setup"]
    tp = setup.get("tp", 1)
    a = LLMAnalysis(get_model_config_by_name(_MODELS[setup["model"]]), _gpu_for(record), _dtype_for(record),
                    ParallelismConfig(tp_size=tp))
    prompt = setup.get("input_len", 5)
    if record["measured"].get("oom"):
        with pytest.raises(DoesNotFitError):
            a.inference(batch_size_per_gpu=1, seq_len=prompt, num_tokens_to_generate=200)
        return
    s = a.inference(batch_size_per_gpu=1, seq_len=prompt, num_tokens_to_generate=200)
    measured_s = 1 / record["measured"]["decode_tokens_per_s"]
    ours_s = s["time_per_output_token"]
    implied = ours_s / measured_s  # fraction of HBM bandwidth the implementation reached
    print(f"{record['id']}: ours {ours_s * 1e3:.2f} ms/token, measured {measured_s * 1e3:.2f} ms -> "
          f"implied efficiency {implied:.2f}")
    assert ours_s <= measured_s
    assert implied > 0.3  # and not absurdly optimistic


# --------------------------------------------------------------------------- communication
def _tp_allreduce_s(a, tokens):
    return a.get_latency_fwd_per_tp_comm(tokens, 1, 2)


def test_tp_allreduce_nvlink_vs_pcie_hand_derived():
    gpu = get_gpu_config_by_name("a100-sxm-80gb")
    h = 8192
    for link, bw in (("nvlink", 300.0), ("pcie", 32.0)):
        g = gpu.model_copy(update=dict(intra_node_link=link, intra_node_bandwidth_in_GB_per_sec=bw))
        a = LLMAnalysis(get_model_config_by_name("meta-llama_Llama-2-70b-hf"), g, DtypeConfig(),
                        ParallelismConfig(tp_size=8))
        tokens = 4096
        bytes_ = tokens * h * 2
        hand = max(g.intra_node_min_message_latency, 2 * 7 / 8 * bytes_ / (bw * 1e9) + 2 * 7 * g.intra_node_hop_latency)
        assert _tp_allreduce_s(a, tokens) == pytest.approx(hand, rel=1e-9)
    # small messages are latency-bound: the floor applies
    a = make("meta-llama_Llama-2-70b-hf", gpu, tp_size=2)
    assert _tp_allreduce_s(a, 1) == pytest.approx(max(gpu.intra_node_min_message_latency,
                                                      2 * 1 / 2 * 8192 * 2 / 300e9 + 2 * gpu.intra_node_hop_latency))


def test_tp_group_spanning_nodes_uses_the_network():
    gpu = get_gpu_config_by_name("a100-sxm-80gb")
    a = make("meta-llama_Llama-3.1-405B", gpu, tp_size=16)  # 16 > 8 GPUs per node
    bytes_ = 4096 * 16384 * 2
    # NCCL's hierarchy: 2 nodes x 8 ranks; the 8 NICs of a node carry its share together while the
    # 8 ranks of a node reduce over NVLink; one tree step across the 2 nodes each way, and the node's ring of
    # 8 ranks, 7 hops each way (an A100's NVSwitch does not reduce: no NVLS)
    net_s = 2 * 1 / 2 * bytes_ / (8 * gpu.inter_node_bandwidth_in_GB_per_sec * 1e9)
    nvlink_s = 2 * 7 / 8 * bytes_ / (gpu.intra_node_bandwidth_in_GB_per_sec * 1e9)
    hand = max(gpu.inter_node_min_message_latency, max(net_s, nvlink_s) + 2 * gpu.inter_node_hop_latency
               + 2 * 7 * gpu.intra_node_hop_latency)
    assert _tp_allreduce_s(a, 4096) == pytest.approx(hand, rel=1e-9)


def test_a40_bridge_joins_pairs_only():
    """A40: the NVLink bridge joins two GPUs (112.5 GB/s); a group of 4 talks over PCIe."""
    gpu = get_gpu_config_by_name("a40-48gb")
    assert gpu.fast_link_group_size == 2
    a2 = make("meta-llama_Llama-2-13b-hf", gpu, tp_size=2)
    a4 = make("meta-llama_Llama-2-13b-hf", gpu, tp_size=4)
    bytes_ = 8192 * 5120 * 2
    assert _tp_allreduce_s(a2, 8192) == pytest.approx(
        2 * 1 / 2 * bytes_ / (gpu.intra_node_bandwidth_in_GB_per_sec * 1e9) + 2 * gpu.intra_node_hop_latency, rel=1e-9)
    assert _tp_allreduce_s(a4, 8192) == pytest.approx(
        2 * 3 / 4 * bytes_ / (gpu.pcie_bandwidth_in_GB_per_sec * 1e9) + 6 * gpu.intra_node_hop_latency, rel=1e-9)


# --------------------------------------------------------------------------- decode steps
def test_sum_max_affine_matches_brute_force():
    for a0, a1, b0, b1, n in [(1, 2, 5, 1, 10), (5, -1, 0, 1, 12), (3, 0, 3, 0, 4), (0, 1, 10, 0, 30), (2, 1, 1, 1, 7)]:
        brute = sum(max(a0 + a1 * k, b0 + b1 * k) for k in range(n))
        assert sum(sum_max_affine(a0, a1, b0, b1, n)) == pytest.approx(brute)


@pytest.mark.parametrize("model,batch", [("meta-llama_Llama-3.1-8B", 64), ("google_gemma-2-2b", 32),
                                         ("mistralai_Mixtral-8x7B-v0.1", 8)])
def test_closed_form_decode_equals_step_by_step_sum(model, batch):
    """The closed-form sum over decode steps equals timing every step (context seq+i), each step's
    operators as inference() describes them (its serving conventions)."""
    a = make(model, "h100-sxm-80gb", tp_size=2)
    s, n = 3900, 400  # crosses Gemma 2's 4096-token window
    summary = a.inference(batch_size_per_gpu=batch, seq_len=s, num_tokens_to_generate=n)
    served = a.with_conventions(Conventions.named("serving"))
    brute = sum(served.weighted_time_s(served.describer.weighted_ops(Phase("decode", batch, 1, s + i)))
                for i in range(1, n))
    assert summary["total_decode_latency"] == pytest.approx(brute, rel=1e-9)


def test_late_tokens_cost_more_than_early_ones():
    a = make("meta-llama_Llama-3.1-8B", "h100-sxm-80gb")
    s = a.inference(batch_size_per_gpu=32, seq_len=128, num_tokens_to_generate=8000)
    assert s["decode_last_step_latency"] > s["decode_first_step_latency"]
    # the step at context c reads c tokens of KV: hand-derive the growth of KV bytes read
    kv_per_token = 32 * 2 * 8 * 128 * 2 * 32  # layers x (K,V) x kv heads x head dim x bytes x batch
    grown = (8000 - 1) * kv_per_token  # extra bytes at the last step vs the first
    bw = a.get_gpu_hbm_bandwidth() * 1e9
    assert s["decode_last_step_latency"] - s["decode_first_step_latency"] == pytest.approx(grown / bw, rel=0.02)


def test_long_generation_is_cheap_to_analyse():
    import time
    a = make("meta-llama_Llama-3.1-8B", "h100-sxm-80gb")
    t = time.perf_counter()
    s = a.inference(batch_size_per_gpu=1, seq_len=1000, num_tokens_to_generate=100_000)
    assert time.perf_counter() - t < 0.5  # no Python loop over tokens
    assert s["total_decode_latency"] > 0


def test_without_kv_cache_each_step_recomputes_the_context():
    a = make("meta-llama_Llama-3.1-8B", "h100-sxm-80gb")
    with_cache = a.inference(batch_size_per_gpu=1, seq_len=512, num_tokens_to_generate=64)
    without = a.inference(batch_size_per_gpu=1, seq_len=512, num_tokens_to_generate=64, use_kv_cache=False)
    assert without["total_decode_latency"] > with_cache["total_decode_latency"]
    # each of the 63 steps is at least a compute-bound forward over >= 513 tokens
    floor = 63 * a.get_num_flops_fwd_total(1, 513) / (a.get_TFLOPS_per_gpu() * 1e12)
    assert without["total_decode_latency"] >= floor
    assert without["kv_cache_memory_per_gpu"] == 0


# --------------------------------------------------------------------------- MoE
def test_moe_decode_reads_only_routed_experts():
    """Mixtral batch 1: each layer reads 2 of 8 experts (top-2), i.e. E(1-(1-k/E)^1) = 2."""
    a = make("mistralai_Mixtral-8x7B-v0.1", "h100-sxm-80gb", tp_size=2)
    ops = [o for n, o in a.describer.weighted_ops(Phase("decode", 1, 1, 100)) if o.name == "expert_up_proj"]
    op = ops[0]
    one_expert_weight_bytes = 4096 * 14336 * 2 / 2  # per GPU with tp 2
    weight_read = op.bytes_read_per_gpu - 1 * 2 * 4096 * 2  # minus the activations read (k=2 token copies)
    assert weight_read == pytest.approx(2 * one_expert_weight_bytes, rel=1e-9)
    big = [o for n, o in a.describer.weighted_ops(Phase("decode", 256, 1, 100)) if o.name == "expert_up_proj"][0]
    assert big.bytes_read_per_gpu > 3.9 * op.bytes_read_per_gpu  # nearly all 8 experts at batch 256


# --------------------------------------------------------------------------- fitting
def test_max_batch_fits_and_one_more_does_not():
    a = make("meta-llama_Llama-3.1-8B", "a100-sxm-40gb")
    s = a.inference(batch_size_per_gpu=1, seq_len=2048, num_tokens_to_generate=512)
    b = min(s["decode_max_batch_size_per_gpu"], s["prefill_max_batch_size_per_gpu"])
    a.inference(batch_size_per_gpu=b, seq_len=2048, num_tokens_to_generate=512)
    with pytest.raises(DoesNotFitError) as e:
        a.inference(batch_size_per_gpu=b + 1, seq_len=2048, num_tokens_to_generate=512)
    assert e.value.max_batch_size == b
    assert "Largest batch that fits" in str(e.value)


def test_weights_that_do_not_fit_get_numbers_and_advice():
    a = make("meta-llama_Llama-2-70b-hf", "a100-sxm-40gb")
    with pytest.raises(DoesNotFitError) as e:
        a.inference()
    msg = str(e.value)
    # 69.0e9 parameters x 2 bytes = 138 GB: over tp 2, 69 GB per GPU still exceeds the 42.95 GB; over tp 4, 34.5 GB
    # fits: the suggestion is the split whose weights fit (round 66; before: tp 2, the next split)
    assert "GB" in msg and "tp_size=4" in msg and "tp_size=2" not in msg and "w4a16e16" in msg
    assert e.value.needed_bytes > e.value.available_bytes
    assert isinstance(e.value, ValueError)


def test_bad_inference_input_is_a_clear_error():
    a = make("meta-llama_Llama-3.1-8B", "h100-sxm-80gb")
    for kwargs, field in [({"batch_size_per_gpu": 0}, "batch_size_per_gpu"), ({"seq_len": -5}, "seq_len"),
                          ({"num_tokens_to_generate": 0}, "num_tokens_to_generate"),
                          ({"kv_cache_dtype_bytes": 0}, "kv_cache_dtype_bytes"), ({"ds_zero": 7}, "ds_zero")]:
        with pytest.raises(ConfigError, match=field):
            a.inference(**kwargs)


def test_cost_per_1k_tokens_hand_derived():
    a = make("meta-llama_Llama-3.1-8B", "h100-sxm-80gb", tp_size=2)
    s = a.inference(batch_size_per_gpu=8, seq_len=512, num_tokens_to_generate=128, cost_per_gpu_hour=2.0)
    dollars_per_s = 2.0 * 2 / 3600  # $2 per GPU-hour, two GPUs
    assert s["total_cost_per_1k_tokens"] == pytest.approx(dollars_per_s * s["total_latency"] / (8 * 128) * 1000)
    # a prefill serves 8 x 512 prompt tokens; a decode step makes one token for each of the 8 sequences
    assert s["prefill_cost_per_1k_tokens"] == pytest.approx(dollars_per_s * s["prefill_latency"] / (8 * 512) * 1000)
    assert s["decode_cost_per_1k_tokens"] == pytest.approx(dollars_per_s * s["decode_latency"] / 8 * 1000)


def test_per_token_figures_follow_their_definitions():
    """A request of n output tokens: the first comes from the prefill, the other n - 1 from decode steps, so
    the time per output token is the decode total over n - 1 steps; the batch makes b x n tokens in the
    total latency, b x s prompt tokens in the prefill and b tokens per decode step."""
    a = make("meta-llama_Llama-3.1-8B", "h100-sxm-80gb", tp_size=2)
    b, s, n = 8, 512, 128
    r = a.inference(batch_size_per_gpu=b, seq_len=s, num_tokens_to_generate=n)
    assert r["decode_latency"] == pytest.approx(r["total_decode_latency"] / (n - 1), rel=1e-12)
    assert r["total_latency"] == pytest.approx(r["prefill_latency"] + r["total_decode_latency"], rel=1e-12)
    assert r["total_tokens_per_sec"] == pytest.approx(b * n / r["total_latency"], rel=1e-12)
    assert r["prefill_tokens_per_sec"] == pytest.approx(b * s / r["prefill_latency"], rel=1e-12)
    assert r["decode_tokens_per_sec"] == pytest.approx(b / r["decode_latency"], rel=1e-12)
    assert r["total_per_token_latency"] == pytest.approx(r["total_latency"] / n, rel=1e-12)


# --------------------------------------------------------------------------- capacity
def test_capacity_plan_is_consistent():
    r = plan_capacity(get_model_config_by_name("decapoda-research_llama-13b-hf"), get_gpu_config_by_name("v100-sxm-32gb"),
                      get_dtype_config_by_name("w16a16e16"), 512, 1536, 10_000)
    best = r["best"]
    assert best["replicas"] * best["batch_per_replica"] >= 10_000
    assert best["num_gpus"] == best["replicas"] * best["tp_size"] * best["pp_size"]
    assert best["num_gpus"] == min(c["num_gpus"] for c in r["candidates"])
    # the seed's theoretical figure with 1 MB/token is 10000 / 115.7 = 87 nodes of 8 V100s;
    # exact KV bytes (0.82 MB/token) need fewer
    assert best["num_nodes"] <= 87
    tight = plan_capacity(get_model_config_by_name("decapoda-research_llama-13b-hf"),
                          get_gpu_config_by_name("v100-sxm-32gb"), get_dtype_config_by_name("w16a16e16"), 512, 1536,
                          10_000, per_token_latency_target_s=0.02)
    assert tight["best"]["time_per_output_token"] <= 0.02
    assert tight["best"]["num_gpus"] >= best["num_gpus"]


# --------------------------------------------------------------------------- invariants
_MODELS_H = ["meta-llama_Llama-3.1-8B", "mistralai_Mixtral-8x7B-v0.1", "google_gemma-2-9b", "deepseek-ai_DeepSeek-V2-Lite",
             "gpt2", "tiiuae_falcon-7b", "Qwen_Qwen3-30B-A3B"]
_ANALYSES = {}


def _analysis(name, tp):
    if get_model_config_by_name(name).n_head % tp:
        tp = 1  # e.g. Falcon-7B's 71 heads admit no tensor parallelism
    key = (name, tp)
    if key not in _ANALYSES:
        _ANALYSES[key] = make(name, "h200-sxm-141gb", tp_size=tp)
    return _ANALYSES[key]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(_MODELS_H), tp=st.sampled_from([1, 2]), b=st.integers(1, 16), s=st.integers(1, 3000),
       n=st.integers(1, 400))
def test_latency_monotone_and_finite(name, tp, b, s, n):
    a = _analysis(name, tp)
    max_len = a.model_config.max_seq_len
    if a.model_config.position_embedding_type == "learned" and max_len is not None:
        s = min(s, max_len - n - 20)  # learned positions refuse longer contexts (issue 13)
        assume(s >= 1)
    base = a.inference(batch_size_per_gpu=b, seq_len=s, num_tokens_to_generate=n)
    more_tokens = a.inference(batch_size_per_gpu=b, seq_len=s, num_tokens_to_generate=n + 7)
    longer = a.inference(batch_size_per_gpu=b, seq_len=s + 13, num_tokens_to_generate=n)
    assert more_tokens["total_latency"] >= base["total_latency"]
    assert longer["total_latency"] >= base["total_latency"]
    assert longer["prefill_latency"] >= base["prefill_latency"]
    for k, v in base.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            assert math.isfinite(v) and v >= 0, (k, v)
    # throughput never beats the compute roof: FLOPs per step / step time <= peak
    step_flops = a.get_num_flops_decode_step(b, s + 1) / (a.parallelism_config.tp_size)
    assert step_flops / base["decode_first_step_latency"] <= a.get_TFLOPS_per_gpu() * 1e12 * (1 + 1e-9)


def test_pipeline_fill_for_a_batch_of_prompts():
    """pp=4: a batch of prompts is pipelined request by request. Hand derivation from
    the per-stage times of one request: sum(stages) + (b - 1) x max(stage)."""
    a = make("meta-llama_Llama-3.1-8B", "a100-sxm-80gb", pp_size=4)
    b, s = 16, 1024
    # the stage times below come from a.describer, which counts the eager forward
    summary = a.inference(batch_size_per_gpu=b, seq_len=s, num_tokens_to_generate=2, conventions="transformers")
    one = Phase("prefill", 1, s, s)
    p2p = a.pipeline_handoff_time_s(1, s) / 3
    stages = [a.weighted_time_s(a.describer.weighted_ops(one, stage=i)) + (p2p if i < 3 else 0) for i in range(4)]
    assert summary["prefill_latency"] == pytest.approx(sum(stages) + (b - 1) * max(stages), rel=1e-9)
    assert summary["prefill_latency"] < summary["prefill_latency_unpipelined"]
    single = make("meta-llama_Llama-3.1-8B", "a100-sxm-80gb").inference(batch_size_per_gpu=b, seq_len=s,
                                                                       num_tokens_to_generate=2)
    # four stages overlap: the pipelined batch is ~4x faster than one GPU doing it all, less the fill
    assert summary["prefill_latency"] < single["prefill_latency"] / 2.5


def test_zero3_inference_pays_the_weight_gather():
    """ZeRO-3 over 8 GPUs in one node: each decode step waits for the all-gather of the
    weights (hand: 7/8 x 16.06 GB / 450 GB/s + 7 hops), which dwarfs the step itself."""
    a = make("meta-llama_Llama-3.1-8B", "h100-sxm-80gb", dp_size=8)
    gpu = a.gpu_config
    plain = a.inference(batch_size_per_gpu=4, seq_len=512, num_tokens_to_generate=32)
    z3 = a.inference(batch_size_per_gpu=4, seq_len=512, num_tokens_to_generate=32, ds_zero=3)
    weights = a.get_num_params_total() * 2
    gather = 7 / 8 * weights / (gpu.intra_node_bandwidth_in_GB_per_sec * 1e9) + 7 * gpu.intra_node_hop_latency
    assert z3["weight_memory_per_gpu"] == pytest.approx(weights / 8, rel=1e-9)
    assert z3["time_per_output_token"] == pytest.approx(gather, rel=1e-6)  # the gather hides the step
    assert plain["time_per_output_token"] < z3["time_per_output_token"]


def test_ep_must_divide_dp():
    with pytest.raises(ConfigError, match="ep_size = 2 must divide dp_size = 1"):
        make("mistralai_Mixtral-8x7B-v0.1", "h100-sxm-80gb", ep_size=2)


def test_encoder_only_has_no_decode_figures():
    a = make("bert-base-uncased", "a100-sxm-40gb")
    s = a.inference(batch_size_per_gpu=8, seq_len=512, num_tokens_to_generate=1)
    assert s["kv_cache_memory_per_gpu"] == 0 and s["max_batch_total_tokens"] == 0
    assert s["decode_latency"] == 0 and s["decode_tokens_per_sec"] == 0
    assert s["total_latency"] == s["prefill_latency"] > 0
    assert s["decode_max_batch_size_per_gpu"] == s["prefill_max_batch_size_per_gpu"]
    with pytest.raises(ConfigError, match="encoder-only"):
        a.inference(num_tokens_to_generate=2)


def test_the_decode_batch_beyond_what_a_prefill_holds_is_explained():
    """Llama-3.1-8B on an H100, 2,048 + 256 tokens: a decode step alone holds 231 sequences, a whole request batch
    141 (its prefill's activations): the call is refused at 142 and runs at 141 (the memory check), and the notes
    say the decode figure is not a batch this call runs, where a user read it as one and was refused at 231."""
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import get_dtype_config_by_name, get_gpu_config_by_name, get_model_config_by_name
    from llm_analysis.errors import DoesNotFitError
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
                    get_dtype_config_by_name("bf16"), perf_model="calibrated")
    s = a.inference(batch_size_per_gpu=8, seq_len=2048, num_tokens_to_generate=256)
    pre, dec = s["prefill_max_batch_size_per_gpu"], s["decode_max_batch_size_per_gpu"]
    assert dec > pre
    a.inference(batch_size_per_gpu=pre, seq_len=2048, num_tokens_to_generate=256)  # fits
    with pytest.raises(DoesNotFitError):
        a.inference(batch_size_per_gpu=pre + 1, seq_len=2048, num_tokens_to_generate=256)
    assert any(f"decode_max_batch_size_per_gpu = {dec}" in n and f"the largest batch this call runs is {pre}" in n
               for n in s["notes"])


def test_without_a_kv_cache_each_step_holds_a_forward_over_the_whole_context():
    """use_kv_cache=False times every decode step as a forward over the whole context, but held only a one-token
    step's activations: 200 sequences of 1,024 + 8,192 tokens on an H100 "fit" in 35 GB. The last step is a
    forward over 9,215 tokens: its activations are the prefill activations of a 9,215-token prompt (the same call
    with seq_len 9,215 and one token, no cache), and that batch is refused."""
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import get_dtype_config_by_name, get_gpu_config_by_name, get_model_config_by_name
    from llm_analysis.errors import DoesNotFitError
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
                    get_dtype_config_by_name("bf16"))
    s = a.inference(batch_size_per_gpu=2, seq_len=1024, num_tokens_to_generate=8192, use_kv_cache=False)
    last = a.inference(batch_size_per_gpu=2, seq_len=9215, num_tokens_to_generate=1, use_kv_cache=False)
    assert s["decode_activation_memory_per_gpu"] == pytest.approx(last["prefill_activation_memory_per_gpu"], rel=1e-12)
    assert s["decode_max_batch_size_per_gpu"] == last["prefill_max_batch_size_per_gpu"]
    with pytest.raises(DoesNotFitError):
        a.inference(batch_size_per_gpu=200, seq_len=1024, num_tokens_to_generate=8192, use_kv_cache=False)


@pytest.mark.parametrize("model,gpu,tp", [("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "h100-sxm-80gb", 8),
                                          ("meta-llama/Llama-3.1-70B", "l4-24gb", 1)])
def test_does_not_fit_suggests_only_layouts_the_model_accepts(model, gpu, tp):
    """Every tp_size / pp_size the refusal suggests builds (its heads, KV heads and widths divide): Maverick's
    40 heads with 8 KV heads and a 8192-wide expert take no tp above 8 (10 and 20 split no KV head, 40 no
    expert), so only pp_size=2 is named there; Llama-3.1-70B at tp 1 is told tp_size=2."""
    import re
    from llm_analysis.errors import DoesNotFitError
    a = LLMAnalysis(model, gpu, "bf16", ParallelismConfig(tp_size=tp))
    with pytest.raises(DoesNotFitError) as info:
        a.inference(batch_size_per_gpu=1, seq_len=256, num_tokens_to_generate=8)
    said = dict(re.findall(r"\b(tp_size|pp_size)=(\d+)", str(info.value)))
    assert said, str(info.value)
    for key, value in said.items():
        layout = {"tp_size": tp, key: int(value)}
        LLMAnalysis(model, gpu, "bf16", ParallelismConfig(**layout))  # builds: no ConfigError
    assert ("tp_size" in said) == (model == "meta-llama/Llama-3.1-70B")


def test_the_decode_breakdown_is_that_of_one_mean_step():
    """decode_latency_breakdown sits beside decode_latency (one step): its parts add up to it, and the
    memory-bound MLP of a batch-1 decode step moves its weights once. By hand, OPT-1.3b (h 2048, FFN
    8192, 24 layers, 16-bit): fc1 + fc2 with biases, 24 x (2 x 2048 x 8192 + 8192 + 2048) x 2 bytes."""
    a = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), get_gpu_config_by_name("a100-sxm-80gb"))
    s = a.inference(batch_size_per_gpu=1, seq_len=128, num_tokens_to_generate=33)
    parts = s["decode_latency_breakdown"]
    assert sum(g["latency_s"] for g in parts.values()) == pytest.approx(s["decode_latency"], rel=1e-9)
    mlp_weight_bytes = 24 * (2 * 2048 * 8192 + 8192 + 2048) * 2
    assert parts["mlp"]["bytes_per_gpu"] == pytest.approx(mlp_weight_bytes, rel=0.01)
