"""What training frameworks add to the memory of the model state and the
activations: each a named, switchable term of the training memory breakdown.
Every default is off (0 / False), so an estimate without them is the arithmetic
of weights, gradients, optimizer states and activations alone; the README lists
the values real frameworks use.

- `distributed_optimizer` (Megatron-LM `--use-distributed-optimizer`, on in the
  NeMo / Megatron-Bridge recipes): optimizer states (fp32 master weights and Adam
  moments) sharded over the data-parallel ranks (dp_shard x cp), gradients and
  weights whole: ZeRO stage 1 (Rajbhandari et al. 2020, arXiv 1910.02054).
  Communication as ZeRO-1: gradient reduce-scatter, parameter all-gather.
- `grad_reduce_in_fp32` (Megatron-Core DistributedDataParallelConfig; the older
  `accumulate_allreduce_grads_in_fp32`, implied by `--bf16`): gradients live in
  one contiguous fp32 `main_grad` buffer of every local parameter, 4 bytes per
  parameter instead of the training dtype's 2, and are reduced in fp32 (the
  data-parallel messages double too). The buffer is whole on every rank even
  with the distributed optimizer (only optimizer states shard).
- `grad_bucket_params`: one communication bucket of gradients held outside the
  gradient storage (DeepSpeed ZeRO-1/2's reduce bucket, `reduce_bucket_size`
  5e8 elements by default; PyTorch DDP's buckets, `bucket_cap_mb` 25, when
  gradients are not bucket views). Megatron-Core's buckets (at most
  max(40M, 1M x dp) parameters: `bucket_size` in
  megatron/core/distributed/distributed_data_parallel_config.py) are views into
  the main_grad buffer, so for Megatron leave it at 0.
- `cuda_context_bytes`: the CUDA context, cuBLAS/cuDNN/NCCL workspaces every
  process holds before any tensor (several hundred MB to ~1 GB; pytorch/pytorch
  issue #34323 measures 781 MB after CUDA initialisation; the
  torch.cuda.memory_allocated docs note the context is not counted there).
- `memory_fragmentation`: a fraction of the allocated bytes the caching
  allocator reserves without being able to use (segments split by differently
  sized blocks; ZeRO arXiv 1910.02054 §3.2 reports OOM with over 30% of memory
  free from fragmentation; PyTorch's `expandable_segments` allocator option exists
  to reduce it). 0.05-0.10 is a typical allowance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

from llm_analysis.errors import ConfigError
from llm_analysis.schema.options import DSZeRO, boolean, non_negative_number


@dataclass(frozen=True)
class FrameworkMemory:
    distributed_optimizer: bool = False
    grad_reduce_in_fp32: bool = False
    grad_bucket_params: float = 0.0
    cuda_context_bytes: float = 0.0
    memory_fragmentation: float = 0.0

    @classmethod
    def from_kwargs(cls, kw: Dict[str, Any]) -> "FrameworkMemory":
        if (kw["distributed_optimizer"] is False and kw["grad_reduce_in_fp32"] is False
                and all(type(kw[k]) in (int, float) and kw[k] == 0
                        for k in ("grad_bucket_params", "cuda_context_bytes", "memory_fragmentation"))):
            return _NO_OVERHEADS  # every term off (the default): nothing to validate or build
        # (as every other flag reads them: True/False, 0/1, "true"/"false", schema/options.py boolean)
        flags = {flag: boolean(kw[flag], flag) for flag in ("distributed_optimizer", "grad_reduce_in_fp32")}
        frag = non_negative_number(kw["memory_fragmentation"], "memory_fragmentation")
        if frag >= 1:
            raise ConfigError(f"memory_fragmentation = {frag!r} is a fraction of the allocated memory; "
                              "valid: 0 <= memory_fragmentation < 1 (e.g. 0.05)")
        return cls(flags["distributed_optimizer"], flags["grad_reduce_in_fp32"],
                   non_negative_number(kw["grad_bucket_params"], "grad_bucket_params"),
                   non_negative_number(kw["cuda_context_bytes"], "cuda_context_bytes"), frag)

    def state_zero(self, ds_zero: DSZeRO) -> DSZeRO:
        """The ZeRO stage the optimizer states and DP traffic follow (the
        distributed optimizer is stage 1)."""
        return DSZeRO.STAGE_1 if self.distributed_optimizer and ds_zero.value < 1 else ds_zero

    def grad_bytes_per_param(self, default_bytes: float) -> float:
        return 4.0 if self.grad_reduce_in_fp32 else default_bytes


_NO_OVERHEADS = FrameworkMemory()

OVERHEAD_TERMS = ("gradient_bucket", "cuda_context", "fragmentation")
