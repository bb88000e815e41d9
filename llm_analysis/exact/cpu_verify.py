"""Verification on a real CPU model when the meta-device forward cannot run.

Meta tensors carry shapes only; a forward that reads a value (Longformer's
`is_index_global_attn.flatten().any().item()`) fails on them. For a model that small,
the same forward can simply run: the model is built on the CPU in float32 with a fixed
seed (random weights: FlopCounterMode counts the matmuls the code runs, which depend
on the shapes and, for such models, on the control flow the inputs select, never on
the weights' values), and every probe of the derivation runs on it, with the same
inputs as on meta (token id 0, an all-ones attention mask).

Limit: the fp32 weights must fit in `CPU_MAX_WEIGHT_BYTES` (2 GiB, about 537M
parameters), well under the memory of a developer machine or CI runner (this one has
23 GiB shared by several jobs); the probes' activations (at most 1024 tokens) are small
next to that. A larger model whose meta forward fails is refused, as before, and the
refusal says why (its weight bytes and the bound). The fallback runs only for failures
that come from meta tensors having no values; any other failure is the model's own.
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


def fp32_weight_bytes(model: Any) -> int:
    return 4 * sum(int(p.numel()) for p in model.parameters())


def too_large(model: Any) -> Optional[str]:
    """Why `model` is not run on the CPU, or None."""
    size = fp32_weight_bytes(model)
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


def cpu_models(models: Any, reason: Optional[str]) -> Tuple[Optional[Any], str]:
    """(MetaModels-like record on the CPU, "") when the meta failure `reason` needs values
    and the model is small enough; else (None, why not)."""
    if not needs_values(reason):
        return None, ""
    why = too_large(models.lm)
    if why:
        return None, why
    from dataclasses import replace
    return replace(models, lm=cpu_model(models.lm_class, models.config), base=None, base_class=None), ""


def cpu_probe(models: Any, reason: Optional[str], batch: int, seq_len: int) -> Tuple[Optional[Any], Any, str]:
    """(probe, CPU models, "") from a CPU run when the meta run failed with `reason`;
    (None, None, why not) otherwise."""
    from llm_analysis.exact.probe import run_probe
    cpu, why = cpu_models(models, reason)
    if cpu is None:
        return None, None, why
    probe, cpu_reason = run_probe(cpu.lm, batch, seq_len)
    if probe is None:
        return None, None, f"it fails on the CPU too ({cpu_reason})"
    return probe, cpu, ""


def cpu_prefill_flops(class_name: str, cfg: Any, meta_model: Any, reason: Optional[str], batch: int,
                      seq_len: int) -> Tuple[Optional[Any], Optional[str]]:
    """flops.prefill_flops of the CPU twin of `meta_model` when its meta run failed with
    `reason` and it is small enough; else (None, `reason` with why the CPU did not help)."""
    from llm_analysis.exact.flops import prefill_flops
    if not needs_values(reason):
        return None, reason
    why = too_large(meta_model)
    if why:
        return None, f"{reason}; {why}"
    return prefill_flops(cpu_model(class_name, cfg), batch, seq_len)
