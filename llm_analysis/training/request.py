"""Validation of training()'s arguments into a TrainingRequest: each field checked with a
ConfigError naming the field, the value and what is valid; the options a sweep over shapes
repeats are validated once per describer."""

from __future__ import annotations

import logging

from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Dict, Optional, Union

from llm_analysis.cost.calibrated import trains_integer_gemms
from llm_analysis.schema.context_limit import check_context
from llm_analysis.errors import ConfigError, warn
from llm_analysis.model import Phase
from llm_analysis.model.context_parallel import check_cp_seq_len
from llm_analysis.model.pipeline_layout import end_slots
from llm_analysis.schema.options import (MAX_COST_PER_GPU_HOUR, MAX_DTYPE_BYTES, MAX_NUM_LAYERS, MAX_TOTAL_TOKENS,
                       ActivationRecomputation, DSZeRO, as_enum, boolean, dtype_bytes, integer, master_weights_bytes,
                       non_negative_number, optional_positive_int, positive_int, positive_number, quant_bits)
from llm_analysis.training.lora import LoRAConfig
from llm_analysis.training.overheads import FrameworkMemory
from llm_analysis.training.overheads_tp import tp_overlap_mode
from llm_analysis.training.stage import LAYER_WEIGHT_GROUPS
from llm_analysis.training.zero3 import Zero3Traffic, overlap_share

logger = logging.getLogger(__name__)


@dataclass
class TrainingRequest:
    """The validated arguments of one training() call."""

    seq_len: int
    rc: ActivationRecomputation
    ds_zero: DSZeRO
    lora: Optional[LoRAConfig]
    interleave: int
    batch_size: Optional[int]
    accumulation_steps: Optional[int]
    global_batch_size: Optional[int]
    total_num_tokens: Optional[float]
    cost_per_gpu_hour: Optional[float]
    master_bytes: float
    other_op_bytes: Optional[float]
    overlap_dp_comm: Union[bool, float]  # True, False or a share in [0, 1] (zero3.py)
    overlap_tp_comm: Union[bool, str]  # False, True or "backward" (overheads_tp.py)
    fp8_weight_cast_per_iteration: bool  # FP8 weight casts kept across micro-batches (fp8_casts.py)
    # every validated option above and below, as one cache-key part hashed once per option set
    # (`_options` keeps the set, so a sweep over shapes reuses it): the memory entries' key
    options_key: "HashedKey"
    framework: FrameworkMemory = FrameworkMemory()
    zero3: Zero3Traffic = Zero3Traffic()
    act_kwargs: Dict[str, Any] = field(default_factory=dict)


class HashedKey:
    """A tuple cache-key part whose hash is computed once."""

    __slots__ = ("parts", "_hash")

    def __init__(self, parts: tuple):
        self.parts = parts
        self._hash = hash(parts)

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return self is other or (isinstance(other, HashedKey) and self.parts == other.parts)


def _number_or_none(value, check, *args):
    """`value` checked by `check`; kept as given when it is already a number (summaries echo it)."""
    if value is None:
        return None
    v = check(value, *args)
    return value if isinstance(value, (int, float)) else v


def _slots_hint(num_layers: int, p, v: int) -> str:
    """Where the embedding and the loss taking a layer's slot each (Megatron-Core's account_for_*_in_pipeline_split,
    as NeMo's Llama 3.1 405B recipes set them: 126 + 2 slots over pp 8 x vp 8) would let v chunks split every
    stage evenly, and neither is set: that way; else ''."""
    if any(end_slots(p)) or p.num_layers_in_first_pipeline_stage or p.num_layers_in_last_pipeline_stage:
        return ""
    for emb, loss in ((1, 1), (1, 0), (0, 1)):
        slots = num_layers + emb + loss
        if slots % p.pp_size == 0 and (slots // p.pp_size) % v == 0:
            flags = " and ".join(f for f, on in (("account_for_embedding_in_pipeline_split", emb),
                                                ("account_for_loss_in_pipeline_split", loss)) if on)
            return (f"; or ParallelismConfig({flags} = True): Megatron-Core's split with the "
                    f"{'embedding and the loss' if emb and loss else 'embedding' if emb else 'loss'} taking a "
                    f"layer's slot, {slots} slots over {p.pp_size} stages")
    return ""


def _check_interleave(analysis, v: int) -> int:
    m, p = analysis.model_config, analysis.parallelism_config
    if v > 1 and p.pp_size == 1:
        raise ConfigError(f"pipeline_interleave = {v} needs pp_size > 1 (interleaving splits each GPU's "
                          "pipeline stage into virtual stages)")
    if v > 1 and m.num_layers < p.pp_size * v:
        raise ConfigError(f"pipeline_interleave = {v} with pp_size = {p.pp_size} needs at least "
                          f"{p.pp_size * v} layers; {m.name} has {m.num_layers}")
    d = analysis.describer
    fewest = d.memoized(("fewest_stage_layers",), lambda: min(sum(g.values()) for g in d.stage_groups))
    if v > fewest:  # uneven stages (operators/pipeline_layout.py): each virtual stage needs a layer
        raise ConfigError(f"pipeline_interleave = {v} needs at least {v} layers on every pipeline stage; the "
                          f"smallest holds {fewest} (num_layers_in_first/last_pipeline_stage): valid 1..{fewest}")
    if v > 1:
        # each stage runs its layers as v equal chunks (Megatron-LM: the layers of a pipeline stage must be
        # divisible by the layers of a virtual stage); an uneven split's fill and drain follow its largest chunk.
        # Where the embedding / the loss take a layer's slot (model/pipeline_layout.py), the slots are what
        # divide: the first and last chunks hold one layer fewer (Megatron-Core's rule)
        counts = list(d.memoized(("stage_layer_counts",), lambda: tuple(sum(g.values()) for g in d.stage_groups)))
        emb, loss = end_slots(p)
        counts[0] += emb
        counts[-1] += loss
        if any(c % v for c in counts):
            valid = [k for k in range(1, fewest + 1) if all(c % k == 0 for c in counts)]
            raise ConfigError(f"pipeline_interleave = {v} must divide every pipeline stage's layers into equal virtual "
                              f"stages; the stages hold {sorted(set(counts))} layers of {m.name}: valid {valid}"
                              f"{_slots_hint(m.num_layers, p, v)}")
    return v


def _check_seq_len(analysis, seq_len) -> int:
    m = analysis.model_config
    if seq_len is None:
        seq_len = m.max_seq_len
        if seq_len is None:
            raise ConfigError(f"seq_len is not given and {m.name} has no max_seq_len; pass seq_len")
    seq_len = positive_int(seq_len, "seq_len")
    check_context(m, seq_len, "seq_len")
    return seq_len


def _check_lora(analysis, lora: Optional[LoRAConfig]) -> Optional[LoRAConfig]:
    if lora is None:
        return None
    ops = analysis.describer.flat_ops(Phase("train", 1, 1, 1, shapes_only=True))
    if not any(lora.targets(o) for o in ops):
        names = sorted({o.lora_target for o in ops if o.kind == "matmul" and o.group in LAYER_WEIGHT_GROUPS})
        raise ConfigError(f"lora target_modules {list(lora.target_modules)} match no projection of "
                          f"{analysis.model_config.name}; its projections are {names}")
    return lora


# training()'s arguments that describe the run's shape; the others are options, validated
# once per describer and argument values (a sweep over shapes repeats the same options)
_SHAPE_ARGS = frozenset(("batch_size_per_gpu", "gradient_accumulation_steps", "global_batch_size", "seq_len",
                         "total_num_tokens", "cost_per_gpu_hour", "output_dir", "output_file_suffix"))
_ACT_ARGS = ("layernorm_dtype_bytes", "flash_attn", "softmax_dropout", "mlp_activation_quant_bits",
             "mlp_1linear_quant_bits", "mlp_gelu_input_quant_bits", "mlp_2linear_quant_bits", "mlp_recompute_gelu")


def _check_options(analysis, kw: Dict[str, Any]) -> Dict[str, Any]:
    """The validated non-shape fields of a TrainingRequest (ConfigError naming the field)."""
    for name, check in (("layernorm_dtype_bytes", dtype_bytes), ("master_weights_dtype_bytes", master_weights_bytes)):
        checked = check(kw[name], name)  # (master: 0 is no master copy, the weights updated in place)
        if type(kw[name]) not in (int, float):  # '2' (a numeric string) read as the number it names, as
            kw[name] = checked                   # every other numeric argument is (schema/options.py)
    for name in ("flash_attn", "softmax_dropout", "mlp_recompute_gelu"):
        if type(kw[name]) is not bool:  # a bool is valid as is (the common case, no call)
            kw[name] = boolean(kw[name], name)
    kw["overlap_dp_comm"] = overlap_share(kw["overlap_dp_comm"])
    kw["overlap_tp_comm"] = tp_overlap_mode(kw["overlap_tp_comm"])
    for name in ("mlp_activation_quant_bits", "mlp_1linear_quant_bits", "mlp_gelu_input_quant_bits",
                 "mlp_2linear_quant_bits"):
        if kw[name] is not None:  # None: not quantised
            kw[name] = quant_bits(kw[name], name)
    interleave = 1 if kw["pipeline_interleave"] is None else kw["pipeline_interleave"]  # None: not interleaved
    lora = LoRAConfig.from_any(kw["lora"])
    rc = as_enum(ActivationRecomputation, kw["activation_recomputation"], "activation_recomputation")
    ds_zero = as_enum(DSZeRO, kw["ds_zero"], "ds_zero")
    opts = dict(
        rc=rc,
        ds_zero=ds_zero,
        lora=_check_lora(analysis, lora) if lora is not None else None,
        interleave=_check_interleave(analysis, integer(interleave, "pipeline_interleave", 1, MAX_NUM_LAYERS)),
        master_bytes=float(kw["master_weights_dtype_bytes"]),
        other_op_bytes=_number_or_none(kw["other_op_bytes"], non_negative_number, "other_op_bytes", MAX_DTYPE_BYTES),
        overlap_dp_comm=kw["overlap_dp_comm"], overlap_tp_comm=kw["overlap_tp_comm"],
        fp8_weight_cast_per_iteration=boolean(kw["fp8_weight_cast_per_iteration"], "fp8_weight_cast_per_iteration"),
        framework=FrameworkMemory.from_kwargs(kw),
        zero3=Zero3Traffic.from_kwargs(kw, rc, ds_zero),
        act_kwargs={k: kw[k] for k in _ACT_ARGS})
    opts["options_key"] = HashedKey(tuple(tuple(v.items()) if k == "act_kwargs" else v for k, v in opts.items()))
    return opts


OPTIONS_CACHE_SIZE = 64  # validated option sets kept per describer
_OPTION_GETTERS: Dict[tuple, Any] = {}  # argument names of a call, in order -> getter of its options' values


def _option_values(kw: Dict[str, Any]) -> tuple:
    """The values of the arguments that are not in _SHAPE_ARGS, in argument order (read in C by a
    getter made once per argument-name sequence: training() always passes the same names)."""
    names = tuple(kw)
    get = _OPTION_GETTERS.get(names)
    if get is None:
        options = [k for k in names if k not in _SHAPE_ARGS]
        get = _OPTION_GETTERS[names] = itemgetter(*options) if len(options) > 1 else (
            lambda d: tuple(d[k] for k in options))
    return get(kw)


def _options(analysis, kw: Dict[str, Any]) -> Dict[str, Any]:
    """`_check_options`, kept per describer and option values with their types (so 1 and
    True, or 4 and 4.0, are not taken for each other); unhashable values (a LoRA dict) are
    validated every call. Read only: the requests built from it share its act_kwargs."""
    values = _option_values(kw)
    cache = analysis.describer.memoized(("training_options",), dict)
    try:
        key = (values, tuple(map(type, values)))
        hit = cache.get(key)
    except TypeError:
        return _check_options(analysis, kw)
    if hit is None:
        if len(cache) >= OPTIONS_CACHE_SIZE:
            cache.clear()
        hit = cache[key] = _check_options(analysis, kw)
    return hit


def check_request(analysis, kw: Dict[str, Any]) -> TrainingRequest:
    """Validate training()'s arguments (ConfigError naming the field and value)."""
    redundant = analysis.parallelism_config.moe_redundant_experts
    if redundant and analysis.parallelism_config.ep_size > 1:
        # the describer would hold the copies' weights and states on every expert-parallel rank: no training
        # framework places an expert twice (its gradients would have to be summed over the copies)
        raise ConfigError(f"moe_redundant_experts = {redundant}: redundant expert copies are a serving layout "
                          f"(expert-parallel load balancing in serve()); training places each expert once; valid: 0, "
                          f"or leave it out")
    opts = _options(analysis, kw)
    dtype = analysis.dtype_config
    if dtype.weight_bits < dtype.activation_bits and opts.get("lora") is None:
        # weight-only quantised formats (AWQ, GPTQ, w8a16) are inference formats: training updates high-precision
        # weights; frozen quantised base weights with adapters are QLoRA (lora=)
        warn(logger, "%s stores %g-bit weights beside %g-bit activations, a weight-only inference format: full-"
                     "parameter training updates 16-bit weights (fp32 master copies); these figures time and hold "
                     "%g-bit weights. For QLoRA (frozen quantised weights, trained adapters) give lora=LoRAConfig(...)",
                     dtype.name, dtype.weight_bits, dtype.activation_bits, dtype.weight_bits)
    lora = opts.get("lora")
    if lora is not None and dtype.weight_bits < 16 and dtype.weight_bits != lora.base_weight_bits:  # (quantised)
        # LoRA / QLoRA hold the frozen base as LoRAConfig.base_weight_bits says, whatever the dtype's weight width:
        # PEFT has no LoRA layer over fp8 linears (an fp8 checkpoint loads dequantised to 16 bits, and
        # TransformerEngine's fp8 recipe keeps 16-bit weights, casting per GEMM), while its AWQ / GPTQ layers keep
        # the checkpoint's packed 4-bit weights: QLoRA's NF4 (base_weight_bits=4) is the width closest to those
        held = ("16 bits" if lora.base_weight_bits == 16
                else f"{lora.base_bytes_per_param * 8:.3f} bits (QLoRA NF4)")
        warn(logger, "lora with %s: the frozen base weights are held at %s (lora base_weight_bits = %d), not the "
                     "dtype's %g bits; choose the base's width with base_weight_bits: 16 (LoRA over 16-bit weights, "
                     "as PEFT and TransformerEngine hold an fp8 model) or 4 (QLoRA NF4, the nearest to PEFT's LoRA "
                     "over a 4-bit AWQ / GPTQ checkpoint)", dtype.name, held, lora.base_weight_bits, dtype.weight_bits)
    if trains_integer_gemms(dtype) and opts.get("lora") is None:
        # int8 (W8A8) GEMMs forward and backward: no mainstream framework trains so; timed as fp8's recipe
        # (cost/calibrated.py trains_integer_gemms), so that int8 is no faster than fp8 where the peaks are equal
        warn(logger, "%s trains with integer GEMMs (%g-bit integer weights and %g-bit integer activations) "
                     "forward and backward, which no mainstream framework does (Megatron-LM, TransformerEngine "
                     "and DeepSpeed train in bf16 or fp8): these figures assume fp8 training's recipe on the "
                     "integer tensor cores: weights held in %g bits beside the fp32 master copy, every GEMM operand "
                     "quantised per tensor in a kernel of its own (latency_per_iter_fp8_casts) and, under the "
                     "calibrated model, the GEMMs at the profile's fp8 plateau; for a recipe that exists, train "
                     "with bf16 or fp8", dtype.name, dtype.weight_bits, dtype.activation_bits, dtype.weight_bits)
    seq_len = _check_seq_len(analysis, kw["seq_len"])
    check_cp_seq_len(analysis.parallelism_config.cp_size, seq_len)
    return TrainingRequest(
        seq_len=seq_len,
        batch_size=optional_positive_int(kw["batch_size_per_gpu"], "batch_size_per_gpu"),
        accumulation_steps=optional_positive_int(kw["gradient_accumulation_steps"], "gradient_accumulation_steps"),
        global_batch_size=optional_positive_int(kw["global_batch_size"], "global_batch_size"),
        total_num_tokens=_number_or_none(kw["total_num_tokens"], positive_number, "total_num_tokens",
                                         "a positive number of tokens", MAX_TOTAL_TOKENS),
        cost_per_gpu_hour=_number_or_none(kw["cost_per_gpu_hour"], non_negative_number, "cost_per_gpu_hour",
                                          MAX_COST_PER_GPU_HOUR),
        **opts)
