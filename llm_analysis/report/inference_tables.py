"""The sections of the inference report: setup and request, summary, per layer
part (parameters, prefill and one decode step), memory per GPU."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Set, Tuple

from llm_analysis.report.console import RichReport
from llm_analysis.report.labels import gpu_memory_bytes, params_line, per_replica
from llm_analysis.report.part_tables import params_table, phase_table
from llm_analysis.report.setup_lines import setup_rows
from llm_analysis.report.units import expected_time, fmt, format_bytes, format_count, format_seconds, perf_model_line

_SHOWN_IN_SETUP = ("model_name", "gpu_name", "dtype_name", "tp_size", "pp_size", "dp_size", "ep_size",
                   "flops_efficiency", "hbm_memory_efficiency", "achieved_tflops", "achieved_memory_bandwidth_GBs",
                   "ridge_point_flops_per_byte")
Getter = Callable[..., Any]


def _plural(n, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _image_input(analysis) -> str:
    """What the request holds for a vision-language model's vision tower (model/vision_tower.py)."""
    if analysis.model_config.vision_tower is None:
        return ""
    if not analysis.image_tokens:
        return ", text only (vision tower idle, its weights in memory)"
    return f", {_plural(analysis.image_tokens, 'image token')} of the prompt through the vision tower"


def _setup(rep: RichReport, analysis, get: Getter) -> None:
    b, seq, n = get("batch_size_per_gpu"), get("seq_len"), get("num_tokens_to_generate")
    rep.heading(f"llm-analysis · inference · {analysis.model_config.name} on {analysis.gpu_config.name}")
    rows = setup_rows(analysis)
    rows.append(("request", f"batch {b} {per_replica(analysis)}, prompt {seq} tokens, {_plural(n, 'token')} generated, "
                            f"KV cache {'on' if get('use_kv_cache', True) else 'off'}"
                            + (f", encoder {_plural(analysis.encoder_seq_len, 'position')} cross-attended"
                               if analysis.model_config.cross_attention else "")
                            + _image_input(analysis)))
    if get("perf_model") is not None:
        rows.append(("performance model", perf_model_line(get("perf_model"))))
    rep.key_values(rows)


def _latency_rows(get: Getter, steps: int, n) -> List[Tuple[str, str]]:
    total_p, active_p = get("num_params_total"), get("num_active_params_total")
    rows = [("parameters", params_line(total_p, active_p, get("num_active_params_without_input_embedding"), fmt))]
    def timed(key: str) -> str:
        return expected_time(get(key), get(f"{key}_lower_bound"))
    rows.append(("time to first token", f"{timed('prefill_latency')} (prefill)"))
    for key in ("time_to_first_token", "time_per_output_token", "total_decode_latency"):
        get(key), get(f"{key}_lower_bound")  # the same figures under their serving names
    if steps:
        rows.append(("time per output token",
                     f"{timed('decode_latency')} mean of {steps} decode steps "
                     f"(first {format_seconds(get('decode_first_step_latency'))}, "
                     f"last {format_seconds(get('decode_last_step_latency'))})"))
    else:
        get("decode_latency"), get("decode_first_step_latency"), get("decode_last_step_latency")
    get("total_decode_latency")
    rows.append(("end-to-end latency", f"{timed('total_latency')} for {_plural(n, 'token')} "
                                       f"({format_seconds(get('total_per_token_latency'))} per token)"))
    return rows


_PHASES = (("prefill", "prefill"), ("decode", "decode"), ("end-to-end", "total"))


def _three(get: Getter, key_suffix: str, unit: str) -> str:
    """'prefill X · decode Y · end-to-end Z' of the three summary values `<phase><key_suffix>`."""
    return " · ".join(f"{label} {fmt(unit, get(k + key_suffix))}" for label, k in _PHASES)


def _throughput_rows(get: Getter, used: Set[str]) -> List[Tuple[str, str]]:
    rows = [("throughput", _three(get, "_tokens_per_sec", "tokens_per_sec"))]
    gpus = get("gpus_per_replica", 1)
    if gpus and gpus > 1:
        rows.append(("  per GPU", _three(get, "_tokens_per_sec_per_gpu", "tokens_per_sec")))
    else:
        used.update(f"{k}_tokens_per_sec_per_gpu" for _, k in _PHASES)
    return rows


def _capacity_rows(analysis, s: Dict[str, Any], get: Getter, mem_total: float) -> List[Tuple[str, str]]:
    rows = []
    used_b = get("memory_used_per_gpu")
    if used_b is not None:
        rows.append(("memory per GPU", f"{format_bytes(used_b)} of {format_bytes(mem_total)} "
                                       f"({used_b / mem_total:.0%}), {format_bytes(get('memory_left_per_gpu', 0))} free"))
    kv_room = (f" · KV cache room for {format_count(get('max_batch_total_tokens', 0))} tokens"
               if s.get("use_kv_cache", True) else "")
    rows.append(("largest batch", f"prefill {get('prefill_max_batch_size_per_gpu')} · "
                                  f"decode {get('decode_max_batch_size_per_gpu')} {per_replica(analysis)}{kv_room}"))
    rows.append(("FLOPs", f"prefill {fmt('flops', get('prefill_num_flops_fwd_total'))} · "
                          f"first decode step {fmt('flops', get('decode_num_flops_fwd_total'))}"))
    if "total_cost_per_1k_tokens" in s:
        rows.append(("cost per 1k tokens", _three(get, "_cost_per_1k_tokens", "cost")))
    return rows


def _phases(rep: RichReport, analysis, s: Dict[str, Any], get: Getter, steps: int) -> None:
    rep.heading("Per layer part")
    params_table(rep, analysis)
    b, seq = s.get("batch_size_per_gpu"), s.get("seq_len")
    ridge = s.get("ridge_point_flops_per_byte") or analysis.get_ridge_point()
    prefill = get("prefill_latency_breakdown") or {}
    if prefill:
        rep.console.print()
        phase_table(rep, f"Prefill (time to first token {format_seconds(s.get('prefill_latency', 0))}), "
                         f"{b} x {seq} tokens", prefill,
                    caption=f"bound: compute when FLOPs/byte > ridge point {ridge:.0f}, else memory; "
                            "communication for collectives")
    decode = get("decode_latency_breakdown") or {}
    if decode and steps:
        rep.console.print()
        phase_table(rep, f"Decode, one step (mean of {steps} steps at context {seq + 1}..{seq + steps}): "
                         f"{format_seconds(s.get('decode_latency', 0))}", decode)
    get("kv_cache_latency")


def _memory(rep: RichReport, analysis, s: Dict[str, Any], get: Getter, mem_total: float) -> None:
    rep.heading("Memory per GPU")
    b, seq, n = s.get("batch_size_per_gpu"), s.get("seq_len"), s.get("num_tokens_to_generate")
    weights, emb = get("weight_memory_per_gpu", 0.0), get("weight_memory_embedding_per_gpu", 0.0)
    kv = get("kv_cache_memory_per_gpu", 0.0)
    pre_act, dec_act = get("prefill_activation_memory_per_gpu", 0.0), get("decode_activation_memory_per_gpu", 0.0)
    brk = get("memory_breakdown_per_gpu") or {}
    act = brk.get("activations", max(pre_act, dec_act))
    free = get("memory_left_per_gpu", mem_total - weights - kv - act)

    def row(label, v, note=""):
        return [label, format_bytes(v), f"{v / mem_total:.1%}", note]
    rows = [row("weights", weights, f"of which embeddings and LM head {format_bytes(emb)}"),
            row("KV cache", kv, f"batch {b} x context {(seq or 0) + (n or 0)} tokens"
                if s.get("use_kv_cache", True) else "off"),
            row("activations", act, f"largest live set: prefill {format_bytes(pre_act)}, "
                                    f"decode {format_bytes(dec_act)}")]
    rows += [row(k.replace("_", " "), v) for k, v in brk.items()
             if k not in ("weights", "kv_cache", "activations", "free")]
    rows += [row("used", mem_total - free), row("free", free, "" if free >= 0 else "does not fit")]
    rep.table(None, [("", "left"), ("size", "right"), ("share", "right"), ("", "left")], rows,
              footer=["GPU memory", format_bytes(mem_total), "100%", analysis.gpu_config.name])


def inference_sections(rep: RichReport, analysis, s: Dict[str, Any], used: Set[str]) -> None:
    """Every section of the inference report; the keys shown are added to `used`."""
    def get(key, default=None):
        used.add(key)
        return s.get(key, default)

    used.update(_SHOWN_IN_SETUP)
    # the mirrored system's per-part keys (quantities/mirror_parts.py): the Prefill and Decode tables show the
    # same times by part, so they are not repeated under "Other values" (the JSON keeps them)
    used.update(k for k in s if k.startswith(("prefill_latency_fwd_", "decode_latency_fwd_")))
    used.add("layernorm_dtype_bytes")
    _setup(rep, analysis, get)
    steps = max((s.get("num_tokens_to_generate") or 1) - 1, 0)
    rep.heading("Summary")
    mem_total = gpu_memory_bytes(analysis, s)
    used.add("gpu_memory_per_gpu")
    rows = _latency_rows(get, steps, s.get("num_tokens_to_generate"))
    rows += _throughput_rows(get, used)
    rows += _capacity_rows(analysis, s, get, mem_total)
    rep.key_values(rows)
    _phases(rep, analysis, s, get, steps)
    _memory(rep, analysis, s, get, mem_total)
