"""Mixer operators of a layer: sequence mixers with a constant-size state instead of
attention and its KV cache.

Kinds (`ModelConfig.layer_types` entries, fields under "mixers" in model_schema.py):
- "mamba": Mamba-1's selective SSM (Gu & Dao, arXiv 2312.00752, Fig. 3): in_proj to
  x and the gate z, a causal depthwise conv1d on x, x_proj to (dt, B, C), dt_proj,
  the selective scan with A (d_inner x N) and D, out_proj.
- "mamba2": Mamba-2's SSD (Dao & Gu, arXiv 2405.21060, §7 and Fig. 6): one in_proj to
  (z, x, B, C, dt), the conv1d on (x, B, C), the chunked scan (heads share A, dt; groups
  share B and C), a gated RMSNorm, out_proj.
- "short_conv": LFM2's gated short convolution (transformers' Lfm2ShortConv): in_proj to
  (B, C, x), B*x, a causal depthwise conv1d, C*conv, out_proj.
- "gated_delta_net": Gated DeltaNet (Yang et al., arXiv 2412.06464; transformers'
  Qwen3NextGatedDeltaNet): in_proj to (q, k, v, z) and (beta, a), the conv1d on (q, k, v),
  the chunked gated delta rule (state per value head: key width x value width), a gated
  RMSNorm of one value-head width shared by all heads, out_proj.
- "kda": Kimi Delta Attention (arXiv 2510.26692; transformers' KimiLinearDeltaAttention):
  the gated delta rule with a per-channel decay from a low-rank forget gate (f_a, f_b,
  dt_bias per key channel, A_log per head), q/k/v and beta projections, a low-rank output
  gate (g_a, g_b) instead of z, the same conv1d, shared-weight gated norm and out_proj.

FLOPs follow the package convention (operators/__init__.py): 2 per multiply-accumulate
of what `torch.utils.flop_counter.FlopCounterMode` counts (matmuls, einsum/bmm, the
convolution); element-wise work (discretisation exp(dt A), the state update
h = dA h + dB x, gates, softplus) is not counted as FLOPs (its time is its bytes).
Under the "transformers" conventions (attention_flops="full") the eager forward is
counted: the convolution computes L + k - 1 outputs (padding k - 1 on both sides,
then sliced), Mamba-1's scan reads out C h at every token (2 d_inner N per token),
Mamba-2's SSD pads the prompt to a multiple of the chunk and runs five einsums per
chunk, the gated delta rule pads to its chunk too and runs six matmuls per chunk (its
triangular solves and its token-by-token decode are not counted by FlopCounterMode:
0 FLOPs). Under "serving" (attention_flops="causal") the kernels' work: L conv outputs,
SSD chunks not padded past the prompt.

State per sequence and layer (what replaces the KV cache; constant in the context):
the conv state (channels x kernel width, as transformers' cache and mamba_ssm's
`allocate_inference_cache` keep it) and the SSM state (Mamba-1 d_inner x N, Mamba-2
heads x head width x N), stored at the KV-cache dtype. Decode reads and writes it once
per step (`kv_cache_bytes_read_per_gpu` holds the read: the state plays the cache's part).

Tensor parallelism splits channels and heads as Mamba's and vLLM's kernels do: in_proj
column-parallel, out_proj row-parallel (the layer's usual all-reduce); Mamba-1's x_proj
row-parallel with an all-reduce of its (dt, B, C) output; Mamba-2's B/C groups split
when tp divides them, else each rank keeps the one group its heads use. Mixer
operators are filed under the layer's "attention" group (its sequence-mixing block),
so every breakdown keeps summing; their names and kinds ("conv", "scan") tell them apart.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from llm_analysis.errors import ConfigError
from llm_analysis.schema.options import ActivationRecomputation
from llm_analysis.model.records import LayerKind, Operator, Phase, ceil_div

_GROUP = "attention"  # the layer's sequence-mixing block (see the module docstring)


def check_mixer_layout(d) -> None:
    """Refuse a parallel layout the mixers of `d.model` cannot run under."""
    m, tp = d.model, d.par.tp_size
    kinds = m.mixer_kinds
    if not kinds:
        return
    if d.par.cp_size > 1:
        raise ConfigError(f"cp_size = {d.par.cp_size}: context parallelism of {sorted(kinds)} mixer layers "
                          f"({m.name}) is not modelled; use cp_size=1")
    widths: Dict[str, int] = {}
    if "mamba" in kinds:
        widths["ssm_inner_dim"] = m.ssm_inner_dim
    if "mamba2" in kinds:
        widths["ssm_num_heads"] = m.ssm_num_heads
        g = m.ssm_num_groups
        if g % tp and tp % g:
            raise ConfigError(f"tp_size = {tp} and ssm_num_groups = {g} of {m.name}: one must divide the other "
                              "(B/C groups are split, or each rank keeps the group of its heads)")
    if "short_conv" in kinds:
        widths["hidden_dim"] = m.hidden_dim
    if {"gated_delta_net", "kda"} & kinds:
        widths["gdn_num_key_heads"] = m.gdn_num_key_heads
    for field, width in widths.items():
        if width % tp:
            valid = [t for t in range(1, width + 1) if width % t == 0 and t <= 64]
            raise ConfigError(f"tp_size = {tp} must divide {field} = {width} of {m.name} (mixer channels and "
                              f"heads are split over TP); valid tp_size: {valid}")


class MixerOps:
    """Mixin of `LayerDescriber`: Mamba, Mamba-2 and short-convolution mixers."""

    def layer_blocks(self, kind: LayerKind) -> Tuple[bool, bool]:
        """(has a sequence mixer, has an MLP) for layers of this kind: an "mlp" layer has
        no mixer; with layer_mlp False only "mlp" layers hold an MLP."""
        return kind.attention != "mlp", self.model.layer_mlp or kind.attention == "mlp"

    def sequence_mixer_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        """The layer's sequence mixing: attention, a mixer, or (mixer_parallel_attention,
        Falcon-H1) full attention and the mixer side by side on the same input."""
        if not kind.is_mixer:
            return self.attention_ops(phase, kind)
        ops = self.mixer_ops(phase, kind)
        if self.model.mixer_parallel_attention:
            ops = self.attention_ops(phase, LayerKind(kind.moe, "full_attention")) + ops
        return ops

    def mixer_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        build = {"mamba": self._mamba_ops, "mamba2": self._mamba2_ops, "short_conv": self._short_conv_ops,
                 "gated_delta_net": self._gated_delta_net_ops, "kda": self._kda_ops}
        ops = build[kind.attention](phase)
        for op in ops:  # recomputed with the block they replace (attention)
            op.recompute_class = (ActivationRecomputation.ATTN_COMPUTE if op.kind == "scan"
                                  else ActivationRecomputation.ATTN)
        return ops

    # ------------------------------------------------------------------ state
    def mixer_state_elems_per_seq_per_gpu(self, kind: LayerKind) -> Tuple[float, float]:
        """(conv state, recurrent state) elements one sequence keeps in one layer on one GPU."""
        m = self.model
        k = m.mixer_conv_kernel
        if kind.attention == "mamba":
            d = m.ssm_inner_dim // self.tp
            return float(d * k), float(d * m.ssm_state_size)
        if kind.attention == "mamba2":
            heads = m.ssm_num_heads // self.tp
            conv_dim = m.ssm_inner_dim // self.tp + 2 * self._ssm_groups_per_gpu() * m.ssm_state_size
            return float(conv_dim * k), float(heads * (m.ssm_inner_dim // m.ssm_num_heads) * m.ssm_state_size)
        if kind.attention == "short_conv":
            return float(m.hidden_dim // self.tp * k), 0.0
        if kind.attention in ("gated_delta_net", "kda"):
            heads = m.gdn_num_value_heads // self.tp
            return float(self._gdn_conv_dim() // self.tp * k), float(heads * m.gdn_key_head_dim * m.gdn_value_head_dim)
        return 0.0, 0.0

    @property
    def recurrent_state_bytes(self) -> float:
        """Bytes per element of the recurrent state: the model's own dtype when it fixes one
        (Nemotron-H keeps it in float32), else the KV cache's, like the conv state."""
        width = self.model.ssm_state_dtype_bytes
        return self.kv_bytes if width is None else width

    def mixer_state_bytes_per_seq_per_gpu(self, groups: Dict[LayerKind, int]) -> float:
        """State bytes of one sequence over the mixer layers of `groups` on one GPU."""
        total = 0.0
        for kind, n in groups.items():
            if kind.is_mixer:
                conv, recurrent = self.mixer_state_elems_per_seq_per_gpu(kind)
                total += n * (conv * self.kv_bytes + recurrent * self.recurrent_state_bytes)
        return total

    def _ssm_groups_per_gpu(self) -> int:
        return max(self.model.ssm_num_groups // self.tp, 1)

    def mixer_train_activation_bytes(self, batch: int, seq_len: int, kind: LayerKind, rc: ActivationRecomputation,
                                     beside_attention: bool = False) -> float:
        """Bytes one mixer layer keeps for backward on one GPU: every mixer operator's
        input (as Korthikanti et al. count the inputs of attention's matmuls); under
        ATTN / NORM_ATTN_NORM only the block input (none when attention beside it already
        keeps it), under FULL nothing. The linears' inputs at the activation format's width, the
        others' at 16 bits or wider."""
        if rc == ActivationRecomputation.FULL:
            return 0.0
        # low-precision training keeps only the linears' inputs in the cast format, the rest in 16 bits
        # (quantities/activations.py saved_bytes)
        wide = max(self.dtype.activation_bits / 8, 2.0)
        if rc in (ActivationRecomputation.ATTN, ActivationRecomputation.NORM_ATTN_NORM):
            split = self.tp if self.par.sp_size > 1 else 1
            return 0.0 if beside_attention else batch * seq_len * self.model.hidden_dim * wide / split
        ops = self.mixer_ops(Phase("train", batch, seq_len, seq_len), kind)
        return sum((o.bytes_read_per_gpu - o.weight_bytes_per_gpu - o.kv_cache_bytes_read_per_gpu)
                   * (1.0 if o.kind == "matmul" else wide / self.a_bytes)
                   for o in ops if o.kind != "collective")

    # ---------------------------------------------------------------- builders
    def _state_bytes(self, phase: Phase, elems_per_seq: float, bytes_per_elem: float) -> tuple:
        """(read, written) state bytes: read when continuing a context, written after
        every inference pass (a training pass keeps none)."""
        per = phase.batch * elems_per_seq * bytes_per_elem
        return (per if phase.past_len > 0 else 0.0), (per if phase.name != "train" else 0.0)

    def _mixer_op(self, name: str, kind: str, phase: Phase, params: int, flops: float, channels_gpu: float,
                  read_elems: float, state_elems: float = 0.0, shapes: str = "", replicated: bool = False,
                  recurrent: bool = False) -> Operator:
        """An operator of the mixer with `params` weights (split over TP unless
        `replicated`), `flops` (whole model, split over TP), reading `read_elems`
        activations per token and writing `channels_gpu` per token on one GPU, with
        `state_elems` per sequence (the recurrent state when `recurrent`, else the conv state)."""
        params_gpu = params if replicated else params / self.tp
        state_read, state_written = self._state_bytes(
            phase, state_elems, self.recurrent_state_bytes if recurrent else self.kv_bytes)
        return Operator(
            name=name, group=_GROUP, kind=kind, params=params, params_per_gpu=params_gpu,
            weight_bytes_per_gpu=params_gpu * self.w_bytes, flops=flops, flops_per_gpu=flops / self.tp,
            bytes_read_per_gpu=phase.tokens * read_elems * self.a_bytes + params_gpu * self.w_bytes + state_read,
            bytes_written_per_gpu=phase.tokens * channels_gpu * self.a_bytes + state_written,
            kv_cache_bytes_read_per_gpu=state_read, shapes=shapes)

    def _conv_outputs(self, phase: Phase) -> int:
        """Outputs per channel the causal conv1d computes: the eager forward pads k - 1
        on both sides (L + k - 1 outputs, sliced to L), its cached step convolves the k
        cached columns with the new ones (L + 1); kernels compute the L needed."""
        k = self.model.mixer_conv_kernel
        if self.conv.attention_flops == "causal":
            return phase.q_len
        return phase.q_len + 1 if phase.past_len > 0 else phase.q_len + k - 1

    def _conv_op(self, phase: Phase, channels: int, channels_gpu: int) -> Operator:
        m, k = self.model, self.model.mixer_conv_kernel
        params = channels * k + (channels if m.mixer_conv_bias else 0)
        flops = 2.0 * phase.batch * channels * k * self._conv_outputs(phase)
        op = self._mixer_op("conv1d", "conv", phase, params, flops, channels_gpu, channels_gpu,
                            state_elems=channels_gpu * k, shapes=f"depthwise [{channels}x{k}] x {phase.tokens} tokens")
        return op

    def _gate_op(self, name: str, phase: Phase, channels_gpu: int) -> Operator:
        """y = a * b element-wise (LFM2's B*x and C*conv)."""
        return Operator(name=name, group=_GROUP, kind="elementwise",
                        bytes_read_per_gpu=2 * phase.tokens * channels_gpu * self.a_bytes,
                        bytes_written_per_gpu=phase.tokens * channels_gpu * self.a_bytes,
                        shapes=f"{channels_gpu} x {phase.tokens}")

    # ------------------------------------------------------------------ kinds
    def _mamba_ops(self, phase: Phase) -> List[Operator]:
        m, t, tp = self.model, phase.tokens, self.tp
        h, d, n, r = m.hidden_dim, m.ssm_inner_dim, m.ssm_state_size, m.ssm_dt_rank
        d_gpu = d // tp
        ops = [self._matmul("in_proj", _GROUP, phase, t, h, 2 * d, m.mixer_proj_bias, shard=tp),
               self._conv_op(phase, d, d_gpu),
               self._matmul("x_proj", _GROUP, phase, t, d, r + 2 * n, False, shard=tp, shard_input=True)]
        if tp > 1:  # vLLM: x_proj is row-parallel, its (dt, B, C) summed over the ranks
            ops.append(self._collective("tp_all_reduce_x_proj", "all_reduce", "tp", tp, t * (r + 2 * n)))
        if m.ssm_dt_bc_norms:  # Jamba: RMSNorm weights on dt (rank), B and C (state)
            ops += [self._norm(f"{x}_norm", _GROUP, t, w, bias=False) for x, w in (("dt", r), ("b", n), ("c", n))]
        ops.append(self._matmul("dt_proj", _GROUP, phase, t, r, d, True, shard=tp))
        # A (d x N) and D (d); FlopCounterMode counts the read-out C h_t (a matmul per token)
        ops.append(self._mixer_op("selective_scan", "scan", phase, d * n + d, 2.0 * t * d * n, d_gpu,
                                  3 * d_gpu + 2 * n, state_elems=d_gpu * n, recurrent=True,
                                  shapes=f"{d} channels x N={n} x {phase.q_len} steps"))
        ops.append(self._matmul("out_proj", _GROUP, phase, t, d, h, m.mixer_proj_bias, shard=tp, shard_input=True))
        return ops

    def ssd_flops(self, batch: int, q_len: int, past_len: int) -> float:
        """FlopCounterMode FLOPs of Mamba-2's scan (`ssd_flops` below) for this model."""
        m = self.model
        return ssd_flops(batch, q_len, past_len, m.ssm_num_heads, m.ssm_inner_dim // m.ssm_num_heads,
                         m.ssm_state_size, m.ssm_chunk_size, self.conv.attention_flops == "causal")

    def _mamba2_ops(self, phase: Phase) -> List[Operator]:
        m, t, tp = self.model, phase.tokens, self.tp
        h, d, n, heads = m.hidden_dim, m.ssm_inner_dim, m.ssm_state_size, m.ssm_num_heads
        d_gpu, heads_gpu, g_gpu = d // tp, heads // tp, self._ssm_groups_per_gpu()
        conv_dim, conv_gpu = d + 2 * m.ssm_num_groups * n, d_gpu + 2 * g_gpu * n
        proj_out, proj_gpu = d + conv_dim + heads, d_gpu + conv_gpu + heads_gpu
        ops = [self._matmul("in_proj", _GROUP, phase, t, h, proj_out, m.mixer_proj_bias, shard=proj_out / proj_gpu),
               self._conv_op(phase, conv_dim, conv_gpu)]
        p = d // heads
        scan = self._mixer_op("ssd_scan", "scan", phase, 3 * heads, self.ssd_flops(phase.batch, phase.q_len,
                              phase.past_len), d_gpu, conv_gpu + heads_gpu, state_elems=heads_gpu * p * n,
                              recurrent=True, shapes=f"{heads} heads x P={p} x N={n}, chunk {m.ssm_chunk_size}")
        # A_log, D and dt_bias per head: split with the heads
        ops.append(scan)
        if m.ssm_gated_norm:  # RMSNorm(x * silu(z)) over groups of the inner width, weights split over TP
            ops.append(self._mixer_op("gated_norm", "norm", phase, d, 0.0, d_gpu, 2 * d_gpu,
                                      shapes=f"[{d}] x {t}"))
        ops.append(self._matmul("out_proj", _GROUP, phase, t, d, h, m.mixer_proj_bias, shard=tp, shard_input=True))
        return ops

    def _short_conv_ops(self, phase: Phase) -> List[Operator]:
        m, t, tp = self.model, phase.tokens, self.tp
        h = m.hidden_dim
        h_gpu = h // tp
        return [self._matmul("in_proj", _GROUP, phase, t, h, 3 * h, m.mixer_proj_bias, shard=tp),
                self._gate_op("gate_in", phase, h_gpu),
                self._conv_op(phase, h, h_gpu),
                self._gate_op("gate_out", phase, h_gpu),
                self._matmul("out_proj", _GROUP, phase, t, h, h, m.mixer_proj_bias, shard=tp, shard_input=True)]

    # ------------------------------------------------------- gated delta net
    def _gdn_conv_dim(self) -> int:
        m = self.model
        return 2 * m.gdn_num_key_heads * m.gdn_key_head_dim + m.gdn_num_value_heads * m.gdn_value_head_dim

    def gated_delta_flops(self, batch: int, q_len: int, past_len: int, kda: bool = False) -> float:
        """FlopCounterMode FLOPs of the gated delta rule for `batch` sequences of `q_len`
        new tokens, all value heads H (keys repeated to them), key width K, value width V.
        Eager (transformers' torch_chunk_gated_delta_rule, c chunks of C after padding),
        per chunk and head: k_beta k^T and q k^T (C^2 K each), the intra-chunk attention
        times the new values (C^2 V), the decayed keys and the queries against the state
        and the state update (C K V each), 2 per MAC; its decode step is element-wise (0).
        KDA (transformers' chunk_kimi_delta_attention) forms its intra-chunk scores
        element-wise and multiplies them with the values twice and the keys once instead
        (C^2 (K + 2V)).
        Serving: the same terms over the unpadded chunks; a decode step reads the state
        for k and q and updates it (3 K V per head)."""
        m = self.model
        heads, k, v, q = m.gdn_num_value_heads, m.gdn_key_head_dim, m.gdn_value_head_dim, m.gdn_chunk_size
        serving = self.conv.attention_flops == "causal"
        square = (k + 2 * v) if kda else (2 * k + v)
        if q_len == 1 and past_len > 0:
            return 2.0 * batch * heads * 3 * k * v if serving else 0.0
        if serving:
            full, rest = divmod(q_len, q)
            squares = full * q * q + rest * rest
            return 2.0 * batch * heads * (squares * square + 3 * q_len * k * v)
        c = ceil_div(q_len, q)
        return 2.0 * batch * heads * c * (q * q * square + 3 * q * k * v)

    def _kda_projections(self, phase: Phase) -> List[Operator]:
        """KDA's q/k/v, beta, and the low-rank forget and output gates (the rank-r down
        projections replicated over TP, as MLA's are)."""
        m, t, tp = self.model, phase.tokens, self.tp
        h, heads, r = m.hidden_dim, m.gdn_num_value_heads, m.kda_gate_rank
        key_dim, value_dim = heads * m.gdn_key_head_dim, heads * m.gdn_value_head_dim
        return [self._matmul("qkv_proj", _GROUP, phase, t, h, 2 * key_dim + value_dim, False, shard=tp),
                self._matmul("b_proj", _GROUP, phase, t, h, heads, False, shard=tp),
                self._matmul("f_a_proj", _GROUP, phase, t, h, r, False),
                self._matmul("f_b_proj", _GROUP, phase, t, r, key_dim, False, shard=tp),
                self._matmul("g_a_proj", _GROUP, phase, t, h, r, False),
                self._matmul("g_b_proj", _GROUP, phase, t, r, value_dim, False, shard=tp)]

    def _kda_ops(self, phase: Phase) -> List[Operator]:
        return self._gated_delta_net_ops(phase, kda=True)

    def _gated_delta_net_ops(self, phase: Phase, kda: bool = False) -> List[Operator]:
        m, t, tp = self.model, phase.tokens, self.tp
        h, heads, v = m.hidden_dim, m.gdn_num_value_heads, m.gdn_value_head_dim
        value_dim, conv_dim = heads * v, self._gdn_conv_dim()
        heads_gpu, value_gpu, conv_gpu = heads // tp, value_dim // tp, conv_dim // tp
        if kda:  # A_log per head and dt_bias per key channel
            inputs, rule_params = self._kda_projections(phase), heads + heads * m.gdn_key_head_dim
        else:  # A_log and dt_bias per value head
            inputs = [self._matmul("in_proj_qkvz", _GROUP, phase, t, h, conv_dim + value_dim, False, shard=tp),
                      self._matmul("in_proj_ba", _GROUP, phase, t, h, 2 * heads, False, shard=tp)]
            rule_params = 2 * heads
        return inputs + [
            self._conv_op(phase, conv_dim, conv_gpu),
            self._mixer_op("gated_delta_rule", "scan", phase, rule_params,
                           self.gated_delta_flops(phase.batch, phase.q_len, phase.past_len, kda), value_gpu,
                           conv_gpu + 2 * heads_gpu, state_elems=heads_gpu * m.gdn_key_head_dim * v, recurrent=True,
                           shapes=f"{heads} heads x K={m.gdn_key_head_dim} x V={v}, chunk {m.gdn_chunk_size}"),
            # RMSNorm(o) * silu(z) per head, one weight of the value width shared by the heads
            self._mixer_op("gated_norm", "norm", phase, v, 0.0, value_gpu, 2 * value_gpu,
                           shapes=f"[{v}] x {t * heads}", replicated=True),
            self._matmul("out_proj", _GROUP, phase, t, value_dim, h, False, shard=tp, shard_input=True),
        ]


def ssd_flops(batch: int, q_len: int, past_len: int, heads: int, p: int, n: int, q: int, serving: bool) -> float:
    """FlopCounterMode FLOPs of Mamba-2's scan for `batch` sequences of `q_len` new
    tokens, `heads` heads of width `p`, state size `n`, chunk `q`. Decode: the read-out
    C h (2 H P N per token). Prefill, eager (transformers' mamba2_chunk_scan, c chunks of
    Q after padding): the einsums C B^T (c Q^2 H N), its product with x (c Q^2 H P), the
    chunk states (c Q H P N), the inter-chunk pass ((c+1)^2 H P N) and C times the states
    (c Q H P N), 2 per MAC. Serving: the same terms over the unpadded chunks and a
    c-step state pass."""
    if q_len == 1 and past_len > 0:
        return 2.0 * batch * heads * p * n
    c = ceil_div(q_len, q)
    if serving:
        full, rest = divmod(q_len, q)
        squares = full * q * q + rest * rest
        return 2.0 * batch * heads * (squares * (n + p) + 2 * q_len * p * n + c * p * n)
    return 2.0 * batch * heads * (c * q * q * (n + p) + 2 * c * q * p * n + (c + 1) ** 2 * p * n)
