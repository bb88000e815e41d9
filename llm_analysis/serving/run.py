"""`serve()`: a deployment under load (DESIGN.md section 5).

The analysis' layout is one worker (tp GPUs, or tp x attention_dp with attention data parallelism
and expert parallelism: serving/layout.py; dp_size workers share the load). Each attention
replica ("rank": the worker itself when attention_dp = 1) runs the engine of `framework` with its
profile's defaults and the caller's options (serving/engine.py), its KV pool sized as that engine
sizes it (serving/kv_pool.py), and steps timed on the analysis' cost model from the model
description (serving/step_time.py); the clients round robin over the ranks, the request rate
splits evenly. The closed loop's means come from its steady state in closed form
(serving/steady_state.py); tails, and the open loop, from a seeded simulation of the same steps
(serving/simulation.py). `disaggregated=` serves prefill and decode on two pools of workers
(serving/disaggregated.py); `speculative=` drafts and verifies several tokens per decode step
(serving/speculative.py).
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np

from llm_analysis.errors import ConfigError
from llm_analysis.inference.memory import widened_checkpoint_note
from llm_analysis.serving.engine import MAX_NUM_REQUESTS
from llm_analysis.serving.answer import NEAR_SATURATION, accuracy_note, notes, percentiles, unbounded_latencies
from llm_analysis.serving.layout import (WorkerLayout, attention_dp_hold_s, check_balance_iters, check_imbalance,
                                         check_imbalance_applies, column_split_note, expert_spread_note)
from llm_analysis.serving.rank import Replica, build_rank, prefill_steps_per_prompt
from llm_analysis.serving.steady_state import solve_closed_loop
from llm_analysis.serving.workload import make_workload
from llm_analysis.serving.disaggregated import serve_disaggregated
from llm_analysis.serving.speculative import speculative_decoding


def _client_groups(concurrency: int, replicas: int) -> List[Tuple[int, int]]:
    """(clients per replica, replicas with that many): round robin over the replicas."""
    base, extra = divmod(concurrency, replicas)
    groups = [(base + 1, extra), (base, replicas - extra)]
    return [(c, n) for c, n in groups if n > 0 and c > 0]


def _as_benchmark_run(sim, state, rounds: float):
    """The closed loop's simulated latencies as the benchmark run its means describe (R = `rounds` requests per
    client, the first round started together): each latency scaled so its mean is the closed form's without
    the burst, then the first round (1 / R of the requests) waits the burst on top, the j-th of its n
    (j + 1/2) / n of twice the round's mean extra (the passes prefill the clients in turn). Scaling every
    request by the burst's share had put a 300-client vLLM run's TTFT p50 at 4.4x the steady state's. TTFT
    and the decode (E2E - TTFT) are scaled apart, so E2E never falls below TTFT."""
    burst_s = state.burst_s
    ttft, e2e = sim.ttft_s, sim.e2e_s
    decode = e2e - ttft  # (>= 0: a request completes after its first token)
    steady_ttft = state.ttft_s - burst_s
    steady_decode = max(0.0, state.e2e_s - state.ttft_s)  # (the burst delays the first token alone)
    if len(ttft) and ttft.mean() > 0:
        ttft = ttft * (steady_ttft / ttft.mean())
    if len(decode):
        # (one-token outputs have no decode in the simulation: the closed form's, if any, is added alike)
        decode = decode * (steady_decode / decode.mean()) if decode.mean() > 0 else decode + steady_decode
    sim.ttft_s, sim.e2e_s = ttft, ttft + decode
    if len(sim.tpot_s) and sim.tpot_s.mean() > 0:
        sim.tpot_s = sim.tpot_s * (state.tpot_s / sim.tpot_s.mean())
    n = len(sim.ttft_s)
    if burst_s > 0 and n and rounds > 0:
        first = max(1, min(n, round(n / rounds)))
        # (the round's mean extra is R x burst_s; over `first` of the n samples it adds burst_s to the mean)
        extra = (np.arange(first) + 0.5) / first * 2.0 * burst_s * n / first
        sim.ttft_s[:first] += extra
        sim.e2e_s[:first] += extra
    return sim


# a decoder's token taking this many decode steps: prefill-only steps hold two thirds of the engine's time, where
# the closed form of such an engine (SGLang) departs from the simulation (docs/serving.md)
PREFILL_BOUND_STRETCH = 3.0
HOLD_PASSES = 4  # the attention-DP hold depends on the load it changes: a few passes settle it


def _closed_loop(replica: Replica, concurrency: int, replicas: int, hold=(0, 1)) -> Dict[str, Any]:
    """Means from each replica's steady state, percentiles from their simulations (`_as_benchmark_run`).
    `hold`: (attention_dp_balance_iters, attention-DP ranks of a worker): the prompt's mean hold before its
    prefill (attention_dp_hold_s) waits outside the running batch, like the API latency."""
    engine = replica.engine
    groups = _client_groups(concurrency, replicas)

    def solved(c: int):
        state = solve_closed_loop(replica.timer, engine, replica.pool, replica.shape, c, engine.api_latency_s)
        for _ in range(HOLD_PASSES if hold[0] > 0 else 0):
            held = attention_dp_hold_s(hold[0], hold[1], state.tpot_s, state.throughput_rps * hold[1])
            state = solve_closed_loop(replica.timer, engine, replica.pool, replica.shape, c,
                                      engine.api_latency_s + held)
        return state

    states = [(solved(c), n) for c, n in groups]
    rps = sum(s.throughput_rps * n for s, n in states)
    means = {key: sum(getattr(s, key) * s.throughput_rps * n for s, n in states) / rps
             for key in ("ttft_s", "tpot_s", "e2e_s")}
    # the simulated clients start spread over one steady-state cycle (E2E) less its wait for a free slot:
    # with more clients than the engine runs, spread over the whole E2E they would arrive no faster than
    # the engine completes requests, and the queue would still be building when measuring starts
    sims = [] if engine.num_requests == 0 else [
        (_as_benchmark_run(replica.simulate(concurrency=c, seed=engine.seed + i, spread_s=s.e2e_s - s.queue_wait_s),
                           s, engine.benchmark_rounds), n)
        for i, ((s, n), (c, _)) in enumerate(zip(states, groups))]
    resident = sum(s.resident * n for s, n in states) / replicas
    # a decoder's token over the decode step alone: the engine's time that prefill-only steps leave the decodes
    # (engines that pause the decodes for them; speculative decoding's steps give several tokens)
    stretch = max((s.tpot_s * replica.timer.tokens_per_step / s.decode_step_s for s, _ in states
                   if s.decode_step_s > 0 and s.tpot_s), default=0.0)
    # the two-point saturation rate (`saturation_rate`), never below what these clients complete (a sawtooth in
    # the running count can put a closed loop above it; the scan an open loop's verdict takes costs ~10 ms)
    sat = max(replica.saturation_rps(), max((s.throughput_rps for s, _ in states), default=0.0))
    return dict(rps=rps, means=means, sims=sims, resident=resident, saturated=False,
                occupancy=replica.occupancy(resident), prefill_stretch=stretch, saturation_rps=sat)


def _open_loop(replica: Replica, request_rate: float, replicas: int) -> Dict[str, Any]:
    """The simulation of Poisson arrivals at each replica's share of the rate; none above saturation."""
    rate, sat = request_rate / replicas, replica.saturation_rps(scan=True)
    if rate >= sat:  # the queue grows without bound: the engine runs full, at its saturation rate
        return dict(rps=sat * replicas, means={}, sims=[], resident=float(replica.capacity), saturated=True,
                    occupancy=replica.occupancy(replica.capacity), saturation_rps=sat)
    sim = replica.simulate(request_rate=rate, seed=replica.engine.seed)
    means = {"ttft_s": float(sim.ttft_s.mean()), "e2e_s": float(sim.e2e_s.mean()),
             "tpot_s": float(sim.tpot_s.mean()) if len(sim.tpot_s) else None}
    return dict(rps=request_rate, means=means, sims=[(sim, replicas)], resident=sim.mean_running, saturated=False,
                occupancy=sim.kv_occupancy, saturation_rps=sat)


def check_simulated_clients(workload, engine, ranks: int) -> None:
    """The simulation warms up with every client's first request, so one replica's clients count against
    MAX_NUM_REQUESTS (2^30 clients ran a 24 GiB machine out of memory)."""
    if not workload.closed_loop or engine.num_requests == 0:
        return
    per_rank = -(-workload.concurrency // ranks)
    if per_rank > MAX_NUM_REQUESTS:
        raise ConfigError(
            f"concurrency = {workload.concurrency} puts {per_rank} clients on one of {ranks} replica(s), but the "
            f"simulation that gives the percentiles runs every client's first request and at most {MAX_NUM_REQUESTS} "
            f"requests; valid: at most {MAX_NUM_REQUESTS * ranks} clients, or num_requests=0 for the closed "
            f"form's means alone (no percentiles)")


# the longest stretch of simulated time, seconds (about 32 years): the simulation keeps its clock in float seconds,
# which at 10^9 s still resolve 10^-7 s; a rate of 10^-12 requests/s put every arrival ~10^14 s out, where a step's
# milliseconds rounded away (TTFT 0), and 10^-308 overflowed the clock to inf (a hang)
MAX_SIMULATED_SPAN_S = 1e9
# prefill steps the simulation may take: each is simulated on its own, ~5 us apiece (a budget of 16 tokens against
# 100,000-token prompts, 4,400 requests with the warm-up, was 27 million steps: minutes)
MAX_SIMULATED_PREFILL_STEPS = 2 * 10**6


def _rounded_up(x: float) -> str:
    """`x` in 3 significant digits, never below it (a bound a refusal states as valid must be)."""
    text, step = f"{x:.3g}", 0
    while float(text) < x:
        step += 1
        text = f"{x * (1 + step * 1e-3):.3g}"
    return text


def _most_requests(limit: int, clients: int) -> int:
    """The most num_requests n whose simulation with its warm-up (max(n // 10, clients)) runs at most `limit`."""
    q, rem = divmod(limit, 11)
    candidates = (10 * q + min(rem, 9), limit - clients)  # the warm-up a tenth of n, or the clients
    return max([n for n in candidates if n >= 1 and n + max(n // 10, clients) <= limit], default=0)


def check_simulation_size(workload, engine, ranks: int) -> None:
    """The open loop's arrivals within MAX_SIMULATED_SPAN_S and the prefill steps within
    MAX_SIMULATED_PREFILL_STEPS, or a ConfigError naming the option to change."""
    if engine.num_requests == 0:
        return
    clients = -(-workload.concurrency // ranks) if workload.closed_loop else 0  # one replica's, warmed up first
    warmup = max(engine.num_requests // 10, clients)  # (as simulate() takes it)
    total = engine.num_requests + warmup
    # (a replica's share of the rate, request_rate / ranks, brings its `total` requests in total / share seconds)
    least_rate = total * ranks / MAX_SIMULATED_SPAN_S
    if not workload.closed_loop and workload.request_rate < least_rate:
        share = f" over {ranks} replicas" if ranks > 1 else ""
        raise ConfigError(
            f"request_rate = {workload.request_rate:g}/s{share} spreads the simulation's {total} requests "
            f"(num_requests = {engine.num_requests} and {warmup} of warm-up) over "
            f"{total * ranks / workload.request_rate:.3g} s, beyond {MAX_SIMULATED_SPAN_S:.0e} s, where its clock "
            f"(float seconds) no longer resolves an engine step; valid: request_rate >= {_rounded_up(least_rate)}, or "
            "fewer num_requests")
    steps = prefill_steps_per_prompt(engine, workload.lengths)
    if total * steps > MAX_SIMULATED_PREFILL_STEPS:
        fewer = _most_requests(MAX_SIMULATED_PREFILL_STEPS // steps, clients)
        fewer = f"num_requests <= {fewer}, " if fewer >= 1 else ""
        means = ", or num_requests=0 for the closed form's means alone" if workload.closed_loop else ""
        raise ConfigError(
            f"max_num_batched_tokens = {engine.token_budget} prefills the longest prompt, {workload.lengths.max_input} "
            f"tokens, in {steps} steps: the simulation of num_requests = {engine.num_requests} requests (and {warmup} "
            f"of warm-up) would run {total * steps} prefill steps, beyond the {MAX_SIMULATED_PREFILL_STEPS} it runs "
            f"in seconds; valid: {fewer}a larger max_num_batched_tokens{means}")


def layout_entries(layout: WorkerLayout, replica: Replica, speculative) -> Dict[str, Any]:
    """The worker layout and speculative decoding as the answer states them."""
    out = {"attention_dp_size": layout.attention_dp, "moe_tp_size": layout.moe_tp, "moe_ep_size": layout.moe_ep,
           "moe_redundant_experts": layout.redundant_experts, "max_running_requests_per_rank": replica.capacity}
    if speculative is not None:
        out.update(speculative.entries())
    return out


def serve(analysis, concurrency=None, request_rate=None, input_len=None, output_len=None, framework: str = "vllm",
          lengths=None, **options) -> Dict[str, Any]:
    """The deployment's latencies and throughput under `concurrency` closed-loop clients or
    Poisson arrivals at `request_rate` per second (see the module docstring; keys in base units)."""
    a = analysis.with_conventions(analysis.conventions_named(None))  # what serving engines run
    disaggregated = options.pop("disaggregated", None)
    speculative = speculative_decoding(a, options.pop("speculative", None))
    imbalance = check_imbalance(options.pop("expert_load_imbalance", None))
    hold_iters = check_balance_iters(options.pop("attention_dp_balance_iters", 0))
    workload = make_workload(a.model_config, concurrency, request_rate, input_len, output_len, lengths)
    if options.get("benchmark_rounds") is not None and not workload.closed_loop:
        # it sets the closed loop's starting burst; accepted here it would change nothing, silently
        raise ConfigError(f"benchmark_rounds = {options['benchmark_rounds']!r} with request_rate: it is the closed "
                          "loop's requests per client (its clients start together); the open loop has no such burst; "
                          "valid: leave it out, or give concurrency= instead of request_rate=")
    if disaggregated is not None:
        if hold_iters:
            raise ConfigError(f"attention_dp_balance_iters = {hold_iters} with disaggregated=: the hold of a prefill "
                              "pool's prompts is not modelled; valid: attention_dp_balance_iters = 0 there")
        return serve_disaggregated(a, workload, framework, disaggregated, options, imbalance, speculative)
    replica, layout = build_rank(a, a.parallelism_config, framework, options, workload.lengths, imbalance,
                                 speculative)
    engine, pool = replica.engine, replica.pool
    check_imbalance_applies(imbalance, [layout])
    if engine.num_requests == 0 and not workload.closed_loop:
        raise ConfigError("num_requests = 0 turns the simulation off, but the open loop's latencies come from it; "
                          "valid: num_requests >= 1 with request_rate (0 only with concurrency)")
    shape = replica.shape
    ranks, per_worker, gpus_per_worker = layout.ranks, layout.attention_dp, layout.gpus_per_worker
    check_simulated_clients(workload, engine, ranks)
    check_simulation_size(workload, engine, ranks)
    if hold_iters and not workload.closed_loop:
        raise ConfigError(f"attention_dp_balance_iters = {hold_iters} with request_rate: the hold is modelled in the "
                          "closed loop only; valid: concurrency=, or attention_dp_balance_iters = 0")
    load = (_closed_loop(replica, workload.concurrency, ranks, (hold_iters, layout.attention_dp))
            if workload.closed_loop else
            _open_loop(replica, workload.request_rate, ranks))
    out: Dict[str, Any] = {
        "framework": engine.framework, "mode": "closed_loop" if workload.closed_loop else "open_loop",
        "concurrency": workload.concurrency, "request_rate": workload.request_rate,
        "input_len_mean": shape.input, "output_len_mean": shape.output,
        "num_replicas": layout.workers, "gpus_per_replica": gpus_per_worker,
        "num_gpus": layout.workers * gpus_per_worker,
    }
    sims, means = load["sims"], load["means"]
    if load["saturated"]:
        out.update(unbounded_latencies())
    else:
        samples = {name: [(getattr(s, f"{name}_s"), n) for s, n in sims] for name in ("ttft", "tpot", "e2e")}
        out.update(ttft_s=means["ttft_s"], tpot_s=means["tpot_s"] if shape.output > 1 else None, e2e_s=means["e2e_s"])
        out.update(percentiles(samples))
    rps, sat_rps = load["rps"], load["saturation_rps"] * ranks
    preemptions = sum(sm.preemptions for sm, _ in sims)
    # a simulated open loop this close to saturation has a queue that depends on the run's length (the note
    # says so; the planner takes no fleet there)
    near = not workload.closed_loop and not load["saturated"] and rps >= NEAR_SATURATION * sat_rps
    num_gpus = out["num_gpus"]
    out.update({
        "requests_per_s": rps,
        "output_tokens_per_s": rps * shape.output,
        "output_tokens_per_s_per_gpu": rps * shape.output / num_gpus,
        "input_tokens_per_s": rps * shape.input,
        "saturation_request_rate_per_s": sat_rps,
        "saturated": load["saturated"],
        "near_saturation": near,
        "max_running_requests_per_replica": replica.capacity * per_worker,
        "mean_running_requests_per_replica": load["resident"] * per_worker,
        "kv_pool_tokens_per_replica": pool.capacity_tokens * per_worker,
        "kv_pool_bytes_per_gpu": pool.pool_bytes,
        # the rest of each GPU as the engine sizes it (serving/kv_pool.py): what a capacity planner checks
        "weight_memory_per_gpu": pool.weight_bytes, "workspace_memory_per_gpu": pool.workspace_bytes,
        "gpu_memory_per_gpu": pool.memory_bytes,
        "kv_occupancy": load["occupancy"],
        "preemptions": preemptions,
        "max_num_batched_tokens": engine.token_budget, "max_num_seqs": engine.max_num_seqs,
        "gpu_memory_utilization": engine.memory_share, "block_size": engine.block_size,
        "kv_cache_dtype": engine.kv_cache_dtype, "prefix_cache_share": engine.prefix_cache_share,
        "seed": engine.seed, "num_requests_simulated": engine.num_requests if sims else 0,
        "perf_model": a.perf_model if isinstance(a.perf_model, str) else "profile",
        "notes": notes(engine, pool, workload, workload.closed_loop, load["saturated"], sat_rps, preemptions,
                       load["occupancy"], near, per_worker),
    })
    if not engine.mixed_batches and load.get("prefill_stretch", 0.0) >= PREFILL_BOUND_STRETCH:
        out["notes"].append(
            f"prefill-only steps take {1 - 1 / load['prefill_stretch']:.0%} of the engine's time here (a token every "
            f"{load['prefill_stretch']:.1f} decode steps): the closed form counts the prompts' arrivals as random, "
            f"but clients of one length return in clumps that the engine prefills together; against the simulation "
            f"of the same steps it overstates E2E by up to 2.5x in this regime (docs/serving.md, short requests)")
    spread = expert_spread_note(layout, engine, imbalance, a.model_config.moe_top_k,
                                None if load["saturated"] else load["resident"])
    if spread:
        out["notes"].append(spread)
    split = column_split_note(layout)
    if split:
        out["notes"].append(split)
    plain = layout.attention_dp == 1 and layout.moe_ep == 1 and layout.pp == 1
    accuracy = (accuracy_note(engine, "one_group" if plain else "aggregated_layout")
                if out["perf_model"] == "calibrated" else None)
    if accuracy:  # the roofline's times are lower bounds, not forecasts: no error band applies
        out["notes"].append(accuracy)
    out.update(layout_entries(layout, replica, speculative))
    if speculative is not None:
        out["notes"].append(speculative.note())
    widened = widened_checkpoint_note(a)
    if widened:
        out["notes"].append(widened)
    return out


__all__ = ["serve"]
