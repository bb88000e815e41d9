"""The one description of a model's arithmetic: a list of named operators.

For a phase (prefill of `batch` sequences of `q_len` new tokens; a decode step of
`batch` sequences at context length c; a training micro-batch) every layer kind
is described as operators — each matmul with its shapes, the attention core,
norms, the MLP activation, router and experts, embeddings, output head and the
collectives that parallelism adds. Parameters, FLOPs, bytes moved, memory and
roofline time are all derived from these records, so a formula lives in one
place. A custom architecture subclasses `LayerDescriber` (see
`examples/custom_architecture.py`) and changes the lists.

Conventions (stated in the README):
- FLOPs count 2 per multiply-accumulate of matmuls and of the attention core, as
  `torch.utils.flop_counter.FlopCounterMode` does; bias adds, norms, softmax and
  activations are "vector" work recorded separately (`vector_flops`) and timed as
  memory-bound.
- `attention_flops="full"` (default) counts the whole q_len x kv_len score matrix,
  as eager attention computes it before masking; `"causal"` counts only the
  unmasked causal (and sliding-window) part, as flash-attention kernels do.
- `logits="all"` (default) computes logits at every position (a plain forward);
  `"last"` only at the last prompt position (what servers do in prefill).
- Multi-head latent attention caches the latent c_KV and the rope key. `mla="expand"`
  (default) decodes as transformers does: every step re-expands all cached tokens
  through kv_b_proj into per-head K and V; `"absorb"` folds kv_b_proj into the query
  and the output (vLLM, SGLang decode), attending over the latent directly.
- A sliding-window layer attends to at most `sliding_window` keys and keeps the
  last `sliding_window - 1` tokens in its cache between steps.
- Bytes moved assume fused kernels: a matmul reads its weights and input and
  writes its output once; attention reads q, k, v (or the KV cache) and writes its
  output without materialising the score matrix (flash attention).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple

from .config import DtypeConfig, ModelConfig, ParallelismConfig
from .errors import ConfigError


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
    flops: float = 0.0
    flops_per_gpu: float = 0.0
    vector_flops_per_gpu: float = 0.0
    bytes_read_per_gpu: float = 0.0  # weights + activations + cache read
    bytes_written_per_gpu: float = 0.0
    kv_cache_bytes_read_per_gpu: float = 0.0
    collective: Optional[str] = None  # all_reduce | all_gather | reduce_scatter | all_to_all
    comm_bytes_per_gpu: float = 0.0  # message size each GPU contributes
    comm_group_size: int = 1
    comm_group: str = ""  # tp | ep | pp | dp
    shapes: str = ""  # human-readable shape, e.g. "[4096x4096] x 512 tokens"
    # matmuls only: the weight's shape [in_features x out_features] (one copy) and whether
    # the layer is row-parallel (input sharded over TP); used for LoRA adapters
    in_features: int = 0
    out_features: int = 0
    row_parallel: bool = False

    @property
    def bytes_per_gpu(self) -> float:
        return self.bytes_read_per_gpu + self.bytes_written_per_gpu

    @property
    def activation_bytes_per_gpu(self) -> float:
        """Activations the operator reads and writes (its live set), without
        weights and KV-cache reads; 0 for collectives."""
        if self.kind == "collective":
            return 0.0
        return self.bytes_per_gpu - self.weight_bytes_per_gpu - self.kv_cache_bytes_read_per_gpu

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
            params_per_gpu=self.params_per_gpu * factor,
            weight_bytes_per_gpu=self.weight_bytes_per_gpu * factor,
            flops=self.flops * factor,
            flops_per_gpu=self.flops_per_gpu * factor,
            vector_flops_per_gpu=self.vector_flops_per_gpu * factor,
            bytes_read_per_gpu=self.bytes_read_per_gpu * factor,
            bytes_written_per_gpu=self.bytes_written_per_gpu * factor,
            kv_cache_bytes_read_per_gpu=self.kv_cache_bytes_read_per_gpu * factor,
            comm_bytes_per_gpu=self.comm_bytes_per_gpu * factor,
        )


@dataclass(frozen=True)
class LayerKind:
    """Layers that share one description: dense or MoE MLP, full or sliding attention."""

    moe: bool
    attention: str  # "full_attention" | "sliding_attention"

    @property
    def label(self) -> str:
        return f"{'moe' if self.moe else 'dense'}/{self.attention.split('_')[0]}"


@dataclass(frozen=True)
class Conventions:
    attention_flops: str = "full"  # "full" | "causal"
    logits: str = "all"  # "all" | "last"
    mla: str = "expand"  # "expand" | "absorb" (decode of multi-head latent attention)

    def __post_init__(self):
        if self.attention_flops not in ("full", "causal"):
            raise ConfigError(f"attention_flops = {self.attention_flops!r}; valid: 'full', 'causal'")
        if self.logits not in ("all", "last"):
            raise ConfigError(f"logits = {self.logits!r}; valid: 'all', 'last'")
        if self.mla not in ("expand", "absorb"):
            raise ConfigError(f"mla_attention = {self.mla!r}; valid: 'expand', 'absorb'")


def layer_kinds(model: ModelConfig) -> List[LayerKind]:
    """The kind of every layer, in order."""
    return [LayerKind(model.is_moe_layer(i), model.layer_attention_type(i))
            for i in range(model.num_layers)]


def layer_groups(model: ModelConfig) -> Dict[LayerKind, int]:
    """How many layers of each kind the model has (insertion-ordered)."""
    groups: Dict[LayerKind, int] = {}
    for k in layer_kinds(model):
        groups[k] = groups.get(k, 0) + 1
    return groups


def stage_layer_groups(model: ModelConfig, pp_size: int) -> List[Dict[LayerKind, int]]:
    """Layers assigned to pipeline stages contiguously, earlier stages taking the
    remainder (as Megatron does when layers do not divide evenly)."""
    kinds = layer_kinds(model)
    base, extra = divmod(len(kinds), pp_size)
    stages, start = [], 0
    for s in range(pp_size):
        n = base + (1 if s < extra else 0)
        g: Dict[LayerKind, int] = {}
        for k in kinds[start:start + n]:
            g[k] = g.get(k, 0) + 1
        stages.append(g)
        start += n
    return stages


def _ceil_div(a: int, b: int) -> int:
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


class LayerDescriber:
    """Builds the operator records of a model under a dtype and parallel layout.

    Subclass and override `attention_ops`, `mlp_ops`, `norm_ops`,
    `embedding_ops` or `head_ops` to describe a custom architecture; everything
    in `LLMAnalysis` (params, FLOPs, memory, latency) follows.
    """

    def __init__(self, model: ModelConfig, dtype: DtypeConfig, par: ParallelismConfig,
                 conventions: Conventions = Conventions(),
                 kv_cache_dtype_bytes: Optional[float] = None):
        self.model = model
        self.dtype = dtype
        self.par = par
        self.conv = conventions
        self.w_bytes = dtype.weight_bytes_per_param
        self.a_bytes = dtype.activation_bits / 8
        self.e_bytes = dtype.embedding_bits / 8
        self.kv_bytes = kv_cache_dtype_bytes if kv_cache_dtype_bytes is not None else self.a_bytes
        self._check_layout()
        # layer layout never changes for a describer: compute it once (speed)
        self.layer_groups = layer_groups(model)
        self.stage_groups = stage_layer_groups(model, par.pp_size)

    # ------------------------------------------------------------------ layout
    def _check_layout(self) -> None:
        m, p = self.model, self.par
        if m.n_head % p.tp_size:
            raise ConfigError(
                f"tp_size = {p.tp_size} must divide n_head = {m.n_head} of {m.name}; valid tp_size: "
                f"{[d for d in range(1, m.n_head + 1) if m.n_head % d == 0]}")
        kv = m.num_key_value_heads
        if kv % p.tp_size and p.tp_size % kv:
            raise ConfigError(
                f"tp_size = {p.tp_size} and num_key_value_heads = {kv} of {m.name}: one must divide "
                "the other (KV heads are split, or replicated when fewer than tp_size)")
        if p.pp_size > m.num_layers:
            raise ConfigError(f"pp_size = {p.pp_size} exceeds num_layers = {m.num_layers} of {m.name}; "
                              f"valid pp_size: 1..{m.num_layers}")
        widths = {"ffn_embed_dim": m.ffn_embed_dim}
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
        if m.is_moe and m.moe_num_experts % p.ep_size:
            raise ConfigError(f"ep_size = {p.ep_size} must divide moe_num_experts = {m.moe_num_experts}")
        if p.ep_size > 1 and p.dp_size % p.ep_size:
            raise ConfigError(
                f"ep_size = {p.ep_size} must divide dp_size = {p.dp_size}: experts are sharded over data-parallel "
                f"ranks (each with its own batch); use dp_size = {p.ep_size} or a multiple of it")
        if not m.is_moe and p.ep_size > 1:
            raise ConfigError(f"ep_size = {p.ep_size} but {m.name} has no experts; use ep_size=1")

    @property
    def tp(self) -> int:
        return self.par.tp_size

    @property
    def kv_heads_per_gpu(self) -> int:
        """KV heads are split over TP; when fewer than tp_size each GPU keeps one
        (replicated), as Megatron and vLLM do."""
        return max(self.model.num_key_value_heads // self.tp, 1)

    # --------------------------------------------------------------- builders
    def _matmul(self, name: str, group: str, phase: Phase, tokens: int, d_in: int, d_out: int,
                bias: bool, shard: int = 1, weight_bytes: Optional[float] = None,
                shard_input: bool = False, copies: int = 1) -> Operator:
        """y[tokens, d_out] = x[tokens, d_in] @ W[d_in, d_out] (+ b), `copies` times.

        `shard` splits W over that many GPUs (column or row parallel); the input
        is sharded too when `shard_input` (row-parallel layers).
        """
        wb = self.w_bytes if weight_bytes is None else weight_bytes
        params = (d_in * d_out + (d_out if bias else 0)) * copies
        params_gpu = params / shard
        if bias and shard_input:
            # row-parallel: the bias is added after the all-reduce, so every rank keeps all of it
            params_gpu = (d_in * d_out / shard + d_out) * copies
        flops = 2.0 * tokens * d_in * d_out * copies
        in_elems = tokens * d_in * copies / (shard if shard_input else 1)
        out_elems = tokens * d_out * copies / (1 if shard_input else shard)
        return Operator(
            name=name, group=group, kind="matmul", params=params, params_per_gpu=params_gpu,
            weight_bytes_per_gpu=params_gpu * wb, flops=flops, flops_per_gpu=flops / shard,
            vector_flops_per_gpu=(tokens * d_out * copies / shard) if bias else 0.0,
            bytes_read_per_gpu=params_gpu * wb + in_elems * self.a_bytes,
            bytes_written_per_gpu=out_elems * self.a_bytes,
            shapes=f"[{d_in}x{d_out}]{'x' + str(copies) if copies > 1 else ''} x {tokens} tokens",
            in_features=d_in, out_features=d_out, row_parallel=shard_input and shard > 1,
        )

    def _norm(self, name: str, group: str, tokens: int, dim: int, bias: Optional[bool] = None,
              copies: int = 1) -> Operator:
        bias = self.model.norm_bias if bias is None else bias
        params = dim * (2 if bias else 1) * copies
        elems = tokens * dim * copies
        return Operator(
            name=name, group=group, kind="norm", params=params, params_per_gpu=params,
            weight_bytes_per_gpu=params * self.w_bytes, vector_flops_per_gpu=5.0 * elems,
            bytes_read_per_gpu=elems * self.a_bytes + params * self.w_bytes,
            bytes_written_per_gpu=elems * self.a_bytes, shapes=f"[{dim}] x {tokens * copies}",
        )

    def _collective(self, name: str, kind: str, group: str, size: int, elems: float) -> Operator:
        return Operator(name=name, group="communication", kind="collective", collective=kind,
                        comm_bytes_per_gpu=elems * self.a_bytes, comm_group_size=size,
                        comm_group=group, shapes=f"{elems:.0f} elements over {group}={size}")

    # Public names of the builders, for subclasses describing custom layers.
    matmul_op = _matmul
    norm_op = _norm
    collective_op = _collective

    # ---------------------------------------------------------------- layers
    def attention_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        m, t = self.model, phase.tokens
        ops: List[Operator] = []
        heads_gpu = m.n_head // self.tp
        if m.is_mla:
            d_qk = m.qk_nope_head_dim + m.qk_rope_head_dim
            d_v = m.v_head_dim
            if m.q_lora_rank:
                # the low-rank down projections are replicated over TP (as vLLM does)
                ops.append(self._matmul("q_a_proj", "attention", phase, t, m.hidden_dim, m.q_lora_rank, m.qkv_bias))
                ops.append(self._norm("q_a_norm", "attention", t, m.q_lora_rank))
                ops.append(self._matmul("q_b_proj", "attention", phase, t, m.q_lora_rank, m.n_head * d_qk,
                                        False, shard=self.tp))
            else:
                ops.append(self._matmul("q_proj", "attention", phase, t, m.hidden_dim, m.n_head * d_qk,
                                        m.qkv_bias, shard=self.tp))
            ops.append(self._matmul("kv_a_proj", "attention", phase, t, m.hidden_dim,
                                    m.kv_lora_rank + m.qk_rope_head_dim, m.qkv_bias))
            ops.append(self._norm("kv_a_norm", "attention", t, m.kv_lora_rank))
            if self.conv.mla == "absorb" and phase.past_len > 0:
                # decode with kv_b_proj absorbed (DeepSeek-V2 paper §2.1.2; vLLM, SGLang):
                # q_nope goes into the latent space per head, attention runs over the cached
                # latent (+ rope key), its output leaves the latent per head; no cache expansion
                r = m.kv_lora_rank
                ops.append(self._matmul("kv_b_proj_q_absorb", "attention", phase, t, m.qk_nope_head_dim, r,
                                        False, shard=self.tp, copies=m.n_head))
                ops.append(self._attention_core(phase, kind, r + m.qk_rope_head_dim, r, heads_gpu))
                ops.append(self._matmul("kv_b_proj_v_up", "attention", phase, t, r, d_v, False,
                                        shard=self.tp, copies=m.n_head))
                return ops + self._attention_out_ops(phase, heads_gpu, d_v)
            # eager (transformers): the cache holds the latent, so every step re-expands all
            # cached tokens through kv_b_proj into per-head keys and values
            kv_tokens = phase.batch * self.attended_len(kind, phase.kv_len) if phase.past_len > 0 else t
            ops.append(self._matmul("kv_b_proj", "attention", phase, kv_tokens, m.kv_lora_rank,
                                    m.n_head * (m.qk_nope_head_dim + d_v), False, shard=self.tp))
        else:
            d_qk = d_v = m.head_dim
            q_out, kv_out = m.n_head * m.head_dim, m.num_key_value_heads * m.head_dim
            ops.append(self._matmul("q_proj", "attention", phase, t, m.hidden_dim, q_out, m.qkv_bias,
                                    shard=self.tp))
            kv_shard = m.num_key_value_heads / self.kv_heads_per_gpu
            ops.append(self._matmul("k_proj", "attention", phase, t, m.hidden_dim, kv_out, m.qkv_bias,
                                    shard=kv_shard))
            ops.append(self._matmul("v_proj", "attention", phase, t, m.hidden_dim, kv_out, m.qkv_bias,
                                    shard=kv_shard))
            if m.qk_norm:
                ops.append(self._norm("q_norm", "attention", t * m.n_head, m.head_dim, bias=False))
                ops.append(self._norm("k_norm", "attention", t * m.num_key_value_heads, m.head_dim, bias=False))
        ops.append(self._attention_core(phase, kind, d_qk, d_v, heads_gpu))
        return ops + self._attention_out_ops(phase, heads_gpu, d_v)

    def _attention_out_ops(self, phase: Phase, heads_gpu: int, d_v: int) -> List[Operator]:
        """Attention sinks (if any) and the output projection."""
        m = self.model
        ops: List[Operator] = []
        if m.attn_sinks:
            ops.append(Operator(name="attn_sinks", group="attention", kind="elementwise",
                                params=m.n_head, params_per_gpu=heads_gpu,
                                weight_bytes_per_gpu=heads_gpu * self.w_bytes))
        ops.append(self._matmul("o_proj", "attention", phase, phase.tokens, m.n_head * d_v, m.hidden_dim,
                                m.attn_out_bias, shard=self.tp, shard_input=True))
        return ops

    def kv_cache_elems_per_token_per_gpu(self, kind: LayerKind) -> float:
        """Elements cached per token per layer on one GPU (0 for encoders)."""
        m = self.model
        if m.encoder_only:
            return 0.0
        if m.is_mla:
            return float(m.kv_lora_rank + m.qk_rope_head_dim)  # replicated on every TP rank
        return 2.0 * self.kv_heads_per_gpu * m.head_dim

    def attended_len(self, kind: LayerKind, context_len: int) -> int:
        """Keys a query at context length c attends to (itself included)."""
        if kind.attention == "sliding_attention" and self.model.sliding_window:
            return min(context_len, self.model.sliding_window)
        return context_len

    def cached_len(self, kind: LayerKind, seq_len: int) -> int:
        """Tokens a layer keeps in its KV cache after `seq_len` tokens: all of them,
        or for a sliding-window layer the last window - 1 (the next query attends
        to those and itself), as transformers' DynamicSlidingWindowLayer and vLLM keep."""
        if kind.attention == "sliding_attention" and self.model.sliding_window:
            return min(seq_len, self.model.sliding_window - 1)
        return seq_len

    def _attention_core(self, phase: Phase, kind: LayerKind, d_qk: int, d_v: int,
                        heads_gpu: int) -> Operator:
        m = self.model
        window = m.sliding_window if kind.attention == "sliding_attention" else None
        if m.encoder_only:
            pairs = phase.q_len * phase.kv_len
        elif self.conv.attention_flops == "causal":
            pairs = causal_pairs(phase.q_len, phase.past_len, window)
        elif phase.q_len == 1:
            pairs = self.attended_len(kind, phase.kv_len)
        elif phase.past_len == 0:
            pairs = phase.q_len * phase.kv_len  # eager: whole matrix, masked afterwards
        else:
            pairs = phase.q_len * self.attended_len(kind, phase.kv_len)
        flops = 2.0 * phase.batch * m.n_head * pairs * (d_qk + d_v)
        flops_gpu = flops * heads_gpu / m.n_head
        attended = self.attended_len(kind, phase.kv_len)
        # q in, output out; keys/values: read from the cache (decode) or produced now
        q_elems = phase.tokens * heads_gpu * d_qk
        out_elems = phase.tokens * heads_gpu * d_v
        kv_read_bytes = 0.0
        if phase.past_len > 0 and not m.encoder_only:
            kv_read_bytes = (phase.batch * attended * self.kv_cache_elems_per_token_per_gpu(kind)
                             * self.kv_bytes)
            kv_new_bytes = 0.0
        else:
            kv_new_bytes = phase.tokens * self.kv_cache_elems_per_token_per_gpu(kind) * self.a_bytes
            if m.encoder_only:
                kv_new_bytes = phase.tokens * 2 * self.kv_heads_per_gpu * m.head_dim * self.a_bytes
        softmax_elems = phase.batch * heads_gpu * pairs
        return Operator(
            name="attention_core", group="attention", kind="attention", flops=flops,
            flops_per_gpu=flops_gpu, vector_flops_per_gpu=5.0 * softmax_elems,
            bytes_read_per_gpu=q_elems * self.a_bytes + kv_read_bytes + kv_new_bytes,
            bytes_written_per_gpu=out_elems * self.a_bytes
            + phase.tokens * self.kv_cache_elems_per_token_per_gpu(kind) * self.kv_bytes,
            kv_cache_bytes_read_per_gpu=kv_read_bytes,
            shapes=f"{heads_gpu} heads x {phase.q_len} q x {attended} kv, d={d_qk}/{d_v}",
        )

    def _ffn_ops(self, prefix: str, group: str, phase: Phase, tokens: float, ffn: int, bias: bool,
                 shard: int, copies: int = 1) -> List[Operator]:
        """A (gated) MLP of width `ffn` applied to `tokens` tokens, `copies` of it."""
        m = self.model
        h = m.hidden_dim
        ops = []
        ups = ["gate_proj", "up_proj"] if m.mlp_gated_linear_units else ["up_proj"]
        for n in ups:
            ops.append(self._matmul(f"{prefix}{n}", group, phase, tokens, h, ffn, bias, shard=shard,
                                    copies=copies))
        act_elems = tokens * ffn * copies / shard
        ops.append(Operator(name=f"{prefix}act", group=group, kind="elementwise",
                            vector_flops_per_gpu=8.0 * act_elems,
                            bytes_read_per_gpu=act_elems * len(ups) * self.a_bytes,
                            bytes_written_per_gpu=act_elems * self.a_bytes,
                            shapes=f"{m.activation}{'-glu' if len(ups) == 2 else ''} x {act_elems:.0f}"))
        ops.append(self._matmul(f"{prefix}down_proj", group, phase, tokens, ffn, h, bias, shard=shard,
                                shard_input=True, copies=copies))
        return ops

    def mlp_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        m, t = self.model, phase.tokens
        if not kind.moe:
            return self._ffn_ops("", "mlp", phase, t, m.ffn_embed_dim, m.mlp_bias, shard=self.tp)
        return self._moe_ops(phase)

    def expected_active_experts(self, tokens: int) -> float:
        """Expected number of distinct experts that `tokens` tokens are routed to,
        with uniform routing: E * (1 - (1 - k/E)^tokens)."""
        e, k = self.model.moe_num_experts, self.model.moe_top_k
        return e * (1.0 - (1.0 - k / e) ** tokens)

    def _moe_ops(self, phase: Phase) -> List[Operator]:
        m, t, ep = self.model, phase.tokens, self.par.ep_size
        e, k, f = m.moe_num_experts, m.moe_top_k, m.expert_ffn_dim
        h = m.hidden_dim
        ops = [self._matmul("router", "router", phase, t, h, e, m.moe_router_bias)]
        # routed experts: each token runs through k experts, each expert split over
        # tp like a dense MLP. Experts live on ep ranks that are data-parallel for
        # the rest of the model, each with its own batch: with balanced routing every
        # rank still runs t*k token-expert pairs (from all ep ranks' tokens) on its
        # e/ep local experts.
        routed = self._ffn_ops("expert_", "experts", phase, t * k, f, m.moe_expert_bias, shard=self.tp)
        # parameters: all e experts exist, the FLOPs use only k per token
        one_expert = self._ffn_ops("expert_", "experts", phase, 0, f, m.moe_expert_bias, shard=self.tp)
        experts_gpu = e / ep
        # weights read per GPU in one forward: only the local experts that receive
        # some of the ep ranks' t*ep tokens
        active_gpu = min(experts_gpu, self.expected_active_experts(t * ep) / ep)
        for op, one in zip(routed, one_expert):
            if op.kind != "matmul":
                ops.append(op)
                continue
            params = one.params * e
            w_gpu = one.params_per_gpu * experts_gpu
            read_w = one.params_per_gpu * active_gpu * self.w_bytes
            ops.append(replace(op, params=params, params_per_gpu=w_gpu, weight_bytes_per_gpu=w_gpu * self.w_bytes,
                               bytes_read_per_gpu=op.bytes_read_per_gpu - op.weight_bytes_per_gpu + read_w,
                               shapes=f"{op.shapes}, {e} experts top-{k}"))
        if m.moe_num_shared_experts:
            ops += self._ffn_ops("shared_expert_", "experts", phase, t, m.shared_expert_ffn_dim,
                                 m.mlp_bias, shard=self.tp, copies=m.moe_num_shared_experts)
            if m.moe_shared_expert_gate:
                ops.append(self._matmul("shared_expert_gate", "router", phase, t, h, 1, False))
        if ep > 1:
            # dispatch and combine: each token's hidden state to its k experts and back
            elems = t * k * h  # the (ep-1)/ep that leaves the GPU is in the all-to-all time
            ops.append(self._collective("ep_all_to_all_dispatch", "all_to_all", "ep", ep, elems))
            ops.append(self._collective("ep_all_to_all_combine", "all_to_all", "ep", ep, elems))
        return ops

    def norm_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        m = self.model
        return [self._norm(f"norm_{i + 1}", "norm", phase.tokens, m.hidden_dim)
                for i in range(m.num_norms_per_layer)]

    def tp_comm_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        """Megatron TP: an all-reduce after attention and after the MLP (one when
        attention and MLP run in parallel and their partial sums are added first).
        With sequence parallelism each becomes reduce-scatter + all-gather."""
        if self.tp == 1:
            return []
        m = self.model
        elems = phase.tokens * m.hidden_dim
        n = 1 if m.parallel_attn_mlp else 2
        ops = []
        for i in range(n):
            where = "layer" if n == 1 else ("attention" if i == 0 else "mlp")
            if self.par.sp_size > 1:
                ops.append(self._collective(f"tp_reduce_scatter_{where}", "reduce_scatter", "tp", self.tp, elems))
                ops.append(self._collective(f"tp_all_gather_{where}", "all_gather", "tp", self.tp, elems))
            else:
                ops.append(self._collective(f"tp_all_reduce_{where}", "all_reduce", "tp", self.tp, elems))
        return ops

    def layer_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        """Every operator of one layer of this kind, in execution order."""
        return (self.norm_ops(phase, kind) + self.attention_ops(phase, kind)
                + self.mlp_ops(phase, kind) + self.tp_comm_ops(phase, kind))

    # ------------------------------------------------------- embedding / head
    def embedding_ops(self, phase: Phase) -> List[Operator]:
        m, t = self.model, phase.tokens
        d = m.word_embedding_dim
        vocab_gpu = _ceil_div(m.vocab_size, self.tp)
        ops = [Operator(name="word_embedding", group="embedding", kind="embedding",
                        params=m.vocab_size * d, params_per_gpu=vocab_gpu * d,
                        weight_bytes_per_gpu=vocab_gpu * d * self.e_bytes,
                        bytes_read_per_gpu=t * d * self.e_bytes, bytes_written_per_gpu=t * d * self.a_bytes,
                        shapes=f"[{m.vocab_size}x{d}] lookup x {t}")]
        if m.position_embedding_type == "learned" and m.num_position_embeddings:
            n = m.num_position_embeddings
            ops.append(Operator(name="position_embedding", group="embedding", kind="embedding",
                                params=n * m.hidden_dim, params_per_gpu=n * m.hidden_dim,
                                weight_bytes_per_gpu=n * m.hidden_dim * self.e_bytes,
                                bytes_read_per_gpu=t * m.hidden_dim * self.e_bytes,
                                bytes_written_per_gpu=t * m.hidden_dim * self.a_bytes,
                                shapes=f"[{n}x{m.hidden_dim}] lookup x {t}"))
        if m.type_vocab_size:
            n = m.type_vocab_size
            ops.append(Operator(name="token_type_embedding", group="embedding", kind="embedding",
                                params=n * m.hidden_dim, params_per_gpu=n * m.hidden_dim,
                                weight_bytes_per_gpu=n * m.hidden_dim * self.e_bytes,
                                bytes_read_per_gpu=t * m.hidden_dim * self.e_bytes,
                                bytes_written_per_gpu=t * m.hidden_dim * self.a_bytes))
        if d != m.hidden_dim:
            ops.append(self._matmul("project_in", "embedding", phase, t, d, m.hidden_dim, False))
        if m.embedding_norm:
            ops.append(self._norm("embedding_norm", "embedding", t, m.hidden_dim))
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
        ops: List[Operator] = []
        if m.final_norm:
            ops.append(self._norm("final_norm", "norm", phase.tokens, m.hidden_dim))
        if m.pooler:
            ops.append(self._matmul("pooler", "lm_head", phase, phase.batch, m.hidden_dim, m.hidden_dim, True))
        if not m.lm_head:
            return ops
        t = self.logits_tokens(phase)
        d = m.word_embedding_dim
        if d != m.hidden_dim:
            ops.append(self._matmul("project_out", "lm_head", phase, t, m.hidden_dim, d, False))
        head = self._matmul("lm_head", "lm_head", phase, t, d, m.vocab_size, m.lm_head_bias,
                            shard=self.tp, weight_bytes=self.e_bytes)
        if m.tie_word_embeddings:
            # the weight is the input embedding's; only a bias is new
            bias_params = m.vocab_size if m.lm_head_bias else 0
            if with_embedding:
                head = replace(head, params=bias_params, params_per_gpu=bias_params / self.tp,
                               weight_bytes_per_gpu=bias_params / self.tp * self.e_bytes)
            else:  # a copy on the last pipeline stage (Megatron, vLLM): memory, not a new parameter
                head = replace(head, params=bias_params)
        ops.append(head)
        return ops

    # ------------------------------------------------------------ aggregates
    def model_ops(self, phase: Phase, stage: Optional[int] = None) -> List[Tuple[str, int, List[Operator]]]:
        """(label, repeat count, operators) for the whole model or one pipeline stage."""
        if stage is None:
            groups, first, last = self.layer_groups, True, True
        else:
            groups = self.stage_groups[stage]
            first, last = stage == 0, stage == self.par.pp_size - 1
        out = []
        if first:
            out.append(("embedding", 1, self.embedding_ops(phase)))
        for kind, n in groups.items():
            out.append((kind.label, n, self.layer_ops(phase, kind)))
        if last:
            out.append(("head", 1, self.head_ops(phase, with_embedding=first)))
        return out

    def weighted_ops(self, phase: Phase, stage: Optional[int] = None) -> List[Tuple[int, Operator]]:
        """(repeat count, operator) for every operator of the model or stage."""
        return [(n, op) for _, n, ops in self.model_ops(phase, stage) for op in ops]

    def flat_ops(self, phase: Phase, stage: Optional[int] = None) -> List[Operator]:
        """All operators, each scaled by its repeat count (collectives are
        repeated, not merged: use weighted_ops to time them)."""
        return [op.scaled(n) if n != 1 else op for n, op in self.weighted_ops(phase, stage)]


def sum_field(ops: List[Operator], attr: str, groups: Optional[Tuple[str, ...]] = None,
              kinds: Optional[Tuple[str, ...]] = None) -> float:
    return sum(getattr(o, attr) for o in ops
               if (groups is None or o.group in groups) and (kinds is None or o.kind in kinds))
