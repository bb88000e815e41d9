"""The prefill pool's queue under an open-loop load (serving/disaggregated.py): a batching engine takes every
waiting prompt within its budget, so more load never shortens a prompt's time to first token, and the batch
it runs moves from one size to the next without a jump in TTFT."""

from __future__ import annotations

import math

import pytest

from llm_analysis.config import ParallelismConfig

LLAMA = "meta-llama/Llama-3.1-8B"
IN, OUT = 2048, 128
LLAMA_KV_BYTES_PER_TOKEN = 32 * 8 * 128 * 2 * 2  # layers x KV heads x head dim x (K, V) x bf16 bytes

# (model, gpu, dtype, framework, input, output, pools): the reviewer's DeepSeek-R1 case (one tp-8 prefill
# worker whose batches of 1..4 prompts of 2,048 tokens fill vLLM's 8,192-token budget) and Llama-3.1-8B on
# two tp-1 prefill workers (a decode pool wide enough that the prefill pool limits both)
SETUPS = {
    "deepseek-r1-h200": ("deepseek-ai/DeepSeek-R1", "h200-sxm-141gb", "fp8", "vllm", 2048, 256,
                         {"prefill": {"workers": 1, "parallelism": ParallelismConfig(tp_size=8)},
                          "decode": {"workers": 1, "parallelism": ParallelismConfig(tp_size=8, moe_tp_size=1,
                                                                                    moe_ep_size=8)}}),
    "llama-8b-h100": (LLAMA, "h100-sxm-80gb", "w16a16e16", "vllm", IN, OUT,
                      {"prefill": {"workers": 2, "parallelism": ParallelismConfig(tp_size=1)},
                       "decode": {"workers": 6, "parallelism": ParallelismConfig(tp_size=1)}}),
}


def _setup(analysis_builder, name):
    model, gpu, dtype, framework, input_len, output_len, pools = SETUPS[name]
    a = analysis_builder(model, gpu=gpu, dtype=dtype, perf_model="calibrated")

    def serve(rate):
        return a.serve(request_rate=rate, input_len=input_len, output_len=output_len, framework=framework,
                       disaggregated=pools)
    return serve


def _prefill_capacity(serve):
    s = serve(1e-3)
    # the grid below stays under the deployment's capacity: the prefill pool is the one that limits it
    assert s["limiting_pool"] == "prefill"
    return s["prefill_capacity_request_rate_per_s"]


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_ttft_never_falls_as_the_request_rate_rises(analysis_builder, setup):
    """Poisson arrivals at a higher rate put every prompt behind at least as much work as a lower rate
    does (a sample path of the lower rate, plus more arrivals): the mean TTFT is non-decreasing in the
    request rate. Checked on a grid of 400 rates from 10% to 95% of the prefill pool's capacity, which
    crosses every batch size of the pool (1 to 4 prompts)."""
    serve = _setup(analysis_builder, setup)
    cap = _prefill_capacity(serve)
    rates = [cap * (0.10 + 0.85 * i / 399) for i in range(400)]
    answers = [serve(r) for r in rates]
    assert not any(s["saturated"] for s in answers)
    assert len({s["prefill_batch_size"] for s in answers}) >= 2  # the grid crosses a batch threshold
    for lo, hi, r_lo, r_hi in zip(answers, answers[1:], rates, rates[1:]):
        assert hi["ttft_s"] >= lo["ttft_s"] * (1 - 1e-12), (
            f"TTFT fell from {lo['ttft_s']:.4g} s at {r_lo:.4g}/s (batch {lo['prefill_batch_size']}) to "
            f"{hi['ttft_s']:.4g} s at {r_hi:.4g}/s (batch {hi['prefill_batch_size']})")


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_ttft_is_continuous_where_the_batch_changes(analysis_builder, setup):
    """Where the engine's batch changes from one size to another, the rate just below and just above the
    change (bisected to a relative 1e-12) give the same TTFT to a relative 1e-6: a queue whose arrival rate
    changes by a part in 10^12 does not change its mean wait by a finite amount."""
    serve = _setup(analysis_builder, setup)
    cap = _prefill_capacity(serve)
    rates = [cap * (0.10 + 0.85 * i / 199) for i in range(200)]
    batches = [serve(r)["prefill_batch_size"] for r in rates]
    changes = [(lo, hi) for lo, hi, b_lo, b_hi in zip(rates, rates[1:], batches, batches[1:]) if b_lo != b_hi]
    assert changes
    for lo, hi in changes:
        b_lo = serve(lo)["prefill_batch_size"]
        while hi - lo > 1e-12 * hi:
            mid = 0.5 * (lo + hi)
            if serve(mid)["prefill_batch_size"] == b_lo:
                lo = mid
            else:
                hi = mid
        below, above = serve(lo)["ttft_s"], serve(hi)["ttft_s"]
        assert above == pytest.approx(below, rel=1e-6), f"TTFT jumps at {lo:.10g}/s: {below:.6g} s -> {above:.6g} s"


def test_light_load_ttft_is_one_prompts_prefill_plus_its_transfer(analysis_builder):
    """As the load goes to zero (rho -> 0) a prompt finds the prefill pool idle: no wait, a batch of itself,
    and TTFT is one prompt's prefill on a prefill worker (aggregated serve() of the same layout with one
    client) plus its KV cache's transfer, 2048 x 131072 bytes (Llama-3.1-8B by hand) at a stated 10 GB/s."""
    a = analysis_builder(LLAMA, gpu="h100-sxm-80gb", perf_model="calibrated")
    pools = {"prefill": {"workers": 2, "parallelism": ParallelismConfig(tp_size=1)},
             "decode": {"workers": 3, "parallelism": ParallelismConfig(tp_size=2)},
             "kv_transfer_GB_per_s": 10.0}
    alone = analysis_builder(LLAMA, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=1).serve(
        concurrency=1, input_len=IN, output_len=OUT, num_requests=0)
    transfer_s = IN * LLAMA_KV_BYTES_PER_TOKEN / 10e9
    s = a.serve(request_rate=1e-6, input_len=IN, output_len=OUT, disaggregated=pools)
    assert s["prefill_batch_size"] == 1
    assert s["prefill_queue_wait_s"] < 1e-5 * s["prefill_batch_s"]
    assert s["ttft_s"] == pytest.approx(alone["ttft_s"] + transfer_s, rel=1e-6)
    # and the wait shrinks with the load toward it: a tenth of the rate, about a tenth of the (tiny) wait
    tenth = a.serve(request_rate=1e-7, input_len=IN, output_len=OUT, disaggregated=pools)
    assert tenth["prefill_queue_wait_s"] == pytest.approx(s["prefill_queue_wait_s"] / 10, rel=1e-3)


@pytest.mark.parametrize("clients", [8, 24, 40, 56, 64, 96, 160])
def test_closed_loop_keeps_littles_law(analysis_builder, clients):
    """A closed loop of C clients completes X requests per second with C = X x E2E (Little's law), whatever
    batch the prefill pool runs at that load (the DeepSeek-R1 pools above, across its batch sizes)."""
    model, gpu, dtype, framework, input_len, output_len, pools = SETUPS["deepseek-r1-h200"]
    a = analysis_builder(model, gpu=gpu, dtype=dtype, perf_model="calibrated")
    s = a.serve(concurrency=clients, input_len=input_len, output_len=output_len, framework=framework,
                disaggregated=pools)
    assert s["requests_per_s"] * s["e2e_s"] == pytest.approx(clients, rel=1e-6)
    assert math.isfinite(s["ttft_s"]) and s["ttft_s"] > 0
