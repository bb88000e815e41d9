"""Planner speed: candidates per second, plan wall time, and the per-call
times of inference() and training() the planner is built on.

    python benchmarks/plan_speed.py

"Candidates" are every setup of the search space (layout x dtype x KV dtype x
batch for serving; layout x ZeRO x recomputation x micro-batch for training).
Most are decided without the full analysis: by a lower bound (weights vs
memory, ideal time vs the best found) or by monotonicity in the batch; the
printed counts say how many of each, so candidates/s is not full analyses/s.
Each plan is timed in wall time and in CPU time (time.process_time): on a shared
machine the CPU figure is the one that does not count the other processes."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name  # noqa: E402
from llm_analysis.facade import LLMAnalysis  # noqa: E402
from llm_analysis.planner import plan_inference, plan_training  # noqa: E402


def per_call_ms(fn, n):
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e3


def main():
    m = get_model_config_by_name("facebook/opt-1.3b")
    a = LLMAnalysis(m, get_gpu_config_by_name("a100-sxm-40gb"), get_dtype_config_by_name("w16a16e16"),
                    ParallelismConfig(tp_size=2))
    print(f"inference() opt-1.3b tp 2: {per_call_ms(lambda: a.inference(batch_size_per_gpu=8, seq_len=512), 50):.2f}"
          " ms/call")
    t = LLMAnalysis(m, get_gpu_config_by_name("a100-sxm-40gb"), get_dtype_config_by_name("w16a16e16"),
                    ParallelismConfig(tp_size=2, dp_size=4))
    print(f"training()  opt-1.3b tp 2 dp 4: "
          f"{per_call_ms(lambda: t.training(batch_size_per_gpu=4, global_batch_size=64, seq_len=2048), 20):.2f}"
          " ms/call")

    t0, c0 = time.perf_counter(), time.process_time()
    r = plan_inference("meta-llama/Llama-3.1-70B", ["h100-sxm-80gb", "a100-sxm-80gb"],
                       {"max_ttft_s": 2.0, "max_tpot_s": 0.05}, seq_len=2048, num_tokens_to_generate=256,
                       dtypes=["w16a16e16", "w8a16e16"], kv_cache_dtype_bytes=[None, 1], objective="cost",
                       gpu_prices={"h100-sxm-80gb": 2.5, "a100-sxm-80gb": 1.5})
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"\nplan_inference Llama-3.1-70B (2 GPUs x 2 dtypes x 2 KV x tp x pp x batch 1..1024): {wall:.2f} s")
    print("  " + r.stats.line())
    print(f"  CPU {cpu:.2f} s: {r.stats.considered / cpu:.0f} candidates per CPU second")
    print(f"  best: {r.best['layout']} batch {r.best['figures']['batch_size_per_gpu']}: {r.best['why']}")

    # issue 24's target: `plan infer` over four GPU types under the CLI's default perf model, calibrated
    # (under 2 s)
    four_gpus = ["h100-sxm-80gb", "a100-sxm-80gb", "h200-sxm-141gb", "a100-sxm-40gb"]
    t0, c0 = time.perf_counter(), time.process_time()
    r = plan_inference("meta-llama/Llama-3.1-70B", four_gpus, {"max_ttft_s": 2.0, "max_tpot_s": 0.05}, seq_len=2048,
                       num_tokens_to_generate=256, perf_model="calibrated")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"\nplan_inference Llama-3.1-70B on {', '.join(four_gpus)}, calibrated: {wall:.2f} s (CPU {cpu:.2f} s)")
    print("  " + r.stats.line())

    # issue 25's example: continuous batching sized with serve() (target: 8-48 H100s in under 5 s)
    for perf_model in ("roofline", "calibrated"):
        t0, c0 = time.perf_counter(), time.process_time()
        r = plan_inference("meta-llama/Llama-3.1-70B", ["h100-sxm-80gb"],
                           {"max_ttft_s": 0.5, "max_tpot_s": 0.05, "request_rate_per_s": 20}, perf_model=perf_model)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        f = r.best["figures"]
        print(f"\nplan_inference Llama-3.1-70B on H100, TTFT <= 0.5 s, TPOT <= 50 ms at 20 requests/s, continuous "
              f"batching, {perf_model}: {wall:.2f} s (CPU {cpu:.2f} s)")
        print("  " + r.stats.line())
        print(f"  best: tp {r.best['layout']['tp']} x {f['replicas']} replicas = {f['num_gpus']} GPUs; TTFT "
              f"{f['ttft_s'] * 1e3:.0f} ms, TPOT {f['tpot_s'] * 1e3:.1f} ms (binding: {', '.join(r.best['binding'])})")

    t0, c0 = time.perf_counter(), time.process_time()
    r = plan_training("megatron-lm-175b", ["a100-sxm-80gb"], tokens=300e9, max_gpus=1024, global_batch_size=1536,
                      seq_len=2048, flops_efficiency=0.5)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"\nplan_training GPT-3 175B on <= 1024 A100-80GB: {wall:.2f} s")
    print("  " + r.stats.line())
    print(f"  CPU {cpu:.2f} s: {r.stats.considered / cpu:.0f} candidates per CPU second")
    print(f"  best: {r.best['layout']}: {r.best['why']}")


if __name__ == "__main__":
    main()
