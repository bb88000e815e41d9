"""Verification on a real CPU model when the meta-device forward cannot run.

A forward that reads a value (Longformer's `is_index_global_attn.flatten().any().item()`)
fails on meta tensors. A small enough model is built on the CPU in float32 from a fixed
seed and probed with the same inputs: FlopCounterMode counts the matmuls the code runs,
which depend on shapes and control flow, never on the weights' values. Its fp32 weights
must fit in `CPU_MAX_WEIGHT_BYTES` (2 GiB, about 537M parameters: well under a CI
runner's memory); a larger one is refused with its size. Only failures caused by meta
tensors having no values fall back; any other failure is the model's own.
"""

from __future__ import annotations

import copy
from typing import Any, Optional, Tuple

CPU_MAX_WEIGHT_BYTES = 2 * 1024 ** 3
CPU_SEED = 0
# first lines of the errors a forward raises only because meta tensors have no values
_NEEDS_VALUES = ("on meta tensors", "Expected gradient function to be set")


def needs_values(reason: Optional[str]) -> bool:
    return bool(reason) and any(s in reason for s in _NEEDS_VALUES)


def _why_not_cpu(model: Any, reason: Optional[str]) -> Optional[str]:
    """Why `model`, whose meta forward failed with `reason`, is not run on the CPU
    ("" when the failure is the model's own, not a meta tensor's), or None to run it."""
    if not needs_values(reason):
        return ""
    size = 4 * sum(int(p.numel()) for p in model.parameters())  # fp32 weights
    if size <= CPU_MAX_WEIGHT_BYTES:
        return None
    return (f"too large to run on the CPU instead ({size / 2 ** 30:.1f} GiB of fp32 weights, bound "
            f"{CPU_MAX_WEIGHT_BYTES / 2 ** 30:.0f} GiB)")


def cpu_model(class_name: str, cfg: Any) -> Any:
    """The model `class_name` of `cfg` on the CPU, float32, random weights from CPU_SEED."""
    import torch
    import transformers

    from llm_analysis.hub.source import quiet_transformers
    cls = getattr(transformers, class_name)
    torch.manual_seed(CPU_SEED)
    with quiet_transformers(), torch.device("cpu"):
        model = cls._from_config(copy.deepcopy(cfg), attn_implementation="eager", dtype=torch.float32)
    return model.eval()


def cpu_probe(models: Any, reason: Optional[str], batch: int, seq_len: int) -> Tuple[Optional[Any], Any, str]:
    """(probe, MetaModels-like record on the CPU, "") from a CPU run when the meta run failed
    with `reason`; (None, None, why not) otherwise."""
    from dataclasses import replace

    from llm_analysis.exact.probe import run_probe
    why = _why_not_cpu(models.lm, reason)
    if why is not None:
        return None, None, why
    cpu = replace(models, lm=cpu_model(models.lm_class, models.config), base=None, base_class=None)
    probe, cpu_reason = run_probe(cpu.lm, batch, seq_len)
    if probe is None:
        return None, None, f"it fails on the CPU too ({cpu_reason})"
    return probe, cpu, ""


def cpu_prefill_flops(class_name: str, cfg: Any, meta_model: Any, reason: Optional[str], batch: int,
                      seq_len: int) -> Tuple[Optional[Any], Optional[str]]:
    """flops.prefill_flops of the CPU twin of `meta_model` when its meta run failed with
    `reason` and it is small enough; else (None, `reason` with why the CPU did not help)."""
    from llm_analysis.exact.flops import prefill_flops
    why = _why_not_cpu(meta_model, reason)
    if why is not None:
        return None, f"{reason}; {why}" if why else reason
    return prefill_flops(cpu_model(class_name, cfg), batch, seq_len)
