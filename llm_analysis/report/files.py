"""Output files: one atomic write for every file we produce (summaries and
charts), the checked output directory, and the file-name stem of a run."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from llm_analysis.errors import ConfigError
from llm_analysis.model import LayerDescriber


def atomic_write(path: Path, write: Callable[[str], None]) -> str:
    """Call `write(tmp)` on a temporary file in `path`'s folder, then rename it over
    `path`: readers never see a half-written file. Returns str(path)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        mask = os.umask(0o022)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes 0600; these are ordinary output files
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return str(path)


def output_file_path(flag: str, value: Any, example: str) -> Path:
    """The value of an output-file flag (--html, --plot) as the path to write, checked before any
    arithmetic runs: a ConfigError line naming the flag when it is no path, names a directory, or lies
    under a file or a folder that cannot be written (missing folders are made when it is written)."""
    if value is None or isinstance(value, bool) or not str(value).strip():
        raise ConfigError(f"{flag} = {value!r} must be the path of the file to write (e.g. {flag} {example})")
    path = Path(str(value)).expanduser()
    if path.is_dir():
        raise ConfigError(f"{flag} = {str(path)!r} cannot be written: it is a directory; give a file path")
    existing = next((p for p in path.absolute().parents if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise ConfigError(f"{flag} = {str(path)!r} cannot be written: {str(existing)!r} is not a directory")
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} = {str(path)!r} cannot be written: {str(existing)!r} is not writable")
    return path


def atomic_write_text(path: Path, text: str) -> str:
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def output_directory(output_dir: str) -> Path:
    """`output_dir` as a Path; ConfigError when it is not a path (a str or os.PathLike) or exists and
    is not a directory."""
    if not isinstance(output_dir, (str, os.PathLike)):
        raise ConfigError(f"output_dir = {output_dir!r} must be a folder path (a str or os.PathLike)")
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"output_dir = {output_dir!r} exists and is not a directory")
    return out


_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]+")
_MAX_STEM = 200  # file systems allow 255 bytes per name; leave room for "-roofline.png"


def safe_name(text: str) -> str:
    """`text` as a portable file-name part: only letters, digits and . _ + = -"""
    out = _UNSAFE.sub("_", str(text)).strip("._-")
    return out or "x"


def _num(v: float) -> str:
    return f"{round(v, 3):g}"


def _run_part(kind: str, summary: Optional[Dict[str, Any]]) -> Optional[str]:
    """The batch and lengths of the run, for the file name."""
    if not summary or "batch_size_per_gpu" not in summary:
        return None
    head = f"bs{summary['batch_size_per_gpu']}-seq{summary.get('seq_len')}"
    if kind == "inference":
        return f"{head}-gen{summary.get('num_tokens_to_generate')}"
    if kind == "training":
        # what else tells two runs of one layout apart, where it is not the default (the name stays the mirrored
        # one otherwise): four runs differing in ZeRO stage and recomputation wrote one file, the last kept
        extra = [f"{tag}{_num(summary[key])}" for key, tag, default in (
            ("ds_zero", "zero", 0), ("activation_recomputation", "rc", 0), ("pipeline_interleave", "vpp", 1))
            if summary.get(key, default) != default]
        return "-".join([head, f"gbs{summary.get('global_batch_size')}", *extra])
    return None


def analysis_class_name(analysis) -> Optional[str]:
    """The analysis class' name when its own describer counts the model (a custom architecture, an exact
    description), else None: a custom run and a stock one of the same setup must not write the same files."""
    return None if analysis.describer_class is LayerDescriber else type(analysis).__name__


def described_by(analysis) -> list:
    """The file-name part `analysis_class_name` gives, if any."""
    name = analysis_class_name(analysis)
    return [] if name is None else [safe_name(name)]


def output_file_stem(analysis, kind: str, suffix: str = "", summary: Optional[Dict[str, Any]] = None) -> str:
    """The common stem of every output file of one run, from its setup:

    `<model>[-<analysis class>]-<gpu>-<dtype>-tp<t>-pp<p>-dp<d>-ep<e>-sp<s>-fe<flops eff>-hbme<HBM eff>
    [-tflops<achieved>][-bw<achieved GB/s>][-calibrated]-<kind>[-bs<batch>-seq<len>...][-<suffix>]`,
    with every character outside [A-Za-z0-9._+=-] replaced by '_'. `-calibrated`: times from the calibrated model,
    whose efficiencies are its profile's, not fe / hbme (a calibrated run and a roofline one of the same command had
    written the same files, the second over the first): fe / hbme / tflops / bw are the constructor's arguments
    whatever the model (under the calibrated one those of its roofline lower bounds, the JSON's `lower_bound_*`);
    the names stay what the mirrored system's are, for scripts that find the files by them."""
    p = analysis.parallelism_config
    parts = [safe_name(analysis.model_config.name), *described_by(analysis), safe_name(analysis.gpu_config.name),
             safe_name(analysis.dtype_config.name),
             f"tp{p.tp_size}-pp{p.pp_size}-dp{p.dp_size}-ep{p.ep_size}-sp{p.sp_size}"
             + (f"-cp{p.cp_size}" if p.cp_size > 1 else ""),
             f"fe{_num(analysis.flops_efficiency)}-hbme{_num(analysis.hbm_memory_efficiency)}"]
    if analysis.achieved_tflops is not None:
        parts.append(f"tflops{_num(analysis.achieved_tflops)}")
    if analysis.achieved_memory_bandwidth_GBs is not None:
        parts.append(f"bw{_num(analysis.achieved_memory_bandwidth_GBs)}")
    if analysis.profile is not None:
        parts.append("calibrated")
    parts.append(safe_name(kind))
    run = _run_part(kind, summary)
    if run:
        parts.append(run)
    stem = "-".join(parts)
    suffix = safe_name(suffix)[:64] if suffix else ""
    over = len(stem) + len(suffix) + 1 - _MAX_STEM
    if over > 0:  # keep the setup readable: shorten the model name first
        keep = max(len(parts[0]) - over, 8)
        stem = stem[:keep] + stem[len(parts[0]):]
        stem = stem[:_MAX_STEM - len(suffix) - 1]
    return f"{stem}-{suffix}" if suffix else stem
