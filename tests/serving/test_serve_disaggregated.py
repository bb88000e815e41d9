"""serve(disaggregated=...): a prefill pool and a decode pool (issue 26; serving/disaggregated.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import llm_analysis
from llm_analysis.config import ParallelismConfig
from llm_analysis.errors import ConfigError

from hand_counts import (QWEN35_27B, QWEN35_27B_KV_BYTES_PER_TOKEN,  # tests/support/hand_counts.py
                         QWEN35_27B_STATE_BYTES_PER_REQUEST)

MODEL = "meta-llama/Llama-3.1-8B"
IN, OUT = 2048, 128


def _pools(prefill_tp=1, decode_tp=2, prefill_workers=2, decode_workers=3, **extra):
    return dict({"prefill": {"workers": prefill_workers, "parallelism": ParallelismConfig(tp_size=prefill_tp)},
                 "decode": {"workers": decode_workers, "parallelism": ParallelismConfig(tp_size=decode_tp)}}, **extra)


@pytest.mark.parametrize("framework", ["vllm", "trtllm"])
def test_one_request_infinitely_fast_link_is_prefill_pool_plus_decode_pool(analysis_builder, framework):
    """One client and an instantaneous KV transfer: TTFT is one request's prefill alone on a prefill worker
    (aggregated serve() of that layout, one client), TPOT one request's decode step on a decode worker."""
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated")
    s = a.serve(concurrency=1, input_len=IN, output_len=OUT, framework=framework,
                disaggregated=_pools(kv_transfer_GB_per_s=math.inf))
    pre = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=1).serve(
        concurrency=1, input_len=IN, output_len=OUT, framework=framework, num_requests=0)
    dec = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2).serve(
        concurrency=1, input_len=IN, output_len=OUT, framework=framework, num_requests=0)
    assert s["kv_transfer_s"] == 0
    assert s["ttft_s"] == pytest.approx(pre["ttft_s"], rel=1e-9)
    assert s["tpot_s"] == pytest.approx(dec["tpot_s"], rel=1e-9)
    assert s["e2e_s"] == pytest.approx(pre["ttft_s"] + (OUT - 1) * dec["tpot_s"], rel=1e-9)
    assert s["num_gpus"] == 2 * 1 + 3 * 2


def test_kv_transfer_by_hand(analysis_builder):
    """Llama-3.1-8B: 32 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes = 131072 bytes per token on one GPU;
    at a given 10 GB/s the prompt's 2048 tokens take 2048 x 131072 / 1e10 s."""
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated")
    s = a.serve(concurrency=1, input_len=IN, output_len=OUT, disaggregated=_pools(kv_transfer_GB_per_s=10.0))
    assert s["kv_transfer_s"] == pytest.approx(IN * 32 * 8 * 128 * 2 * 2 / 10e9, rel=1e-12)
    t = a.serve(concurrency=1, input_len=IN, output_len=OUT, disaggregated=_pools(kv_transfer_GB_per_s=math.inf))
    assert s["ttft_s"] - t["ttft_s"] == pytest.approx(s["kv_transfer_s"], rel=1e-9)
    # by default the pools' 8 GPUs span two 8-GPU nodes... no: 2 + 6 = 8 fit one node: NVLink
    d = a.serve(concurrency=1, input_len=IN, output_len=OUT, disaggregated=_pools())
    nvlink = a.gpu_config.intra_node_bandwidth_in_GB_per_sec * 1e9
    assert d["kv_transfer_s"] >= IN * 131072 / nvlink


def test_kv_transfer_bytes_and_link_by_hand(analysis_builder):
    """The answer states the most one GPU sends or receives and over what: Llama-3.1-8B at tp=1 sends all of its
    131072 bytes per token (the hand count above); a prefill pool at tp=2 splits the 8 KV heads, half each.
    2 + 3 x 2 = 8 GPUs fit one 8-GPU H100 node (NVLink); 2 + 4 x 2 = 10 do not (the network); a stated
    bandwidth is named as such."""
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated")
    one_node = a.serve(concurrency=1, input_len=IN, output_len=OUT, disaggregated=_pools())
    assert one_node["kv_transfer_bytes_per_gpu"] == IN * 131072
    assert one_node["kv_transfer_link"] == "nvlink"
    two_nodes = a.serve(concurrency=1, input_len=IN, output_len=OUT, disaggregated=_pools(decode_workers=4))
    assert two_nodes["kv_transfer_link"] == "inter_node"
    split = a.serve(concurrency=1, input_len=IN, output_len=OUT, disaggregated=_pools(prefill_tp=2))
    assert split["kv_transfer_bytes_per_gpu"] == IN * 131072 / 2
    # the reverse split: a tp-2 prefill GPU sends half, but the tp-1 decode GPU receives all 8 KV heads through
    # its one link, so the transfer takes as long as a tp-1 prefill's (reviewer's case, Qwen3-235B tp 8 -> 1)
    narrow = a.serve(concurrency=1, input_len=IN, output_len=OUT, disaggregated=_pools(prefill_tp=2, decode_tp=1))
    assert narrow["kv_transfer_bytes_per_gpu"] == IN * 131072
    assert narrow["kv_transfer_s"] == pytest.approx(one_node["kv_transfer_s"], rel=1e-12)
    stated = a.serve(concurrency=1, input_len=IN, output_len=OUT, disaggregated=_pools(kv_transfer_GB_per_s=10.0))
    assert stated["kv_transfer_link"] == "stated"
    assert stated["kv_transfer_s"] == pytest.approx(stated["kv_transfer_bytes_per_gpu"] / 10e9, rel=1e-12)


@pytest.mark.parametrize("workers, load, expected", [((1, 8), {"request_rate": 1.0}, "prefill"),
                                                     ((8, 1), {"request_rate": 1.0}, "decode"),
                                                     ((1, 8), {"request_rate": 1.0, "output_len": 1}, "prefill")])
def test_limiting_pool_is_the_one_whose_capacity_is_the_deployments(analysis_builder, workers, load, expected):
    """limiting_pool names the pool of the lower capacity, which is the saturation rate; one-token outputs
    leave the decode pool nothing to bound (capacity None): the prefill pool limits. One-GPU workers of the
    same layout: eight times the workers of one pool outweigh the other's (a prefill of 2048 tokens against
    127 decode steps of a full batch, each pool's rank rates within a factor 3 of each other here)."""
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated")
    s = a.serve(input_len=IN, **{"output_len": OUT, **load},
                disaggregated=_pools(prefill_workers=workers[0], decode_workers=workers[1], decode_tp=1))
    caps = {pool: s[f"{pool}_capacity_request_rate_per_s"] for pool in ("prefill", "decode")}
    bounding = {pool: cap for pool, cap in caps.items() if cap is not None}
    assert s["limiting_pool"] == min(bounding, key=bounding.get) == expected
    assert s[f"{s['limiting_pool']}_capacity_request_rate_per_s"] == s["saturation_request_rate_per_s"]
    assert s["prefill_layout"] == "tp=1" and s["decode_layout"] == "tp=1"


def test_closed_loop_littles_law_and_keys(analysis_builder):
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated")
    agg = a.serve(concurrency=64, input_len=IN, output_len=OUT, num_requests=0)
    s = a.serve(concurrency=64, input_len=IN, output_len=OUT, disaggregated=_pools())
    assert set(agg) - {"attention_dp_size", "moe_tp_size", "moe_ep_size", "moe_redundant_experts",
                       "max_running_requests_per_rank"} <= set(s)
    assert s["requests_per_s"] * s["e2e_s"] == pytest.approx(64, rel=1e-6)
    assert s["ttft_p50_s"] <= s["ttft_p90_s"] <= s["ttft_p99_s"]
    # more clients wait longer for the prefill pool
    more = a.serve(concurrency=256, input_len=IN, output_len=OUT, disaggregated=_pools())
    assert more["ttft_s"] > s["ttft_s"] and more["tpot_s"] >= s["tpot_s"]


def test_open_loop_and_saturation(analysis_builder):
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated")
    low = a.serve(request_rate=1.0, input_len=IN, output_len=OUT, disaggregated=_pools())
    assert low["requests_per_s"] == 1.0 and low["ttft_s"] > 0 and low["tpot_s"] > 0
    cap = low["saturation_request_rate_per_s"]
    assert cap == pytest.approx(min(low["prefill_capacity_request_rate_per_s"],
                                    low["decode_capacity_request_rate_per_s"]), rel=1e-12)
    high = a.serve(request_rate=cap * 1.5, input_len=IN, output_len=OUT, disaggregated=_pools())
    assert high["saturated"] and high["ttft_s"] is None and high["tpot_s"] is None


def test_judge_call_shape(analysis_builder):
    """The issue's call: pools with attention-DP / expert-parallel layouts and batch sizes."""
    a = analysis_builder("Qwen/Qwen3-30B-A3B", gpu="h100-sxm-80gb", perf_model="calibrated")
    s = a.serve(concurrency=192, input_len=8192, output_len=1024, framework="trtllm",
                disaggregated={"prefill": {"workers": 2, "parallelism": ParallelismConfig(tp_size=2), "batch_size": 1},
                               "decode": {"workers": 4, "parallelism": ParallelismConfig(tp_size=1, attention_dp_size=4),
                                          "batch_size": 48}})
    assert s["num_gpus"] == 2 * 2 + 4 * 4
    assert s["ttft_s"] > 0 and s["tpot_s"] > 0 and s["max_num_seqs"] == 48


def test_pools_do_not_depend_on_the_analysis_layout_they_are_built_from(analysis_builder):
    """Each pool states its whole layout, so the answer cannot depend on the parallelism of the analysis
    serve() is called on: a decode pool with pipeline stages and attention-DP (an expert layout of its own)
    answers the same from an analysis with one stage as from one with the pool's own layout (before: the
    one-stage analysis' layer groups were read for the pool's second stage, an IndexError)."""
    decode = ParallelismConfig(tp_size=2, pp_size=2, attention_dp_size=2, moe_tp_size=1, moe_ep_size=4)
    pools = {"prefill": {"workers": 1, "parallelism": ParallelismConfig()},
             "decode": {"workers": 1, "parallelism": decode}}
    answers = [analysis_builder("Qwen/Qwen3-30B-A3B", gpu="h200-sxm-141gb", **par).serve(
        concurrency=8, input_len=512, output_len=64, framework="sglang", disaggregated=pools)
        for par in ({}, dict(tp_size=2, pp_size=2, attention_dp_size=2, moe_tp_size=1, moe_ep_size=4))]
    for key in ("ttft_s", "tpot_s", "e2e_s", "requests_per_s", "num_gpus"):
        assert answers[0][key] == pytest.approx(answers[1][key], rel=1e-12), key
    assert answers[0]["num_gpus"] == 1 + 2 * 2 * 2


@pytest.mark.parametrize("spec,named", [
    ({"prefill": {"workers": 0, "parallelism": ParallelismConfig()}, "decode": {"workers": 1}},
     "disaggregated['prefill']['workers'] = 0"),
    ({"prefill": {"workers": 1}}, "disaggregated['decode']"),
    ({"prefill": {"workers": 1}, "decode": {"workers": 1, "tp": 2}}, "disaggregated['decode']['tp']"),
    ({"prefill": {"workers": 1}, "decode": {"workers": 1}, "link": 1}, "disaggregated['link']"),
    ({"prefill": {"workers": 1, "batch_size": 0}, "decode": {"workers": 1}}, "disaggregated['prefill']['batch_size']"),
    ({"prefill": {"workers": 1, "parallelism": ParallelismConfig(tp_size=1, moe_ep_size=1, dp_size=2)},
      "decode": {"workers": 1}}, "dp_size = 2"),
    ({"prefill": {"workers": 1}, "decode": {"workers": 1, "parallelism": {"tp_size": 2, "moe_ep_size": 2}}},
     "disaggregated['decode'] moe_ep_size = 2"),
])
def test_bad_pools_name_the_field(analysis_builder, spec, named):
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb")
    with pytest.raises(ConfigError) as err:
        a.serve(concurrency=8, input_len=256, output_len=16, disaggregated=spec)
    assert named in str(err.value)


def test_prefill_batch_is_what_the_token_budget_holds(analysis_builder):
    """A prefill rank's engine takes every waiting prompt within its token budget, whatever smaller
    batch_size the pool states: vLLM on an H100 has max_num_batched_tokens 8192 (vllm profile), so
    prompts of 2048 tokens go 8192 // 2048 = 4 to a batch when 2 prefill workers serve 64 clients
    (32 a rank, more than 4 waiting); a larger batch_size (6) is taken as stated; with 4 clients a rank
    has only 2 to batch."""
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated")

    def batch(clients, prefill_batch):
        pools = _pools()
        if prefill_batch is not None:
            pools["prefill"]["batch_size"] = prefill_batch
        # the most one batch takes (the batch at the load is the least that carries it: the test below)
        return a.serve(concurrency=clients, input_len=IN, output_len=OUT,
                       disaggregated=pools)["prefill_largest_batch_size"]

    assert batch(64, None) == 4
    assert batch(64, 1) == 4
    assert batch(64, 6) == 6
    assert batch(4, 1) == 2


def test_prefill_batch_at_the_load(analysis_builder):
    """The engine takes every waiting prompt within its budget, so it serves in effect at the batch size of
    least mean wait + service: of b = 1 .. the largest batch (4 here), the one least in
    rho_b s_b / (2 (1 - rho_b)) + s_b, rho_b = X s_b / (b R) (an M/D/1 queue of batches of b on each of the
    R = 2 prefill ranks; unstable batches, rho_b >= 1, wait without bound). Checked by hand from each batch's
    time at light load (a single prompt), between what single prompts carry and the pool's capacity, and
    near capacity (the largest batch, the only one that carries the load)."""
    from llm_analysis.serving.disaggregated import _pools as pools_of, _prefill_batch_s
    from llm_analysis.serving.workload import make_workload
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated")
    lengths = make_workload(a.model_config, 8, None, IN, OUT, None).lengths
    prefill, _ = pools_of(a.with_conventions(a.conventions_named(None)), "vllm", _pools(), {}, lengths, None, None)
    ranks = 2
    batch_s = {b: _prefill_batch_s(prefill, b) for b in range(1, 5)}

    def by_hand(rate):
        def ttft_part(b):
            rho = rate * batch_s[b] / (b * ranks)
            return rho * batch_s[b] / (2 * (1 - rho)) + batch_s[b] if rho < 1 else math.inf
        return min(range(1, 5), key=ttft_part)

    low = a.serve(request_rate=0.5, input_len=IN, output_len=OUT, disaggregated=_pools())
    assert low["prefill_batch_size"] == by_hand(0.5) == 1
    assert low["prefill_batch_s"] == pytest.approx(batch_s[1], rel=1e-12)
    cap = low["prefill_capacity_request_rate_per_s"]
    assert cap == pytest.approx(ranks * 4 / batch_s[4], rel=1e-12)
    for rate in (0.5 * (ranks / batch_s[1] + cap), 0.999 * cap):
        s = a.serve(request_rate=rate, input_len=IN, output_len=OUT, disaggregated=_pools())
        b = s["prefill_batch_size"]
        assert b == by_hand(rate) and b >= 2
        assert s["prefill_batch_s"] == pytest.approx(batch_s[b], rel=1e-12)
    # a closed loop of few clients at low load: single prompts, while the largest batch is what the budget holds
    few = a.serve(concurrency=8, input_len=IN, output_len=OUT, disaggregated=_pools())
    assert few["prefill_batch_size"] == 1 and few["prefill_largest_batch_size"] == 4


def test_decode_pool_graphs_cover_its_stated_batch(analysis_builder):
    """TensorRT-LLM captures decode CUDA graphs up to 128 sequences by default (trtllm profile); a decode pool
    stated at 160 a worker captures them up to 160 (its launch config sets cuda_graph_config.max_batch_size to
    the batch), so a step of 160 decoders replays a graph; a pool stated at 64 keeps the default 128."""
    from llm_analysis.serving.disaggregated import _pools as pools_of
    from llm_analysis.serving.workload import make_workload
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated")
    a = a.with_conventions(a.conventions_named(None))
    lengths = make_workload(a.model_config, 8, None, IN, OUT, None).lengths
    for stated, graphs in ((160, 160), (64, 128)):
        spec = _pools()
        spec["decode"]["batch_size"] = stated
        _, decode = pools_of(a, "trtllm", spec, {}, lengths, None, None)
        assert decode.rank.engine.graph_decode_max_batch == graphs
        assert decode.rank.engine.uses_graphs(stated, False)


@pytest.mark.parametrize("framework", ["vllm", "sglang", "trtllm"])
def test_prefill_contention_defaults_to_the_engine_profiles_value(analysis_builder, framework):
    """The closed loop's wait for other clients' prefill batches takes the engine profile's fitted
    `prefill_contention` (read here from the profile file itself): the default answer equals the one with
    that value given, and with 64 clients of 512-token prompts on two prefill workers (the prefill pool far from
    full, so the M/D/1 wait is below the contention floor) it waits longer than with no contention."""
    path = Path(llm_analysis.__file__).parent / "catalogue" / "engine_profiles" / f"{framework}.json"
    stated = json.loads(path.read_text())["prefill_contention"]["value"]
    assert 0 < stated <= 1
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated")
    load = dict(concurrency=64, input_len=512, output_len=OUT, framework=framework)
    default = a.serve(**load, disaggregated=_pools())["ttft_s"]
    given = a.serve(**load, disaggregated=_pools(prefill_contention=stated))["ttft_s"]
    none = a.serve(**load, disaggregated=_pools(prefill_contention=0.0))["ttft_s"]
    assert default == pytest.approx(given, rel=1e-12) and default > none


def test_kv_transfer_carries_a_hybrid_models_recurrent_state(analysis_builder):
    """A hybrid model's prompt leaves, besides its attention layers' KV cache per token, each mixer layer's
    fixed state (the conv window and the recurrent state), which the decode pool needs as much as the cache
    (tests/support/hand_counts.py: Qwen3.5-27B by hand). At a given 10 GB/s, 2048 prompt tokens move
    2048 x (KV bytes per token) + (state bytes)."""
    a = analysis_builder(QWEN35_27B, gpu="h100-sxm-80gb", perf_model="calibrated")
    s = a.serve(concurrency=1, input_len=IN, output_len=OUT, num_requests=0,
                disaggregated=_pools(prefill_tp=1, decode_tp=1, prefill_workers=1, decode_workers=1,
                                     kv_transfer_GB_per_s=10.0))
    want = IN * QWEN35_27B_KV_BYTES_PER_TOKEN + QWEN35_27B_STATE_BYTES_PER_REQUEST
    assert s["kv_transfer_s"] == pytest.approx(want / 10e9, rel=1e-12)

@pytest.mark.parametrize("rate", [2.0, 8.0])
def test_open_loop_prefill_pool_queues_as_md1(analysis_builder, rate):
    """Poisson arrivals at X requests per second over R prefill ranks, each serving batches of b prompts
    in S seconds (deterministic service): a rank's utilisation is rho = X S / (b R) and a prompt waits the
    Pollaczek-Khinchine mean of an M/D/1 queue, rho S / (2 (1 - rho))."""
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated")
    s = a.serve(request_rate=rate, input_len=IN, output_len=OUT, num_requests=0, disaggregated=_pools())
    ranks, batch, batch_s = 2, s["prefill_batch_size"], s["prefill_batch_s"]
    rho = rate * batch_s / (batch * ranks)
    assert 0 < rho < 1
    assert s["prefill_queue_wait_s"] == pytest.approx(rho * batch_s / (2 * (1 - rho)), rel=1e-9)
