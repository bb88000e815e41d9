"""Forward FLOPs of one small prefill, counted by `torch.utils.flop_counter.FlopCounterMode`.

The model runs on meta tensors (shapes only, no arithmetic). FlopCounterMode counts
2*m*n*k per matmul (and the matmuls of attention kernels), no element-wise operations.
Models whose forward needs real values (`.item()`, `nonzero`) fail on meta; the error
is returned so the caller can record why.

torch 2.13 has no FLOP formula for `aten._grouped_mm`, the kernel of fused experts in
transformers 5; `grouped_mm_flops` supplies it (the token-expert pairs are the rows of
the first operand, whatever the routing).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Dict, Iterator, List, Optional, Tuple


def grouped_mm_flops(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """2 x (output elements) x (reduction length over the first operand's last axis)."""
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


def forward_inputs(batch: int, seq_len: int, device: str) -> List[Dict[str, Any]]:
    """The forward arguments to try in turn: some forwards accept only some of them."""
    import torch
    ids = torch.zeros(batch, seq_len, dtype=torch.long, device=device)
    # an all-ones mask keeps transformers from inspecting values (packed-sequence detection)
    mask = torch.ones(batch, seq_len, dtype=torch.long, device=device)
    return [dict(input_ids=ids, attention_mask=mask, use_cache=False), dict(input_ids=ids, use_cache=False),
            dict(input_ids=ids, attention_mask=mask), dict(input_ids=ids)]


def counted_forward(model: Any, kwargs: Dict[str, Any]) -> Any:
    """The FlopCounterMode of one forward without gradients."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    counter = FlopCounterMode(display=False, custom_mapping=_custom_formulas())
    with torch.no_grad(), forward_only(), counter:
        model(**kwargs)
    return counter


def prefill_flops(model: Any, batch_size: int = 1, seq_len: int = 16
                  ) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """({"total": FLOPs}, None) or (None, reason)."""
    model.eval()
    reasons = []
    for kwargs in forward_inputs(batch_size, seq_len, model_device(model)):  # meta, or the CPU (cpu_verify.py)
        try:
            counter = counted_forward(model, kwargs)
        except Exception as exc:
            reasons.append(_reason(exc))
            continue
        return {"total": int(counter.get_total_flops())}, None
    # the first attempt's error is the informative one (the others mostly reject arguments)
    return None, reasons[0]


def model_device(model: Any) -> str:
    """The device type of the model's first parameter ("meta" for a parameter-free one)."""
    first = next(iter(model.parameters()), None)
    return first.device.type if first is not None else "meta"


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0][:300] if text else ""
    return f"{type(exc).__name__}: {first}"
