"""The planner's best training layout against published layouts, both timed by
our own model (the comparison the issue asks for: within 10%, or better with a
stated reason).

    python benchmarks/plan_published.py

1. GPT-3 175B on 1024 A100-80GB, global batch 1536, seq 2048, 300 B tokens
   (Narayanan et al. 2021, arXiv 2104.04473 §5.1). Published layout: tp 8,
   pp 16, micro-batch 1, global batch 1536, from Megatron-LM's
   examples/gpt3/train_gpt3_175b_distributed.sh; on 1024 GPUs that is dp 8.
   The paper recomputes activations (§3.5); we time it with full recomputation
   and no ZeRO (as published) and with the best ZeRO/recomputation our model
   allows for that layout.
2. Llama-3-70B on H100-80GB: NeMo 2.0 recipe nemo/collections/llm/recipes/
   llama3_70b.py (NVIDIA/NeMo, commit 0189a3b): tp 4, pp 4, virtual pp 5,
   context parallel 2, sequence parallel, 4 nodes x 8 GPUs, global batch 512,
   micro-batch 1, seq 8192, distributed optimizer (~ ZeRO-1).
Both layouts are timed by the same model, so the ratio tests the layout only:
the roofline at flops_efficiency 0.5, hbm_memory_efficiency 0.8, and the
calibrated model (expected times). Each comparison is run twice: over every
ZeRO stage, and over the stages the published framework offers (Megatron-LM /
NeMo: no ZeRO-3, the distributed optimizer is ZeRO-1). The second is the fair
one: the ZeRO-3 rows of Narayanan et al. 2021 Table 2 (DeepSpeed, 384-1536
GPUs) measured 1.3-3.2x slower than the calibrated model predicts (benchmarks/accuracy.py,
family "DeepSpeed ZeRO-3"), so a plan that wins through ZeRO-3 across hundreds
of ranks is not one to trust.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name  # noqa: E402
from llm_analysis.errors import DoesNotFitError  # noqa: E402
from llm_analysis.facade import LLMAnalysis  # noqa: E402
from llm_analysis.planner import plan_training  # noqa: E402

MODELS = {"roofline (eff 0.5 / 0.8)": {"flops_efficiency": 0.5, "hbm_memory_efficiency": 0.8},
          "calibrated": {"perf_model": "calibrated"}}


def published_days(model, gpu, par, settings, eff, **train):
    """Days of the published layout for each (ds_zero, recomputation) setting; None if it does not fit."""
    a = LLMAnalysis(get_model_config_by_name(model), get_gpu_config_by_name(gpu),
                    get_dtype_config_by_name("w16a16e16"), ParallelismConfig(**par), **eff)
    out = {}
    for z, rc in settings:
        try:
            out[(z, rc)] = a.training(ds_zero=z, activation_recomputation=rc, **train)["total_training_latency"] / 86400
        except DoesNotFitError:
            out[(z, rc)] = None
    return out


def compare(title, model, gpu, par, as_published, train, plan_kwargs, eff, zero_stages):
    settings = [(z, rc) for z in zero_stages for rc in (0, 1, 4)]
    pub = published_days(model, gpu, par, settings, eff, **train)
    pub.setdefault(as_published, published_days(model, gpu, par, [as_published], eff, **train)[as_published])
    fits = {k: v for k, v in pub.items() if v is not None}
    best_pub = min(fits.items(), key=lambda kv: kv[1])
    r = plan_training(model, [gpu], **plan_kwargs, **eff, zero_stages=zero_stages)
    plan_days = r.best["figures"]["total_training_latency"] / 86400
    print(f"\n{title}; {next(k for k, v in MODELS.items() if v == eff)}; ZeRO stages {zero_stages}")
    print(f"  published layout {par}, as published (ZeRO {as_published[0]}, recompute {as_published[1]}): "
          f"{pub[as_published] if pub[as_published] is None else f'{pub[as_published]:.2f}'} days")
    print(f"  published layout, best ZeRO/recompute our model allows {best_pub[0]}: {best_pub[1]:.2f} days")
    print(f"  planner best {r.best['layout']}: {plan_days:.2f} days")
    print(f"  planner / published (best settings) = {plan_days / best_pub[1]:.3f}; "
          f"planner / as published = {plan_days / pub[as_published]:.3f}" if pub[as_published] else "")
    print("  " + r.stats.line())
    return plan_days, best_pub[1], pub[as_published]


def main():
    for eff in MODELS.values():
        for stages in ((0, 1, 2, 3), (0, 1, 2)):
            compare_both(eff, stages)


def compare_both(eff, stages):
    compare("GPT-3 175B, 1024 x A100-80GB, batch 1536, 300 B tokens", "megatron-lm-175b", "a100-sxm-80gb",
            {"tp_size": 8, "pp_size": 16, "dp_size": 8}, (0, 4),
            {"batch_size_per_gpu": 1, "global_batch_size": 1536, "seq_len": 2048, "total_num_tokens": 300e9},
            {"tokens": 300e9, "max_gpus": 1024, "global_batch_size": 1536, "seq_len": 2048}, eff, stages)
    compare("Llama-3-70B, 32 x H100-80GB (NeMo recipe), batch 512 x 8192, 15 T tokens", "meta-llama/Meta-Llama-3-70B",
            "h100-sxm-80gb", {"tp_size": 4, "pp_size": 4, "cp_size": 2, "dp_size": 1, "sp_size": 4}, (1, 0),
            {"batch_size_per_gpu": 1, "global_batch_size": 512, "seq_len": 8192, "total_num_tokens": 15e12,
             "pipeline_interleave": 5},
            {"tokens": 15e12, "max_gpus": 32, "global_batch_size": 512, "seq_len": 8192}, eff, stages)


if __name__ == "__main__":
    main()
