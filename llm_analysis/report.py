"""Presentation of summary dicts: units, readable text reports and output files.

Arithmetic never happens here: the orchestrators return plain dicts in base
units (seconds, bytes, FLOPs, counts) and this module only formats them. The
tables of the terminal report live in `report_tables.py` (rich, imported only
when a report is rendered); charts in `plots.py` (matplotlib, optional).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
from enum import Enum
from pathlib import Path
from typing import Any, Dict, List, Optional

from .utils import _latency_to_string, _num_to_string

logger = logging.getLogger(__name__)


def jsonable(obj: Any) -> Any:
    """The summary with enums as names and non-finite floats as strings, so that
    `json.dumps(..., allow_nan=False)` gives strict JSON."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, Enum):
        return obj.name
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if hasattr(obj, "model_dump"):  # pydantic configs
        return jsonable(obj.model_dump())
    return obj


def to_json(summary: Dict[str, Any]) -> str:
    return json.dumps(jsonable(summary), indent=2, allow_nan=False)


# ------------------------------------------------------------------ units
def unit_of(key: str) -> Optional[str]:
    """The unit a summary key's value is in, guessed from its name (base units).

    Returns one of: ratio, GB/s, TFLOP/s, FLOP/s, FLOPs/byte, tok/s, $, GPU-hours,
    s, days, bytes, FLOPs, params, or None (plain number)."""
    k = key.lower()
    if k.endswith(("_stage", "_index", "_interleave")):
        return None
    if "efficiency" in k or k in ("mfu", "hfu") or k.endswith(("_mfu", "_hfu", "_fraction", "_share", "_ratio")) \
            or "utilization" in k:
        return "ratio"
    if k.endswith("_gbs") or "bandwidth_in_gb" in k:
        return "GB/s"
    if "bytes_per_s" in k or ("bandwidth" in k and "bytes" in k):
        return "bytes/s"
    if "tflops" in k:
        return "TFLOP/s"
    if "intensity" in k or "ridge_point" in k or "flops_per_byte" in k:
        return "FLOPs/byte"
    if "tokens_per_sec" in k or "tokens_per_s" in k:
        return "tok/s"
    if "cost" in k or "dollar" in k:
        return "$"
    if "gpu_hours" in k:
        return "GPU-hours"
    if k.endswith("_days") or k == "days":
        return "days"
    if "latency" in k or k.endswith("_s") or k.startswith("time_") or k.endswith("_time") or "seconds" in k:
        return "s"
    if "memory" in k or "bytes" in k:
        return "bytes"
    if "flops" in k:
        return "FLOP/s" if ("per_s" in k or "per_gpu_per" in k or k.startswith("achieved")) else "FLOPs"
    if "params" in k:
        return "params"
    return None


def format_bytes(value: float) -> str:
    a = abs(value)
    if a >= 1e12:
        return f"{value / 1e12:.2f} TB"
    if a >= 1e9:
        return f"{value / 1e9:.2f} GB"
    if a >= 1e6:
        return f"{value / 1e6:.2f} MB"
    if a >= 1e3:
        return f"{value / 1e3:.2f} KB"
    return f"{value:.0f} B"


def format_seconds(value: float) -> str:
    if value < 0:
        return "-" + format_seconds(-value)
    if value == 0:
        return "0 s"
    return _latency_to_string(value)


def format_count(value: float) -> str:
    if isinstance(value, int) and abs(value) < 10_000:
        return str(value)
    if isinstance(value, float) and abs(value) < 10_000:
        return f"{value:.4g}"
    return _num_to_string(value)


def format_number(value: float, unit: Optional[str]) -> str:
    """A number in base units with its unit, e.g. 1.6e10 bytes -> '16.06 GB'."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if unit == "ratio":
        return f"{value:.3g}" if value > 1.5 else f"{value * 100:.3g}%"
    if unit == "GB/s":
        return f"{value:.4g} GB/s" if value < 1e5 else f"{value / 1e3:.4g} TB/s"
    if unit == "bytes/s":
        return f"{value / 1e9:.4g} GB/s"
    if unit == "TFLOP/s":
        return f"{value:.4g} TFLOP/s"
    if unit == "FLOP/s":
        return f"{value / 1e12:.4g} TFLOP/s" if value >= 1e9 else f"{value:.4g} FLOP/s"
    if unit == "FLOPs/byte":
        return f"{value:.3g} FLOPs/byte" if value < 1e4 else f"{value:.0f} FLOPs/byte"
    if unit == "tok/s":
        return _num_to_string(value, 1) + " tok/s" if value >= 1000 else f"{value:.4g} tok/s"
    if unit == "$":
        if abs(value) >= 1 or value == 0:
            return f"${value:,.2f}"
        digits = min(max(2, 2 - math.floor(math.log10(abs(value)))), 10)  # 3 significant digits
        return f"${value:.{digits}f}"
    if unit == "GPU-hours":
        return f"{value:,.0f} GPU-hours" if value >= 100 else f"{value:.3g} GPU-hours"
    if unit == "days":
        return f"{value:.3g} days"
    if unit == "s":
        return format_seconds(value)
    if unit == "bytes":
        return format_bytes(value)
    if unit == "FLOPs":
        return _num_to_string(value) + "FLOPs" if abs(value) >= 1000 else f"{value:.4g} FLOPs"
    if unit == "params":
        return _num_to_string(value)
    return format_count(value)


def fmt(key: str, value: Any, parent: str = "") -> str:
    """Format one summary value for reading; `parent` is the key of the dict the
    value sits in (breakdowns: 'memory_breakdown_per_gpu' -> {'weights': ...})."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return str(value)
    if isinstance(value, Enum):
        return value.name
    if not isinstance(value, (int, float)):
        return str(value)
    unit = unit_of(key)
    if unit is None and parent:
        unit = unit_of(parent)
    return format_number(value, unit)


_fmt = fmt  # the name older code used


def readable_summary(summary: Dict[str, Any], title: str = "Summary") -> str:
    """Flat `key : value` lines with units; nested breakdowns indented."""
    lines = [f"-------------------- {title} --------------------"]
    width = max((len(k) for k in summary), default=10)
    for key, value in summary.items():
        if isinstance(value, dict):
            lines.append(f"{key}:")
            for sub, sv in value.items():
                if isinstance(sv, dict):
                    parts = ", ".join(f"{k2}={fmt(k2, v2, key)}" for k2, v2 in sv.items())
                    lines.append(f"    {sub}: {parts}")
                else:
                    lines.append(f"    {sub}: {fmt(sub, sv, key)}")
        elif isinstance(value, (list, tuple)):
            lines.append(f"{key}:")
            lines.extend(f"    - {v}" for v in value)
        else:
            lines.append(f"{key.ljust(width)} : {fmt(key, value)}")
    return "\n".join(lines)


def render(analysis, summary: Dict[str, Any], kind: str, color: Optional[bool] = None) -> str:
    """The terminal report: rich tables (report_tables.py); without rich, the
    flat readable summary."""
    try:
        from .report_tables import render_tables
    except ImportError:  # rich not installed
        return readable_summary(summary, f"{kind.title()} summary")
    return render_tables(analysis, summary, kind, color=color)


def format_configs(analysis, name: str = "Configs") -> str:
    parts = [f"{name}:", f"  model: {analysis.model_config.name}", f"  gpu: {analysis.gpu_config.name}",
             f"  dtype: {analysis.dtype_config.name}", f"  parallelism: {analysis.parallelism_config.model_dump()}",
             f"  flops_efficiency: {analysis.flops_efficiency}, hbm_memory_efficiency: {analysis.hbm_memory_efficiency}"]
    return "\n".join(parts)


def setup_dict(analysis) -> Dict[str, Any]:
    """What the analysis ran on: names, layout and efficiencies (for the JSON files)."""
    p = analysis.parallelism_config
    return {
        "model_name": analysis.model_config.name, "gpu_name": analysis.gpu_config.name,
        "dtype_name": analysis.dtype_config.name,
        "tp_size": p.tp_size, "pp_size": p.pp_size, "dp_size": p.dp_size, "ep_size": p.ep_size,
        "sp_size": p.sp_size,
        "flops_efficiency": analysis.flops_efficiency, "hbm_memory_efficiency": analysis.hbm_memory_efficiency,
        "intra_node_memory_efficiency": analysis.intra_node_memory_efficiency,
        "inter_node_memory_efficiency": analysis.inter_node_memory_efficiency,
        "achieved_tflops": analysis.achieved_tflops,
        "achieved_memory_bandwidth_GBs": analysis.achieved_memory_bandwidth_GBs,
    }


def summary_with_setup(analysis, summary: Dict[str, Any]) -> Dict[str, Any]:
    """The summary plus a `setup` entry (unless it has one): what the JSON files hold."""
    if "setup" in summary:
        return dict(summary)
    return {**summary, "setup": setup_dict(analysis)}


# ------------------------------------------------------------------ files
def _atomic_write(path: Path, text: str) -> None:
    """Write to a temporary file in the same folder, then rename over `path`:
    readers never see a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        mask = os.umask(0o022)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes 0600; these are ordinary output files
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]+")
_MAX_STEM = 200  # file systems allow 255 bytes per name; leave room for "-roofline.png"


def safe_name(text: str) -> str:
    """`text` as a portable file-name part: only letters, digits and . _ + = -"""
    out = _UNSAFE.sub("_", str(text)).strip("._-")
    return out or "x"


def _num(v: float) -> str:
    return f"{round(v, 3):g}"


def output_file_stem(analysis, kind: str, suffix: str = "", summary: Optional[Dict[str, Any]] = None) -> str:
    """The common stem of every output file of one run, from its setup:

    `<model>-<gpu>-<dtype>-tp<t>-pp<p>-dp<d>-ep<e>-sp<s>-fe<flops eff>-hbme<HBM eff>
    [-tflops<achieved>][-bw<achieved GB/s>]-<kind>[-bs<batch>-seq<len>...][-<suffix>]`,
    with every character outside [A-Za-z0-9._+=-] replaced by '_'."""
    p = analysis.parallelism_config
    parts = [safe_name(analysis.model_config.name), safe_name(analysis.gpu_config.name),
             safe_name(analysis.dtype_config.name),
             f"tp{p.tp_size}-pp{p.pp_size}-dp{p.dp_size}-ep{p.ep_size}-sp{p.sp_size}",
             f"fe{_num(analysis.flops_efficiency)}-hbme{_num(analysis.hbm_memory_efficiency)}"]
    if analysis.achieved_tflops is not None:
        parts.append(f"tflops{_num(analysis.achieved_tflops)}")
    if analysis.achieved_memory_bandwidth_GBs is not None:
        parts.append(f"bw{_num(analysis.achieved_memory_bandwidth_GBs)}")
    parts.append(safe_name(kind))
    if summary:
        if kind == "inference" and "batch_size_per_gpu" in summary:
            parts.append(f"bs{summary['batch_size_per_gpu']}-seq{summary.get('seq_len')}"
                         f"-gen{summary.get('num_tokens_to_generate')}")
        elif kind == "training" and "batch_size_per_gpu" in summary:
            parts.append(f"bs{summary['batch_size_per_gpu']}-seq{summary.get('seq_len')}"
                         f"-gbs{summary.get('global_batch_size')}")
    stem = "-".join(parts)
    suffix = safe_name(suffix)[:64] if suffix else ""
    over = len(stem) + len(suffix) + 1 - _MAX_STEM
    if over > 0:  # keep the setup readable: shorten the model name first
        keep = max(len(parts[0]) - over, 8)
        stem = stem[:keep] + stem[len(parts[0]):]
        stem = stem[:_MAX_STEM - len(suffix) - 1]
    return f"{stem}-{suffix}" if suffix else stem


def write_summary_files(analysis, summary: Dict[str, Any], output_dir: str, print_human_readable: bool = True,
                        output_file_suffix: str = "", kind: Optional[str] = None) -> str:
    """Write `<stem>.json` (the summary plus its setup) and `<stem>.txt` (the
    readable report and every value with units) into output_dir, atomically;
    returns the JSON path."""
    kind = kind or ("training" if "gradient_accumulation_steps" in summary else "inference")
    stem = output_file_stem(analysis, kind, output_file_suffix, summary)
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        from .errors import ConfigError
        raise ConfigError(f"output_dir = {output_dir!r} exists and is not a directory")
    json_path = out / f"{stem}.json"
    _atomic_write(json_path, to_json(summary_with_setup(analysis, summary)) + "\n")
    report = render(analysis, summary, kind, color=False)
    flat = readable_summary(summary, f"All values ({kind})")
    _atomic_write(out / f"{stem}.txt", f"{report}\n\n{flat}\n")
    logger.info("wrote %s/%s.json and .txt", out, stem)
    if print_human_readable:
        print(report)
    return str(json_path)


def output_paths(analysis, summary: Dict[str, Any], output_dir: str, kind: str, suffix: str = "") -> List[str]:
    """The JSON and text paths write_summary_files uses for this run."""
    stem = output_file_stem(analysis, kind, suffix, summary)
    return [str(Path(output_dir) / f"{stem}.json"), str(Path(output_dir) / f"{stem}.txt")]
