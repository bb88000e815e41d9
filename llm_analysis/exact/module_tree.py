"""Parameter breakdown of a model's module tree, from (name, shape) pairs (torch-free; a
tied parameter is listed once, as `named_parameters` does).

`outside`: parameters not inside a repeated block, with shapes; `stacks`: each repeated
container (`model.layers`) with parameters per index and per child, and its distinct
layer kinds (nested indices such as expert lists folded to `#` with a multiplicity).
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, Iterable, List, Sequence, Tuple

_INDEX = re.compile(r"^(.*?)\.(\d+)\.(.*)$")
_NESTED = re.compile(r"\.(\d+)(?=\.)")


def numel(shape: Sequence[int]) -> int:
    return int(math.prod(shape)) if shape else 1


def _fold(rest: str) -> str:
    return _NESTED.sub(".#", "." + rest)[1:]


def breakdown(named_shapes: Iterable[Tuple[str, Sequence[int]]]) -> Dict[str, Any]:
    """The breakdown described in the module docstring (JSON-serialisable)."""
    outside: Dict[str, List[int]] = {}
    stacks: Dict[str, Dict[int, Dict[str, List[int]]]] = {}
    total = 0
    for name, shape in named_shapes:
        shape = [int(x) for x in shape]
        total += numel(shape)
        m = _INDEX.match(name)
        if m is None:
            outside[name] = shape
            continue
        stacks.setdefault(m.group(1), {}).setdefault(int(m.group(2)), {})[m.group(3)] = shape
    return {"total": total,
            "outside": outside,
            "stacks": {prefix: _stack(layers) for prefix, layers in stacks.items()}}


def _stack(layers: Dict[int, Dict[str, List[int]]]) -> Dict[str, Any]:
    per_index, per_child, kinds = [], [], []
    signatures: Dict[Tuple, int] = {}
    for idx in sorted(layers):
        params = layers[idx]
        per_index.append(sum(numel(s) for s in params.values()))
        children: Dict[str, int] = {}
        for rest, shape in params.items():
            child = rest.split(".", 1)[0]
            children[child] = children.get(child, 0) + numel(shape)
        per_child.append(children)
        folded: Dict[str, List[Any]] = {}
        for rest, shape in params.items():
            key = _fold(rest)
            entry = folded.setdefault(key, [shape, 0])
            entry[1] += 1
        sig = tuple(sorted((k, tuple(v[0]), v[1]) for k, v in folded.items()))
        if sig not in signatures:
            signatures[sig] = len(kinds)
            kinds.append({"indices": [], "params": {k: v for k, v in sorted(folded.items())}})
        kinds[signatures[sig]]["indices"].append(idx)
    return {"count": len(layers), "total": sum(per_index), "per_index": per_index,
            "per_child": per_child, "kinds": kinds}


def main_stack(bd: Dict[str, Any]) -> str | None:
    """The stack holding the most parameters (the transformer layers)."""
    stacks = bd["stacks"]
    return max(stacks, key=lambda p: stacks[p]["total"]) if stacks else None
