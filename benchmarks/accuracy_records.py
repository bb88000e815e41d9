"""Map validation records onto the public API (used by benchmarks/accuracy.py).

Each `case_*` function turns one record into a `Case`: the measured time in
seconds, and a `run(analysis_kwargs) -> seconds` closure that predicts the
same quantity through `LLMAnalysis(...).inference()` / `.training()`.
Records the public API cannot express raise `Skip` with the reason.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable

from llm_analysis.analysis import ActivationRecomputation, DSZeRO, LLMAnalysis
from llm_analysis.config import (ModelConfig, ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)


class Skip(Exception):
    pass


@dataclass
class Case:
    measured_s: float
    run: Callable[[dict], float]  # analysis kwargs (efficiencies, perf_model) -> predicted seconds
    notes: list = field(default_factory=list)
    # False: scored, never fitted on (a serve() answer: its step times also hang on the engine
    # profiles, fitted on serving rows by benchmarks/fit_engine_profiles.py, not on these records)
    fitted_on: bool = True


# the ZeRO-3 rows of Narayanan et al. 2021 Table 2 ran DeepSpeed, not Megatron-LM: their own family
FAMILIES = (("dgxc-", "NVIDIA dgxc NeMo"), ("ft-", "FasterTransformer"), ("trtllm-", "TensorRT-LLM"), ("mpt-", "MosaicML"),
            ("megatron2021-t2-zero3-", "DeepSpeed ZeRO-3"), ("megatron2021-", "Megatron"), ("korthikanti2022-", "Korthikanti"), ("gptfast-", "gpt-fast"))

# GB200 NVL72: TensorRT-LLM perf-overview prints "GB200 192GB"; the catalogue entry is per GPU of the rack
_GPUS = (("gb200", "gb200-nvl72-186gb"), ("b200", "b200-180gb"), ("h200", "h200-sxm-141gb"), ("h100", "h100-sxm-80gb"),
         ("a100_40gb", "a100-sxm-40gb"), ("a100", "a100-sxm-80gb"), ("l40s", "l40s-48gb"))
_DTYPES = {"fp16": "w16a16e16", "bf16": "w16a16e16", "amp_bf16": "w16a16e16", "fp8": "fp8", "amp_fp8": "fp8",
           # gpt-fast int4 uses group 32; the catalogue's nearest is group 128 (scales 1/32 vs 1/128 B/param)
           "int8 weight-only": "w8a16e16", "int4 weight-only (group 32)": "w4a16e16-g128",
           # TensorRT-LLM's perf-overview "FP4" rows (B200 / GB200, PyTorch backend ~v1.0): assumed NVFP4 weights
           # and activations (W4A4), the FP4 format of Blackwell's tensor cores that TensorRT-LLM quantises to;
           # the rows state a maximum-throughput run, scored by serve()'s saturation rate (case_max_throughput)
           "fp4": "nvfp4"}
# LLaMA-family public shapes: hidden -> (FFN width, vocab); arXiv 2302.13971 / 2307.09288 / 2407.21783
_LLAMA = {(4096, False): (11008, 32000), (5120, False): (13824, 32000), (8192, False): (28672, 32000),
          (4096, True): (14336, 128256), (8192, True): (28672, 128256), (16384, True): (53248, 128256)}


# the families whose records are training steps (the others time inference runs)
TRAINING_FAMILIES = ("NVIDIA dgxc NeMo", "MosaicML", "DeepSpeed ZeRO-3", "Megatron", "Korthikanti")


def family(rid: str) -> str | None:
    return next((name for prefix, name in FAMILIES if rid.startswith(prefix)), None)


def gpu_of(name: str):
    n = name.lower().replace(" ", "_").replace("-", "_")
    for key, gpu in _GPUS:
        if key in n:
            if gpu is None:
                raise Skip(f"GPU {name!r} not in the catalogue")
            return get_gpu_config_by_name(gpu)
    raise Skip(f"GPU {name!r} not in the catalogue")


def dtype_of(setup: dict):
    d = str(setup.get("dtype", setup.get("weights", "fp16"))).lower()
    if d not in _DTYPES:
        raise Skip(f"dtype {d!r} not expressible (no {d} compute in the dtype catalogue)")
    return get_dtype_config_by_name(_DTYPES[d])


def model_of(setup: dict, notes: list) -> ModelConfig:
    if setup.get("model_config"):  # a shipped config named by the record (its dims alone would not say it)
        return get_model_config_by_name(setup["model_config"])
    name = str(setup.get("model", "?"))
    L, h, a = setup["layers"], setup["hidden"], setup["heads"]
    low = name.lower()
    if "llama" in low:
        v3 = bool(re.search(r"llama[ _-]?3", low))
        ffn, vocab = _LLAMA.get((h, v3), (None, None))
        if ffn is None:
            raise Skip(f"no public FFN width for {name} (hidden {h})")
        notes.append(f"LLaMA shapes ffn={ffn} V={vocab}")
        return ModelConfig(name=name, num_layers=L, n_head=a, hidden_dim=h, vocab_size=vocab,
                           num_key_value_heads=setup.get("kv_heads"), ffn_embed_dim=ffn, mlp_gated_linear_units=True,
                           activation="silu", norm_type="rmsnorm", norm_bias=False, position_embedding_type="rotary",
                           tie_word_embeddings=False, hidden_dropout=False)
    if "mpt" in low:  # llm-foundry mpt yamls: ALiBi, no biases, expansion 4
        return ModelConfig(name=name, num_layers=L, n_head=a, hidden_dim=h, vocab_size=setup.get("vocab", 50368),
                           position_embedding_type="alibi", norm_bias=False, hidden_dropout=False)
    vocab = setup.get("vocab") or (50400 if "gpt-j" in low else 51200)
    if "vocab" not in setup:
        notes.append(f"V={vocab} assumed")
    return ModelConfig(name=name, num_layers=L, n_head=a, hidden_dim=h, vocab_size=vocab,
                       num_key_value_heads=setup.get("kv_heads"), qkv_bias=True, attn_out_bias=True, mlp_bias=True,
                       parallel_attn_mlp="gpt-j" in low, position_embedding_type="rotary" if "gpt-j" in low else "learned")


def _int(setup: dict, key: str) -> int:
    v = setup.get(key)
    if not isinstance(v, int) or v < 1:
        raise Skip(f"setup {key}={v!r} is not a count")
    return v


def _launches_eagerly(rec: dict) -> bool:
    """Engines of the records that launch every kernel from C++ on the host, without CUDA graphs
    (timed with the native launch floor, `kernel_launch="native"`, not PyTorch's eager one):
    FasterTransformer (C++, its docs/gpt_guide.md) and TensorRT-LLM's static-batching
    gptSessionBenchmark, which runs GptSession without CUDA graphs unless --enable_cuda_graph is
    passed (github:NVIDIA/TensorRT-LLM benchmarks/cpp/gptSessionBenchmark.cpp, 2023; the
    v0.5/v0.6 performance pages' commands do not pass it): v0.5/v0.6 records, and v0.7-v0.9 ones
    that name the tool (the v0.10 performance page says the tables used static benchmarking up
    to v0.9; which flags v0.7-v0.9 passed is not printed, so the tool's default is assumed)."""
    if rec["id"].startswith("ft-"):
        return True
    fw = str(rec["setup"].get("framework", ""))
    return bool(re.match(r"TensorRT-LLM v0\.[56]\b", fw)) or bool(
        re.match(r"TensorRT-LLM v0\.[789]\b", fw) and "gptSessionBenchmark" in fw)


def _pre_xqa_gqa_decode(rec: dict) -> bool:
    """A GQA model decoding on TensorRT-LLM before v0.8. XQA, the generation kernel that reads each
    K/V head once for its whole query group, came with v0.8; without it Llama-70B (8 KV heads, 64
    query heads) decodes up to 2.4x slower (1,227 vs 2,941 output tok/s/GPU, 1x H200 fp8, 128/2048:
    TensorRT-LLM docs/source/blogs/XQA-kernel.md). How much of the repeated K/V reads the L2 cache
    absorbs is not stated, so these records are not expressible by a decode that reads the cache once."""
    s = rec["setup"]
    old = re.match(r"TensorRT-LLM v0\.[5-7]\b", str(s.get("framework", "")))
    gqa = s.get("kv_heads") is not None and s["kv_heads"] < s.get("heads", 0)
    return bool(old and gqa and s.get("output_len", 1) > 1)


def case_max_throughput(rec: dict) -> Case:
    """TensorRT-LLM's perf-overview rows: `trtllm-bench throughput` sends every request at once
    (an infinite request rate) and reports the output tokens/s of all the run's GPUs. That is the
    engine's saturation throughput: serve() under an open loop above saturation answers the
    saturation request rate (`saturation_request_rate_per_s`, with TensorRT-LLM's engine profile:
    in-flight batching, its token budget and KV pool). Compared as seconds per request
    (output_len / tokens per s, against 1 / the predicted rate); replicas = num_gpus / (tp x pp)."""
    s, m, notes = rec["setup"], rec["measured"], []
    gpu, dtype = gpu_of(s["gpu"]), dtype_of(s)
    model = model_of(s, notes)
    prompt, out = _int(s, "input_len"), _int(s, "output_len")
    tp, pp, n = s.get("tp") or 1, s.get("pp") or 1, _int(s, "num_gpus")
    if n % (tp * pp):
        raise Skip(f"tp*pp = {tp * pp} does not divide num_gpus {n}")
    par = ParallelismConfig(tp_size=tp, pp_size=pp, dp_size=n // (tp * pp))
    measured = out / m["total_output_tokens_per_s"]
    notes.append("saturation throughput of serve(framework='trtllm')")

    def run(kw: dict) -> float:
        # the roofline column is a bound: the engine's host overheads (fitted, not physics) left out
        bound = kw.get("perf_model", "roofline") == "roofline"
        host = dict(step_overhead_s=0.0, step_overhead_per_seq_s=0.0, step_overhead_per_layer_s=0.0) if bound else {}
        res = LLMAnalysis(model, gpu, dtype, par, **kw).serve(request_rate=1e6, input_len=prompt, output_len=out,
                                                             framework="trtllm", **host)
        return 1.0 / res["saturation_request_rate_per_s"]
    return Case(measured, run, notes, fitted_on=False)


def case_inference(rec: dict) -> Case:
    s, m, notes = rec["setup"], rec["measured"], []
    if m.get("oom"):
        raise Skip("measured out of memory: no time")
    if "max throughput" in str(s.get("batch", "")) and "total_output_tokens_per_s" in m:
        return case_max_throughput(rec)
    if _pre_xqa_gqa_decode(rec):
        raise Skip("GQA decode on TensorRT-LLM < v0.8 (no XQA kernel; XQA-kernel.md blog: up to 2.4x slower)")
    gpu, dtype = gpu_of(s["gpu"]), dtype_of(s)
    model = model_of(s, notes)
    batch, prompt = _int(s, "batch"), _int(s, "input_len")
    tp, pp = s.get("tp", 1), s.get("pp", 1)
    out = s.get("output_len", 1)
    if "latency_ms" in m:
        key, measured = "total_latency", m["latency_ms"] / 1e3
    elif "first_token_latency_ms" in m:
        key, measured, out = "prefill_latency", m["first_token_latency_ms"] / 1e3, 1
    elif "output_tokens_per_s_per_gpu" in m and "output_len" in s:
        key, measured = "total_latency", batch * out / (m["output_tokens_per_s_per_gpu"] * s["num_gpus"])
    elif "output_tokens_per_s" in m and "output_len" in s and s.get("num_gpus") == 1 and tp * pp == 1:
        # one GPU: the run's output throughput is its per-GPU throughput (either column reading agrees)
        key, measured = "total_latency", batch * out / m["output_tokens_per_s"]
    elif "decode_tokens_per_s" in m:  # gpt-fast: tokens/s per user at batch 1
        key, measured, out = "total_decode_latency", 200 / m["decode_tokens_per_s"], 200
        notes.append("200 decoded tokens assumed (gpt-fast default max_new_tokens)")
    else:
        raise Skip("no per-request time in the record (" + ", ".join(sorted(m)) + ")")
    par = ParallelismConfig(tp_size=tp, pp_size=pp)

    eager = _launches_eagerly(rec)

    def run(kw: dict) -> float:
        if kw.get("perf_model", "roofline") != "roofline" and eager:
            kw = {**kw, "kernel_launch": "native"}
        res = LLMAnalysis(model, gpu, dtype, par, **kw).inference(batch_size_per_gpu=batch, seq_len=prompt,
                                                                  num_tokens_to_generate=out)
        return res[key]
    return Case(measured, run, notes)


# llm-foundry's attention in the MosaicML tables (README @4952183768): the benchmarking script that made
# them, scripts/train/benchmarking/submit_benchmarks.py, defaulted to `--attn_impl triton` from the A100
# tables (@300cc5c58, 2023-05) through the H100 ones (@b2a43a147, 2023-10; @5e85bd62d, 2024-01); the
# tables do not print attn_impl, so the tool's default is assumed (the default became 'flash' later).
# That is FlashAttention in Triton (triton-pre-mlir, built from a branch for sm90: setup.py @b2a43a147),
# which FlashAttention-2 beats by 1.3-2.5x (Dao 2023, arXiv 2307.08691, section 4: 1.3-1.5x forward,
# ~2x backward; A100): TRITON_FLASH_SLOWDOWN, the middle of that range (a training step's attention time
# is mostly backward). On H100, FlashAttention-2, written for Ampere (no WGMMA/TMA), reaches 35% of the
# dense peak (Shah et al. 2024, FlashAttention-3, arXiv 2407.08608, abstract), where the Hopper profile's
# measured Hopper-native kernel (aiconfigurator's TensorRT-LLM tables) reaches 0.56; that the A100 ratio
# carries over to H100 is an assumption. On A100 the records are timed with the Ampere profile's
# measured (FlashAttention-2-class) kernel: stated the same way there, the leave-one-source-out folds
# got worse for every Ampere-trained source (docs/validation.md), so on A100 the MosaicML runs say
# their kernel ran at about FlashAttention-2's rate, and nothing is stated.
FLASH2_ON_HOPPER_EFFICIENCY = 0.35
TRITON_FLASH_SLOWDOWN = 1.9


def _triton_flash_attention_on_hopper(perf_model):
    """The calibrated Hopper profile (or the trial Profile a fit passes) with llm-foundry's Triton flash
    attention: FlashAttention-2's rate on H100 / TRITON_FLASH_SLOWDOWN."""
    from llm_analysis.cost.profiles import Profile, load_profile
    profile = perf_model if isinstance(perf_model, Profile) else load_profile("hopper")
    return profile.with_values({"attn_prefill_efficiency": FLASH2_ON_HOPPER_EFFICIENCY / TRITON_FLASH_SLOWDOWN},
                               "llm-foundry's Triton flash attention on H100: FlashAttention-2's 35% of peak "
                               "(arXiv 2407.08608) / 1.9 (arXiv 2307.08691 section 4)")


def case_mpt(rec: dict) -> Case:
    s, m, notes = rec["setup"], rec["measured"], []
    if s.get("activation_cpu_offload"):
        raise Skip("activation CPU offload: not expressible by the GPU time model")
    gpu, dtype = gpu_of(s["gpu"]), dtype_of(s)
    model = model_of(s, notes)
    n, mb, gbs, seq = s["num_gpus"], s["micro_batch"], s["global_batch"], s["seq_len"]
    measured = gbs * seq / m["tokens_per_s"]
    rc = ActivationRecomputation.FULL if str(s.get("activation_recompute")).startswith("full") \
        else ActivationRecomputation.NONE
    par = ParallelismConfig(dp_size=n)
    from llm_analysis.cost.profiles import generation_of
    hopper = generation_of(gpu.name) == "hopper"
    if hopper:
        notes.append("llm-foundry's Triton flash attention on H100 (the benchmarking script's default attn_impl)")

    def run(kw: dict) -> float:
        if hopper and kw.get("perf_model", "roofline") != "roofline":
            kw = {**kw, "perf_model": _triton_flash_attention_on_hopper(kw["perf_model"])}
        res = LLMAnalysis(model, gpu, dtype, par, **kw).training(
            batch_size_per_gpu=mb, global_batch_size=gbs, seq_len=seq, activation_recomputation=rc,
            ds_zero=DSZeRO.STAGE_3, layernorm_dtype_bytes=2)
        return res["latency_per_iter"]
    return Case(measured, run, notes)


# Korthikanti et al. 2022 (arXiv 2205.05198) Table 3: the interleaved schedule of each model's
# layout, (layers, hidden, tp, pp) -> virtual stages per GPU
_KORTHIKANTI_TABLE3_INTERLEAVE = {(96, 12288, 8, 8): 3, (105, 20480, 8, 35): 3}


def _interleave(rec: dict, model, tp: int, pp: int, notes: list) -> int:
    """The record's interleaving; a Korthikanti §6.3 run that states none (530B with 8-way data
    parallelism: "the same configuration" scaled out) runs its model's Table 3 schedule."""
    v = rec["setup"].get("interleaved_pipeline_stages")
    if v is None and rec["id"].startswith("korthikanti2022-"):
        v = _KORTHIKANTI_TABLE3_INTERLEAVE.get((model.num_layers, model.hidden_dim, tp, pp))
        if v:
            notes.append(f"interleaved schedule v={v} of the paper's Table 3 layout")
    return v or 1


def _tp_overlap(rec: dict):
    """The TP overlap of the Megatron-LM code a record ran (training/overheads_tp.py): the
    async backward reductions exist from github:NVIDIA/Megatron-LM 16c90445e7 (2021-09-02) on,
    after Narayanan et al. (arXiv 2104.04473, 2021-04) and before Korthikanti et al. (2022-05)."""
    return "backward" if rec["id"].startswith("korthikanti2022-") else False


def case_megatron(rec: dict, zero3_terms: dict | None = None) -> Case:
    """Megatron (arXiv 2104.04473) and Korthikanti (arXiv 2205.05198) training records, rebuilt with the
    shapes/layout rules of benchmarks/training_validation.py. Time: the reported iteration time, or the
    one the paper's eq. 3 implies from its measured TFLOP/s per GPU. `zero3_terms`: the DeepSpeed
    ZeRO-3 family's terms to use instead of framework_terms.json's (fit_framework_terms.py's trials)."""
    import training_validation as tv  # benchmarks/ is on sys.path when accuracy.py runs
    s, m, notes = rec["setup"], rec["measured"], []
    try:
        gpu, model = tv._gpu(s.get("gpu", "?")), tv._model(s, notes)
        tp, pp, dp = tv._layout(s, model, notes)
    except (tv.Skip, KeyError) as e:
        raise Skip(str(e)) from None
    seq, gbs = s.get("seq_len", 2048), s.get("global_batch")
    if gbs is None:
        raise Skip("no global batch")
    if "iteration_time_s" in m:
        measured = m["iteration_time_s"]
    elif "achieved_tflops_per_gpu" in m and "96*B*s*l*h^2" in rec.get("notes", ""):
        B, L, h, V = gbs, model.num_layers, model.hidden_dim, model.vocab_size
        flops = 96 * B * seq * L * h * h * (1 + seq / (6 * h) + V / (16 * L * h))  # paper eq. 3
        measured = flops / (tp * pp * dp * m["achieved_tflops_per_gpu"] * 1e12)
        notes.append("time implied by eq. 3 and the measured TFLOP/s")
    elif "training_days_300b_tokens" in m:  # Narayanan et al. 2021 Table 2: days for 300 B tokens
        measured = m["training_days_300b_tokens"] * 86400 * gbs * seq / 300e9
        notes.append("iteration time implied by the reported days for 300 B tokens")
    else:
        raise Skip("reports no iteration time (" + ", ".join(sorted(m)) + ")")
    mb = s.get("micro_batch", 1) if (gbs // dp) % s.get("micro_batch", 1) == 0 else 1
    par = ParallelismConfig(tp_size=tp, pp_size=pp, dp_size=dp, sp_size=tp if s.get("sequence_parallel") else 1)
    kw_train = dict(batch_size_per_gpu=mb, global_batch_size=gbs - gbs % dp, seq_len=seq,
                    activation_recomputation=tv._recompute(s, rec["id"]), ds_zero=DSZeRO(s.get("zero_stage", 0)),
                    pipeline_interleave=_interleave(rec, model, tp, pp, notes), layernorm_dtype_bytes=2,
                    # Megatron-LM of these papers (DDP_impl 'local', the default) all-reduces the gradients
                    # after forward_backward_func returns, in train_step: in series with the backward
                    # (overlap_grad_reduce came with Megatron-Core's DDP, 2023)
                    overlap_dp_comm=False,
                    # Korthikanti et al. 2022 ran Megatron-LM with the async TP all-reduce (from 2021-09,
                    # on by default) and, with sequence parallelism, the async reduce-scatter: backward
                    # input-gradient reductions under the weight-gradient GEMMs (training/overheads_tp.py);
                    # Narayanan et al. 2021 ran before it (every TP collective exposed)
                    overlap_tp_comm=_tp_overlap(rec))

    fw = (zero3_terms or _deepspeed_zero3_terms()) if family(rec["id"]) == "DeepSpeed ZeRO-3" else {}
    if fw:
        notes.append("DeepSpeed v0.3 ZeRO-3 terms (benchmarks/framework_terms.json)")
        kw_train.update(overlap_dp_comm=fw["overlap_dp_comm"], zero3_recompute_gather=fw["zero3_recompute_gather"])

    def run(kw: dict) -> float:
        train = kw_train
        if fw and kw.get("perf_model", "roofline") != "roofline":  # the rate cap is an inefficiency: not in the bound
            train = dict(kw_train, zero3_gather_bytes_per_s=fw["zero3_gather_bytes_per_s"])
        return LLMAnalysis(model, gpu, parallelism_config=par, **kw).training(**train)["latency_per_iter"]
    return Case(measured, run, notes)


FRAMEWORK_TERMS = Path(__file__).resolve().parent / "framework_terms.json"


def _deepspeed_zero3_terms(path: Path = FRAMEWORK_TERMS) -> dict:
    """The ZeRO-3 traffic terms (llm_analysis/training/zero3.py) of DeepSpeed v0.3 as the
    ZeRO-3 rows of Narayanan et al. 2021 Table 2 ran it: name -> value, from
    framework_terms.json (its sources and the fit that set them: fit_framework_terms.py)."""
    terms = json.loads(path.read_text())["deepspeed-0.3-zero3"]
    return {name: entry["value"] for name, entry in terms.items()}


def _nemotron4(setup: dict, notes: list) -> ModelConfig:
    """Nemotron-4 (arXiv 2402.16819 Table 1 / 2406.11704): GQA with 8 KV heads, rotary, no biases,
    a non-gated 4h MLP (squared ReLU; timed as any elementwise activation), vocabulary 256,000."""
    h = setup["hidden"]
    notes.append("Nemotron-4 shapes ffn=4h V=256000")
    return ModelConfig(name=str(setup["model"]), num_layers=setup["layers"], n_head=setup["heads"], hidden_dim=h,
                       num_key_value_heads=setup.get("kv_heads"), vocab_size=256000, ffn_embed_dim=4 * h,
                       position_embedding_type="rotary", norm_bias=False, tie_word_embeddings=False,
                       hidden_dropout=False)


def case_dgxc(rec: dict) -> Case:
    """NVIDIA dgxc-benchmarking NeMo recipes (Megatron-Core): the measured step time of the stated
    layout. NeMo's performance recipes run the distributed optimizer with fp32 gradient reduction,
    overlap the gradient reduce-scatter and parameter all-gather with compute
    (overlap_grad_reduce / overlap_param_gather) and the TP collectives with the GEMMs
    (tp_comm_overlap, userbuffers); sequence parallelism whenever tp > 1. Megatron-Core's
    TransformerEngine layers pass `is_first_microbatch`, so FP8 runs cast each weight once per
    iteration (`fp8_weight_cast_per_iteration`, training/fp8_casts.py). JAX (MaxText / Paxml)
    rows state no Megatron layout and are skipped."""
    s, notes = rec["setup"], []
    if s.get("tp") is None or "step_time_s" not in rec["measured"]:
        raise Skip("JAX FSDP recipe (MaxText / Paxml): no tensor/pipeline layout stated")
    for k in ("layers", "hidden", "heads"):
        if k not in s:
            raise Skip(f"no model shapes ({k} missing)")
    name = str(s.get("model", "")).lower()
    model = _nemotron4(s, notes) if "nemotron" in name else model_of(s, notes)
    gpu, dtype = gpu_of(s["gpu"]), dtype_of(s)
    tp, pp, cp, n = s["tp"], s.get("pp") or 1, s.get("cp") or 1, _int(s, "num_gpus")
    if n % (tp * pp * cp):
        raise Skip(f"tp*pp*cp = {tp * pp * cp} does not divide num_gpus {n}")
    dp = n // (tp * pp * cp)
    gbs, mb = _int(s, "global_batch"), _int(s, "micro_batch")
    if gbs % (dp * mb):
        raise Skip(f"global batch {gbs} is not a multiple of dp x micro-batch = {dp * mb}")
    vp = s.get("vp") or 1
    # NeMo's Llama 3.1 405B recipes (126 layers over pp 8 x vp 8) count the embedding and the loss as one layer
    # each in the pipeline split (Megatron-Core's account_for_embedding/loss_in_pipeline_split: NVIDIA/cloudai
    # src/cloudai/workloads/nemo_run/cloudai_nemorun.py, cloudai_llama3_405b_recipe, Apache-2.0): a layout
    # whose layers alone do not split into pp x vp chunks, and do with those two slots, ran so
    accounted = {}
    if (s["layers"] % (pp * vp) and pp > 1 and (s["layers"] + 2) % pp == 0
            and ((s["layers"] + 2) // pp) % vp == 0):
        accounted = dict(account_for_embedding_in_pipeline_split=True, account_for_loss_in_pipeline_split=True)
        notes.append("embedding and loss each take a layer's slot in the pipeline split (NeMo's 405B recipe)")
    par = ParallelismConfig(tp_size=tp, pp_size=pp, dp_size=dp, cp_size=cp, sp_size=tp, **accounted)
    kw_train = dict(batch_size_per_gpu=mb, global_batch_size=gbs, seq_len=_int(s, "seq_len"),
                    pipeline_interleave=vp, layernorm_dtype_bytes=2,
                    activation_recomputation=ActivationRecomputation.NONE, distributed_optimizer=True,
                    grad_reduce_in_fp32=True, overlap_dp_comm=True, overlap_tp_comm=True,
                    fp8_weight_cast_per_iteration=True)

    def run(kw: dict) -> float:
        return LLMAnalysis(model, gpu, dtype, par, **kw).training(**kw_train)["latency_per_iter"]
    return Case(rec["measured"]["step_time_s"], run, notes)


def case_of(rec: dict) -> Case:
    fam = family(rec["id"])
    if fam in ("FasterTransformer", "TensorRT-LLM", "gpt-fast"):
        return case_inference(rec)
    if fam == "MosaicML":
        return case_mpt(rec)
    if fam == "NVIDIA dgxc NeMo":
        return case_dgxc(rec)
    return case_megatron(rec)


# ------------------------------------------------------------------ memory
# What each framework of the training records runs, as the memory terms of
# llm_analysis/training/overheads.py (every record also gets the CUDA context
# and a fragmentation allowance: OVERHEADS).
OVERHEADS = dict(cuda_context_bytes=1e9, memory_fragmentation=0.05)
_FRAMEWORK = {
    # Megatron-Core r0.8 weak scaling: --overlap-param-gather exists only with the distributed
    # optimizer; --tp-comm-overlap needs sequence parallelism; bf16 keeps fp32 main grads
    "mcore-": dict(distributed_optimizer=True, grad_reduce_in_fp32=True),
    # Megatron-DeepSpeed bf16 (BLOOM): DeepSpeed's BF16_Optimizer accumulates gradients in fp32
    "bloom-": dict(grad_reduce_in_fp32=True),
    # NVIDIA dgxc-benchmarking NeMo recipes (NeMo 24.x on Megatron-Core): the distributed optimizer
    # (NeMo's distributed_fused_adam) and fp32 gradient reduction, as the Megatron-Core rows
    "dgxc-": dict(distributed_optimizer=True, grad_reduce_in_fp32=True),
}


@dataclass
class TrainingSetup:
    model: ModelConfig
    gpu: object
    dtype: object
    par: ParallelismConfig
    train_kw: dict
    notes: list = field(default_factory=list)

    def analysis(self, **kw) -> LLMAnalysis:
        return LLMAnalysis(self.model, self.gpu, self.dtype, self.par, **kw)


def _mpt_setup(rec: dict) -> TrainingSetup:
    s, notes = rec["setup"], []
    if s.get("activation_cpu_offload"):
        raise Skip("activation CPU offload: not expressible")
    rc = ActivationRecomputation.FULL if str(s.get("activation_recompute")).startswith("full") \
        else ActivationRecomputation.NONE
    kw = dict(batch_size_per_gpu=s["micro_batch"], global_batch_size=s["global_batch"], seq_len=s["seq_len"],
              activation_recomputation=rc, ds_zero=DSZeRO.STAGE_3, layernorm_dtype_bytes=2)
    return TrainingSetup(model_of(s, notes), gpu_of(s["gpu"]), dtype_of(s), ParallelismConfig(dp_size=s["num_gpus"]),
                         kw, notes)


def _global_batch(s: dict, dp: int, notes: list) -> int:
    if s.get("global_batch"):
        return s["global_batch"]
    if s.get("batch_per_dp"):
        return s["batch_per_dp"] * dp
    if s.get("layers") == 1 and s.get("micro_batch"):  # one-layer timing runs: one micro-batch per rank
        return s["micro_batch"] * dp
    raise Skip("no global batch")


def _llama3_stage_layers(rid: str, num_layers: int, pp: int, notes: list) -> dict:
    """Llama 3 405B (arXiv 2407.21783 §3.3.2): the first and the last pipeline stage
    hold one layer fewer than the others, balancing the embedding and the head (and
    the first stage's 1F1B micro-batches in flight): 126 layers over 16 stages are
    7, 14 x 8, 7."""
    if not rid.startswith("llama3-405b") or pp < 3 or (num_layers + 2) % pp:
        return {}
    per = (num_layers + 2) // pp
    notes.append(f"pipeline stages {per - 1}, {pp - 2} x {per}, {per - 1} layers")
    return dict(num_layers_in_first_pipeline_stage=per - 1, num_layers_in_last_pipeline_stage=per - 1)


def _megatron_style_setup(rec: dict) -> TrainingSetup:
    import training_validation as tv
    s, notes = rec["setup"], []
    if s.get("tp") is None and s.get("model_parallel_size") is None:
        raise Skip("no layout stated")
    if "llama" in str(s.get("model", "")).lower():
        model = model_of(s, notes)
    else:
        model = tv._model(s, notes)
    try:
        gpu = tv._gpu(s.get("gpu", "?"))
    except tv.Skip as e:  # a GPU the Megatron-era shapes table does not name (GB200 NVL72, ...)
        raise Skip(str(e)) from e
    cp = s.get("cp", 1)
    tp = s.get("tp") or min(s["model_parallel_size"], 8)
    pp = s.get("pp") or s.get("model_parallel_size", tp) // tp
    n = s.get("num_gpus")
    if not isinstance(n, int):
        raise Skip("no GPU count")
    dp = s.get("dp") or n // (tp * cp * pp)
    if tp * cp * pp * dp != n and n % (tp * cp * pp) == 0:
        # llama3 row 3: transcriptions print dp 4 or 8; 8 x 16 x 16 x 8 = 16384 GPUs
        notes.append(f"dp = {n // (tp * cp * pp)} from the GPU count (record says {dp})")
        dp = n // (tp * cp * pp)
    if tp * cp * pp * dp != n:
        raise Skip(f"tp*cp*pp*dp = {tp * cp * pp * dp} != num_gpus {n}")
    gbs = _global_batch(s, dp, notes)
    mb = s.get("micro_batch", 1) if (gbs // dp) % s.get("micro_batch", 1) == 0 else 1
    # NeMo recipes (dgxc-) switch sequence parallelism on whenever tp > 1
    sp = (rec["id"].startswith(("mcore-", "dgxc-")) or bool(s.get("sequence_parallel"))
          or "llama3" in rec["id"])
    par = ParallelismConfig(tp_size=tp, pp_size=pp, dp_size=dp, cp_size=cp, sp_size=tp if sp else 1,
                            **_llama3_stage_layers(rec["id"], model.num_layers, pp, notes))
    kw = dict(batch_size_per_gpu=mb, global_batch_size=gbs - gbs % (dp * mb), seq_len=s.get("seq_len", 2048),
              activation_recomputation=tv._recompute(s, rec["id"]), ds_zero=DSZeRO(s.get("zero_stage", 0)),
              pipeline_interleave=s.get("interleaved_pipeline_stages", s.get("vp", 1)), layernorm_dtype_bytes=2)
    if "llama3" in rec["id"]:
        # Llama 3 (arXiv 2407.21783 §3.3.2): FSDP sharding optimizer states and gradients (ZeRO-2)
        kw["ds_zero"] = DSZeRO.STAGE_2
    for prefix, fw in _FRAMEWORK.items():
        if rec["id"].startswith(prefix):
            kw.update(fw)
    return TrainingSetup(model, gpu, get_dtype_config_by_name("w16a16e16"), par, kw, notes)


def training_setup(rec: dict) -> TrainingSetup:
    """The model, GPU, layout and training() arguments of a training record that
    ran (any record with a stated layout and batch), with its framework's memory
    terms (_FRAMEWORK) and OVERHEADS; Skip with the reason otherwise."""
    if rec.get("kind") != "training":
        raise Skip("not a training record")
    setup = _mpt_setup(rec) if family(rec["id"]) == "MosaicML" else _megatron_style_setup(rec)
    setup.train_kw.update(OVERHEADS)
    return setup
