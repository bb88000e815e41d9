"""Run a model once under FlopCounterMode with a forward hook on every module, recording
per module path: `calls` (runs: a shared ALBERT layer once per layer), `tokens` (rows of
its first tensor input per call), `elems` and `flops` (children included). Meta tensors
carry shapes only; a model whose forward needs values fails, and the reason is returned.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from llm_analysis.exact.flops import _reason, counted_forward, forward_inputs, model_device


@dataclass
class Probe:
    batch: int
    seq_len: int
    total_flops: int = 0
    calls: Dict[str, int] = field(default_factory=dict)
    tokens: Dict[str, List[int]] = field(default_factory=dict)
    elems: Dict[str, List[int]] = field(default_factory=dict)  # elements of the first tensor input
    flops: Dict[str, int] = field(default_factory=dict)  # inclusive of children


def _first_tensor(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Any]:
    import torch
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, torch.Tensor) and value.dim() >= 1:
            return value
    return None


def _hooks(model: Any, probe: Probe) -> List[Any]:
    handles = []
    for path, module in model.named_modules():
        def hook(mod, args, kwargs, _path=path):
            probe.calls[_path] = probe.calls.get(_path, 0) + 1
            x = _first_tensor(args, kwargs)
            if x is not None:  # rows: the tokens a projection sees; elements: an embedding's lookups
                probe.tokens.setdefault(_path, []).append(int(x.numel() // max(int(x.shape[-1]), 1)))
                probe.elems.setdefault(_path, []).append(int(x.numel()))
        handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))
    return handles


def _module_flops(counts: Dict[str, Dict[Any, int]], root: str) -> Dict[str, int]:
    """FlopCounterMode's per-module totals, keyed by path relative to the model."""
    out = {}
    for name, ops in counts.items():
        if name == "Global":
            continue
        rel = "" if name == root else name[len(root) + 1:] if name.startswith(root + ".") else name
        out[rel] = int(sum(ops.values()))
    return out


@contextlib.contextmanager
def _masks_built_without_reading_values() -> Iterator[None]:
    """transformers skips building an attention mask when it sees that no token is
    padded, which reads the mask's values (`.all()`), impossible on meta tensors. Tell
    its mask code that tensors are being traced, as under torch.export: it then builds
    the mask from shapes alone. Masks are element-wise work, no matmul FLOPs change."""
    try:
        from transformers import masking_utils
    except ImportError:  # pragma: no cover - transformers without the module
        yield
        return
    from unittest import mock
    with mock.patch.object(masking_utils, "is_tracing", lambda *args, **kwargs: True, create=True):
        yield


def run_probe(model: Any, batch: int = 2, seq_len: int = 16) -> Tuple[Optional[Probe], Optional[str]]:
    """(Probe, None), or (None, the reason the model could not run on meta tensors)."""
    with _masks_built_without_reading_values():
        return _run_probe(model, batch, seq_len)


def _run_probe(model: Any, batch: int, seq_len: int) -> Tuple[Optional[Probe], Optional[str]]:
    model.eval()
    reasons = []
    # the model's device: meta, or the CPU for a small model whose forward reads values (cpu_verify.py)
    for kwargs in forward_inputs(batch, seq_len, model_device(model)):
        probe = Probe(batch, seq_len)
        handles = _hooks(model, probe)
        try:
            counter = counted_forward(model, kwargs)
        except Exception as exc:  # any failure of the model code on meta tensors
            reasons.append(_reason(exc))
            continue
        finally:
            for h in handles:
                h.remove()
        probe.total_flops = int(counter.get_total_flops())
        probe.flops = _module_flops(counter.get_flop_counts(), type(model).__name__)
        return probe, None
    return None, reasons[0]
