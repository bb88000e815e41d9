"""Parallel layouts a derived description can be split into (torch-free): a ConfigError
names the module, the value and what is valid.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from llm_analysis.errors import ConfigError


def kind_window(specs: List[Dict[str, Any]]) -> Optional[int]:
    """The sliding window of a layer kind's attention (None: full attention)."""
    windows = [s["window"] for s in specs if s["op"] == "attention" and s.get("window")]
    return min(windows) if windows else None


def stage_kinds(kinds: List[Any], pp_size: int) -> List[List[Any]]:
    """Layers assigned to pipeline stages contiguously, earlier stages taking the
    remainder (as `model.records.stage_layer_groups`)."""
    base, extra = divmod(len(kinds), pp_size)
    out, start = [], 0
    for s in range(pp_size):
        n = base + (1 if s < extra else 0)
        out.append(kinds[start:start + n])
        start += n
    return out


def _divisors(n: int) -> List[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _check_tp(desc: Dict[str, Any], name: str, tp: int) -> None:
    for kind in desc["kinds"]:
        for s in kind:
            if s["op"] == "attention":
                h, kv = s["heads"], s["kv_heads"]
                if h % tp or (kv % tp and tp % kv):
                    raise ConfigError(
                        f"tp_size = {tp} does not split the attention of {name} ({s['name']}: {h} heads, "
                        f"{kv} KV heads); valid tp_size: {[d for d in _divisors(h) if kv % d == 0 or d % kv == 0]}")
            if s["op"] == "state":
                raise ConfigError(
                    f"tp_size = {tp}: how {s['name']} of {name} splits its recurrent state over ranks is not "
                    "modelled; the exact path supports tp_size = 1 for it")
            if s["op"] == "row_flops":
                raise ConfigError(
                    f"tp_size = {tp}: cannot tell how to shard {s['name']} of {name} (matmuls on activations, "
                    f"{s['flops_per_row']:,} FLOPs per row); the exact path supports tp_size = 1 for it")
            if s["op"] not in ("linear", "experts"):
                continue
            role = s.get("tp")
            if role == "unknown":
                raise ConfigError(
                    f"tp_size = {tp}: cannot tell how to shard {s['name']} of {name} "
                    f"([{s['in']}x{s['out']}], {s['group']}); the exact path supports tp_size = 1 for it")
            width = s["out"] if role == "column" else s["in"] if role == "row" else None
            if width is not None and width % tp:
                raise ConfigError(
                    f"tp_size = {tp} must divide the {'output' if role == 'column' else 'input'} width "
                    f"{width} of {s['name']} ({role}-parallel) of {name}; valid tp_size: {_divisors(width)}")


def check_layout(desc: Dict[str, Any], model: Any, par: Any) -> None:
    name = model.name
    if par.tp_size > 1:
        _check_tp(desc, name, par.tp_size)
    layers = len(desc["layers"])
    if par.pp_size > layers:
        raise ConfigError(f"pp_size = {par.pp_size} exceeds the {layers} layers of {name}; valid pp_size: 1..{layers}")
    experts = desc.get("experts")
    if par.ep_size > 1:
        if not experts:
            raise ConfigError(f"ep_size = {par.ep_size} but {name} has no routed experts; use ep_size=1")
        if experts["count"] % par.ep_size:
            raise ConfigError(f"ep_size = {par.ep_size} must divide the {experts['count']} experts of {name}; "
                              f"valid ep_size: {_divisors(experts['count'])}")
        if par.dp_size % par.ep_size:
            raise ConfigError(
                f"ep_size = {par.ep_size} must divide dp_size = {par.dp_size}: experts are sharded over "
                f"data-parallel ranks; use dp_size = {par.ep_size} or a multiple of it")
