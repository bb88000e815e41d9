"""The closed loop's closed form against the seeded simulation of the same steps, on random setups.

    python benchmarks/closed_form_vs_simulation.py [--setups 150] [--seed 0] [--num_requests 1500]

`serve()` gives a closed loop's means from the steady state in closed form (serving/steady_state.py)
and its percentiles from a simulation of the same engine, request by request (serving/simulation.py),
scaled to those means. The two share the step model, so where they disagree the closed form leaves
out something the engine does: prompts sharing a step, a token budget that bounds the decoders, an
engine that runs prompts before the decodes. This draws models, GPUs, tensor-parallel sizes, engines,
prompt and output lengths (down to 2 output tokens) and clients, solves both with no starting burst
(benchmark_rounds = 0: the steady state on both sides), and prints the median, p90 and worst relative
error of the mean TTFT, TPOT and E2E, and the worst setups by E2E. The setups are drawn, not fitted:
round 30's closed-form changes were judged on them (docs/serving.md, short requests). Both sides are
the package's model of time: this checks the closed form, not the model against an engine.
"""

from __future__ import annotations

import argparse
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

MODELS = ["meta-llama/Llama-3.1-8B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-32B", "meta-llama/Llama-3.1-70B"]
GPUS = ["h100-sxm-80gb", "a100-sxm-80gb", "b200-180gb", "h200-sxm-141gb"]
ENGINES = ["vllm", "sglang", "trtllm"]
PROMPTS = [64, 256, 1024, 4096]
OUTPUTS = [2, 4, 16, 128, 1024]
CLIENTS = [1, 4, 16, 64, 256]


def _stats(errors) -> str:
    sizes = sorted(abs(e) for e in errors)
    return (f"median {statistics.median(sizes):.1%}, p90 {sizes[int(0.9 * len(sizes))]:.1%}, "
            f"worst {sizes[-1]:.1%}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setups", type=int, default=150, help="setups drawn (some are refused: too large)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num_requests", type=int, default=1500, help="simulated requests per setup")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    start = time.perf_counter()
    analyses, rows, refused = {}, [], 0
    for _ in range(args.setups):
        name, gpu, tp = rng.choice(MODELS), rng.choice(GPUS), rng.choice([1, 2, 4, 8])
        framework, prompt, output = rng.choice(ENGINES), rng.choice(PROMPTS), rng.choice(OUTPUTS)
        clients = rng.choice(CLIENTS)
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
                                    {"num_requests": args.num_requests, "benchmark_rounds": 0.0}, lengths)
            state = solve_closed_loop(replica.timer, replica.engine, replica.pool, replica.shape, clients,
                                      replica.engine.api_latency_s)
            sim = replica.simulate(concurrency=clients, seed=1, spread_s=state.e2e_s - state.queue_wait_s)
        except LLMAnalysisError:
            refused += 1
            continue
        rows.append((state.ttft_s / float(sim.ttft_s.mean()) - 1, state.tpot_s / float(sim.tpot_s.mean()) - 1,
                     state.e2e_s / float(sim.e2e_s.mean()) - 1, name, gpu, tp, framework, prompt, output, clients))
    print(f"{len(rows)} setups ({refused} refused): closed form against the simulation, mean of each latency")
    for i, latency in enumerate(("TTFT", "TPOT", "E2E")):
        print(f"  {latency:5s} {_stats([r[i] for r in rows])}")
    print("worst ten by E2E (TTFT, TPOT, E2E error; model, GPU, tp, engine, prompt, output, clients):")
    for r in sorted(rows, key=lambda r: -abs(r[2]))[:10]:
        print(f"  {r[0]:+6.0%} {r[1]:+7.0%} {r[2]:+6.0%}  {r[3]} {r[4]} tp{r[5]} {r[6]} {r[7]} x {r[8]}, {r[9]} clients")
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
