"""Operator roles are fields set by the describer, never parsed from names.

A custom describer that renames every operator must get exactly the same
numbers (parameters, FLOPs, memory, times) from inference() and training();
and every numeric field of an operator record must matter to some result (a
field computed and never read is dead arithmetic that misleads readers)."""

from __future__ import annotations

import dataclasses

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.errors import DoesNotFitError
from llm_analysis.model import LayerDescriber, Operator

# this module's analyses warn of nothing its tests check (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("quiet_package_warnings")

H100 = get_gpu_config_by_name("h100-sxm-80gb")
BF16 = get_dtype_config_by_name("w16a16e16")

# dense GQA with TP, MoE with shared experts (MLA) over PP, MoE with EP, sandwich norms with SP
SETUPS = [
    ("meta-llama/Llama-3.1-8B", dict(tp_size=2, dp_size=2)),
    ("deepseek-ai/DeepSeek-V2-Lite", dict(tp_size=2, pp_size=2, dp_size=2)),
    ("Qwen/Qwen3-30B-A3B", dict(tp_size=2, dp_size=4, ep_size=4)),
    ("google/gemma-2-9b", dict(tp_size=2, sp_size=2)),
]


def _model(name):
    try:
        return get_model_config_by_name(name)
    except Exception:  # catalogue names use "_" for "/" in some versions
        return get_model_config_by_name(name.replace("/", "_"))


def _transforming(fn):
    """A describer whose every operator goes through fn (a copy is transformed)."""
    class Transformed(LayerDescriber):
        def layer_ops(self, phase, kind):
            return [fn(dataclasses.replace(o)) for o in super().layer_ops(phase, kind)]

        def embedding_ops(self, phase):
            return [fn(dataclasses.replace(o)) for o in super().embedding_ops(phase)]

        def head_ops(self, phase, with_embedding=True):
            return [fn(dataclasses.replace(o)) for o in super().head_ops(phase, with_embedding)]

    class Analysis(LLMAnalysis):
        describer_class = Transformed

    return Analysis


def _numbers(cls, model, par, **kw):
    """Every figure the public API computes for a few calls (names left out)."""
    a = cls(model, H100, BF16, ParallelismConfig(**par), flops_efficiency=0.5, hbm_memory_efficiency=0.8, **kw)
    out = {"params": a.get_num_params_total(), "active": a.get_num_active_params_total(),
           "weights_z3": a.get_weight_memory_per_gpu(3), "opt": a.get_memory_optimizer_state_and_gradient_per_layer(),
           "fwd": a.get_latency_fwd(2, 256)}
    n = 1 if par.get("cp_size", 1) > 1 else 16  # context parallelism models prefill only
    out["infer"] = _call(a.inference, batch_size_per_gpu=2, seq_len=256, num_tokens_to_generate=n)
    for rc in range(5):
        out[f"train_rc{rc}"] = _call(a.training, batch_size_per_gpu=1, seq_len=256, gradient_accumulation_steps=2,
                                     activation_recomputation=rc, ds_zero=rc % 4, overlap_tp_comm=rc == 2)
    out["lora"] = _call(a.training, batch_size_per_gpu=1, seq_len=256, ds_zero=2,
                        lora=dict(rank=8, target_modules=["q_proj", "up_proj", "down_proj"]))
    return out


def _call(fn, **kw):
    """The summary, or the does-not-fit message (its numbers are results too)."""
    try:
        return fn(**kw)
    except DoesNotFitError as e:
        return str(e)


def _renamed(op: Operator) -> Operator:
    op.name = f"renamed_{abs(hash(op.name)) % 997}_{op.kind}"
    return op


@pytest.mark.parametrize("name,par", SETUPS)
def test_renaming_every_operator_changes_no_number(name, par):
    model = _model(name)
    base = _numbers(LLMAnalysis, model, par)
    renamed = _numbers(_transforming(_renamed), model, par)
    assert _close(renamed, base), "a number changed when only operator names did"


def _close(a, b, rel=1e-12) -> bool:
    """Equal structure, numbers within `rel` relative (the same figures may be summed in another order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], rel) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return a == b or abs(a - b) <= rel * max(abs(a), abs(b))
    return a == b


# fields that are labels (identity, roles, display), not quantities
_LABELS = {"name", "group", "kind", "collective", "comm_group", "shapes", "expert_role", "recompute_class",
           "lora_target"}
_QUANTITIES = [f.name for f in dataclasses.fields(Operator) if f.name not in _LABELS]


def test_the_quantity_fields_are_the_expected_ones():
    # a new field must either be read by some view (and join this list) or not exist
    assert set(_QUANTITIES) == {
        "params", "params_per_gpu", "weight_bytes_per_gpu", "flops", "flops_per_gpu", "bytes_read_per_gpu",
        "bytes_written_per_gpu", "kv_cache_bytes_read_per_gpu", "comm_bytes_per_gpu", "comm_group_size",
        "in_features", "out_features", "shared_weight_bytes_read_per_gpu", "kernel_dims",
        "overlap_flops_per_gpu", "overlap_bytes_per_gpu", "masked_flops", "fused_widths", "active_params"}


@pytest.mark.parametrize("field", _QUANTITIES)
def test_every_quantity_field_is_used(field):
    """Doubling or zeroing the field on every operator must change some result;
    a field computed and never read (e.g. a 'vector FLOPs' count that no view
    sums) changes nothing either way."""
    # a tied-embedding model for the tied head's shared-weight read (Llama-3.1-8B unties it)
    name = "meta-llama/Llama-3.2-1B" if field == "shared_weight_bytes_read_per_gpu" else "meta-llama/Llama-3.1-8B"
    model, par = _model(name), dict(tp_size=2, dp_size=2)
    if field.startswith("overlap_"):  # only ring attention's K/V exchange runs under kernel work
        par = dict(tp_size=2, cp_size=2)
    # the kernel's shape (and a fused GEMM's parts) is read by the calibrated cost model only (the
    # roofline needs FLOPs and bytes)
    kw = {"perf_model": "calibrated"} if field in ("kernel_dims", "fused_widths") else {}
    base = _numbers(LLMAnalysis, model, par, **kw)
    # ring attention's overlapped FLOPs are the flash core's causal share: at these short lengths the
    # core is memory-bound until its FLOPs grow several-fold, so that field is scaled further
    factors = (8, 0) if field == "overlap_flops_per_gpu" else (2, 0)
    for factor in factors:
        def perturbed(op, factor=factor):
            value = getattr(op, field)
            if value is None:  # active_params: None is "all of params" (or a routed expert's top-k share)
                value = op.params
            setattr(op, field, value * factor)
            return op
        if _numbers(_transforming(perturbed), model, par, **kw) != base:
            return
    pytest.fail(f"Operator.{field} changes no result: computed and never used")
