"""LLMAnalysis: the facade users call. Each `get_*` method is a named view
over the operator description (`operators.py`) and the cost model; the
orchestrators live in `inference.py` and `training.py`.

Kept with the names and defaults of the mirrored system's API.
"""

from __future__ import annotations

import logging
from functools import cached_property
from typing import Any, Dict, List, Optional, Tuple, Union

from .config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig
from .constant import ADAM_OPTIMIZER_STATE_BYTES, BYTES_FP32, GB
from .errors import ConfigError
from .options import ActivationRecomputation, DSZeRO, as_enum as _enum, efficiency as _efficiency, positive_int as _positive_int
from .memory import (attention_activation_bytes, layer_input_bytes, layout_for,
                     mlp_activation_bytes, norm_activation_bytes)
from .operators import Conventions, LayerDescriber, LayerKind, Operator, Phase, sum_field
from .roofline import Roofline, peak_tflops_for_dtype
from .communication import collective_time_s, link_for_group

logger = logging.getLogger(__name__)


class LLMAnalysis:
    """Given a model, GPU, data types and parallel layout, estimate the
    parameters, FLOPs, memory and latency of training and inference."""

    def __init__(self, model_config: ModelConfig, gpu_config: GPUConfig,
                 dtype_config: DtypeConfig = DtypeConfig(),
                 parallelism_config: ParallelismConfig = ParallelismConfig(),
                 achieved_tflops: Optional[float] = None,
                 achieved_memory_bandwidth_GBs: Optional[float] = None,
                 flops_efficiency: Optional[float] = None,
                 hbm_memory_efficiency: Optional[float] = None,
                 intra_node_memory_efficiency: float = 1.0,
                 inter_node_memory_efficiency: float = 1.0,
                 attention_flops: str = "full", logits: str = "all",
                 num_gpus_per_node: Optional[int] = None, mla_attention: str = "expand") -> None:
        for value, cls, field in ((model_config, ModelConfig, "model_config"), (gpu_config, GPUConfig, "gpu_config"),
                                  (dtype_config, DtypeConfig, "dtype_config"),
                                  (parallelism_config, ParallelismConfig, "parallelism_config")):
            if not isinstance(value, cls):
                raise ConfigError(f"{field} must be a {cls.__name__}, got {type(value).__name__}")
        self.model_config = model_config
        self.gpu_config = gpu_config
        self.dtype_config = dtype_config
        self.parallelism_config = parallelism_config
        self.flops_efficiency = _efficiency(flops_efficiency, "flops_efficiency")
        self.hbm_memory_efficiency = _efficiency(hbm_memory_efficiency, "hbm_memory_efficiency")
        self.intra_node_memory_efficiency = _efficiency(intra_node_memory_efficiency, "intra_node_memory_efficiency")
        self.inter_node_memory_efficiency = _efficiency(inter_node_memory_efficiency, "inter_node_memory_efficiency")
        for v, f in ((achieved_tflops, "achieved_tflops"), (achieved_memory_bandwidth_GBs, "achieved_memory_bandwidth_GBs")):
            if v is not None and not (isinstance(v, (int, float)) and v > 0):
                raise ConfigError(f"{f} = {v!r} must be a positive number")
        self.achieved_tflops = achieved_tflops
        self.achieved_memory_bandwidth_GBs = achieved_memory_bandwidth_GBs
        self.conventions = Conventions(attention_flops, logits, mla_attention)
        self.num_gpus_per_node = num_gpus_per_node or gpu_config.num_gpus_per_node
        if achieved_tflops is not None and flops_efficiency is not None:
            logger.info("achieved_tflops given: it overrides flops_efficiency")
        self._reset()

    # ------------------------------------------------------------ updates
    def _reset(self) -> None:
        for attr in ("describer", "_roofline"):
            self.__dict__.pop(attr, None)
        self._memo: Dict[Any, Any] = {}  # phase-independent views (params, weights), per config
        self.describer  # validate the layout now, not at first use

    def update_model_config(self, model_config: ModelConfig) -> None:
        self.model_config = model_config
        self._reset()

    def update_gpu_config(self, gpu_config: GPUConfig) -> None:
        self.gpu_config = gpu_config
        self._reset()

    def update_dtype_config(self, dtype_config: DtypeConfig) -> None:
        self.dtype_config = dtype_config
        self._reset()

    def update_parallelism_config(self, parallelism_config: ParallelismConfig) -> None:
        self.parallelism_config = parallelism_config
        self._reset()

    def update_float_efficiency(self, flops_efficiency: float) -> None:
        self.flops_efficiency = _efficiency(flops_efficiency, "flops_efficiency")
        self._reset()

    def update_hbm_memory_efficiency(self, hbm_memory_efficiency: float) -> None:
        self.hbm_memory_efficiency = _efficiency(hbm_memory_efficiency, "hbm_memory_efficiency")
        self._reset()

    def update_intra_node_memory_efficiency(self, intra_node_memory_efficiency: float) -> None:
        self.intra_node_memory_efficiency = _efficiency(intra_node_memory_efficiency, "intra_node_memory_efficiency")

    def update_inter_node_memory_efficiency(self, inter_node_memory_efficiency: float) -> None:
        self.inter_node_memory_efficiency = _efficiency(inter_node_memory_efficiency, "inter_node_memory_efficiency")

    # ------------------------------------------------------- description
    describer_class = LayerDescriber  # subclasses swap in their own describer

    @cached_property
    def describer(self) -> LayerDescriber:
        return self.describer_class(self.model_config, self.dtype_config, self.parallelism_config,
                                    self.conventions)

    def _describer_with_kv(self, kv_cache_dtype_bytes: Optional[float]) -> LayerDescriber:
        if kv_cache_dtype_bytes is None or kv_cache_dtype_bytes == self.describer.kv_bytes:
            return self.describer
        d = self.describer_class(self.model_config, self.dtype_config, self.parallelism_config,
                                 self.conventions, kv_cache_dtype_bytes=kv_cache_dtype_bytes)
        return d

    def operators(self, phase: str = "prefill", batch_size: int = 1, seq_len: int = 512,
                  context_len: Optional[int] = None, per_layer: bool = True) -> List[Dict[str, Any]]:
        """The operator records of a phase, as plain dicts (for reports and charts).

        phase: "prefill" (batch_size x seq_len new tokens), "decode" (one token
        per sequence at `context_len`, default seq_len + 1) or "train" (same
        shapes as prefill). With per_layer=True each layer kind is listed once
        with its repeat count; otherwise operators are scaled by their counts.
        """
        ph = self._phase(phase, batch_size, seq_len, context_len)
        rows = []
        for label, n, ops in self.describer.model_ops(ph):
            for op in ops:
                o = op if per_layer else op.scaled(n)
                rows.append({
                    "layer_group": label, "repeat": n if per_layer else 1, "name": o.name, "group": o.group,
                    "kind": o.kind, "shapes": o.shapes, "params": o.params, "params_per_gpu": o.params_per_gpu,
                    "flops": o.flops, "flops_per_gpu": o.flops_per_gpu, "bytes_per_gpu": o.bytes_per_gpu,
                    "weight_bytes_per_gpu": o.weight_bytes_per_gpu,
                    "kv_cache_bytes_read_per_gpu": o.kv_cache_bytes_read_per_gpu,
                    "arithmetic_intensity": o.arithmetic_intensity,
                    "latency_s": self._op_time(o), "bound": self._op_bound(o),
                    "collective": o.collective, "comm_bytes_per_gpu": o.comm_bytes_per_gpu,
                })
        return rows

    def _phase(self, phase: str, batch_size: int, seq_len: int, context_len: Optional[int] = None) -> Phase:
        batch_size = _positive_int(batch_size, "batch_size")
        seq_len = _positive_int(seq_len, "seq_len")
        if phase in ("prefill", "train"):
            return Phase(phase, batch_size, seq_len, seq_len)
        if phase == "decode":
            c = seq_len + 1 if context_len is None else _positive_int(context_len, "context_len")
            return Phase("decode", batch_size, 1, c)
        raise ConfigError(f"phase = {phase!r}; valid: 'prefill', 'decode', 'train'")

    # ----------------------------------------------------- hardware views
    def get_TFLOPS_per_gpu(self) -> float:
        """Achieved TFLOP/s per GPU for the dtype: `achieved_tflops` if given,
        else the dense peak of the dtype times flops_efficiency."""
        if self.achieved_tflops is not None:
            return self.achieved_tflops
        return peak_tflops_for_dtype(self.gpu_config, self.dtype_config) * self.flops_efficiency

    def get_gpu_hbm_bandwidth(self) -> float:
        """Achieved HBM bandwidth in GB/s."""
        if self.achieved_memory_bandwidth_GBs is not None:
            return self.achieved_memory_bandwidth_GBs
        return self.gpu_config.hbm_bandwidth_in_GB_per_sec * self.hbm_memory_efficiency

    def get_intra_node_bandwidth(self) -> float:
        return self.gpu_config.intra_node_bandwidth_in_GB_per_sec * self.intra_node_memory_efficiency

    def get_inter_node_bandwidth(self) -> float:
        return self.gpu_config.inter_node_bandwidth_in_GB_per_sec * self.inter_node_memory_efficiency

    @cached_property
    def _roofline(self) -> Roofline:
        return Roofline.for_gpu(self.get_TFLOPS_per_gpu(), self.get_gpu_hbm_bandwidth())

    def get_ridge_point(self) -> float:
        """FLOPs per byte above which an operator is compute-bound on this GPU."""
        return self._roofline.ridge_point

    def get_pivot(self) -> float:
        """(weight bytes / HBM bandwidth) / (forward FLOPs of one token / FLOP/s):
        the batch (in tokens) at which a decode step turns compute-bound,
        ignoring the KV cache."""
        weight_s = self.get_weight_memory_per_gpu() / (self.get_gpu_hbm_bandwidth() * GB)
        flops_one_token = self.get_num_flops_fwd_total(1, 1) / self.parallelism_config.tp_size
        return weight_s / (flops_one_token / (self.get_TFLOPS_per_gpu() * 1e12))

    # ------------------------------------------------------------- timing
    def _link(self, op: Operator):
        p = self.parallelism_config
        stride = {"tp": 1, "pp": p.tp_size, "dp": p.tp_size * p.pp_size,
                  "ep": p.tp_size * p.pp_size}.get(op.comm_group, 1)
        return link_for_group(self.gpu_config, op.comm_group_size, stride, self.intra_node_memory_efficiency,
                              self.inter_node_memory_efficiency, self.num_gpus_per_node)

    def _op_time(self, op: Operator) -> float:
        if op.kind == "collective":
            return collective_time_s(op.collective, op.comm_bytes_per_gpu, op.comm_group_size, self._link(op))
        return self._roofline.time_s(op.flops_per_gpu, op.bytes_per_gpu)

    def _op_bound(self, op: Operator) -> str:
        if op.kind == "collective":
            return "communication"
        return self._roofline.bound(op.flops_per_gpu, op.bytes_per_gpu)

    def phase_time_breakdown(self, weighted: List[Tuple[int, Operator]]) -> Dict[str, Dict[str, Any]]:
        """Time per operator group, with its compute / memory / communication
        split and the bound that dominates it (see timing.py)."""
        from .timing import GroupTimes
        return GroupTimes().add_ops(self, weighted).finish()

    def ops_time_s(self, ops: List[Operator]) -> float:
        return sum(self._op_time(op) for op in ops)

    def weighted_time_s(self, weighted: List[Tuple[int, Operator]]) -> float:
        """Time of (repeat count, operator) pairs: collectives pay their latency every time."""
        return sum(n * self._op_time(op) for n, op in weighted)

    def _memoized(self, key, fn):
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    # --------------------------------------------------------- parameters
    def _ops0(self) -> List[Operator]:
        """Operators of the whole model for a 1-token phase (for parameter views)."""
        return self._memoized("ops0", lambda: self.describer.flat_ops(Phase("prefill", 1, 1, 1)))

    def _layer_mean(self, attr: str, groups: Tuple[str, ...], kinds=None) -> Union[int, float]:
        total = 0.0
        ph = Phase("prefill", 1, 1, 1)
        for kind, n in self.describer.layer_groups.items():
            total += n * sum_field(self.describer.layer_ops(ph, kind), attr, groups, kinds)
        mean = total / self.model_config.num_layers
        return int(mean) if float(mean).is_integer() else mean

    def get_num_params_embedding(self, shared_embedding: bool = True) -> int:
        """Input embeddings (word, position, token-type, embedding norm, input
        projection); with shared_embedding=False also the output projection
        (untied LM head, output projection, bias, pooler)."""
        ops = self._ops0()
        n = sum_field(ops, "params", ("embedding",))
        if not shared_embedding:
            n += sum_field(ops, "params", ("lm_head",))
        return int(n)

    def get_num_params_output_embedding(self) -> int:
        """Parameters of the output side only: untied LM head, its bias, output projection, pooler."""
        return int(sum_field(self._ops0(), "params", ("lm_head",)))

    def get_num_params_per_layer_attn(self) -> Union[int, float]:
        """Attention parameters of one layer (mean over layers when layers differ)."""
        return self._layer_mean("params", ("attention",))

    def get_num_params_per_layer_mlp(self) -> Union[int, float]:
        """MLP parameters of one layer, all experts included (mean over layers)."""
        return self._layer_mean("params", ("mlp", "experts"))

    def get_num_params_per_layer_router(self) -> Union[int, float]:
        return self._layer_mean("params", ("router",))

    def get_num_params_per_layer_layernorm(self) -> Union[int, float]:
        return self._layer_mean("params", ("norm",))

    def get_num_params_per_layer(self) -> Union[int, float]:
        return self._layer_mean("params", ("attention", "mlp", "experts", "router", "norm"))

    def get_num_params_last_layernorm(self) -> int:
        ops = self.describer.head_ops(Phase("prefill", 1, 1, 1))
        return int(sum_field(ops, "params", ("norm",)))

    def get_num_params_total(self) -> int:
        """Every parameter of the model (the count of the real model's
        `parameters()`, tied weights counted once)."""
        return self._memoized("params_total", lambda: int(sum_field(self._ops0(), "params")))

    def _active_expert_params_per_layer_kind(self, kind: LayerKind) -> float:
        m = self.model_config
        ops = self.describer.layer_ops(Phase("prefill", 1, 1, 1), kind)
        routed = sum(o.params for o in ops if o.group == "experts" and o.name.startswith("expert_"))
        return routed * (m.moe_top_k / m.moe_num_experts) if kind.moe else 0.0

    def get_num_active_params_per_layer(self) -> Union[int, float]:
        """Parameters one token uses in a layer: dense parts, router, shared
        experts and top-k routed experts (mean over layers)."""
        m = self.model_config
        ph = Phase("prefill", 1, 1, 1)
        total = 0.0
        for kind, n in self.describer.layer_groups.items():
            ops = self.describer.layer_ops(ph, kind)
            all_params = sum(o.params for o in ops)
            routed = sum(o.params for o in ops if o.group == "experts" and o.name.startswith("expert_"))
            total += n * (all_params - routed + self._active_expert_params_per_layer_kind(kind))
        mean = total / m.num_layers
        return int(mean) if float(mean).is_integer() else mean

    def get_num_active_params_total(self) -> int:
        return self._memoized("active_params_total", self._num_active_params_total)

    def _num_active_params_total(self) -> int:
        total = self.get_num_params_total()
        for kind, n in self.describer.layer_groups.items():
            if kind.moe:
                ops = self.describer.layer_ops(Phase("prefill", 1, 1, 1), kind)
                routed = sum(o.params for o in ops if o.group == "experts" and o.name.startswith("expert_"))
                total -= n * (routed - self._active_expert_params_per_layer_kind(kind))
        return int(round(total))

    def get_num_params_breakdown(self) -> Dict[str, int]:
        ops = self._ops0()
        out: Dict[str, int] = {}
        for o in ops:
            out[o.group] = out.get(o.group, 0) + o.params
        return {k: int(v) for k, v in out.items() if v}

    # -------------------------------------------------------------- FLOPs
    def _flops(self, batch_size: int, seq_len: int, groups=None, phase: str = "prefill",
               context_len: Optional[int] = None) -> float:
        ph = self._phase(phase, batch_size, seq_len, context_len)
        return sum(n * o.flops for n, o in self.describer.weighted_ops(ph) if groups is None or o.group in groups)

    def get_num_flops_fwd_per_layer_attn(self, batch_size: int, seq_len: int) -> float:
        """Forward FLOPs of one layer's attention (projections and core), mean over layers."""
        ph = self._phase("prefill", batch_size, seq_len)
        return self._layer_flops_mean(ph, ("attention",))

    def get_num_flops_fwd_per_layer_mlp(self, batch_size: int, seq_len: int) -> float:
        ph = self._phase("prefill", batch_size, seq_len)
        return self._layer_flops_mean(ph, ("mlp", "experts", "router"))

    def get_num_flops_fwd_per_layer(self, batch_size: int, seq_len: int) -> float:
        ph = self._phase("prefill", batch_size, seq_len)
        return self._layer_flops_mean(ph, None)

    def _layer_flops_mean(self, ph: Phase, groups) -> float:
        total = sum(n * sum_field(self.describer.layer_ops(ph, k), "flops", groups)
                    for k, n in self.describer.layer_groups.items())
        return total / self.model_config.num_layers

    def get_num_flops_fwd_total(self, batch_size: int, seq_len: int) -> float:
        """Forward FLOPs of the whole model for batch_size sequences of seq_len
        tokens (matmuls and attention core, 2 per multiply-add; independent of
        parallelism)."""
        return self._flops(batch_size, seq_len)

    def get_num_flops_bwd_total(self, batch_size: int, seq_len: int) -> float:
        """Backward FLOPs: twice the forward (gradients w.r.t. inputs and weights)."""
        return 2 * self.get_num_flops_fwd_total(batch_size, seq_len)

    def get_num_flops_total_attn_compute(self, batch_size: int, seq_len: int) -> float:
        """FLOPs of the attention core (QK^T and attention over V) of all layers:
        what selective recomputation (ATTN_COMPUTE) repeats."""
        ph = self._phase("prefill", batch_size, seq_len)
        return sum(n * o.flops for n, o in self.describer.weighted_ops(ph) if o.kind == "attention")

    def get_num_flops_decode_step(self, batch_size: int, context_len: int) -> float:
        """FLOPs of one decode step: batch_size new tokens attending to
        `context_len` tokens each (the new one included)."""
        return self._flops(batch_size, context_len - 1 if context_len > 1 else 1, phase="decode",
                           context_len=context_len)

    # ------------------------------------------------------------- memory
    def _dp_shard(self, ds_zero: DSZeRO, stage: int) -> int:
        return self.parallelism_config.dp_size if ds_zero.value >= stage else 1

    def _stage_weight_bytes(self, ds_zero: DSZeRO = DSZeRO.NONE, groups=None) -> List[float]:
        """Weight bytes per GPU of each pipeline stage."""
        ds_zero = _enum(DSZeRO, ds_zero, "ds_zero")
        ph = Phase("prefill", 1, 1, 1)
        out = []
        for s in range(self.parallelism_config.pp_size):
            ops = self.describer.flat_ops(ph, stage=s)
            out.append(sum_field(ops, "weight_bytes_per_gpu", groups) / self._dp_shard(ds_zero, 3))
        return out

    def get_weight_memory_per_gpu(self, ds_zero: DSZeRO = DSZeRO.NONE) -> float:
        """Weight bytes on the most loaded GPU (the heaviest pipeline stage)."""
        ds_zero = _enum(DSZeRO, ds_zero, "ds_zero")
        return self._memoized(("weights_per_gpu", ds_zero), lambda: max(self._stage_weight_bytes(ds_zero)))

    def get_weight_memory_per_layer(self, ds_zero: DSZeRO = DSZeRO.NONE, return_breakdown: bool = False):
        """Weight bytes of one layer on one GPU (mean over layers), TP/EP and
        ZeRO-3 sharded; with return_breakdown also (attention, mlp, norm) bytes."""
        ds_zero = _enum(DSZeRO, ds_zero, "ds_zero")
        shard = self._dp_shard(ds_zero, 3)
        parts = {g: self._layer_mean("weight_bytes_per_gpu", gs) / shard for g, gs in
                 (("attn", ("attention",)), ("mlp", ("mlp", "experts", "router")), ("layernorm", ("norm",)))}
        total = sum(parts.values())
        if return_breakdown:
            return total, parts
        return total

    def get_memory_embedding(self, ds_zero: DSZeRO = DSZeRO.NONE) -> float:
        """Bytes of the input embeddings plus the output projection (untied head)
        on one GPU: vocab-parallel over TP, ZeRO-3 sharded over DP."""
        ds_zero = _enum(DSZeRO, ds_zero, "ds_zero")
        return self._memoized(("embedding_bytes", ds_zero), lambda: sum_field(
            self._ops0(), "weight_bytes_per_gpu", ("embedding", "lm_head")) / self._dp_shard(ds_zero, 3))

    def get_weight_memory_last_layernorm(self, ds_zero: DSZeRO = DSZeRO.NONE) -> float:
        ds_zero = _enum(DSZeRO, ds_zero, "ds_zero")
        ops = self.describer.head_ops(Phase("prefill", 1, 1, 1))
        return sum_field(ops, "weight_bytes_per_gpu", ("norm",)) / self._dp_shard(ds_zero, 3)

    def get_memory_kv_cache_per_layer(self, batch_size: int, seq_len: int,
                                      kv_cache_dtype_bytes: Optional[float] = None) -> float:
        """KV-cache bytes of one layer on one GPU for batch_size sequences of
        seq_len tokens (mean over layers: sliding-window layers keep at most the
        last window - 1 tokens; MLA keeps the latent and the rope key; KV heads fewer than
        tp_size are replicated)."""
        return self.get_memory_kv_cache_total(batch_size, seq_len, kv_cache_dtype_bytes) / self.model_config.num_layers

    def get_memory_kv_cache_total(self, batch_size: int, seq_len: int,
                                  kv_cache_dtype_bytes: Optional[float] = None, stage: Optional[int] = None) -> float:
        """KV-cache bytes per GPU of all layers (or of one pipeline stage)."""
        d = self._describer_with_kv(kv_cache_dtype_bytes)
        if stage is None:
            groups = d.layer_groups
        else:
            groups = d.stage_groups[stage]
        return sum(n * batch_size * d.cached_len(k, seq_len) * d.kv_cache_elems_per_token_per_gpu(k) * d.kv_bytes
                   for k, n in groups.items())

    def get_memory_kv_cache_per_gpu(self, batch_size: int, seq_len: int,
                                    kv_cache_dtype_bytes: Optional[float] = None) -> float:
        """KV-cache bytes on the most loaded GPU (heaviest pipeline stage)."""
        return max(self.get_memory_kv_cache_total(batch_size, seq_len, kv_cache_dtype_bytes, stage=s)
                   for s in range(self.parallelism_config.pp_size))

    # activation memory ------------------------------------------------------
    def _layout(self, batch_size: int, seq_len: int, moe: bool):
        p = self.parallelism_config
        return layout_for(self.model_config, batch_size, seq_len, p.tp_size, p.sp_size > 1, moe)

    def _act_bytes(self) -> float:
        return self.dtype_config.activation_bits / 8

    def get_activation_memory_per_layernorm(self, batch_size: int, seq_len: int, dtype_bytes: float = BYTES_FP32) -> float:
        """Bytes of one norm's stored input: sbh x dtype_bytes (split by t with SP)."""
        return norm_activation_bytes(self._layout(batch_size, seq_len, False), dtype_bytes)

    def get_activation_memory_per_layer_attn(self, batch_size: int, seq_len: int, is_inference: bool = True,
                                             flash_attn: bool = True, softmax_dropout: bool = False,
                                             attn_dropout: bool = True,
                                             activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE) -> float:
        """Stored attention activations of one layer (Korthikanti et al. 2022 §4.1);
        for inference, the largest live tensor set of the attention block."""
        rc = _enum(ActivationRecomputation, activation_recomputation, "activation_recomputation")
        if is_inference:
            return self._inference_live_bytes(batch_size, seq_len, ("attention",))
        return attention_activation_bytes(self._layout(batch_size, seq_len, False), self._act_bytes(), flash_attn,
                                          softmax_dropout, attn_dropout, rc)

    def get_activation_memory_per_layer_mlp(self, batch_size: int, seq_len: int, is_inference: bool = True,
                                            activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE,
                                            mlp_activation_quant_bits: Optional[int] = None,
                                            mlp_1linear_quant_bits: Optional[int] = None,
                                            mlp_gelu_input_quant_bits: Optional[int] = None,
                                            mlp_2linear_quant_bits: Optional[int] = None,
                                            recompute_gelu: bool = False, gated_linear_units: Optional[bool] = None,
                                            with_dropout: bool = False, moe: Optional[bool] = None) -> float:
        """Stored MLP activations of one layer (Korthikanti et al. 2022 §4.1),
        with optional quantised storage (bits) of the first-linear input, the
        activation input and the second-linear input. Mean over layers for MoE
        models unless `moe` picks dense or MoE layers."""
        rc = _enum(ActivationRecomputation, activation_recomputation, "activation_recomputation")
        if is_inference:
            return self._inference_live_bytes(batch_size, seq_len, ("mlp", "experts", "router"))
        if mlp_activation_quant_bits is not None:
            mlp_1linear_quant_bits = mlp_gelu_input_quant_bits = mlp_2linear_quant_bits = mlp_activation_quant_bits
        to_bytes = lambda bits: None if bits is None else bits / 8  # noqa: E731
        groups = self.describer.layer_groups
        total, count = 0.0, 0
        for kind, n in groups.items():
            if moe is not None and kind.moe != moe:
                continue
            L = self._layout(batch_size, seq_len, kind.moe)
            if gated_linear_units is not None:
                L = type(L)(**{**L.__dict__, "gated": gated_linear_units})
            total += n * mlp_activation_bytes(L, self._act_bytes(), rc, to_bytes(mlp_1linear_quant_bits),
                                              to_bytes(mlp_gelu_input_quant_bits), to_bytes(mlp_2linear_quant_bits),
                                              recompute_gelu, with_dropout)
            count += n
        return total / count if count else 0.0

    def get_activation_memory_per_layer(self, batch_size: int, seq_len: int, is_inference: bool = True,
                                        activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE,
                                        layernorm_dtype_bytes: float = BYTES_FP32, flash_attn: bool = True,
                                        softmax_dropout: bool = False,
                                        mlp_activation_quant_bits: Optional[int] = None,
                                        mlp_1linear_quant_bits: Optional[int] = None,
                                        mlp_gelu_input_quant_bits: Optional[int] = None,
                                        mlp_2linear_quant_bits: Optional[int] = None,
                                        mlp_recompute_gelu: bool = False, return_breakdown: bool = False):
        """Activation bytes one layer keeps for the backward pass (training), or
        the largest live set of a layer (inference). Korthikanti et al. 2022:
        sbh(34 + 5as/h) for a GPT layer without recomputation or parallelism."""
        rc = _enum(ActivationRecomputation, activation_recomputation, "activation_recomputation")
        if is_inference:
            attn = self.get_activation_memory_per_layer_attn(batch_size, seq_len, True)
            mlp = self.get_activation_memory_per_layer_mlp(batch_size, seq_len, True)
            norm = self._inference_live_bytes(batch_size, seq_len, ("norm",))
            total = max(attn, mlp, norm)
            return (total, {"attn": attn, "mlp": mlp, "layernorm": norm}) if return_breakdown else total
        if rc == ActivationRecomputation.FULL:
            total = layer_input_bytes(self._layout(batch_size, seq_len, False), self._act_bytes())
            return (total, {"attn": 0.0, "mlp": 0.0, "layernorm": 0.0, "layer_input": total}) if return_breakdown else total
        attn = self.get_activation_memory_per_layer_attn(batch_size, seq_len, False, flash_attn, softmax_dropout,
                                                         True, rc)
        mlp = self.get_activation_memory_per_layer_mlp(batch_size, seq_len, False, rc, mlp_activation_quant_bits,
                                                       mlp_1linear_quant_bits, mlp_gelu_input_quant_bits,
                                                       mlp_2linear_quant_bits, mlp_recompute_gelu,
                                                       with_dropout=True)  # like attention's output dropout mask:
        # Korthikanti's 19sbh MLP term includes the 1-byte mask of the dropout after the MLP
        norms = self.model_config.num_norms_per_layer
        if rc == ActivationRecomputation.NORM_ATTN_NORM:
            norms = max(norms - 2, 0)  # both norms around attention are recomputed
        elif rc == ActivationRecomputation.ATTN:
            norms = max(norms - 1, 0)  # the norm feeding attention is recomputed with it
        norm = norms * self.get_activation_memory_per_layernorm(batch_size, seq_len, layernorm_dtype_bytes)
        total = attn + mlp + norm
        if return_breakdown:
            return total, {"attn": attn, "mlp": mlp, "layernorm": norm}
        return total

    def _inference_live_bytes(self, batch_size: int, seq_len: int, groups: Tuple[str, ...]) -> float:
        """Largest input+output activation set of one operator in `groups`
        (buffers are reused between operators in inference)."""
        ph = self._phase("prefill", batch_size, seq_len)
        return max((o.activation_bytes_per_gpu for kind in self.describer.layer_groups
                    for o in self.describer.layer_ops(ph, kind) if o.group in groups), default=0.0)

    def get_activation_memory_input_embedding(self, batch_size: int, seq_len: int) -> float:
        """Bytes of the embedding output kept for backward (split by t with SP)."""
        p = self.parallelism_config
        return batch_size * seq_len * self.model_config.hidden_dim * self._act_bytes() / (p.tp_size if p.sp_size > 1 else 1)

    def get_activation_memory_output_embedding(self, batch_size: int, seq_len: int) -> float:
        """Bytes of the logits (vocab-parallel over TP), in the activation dtype."""
        if not self.model_config.lm_head:
            return 0.0
        vocab_gpu = -(-self.model_config.vocab_size // self.parallelism_config.tp_size)
        return batch_size * seq_len * vocab_gpu * self._act_bytes()

    # optimizer state and gradients -----------------------------------------
    def _trainable_params_per_gpu(self, groups=None) -> Tuple[float, float]:
        """(dense params per GPU, expert params per GPU) of the heaviest stage."""
        ph = Phase("prefill", 1, 1, 1)
        best = (0.0, 0.0)
        for s in range(self.parallelism_config.pp_size):
            ops = self.describer.flat_ops(ph, stage=s)
            experts = sum(o.params_per_gpu for o in ops if o.group == "experts" and o.name.startswith("expert_")
                          and (groups is None or o.group in groups))
            dense = sum_field(ops, "params_per_gpu", groups) - experts
            if dense + experts > sum(best):
                best = (dense, experts)
        return best

    def _optimizer_and_grad(self, params_dense: float, params_expert: float, master_weights_dtype_bytes: float,
                            other_op_bytes: Optional[float], ds_zero: DSZeRO) -> Tuple[float, float]:
        ds_zero = _enum(DSZeRO, ds_zero, "ds_zero")
        other = ADAM_OPTIMIZER_STATE_BYTES if other_op_bytes is None else other_op_bytes
        p = self.parallelism_config
        dp_dense = p.dp_size
        dp_expert = p.rdp_size  # experts are replicated only over the expert-data-parallel group
        per_param = master_weights_dtype_bytes + other
        opt = per_param * (params_dense / (dp_dense if ds_zero.value >= 1 else 1)
                           + params_expert / (dp_expert if ds_zero.value >= 1 else 1))
        grad_bytes = self.dtype_config.weight_bits / 8 if self.dtype_config.weight_bits >= 16 else 2
        grad = grad_bytes * (params_dense / (dp_dense if ds_zero.value >= 2 else 1)
                             + params_expert / (dp_expert if ds_zero.value >= 2 else 1))
        return opt, grad

    def get_memory_optimizer_state_and_gradient_per_layer(self, master_weights_dtype_bytes: float = BYTES_FP32,
                                                          other_op_bytes: Optional[float] = None,
                                                          ds_zero: DSZeRO = DSZeRO.NONE) -> Tuple[float, float]:
        """(optimizer-state bytes, gradient bytes) of one layer on one GPU.

        Adam by default (Kingma & Ba, arXiv 1412.6980): fp32 master weights plus
        two fp32 moments = 12 bytes per parameter; `other_op_bytes` replaces the
        8 bytes of moments for other optimizers (Lion: 4). Gradients are kept in
        the 16-bit training dtype (ZeRO paper's 2+2+12 bytes per parameter).
        ZeRO-1 shards optimizer states, ZeRO-2 also gradients, over DP."""
        m = self.model_config
        ph = Phase("prefill", 1, 1, 1)
        dense = expert = 0.0
        for kind, n in self.describer.layer_groups.items():
            ops = self.describer.layer_ops(ph, kind)
            e = sum(o.params_per_gpu for o in ops if o.group == "experts" and o.name.startswith("expert_"))
            expert += n * e
            dense += n * (sum(o.params_per_gpu for o in ops) - e)
        return self._optimizer_and_grad(dense / m.num_layers, expert / m.num_layers, master_weights_dtype_bytes,
                                        other_op_bytes, ds_zero)

    def get_memory_optimizer_state_and_gradient_embedding(self, master_weights_dtype_bytes: float = BYTES_FP32,
                                                          other_op_bytes: Optional[float] = None,
                                                          ds_zero: DSZeRO = DSZeRO.NONE) -> Tuple[float, float]:
        params = sum_field(self._ops0(), "params_per_gpu", ("embedding", "lm_head"))
        return self._optimizer_and_grad(params, 0.0, master_weights_dtype_bytes, other_op_bytes, ds_zero)

    def get_memory_optimizer_state_and_gradient_last_layernorm(self, master_weights_dtype_bytes: float = BYTES_FP32,
                                                               other_op_bytes: Optional[float] = None,
                                                               ds_zero: DSZeRO = DSZeRO.NONE) -> Tuple[float, float]:
        params = self.get_num_params_last_layernorm()
        return self._optimizer_and_grad(params, 0.0, master_weights_dtype_bytes, other_op_bytes, ds_zero)

    # ------------------------------------------------------------ latency views
    def _layer_time_mean(self, ph: Phase, groups=None, kinds=None) -> float:
        total = 0.0
        for k, n in self.describer.layer_groups.items():
            ops = [o for o in self.describer.layer_ops(ph, k)
                   if (groups is None or o.group in groups) and (kinds is None or o.kind in kinds)]
            total += n * self.ops_time_s(ops)
        return total / self.model_config.num_layers

    def get_latency_fwd_per_layer_attn(self, batch_size: int, seq_len: int, is_inference: bool = True,
                                       activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE) -> float:
        """Roofline time of one layer's attention (projections + core), mean over layers."""
        return self._layer_time_mean(self._phase("prefill", batch_size, seq_len), ("attention",))

    def get_latency_fwd_per_layer_mlp(self, batch_size: int, seq_len: int, is_inference: bool = True,
                                      activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE) -> float:
        return self._layer_time_mean(self._phase("prefill", batch_size, seq_len), ("mlp", "experts", "router"),
                                     kinds=("matmul", "elementwise", "norm", "attention"))

    def get_latency_fwd_per_layer_mlp_moe_alltoall(self, batch_size: int, seq_len: int) -> float:
        ph = self._phase("prefill", batch_size, seq_len)
        return self._layer_time_mean(ph, ("communication",)) - self.get_latency_fwd_per_tp_comm(
            batch_size, seq_len, self._act_bytes()) * self._tp_comms_per_layer()

    def _tp_comms_per_layer(self) -> int:
        return 1 if self.model_config.parallel_attn_mlp else 2

    def get_latency_fwd_per_layer_shared_dp_comm(self) -> float:
        """Not modelled separately: data-parallel traffic is in training()'s breakdown."""
        return 0.0

    def get_latency_fwd_per_layernorm(self, batch_size: int, seq_len: int, dtype_bytes: float = BYTES_FP32) -> float:
        """Memory-bound time of one norm: read and write sbh elements of dtype_bytes."""
        elems = batch_size * seq_len * self.model_config.hidden_dim
        return 2 * elems * dtype_bytes / (self.get_gpu_hbm_bandwidth() * GB)

    def get_latency_fwd_per_tp_comm(self, batch_size: int, seq_len: int, dtype_bytes: float) -> float:
        """One ring all-reduce of the layer output over the TP group."""
        p = self.parallelism_config
        if p.tp_size == 1:
            return 0.0
        op = Operator(name="tp", group="communication", kind="collective", collective="all_reduce",
                      comm_bytes_per_gpu=batch_size * seq_len * self.model_config.hidden_dim * dtype_bytes,
                      comm_group_size=p.tp_size, comm_group="tp")
        return self._op_time(op)

    def get_latency_fwd_per_layer(self, batch_size: int, seq_len: int, is_inference: bool = True,
                                  activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE,
                                  layernorm_dtype_bytes: float = BYTES_FP32, ds_zero: DSZeRO = DSZeRO.NONE):
        """(time of one layer's forward, breakdown dict), mean over layers."""
        ph = self._phase("prefill", batch_size, seq_len)
        breakdown = {
            "attn": self._layer_time_mean(ph, ("attention",)),
            "mlp": self._layer_time_mean(ph, ("mlp", "experts", "router")),
            "layernorm": self._layer_time_mean(ph, ("norm",)),
            "communication": self._layer_time_mean(ph, ("communication",)),
        }
        return sum(breakdown.values()), breakdown

    def get_latency_fwd_input_embedding(self, batch_size: int, seq_len: int, dtype_bytes: float = BYTES_FP32) -> float:
        ph = self._phase("prefill", batch_size, seq_len)
        return self.ops_time_s(self.describer.embedding_ops(ph))

    def get_latency_fwd_output_embedding_loss(self, batch_size: int, seq_len: int) -> float:
        ph = self._phase("prefill", batch_size, seq_len)
        return self.ops_time_s([o for o in self.describer.head_ops(ph) if o.group == "lm_head"])

    def get_latency_fwd(self, batch_size: int, seq_len: int, is_inference: bool = True,
                        activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE,
                        layernorm_dtype_bytes: float = BYTES_FP32, breakdown_prefix: str = "",
                        ds_zero: DSZeRO = DSZeRO.NONE):
        """(forward time of the whole model on one pipeline replica, breakdown)."""
        ph = self._phase("prefill", batch_size, seq_len)
        groups = self.phase_time_breakdown(self.describer.weighted_ops(ph))
        breakdown = {f"{breakdown_prefix}{k}": v["latency_s"] for k, v in groups.items()}
        pp_s = self.pipeline_handoff_time_s(batch_size, seq_len)
        if pp_s:
            breakdown[f"{breakdown_prefix}pp_communication"] = pp_s
        return sum(breakdown.values()), breakdown

    def pipeline_handoff_time_s(self, batch_size: int, tokens_per_seq: int) -> float:
        """Point-to-point sends of the hidden states between pipeline stages."""
        p = self.parallelism_config
        if p.pp_size == 1:
            return 0.0
        elems = batch_size * tokens_per_seq * self.model_config.hidden_dim / (p.tp_size if p.sp_size > 1 else 1)
        op = Operator(name="pp_p2p", group="communication", kind="collective", collective="p2p",
                      comm_bytes_per_gpu=elems * self._act_bytes(), comm_group_size=2, comm_group="pp")
        return (p.pp_size - 1) * self._op_time(op)

    def get_latency_weight_update(self, ds_zero: DSZeRO = DSZeRO.NONE, master_weights_dtype_bytes: float = BYTES_FP32,
                                  other_op_bytes: Optional[float] = None,
                                  trainable_params_per_gpu: Optional[float] = None) -> float:
        """Optimizer step: read master weights, optimizer states and gradients,
        write master weights, states and the 16-bit weights (memory-bound), on the
        heaviest stage's GPU. With ZeRO-1 and above each GPU updates only its 1/dp
        shard (experts: 1/rdp). `trainable_params_per_gpu` replaces the count (e.g.
        LoRA adapters only). Defaults: Adam, fp32 master weights (28 bytes/param)."""
        ds_zero = _enum(DSZeRO, ds_zero, "ds_zero")
        p = self.parallelism_config
        if trainable_params_per_gpu is None:
            dense, expert = self._trainable_params_per_gpu()
            if ds_zero.value >= 1:
                dense, expert = dense / p.dp_size, expert / p.rdp_size
            params = dense + expert
        else:
            params = trainable_params_per_gpu
        other = ADAM_OPTIMIZER_STATE_BYTES if other_op_bytes is None else other_op_bytes
        grad_bytes = self.dtype_config.weight_bits / 8 if self.dtype_config.weight_bits >= 16 else 2
        # master r+w, states r+w, gradient read, 16-bit weight write
        bytes_per_param = 2 * master_weights_dtype_bytes + 2 * other + grad_bytes + 2
        return params * bytes_per_param / (self.get_gpu_hbm_bandwidth() * GB)

    # --------------------------------------------------------- orchestrators
    def inference(self, batch_size_per_gpu: int = 1, seq_len: int = 512, num_tokens_to_generate: int = 32,
                  use_kv_cache: bool = True, ds_zero: DSZeRO = DSZeRO.NONE, layernorm_dtype_bytes: int = 2,
                  kv_cache_dtype_bytes: Optional[float] = None, cost_per_gpu_hour: Optional[float] = None,
                  output_dir: Optional[str] = None, output_file_suffix: str = "") -> dict:
        """Inference analysis: prefill, per-step decode, memory, max batch,
        throughput and cost. See `inference.py`."""
        from .inference import run_inference
        return run_inference(self, batch_size_per_gpu=batch_size_per_gpu, seq_len=seq_len,
                             num_tokens_to_generate=num_tokens_to_generate, use_kv_cache=use_kv_cache,
                             ds_zero=ds_zero, layernorm_dtype_bytes=layernorm_dtype_bytes,
                             kv_cache_dtype_bytes=kv_cache_dtype_bytes, cost_per_gpu_hour=cost_per_gpu_hour,
                             output_dir=output_dir, output_file_suffix=output_file_suffix)

    def training(self, batch_size_per_gpu: Optional[int] = None, gradient_accumulation_steps: Optional[int] = None,
                 global_batch_size: Optional[int] = None, seq_len: Optional[int] = None,
                 total_num_tokens: Optional[int] = None,
                 activation_recomputation: ActivationRecomputation = ActivationRecomputation.NONE,
                 ds_zero: DSZeRO = DSZeRO.NONE, layernorm_dtype_bytes: int = BYTES_FP32,
                 master_weights_dtype_bytes: int = BYTES_FP32, other_op_bytes: Optional[int] = None,
                 flash_attn: bool = True, softmax_dropout: bool = False,
                 mlp_activation_quant_bits: Optional[int] = None, mlp_1linear_quant_bits: Optional[int] = None,
                 mlp_gelu_input_quant_bits: Optional[int] = None, mlp_2linear_quant_bits: Optional[int] = None,
                 mlp_recompute_gelu: bool = False, output_dir: Optional[str] = None,
                 output_file_suffix: str = "", **kwargs) -> dict:
        """Training analysis: memory per GPU, time per iteration, total time,
        GPU-hours, cost, MFU. See `training.py`."""
        from .training import run_training
        return run_training(self, batch_size_per_gpu=batch_size_per_gpu,
                            gradient_accumulation_steps=gradient_accumulation_steps,
                            global_batch_size=global_batch_size, seq_len=seq_len, total_num_tokens=total_num_tokens,
                            activation_recomputation=activation_recomputation, ds_zero=ds_zero,
                            layernorm_dtype_bytes=layernorm_dtype_bytes,
                            master_weights_dtype_bytes=master_weights_dtype_bytes, other_op_bytes=other_op_bytes,
                            flash_attn=flash_attn, softmax_dropout=softmax_dropout,
                            mlp_activation_quant_bits=mlp_activation_quant_bits,
                            mlp_1linear_quant_bits=mlp_1linear_quant_bits,
                            mlp_gelu_input_quant_bits=mlp_gelu_input_quant_bits,
                            mlp_2linear_quant_bits=mlp_2linear_quant_bits, mlp_recompute_gelu=mlp_recompute_gelu,
                            output_dir=output_dir, output_file_suffix=output_file_suffix, **kwargs)

    def config_batch_size_and_gradient_accumulation_steps(self, max_batch_size_per_gpu: int,
                                                          batch_size_per_gpu: Optional[int] = None,
                                                          gradient_accumulation_steps: Optional[int] = None,
                                                          global_batch_size: Optional[int] = None) -> tuple:
        from .training import config_batch_size_and_gradient_accumulation_steps
        return config_batch_size_and_gradient_accumulation_steps(
            self.parallelism_config.dp_size, max_batch_size_per_gpu, batch_size_per_gpu,
            gradient_accumulation_steps, global_batch_size)

    # --------------------------------------------------------- presentation
    def get_configs_desc(self) -> str:
        p = self.parallelism_config
        return (f"{self.model_config.name}-{self.gpu_config.name}-{self.dtype_config.name}-tp{p.tp_size}-pp{p.pp_size}"
                f"-dp{p.dp_size}-sp{p.sp_size}-fe{round(self.flops_efficiency, 2)}"
                f"-ep{p.ep_size}-hbme{round(self.hbm_memory_efficiency, 2)}")

    def print_config(self, name: str = "Training Configs") -> None:
        from .report import format_configs
        logger.info(format_configs(self, name))

    def get_readable_summary_dict(self, summary_dict: dict, title: str = "Summary") -> str:
        from .report import readable_summary
        return readable_summary(summary_dict, title)

    def output_summary_dict(self, summary_dict: dict, output_dir: str, print_human_readable: bool = True,
                            output_file_suffix: str = "") -> str:
        from .report import write_summary_files
        return write_summary_files(self, summary_dict, output_dir, print_human_readable, output_file_suffix)
