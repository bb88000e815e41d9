"""NCCL's collectives inside one node, from measurements: the calibrated model's time of an all-reduce,
all-gather or reduce-scatter whose group sits on one NVLink island, by message size and group size.

Why measured: cost/nccl.py's ring model (NCCL's tuning constants for latency, the measured bus
bandwidth at 512 MiB, and an assumed half-saturation of 512 KiB) is right at the smallest and the
largest messages and fast in between: against aiconfigurator's NCCL tables it is 1.3-2.7x fast at
1-32 MB (A100, 2 GPUs: 15 us against 41 us at 1 MiB; 8 GPUs: 88 us against 128 us at 8 MiB; H100 and
B200 alike), where NCCL's protocols (LL, LL128, Simple) and channel counts change. Those are the sizes
of a tensor-parallel all-reduce in a prefill or a training step.

What is timed: aiconfigurator's measured NCCL collectives (collector/nccl, nccl-tests style: the bus
bandwidth of each size on 2, 4 and 8 GPUs of one node), distilled into
cost/profiles/measured/<gpu>.json key `nccl` (kind -> group size -> `bytes`, `busbw_over_line_rate`)
by benchmarks/distil_operator_data.py, with its source (`nccl_source`). A size's time is its bus
bytes over its bus bandwidth: bus factor x bytes / (busbw_over_line_rate x the GPU's NVLink rate per
direction), the bus factor 2 (n - 1) / n for an all-reduce and (n - 1) / n for an all-gather or a
reduce-scatter (nccl-tests' convention; bytes is the whole buffer). Between sizes and group sizes it is
interpolated as cost/engine_allreduce.py interpolates the engines' tables (linear in bytes between the
measured sizes, the smallest size's time below it, linear in the group size between 2, 4 and 8). The
measurement is the kernel's time from its launch, so a natively launched collective
(FasterTransformer, TensorRT-LLM's GptSession) still takes the launch floor before it
(cost/calibrated.py): every rank must have enqueued it.

Outside the measurements (a group larger than measured or leaving its node, a message larger than
measured, the all-to-all, point-to-point sends, a GPU not on an NVLink switch (PCIe machines' NCCL
depends on their switches and sockets), a GPU whose generation has no measured NCCL table) the ring
model of cost/nccl.py. A GPU without a table of its own takes one of its
profile's GPUs' (nearest NVLink rate, the bytes axis scaled by the rates: cost/engine_allreduce.py's
stand-in rule). The roofline does not read these tables: it stays a lower bound.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Callable, Dict, Optional, Tuple

from llm_analysis.cost.engine_allreduce import (MEASURED_DIR, AllReduceCurve, AllReduceTable, bad_entry, group_curves,
                                                measured_axes, stand_in_tables, table_timer)
from llm_analysis.cost.nccl import bus_factor

KEY = "nccl"
KINDS = ("all_reduce", "all_gather", "reduce_scatter")  # the measured ring collectives this module times


def _curve(path, where: str, entry, kind: str, n: int, line_bytes_per_s: float) -> AllReduceCurve:
    """One group size's latency by bytes from its measured bus bandwidths."""
    xs, fs = measured_axes(path, where, entry, "busbw_over_line_rate")
    factor = bus_factor(kind, n)
    times = [factor * float(x) / (float(f) * line_bytes_per_s) for x, f in zip(xs, fs)]
    # a larger message never takes less time: each size takes the least measured at it or any larger one, as
    # the engines' all-reduce tables are distilled (NCCL's protocol and channel switches dip: B200, 4 GPUs,
    # all-gather 19.4 us at 128 KiB and 13.5 us at 256 KiB; as measured, a decode step of a batch twice as
    # large came out 9% faster)
    for i in range(len(times) - 2, -1, -1):
        times[i] = min(times[i], times[i + 1])
    return AllReduceCurve(tuple(float(x) for x in xs), tuple(times))


def parse_nccl_tables(doc, path, line_bytes_per_s: float) -> Dict[str, AllReduceTable]:
    """{kind: table} of a measured file's `nccl` key for a GPU of this NVLink rate per direction ({}
    where it has none); a malformed entry is a ConfigError naming the file, the key and the value."""
    tables = doc.get(KEY) if isinstance(doc, dict) else None
    if tables is None:
        return {}
    if not isinstance(tables, dict):
        raise bad_entry(path, KEY, tables, "must be an object keyed by collective")
    src = doc.get("nccl_source") or {}
    label = f"{src.get('repository', '')} {src.get('path', '')} ({src.get('framework', 'nccl')}, {src.get('device', '')})"
    out = {}
    for kind in KINDS:
        if kind in tables:
            curves = group_curves(path, f"{KEY}.{kind}", tables[kind], lambda where, n, entry, kind=kind:
                                  _curve(path, where, entry, kind, n, line_bytes_per_s))
            out[kind] = AllReduceTable(curves, label.strip())
    return out


@lru_cache(maxsize=None)
def _own_tables(gpu_name: str) -> Dict[str, AllReduceTable]:
    from llm_analysis.config import get_gpu_config_by_name
    path = MEASURED_DIR / f"{gpu_name}.json"
    if not path.exists():
        return {}
    line = get_gpu_config_by_name(gpu_name).intra_node_bandwidth_in_GB_per_sec * 1e9
    return parse_nccl_tables(json.loads(path.read_text()), path, line)


# what decides a GPU's tables (its name and NVLink fabric) -> (tables, where they come from): worked out
# once per GPU, as cost/engine_allreduce.py keeps its own
_FOUND: Dict[tuple, Tuple[Dict[str, AllReduceTable], str]] = {}


def nccl_tables(gpu) -> Tuple[Dict[str, AllReduceTable], str]:
    """({kind: table}, where they come from) for `gpu`: its own, a stand-in GPU's (bytes scaled by the
    NVLink rates), or none."""
    key = (gpu.name, gpu.intra_node_link, gpu.fast_link_group_size, gpu.intra_node_bandwidth_in_GB_per_sec)
    found = _FOUND.get(key)
    if found is None:
        found = _FOUND[key] = _find_tables(gpu)
    return found


def _find_tables(gpu) -> Tuple[Dict[str, AllReduceTable], str]:
    if not (gpu.intra_node_link == "nvlink" and gpu.fast_link_group_size > 2):
        # a PCIe machine's NCCL depends on its PCIe switches and sockets (the measured L40S machine's 8 GPUs
        # reach 0.05 of line rate: not on one switch; benchmarks/measured_operator_values.py leaves it out)
        return {}, f"{gpu.name} is not on an NVLink switch: the ring model"
    own = _own_tables(gpu.name)
    if own:
        return own, f"measured on {gpu.name}"
    found = stand_in_tables(gpu, _own_tables)
    if found is None:
        return {}, f"no measured NCCL table for {gpu.name} or a GPU of its profile on an NVLink switch: the ring model"
    other, tables, scale = found
    return ({k: AllReduceTable(t.curves, f"{t.source}, standing in for {gpu.name}", scale) for k, t in tables.items()},
            f"{other}'s measured NCCL collectives (bytes scaled by the NVLink rates, x{scale:.3g})")


def measured_nccl_timer(gpu, kind: str, group_size: int, in_one_node: bool,
                        model_timer: Callable[[float], float]) -> Callable[[float], float]:
    """Seconds of one NCCL `kind` over a group of `group_size` GPUs as a function of the message bytes:
    the measured table inside its range when the group sits on one NVLink island (`in_one_node`), the
    ring model (`model_timer`) elsewhere (module docstring)."""
    table: Optional[AllReduceTable] = nccl_tables(gpu)[0].get(kind) if in_one_node and group_size > 1 else None
    return table_timer(table, group_size, model_timer)


__all__ = ["KEY", "KINDS", "measured_nccl_timer", "nccl_tables", "parse_nccl_tables"]
