"""Per-operator comparison of one decode step of Qwen3.5-397B-A17B (Gated DeltaNet hybrid) and GLM-5
(DeepSeek sparse attention) with the kernels SGLang runs, as measured by ai-dynamo/aiconfigurator.

The serving rows of these two families (benchmarks/serving_accuracy.py --by_model) are all SGLang;
this script puts the calibrated cost model's time of the operators a decode step of batch B runs
(the describer under serving conventions, the engine's KV dtype and MoE kernels, CUDA-graph kernel
floors: exactly what serve() times) beside aiconfigurator's measured SGLang kernels of the same
shape, per GPU:

- gdn: the Gated DeltaNet decode of one linear-attention layer (the conv1d state update and the
  fused recurrent gated delta rule; `linear_attention/sglang/<v>/gdn_perf.parquet`, phase
  generation, the model's heads per GPU): ours = conv1d + gated_delta_rule;
- moe: one fused MoE layer (top-k selection from given router logits, the routed experts' gate/up
  GEMM, activation, down GEMM, combine; `moe/sglang/<v>/moe_perf.parquet`, the model's hidden
  size, expert width, top-k, experts, moe_tp = tp, moe_ep 1, the fastest kernel per cell, tokens
  routed balanced and by aiconfigurator's power law 1.01): ours = the routed experts' matmuls,
  activation, top-k selection, sort and combine (model/mlp.py; the router's GEMM is apart in both);
- dsa: GLM-5's attention block of one layer (q/kv low-rank projections and norms, the lightning
  indexer, the sparse MLA core, o_proj; `sparse_attention/sglang/0.5.14/dsa_generation_module_perf`,
  GLM-5-FP8, tp 8, bf16 KV cache): ours = the attention group's operators.

Source: github:ai-dynamo/aiconfigurator (Apache-2.0), read from a git mirror with `git show`
(`--aic-git-dir`); its systems/silicon_sample.csv is never read (held out).

    python benchmarks/family_operator_comparison.py --aic-git-dir <mirror>/repo [--batches 1,4,16,32,64]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from distil_operator_data import DATA, Mirror  # noqa: E402

from llm_analysis.analysis import LLMAnalysis  # noqa: E402
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,  # noqa: E402
                                 get_model_config_by_name)
from llm_analysis.model import Phase  # noqa: E402
from llm_analysis.serving.engine import engine_settings  # noqa: E402

# (model, catalogue gpu, aiconfigurator system, catalogue dtype, aiconfigurator moe dtype, tp): the
# aggregated tensor-parallel setups of the serving rows (benchmarks/data/validation/serving_dev.csv)
CASES = (
    ("Qwen/Qwen3.5-397B-A17B", "b200-180gb", "b200_sxm", "w16a16e16", "bfloat16", 8),
    ("Qwen/Qwen3.5-397B-A17B", "b300-270gb", "b300_sxm", "w16a16e16", "bfloat16", 8),
    ("Qwen/Qwen3.5-397B-A17B", "b200-180gb", "b200_sxm", "fp8", "fp8_block", 4),
    ("Qwen/Qwen3.5-397B-A17B", "b300-270gb", "b300_sxm", "nvfp4", "nvfp4", 4),
    ("zhipuai/GLM-5", "h200-sxm-141gb", "h200_sxm", "fp8", "fp8_block", 8),
    ("zhipuai/GLM-5", "b200-180gb", "b200_sxm", "fp8", "fp8_block", 8),
    ("zhipuai/GLM-5", "b200-180gb", "b200_sxm", "nvfp4", "nvfp4", 8),
)
CONTEXT = 1024  # decode context of the comparison (the rows' 1024-token prompts)


def decode_ops_us(model: str, gpu: str, dtype: str, tp: int, batch: int, context: int) -> Dict[str, float]:
    """Microseconds per layer of the operator groups compared, as serve() times a decode step."""
    a = LLMAnalysis(get_model_config_by_name(model), get_gpu_config_by_name(gpu), get_dtype_config_by_name(dtype),
                    ParallelismConfig(tp_size=tp), perf_model="calibrated")
    a = a.with_conventions(a.conventions_named(None))
    engine = engine_settings(a, "sglang", {})
    d = a.describer_for(engine.kv_cache_bytes)
    cm = a.cost_model.with_moe_kernels(engine.moe_kernels).with_launch("graph")
    sums: Dict[str, float] = {}
    layers: Dict[str, int] = {}
    for rep, op in d.weighted_ops(Phase("decode", batch, 1, context)):
        s = rep * sum(cm.op_split_s(op))
        if op.name in ("conv1d", "gated_delta_rule"):
            key = "gdn"
        elif op.name.startswith("expert_"):  # routed experts, their activation, top-k, sort and combine
            key = "moe"
        elif op.group == "attention" and op.kind != "collective" and op.name not in ("conv1d", "gated_delta_rule"):
            key = "attention"
        else:
            continue
        sums[key] = sums.get(key, 0.0) + s
        if op.name in ("gated_delta_rule", "expert_down_proj", "o_proj"):
            layers[key] = layers.get(key, 0) + rep
    return {k: 1e6 * v / max(1, layers.get(k, 1)) for k, v in sums.items()}


def _newest(mirror: Mirror, system: str, kind: str, name: str) -> Optional[str]:
    return mirror.newest(system, kind, "sglang", name)


def measured_gdn_us(mirror: Mirror, system: str, model: str, tp: int, batch: int) -> Optional[float]:
    path = _newest(mirror, system, "linear_attention", "gdn_perf.parquet")
    if path is None:
        return None
    df = mirror.table(path)
    cfg = get_model_config_by_name(model)
    d = df[(df.phase == "generation") & (df.batch_size == batch) & (df.num_v_heads == cfg.gdn_num_value_heads // tp)
           & (df.num_k_heads == cfg.gdn_num_key_heads // tp)]
    if d.empty:
        return None
    per_kernel = d.groupby("kernel_source").latency.median()
    return 1e3 * float(per_kernel.sum())


def measured_moe_us(mirror: Mirror, system: str, model: str, moe_dtype: str, tp: int, batch: int,
                    distribution: str) -> Optional[float]:
    cfg = get_model_config_by_name(model)
    best = None
    for path in (p for p in mirror.files if p.startswith(f"{DATA}/{system}/moe/sglang/") and p.endswith("/moe_perf.parquet")):
        df = mirror.table(path)
        d = df[(df.moe_dtype == moe_dtype) & (df.hidden_size == cfg.hidden_dim) & (df.inter_size == cfg.moe_ffn_embed_dim)
               & (df.topk == cfg.moe_top_k) & (df.num_experts == cfg.moe_num_experts) & (df.moe_tp_size == tp)
               & (df.moe_ep_size == 1) & (df.num_tokens == batch) & (df.distribution == distribution)]
        if not d.empty:
            t = 1e3 * float(d.latency.min())
            best = t if best is None else min(best, t)
    return best


def measured_dsa_us(mirror: Mirror, system: str, batch: int, context: int) -> Optional[float]:
    path = f"{DATA}/{system}/sparse_attention/sglang/0.5.14/dsa_generation_module_perf.parquet"
    if path not in mirror.files:
        return None
    df = mirror.table(path)
    d = df[(df.model == "zai-org/GLM-5-FP8") & (df.op_name == "dsa_generation_module") & (df.tp_size.astype(int) == 8)
           & (df.kv_cache_dtype == "bfloat16") & (df.batch_size.astype(int) == batch) & (df.step.astype(int) == context)]
    return None if d.empty else 1e3 * float(d.latency.min())


def compare(mirror: Mirror, batches: List[int]) -> None:
    ratios: Dict[str, List[float]] = {}
    print(f"{'model':18s} {'gpu':15s} {'dtype':9s} tp {'op':10s} " + " ".join(f"{'B=' + str(b):>15s}" for b in batches))
    print(f"{'':49s}" + " ".join(f"{'ours/measured':>15s}" for _ in batches))
    for model, gpu, system, dtype, moe_dtype, tp in CASES:
        ours = {b: decode_ops_us(model, gpu, dtype, tp, b, CONTEXT) for b in batches}
        rows = []
        if "gdn" in ours[batches[0]]:
            rows.append(("gdn", lambda b: measured_gdn_us(mirror, system, model, tp, b)))
        rows.append(("moe bal", lambda b: measured_moe_us(mirror, system, model, moe_dtype, tp, b, "balanced")))
        rows.append(("moe pl1.01", lambda b: measured_moe_us(mirror, system, model, moe_dtype, tp, b, "power_law_1.01")))
        if "GLM" in model:
            rows.append(("dsa", lambda b: measured_dsa_us(mirror, system, b, CONTEXT)))
        for name, measured in rows:
            key = {"gdn": "gdn", "dsa": "attention"}.get(name, "moe")
            cells = []
            for b in batches:
                m = measured(b)
                o = ours[b].get(key)
                if m is None or o is None:
                    cells.append(f"{'-':>15s}")
                    continue
                ratios.setdefault(f"{model.split('/')[-1]} {name}", []).append(o / m)
                cells.append(f"{o:6.1f}/{m:6.1f}us")
            print(f"{model.split('/')[-1][:18]:18s} {gpu:15s} {dtype:9s} {tp:2d} {name:10s} " + " ".join(cells))
    print("median ours/measured: " + "; ".join(f"{k} {statistics.median(v):.2f}" for k, v in ratios.items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aic-git-dir", required=True, help="git directory of an ai-dynamo/aiconfigurator mirror")
    ap.add_argument("--batches", default="1,4,16,32,64")
    args = ap.parse_args(argv)
    compare(Mirror(args.aic_git_dir), [int(b) for b in args.batches.split(",")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
