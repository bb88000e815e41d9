"""The closed loop's steady state: Little's law between concurrency, throughput and latency in every
answer; more clients never shorten a request's time to first token or time per output token; clients
beyond what the engine runs at once wait in a queue whose length Little's law gives."""

from __future__ import annotations

import pytest

# (framework, concurrency, engine options, layout): small and large loads, every engine, a KV pool
# too small for the clients (a queue), replicas sharing clients unevenly (dp_size 3, 64 clients)
CASES = [
    ("vllm", 1, {}, {}), ("vllm", 7, {}, {}), ("vllm", 64, {}, {}), ("sglang", 64, {}, {}), ("trtllm", 200, {}, {}),
    ("vllm", 300, {"gpu_memory_utilization": 0.5}, {}), ("trtllm", 300, {"gpu_memory_utilization": 0.5}, {}),
    ("vllm", 64, {}, {"dp_size": 3}), ("sglang", 1000, {"max_num_seqs": 100}, {}),
]


@pytest.fixture(scope="module")
def llama(request):
    from builders import build_analysis
    return {layout: build_analysis("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", perf_model="calibrated",
                                   **dict(layout)) for layout in ((), (("dp_size", 3),))}


@pytest.mark.parametrize("framework,concurrency,options,layout", CASES)
def test_littles_law(llama, framework, concurrency, options, layout):
    a = llama[tuple(layout.items())]
    s = a.serve(concurrency=concurrency, input_len=2048, output_len=256, framework=framework, num_requests=0,
                **options)
    # L = lambda W: the clients are the request rate times the mean time of one request (each client
    # sends its next request the moment the previous one completes)
    assert s["requests_per_s"] * s["e2e_s"] == pytest.approx(concurrency, rel=1e-9)
    assert s["e2e_s"] == pytest.approx(s["ttft_s"] + 255 * s["tpot_s"], rel=1e-9)
    assert s["output_tokens_per_s"] == pytest.approx(256 * s["requests_per_s"], rel=1e-12)
    gpus = a.parallelism_config.tp_size * a.parallelism_config.dp_size
    assert s["num_gpus"] == gpus
    assert s["output_tokens_per_s_per_gpu"] == pytest.approx(s["output_tokens_per_s"] / gpus, rel=1e-12)


def test_littles_law_with_length_distributions(llama):
    s = llama[()].serve(concurrency=48, input_len={"mean": 1000, "spread": 500},
                        output_len={"mean": 300, "spread": 100}, num_requests=0)
    assert s["requests_per_s"] * s["e2e_s"] == pytest.approx(48, rel=1e-9)
    assert s["output_len_mean"] == 300


@pytest.mark.parametrize("framework", ["vllm", "sglang", "trtllm"])
def test_more_clients_never_faster(llama, framework):
    previous = None
    for c in (1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048):
        s = llama[()].serve(concurrency=c, input_len=1024, output_len=512, framework=framework, num_requests=0)
        if previous is not None:
            assert s["ttft_s"] >= previous["ttft_s"] * (1 - 1e-9), c
            assert s["tpot_s"] >= previous["tpot_s"] * (1 - 1e-9), c
            assert s["e2e_s"] >= previous["e2e_s"] * (1 - 1e-9), c
        previous = s


def test_clients_beyond_the_engine_queue(llama):
    """With max_num_seqs = N, N requests run and C - N wait: the engine's throughput X is that of N
    requests, and each waits (C - N) / X for a slot (Little's law on the queue)."""
    a = llama[()]
    n = 16
    full = a.serve(concurrency=n, input_len=1024, output_len=256, max_num_seqs=n, api_latency_s=0.0, num_requests=0)
    over = a.serve(concurrency=3 * n, input_len=1024, output_len=256, max_num_seqs=n, api_latency_s=0.0,
                   num_requests=0)
    assert over["max_running_requests_per_replica"] == n
    assert over["requests_per_s"] == pytest.approx(full["requests_per_s"], rel=1e-6)
    wait = (3 * n - n) / full["requests_per_s"]
    assert over["ttft_s"] == pytest.approx(full["ttft_s"] + wait, rel=1e-6)
    assert over["tpot_s"] == pytest.approx(full["tpot_s"], rel=1e-6)


def test_the_simulation_is_reproducible_by_seed(llama):
    a = llama[()]
    one = a.serve(concurrency=32, input_len={"mean": 1024, "spread": 512}, output_len=128, num_requests=400, seed=7)
    again = a.serve(concurrency=32, input_len={"mean": 1024, "spread": 512}, output_len=128, num_requests=400, seed=7)
    other = a.serve(concurrency=32, input_len={"mean": 1024, "spread": 512}, output_len=128, num_requests=400, seed=8)
    keys = [k for k in one if k.endswith("_s") and "_p" in k]
    assert [one[k] for k in keys] == [again[k] for k in keys]
    assert [one[k] for k in keys] != [other[k] for k in keys]
    # the closed form gives the means; the simulation's spread around them
    assert one["ttft_p50_s"] <= one["ttft_p90_s"] <= one["ttft_p99_s"]
    assert one["ttft_p50_s"] < one["ttft_s"] * 2 and one["ttft_p99_s"] > one["ttft_s"] / 2


def _replica(a, framework="vllm", **options):
    """The pieces serve() runs one replica with (the analysis under serving conventions)."""
    from llm_analysis.serving.engine import engine_settings
    from llm_analysis.serving.kv_pool import kv_pool
    from llm_analysis.serving.step_time import step_timer
    a = a.with_conventions(a.conventions_named(None))
    engine = engine_settings(a, framework, options)
    d = a.describer_for(engine.kv_cache_bytes)
    return engine, kv_pool(a, d, engine, 4096), step_timer(a, d, engine)


@pytest.mark.parametrize("framework", ["vllm", "sglang", "trtllm"])
def test_simulated_clients_obey_littles_law_and_the_closed_form(llama, framework):
    """The simulation measures throughput and latency separately: C = X W holds between them (to the
    noise of a finite run), and its time per output token is the closed form's (the same steps)."""
    from llm_analysis.serving.simulation import simulate
    from llm_analysis.serving.steady_state import RequestShape, solve_closed_loop
    from llm_analysis.serving.workload import Lengths
    engine, pool, timer = _replica(llama[()], framework, prefill_contention=0.0, step_contention=0.0)
    c = 24
    sim = simulate(timer, engine, pool, Lengths(1024, 0, 256, 0), concurrency=c, num_requests=1500, seed=3,
                   api_latency_s=engine.api_latency_s, spread_s=3.0)
    throughput = len(sim.e2e_s) / sim.duration_s
    assert throughput * sim.e2e_s.mean() == pytest.approx(c, rel=0.03)
    state = solve_closed_loop(timer, engine, pool, RequestShape(1024, 256, 0), c, engine.api_latency_s)
    # (within 8%: the simulated clients' prefills sometimes share a step, which the closed form, one
    # prefill per step, does not count; SGLang's prefill-only steps show it most)
    assert sim.tpot_s.mean() == pytest.approx(state.tpot_s, rel=0.08)
    assert sim.e2e_s.mean() == pytest.approx(state.e2e_s, rel=0.08)
