"""`serve()`: a deployment under load (DESIGN.md section 5).

The analysis' layout is one replica (tp GPUs; dp_size replicas share the load: the clients
round robin, the request rate evenly). Each replica runs the engine of `framework` with its
profile's defaults and the caller's options (serving/engine.py), its KV pool sized as that
engine sizes it (serving/kv_pool.py), and steps timed on the analysis' cost model from the
model description (serving/step_time.py). The closed loop's means come from its steady state
in closed form (serving/steady_state.py); tails, and the open loop, from a seeded simulation of
the same steps (serving/simulation.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Tuple

import numpy as np

from llm_analysis.errors import ConfigError
from llm_analysis.serving.answer import notes, percentiles, unbounded_latencies
from llm_analysis.serving.engine import engine_settings
from llm_analysis.serving.kv_pool import kv_pool
from llm_analysis.serving.simulation import simulate
from llm_analysis.serving.steady_state import RequestShape, capacity, saturation_rate, solve_closed_loop
from llm_analysis.serving.step_time import step_timer
from llm_analysis.serving.workload import make_workload


def _check_layout(analysis) -> None:
    """serve() models replicas of one tensor-parallel group; the other layouts are refused by name."""
    p = analysis.parallelism_config
    for field, value, why in (("pp_size", p.pp_size, "pipeline stages in a serving replica"),
                              ("cp_size", p.cp_size, "context parallelism in serving"),
                              ("ep_size", p.ep_size, "expert parallelism across replicas (attention-DP + EP)")):
        if value != 1:
            raise ConfigError(f"{field} = {value}: {why} is not modelled by serve(); valid: {field} = 1 (a replica is "
                              f"tp_size GPUs; dp_size replicas share the load)")


def _shape(engine, workload) -> RequestShape:
    lengths = workload.lengths
    if lengths.pairs is not None:
        inputs = lengths.pairs[:, 0].astype(float)
    else:
        inputs = np.array([lengths.input_mean])
    block = engine.block_size
    cached = np.minimum((np.floor(engine.prefix_cache_share * inputs) // block) * block, inputs - 1)
    return RequestShape(lengths.input_mean, lengths.output_mean, float(cached.mean()))


def _client_groups(concurrency: int, replicas: int) -> List[Tuple[int, int]]:
    """(clients per replica, replicas with that many): round robin over the replicas."""
    base, extra = divmod(concurrency, replicas)
    groups = [(base + 1, extra), (base, replicas - extra)]
    return [(c, n) for c, n in groups if n > 0 and c > 0]


def _scaled_to(sim, state):
    """The closed loop's simulated latencies, each scaled so that its mean is the steady state's: the
    simulation gives the spread, the closed form the level (its means include the fitted wait for
    other clients' prefills, which a simulation of spread-out clients has only in part)."""
    for name in ("ttft", "tpot", "e2e"):
        samples = getattr(sim, f"{name}_s")
        if len(samples) and samples.mean() > 0:
            setattr(sim, f"{name}_s", samples * (getattr(state, f"{name}_s") / samples.mean()))
    return sim


def serve(analysis, concurrency=None, request_rate=None, input_len=None, output_len=None, framework: str = "vllm",
          lengths=None, **options) -> Dict[str, Any]:
    """The deployment's latencies and throughput under `concurrency` closed-loop clients or
    Poisson arrivals at `request_rate` per second (see the module docstring; keys in base units)."""
    a = analysis.with_conventions(analysis.conventions_named(None))  # what serving engines run
    _check_layout(a)
    workload = make_workload(a.model_config, concurrency, request_rate, input_len, output_len, lengths)
    engine = engine_settings(a, framework, options)
    if engine.num_requests == 0 and not workload.closed_loop:
        raise ConfigError("num_requests = 0 turns the simulation off, but the open loop's latencies come from it; "
                          "valid: num_requests >= 1 with request_rate (0 only with concurrency)")
    d = a.describer_for(engine.kv_cache_bytes)
    pool = kv_pool(a, d, engine, workload.lengths.max_total)
    timer = step_timer(a, d, engine)
    shape = _shape(engine, workload)
    p = a.parallelism_config
    replicas, gpus_per_replica = p.dp_size, p.tp_size
    sat_key = ("saturation", dataclasses.replace(engine, seed=0, num_requests=0), shape, pool)
    sat_rps = timer.costs.memo.get(sat_key)
    if sat_rps is None:  # one replica's (the planner asks again at every concurrency)
        sat_rps = timer.costs.memo[sat_key] = saturation_rate(timer, engine, pool, shape)
    n_max = capacity(engine, pool, shape)
    sim_kw = dict(num_requests=engine.num_requests, api_latency_s=engine.api_latency_s)
    out: Dict[str, Any] = {
        "framework": engine.framework, "mode": "closed_loop" if workload.closed_loop else "open_loop",
        "concurrency": workload.concurrency, "request_rate": workload.request_rate,
        "input_len_mean": shape.input, "output_len_mean": shape.output,
        "num_replicas": replicas, "gpus_per_replica": gpus_per_replica, "num_gpus": replicas * gpus_per_replica,
    }
    saturated = False
    if workload.closed_loop:
        groups = _client_groups(workload.concurrency, replicas)
        states = [(solve_closed_loop(timer, engine, pool, shape, c, engine.api_latency_s), n) for c, n in groups]
        rps = sum(s.throughput_rps * n for s, n in states)
        means = {key: sum(getattr(s, key) * s.throughput_rps * n for s, n in states) / rps
                 for key in ("ttft_s", "tpot_s", "e2e_s")}
        sims = [] if engine.num_requests == 0 else [
            (_scaled_to(simulate(timer, engine, pool, workload.lengths, concurrency=c, seed=engine.seed + i,
                                 spread_s=s.e2e_s, **sim_kw), s), n)
            for i, ((s, n), (c, _)) in enumerate(zip(states, groups))]
        resident = sum(s.resident * n for s, n in states) / replicas
    else:
        rate = workload.request_rate / replicas
        saturated = rate >= sat_rps
        sims = [] if saturated else [(simulate(timer, engine, pool, workload.lengths, request_rate=rate,
                                               seed=engine.seed, **sim_kw), replicas)]
        rps = workload.request_rate if not saturated else sat_rps * replicas
        means = {}
        if sims:
            sim = sims[0][0]
            means = {"ttft_s": float(sim.ttft_s.mean()), "e2e_s": float(sim.e2e_s.mean()),
                     "tpot_s": float(sim.tpot_s.mean()) if len(sim.tpot_s) else None}
        resident = sims[0][0].mean_running if sims else float(n_max)
    if saturated:
        out.update(unbounded_latencies())
    else:
        samples = {name: np.concatenate([np.repeat(getattr(s, f"{name}_s"), n) for s, n in sims])
                   for name in ("ttft", "tpot", "e2e")} if sims else {}
        out.update(ttft_s=means["ttft_s"], tpot_s=means["tpot_s"] if shape.output > 1 else None, e2e_s=means["e2e_s"])
        out.update(percentiles(samples))
    occupancy = (sum(s.kv_occupancy * n for s, n in sims) / sum(n for _, n in sims)) if sims else 1.0
    preemptions = sum(s.preemptions for s, _ in sims)
    out.update({
        "requests_per_s": rps,
        "output_tokens_per_s": rps * shape.output,
        "output_tokens_per_s_per_gpu": rps * shape.output / (replicas * gpus_per_replica),
        "input_tokens_per_s": rps * shape.input,
        "saturation_request_rate_per_s": sat_rps * replicas,
        "saturated": saturated,
        "max_running_requests_per_replica": n_max,
        "mean_running_requests_per_replica": resident,
        "kv_pool_tokens_per_replica": pool.capacity_tokens,
        "kv_pool_bytes_per_gpu": pool.pool_bytes,
        "kv_occupancy": occupancy,
        "preemptions": preemptions,
        "max_num_batched_tokens": engine.token_budget, "max_num_seqs": engine.max_num_seqs,
        "gpu_memory_utilization": engine.memory_share, "block_size": engine.block_size,
        "kv_cache_dtype": engine.kv_cache_dtype, "prefix_cache_share": engine.prefix_cache_share,
        "seed": engine.seed, "num_requests_simulated": engine.num_requests if sims else 0,
        "perf_model": a.perf_model if isinstance(a.perf_model, str) else "profile",
        "notes": notes(engine, pool, workload, workload.closed_loop, saturated, sat_rps * replicas, preemptions,
                       occupancy if sims else None),
    })
    return out


__all__ = ["serve"]
