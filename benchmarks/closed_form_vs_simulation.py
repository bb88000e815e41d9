"""The closed loop's closed form against the seeded simulation of the same steps.

    python benchmarks/closed_form_vs_simulation.py [--setups random|prefill_only] [--count 150] [--seed 0]

`serve()` gives a closed loop's means from the steady state in closed form (serving/steady_state.py)
and its percentiles from a simulation of the same engine, request by request (serving/simulation.py),
scaled to those means. The two share the step model, so where they disagree the closed form leaves
out something the engine does: prompts sharing a step, a token budget that bounds the decoders, an
engine that runs prompts before the decodes. Both are solved with no starting burst (benchmark_rounds
= 0: the steady state on both sides), and the median, p90 and worst relative error of each mean
latency is printed, with the worst setups.

- `random` (default): `--count` setups drawn by `--seed` over models, GPUs, tensor-parallel sizes,
  engines, prompt and output lengths (down to 2 output tokens) and clients.
- `prefill_only`: one-token requests (embeddings, scoring) on a grid of 270 setups: Llama-3.1-8B and
  70B on H100 and A100, three engines, 32- to 8,192-token prompts, 1 to 256 clients (TTFT only: the
  request is its prefill).

The setups are drawn or gridded, not fitted: round 30's closed-form changes were judged on them
(docs/serving.md, short requests). Both sides are the package's model of time: this checks the closed
form, not the model against an engine.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import time

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.errors import LLMAnalysisError
from llm_analysis.serving.rank import build_rank
from llm_analysis.serving.steady_state import solve_closed_loop
from llm_analysis.serving.workload import make_workload

ENGINES = ["vllm", "sglang", "trtllm"]


def random_setups(count: int, seed: int):
    """(model, GPU, tp, engine, prompt, output, clients) drawn at random."""
    rng = random.Random(seed)
    models = ["meta-llama/Llama-3.1-8B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-32B", "meta-llama/Llama-3.1-70B"]
    gpus = ["h100-sxm-80gb", "a100-sxm-80gb", "b200-180gb", "h200-sxm-141gb"]
    for _ in range(count):
        yield (rng.choice(models), rng.choice(gpus), rng.choice([1, 2, 4, 8]), rng.choice(ENGINES),
               rng.choice([64, 256, 1024, 4096]), rng.choice([2, 4, 16, 128, 1024]), rng.choice([1, 4, 16, 64, 256]))


def prefill_only_setups():
    """One-token requests on a grid."""
    places = [("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", 1), ("meta-llama/Llama-3.1-70B", "h100-sxm-80gb", 4),
              ("meta-llama/Llama-3.1-8B", "a100-sxm-80gb", 1)]
    for (name, gpu, tp), engine, prompt, clients in itertools.product(
            places, ENGINES, (32, 128, 512, 2048, 8192), (1, 2, 4, 16, 64, 256)):
        yield name, gpu, tp, engine, prompt, 1, clients


def compare(setups, num_requests: int):
    """[(TTFT, TPOT, E2E errors (TPOT None for one-token requests), setup)] and the count refused."""
    analyses, rows, refused = {}, [], 0
    for name, gpu, tp, framework, prompt, output, clients in setups:
        try:
            key = (name, gpu, tp)
            if key not in analyses:
                plain = LLMAnalysis(get_model_config_by_name(name), get_gpu_config_by_name(gpu),
                                    get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=tp),
                                    perf_model="calibrated")
                analyses[key] = plain.with_conventions(plain.conventions_named(None))  # as serve() runs it
            a = analyses[key]
            lengths = make_workload(a.model_config, clients, None, prompt, output, None).lengths
            replica, _ = build_rank(a, a.parallelism_config, framework,
                                    {"num_requests": num_requests, "benchmark_rounds": 0.0}, lengths)
            state = solve_closed_loop(replica.timer, replica.engine, replica.pool, replica.shape, clients,
                                      replica.engine.api_latency_s)
            sim = replica.simulate(concurrency=clients, seed=1, spread_s=state.e2e_s - state.queue_wait_s)
        except LLMAnalysisError:
            refused += 1
            continue
        tpot = state.tpot_s / float(sim.tpot_s.mean()) - 1 if output > 1 else None
        rows.append((state.ttft_s / float(sim.ttft_s.mean()) - 1, tpot, state.e2e_s / float(sim.e2e_s.mean()) - 1,
                     (name, gpu, tp, framework, prompt, output, clients)))
    return rows, refused


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setups", choices=["random", "prefill_only"], default="random")
    parser.add_argument("--count", type=int, default=150, help="random setups drawn (some are refused: too large)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num_requests", type=int, default=1500, help="simulated requests per setup")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    setups = random_setups(args.count, args.seed) if args.setups == "random" else prefill_only_setups()
    rows, refused = compare(setups, args.num_requests)
    print(f"{len(rows)} setups ({refused} refused): closed form against the simulation, mean of each latency")
    for i, latency in enumerate(("TTFT", "TPOT", "E2E")):
        sizes = sorted(abs(r[i]) for r in rows if r[i] is not None)
        if sizes:
            print(f"  {latency:5s} median {statistics.median(sizes):.1%}, p90 {sizes[int(0.9 * len(sizes))]:.1%}, "
                  f"worst {sizes[-1]:.1%}")
    print("worst ten by E2E (TTFT, E2E error; model, GPU, tp, engine, prompt x output, clients):")
    for r in sorted(rows, key=lambda r: -abs(r[2]))[:10]:
        name, gpu, tp, framework, prompt, output, clients = r[3]
        print(f"  {r[0]:+6.0%} {r[2]:+6.0%}  {name} {gpu} tp{tp} {framework} {prompt} x {output}, {clients} clients")
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
