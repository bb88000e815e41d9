"""plan_capacity: the replicas are the fewest whose round-robin shares of the requests one replica serves
within memory and the per-token target, and every per-replica figure is that of the largest share,
ceil(requests / replicas), not of the largest batch a replica could hold. The expectation is derived
here by calling inference() on one replica at ceil(requests / N) for N = 1, 2, ... (an independent check
of the batch search and of the share rule)."""

from __future__ import annotations

import math

import pytest

from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.errors import DoesNotFitError
from llm_analysis.facade import LLMAnalysis
from llm_analysis.planner.capacity import plan_capacity

MODEL, GPU, DTYPE = "meta-llama_Llama-3.1-8B", "h100-sxm-80gb", "w16a16e16"
PROMPT, OUTPUT = 2048, 256
# 300 requests under 20 ms per output token: one H100 (tp 1) holds ~141 of them, so 3 replicas serve them
# and round robin gives each 100; wider layouts hold all 300 on one replica
REQUESTS, TPOT_TARGET_S = 300, 0.020


def _one_replica(tp: int, pp: int) -> LLMAnalysis:
    gpu = get_gpu_config_by_name(GPU)
    return LLMAnalysis(get_model_config_by_name(MODEL), gpu, get_dtype_config_by_name(DTYPE),
                       ParallelismConfig(tp_size=tp, pp_size=pp), num_gpus_per_node=gpu.num_gpus_per_node)


def _serves(analysis: LLMAnalysis, batch: int):
    """inference() of one replica at `batch` requests, or None when they do not fit or miss the target."""
    try:
        s = analysis.inference(batch_size_per_gpu=batch, seq_len=PROMPT, num_tokens_to_generate=OUTPUT)
    except DoesNotFitError:
        return None
    fits = batch <= min(s["prefill_max_batch_size_per_gpu"], s["decode_max_batch_size_per_gpu"])
    return s if fits and s["time_per_output_token"] <= TPOT_TARGET_S else None


def _fewest_replicas(tp: int, pp: int):
    """(N, share, inference()) for the smallest N whose largest round-robin share ceil(REQUESTS / N) one
    replica serves."""
    analysis = _one_replica(tp, pp)
    for n in range(1, REQUESTS + 1):
        share = math.ceil(REQUESTS / n)
        s = _serves(analysis, share)
        if s is not None:
            return n, share, s
    raise AssertionError(f"tp {tp} pp {pp}: not even one request per replica meets the target")


@pytest.fixture(scope="module")
def plan():
    return plan_capacity(get_model_config_by_name(MODEL), get_gpu_config_by_name(GPU),
                         get_dtype_config_by_name(DTYPE), PROMPT, OUTPUT, REQUESTS,
                         per_token_latency_target_s=TPOT_TARGET_S)


def test_every_layout_is_timed_at_the_share_of_its_fewest_replicas(plan):
    rounded = 0
    for c in plan["candidates"]:
        n, share, s = _fewest_replicas(c["tp_size"], c["pp_size"])
        where = f"tp {c['tp_size']} pp {c['pp_size']}"
        assert c["replicas"] == n, where
        assert c["num_gpus"] == n * c["tp_size"] * c["pp_size"], where
        assert c["batch_per_replica"] == share, where
        assert c["batch_per_replica"] <= c["max_batch_per_replica"], where
        for key in ("time_per_output_token", "time_to_first_token", "decode_tokens_per_sec_per_gpu",
                    "kv_cache_memory_per_gpu"):
            assert c[key] == pytest.approx(s[key], rel=1e-12), (where, key)
        rounded += share < c["max_batch_per_replica"]
    # the case exercises the rounding: some layout's share is below the largest batch it holds
    assert rounded >= 1


def test_single_gpu_layout_splits_300_requests_into_3_replicas_of_100(plan):
    """Hand derivation: 300 requests do not fit one H100 at 20 ms/token with 2048 + 256 tokens (KV cache
    ~0.13 MB/token x 2304 tokens x 300 > the ~64 GB beside 16 GB of weights), 150 do not meet the target
    either (the plan's largest batch is below 150), 100 do: 3 replicas of 100 requests each."""
    one = next(c for c in plan["candidates"] if (c["tp_size"], c["pp_size"]) == (1, 1))
    assert 100 <= one["max_batch_per_replica"] < 150
    assert (one["replicas"], one["batch_per_replica"]) == (3, 100)
    at_100 = _one_replica(1, 1).inference(batch_size_per_gpu=100, seq_len=PROMPT, num_tokens_to_generate=OUTPUT)
    assert one["time_per_output_token"] == pytest.approx(at_100["time_per_output_token"], rel=1e-12)


def test_best_is_the_fewest_gpus_then_the_lowest_time_per_token_at_the_share(plan):
    ranked = min(plan["candidates"], key=lambda c: (c["num_gpus"], c["time_per_output_token"]))
    assert plan["best"] == ranked
