"""The calibrated cost model: what a well-tuned framework measures, not a bound.

Every number comes from a `Profile` (cost/profiles/<generation>.json, each
value with its source); the functions are those of `gemm` (kernels) and `nccl`
(collectives). Per operator kind, on one GPU:

- matmul (M tokens, N, K from the operator's `kernel_dims`): FLOPs at the shape's
  efficiency (tile and wave quantisation, short-K loss, a plateau below peak;
  `gemm.gemm_efficiency`, fp8 at its own plateau), HBM bytes at the streaming
  efficiency; time = max(compute, memory, kernel floor). The plateau is that of the
  tensor cores the GEMM runs on (16-bit, fp8 or FP4: `gemm_precision`; measured FP4
  GEMMs reach about half the 16-bit plateau's share of their own peak on B200/B300). A GEMM fusing
  sibling projections (`Operator.fused_widths`: q/k/v, gate/up under serving conventions) runs at the
  better of its whole shape's efficiency and that of its parts in turn (`gemm.FusedGemmShape`).
- routed-expert matmuls (MoE): one grouped GEMM over the GPU's experts, each expert
  a GEMM of M = tokens per expert (the GPU's token-expert pairs over the local
  experts they reach, uniform routing), at that shape's efficiency times the
  measured grouped-GEMM share of the precision (`moe_gemm_share`,
  `moe_gemm_fp8_share`, `moe_gemm_fp4_share`: fused MoE layers as vLLM runs them
  reach a fraction of what one dense GEMM of the per-expert shape reaches: routing,
  permutation, block scales, per-expert tails); their weights stream at the fused MoE's
  own measured rate (`moe_stream_efficiency`: block-scaled FP8 and FP4 experts stream
  below the dense GEMMs' `hbm_efficiency`), plus, where a profile has it, the fused MoE's measured
  fixed time per expert GEMM (`moe_gemm_fixed_s`: block scales, activation quantization, token
  alignment; benchmarks/moe_fixed_values.py). Below GROUPED_TILE_TOKENS tokens per
  expert (a decode step's one or two) each expert's GEMM is one short row of tiles, and
  the fused kernel's grid runs the reached experts' tiles side by side: each expert's
  GEMM on its share of the SMs (`expert_sms`), one wave schedule for the group, instead
  of one expert's few tiles alone on the GPU (which left most SMs idle and made the
  layer compute-bound at 2x the measured SGLang fused MoE time at 1-2 tokens per expert:
  benchmarks/family_operator_comparison.py); there the kernel streams the reached
  experts' weights. The shares are fitted at >= GROUPED_TILE_TOKENS tokens per expert
  (benchmarks/measured_operator_values.py), under the per-expert rule, which those
  measurements fit better (narrow experts after the TP split run below the group
  rule there). Weights are read once per call (a step).
  A serving engine with MoE kernels of its own (`moe_kernels`, named by its engine profile:
  "sglang", "trtllm", and "sglang_wide_ep" for SGLang's experts split over expert-parallel
  ranks) takes its family's measured share (`moe_gemm_fp8_share_sglang`, ...);
  where the generation has none, the family's fallback (wide EP -> the engine's fused MoE), else
  vLLM's. inference() and training() (no engine) take vLLM's.
- attention core: prefill (no KV cache read) at the flash-attention efficiency
  of its query length (at the 16-bit peak for fp8 and FP4 dtypes: the core runs in
  16 bits); decode (reads a KV cache) streams the cache at the paged-attention HBM
  efficiency; floored.
- norms, activations, embeddings: HBM streaming at the streaming efficiency, floored.
- training: a training step's compute kernels run at `training_compute_efficiency` of
  the rates above (`for_training`). The operator efficiencies are measured in short
  kernel benchmarks (cost/profiles/measured/: boost clocks, an idle GPU); a training
  step holds the GPU at its power limit for seconds, where the SM clock settles below
  boost, and the communication kernels it overlaps (DP reduce-scatters, FSDP
  gathers) hold SMs meanwhile. Fitted on end-to-end training runs; HBM streaming is
  not scaled (the memory clock does not follow the SM clock).
- kernel floor: `kernel_floor_graph_s` for inference (serving engines launch
  decode and prefill from CUDA graphs: TensorRT-LLM, vLLM, gpt-fast),
  `kernel_floor_eager_s` for training (eager PyTorch / Megatron launch every
  kernel from Python, through the dispatcher), `kernel_floor_native_s` for a C++
  engine launching every kernel from the host without graphs (FasterTransformer,
  TensorRT-LLM's GptSession without CUDA graphs: `kernel_launch="native"`): host
  launch work differs by the code that issues it, not by the GPU. `LLMAnalysis`
  picks "graph" for inference() and "eager" for training().
- collectives: NCCL's algorithms (`nccl.collective_time_s`) on the fabric
  derived from the GPU config (one ring per NIC across nodes, NVLink islands,
  NVLink SHARP, PCIe), ranks laid out TP fastest, then PP, then DP; an inference
  engine's tensor-parallel all-reduces (`allreduce_engine`: serve()'s engine, or
  "nccl" for inference()) as cost/engine_allreduce.py times them.

Overlap of communication and compute is the orchestrators' (training/run.py,
inference/timing.py), the same under both cost models, each item stated there:
the DP gradient reduce-scatter/all-reduce runs under the last micro-batch's
backward (PyTorch DDP / Megatron bucketed overlap), ZeRO-3 / FSDP gathers are
prefetched under the previous layer's compute (per micro-batch, only the
excess is exposed), TP collectives are exposed (Megatron-LM runs them on the
critical path unless `overlap_tp_comm=True`; with "backward" its asynchronous
input-gradient reductions run under the weight-gradient GEMMs:
training/overheads_tp.py), pipeline hand-offs are exposed.

Per-call cost: every profile value is read once here into plain attributes; what
does not depend on a call's shape is worked out once per weight shape (`gemm.GemmShape`:
the winning tile kept per bucket of M, cost/gemm_buckets.py, and a memo by M) and per
collective group (`nccl.collective_timer`). A phase with a table (model/phase_table.py)
is timed from the table's figures (cost/calibrated_table.py), as the roofline's is.
"""

from __future__ import annotations

import copy
import math
import os
from typing import Dict, Optional, Tuple

from llm_analysis.config import DtypeConfig, GPUConfig, ParallelismConfig
from llm_analysis.units import GB
from llm_analysis.errors import ConfigError
from llm_analysis.cost.calibrated_table import (calibrated_growing_steps_split_s, calibrated_table_kernels_s,
                                               calibrated_table_times_s, kernel_plan)
from llm_analysis.cost.gemm import (LAUNCH_MODES, FusedGemmShape, GemmShape, flash_backward_rate, gemm_wave_tail_for,
                                    launch_floor_s)
from llm_analysis.cost.model import CostModel
from llm_analysis.cost.engine_allreduce import ENGINES as MEASURED_ENGINES
from llm_analysis.cost.engine_allreduce import engine_allreduce_timer, engine_tp_collective
from llm_analysis.cost.links import group_stride
from llm_analysis.cost.measured_nccl import measured_nccl_timer
from llm_analysis.cost.nccl import collective_timer as nccl_timer
from llm_analysis.cost.nccl import fabric_from_gpu_config
from llm_analysis.cost.profiles import MOE_KERNEL_FAMILIES, Profile, check_profile_matches_gpu
from llm_analysis.schema.formats import FP4_FORMATS


def _is_fp8(dtype: DtypeConfig) -> bool:
    return (max(dtype.weight_bits, dtype.activation_bits) == 8 and dtype.activation_format == "float"
            and dtype.weight_format == "float")


def trains_integer_gemms(dtype: DtypeConfig) -> bool:
    """Integer weights and activations of at most 8 bits (W8A8 int8, W4A8, W4A4 int4): GEMMs no mainstream
    training framework runs forward and backward (Megatron-LM, TransformerEngine and DeepSpeed train in
    bf16 or fp8). A training step with them is timed as fp8 training's recipe would run on the integer
    tensor cores (docs/training.md): each GEMM operand quantised per tensor in a kernel of its own
    (training/fp8_casts.py) and the GEMMs at the profile's fp8 plateau, the only measured low-precision
    training-size GEMM efficiency; before, int8 paid no quantisation and ran at the 16-bit plateau of the
    int8 peak, 35% faster than fp8 on a B200 where both peaks are 4.5 PFLOP/s."""
    return dtype.activation_format == "int" and dtype.activation_bits <= 8 and dtype.weight_bits <= 8


def gemm_precision(dtype: DtypeConfig) -> str:
    """The tensor cores a matmul of this dtype runs on, as the profiles' GEMM parameters name them:
    "fp4" (FP4 weights and activations), "fp8" (8-bit float activations with float or FP4
    weights: FP8 and W4A8 MXFP4), else "16-bit" (16-bit, weight-only, integer and 32-bit GEMMs:
    the 16-bit plateau, as before these keys existed)."""
    if dtype.activation_format in FP4_FORMATS:
        return "fp4"
    if dtype.activation_bits == 8 and dtype.activation_format == "float" and dtype.weight_format != "int" \
            and dtype.weight_bits <= 8:
        return "fp8"
    return "16-bit"


# the profile parameters of each tensor-core precision (absent from a profile: the 16-bit ones)
PLATEAU_KEYS = {"16-bit": "gemm_plateau_efficiency", "fp8": "gemm_fp8_plateau_efficiency",
                "fp4": "gemm_fp4_plateau_efficiency"}
MOE_SHARE_KEYS = {"16-bit": "moe_gemm_share", "fp8": "moe_gemm_fp8_share", "fp4": "moe_gemm_fp4_share"}


def quantized_gemm_terms(values, precision: str) -> Tuple[float, float]:
    """(fixed seconds, seconds per element of K) that a linear of this precision takes at decode sizes
    beyond streaming its weights, from a profile's values (absent, and for 16-bit GEMMs: 0, 0).

    A serving engine's fp8 or FP4 linear runs a kernel that quantizes the activations (and, with a
    dynamic scale, one that finds their maximum) before the GEMM, and the low-precision GEMM's
    prologue (scale loads, TMA descriptors) costs more than a 16-bit one's; at small M an NVFP4 GEMM
    also runs all of K in one output tile's main loop (K is not split), so its time never falls below
    K x k_serial however few bytes it streams. Measured (cost/profiles/measured, read by
    benchmarks/measured_operator_values.py) as: time = max(streaming, K x k_serial) + fixed, with
    fixed counted over what a 16-bit GEMM of the same bytes takes."""
    if precision == "16-bit":
        return 0.0, 0.0
    return values.get(f"gemm_{precision}_fixed_s", 0.0), values.get(f"gemm_{precision}_k_serial_s", 0.0)


def gemm_plateau(values, precision: str) -> float:
    """The GEMM plateau of a precision in a profile's values (its own key, else the 16-bit plateau)."""
    return values.get(PLATEAU_KEYS[precision], values["gemm_plateau_efficiency"])


# a MoE kernel family without a measured share for a precision -> the family whose share it takes
# (the families of cost/profiles.py MOE_KERNEL_FAMILIES; the last fallback is vLLM's, the unsuffixed keys)
MOE_KERNEL_FALLBACK = {"sglang_wide_ep": "sglang"}


# tokens per expert from which a routed expert's GEMM is timed alone on the GPU (the rule the measured
# grouped-GEMM shares are fitted under, at >= this many: benchmarks/measured_operator_values.py
# MOE_MIN_TOKENS_PER_EXPERT); below, the reached experts' tiles share the SMs (`expert_sms`)
GROUPED_TILE_TOKENS = 64


def expert_sms(num_sms: int, active_experts: float) -> int:
    """The SMs one of `active_experts` routed experts' GEMMs runs on when a grouped GEMM runs them
    side by side: the GPU's SMs shared evenly, at least one."""
    return max(1, round(num_sms / max(1.0, active_experts)))


def moe_share_key(precision: str, kernels: Optional[str] = None) -> str:
    """The profile key of a precision's grouped expert GEMM share for a MoE kernel family
    (None or "vllm": the unsuffixed vLLM key)."""
    base = MOE_SHARE_KEYS[precision]
    return base if kernels in (None, "vllm") else f"{base}_{kernels}"


MOE_STREAM_KEYS = {"16-bit": "moe_stream_efficiency", "fp8": "moe_fp8_stream_efficiency",
                   "fp4": "moe_fp4_stream_efficiency"}


def moe_stream_key(precision: str, kernels: Optional[str] = None) -> str:
    """The profile key of a precision's fused-MoE weight streaming efficiency for a MoE kernel family
    (None or "vllm": the unsuffixed vLLM key)."""
    base = MOE_STREAM_KEYS[precision]
    return base if kernels in (None, "vllm") else f"{base}_{kernels}"


def moe_stream_efficiency(values, precision: str, kernels: Optional[str] = None) -> float:
    """The rate a fused MoE layer of a kernel family streams its reached experts' weights at decode
    sizes, over the HBM spec (benchmarks/moe_stream_values.py): the family's own key where measured,
    else its fallback family's (MOE_KERNEL_FALLBACK), else vLLM's, else the dense GEMMs'
    `hbm_efficiency` (no fused MoE measured)."""
    if kernels not in (None, "vllm") and kernels not in MOE_KERNEL_FAMILIES:
        raise ConfigError(f"moe_kernels = {kernels!r}; valid: vllm, {', '.join(MOE_KERNEL_FAMILIES)}")
    while True:
        own = values.get(moe_stream_key(precision, kernels))
        if own is not None:
            return own
        if kernels in (None, "vllm"):
            return values["hbm_efficiency"]
        kernels = MOE_KERNEL_FALLBACK.get(kernels)


MOE_FIXED_KEYS = {"16-bit": "moe_gemm_fixed_s", "fp8": "moe_fp8_gemm_fixed_s", "fp4": "moe_fp4_gemm_fixed_s"}


def moe_gemm_fixed_key(precision: str, kernels: Optional[str] = None) -> str:
    """The profile key of a precision's fused-MoE fixed time per expert GEMM for a MoE kernel family
    (None or "vllm": the unsuffixed vLLM key)."""
    base = MOE_FIXED_KEYS[precision]
    return base if kernels in (None, "vllm") else f"{base}_{kernels}"


def moe_gemm_fixed_s(values, precision: str, kernels: Optional[str] = None) -> float:
    """The fixed time a fused MoE layer of a kernel family adds to each of its three expert GEMMs beyond
    streaming the reached experts' weights (block-scale loads, the activations' per-token-group
    quantization, the sorted-token alignment: benchmarks/moe_fixed_values.py): the family's own key
    where measured and written, else its fallback family's (MOE_KERNEL_FALLBACK: wide EP -> SGLang's),
    else 0 (the kernel floors hold the layer's fixed costs, as before the key existed). Unlike the
    shares and streaming rates, another family never takes vLLM's: the fixed time is one kernel
    implementation's (on Hopper, block FP8: vLLM's Triton fused_moe 7.1 us per GEMM, SGLang's 2.3 us over
    its own measured streaming rate, TensorRT-LLM's 14 us)."""
    if kernels in (None, "vllm"):
        return values.get(moe_gemm_fixed_key(precision, None), 0.0)
    if kernels not in MOE_KERNEL_FAMILIES:
        raise ConfigError(f"moe_kernels = {kernels!r}; valid: vllm, {', '.join(MOE_KERNEL_FAMILIES)}")
    own = values.get(moe_gemm_fixed_key(precision, kernels))
    if own is not None:
        return own
    fallback = MOE_KERNEL_FALLBACK.get(kernels)
    return moe_gemm_fixed_s(values, precision, fallback) if fallback else 0.0


def moe_gemm_share(values, precision: str, kernels: Optional[str] = None) -> float:
    """The grouped expert GEMM share of a precision for a MoE kernel family: the family's own key
    where measured, else its fallback family's (MOE_KERNEL_FALLBACK), else vLLM's (its own key, else
    the 16-bit one, else 1)."""
    if kernels in (None, "vllm"):
        return values.get(MOE_SHARE_KEYS[precision], values.get("moe_gemm_share", 1.0))
    if kernels not in MOE_KERNEL_FAMILIES:
        raise ConfigError(f"moe_kernels = {kernels!r}; valid: vllm, {', '.join(MOE_KERNEL_FAMILIES)}")
    own = values.get(moe_share_key(precision, kernels))
    return own if own is not None else moe_gemm_share(values, precision, MOE_KERNEL_FALLBACK.get(kernels))


def _weight_only_int_bits(dtype: DtypeConfig) -> int:
    """4 or 8 for integer weights with wider float activations (weight-only quantisation), else 0."""
    wo = dtype.weight_format == "int" and dtype.activation_format == "float" and dtype.weight_bits < dtype.activation_bits
    return dtype.weight_bits if wo and dtype.weight_bits in (4, 8) else 0


def _no_time(nbytes_per_gpu: float) -> float:
    """The timer of a collective an engine does not run (the all-gather of a sequence-parallel pair
    whose all-reduce is charged on its reduce-scatter: cost/engine_allreduce.py)."""
    return 0.0


def _ranks_per_island(group_size: int, stride: int, island: int) -> int:
    """Ranks of a group spaced `stride` apart that share one NVLink island (a divisor of the group)."""
    r = max(1, min(group_size, island // stride)) if stride < island else 1
    while group_size % r:
        r -= 1
    return r


class CalibratedCostModel(CostModel):
    """Operator -> seconds as frameworks measure it, from a calibration `Profile`."""

    def __init__(self, gpu: GPUConfig, dtype: DtypeConfig, parallelism: ParallelismConfig, profile: Profile,
                 launch: str = "graph", num_gpus_per_node: Optional[int] = None, training: bool = False,
                 moe_kernels: Optional[str] = None, sustained: bool = False, allreduce_engine: Optional[str] = None,
                 dense_16bit: bool = False):
        """`dense_16bit`: only the routed experts are held in the dtype's low-bit format, every other linear
        at 16 bits (gpt-oss's MXFP4 checkpoint: model/checkpoint_weights.py); those run on the 16-bit tensor
        cores without the low-bit kernels' quantize and prologue costs, the experts at the dtype's."""
        super().__init__(gpu, dtype, parallelism, num_gpus_per_node=num_gpus_per_node)
        if launch not in LAUNCH_MODES:
            raise ConfigError(f"launch = {launch!r}; valid: {', '.join(LAUNCH_MODES)}")
        check_profile_matches_gpu(profile, gpu.name)
        self.profile, self.launch, self.training, self.sustained = profile, launch, training, sustained
        v = profile.values
        self._fp8 = _is_fp8(dtype)
        # integer GEMMs in a training step: timed as fp8 training's recipe (`trains_integer_gemms`)
        self.trains_integer_as_fp8 = training and trains_integer_gemms(dtype)
        # fp8 training casts each GEMM operand in a kernel of its own (training/fp8_casts.py); so does int8's
        self.times_fp8_training_casts = self._fp8 or self.trains_integer_as_fp8
        # the loss over the vocabulary runs element-wise float32 kernels (training/loss.py)
        self.times_training_loss = True
        self._num_sms = profile.num_sms(gpu.name)
        # a training step's or inference() call's kernels compute below the benchmarks' rate (module docstring)
        self._compute_share = v.get("training_compute_efficiency", 1.0) if (training or sustained) else 1.0
        self.dense_16bit = dense_16bit
        # the routed experts' GEMMs at the dtype's tensor cores; every other linear at them too, unless
        # `dense_16bit` holds those at 16 bits
        self._expert_precision = "fp8" if self.trains_integer_as_fp8 else gemm_precision(dtype)
        self._expert_peak = self.peak_flops_per_s * self._compute_share
        self._precision = "16-bit" if dense_16bit else self._expert_precision
        self._peak = gpu.peak_fp16_TFLOPS * 1e12 * self._compute_share \
            if self._precision != self._expert_precision else self._expert_peak
        self._hbm = gpu.hbm_bandwidth_in_GB_per_sec * GB
        self._plateau = gemm_plateau(v, self._precision)
        self._wave_tail = gemm_wave_tail_for(v, self._precision)
        self._expert_plateau = gemm_plateau(v, self._expert_precision)
        self._expert_wave_tail = gemm_wave_tail_for(v, self._expert_precision)
        self.moe_kernels = moe_kernels
        # the serving engine whose measured all-reduce times tensor-parallel all-reduces (None: NCCL's;
        # cost/engine_allreduce.py)
        self.allreduce_engine = allreduce_engine
        self._moe_share = moe_gemm_share(v, self._expert_precision, moe_kernels)
        self._moe_stream_eff = moe_stream_efficiency(v, self._expert_precision, moe_kernels)
        # a serving engine's fused MoE kernels' fixed time (measured on them); a training step runs other
        # MoE kernels (Megatron's / TransformerEngine's grouped GEMMs), none measured: 0 there
        self._moe_fixed_s = 0.0 if training else moe_gemm_fixed_s(v, self._expert_precision, moe_kernels)
        self._hbm_eff, self._hbm_half = v["hbm_efficiency"], v["hbm_half_saturation_bytes"]
        # weight-only GEMMs dequantise in their main loop and stream below the 16-bit rate
        wo_bits = _weight_only_int_bits(dtype)
        self._matmul_hbm_eff = self._hbm_eff * (v[f"weight_only_int{wo_bits}_stream_factor"] if wo_bits else 1.0)
        # an fp8 / FP4 linear's quantize kernels and fixed costs, and NVFP4's unsplit K loop at small M
        # (`quantized_gemm_terms`): added to its streaming time, so a compute-bound (large-M) GEMM, whose
        # plateau was read on the same measured kernels, does not move
        self._quant_fixed_s, self._quant_k_serial_s = quantized_gemm_terms(v, self._precision)
        # fp8 training/serving keeps attention in 16 bits (TransformerEngine runs FP8 only in its
        # Linear/GEMM layers; the flash-attention core stays bf16), and so does FP4 and W4A8 serving
        # (vLLM / TensorRT-LLM quantise the linear layers; the attention core takes bf16 queries):
        # attention at the 16-bit peak
        self._attn_peak = gpu.peak_fp16_TFLOPS * 1e12 * self._compute_share if self._precision != "16-bit" \
            else self._peak
        self._attn_eff, self._attn_half = v["attn_prefill_efficiency"], v["attn_prefill_half_seq"]
        self._decode_eff = v["attn_decode_hbm_efficiency"]
        # a paged-attention decode call's fixed time (TensorRT-LLM's attention op with RoPE and the KV
        # append fused in, the split-KV reduction, the tail of a kernel chain inside a CUDA graph: ~10-13 us
        # measured at any batch and KV length too small to stream for longer; absent: 0)
        self._decode_fixed_s = v.get("attn_decode_fixed_s", 0.0)
        self._floor = launch_floor_s(v, launch)
        # quantised activations are a GEMM's input only: the residual stream that tensor parallelism
        # reduces and gathers between the GEMMs stays in 16 bits (TensorRT-LLM's and vLLM's all-reduce
        # of the hidden states, the norm then quantising its output for the next fp8 / FP4 GEMM;
        # TransformerEngine's row-parallel reduce-scatter): TP payloads at 2 bytes per element
        a_bytes = dtype.activation_bytes_per_element
        self._tp_payload_scale = max(a_bytes, 2.0) / a_bytes if a_bytes > 0 else 1.0
        self._fabric = fabric_from_gpu_config(gpu, self.num_gpus_per_node)
        self._gemms: Dict[Tuple[int, int], GemmShape] = {}  # per weight shape (N, K)
        # per (N, K, SMs): a routed expert's GEMM on its share of the SMs (`routed_expert_eff`)
        self._expert_gemms: Dict[Tuple[int, int, int], GemmShape] = {}
        self._timers: Dict[tuple, object] = {}  # per (collective, group size, group): nccl.collective_timer
        # the views of this model (`_view`): one object per (launch, training, moe_kernels, sustained), so
        # that what the describer keeps per cost model (phase times) is kept between calls
        self._views: Dict[tuple, "CalibratedCostModel"] = {}

    @property
    def kernel_floor_s(self) -> float:
        return self._floor

    @property
    def compute_share(self) -> float:
        """The share of the operator benchmarks' compute rate this model's kernels reach: the profile's
        training_compute_efficiency in a training step's (or sustained) view, 1 otherwise."""
        return self._compute_share

    def without_kernel_floor(self) -> "CalibratedCostModel":
        """This model with no kernel floor (`CostModel.without_kernel_floor`): a copy sharing its memos
        (GEMM efficiencies and collective timers do not depend on the floor), kept per model."""
        view = self._views.get(("no floor", id(self)))
        if view is None:
            view = copy.copy(self)
            view._floor = 0.0
            self._views[("no floor", id(self))] = view
        return view

    def with_launch(self, launch: str) -> "CalibratedCostModel":
        """The same model with another kernel floor ('graph' serving, 'eager' training, 'native' C++ engines)."""
        return self._view(launch, self.training, self.moe_kernels, self.sustained, self.allreduce_engine)

    def for_training(self, launch: str = "eager") -> "CalibratedCostModel":
        """The model of a training step: kernel floor `launch`, compute at training_compute_efficiency."""
        return self._view(launch, True, self.moe_kernels, self.sustained, None)  # (training runs NCCL)

    def for_inference(self) -> "CalibratedCostModel":
        """The model of an inference() call: compute at the sustained share (training_compute_efficiency,
        module docstring); serving's step times keep the unscaled model (their engine profiles were
        fitted on it)."""
        return self._view(self.launch, self.training, self.moe_kernels, True, self.allreduce_engine)

    def for_call(self, kernel_launch: Optional[str], training: bool) -> "CalibratedCostModel":
        """The view an inference() or training() call is timed with, whose rates its summary and report
        state: a training step's (`for_training`, eager floor unless `kernel_launch` says otherwise); an
        inference() call without CUDA graphs (`kernel_launch` "eager" or "native": static batches of C++
        engines or PyTorch) the sustained one (`for_inference`); else this model, the one serve() times its
        steps with (its engine profiles were fitted on it)."""
        if training:
            return self.for_training(kernel_launch or "eager")
        if kernel_launch in (None, "graph") or self.sustained:
            return self
        return self.for_inference()

    def with_moe_kernels(self, moe_kernels: Optional[str]) -> "CalibratedCostModel":
        """The same model with routed experts at the grouped GEMM share of a serving engine's MoE
        kernel family (`moe_gemm_share`; None or "vllm": vLLM's)."""
        return self._view(self.launch, self.training, moe_kernels, self.sustained, self.allreduce_engine)

    def with_allreduce_engine(self, engine: Optional[str]) -> "CalibratedCostModel":
        """The same model with tensor-parallel all-reduces as serving engine `engine` runs them
        (cost/engine_allreduce.py; None: NCCL's)."""
        return self._view(self.launch, self.training, self.moe_kernels, self.sustained, engine)

    def _view(self, launch: str, training: bool, moe_kernels: Optional[str], sustained: bool,
              allreduce_engine: Optional[str]) -> "CalibratedCostModel":
        key = (launch, training, moe_kernels, sustained, allreduce_engine)
        if key == (self.launch, self.training, self.moe_kernels, self.sustained, self.allreduce_engine):
            return self
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = CalibratedCostModel(self.gpu, self.dtype, self.parallelism, self.profile, launch,
                                                          self.num_gpus_per_node, training, moe_kernels, sustained,
                                                          allreduce_engine, self.dense_16bit)
            # GEMM efficiencies and collective times do not depend on the floor: one memo for both
            view._gemms, view._timers, view._views = self._gemms, self._timers, self._views
            view._expert_gemms = self._expert_gemms
        return view

    # ------------------------------------------------------------ rates
    @property
    def flops_per_s(self) -> float:
        """A large matmul's FLOP/s: the dense peak at the GEMM plateau."""
        return self._peak * self._plateau

    @property
    def hbm_bytes_per_s(self) -> float:
        return self._hbm * self._hbm_eff

    def _stream_s(self, nbytes: float, eff: float) -> float:
        """Bytes through HBM at `eff` of the spec, saturating with the size moved."""
        if nbytes <= 0:
            return 0.0
        return (nbytes + self._hbm_half) / (self._hbm * eff)

    def gemm_shape(self, n, k, fused_widths: Tuple[int, ...] = ()):
        """The GEMM efficiency of weight shape (N, K) as a function of M (`gemm.GemmShape`, memoised);
        of a fused GEMM of sibling projections of these widths (N their sum), `gemm.FusedGemmShape`."""
        key = (max(1, int(n)), max(1, int(k)))
        g = self._gemms.get(key)
        if g is None:
            g = self._gemms[key] = GemmShape(*key, self.profile, self._num_sms, plateau=self._plateau,
                                                      wave_tail=self._wave_tail)
        if len(fused_widths) < 2:
            return g
        fused_key = (key, tuple(fused_widths))
        f = self._gemms.get(fused_key)
        if f is None:
            f = self._gemms[fused_key] = FusedGemmShape(g, tuple(self.gemm_shape(w, k) for w in fused_widths))
        return f

    def _matmul_eff(self, dims: Tuple[int, ...], fused_widths: Tuple[int, ...] = ()) -> float:
        m, n, k = dims[:3]
        return self.gemm_shape(n, k, fused_widths)(max(1, int(m)))

    def routed_expert_eff(self, op, dims: Tuple[int, ...]) -> float:
        """Efficiency of a routed-expert matmul (M token-expert pairs on this GPU, weight (N, K) per
        expert): the GPU holds E = params_per_gpu / (N K) experts (the describer's one expert's
        weights x the local experts); M pairs routed uniformly reach A = E (1 - (1 - 1/E)^M) of them,
        M / A tokens each; the grouped GEMM runs each at the per-expert shape's efficiency, times the
        measured grouped-GEMM share of the precision. Below GROUPED_TILE_TOKENS tokens per expert
        each expert's GEMM runs on num_sms / A SMs (`expert_sms`: the A experts' tiles share the GPU,
        one wave schedule for the group; module docstring)."""
        m, n, k = dims[:3]
        m = max(1.0, float(m))
        local = max(1.0, op.params_per_gpu / (float(n) * float(k)))
        active = local * -math.expm1(m * math.log1p(-1.0 / local)) if local > 1.0 else 1.0
        per_expert = max(1.0, m / max(1.0, active))
        shape = self.expert_gemm_shape(n, k, self._num_sms if round(per_expert) >= GROUPED_TILE_TOKENS else
                                       expert_sms(self._num_sms, active))
        # a mean of m tokens per expert is floor(m) for some experts and floor(m) + 1 for the rest (share
        # frac(m)): the group's time is theirs summed. Rounding m instead made the time a sawtooth in the
        # batch (gpt-oss-120b on two H100s: 9.1 ms of experts at 28 decoding requests, 6.6 ms at 29)
        low = math.floor(per_expert)
        high_share = per_expert - low
        if high_share == 0.0:
            return shape(low) * self._moe_share
        # (an expert GEMM's time in units of one token's FLOPs at the peak: tokens / efficiency)
        time_per_expert = (1.0 - high_share) * low / shape(low) + high_share * (low + 1) / shape(low + 1)
        return per_expert / time_per_expert * self._moe_share

    def expert_gemm_shape(self, n, k, sms: int) -> GemmShape:
        """The GEMM efficiency of one routed expert's weight shape (N, K) on `sms` SMs (memoised), at the
        experts' precision."""
        key = (max(1, int(n)), max(1, int(k)), sms)
        g = self._expert_gemms.get(key)
        if g is None:
            g = self._expert_gemms[key] = GemmShape(key[0], key[1], self.profile, sms, plateau=self._expert_plateau,
                                                    wave_tail=self._expert_wave_tail)
        return g

    # ---------------------------------------------------------- kernels
    def _split(self, compute_s: float, memory_s: float) -> Tuple[float, float]:
        """The kernel's time (never below the floor) filed under what bounds it."""
        t = max(compute_s, memory_s, self._floor)
        return (t, 0.0) if compute_s >= memory_s else (0.0, t)

    def op_kernel_split_s(self, op, flops: float, nbytes: float, kv_bytes: float,
                          dims: Optional[Tuple[int, ...]] = None) -> Tuple[float, float]:
        """(compute_s, memory_s) of one operator's kernel with these FLOPs and bytes (and kernel
        shape `dims`, default the operator's)."""
        if flops <= 0 and nbytes <= 0:  # holds weights, does no work (a skipped block): no kernel
            return 0.0, 0.0
        kind = op.kind
        dims = op.kernel_dims if dims is None else dims
        if kind == "matmul":
            routed = getattr(op, "expert_role", None) == "routed"  # (duck-typed ops may lack roles)
            if not dims:
                eff = self._plateau
            elif routed:
                # a fused MoE streams the reached experts' weights at its own measured rate, plus its
                # measured fixed time per expert GEMM where a profile has one (`moe_gemm_fixed_s`; a
                # compute-bound GEMM's measured share holds its fixed costs: no quantized-linear terms)
                return self._split(flops / (self._expert_peak * self.routed_expert_eff(op, dims)),
                                   self._stream_s(nbytes, self._moe_stream_eff) + self._moe_fixed_s)
            else:
                eff = self._matmul_eff(dims, getattr(op, "fused_widths", ()))  # (duck-typed ops: none)
            stream_s = self._stream_s(nbytes, self._matmul_hbm_eff)
            if not routed:  # (routed experts: the fused MoE layer's measured share holds its fixed costs)
                stream_s = self.quantized_stream_s(stream_s, dims[2] if dims else 0)
            return self._split(flops / (self._peak * eff), stream_s)
        if kind == "attention":
            if kv_bytes > 0:  # decode over a KV cache: paged attention streams the cache
                mem = (self._decode_fixed_s + self._stream_s(kv_bytes, self._decode_eff)
                       + self._stream_s(nbytes - kv_bytes, self._hbm_eff))
                return self._split(flops / (self._attn_peak * self._attn_eff), mem)
            q = dims[0] if dims else 1
            eff = self._attn_eff * q / (q + self._attn_half)
            return self._split(flops / (self._attn_peak * eff), self._stream_s(nbytes, self._hbm_eff))
        return self._split(0.0, self._stream_s(nbytes, self._hbm_eff))

    def quantized_stream_s(self, stream_s: float, k: float) -> float:
        """The streaming side of a dense linear with reduction length `k` (0: unknown) at this model's
        precision: max(streaming, K x k_serial) + fixed (`quantized_gemm_terms`; 16-bit: unchanged)."""
        if not (self._quant_fixed_s or self._quant_k_serial_s):
            return stream_s
        return max(stream_s, self._quant_k_serial_s * k) + self._quant_fixed_s

    def kernel_split_s(self, flops: float, bytes_moved: float) -> Tuple[float, float]:
        """A kernel known only by its FLOPs and bytes: a large matmul's plateau, streaming bytes."""
        return self._split(flops / (self._peak * self._plateau), self._stream_s(bytes_moved, self._hbm_eff))

    def attention_backward_slowdown(self, seq_len: float) -> float:
        """The flash backward runs below its forward's rate (`gemm.flash_backward_rate`, measured kernels)."""
        return 1.0 / flash_backward_rate(max(1.0, seq_len))

    def memory_pass_s(self, bytes_moved: float) -> float:
        """A pass that only streams bytes (the optimizer step, fp8 casts): at least one kernel floor."""
        return max(self._stream_s(bytes_moved, self._hbm_eff), self._floor) if bytes_moved > 0 else 0.0

    def steps_split_s(self, first, last, n: int) -> Tuple[float, float]:
        """n decode steps whose FLOPs and bytes go linearly from `first` to `last`:
        Simpson's rule over the step index (exact for the affine parts; the
        saturation terms are smooth in the context length)."""
        if n <= 0:
            return 0.0, 0.0
        a = self.op_kernel_split_s(first, first.flops_per_gpu, first.bytes_per_gpu,
                                   first.kv_cache_bytes_read_per_gpu)
        if n == 1 or (first.flops_per_gpu == last.flops_per_gpu and first.bytes_per_gpu == last.bytes_per_gpu):
            return a[0] * n, a[1] * n
        b = self.op_kernel_split_s(last, last.flops_per_gpu, last.bytes_per_gpu, last.kv_cache_bytes_read_per_gpu)
        mid = self.op_kernel_split_s(first, (first.flops_per_gpu + last.flops_per_gpu) / 2,
                                     (first.bytes_per_gpu + last.bytes_per_gpu) / 2,
                                     (first.kv_cache_bytes_read_per_gpu + last.kv_cache_bytes_read_per_gpu) / 2)
        return tuple(n * (x + 4 * y + z) / 6 for x, y, z in zip(a, mid, b))

    def op_split_s(self, op):
        if op.kind == "collective":
            return 0.0, 0.0, self.collective_op_s(op)
        c, m = self.op_kernel_split_s(op, op.flops_per_gpu, op.bytes_per_gpu, op.kv_cache_bytes_read_per_gpu)
        return c, m, 0.0

    def accepts_table(self, table) -> bool:
        """Whether a phase table says every kernel's shape (cost/calibrated_table.py)."""
        return kernel_plan(table) is not None

    def table_kernels_s(self, table, figures, x: float):
        return calibrated_table_kernels_s(self, table, figures, x)

    def table_times_s(self, table, figures, x: float):
        return calibrated_table_times_s(self, table, figures, x), self.table_collectives_s(table, figures)

    def _growing_steps_split_s(self, table, i: int, first, at_first, at_last, x0: int, n: int):
        return calibrated_growing_steps_split_s(self, table, i, first, at_first, at_last, x0, n)

    # ------------------------------------------------------ collectives
    def collective_s(self, kind: str, bytes_per_gpu: float, group_size: int, comm_group: str) -> float:
        """One NCCL collective over the group."""
        return self.collective_timer(kind, group_size, comm_group)(bytes_per_gpu)

    def collective_timer(self, kind: str, group_size: int, comm_group: str):
        """`collective_s` of this collective and group as a function of the bytes per GPU
        (`nccl.collective_timer`: the group's placement and links worked out once)."""
        engine = self.allreduce_engine if comm_group == "tp" else None
        if engine is not None:  # an inference engine's tensor parallelism (cost/engine_allreduce.py)
            kind = engine_tp_collective(kind)
            if kind is None:
                return _no_time
        key = (kind, group_size, comm_group)
        timer = self._timers.get(key)
        if timer is None:
            r = self._group_ranks_per_island(kind, group_size, comm_group)
            # NCCL's ring model, or inside one node NCCL's measured collective (cost/measured_nccl.py)
            timer = self._timers[key] = measured_nccl_timer(
                self.gpu, kind, group_size, self._in_one_node(kind, group_size, comm_group),
                nccl_timer(kind, group_size, self._fabric, self.profile, ranks_per_island=r,
                           stride=group_stride(self.parallelism, comm_group)))
        if engine in MEASURED_ENGINES and kind == "all_reduce":
            timer, key = self._engine_allreduce(timer, key)
        if comm_group == "tp" and self._tp_payload_scale != 1.0:
            timer, key = self._residual_payload(timer, key)
        if self.launch != "native":
            return timer
        # launched from a C++ host without CUDA graphs, a collective starts only once every rank has
        # enqueued it (NCCL's host-side enqueue plus the kernel launch): one launch floor before the
        # transfer, which queued work cannot hide as it hides a compute kernel's launch (every rank waits)
        return self._launched_collective(timer, key)

    def _engine_allreduce(self, nccl_timer_of_group, key: tuple):
        """(timer, memo key) of a tensor-parallel all-reduce as the serving engine runs it
        (cost/engine_allreduce.py: its measured table inside one node, NCCL's outside the table)."""
        key = key + (self.allreduce_engine, self.launch)
        timer = self._timers.get(key)
        if timer is None:
            n = key[1]
            timer = self._timers[key] = engine_allreduce_timer(self.gpu, self.allreduce_engine, self.launch, n,
                                                               self._in_one_node("all_reduce", n, "tp"),
                                                               nccl_timer_of_group)
        return timer, key

    def _residual_payload(self, timer, key: tuple):
        """(timer, memo key) of a TP collective given the operator's bytes at the quantised activation
        width, timed at the 16-bit residual stream's (`_tp_payload_scale`)."""
        key = key + ("residual", self._tp_payload_scale)
        scaled = self._timers.get(key)
        if scaled is None:
            scale = self._tp_payload_scale
            scaled = self._timers[key] = lambda nbytes_per_gpu: timer(nbytes_per_gpu * scale)
        return scaled, key

    def _in_one_node(self, kind: str, group_size: int, comm_group: str) -> bool:
        """Whether the group's GPUs all sit on one NVLink island of one node (where measured tables hold)."""
        return group_size <= self._fabric.gpus_per_node and \
            self._group_ranks_per_island(kind, group_size, comm_group) == group_size

    def _launched_collective(self, timer, key: tuple):
        """`timer` with one native launch floor added (memoised beside it, per floor)."""
        key = key + ("native", self._floor)
        launched = self._timers.get(key)
        if launched is None:
            floor_s = self._floor
            launched = self._timers[key] = lambda nbytes_per_gpu: timer(nbytes_per_gpu) + floor_s
        return launched

    def _group_ranks_per_island(self, kind: str, group_size: int, comm_group: str) -> int:
        stride = group_stride(self.parallelism, comm_group)
        if kind == "p2p":  # a send crosses an island when the group's ranks span more than one (pipeline
            # stages in different ones; a context-parallel ring over nodes, paced by its slowest hop)
            return 1 if (group_size - 1) * stride + 1 > self._fabric.island_gpus else 2
        return _ranks_per_island(group_size, stride, self._fabric.island_gpus)



def check_perf_model(perf_model):
    """`perf_model` itself, when it is one LLMAnalysis takes: "roofline", "calibrated", the
    path of a profile .json file or a Profile (ConfigError naming the value otherwise)."""
    if isinstance(perf_model, Profile) or perf_model in ("roofline", "calibrated") or \
            (isinstance(perf_model, (str, os.PathLike)) and str(perf_model).endswith(".json")):
        return perf_model
    raise ConfigError(f"perf_model = {perf_model!r}; valid: 'roofline', 'calibrated', the path of a profile "
                      ".json file, or a Profile")


def resolve_perf_model(perf_model, gpu: GPUConfig) -> Optional[Profile]:
    """`perf_model` of LLMAnalysis -> None (the roofline) or the calibration Profile.

    "roofline"; "calibrated" (the shipped profile of the GPU's generation); a
    path to a profile JSON (e.g. saved by `llm_analysis.calibrate`); or a
    `Profile`. A profile for another GPU is refused, naming its field.
    """
    from llm_analysis.cost.profiles import generation_of, load_profile, profile_for_gpu
    if isinstance(check_perf_model(perf_model), Profile):
        profile = perf_model
    elif perf_model == "roofline":
        return None
    elif perf_model == "calibrated":
        return profile_for_gpu(gpu)  # (a GPU no profile lists: the nearest in spec, stated in the notes)
    else:  # the path of a profile .json file
        profile = load_profile(str(perf_model))
    check_profile_matches_gpu(profile, gpu.name)
    try:
        shipped = generation_of(gpu.name)
    except ConfigError:  # a GPU no shipped profile lists: the user's profile is all there is
        return profile
    if profile.generation != shipped:
        raise ConfigError(f"profile {profile.origin or '<Profile>'!r} field 'generation' = {profile.generation!r}, "
                          f"but {gpu.name} is a {shipped!r} GPU")
    return profile


def call_cost_model(cost_model, kernel_launch, training: bool):
    """The cost model an inference() or training() call is timed with: a calibrated model's view for the call
    (`CalibratedCostModel.for_call`), a roofline as it is. The reports read it too, so that what they show
    per part is what the call's times used."""
    return cost_model.for_call(kernel_launch, training) if isinstance(cost_model, CalibratedCostModel) else cost_model


__all__ = ["call_cost_model", "CalibratedCostModel", "check_perf_model", "resolve_perf_model"]
