"""Static disaggregated pools (planner/disagg.py: `disaggregate=True` with `batching="static"`) are sized
for the request rate: each pool's layout is the one whose replicas serving the rate need the fewest GPUs.
The expected bound comes from inference() calls made here and the pool's stated capacity law (a decode
replica serves batch x ep / ((n - 1) x TPOT) requests/s), not from the planner."""

from __future__ import annotations

from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.facade import LLMAnalysis
from llm_analysis.planner import plan_inference

MODEL, GPU = "meta-llama/Llama-3.1-70B", "h100-sxm-80gb"
S, N, RATE, MAX_TPOT = 2048, 256, 5.0, 0.05


def test_decode_pool_is_the_fewest_gpus_that_serve_the_rate_not_the_most_capacity_per_gpu():
    # one tp=4 replica at 32 requests per GPU meets the TPOT target and serves more than the rate
    tp4 = LLMAnalysis(get_model_config_by_name(MODEL), get_gpu_config_by_name(GPU),
                      get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=4), perf_model="calibrated")
    tpot = tp4.inference(batch_size_per_gpu=32, seq_len=S, num_tokens_to_generate=N)["time_per_output_token"]
    assert tpot <= MAX_TPOT
    assert 32 / ((N - 1) * tpot) >= RATE  # so a 4-GPU decode pool serves the rate

    plan = plan_inference(MODEL, [GPU], {"max_ttft_s": 1.0, "max_tpot_s": MAX_TPOT, "request_rate_per_s": RATE},
                          seq_len=S, num_tokens_to_generate=N, batching="static", disaggregate=True,
                          perf_model="calibrated")
    decode = plan.extra["disaggregated"]["pools"]["decode"]
    # before: one tp=8 replica (8 GPUs), the most requests/s per GPU, 8x more than the rate needs
    assert decode["num_gpus"] <= 4
    assert decode["replicas"] * decode["requests_per_s_per_replica"] >= RATE
    assert decode["time_per_output_token"] <= MAX_TPOT
