"""Seeded random sweeps of the public calls, looking for what no unit test thought of.

    python benchmarks/random_sweeps.py [--what serve|plan_infer|plan_train|all] [--seconds 120] [--seed 0]

Each sweep draws valid-looking setups (catalogue models, GPUs, data types, layouts, loads, lengths,
engine options, pools, speculative decoding) and calls the library as a user would. An answer is
checked for what must hold whatever the model of time: every figure a number >= 0 (a capacity no
request uses may be inf), percentiles ordered, TTFT <= E2E, Little's law in a closed loop; a plan's
best row reproduces through its own `reproduce` call and meets its targets. A refusal must be one of
the package's errors; anything else is printed with its setup as CRASH. The refusals are counted by
their first words, so a reason that should not be there (a default the user never gave, a crash
dressed as a refusal) stands out. Round 29's fixes came from these sweeps (docs/testing.md).
"""

from __future__ import annotations

import argparse
import collections
import logging
import math
import random
import re
import time
import traceback

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig
from llm_analysis.errors import LLMAnalysisError
from llm_analysis.planner import plan_inference, plan_training

MODELS = ["meta-llama/Llama-3.1-8B", "Qwen/Qwen3-30B-A3B", "facebook_opt-1.3b", "deepseek-ai/DeepSeek-V2-Lite",
          "mistralai/Mixtral-8x7B-v0.1", "google/gemma-2-9b", "openai/gpt-oss-20b", "Qwen/Qwen3-32B",
          "deepseek-ai/DeepSeek-R1", "Qwen/Qwen3-235B-A22B"]
GPUS = ["h100-sxm-80gb", "a100-sxm-80gb", "b200-180gb", "l40s-48gb", "h200-sxm-141gb", "gb200-nvl72-186gb"]
DTYPES = ["w16a16e16", "fp8", "w4a16e16", "nvfp4"]


def _layout(rng: random.Random) -> dict:
    tp, adp = rng.choice([1, 2, 4, 8]), rng.choice([1, 1, 2, 4, 8])
    ep = rng.choice([d for d in (1, 2, 4, 8, 16) if (tp * adp) % d == 0])
    kw = {"tp_size": tp}
    if adp > 1:
        kw["attention_dp_size"] = adp
    if ep > 1:
        kw.update(moe_ep_size=ep, moe_tp_size=tp * adp // ep)
    if rng.random() < 0.1:
        kw["pp_size"] = 2
    return kw


def _serve_setup(rng: random.Random):
    kw = {"concurrency": rng.choice([1, 7, 64, 300])} if rng.random() < 0.5 else \
        {"request_rate": rng.choice([0.5, 5.0, 50.0])}
    kw.update(input_len=rng.choice([1, 500, 2048, 8192]), output_len=rng.choice([1, 2, 64, 1024]),
              framework=rng.choice(["vllm", "sglang", "trtllm"]), num_requests=500)
    for key, values in (("max_num_batched_tokens", [512, 2048, 16384]), ("max_num_seqs", [1, 256]),
                        ("gpu_memory_utilization", [0.5, 0.95]), ("prefix_cache_share", [0.5])):
        if rng.random() < 0.15:
            kw[key] = rng.choice(values)
    if rng.random() < 0.25:
        kw["disaggregated"] = {"prefill": {"workers": rng.choice([1, 2]), "parallelism": ParallelismConfig(**_layout(rng))},
                               "decode": {"workers": rng.choice([1, 3]), "parallelism": ParallelismConfig(**_layout(rng))}}
    if rng.random() < 0.15:
        k = rng.choice([2, 3, 4])
        kw["speculative"] = {"method": "mtp", "draft_length": k, "mean_accepted_length": rng.uniform(1, k)}
    return _layout(rng), kw


def _answer_faults(s: dict, output_len: int) -> list:
    faults = [(k, v) for k, v in s.items() if isinstance(v, float) and (
        math.isnan(v) or v < 0 or (math.isinf(v) and not k.endswith("capacity_request_rate_per_s")
                                   and not s.get("saturated")))]
    if s.get("saturated"):
        return faults
    for name in ("ttft", "e2e") + (("tpot",) if output_len > 1 else ()):
        p = [s[f"{name}_p{q}_s"] for q in (50, 90, 99)]
        if None in p or not p[0] <= p[1] <= p[2]:
            faults.append((name, p))
    if s["mode"] == "closed_loop" and abs(s["concurrency"] - s["requests_per_s"] * s["e2e_s"]) > 1e-6 * s["concurrency"]:
        faults.append(("little's law", s["concurrency"], s["requests_per_s"] * s["e2e_s"]))
    if s["ttft_s"] > s["e2e_s"]:
        faults.append(("ttft > e2e", s["ttft_s"], s["e2e_s"]))
    return faults


def _called(what: str, call, setup: tuple, refusals: collections.Counter):
    """call()'s answer; None when it refused (counted by kind) or crashed (printed with its setup)."""
    try:
        return call()
    except LLMAnalysisError as e:
        refusals[reason(e)] += 1
    except Exception:
        print(f"CRASH {what}", *setup)
        traceback.print_exc(limit=3)
    return None


def sweep_serve(rng: random.Random, until: float, refusals: collections.Counter) -> int:
    answered = 0
    while time.time() < until:
        model, gpu, dtype = rng.choice(MODELS), rng.choice(GPUS), rng.choice(DTYPES)
        layout, kw = _serve_setup(rng)
        perf_model = rng.choice(["calibrated", "roofline"])
        s = _called("serve", lambda: LLMAnalysis(model, gpu, dtype, ParallelismConfig(**layout),
                                                 perf_model=perf_model).serve(**kw),
                    (model, gpu, dtype, layout, perf_model, kw), refusals)
        if s is None:
            continue
        answered += 1
        faults = _answer_faults(s, kw["output_len"])
        if faults:
            print("FAULT serve", model, gpu, dtype, layout, perf_model, kw, faults[:4])
    return answered


def sweep_plan_infer(rng: random.Random, until: float, refusals: collections.Counter) -> int:
    answered = 0
    while time.time() < until:
        model, gpus = rng.choice(MODELS[:8]), rng.sample(GPUS[:5], rng.choice([1, 2]))
        slo = {rng.choice(["concurrency", "request_rate_per_s", "min_tokens_per_s"]): rng.choice([1, 16, 40])}
        if rng.random() < 0.6:
            slo["max_tpot_s"] = rng.choice([0.01, 0.03, 0.1])
        if rng.random() < 0.5:
            slo["max_ttft_s"] = rng.choice([0.2, 1.0, 5.0])
        if rng.random() < 0.3:
            slo["percentile"] = rng.choice([50, 90, 99])
        kw = dict(seq_len=rng.choice([256, 2048]), num_tokens_to_generate=rng.choice([16, 256]),
                  framework=rng.choice(["vllm", "sglang", "trtllm"]), perf_model=rng.choice(["roofline", "calibrated"]),
                  dtypes=rng.sample(["w16a16e16", "fp8", "int4"], rng.choice([1, 2])), disaggregate=rng.random() < 0.3)
        plan = _called("plan infer", lambda: plan_inference(model, gpus, slo, **kw), (model, gpus, slo, kw), refusals)
        if plan is None:
            continue
        answered += 1
        pools = plan.extra.get("disaggregated")
        # (with --disaggregate a plan may have pool rows only: no colocated layout met the targets)
        for row in plan.rows[:1] + (list(pools["rows"][:1]) if isinstance(pools, dict) else []):
            call = row["reproduce"].get("serve_call")
            if call is None:
                continue
            s = eval(call, {"LLMAnalysis": LLMAnalysis, "ParallelismConfig": ParallelismConfig,  # noqa: S307 (our own text)
                            **{n: getattr(__import__("llm_analysis.config", fromlist=[n]), n) for n in
                               ("get_model_config_by_name", "get_gpu_config_by_name", "get_dtype_config_by_name")}})
            suffix = f"_p{slo['percentile']}_s" if "percentile" in slo else "_s"
            for key, limit in (("tpot", slo.get("max_tpot_s")), ("ttft", slo.get("max_ttft_s"))):
                figure = row["figures"].get(f"{key}_s")
                if figure is not None and abs(figure - s[f"{key}_s"]) > 1e-9 * s[f"{key}_s"]:
                    print("FAULT plan infer: reproduce differs", key, figure, s[f"{key}_s"], model, gpus, slo, kw)
                if limit and s.get(key + suffix) and s[key + suffix] > limit * (1 + 1e-9):
                    print("FAULT plan infer: target missed", key, s[key + suffix], limit, model, gpus, slo, kw)
    return answered


def sweep_plan_train(rng: random.Random, until: float, refusals: collections.Counter) -> int:
    answered = 0
    while time.time() < until:
        model, gpus = rng.choice(MODELS[:6]), rng.sample(GPUS[:3], rng.choice([1, 2]))
        kw = dict(seq_len=rng.choice([512, 2048, 4096]), perf_model=rng.choice(["roofline", "calibrated"]),
                  dtypes=rng.sample(["w16a16e16", "fp8"], rng.choice([1, 2])))
        if rng.random() < 0.3:
            kw["zero_stages"] = rng.sample([0, 1, 2, 3], rng.choice([1, 2]))
        tokens, max_gpus, batch = rng.choice([1e9, 1e11]), rng.choice([1, 8, 64, 512]), rng.choice([8, 64, 1024])
        plan = _called("plan train", lambda: plan_training(model, gpus, tokens, max_gpus, batch, **kw),
                       (model, gpus, tokens, max_gpus, batch, kw), refusals)
        if plan is None:
            continue
        answered += 1
        row = plan.rows[0]
        rep, lay = row["reproduce"], row["layout"]
        if lay["tp"] * lay["pp"] * lay["dp"] * lay.get("cp", 1) > max_gpus:
            print("FAULT plan train: more GPUs than max_gpus", lay, max_gpus)
        s = LLMAnalysis(rep["model_name"], rep["gpu_name"], rep["dtype_name"], ParallelismConfig(**rep["parallelism"]),
                        **rep["analysis_kwargs"]).training(**rep["training_kwargs"])
        if abs(row["figures"]["latency_per_iter"] - s["latency_per_iter"]) > 1e-9 * s["latency_per_iter"]:
            print("FAULT plan train: reproduce differs", row["figures"]["latency_per_iter"], s["latency_per_iter"])
    return answered


def reason(e: Exception) -> str:
    """A refusal's kind: its first words with numbers and names (anything with _ / - or /) folded, so that
    one reason counts once whatever the setup."""
    words = [("<name>" if re.search(r"[_/]|-\w", w) else re.sub(r"\d+(\.\d+)?", "N", w)) for w in str(e).split()[:8]]
    return f"{type(e).__name__}: {' '.join(words)}"


SWEEPS = {"serve": sweep_serve, "plan_infer": sweep_plan_infer, "plan_train": sweep_plan_train}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--what", choices=[*SWEEPS, "all"], default="all")
    parser.add_argument("--seconds", type=float, default=120.0, help="wall time per sweep")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    for name in (SWEEPS if args.what == "all" else [args.what]):
        refusals: collections.Counter = collections.Counter()
        answered = SWEEPS[name](random.Random(args.seed), time.time() + args.seconds, refusals)
        print(f"{name}: {answered} answered, {sum(refusals.values())} refused; refusals by their first words:")
        for reason, count in refusals.most_common():
            print(f"  {count:5d}  {reason}")


if __name__ == "__main__":
    main()
