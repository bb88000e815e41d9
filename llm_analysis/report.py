"""Presentation of summary dicts: readable text reports and output files.

Arithmetic never happens here: the orchestrators return plain dicts in base
units and this module only formats them.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from enum import Enum
from pathlib import Path
from typing import Any, Dict, Optional

from .utils import _latency_to_string, _num_to_string


def jsonable(obj: Any) -> Any:
    """The summary with enums as names and non-finite floats as strings."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, Enum):
        return obj.name
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    return obj


def _fmt(key: str, value: Any) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return str(value)
    if isinstance(value, Enum):
        return value.name
    if not isinstance(value, (int, float)):
        return str(value)
    k = key.lower()
    if "latency" in k or k.endswith("_s") or "time_to_first" in k or "time_per_output" in k:
        return _latency_to_string(value)
    if "memory" in k or k.endswith("_bytes") or "bytes" in k:
        return f"{value / 1e9:.3f} GB" if abs(value) >= 1e7 else f"{value / 1e6:.3f} MB"
    if "flops" in k and "efficiency" not in k and "achieved" not in k:
        return _num_to_string(value) + "FLOPs"
    if "cost" in k:
        return f"${value:.4g}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return _num_to_string(value) if value >= 10_000 else str(value)


def readable_summary(summary: Dict[str, Any], title: str = "Summary") -> str:
    """Flat key: value lines with units, nested breakdowns indented."""
    lines = [f"-------------------- {title} --------------------"]
    width = max((len(k) for k in summary), default=10)
    for key, value in summary.items():
        if isinstance(value, dict):
            lines.append(f"{key}:")
            for sub, sv in value.items():
                if isinstance(sv, dict):
                    parts = ", ".join(f"{k2}={_fmt(k2, v2)}" for k2, v2 in sv.items())
                    lines.append(f"    {sub}: {parts}")
                else:
                    lines.append(f"    {sub}: {_fmt(sub, sv)}")
        elif isinstance(value, list):
            lines.append(f"{key}:")
            lines.extend(f"    - {v}" for v in value)
        else:
            lines.append(f"{key.ljust(width)} : {_fmt(key, value)}")
    return "\n".join(lines)


def render(analysis, summary: Dict[str, Any], kind: str) -> str:
    """The terminal report (rich tables when available live in report_tables)."""
    try:
        from .report_tables import render_tables
        return render_tables(analysis, summary, kind)
    except ImportError:
        return readable_summary(summary, f"{kind.title()} summary")


def format_configs(analysis, name: str = "Configs") -> str:
    parts = [f"{name}:", f"  model: {analysis.model_config.name}", f"  gpu: {analysis.gpu_config.name}",
             f"  dtype: {analysis.dtype_config.name}", f"  parallelism: {analysis.parallelism_config.model_dump()}",
             f"  flops_efficiency: {analysis.flops_efficiency}, hbm_memory_efficiency: {analysis.hbm_memory_efficiency}"]
    return "\n".join(parts)


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def output_file_stem(analysis, kind: str, suffix: str = "") -> str:
    stem = f"{analysis.get_configs_desc()}-{kind}"
    return f"{stem}{'-' + suffix if suffix else ''}".replace("/", "_")


def write_summary_files(analysis, summary: Dict[str, Any], output_dir: str, print_human_readable: bool = True,
                        output_file_suffix: str = "", kind: Optional[str] = None) -> str:
    """Write `<setup>-<kind>[-suffix].json` and `.txt` into output_dir (atomically);
    returns the JSON path."""
    kind = kind or ("training" if "gradient_accumulation_steps" in summary else "inference")
    stem = output_file_stem(analysis, kind, output_file_suffix)
    out = Path(output_dir)
    json_path = out / f"{stem}.json"
    _atomic_write(json_path, json.dumps(jsonable(summary), indent=2) + "\n")
    text = readable_summary(summary, f"{kind.title()} summary: {analysis.get_configs_desc()}")
    _atomic_write(out / f"{stem}.txt", text + "\n")
    if print_human_readable:
        print(text)
    return str(json_path)
