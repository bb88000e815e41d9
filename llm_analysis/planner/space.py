"""The search space (which tp / pp / ep / interleave values are worth trying)
and the cheap bounds that rule candidates out before the full analysis runs.

Every bound here is a *lower* bound of what `LLMAnalysis` computes, so a
candidate it rules out could never have fitted (tests check this)."""

from __future__ import annotations

from typing import List

from llm_analysis.config import DtypeConfig, ModelConfig
from llm_analysis.quantities.state import (master_copy_bytes_per_param, optimizer_bytes_per_param,
                                           trained_weight_bytes_per_param)
from llm_analysis.units import BYTES_FP32

# Adam in mixed precision: fp32 master weights + two fp32 moments (Rajbhandari et al. 2020,
# arXiv 1910.02054 §3.1: 12 bytes per parameter; 16-bit gradients: 2 bytes). The master copy is
# counted only where training() holds one (quantities/state.py `master_copy_bytes_per_param`):
# fp32 weights are their own master, so their states are the 8 bytes of moments alone.
GRADIENT_BYTES_PER_PARAM = 2


def divisors(n: int) -> List[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def tp_options(model: ModelConfig, max_tp: int) -> List[int]:
    """Powers of two up to max_tp that split the query heads evenly and either
    split the KV heads or replicate them whole (Megatron's constraint)."""
    kv = model.num_key_value_heads
    return [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= max_tp and model.n_head % t == 0
            and (kv % t == 0 or t % kv == 0)]


def pp_options(model: ModelConfig, max_pp: int, even_only: bool) -> List[int]:
    """Pipeline sizes up to max_pp; with even_only, only those that divide the layers."""
    return [p for p in range(1, min(max_pp, model.num_layers) + 1)
            if (model.num_layers % p == 0 if even_only else (p & (p - 1)) == 0)]


def ep_options(model: ModelConfig, max_ep: int) -> List[int]:
    """Expert-parallel sizes: divisors of the expert count (1 for dense models)."""
    if model.moe_num_experts <= 1:
        return [1]
    return [e for e in divisors(model.moe_num_experts) if e <= max_ep]


def interleave_options(model: ModelConfig, pp: int, max_v: int, end_slots: int = 0) -> List[int]:
    """Virtual stages per GPU v with an equal number of layers per virtual stage; with `end_slots` (2: the
    embedding and the loss each take a layer's slot, Megatron-Core's account_for_*_in_pipeline_split, model/
    pipeline_layout.py) an equal number of slots."""
    slots = model.num_layers + end_slots
    if pp == 1 or slots % pp:
        return [1]
    return [v for v in divisors(slots // pp) if v <= max_v]


def accounted_pp_options(model: ModelConfig, max_pp: int) -> List[int]:
    """Pipeline sizes that do not divide the layers but divide them with the embedding's and the loss's slots
    (Megatron-Core's account_for_embedding/loss_in_pipeline_split: Llama 3.1 405B's 126 layers over 8 or 16
    stages, as NeMo's and Meta's runs split them), each end stage keeping a layer."""
    n = model.num_layers
    return [p for p in range(2, min(max_pp, n) + 1) if n % p and (n + 2) % p == 0 and (n + 2) // p >= 2]


def min_bytes_per_param(dtype: DtypeConfig) -> float:
    """The fewest bytes any parameter can take under this dtype (weights or
    embeddings, ignoring the quantisation scales, which only add)."""
    return min(dtype.weight_bits, dtype.embedding_bits) / 8


def weight_bytes_lower_bound(num_params: int, dtype: DtypeConfig, tp: int, pp: int, ep: int) -> float:
    """Each parameter is stored at least once among the tp x pp x ep GPUs of a
    replica (experts split over ep, everything else replicated over it)."""
    return num_params * min_bytes_per_param(dtype) / (tp * pp * ep)


def adam_state_bytes_per_param(dtype: DtypeConfig, master_weights_dtype_bytes: float = BYTES_FP32) -> float:
    """Adam's state per parameter as training() holds it: the master copy where the weights are
    narrower than it (12 bytes with bf16 weights, 8 with fp32 weights, their own master)."""
    held = master_copy_bytes_per_param(master_weights_dtype_bytes, trained_weight_bytes_per_param(dtype))
    return optimizer_bytes_per_param(held, None)


def training_state_bytes_lower_bound(num_params: int, dtype: DtypeConfig, tp: int, pp: int, dp: int, ep: int,
                                     ds_zero: int, master_weights_dtype_bytes: float = BYTES_FP32) -> float:
    """Weights + gradients + Adam state per GPU, each sharded as the ZeRO stage
    says (stage >= 1 optimizer state, >= 2 gradients, 3 weights over dp;
    without ZeRO at most over ep for the experts)."""
    model_split = tp * pp

    def shard(stage: int) -> int:
        return model_split * (dp if ds_zero >= stage else ep)
    return num_params * (min_bytes_per_param(dtype) / shard(3) + GRADIENT_BYTES_PER_PARAM / shard(2)
                         + adam_state_bytes_per_param(dtype, master_weights_dtype_bytes) / shard(1))


def iteration_time_lower_bound_s(model_flops_per_iter: float, num_gpus: int, flops_per_gpu_s: float, pp: int,
                                 micro_batches: int, interleave: int) -> float:
    """No iteration is faster than its model FLOPs spread evenly over every GPU
    at the achieved FLOP/s, plus the 1F1B bubble (p - 1) / (v m) of that time
    (Narayanan et al. 2021, arXiv 2104.04473 §2.2)."""
    ideal = model_flops_per_iter / (num_gpus * flops_per_gpu_s)
    return ideal * (1 + (pp - 1) / (interleave * micro_batches))
