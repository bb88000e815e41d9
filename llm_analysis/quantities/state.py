"""Optimizer state and gradient bytes: the one rule for both; and the optimizer step
that reads and writes them (`optimizer_step_s`).

Adam by default (Kingma & Ba, arXiv 1412.6980): master weights
(`master_weights_dtype_bytes`, fp32 by default) plus two fp32 moments = 12 bytes
per trainable parameter; `other_op_bytes` replaces the 8 bytes of moments for
other optimizers (Lion: 4). Gradients are kept in the training dtype, at least
16 bits (the ZeRO paper's 2 + 2 + 12 bytes per parameter; Rajbhandari et al.
2020, arXiv 1910.02054). The master copy exists only where the trained weights are
stored narrower than it (`master_copy_bytes_per_param`): fp32 weights are their own
master (4 + 4 + 8 = 16 bytes per parameter, as fp32 PyTorch / DeepSpeed training
holds), and `master_weights_dtype_bytes = 0` says there is none (pure-bf16 AdamW:
2 + 2 + 8 = 12). ZeRO-1 shards optimizer states over data parallelism,
ZeRO-2 also gradients; routed experts are replicated only over their own
data-parallel group (dp / ep), so they shard over that. The shard group is
dp_shard x cp ranks (HSDP shards inside dp_shard; context-parallel ranks hold the
same weights, so Megatron and torchtitan shard over them too).
"""

from __future__ import annotations

from typing import Optional, Tuple

from llm_analysis.config import DtypeConfig, ParallelismConfig
from llm_analysis.units import ADAM_OPTIMIZER_STATE_BYTES
from llm_analysis.schema.options import non_negative_number
from llm_analysis.model import sum_field
from llm_analysis.quantities.arguments import optimizer_bytes, plain, zero_stage
from llm_analysis.quantities.params import heaviest_stage_params_per_gpu, ops0, routed_expert_params
from llm_analysis.quantities.params import last_layernorm as params_last_layernorm
from llm_analysis.quantities.phases import ONE_TOKEN


# A sanity limit on a parameter count per GPU given by hand (`trainable_params_per_gpu`): a million
# times the largest published models' whole parameter count (~2e12), and far inside the range in
# which the optimizer step's bytes (~28 per parameter) and time stay finite floats.
MAX_PARAMS_PER_GPU = 10**18


def gradient_bytes_per_param(dtype: DtypeConfig) -> float:
    """Gradients in the weights' dtype, never below 16 bits (quantized weights
    are trained through 16-bit gradients)."""
    return dtype.weight_bits / 8 if dtype.weight_bits >= 16 else 2


def master_copy_bytes_per_param(master_weights_dtype_bytes: float, trained_weight_bytes: float) -> float:
    """Bytes of the optimizer's separate master copy of a trained weight stored in `trained_weight_bytes`:
    mixed precision keeps one only where the weights are narrower than the master dtype (bf16 / fp16 / fp8
    weights beside fp32 masters); weights as wide or wider are updated in place and are the master
    themselves (fp32 training), and 0 (no master copy asked for) keeps none."""
    return master_weights_dtype_bytes if master_weights_dtype_bytes > trained_weight_bytes else 0


def trained_weight_bytes_per_param(dtype: DtypeConfig) -> float:
    """Bytes of a trained (full-training) weight as stored: the dtype's weight width."""
    return dtype.weight_bits / 8


def optimizer_bytes_per_param(master_copy_bytes: float, other_op_bytes: Optional[float]) -> float:
    """Optimizer-state bytes of a parameter: its master copy (`master_copy_bytes_per_param`, 0 where the
    weights are their own master) and the optimizer's states (Adam's two fp32 moments by default)."""
    return master_copy_bytes + (ADAM_OPTIMIZER_STATE_BYTES if other_op_bytes is None else other_op_bytes)


def optimizer_and_gradient_bytes(par: ParallelismConfig, params_dense: float, params_expert: float,
                                 master_copy_bytes: float, other_op_bytes: Optional[float], ds_zero,
                                 grad_bytes_per_param: float) -> Tuple[float, float]:
    """(optimizer-state bytes, gradient bytes) per GPU of dense and routed-expert parameters;
    `master_copy_bytes`: the master copy actually held (`master_copy_bytes_per_param`)."""
    ds_zero = zero_stage(ds_zero)
    dp_dense, dp_expert = par.shard_group_size, par.expert_shard_group_size  # dp_shard x cp ranks
    opt = optimizer_bytes_per_param(master_copy_bytes, other_op_bytes) * (
        params_dense / (dp_dense if ds_zero.value >= 1 else 1)
        + params_expert / (dp_expert if ds_zero.value >= 1 else 1))
    grad = grad_bytes_per_param * (params_dense / (dp_dense if ds_zero.value >= 2 else 1)
                                   + params_expert / (dp_expert if ds_zero.value >= 2 else 1))
    return opt, grad


def _of(a, dense: float, expert: float, master: float, other: Optional[float], ds_zero) -> Tuple[float, float]:
    master, other = optimizer_bytes(master, other)
    held = master_copy_bytes_per_param(master, trained_weight_bytes_per_param(a.dtype_config))
    return optimizer_and_gradient_bytes(a.parallelism_config, dense, expert, held, other, ds_zero,
                                        gradient_bytes_per_param(a.dtype_config))


def per_layer(a, master: float, other: Optional[float], ds_zero) -> Tuple[float, float]:
    d = a.describer
    dense = expert = 0.0
    for kind, n in d.layer_groups.items():
        ops = d.layer_ops(ONE_TOKEN, kind)
        e = routed_expert_params(ops, "params_per_gpu")
        expert += n * e
        dense += n * (sum(o.params_per_gpu for o in ops) - e)
    layers = a.model_config.num_layers
    return _of(a, dense / layers, expert / layers, master, other, ds_zero)


def embedding(a, master: float, other: Optional[float], ds_zero) -> Tuple[float, float]:
    params = sum_field(ops0(a), "params_per_gpu", ("embedding", "lm_head"))
    return _of(a, params, 0.0, master, other, ds_zero)


def last_layernorm(a, master: float, other: Optional[float], ds_zero) -> Tuple[float, float]:
    return _of(a, params_last_layernorm(a), 0.0, master, other, ds_zero)


def weight_update_bytes_per_param(dtype: DtypeConfig, master_weights_dtype_bytes: float,
                                  other_op_bytes: Optional[float],
                                  trained_weight_bytes: Optional[float] = None,
                                  gradient_bytes: Optional[float] = None) -> float:
    """Optimizer step traffic per parameter: the states read and written, the gradient read, and
    with a master copy (`master_copy_bytes_per_param`) the master read and written and the stored
    weight written from it at the width memory holds it (bf16 2, fp8 1: Megatron's fp8 parameters are
    cast from the master in the step); without one (fp32 weights, or master 0) the stored weights
    themselves read and written. `trained_weight_bytes`: the trained weights' width (default the
    dtype's; LoRA: the adapters'); `gradient_bytes`: the width the gradients are held in (default
    `gradient_bytes_per_param`; LoRA: the adapters', an fp32 main-grad buffer: 4), read as held."""
    other = ADAM_OPTIMIZER_STATE_BYTES if other_op_bytes is None else other_op_bytes
    w = trained_weight_bytes_per_param(dtype) if trained_weight_bytes is None else trained_weight_bytes
    grad = gradient_bytes_per_param(dtype) if gradient_bytes is None else gradient_bytes
    held = master_copy_bytes_per_param(master_weights_dtype_bytes, w)
    weights = 2 * held + w if held else 2 * w
    return weights + 2 * other + grad


def updated_params_per_gpu(a, ds_zero) -> float:
    """Parameters one GPU updates: the heaviest stage's, its 1/dp ZeRO shard from stage 1 on."""
    ds_zero = zero_stage(ds_zero)
    p = a.parallelism_config
    dense, expert = heaviest_stage_params_per_gpu(a)
    if ds_zero.value >= 1:
        dense, expert = dense / p.shard_group_size, expert / p.expert_shard_group_size
    return dense + expert


def optimizer_step_s(a, ds_zero, master_weights_dtype_bytes: float, other_op_bytes: Optional[float],
                     trainable_params_per_gpu: Optional[float], trained_weight_bytes: Optional[float] = None,
                     gradient_bytes: Optional[float] = None) -> float:
    """Seconds of the optimizer step on the heaviest stage's GPU: a memory-bound pass over
    `weight_update_bytes_per_param` bytes of each parameter it updates (`updated_params_per_gpu`,
    or `trainable_params_per_gpu` when given: LoRA adapters, say, stored in `trained_weight_bytes`
    with gradients of `gradient_bytes`)."""
    master_weights_dtype_bytes, other_op_bytes = optimizer_bytes(master_weights_dtype_bytes, other_op_bytes)
    if trainable_params_per_gpu is not None:
        trainable_params_per_gpu = non_negative_number(plain(trainable_params_per_gpu), "trainable_params_per_gpu",
                                                       MAX_PARAMS_PER_GPU)
    params = updated_params_per_gpu(a, ds_zero) if trainable_params_per_gpu is None else trainable_params_per_gpu
    return a.cost_model.memory_pass_s(
        params * weight_update_bytes_per_param(a.dtype_config, master_weights_dtype_bytes, other_op_bytes,
                                               trained_weight_bytes, gradient_bytes))
