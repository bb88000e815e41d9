"""The fixed time of a fused MoE layer at decode sizes beyond streaming its reached experts' weights, read
off the measured fused-MoE tables of ai-dynamo/aiconfigurator (Apache-2.0), per serving engine,
tensor-core precision and GPU generation.

At a decode step's one token per reached expert a fused MoE layer takes a fixed time that does not
shrink with the weights it reads: vLLM's block-FP8 fused MoE on H200 (Triton's fused_moe with 128 x 128
block scales; `moe/vllm/<v>/moe_perf.parquet`) takes 37 / 49 / 65 / 90 / 157 us at 1 / 2 / 4 / 8 / 16
tokens for MiniMax-M2.5's experts (hidden 3072, width 1536 / moe_tp 4, 256 experts, top-8, balanced
routing), about 34 us plus the weights at 0.8 of the HBM spec (a least-squares line); the calibrated
model's layer (model/mlp.py, cost/calibrated.py under CUDA graphs: four small kernels at the graph
floor, top-k, sort, activation, combine, and three expert GEMMs streaming the reached weights) gave
18 / 24 / 37 / 60 / 99 us. The fixed part is the fused layer's own work (the block-scale loads and the
per-token-group activation quantization ahead of each grouped GEMM, the sorted-token alignment pass,
the grid of a Triton kernel sized for every expert), which a kernel floor per launch does not hold.

Read the model's own way, per cell where it applies:

- cells: `moe/<engine>/<version>/moe_perf.parquet`, every version folder, the fastest kernel per cell (a
  tuned deployment picks it), tokens routed `balanced`, experts not split over GPUs (moe_ep 1), tokens x
  top-k <= experts (every reached expert gets one token: the decode regime), precisions as
  benchmarks/measured_operator_values.py MOE_DTYPES;
- the model's time of such a layer without the fixed part: SMALL_KERNELS graph floors plus three GEMMs,
  each max(floor, (bytes + hbm_half_saturation_bytes) / (HBM spec x the family's fused-MoE streaming
  efficiency, calibrated.py `moe_stream_efficiency`)); the GEMMs' FLOPs at one row per expert are far
  below either;
- fixed per expert GEMM = (measured latency - that time) / 3; per GPU the median over cells, per
  generation the mean over its measured GPUs.

Profile keys (calibrated.py `moe_gemm_fixed_s`): moe_gemm_fixed_s (16-bit), moe_fp8_gemm_fixed_s,
moe_fp4_gemm_fixed_s for vLLM's kernels, with _sglang / _trtllm for those engines' own. All are
printed; `--write` writes only the (generation, key) pairs named by `--keys`: by default Hopper's vLLM
block-FP8 one (7.06 us: H100 7.0, H200 7.1), which brings MiniMax-M2.5's H200 rows from -29.5% to -23.0%
(docs/serving.md, "MiniMax-M2.5 fp8 on Hopper"). The others wait for a refit of the engine profiles:
Blackwell's vLLM figure (4.7 us) is held today by the vLLM profile's fitted step overhead (its rows are
right without it), SGLang's (2.3 us on Hopper) by its own measured streaming rate, and rows fitted
without TensorRT-LLM's (14 us) would move.

    python benchmarks/moe_fixed_values.py --aic-git-dir <mirror>/repo [--write] [--keys hopper:moe_fp8_gemm_fixed_s]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from distil_operator_data import DATA, Mirror  # noqa: E402
from measured_operator_values import MOE_DTYPES  # noqa: E402
from moe_stream_values import (ENGINES, LICENCE, SMALL_KERNELS, decode_cells, generation_means,  # noqa: E402
                               medians_by_precision, write_profile_keys)

from llm_analysis.config import get_gpu_config_by_name  # noqa: E402
from llm_analysis.cost.calibrated import moe_gemm_fixed_key, moe_stream_efficiency  # noqa: E402
from llm_analysis.cost.profiles import generation_of, load_profile  # noqa: E402

EXPERT_GEMMS = 3  # gate, up, down (model/mlp.py; vLLM fuses gate and up, the model times them apart)
DEFAULT_WRITE = "hopper:moe_fp8_gemm_fixed_s"


def model_time_without_fixed_s(values, spec_bytes_per_s: float, stream_eff: float, gemm_bytes: float) -> float:
    """The calibrated model's time of one fused MoE layer at one token per reached expert, fixed part 0."""
    floor = values["kernel_floor_graph_s"]
    stream_s = (gemm_bytes + values["hbm_half_saturation_bytes"]) / (spec_bytes_per_s * stream_eff)
    return SMALL_KERNELS * floor + EXPERT_GEMMS * max(floor, stream_s)


def gpu_values(mirror: Mirror, system: str, gpu: str) -> Dict[str, Tuple[float, str]]:
    """profile key -> (this GPU's median fixed time per expert GEMM, how read)."""
    spec = get_gpu_config_by_name(gpu).hbm_bandwidth_in_GB_per_sec * 1e9
    values = load_profile(generation_of(gpu)).values
    out = {}
    for engine in ENGINES:
        found, paths = decode_cells(mirror, system, engine)

        def fixed_per_gemm(dtype, gemm_bytes, latency_s, engine=engine):
            stream_eff = moe_stream_efficiency(values, MOE_DTYPES[dtype][0], engine)
            return (latency_s - model_time_without_fixed_s(values, spec, stream_eff, gemm_bytes)) / EXPERT_GEMMS

        def how(precision, dtypes, n, value, engine=engine, paths=paths):
            return (f"{gpu} {engine} {precision} ({', '.join(dtypes)}): median over {n} cells (balanced routing, "
                    f"tokens x top-k <= experts: one token per reached expert) of (latency - {SMALL_KERNELS} graph "
                    f"floors - {EXPERT_GEMMS} expert GEMMs streaming the reached weights at the family's fused-MoE "
                    f"streaming efficiency) / {EXPERT_GEMMS} = {value * 1e6:.1f} us; github:ai-dynamo/aiconfigurator@"
                    f"{mirror.commit[:12]} {DATA}/{system}/moe/{engine}/*/moe_perf.parquet ({len(paths)} version "
                    f"folders; {LICENCE})")
        out.update(medians_by_precision(found, fixed_per_gemm, lambda p, engine=engine: moe_gemm_fixed_key(p, engine),
                                        how))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aic-git-dir", required=True, help="git directory of an ai-dynamo/aiconfigurator mirror")
    ap.add_argument("--write", action="store_true", help="write the --keys into the generations' profiles")
    ap.add_argument("--keys", default=DEFAULT_WRITE,
                    help="comma-separated generation:key pairs --write writes (module docstring)")
    args = ap.parse_args(argv)
    written = {tuple(pair.split(":", 1)) for pair in args.keys.split(",")}
    values = generation_means(Mirror(args.aic_git_dir), gpu_values, "benchmarks/moe_fixed_values.py")
    for gen, keys in sorted(values.items()):
        for key, (value, _) in sorted(keys.items()):
            print(f"{gen:16s} {key:32s} {value * 1e6:7.2f} us")
        keys = {key: figure for key, figure in keys.items() if (gen, key) in written}
        if args.write and keys:
            write_profile_keys(gen, keys)
    return 0


if __name__ == "__main__":
    sys.exit(main())
