"""MoE expert GEMMs and FP4 GEMMs in the calibrated cost model (issues 25-27: the prefill of MoE
and FP4 models at thousands of tokens).

Rules checked, each by hand or against the measured tables (llm_analysis/cost/profiles/measured/:
TensorRT-LLM GEMMs and vLLM fused-MoE layers timed by ai-dynamo/aiconfigurator, Apache-2.0), never
against the model's own output:
- a routed-expert matmul of M token-expert pairs over E local experts runs as a grouped GEMM of
  M / A tokens per expert, A = E (1 - (1 - 1/E)^M) the experts the pairs reach, at that shape's
  efficiency times the profile's grouped-GEMM share of the precision;
- FP4 GEMMs run at their own plateau (`gemm_fp4_plateau_efficiency`), and the attention core of
  an FP4 model at the 16-bit peak;
- the roofline (efficiency 1) stays below every measured MoE layer and FP4 GEMM.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from types import SimpleNamespace

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.cost import gemm
from llm_analysis.cost.calibrated import CalibratedCostModel
from llm_analysis.cost.profiles import profile_for_gpu
from llm_analysis.quantities.phases import make_phase

MEASURED = Path(__file__).resolve().parents[2] / "llm_analysis" / "cost" / "profiles" / "measured"


def _table(gpu):
    return json.loads((MEASURED / f"{gpu}.json").read_text())


def _model(gpu_name, dtype_name, profile=None, tp=1):
    gpu = get_gpu_config_by_name(gpu_name)
    return CalibratedCostModel(gpu, get_dtype_config_by_name(dtype_name), ParallelismConfig(tp_size=tp),
                               profile or profile_for_gpu(gpu))


def _routed(m, n, k, local_experts):
    """A routed-expert matmul as the describer builds it: M pairs, one expert's weight (N, K), the GPU's
    experts' parameters; FLOPs 2 M N K, bytes: the reached experts' fp8 weights (small next to the compute)."""
    return SimpleNamespace(kind="matmul", expert_role="routed", kernel_dims=(m, n, k), params_per_gpu=local_experts * n * k,
                           flops_per_gpu=2.0 * m * n * k, bytes_per_gpu=float(n * k), kv_cache_bytes_read_per_gpu=0.0)


def test_routed_expert_gemm_is_read_at_tokens_per_expert():
    """MiniMax-M2.5's experts (256 of them, top-8, hidden 3072, expert width 1536; tp 2: N = 768) at an
    8,192-token prefill on B200 in fp8: M = 8192 x 8 = 65,536 pairs reach all 256 experts
    (A = 256 (1 - (255/256)^65536) = 256 to 1e-100), 256 tokens each; the compute time is the FLOPs
    over the fp8 peak x the efficiency of a (256, 768, 3072) GEMM x moe_gemm_fp8_share."""
    cm = _model("b200-180gb", "fp8")
    p, gpu = cm.profile, cm.gpu
    op = _routed(65536, 768, 3072, 256)
    compute_s, memory_s = cm.op_kernel_split_s(op, op.flops_per_gpu, op.bytes_per_gpu, 0.0)
    eff = gemm.gemm_efficiency(256, 768, 3072, p, p.num_sms(gpu.name), fp8=True) * p.values["moe_gemm_fp8_share"]
    assert memory_s == 0.0
    assert compute_s == pytest.approx(op.flops_per_gpu / (gpu.peak_fp8_TFLOPS * 1e12 * eff), rel=1e-12)
    # not the dense GEMM of all 65,536 rows (the rule before: faster)
    dense = gemm.gemm_efficiency(65536, 768, 3072, p, p.num_sms(gpu.name), fp8=True)
    assert compute_s > 1.2 * op.flops_per_gpu / (gpu.peak_fp8_TFLOPS * 1e12 * dense)


@pytest.mark.parametrize("pairs,local,per_expert,sms", [
    (4, 256, 4 / 3.977, 33),    # A = 256 (1 - (255/256)^4) = 3.977: 1.006 tokens each; 132 / 3.977 -> 33 SMs
    (256, 256, 256 / 161.9, 1),  # A = 256 (1 - (255/256)^256) = 161.9: 1.58 tokens each; 132 / 161.9 -> 1 SM
    (1024, 32, 32, 4),          # A = 32 (1 - (31/32)^1024) = 32.0: 32; 132 / 32 -> 4 SMs
    (300, 1, 300, 132),         # one local expert takes every pair (>= 64 tokens: the whole GPU)
])
def test_tokens_per_expert_follow_uniform_routing(pairs, local, per_expert, sms):
    """M / A with A = E (1 - (1 - 1/E)^M) tokens per reached expert on average (the values in the parameters,
    worked by hand to 4 digits): floor(M / A) tokens for some experts, one more for the rest, their GEMMs'
    times summed; each at the dense GEMM's efficiency at its M times the share; below 64 tokens per expert
    (calibrated.py GROUPED_TILE_TOKENS) that GEMM runs on the expert's share of H100's 132 SMs, 132 / A rounded
    (the reached experts' tiles side by side)."""
    cm = _model("h100-sxm-80gb", "w16a16e16")
    p = cm.profile

    def eff(tokens):
        return gemm.gemm_efficiency(tokens, 4096, 4096, p, sms)

    low = math.floor(per_expert + 1e-3)  # (the parameters' 4 digits)
    high_share = max(0.0, per_expert - low)
    # seconds of the group per expert, in units of one token's FLOPs at the peak: tokens / efficiency
    want = per_expert / ((1 - high_share) * low / eff(low) + high_share * (low + 1) / eff(low + 1))
    got = cm.routed_expert_eff(_routed(pairs, 4096, 4096, local), (pairs, 4096, 4096))
    assert got == pytest.approx(want * p.values["moe_gemm_share"], rel=1e-3)


@pytest.mark.parametrize("pairs", range(100, 141, 4))
def test_experts_within_one_row_of_tiles_cost_one_row_each(pairs):
    """gpt-oss-120b's experts on one H100 (128 local experts of (2880, 2880)), 100-140 token-expert pairs of a
    decode step: A = 128 (1 - (127/128)^M) experts reached (70-86), 1.4-1.6 tokens each. While every expert's
    tokens fit one row of tiles (efficiency proportional to the tokens up to 16 rows, the shortest tile) each
    expert's GEMM costs one row of tiles whatever its tokens, so the group's compute time is A GEMMs of one
    token: efficiency (M / A) x that of a one-token GEMM on the expert's SMs x the share. Rounding M / A to
    whole tokens made it a sawtooth (1.49 tokens each timed as 1.49 GEMMs, 1.5 as 0.75: a third less time for
    one more pair)."""
    cm = _model("h100-sxm-80gb", "w16a16e16")
    p = cm.profile
    experts, n, k = 128, 2880, 2880
    reached = experts * (1 - (1 - 1 / experts) ** pairs)
    sms = max(1, round(132 / reached))
    one_token = gemm.gemm_efficiency(1, n, k, p, sms)
    got = cm.routed_expert_eff(_routed(pairs, n, k, experts), (pairs, n, k))
    assert got == pytest.approx(pairs / reached * one_token * p.values["moe_gemm_share"], rel=1e-9)


def test_the_grouped_gemm_share_scales_compute_only():
    """Halving the share doubles a compute-bound expert GEMM's time; the streaming time stays."""
    gpu = get_gpu_config_by_name("h200-sxm-141gb")
    base = profile_for_gpu(gpu)
    half = base.with_values({"moe_gemm_share": base.values["moe_gemm_share"] / 2}, "half share")
    op = _routed(65536, 2048, 4096, 128)
    full_c, _ = _model("h200-sxm-141gb", "w16a16e16", base).op_kernel_split_s(op, op.flops_per_gpu, 0.0, 0.0)
    half_c, _ = _model("h200-sxm-141gb", "w16a16e16", half).op_kernel_split_s(op, op.flops_per_gpu, 0.0, 0.0)
    assert half_c == pytest.approx(2 * full_c, rel=1e-12)
    mem_op = _routed(1, 2048, 4096, 128)  # one pair: weights of one expert streamed, no compute to speak of
    a = _model("h200-sxm-141gb", "w16a16e16", base).op_kernel_split_s(mem_op, mem_op.flops_per_gpu, 64e6, 0.0)
    b = _model("h200-sxm-141gb", "w16a16e16", half).op_kernel_split_s(mem_op, mem_op.flops_per_gpu, 64e6, 0.0)
    assert a == b and a[0] == 0.0


def test_fp4_gemms_run_at_the_fp4_plateau_and_attention_at_the_16_bit_peak():
    """NVFP4 on B200: a large GEMM's rate is the FP4 peak x gemm_fp4_plateau_efficiency; the
    attention core's compute is its FLOPs over the 16-bit peak x the flash efficiency at its length."""
    cm = _model("b200-180gb", "nvfp4")
    gpu, v = cm.gpu, cm.profile.values
    assert cm.flops_per_s == pytest.approx(gpu.peak_fp4_TFLOPS * 1e12 * v["gemm_fp4_plateau_efficiency"], rel=1e-12)
    assert v["gemm_fp4_plateau_efficiency"] < v["gemm_plateau_efficiency"]
    q, flops = 8192, 4.0e12
    attn = SimpleNamespace(kind="attention", kernel_dims=(q,))
    compute_s, _ = cm.op_kernel_split_s(attn, flops, 1e6, 0.0)
    eff = v["attn_prefill_efficiency"] * q / (q + v["attn_prefill_half_seq"])
    assert compute_s == pytest.approx(flops / (gpu.peak_fp16_TFLOPS * 1e12 * eff), rel=1e-12)


@pytest.mark.parametrize("gpu", ["b200-180gb", "b300-270gb"])
def test_compute_bound_nvfp4_gemms_are_timed_as_measured(gpu):
    """Every measured NVFP4 GEMM with M >= 4096: the model's time within 15% of the measured one at the
    median, 50% at worst (one plateau per generation: B300's (4096, 4096) GEMMs reach 0.19-0.24 of the
    FP4 peak where its larger shapes reach 0.29-0.36; the largest (65536, 51200) shape falls to 0.35
    at M >= 8192 on B200 where the others hold 0.37-0.45). With the 16-bit plateau (the rule before)
    the median was about 45% fast."""
    t = _table(gpu)["gemm"]["nvfp4"]
    cfg, profile = get_gpu_config_by_name(gpu), profile_for_gpu(gpu)
    sms, peak = profile.num_sms(gpu), t["peak_tflops"] * 1e12
    errors = []
    for row, (n, k) in zip(t["efficiency"], t["n_k"]):
        for m, measured_eff in zip(t["m"], row):
            if measured_eff and m >= 4096:
                model_s = gemm.gemm_time_s(m, n, k, 0.5625 * (m * k + n * k) + 2 * m * n, peak,
                                           cfg.hbm_bandwidth_in_GB_per_sec * 1e9, profile, sms, fp4=True)
                errors.append(abs(model_s / (2.0 * m * n * k / (measured_eff * peak)) - 1))
    assert statistics.median(errors) <= 0.15 and max(errors) <= 0.50, (statistics.median(errors), max(errors))


# measured MoE dtype -> (the catalogue dtype whose GEMMs run on the same tensor cores, bytes per weight)
_MOE_DTYPES = {"bfloat16": ("w16a16e16", 2.0), "fp8_block": ("fp8", 1.0), "nvfp4": ("nvfp4", 0.5625)}


@pytest.mark.parametrize("gpu,moe_dtype", [("h200-sxm-141gb", "bfloat16"), ("h200-sxm-141gb", "fp8_block"),
                                           ("b200-180gb", "fp8_block"), ("b200-180gb", "nvfp4"),
                                           ("b300-270gb", "nvfp4")])
def test_compute_bound_fused_moe_layers_are_timed_as_measured(gpu, moe_dtype):
    """The measured fused MoE layers (vLLM, power-law routing) with >= 256 tokens per expert: the
    three expert GEMMs (gate and up: N = intermediate / moe_tp, K = hidden; down: N = hidden,
    K = intermediate / moe_tp) as the model times them, within 30% of the measured layer at the
    median. With dense GEMMs of all the pairs (the rule before) the model was 2-3x fast here."""
    t = _table(gpu)["moe"][moe_dtype]
    dtype_name, weight_bytes = _MOE_DTYPES[moe_dtype]
    cm = _model(gpu, dtype_name)
    log_errors = []
    for (hidden, inter, top_k, experts, moe_tp), row in zip(t["shapes"], t["latency_ms"]):
        f = inter // moe_tp
        for tokens, ms in zip(t["num_tokens"], row):
            if not ms or tokens * top_k < 256 * experts:
                continue
            model_s = 0.0
            for n, k in ((f, hidden), (f, hidden), (hidden, f)):
                op = _routed(tokens * top_k, n, k, experts)
                model_s += sum(cm.op_kernel_split_s(op, op.flops_per_gpu, experts * n * k * weight_bytes, 0.0))
            log_errors.append(math.log(model_s / (ms * 1e-3)))
    assert len(log_errors) >= 10
    assert abs(statistics.median(log_errors)) <= math.log(1.3), statistics.median(log_errors)


@pytest.mark.parametrize("gpu", ["h100-sxm-80gb", "h200-sxm-141gb", "b200-180gb", "b300-270gb"])
def test_the_roofline_stays_below_every_measured_moe_layer_and_fp4_gemm(gpu):
    """Roofline at efficiency 1: max(FLOPs / dense peak of the tensor cores, one expert's weight bytes /
    HBM spec) never exceeds a measured fused-MoE layer or NVFP4 GEMM (by
    hand: 2 M N K per GEMM, three GEMMs per expert pass; 4-bit weights at 0.5 bytes, scales left out)."""
    cfg, doc = get_gpu_config_by_name(gpu), _table(gpu)
    hbm = cfg.hbm_bandwidth_in_GB_per_sec * 1e9
    peaks = {"bfloat16": cfg.peak_fp16_TFLOPS, "fp8_block": cfg.peak_fp8_TFLOPS, "fp8": cfg.peak_fp8_TFLOPS,
             "nvfp4": cfg.peak_fp4_TFLOPS, "w4a16_mxfp4": cfg.peak_fp16_TFLOPS, "int4_wo": cfg.peak_fp16_TFLOPS,
             "w4a8_mxfp4_mxfp8": cfg.peak_fp8_TFLOPS}
    byte = {"bfloat16": 2.0, "fp8_block": 1.0, "fp8": 1.0, "nvfp4": 0.5, "w4a16_mxfp4": 0.5, "int4_wo": 0.5,
            "w4a8_mxfp4_mxfp8": 0.5}
    checked = 0
    for dtype, t in doc["moe"].items():
        for (hidden, inter, top_k, experts, moe_tp), row in zip(t["shapes"], t["latency_ms"]):
            for tokens, ms in zip(t["num_tokens"], row):
                if not ms:
                    continue
                pairs = tokens * top_k
                # one expert's weights at least (the measuring harness's power-law router may repeat an
                # expert within a token: some 1-token cells stream 22 "distinct" experts above the HBM spec)
                reached = 1
                flops = 6.0 * pairs * hidden * inter / moe_tp
                bound_s = max(flops / (peaks[dtype] * 1e12), 3.0 * reached * hidden * inter / moe_tp * byte[dtype] / hbm)
                assert bound_s <= ms * 1e-3, (dtype, hidden, inter, top_k, experts, moe_tp, tokens, bound_s, ms)
                checked += 1
    t = doc["gemm"].get("nvfp4")
    if t:
        for row in t["efficiency"]:
            for e in row:
                if e:
                    assert e <= 1.0  # measured FP4 rate / FP4 peak: the roofline (efficiency 1) is below
                    checked += 1
    assert checked > 100


def test_minimax_prefill_routed_experts_on_the_describer_s_operators():
    """On the describer's own operators: MiniMax-M2.5 (256 experts, top-8, hidden 3072, expert width 1536:
    its config.json), fp8 on two B200, one 8,192-token prefill: the gate projection's efficiency is a
    (256, 768, 3072) GEMM's times moe_gemm_fp8_share (the local experts read off its parameters)."""
    gpu = get_gpu_config_by_name("b200-180gb")
    a = LLMAnalysis(get_model_config_by_name("MiniMaxAI/MiniMax-M2.5"), gpu, get_dtype_config_by_name("fp8"),
                    ParallelismConfig(tp_size=2), perf_model="calibrated")
    cm = a.cost_model
    ops = [op for _, op in a.describer.weighted_ops(_prefill_phase(8192)) if op.name == "expert_gate_proj"]
    assert ops and ops[0].kernel_dims[:3] == (65536, 768, 3072)
    p = cm.profile
    want = gemm.gemm_efficiency(256, 768, 3072, p, p.num_sms(gpu.name), fp8=True) * p.values["moe_gemm_fp8_share"]
    assert cm.routed_expert_eff(ops[0], ops[0].kernel_dims) == pytest.approx(want, rel=1e-12)


def _prefill_phase(tokens):
    return make_phase("prefill", 1, tokens, None)
