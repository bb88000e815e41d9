"""Distil published per-operator measurements into compact JSON tables, and say how far the
shipped profiles' parameters are from them (issue 27 item 3).

Source: ai-dynamo/aiconfigurator (Apache-2.0), per-GPU parquet tables under
aic-core/src/aiconfigurator_core/systems/data/<system>/{gemm,attention,comm}/<framework>/<version>/
(measured with TensorRT-LLM's kernels and nccl-tests). Its `systems/silicon_sample.csv` is never
read (held out: it judges the serving model). Own measurements from benchmarks/measure_kernels.py
can be distilled the same way (`--local file.json`).

    python benchmarks/distil_operator_data.py --aic-git-dir <mirror>/repo   # writes the tables, prints the comparison
    python benchmarks/distil_operator_data.py --aic-git-dir <dir> --compare-only
    python benchmarks/distil_operator_data.py --aic-git-dir <dir> --custom-allreduce-only   # that key alone

Written: llm_analysis/cost/profiles/measured/<catalogue gpu>.json, each table with its source
(repository, commit, path, framework and version, device string, licence). Efficiencies are
achieved / the catalogue GPU's dense spec (llm_analysis/gpu_configs), so they compare directly
with the profile parameters:

- gemm[dtype]: efficiency by M (rows: the (N, K) weight shapes), dtype bf16 / fp8 / nvfp4;
- attention_prefill: by sequence length (Llama-3-style 32 query / 8 KV heads of 128 where
  measured), two figures: FLOPs of the causal (unmasked) half, and of the whole s x s matrix
  (the convention the profiles' attn_prefill_efficiency was fitted under);
- attention_decode: KV-cache bytes streamed / HBM spec, by KV length (rows: batch);
- nccl[collective][group size]: bus bandwidth / NVLink line rate, by message bytes
  (nccl-tests' busbw: all-reduce x 2(n-1)/n, the others x (n-1)/n);
- custom_allreduce[engine]: the all-reduce each serving engine runs for a tensor-parallel group inside
  one node (vLLM's and SGLang's custom one-shot / two-shot kernels and their NCCL paths above a size,
  TensorRT-LLM's AllReduce with strategy AUTO and no fusion), latency in us by message bytes per group
  size and launch ('graph', 'eager'), from custom_allreduce_perf.parquet (`custom_allreduce_tables`);
  read by the package (cost/engine_allreduce.py);
- moe[dtype], moe_sglang[dtype], moe_trtllm[dtype]: the fused MoE layer (routing, permutation,
  gate/up GEMM, activation, down GEMM, un-permutation) as each serving engine runs it (MOE_TABLES:
  vLLM's fused-MoE kernels, SGLang's (FlashInfer TRT-LLM MoE, Triton fused MoE), TensorRT-LLM's
  (CUTLASS MoE, DeepGEMM for block FP8)), latency in ms by token count (rows: (hidden, expert
  intermediate, top-k, experts, moe_tp) layer shapes, experts not split over GPUs), the fastest of
  the kernels the engine offers for the dtype (a tuned deployment picks it), tokens routed by
  aiconfigurator's default power-law distribution (MOE_DISTRIBUTION: real routers are not
  balanced). vLLM's table is its newest version folder; SGLang's and TensorRT-LLM's are, per dtype,
  the newest version folder that measured the dtype (TensorRT-LLM's newest folders hold one dtype
  each);
- moe_sglang_wide_ep[dtype]: the expert computation of SGLang's wide expert-parallel MoE layer
  (WIDE_EP_TABLES: the DeepEP + DeepGEMM prefill path, wideep_context_moe_perf.parquet, the
  grouped GEMMs on tokens DeepEP has already dispatched), latency in ms by tokens per EP rank (the
  table's num_tokens / moe_ep_size: it counts the tokens of all ranks), rows (hidden, expert
  intermediate, top-k, experts, moe_tp, moe_ep); the "uniform" rows (every rank equally loaded),
  since the serving model applies the ranks' imbalance apart (serving/layout.py
  `busiest_group_factor`). Not read: the decode-side table (DeepEP low-latency mode; decode steps
  stream the expert weights, the share hardly counts there) and TensorRT-LLM's
  wideep_moe_perf.parquet, which measured power-law routing only, timed on rank 0 (the hottest
  experts' rank; even its "_eplb" rows run at about half the rate of TensorRT-LLM's fused MoE at
  the same tokens per expert): its figure holds the ranks' imbalance the serving model applies
  again, so TensorRT-LLM's fused-MoE share stands for its wide EP.

The package reads only the `custom_allreduce` key of these files (cost/engine_allreduce.py); the
other tables are read into the profiles by benchmarks/measured_operator_values.py. Needs pandas and pyarrow (`pip install -e .[benchmarks]`).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llm_analysis.config import get_gpu_config_by_name  # noqa: E402
from llm_analysis.cost.gemm import gemm_time_s  # noqa: E402
from llm_analysis.cost.profiles import generation_of, load_profile  # noqa: E402

DATA = "aic-core/src/aiconfigurator_core/systems/data"
HELD_OUT = "silicon_sample"  # never read
LICENCE = "Apache-2.0 (ai-dynamo/aiconfigurator LICENSE)"
OUT_DIR = REPO / "llm_analysis" / "cost" / "profiles" / "measured"
# aiconfigurator system folder -> catalogue GPU
SYSTEMS = {"a100_sxm": "a100-sxm-80gb", "h100_sxm": "h100-sxm-80gb", "h100_pcie": "h100-pcie-80gb",
           "h200_sxm": "h200-sxm-141gb", "b200_sxm": "b200-180gb", "gb200": "gb200-nvl72-186gb",
           "b300_sxm": "b300-270gb", "gb300": "gb300-nvl72-279gb", "l40s": "l40s-48gb", "l4": "l4-24gb"}
GEMM_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "nvfp4": "nvfp4"}
GEMM_NK = [(4096, 4096), (8192, 4096), (16384, 4096), (4096, 8192), (8192, 8192), (16384, 8192), (65536, 51200)]
ATTN_LAYOUT = (32, 8, 128)  # query heads, KV heads, head dim (Llama-3 8B)
# serving engine (aiconfigurator framework folder) -> the key of its fused-MoE tables in the JSON
MOE_TABLES = {"vllm": "moe", "sglang": "moe_sglang", "trtllm": "moe_trtllm"}
# serving engine -> (the key of its wide expert-parallel tables, file, the routing read: module docstring)
WIDE_EP_TABLES = {"sglang": ("moe_sglang_wide_ep", "wideep_context_moe_perf.parquet", "uniform")}
MOE_DISTRIBUTION = "power_law_1.01"
MOE_TOKENS = (1, 4, 16, 64, 256, 1024, 2048, 4096, 8192, 16384)
NCCL_OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")
BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n}


# ---------------------------------------------------------------- reading the mirror
class Mirror:
    def __init__(self, git_dir: str):
        self.git_dir = git_dir
        self.commit = self._git("rev-parse", "HEAD").decode().strip()
        self.files = [p for p in self._git("ls-tree", "-r", "--name-only", "HEAD", DATA).decode().splitlines()
                      if HELD_OUT not in p]

    def _git(self, *args) -> bytes:
        return subprocess.run(["git", "--git-dir", self.git_dir, *args], check=True, capture_output=True).stdout

    def table(self, path: str):
        import pandas as pd
        if HELD_OUT in path:
            raise ValueError(f"{path}: held out, never read")
        return pd.read_parquet(io.BytesIO(self._git("show", f"HEAD:{path}")))

    def newest(self, system: str, kind: str, framework: str, name: str):
        """The path of `name` in the newest version folder that holds it, or None."""
        prefix = f"{DATA}/{system}/{kind}/{framework}/"
        found = [p for p in self.files if p.startswith(prefix) and p.endswith("/" + name)]
        return max(found, key=lambda p: _version_key(p[len(prefix):].split("/")[0]), default=None)


def _version_key(v: str) -> tuple:
    parts = []
    for piece in v.replace("rc", ".rc.").replace(".post", ".post.").split("."):
        parts.append((1, int(piece)) if piece.isdigit() else (0, piece))
    return tuple(parts)


def _source(mirror: Mirror, path: str, device: str) -> dict:
    framework, version = path.split("/")[-3:-1]
    return {"repository": "github:ai-dynamo/aiconfigurator", "commit": mirror.commit, "path": path,
            "framework": f"{framework} {version}", "device": device, "licence": LICENCE}


def _sig(x: float) -> float:
    """Four significant digits (a tiny message's bus bandwidth must not round to 0)."""
    return float(f"{x:.4g}")


def _increasing(axis: list, what: str) -> list:
    if any(b <= a for a, b in zip(axis, axis[1:])):
        raise ValueError(f"{what}: axis {axis} is not strictly increasing")
    return axis


# ---------------------------------------------------------------- tables
def gemm_tables(mirror, system, gpu, framework) -> dict:
    path = mirror.newest(system, "gemm", framework, "gemm_perf.parquet")
    if path is None:
        return {}
    df = mirror.table(path)
    out = {}
    for aic_dtype, dtype in GEMM_DTYPES.items():
        peak = {"bf16": gpu.peak_bf16_TFLOPS or gpu.peak_fp16_TFLOPS, "fp8": gpu.peak_fp8_TFLOPS,
                "nvfp4": getattr(gpu, "peak_fp4_TFLOPS", None)}[dtype]
        d = df[df.gemm_dtype == aic_dtype]
        if d.empty or not peak:
            continue
        nks = [(n, k) for n, k in GEMM_NK if not d[(d.n == n) & (d.k == k)].empty]
        if not nks:
            continue
        ms = _increasing(sorted(int(m) for m in set(d.m) if m & (m - 1) == 0), f"{system} gemm m")
        rows = []
        for n, k in nks:
            by_m = d[(d.n == n) & (d.k == k)].groupby("m").latency.median()
            rows.append([_sig(2.0 * m * n * k / (by_m[m] * 1e-3) / (peak * 1e12)) if m in by_m else None
                         for m in ms])
        out[dtype] = {"n_k": [list(x) for x in nks], "m": ms, "efficiency": rows, "peak_tflops": peak,
                      "source": _source(mirror, path, str(d.device.iloc[0]))}
    return out


def _attention_subset(df, attn_dtype_col=True):
    heads, kv, hd = ATTN_LAYOUT
    d = df[(df.head_dim == hd) & (df.window_size == 0) & (df.kv_cache_dtype == "bfloat16")]
    if attn_dtype_col and "attn_dtype" in d:
        d = d[d.attn_dtype == "bfloat16"]
    exact = d[(d.num_heads == heads) & (d.num_key_value_heads == kv)]
    return exact if not exact.empty else d


def attention_tables(mirror, system, gpu, framework) -> dict:
    out = {}
    path = mirror.newest(system, "attention", framework, "context_attention_perf.parquet")
    if path is not None:
        d = _attention_subset(mirror.table(path))
        peak = (gpu.peak_bf16_TFLOPS or gpu.peak_fp16_TFLOPS) * 1e12
        lengths, causal, full, batches = [], [], [], []
        for s, g in sorted(d.groupby("isl"), key=lambda x: x[0]):
            row = g.loc[g.batch_size.idxmax()]  # the most tokens per call: the kernel's plateau
            b, h, hd = int(row.batch_size), int(row.num_heads), int(row.head_dim)
            whole = 4.0 * b * h * s * s * hd
            t = row.latency * 1e-3
            lengths.append(int(s))
            batches.append(b)
            full.append(_sig(whole / t / peak))
            causal.append(_sig(whole * (s + 1) / (2 * s) / t / peak))
        if lengths:
            out["attention_prefill"] = {"seq_len": _increasing(lengths, f"{system} prefill"), "batch": batches,
                                        "heads": [int(d.num_heads.iloc[0]), int(d.num_key_value_heads.iloc[0]),
                                                  int(d.head_dim.iloc[0])],
                                        "efficiency_causal_half": causal, "efficiency_full_matrix": full,
                                        "source": _source(mirror, path, str(d.device.iloc[0]))}
    path = mirror.newest(system, "attention", framework, "generation_attention_perf.parquet")
    if path is not None:
        d = _attention_subset(mirror.table(path))
        hbm = gpu.hbm_bandwidth_in_GB_per_sec * 1e9
        batches = [b for b in (1, 8, 64, 256) if b in set(d.batch_size)]
        lengths = _increasing(sorted(int(s) for s in set(d.step) if s >= 255), f"{system} decode")
        rows = []
        for b in batches:
            g = d[d.batch_size == b].groupby("step")
            lat = g.latency.median()
            kv = g.num_key_value_heads.first()
            hd = g.head_dim.first()
            rows.append([_sig(2 * 2 * b * int(kv[s]) * s * int(hd[s]) / (lat[s] * 1e-3) / hbm) if s in lat else None
                         for s in lengths])
        if batches:
            out["attention_decode"] = {"kv_len": lengths, "batch": batches, "kv_bytes_over_hbm_spec": rows,
                                       "heads": [int(d.num_heads.iloc[0]), int(d.num_key_value_heads.iloc[0]),
                                                 int(d.head_dim.iloc[0])],
                                       "source": _source(mirror, path, str(d.device.iloc[0]))}
    return out


def _moe_paths(mirror, system, framework) -> list:
    """The fused-MoE tables to read for an engine: vLLM's newest version folder; SGLang's and
    TensorRT-LLM's every version folder, newest first (each dtype is then taken from the newest
    folder that measured it: module docstring)."""
    if framework == "vllm":
        newest = mirror.newest(system, "moe", framework, "moe_perf.parquet")
        return [newest] if newest else []
    prefix = f"{DATA}/{system}/moe/{framework}/"
    found = [p for p in mirror.files if p.startswith(prefix) and p.endswith("/moe_perf.parquet")]
    return sorted(found, key=lambda p: _version_key(p[len(prefix):].split("/")[0]), reverse=True)


def moe_tables(mirror, system, framework: str = "vllm") -> dict:
    """{MOE_TABLES[framework]: {dtype: table}}: fused MoE layer latency (ms) by token count, per layer
    shape, as `framework` runs it (module docstring); {} where the engine has no table."""
    out = {}
    shape_cols = ["hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size"]
    for path in _moe_paths(mirror, system, framework):
        df = mirror.table(path)
        df = df[(df.distribution == MOE_DISTRIBUTION) & (df.moe_ep_size == 1) & df.num_tokens.isin(MOE_TOKENS)]
        for dtype, d in sorted(df.groupby("moe_dtype")):
            if str(dtype) in out:  # a newer folder measured it
                continue
            best = d.groupby(shape_cols + ["num_tokens"]).latency.min()  # the fastest kernel per cell
            tokens = _increasing(sorted(int(t) for t in set(d.num_tokens)), f"{system} {framework} moe tokens")
            shapes = sorted({tuple(int(x) for x in key[:5]) for key in best.index})
            rows = [[_sig(float(best[shape + (t,)])) if shape + (t,) in best.index else None for t in tokens]
                    for shape in shapes]
            out[str(dtype)] = {"shapes": [list(x) for x in shapes], "shape_columns": shape_cols,
                               "num_tokens": tokens, "latency_ms": rows,
                               "kernels": sorted(str(k) for k in set(d.kernel_source)),
                               "distribution": MOE_DISTRIBUTION, "moe_ep_size": 1,
                               "source": _source(mirror, path, str(d.device.iloc[0]))}
    return {MOE_TABLES[framework]: dict(sorted(out.items()))} if out else {}


def wide_ep_tables(mirror, system, framework: str) -> dict:
    """{key: {dtype: table}}: the wide-EP expert computation's latency (ms) by tokens per EP rank, per
    layer shape and EP size, as `framework` runs it (module docstring); {} where not measured."""
    if framework not in WIDE_EP_TABLES:
        return {}
    key, name, distribution = WIDE_EP_TABLES[framework]
    path = mirror.newest(system, "moe", framework, name)
    if path is None:
        return {}
    df = mirror.table(path)
    df = df[(df.distribution == distribution) & (df.moe_ep_size > 1)]
    shape_cols = ["hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"]
    out = {}
    for dtype, d in sorted(df.groupby("moe_dtype")):
        per_rank = {}
        for row in d.itertuples():
            if row.num_tokens % row.moe_ep_size == 0:
                cell = tuple(int(getattr(row, c)) for c in shape_cols) + (int(row.num_tokens // row.moe_ep_size),)
                per_rank[cell] = min(per_rank.get(cell, math.inf), float(row.latency))  # the fastest kernel
        tokens = _increasing(sorted({c[-1] for c in per_rank}), f"{system} {framework} wide-EP tokens")
        shapes = sorted({c[:-1] for c in per_rank})
        rows = [[_sig(per_rank[shape + (t,)]) if shape + (t,) in per_rank else None for t in tokens]
                for shape in shapes]
        out[str(dtype)] = {"shapes": [list(x) for x in shapes], "shape_columns": shape_cols,
                           "num_tokens_per_rank": tokens, "latency_ms": rows,
                           "kernels": sorted(str(k) for k in set(d.kernel_source)),
                           "distribution": distribution, "source": _source(mirror, path, str(d.device.iloc[0]))}
    return {key: out} if out else {}


def nccl_tables(mirror, system, gpu) -> dict:
    path = mirror.newest(system, "comm", "nccl", "nccl_perf.parquet")
    if path is None:
        return {}
    d = mirror.table(path)
    d = d[d.nccl_dtype == "half"]
    line = gpu.intra_node_bandwidth_in_GB_per_sec * 1e9
    out = {}
    for op in NCCL_OPS:
        for n, g in d[d.op_name == op].groupby("num_gpus"):
            sizes = _increasing(sorted(int(s) * 2 for s in g.message_size), f"{system} nccl {op}")
            lat = {int(s) * 2: t for s, t in zip(g.message_size, g.latency)}
            busbw = [_sig(s / (lat[s] * 1e-3) * BUS_FACTOR[op](int(n)) / line) for s in sizes]
            out.setdefault(op, {})[str(int(n))] = {"bytes": sizes, "busbw_over_line_rate": busbw}
    return {"nccl": out, "nccl_source": _source(mirror, path, str(d.device.iloc[0]))} if out else {}


# serving engine (aiconfigurator framework folder) -> the `framework` column its rows carry (some
# folders hold another engine's rows: h100_sxm/comm/sglang/0.5.6.post2 holds TensorRT-LLM's)
CUSTOM_ALLREDUCE_ENGINES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TRTLLM"}
CUSTOM_ALLREDUCE_KEY = "custom_allreduce"


def _launch_of(row_backend: str) -> str:
    """'graph' or 'eager' from a row's backend column (vllm_graph, sglang_eager, ...); TensorRT-LLM's
    rows (implementation 'trtllm') were captured in one CUDA graph (its collector) : 'graph'."""
    return "eager" if row_backend.endswith("_eager") else "graph"


def custom_allreduce_tables(mirror, system) -> dict:
    """{CUSTOM_ALLREDUCE_KEY: {engine: table}}: the all-reduce each serving engine runs for a
    tensor-parallel group inside one node (vLLM's and SGLang's custom one-shot / two-shot kernels over
    P2P buffers below their size limits and their NCCL paths above, TensorRT-LLM's AllReduce with
    strategy AUTO and no fusion), latency in microseconds by message bytes per group size and launch
    ('graph': captured in a CUDA graph and replayed; 'eager': launched from Python each time), from
    aiconfigurator's collector/network/collect_all_reduce.py runs (bf16; message_size counts elements:
    bytes = 2 x message_size). Per engine the newest version folder whose rows name that engine. A
    larger message never takes less time, so each latency is the least measured at that size or any
    larger one (an upward spike at one size, e.g. SGLang 8 x H100 at 1 KiB, is noise); repeated cells:
    the median."""
    out = {}
    for engine, label in CUSTOM_ALLREDUCE_ENGINES.items():
        prefix = f"{DATA}/{system}/comm/{engine}/"
        found = sorted((p for p in mirror.files if p.startswith(prefix) and p.endswith("/custom_allreduce_perf.parquet")),
                       key=lambda p: _version_key(p[len(prefix):].split("/")[0]), reverse=True)
        for path in found:
            df = mirror.table(path)
            df = df[(df.framework == label) & (df.op_name == "all_reduce") & (df.allreduce_dtype == "bfloat16")]
            if not df.empty:
                break
        else:
            continue
        launches = df.backend.map(_launch_of) if "backend" in df else ["graph"] * len(df)
        df = df.assign(launch=list(launches))
        table = {}
        for (launch, n), g in sorted(df.groupby(["launch", "num_gpus"])):
            by_size = g.groupby("message_size").latency.median()
            sizes = _increasing([int(s) for s in by_size.index], f"{system} {engine} custom all-reduce")
            lat_us = [float(by_size[s]) * 1e3 for s in sizes]
            for i in range(len(lat_us) - 2, -1, -1):  # the least at this size or any larger one
                lat_us[i] = min(lat_us[i], lat_us[i + 1])
            table.setdefault(launch, {})[str(int(n))] = {"bytes": [2 * s for s in sizes],
                                                          "latency_us": [_sig(x) for x in lat_us]}
        kernels = sorted(str(k) for k in set(df.kernel_source))
        out[engine] = {**table, "kernels": kernels, "dtype": "bf16",
                       "source": _source(mirror, path, str(df.device.iloc[0]))}
    return {CUSTOM_ALLREDUCE_KEY: out} if out else {}


def distil(mirror: Mirror, framework: str) -> dict:
    docs = {}
    for system, gpu_name in SYSTEMS.items():
        gpu = get_gpu_config_by_name(gpu_name)
        doc = {"gpu": gpu_name, "aiconfigurator_system": system}
        doc["gemm"] = gemm_tables(mirror, system, gpu, framework)
        doc.update(attention_tables(mirror, system, gpu, framework))
        doc.update(nccl_tables(mirror, system, gpu))
        doc.update(custom_allreduce_tables(mirror, system))
        for framework in MOE_TABLES:
            doc.update(moe_tables(mirror, system, framework))
            doc.update(wide_ep_tables(mirror, system, framework))
        if doc["gemm"] or len(doc) > 3:
            docs[gpu_name] = doc
    return docs


# ---------------------------------------------------------------- comparison
def _median(xs):
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return statistics.median(xs) if xs else None


def compare(docs: dict) -> list[tuple]:
    """Per GPU: (parameter, profile value, measured figure, how the figure was read)."""
    lines = []
    for gpu_name, doc in sorted(docs.items()):
        try:
            gen = generation_of(gpu_name)
        except Exception:  # noqa: BLE001 (a GPU without a profile: nothing to compare)
            continue
        p = load_profile(gen)
        sms = p.num_sms(gpu_name)
        for dtype, key in (("bf16", "gemm_plateau_efficiency"), ("fp8", "gemm_fp8_plateau_efficiency")):
            t = doc["gemm"].get(dtype)
            if not t:
                continue
            big = [e for row, nk in zip(t["efficiency"], t["n_k"]) for m, e in zip(t["m"], row) if m >= 4096]
            lines.append((gpu_name, gen, key, p.values.get(key), _median(big), "median over M >= 4096"))
            # the calibrated model's time of every measured shape (tile model, HBM streaming, the
            # CUDA-graph kernel floor: cost/gemm.py) against the measured time
            gpu = get_gpu_config_by_name(gpu_name)
            ratios, big_ratios = [], []
            for row, (n, k) in zip(t["efficiency"], t["n_k"]):
                for m, e in zip(t["m"], row):
                    if not e:
                        continue
                    measured_s = 2.0 * m * n * k / (e * t["peak_tflops"] * 1e12)
                    operand = 1 if dtype == "fp8" else 2
                    model_s = gemm_time_s(m, n, k, operand * (m * k + n * k) + 2 * m * n, t["peak_tflops"] * 1e12,
                                          gpu.hbm_bandwidth_in_GB_per_sec * 1e9, p, sms, fp8=dtype == "fp8")
                    ratios.append(math.log(model_s / measured_s))
                    if m >= 4096:
                        big_ratios.append(ratios[-1])
            lines.append((gpu_name, gen, f"{dtype} GEMM time model/measured", None,
                          math.exp(_median([abs(r) for r in ratios])) - 1, f"median |model/measured - 1| over "
                          f"{len(ratios)} shapes (signed median {math.exp(_median(ratios)) - 1:+.0%}, "
                          f"M >= 4096: {math.exp(_median(big_ratios)) - 1:+.0%})"))
        pre = doc.get("attention_prefill")
        if pre:
            s = pre["seq_len"][-1]
            model = p.attn_prefill_efficiency * s / (s + p.attn_prefill_half_seq)
            lines.append((gpu_name, gen, "attn_prefill (longest)", model, pre["efficiency_full_matrix"][-1],
                          f"s={s}, whole s x s FLOPs (causal half: {pre['efficiency_causal_half'][-1]:.3f})"))
        dec = doc.get("attention_decode")
        if dec:
            # the cell with the most KV bytes (largest batch x KV length measured): a cache far larger
            # than L2 (small ones partly hit L2 and read above the HBM spec: L40S, A100)
            cells = [(b * s, b, s, x) for b, row in zip(dec["batch"], dec["kv_bytes_over_hbm_spec"])
                     for s, x in zip(dec["kv_len"], row) if x]
            _, b, s, x = max(cells)
            lines.append((gpu_name, gen, "attn_decode_hbm_efficiency", p.attn_decode_hbm_efficiency, x,
                          f"batch {b}, KV length {s} (the most KV bytes measured)"))
        ar = doc.get("nccl", {}).get("all_reduce", {}).get("8")
        if ar:
            lines.append((gpu_name, gen, "all-reduce busbw / line (8 GPUs)",
                          max(p.intra_bus_efficiency, p.nvls_busbw_factor), max(ar["busbw_over_line_rate"]),
                          "largest over message sizes; profile: max(ring, NVLS)"))
    return lines


def print_comparison(lines) -> None:
    print(f"{'GPU':<20} {'profile':<10} {'parameter':<36} {'profile':>8} {'measured':>9}  how read")
    for gpu, gen, key, ours, measured, how in lines:
        fmt = (lambda x: f"{x:8.3f}" if isinstance(x, float) else f"{'-':>8}")
        print(f"{gpu:<20} {gen:<10} {key:<36} {fmt(ours)} {fmt(measured):>9}  {how}")


def _measured_files(out: Path):
    """(path, document, aiconfigurator system) of each GPU's JSON file already written under `out` whose GPU
    aiconfigurator measured."""
    by_gpu = {gpu_name: system for system, gpu_name in SYSTEMS.items()}
    for path in sorted(out.glob("*.json")):
        doc = json.loads(path.read_text())
        system = by_gpu.get(doc.get("gpu"))
        if system is not None:
            yield path, doc, system


def _replace_tables(doc: dict, keys, tables: dict) -> None:
    """Each of `keys` set to its table in `tables` where it stays in place in the file (a rewritten table
    keeps its place, so one mode run after another leaves the file as it was), removed where it is gone."""
    for key in keys:
        if key in tables:
            doc[key] = tables[key]
        else:
            doc.pop(key, None)


def write_moe_tables(mirror: Mirror, out: Path) -> int:
    """--moe-only: each engine's fused-MoE tables into the GPUs' JSON files already written."""
    for path, doc, system in _measured_files(out):
        keys = [*MOE_TABLES.values(), *(key for key, _, _ in WIDE_EP_TABLES.values())]
        for framework, key in MOE_TABLES.items():
            tables = {**moe_tables(mirror, system, framework), **wide_ep_tables(mirror, system, framework)}
            wide_ep = [WIDE_EP_TABLES[framework][0]] if framework in WIDE_EP_TABLES else []
            _replace_tables(doc, [key, *wide_ep], tables)
        path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
        print(f"{path.name}: " + ", ".join(f"{key} {sorted(doc[key])}" for key in keys if key in doc))
    return 0


def write_custom_allreduce_tables(mirror: Mirror, out: Path) -> int:
    """--custom-allreduce-only: the serving engines' all-reduce tables (CUSTOM_ALLREDUCE_KEY) into the
    GPUs' JSON files already written, every other key left as it is."""
    for path, doc, system in _measured_files(out):
        _replace_tables(doc, [CUSTOM_ALLREDUCE_KEY], custom_allreduce_tables(mirror, system))
        path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
        got = doc.get(CUSTOM_ALLREDUCE_KEY, {})
        print(f"{path.name}: " + (", ".join(f"{e} {sorted(k for k in t if k in ('graph', 'eager'))} tp "
                                            f"{sorted(int(n) for n in t.get('graph', t.get('eager', {})))}"
                                            for e, t in got.items()) or "no custom all-reduce tables"))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aic-git-dir", required=True, help="git directory of an ai-dynamo/aiconfigurator clone/mirror")
    ap.add_argument("--framework", default="trtllm", help="aiconfigurator framework folder (default trtllm)")
    ap.add_argument("--out-dir", default=str(OUT_DIR))
    ap.add_argument("--compare-only", action="store_true", help="print the comparison, write nothing")
    ap.add_argument("--moe-only", action="store_true",
                    help="rewrite only the fused-MoE tables (" + ", ".join(MOE_TABLES.values()) + " and the wide-EP "
                         "ones) of the JSON "
                         "files already in --out-dir, leaving their other tables as they are")
    ap.add_argument("--custom-allreduce-only", action="store_true",
                    help=f"rewrite only the serving engines' all-reduce tables ({CUSTOM_ALLREDUCE_KEY}) of the JSON files "
                         "already in --out-dir, leaving their other tables as they are")
    args = ap.parse_args(argv)
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        print("distil_operator_data: needs pandas and pyarrow (pip install -e .[benchmarks])", file=sys.stderr)
        return 2
    if args.custom_allreduce_only:
        return write_custom_allreduce_tables(Mirror(args.aic_git_dir), Path(args.out_dir))
    if args.moe_only:
        return write_moe_tables(Mirror(args.aic_git_dir), Path(args.out_dir))
    docs = distil(Mirror(args.aic_git_dir), args.framework)
    if not args.compare_only:
        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for gpu_name, doc in docs.items():
            (out / f"{gpu_name}.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
        print(f"wrote {len(docs)} tables to {out}")
    print_comparison(compare(docs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
