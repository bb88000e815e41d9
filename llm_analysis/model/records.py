"""Records of the operator description: phases, operators, layer kinds and
conventions (see `llm_analysis.model` for the conventions in full)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Dict, List, NamedTuple, Optional, Tuple

from llm_analysis.config import ModelConfig
from llm_analysis.errors import ConfigError
from llm_analysis.schema.model import MIXER_LAYER_TYPES
from llm_analysis.schema.options import ActivationRecomputation


@dataclass(frozen=True)
class Phase:
    """What one forward pass processes.

    `q_len` new tokens per sequence attend to `kv_len` tokens (including
    themselves). Prefill: q_len = kv_len = prompt length. Decode step at context
    c: q_len = 1, kv_len = c.
    """

    name: str  # "prefill" | "decode" | "train"
    batch: int
    q_len: int
    kv_len: int
    # a phase asked only for shapes (parameter and weight views): operators whose work
    # depends on an input the analysis was not given (the encoder length of
    # cross-attention) describe their weights and no work instead of refusing
    shapes_only: bool = False

    @property
    def tokens(self) -> int:
        return self.batch * self.q_len

    @property
    def past_len(self) -> int:
        return self.kv_len - self.q_len


@dataclass(slots=True)  # not frozen: frozen dataclasses are ~2x slower to build
class Operator:
    """One operator of one layer (or of the embedding / head), for one phase.

    Whole-model quantities (`params`, `flops`) are unsharded; `*_per_gpu`
    quantities are what one GPU holds or does under the parallel layout.
    """

    name: str
    group: str  # attention | mlp | experts | router | norm | embedding | lm_head | communication
    kind: str  # matmul | attention | norm | elementwise | embedding | collective
    params: int = 0
    params_per_gpu: float = 0.0
    weight_bytes_per_gpu: float = 0.0
    flops: float = 0.0  # what the counting convention counts (`Conventions`), whole model
    # what one GPU's kernels execute: for the attention core of a causal decoder the flash
    # kernel's work (the unmasked triangle, or the window), whatever `flops` counts
    flops_per_gpu: float = 0.0
    # of `flops`, what the convention counts but no kernel executes (the masked half of the
    # score matrix an eager "full" count includes); whole model, like `flops`
    masked_flops: float = 0.0
    bytes_read_per_gpu: float = 0.0  # weights + activations + cache read
    bytes_written_per_gpu: float = 0.0
    kv_cache_bytes_read_per_gpu: float = 0.0
    # weights read but held by another operator (a tied LM head reads the input
    # embedding's matrix): moved bytes, neither weight memory nor activations
    shared_weight_bytes_read_per_gpu: float = 0.0
    collective: Optional[str] = None  # all_reduce | all_gather | reduce_scatter | all_to_all
    comm_bytes_per_gpu: float = 0.0  # message size each GPU contributes
    comm_group_size: int = 1
    comm_group: str = ""  # tp | cp | ep | pp | dp
    # collectives only: kernel work the collective runs under (ring attention's next K/V
    # block travels while the current block's attention runs); only the excess is exposed
    overlap_flops_per_gpu: float = 0.0
    overlap_bytes_per_gpu: float = 0.0
    shapes: str = ""  # human-readable shape, e.g. "[4096x4096] x 512 tokens"
    # matmuls only: the weight's shape [in_features x out_features] (one copy), for LoRA adapters
    in_features: int = 0
    out_features: int = 0
    # the kernel's shape on one GPU, for cost models that time by shape (cost/calibrated.py):
    # matmuls (M tokens, N outputs, K inputs) of one copy; the attention core (q_len,); else ()
    kernel_dims: Tuple[int, ...] = ()
    # a matmul fusing sibling projections (serving conventions: q, k, v or gate, up): each one's N on
    # one GPU, in order (their sum is kernel_dims' N); () for any other operator
    fused_widths: Tuple[int, ...] = ()
    # roles, set by the describer (never parsed from `name`):
    expert_role: Optional[str] = None  # "routed" (top-k of E, sharded over EP) | "shared" | None
    # of `params`, those one token's forward uses, where the describer knows it to be fewer than a
    # routed expert's top-k share of E (quantities/params.py): LongCat's routed experts
    # (k·E/(E+Z) of E run per token) and their never-read zero-expert weights (0), JetMoE's attention
    # experts (top-k of attn_experts); None: all of `params`, or top-k of E for a routed expert
    active_params: Optional[float] = None
    # the least ActivationRecomputation mode that repeats this layer operator in backward:
    # ATTN_COMPUTE the attention core, ATTN the attention block with the norm before it and
    # its TP collective, NORM_ATTN_NORM also the norm before the MLP, FULL everything else
    recompute_class: ActivationRecomputation = ActivationRecomputation.FULL
    lora_target: str = ""  # projection id LoRA target_modules match (q_proj, up_proj, ...)

    @property
    def bytes_per_gpu(self) -> float:
        return self.bytes_read_per_gpu + self.bytes_written_per_gpu

    @property
    def activation_bytes_per_gpu(self) -> float:
        """Activations the operator reads and writes (its live set), without
        weights and KV-cache reads; 0 for collectives."""
        if self.kind == "collective":
            return 0.0
        return (self.bytes_per_gpu - self.weight_bytes_per_gpu - self.shared_weight_bytes_read_per_gpu
                - self.kv_cache_bytes_read_per_gpu)

    @property
    def is_routed_expert(self) -> bool:
        return self.expert_role == "routed"

    def recomputed_under(self, mode: ActivationRecomputation) -> bool:
        """Whether this layer operator's forward is repeated in backward under `mode`."""
        return mode != ActivationRecomputation.NONE and mode.value >= self.recompute_class.value

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte moved (0 for collectives and pure data movement)."""
        b = self.bytes_per_gpu
        return self.flops_per_gpu / b if b else 0.0

    def scaled(self, factor: float) -> "Operator":
        """The same operator repeated `factor` times (e.g. over layers)."""
        return replace(
            self,
            params=int(self.params * factor),
            active_params=None if self.active_params is None else self.active_params * factor,
            params_per_gpu=self.params_per_gpu * factor,
            weight_bytes_per_gpu=self.weight_bytes_per_gpu * factor,
            flops=self.flops * factor,
            flops_per_gpu=self.flops_per_gpu * factor,
            masked_flops=self.masked_flops * factor,
            bytes_read_per_gpu=self.bytes_read_per_gpu * factor,
            bytes_written_per_gpu=self.bytes_written_per_gpu * factor,
            kv_cache_bytes_read_per_gpu=self.kv_cache_bytes_read_per_gpu * factor,
            shared_weight_bytes_read_per_gpu=self.shared_weight_bytes_read_per_gpu * factor,
            comm_bytes_per_gpu=self.comm_bytes_per_gpu * factor,
            overlap_flops_per_gpu=self.overlap_flops_per_gpu * factor,
            overlap_bytes_per_gpu=self.overlap_bytes_per_gpu * factor,
        )


class ModelPart(NamedTuple):
    """The embedding, one kind of layer (repeated), or the head."""

    label: str
    is_layer: bool
    repeat: int
    ops: List["Operator"]


@dataclass(frozen=True)
class LayerKind:
    """Layers that share one description: dense or MoE MLP, full or sliding attention
    or a mixer (operators/mixers.py)."""

    moe: bool
    attention: str  # "full_attention" | "sliding_attention" | a mixer (MIXER_LAYER_TYPES) | "mlp"
    # keyword-only, so subclasses' positional fields keep their places (exact/tree_describer.py)
    head_dim: Optional[int] = field(default=None, kw_only=True)  # ModelConfig.layer_head_dims
    ffn_dim: Optional[int] = field(default=None, kw_only=True)  # ModelConfig.layer_ffn_dims
    kv_shared: bool = field(default=False, kw_only=True)  # reuses keys/values (kv_shared_layers)
    kv_heads: Optional[int] = field(default=None, kw_only=True)  # ModelConfig.layer_kv_heads
    sinks: bool = field(default=False, kw_only=True)  # ModelConfig.layer_attn_sinks
    # attends with an earlier layer's top-k selection, holding no indexer (ModelConfig.layer_indexer)
    reuses_topk: bool = field(default=False, kw_only=True)
    values_from_keys: bool = field(default=False, kw_only=True)  # ModelConfig.layer_values_from_keys

    @property
    def is_mixer(self) -> bool:
        return self.attention in MIXER_LAYER_TYPES

    @property
    def attends(self) -> bool:
        """Whether the layer's sequence mixer is attention (full or sliding)."""
        return self.attention in ("full_attention", "sliding_attention")

    @property
    def label(self) -> str:
        mixer = self.attention if self.is_mixer else self.attention.split('_')[0]
        widths = "".join(f"/{n}{v}" for n, v in (("d", self.head_dim), ("ffn", self.ffn_dim)) if v)
        widths += "/kv-shared" if self.kv_shared else ""
        widths += f"/kv{self.kv_heads}" if self.kv_heads else ""
        widths += "/sinks" if self.sinks else ""
        widths += "/shared-topk" if self.reuses_topk else ""
        widths += "/k=v" if self.values_from_keys else ""
        return f"{'moe' if self.moe else 'dense'}/{mixer}{widths}"


@dataclass(frozen=True)
class Conventions:
    """What the counted forward computes. Two named sets (stated in the README):
    "transformers", the eager forward that `FlopCounterMode` measures (whole score
    matrix, logits at every position, MLA re-expanded every decode step), and
    "serving", what vLLM / SGLang / TensorRT-LLM run (causal flash-attention FLOPs,
    logits only where a token is sampled, MLA absorbed in decode, sibling projections
    fused; the paged KV cache holds exactly the context's tokens, as the eager
    DynamicCache does)."""

    attention_flops: str = "full"  # "full" | "causal"
    logits: str = "all"  # "all" | "last"
    mla: str = "expand"  # "expand" | "absorb" (decode of multi-head latent attention)
    # "separate": q, k, v and gate, up are separate linears (transformers' modules, what
    # FlopCounterMode sees); "fused": the projections that read the same input run as one
    # GEMM (vLLM's QKVParallelLinear / MergedColumnParallelLinear, SGLang's, TensorRT-LLM's
    # fused QKV and gate_up; DeepSeek's fused_qkv_a_proj). The same parameters and FLOPs.
    projections: str = "separate"

    @classmethod
    def named(cls, name: str, **overrides: Optional[str]) -> "Conventions":
        """The named set, with any non-None field of `overrides` replacing its value."""
        if name not in NAMED_CONVENTIONS:
            raise ConfigError(f"conventions = {name!r}; valid: {', '.join(map(repr, NAMED_CONVENTIONS))}")
        fields = {k: v for k, v in overrides.items() if v is not None}
        return cls(**{**NAMED_CONVENTIONS[name], **fields})

    def __post_init__(self):
        if self.attention_flops not in ("full", "causal"):
            raise ConfigError(f"attention_flops = {self.attention_flops!r}; valid: 'full', 'causal'")
        if self.logits not in ("all", "last"):
            raise ConfigError(f"logits = {self.logits!r}; valid: 'all', 'last'")
        if self.mla not in ("expand", "absorb"):
            raise ConfigError(f"mla_attention = {self.mla!r}; valid: 'expand', 'absorb'")
        if self.projections not in ("separate", "fused"):
            raise ConfigError(f"projections = {self.projections!r}; valid: 'separate', 'fused'")


NAMED_CONVENTIONS = {
    "serving": dict(attention_flops="causal", logits="last", mla="absorb", projections="fused"),
    "transformers": dict(attention_flops="full", logits="all", mla="expand", projections="separate"),
}


def layer_kinds(model: ModelConfig) -> List[LayerKind]:
    """The kind of every layer, in order (O(num_layers): for inspection and tests; the
    analysis counts kinds with `layer_groups`, which does not walk every layer)."""
    return [_kind(model, i) for i in range(model.num_layers)]


def _kind(model: ModelConfig, i: int) -> LayerKind:
    heads, ffns, kvs, sinks = model.layer_head_dims, model.layer_ffn_dims, model.layer_kv_heads, model.layer_attn_sinks
    values_from_keys = model.layer_values_from_keys
    return LayerKind(model.is_moe_layer(i), model.layer_attention_type(i),
                     head_dim=heads[i] if heads is not None else None,
                     ffn_dim=ffns[i] if ffns is not None else None,
                     kv_shared=0 < model.kv_shared_layers and i >= model.num_layers - model.kv_shared_layers,
                     kv_heads=kvs[i] if kvs is not None else None,
                     sinks=bool(sinks[i]) if sinks is not None else False,
                     reuses_topk=model.has_indexer and not model.layer_has_indexer(i),
                     values_from_keys=bool(values_from_keys[i]) if values_from_keys is not None else False)


def _min_period(seq: List[str]) -> int:
    """Smallest p with seq[i] == seq[i + p] for every i (len(seq) when none is shorter).
    Each candidate is one C-level list comparison that stops at the first mismatch."""
    n = len(seq)
    return next((p for p in range(1, n) if seq[p:] == seq[:n - p]), max(n, 1))


def _periods(model: ModelConfig) -> Tuple[int, int, int]:
    """(start, period before start, period from start on) of the layer kind: layer
    i >= start has the kind of layer i + period. Before `start` (the first-k-dense
    layers of an MoE) the kind repeats with the attention pattern's period alone."""
    att = 1
    for per_layer in (model.layer_types, model.layer_head_dims, model.layer_ffn_dims, model.layer_kv_heads,
                      model.layer_attn_sinks, model.layer_indexer, model.layer_values_from_keys):
        if per_layer is not None:  # the kind repeats with every per-layer list's period
            att = math.lcm(att, _min_period(list(per_layer)))
    if not model.is_moe:
        return 0, att, att
    return model.moe_first_dense_layers, att, math.lcm(att, model.moe_layer_freq)


def _count_range(model: ModelConfig, a: int, b: int, period: int, into: Dict[LayerKind, int]) -> None:
    """Add the kinds of layers a..b-1 (kind periodic with `period` there) to `into`,
    walking at most one period: same counts and first-appearance order as a full walk."""
    n = b - a
    if n <= 0:
        return
    cycle: Dict[LayerKind, int] = {}
    for i in range(a, a + min(n, period)):
        k = _kind(model, i)
        cycle[k] = cycle.get(k, 0) + 1
    full, rest = divmod(n, period) if n > period else (1, 0)
    tail: Dict[LayerKind, int] = {}
    for i in range(a, a + rest):  # the remainder repeats the cycle's first layers
        k = _kind(model, i)
        tail[k] = tail.get(k, 0) + 1
    for k, c in cycle.items():
        into[k] = into.get(k, 0) + full * c + tail.get(k, 0)


def _count(kinds: List[LayerKind]) -> Dict[LayerKind, int]:
    groups: Dict[LayerKind, int] = {}
    for k in kinds:
        groups[k] = groups.get(k, 0) + 1
    return groups


def _overridden(model: ModelConfig) -> bool:
    cls = type(model)
    return (cls.is_moe_layer is not ModelConfig.is_moe_layer
            or cls.layer_attention_type is not ModelConfig.layer_attention_type)


def _range_groups(model: ModelConfig, a: int, b: int) -> Dict[LayerKind, int]:
    """How many layers of each kind layers a..b-1 hold (insertion-ordered as listed),
    in O(period) rather than O(b - a)."""
    if _overridden(model):  # a subclass decides kinds its own way: ask it for every layer
        return _count([_kind(model, i) for i in range(a, b)])
    shared_from = model.num_layers - model.kv_shared_layers
    if model.kv_shared_layers and a < shared_from < b:  # periodic on each side of the boundary
        groups = _range_groups(model, a, shared_from)
        for k, n in _range_groups(model, shared_from, b).items():
            groups[k] = groups.get(k, 0) + n
        return groups
    start, dense_period, period = _periods(model)
    groups: Dict[LayerKind, int] = {}
    _count_range(model, a, min(b, start), dense_period, groups)
    _count_range(model, max(a, start), b, period, groups)
    return groups


def layer_groups(model: ModelConfig) -> Dict[LayerKind, int]:
    """How many layers of each kind the model has (insertion-ordered)."""
    return _range_groups(model, 0, model.num_layers)


def stage_layer_groups(model: ModelConfig, pp_size: int,
                       layer_counts: Optional[List[int]] = None) -> List[Dict[LayerKind, int]]:
    """Layers assigned to pipeline stages contiguously: `layer_counts[s]` to stage s
    (operators/pipeline_layout.py), by default evenly with earlier stages taking the
    remainder (as Megatron does when layers do not divide evenly)."""
    if layer_counts is None:
        base, extra = divmod(model.num_layers, pp_size)
        layer_counts = [base + (1 if s < extra else 0) for s in range(pp_size)]
    stages, start = [], 0
    for n in layer_counts:
        stages.append(_range_groups(model, start, start + n))
        start += n
    return stages


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def causal_pairs(q_len: int, past_len: int, window: Optional[int]) -> int:
    """Number of (query, key) pairs a causal (sliding-window) attention computes:
    query i (0-based, at absolute position past+i) sees min(past+i+1, window) keys."""
    first = past_len + 1
    last = past_len + q_len
    if window is None or window >= last:
        return (first + last) * q_len // 2
    if window <= first:
        return window * q_len
    # positions first..window-1 grow, window..last are clipped
    grow = (first + window - 1) * (window - first) // 2
    return grow + window * (last - window + 1)


def chunked_pairs(q_len: int, past_len: int, chunk: int) -> int:
    """(query, key) pairs of chunked local attention (Llama 4's attention_chunk_size C):
    the query at position p (0-based) sees the p mod C + 1 keys of its own chunk."""
    def prefix(n: int) -> int:  # pairs of positions 0 .. n-1
        full, rest = divmod(n, chunk)
        return full * chunk * (chunk + 1) // 2 + rest * (rest + 1) // 2
    return prefix(past_len + q_len) - prefix(past_len)


def sum_field(ops: List[Operator], attr: str, groups: Optional[Tuple[str, ...]] = None,
              kinds: Optional[Tuple[str, ...]] = None) -> float:
    return sum(getattr(o, attr) for o in ops
               if (groups is None or o.group in groups) and (kinds is None or o.kind in kinds))
