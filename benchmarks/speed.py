"""Speed of the analysis: one inference() call, a sweep of >= 1000 setups, and
the CLI's start-up time. Prints its figures; run with `python benchmarks/speed.py`.

Target (issue 4): inference() well under 1 ms per call with logging quiet.
"""

from __future__ import annotations

import itertools
import logging
import statistics
import subprocess
import sys
import time

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.errors import DoesNotFitError


def sweep(models, gpus, tps, batches, seqs):
    setups = list(itertools.product(models, gpus, tps, batches, seqs))
    analyses = {}
    done = skipped = 0
    t0 = time.perf_counter()
    for model, gpu, tp, b, s in setups:
        key = (model, gpu, tp)
        if key not in analyses:
            analyses[key] = LLMAnalysis(get_model_config_by_name(model), get_gpu_config_by_name(gpu),
                                        get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=tp))
        try:
            analyses[key].inference(batch_size_per_gpu=b, seq_len=s, num_tokens_to_generate=256)
            done += 1
        except DoesNotFitError:
            skipped += 1
    return len(setups), done, skipped, time.perf_counter() - t0


def cli_startup_s(runs: int = 5) -> float:
    cmd = [sys.executable, "-m", "llm_analysis.analysis", "infer", "--model_name", "meta-llama_Llama-3.1-8B",
           "--gpu_name", "h100-sxm-80gb", "--output_format", "none"]
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    logging.disable(logging.WARNING)
    models = ["meta-llama_Llama-3.1-8B", "meta-llama_Llama-3.1-70B", "mistralai_Mixtral-8x7B-v0.1",
              "google_gemma-2-9b", "Qwen_Qwen3-30B-A3B", "deepseek-ai_DeepSeek-V2-Lite"]
    gpus = ["a100-sxm-80gb", "h100-sxm-80gb", "h200-sxm-141gb"]
    n, done, skipped, dt = sweep(models, gpus, [1, 2, 4, 8], [1, 4, 16, 64], [128, 512, 2048, 8192])
    print(f"sweep: {n} setups ({done} analysed, {skipped} do not fit) in {dt:.2f} s "
          f"-> {n / dt:.0f} setups/s, {dt / n * 1e3:.3f} ms per setup")
    reps = 2000
    for perf_model in ("roofline", "calibrated"):  # calibrated includes its roofline lower-bound pass
        a = LLMAnalysis(get_model_config_by_name("meta-llama_Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
                        perf_model=perf_model)
        t = time.perf_counter()
        for i in range(reps):
            a.inference(batch_size_per_gpu=1 + i % 32, seq_len=512 + i, num_tokens_to_generate=128)
        per_call = (time.perf_counter() - t) / reps
        print(f"inference(), perf_model={perf_model}: {per_call * 1e3:.3f} ms per call ({1 / per_call:.0f} calls/s), "
              "Llama-3.1-8B on H100")
    a = LLMAnalysis(get_model_config_by_name("meta-llama_Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"))
    t = time.perf_counter()
    a.inference(batch_size_per_gpu=2, seq_len=1000, num_tokens_to_generate=100_000)
    print(f"inference() with 100 000 generated tokens: {(time.perf_counter() - t) * 1e3:.3f} ms")
    print(f"CLI start-up (infer on a shipped model, median of 5): {cli_startup_s():.3f} s")


if __name__ == "__main__":
    main()
