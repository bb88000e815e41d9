"""Profile parameters read off measured operator tables (issue 27 item 3), not fitted end to end.

The tables are llm_analysis/cost/profiles/measured/<gpu>.json, distilled by
benchmarks/distil_operator_data.py from ai-dynamo/aiconfigurator (Apache-2.0): TensorRT-LLM
kernels and nccl-tests timed on A100, H100, H200, B200, GB200, B300, GB300 and L40S. Each value
below is the calibrated model's own formula inverted on the measurements, per measured GPU, then
averaged over the measured GPUs of the profile's generation (one profile per generation):

- gemm_k_half: not measured (below); the plateaus are read at GEMM_K_HALF and the profile takes it;
- gemm_plateau_efficiency / gemm_fp8_plateau_efficiency / gemm_fp4_plateau_efficiency (NVFP4
  rows, Blackwell): the measured efficiency of every (M, N, K) with M >= GEMM_MIN_M
  (compute-bound) divided by the model's shape factor at plateau 1 (tile and wave quantisation,
  split-K, K / (K + gemm_k_half): cost/gemm.py); the median;
- moe_gemm_share / moe_gemm_fp8_share / moe_gemm_fp4_share: the fused MoE layer tables (vLLM,
  power-law routing, the fastest kernel per cell): the model's time of the layer's three expert
  GEMMs (gate and up: N = intermediate / moe_tp, K = hidden; down: N = hidden, K = intermediate /
  moe_tp) at M = tokens per expert (tokens x top-k over the experts they reach: calibrated.py
  `routed_expert_eff`), at the precision's plateau and share 1, over the measured latency, at
  every cell whose weights stream in at most MOE_STREAM_SHARE of the measured time (the kernel is
  compute-bound there, so the ratio is the grouped GEMM's share, not a bandwidth figure); the
  median per GPU, over cells of >= MOE_MIN_TOKENS_PER_EXPERT tokens per expert (below, fixed costs of
  the fused layer dominate: routing, sorting, several launches; the model's kernel floors hold those). Precisions: 16-bit tensor cores = bfloat16, W4A16 MXFP4 and int4 weight-only
  kernels; fp8 = block-scaled FP8 (the FP8 checkpoints of the MoE models served: DeepSeek-V3/R1,
  Kimi-K2, Qwen3, MiniMax-M2 use 128 x 128 block scales) and W4A8 MXFP4; FP4 = NVFP4. Per-tensor
  FP8 MoE kernels are left out (faster than block-scaled ones: 0.6-0.9 of the dense shape's rate on
  B200, against 0.3-0.4);
- moe_gemm_share_sglang, moe_gemm_fp8_share_sglang, ... _trtllm, ... _sglang_wide_ep: the same,
  read off the tables of SGLang's and TensorRT-LLM's own fused MoE kernels and of SGLang's wide-EP
  expert computation (moe_sglang, moe_trtllm, moe_sglang_wide_ep: tokens per EP rank over the
  rank's experts; a serving engine profile's `moe_kernels` picks them: calibrated.py
  `moe_gemm_share`);
- attn_prefill_efficiency, attn_prefill_half_seq: E x s / (s + h) (calibrated.py's flash prefill
  efficiency on the executed, causal FLOPs) least-squares fitted in log to the causal-half
  efficiency at s >= PREFILL_MIN_SEQ;
- hbm_efficiency: time = (bytes + h) / (E x HBM spec) fitted to the batch-1 bf16 GEMMs, which
  stream their weights (34 MB to 6.7 GB): E, the streaming plateau. Their fixed part h (3-5 us, 11-37
  MB at the HBM rate) is not taken as hbm_half_saturation_bytes. (An earlier note called it launch:
  aiconfigurator times its GEMMs replayed from a CUDA graph, up to five copies per graph,
  collector/helper.py benchmark_with_power, so it is the kernel's own prologue, tail wave and the
  graph's gap between kernels, not a host launch.) The model's kernel floor holds it in part (max, not
  sum); taken in full, gpt-fast's CUDA-graph decodes came out 20-60% slow, and the serving engines'
  step overheads were fitted without it;
- gemm_fp8_fixed_s / gemm_fp4_fixed_s (and *_k_serial_s, 0 here): what an fp8 / NVFP4 linear takes at
  M <= 16 beyond streaming its weights, over what the bf16 GEMMs take beyond theirs
  (`quantized_gemm_terms`): the activation quantize kernel (the measured Linear.forward runs it) and
  the low-precision kernel's fixed costs; fp8 with static input scales (the dynamic scale's measured
  time, FP8_DYNAMIC_SCALE_S, taken off);
- attn_decode_hbm_efficiency: KV bytes streamed / HBM spec at the measured cell with the most KV
  bytes (a cache far larger than L2);
- attn_decode_fixed_s: what a decode attention call takes beyond streaming its KV cache at the
  generation's attn_decode_hbm_efficiency (and half-saturation): the median, over the cells whose
  streaming is at most half their measured time (small batches and short caches), of the measured
  time less that streaming. The measured op is TensorRT-LLM's attention with RoPE and the KV append
  fused in, replayed from a CUDA graph, so the fixed part holds those and the kernels' own latency;
- intra_bus_efficiency: ring bus bandwidth / NVLink line rate of the 8-GPU all-gather and
  reduce-scatter (and all-reduce where the generation has no NVLink SHARP) at the largest message;
- nvls_busbw_factor: the 8-GPU all-reduce at the largest message on generations with NVLink SHARP
  (NCCL picks NVLS there: it beats the ring figure).

Sanity checks leave a GPU's figure out, with the reason (`LEFT_OUT` and the checks below): a KV
stream above the HBM spec (the cache is read from L2, or the table counts other bytes), a
collective below 0.3 of line rate at 8 GPUs (the machine's GPUs are not on one switch), a table
without 8-GPU groups.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llm_analysis.cost.calibrated import GROUPED_TILE_TOKENS  # noqa: E402
from llm_analysis.cost.gemm import GemmShape, gemm_efficiency, gemm_wave_tail_for  # noqa: E402
from llm_analysis.cost.profiles import MOE_KERNEL_FAMILIES, PROFILE_DIR, generation_of, load_profile  # noqa: E402
from llm_analysis.config import get_gpu_config_by_name  # noqa: E402

MEASURED_DIR = PROFILE_DIR / "measured"
MOE_STREAM_SHARE = 0.5  # cells whose expert weights stream in more of the measured time are bandwidth-bound
# below, the fused layer's fixed costs (routing, launches) dominate small cells, and the model times the
# experts' GEMMs side by side (calibrated.py GROUPED_TILE_TOKENS): the shares are fitted from there up
MOE_MIN_TOKENS_PER_EXPERT = GROUPED_TILE_TOKENS
# measured MoE dtype -> the tensor cores its GEMMs run on (calibrated.py `gemm_precision`) and the bytes
# per weight its experts stream (4-bit formats with their block scales)
MOE_DTYPES = {"bfloat16": ("16-bit", 2.0), "w4a16_mxfp4": ("16-bit", 4.25 / 8), "int4_wo": ("16-bit", 4.25 / 8),
              "fp8_block": ("fp8", 1.0 + 4.0 / 128 ** 2), "w4a8_mxfp4_mxfp8": ("fp8", 4.25 / 8),
              "nvfp4": ("fp4", 4.5 / 8)}
GEMM_MIN_M = 1024  # below, a GEMM of these shapes is bound by streaming its weights or by launch
PREFILL_MIN_SEQ = 512  # below, the prefill tables' short kernels are bound by launch and tails
NCCL_GROUP = "8"  # the 8-GPU node the profiles' ring and NVLS figures describe
SANE_BUS_FRACTION = 0.3
# The measured weight shapes have K = 4096, 8192 and 51200, where K / (K + h) is within a few per cent
# of 1 for any plausible h: the tables cannot separate h from the plateau (a least-squares fit wanders
# from 8 to 460 between generations, trading it against the plateau), so h stays the assumption every
# generation but Ampere shipped, and the plateaus are read at it.
GEMM_K_HALF = 128.0
GEMM_K_HALF_SOURCE = ("assumed: K at which a GEMM's main loop and prologue/epilogue take equal time (CUTLASS "
                      "k-tile 32-64, 2-4 stages); the measured GEMM plateaus (benchmarks/measured_operator_values.py) "
                      "are read at this value: the measured shapes (K >= 4096) cannot pin it")  # an 8-GPU NVLink/PCIe collective far below this: not one switch


def _table_path(gpu: str) -> str:
    return f"llm_analysis/cost/profiles/measured/{gpu}.json"


def _source_of(table: dict) -> str:
    s = table["source"]
    return f"{s['repository']}@{s['commit'][:12]} {s['path']} ({s['framework']}, {s['device']}; {s['licence']})"


def _gemm_log_ratios(doc: dict, dtype: str, generation: str, k_half: float) -> List[float]:
    """log(measured efficiency / the model's shape factor at plateau 1 and this gemm_k_half) of
    every compute-bound (M >= GEMM_MIN_M) shape of one GPU's table."""
    table = doc["gemm"][dtype]
    p = load_profile(generation)
    unit = p.with_values({"gemm_plateau_efficiency": 1.0, "gemm_fp8_plateau_efficiency": 1.0,
                          "gemm_fp4_plateau_efficiency": 1.0, "gemm_k_half": k_half}, "plateau 1")
    sms = p.num_sms(doc["gpu"])
    return [math.log(e / gemm_efficiency(m, n, k, unit, sms, fp8=dtype == "fp8", fp4=dtype == "nvfp4"))
            for row, (n, k) in zip(table["efficiency"], table["n_k"]) for m, e in zip(table["m"], row)
            if e and m >= GEMM_MIN_M]


def gemm_plateau(doc: dict, dtype: str, generation: str, k_half: float) -> Tuple[float, str] | None:
    """(plateau, how read) of one GPU's GEMM table, None without one."""
    table = doc.get("gemm", {}).get(dtype)
    if not table:
        return None
    logs = _gemm_log_ratios(doc, dtype, generation, k_half)
    value = math.exp(statistics.median(logs))
    return value, (f"{doc['gpu']} {dtype}: median over {len(logs)} shapes (M >= {GEMM_MIN_M}, (N, K) in "
                   f"{len(table['n_k'])} weight shapes) of measured efficiency / the model's shape factor "
                   f"(cost/gemm.py at plateau 1, gemm_k_half {k_half:g}) = {value:.3f}; {_table_path(doc['gpu'])} "
                   f"<- {_source_of(table)}")


# MoE kernel family (calibrated.py `moe_share_key`) -> its tables in the measured JSON (distil_operator_data.py)
MOE_TABLE_KEYS = {"vllm": "moe", "sglang": "moe_sglang", "trtllm": "moe_trtllm",
                  "sglang_wide_ep": "moe_sglang_wide_ep"}


def moe_cells(doc: dict, generation: str, k_half: float, kernels: str = "vllm"):
    """Every cell of one GPU's `kernels` MoE tables as (precision, dtype, M = tokens per reached expert,
    the model's expert-GEMM time at plateau 1 and share 1 over the measured latency, the share of the
    measured latency the reached experts' weights take to stream): `moe_unit_ratios` reads the shares
    off the compute-bound ones, `print_moe_by_tokens` shows how the ratio moves with M."""
    from llm_analysis.config import get_gpu_config_by_name
    tables = doc.get(MOE_TABLE_KEYS[kernels])
    if not tables:
        return
    gpu = get_gpu_config_by_name(doc["gpu"])
    p = load_profile(generation)
    unit = p.with_values({"gemm_plateau_efficiency": 1.0, "gemm_k_half": k_half}, "plateau 1")
    sms = p.num_sms(doc["gpu"])
    peaks = {"16-bit": gpu.peak_fp16_TFLOPS, "fp8": gpu.peak_fp8_TFLOPS, "fp4": gpu.peak_fp4_TFLOPS}
    stream_bytes_per_s = gpu.hbm_bandwidth_in_GB_per_sec * 1e9 * p.hbm_efficiency
    for dtype, table in tables.items():
        if dtype not in MOE_DTYPES or not peaks[MOE_DTYPES[dtype][0]]:
            continue
        precision, weight_bytes = MOE_DTYPES[dtype]
        peak = peaks[precision] * 1e12
        # a wide-EP table: tokens per EP rank, its experts split over moe_ep ranks (shape's 6th column)
        tokens_axis = table["num_tokens"] if "num_tokens" in table else table["num_tokens_per_rank"]
        for (hidden, inter, top_k, experts, moe_tp, *ep), row in zip(table["shapes"], table["latency_ms"]):
            f = inter // moe_tp
            local = experts // (ep[0] if ep else 1)  # the rank's experts
            for tokens, ms in zip(tokens_axis, row):
                if not ms:
                    continue
                pairs = tokens * top_k
                active = local * -math.expm1(pairs * math.log1p(-1.0 / local)) if local > 1 else 1.0
                m = max(1, round(pairs / active))
                stream_s = 3.0 * active * hidden * f * weight_bytes / stream_bytes_per_s
                # (at plateau 1 and the precision's wave tail: gemm_wave_tail_for)
                unit_s = sum(2.0 * pairs * n * k / (peak * GemmShape(n, k, unit, sms, plateau=1.0,
                                                                      wave_tail=gemm_wave_tail_for(unit.values,
                                                                                                   precision))(m))
                             for n, k in ((f, hidden), (f, hidden), (hidden, f)))
                yield precision, dtype, m, unit_s / (ms * 1e-3), stream_s / (ms * 1e-3)


def moe_unit_ratios(doc: dict, generation: str, k_half: float, kernels: str = "vllm"
                    ) -> Dict[str, Tuple[float, str]]:
    """precision -> (median over compute-bound cells of the model's expert-GEMM time at plateau 1 and
    share 1 over the measured fused-MoE latency, how read) of one GPU's `kernels` MoE tables (module
    docstring). The share is this over the precision's plateau."""
    ratios: Dict[str, List[float]] = {}
    for precision, _, m, ratio, stream_share in moe_cells(doc, generation, k_half, kernels):
        if m < MOE_MIN_TOKENS_PER_EXPERT or stream_share > MOE_STREAM_SHARE:
            continue
        ratios.setdefault(precision, []).append(ratio)
    tables = doc.get(MOE_TABLE_KEYS[kernels], {})
    out = {}
    for precision, rs in ratios.items():
        dtypes = sorted(d for d in tables if MOE_DTYPES.get(d, ("",))[0] == precision)
        r = statistics.median(rs)
        out[precision] = (r, f"{doc['gpu']} {kernels} {precision} ({', '.join(dtypes)}): median over {len(rs)} compute-bound "
                             f"cells (>= {MOE_MIN_TOKENS_PER_EXPERT} tokens per expert, weights stream in <= "
                             f"{MOE_STREAM_SHARE:g} of the time) of the model's expert "
                             f"GEMM time at M = tokens per expert, plateau 1 / measured fused-MoE latency = {r:.3f}; "
                             f"{_table_path(doc['gpu'])} <- {_source_of(next(iter(tables.values())))}")
    return out


def print_moe_by_tokens() -> None:
    """The ratio `moe_unit_ratios` takes one median of, by tokens per reached expert (powers of two), over
    the same cells (compute-bound, >= MOE_MIN_TOKENS_PER_EXPERT): whether one share per precision fits
    every M (nothing written; docs/validation.md, round 23)."""
    for gpu, doc in sorted(measured_docs().items()):
        gen = _generation(gpu)
        if not gen:
            continue
        for kernels in MOE_TABLE_KEYS:
            ratios: Dict[Tuple[str, int], List[float]] = {}
            for _, dtype, m, ratio, stream_share in moe_cells(doc, gen, GEMM_K_HALF, kernels):
                if m >= MOE_MIN_TOKENS_PER_EXPERT and stream_share <= MOE_STREAM_SHARE:
                    ratios.setdefault((dtype, 2 ** round(math.log2(m))), []).append(ratio)
            for dtype in sorted({d for d, _ in ratios}):
                row = "  ".join(f"{b}:{statistics.median(v):.2f}" for (d, b), v in sorted(ratios.items()) if d == dtype)
                print(f"{gpu:<18} {kernels:<15} {dtype:<17} M:ratio  {row}")


def weight_stream(doc: dict) -> Tuple[float | None, float | None, str] | None:
    """(streaming plateau E, half-saturation bytes h, how read) of the batch-1 (M = 1) bf16 GEMMs,
    which stream their weights: time = (bytes + h) / (E x HBM spec) (calibrated.py `_stream_s`)
    least-squares fitted over the weight shapes (34 MB to 6.7 GB). None values: left out (a GPU whose
    L2 holds the smaller weights reads them above the HBM spec)."""
    table = doc.get("gemm", {}).get("bf16")
    if not table or table["m"][0] != 1:
        return None
    from llm_analysis.config import get_gpu_config_by_name
    hbm = get_gpu_config_by_name(doc["gpu"]).hbm_bandwidth_in_GB_per_sec * 1e9
    peak = table["peak_tflops"] * 1e12
    pts = [(2.0 * (n * k + k + n), 2.0 * n * k / (row[0] * peak)) for row, (n, k) in zip(table["efficiency"],
                                                                                       table["n_k"]) if row[0]]
    rates = [b / t / hbm for b, t in pts]
    if max(rates) > 1:
        return None, None, (f"{doc['gpu']}: left out: batch-1 GEMMs stream their weights at up to {max(rates):.2f} "
                            "x the HBM spec (the smaller weights sit in L2)")
    n = len(pts)
    mean_b, mean_t = sum(b for b, _ in pts) / n, sum(t for _, t in pts) / n
    slope = sum((b - mean_b) * (t - mean_t) for b, t in pts) / sum((b - mean_b) ** 2 for b, _ in pts)
    plateau, half = 1.0 / (slope * hbm), (mean_t - slope * mean_b) / slope
    return plateau, half, (f"{doc['gpu']}: batch-1 bf16 GEMMs (weight streaming) over {n} weight shapes "
                           f"({pts[0][0] / 1e6:.0f} MB - {max(b for b, _ in pts) / 1e6:.0f} MB): time = (bytes + h) / "
                           f"(E x HBM spec) fitted: E = {plateau:.3f} (the fixed part h = {half / 2**20:.1f} MiB is "
                           f"not taken: the kernel's prologue and tail under a CUDA graph, which the kernel floors "
                           f"hold in part); {_table_path(doc['gpu'])} <- {_source_of(table)}")


# bytes per weight of each measured GEMM dtype as the model counts them (NVFP4: 4 bits + one FP8 scale per 16)
GEMM_WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "nvfp4": 4.5 / 8}
QUANTIZED_GEMM_M = (1, 2, 4, 8, 16)  # decode sizes: the weights' streaming bounds these GEMMs
# seconds per element of K tried for the main loop of one output tile at small M (0 to 4 ns)
K_SERIAL_GRID_S = tuple(i * 0.05e-9 for i in range(81))
K_SERIAL_MIN_GAIN = 0.9  # a K term is kept only where it cuts the rms log error by 10% or more
# dtypes whose small-M GEMMs get a K term. Checked on aiconfigurator's whole N x K grid of B200
# (gemm_perf.parquet of trtllm 1.3.0rc20, M = 1, N and K of 512-65536; not distilled): NVFP4's time over
# streaming grows 6.5 -> 96 us from K = 512 to 51200 at N = 1024 (about 1.8 ns per K while the N / 128
# output tiles are fewer than the SMs: one tile's main loop runs all of K), fp8's stays 13-18 us at every
# K. Fitted on the distilled shapes NVFP4's K term is 1.8 ns (Blackwell) and 1.1 ns (Blackwell Ultra) per
# K, but it is not applied (none here): the operator description times q, k and v, and gate and up, as
# separate linears, where the engines run one fused QKV and one gate-up GEMM, so a floor per linear counts
# the K loop three times over q/k/v (N = 1024 for k and v of Llama-3.1-70B); in the serving validation
# (benchmarks/serving_accuracy.py --by_model --half all) Llama-3.1-70B NVFP4 on vLLM went from -19% to
# +44%. The fixed part is fitted without it.
K_SERIAL_DTYPES: tuple = ()
# Fitted figures shipped as 0 (the model before the key), each with why; the fitted value stays in its source.
# NVFP4's fixed part (9.7 us on Blackwell) is TensorRT-LLM's: vLLM's FlashInfer CuteDSL NVFP4 linears take
# 4-6 us over bf16 (aiconfigurator's gemm/vllm/0.24.0 tables, not distilled). Tried with the serving
# conventions' fused projections (4 linears per layer, as the engines run them) and the engine profiles
# refitted each time: at 9.7 us the aggregated report half's TPOT p90 went 31.1% -> 31.8% and the layout
# rows' (serving_layout_accuracy.py) 29.6% -> 34.7%; at vLLM's 5 us, 31.1% -> 28.4% but 29.6% -> 30.9%
# with the layouts' median 13.2% -> 15.1%. One figure per generation cannot serve both engines' kernels.
NOT_APPLIED = {"gemm_fp4_fixed_s": "TensorRT-LLM's figure; vLLM's NVFP4 kernels take 4-6 us over bf16, and one "
                                   "figure per generation fits neither engine: applied (fused projections, engine "
                                   "profiles refitted), the serving layout rows' TPOT p90 went 29.6% -> 34.7% "
                                   "(benchmarks/measured_operator_values.py NOT_APPLIED)"}
# The distilled fp8 GEMMs ran TensorRT-LLM's dynamic per-tensor quantisation (aiconfigurator's collector gives
# the fp8 weights no input scale: collector/trtllm/collect_gemm.py), whose scale computation (an amax
# reduction over the activations before the quantize kernel) a served FP8 checkpoint with static input
# scales does not run (ModelOpt's FP8 checkpoints, TensorRT-LLM; vLLM's per-tensor static scheme). Its time,
# measured apart by aiconfigurator (collector/trtllm/collect_computescale.py: dynamic minus static quantize
# of the same (M, K) under CUDA graphs), the median over M <= 16 and K of 4096-51200 of
# systems/data/<system>/quantize/trtllm/1.3.0rc20/computescale_perf.parquet (ai-dynamo/aiconfigurator
# @095f58a, Apache-2.0; 144 cells each), is taken off the fp8 figure, as aiconfigurator derives fp8_static:
FP8_DYNAMIC_SCALE_S = {"h100-sxm-80gb": 7.44e-6, "h200-sxm-141gb": 7.38e-6, "b200-180gb": 8.47e-6,
                       "gb200-nvl72-186gb": 8.53e-6, "b300-270gb": 8.66e-6, "gb300-nvl72-279gb": 8.58e-6}


def _small_m_cells(doc: dict, dtype: str, generation: str) -> List[Tuple[float, float, int]]:
    """(measured seconds, the model's streaming seconds, K) of each GEMM of one GPU's `dtype` table at
    M in QUANTIZED_GEMM_M: the model's streaming is (bytes + h) / (E x HBM spec) (calibrated.py
    `_stream_s`) at the profile's hbm_efficiency E and half-saturation h; bytes = weights at the
    dtype's bytes per weight + activations in and out."""
    from llm_analysis.config import get_gpu_config_by_name
    table = doc["gemm"][dtype]
    p = load_profile(generation)
    rate = get_gpu_config_by_name(doc["gpu"]).hbm_bandwidth_in_GB_per_sec * 1e9 * p.hbm_efficiency
    half, per_weight, peak = p.hbm_half_saturation_bytes, GEMM_WEIGHT_BYTES[dtype], table["peak_tflops"] * 1e12
    cells = []
    for (n, k), row in zip(table["n_k"], table["efficiency"]):
        for m, e in zip(table["m"], row):
            if m in QUANTIZED_GEMM_M and e:
                nbytes = n * k * per_weight + m * (n + k) * min(2.0, per_weight)
                cells.append((2.0 * m * n * k / (e * peak), (nbytes + half) / rate, k))
    return cells


def quantized_gemm_terms(doc: dict, dtype: str, generation: str) -> Tuple[float, float, str] | None:
    """(fixed seconds, seconds per element of K, how read) of one GPU's fp8 or NVFP4 linear at decode
    sizes, against its 16-bit GEMMs: measured time = max(streaming, K x k_serial) + a (calibrated.py
    `quantized_gemm_terms`) fitted at M in QUANTIZED_GEMM_M (a the median residual, k_serial the grid
    value of least rms log error, 0 unless it cuts that error by 10%); the 16-bit GEMMs' own median
    residual r16 (their launch-to-end tail under a CUDA graph, which the model's 16-bit GEMM leaves
    out and the engine profiles' overheads were fitted without) is taken off: fixed = a - r16. None
    without both tables or M = 1 rows."""
    tables = doc.get("gemm", {})
    if dtype not in tables or "bf16" not in tables or tables[dtype]["m"][0] != 1:
        return None
    r16 = statistics.median(t - s for t, s, _ in _small_m_cells(doc, "bf16", generation))
    cells = _small_m_cells(doc, dtype, generation)

    def fit(c: float) -> Tuple[float, float]:
        a = statistics.median(t - max(s, c * k) for t, s, k in cells)
        return math.sqrt(statistics.mean(math.log(t / (max(s, c * k) + a)) ** 2 for t, s, k in cells)), a
    rms0, a0 = fit(0.0)
    rms, a, c = min((*fit(c), c) for c in (K_SERIAL_GRID_S if dtype in K_SERIAL_DTYPES else (0.0,)))
    if rms > K_SERIAL_MIN_GAIN * rms0:
        rms, a, c = rms0, a0, 0.0
    dynamic_s = FP8_DYNAMIC_SCALE_S.get(doc["gpu"], 0.0) if dtype == "fp8" else 0.0
    fixed = max(0.0, a - r16 - dynamic_s)
    shapes = len(tables[dtype]["n_k"])
    return fixed, c, (f"{doc['gpu']} {dtype}: {len(cells)} GEMMs at M {QUANTIZED_GEMM_M[0]}-{QUANTIZED_GEMM_M[-1]} "
                      f"({shapes} weight shapes, K {min(k for *_, k in cells)}-{max(k for *_, k in cells)}): "
                      f"time = max(weights streamed at the profile's hbm_efficiency, K x {c * 1e9:.2f} ns) + "
                      f"{a * 1e6:.1f} us (rms log error {rms:.3f}; without the K term {rms0:.3f}); the bf16 "
                      f"GEMMs' own residual {r16 * 1e6:.1f} us taken off"
                      + (f", and the dynamic scale's {dynamic_s * 1e6:.2f} us (FP8_DYNAMIC_SCALE_S)" if dynamic_s else "")
                      + f": fixed {fixed * 1e6:.1f} us; "
                      f"{_table_path(doc['gpu'])} <- {_source_of(tables[dtype])}")


def prefill_fit(doc: dict) -> Tuple[float, float, str] | None:
    """(plateau E, half length h, how read): E x s / (s + h) fitted in log to the causal-half figures."""
    table = doc.get("attention_prefill")
    if not table:
        return None
    pts = [(s, e) for s, e in zip(table["seq_len"], table["efficiency_causal_half"]) if s >= PREFILL_MIN_SEQ and e]
    best = None
    for h in [2 ** (i / 16) for i in range(16 * 5, 16 * 13 + 1)]:  # 32 .. 8192, 1/16 octave apart
        logs = [math.log(e * (s + h) / s) for s, e in pts]
        log_e = sum(logs) / len(logs)  # the least-squares plateau for this h
        rms = math.sqrt(sum((x - log_e) ** 2 for x in logs) / len(logs))
        if best is None or rms < best[0]:
            best = (rms, math.exp(log_e), h)
    rms, plateau, half = best
    return plateau, half, (f"{doc['gpu']}: E x s / (s + h) fitted to the flash prefill efficiency on the causal "
                           f"(executed) FLOPs at {len(pts)} lengths {pts[0][0]}-{pts[-1][0]} (heads "
                           f"{table['heads']}): E = {plateau:.3f}, h = {half:.0f}, rms log error {rms:.3f}; "
                           f"{_table_path(doc['gpu'])} <- {_source_of(table)}")


def decode_stream(doc: dict) -> Tuple[float | None, str] | None:
    """(KV bytes / HBM spec at the cell with the most KV bytes, how read); the value None when
    the figure exceeds the spec (left out)."""
    table = doc.get("attention_decode")
    if not table:
        return None
    cells = [(b * s, b, s, x) for b, row in zip(table["batch"], table["kv_bytes_over_hbm_spec"])
             for s, x in zip(table["kv_len"], row) if x]
    _, b, s, x = max(cells)
    if x > 1:
        return None, (f"{doc['gpu']}: left out: KV streaming {x:.2f} x the HBM spec at batch {b}, KV length {s} "
                      f"(impossible from HBM: the table's bytes are not what the kernel reads, or L2 serves them)")
    return x, (f"{doc['gpu']}: {x:.3f} at batch {b}, KV length {s} (the most KV bytes measured); "
               f"{_table_path(doc['gpu'])} <- {_source_of(table)}")


def decode_fixed(doc: dict, generation: str) -> Tuple[float | None, str] | None:
    """(seconds a decode attention call takes beyond streaming its KV cache, how read): the median over
    the fixed-dominated cells (streaming <= half the measured time) of measured time - streaming, the
    streaming at the generation's shipped attn_decode_hbm_efficiency and hbm_half_saturation_bytes."""
    table = doc.get("attention_decode")
    if not table:
        return None
    stream = decode_stream(doc)
    if stream and stream[0] is None:  # a table whose bytes are not what the kernel reads: not this either
        return None, stream[1]
    profile = load_profile(generation)
    spec = get_gpu_config_by_name(doc["gpu"]).hbm_bandwidth_in_GB_per_sec * 1e9
    _, kv_heads, head_dim = table["heads"]
    residuals = []
    for b, row in zip(table["batch"], table["kv_bytes_over_hbm_spec"]):
        for s, x in zip(table["kv_len"], row):
            if not x:
                continue
            kv_bytes = b * s * kv_heads * head_dim * 2 * 2  # K and V, 16-bit
            measured_s = kv_bytes / (x * spec)
            stream_s = (kv_bytes + profile.hbm_half_saturation_bytes) / (spec * profile.attn_decode_hbm_efficiency)
            if stream_s <= 0.5 * measured_s:
                residuals.append(measured_s - stream_s)
    if not residuals:
        return None
    value = statistics.median(residuals)
    return value, (f"{doc['gpu']}: {value * 1e6:.1f} us = median over {len(residuals)} cells (batch "
                   f"{min(table['batch'])}-{max(table['batch'])}, KV length {min(table['kv_len'])}-"
                   f"{max(table['kv_len'])}, streaming <= half the time) of measured time - KV streaming at "
                   f"{profile.attn_decode_hbm_efficiency:.3f} of the HBM spec; {_table_path(doc['gpu'])} <- "
                   f"{_source_of(table)}")


def nccl_figures(doc: dict, has_nvls: bool) -> Dict[str, Tuple[float | None, str]]:
    """{'intra_bus_efficiency': (ring figure, how read), 'nvls_busbw_factor': ...} of one GPU."""
    nccl = doc.get("nccl")
    if not nccl:
        return {}
    where = f"{_table_path(doc['gpu'])} <- {doc['nccl_source']['path']} ({doc['nccl_source']['framework']})"
    groups = {op: tables.get(NCCL_GROUP) for op, tables in nccl.items()}
    if not groups.get("all_gather"):
        sizes = sorted(nccl.get("all_reduce", {}), key=int)
        return {"intra_bus_efficiency": (None, f"{doc['gpu']}: left out: no {NCCL_GROUP}-GPU group measured "
                                               f"(groups {', '.join(sizes)})")}
    last = {op: t["busbw_over_line_rate"][-1] for op, t in groups.items() if t}
    ring_ops = ["all_gather", "reduce_scatter"] + ([] if has_nvls else ["all_reduce"])
    ring = statistics.mean(last[op] for op in ring_ops)
    if ring < SANE_BUS_FRACTION:
        return {"intra_bus_efficiency": (None, f"{doc['gpu']}: left out: {NCCL_GROUP}-GPU ring bus bandwidth "
                                               f"{ring:.3f} of line rate (2 GPUs reach "
                                               f"{nccl['all_reduce']['2']['busbw_over_line_rate'][-1]:.2f}): the "
                                               "measured machine's GPUs do not share one switch")}
    size = groups["all_gather"]["bytes"][-1]
    out = {"intra_bus_efficiency": (ring, f"{doc['gpu']}: {ring:.3f} = mean bus bandwidth / line rate of the "
                                          f"{NCCL_GROUP}-GPU {', '.join(ring_ops)} at {size / 2**20:.0f} MiB; {where}")}
    if has_nvls:
        ar = last["all_reduce"]
        out["nvls_busbw_factor"] = (ar, f"{doc['gpu']}: {ar:.3f} = {NCCL_GROUP}-GPU all-reduce bus bandwidth / line "
                                        f"rate at {size / 2**20:.0f} MiB (NVLink SHARP: above the ring's "
                                        f"{ring:.3f}); {where}")
    return out


def measured_docs() -> Dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(MEASURED_DIR.glob("*.json"))}


def generation_values(generation: str) -> Dict[str, Tuple[float, str]]:
    """parameter -> (value, source) from the measured tables of the generation's GPUs; parameters
    without a usable measurement are absent (the profile keeps its value), each left-out figure
    named in the source of the parameter or in `left_out(generation)`."""
    docs = {gpu: doc for gpu, doc in measured_docs().items() if _generation(gpu) == generation}
    found: Dict[str, List[Tuple[float | None, str]]] = {}
    has_nvls = load_profile(generation).nvls_busbw_factor > 0
    out = {"gemm_k_half": (GEMM_K_HALF, GEMM_K_HALF_SOURCE)}
    for gpu, doc in docs.items():
        for key, dtype in (("gemm_plateau_efficiency", "bf16"), ("gemm_fp8_plateau_efficiency", "fp8"),
                           ("gemm_fp4_plateau_efficiency", "nvfp4")):
            got = gemm_plateau(doc, dtype, generation, GEMM_K_HALF)
            if got:
                found.setdefault(key, []).append(got)
        stream = weight_stream(doc)
        if stream:
            found.setdefault("hbm_efficiency", []).append((stream[0], stream[2]))
        for precision, dtype in (("fp8", "fp8"), ("fp4", "nvfp4")):
            # (a GPU whose batch-1 GEMMs read their weights from L2 is left out: hbm_efficiency above)
            terms = quantized_gemm_terms(doc, dtype, generation) if stream and stream[0] else None
            if terms:
                found.setdefault(f"gemm_{precision}_fixed_s", []).append((terms[0], terms[2]))
                found.setdefault(f"gemm_{precision}_k_serial_s", []).append((terms[1], terms[2]))
        pre = prefill_fit(doc)
        if pre:
            found.setdefault("attn_prefill_efficiency", []).append((pre[0], pre[2]))
            found.setdefault("attn_prefill_half_seq", []).append((pre[1], pre[2]))
        dec = decode_stream(doc)
        if dec:
            found.setdefault("attn_decode_hbm_efficiency", []).append(dec)
        fixed = decode_fixed(doc, generation)
        if fixed:
            found.setdefault("attn_decode_fixed_s", []).append(fixed)
        for key, got in nccl_figures(doc, has_nvls).items():
            found.setdefault(key, []).append(got)
    for key, figures in found.items():
        used = [(v, how) for v, how in figures if v is not None]
        dropped = [how for v, how in figures if v is None]
        if not used:
            continue
        value = statistics.mean(v for v, _ in used)
        gpus = ", ".join(how.split(":")[0] for _, how in used)
        source = (f"measured operators (issue 27; benchmarks/measured_operator_values.py), mean over {gpus}: "
                  + " | ".join(how for _, how in used))
        if dropped:
            source += " | " + " | ".join(dropped)
        out[key] = (float(f"{value:.4g}"), source)
    out.update(moe_shares(generation, docs, out))
    for key in NOT_APPLIED.keys() & out.keys():  # shipped as 0, the fitted figure in the source
        value, source = out[key]
        out[key] = (0.0, f"0, not applied: fitted {value:.4g} ({NOT_APPLIED[key]}); {source}")
    return out


def moe_shares(generation: str, docs: Dict[str, dict], values: Dict[str, Tuple[float, str]]
               ) -> Dict[str, Tuple[float, str]]:
    """moe_gemm_share / moe_gemm_fp8_share / moe_gemm_fp4_share: each GPU's `moe_unit_ratios` over the
    precision's plateau (the measured one just read, else the profile's: calibrated.py `gemm_plateau`),
    capped at 1; the mean over the generation's GPUs."""
    from llm_analysis.cost.calibrated import PLATEAU_KEYS, gemm_plateau, moe_share_key
    plateaus = {**load_profile(generation).values, **{k: v for k, (v, _) in values.items()}}
    found: Dict[str, List[Tuple[float, str]]] = {}
    for doc in docs.values():
        for kernels in MOE_TABLE_KEYS:
            for precision, (r, how) in moe_unit_ratios(doc, generation, GEMM_K_HALF, kernels).items():
                plateau = gemm_plateau(plateaus, precision)
                share = min(1.0, r / plateau)
                found.setdefault(moe_share_key(precision, kernels), []).append(
                    (share, f"{how}; over the {PLATEAU_KEYS[precision]} {plateau:.4g}: {share:.3f}"
                            + (" (capped at 1)" if r > plateau else "")))
    out = {}
    for key, figures in found.items():
        value = statistics.mean(v for v, _ in figures)
        out[key] = (float(f"{value:.4g}"), "measured fused MoE layers (benchmarks/measured_operator_values.py), mean "
                    f"over {', '.join(how.split(' ')[0] for _, how in figures)}: " + " | ".join(h for _, h in figures))
    return out


def left_out(generation: str) -> List[str]:
    """Figures of the generation's GPUs left out, for parameters no GPU could give."""
    values = generation_values(generation)
    notes = []
    docs = {gpu: doc for gpu, doc in measured_docs().items() if _generation(gpu) == generation}
    has_nvls = load_profile(generation).nvls_busbw_factor > 0
    for gpu, doc in docs.items():
        dec = decode_stream(doc)
        if dec and dec[0] is None and "attn_decode_hbm_efficiency" not in values:
            notes.append(("attn_decode_hbm_efficiency", dec[1]))
        stream = weight_stream(doc)
        if stream and stream[0] is None and "hbm_efficiency" not in values:
            notes.append(("hbm_efficiency", stream[2]))
        for key, got in nccl_figures(doc, has_nvls).items():
            if got[0] is None and key not in values:
                notes.append((key, got[1]))
    return notes


def _generation(gpu: str) -> str:
    try:
        return generation_of(gpu)
    except Exception:  # noqa: BLE001 (a measured GPU no profile lists: nothing to put it in)
        return ""


# the keys `--write` puts into the profiles (the others: benchmarks/fit_profiles.py --operators --write)
QUANTIZED_GEMM_KEYS = ("gemm_fp8_fixed_s", "gemm_fp4_fixed_s", "gemm_fp8_k_serial_s", "gemm_fp4_k_serial_s")
WRITTEN_KEYS = (*QUANTIZED_GEMM_KEYS, "gemm_fp4_plateau_efficiency", "attn_decode_fixed_s",
                "moe_gemm_share", "moe_gemm_fp8_share", "moe_gemm_fp4_share",
                *(f"{key}_{family}" for family in MOE_KERNEL_FAMILIES
                  for key in ("moe_gemm_share", "moe_gemm_fp8_share", "moe_gemm_fp4_share")))


def write_operator_values() -> None:
    """The FP4 plateau, the quantized linears' terms, the decode attention's fixed part and the MoE shares
    into the generations' profiles (only those keys)."""
    for gen in sorted({_generation(g) for g in measured_docs()} - {""}):
        path = PROFILE_DIR / f"{gen}.json"
        doc = json.loads(path.read_text())
        values = generation_values(gen)
        keys = [k for k in WRITTEN_KEYS if k in values]
        for key in keys:
            doc["parameters"][key] = {"value": values[key][0], "source": values[key][1]}
        if keys:
            doc["parameters"] = dict(sorted(doc["parameters"].items()))
            path.write_text(json.dumps(doc, indent=1) + "\n")
            print(f"wrote {', '.join(keys)} into {path.name}")
    load_profile.cache_clear()


# --knee (round 17, docs/validation.md "a GEMM's knee"): how the model's GEMM time, the longer of its
# compute and streaming times, compares with the measured GEMMs near the ridge, and the exponent p of
# (compute^p + streaming^p)^(1/p) that fits them best. Printed only: held out, the knee made the
# leave-one-source-out figures worse, so no profile takes it.
KNEE_DTYPES = {"bf16": "16-bit", "fp8": "fp8"}  # (NVFP4's fixed part is not applied: left out here)
KNEE_RIDGE_SPAN = 4.0  # cells whose compute and streaming times are within this factor of each other
KNEE_EXPONENTS = tuple(1.0 + 0.25 * i for i in range(21))  # 1 .. 6


def knee_cells(generation: str) -> List[Tuple[float, float, float]]:
    """(measured s, the model's compute s, the model's streaming s) of every measured bf16 and fp8 GEMM
    of a generation's GPUs: compute at the shape's efficiency (gemm.GemmShape at the precision's
    plateau), streaming as calibrated.py times a dense linear ((bytes + h) / (E x HBM spec), plus the
    quantized linear's fixed terms, plus the dynamic scale the measured fp8 GEMMs ran:
    FP8_DYNAMIC_SCALE_S)."""
    from llm_analysis.cost.calibrated import gemm_plateau, quantized_gemm_terms
    from llm_analysis.cost.gemm import GemmShape
    p = load_profile(generation)
    v = p.values
    cells = []
    for gpu, doc in measured_docs().items():
        if _generation(gpu) != generation:
            continue
        rate = get_gpu_config_by_name(doc["gpu"]).hbm_bandwidth_in_GB_per_sec * 1e9 * v["hbm_efficiency"]
        for dtype, precision in KNEE_DTYPES.items():
            table = doc.get("gemm", {}).get(dtype)
            if not table:
                continue
            peak, per_weight = table["peak_tflops"] * 1e12, GEMM_WEIGHT_BYTES[dtype]
            fixed, k_serial = quantized_gemm_terms(v, precision)
            fixed += FP8_DYNAMIC_SCALE_S.get(doc["gpu"], 0.0) if dtype == "fp8" else 0.0
            for (n, k), row in zip(table["n_k"], table["efficiency"]):
                shape = GemmShape(n, k, p, p.num_sms(doc["gpu"]), plateau=gemm_plateau(v, precision),
                                  wave_tail=gemm_wave_tail_for(v, precision))
                for m, e in zip(table["m"], row):
                    if e:
                        nbytes = n * k * per_weight + m * (n + k) * min(2.0, per_weight)
                        stream = max((nbytes + v["hbm_half_saturation_bytes"]) / rate, k_serial * k) + fixed
                        cells.append((2.0 * m * n * k / (e * peak), 2.0 * m * n * k / (peak * shape(m)), stream))
    return cells


def knee_errors(cells, exponent) -> Tuple[float, float]:
    """(rms, mean) of log(model / measured) with the model's time max(c, m) (exponent None) or the p-norm."""
    logs = [math.log((max(c, m) if exponent is None else (c ** exponent + m ** exponent) ** (1.0 / exponent)) / t)
            for t, c, m in cells]
    return math.sqrt(sum(x * x for x in logs) / len(logs)), sum(logs) / len(logs)


def print_knee() -> None:
    for gen in sorted({_generation(g) for g in measured_docs()} - {""}):
        cells = knee_cells(gen)
        near = [c for c in cells if 1.0 / KNEE_RIDGE_SPAN <= c[1] / c[2] <= KNEE_RIDGE_SPAN]
        if not near:
            continue
        best = min(KNEE_EXPONENTS, key=lambda e: knee_errors(near, e)[0])
        print(f"{gen:<16} {len(cells)} GEMMs, {len(near)} near the ridge: max(compute, streaming) rms %.3f "
              "mean %+.3f; p = %.2f: rms %.3f mean %+.3f (all GEMMs: %.3f %+.3f -> %.3f %+.3f)"
              % (*knee_errors(near, None), best, *knee_errors(near, best), *knee_errors(cells, None),
                 *knee_errors(cells, best)))


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write " + ", ".join(WRITTEN_KEYS) + " into the profiles")
    ap.add_argument("--knee", action="store_true", help="print how a GEMM's compute and streaming times combine "
                    "near the ridge on the measured GEMMs (nothing written)")
    ap.add_argument("--moe_by_tokens", action="store_true", help="print the measured fused-MoE ratio (model at "
                    "plateau and share 1 / measured) by tokens per expert, per GPU, kernel family and dtype, over "
                    "the cells the shares are read off")
    args = ap.parse_args(argv)
    if args.moe_by_tokens:
        print_moe_by_tokens()
        return 0
    if args.knee:
        print_knee()
        return 0
    for gen in sorted({_generation(g) for g in measured_docs()} - {""}):
        p = load_profile(gen)
        for key, (value, source) in sorted(generation_values(gen).items()):
            print(f"{gen:<16} {key:<30} {p.values.get(key, math.nan):10.4g} -> {value:10.4g}")
        for key, note in left_out(gen):
            print(f"{gen:<16} {key:<30} kept {p.values[key]:.4g}: {note}")
    if args.write:
        write_operator_values()
    return 0


if __name__ == "__main__":
    sys.exit(main())
