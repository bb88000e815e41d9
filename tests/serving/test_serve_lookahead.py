"""A scheduler one step ahead of the GPU (`scheduling_lookahead` = 1: vLLM's async scheduling, SGLang's
and TensorRT-LLM's overlap schedulers) plans step n + 1 as step n begins, so a request that arrives while
others run waits for the step in progress and then for the step already planned: one mean step more than
a scheduler that plans each step after the last one ends. Alone in the engine, it waits for nothing.

Hand derivations:
- closed loop, steady state alone (benchmark_rounds = 0): the extra wait is one step as the decoders see
  it, the TPOT; with outputs of thousands of tokens the throughput barely moves, so
  TTFT(1) - TTFT(0) = TPOT (to ~1e-4); under speculative decoding a step gives each request L tokens,
  so it lasts L x TPOT; one client never finds another running: no difference;
- open loop with room for every request (no queue for a slot): Poisson arrivals see the time average
  (PASTA), and the requests in the engine are then Poisson with mean rho = rate x service time (an
  M/G/infinity system), so a share 1 - exp(-rho) of arrivals find others running and wait one decode step
  more: TTFT(1) - TTFT(0) = (1 - exp(-rho)) x the decode step (a step of one to a few sequences of a
  memory-bound decode: within 1% of one sequence's).
"""

from __future__ import annotations

import math

import pytest

ZERO = dict(api_latency_s=0.0, step_overhead_s=0.0, step_overhead_per_seq_s=0.0, step_overhead_per_layer_s=0.0)
IN = 256


@pytest.fixture(scope="module")
def llama8b():
    from builders import build_analysis
    return build_analysis("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", perf_model="calibrated")


@pytest.mark.parametrize("clients", [2, 8, 32])
def test_closed_loop_waits_one_step_more(llama8b, clients):
    ahead, plain = (llama8b.serve(concurrency=clients, input_len=IN, output_len=4000, num_requests=0,
                                  benchmark_rounds=0, scheduling_lookahead=k, **ZERO) for k in (1, 0))
    assert ahead["ttft_s"] - plain["ttft_s"] == pytest.approx(ahead["tpot_s"], rel=1e-3)


@pytest.mark.parametrize("accepted", [2.0, 3.0])
def test_under_speculative_decoding_the_planned_step_is_a_whole_verify_step(llama8b, accepted):
    """A verify step gives each request L tokens, so it lasts L TPOTs: the step already planned costs
    L x TPOT (closed loop, steady state alone, long outputs, as above)."""
    spec = dict(method="mtp", draft_length=4, mean_accepted_length=accepted)
    ahead, plain = (llama8b.serve(concurrency=8, input_len=IN, output_len=4000, num_requests=0, benchmark_rounds=0,
                                  scheduling_lookahead=k, speculative=spec, **ZERO) for k in (1, 0))
    assert ahead["ttft_s"] - plain["ttft_s"] == pytest.approx(accepted * ahead["tpot_s"], rel=1e-3)


def test_under_speculative_decoding_a_first_token_waits_for_whole_verify_steps(llama8b):
    """With the lookahead off and the steady state alone, a request waits for half the verify step in
    progress and for its own prefill's step, which verifies the others' k tokens too: both last as long
    whatever L of the k tokens are accepted, so TTFT does not depend on L (8 clients, 4,000-token outputs:
    the others' prefills are rare enough that the throughput L changes moves it by < 1e-3)."""
    ttft = [llama8b.serve(concurrency=8, input_len=IN, output_len=4000, num_requests=0, benchmark_rounds=0,
                          scheduling_lookahead=0, speculative=dict(method="mtp", draft_length=4,
                                                                   mean_accepted_length=L), **ZERO)["ttft_s"]
            for L in (1.0, 2.0, 3.0)]
    assert ttft[1] == pytest.approx(ttft[0], rel=1e-3) and ttft[2] == pytest.approx(ttft[0], rel=1e-3)


def test_one_client_finds_nobody_running(llama8b):
    ahead, plain = (llama8b.serve(concurrency=1, input_len=IN, output_len=64, num_requests=0,
                                  scheduling_lookahead=k, **ZERO) for k in (1, 0))
    assert ahead["ttft_s"] == plain["ttft_s"]


@pytest.mark.parametrize("rho", [0.5, 2.0])
def test_open_loop_arrivals_that_find_others_running_wait_one_step(llama8b, rho):
    out = 256
    alone = llama8b.inference(batch_size_per_gpu=1, seq_len=IN, num_tokens_to_generate=out)
    rate = rho / alone["total_latency"]
    ahead, plain = (llama8b.serve(request_rate=rate, input_len=IN, output_len=out, num_requests=20000, seed=1,
                                  scheduling_lookahead=k, **ZERO) for k in (1, 0))
    expected = (1 - math.exp(-rho)) * alone["decode_latency"]
    assert ahead["ttft_s"] - plain["ttft_s"] == pytest.approx(expected, rel=0.03)


def test_the_engines_plan_one_step_ahead_by_default(llama8b):
    from llm_analysis.serving.engine import FRAMEWORKS, engine_settings
    assert all(engine_settings(llama8b, f, {}).scheduling_lookahead == 1 for f in FRAMEWORKS)


@pytest.mark.parametrize("value", [2, -1, 0.5, True, "1", None])
def test_a_lookahead_other_than_zero_or_one_is_refused(llama8b, value):
    from llm_analysis.errors import ConfigError
    with pytest.raises(ConfigError, match=r"scheduling_lookahead = .* is not valid; use one of 0, 1"):
        llama8b.serve(concurrency=2, input_len=IN, output_len=16, num_requests=0, scheduling_lookahead=value)
