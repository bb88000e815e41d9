"""The closed form of a prefill-only workload (every request yields one token: embeddings, scoring)
against the seeded simulation of the same steps.

    python benchmarks/prefill_only.py [--num_requests 3000]

`serve()` gives a closed loop's means from the steady state in closed form (serving/steady_state.py
`_prefill_only`: prefill-only steps packing as many waiting prompts as the token budget holds). The
simulation (serving/simulation.py) runs the same engine request by request: clients that return, wait
for a step boundary, and share a step with whoever waits with them. It is the better-founded of the
two for this workload, so the closed form is scored against it: the relative error of the mean time to
first token over models, GPUs, engines, prompt lengths and clients, with the worst setups printed.
Both sides are the package's model of time: this checks the closed form, not the model's accuracy
(no published run serves one-token requests).
"""

from __future__ import annotations

import argparse
import statistics
import time

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.serving.rank import build_rank
from llm_analysis.serving.steady_state import solve_closed_loop
from llm_analysis.serving.workload import make_workload

SETUPS = [("meta-llama/Llama-3.1-8B", 1, "h100-sxm-80gb"), ("meta-llama/Llama-3.1-70B", 4, "h100-sxm-80gb"),
          ("meta-llama/Llama-3.1-8B", 1, "a100-sxm-80gb")]
PROMPTS = (32, 128, 512, 2048, 8192)
CLIENTS = (1, 2, 4, 16, 64, 256)
ENGINES = ("vllm", "sglang", "trtllm")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num_requests", type=int, default=3000, help="simulated requests per setup")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    errors = []
    for name, tp, gpu in SETUPS:
        model = get_model_config_by_name(name)
        plain = LLMAnalysis(model, get_gpu_config_by_name(gpu), get_dtype_config_by_name("w16a16e16"),
                            ParallelismConfig(tp_size=tp), perf_model="calibrated")
        a = plain.with_conventions(plain.conventions_named(None))  # as serve() runs it
        for framework in ENGINES:
            for prompt in PROMPTS:
                lengths = make_workload(model, 1, None, prompt, 1, None).lengths
                replica, _ = build_rank(a, a.parallelism_config, framework, {"num_requests": args.num_requests},
                                        lengths)
                for clients in CLIENTS:
                    state = solve_closed_loop(replica.timer, replica.engine, replica.pool, replica.shape, clients,
                                              replica.engine.api_latency_s)
                    sim = replica.simulate(concurrency=clients, seed=1, spread_s=state.e2e_s)
                    simulated = float(sim.ttft_s.mean())
                    errors.append((state.ttft_s / simulated - 1, name, gpu, framework, prompt, clients,
                                   state.ttft_s, simulated))
    sizes = sorted(abs(e[0]) for e in errors)
    print(f"{len(errors)} setups: mean TTFT, closed form against the simulation: median {statistics.median(sizes):.1%}, "
          f"p90 {sizes[int(0.9 * len(sizes))]:.1%}, worst {sizes[-1]:.1%}")
    print("worst ten (error, model, GPU, engine, prompt tokens, clients, closed form s, simulated s):")
    for e in sorted(errors, key=lambda e: -abs(e[0]))[:10]:
        print(f"  {e[0]:+7.1%}  {e[1]} {e[2]} {e[3]} {e[4]} tokens, {e[5]} clients: {e[6]:.4f} vs {e[7]:.4f}")
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
