"""The all-reduce a serving engine runs for a tensor-parallel group inside one node, from measurements.

Inference engines do not hand a tensor-parallel all-reduce of a small message to NCCL's ring: vLLM
and SGLang run their custom all-reduce kernels (one-shot below a size, two-shot above, over peer
buffers the GPUs map with CUDA IPC; vllm/distributed/device_communicators/custom_all_reduce.py,
tp 2-8, up to a size limit; NCCL / symmetric memory above it), TensorRT-LLM its AllReduce with
strategy AUTO (one-shot, two-shot or NCCL by size). Their latency at decode sizes is 2-5 us where an
NCCL ring takes 10-20 us, and a 70B model on tp 8 runs 160 of them per decode step.

Who runs what (the calibrated model's `allreduce_engine`, cost/calibrated.py): serve() times its steps
with its engine's tables ("vllm", "sglang", "trtllm"); inference() names no engine: launched natively
(FasterTransformer, TensorRT-LLM's GptSession) it runs NCCL all-reduces ("nccl": FasterTransformer's
layers call ncclAllReduce once per block; its custom all-reduce is off in every shipped config), under
CUDA graphs or eagerly it keeps, as training does, the collectives its layout states (None; see
docs/performance-models.md). Under an engine ("nccl" included) tensor parallelism is an all-reduce per
block, not sequence parallelism (`engine_tp_collective`).

What is timed: the measured latency of the engine's all-reduce (aiconfigurator's
collector/network/collect_all_reduce.py: each engine's own all-reduce entry point on bf16 tensors,
replayed from a CUDA graph ("graph") or launched from Python each call ("eager": vLLM and SGLang
only), distilled into cost/profiles/measured/<gpu>.json key `custom_allreduce` by
benchmarks/distil_operator_data.py, with its source), by message bytes and group size:

- between two measured message sizes, linear in the bytes (the sizes are 2x apart and the latency
  is a latency plus bytes over a rate on each piece);
- below the smallest measured message (256 bytes), the smallest's latency (a smaller message
  takes no longer: the kernels' latency is flat there);
- between two measured group sizes (2, 4, 8; GB200/GB300: 2, 4), linear in the group size at the
  same bytes (tp 6 between 4 and 8);
- outside the measured range (a larger message than measured, a larger group than measured, a
  group that spans nodes), the NCCL model the caller passes (cost/nccl.py).

TensorRT-LLM's table is its plain all-reduce (the collector passes fusion_op NONE): the models fuse
it with the residual add and RMSNorm that follow (AllReduceFusionOp.RESIDUAL_RMS_NORM), which this
model times as separate norm kernels; the fusion's saving (one activation pass, one launch) is not
modelled. Its figures were taken under a CUDA graph only; an eager step takes them too.

A GPU without a table of its own takes the table of a GPU its calibration profile lists (or the
profile it is derived from) on the same kind of fabric (an NVLink switch: vLLM's custom all-reduce
needs every pair of GPUs on NVLink), with the bytes axis scaled by the two GPUs' NVLink rates (a
message of B bytes on a link half as fast takes as long as 2B on the measured GPU): A100 SXM 40GB
takes A100 SXM 80GB's, H20 (profile hopper-h20, derived from hopper) H100 SXM's. GPUs with neither
(PCIe-only or NVLink-bridged pairs, AMD's xGMI, Volta, TPUs) keep the NCCL model: `fallback_note`
says which.
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

from llm_analysis.config import get_gpu_config_by_name
from llm_analysis.cost.profiles import generation_of, load_profile
from llm_analysis.errors import ConfigError

MEASURED_DIR = Path(__file__).resolve().parent / "profiles" / "measured"
KEY = "custom_allreduce"
ENGINES = ("vllm", "sglang", "trtllm")
LAUNCHES = ("graph", "eager")
_ENTRY_KEYS = {"graph", "eager", "kernels", "dtype", "source"}


@dataclass(frozen=True)
class AllReduceCurve:
    """One group size's measured latency by message bytes (bytes strictly increasing)."""

    bytes_axis: Tuple[float, ...]
    latency_s: Tuple[float, ...]

    def at(self, size_bytes: float) -> float:
        """Seconds at `size_bytes` <= the largest measured (module docstring: linear between sizes,
        the smallest's latency below it)."""
        xs, ys = self.bytes_axis, self.latency_s
        if size_bytes <= xs[0]:
            return ys[0]
        k = bisect.bisect_left(xs, size_bytes)
        if xs[k] == size_bytes:
            return ys[k]
        w = (size_bytes - xs[k - 1]) / (xs[k] - xs[k - 1])
        return (1 - w) * ys[k - 1] + w * ys[k]


@dataclass(frozen=True)
class AllReduceTable:
    """An engine's measured all-reduce on one GPU and launch: a curve per measured group size."""

    curves: Dict[int, AllReduceCurve]
    source: str  # where the figures come from (and, for a fallback, which GPU's they are)
    bytes_scale: float = 1.0  # a fallback GPU's message of B bytes is the measured GPU's of B x this
    # the measured group sizes in order, sorted once here: `time_s` runs for every collective of a call
    sizes: Tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "sizes", tuple(sorted(self.curves)))

    def largest_bytes(self, group_size: int) -> Optional[float]:
        """The largest message (the caller's bytes) `time_s` answers for `group_size`, or None outside the measured
        group sizes."""
        sizes = self.sizes
        if group_size < sizes[0] or group_size > sizes[-1]:
            return None
        k = bisect.bisect_left(sizes, group_size)
        top = self.curves[sizes[k]].bytes_axis[-1]
        if sizes[k] != group_size:
            top = min(top, self.curves[sizes[k - 1]].bytes_axis[-1])
        return top / self.bytes_scale

    def time_s(self, size_bytes: float, group_size: int) -> Optional[float]:
        """Seconds of one all-reduce, or None outside the measured range (module docstring)."""
        sizes = self.sizes
        if group_size < sizes[0] or group_size > sizes[-1]:
            return None
        x = size_bytes * self.bytes_scale
        k = bisect.bisect_left(sizes, group_size)
        hi = self.curves[sizes[k]]
        if x > hi.bytes_axis[-1]:
            return None
        if sizes[k] == group_size:
            return hi.at(x)
        lo = self.curves[sizes[k - 1]]
        if x > lo.bytes_axis[-1]:
            return None
        w = (group_size - sizes[k - 1]) / (sizes[k] - sizes[k - 1])
        return (1 - w) * lo.at(x) + w * hi.at(x)


def bad_entry(path: Path, key: str, value, valid: str) -> ConfigError:
    """The error of a malformed measured file: the file, the key, the value and what would be valid."""
    return ConfigError(f"{path.name}: {key} = {value!r}; {valid}")


def measured_axes(path: Path, where: str, entry, figure: str) -> Tuple[list, list]:
    """(bytes, figures) of one measured curve `entry` = {"bytes": [...], figure: [...]}: non-empty lists of
    positive finite numbers, one figure per message size, sizes strictly increasing; else a ConfigError
    naming the file, the key and the value."""
    if not isinstance(entry, dict) or set(entry) != {"bytes", figure}:
        raise bad_entry(path, where, entry, f"must be an object with keys 'bytes' and '{figure}'")
    xs, ys = entry["bytes"], entry[figure]
    for name, axis in (("bytes", xs), (figure, ys)):
        if not isinstance(axis, list) or not axis:
            raise bad_entry(path, f"{where}.{name}", axis, "must be a non-empty list of numbers")
        for i, v in enumerate(axis):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise bad_entry(path, f"{where}.{name}[{i}]", v, "must be a positive finite number")
    if len(xs) != len(ys):
        raise bad_entry(path, f"{where}.{figure}", ys, f"must have one figure per message size ({len(xs)})")
    for i in range(1, len(xs)):
        if xs[i] <= xs[i - 1]:
            raise bad_entry(path, f"{where}.bytes[{i}]", xs[i], f"must be larger than bytes[{i - 1}] = {xs[i - 1]!r} "
                       "(message sizes strictly increasing)")
    return xs, ys


def _curve(path: Path, where: str, entry) -> AllReduceCurve:
    xs, ys = measured_axes(path, where, entry, "latency_us")
    return AllReduceCurve(tuple(float(x) for x in xs), tuple(float(y) * 1e-6 for y in ys))


def parse_tables(doc, path: Path) -> Dict[Tuple[str, str], AllReduceTable]:
    """{(engine, launch): table} of a measured file's `custom_allreduce` key ({} where it has none);
    a malformed entry is a ConfigError naming the file, the key and the value."""
    tables = doc.get(KEY) if isinstance(doc, dict) else None
    if tables is None:
        return {}
    if not isinstance(tables, dict):
        raise bad_entry(path, KEY, tables, f"must be an object keyed by engine ({', '.join(ENGINES)})")
    out = {}
    for engine, entry in tables.items():
        if engine not in ENGINES:
            raise bad_entry(path, f"{KEY} engine", engine, f"valid: {', '.join(ENGINES)}")
        if not isinstance(entry, dict) or not any(k in entry for k in LAUNCHES):
            raise bad_entry(path, f"{KEY}.{engine}", entry, f"must hold a table under {' or '.join(LAUNCHES)}")
        unknown = sorted(set(entry) - _ENTRY_KEYS)
        if unknown:
            raise bad_entry(path, f"{KEY}.{engine} key", unknown[0], f"valid: {', '.join(sorted(_ENTRY_KEYS))}")
        src = entry.get("source")
        if not isinstance(src, dict) or not src.get("repository"):
            raise bad_entry(path, f"{KEY}.{engine}.source", src, "must name the repository the figures come from")
        label = f"{src['repository']} {src.get('path', '')} ({src.get('framework', engine)}, {src.get('device', '')})"
        for launch in LAUNCHES:
            if launch not in entry:
                continue
            curves = group_curves(path, f"{KEY}.{engine}.{launch}", entry[launch],
                                  lambda where, n, curve: _curve(path, where, curve))
            out[(engine, launch)] = AllReduceTable(curves, label)
    return out


def group_curves(path: Path, where: str, by_size, curve_of: Callable[[str, int, object], AllReduceCurve]
                 ) -> Dict[int, AllReduceCurve]:
    """{group size: curve} of a measured file's `by_size` = {"2": {...}, "4": {...}, ...}, each entry read by
    `curve_of(key, group size, entry)`; a malformed entry is a ConfigError naming the file, key and value."""
    if not isinstance(by_size, dict) or not by_size:
        raise bad_entry(path, where, by_size, "must map group sizes to curves")
    curves = {}
    for n, entry in by_size.items():
        if not (isinstance(n, str) and n.isdigit() and int(n) >= 2):
            raise bad_entry(path, f"{where} group size", n, "must be a whole number >= 2")
        curves[int(n)] = curve_of(f"{where}.{n}", int(n), entry)
    return curves


@lru_cache(maxsize=None)
def measured_tables(gpu_name: str) -> Dict[Tuple[str, str], AllReduceTable]:
    """The tables of cost/profiles/measured/<gpu_name>.json ({} where the GPU has no file or no key)."""
    path = MEASURED_DIR / f"{gpu_name}.json"
    if not path.exists():
        return {}
    return parse_tables(json.loads(path.read_text()), path)


@dataclass(frozen=True)
class _Fabric:
    """What of a GPU config decides its engine all-reduce tables (a hashable key)."""

    name: str
    link: str  # intra_node_link
    fast_group: int  # fast_link_group_size
    link_GB_per_s: float  # intra_node_bandwidth_in_GB_per_sec

    @classmethod
    def of(cls, gpu) -> "_Fabric":
        return cls(gpu.name, gpu.intra_node_link, gpu.fast_link_group_size, gpu.intra_node_bandwidth_in_GB_per_sec)

    @property
    def switched_nvlink(self) -> bool:
        """Every GPU pair of the node on NVLink through a switch (the fabric the custom kernels need)."""
        return self.link == "nvlink" and self.fast_group > 2


def _stand_in(gpu: _Fabric, tables_of: Callable[[str], dict]) -> Optional[Tuple[_Fabric, dict]]:
    """(the measured GPU whose tables stand in for `gpu`'s, its tables `tables_of(name)`): one its calibration
    profile lists (else the profile it is derived from lists) on a switched NVLink fabric, nearest in link rate."""
    if not gpu.switched_nvlink:
        return None
    try:
        profile = load_profile(generation_of(gpu.name))
    except ConfigError:
        return None
    for gen_profile in (profile, load_profile(profile.derived_from) if profile.derived_from else None):
        if gen_profile is None:
            continue
        found = []
        for name in sorted(gen_profile.gpus):
            tables = tables_of(name)
            other = _Fabric.of(get_gpu_config_by_name(name)) if tables else None
            if other is not None and other.switched_nvlink:
                found.append((abs(other.link_GB_per_s - gpu.link_GB_per_s), name, other, tables))
        if found:
            _, _, other, tables = min(found, key=lambda x: x[:2])
            return other, tables
    return None


def stand_in_tables(gpu, tables_of: Callable[[str], dict]) -> Optional[Tuple[str, dict, float]]:
    """(name, tables, bytes scale) of the measured GPU whose tables (`tables_of(name)`) stand in for `gpu`,
    a GPU config without its own (the rule of the module docstring), or None."""
    fabric = _Fabric.of(gpu)
    found = _stand_in(fabric, tables_of)
    if found is None:
        return None
    other, tables = found
    return other.name, tables, other.link_GB_per_s / fabric.link_GB_per_s


@lru_cache(maxsize=None)
def _tables_for(gpu: _Fabric) -> Tuple[Dict[Tuple[str, str], AllReduceTable], str]:
    own = measured_tables(gpu.name)
    if own:
        return own, f"measured on {gpu.name}"
    stand_in = _stand_in(gpu, measured_tables)
    if stand_in is None:
        return {}, (f"no measured engine all-reduce for {gpu.name} or a GPU of its profile on an NVLink switch: "
                    "the NCCL model (cost/nccl.py)")
    other, tables = stand_in
    scale = other.link_GB_per_s / gpu.link_GB_per_s
    scaled = {k: AllReduceTable(t.curves, f"{t.source}, standing in for {gpu.name}", scale) for k, t in tables.items()}
    return scaled, (f"{other.name}'s measured engine all-reduce (no table for {gpu.name}; message bytes scaled by "
                    f"the NVLink rates, x{scale:.3g})")


def engine_tp_collective(kind: str) -> Optional[str]:
    """The collective an inference engine runs where the operator list has a tensor-parallel `kind`.
    Inference engines run tensor parallelism as Megatron's all-reduce after attention and after the MLP,
    not as sequence parallelism (vLLM, SGLang, TensorRT-LLM and FasterTransformer run no reduce-scatter +
    all-gather by default), while ParallelismConfig's sp_size (a training layout) defaults to tp_size: the
    reduce-scatter of a sequence-parallel pair is timed as the all-reduce of the same buffer and its
    all-gather as nothing (None); every other collective as it is."""
    if kind == "reduce_scatter":
        return "all_reduce"
    return None if kind == "all_gather" else kind


def engine_table(gpu, engine: str, launch: str) -> Optional[AllReduceTable]:
    """The table `engine`'s all-reduce is timed from on `gpu` when launched as `launch` ('graph',
    'eager'; 'native' reads the graph figures: the kernels' own time), or None (the NCCL model).
    An engine measured under CUDA graphs only (TensorRT-LLM) takes those figures for eager steps."""
    if engine not in ENGINES:
        raise ConfigError(f"allreduce_engine = {engine!r}; valid: {', '.join(ENGINES)} (measured), 'nccl' or None "
                          "(the NCCL model)")
    tables, _ = _tables_for(_Fabric.of(gpu))
    launch = "eager" if launch == "eager" else "graph"
    return tables.get((engine, launch)) or tables.get((engine, "graph"))


def fallback_note(gpu) -> str:
    """Where `gpu`'s engine all-reduce figures come from (measured, a stand-in GPU's, or NCCL's)."""
    return _tables_for(_Fabric.of(gpu))[1]


def engine_allreduce_timer(gpu, engine: str, launch: str, group_size: int, in_one_node: bool,
                           nccl_timer: Callable[[float], float]) -> Callable[[float], float]:
    """Seconds of one all-reduce of a tensor-parallel group as `engine` runs it, as a function of the
    message bytes per GPU: the measured table inside its range, `nccl_timer` outside it (and for a group
    that leaves its node, or a GPU with no table: module docstring)."""
    table = engine_table(gpu, engine, launch) if in_one_node and group_size > 1 else None
    return table_timer(table, group_size, nccl_timer)


def table_timer(table: Optional[AllReduceTable], group_size: int,
                model_timer: Callable[[float], float]) -> Callable[[float], float]:
    """Seconds of one collective of `group_size` GPUs by message bytes: the measured `table` inside its
    range, `model_timer` outside it (and everywhere when there is no table)."""
    if table is None:
        return model_timer
    top = table.largest_bytes(group_size)
    # past the largest measured message the model carries on from the table's last figure (its ratio to the model
    # there), so a message a byte larger never runs faster: a 2-GPU H100 all-reduce took 1.69 ms at 512 MiB and the
    # model's 1.21 ms at 513 MiB, and a larger prefill batch came out faster
    edge = 1.0 if top is None else table.time_s(top, group_size) / model_timer(top)

    def time_s(size_bytes: float) -> float:
        if size_bytes <= 0:
            return 0.0
        t = table.time_s(size_bytes, group_size)
        return model_timer(size_bytes) * edge if t is None else t
    return time_s


__all__ = ["AllReduceCurve", "AllReduceTable", "ENGINES", "KEY", "bad_entry", "engine_allreduce_timer", "engine_table",
           "engine_tp_collective", "fallback_note", "group_curves", "measured_axes", "measured_tables", "parse_tables",
           "stand_in_tables", "table_timer"]
