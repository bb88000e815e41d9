"""The readable terminal report: aligned tables (rich) grouped like the sister
tool's report — setup; summary; parameters, FLOPs, memory and time per layer
part with what bounds each part; memory per GPU; warnings.

Only formats the summary dicts (and the operator records of `analysis.operators`
for parameters per layer part); no arithmetic of the model lives here. `rich` is
imported when a report is rendered, never at start-up.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from .report import fmt, format_bytes, format_count, format_number, format_seconds, unit_of

WIDTH = 110  # columns of the report when not writing to a terminal

_PART_LABELS = {
    "embedding": "embeddings",
    "attention": "attention",
    "attention_kv_cache": "attention over KV cache",
    "attention_core": "attention core (QK^T, AV)",
    "mlp": "MLP",
    "experts": "MoE experts",
    "router": "MoE router",
    "norm": "norms",
    "lm_head": "LM head (logits)",
    "tp_communication": "TP communication",
    "pp_communication": "PP hand-off",
    "ep_communication": "EP all-to-all",
    "dp_communication": "DP communication",
    "communication": "communication",
}
_PART_ORDER = list(_PART_LABELS)
_BOUND_STYLE = {"compute": "green", "memory": "yellow", "communication": "magenta"}


def part_label(key: str) -> str:
    return _PART_LABELS.get(key, key.replace("_", " "))


def _part_sort_key(key: str) -> Tuple[int, str]:
    return (_PART_ORDER.index(key) if key in _PART_ORDER else len(_PART_ORDER), key)


def stdout_wants_color() -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


class _Report:
    """A rich Console writing into a string, and helpers for the sections
    (used for terminals, where it draws colours)."""

    def __init__(self, color: bool):
        from rich.console import Console

        width = WIDTH
        if color:
            width = max(80, min(shutil.get_terminal_size((WIDTH, 24)).columns, 140))
        self.color = color
        self.console = Console(file=io.StringIO(), width=width, color_system="standard" if color else None,
                               force_terminal=color, no_color=not color, highlight=False, emoji=False,
                               markup=False, soft_wrap=False, legacy_windows=False)

    # -------------------------------------------------------------- sections
    def heading(self, text: str) -> None:
        from rich.text import Text

        self.console.print()
        self.console.rule(Text(text, style="bold cyan"), align="left", characters="─")

    def key_values(self, rows: Sequence[Tuple[str, str]]) -> None:
        from rich.table import Table

        t = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 1))
        t.add_column(style="bold", no_wrap=True)
        t.add_column(overflow="fold")
        for k, v in rows:
            t.add_row(k, v)
        self.console.print(t)

    def table(self, title: Optional[str], columns: Sequence[Tuple[str, str]], rows: Iterable[Sequence[Any]],
              caption: Optional[str] = None, footer: Optional[Sequence[str]] = None) -> None:
        """columns: (header, justify); rows: cells (str or rich Text); footer: a
        closing row (totals) set off by a rule."""
        from rich import box
        from rich.table import Table

        t = Table(title=title, title_justify="left", title_style="bold", caption=caption, caption_justify="left",
                  caption_style="dim", box=box.SIMPLE if footer else box.SIMPLE_HEAD, pad_edge=False,
                  show_edge=False, header_style="bold", show_footer=bool(footer), footer_style="bold")
        for i, (header, justify) in enumerate(columns):
            t.add_column(header, justify=justify, no_wrap=justify == "right",
                         footer=footer[i] if footer else "")
        for row in rows:
            t.add_row(*row)
        self.console.print(t)

    def grid(self, rows: Sequence[Sequence[str]], justify: Sequence[str]) -> None:
        from rich.table import Table

        t = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 1))
        for j in justify:
            t.add_column(justify=j, no_wrap=True)
        for row in rows:
            t.add_row(*row)
        self.console.print(t)

    def bound_cell(self, bound: str):
        from rich.text import Text

        return Text(bound, style=_BOUND_STYLE.get(bound, "")) if self.color else bound

    def warnings(self, notes: Sequence[str]) -> None:
        from rich.text import Text

        from rich.table import Table

        if not notes:
            return
        self.heading("Warnings")
        t = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1, 0, 1))
        t.add_column(no_wrap=True)
        t.add_column(overflow="fold")
        style = "yellow" if self.color else ""
        for note in notes:
            t.add_row(Text("!", style=style), Text(str(note), style=style))
        self.console.print(t)

    def text(self) -> str:
        lines = self.console.file.getvalue().strip("\n").split("\n")
        return "\n".join(line.rstrip() for line in lines)


class _PlainConsole:
    """The part of rich's Console the report uses: print() into a string."""

    def __init__(self):
        self.file = io.StringIO()

    def print(self, *objects: Any, **_style: Any) -> None:  # rich's style keywords are ignored
        self.file.write(" ".join(str(o) for o in objects) + "\n")


class _PlainReport(_Report):
    """The same report laid out without rich: used when the output is not a
    terminal (no colours to draw), where importing and running rich would be
    most of the command's start-up time."""

    def __init__(self, color: bool = False):
        self.color = False
        self.width = WIDTH
        self.console = _PlainConsole()

    def _out(self, line: str = "") -> None:
        self.console.file.write(line.rstrip() + "\n")

    def heading(self, text: str) -> None:
        self._out()
        self._out(f"{text} " + "─" * max(self.width - len(text) - 1, 3))

    def _wrapped_pairs(self, rows: Sequence[Tuple[str, str]], lead: str = " ", gap: int = 2) -> None:
        import textwrap
        key_w = max((len(str(k)) for k, _ in rows), default=0)
        text_w = max(self.width - key_w - len(lead) - gap, 20)
        for k, v in rows:
            lines = textwrap.wrap(str(v), text_w) or [""]
            self._out(f"{lead}{str(k).ljust(key_w)}{' ' * gap}{lines[0]}")
            for more in lines[1:]:
                self._out(f"{' ' * (len(lead) + key_w + gap)}{more}")

    def key_values(self, rows: Sequence[Tuple[str, str]]) -> None:
        self._wrapped_pairs(rows)

    @staticmethod
    def _cells(cells: Sequence[Any], widths: Sequence[int], justify: Sequence[str], sep: str) -> str:
        return sep.join(str(c).rjust(w) if j == "right" else str(c).ljust(w)
                        for c, w, j in zip(cells, widths, justify))

    def table(self, title: Optional[str], columns: Sequence[Tuple[str, str]], rows: Iterable[Sequence[Any]],
              caption: Optional[str] = None, footer: Optional[Sequence[str]] = None) -> None:
        rows = [list(map(str, r)) for r in rows]
        headers = [h for h, _ in columns]
        justify = [j for _, j in columns]
        body = rows + ([list(map(str, footer))] if footer else [])
        widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(headers)]
        total = sum(widths) + 3 * (len(widths) - 1)
        if title:
            self._out(title)
        self._out(self._cells(headers, widths, justify, "   "))
        self._out("─" * total)
        for r in rows:
            self._out(self._cells(r, widths, justify, "   "))
        if footer:
            self._out("─" * total)
            self._out(self._cells(footer, widths, justify, "   "))
        if caption:
            self._out(caption)

    def grid(self, rows: Sequence[Sequence[str]], justify: Sequence[str]) -> None:
        rows = [list(map(str, r)) for r in rows]
        widths = [max(len(r[i]) for r in rows) for i in range(len(justify))] if rows else []
        for r in rows:
            self._out(" " + self._cells(r, widths, justify, "  "))

    def bound_cell(self, bound: str):
        return bound

    def warnings(self, notes: Sequence[str]) -> None:
        if not notes:
            return
        self.heading("Warnings")
        self._wrapped_pairs([("!", n) for n in notes], gap=2)


# ------------------------------------------------------------------ setup
def _model_line(m) -> str:
    kv = m.num_key_value_heads or m.n_head
    head_dim = getattr(m, "head_dim", None) or m.hidden_dim // m.n_head
    attn = "MHA" if kv == m.n_head else ("MQA" if kv == 1 else "GQA")
    parts = [f"{m.num_layers} layers", f"hidden {m.hidden_dim}",
             f"{m.n_head} heads ({attn}, {kv} KV heads, head dim {head_dim})"]
    if getattr(m, "kv_lora_rank", None):
        parts[-1] = f"{m.n_head} heads (MLA, KV latent {m.kv_lora_rank})"
    ffn = getattr(m, "ffn_embed_dim", None)
    if ffn:
        parts.append(f"FFN {ffn}{' gated' if m.mlp_gated_linear_units else ''}")
    if getattr(m, "moe_num_experts", 1) > 1:
        moe = f"{m.moe_num_experts} experts top-{m.moe_top_k}"
        if getattr(m, "moe_num_shared_experts", 0):
            moe += f" + {m.moe_num_shared_experts} shared"
        parts.append(moe)
    if getattr(m, "sliding_window", None):
        parts.append(f"sliding window {m.sliding_window}")
    parts.append(f"vocab {m.vocab_size}")
    if m.max_seq_len:
        parts.append(f"max context {m.max_seq_len}")
    return f"{m.name}: " + ", ".join(parts)


def _gpu_line(analysis) -> str:
    g = analysis.gpu_config
    link = getattr(g, "intra_node_link", "nvlink")
    link = {"nvlink": "NVLink", "pcie": "PCIe", "xgmi": "xGMI"}.get(link, link)
    return (f"{g.name}: {g.mem_per_GPU_in_GB:g} GB HBM at {g.hbm_bandwidth_in_GB_per_sec:g} GB/s, "
            f"{g.peak_fp16_TFLOPS:g} TFLOP/s dense 16-bit; {link} {g.intra_node_bandwidth_in_GB_per_sec:g} GB/s "
            f"within a node, {g.inter_node_bandwidth_in_GB_per_sec:g} GB/s per GPU across nodes")


def _dtype_line(analysis) -> str:
    d = analysis.dtype_config
    def bits(n, f):
        return f"{n}-bit{' ' + f if f and n <= 8 else ''}"
    wf = getattr(d, "weight_format", "")
    af = getattr(d, "activation_format", "")
    line = (f"{d.name}: weights {bits(d.weight_bits, wf)}, activations {bits(d.activation_bits, af)}, "
            f"embeddings {d.embedding_bits}-bit")
    if getattr(d, "quant_group_size", None):
        line += f", quantisation groups of {d.quant_group_size}"
    return line


def _layout_line(analysis) -> str:
    p = analysis.parallelism_config
    per_replica = p.tp_size * p.pp_size
    return (f"tp {p.tp_size} · pp {p.pp_size} · dp {p.dp_size} · ep {p.ep_size} · sp {p.sp_size}  "
            f"({per_replica} GPU{'s' if per_replica > 1 else ''} per model replica, "
            f"{per_replica * p.dp_size} in all)")


def _roofline_line(analysis) -> str:
    tflops = analysis.get_TFLOPS_per_gpu()
    bw = analysis.get_gpu_hbm_bandwidth()
    if analysis.achieved_tflops is not None:
        c = f"{tflops:g} TFLOP/s (given as achieved_tflops)"
    else:
        c = f"{tflops:.4g} TFLOP/s ({analysis.flops_efficiency:.0%} of peak)"
    if analysis.achieved_memory_bandwidth_GBs is not None:
        m = f"{bw:g} GB/s (given as achieved_memory_bandwidth_GBs)"
    else:
        m = f"{bw:.4g} GB/s ({analysis.hbm_memory_efficiency:.0%} of HBM peak)"
    return (f"{c}, {m}; ridge point {analysis.get_ridge_point():.0f} FLOPs/byte "
            "(operators above it are compute-bound)")


def _setup_rows(analysis) -> List[Tuple[str, str]]:
    return [("model", _model_line(analysis.model_config)), ("GPU", _gpu_line(analysis)),
            ("data types", _dtype_line(analysis)), ("parallelism", _layout_line(analysis)),
            ("achieved rates", _roofline_line(analysis))]


# -------------------------------------------------------------- parameters
def _params_by_part(analysis) -> Dict[str, Dict[str, float]]:
    """Parameters of the model and of one layer, and weight bytes per TP rank, per
    operator group (from the operator records)."""
    out: Dict[str, Dict[str, float]] = {}
    layers = analysis.model_config.num_layers
    for r in analysis.operators("prefill", 1, 1):
        if r["kind"] == "collective" or not r["params"]:
            continue
        g = out.setdefault(r["group"], {"params": 0.0, "per_layer": 0.0, "weight_bytes": 0.0})
        g["params"] += r["params"] * r["repeat"]
        g["weight_bytes"] += r["weight_bytes_per_gpu"] * r["repeat"]
        if r["layer_group"] not in ("embedding", "head"):
            g["per_layer"] += r["params"] * r["repeat"] / layers
    return out


def _params_table(rep: _Report, analysis) -> None:
    parts = _params_by_part(analysis)
    total = sum(g["params"] for g in parts.values()) or 1
    p = analysis.parallelism_config
    where = "per GPU" if p.pp_size == 1 else f"per TP rank, all {p.pp_size} stages"
    rows = []
    for key in sorted(parts, key=_part_sort_key):
        g = parts[key]
        rows.append([part_label(key), format_count(g["params"]),
                     format_count(g["per_layer"]) if g["per_layer"] else "-",
                     f"{g['params'] / total:.1%}", format_bytes(g["weight_bytes"])])
    footer = ["total", format_count(sum(g["params"] for g in parts.values())),
              format_count(sum(g["per_layer"] for g in parts.values())), "100%",
              format_bytes(sum(g["weight_bytes"] for g in parts.values()))]
    rep.table("Parameters and weights by layer part",
              [("part", "left"), ("params", "right"), ("per layer", "right"), ("share", "right"),
               (f"weights {where}", "right")], rows, footer=footer)


# ------------------------------------------------------------------ phases
def _intensity(ai: float) -> str:
    return f"{ai:,.0f}" if ai >= 100 else f"{ai:.3g}"


def _phase_table(rep: _Report, title: str, groups: Dict[str, Dict[str, float]], divide: float = 1.0,
                 caption: Optional[str] = None) -> None:
    total = sum(g.get("latency_s", 0.0) for g in groups.values()) or 1.0
    rows = []
    for key in sorted(groups, key=_part_sort_key):
        g = groups[key]
        comm = g.get("bound") == "communication"
        flops = g.get("flops_per_gpu", 0.0) / divide
        bytes_ = g.get("bytes_per_gpu", 0.0) / divide
        ai = g.get("arithmetic_intensity", 0.0)
        rows.append([part_label(key),
                     "-" if comm else format_number(flops, "FLOPs"),
                     "-" if comm else format_bytes(bytes_),
                     "-" if comm or not flops else _intensity(ai),
                     rep.bound_cell(g.get("bound", "")),
                     format_seconds(g.get("latency_s", 0.0) / divide),
                     f"{g.get('latency_s', 0.0) / total:.1%}"])
    footer = ["total", format_number(sum(g.get("flops_per_gpu", 0.0) for g in groups.values()) / divide, "FLOPs"),
              format_bytes(sum(g.get("bytes_per_gpu", 0.0) for g in groups.values()) / divide), "", "",
              format_seconds(sum(g.get("latency_s", 0.0) for g in groups.values()) / divide), "100%"]
    rep.table(title, [("part", "left"), ("FLOPs/GPU", "right"), ("bytes moved/GPU", "right"),
                      ("FLOPs/byte", "right"), ("bound", "left"), ("time", "right"), ("share", "right")],
              rows, caption, footer=footer)


# --------------------------------------------------------------- inference
def _inference(rep: _Report, analysis, s: Dict[str, Any], used: Set[str]) -> None:
    def get(key, default=None):
        used.add(key)
        return s.get(key, default)

    for k in ("model_name", "gpu_name", "dtype_name", "tp_size", "pp_size", "dp_size", "ep_size",
              "flops_efficiency", "hbm_memory_efficiency", "achieved_tflops", "achieved_memory_bandwidth_GBs",
              "ridge_point_flops_per_byte"):
        used.add(k)
    b, seq, n = get("batch_size_per_gpu"), get("seq_len"), get("num_tokens_to_generate")
    steps = max((n or 1) - 1, 0)
    rep.heading(f"llm-analysis · inference · {analysis.model_config.name} on {analysis.gpu_config.name}")
    rows = _setup_rows(analysis)
    rows.append(("request", f"batch {b} per GPU, prompt {seq} tokens, {n} token{'s' if n != 1 else ''} generated, "
                            f"KV cache {'on' if get('use_kv_cache', True) else 'off'}"))
    rep.key_values(rows)

    rep.heading("Summary")
    total_p, active_p = get("num_params_total"), get("num_active_params_total")
    rows = [("parameters", fmt("params", total_p) + (f" total, {fmt('params', active_p)} active per token"
                                                     if active_p and active_p != total_p else ""))]
    rows.append(("time to first token", f"{format_seconds(get('prefill_latency'))} (prefill)"))
    used.add("time_to_first_token")
    used.add("time_per_output_token")
    if steps:
        rows.append(("time per output token",
                     f"{format_seconds(get('decode_latency'))} mean of {steps} decode steps "
                     f"(first {format_seconds(get('decode_first_step_latency'))}, "
                     f"last {format_seconds(get('decode_last_step_latency'))})"))
    else:
        get("decode_latency"), get("decode_first_step_latency"), get("decode_last_step_latency")
    get("total_decode_latency")
    rows.append(("end-to-end latency", f"{format_seconds(get('total_latency'))} for {n} token{'s' if n != 1 else ''} "
                                       f"({format_seconds(get('total_per_token_latency'))} per token)"))
    thr = (f"prefill {fmt('tokens_per_sec', get('prefill_tokens_per_sec'))} · "
           f"decode {fmt('tokens_per_sec', get('decode_tokens_per_sec'))} · "
           f"end-to-end {fmt('tokens_per_sec', get('total_tokens_per_sec'))}")
    rows.append(("throughput", thr))
    gpus = get("gpus_per_replica", 1)
    if gpus and gpus > 1:
        rows.append(("  per GPU", f"prefill {fmt('tokens_per_sec', get('prefill_tokens_per_sec_per_gpu'))} · "
                                  f"decode {fmt('tokens_per_sec', get('decode_tokens_per_sec_per_gpu'))} · "
                                  f"end-to-end {fmt('tokens_per_sec', get('total_tokens_per_sec_per_gpu'))}"))
    else:
        for k in ("prefill_tokens_per_sec_per_gpu", "decode_tokens_per_sec_per_gpu", "total_tokens_per_sec_per_gpu"):
            used.add(k)
    mem_total = get("gpu_memory_per_gpu") or analysis.gpu_config.mem_per_GPU_in_GB * 1e9
    used_b = get("memory_used_per_gpu")
    if used_b is not None:
        rows.append(("memory per GPU", f"{format_bytes(used_b)} of {format_bytes(mem_total)} "
                                       f"({used_b / mem_total:.0%}), {format_bytes(get('memory_left_per_gpu', 0))} free"))
    kv_room = (f" · KV cache room for {format_count(get('max_batch_total_tokens', 0))} tokens"
               if s.get("use_kv_cache", True) else "")
    rows.append(("largest batch per GPU", f"prefill {get('prefill_max_batch_size_per_gpu')} · "
                                          f"decode {get('decode_max_batch_size_per_gpu')}{kv_room}"))
    rows.append(("FLOPs", f"prefill {fmt('flops', get('prefill_num_flops_fwd_total'))} · "
                          f"first decode step {fmt('flops', get('decode_num_flops_fwd_total'))}"))
    if "total_cost_per_1k_tokens" in s:
        rows.append(("cost per 1k tokens", f"prefill {fmt('cost', get('prefill_cost_per_1k_tokens'))} · "
                                           f"decode {fmt('cost', get('decode_cost_per_1k_tokens'))} · "
                                           f"end-to-end {fmt('cost', get('total_cost_per_1k_tokens'))}"))
    rep.key_values(rows)

    rep.heading("Per layer part")
    _params_table(rep, analysis)
    ridge = s.get("ridge_point_flops_per_byte") or analysis.get_ridge_point()
    prefill = get("prefill_latency_breakdown") or {}
    if prefill:
        rep.console.print()
        _phase_table(rep, f"Prefill (time to first token {format_seconds(s.get('prefill_latency', 0))}), "
                          f"{b} x {seq} tokens", prefill,
                     caption=f"bound: compute when FLOPs/byte > ridge point {ridge:.0f}, else memory; "
                             "communication for collectives")
    decode = get("decode_latency_breakdown") or {}
    if decode and steps:
        rep.console.print()
        _phase_table(rep, f"Decode, one step (mean of {steps} steps at context {seq + 1}..{seq + steps}): "
                          f"{format_seconds(s.get('decode_latency', 0))}", decode, divide=steps)
    get("kv_cache_latency")

    rep.heading("Memory per GPU")
    weights, emb = get("weight_memory_per_gpu", 0.0), get("weight_memory_embedding_per_gpu", 0.0)
    kv = get("kv_cache_memory_per_gpu", 0.0)
    pre_act, dec_act = get("prefill_activation_memory_per_gpu", 0.0), get("decode_activation_memory_per_gpu", 0.0)
    brk = get("memory_breakdown_per_gpu") or {}
    act = brk.get("activations", max(pre_act, dec_act))
    free = get("memory_left_per_gpu", mem_total - weights - kv - act)
    rows = [["weights", format_bytes(weights), f"{weights / mem_total:.1%}",
             f"of which embeddings and LM head {format_bytes(emb)}"],
            ["KV cache", format_bytes(kv), f"{kv / mem_total:.1%}",
             f"batch {b} x context {(seq or 0) + (n or 0)} tokens" if s.get("use_kv_cache", True) else "off"],
            ["activations", format_bytes(act), f"{act / mem_total:.1%}",
             f"largest live set: prefill {format_bytes(pre_act)}, decode {format_bytes(dec_act)}"],
            ]
    for k, v in brk.items():
        if k not in ("weights", "kv_cache", "activations", "free"):
            rows.append([k.replace("_", " "), format_bytes(v), f"{v / mem_total:.1%}", ""])
    used_total = mem_total - free
    rows += [["used", format_bytes(used_total), f"{used_total / mem_total:.1%}", ""],
             ["free", format_bytes(free), f"{free / mem_total:.1%}", "" if free >= 0 else "does not fit"]]
    rep.table(None, [("", "left"), ("size", "right"), ("share", "right"), ("", "left")], rows,
              footer=["GPU memory", format_bytes(mem_total), "100%", analysis.gpu_config.name])


# ---------------------------------------------------------------- training
_TRAIN_MEMORY_ROWS = (
    ("weight_memory_per_gpu", "weights"),
    ("gradient_memory_per_gpu", "gradients"),
    ("optimizer_state_memory_per_gpu", "optimizer states"),
    ("activation_memory_per_gpu", "activations"),
    ("activation_memory_recompute_buffer_per_gpu", "recomputation buffer"),
    ("zero_buffer_memory_per_gpu", "ZeRO gather buffers"),
)
_TRAIN_TIME_LABELS = {
    "fwd_compute": "forward compute", "bwd_compute": "backward compute", "recompute": "recomputation",
    "tp_comm": "TP communication", "ep_comm": "EP all-to-all", "pp_comm": "PP hand-off",
    "pipeline_bubble": "pipeline bubble", "dp_comm": "DP communication (exposed)",
    "optimizer_step": "optimizer step",
}
_TIME_PREFIX = "latency_per_iter_"
_TIME_NOT_PARTS = ("using_flops", "dp_comm_total", "dp_comm_hidden")


def _enum_name(module_attr: str, value) -> str:
    from . import options as _a
    cls = getattr(_a, module_attr)
    try:
        member = value if isinstance(value, cls) else cls(int(value))
        return f"{member.value} ({member.name})"
    except (TypeError, ValueError):
        return str(value)


def _groups_from_operators(rows: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Operator records summed per layer part, with the bound that takes most time."""
    out: Dict[str, Dict[str, Any]] = {}
    for r in rows:
        key = f"{r.get('collective') and r['group'] == 'communication' and _comm_key(r) or r['group']}"
        g = out.setdefault(key, {"latency_s": 0.0, "compute_s": 0.0, "memory_s": 0.0, "communication_s": 0.0,
                                 "flops_per_gpu": 0.0, "bytes_per_gpu": 0.0})
        n = r.get("repeat", 1)
        g["latency_s"] += n * r["latency_s"]
        g[f"{r['bound']}_s"] = g.get(f"{r['bound']}_s", 0.0) + n * r["latency_s"]
        g["flops_per_gpu"] += n * r["flops_per_gpu"]
        g["bytes_per_gpu"] += n * r["bytes_per_gpu"]
    for g in out.values():
        g["bound"] = max(("compute", "memory", "communication"), key=lambda b: g.get(f"{b}_s", 0.0))
        g["arithmetic_intensity"] = g["flops_per_gpu"] / g["bytes_per_gpu"] if g["bytes_per_gpu"] else 0.0
    return out


def _comm_key(r: Dict[str, Any]) -> str:
    name = r.get("name", "")
    for grp in ("tp", "pp", "ep", "dp"):
        if name.startswith(grp + "_") or f"_{grp}_" in name:
            return f"{grp}_communication"
    return "communication"


def _training(rep: _Report, analysis, s: Dict[str, Any], used: Set[str]) -> None:
    def has(key):
        return s.get(key) is not None

    def get(key, default=None):
        used.add(key)
        return s.get(key, default)

    for k in ("model_name", "gpu_name", "dtype_name", "tp_size", "pp_size", "dp_size", "ep_size", "sp_size",
              "flops_efficiency", "hbm_memory_efficiency", "ridge_point_flops_per_byte", "gpu_memory_per_gpu",
              "achieved_tflops"):
        if k in s and not isinstance(s[k], dict):
            used.add(k)
    rep.heading(f"llm-analysis · training · {analysis.model_config.name} on {analysis.gpu_config.name}")
    rows = _setup_rows(analysis)
    batch = []
    if has("batch_size_per_gpu"):
        batch.append(f"micro-batch {get('batch_size_per_gpu')} per GPU")
    if has("gradient_accumulation_steps"):
        batch.append(f"{get('gradient_accumulation_steps')} accumulation steps")
    if has("global_batch_size"):
        batch.append(f"global batch {get('global_batch_size')} sequences")
    line = ", ".join(batch)
    if has("seq_len"):
        line += f" of {get('seq_len')} tokens"
    if line:
        rows.append(("batch", line))
    extra = []
    if has("total_num_gpus"):
        n_gpus = get("total_num_gpus")
        extra.append(f"{n_gpus} GPU{'s' if n_gpus != 1 else ''}")
    if has("ds_zero"):
        extra.append(f"ZeRO stage {_enum_name('DSZeRO', get('ds_zero'))}")
    if has("activation_recomputation"):
        extra.append(f"activation recomputation {_enum_name('ActivationRecomputation', get('activation_recomputation'))}")
    if s.get("pipeline_interleave", 1) not in (None, 1):
        extra.append(f"{get('pipeline_interleave')} virtual pipeline stages per GPU")
    else:
        used.add("pipeline_interleave")
    if has("lora"):
        lora = get("lora")
        if isinstance(lora, dict):
            targets = lora.get("target_modules")
            line = f"LoRA rank {lora.get('rank')}"
            if targets:
                line += " on " + ", ".join(map(str, targets))
            if lora.get("base_weight_bits") not in (None, 16):
                line += f" ({lora['base_weight_bits']}-bit base weights)"
            extra.append(line)
        else:
            extra.append(f"LoRA {lora}")
    else:
        used.add("lora")
    if has("total_num_tokens"):
        extra.append(f"{format_count(get('total_num_tokens'))} training tokens")
    if extra:
        rows.append(("run", ", ".join(extra)))
    rep.key_values(rows)

    rep.heading("Summary")
    rows = []
    if has("num_params_total"):
        total_p, active_p = get("num_params_total"), get("num_active_params_total")
        line = fmt("params", total_p) + (f" total, {fmt('params', active_p)} active per token"
                                         if active_p and active_p != total_p else "")
        trainable = get("num_trainable_params_total")
        if trainable is not None and trainable != total_p:
            line += f", {fmt('params', trainable)} trainable"
        rows.append(("parameters", line))
    mem_total = s.get("gpu_memory_per_gpu") or analysis.gpu_config.mem_per_GPU_in_GB * 1e9
    if has("estimated_peak_memory_per_gpu"):
        peak = get("estimated_peak_memory_per_gpu")
        line = f"{format_bytes(peak)} of {format_bytes(mem_total)} ({peak / mem_total:.0%}) at peak"
        if has("memory_left_per_gpu"):
            line += f", {format_bytes(get('memory_left_per_gpu'))} free"
        rows.append(("memory per GPU", line))
    if has("max_batch_size_per_gpu"):
        rows.append(("largest micro-batch per GPU", str(get("max_batch_size_per_gpu"))))
    if has("latency_per_iter"):
        line = format_seconds(get("latency_per_iter"))
        if has("latency_per_iter_using_flops"):
            line += f" ({format_seconds(get('latency_per_iter_using_flops'))} from FLOPs / achieved FLOP/s)"
        rows.append(("time per iteration", line))
    if has("latency_per_micro_batch"):
        line = format_seconds(get("latency_per_micro_batch"))
        if has("latency_fwd"):
            line += f" on the slowest stage (forward through all stages {format_seconds(get('latency_fwd'))})"
        rows.append(("time per micro-batch", line))
    if has("total_training_latency"):
        t = get("total_training_latency")
        line = f"{t / 86400:.3g} days" if t >= 86400 else format_seconds(t)
        if has("num_iterations"):
            line += f" for {format_count(get('num_iterations'))} iterations"
        if has("total_training_latency_using_flops"):
            t2 = get("total_training_latency_using_flops")
            line += f" ({t2 / 86400:.3g} days from FLOPs / achieved FLOP/s)" if t2 >= 86400 else \
                f" ({format_seconds(t2)} from FLOPs / achieved FLOP/s)"
        rows.append(("training time", line))
    if has("gpu_hours"):
        line = fmt("gpu_hours", get("gpu_hours"))
        if has("gpu_hours_using_flops"):
            line += f" ({fmt('gpu_hours', get('gpu_hours_using_flops'))} from FLOPs / achieved FLOP/s)"
        rows.append(("GPU-hours", line))
    if has("total_training_cost") or has("cost_per_iter"):
        parts = []
        if has("total_training_cost"):
            parts.append(f"{fmt('cost', get('total_training_cost'))} in all")
        if has("cost_per_iter"):
            parts.append(f"{fmt('cost', get('cost_per_iter'))} per iteration")
        if has("cost_per_gpu_hour"):
            parts.append(f"at {fmt('cost', get('cost_per_gpu_hour'))} per GPU-hour")
        rows.append(("cost", ", ".join(parts)))
        used.add("total_training_cost_using_flops")
    if has("tokens_per_sec"):
        line = fmt("tokens_per_sec", get("tokens_per_sec"))
        if has("tokens_per_sec_per_gpu"):
            line += f" ({fmt('tokens_per_sec', get('tokens_per_sec_per_gpu'))} per GPU)"
        rows.append(("throughput", line))
    eff = []
    if has("achieved_flops"):
        eff.append(f"{fmt('achieved_flops', get('achieved_flops'))} per GPU achieved")
    if has("mfu"):
        eff.append(f"MFU {get('mfu'):.1%}")
    if has("hfu"):
        eff.append(f"HFU {get('hfu'):.1%} (with recomputation)")
    if eff:
        rows.append(("utilisation", ", ".join(eff)))
    rep.key_values(rows)

    # time ---------------------------------------------------------------------
    parts = {k[len(_TIME_PREFIX):]: v for k, v in s.items()
             if k.startswith(_TIME_PREFIX) and not k.endswith(_TIME_NOT_PARTS) and isinstance(v, (int, float))}
    if parts:
        total = s.get("latency_per_iter") or sum(parts.values()) or 1.0
        rep.heading("Time per iteration")
        trows = []
        for k, v in parts.items():
            used.add(_TIME_PREFIX + k)
            if v == 0 and k not in ("fwd_compute", "bwd_compute") and not (
                    k == "dp_comm" and s.get("latency_per_iter_dp_comm_total")):
                continue  # a term this layout does not have (e.g. EP all-to-all without experts)
            label = _TRAIN_TIME_LABELS.get(k, k.replace("_", " "))
            note = ""
            if k == "dp_comm" and has("latency_per_iter_dp_comm_total"):
                note = (f"{format_seconds(get('latency_per_iter_dp_comm_total'))} in all, "
                        f"{format_seconds(get('latency_per_iter_dp_comm_hidden', 0.0))} hidden behind compute")
            trows.append([label, format_seconds(v), f"{v / total:.1%}", note])
        rep.table(None, [("part", "left"), ("time", "right"), ("share", "right"), ("", "left")], trows,
                  footer=["total", format_seconds(total), "100%", ""])
        if has("compute_bound_latency_per_iter"):
            rep.console.print(f"all FLOPs at the GPU's peak would take "
                              f"{format_seconds(get('compute_bound_latency_per_iter'))} per iteration", style="dim")

    # memory -------------------------------------------------------------------
    mrows = []
    for key, label in _TRAIN_MEMORY_ROWS:
        if has(key):
            v = get(key)
            mrows.append([label, format_bytes(v), f"{v / mem_total:.1%}"])
    for k in s:  # memory terms this table does not know yet
        if k.endswith("_memory_per_gpu") and k not in used and k not in ("estimated_peak_memory_per_gpu",) \
                and isinstance(s[k], (int, float)):
            v = get(k)
            mrows.append([k[:-len("_memory_per_gpu")].replace("_", " "), format_bytes(v), f"{v / mem_total:.1%}"])
    if mrows:
        rep.heading("Memory per GPU")
        if has("estimated_peak_memory_per_gpu"):
            v = s["estimated_peak_memory_per_gpu"]
            title = f"peak {format_bytes(v)}"
            if has("peak_memory_pipeline_stage") and s.get("pp_size", 1) > 1:
                title += f" on pipeline stage {get('peak_memory_pipeline_stage')}"
            else:
                used.add("peak_memory_pipeline_stage")
            mrows.append(["estimated peak", format_bytes(v), f"{v / mem_total:.1%}"])
        if has("memory_left_per_gpu"):
            v = get("memory_left_per_gpu")
            mrows.append(["free", format_bytes(v), f"{v / mem_total:.1%}"])
        rep.table(None, [("", "left"), ("size", "right"), ("share", "right")], mrows,
                  footer=["GPU memory", format_bytes(mem_total), "100%"])

    # FLOPs --------------------------------------------------------------------
    frows = []
    for key, label in (("num_flops_fwd_per_micro_batch", "forward, per micro-batch"),
                       ("num_flops_bwd_per_micro_batch", "backward, per micro-batch"),
                       ("num_flops_recompute_per_micro_batch", "recomputation, per micro-batch"),
                       ("num_flops_total_per_micro_batch", "total, per micro-batch"),
                       ("num_model_flops_per_iter", "model FLOPs per iteration (all GPUs)"),
                       ("num_hardware_flops_per_iter", "hardware FLOPs per iteration (all GPUs)")):
        if has(key):
            frows.append((label, fmt("flops", get(key))))
    if frows:
        rep.heading("FLOPs")
        rep.key_values(frows)

    # layer parts --------------------------------------------------------------
    rep.heading("Per layer part")
    _params_table(rep, analysis)
    b, seq = s.get("batch_size_per_gpu"), s.get("seq_len")
    if b and seq:
        try:
            groups = _groups_from_operators(analysis.operators("train", b, seq, per_layer=False))
        except Exception:  # noqa: BLE001 - the table is optional, the report must print
            groups = {}
        if groups:
            rep.console.print()
            p = analysis.parallelism_config
            where = "" if p.pp_size == 1 else f", all {p.pp_size} stages"
            _phase_table(rep, f"Forward pass of one micro-batch ({b} x {seq} tokens{where}), roofline per part",
                         groups, caption="backward = 2x forward FLOPs; bound: compute when FLOPs/byte > ridge "
                                         f"point {analysis.get_ridge_point():.0f}, else memory")
    if has("bottleneck_pipeline_stage") and s.get("pp_size", 1) > 1:
        rep.key_values([("slowest pipeline stage", str(get("bottleneck_pipeline_stage")))])
    else:
        used.add("bottleneck_pipeline_stage")

    # every breakdown dict the summary carries, as a table
    breakdowns = [k for k, v in s.items() if isinstance(v, dict) and k not in used and k != "setup"]
    if breakdowns:
        rep.heading("Breakdowns")
    for key in breakdowns:
        used.add(key)
        _breakdown_table(rep, key, s[key])


def _breakdown_table(rep: _Report, key: str, d: Dict[str, Any]) -> None:
    title = key.replace("_", " ")
    if not d:
        return
    if all(isinstance(v, dict) for v in d.values()):
        if all("latency_s" in v for v in d.values()) and all(
                k in ("latency_s", "compute_s", "memory_s", "communication_s", "flops_per_gpu", "bytes_per_gpu",
                      "bound", "arithmetic_intensity") for v in d.values() for k in v):
            _phase_table(rep, title, d)
            return
        cols: List[str] = []
        for v in d.values():
            cols.extend(c for c in v if c not in cols)
        rows = [[part_label(name)] + [fmt(c, v.get(c), key) if c in v else "" for c in cols] for name, v in d.items()]
        rep.table(title, [("", "left")] + [(c.replace("_", " "), "right") for c in cols], rows)
        return
    numeric = {k: v for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    total = sum(v for v in numeric.values() if v > 0)
    rows = []
    for name, v in d.items():
        share = f"{v / total:.1%}" if name in numeric and total and v >= 0 else ""
        rows.append([part_label(name), fmt(name, v, key) if not isinstance(v, dict) else str(v), share])
    rep.table(title, [("", "left"), ("value", "right"), ("share", "right")], rows)
    rep.console.print()


# ----------------------------------------------------------------- the rest
def _other_values(rep: _Report, s: Dict[str, Any], used: Set[str]) -> None:
    rest = [(k, v) for k, v in s.items() if k not in used and k not in ("notes", "setup") and v is not None]
    scalars = [(k, v) for k, v in rest if not isinstance(v, (dict, list, tuple))]
    if scalars:
        rep.heading("Other values")
        half = (len(scalars) + 1) // 2
        left, right = scalars[:half], scalars[half:]
        rows = []
        for i in range(half):
            row = [left[i][0], fmt(*left[i])]
            row += [right[i][0], fmt(*right[i])] if i < len(right) else ["", ""]
            rows.append(row)
        rep.grid(rows, ("left", "right", "left", "right"))
    for k, v in rest:
        if isinstance(v, dict):
            _breakdown_table(rep, k, v)
        elif isinstance(v, (list, tuple)):
            rep.key_values([(k.replace("_", " "), ", ".join(map(str, v)))])


def render_tables(analysis, summary: Dict[str, Any], kind: str, color: Optional[bool] = None) -> str:
    """The readable report of an inference or training summary, as a string
    (ANSI colours only when `color`, by default when stdout is a terminal)."""
    if color is None:
        color = stdout_wants_color()
    rep = _Report(color) if color else _PlainReport()
    used: Set[str] = set()
    if kind == "inference":
        _inference(rep, analysis, summary, used)
    else:
        _training(rep, analysis, summary, used)
    _other_values(rep, summary, used)
    notes = summary.get("notes") or []
    rep.warnings([notes] if isinstance(notes, str) else list(notes))
    return rep.text()


__all__ = ["render_tables", "part_label", "unit_of"]
