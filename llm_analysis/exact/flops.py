"""Forward FLOPs of one small prefill, counted by `torch.utils.flop_counter.FlopCounterMode`.

The model runs on meta tensors (shapes only, no arithmetic), so the count is free
of memory and time. FlopCounterMode counts 2*m*n*k per matmul (and the matmuls of
attention kernels); element-wise operations are not counted. Models whose forward
needs real values (data-dependent routing, `.item()`, `nonzero`) fail on meta; the
error is returned so the caller can record why.

torch 2.13 has no FLOP formula for `aten._grouped_mm`, the kernel of fused experts
in transformers 5; `grouped_mm_flops` supplies it. Its count does not depend on the
routing: the token-expert pairs are the rows of the first operand.
"""

from __future__ import annotations

import contextlib
import math
import re
from typing import Any, Dict, Iterator, Optional, Tuple

_LAYER_INDEX = re.compile(r"\.(\d+)(?=\.|$)")


def grouped_mm_flops(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """2 x (output elements) x (reduction length): each output element is a dot
    product over the last axis of the first operand."""
    return 2 * math.prod(out_shape) * a_shape[-1]


def _custom_formulas() -> Dict[Any, Any]:
    import torch
    ops = {}
    for name in ("_grouped_mm", "grouped_mm"):
        op = getattr(torch.ops.aten, name, None)
        if op is not None:
            ops[op] = grouped_mm_flops
    return ops


@contextlib.contextmanager
def forward_only() -> Iterator[None]:
    """FlopCounterMode's module tracker registers backward hooks on module inputs and
    outputs that require gradients, which fails on a custom autograd function's output
    made under no_grad (MRA, Perceiver). Nothing here runs backward: register none."""
    from unittest import mock

    from torch.utils import module_tracker
    class _NoHook:
        def remove(self) -> None:
            pass
    with mock.patch.object(module_tracker, "register_multi_grad_hook", lambda *args, **kwargs: _NoHook()):
        yield


def _run(model: Any, kwargs: Dict[str, Any]):
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    counter = FlopCounterMode(display=False, custom_mapping=_custom_formulas())
    with torch.no_grad(), forward_only(), counter:
        model(**kwargs)
    return counter


def prefill_flops(model: Any, batch_size: int = 1, seq_len: int = 16
                  ) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """({"total", "by_op", "by_module"}, None) or (None, reason)."""
    import torch
    device = model_device(model)  # meta, or the CPU (cpu_verify.py)
    ids = torch.zeros(batch_size, seq_len, dtype=torch.long, device=device)
    # an explicit all-ones mask keeps transformers from inspecting values to detect
    # packed sequences (a `.item()` that meta tensors cannot answer)
    mask = torch.ones(batch_size, seq_len, dtype=torch.long, device=device)
    model.eval()
    # Some forwards accept only some of these arguments, and some inspect the mask's
    # values (which meta tensors cannot answer) unless it is absent: try in turn.
    attempts = [dict(input_ids=ids, attention_mask=mask, use_cache=False),
                dict(input_ids=ids, use_cache=False), dict(input_ids=ids, attention_mask=mask),
                dict(input_ids=ids)]
    reasons = []
    for kwargs in attempts:
        try:
            counter = _run(model, kwargs)
        except Exception as exc:
            reasons.append(_reason(exc))
            continue
        counts = counter.get_flop_counts()
        by_op = {str(op): int(n) for op, n in counts.get("Global", {}).items()}
        return {"total": int(counter.get_total_flops()), "by_op": by_op,
                "by_module": _first_layer_modules(counts)}, None
    # the first attempt's error is the informative one (the others mostly reject arguments)
    return None, reasons[0]


def model_device(model: Any) -> str:
    """The device type of the model's first parameter ("meta" for a parameter-free one)."""
    first = next(iter(model.parameters()), None)
    return first.device.type if first is not None else "meta"


def _first_layer_modules(counts: Dict[str, Dict[Any, int]]) -> Dict[str, int]:
    """Per-module totals, keeping modules outside the layer stacks and those of index 0
    (the others repeat them, or differ only in ways the parameter breakdown shows)."""
    out = {}
    for module, ops in counts.items():
        if module == "Global":
            continue
        indices = _LAYER_INDEX.findall(module)
        if any(i != "0" for i in indices) or module.count(".") > 6:
            continue
        out[module] = int(sum(ops.values()))
    return out


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0][:300] if text else ""
    return f"{type(exc).__name__}: {first}"
