"""Training analysis: will a layout fit, how long is an iteration, how long is
the whole run, and what limits it.

Everything comes from the operator description (`operators.py`) through the
`LLMAnalysis` views; this module only composes them into one iteration of
pipeline-parallel, data-parallel training. The assumptions, in one place:

Memory per GPU (base units, bytes), on each pipeline stage; the peak is the
largest stage:
- weights, gradients and optimizer states of the stage's parameters, TP/EP
  sharded, and ZeRO-sharded over data parallelism (Rajbhandari et al. 2020,
  arXiv 1910.02054): stage 1 shards optimizer states, 2 also gradients, 3 also
  weights. Gradients are 16-bit, Adam states 4 + 8 bytes per parameter unless
  `master_weights_dtype_bytes` / `other_op_bytes` say otherwise.
- activations after Korthikanti et al. 2022 (arXiv 2205.05198) per layer,
  times the layers of the stage, times the micro-batches in flight: with 1F1B
  stage i (0-based) holds min(m, p - i) micro-batches; with v interleaved
  virtual stages the first stage holds p + (p - 1)/v (their §4.2.3), later
  stages p - i + (p - 1)/v. Plus the embedding output on the first stage and
  the logits of one micro-batch on the last.
- recomputation working set: while one layer's backward runs, what that layer
  did not keep is rematerialised, so one layer's (stored-without-recompute minus
  stored-with-recompute) activations are added.
- ZeRO buffers: DeepSpeed gathers ZeRO-3 weights module by module, so two of
  the stage's largest weight matrices are live unsharded (the running one and the
  prefetched next); ZeRO-2/3 keep the largest matrix's unsharded gradient before
  its reduce-scatter. (DeepSpeed's bucket sizes are tunables; this is the floor.)

Time of one iteration (seconds), on the bottleneck pipeline stage:
- forward of a micro-batch: the roofline time of each operator of the stage
  (compute- or memory-bound) plus its TP collectives and EP all-to-alls.
- backward = 2x the forward time of every non-collective operator (gradients
  with respect to inputs and to weights), and the same TP / EP collectives again
  (Megatron's conjugate f/g operators: as many in backward as in forward).
- recomputation adds the forward of what the strategy recomputes: FULL the whole
  layer (with its collectives); ATTN_COMPUTE the attention core (QK^T, softmax,
  attention over V: `get_num_flops_total_attn_compute`); ATTN the first norm and
  the attention block with its TP collective; NORM_ATTN_NORM also the second
  norm. Embedding and head are never recomputed.
- pipeline: each micro-batch sends its activations forward and its gradients
  backward once per stage boundary (2 point-to-point transfers per micro-batch per
  stage, v times with interleaving), not overlapped. Bubble of 1F1B =
  (p - 1)/m of the ideal time, (p - 1)/(v m) with v interleaved stages (Narayanan
  et al. 2021, arXiv 2104.04473 §2.2).
- data parallel, over the link `communication.link_for_group` picks for the DP
  group (ranks tp*pp apart; inside a node or across nodes by num_gpus_per_node):
  no ZeRO: one gradient all-reduce per iteration; ZeRO-1: reduce-scatter of
  gradients + all-gather of updated weights per iteration; ZeRO-2: the
  reduce-scatter per micro-batch (gradients are never kept whole) + the weight
  all-gather per iteration; ZeRO-3: per micro-batch an all-gather of the weights
  in forward, another in backward, and a reduce-scatter of gradients. Experts
  use their own data-parallel group (dp / ep). Overlap (default
  `overlap_dp_comm=True`): the gradient reduction overlaps the backward (with
  recomputation) of the last micro-batch, per-micro-batch ZeRO traffic overlaps
  that micro-batch's forward / backward, the per-iteration weight all-gather
  overlaps the next forward; only what exceeds the overlapped compute is exposed.
- optimizer step: memory-bound pass over the (ZeRO-sharded) optimizer states,
  master weights, gradients and weights (`get_latency_weight_update`).
- TP collectives are exposed (`overlap_tp_comm=False`, as in Megatron-LM 2021);
  with True only what exceeds the micro-batch's compute is.
- `latency_per_iter_using_flops` = FLOPs of the iteration on one GPU (forward +
  backward + recomputation) over the achieved FLOP/s (`achieved_tflops`, else
  peak x flops_efficiency), as the mirrored system computes it: it folds every
  inefficiency into one number, which is how published TFLOP/s figures are made.

LoRA / QLoRA (Hu et al. 2021, arXiv 2106.09685; Dettmers et al. 2023, arXiv
2305.14314): the base weights are frozen, stored at 16 bits or as 4-bit NF4
(with double quantization 4 + 8/64 + 32/(64*256) = 4.127 bits per parameter,
QLoRA §3; without it 4 + 32/64) for the transformer layers' linear weights;
embeddings, norms, router and LM head stay in the dtype config. Adapters
A [in x r] and B [r x out] on each targeted projection, in `adapter_dtype_bytes`
(default 2), are the only trainable parameters: gradients and optimizer states
exist for them only; ZeRO shards them. Activations as for full training.
Backward: frozen linear layers compute only the input gradient (1x their
forward), embeddings nothing, attention core / norms / activations 2x, adapters
2x. Adapters are timed on the roofline like any operator (they re-read the
projection's input and accumulate into its output); per GPU they are sharded
like their base weight.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

from .communication import collective_time_s, link_for_group
from .constant import GB
from .errors import ConfigError, DoesNotFitError
from .memory import ActivationRecomputation
from .operators import Operator, Phase
from .roofline import peak_tflops_for_dtype

logger = logging.getLogger(__name__)

# QLoRA NF4 storage (Dettmers et al. 2023, arXiv 2305.14314 §3): 4-bit codes, one
# fp32 absmax per 64 weights (0.5 bit/param); double quantization stores those
# as 8-bit with one fp32 constant per 256 of them: 8/64 + 32/(64*256) bits/param.
NF4_BITS_PER_PARAM_DOUBLE_QUANT = 4 + 8 / 64 + 32 / (64 * 256)
NF4_BITS_PER_PARAM = 4 + 32 / 64

_LAYER_WEIGHT_GROUPS = ("attention", "mlp", "experts")


@dataclass(frozen=True)
class LoRAConfig:
    """Low-rank adapters on frozen base weights.

    rank: r of A [in x r] and B [r x out].
    target_modules: projection names as in the operator records (q_proj, k_proj,
        v_proj, o_proj, gate_proj, up_proj, down_proj; MLA: q_a_proj, q_b_proj,
        kv_a_proj, kv_b_proj). A name also matches prefixed records
        (expert_up_proj, shared_expert_up_proj).
    base_weight_bits: 16 (LoRA) or 4 (QLoRA NF4) for the layers' linear weights.
    adapter_dtype_bytes: bytes of the adapter weights (and of their gradients).
    double_quant: QLoRA double quantization of the NF4 block constants.
    """

    rank: int = 8
    target_modules: Tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    base_weight_bits: int = 16
    adapter_dtype_bytes: float = 2
    double_quant: bool = True

    def __post_init__(self):
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise ConfigError(f"lora rank = {self.rank!r} must be a positive integer")
        if self.base_weight_bits not in (16, 4):
            raise ConfigError(f"lora base_weight_bits = {self.base_weight_bits!r}; valid: 16 (LoRA), 4 (QLoRA NF4)")
        if isinstance(self.target_modules, str):
            object.__setattr__(self, "target_modules", (self.target_modules,))
        object.__setattr__(self, "target_modules", tuple(self.target_modules))
        if not self.target_modules:
            raise ConfigError("lora target_modules is empty; name at least one projection, e.g. ('q_proj', 'v_proj')")
        if not (isinstance(self.adapter_dtype_bytes, (int, float)) and self.adapter_dtype_bytes > 0):
            raise ConfigError(f"lora adapter_dtype_bytes = {self.adapter_dtype_bytes!r} must be a positive number")

    @property
    def base_bytes_per_param(self) -> float:
        if self.base_weight_bits == 16:
            return 2.0
        return (NF4_BITS_PER_PARAM_DOUBLE_QUANT if self.double_quant else NF4_BITS_PER_PARAM) / 8

    def targets(self, op: Operator) -> bool:
        return op.kind == "matmul" and op.in_features > 0 and any(
            op.name == t or op.name.endswith("_" + t) for t in self.target_modules)

    @classmethod
    def from_any(cls, value: Any) -> Optional["LoRAConfig"]:
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, dict):
            unknown = set(value) - {"rank", "r", "target_modules", "base_weight_bits", "adapter_dtype_bytes",
                                    "double_quant"}
            if unknown:
                raise ConfigError(f"lora has unknown keys {sorted(unknown)}; valid: rank, target_modules, "
                                  "base_weight_bits, adapter_dtype_bytes, double_quant")
            v = dict(value)
            if "r" in v:
                v["rank"] = v.pop("r")
            return cls(**v)
        raise ConfigError(f"lora = {value!r} must be None, a dict or a LoRAConfig")


# --------------------------------------------------------------------- batch
def _opt_positive_int(value, name: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(f"{name} = {value!r} must be a positive integer")
    try:
        iv = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} = {value!r} must be a positive integer") from None
    if iv != value or iv < 1:
        raise ConfigError(f"{name} = {value!r} must be a positive integer")
    return iv


def config_batch_size_and_gradient_accumulation_steps(dp_size: int, max_batch_size_per_gpu: int,
                                                      batch_size_per_gpu: Optional[int] = None,
                                                      gradient_accumulation_steps: Optional[int] = None,
                                                      global_batch_size: Optional[int] = None
                                                      ) -> Tuple[int, int, int]:
    """(batch_size_per_gpu, gradient_accumulation_steps, global_batch_size) with
    global = batch per GPU x accumulation steps x dp_size.

    Any two determine the third; one alone is completed with the others at their
    natural value (batch alone: 1 step; steps alone: the largest batch that fits;
    global alone: the largest batch per GPU <= max_batch_size_per_gpu that
    divides global / dp_size); none picks the largest batch that fits and 1 step.
    An inconsistent or indivisible combination raises ConfigError naming the
    values. Whether the batch fits in memory is the caller's check (training()
    raises DoesNotFitError with the numbers).
    """
    dp = _opt_positive_int(dp_size, "dp_size")
    bs = _opt_positive_int(batch_size_per_gpu, "batch_size_per_gpu")
    gas = _opt_positive_int(gradient_accumulation_steps, "gradient_accumulation_steps")
    gbs = _opt_positive_int(global_batch_size, "global_batch_size")
    max_b = int(max_batch_size_per_gpu) if max_batch_size_per_gpu is not None else 0

    def need_fit():
        if max_b < 1:
            raise DoesNotFitError(
                f"not even batch_size_per_gpu = 1 fits (max_batch_size_per_gpu = {max_b}); "
                "shard more (ZeRO, tensor/pipeline parallelism) or recompute activations",
                needed_bytes=float("nan"), available_bytes=float("nan"), max_batch_size=max_b)
        return max_b

    if bs is not None and gas is not None and gbs is not None:
        if bs * gas * dp != gbs:
            raise ConfigError(
                f"global_batch_size = {gbs} != batch_size_per_gpu ({bs}) x gradient_accumulation_steps ({gas}) "
                f"x dp_size ({dp}) = {bs * gas * dp}")
        return bs, gas, gbs
    if bs is not None and gas is not None:
        return bs, gas, bs * gas * dp
    if bs is not None and gbs is not None:
        if gbs % (bs * dp):
            raise ConfigError(
                f"global_batch_size = {gbs} is not divisible by batch_size_per_gpu ({bs}) x dp_size ({dp}) = "
                f"{bs * dp}; valid global_batch_size: multiples of {bs * dp}")
        return bs, gbs // (bs * dp), gbs
    if gas is not None and gbs is not None:
        if gbs % (gas * dp):
            raise ConfigError(
                f"global_batch_size = {gbs} is not divisible by gradient_accumulation_steps ({gas}) x dp_size "
                f"({dp}) = {gas * dp}; valid global_batch_size: multiples of {gas * dp}")
        return gbs // (gas * dp), gas, gbs
    if bs is not None:
        return bs, 1, bs * dp
    if gas is not None:
        b = need_fit()
        return b, gas, b * gas * dp
    if gbs is not None:
        if gbs % dp:
            raise ConfigError(f"global_batch_size = {gbs} is not divisible by dp_size = {dp}; "
                              f"valid global_batch_size: multiples of {dp}")
        per_rank = gbs // dp
        b = min(need_fit(), per_rank)
        while per_rank % b:
            b -= 1
        return b, per_rank // b, gbs
    b = need_fit()
    return b, 1, b * dp


# --------------------------------------------------------------- operators
def _recomputed(op: Operator, rc: ActivationRecomputation) -> bool:
    """Whether a layer operator's forward is repeated in backward under `rc`."""
    if rc == ActivationRecomputation.NONE:
        return False
    if rc == ActivationRecomputation.FULL:
        return True
    if rc == ActivationRecomputation.ATTN_COMPUTE:
        return op.kind == "attention"
    in_attn = (op.group == "attention" or op.name == "norm_1"
               or (op.kind == "collective" and op.comm_group == "tp"
                   and (op.name.endswith("_attention") or op.name.endswith("_layer"))))
    if rc == ActivationRecomputation.ATTN:
        return in_attn
    return in_attn or op.name == "norm_2"  # NORM_ATTN_NORM


def lora_adapter_ops(op: Operator, rank: int, adapter_bytes: float, act_bytes: float) -> List[Operator]:
    """The A [in x r] and B [r x out] adapters of a (frozen) matmul record, for
    every weight matrix the record stands for (layers, experts, copies).

    FLOPs follow the base op's tokens: A does 2*T*in*r = base x r/out, B base x
    r/in. Per GPU they are split like the base weight. A re-reads the base input;
    B accumulates into the base output (read + write). The T x r intermediate is
    neglected (r << in, out)."""
    if not op.in_features or not op.out_features or not op.params:
        return []
    fin, fout = op.in_features, op.out_features
    n_mats = op.params // (fin * fout)  # biases add fewer than in*out params
    share = op.params_per_gpu / op.params
    in_bytes = op.bytes_read_per_gpu - op.weight_bytes_per_gpu
    out_bytes = op.bytes_written_per_gpu
    out = []
    for suffix, p_one, f_factor, read, write in (
            ("lora_A", fin * rank, rank / fout, in_bytes, 0.0),
            ("lora_B", rank * fout, rank / fin, out_bytes, out_bytes)):
        params = n_mats * p_one
        w_gpu = params * share * adapter_bytes
        out.append(Operator(name=f"{op.name}_{suffix}", group=op.group, kind="matmul", params=params,
                            params_per_gpu=params * share, weight_bytes_per_gpu=w_gpu,
                            flops=op.flops * f_factor, flops_per_gpu=op.flops_per_gpu * f_factor,
                            bytes_read_per_gpu=w_gpu + read, bytes_written_per_gpu=write,
                            shapes=f"r={rank} adapter of {op.name}"))
    return out


@dataclass
class _Stage:
    """Per micro-batch times (s), FLOPs and per-GPU bytes of one pipeline stage."""

    index: int
    num_layers: int = 0
    fwd_compute: float = 0.0
    bwd_compute: float = 0.0
    rc_compute: float = 0.0
    rc_comm: float = 0.0
    tp_fwd: float = 0.0
    ep_fwd: float = 0.0
    flops_fwd: float = 0.0  # whole-model (unsharded) FLOPs of this stage's ops
    flops_bwd: float = 0.0
    flops_rc: float = 0.0
    dense_params_gpu: float = 0.0  # trainable (full training: all; LoRA: adapters)
    expert_params_gpu: float = 0.0
    weight_bytes_gpu: float = 0.0  # unsharded by ZeRO
    max_op_weight_bytes_gpu: float = 0.0  # largest single weight matrix of a layer
    max_op_trainable_params_gpu: float = 0.0
    dp_weight_bytes_gpu: float = 0.0  # bytes ZeRO all-gathers (dense)
    dp_expert_weight_bytes_gpu: float = 0.0

    @property
    def micro_batch_time(self) -> float:
        return self.fwd_compute + self.bwd_compute + self.rc_compute + self.rc_comm + 2 * (self.tp_fwd + self.ep_fwd)


def _build_stage(analysis, ph: Phase, s: int, rc: ActivationRecomputation, lora: Optional[LoRAConfig],
                 overlap_tp_comm: bool) -> _Stage:
    st = _Stage(index=s)
    act_bytes = analysis.dtype_config.activation_bits / 8
    for label, n, ops in analysis.describer.model_ops(ph, stage=s):
        is_layer = label not in ("embedding", "head")
        if is_layer:
            st.num_layers += n
        for op in ops:
            t = n * analysis._op_time(op)  # n separate operators (each collective pays its latency)
            if op.kind == "collective":
                if op.comm_group == "tp":
                    st.tp_fwd += t
                elif op.comm_group == "ep":
                    st.ep_fwd += t
                if is_layer and _recomputed(op, rc):
                    st.rc_comm += t
                continue
            frozen = lora is not None and (op.params > 0 or op.kind == "embedding")
            if not frozen:
                bwd = 2.0
            elif op.kind == "embedding":
                bwd = 0.0  # frozen lookup: nothing to differentiate
            elif op.kind == "matmul":
                bwd = 1.0  # input gradient only
            else:
                bwd = 2.0
            rc_on = is_layer and _recomputed(op, rc)
            st.fwd_compute += t
            st.bwd_compute += bwd * t
            st.flops_fwd += n * op.flops
            st.flops_bwd += bwd * n * op.flops
            if rc_on:
                st.rc_compute += t
                st.flops_rc += n * op.flops
            # memory-side quantities
            expert = op.group == "experts" and op.name.startswith("expert_")
            if lora is None:
                w = op.weight_bytes_per_gpu
                if expert:
                    st.expert_params_gpu += n * op.params_per_gpu
                    st.dp_expert_weight_bytes_gpu += n * w
                else:
                    st.dense_params_gpu += n * op.params_per_gpu
                    st.dp_weight_bytes_gpu += n * w
                if is_layer:
                    st.max_op_trainable_params_gpu = max(st.max_op_trainable_params_gpu, op.params_per_gpu)
            else:
                base = (op.params_per_gpu * lora.base_bytes_per_param
                        if is_layer and op.kind == "matmul" and op.group in _LAYER_WEIGHT_GROUPS
                        else op.weight_bytes_per_gpu)
                w = base
                st.dp_weight_bytes_gpu += n * base
                if is_layer and lora.targets(op):
                    for a in lora_adapter_ops(op, lora.rank, lora.adapter_dtype_bytes, act_bytes):
                        ta = n * analysis._op_time(a)
                        st.fwd_compute += ta
                        st.bwd_compute += 2 * ta
                        st.flops_fwd += n * a.flops
                        st.flops_bwd += 2 * n * a.flops
                        if rc_on:
                            st.rc_compute += ta
                            st.flops_rc += n * a.flops
                        st.dense_params_gpu += n * a.params_per_gpu
                        st.max_op_trainable_params_gpu = max(st.max_op_trainable_params_gpu, a.params_per_gpu)
                        w += a.weight_bytes_per_gpu
                        st.dp_weight_bytes_gpu += n * a.weight_bytes_per_gpu
            st.weight_bytes_gpu += n * w
            if is_layer:
                st.max_op_weight_bytes_gpu = max(st.max_op_weight_bytes_gpu, w)
    if overlap_tp_comm:
        # TP collectives hidden behind the micro-batch's compute; only the excess is exposed
        compute = st.fwd_compute + st.bwd_compute + st.rc_compute
        tp_total = 2 * st.tp_fwd + st.rc_comm
        exposed = max(0.0, tp_total - compute)
        scale = exposed / tp_total if tp_total else 0.0
        st.tp_fwd *= scale
        st.rc_comm *= scale
    return st


# ------------------------------------------------------------------- memory
def _in_flight(stage: int, p: int, m: int, v: int) -> float:
    """Micro-batches whose activations stage `stage` holds at the 1F1B peak."""
    if p == 1:
        return 1.0
    if v == 1:
        return float(min(m, p - stage))
    return float(min(m, (p - stage) + (p - 1) / v))


def _memory(analysis, stages: List[_Stage], b: int, seq_len: int, m: Optional[int], v: int, ds_zero, rc,
            act_kwargs: Dict[str, Any], master_bytes: float, other_op_bytes: Optional[float],
            lora: Optional[LoRAConfig]) -> List[Dict[str, float]]:
    """Memory breakdown (bytes per GPU) of every stage for micro-batch b with m
    micro-batches per iteration (None: assume the pipeline is full)."""
    p = analysis.parallelism_config
    dp, rdp = p.dp_size, p.rdp_size
    per_layer = analysis.get_activation_memory_per_layer(b, seq_len, False, rc, **act_kwargs)
    per_layer_none = analysis.get_activation_memory_per_layer(b, seq_len, False, ActivationRecomputation.NONE,
                                                              **act_kwargs)
    emb_act = analysis.get_activation_memory_input_embedding(b, seq_len)
    logits_act = analysis.get_activation_memory_output_embedding(b, seq_len)
    grad_bytes = analysis.dtype_config.weight_bits / 8 if analysis.dtype_config.weight_bits >= 16 else 2
    if lora is not None:
        grad_bytes = lora.adapter_dtype_bytes
    out = []
    mm = m if m is not None else p.pp_size
    for st in stages:
        if ds_zero.value >= 3:  # dense weights shard over dp, experts over their own replicas (dp / ep)
            w = (st.weight_bytes_gpu - st.dp_expert_weight_bytes_gpu) / dp + st.dp_expert_weight_bytes_gpu / rdp
        else:
            w = st.weight_bytes_gpu
        opt, grad = analysis._optimizer_and_grad(st.dense_params_gpu, st.expert_params_gpu, master_bytes,
                                                 other_op_bytes, ds_zero)
        if lora is not None:  # adapter gradients in the adapter dtype
            grad = grad * grad_bytes / (analysis.dtype_config.weight_bits / 8
                                        if analysis.dtype_config.weight_bits >= 16 else 2)
        k = _in_flight(st.index, p.pp_size, mm, v)
        act = per_layer * st.num_layers * k
        if st.index == 0:
            act += emb_act * k
        if st.index == p.pp_size - 1:
            act += logits_act
        rc_buffer = (per_layer_none - per_layer) if (st.num_layers and rc != ActivationRecomputation.NONE) else 0.0
        zero_buf = 0.0
        if ds_zero.value >= 3:
            zero_buf += 2 * st.max_op_weight_bytes_gpu
        if ds_zero.value >= 2:
            zero_buf += grad_bytes * st.max_op_trainable_params_gpu
        peak = w + opt + grad + act + rc_buffer + zero_buf
        out.append({"weights": w, "gradients": grad, "optimizer_states": opt, "activations": act,
                    "recompute_buffer": rc_buffer, "zero_buffers": zero_buf, "peak": peak,
                    "static": w + opt + grad + zero_buf, "activations_per_sample": (act + rc_buffer) / b})
    return out


def _max_batch(mem: float, breakdown: List[Dict[str, float]]) -> int:
    best = None
    for d in breakdown:
        free = mem - d["static"]
        if free <= 0:
            return 0
        per = d["activations_per_sample"]
        n = int(free // per) if per > 0 else 10**9
        best = n if best is None else min(best, n)
    return max(best or 0, 0)


def _fit_message(analysis, need: Dict[str, float], mem: float, b: int, seq_len: int, max_b: int,
                 ds_zero, rc, alt: Dict[str, float]) -> str:
    p = analysis.parallelism_config
    head = (f"{analysis.model_config.name} training on {analysis.gpu_config.name} (tp={p.tp_size}, pp={p.pp_size}, "
            f"dp={p.dp_size}, ZeRO-{ds_zero.value}, recomputation {rc.name}, {analysis.dtype_config.name}) needs "
            f"{need['peak'] / GB:.2f} GB per GPU for micro-batch {b} x {seq_len} tokens (weights "
            f"{need['weights'] / GB:.2f} GB, gradients {need['gradients'] / GB:.2f} GB, optimizer states "
            f"{need['optimizer_states'] / GB:.2f} GB, activations {need['activations'] / GB:.2f} GB, "
            f"recomputation buffer {need['recompute_buffer'] / GB:.2f} GB, ZeRO buffers "
            f"{need['zero_buffers'] / GB:.2f} GB) but the GPU has {mem / GB:.2f} GB.")
    tips = []
    if max_b >= 1:
        tips.append(f"a smaller micro-batch (batch_size_per_gpu <= {max_b} fits)")
    else:
        tips.append("no micro-batch fits as is")
    if "zero3" in alt and p.dp_size > 1:
        tips.append(f"ZeRO stage 3 (ds_zero=3, peak {alt['zero3'] / GB:.2f} GB)")
    elif ds_zero.value < 3:
        static = need["weights"] + need["gradients"] + need["optimizer_states"]
        tips.append(f"data parallelism with ZeRO (ds_zero=3 over dp_size=8 would leave {static / 8 / GB:.2f} GB "
                    "of the weights, gradients and optimizer states per GPU)")
    if "full_recompute" in alt:
        tips.append(f"full activation recomputation (activation_recomputation=4, peak {alt['full_recompute'] / GB:.2f} GB)")
    tips.append(f"more tensor or pipeline parallelism (tp_size={p.tp_size * 2} or pp_size={p.pp_size * 2} "
                "roughly halves weights, gradients and optimizer states per GPU)")
    return f"{head} What would help: {'; '.join(tips)}."


# ------------------------------------------------------------------ DP time
def _dp_times(analysis, st: _Stage, ds_zero, lora: Optional[LoRAConfig]) -> Tuple[float, float, float, float]:
    """(per-iteration gradient reduction, per-iteration weight all-gather,
    per-micro-batch forward traffic, per-micro-batch backward traffic), seconds."""
    p = analysis.parallelism_config
    g = analysis.gpu_config
    grad_b = analysis.dtype_config.weight_bits / 8 if analysis.dtype_config.weight_bits >= 16 else 2
    if lora is not None:
        grad_b = lora.adapter_dtype_bytes
    dense_link = link_for_group(g, p.dp_size, p.tp_size * p.pp_size, analysis.intra_node_memory_efficiency,
                                analysis.inter_node_memory_efficiency, analysis.num_gpus_per_node)
    expert_link = link_for_group(g, p.rdp_size, p.tp_size * p.pp_size * p.ep_size,
                                 analysis.intra_node_memory_efficiency, analysis.inter_node_memory_efficiency,
                                 analysis.num_gpus_per_node)

    def coll(kind, dense_bytes, expert_bytes):
        return (collective_time_s(kind, dense_bytes, p.dp_size, dense_link)
                + collective_time_s(kind, expert_bytes, p.rdp_size, expert_link))

    gd, ge = st.dense_params_gpu * grad_b, st.expert_params_gpu * grad_b
    if lora is not None:  # only adapters are gathered/updated; frozen weights are replicated (or ZeRO-3 gathered)
        wd, we = st.dp_weight_bytes_gpu, 0.0
        upd_d = st.dense_params_gpu * lora.adapter_dtype_bytes
    else:
        wd, we = st.dp_weight_bytes_gpu, st.dp_expert_weight_bytes_gpu
        upd_d = wd
    z = ds_zero.value
    if z == 0:
        return coll("all_reduce", gd, ge), 0.0, 0.0, 0.0
    if z == 1:
        return coll("reduce_scatter", gd, ge), coll("all_gather", upd_d, we), 0.0, 0.0
    if z == 2:
        return 0.0, coll("all_gather", upd_d, we), 0.0, coll("reduce_scatter", gd, ge)
    ag = coll("all_gather", wd, we)
    return 0.0, 0.0, ag, ag + coll("reduce_scatter", gd, ge)


# -------------------------------------------------------------- orchestrator
def run_training(analysis, batch_size_per_gpu: Optional[int] = None, gradient_accumulation_steps: Optional[int] = None,
                 global_batch_size: Optional[int] = None, seq_len: Optional[int] = None,
                 total_num_tokens: Optional[float] = None,
                 activation_recomputation=ActivationRecomputation.NONE, ds_zero=0,
                 layernorm_dtype_bytes: float = 4, master_weights_dtype_bytes: float = 4,
                 other_op_bytes: Optional[float] = None, flash_attn: bool = True, softmax_dropout: bool = False,
                 mlp_activation_quant_bits: Optional[int] = None, mlp_1linear_quant_bits: Optional[int] = None,
                 mlp_gelu_input_quant_bits: Optional[int] = None, mlp_2linear_quant_bits: Optional[int] = None,
                 mlp_recompute_gelu: bool = False, output_dir: Optional[str] = None, output_file_suffix: str = "",
                 pipeline_interleave: int = 1, lora: Union[None, dict, LoRAConfig] = None,
                 overlap_dp_comm: bool = True, overlap_tp_comm: bool = False,
                 cost_per_gpu_hour: Optional[float] = None) -> Dict[str, Any]:
    """Training analysis of one iteration and of the whole run (see the module
    docstring for every assumption). Returns a flat dict in base units (bytes,
    seconds, FLOPs, FLOP/s). Raises DoesNotFitError when the layout does not fit
    and ConfigError on invalid input.

    Extras beyond the mirrored API: `pipeline_interleave` (virtual stages per
    GPU, v), `lora` (LoRAConfig or dict: rank, target_modules, base_weight_bits
    16 or 4, adapter_dtype_bytes, double_quant), `overlap_dp_comm`,
    `overlap_tp_comm`, `cost_per_gpu_hour` (dollars).
    """
    from .options import DSZeRO, as_enum as _enum

    m_cfg = analysis.model_config
    p = analysis.parallelism_config
    rc = _enum(ActivationRecomputation, activation_recomputation, "activation_recomputation")
    ds_zero = _enum(DSZeRO, ds_zero, "ds_zero")
    lora = LoRAConfig.from_any(lora)
    v = _opt_positive_int(pipeline_interleave, "pipeline_interleave")
    if v > 1:
        if p.pp_size == 1:
            raise ConfigError(f"pipeline_interleave = {v} needs pp_size > 1 (interleaving splits each GPU's "
                              "pipeline stage into virtual stages)")
        if m_cfg.num_layers < p.pp_size * v:
            raise ConfigError(f"pipeline_interleave = {v} with pp_size = {p.pp_size} needs at least "
                              f"{p.pp_size * v} layers; {m_cfg.name} has {m_cfg.num_layers}")
    if seq_len is None:
        seq_len = m_cfg.max_seq_len
        if seq_len is None:
            raise ConfigError(f"seq_len is not given and {m_cfg.name} has no max_seq_len; pass seq_len")
    seq_len = _opt_positive_int(seq_len, "seq_len")
    if m_cfg.max_seq_len is not None and seq_len > m_cfg.max_seq_len:
        logger.warning("seq_len = %d exceeds %s's max_seq_len = %d", seq_len, m_cfg.name, m_cfg.max_seq_len)
    if total_num_tokens is not None and not (isinstance(total_num_tokens, (int, float))
                                             and not isinstance(total_num_tokens, bool)
                                             and math.isfinite(total_num_tokens) and total_num_tokens > 0):
        raise ConfigError(f"total_num_tokens = {total_num_tokens!r} must be a positive number")
    if cost_per_gpu_hour is not None and not (isinstance(cost_per_gpu_hour, (int, float))
                                              and cost_per_gpu_hour >= 0):
        raise ConfigError(f"cost_per_gpu_hour = {cost_per_gpu_hour!r} must be a non-negative number")
    for name, val in (("layernorm_dtype_bytes", layernorm_dtype_bytes),
                      ("master_weights_dtype_bytes", master_weights_dtype_bytes)):
        if not (isinstance(val, (int, float)) and val > 0):
            raise ConfigError(f"{name} = {val!r} must be a positive number of bytes")
    if other_op_bytes is not None and not (isinstance(other_op_bytes, (int, float)) and other_op_bytes >= 0):
        raise ConfigError(f"other_op_bytes = {other_op_bytes!r} must be a non-negative number of bytes")
    bs_in = _opt_positive_int(batch_size_per_gpu, "batch_size_per_gpu")
    gas_in = _opt_positive_int(gradient_accumulation_steps, "gradient_accumulation_steps")
    gbs_in = _opt_positive_int(global_batch_size, "global_batch_size")
    act_kwargs = dict(layernorm_dtype_bytes=layernorm_dtype_bytes, flash_attn=flash_attn,
                      softmax_dropout=softmax_dropout, mlp_activation_quant_bits=mlp_activation_quant_bits,
                      mlp_1linear_quant_bits=mlp_1linear_quant_bits,
                      mlp_gelu_input_quant_bits=mlp_gelu_input_quant_bits,
                      mlp_2linear_quant_bits=mlp_2linear_quant_bits, mlp_recompute_gelu=mlp_recompute_gelu)
    mem = analysis.gpu_config.mem_per_GPU_in_GB * GB

    def stages_for(b: int, rc_=rc) -> List[_Stage]:
        ph = Phase("train", b, seq_len, seq_len)
        return [_build_stage(analysis, ph, s, rc_, lora, overlap_tp_comm) for s in range(p.pp_size)]

    if lora is not None:
        if not any(lora.targets(o) for o in analysis.describer.flat_ops(Phase("train", 1, 1, 1))):
            names = sorted({o.name for o in analysis.describer.flat_ops(Phase("train", 1, 1, 1))
                            if o.kind == "matmul" and o.group in _LAYER_WEIGHT_GROUPS})
            raise ConfigError(f"lora target_modules {list(lora.target_modules)} match no projection of "
                              f"{m_cfg.name}; its projections are {names}")

    def memory(b, m, zero=ds_zero, rc_=rc, st=None):
        st = st if st is not None else stages_for(1, rc_)
        return _memory(analysis, st, b, seq_len, m, v, zero, rc_, act_kwargs, master_weights_dtype_bytes,
                       other_op_bytes, lora)

    # batch configuration --------------------------------------------------------
    stages1 = stages_for(1)  # memory-side quantities do not depend on the batch
    m_known = gas_in
    if m_known is None and bs_in is not None and gbs_in is not None and gbs_in % (bs_in * p.dp_size) == 0:
        m_known = gbs_in // (bs_in * p.dp_size)
    max_b = _max_batch(mem, memory(1, m_known, st=stages1))
    if bs_in is None and max_b < 1:  # not even one sequence fits: report it with the numbers at batch 1
        b, m, gbs = 1, gas_in or p.pp_size, None
    else:
        b, m, gbs = config_batch_size_and_gradient_accumulation_steps(p.dp_size, max_b, bs_in, gas_in, gbs_in)
    mem_stages = memory(b, m, st=stages1)
    peak_stage = max(range(p.pp_size), key=lambda i: mem_stages[i]["peak"])
    need = mem_stages[peak_stage]
    if need["peak"] > mem:
        alt = {}
        if ds_zero.value < 3:
            alt["zero3"] = max(d["peak"] for d in memory(b, m, zero=DSZeRO.STAGE_3, st=stages1))
        if rc != ActivationRecomputation.FULL:
            alt["full_recompute"] = max(d["peak"] for d in memory(b, m, rc_=ActivationRecomputation.FULL,
                                                                  st=stages1))
        fit_b = _max_batch(mem, memory(1, m, st=stages1))
        raise DoesNotFitError(_fit_message(analysis, need, mem, b, seq_len, fit_b, ds_zero, rc, alt),
                              needed_bytes=need["peak"], available_bytes=mem, max_batch_size=fit_b,
                              breakdown=dict(need))
    max_b = _max_batch(mem, memory(1, m, st=stages1))

    # time -----------------------------------------------------------------------
    stages = stages_for(b)
    hop = analysis.pipeline_handoff_time_s(b, seq_len) / (p.pp_size - 1) if p.pp_size > 1 else 0.0
    pp_per_mb = 2 * hop * v if p.pp_size > 1 else 0.0
    bott = max(stages, key=lambda s_: s_.micro_batch_time)
    t_mb = bott.micro_batch_time + pp_per_mb
    bubble = (p.pp_size - 1) / v * t_mb if p.pp_size > 1 else 0.0
    heavy = max(stages, key=lambda s_: (s_.dense_params_gpu + s_.expert_params_gpu, s_.weight_bytes_gpu))
    grad_iter, gather_iter, fwd_mb, bwd_mb = _dp_times(analysis, heavy, ds_zero, lora)
    bwd_window = bott.bwd_compute + bott.rc_compute
    dp_total = grad_iter + gather_iter + m * (fwd_mb + bwd_mb)
    if overlap_dp_comm:
        dp_exposed = (max(0.0, grad_iter - bwd_window) + max(0.0, gather_iter - bott.fwd_compute)
                      + m * (max(0.0, fwd_mb - bott.fwd_compute) + max(0.0, bwd_mb - bwd_window)))
    else:
        dp_exposed = dp_total
    trainable_gpu = None
    if lora is not None:
        trainable_gpu = heavy.dense_params_gpu / (p.dp_size if ds_zero.value >= 1 else 1)
    opt_step = analysis.get_latency_weight_update(ds_zero, master_weights_dtype_bytes, other_op_bytes,
                                                  trainable_params_per_gpu=trainable_gpu)
    breakdown_t = {
        "latency_per_iter_fwd_compute": m * bott.fwd_compute,
        "latency_per_iter_bwd_compute": m * bott.bwd_compute,
        "latency_per_iter_recompute": m * (bott.rc_compute + bott.rc_comm),
        "latency_per_iter_tp_comm": m * 2 * bott.tp_fwd,
        "latency_per_iter_ep_comm": m * 2 * bott.ep_fwd,
        "latency_per_iter_pp_comm": m * pp_per_mb,
        "latency_per_iter_pipeline_bubble": bubble,
        "latency_per_iter_dp_comm": dp_exposed,
        "latency_per_iter_optimizer_step": opt_step,
    }
    latency_per_iter = sum(breakdown_t.values())

    # FLOPs ----------------------------------------------------------------------
    flops_fwd = sum(s_.flops_fwd for s_ in stages)
    flops_bwd = sum(s_.flops_bwd for s_ in stages)
    flops_rc = sum(s_.flops_rc for s_ in stages)
    flops_mb = flops_fwd + flops_bwd + flops_rc
    gpus_per_replica = p.tp_size * p.pp_size
    n_gpus = gpus_per_replica * p.dp_size
    tflops = analysis.get_TFLOPS_per_gpu()
    latency_per_iter_using_flops = flops_mb * m / (gpus_per_replica * tflops * 1e12)
    peak_flops = peak_tflops_for_dtype(analysis.gpu_config, analysis.dtype_config) * 1e12
    model_flops_iter = (flops_fwd + flops_bwd) * m * p.dp_size
    hw_flops_iter = flops_mb * m * p.dp_size
    latency_fwd = sum(s_.fwd_compute + s_.tp_fwd + s_.ep_fwd for s_ in stages) \
        + analysis.pipeline_handoff_time_s(b, seq_len)

    tokens_per_iter = gbs * seq_len
    if total_num_tokens is not None:
        num_iters = total_num_tokens / tokens_per_iter
        total_latency = latency_per_iter * num_iters
        total_latency_flops = latency_per_iter_using_flops * num_iters
        gpu_hours = total_latency * n_gpus / 3600
        gpu_hours_flops = total_latency_flops * n_gpus / 3600
    else:
        num_iters = total_latency = total_latency_flops = gpu_hours = gpu_hours_flops = None

    num_params = analysis.get_num_params_total()
    trainable_total = (sum(a.params for o in analysis.describer.flat_ops(Phase("train", 1, 1, 1)) if lora.targets(o)
                           for a in lora_adapter_ops(o, lora.rank, lora.adapter_dtype_bytes, 2))
                       if lora is not None else num_params)
    summary: Dict[str, Any] = {
        "model_name": m_cfg.name, "gpu_name": analysis.gpu_config.name, "dtype_name": analysis.dtype_config.name,
        "batch_size_per_gpu": b, "gradient_accumulation_steps": m, "global_batch_size": gbs, "seq_len": seq_len,
        "total_num_tokens": total_num_tokens, "total_num_gpus": n_gpus,
        "tp_size": p.tp_size, "pp_size": p.pp_size, "dp_size": p.dp_size, "ep_size": p.ep_size, "sp_size": p.sp_size,
        "pipeline_interleave": v, "ds_zero": ds_zero.value, "activation_recomputation": rc.value,
        "lora": None if lora is None else {"rank": lora.rank, "target_modules": list(lora.target_modules),
                                           "base_weight_bits": lora.base_weight_bits},
        "num_params_total": num_params,
        "num_active_params_total": analysis.get_num_active_params_total(),
        "num_trainable_params_total": trainable_total,
        # memory (bytes per GPU, on the stage with the highest peak)
        "weight_memory_per_gpu": need["weights"],
        "gradient_memory_per_gpu": need["gradients"],
        "optimizer_state_memory_per_gpu": need["optimizer_states"],
        "activation_memory_per_gpu": need["activations"],
        "activation_memory_recompute_buffer_per_gpu": need["recompute_buffer"],
        "zero_buffer_memory_per_gpu": need["zero_buffers"],
        "estimated_peak_memory_per_gpu": need["peak"],
        "gpu_memory_per_gpu": mem,
        "memory_left_per_gpu": mem - need["peak"],
        "peak_memory_pipeline_stage": peak_stage,
        "max_batch_size_per_gpu": max_b,
        # FLOPs
        "num_flops_fwd_per_micro_batch": flops_fwd,
        "num_flops_bwd_per_micro_batch": flops_bwd,
        "num_flops_recompute_per_micro_batch": flops_rc,
        "num_flops_total_per_micro_batch": flops_mb,
        "num_model_flops_per_iter": model_flops_iter,
        "num_hardware_flops_per_iter": hw_flops_iter,
        # time (seconds)
        "latency_fwd": latency_fwd,
        "latency_per_micro_batch": t_mb,
        **breakdown_t,
        "latency_per_iter_dp_comm_total": dp_total,
        "latency_per_iter_dp_comm_hidden": dp_total - dp_exposed,
        "latency_per_iter": latency_per_iter,
        "latency_per_iter_using_flops": latency_per_iter_using_flops,
        "num_iterations": num_iters,
        "total_training_latency": total_latency,
        "total_training_latency_using_flops": total_latency_flops,
        "gpu_hours": gpu_hours,
        "gpu_hours_using_flops": gpu_hours_flops,
        "tokens_per_sec": tokens_per_iter / latency_per_iter,
        "tokens_per_sec_per_gpu": tokens_per_iter / latency_per_iter / n_gpus,
        # efficiency
        "achieved_tflops": tflops,
        "achieved_flops": hw_flops_iter / n_gpus / latency_per_iter,
        "flops_efficiency": analysis.flops_efficiency,
        "hbm_memory_efficiency": analysis.hbm_memory_efficiency,
        "mfu": model_flops_iter / (latency_per_iter * n_gpus * peak_flops),
        "hfu": hw_flops_iter / (latency_per_iter * n_gpus * peak_flops),
        "compute_bound_latency_per_iter": hw_flops_iter / (n_gpus * peak_flops),
        "bottleneck_pipeline_stage": bott.index,
    }
    summary["notes"] = _training_notes(analysis, summary, bs_in is None)
    if cost_per_gpu_hour is not None:
        summary["cost_per_gpu_hour"] = cost_per_gpu_hour
        summary["cost_per_iter"] = latency_per_iter * n_gpus / 3600 * cost_per_gpu_hour
        summary["total_training_cost"] = None if gpu_hours is None else gpu_hours * cost_per_gpu_hour
        summary["total_training_cost_using_flops"] = (None if gpu_hours_flops is None
                                                      else gpu_hours_flops * cost_per_gpu_hour)
    if output_dir is not None:
        analysis.output_summary_dict(summary, output_dir, print_human_readable=True,
                                     output_file_suffix=output_file_suffix)
    return summary


def _training_notes(analysis, summary: Dict[str, Any], batch_was_chosen: bool) -> List[str]:
    """Warnings where an assumption or a choice matters for the reader."""
    notes = []
    it = summary["latency_per_iter"]
    bubble = summary["latency_per_iter_pipeline_bubble"]
    if it and bubble / it > 0.1:
        m = summary["gradient_accumulation_steps"]
        how = ("batch_size_per_gpu was chosen as the largest that fits; " if batch_was_chosen else "")
        notes.append(f"the pipeline bubble is {bubble / it:.0%} of the iteration with {m} micro-batches over "
                     f"{summary['pp_size']} stages; {how}a smaller batch_size_per_gpu (more micro-batches) or "
                     f"pipeline_interleave > 1 shrinks it")
    used = summary["estimated_peak_memory_per_gpu"] / summary["gpu_memory_per_gpu"]
    if used > 0.9:
        notes.append(f"the peak uses {used:.0%} of GPU memory; frameworks reserve some (allocator fragmentation, "
                     f"CUDA context): leave headroom")
    if summary["latency_per_iter_dp_comm"] > 0.1 * it:
        notes.append("data-parallel communication is not hidden by the backward pass: "
                     f"{summary['latency_per_iter_dp_comm'] / it:.0%} of the iteration is exposed")
    if analysis.achieved_tflops is None and analysis.flops_efficiency == 1:
        notes.append("flops_efficiency is 1: latency_per_iter is a lower bound (large-scale training reaches "
                     "~40-55% MFU); pass achieved_tflops or flops_efficiency for realistic days and cost")
    return notes
