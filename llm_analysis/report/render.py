"""Summary dicts (plain, in base units: the orchestrators do the arithmetic) as JSON, the flat
readable summary, the terminal report (report/tables.py) and the .json / .txt output files."""

from __future__ import annotations

import json
import logging
import math
from enum import Enum
from typing import Any, Dict, Optional

from llm_analysis.errors import ConfigError
from llm_analysis.quantities.setup_entries import calibrated_rate_entries
from llm_analysis.report.files import (analysis_class_name, atomic_write_text, output_directory, output_file_stem,
                                       safe_name)
from llm_analysis.report.units import fmt, format_bytes, format_count, format_number, format_seconds, unit_of

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


def _check_summary(summary: Any) -> None:
    if not isinstance(summary, dict):
        raise ConfigError(f"summary_dict = {type(summary).__name__} {summary!r:.60}; valid: a summary dict "
                          "(what inference(), training() or serve() return)")


def readable_summary(summary: Dict[str, Any], title: str = "Summary") -> str:
    """Flat `key : value` lines with units; nested breakdowns indented."""
    _check_summary(summary)
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
    """The terminal report (report/tables.py); without rich, the flat readable summary."""
    try:
        from llm_analysis.report.tables import render_tables
    except ImportError:  # rich not installed
        return readable_summary(summary, f"{kind.title()} summary")
    return render_tables(analysis, summary, kind, color=color)


def format_configs(analysis, name: str = "Configs") -> str:
    parts = [f"{name}:", f"  model: {analysis.model_config.name}", f"  gpu: {analysis.gpu_config.name}",
             f"  dtype: {analysis.dtype_config.name}", f"  parallelism: {analysis.parallelism_config.model_dump()}",
             f"  flops_efficiency: {analysis.flops_efficiency}, hbm_memory_efficiency: {analysis.hbm_memory_efficiency}"]
    return "\n".join(parts)


def log_configs(analysis, name: str = "Configs") -> None:
    """`format_configs` to the log (the mirrored `print_config` logs rather than prints)."""
    logger.info(format_configs(analysis, name))


def configs_desc(analysis) -> str:
    """One line naming the setup, as the mirrored `get_configs_desc` writes it:
    model-gpu-dtype-tp<t>-pp<p>-dp<d>-sp<s>-fe<flops efficiency>-ep<e>-hbme<HBM efficiency>."""
    p = analysis.parallelism_config
    return (f"{analysis.model_config.name}-{analysis.gpu_config.name}-{analysis.dtype_config.name}-tp{p.tp_size}"
            f"-pp{p.pp_size}-dp{p.dp_size}-sp{p.sp_size}-fe{round(analysis.flops_efficiency, 2)}"
            f"-ep{p.ep_size}-hbme{round(analysis.hbm_memory_efficiency, 2)}")


# the efficiencies and rates a summary may state at its top level: under the calibrated model they are the
# profile's (what the times reach), not the constructor's, which go under `lower_bound_*`
# (quantities/setup_entries.py calibrated_rate_entries)
_RATE_KEYS = ("flops_efficiency", "hbm_memory_efficiency", "achieved_tflops", "achieved_memory_bandwidth_GBs")
_LOWER_BOUND_KEYS = ("lower_bound_flops_efficiency", "lower_bound_hbm_memory_efficiency", "lower_bound_tflops",
                     "lower_bound_memory_bandwidth_GBs")


def _analysis_class(analysis) -> Dict[str, str]:
    """{"analysis_class": name} for a run whose own describer counts the model (a subclass' custom layers, an
    exact description): a script reproducing it from `setup` needs that class, not LLMAnalysis."""
    name = analysis_class_name(analysis)
    return {} if name is None else {"analysis_class": name}


def setup_dict(analysis, summary: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """What the analysis ran on: names, layout and efficiencies (for the JSON files).

    The efficiencies and rates are the ones the times use, as the summary's top-level keys state them:
    under the calibrated model the profile's, with the constructor's (only the roofline lower bounds use
    them) as `lower_bound_*`, so that a script reproducing the run from `setup` does not take the lower
    bound's efficiency for the run's; under the roofline the constructor's. `perf_model` says which."""
    p = analysis.parallelism_config
    setup = {
        "model_name": analysis.model_config.name, "gpu_name": analysis.gpu_config.name,
        "dtype_name": analysis.dtype_config.name, **_analysis_class(analysis),
        "tp_size": p.tp_size, "pp_size": p.pp_size, "dp_size": p.dp_size, "ep_size": p.ep_size,
        "sp_size": p.sp_size,
        "flops_efficiency": analysis.flops_efficiency, "hbm_memory_efficiency": analysis.hbm_memory_efficiency,
        "intra_node_memory_efficiency": analysis.intra_node_memory_efficiency,
        "inter_node_memory_efficiency": analysis.inter_node_memory_efficiency,
        "achieved_tflops": analysis.achieved_tflops,
        "achieved_memory_bandwidth_GBs": analysis.achieved_memory_bandwidth_GBs,
    }
    if analysis.profile is None:
        # a training summary states the rate its times use (achieved_tflops = peak x flops_efficiency) where the
        # constructor had none: the setup says the same
        setup.update({k: summary[k] for k in _RATE_KEYS if isinstance(summary, dict) and k in summary})
        setup["perf_model"] = "roofline"
        return setup
    # the profile's efficiencies and the lower bound's (the constructor's) as every calibrated summary states
    # them (a serve() answer states none: its setup still must not read the constructor's as the run's)
    setup.update(calibrated_rate_entries(analysis))
    summary = summary if isinstance(summary, dict) else {}
    setup.update({k: summary[k] for k in (*_RATE_KEYS, *_LOWER_BOUND_KEYS) if k in summary})
    for key in ("achieved_tflops", "achieved_memory_bandwidth_GBs"):
        if key not in summary:  # the constructor's rates are the lower bound's (lower_bound_*), not the run's
            setup[key] = None
    setup["perf_model"] = summary.get("perf_model", analysis.perf_model if isinstance(analysis.perf_model, str)
                                      else "calibrated")
    return setup


def summary_with_setup(analysis, summary: Dict[str, Any]) -> Dict[str, Any]:
    """The summary plus a `setup` entry (unless it has one): what the JSON files hold."""
    if "setup" in summary:
        return dict(summary)
    return {**summary, "setup": setup_dict(analysis, summary)}


# ------------------------------------------------------------------ files
def write_summary_files(analysis, summary: Dict[str, Any], output_dir: str, print_human_readable: bool = True,
                        output_file_suffix: str = "", kind: Optional[str] = None) -> str:
    """Write `<stem>.json` (the summary plus its setup) and `<stem>.txt` (the
    readable report and every value with units) into output_dir, atomically;
    returns the JSON path."""
    _check_summary(summary)
    kind = kind or ("training" if "gradient_accumulation_steps" in summary else "inference")
    stem = output_file_stem(analysis, kind, output_file_suffix, summary)
    out = output_directory(output_dir)
    json_path = out / f"{stem}.json"
    atomic_write_text(json_path, to_json(summary_with_setup(analysis, summary)) + "\n")
    flat = readable_summary(summary, f"All values ({kind})")
    try:
        report = render(analysis, summary, kind, color=False)
    except (KeyError, TypeError, ValueError):
        # a dict that is not a whole summary (a subset, the caller's own): the mirrored method writes any dict,
        # so its values are written and printed as they are, without the report that needs a summary's keys
        report = flat
        flat = ""
    atomic_write_text(out / f"{stem}.txt", f"{report}\n\n{flat}\n" if flat else f"{report}\n")
    logger.info("wrote %s/%s.json and .txt", out, stem)
    if print_human_readable:
        print(report)
    return str(json_path)


__all__ = ["jsonable", "to_json", "unit_of", "format_bytes", "format_seconds", "format_count", "format_number",
           "fmt", "readable_summary", "render", "format_configs", "setup_dict", "summary_with_setup", "safe_name",
           "output_file_stem", "write_summary_files"]
