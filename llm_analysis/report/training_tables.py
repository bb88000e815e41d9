"""The sections of the training report: setup and run, summary, time per
iteration, memory per GPU, FLOPs, per layer part, and the breakdowns."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from llm_analysis.quantities.latency import forward_view
from llm_analysis.report.console import RichReport
from llm_analysis.report.labels import (TIME_PREFIX, TRAIN_MEMORY_TERMS, gpu_memory_bytes, params_line, per_replica,
                                        train_time_label,
                                        train_time_parts)
from llm_analysis.report.part_tables import breakdown_table, groups_from_operators, params_table, phase_table
from llm_analysis.report.setup_lines import setup_rows
from llm_analysis.report.units import expected_time, fmt, format_bytes, format_count, format_duration, format_seconds, perf_model_line

_SHOWN_IN_SETUP = ("model_name", "gpu_name", "dtype_name", "tp_size", "pp_size", "dp_size", "ep_size", "sp_size",
                   "cp_size", "cp_comm", "dp_shard", "dp_replicate",
                   "flops_efficiency", "hbm_memory_efficiency", "ridge_point_flops_per_byte", "gpu_memory_per_gpu",
                   "achieved_tflops")
_FLOPS_ROWS = (("num_flops_fwd_per_micro_batch", "forward, per micro-batch"),
               ("num_flops_bwd_per_micro_batch", "backward, per micro-batch"),
               ("num_flops_recompute_per_micro_batch", "recomputation, per micro-batch"),
               ("num_flops_total_per_micro_batch", "total, per micro-batch"),
               ("num_model_flops_per_iter", "model FLOPs per iteration (all GPUs)"),
               ("num_model_flops_per_iter_routed", "routed-expert model FLOPs (mfu's)"),
               ("num_hardware_flops_per_iter", "hardware FLOPs per iteration (all GPUs)"))
_FROM_FLOPS = "from FLOPs / achieved FLOP/s"
# the mirrored system's keys (training/summary.py `_mirror_entries`): parts and sums of figures the tables show
# (the memory table, the per-part forward table), kept in the JSON and not printed again under Other values
_MIRROR_KEYS = ("layernorm_dtype_bytes", "mlp_activation_quant_bits", "mlp_recompute_gelu",
                "(weight+op_state+grad)_memory_per_gpu", "(weight+op_state+grad+act)_memory_per_gpu",
                "activation_memory_batch_size_1",
                *(f"weight_memory_{k}_per_gpu" for k in ("embedding", "attn", "mlp", "layernorm")),
                *(f"activation_memory_{k}_per_gpu" for k in ("attn", "mlp", "layernorm", "embedding_output")))


class _Reader:
    """The summary, recording which keys a section showed."""

    def __init__(self, s: Dict[str, Any], used: Set[str]):
        self.s, self.used = s, used

    def has(self, key: str) -> bool:
        return self.s.get(key) is not None

    def get(self, key: str, default=None):
        self.used.add(key)
        return self.s.get(key, default)

    def texts(self, items: Tuple[Tuple[str, Callable[[Any], str]], ...]) -> List[str]:
        """text(value) for each (key, text) whose key the summary has a value for."""
        return [text(self.get(key)) for key, text in items if self.has(key)]


def _enum_name(enum_name: str, value) -> str:
    import llm_analysis.schema.options as options
    cls = getattr(options, enum_name)
    try:
        member = value if isinstance(value, cls) else cls(int(value))
        return f"{member.value} ({member.name})"
    except (TypeError, ValueError):
        return str(value)


def _batch_line(r: _Reader, replica: str) -> str:
    line = ", ".join(r.texts((("batch_size_per_gpu", lambda v: f"micro-batch {v} {replica}"),
                              ("gradient_accumulation_steps", lambda v: f"{v} accumulation steps"),
                              ("global_batch_size", lambda v: f"global batch {v} sequences"))))
    if r.has("seq_len"):
        line += f" of {r.get('seq_len')} tokens"
    return line


def _lora_text(lora) -> str:
    if not isinstance(lora, dict):
        return f"LoRA {lora}"
    targets = lora.get("target_modules")
    line = f"LoRA rank {lora.get('rank')}"
    if targets:
        line += " on " + ", ".join(map(str, targets))
    if lora.get("base_weight_bits") not in (None, 16):
        line += f" ({lora['base_weight_bits']}-bit base weights)"
    return line


def _run_line(r: _Reader) -> str:
    extra = []
    if r.has("total_num_gpus"):
        n_gpus = r.get("total_num_gpus")
        extra.append(f"{n_gpus} GPU{'s' if n_gpus != 1 else ''}")
    if r.has("ds_zero"):
        extra.append(f"ZeRO stage {_enum_name('DSZeRO', r.get('ds_zero'))}")
    if r.has("activation_recomputation"):
        extra.append("activation recomputation "
                     f"{_enum_name('ActivationRecomputation', r.get('activation_recomputation'))}")
    if r.s.get("pipeline_interleave", 1) not in (None, 1):
        extra.append(f"{r.get('pipeline_interleave')} virtual pipeline stages per GPU")
    r.used.add("pipeline_interleave")
    if r.has("lora"):
        extra.append(_lora_text(r.get("lora")))
    r.used.add("lora")
    if r.has("total_num_tokens"):
        extra.append(f"{format_count(r.get('total_num_tokens'))} training tokens")
    return ", ".join(extra)


def _setup(rep: RichReport, analysis, r: _Reader) -> None:
    r.used.update(k for k in _SHOWN_IN_SETUP if k in r.s and not isinstance(r.s[k], dict))
    rep.heading(f"llm-analysis · training · {analysis.model_config.name} on {analysis.gpu_config.name}")
    rows = setup_rows(analysis, training=True)
    for label, line in (("batch", _batch_line(r, per_replica(analysis))), ("run", _run_line(r))):
        if line:
            rows.append((label, line))
    if r.has("perf_model"):
        rows.append(("performance model", perf_model_line(r.get("perf_model"))))
    rep.key_values(rows)


def _with_alt(r: _Reader, line: str, alt_key: str, text: Callable[[Any], str]) -> str:
    """`line` followed by '(<alt> from FLOPs / achieved FLOP/s)' when the summary has `alt_key`."""
    return line + f" ({text(r.get(alt_key))} {_FROM_FLOPS})" if r.has(alt_key) else line


def _params_memory_rows(r: _Reader, mem_total: float, replica: str) -> List[Tuple[str, str]]:
    rows = []
    if r.has("num_params_total"):
        total_p, active_p = r.get("num_params_total"), r.get("num_active_params_total")
        line = params_line(total_p, active_p, r.get("num_active_params_without_input_embedding"), fmt)
        trainable = r.get("num_trainable_params_total")
        if trainable is not None and trainable != total_p:
            line += f", {fmt('params', trainable)} trainable"
        rows.append(("parameters", line))
    if r.has("estimated_peak_memory_per_gpu"):
        peak = r.get("estimated_peak_memory_per_gpu")
        line = f"{format_bytes(peak)} of {format_bytes(mem_total)} ({peak / mem_total:.0%}) at peak"
        if r.has("memory_left_per_gpu"):
            line += f", {format_bytes(r.get('memory_left_per_gpu'))} free"
        rows.append(("memory per GPU", line))
    if r.has("max_batch_size_per_gpu"):
        rows.append(("largest micro-batch", f"{r.get('max_batch_size_per_gpu')} {replica}"))
    return rows


def _timed(r: _Reader, key: str, text=format_seconds) -> str:
    """'X', or 'expected X (lower bound Y)' under a calibrated performance model."""
    return expected_time(r.get(key), r.get(f"{key}_lower_bound"), text)


def _time_rows(r: _Reader) -> List[Tuple[str, str]]:
    rows = []
    if r.has("latency_per_iter"):
        rows.append(("time per iteration", _with_alt(r, _timed(r, "latency_per_iter"),
                                                     "latency_per_iter_using_flops", format_seconds)))
    if r.has("latency_per_micro_batch"):
        line = _timed(r, "latency_per_micro_batch")
        if r.has("latency_fwd"):
            line += f" on the slowest stage (forward through all stages {_timed(r, 'latency_fwd')})"
        rows.append(("time per micro-batch", line))
    if r.has("total_training_latency"):
        line = _timed(r, "total_training_latency", format_duration)
        if r.has("num_iterations"):
            line += f" for {format_count(r.get('num_iterations'))} iterations"
        rows.append(("training time", _with_alt(r, line, "total_training_latency_using_flops", format_duration)))
    if r.has("gpu_hours"):
        rows.append(("GPU-hours", _with_alt(r, fmt("gpu_hours", r.get("gpu_hours")), "gpu_hours_using_flops",
                                            lambda v: fmt("gpu_hours", v))))
    return rows


def _rate_rows(r: _Reader) -> List[Tuple[str, str]]:
    rows = []
    if r.has("total_training_cost") or r.has("cost_per_iter"):
        parts = r.texts((("total_training_cost", lambda v: f"{fmt('cost', v)} in all"),
                         ("cost_per_iter", lambda v: f"{fmt('cost', v)} per iteration"),
                         ("cost_per_gpu_hour", lambda v: f"at {fmt('cost', v)} per GPU-hour")))
        rows.append(("cost", ", ".join(parts)))
        r.used.add("total_training_cost_using_flops")
    if r.has("tokens_per_sec"):
        line = fmt("tokens_per_sec", r.get("tokens_per_sec"))
        if r.has("tokens_per_sec_per_gpu"):
            line += f" ({fmt('tokens_per_sec', r.get('tokens_per_sec_per_gpu'))} per GPU)"
        rows.append(("throughput", line))
    r.used.add("achieved_flops")  # 0.2.2's name of achieved_tflops, shown in the setup
    eff = r.texts((("achieved_flops_per_s", lambda v: f"{fmt('achieved_flops_per_s', v)} per GPU achieved"),
                   ("mfu", lambda v: f"MFU {v:.1%}"), ("hfu", lambda v: f"HFU {v:.1%} (with recomputation)")))
    if eff:
        rows.append(("utilisation", ", ".join(eff)))
    return rows


def _time_row(r: _Reader, part: str, v: float, total: float) -> Optional[List[str]]:
    r.used.add(TIME_PREFIX + part)
    if v == 0 and part not in ("fwd_compute", "bwd_compute") and not (
            part == "dp_comm" and r.s.get("latency_per_iter_dp_comm_total")):
        return None  # a term this layout does not have (e.g. EP all-to-all without experts)
    note = ""
    if part == "dp_comm" and r.has("latency_per_iter_dp_comm_total"):
        note = (f"{format_seconds(r.get('latency_per_iter_dp_comm_total'))} in all, "
                f"{format_seconds(r.get('latency_per_iter_dp_comm_hidden', 0.0))} hidden behind compute")
    return [train_time_label(part), format_seconds(v), f"{v / total:.1%}", note]


def _time_table(rep: RichReport, r: _Reader) -> None:
    parts = train_time_parts(r.s)
    if not parts:
        return
    total = r.s.get("latency_per_iter") or sum(parts.values()) or 1.0
    rep.heading("Time per iteration")
    rows = [row for row in (_time_row(r, k, v, total) for k, v in parts.items()) if row]
    rep.table(None, [("part", "left"), ("time", "right"), ("share", "right"), ("", "left")], rows,
              footer=["total", format_seconds(total), "100%", ""])
    if r.has("compute_bound_latency_per_iter"):
        rep.console.print(f"all FLOPs at the GPU's peak would take "
                          f"{format_seconds(r.get('compute_bound_latency_per_iter'))} per iteration", style="dim")


def _memory_table(rep: RichReport, r: _Reader, mem_total: float) -> None:
    def row(label: str, v: float) -> List[str]:
        return [label, format_bytes(v), f"{v / mem_total:.1%}"]
    rows = [row(label, r.get(key)) for key, label, _, _ in TRAIN_MEMORY_TERMS if r.has(key)]
    for k in r.s:  # memory terms this table does not know yet
        if k.endswith("_memory_per_gpu") and k not in r.used and k != "estimated_peak_memory_per_gpu" \
                and isinstance(r.s[k], (int, float)):
            rows.append(row(k[:-len("_memory_per_gpu")].replace("_", " "), r.get(k)))
    if rows and r.has("estimated_peak_memory_per_gpu"):
        r.used.add("peak_memory_pipeline_stage")  # not shown: the peak is that of the fullest stage
        rows.append(row("estimated peak", r.s["estimated_peak_memory_per_gpu"]))
    if rows and r.has("memory_left_per_gpu"):
        rows.append(row("free", r.get("memory_left_per_gpu")))
    if rows:
        rep.heading("Memory per GPU")
        rep.table(None, [("", "left"), ("size", "right"), ("share", "right")], rows,
                  footer=["GPU memory", format_bytes(mem_total), "100%"])


def _flops(rep: RichReport, r: _Reader) -> None:
    # (the routed count only where it differs: experts the eager code runs on every token, Llama 4)
    routed = r.get("num_model_flops_per_iter_routed") if r.has("num_model_flops_per_iter_routed") else None
    rows = [(label, fmt("flops", r.get(key))) for key, label in _FLOPS_ROWS if r.has(key)
            and (key != "num_model_flops_per_iter_routed" or routed != r.s.get("num_model_flops_per_iter"))]
    if rows:
        rep.heading("FLOPs")
        rep.key_values(rows)


def _forward_table(rep: RichReport, analysis, b: int, seq: int) -> None:
    # timed as the training() call was: under the calibrated model its training view (the summary's latency_fwd
    # and the rates line read the same), under the roofline the analysis' own model
    view = forward_view(analysis, is_inference=False)
    try:
        groups = groups_from_operators(view.operators("train", b, seq, per_layer=False))
    except Exception:  # noqa: BLE001 - the table is optional, the report must print
        groups = {}
    if not groups:
        return
    rep.console.print()
    p = analysis.parallelism_config
    where = "" if p.pp_size == 1 else f", all {p.pp_size} stages"
    how = "roofline" if analysis.profile is None else "expected (calibrated, training rates)"
    phase_table(rep, f"Forward pass of one micro-batch ({b} x {seq} tokens{where}), {how} per part", groups,
                caption="backward = 2x forward FLOPs; bound: compute when FLOPs/byte > ridge "
                        f"point {view.get_ridge_point():.0f}, else memory")


def _parts(rep: RichReport, analysis, r: _Reader) -> None:
    rep.heading("Per layer part")
    params_table(rep, analysis)
    b, seq = r.s.get("batch_size_per_gpu"), r.s.get("seq_len")
    if b and seq:
        _forward_table(rep, analysis, b, seq)
    if r.has("bottleneck_pipeline_stage") and r.s.get("pp_size", 1) > 1:
        rep.key_values([("slowest pipeline stage", str(r.get("bottleneck_pipeline_stage")))])
    else:
        r.used.add("bottleneck_pipeline_stage")


def training_sections(rep: RichReport, analysis, s: Dict[str, Any], used: Set[str]) -> None:
    """Every section of the training report; the keys shown are added to `used`."""
    r = _Reader(s, used)
    used.update(_MIRROR_KEYS)  # (before the memory table, which prints unknown `*_memory_per_gpu` keys)
    _setup(rep, analysis, r)
    rep.heading("Summary")
    mem_total = gpu_memory_bytes(analysis, s)
    rep.key_values(_params_memory_rows(r, mem_total, per_replica(analysis)) + _time_rows(r) + _rate_rows(r))
    _time_table(rep, r)
    _memory_table(rep, r, mem_total)
    _flops(rep, r)
    _parts(rep, analysis, r)
    breakdowns = [k for k, v in s.items() if isinstance(v, dict) and k not in used and k != "setup"]
    if breakdowns:
        rep.heading("Breakdowns")
    for key in breakdowns:
        used.add(key)
        breakdown_table(rep, key, s[key])
