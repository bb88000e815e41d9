"""`LayerDescriber`: builds the operator records of a model under a dtype and
parallel layout (see `llm_analysis.model` for the conventions)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Dict, List, Optional, Tuple

from llm_analysis.config import DtypeConfig, ModelConfig, ParallelismConfig
from llm_analysis.errors import ConfigError
from llm_analysis.schema.options import ActivationRecomputation
from llm_analysis.model.attention import AttentionOps
from llm_analysis.model.checkpoint_weights import (UNCONVERTED_WEIGHT_BYTES, layer_weight_bytes_per_param,
                                                   only_routed_experts_low_bit)
from llm_analysis.model.cross_attention import CrossAttentionOps, check_encoder_seq_len
from llm_analysis.model.dense_variants import DenseVariantOps
from llm_analysis.model.context_parallel import CP_PHASES, check_context_parallel, context_parallel_layer, local_op
from llm_analysis.model.entity_inputs import entity_attention_ops, entity_embedding_ops
from llm_analysis.model.encoder_parts import (adapter_ops, extra_table_ops, has_variant_layers, head_transform_ops,
                            variant_layer_groups, without_params)
from llm_analysis.model.mixers import MixerOps, check_mixer_layout
from llm_analysis.model.mlp import MlpOps
from llm_analysis.model.pipeline_layout import stage_layer_counts
from llm_analysis.model.relative_attention import relative_attention_ops, relative_table_ops
from llm_analysis.model.variants import check_variant_layout
from llm_analysis.model.vision_tower import check_image_tokens, vision_parts
from llm_analysis.model.records import (Conventions, LayerKind, ModelPart, Operator, Phase, ceil_div, layer_groups,
                      stage_layer_groups)


_MISSING = object()


class IdentityKey:
    """A cache-key part that compares by identity (a cost model, an analysis) and
    keeps its object alive, so its id cannot be reused while the entry exists."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, IdentityKey) and other.obj is self.obj


class _Token:
    """A cache-key part hashed and compared by its own identity (in C, no Python call): one
    per object (`identity_token`), keeping the object alive as IdentityKey does."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj


def identity_token(obj):
    """A cache-key part standing for `obj` by identity, made once and kept in its __dict__ (a
    hot path hashes it at every probe); a copy of the object, which copies that entry, gets its
    own. Objects without a __dict__ get an IdentityKey."""
    attrs = getattr(obj, "__dict__", None)
    if attrs is None:
        return IdentityKey(obj)
    token = attrs.get("_identity_token")
    if token is None or token.obj is not obj:
        token = attrs["_identity_token"] = _Token(obj)
    return token


def _attention_dp_hint(model, gpus: int) -> str:
    """For a model with experts, how a serving worker of `gpus` GPUs whose tensor parallelism cannot split the
    heads is written here: TensorRT-LLM's --tp_size and SGLang's --tp-size count all of a worker's GPUs, and
    with attention data parallelism each GPU runs its own attention replica (serving/layout.py)."""
    if not model.is_moe:
        return ""
    copies = -model.moe_num_experts % gpus
    extra = f", moe_redundant_experts={copies}" if copies else ""
    return (f"; a serving worker of {gpus} GPUs with attention data parallelism (TensorRT-LLM --tp_size {gpus} with "
            f"enable_attention_dp, SGLang --tp-size {gpus} --dp-size {gpus} --enable-dp-attention) is "
            f"ParallelismConfig(tp_size=1, attention_dp_size={gpus}, moe_ep_size={gpus}{extra})")


class LayerDescriber(AttentionOps, CrossAttentionOps, MixerOps, MlpOps, DenseVariantOps):
    """Builds the operator records of a model under a dtype and parallel layout.

    Subclass and override `attention_ops`, `mlp_ops`, `norm_ops`,
    `embedding_ops` or `head_ops` to describe a custom architecture; everything
    in `LLMAnalysis` (params, FLOPs, memory, latency) follows.

    A describer's configuration is fixed once built: the operator lists of a
    phase, and what the views derive from them, are cached per phase shape
    (`phase_memo`, bounded) and shared between callers, who must not mutate them.
    """

    def __init__(self, model: ModelConfig, dtype: DtypeConfig, par: ParallelismConfig,
                 conventions: Conventions = Conventions(),
                 kv_cache_dtype_bytes: Optional[float] = None, encoder_seq_len: Optional[int] = None):
        self.model = model
        self.encoder_seq_len = check_encoder_seq_len(model, encoder_seq_len)
        self.dtype = dtype
        self.par = par
        self.conv = conventions
        # the routed experts' matrices at the dtype's weight width; every other weight at it too, unless the
        # checkpoint stores only the experts in the dtype's low-bit format (gpt-oss: model/checkpoint_weights.py)
        self.expert_w_bytes = dtype.weight_bytes_per_param
        self.w_bytes = layer_weight_bytes_per_param(model, dtype)
        self.a_bytes = dtype.activation_bytes_per_element
        self.e_bytes = dtype.embedding_bits / 8
        # the KV cache at the activation width unless given; a checkpoint whose experts alone are low-bit runs its
        # attention in 16 bits (gpt-oss W4A8: the engines quantise only the MoE's input), so its cache is 16-bit
        self.kv_bytes = kv_cache_dtype_bytes if kv_cache_dtype_bytes is not None else (
            max(self.a_bytes, UNCONVERTED_WEIGHT_BYTES) if only_routed_experts_low_bit(model, dtype) else self.a_bytes)
        self._check_layout()
        check_context_parallel(self)
        self.check_cross_attention_layout()
        check_variant_layout(self)
        check_mixer_layout(self)
        # layer layout never changes for a describer: compute it once (speed)
        self.layer_groups = layer_groups(model)
        self.stage_groups = stage_layer_groups(model, par.pp_size, stage_layer_counts(model, par))
        if has_variant_layers(model):  # shared layers (ALBERT), a first layer apart: encoder_parts.py
            self.layer_groups = variant_layer_groups(model)[0]
            self.stage_groups = variant_layer_groups(model, stage_layer_counts(model, par))
        self._cache: Dict[object, object] = {}
        # per-phase results (operator lists, and what views derive from them): keyed by
        # everything they depend on besides this describer's fixed configuration, bounded
        self._phase_cache: Dict[object, object] = OrderedDict()

    def memoized(self, key, compute):
        """`compute()` once per describer (its configuration never changes)."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def kept(self, key):
        """The value `keep` stored under `key`, else None (for values their producer decides
        when to keep: once they exist, say)."""
        return self._cache.get(key)

    def keep(self, key, value):
        """Keep `value` under `key` for this describer's lifetime (its configuration never changes)."""
        self._cache[key] = value
        return value

    # image tokens per request a prefill runs through the vision tower (model/vision_tower.py);
    # None: no image input (the tower's weights count, it does no work)
    image_tokens: Optional[int] = None

    def with_image_tokens(self, image_tokens: Optional[int]) -> "LayerDescriber":
        """This describer with `image_tokens` image tokens per request in a prefill (None or 0:
        none; ConfigError for a model without a vision tower); built once and kept."""
        n = check_image_tokens(self.model, image_tokens)
        if n == self.image_tokens:
            return self
        return self.memoized(("image_tokens", n), lambda: self._carried(type(self)(
            self.model, self.dtype, self.par, self.conv, kv_cache_dtype_bytes=self.kv_bytes,
            **({} if self.encoder_seq_len is None else {"encoder_seq_len": self.encoder_seq_len})), image_tokens=n))

    def _carried(self, other: "LayerDescriber", image_tokens=_MISSING) -> "LayerDescriber":
        """`other` (a describer built from this one's inputs) with this one's image input."""
        other.image_tokens = self.image_tokens if image_tokens is _MISSING else image_tokens
        return other

    PHASE_CACHE_SIZE = 256  # entries; a sweep over shapes keeps memory bounded

    def phase_memo(self, key, compute):
        """`compute()` once per `key` while cached. The key must hold every input of
        `compute` that is not fixed with the describer (phase shape, cost model,
        options); results are shared between callers, who must not mutate them."""
        cache = self._phase_cache
        try:
            value = cache.get(key, _MISSING)  # no KeyError raised on a miss: new shapes are the common case
        except TypeError:  # an unhashable argument (validation then reports it): no caching
            return compute()
        if value is not _MISSING:
            return value
        value = compute()
        if len(cache) >= self.PHASE_CACHE_SIZE:
            cache.popitem(last=False)  # the oldest entry (first in, first out), O(1)
        cache[key] = value
        return value

    def with_kv_cache_bytes(self, kv_cache_dtype_bytes: Optional[float]) -> "LayerDescriber":
        """This describer with the KV cache stored in `kv_cache_dtype_bytes` bytes per
        element (None: as is); built once and kept, with its caches, alongside this one."""
        if kv_cache_dtype_bytes is None or kv_cache_dtype_bytes == self.kv_bytes:
            return self
        # the encoder length passed on only when set (subclasses predating it need not accept it)
        extra = {} if self.encoder_seq_len is None else {"encoder_seq_len": self.encoder_seq_len}
        return self.memoized(("kv_cache_bytes", kv_cache_dtype_bytes), lambda: self._carried(type(self)(
            self.model, self.dtype, self.par, self.conv, kv_cache_dtype_bytes=kv_cache_dtype_bytes, **extra)))

    def with_encoder_seq_len(self, encoder_seq_len: Optional[int]) -> "LayerDescriber":
        """This describer with cross-attention over `encoder_seq_len` encoder positions
        (None: as is; operators/cross_attention.py); built once and kept."""
        n = check_encoder_seq_len(self.model, encoder_seq_len)
        if n is None or n == self.encoder_seq_len or not self.model.cross_attention:
            return self
        return self.memoized(("encoder_seq_len", n), lambda: self._carried(type(self)(
            self.model, self.dtype, self.par, self.conv, kv_cache_dtype_bytes=self.kv_bytes, encoder_seq_len=n)))

    def cost_memo(self, cost_model, key: tuple, compute):
        """`phase_memo` of a result that also depends on the cost model (times)."""
        return self.phase_memo((identity_token(cost_model),) + key, compute)

    def cost_kept(self, cost_model, key: tuple, compute):
        """`memoized` of a long-lived object built from this describer and a cost model (serve()'s step costs,
        which keep what they time): kept beside the describer, not in the bounded per-shape cache, whose
        entries the shapes it times would push it out of (a short-request serve() rebuilt its step costs,
        and their saturation rate, at 86 of 100 calls)."""
        return self.memoized((identity_token(cost_model),) + key, compute)

    # ------------------------------------------------------------------ layout
    def _check_layout(self) -> None:
        m = self.model
        if m.has_attention:
            self._check_attention_layout()
        self._check_widths()

    def _check_attention_layout(self) -> None:
        m, p = self.model, self.par
        if m.n_head % p.tp_size:
            raise ConfigError(
                f"tp_size = {p.tp_size} must divide n_head = {m.n_head} of {m.name}; valid tp_size: "
                f"{[d for d in range(1, m.n_head + 1) if m.n_head % d == 0]}{_attention_dp_hint(m, p.tp_size)}")
        for kv in sorted({m.num_key_value_heads, *(m.layer_kv_heads or ())}):  # layer_kv_heads: per layer
            if kv % p.tp_size and p.tp_size % kv:
                raise ConfigError(
                    f"tp_size = {p.tp_size} and num_key_value_heads = {kv} of {m.name}: one must divide "
                    "the other (KV heads are split, or replicated when fewer than tp_size)")

    def _check_widths(self) -> None:
        m, p = self.model, self.par
        if p.pp_size > m.num_layers:
            raise ConfigError(f"pp_size = {p.pp_size} exceeds num_layers = {m.num_layers} of {m.name}; "
                              f"valid pp_size: 1..{m.num_layers}")
        widths = {"ffn_embed_dim": m.ffn_embed_dim} if m.has_mlp_layers else {}
        widths.update((f"layer_ffn_dims entry {w}", w) for w in sorted(set(m.layer_ffn_dims or ())))
        if m.is_moe:
            widths["moe_ffn_embed_dim"] = m.expert_ffn_dim
            if m.moe_num_shared_experts:
                widths["moe_shared_expert_ffn_dim"] = m.shared_expert_ffn_dim
        for f, width in widths.items():
            if width % p.tp_size:
                valid = [d for d in range(1, m.n_head + 1) if m.n_head % d == 0 and width % d == 0]
                raise ConfigError(
                    f"tp_size = {p.tp_size} must divide {f} = {width} of {m.name} (the MLP is split over "
                    f"TP by columns); valid tp_size: {valid}")
        if m.is_moe and (m.moe_num_experts + self.redundant_experts) % p.ep_size:
            copies = f" + moe_redundant_experts = {self.redundant_experts}" if self.redundant_experts else ""
            raise ConfigError(f"ep_size = {p.ep_size} must divide moe_num_experts = {m.moe_num_experts}{copies}")
        if m.is_moe and self.redundant_experts > m.moe_num_experts * (p.ep_size - 1):
            # more copies than the other ranks have room for without holding an expert twice
            raise ConfigError(f"moe_redundant_experts = {self.redundant_experts} puts an expert twice on one of the "
                              f"ep_size = {p.ep_size} ranks; valid: at most {m.moe_num_experts * (p.ep_size - 1)}")
        if p.ep_size > 1 and p.dp_size % p.ep_size:
            raise ConfigError(
                f"ep_size = {p.ep_size} must divide dp_size = {p.dp_size}: experts are sharded over data-parallel "
                f"ranks (each with its own batch); use dp_size = {p.ep_size} or a multiple of it (to spread the "
                f"experts over the GPUs of one serving worker instead: serve() with moe_ep_size)")
        if not m.is_moe and p.ep_size > 1:
            raise ConfigError(f"ep_size = {p.ep_size} but {m.name} has no experts; use ep_size=1")

    @property
    def tp(self) -> int:
        return self.par.tp_size

    @property
    def redundant_experts(self) -> int:
        """Redundant copies of routed experts spread with them over the ep_size expert-parallel ranks (a
        serving worker's load balancing, ParallelismConfig.moe_redundant_experts; serving/layout.py
        passes it to the experts' own analysis); none without expert parallelism."""
        return (self.par.moe_redundant_experts or 0) if self.par.ep_size > 1 else 0

    @property
    def kv_heads_per_gpu(self) -> int:
        """KV heads are split over TP; when fewer than tp_size each GPU keeps one
        (replicated), as Megatron and vLLM do."""
        return max(self.model.num_key_value_heads // self.tp, 1)

    # --------------------------------------------------------------- builders
    def _matmul(self, name: str, group: str, phase: Phase, tokens: int, d_in: int, d_out: int,
                bias: bool, shard: int = 1, weight_bytes: Optional[float] = None,
                shard_input: bool = False, copies: int = 1, lora_target: Optional[str] = None,
                shard_copies: bool = False, bias_bytes: Optional[float] = None) -> Operator:
        """y[tokens, d_out] = x[tokens, d_in] @ W[d_in, d_out] (+ b), `copies` times.

        `shard` splits W over that many GPUs (column or row parallel); the input
        is sharded too when `shard_input` (row-parallel layers). `shard_copies`: `shard`
        splits the copies instead (one matrix per attention head, the heads over the GPUs):
        each GPU runs copies / shard whole matrices as one batched GEMM (torch.bmm over the
        heads), timed as one GEMM of tokens x copies / shard rows (its FLOPs, its tiles at
        M a multiple of the tile height). `lora_target`: the projection id LoRA matches
        (default: `name`). `bias_bytes`: the bias's bytes per parameter when they differ from the
        matrix's (a checkpoint that quantises the routed experts' matrices only keeps their biases in 16 bits).
        """
        wb = self.w_bytes if weight_bytes is None else weight_bytes
        params = (d_in * d_out + (d_out if bias else 0)) * copies
        params_gpu = params / shard
        bias_gpu = d_out * copies / shard
        if bias and shard_input:
            # row-parallel: the bias is added after the all-reduce, so every rank keeps all of it
            params_gpu = (d_in * d_out / shard + d_out) * copies
            bias_gpu = d_out * copies
        weight_bytes_gpu = params_gpu * wb
        if bias and bias_bytes is not None and bias_bytes != wb:
            weight_bytes_gpu = (params_gpu - bias_gpu) * wb + bias_gpu * bias_bytes
        flops = 2.0 * tokens * d_in * d_out * copies
        # a row-parallel layer's input is split over the GPUs, a column-parallel one's output; heads split
        # over the GPUs (`shard_copies`) split both: a GPU reads and writes its own heads' rows only
        in_elems = tokens * d_in * copies / (shard if shard_input or shard_copies else 1)
        out_elems = tokens * d_out * copies / (1 if shard_input and not shard_copies else shard)
        return Operator(
            name=name, group=group, kind="matmul", params=params, params_per_gpu=params_gpu,
            weight_bytes_per_gpu=weight_bytes_gpu, flops=flops, flops_per_gpu=flops / shard,
            bytes_read_per_gpu=weight_bytes_gpu + in_elems * self.a_bytes,
            bytes_written_per_gpu=out_elems * self.a_bytes,
            shapes=f"[{d_in}x{d_out}]{'x' + str(copies) if copies > 1 else ''} x {tokens} tokens",
            in_features=d_in, out_features=d_out, lora_target=name if lora_target is None else lora_target,
            kernel_dims=((int(tokens * copies / shard), d_out, d_in) if shard_copies else
                         (int(tokens), d_out if shard_input else int(-(-d_out // shard)),
                          int(-(-d_in // shard)) if shard_input else d_in)),
        )

    def _fused_projections(self, name: str, ops: List[Operator]) -> List[Operator]:
        """`ops` (column-parallel linears reading the same input) as one GEMM when the conventions
        fuse sibling projections (`Conventions.projections`), else unchanged. The fused GEMM holds
        their parameters and FLOPs, reads the input once and writes every output; its N is the sum
        of theirs (what one GPU computes), so a cost model times one kernel of that shape."""
        if self.conv.projections != "fused" or len(ops) < 2:
            return ops
        first = ops[0]
        input_bytes = first.bytes_read_per_gpu - first.weight_bytes_per_gpu
        weights = sum(op.weight_bytes_per_gpu for op in ops)
        m, _, k = first.kernel_dims
        return [Operator(
            name=name, group=first.group, kind="matmul", params=sum(op.params for op in ops),
            active_params=(None if all(op.active_params is None for op in ops) else
                           sum(op.params if op.active_params is None else op.active_params for op in ops)),
            params_per_gpu=sum(op.params_per_gpu for op in ops), weight_bytes_per_gpu=weights,
            flops=sum(op.flops for op in ops), flops_per_gpu=sum(op.flops_per_gpu for op in ops),
            bytes_read_per_gpu=weights + input_bytes,
            bytes_written_per_gpu=sum(op.bytes_written_per_gpu for op in ops),
            shapes=" + ".join(op.shapes for op in ops), in_features=first.in_features,
            out_features=sum(op.out_features for op in ops), lora_target=name,
            kernel_dims=(m, sum(op.kernel_dims[1] for op in ops), k),
            fused_widths=tuple(op.kernel_dims[1] for op in ops),
            expert_role=first.expert_role, recompute_class=first.recompute_class)]

    def _norm(self, name: str, group: str, tokens: int, dim: int, bias: Optional[bool] = None,
              copies: int = 1, recompute_class: ActivationRecomputation = ActivationRecomputation.FULL) -> Operator:
        affine = self.model.norm_affine or bias is not None  # q/k norms pass their bias
        bias = self.model.norm_bias if bias is None else bias
        params = dim * (2 if bias else 1) * copies if affine else 0
        elems = tokens * dim * copies
        return Operator(
            name=name, group=group, kind="norm", params=params, params_per_gpu=params,
            weight_bytes_per_gpu=params * self.w_bytes,
            bytes_read_per_gpu=elems * self.a_bytes + params * self.w_bytes,
            bytes_written_per_gpu=elems * self.a_bytes, shapes=f"[{dim}] x {tokens * copies}",
            recompute_class=recompute_class,
        )

    def _collective(self, name: str, kind: str, group: str, size: int, elems: float,
                    recompute_class: ActivationRecomputation = ActivationRecomputation.FULL,
                    bytes_per_element: Optional[float] = None) -> Operator:
        """A collective moving `elems` elements per GPU, each of `bytes_per_element` bytes (default: the
        activation width)."""
        width = self.a_bytes if bytes_per_element is None else bytes_per_element
        return Operator(name=name, group="communication", kind="collective", collective=kind,
                        comm_bytes_per_gpu=elems * width, comm_group_size=size,
                        comm_group=group, shapes=f"{elems:.0f} elements over {group}={size}",
                        recompute_class=recompute_class)

    # Public names of the builders, for subclasses describing custom layers.
    matmul_op = _matmul
    norm_op = _norm
    collective_op = _collective

    # ---------------------------------------------------------------- layers

    def norm_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        m = self.model
        # the first norm feeds attention (recomputed with it from ATTN on), the second
        # the MLP (recomputed from NORM_ATTN_NORM on); sandwich norms only under FULL
        classes = (ActivationRecomputation.ATTN, ActivationRecomputation.NORM_ATTN_NORM)
        first = 1 if getattr(kind, "first", False) else 0  # no norm before attention (ModernBERT's layer 0)
        return [self._norm(f"norm_{i + 1}", "norm", self.sequence_parallel_tokens(phase.tokens), m.hidden_dim,
                           recompute_class=classes[i] if i < len(classes) else ActivationRecomputation.FULL)
                for i in range(first, m.num_norms_per_layer)]

    def sequence_parallel_tokens(self, tokens: int) -> float:
        """The tokens one GPU normalises: with sequence parallelism (sp_size > 1, Megatron: sp = tp) the
        layer norms run between the reduce-scatter and the all-gather, on a 1/tp slice of the sequence
        (Korthikanti et al. 2022, arXiv 2205.05198 section 4.2.2); without it, every token on every GPU."""
        # (a share, not rounded: Megatron asks the sequence to divide by tp; a share keeps the phase tables exact)
        return tokens / self.tp if self.par.sp_size > 1 and self.tp > 1 else tokens

    def tp_comm_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        """Megatron TP: an all-reduce after attention and after the MLP (one when
        attention and MLP run in parallel and their partial sums are added first).
        With sequence parallelism each becomes reduce-scatter + all-gather."""
        if self.tp == 1:
            return []
        m = self.model
        elems = phase.tokens * m.hidden_dim
        n = 1 if m.parallel_attn_mlp or sum(self.layer_blocks(kind)) == 1 else 2
        ops = []
        for i in range(n):
            where = "layer" if n == 1 else ("attention" if i == 0 else "mlp")
            # the collective closing attention (or the whole parallel layer) is recomputed with attention
            rc = ActivationRecomputation.ATTN if i == 0 else ActivationRecomputation.FULL
            if self.par.sp_size > 1:
                ops.append(self._collective(f"tp_reduce_scatter_{where}", "reduce_scatter", "tp", self.tp, elems, rc))
                ops.append(self._collective(f"tp_all_gather_{where}", "all_gather", "tp", self.tp, elems, rc))
            else:
                ops.append(self._collective(f"tp_all_reduce_{where}", "all_reduce", "tp", self.tp, elems, rc))
        return ops

    def layer_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        """Every operator of one layer of this kind, in execution order (on one
        context-parallel rank's tokens when cp_size > 1: operators/context_parallel.py)."""
        has_mixer, has_mlp = self.layer_blocks(kind)
        mixer = (self.sequence_mixer_ops(phase, kind) + relative_attention_ops(self, phase)) if has_mixer else []
        mlp = self.mlp_ops(phase, kind) if has_mlp else []
        ops = (self.norm_ops(phase, kind) + mixer + self.cross_attention_ops(phase, kind) + mlp
               + adapter_ops(self, phase) + entity_attention_ops(self) + self.layer_extra_ops(phase, kind)
               + self.tp_comm_ops(phase, kind))
        if not getattr(kind, "owns_params", True):  # a shared layer run again
            ops = without_params(ops)
        if self.cp_sharded(phase):
            return context_parallel_layer(self, phase, kind, ops)
        return ops

    def cp_sharded(self, phase: Phase) -> bool:
        """Whether the phase's tokens are split over context-parallel ranks (training
        and prefill; decode steps are never, see inference/run.py)."""
        return self.par.cp_size > 1 and phase.name in CP_PHASES

    def _cp_local(self, phase: Phase, ops: List[Operator]) -> List[Operator]:
        return [local_op(o, self.par.cp_size) for o in ops] if self.cp_sharded(phase) else ops

    # ------------------------------------------------------- embedding / head
    def embedding_ops(self, phase: Phase) -> List[Operator]:
        m, t = self.model, phase.tokens
        d = m.word_embedding_dim
        rows = m.embedding_vocab_size or m.vocab_size
        vocab_gpu = ceil_div(rows, self.tp)
        ops = [Operator(name="word_embedding", group="embedding", kind="embedding",
                        params=rows * d, params_per_gpu=vocab_gpu * d,
                        weight_bytes_per_gpu=vocab_gpu * d * self.e_bytes,
                        bytes_read_per_gpu=t * d * self.e_bytes, bytes_written_per_gpu=t * d * self.a_bytes,
                        shapes=f"[{rows}x{d}] lookup x {t}")]
        # factorized (ELECTRA, ALBERT): positions, token types and the norm at embedding_dim
        e = d if m.factorized_embeddings else m.hidden_dim
        if m.position_embedding_type == "learned" and m.num_position_embeddings:
            n = m.num_position_embeddings
            ops.append(Operator(name="position_embedding", group="embedding", kind="embedding",
                                params=n * e, params_per_gpu=n * e, weight_bytes_per_gpu=n * e * self.e_bytes,
                                bytes_read_per_gpu=t * e * self.e_bytes,
                                bytes_written_per_gpu=t * e * self.a_bytes,
                                shapes=f"[{n}x{e}] lookup x {t}"))
        if m.type_vocab_size:
            n = m.type_vocab_size
            ops.append(Operator(name="token_type_embedding", group="embedding", kind="embedding",
                                params=n * e, params_per_gpu=n * e, weight_bytes_per_gpu=n * e * self.e_bytes,
                                bytes_read_per_gpu=t * e * self.e_bytes,
                                bytes_written_per_gpu=t * e * self.a_bytes))
        # set: the projection exists even at equal widths (ALBERT); RoC-BERT's reads word + shape + pronunciation
        d_in = m.embedding_proj_in_dim or d
        if d_in != m.hidden_dim or m.embedding_proj_in_dim is not None:
            ops.append(self._matmul("project_in", "embedding", phase, t, d_in, m.hidden_dim,
                                    m.embedding_proj_bias))
        ops += extra_table_ops(self, phase) + relative_table_ops(self, phase) + entity_embedding_ops(self)
        if m.embedding_norm:
            ops.append(self._norm("embedding_norm", "embedding", t, e))
        ops += self.embedding_extra_ops(phase)
        if self.tp > 1:  # vocab-parallel embedding: partial lookups summed
            ops.append(self._collective("tp_all_reduce_embedding", "all_reduce", "tp", self.tp, t * m.hidden_dim))
        return ops

    def logits_tokens(self, phase: Phase) -> int:
        if phase.name == "prefill" and self.conv.logits == "last":
            return phase.batch
        return phase.tokens

    def head_ops(self, phase: Phase, with_embedding: bool = True) -> List[Operator]:
        """Final norm, pooler or output projection (the LM head). `with_embedding`:
        the same GPU holds the input embedding (False on the last of several
        pipeline stages, which then stores its own copy of a tied weight)."""
        m = self.model
        ops: List[Operator] = self.head_extra_ops(phase)
        if m.final_norm:
            ops.append(self._norm("final_norm", "norm", self.sequence_parallel_tokens(phase.tokens), m.hidden_dim,
                                  bias=m.final_norm_bias))
        if m.pooler:
            ops.append(self._matmul("pooler", "lm_head", phase, phase.batch, m.hidden_dim, m.hidden_dim, True))
        if not m.lm_head:
            return ops
        t = self.logits_tokens(phase)
        ops += head_transform_ops(self, phase, t)
        d = m.word_embedding_dim
        if d != m.hidden_dim:
            ops.append(self._matmul("project_out", "lm_head", phase, t, m.hidden_dim, d, False))
        head = self._matmul("lm_head", "lm_head", phase, t, d, m.vocab_size, m.lm_head_bias,
                            shard=self.tp, weight_bytes=self.e_bytes)
        if m.tie_word_embeddings:
            # the weight is the input embedding's; only a bias is new (`head` is ours: set in place)
            bias_params = m.vocab_size if m.lm_head_bias else 0
            head.params = bias_params
            if with_embedding:
                shared = head.weight_bytes_per_gpu - bias_params / self.tp * self.e_bytes
                head.params_per_gpu = bias_params / self.tp
                head.weight_bytes_per_gpu = bias_params / self.tp * self.e_bytes
                head.shared_weight_bytes_read_per_gpu = shared
            # else: a copy on the last pipeline stage (Megatron, vLLM): memory, not a new parameter
        ops.append(head)
        return ops

    # ------------------------------------------------------------ aggregates
    def model_parts(self, phase: Phase, stage: Optional[int] = None) -> List[ModelPart]:
        """The embedding, each layer kind and the head of the whole model or of one
        pipeline stage, with repeat counts and whether the part is a transformer layer.
        Built once per (phase, stage) and shared: callers must not mutate the operators."""
        return self.phase_memo(("parts", phase, stage), lambda: self.build_model_parts(phase, stage))

    def build_model_parts(self, phase: Phase, stage: Optional[int] = None) -> List[ModelPart]:
        """`model_parts` without the cache (subclasses override the builders it calls)."""
        if stage is None:
            groups, first, last = self.layer_groups, True, True
        else:
            groups = self.stage_groups[stage]
            first, last = stage == 0, stage == self.par.pp_size - 1
        out = []
        if first:
            out.append(ModelPart("embedding", False, 1, self._cp_local(phase, self.embedding_ops(phase))))
            if self.model.vision_tower is not None:  # on the first stage, beside the embedding
                out += [ModelPart(label, False, n, ops) for label, n, ops in vision_parts(self, phase, self.image_tokens)]
        for kind, n in groups.items():  # a layer kind's operators shared by the stages holding it
            ops = self.phase_memo(("layer_ops", phase, kind), lambda kind=kind: self.layer_ops(phase, kind))
            out.append(ModelPart(kind.label, True, n, ops))
        if last:
            out.append(ModelPart("head", False, 1, self._cp_local(phase, self.head_ops(phase, with_embedding=first))))
        return out

    def stage_parts(self, phase: Phase, stage: Optional[int] = None) -> List[Tuple[bool, int, List[Operator]]]:
        """(is a transformer layer, repeat count, operators) of the model or a stage."""
        return [(p.is_layer, p.repeat, p.ops) for p in self.model_parts(phase, stage)]

    def model_ops(self, phase: Phase, stage: Optional[int] = None) -> List[Tuple[str, int, List[Operator]]]:
        """(label, repeat count, operators) for the whole model or one pipeline stage."""
        return [(p.label, p.repeat, p.ops) for p in self.model_parts(phase, stage)]

    def weighted_ops(self, phase: Phase, stage: Optional[int] = None) -> List[Tuple[int, Operator]]:
        """(repeat count, operator) for every operator of the model or stage (shared: do not mutate)."""
        return self.phase_memo(("weighted", phase, stage), lambda: [
            (p.repeat, op) for p in self.model_parts(phase, stage) for op in p.ops])

    def flat_ops(self, phase: Phase, stage: Optional[int] = None) -> List[Operator]:
        """All operators, each scaled by its repeat count (collectives are
        repeated, not merged: use weighted_ops to time them). Shared: do not mutate."""
        return self.phase_memo(("flat", phase, stage), lambda: [
            op.scaled(n) if n != 1 else op for n, op in self.weighted_ops(phase, stage)])
