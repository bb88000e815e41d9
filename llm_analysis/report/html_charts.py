"""The charts of the HTML report as inline SVG: the roofline with one hoverable
point per operator, horizontal bars of a time breakdown, one stacked bar of
memory per GPU against its capacity, and a plan's Pareto front with every point
labelled by its layout.

Each mark that stands for a number keeps it raw in data attributes (data-value,
data-x, data-y) and describes itself in `data-tip`, the text the page's script
shows on hover or keyboard focus. The points come from the same functions the
PNG charts use (roofline_chart.rates / roofline_point, the labels of labels.py)."""

from __future__ import annotations

import math
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple

from llm_analysis.report.html_elements import attrs, esc, legend, raw_number
from llm_analysis.report.labels import part_label
from llm_analysis.report.roofline_chart import Rates, group_color, point_group, roofline_point
from llm_analysis.report.units import format_bytes, format_number, format_seconds

_WIDTH = 960
_CHAR_PX = 6.6  # width of a label character at 12px (an estimate: the page's fonts are not known here)


class Axis(NamedTuple):
    """A value range drawn between two pixel positions, on a log or a linear scale."""
    lo: float
    hi: float
    start_px: float
    end_px: float
    log: bool

    def px(self, value: float) -> float:
        if self.log:
            f = (math.log10(value) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            f = (value - self.lo) / (self.hi - self.lo)
        return self.start_px + f * (self.end_px - self.start_px)

    def ticks(self) -> List[float]:
        if self.log:
            return [10.0 ** k for k in range(math.ceil(math.log10(self.lo) - 1e-9),
                                             math.floor(math.log10(self.hi) + 1e-9) + 1)]
        step = _nice_step((self.hi - self.lo) / 6)
        first = math.ceil(self.lo / step - 1e-9) * step
        return [first + i * step for i in range(int((self.hi - first) / step + 1e-9) + 1)]


def _nice_step(raw: float) -> float:
    """1, 2 or 5 times a power of ten, at least `raw`."""
    if raw <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _decade_limits(values: Sequence[float], pad: float) -> Tuple[float, float]:
    """Powers of ten around the positive `values`, with a factor `pad` of room either side."""
    lo = 10 ** math.floor(math.log10(min(values) / pad))
    hi = 10 ** math.ceil(math.log10(max(values) * pad))
    return lo, hi


def _tick_text(v: float) -> str:
    if v == 0:
        return "0"
    if 1e-3 <= abs(v) < 1e5:
        return f"{v:g}"
    return f"1e{round(math.log10(v))}" if v > 0 and math.isclose(math.log10(v), round(math.log10(v))) else f"{v:.3g}"


def _axes(x: Axis, y: Axis, x_title: str, y_title: str) -> str:
    """Grid lines, tick labels and titles of a chart's two axes."""
    out = ['<g class="grid">']
    out += [f'<line x1="{x.px(t):.1f}" y1="{y.start_px:.1f}" x2="{x.px(t):.1f}" y2="{y.end_px:.1f}"/>' for t in x.ticks()]
    out += [f'<line x1="{x.start_px:.1f}" y1="{y.px(t):.1f}" x2="{x.end_px:.1f}" y2="{y.px(t):.1f}"/>' for t in y.ticks()]
    out.append('</g><g class="axis">')
    out.append(f'<line x1="{x.start_px}" y1="{y.start_px}" x2="{x.end_px}" y2="{y.start_px}"/>')
    out.append(f'<line x1="{x.start_px}" y1="{y.start_px}" x2="{x.start_px}" y2="{y.end_px}"/>')
    out += [f'<text x="{x.px(t):.1f}" y="{y.start_px + 16:.1f}" text-anchor="middle">{esc(_tick_text(t))}</text>'
            for t in x.ticks()]
    out += [f'<text x="{x.start_px - 6:.1f}" y="{y.px(t) + 4:.1f}" text-anchor="end">{esc(_tick_text(t))}</text>'
            for t in y.ticks()]
    out.append(f'<text x="{(x.start_px + x.end_px) / 2:.1f}" y="{y.start_px + 36:.1f}" text-anchor="middle">'
               f'{esc(x_title)}</text>')
    mid = (y.start_px + y.end_px) / 2
    out.append(f'<text transform="translate({x.start_px - 52:.1f},{mid:.1f}) rotate(-90)" text-anchor="middle">'
               f'{esc(y_title)}</text></g>')
    return "".join(out)


def _svg(width: float, height: float, body: str, label: str, chart_id: str) -> str:
    return (f'<svg class="chart" id="{esc(chart_id)}" xmlns="http://www.w3.org/2000/svg" role="img" '
            f'aria-label="{esc(label)}" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
            f'height="{height:.0f}">{body}</svg>')


def swatch(color: str, shape: str = "square", dashed: bool = False) -> str:
    """A small legend mark: a coloured square, a marker shape, or a line."""
    if shape == "line":
        dash = ' stroke-dasharray="5,3"' if dashed else ""
        return f'<svg width="24" height="12"><line x1="0" y1="6" x2="24" y2="6" stroke="{color}" stroke-width="2"{dash}/></svg>'
    mark = _marker(shape, 7, 6, 5, f'fill="{color}" stroke="#000" stroke-width="0.6"')
    return f'<svg width="14" height="12">{mark}</svg>'


def _marker(shape: str, x: float, y: float, r: float, extra: str) -> str:
    if shape == "triangle":
        pts = f"{x:.1f},{y - r * 1.15:.1f} {x - r:.1f},{y + r * 0.75:.1f} {x + r:.1f},{y + r * 0.75:.1f}"
        return f'<polygon points="{pts}" {extra}/>'
    if shape == "square":
        return f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}" {extra}/>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" {extra}/>'


# ---------------------------------------------------------------- roofline
class RooflinePhase(NamedTuple):
    """One phase's operators on the roofline: its label, marker shape and operator records."""
    label: str
    shape: str
    records: List[Dict[str, Any]]


def operator_tip(r: Dict[str, Any], phase: str) -> str:
    """What an operator is and does: the tooltip of its roofline point."""
    repeat = r.get("repeat", 1)
    where = f"{r['layer_group']} layers, x{repeat}" if repeat != 1 else r["layer_group"]
    lines = [f"{r['name']} ({part_label(r['group'])}; {where}) in {phase}", f"shapes: {r['shapes']}",
             f"FLOPs per GPU: {format_number(r['flops_per_gpu'], 'FLOPs')}",
             f"bytes moved per GPU: {format_bytes(r['bytes_per_gpu'])}",
             f"FLOPs/byte: {r['arithmetic_intensity']:.4g}",
             f"time: {format_seconds(r['latency_s'])}" + (f" per call, {format_seconds(r['latency_s'] * repeat)} "
                                                          f"for all {repeat}" if repeat != 1 else ""),
             f"bound: {r['bound']}"]
    xy = roofline_point(r)
    if xy is not None:
        lines.append(f"attained: {xy[1]:.4g} TFLOP/s")
    return "\n".join(lines)


def _operator_line(r: Dict[str, Any]) -> str:
    """One operator in one line, for a point that stands for several."""
    repeat = r.get("repeat", 1)
    return (f"{r['name']} ({part_label(r['group'])}{f', x{repeat}' if repeat != 1 else ''}): "
            f"{format_number(r['flops_per_gpu'], 'FLOPs')}, {format_bytes(r['bytes_per_gpu'])}, "
            f"{r['arithmetic_intensity']:.4g} FLOPs/byte, {format_seconds(r['latency_s'])} per call, "
            f"{r['bound']}-bound")


class _Point(NamedTuple):
    """Operators of one phase drawn as one mark (they lie within a few pixels of each other)."""
    phase: RooflinePhase
    x_px: float
    y_px: float
    records: List[Dict[str, Any]]


def _merge_close(placed, x: Axis, y: Axis, radius_px: float = 3.0) -> List[_Point]:
    """One mark per cluster of a phase's operators closer than `radius_px` on the chart (their
    marks would hide each other, and with them all but one tooltip)."""
    points: List[_Point] = []
    for ph, r, (ai, tf) in placed:
        px, py = x.px(ai), y.px(tf)
        for p in points:
            if p.phase is ph and abs(p.x_px - px) <= radius_px and abs(p.y_px - py) <= radius_px:
                p.records.append(r)
                break
        else:
            points.append(_Point(ph, px, py, [r]))
    return points


def _point_mark(p: _Point) -> str:
    first = p.records[0]
    if len(p.records) == 1:
        tip = operator_tip(first, p.phase.label)
    else:
        tip = "\n".join([f"{len(p.records)} operators at this point in {p.phase.label}:"]
                        + [_operator_line(r) for r in p.records])
    ai, tf = roofline_point(first)
    mark_attrs = attrs(class_="op-point", tabindex=0, data_op=", ".join(r["name"] for r in p.records),
                       data_phase=p.phase.label, data_flops=raw_number(first["flops_per_gpu"]),
                       data_bytes=raw_number(first["bytes_per_gpu"]), data_time_s=raw_number(first["latency_s"]),
                       data_bound=first["bound"], data_x=raw_number(ai), data_y=raw_number(tf), data_tip=tip)
    return _marker(p.phase.shape, p.x_px, p.y_px, 6,
                   f'fill="{group_color(point_group(first))}" fill-opacity="0.85" stroke="#000" stroke-width="0.7"'
                   + mark_attrs)


def _roof_path(x: Axis, y: Axis, tflops: float, bw_gbs: float) -> str:
    steps = 240
    pts = []
    for i in range(steps + 1):
        v = x.lo * (x.hi / x.lo) ** (i / steps)
        pts.append(f"{x.px(v):.1f},{y.px(min(tflops, bw_gbs * v / 1e3)):.1f}")
    return " ".join(pts)


def roofline_svg(rates: Rates, phases: Sequence[RooflinePhase], title: str, chart_id: str) -> Tuple[str, str]:
    """(SVG, legend) of the roofline: every timed operator with FLOPs of each phase, placed by
    FLOPs/byte and attained TFLOP/s per GPU, under the roof of the achieved rates (and the
    hardware peak, dashed, when the rates are below it)."""
    placed = [(ph, r, roofline_point(r)) for ph in phases for r in ph.records]
    placed = [(ph, r, xy) for ph, r, xy in placed if xy is not None]
    xs = [xy[0] for _, _, xy in placed] + [rates.ridge]
    ys = [xy[1] for _, _, xy in placed] + [rates.tflops]
    width, height, left, right, top, bottom = _WIDTH, 520, 80, 24, 16, 56
    x = Axis(*_decade_limits(xs, 3), left, width - right, True)
    y_lo, _ = _decade_limits(ys, 3)
    y = Axis(y_lo, 10 ** math.ceil(math.log10(max(rates.tflops, rates.peak_tflops) * 2)), height - bottom, top, True)
    body = [_axes(x, y, "arithmetic intensity (FLOPs per byte moved)", "attained TFLOP/s per GPU")]
    body.append(f'<clipPath id="{chart_id}-area"><rect x="{left}" y="{top}" width="{width - left - right}" '
                f'height="{height - top - bottom}"/></clipPath><g clip-path="url(#{chart_id}-area)">')
    roof_tip = f"roof: {rates.tflops:.4g} TFLOP/s, {rates.bw_gbs:.4g} GB/s HBM (the rates the times use)"
    below_peak = abs(rates.peak_tflops - rates.tflops) > 1e-9 or abs(rates.peak_bw_gbs - rates.bw_gbs) > 1e-9
    if below_peak:
        body.append(f'<polyline points="{_roof_path(x, y, rates.peak_tflops, rates.peak_bw_gbs)}" fill="none" '
                    f'stroke="#868e96" stroke-width="1.5" stroke-dasharray="6,4"/>')
    body.append(f'<polyline class="roof" points="{_roof_path(x, y, rates.tflops, rates.bw_gbs)}" fill="none" '
                f'stroke="#000" stroke-width="2.5"><title>{esc(roof_tip)}</title></polyline>')
    rx = x.px(rates.ridge)
    ridge_text = f"ridge point {rates.ridge:.0f} FLOPs/byte: memory-bound left, compute-bound right"
    room_left = rx - 6 - len(ridge_text) * _CHAR_PX >= left  # else the text goes right of the line
    body.append(f'<line x1="{rx:.1f}" y1="{y.start_px}" x2="{rx:.1f}" y2="{y.end_px}" stroke="#868e96" '
                f'stroke-dasharray="2,3"/><text x="{rx - 6 if room_left else rx + 6:.1f}" '
                f'y="{y.px(rates.tflops) - 10:.1f}" text-anchor="{"end" if room_left else "start"}" fill="#6c757d">'
                f'{esc(ridge_text)}</text></g>')
    body += [_point_mark(p) for p in _merge_close(placed, x, y)]
    groups = list(dict.fromkeys(point_group(r) for _, r, _ in placed))
    items = [(swatch("#fff", ph.shape), ph.label) for ph in phases]
    items += [(swatch(group_color(g)), part_label(g)) for g in groups]
    items.append((swatch("#000", "line"), roof_tip))
    if below_peak:
        items.append((swatch("#868e96", "line", dashed=True),
                      f"hardware peak: {rates.peak_tflops:.4g} TFLOP/s, {rates.peak_bw_gbs:g} GB/s"))
    return _svg(width, height, "".join(body), title, chart_id), legend(items)


# ---------------------------------------------------------------- bars
class Bar(NamedTuple):
    """One bar: label, raw value, colour, tooltip text, and the key it stands for."""
    label: str
    value: float
    color: str
    tip: str
    key: str


def bars_svg(bars: Sequence[Bar], total: float, text, title: str, chart_id: str) -> str:
    """Horizontal bars with their values (`text(value)`) and shares of `total`."""
    row_h, label_w, value_w = 24, 230, 190
    width = _WIDTH
    height = row_h * len(bars) + 8
    vmax = max((b.value for b in bars), default=1.0) or 1.0
    span = width - label_w - value_w
    body = []
    for i, b in enumerate(bars):
        y0 = 4 + i * row_h
        w = max(b.value / vmax * span, 1.0 if b.value > 0 else 0.0)
        share = f" ({b.value / total:.1%})" if total else ""
        body.append(f'<text x="{label_w - 8}" y="{y0 + 15}" text-anchor="end">{esc(b.label)}</text>')
        body.append(f'<rect x="{label_w}" y="{y0 + 3}" width="{w:.1f}" height="{row_h - 8}" fill="{b.color}" '
                    f'stroke="#343a40" stroke-width="0.5"'
                    + attrs(class_="bar", tabindex=0, data_key=b.key, data_value=raw_number(b.value), data_tip=b.tip)
                    + "/>")
        body.append(f'<text x="{label_w + w + 6:.1f}" y="{y0 + 15}">{esc(text(b.value) + share)}</text>')
    return _svg(width, height, "".join(body), title, chart_id)


# ---------------------------------------------------------------- memory
class MemoryPart(NamedTuple):
    label: str
    key: str
    bytes: float
    color: str


def memory_svg(parts: Sequence[MemoryPart], capacity: float, title: str, chart_id: str) -> Tuple[str, str]:
    """(SVG, legend) of one bar of memory terms against the GPU's capacity (dashed line)."""
    width, height, left, right = _WIDTH, 86, 8, 24
    used = sum(p.bytes for p in parts if p.bytes > 0)
    scale = (width - left - right) / max(capacity, used, 1.0)
    body, x0 = [], float(left)
    for p in parts:
        if p.bytes <= 0:
            continue
        w = p.bytes * scale
        tip = f"{p.label}: {format_bytes(p.bytes)} ({p.bytes / capacity:.1%} of {format_bytes(capacity)})"
        body.append(f'<rect x="{x0:.1f}" y="14" width="{w:.1f}" height="36" fill="{p.color}" stroke="#343a40" '
                    f'stroke-width="0.5"' + attrs(class_="mem", tabindex=0, data_key=p.key,
                                                  data_value=raw_number(p.bytes), data_tip=tip) + "/>")
        if w > 70:
            body.append(f'<text x="{x0 + w / 2:.1f}" y="36" text-anchor="middle" pointer-events="none">'
                        f'{esc(p.label)}</text>')
        x0 += w
    cx = left + capacity * scale
    anchor = "end" if used <= capacity else "start"
    body.append(f'<line x1="{cx:.1f}" y1="6" x2="{cx:.1f}" y2="58" stroke="#000" stroke-dasharray="5,3"/>'
                f'<text x="{cx - 4 if anchor == "end" else cx + 4:.1f}" y="74" text-anchor="{anchor}">'
                f'GPU memory {esc(format_bytes(capacity))}</text>')
    items = [(swatch(p.color), f"{p.label}: {format_bytes(p.bytes)} ({p.bytes / capacity:.1%})")
             for p in parts if p.bytes > 0]
    return _svg(width, height, "".join(body), title, chart_id), legend(items)


# ---------------------------------------------------------------- Pareto front
class FrontPoint(NamedTuple):
    """A point of a plan's Pareto front: its coordinates, its layout label and its tooltip."""
    x: float
    y: float
    label: str
    tip: str


# where a label may go beside its point: (dx, dy) of the text's start, tried in this order
_LABEL_SPOTS = ((9, -8), (9, 16), (-9, -8), (-9, 16), (9, -22), (9, 30), (-9, -22), (-9, 30), (9, -36), (9, 44))


def _place_labels(marks: Sequence[Tuple[float, float, str]], area: Tuple[float, float, float, float]
                  ) -> List[Tuple[float, float, str]]:
    """(x, y, text-anchor) for each mark's label (x_px, y_px, text): the first spot beside the
    mark whose box overlaps no label placed before it, no mark, and stays inside `area`
    (left, top, right, bottom); the first spot when none is free."""
    boxes: List[Tuple[float, float, float, float]] = [(x - 7, y - 7, x + 7, y + 7) for x, y, _ in marks]
    placed = []
    for x, y, text in marks:
        w = len(text) * _CHAR_PX
        choice = None
        for dx, dy in _LABEL_SPOTS:
            left = x + dx if dx > 0 else x + dx - w
            box = (left, y + dy - 11, left + w, y + dy + 3)
            inside = box[0] >= area[0] and box[1] >= area[1] and box[2] <= area[2] and box[3] <= area[3]
            free = not any(b[0] < box[2] and box[0] < b[2] and b[1] < box[3] and box[1] < b[3] for b in boxes)
            if inside and free:
                choice = (box, dx, dy)
                break
        if choice is None:
            dx, dy = _LABEL_SPOTS[0]
            choice = ((x + dx, y + dy - 11, x + dx + w, y + dy + 3), dx, dy)
        box, dx, dy = choice
        boxes.append(box)
        placed.append((x + dx, y + dy, "start" if dx > 0 else "end"))
    return placed


def pareto_svg(points: Sequence[FrontPoint], x_title: str, y_title: str, x_scale: float, title: str,
               chart_id: str) -> str:
    """The front as a line through points, each labelled with its layout beside it where the
    label hides no other label or point; x drawn times `x_scale` (e.g. seconds as ms)."""
    width, height, left, right, top, bottom = _WIDTH, 480, 80, 24, 24, 56
    xs = [p.x * x_scale for p in points] or [0.0, 1.0]
    ys = [p.y for p in points] or [0.0, 1.0]
    x_pad = (max(xs) - min(xs)) * 0.08 or max(abs(xs[0]) * 0.1, 1e-9)
    y_pad = (max(ys) - min(ys)) * 0.1 or max(abs(ys[0]) * 0.1, 1e-9)
    x = Axis(max(min(xs) - x_pad, 0.0), max(xs) + x_pad, left, width - right, False)
    y = Axis(max(min(ys) - y_pad, 0.0), max(ys) + y_pad, height - bottom, top, False)
    body = [_axes(x, y, x_title, y_title)]
    order = sorted(range(len(points)), key=lambda i: points[i].x)
    line = " ".join(f"{x.px(points[i].x * x_scale):.1f},{y.px(points[i].y):.1f}" for i in order)
    body.append(f'<polyline points="{line}" fill="none" stroke="#1c7ed6" stroke-width="1.5"/>')
    marks = [(x.px(points[i].x * x_scale), y.px(points[i].y), points[i].label) for i in order]
    spots = _place_labels(marks, (left + 2, top - 20, width - 2, height - bottom - 2))
    for i, (px, py, _), (lx, ly, anchor) in zip(order, marks, spots):
        p = points[i]
        if abs(ly - py) > 16:  # a label set further off: a leader line says whose it is
            body.append(f'<line x1="{px:.1f}" y1="{py:.1f}" x2="{lx:.1f}" y2="{ly - 4:.1f}" stroke="#adb5bd" '
                        f'stroke-width="0.8"/>')
        body.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="6" fill="#1c7ed6" stroke="#000" stroke-width="0.7"'
                    + attrs(class_="front-point", tabindex=0, data_x=raw_number(p.x), data_y=raw_number(p.y),
                            data_label=p.label, data_tip=p.tip) + "/>")
        body.append(f'<text class="front-label" x="{lx:.1f}" y="{ly:.1f}" text-anchor="{anchor}">{esc(p.label)}'
                    f'</text>')
    return _svg(width, height, "".join(body), title, chart_id)
