"""`--html FILE`: the analysis as one self-contained web page.

Everything the page shows is inline (style sheet, a short script, SVG charts,
the JSON summary), so it opens offline and fetches nothing. It shows:
- what ran: model, GPU, data types, layout, and the performance model that
  produced the times (roofline: lower bounds; calibrated: expected times);
- the headline figures with their units;
- where the time goes (bars per layer part, coloured by what bounds each) and
  memory per GPU (a stacked bar against the GPU's capacity);
- the roofline with a point per operator (hover or focus one: its FLOPs, bytes,
  time and what bounds it);
- per-operator tables of each phase, sorted by clicking a column header;
- the terminal report's sections, laid out as HTML (the same wording);
- every value of the JSON summary with its unit and raw number, and the JSON
  itself (`--output_format json` prints the same text);
- for `plan`: the Pareto front with each point labelled by its layout, the
  ranked plans, the targets and assumptions, and the best plan in detail.

Numbers are formatted by report/units.py and gathered by the functions the
terminal report and the PNG charts use; no arithmetic of the model is here.
Writing is atomic (report/files.py): a path that cannot be written is one
ConfigError line naming --html, and nothing half-written is left behind.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from llm_analysis.errors import ConfigError, warn
from llm_analysis.report.breakdown_charts import (TRAIN_TIME_LEGEND, inference_memory_parts, train_time_color,
                                                  training_memory_parts)
from llm_analysis.report.chart_common import BOUND_COLORS, memory_color, setup_text
from llm_analysis.report.files import atomic_write_text, output_file_path
from llm_analysis.report.html_assets import SCRIPT, STYLE
from llm_analysis.report.html_charts import (Bar, FrontPoint, MemoryPart, RooflinePhase, bars_svg, memory_svg,
                                             pareto_svg, roofline_svg, swatch)
from llm_analysis.report.html_elements import (Cell, Figure, HtmlSections, cards, esc, item_list, key_values, legend,
                                               table)
from llm_analysis.report.labels import gpu_memory_bytes, part_label, part_sort_key, train_time_label, train_time_parts
from llm_analysis.report.roofline_chart import rates
from llm_analysis.report.tables import report_sections
from llm_analysis.report.units import fmt, format_bytes, format_duration, format_number, format_seconds, perf_model_line

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------ the page
def _page(title: str, body: Sequence[str], json_text: str, json_name: str) -> str:
    """The whole document: head with the style sheet, the body, the JSON summary (inert data,
    never executed), the tooltip and the script."""
    # every "<" as its JSON escape: no string in the summary can end the script element or open a comment
    data = json_text.replace("<", "\\u003c")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="llm-analysis">', f"<title>{esc(title)}</title>",
        f"<style>{STYLE}</style>", "</head>", "<body>", *body,
        f'<p class="note">The summary as JSON (what <code>--output_format json</code> prints): '
        f'<a id="json-download" download="{esc(json_name)}" href="#">download</a>.</p>',
        f'<script type="application/json" id="summary-json">{data}</script>',
        '<div id="tooltip" role="tooltip" hidden></div>', f"<script>{SCRIPT}</script>", "</body>", "</html>", ""])


def _perf_model_banner(perf_model: Optional[str]) -> str:
    """Which performance model produced the times, and so what they mean."""
    if perf_model in (None, "roofline"):
        text = ("Performance model: roofline. Every time is a lower bound: each operator takes max(FLOPs / "
                "achieved FLOP/s, bytes moved / achieved HBM bandwidth) at the rates stated below, collectives "
                "their link time; a real run takes longer.")
        return f'<p class="banner roofline" id="perf-model" data-perf-model="roofline">{esc(text)}</p>'
    text = f"Performance model: {perf_model_line(perf_model)}."
    return f'<p class="banner calibrated" id="perf-model" data-perf-model="{esc(perf_model)}">{esc(text)}</p>'


def _lower_bound_detail(summary: Dict[str, Any], key: str, text: Callable[[float], str]) -> str:
    bound = summary.get(f"{key}_lower_bound")
    return "" if bound is None else f"expected; lower bound {text(bound)}"


def _figure(summary: Dict[str, Any], label: str, key: str, text: Optional[Callable[[Any], str]] = None,
            detail: str = "") -> Optional[Figure]:
    value = summary.get(key)
    if value is None:
        return None
    text = text or (lambda v: fmt(key, v))
    return Figure(label, key, value, text(value), detail or _lower_bound_detail(summary, key, text))


def _inference_figures(summary: Dict[str, Any], capacity: float) -> List[Figure]:
    s = summary
    steps = max((s.get("num_tokens_to_generate") or 1) - 1, 0)
    used = s.get("memory_used_per_gpu")
    figures = [
        _figure(s, "time to first token", "prefill_latency"),
        _figure(s, "time per output token", "decode_latency") if steps else None,
        _figure(s, "end-to-end latency", "total_latency"),
        _figure(s, "throughput", "total_tokens_per_sec",
                detail=f"{fmt('tokens_per_sec', s['total_tokens_per_sec_per_gpu'])} per GPU"
                if s.get("total_tokens_per_sec_per_gpu") is not None else ""),
        _figure(s, "memory per GPU", "memory_used_per_gpu",
                detail=f"of {format_bytes(capacity)} ({used / capacity:.0%})" if used is not None else ""),
        _figure(s, "largest batch (decode)", "decode_max_batch_size_per_gpu",
                detail=f"prefill {s.get('prefill_max_batch_size_per_gpu')}"),
        _figure(s, "parameters", "num_params_total",
                detail=f"{fmt('params', s['num_active_params_total'])} active per token"
                if s.get("num_active_params_total") not in (None, s.get("num_params_total")) else "total"),
    ]
    return [f for f in figures if f is not None]


def _training_figures(summary: Dict[str, Any], capacity: float) -> List[Figure]:
    s = summary
    peak = s.get("estimated_peak_memory_per_gpu")
    figures = [
        _figure(s, "time per iteration", "latency_per_iter"),
        _figure(s, "training time", "total_training_latency", format_duration),
        _figure(s, "GPU-hours", "gpu_hours"),
        _figure(s, "MFU", "mfu", lambda v: f"{v:.1%}", detail="model FLOPs / (time x peak FLOP/s)"),
        _figure(s, "throughput", "tokens_per_sec",
                detail=f"{fmt('tokens_per_sec', s['tokens_per_sec_per_gpu'])} per GPU"
                if s.get("tokens_per_sec_per_gpu") is not None else ""),
        _figure(s, "peak memory per GPU", "estimated_peak_memory_per_gpu",
                detail=f"of {format_bytes(capacity)} ({peak / capacity:.0%})" if peak is not None else ""),
        _figure(s, "micro-batch per GPU", "batch_size_per_gpu",
                detail=f"{s.get('gradient_accumulation_steps')} accumulation steps, global batch "
                       f"{s.get('global_batch_size')}"),
        _figure(s, "parameters", "num_params_total"),
    ]
    return [f for f in figures if f is not None]


# ------------------------------------------------------------ time and memory
def _part_bars(groups: Dict[str, Dict[str, Any]]) -> List[Bar]:
    """A bar per layer part of a latency breakdown ({part: {latency_s, bound, flops_per_gpu, ...}})."""
    total = sum(g.get("latency_s", 0.0) for g in groups.values()) or 1.0
    out = []
    for key in sorted(groups, key=part_sort_key):
        g = groups[key]
        t = g.get("latency_s", 0.0)
        tip = (f"{part_label(key)}: {format_seconds(t)} ({t / total:.1%})\nbound: {g.get('bound', '')}\n"
               f"FLOPs per GPU: {format_number(g.get('flops_per_gpu', 0.0), 'FLOPs')}\n"
               f"bytes moved per GPU: {format_bytes(g.get('bytes_per_gpu', 0.0))}")
        out.append(Bar(part_label(key), t, BOUND_COLORS.get(g.get("bound", ""), "#adb5bd"), tip, key))
    return out


def _bound_legend(groups: Dict[str, Dict[str, Any]]) -> str:
    bounds = {g.get("bound") for g in groups.values()}
    return legend([(swatch(c), f"{b}-bound") for b, c in BOUND_COLORS.items() if b in bounds])


def _inference_time(summary: Dict[str, Any]) -> List[str]:
    out = ["<h2 id=\"section-time\">Where the time goes</h2>"]
    prefill = summary.get("prefill_latency_breakdown") or {}
    steps = max((summary.get("num_tokens_to_generate") or 1) - 1, 0)
    b, seq = summary.get("batch_size_per_gpu"), summary.get("seq_len")
    panels = [("prefill", prefill, f"Prefill (time to first token {format_seconds(summary.get('prefill_latency', 0))}"
                                        f"): batch {b} x {seq} tokens")]
    decode = summary.get("decode_latency_breakdown") or {}
    if steps and decode:
        panels.append(("decode", decode, f"Decode, one step (mean of {steps} steps): "
                                          f"{format_seconds(summary.get('decode_latency', 0))}"))
    for name, groups, title in panels:
        if not groups:
            continue
        bars = _part_bars(groups)
        total = sum(bar.value for bar in bars)
        out.append(f"<figure>{bars_svg(bars, total, format_seconds, title, f'time-{name}')}"
                   f"<figcaption>{esc(title)}</figcaption>{_bound_legend(groups)}</figure>")
    return out


def _training_time(summary: Dict[str, Any]) -> List[str]:
    parts = [(k, v) for k, v in train_time_parts(summary).items() if v > 0]
    if not parts:
        return []
    total = summary.get("latency_per_iter") or sum(v for _, v in parts)
    bars = [Bar(train_time_label(k), v, train_time_color(k),
                f"{train_time_label(k)}: {format_seconds(v)} ({v / total:.1%} of the iteration)", k) for k, v in parts]
    title = (f"One iteration: {format_seconds(total)} (global batch {summary.get('global_batch_size')} x "
             f"{summary.get('seq_len')} tokens, {summary.get('gradient_accumulation_steps')} micro-batches per GPU)")
    return ["<h2 id=\"section-time\">Where the time goes</h2>",
            f"<figure>{bars_svg(bars, total, format_seconds, title, 'time-iteration')}<figcaption>{esc(title)}"
            f"</figcaption>{legend([(swatch(c), label) for label, c in TRAIN_TIME_LEGEND.items()])}</figure>"]


def _memory(parts: List[Tuple[str, str, float]], capacity: float, title: str) -> List[str]:
    if not parts:
        return []
    svg, keys = memory_svg([MemoryPart(label, key, v, memory_color(key)) for label, key, v in parts], capacity,
                           title, "memory")
    return ["<h2 id=\"section-memory\">Memory per GPU</h2>",
            f"<figure>{svg}<figcaption>{esc(title)}</figcaption>{keys}</figure>"]


# ------------------------------------------------------------ operators
_OPERATOR_COLUMNS = (("operator", "left"), ("part", "left"), ("layers", "left"), ("count", "right"),
                     ("FLOPs/GPU", "right"), ("bytes/GPU", "right"), ("FLOPs/byte", "right"), ("bound", "left"),
                     ("time per call", "right"), ("time x count", "right"), ("share", "right"),
                     ("sent over links/GPU", "right"), ("shapes", "left"))


def _operator_row(r: Dict[str, Any], total_s: float) -> List[Any]:
    repeat = r.get("repeat", 1)
    all_s = r["latency_s"] * repeat
    comm = r["kind"] == "collective"
    return [Cell(r["name"]), Cell(part_label(r["group"])), Cell(r["layer_group"]), Cell(str(repeat), repeat),
            Cell(format_number(r["flops_per_gpu"], "FLOPs"), r["flops_per_gpu"]),
            Cell(format_bytes(r["bytes_per_gpu"]), r["bytes_per_gpu"]),
            Cell("-" if comm or not r["flops_per_gpu"] else f"{r['arithmetic_intensity']:.4g}",
                 None if comm or not r["flops_per_gpu"] else r["arithmetic_intensity"]),
            Cell(r["bound"], css=f"bound-{r['bound']}"),
            Cell(format_seconds(r["latency_s"]), r["latency_s"]),
            Cell(format_seconds(all_s), all_s),
            Cell(f"{all_s / total_s:.1%}" if total_s else "-", all_s / total_s if total_s else None),
            Cell(format_bytes(r.get("comm_bytes_per_gpu", 0.0)) if comm else "-",
                 r.get("comm_bytes_per_gpu", 0.0) if comm else None),
            Cell(r["shapes"], css="shapes")]


def _operator_table(phase: RooflinePhase, table_id: str, note: str) -> str:
    rows = phase.records
    total_s = sum(r["latency_s"] * r.get("repeat", 1) for r in rows)
    flops = sum(r["flops_per_gpu"] * r.get("repeat", 1) for r in rows)
    moved = sum(r["bytes_per_gpu"] * r.get("repeat", 1) for r in rows)
    footer = [Cell(f"total of {len(rows)} operators"), "", "", "", Cell(format_number(flops, "FLOPs"), flops),
              Cell(format_bytes(moved), moved), "", "", "", Cell(format_seconds(total_s), total_s), Cell("100%"), "",
              ""]
    return table(_OPERATOR_COLUMNS, [_operator_row(r, total_s) for r in rows], caption=phase.label,
                 footer=footer, sortable=True, table_id=table_id, note=note)


def _operators(phases: Sequence[Tuple[str, str, Callable[[], List[Dict[str, Any]]]]]) -> List[RooflinePhase]:
    """The operator records of each phase (label, marker shape, how to get them); a phase
    whose records cannot be built is left out with a log line, as the terminal report leaves
    its table out: the rest of the page still renders."""
    out = []
    for label, shape, records in phases:
        try:
            out.append(RooflinePhase(label, shape, records()))
        except Exception as err:  # noqa: BLE001 - an optional section must not lose the page
            warn(logger, "HTML report: no operator table for %s (%s)", label, err)
    return out


def _roofline_and_operators(analysis, summary: Dict[str, Any], phases: List[RooflinePhase],
                            notes: Sequence[str]) -> List[str]:
    if not phases:
        return []
    svg, keys = roofline_svg(rates(analysis, summary), phases, f"Roofline: {setup_text(analysis)}", "roofline")
    out = ["<h2 id=\"section-roofline\">Roofline</h2>",
           f"<figure>{svg}<figcaption>Each point is one operator (hover or focus it: its FLOPs, bytes, time and what "
           f"bounds it). Collectives and operators without FLOPs have no place on these axes; the tables below "
           f"list them.</figcaption>{keys}</figure>",
           "<h2 id=\"section-operators\">Operators</h2>",
           "<p class=\"note\">Click a column header to sort by it (again to reverse). FLOPs, bytes and time are per "
           "GPU and per call; count is how many times the operator runs (once per layer of its kind).</p>"]
    for i, (ph, note) in enumerate(zip(phases, notes)):
        out.append(_operator_table(ph, f"operators-{i}", note))
    return out


def _inference_phases(analysis, summary: Dict[str, Any]) -> Tuple[List[RooflinePhase], List[str]]:
    b, s = summary["batch_size_per_gpu"], summary["seq_len"]
    n = summary.get("num_tokens_to_generate", 1)
    wanted = [(f"prefill: batch {b} x {s} tokens", "circle", lambda: analysis.operators("prefill", b, s))]
    notes = ["the time x count column sums to the prefill time of every pipeline stage "
             "(prefill_latency_breakdown in the JSON)"]
    if n > 1:
        wanted.append((f"decode: first step, batch {b} at context {s + 1}", "triangle",
                       lambda: analysis.operators("decode", b, s, s + 1)))
        notes.append("the time x count column sums to the first decode step (decode_first_step_latency when "
                     "pp is 1)")
    phases = _operators(wanted)
    return phases, [note for (label, *_), note in zip(wanted, notes) if any(p.label == label for p in phases)]


def _training_phases(analysis, summary: Dict[str, Any]) -> Tuple[List[RooflinePhase], List[str]]:
    b, s = summary.get("batch_size_per_gpu"), summary.get("seq_len")
    if not (b and s):
        return [], []
    phases = _operators([(f"forward of one micro-batch: {b} x {s} tokens", "circle",
                          lambda: analysis.operators("train", b, s))])
    return phases, ["backward takes 2x the forward FLOPs; recomputation repeats the forward of what it recomputes"]


# ------------------------------------------------------------ the rest
def _report_section(analysis, summary: Dict[str, Any], kind: str) -> List[str]:
    sections = HtmlSections()
    report_sections(sections, analysis, summary, kind)
    return ["<h2 id=\"section-report\">Report</h2>",
            "<p class=\"note\">The report the terminal prints, section by section.</p>", sections.text()]


def _all_values(summary: Dict[str, Any], details_id: str = "all-values", table_id: str = "values",
                title: str = "Every value of the summary (base units, as in the JSON)") -> List[str]:
    rows = []
    for key, value in summary.items():
        if isinstance(value, (dict, list, tuple)):
            continue
        rows.append([Cell(key), Cell(fmt(key, value), value if isinstance(value, (int, float)) else None),
                     Cell(repr(value) if isinstance(value, float) else str(value))])
    return [f"<details id=\"{details_id}\"><summary>{esc(title)}</summary>",
            table((("key", "left"), ("value", "right"), ("raw", "right")), rows, sortable=True,
                  table_id=table_id), "</details>"]


def _analysis_body(analysis, summary: Dict[str, Any], kind: str) -> List[str]:
    """Everything the page shows of one inference or training summary."""
    capacity = gpu_memory_bytes(analysis, summary)
    if kind == "inference":
        figures = _inference_figures(summary, capacity)
        time = _inference_time(summary)
        b, ctx = summary.get("batch_size_per_gpu"), (summary.get("seq_len") or 0) + (
            summary.get("num_tokens_to_generate") or 0)
        memory = _memory(inference_memory_parts(summary), capacity,
                         f"Memory per GPU: batch {b}, context {ctx} tokens")
        phases, notes = _inference_phases(analysis, summary)
    else:
        figures = _training_figures(summary, capacity)
        time = _training_time(summary)
        memory = _memory(training_memory_parts(analysis, summary), capacity,
                         f"Memory per GPU at peak: micro-batch {summary.get('batch_size_per_gpu')}, largest that "
                         f"fits {summary.get('max_batch_size_per_gpu')}")
        phases, notes = _training_phases(analysis, summary)
    return ([_perf_model_banner(summary.get("perf_model")), cards(figures)] + time + memory
            + _roofline_and_operators(analysis, summary, phases, notes) + _report_section(analysis, summary, kind)
            + _all_values(summary))


def _heading(title: str, subtitle: str) -> str:
    return f"<header><h1 id=\"title\">{esc(title)}</h1><p class=\"dim\" id=\"setup-line\">{esc(subtitle)}</p></header>"


def analysis_page(analysis, summary: Dict[str, Any], kind: str, json_text: str) -> str:
    """The page of an `infer` (kind "inference") or `train` ("training") summary; `json_text` is
    what `--output_format json` prints (the page embeds it)."""
    model, gpu = analysis.model_config.name, analysis.gpu_config.name
    title = f"{model} on {gpu}: {kind}"
    subtitle = f"{setup_text(analysis)} · {kind} · llm-analysis"
    return _page(f"llm-analysis · {kind} · {model} on {gpu}", [_heading(title, subtitle)]
                 + _analysis_body(analysis, summary, kind), json_text, f"{model}-{kind}.json".replace("/", "_"))


# ------------------------------------------------------------------ serving
_LATENCIES = (("ttft", "time to first token"), ("tpot", "time per output token"), ("e2e", "end-to-end latency"))


def _serve_figures(answer: Dict[str, Any]) -> List[Figure]:
    a = answer
    figures = [_figure(a, label, f"{name}_s", format_seconds,
                       detail=f"mean; p90 {format_seconds(a[f'{name}_p90_s'])}"
                       if a.get(f"{name}_p90_s") is not None else "mean")
               for name, label in _LATENCIES]
    figures += [
        _figure(a, "output tokens/s", "output_tokens_per_s", lambda v: f"{v:,.0f}",
                detail=f"{a['output_tokens_per_s_per_gpu']:,.0f} per GPU"),
        _figure(a, "requests/s", "requests_per_s", lambda v: f"{v:.3g}",
                detail=f"saturation {a['saturation_request_rate_per_s']:.3g} requests/s"),
        _figure(a, "GPUs", "num_gpus", str, detail=f"{a.get('num_replicas', 1)} replica(s)"),
        _figure(a, "KV pool in use", "kv_occupancy", lambda v: f"{v:.0%}",
                detail=f"{a['kv_pool_tokens_per_replica']:,} tokens per replica"),
        _figure(a, "weights per GPU", "weight_memory_per_gpu", format_bytes,
                detail=f"KV pool {format_bytes(a['kv_pool_bytes_per_gpu'])}, workspace "
                       f"{format_bytes(a['workspace_memory_per_gpu'])} of {format_bytes(a['gpu_memory_per_gpu'])}")
        if "weight_memory_per_gpu" in a else None,
    ]
    return [f for f in figures if f is not None]


def _serve_latency_table(answer: Dict[str, Any]) -> List[str]:
    rows = []
    for name, label in _LATENCIES:
        keys = (f"{name}_s", f"{name}_p50_s", f"{name}_p90_s", f"{name}_p99_s")
        rows.append([Cell(label)] + [Cell(format_seconds(answer[k]) if answer.get(k) is not None else "-",
                                          answer.get(k)) for k in keys])
    return ["<h2 id=\"section-latency\">Latency under load</h2>",
            table((("", "left"), ("mean", "right"), ("p50", "right"), ("p90", "right"), ("p99", "right")), rows,
                  sortable=True, table_id="latency",
                  note="means of the steady state (closed loop) or of the simulation (open loop); percentiles "
                       "from the seeded simulation of the same engine steps")]


def serve_page(analysis, answer: Dict[str, Any], json_text: str, step_summary: Optional[Dict[str, Any]],
               step_left_out: Optional[str] = None) -> str:
    """The page of a `serve` answer. `step_summary`: `inference()` of a static batch as large as the
    mean number of requests running per replica, at the mean prompt (or None): its operators,
    roofline and memory show what one engine step is made of; the serving figures are the answer's.
    `step_left_out`: why that step is not on the page (HTML), where it was left out."""
    model, gpu = analysis.model_config.name, analysis.gpu_config.name
    load = (f"{answer['concurrency']} concurrent clients" if answer.get("concurrency") is not None
            else f"{answer['request_rate']:g} requests/s (Poisson)")
    subtitle = (f"{setup_text(analysis)} · {answer['framework']} · {load} · input {answer['input_len_mean']:g}, "
                f"output {answer['output_len_mean']:g} tokens · llm-analysis")
    body = [_heading(f"{model} on {gpu}: serving under load", subtitle), _perf_model_banner(answer.get("perf_model")),
            cards(_serve_figures(answer))] + _serve_latency_table(answer)
    # what the call logged (warnings) apart from the notes, as the text report and the JSON keep them
    for key, heading in (("notes", "How these figures were made"), ("warnings", "Warnings")):
        if answer.get(key):
            body += [f"<h2 id=\"section-{key}\">{heading}</h2>", item_list(key, answer[key])]
    body += _all_values(answer, "serve-values", "serve-values-table",
                        "Every value of the serving answer (base units, as in the JSON)")
    if step_summary is not None:
        b = step_summary["batch_size_per_gpu"]
        body += [f"<h2 id=\"section-step\">One engine step in detail: {b} running requests</h2>",
                 f"<p class=\"note\">A static batch of {b} requests (the mean number running per replica) at "
                 f"the mean prompt, as <code>infer</code> analyses it: the operators a step is made of, where "
                 f"their time goes and the memory per GPU. Its latencies are a static batch's, not the serving "
                 f"figures above.</p>"]
        body += _analysis_body(analysis, step_summary, "inference")
    elif step_left_out:
        body += ["<h2 id=\"section-step\">One engine step in detail</h2>",
                 f"<p class=\"note\">{step_left_out}</p>"]
    return _page(f"llm-analysis · serve · {model} on {gpu}", body, json_text,
                 f"{model}-serve.json".replace("/", "_"))


# ------------------------------------------------------------------ plans
_X_OF_FRONT = {"inference": ("time_per_output_token", 1e3, "time per output token (ms)"),
               "training": ("total_training_latency", 1 / 86400, "training time (days)")}
_FRONT_FIGURES = ("time_per_output_token", "time_to_first_token", "total_training_latency",
                  "tokens_per_sec_per_gpu")
# layout fields of a front point as the label writes them (those not here: their own name)
_LAYOUT_WORDS = {"batch_size_per_gpu": "batch", "micro_batch": "micro-batch", "pipeline_interleave": "interleave",
                 "ds_zero": "ZeRO", "activation_recomputation": "recompute", "kv_cache_dtype_bytes": "KV bytes"}
_ALWAYS_LABELLED = ("tp", "pp", "dp", "batch_size_per_gpu", "micro_batch")


def _front_label(point: Dict[str, Any], varying: Sequence[str]) -> str:
    """A front point's layout in words: the parallel sizes and batch always, any other field
    where the front's points differ in it."""
    keys = [k for k in point if k not in _FRONT_FIGURES and (k in _ALWAYS_LABELLED or k in varying)]
    return " · ".join(f"{point[k]}" if k in ("gpu", "dtype") else f"{_LAYOUT_WORDS.get(k, k)} {point[k]}"
                      for k in keys)


def _front_tip(point: Dict[str, Any]) -> str:
    return "\n".join(f"{k}: {fmt(k, v)}" if k in _FRONT_FIGURES else f"{_LAYOUT_WORDS.get(k, k)}: {v}"
                     for k, v in point.items())


def _front(result) -> List[str]:
    x_key, scale, x_title = _X_OF_FRONT[result.kind]
    front = result.pareto
    varying = [k for k in (front[0] if front else {}) if len({str(p.get(k)) for p in front}) > 1]
    points = [FrontPoint(p[x_key], p["tokens_per_sec_per_gpu"], _front_label(p, varying), _front_tip(p))
              for p in front]
    title = f"Pareto front ({result.kind}): no other plan is both faster and has more tokens/s per GPU"
    return ["<h2 id=\"section-pareto\">Pareto front</h2>",
            f"<figure>{pareto_svg(points, x_title, 'tokens/s per GPU', scale, title, 'pareto')}"
            f"<figcaption>{esc(title)}; each point is labelled with its layout (hover for every figure)."
            f"</figcaption></figure>"]


def _plan_rows(result) -> List[str]:
    columns = result.extra.get("columns", [])
    heads = [("#", "right")] + [(name, "left" if name in ("gpu", "dtype") else "right") for name, _ in columns]
    heads += [("binding", "left"), ("why", "left")]
    rows = [[Cell(str(i + 1), i + 1)] + [Cell(text(r)) for _, text in columns]
            + [Cell(", ".join(r["binding"])),
               Cell(r["why"] + (f"; caution: {r['caution']}" if "caution" in r else ""), css="prose")]
            for i, r in enumerate(result.rows)]
    return ["<h2 id=\"section-plans\">Plans, best first</h2>",
            table(heads, rows, sortable=True, table_id="plans",
                  note=f"objective: {result.objective}; binding: the constraint that stops a larger batch or a "
                       f"cheaper layout"),
            f"<p class=\"note\" id=\"search\">{esc(result.stats.line())}</p>"]


def _assumption_rows(assumptions: Dict[str, Any]) -> List[Tuple[str, str]]:
    rows = []
    for key, value in assumptions.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {fmt(k, v)}" for k, v in value.items() if v is not None) or "none"
        rows.append((key.replace("_", " "), str(value)))
    return rows


def plan_page(result, json_text: str, best_analysis, best_summary: Dict[str, Any]) -> str:
    """The page of a plan (`plan infer|train`): `json_text` is what `--output_format json` prints;
    the best plan is shown in detail from its analysis and summary (rebuilt by the command from
    the row's `reproduce` arguments)."""
    analysis, summary, kind = best_analysis, best_summary, result.kind
    # (no analysis: only separate prefill and decode pools met the targets, and are shown below)
    pools = result.extra.get("disaggregated", {}).get("rows", []) if analysis is None else []
    reproduced = [r["reproduce"] for r in result.rows] or [r["reproduce"] for r in pools]
    model = analysis.model_config.name if analysis is not None else reproduced[0]["model_name"]
    command = "plan infer" if result.kind == "inference" else "plan train"
    gpus = ", ".join(dict.fromkeys(r["gpu_name"] for r in reproduced))
    dtypes = ", ".join(dict.fromkeys(r["dtype_name"] for r in reproduced))
    perf = reproduced[0]["analysis_kwargs"].get("perf_model", "roofline")
    body = [_heading(f"{model}: {command}", f"{model} · GPUs in the plans: {gpus} · data types: {dtypes} · "
                                            f"objective {result.objective} · llm-analysis"),
            _perf_model_banner(None if perf == "roofline" else str(perf))]
    body += _front(result) + _plan_rows(result)
    body += ["<h2 id=\"section-assumptions\">Targets and assumptions</h2>", key_values(_assumption_rows(result.assumptions))]
    if "disaggregated" in result.extra:
        body += ["<h3>Disaggregated prefill and decode pools</h3>",
                 f"<pre>{esc(json.dumps(result.extra['disaggregated'], indent=2, default=str))}</pre>"]
    if analysis is not None:
        body += [f"<h2 id=\"section-best\">The best plan in detail: {esc(setup_text(analysis))}</h2>",
                 "<p class=\"note\">Plan 1 rebuilt from its reproduce arguments (in the JSON), analysed as "
                 f"<code>{'infer' if kind == 'inference' else 'train'}</code> would.</p>"]
        body += _analysis_body(analysis, summary, kind)
    else:
        body += [f"<p class=\"note\">{esc(result.extra.get('no_colocated_plan', ''))}</p>"]
    return _page(f"llm-analysis · {command} · {model}", body, json_text,
                 f"{model}-{result.kind}-plan.json".replace("/", "_"))


# ------------------------------------------------------------------ writing
def html_path(value: Any) -> Path:
    """The --html value as the path to write, checked before any arithmetic runs
    (`report/files.py output_file_path`)."""
    return output_file_path("--html", value, "report.html")


def write_page(path: Any, page: str) -> str:
    """Write the page atomically (a temporary file renamed over `path`); a ConfigError
    line naming --html, the path and the reason when it cannot be written."""
    path = html_path(path)
    try:
        return atomic_write_text(path, page)
    except OSError as err:
        raise ConfigError(f"--html = {str(path)!r} cannot be written: {err.strerror or err}") from None


__all__ = ["analysis_page", "plan_page", "html_path", "write_page"]
