"""The rate at which a fused MoE layer streams its experts' weights at decode sizes, read off the measured
fused-MoE tables of ai-dynamo/aiconfigurator (Apache-2.0), per serving engine and tensor-core precision.

At a decode step's few tokens a fused MoE layer (vLLM's and SGLang's fused_moe, FlashInfer's and
TensorRT-LLM's MoE kernels) is bound by reading the weights of the experts its tokens reach, not by
its GEMMs' FLOPs; that rate is not the dense GEMMs' weight streaming (`hbm_efficiency`): block-scaled
FP8 experts (per 128 x 128 block scales applied in the main loop, Triton's fused_moe on Hopper) and
FP4 experts stream theirs well below it (H200, SGLang, block FP8: 0.6 of the HBM spec, against 0.86
for a batch-1 dense GEMM). This script measures it per cell where it is the bound, the model's own way:

- cells: `moe/<engine>/<version>/moe_perf.parquet`, every version folder, the fastest kernel per cell
  (a tuned deployment picks it), tokens routed `balanced`, experts not split over GPUs (moe_ep 1),
  tokens x top-k <= experts: every reached expert gets one token (balanced routing reaches exactly
  tokens x top-k experts, each expert's GEMM one row: streaming-bound), and at least
  MIN_WEIGHT_BYTES of weights reached (the stream well above the kernel floors);
- the model's time of such a layer (model/mlp.py, cost/calibrated.py under CUDA graphs): four small
  kernels at the profile's graph floor (top-k, sort, activation, combine) and the three expert GEMMs
  streaming the reached experts' weights (gate and up: intermediate / moe_tp x hidden each; down the
  same) at the efficiency sought; so efficiency = weight bytes / ((latency - 4 floors) x HBM spec);
- per GPU the median over cells; per generation the mean over its measured GPUs (as
  benchmarks/measured_operator_values.py does for the shares); precisions as MOE_DTYPES there.

Profile keys (cost/calibrated.py `moe_stream_efficiency`): moe_stream_efficiency (16-bit),
moe_fp8_stream_efficiency, moe_fp4_stream_efficiency, for vLLM's kernels, and the same with
_sglang / _trtllm for those engines' own kernels. All are printed; `--write` writes SGLang's only
(`--engines` to choose): with vLLM's and TensorRT-LLM's the report half of
benchmarks/serving_accuracy.py got worse (TensorRT-LLM's block-FP8 table streams at 0.39 of the spec
on Blackwell, and with it TensorRT-LLM's TPOT median went from 7.7% to 30.8%: its served MoE runs
other kernels at decode sizes than the table's), so those engines keep the dense GEMMs' rate.

    python benchmarks/moe_stream_values.py --aic-git-dir <mirror>/repo [--write] [--engines sglang]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from distil_operator_data import DATA, SYSTEMS, Mirror  # noqa: E402
from measured_operator_values import MOE_DTYPES  # noqa: E402

from llm_analysis.config import get_gpu_config_by_name  # noqa: E402
from llm_analysis.cost.calibrated import moe_stream_key  # noqa: E402
from llm_analysis.cost.profiles import PROFILE_DIR, generation_of, load_profile  # noqa: E402

ENGINES = ("vllm", "sglang", "trtllm")
MIN_WEIGHT_BYTES = 64e6  # reached experts' weights: their stream well above the four kernel floors
SMALL_KERNELS = 4  # top-k, sort, activation, combine: each one kernel floor at these sizes (model/mlp.py)
LICENCE = "Apache-2.0 (ai-dynamo/aiconfigurator LICENSE)"


def decode_cells(mirror: Mirror, system: str, engine: str):
    """(moe dtype, bytes one expert GEMM streams over the reached experts, latency s) of every decode cell of
    one GPU and engine (balanced routing, experts not split over GPUs, tokens x top-k <= experts: one token
    per reached expert), the fastest kernel per cell over every version folder; and the tables read."""
    best: Dict[tuple, float] = {}
    paths = []
    for path in mirror.files:
        if path.startswith(f"{DATA}/{system}/moe/{engine}/") and path.endswith("/moe_perf.parquet"):
            paths.append(path)
            df = mirror.table(path)
            df = df[(df.distribution == "balanced") & (df.moe_ep_size == 1) & df.moe_dtype.isin(list(MOE_DTYPES))
                    & (df.num_tokens * df.topk <= df.num_experts)]
            for row in df.itertuples():
                key = (row.moe_dtype, row.num_tokens, row.hidden_size, row.inter_size, row.topk, row.num_experts,
                       row.moe_tp_size)
                best[key] = min(best.get(key, float("inf")), row.latency * 1e-3)
    out = []
    for (dtype, tokens, hidden, inter, topk, experts, moe_tp), latency_s in best.items():
        out.append((dtype, tokens * topk * hidden * (inter // moe_tp) * MOE_DTYPES[dtype][1], latency_s))
    return out, sorted(paths)


def cells(mirror: Mirror, system: str, engine: str):
    """(moe dtype, reached weight bytes of the three expert GEMMs, latency s) of the streaming-bound decode
    cells of one GPU and engine, and the tables read."""
    found, paths = decode_cells(mirror, system, engine)
    out = [(dtype, 3.0 * gemm_bytes, latency_s) for dtype, gemm_bytes, latency_s in found
           if 3.0 * gemm_bytes >= MIN_WEIGHT_BYTES]
    return out, paths


def medians_by_precision(found, figure_of: Callable[[str, float, float], Optional[float]],
                         key_of: Callable[[str], str], how: Callable[[str, List[str], int, float], str]
                         ) -> Dict[str, Tuple[float, str]]:
    """profile key -> (median over `found`'s cells of one precision of `figure_of(dtype, bytes, latency_s)`,
    cells where it is None left out; `how(precision, dtypes, cells, value)`): one figure per precision."""
    by_precision: Dict[str, List[float]] = {}
    for dtype, nbytes, latency_s in found:
        figure = figure_of(dtype, nbytes, latency_s)
        if figure is not None:
            by_precision.setdefault(MOE_DTYPES[dtype][0], []).append(figure)
    out = {}
    for precision, figures in by_precision.items():
        value = statistics.median(figures)
        dtypes = sorted({d for d, _, _ in found if MOE_DTYPES[d][0] == precision})
        out[key_of(precision)] = (value, how(precision, dtypes, len(figures), value))
    return out


def gpu_values(mirror: Mirror, system: str, gpu: str) -> Dict[str, Tuple[float, str]]:
    """profile key -> (this GPU's median efficiency, how read)."""
    spec = get_gpu_config_by_name(gpu).hbm_bandwidth_in_GB_per_sec * 1e9
    floor = load_profile(generation_of(gpu)).values["kernel_floor_graph_s"]
    out = {}
    for engine in ENGINES:
        found, paths = cells(mirror, system, engine)

        def efficiency(dtype, weight_bytes, latency_s):
            streaming_s = latency_s - SMALL_KERNELS * floor
            return weight_bytes / (streaming_s * spec) if streaming_s > 0 else None

        def how(precision, dtypes, n, value, engine=engine, paths=paths):
            return (f"{gpu} {engine} {precision} ({', '.join(dtypes)}): median over {n} cells (balanced routing, "
                    f"tokens x top-k <= experts: one token per reached expert, >= {MIN_WEIGHT_BYTES / 1e6:.0f} MB of "
                    f"weights reached) of weight bytes / ((latency - {SMALL_KERNELS} x {floor * 1e6:.1f} us) x HBM "
                    f"spec) = {value:.3f}; github:ai-dynamo/aiconfigurator@{mirror.commit[:12]} "
                    f"{DATA}/{system}/moe/{engine}/*/moe_perf.parquet ({len(paths)} version folders; {LICENCE})")
        out.update(medians_by_precision(found, efficiency, lambda p, engine=engine: moe_stream_key(p, engine), how))
    return out


def generation_means(mirror: Mirror, gpu_values, script: str) -> Dict[str, Dict[str, Tuple[float, str]]]:
    """generation -> profile key -> (mean over the generation's measured GPUs of `gpu_values(mirror, system,
    gpu)`'s figures, source naming `script`)."""
    per_gen: Dict[str, Dict[str, List[Tuple[float, str]]]] = {}
    for system, gpu in SYSTEMS.items():
        try:
            gen = generation_of(gpu)
        except Exception:  # noqa: BLE001 (a measured GPU no profile lists)
            continue
        for key, figure in gpu_values(mirror, system, gpu).items():
            per_gen.setdefault(gen, {}).setdefault(key, []).append(figure)
    out: Dict[str, Dict[str, Tuple[float, str]]] = {}
    for gen, keys in per_gen.items():
        for key, figures in keys.items():
            value = float(f"{statistics.mean(v for v, _ in figures):.4g}")
            out.setdefault(gen, {})[key] = (value, f"measured fused MoE layers at decode sizes ({script}), mean "
                                            f"over {len(figures)} GPU(s): " + " | ".join(h for _, h in figures))
    return out


def write_profile_keys(generation: str, keys: Dict[str, Tuple[float, str]]) -> None:
    """Put `keys` (profile key -> (value, source)) into the generation's profile, the others untouched."""
    path = PROFILE_DIR / f"{generation}.json"
    doc = json.loads(path.read_text())
    for key, (value, source) in keys.items():
        doc["parameters"][key] = {"value": value, "source": source}
    doc["parameters"] = dict(sorted(doc["parameters"].items()))
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {len(keys)} keys into {path.name}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aic-git-dir", required=True, help="git directory of an ai-dynamo/aiconfigurator mirror")
    ap.add_argument("--write", action="store_true", help="write the keys into the generations' profiles")
    ap.add_argument("--engines", default="sglang", help="the engines whose keys --write writes (module docstring)")
    args = ap.parse_args(argv)
    written = [moe_stream_key(p, e) for e in args.engines.split(",") for p in ("16-bit", "fp8", "fp4")]
    values = generation_means(Mirror(args.aic_git_dir), gpu_values, "benchmarks/moe_stream_values.py")
    for gen, keys in sorted(values.items()):
        for key, (value, _) in sorted(keys.items()):
            print(f"{gen:16s} {key:36s} {value:.4f}")
        keys = {key: figure for key, figure in keys.items() if key in written}
        if args.write and keys:
            write_profile_keys(gen, keys)
    return 0


if __name__ == "__main__":
    sys.exit(main())
