"""Activation memory of training, after Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models" (arXiv 2205.05198), §4.

Their per-layer count for a GPT layer with 16-bit activations and 1-byte
dropout masks is sbh(34 + 5as/h): attention 11sbh + 5as²b, MLP 19sbh, two
LayerNorms 4sbh. Here each stored tensor is written with its own width and
dtype, so the same terms generalise to GQA/MQA (smaller K and V), gated MLPs
(two stored up-projections), any FFN width, MoE (top-k routed copies) and
quantised MLP activations; with the paper's assumptions they reduce exactly to
Table 2 (checked in tests/test_activation_memory.py).

Tensor parallelism splits the tensors inside attention and MLP by t; sequence
parallelism splits the rest (norm inputs, dropout masks, block inputs) by t too.
Flash attention (Dao et al. 2022) never stores the s x s score matrices.
Context parallelism keeps seq_len / cp tokens of every tensor on a rank, and
the local queries' scores against the whole sequence (s/cp x s): every term is
divided by cp (`ActivationLayout.cp`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from llm_analysis.config import ModelConfig
from llm_analysis.schema.options import ActivationRecomputation  # noqa: F401 (re-exported for old imports)


@dataclass(frozen=True)
class ActivationLayout:
    """Shapes the activation formulas need, for one layer on one GPU."""

    seq_len: int
    batch: int
    hidden: int
    q_width: int  # n_head * head_dim (per-head q width summed over heads)
    kv_width: int  # num_key_value_heads * head_dim (k; v has the same width)
    v_width: int
    n_head: int
    ffn: int  # MLP width per token (top_k * expert width + shared for MoE)
    gated: bool
    tp: int
    sp: bool  # sequence parallelism on
    cp: int = 1  # context-parallel ranks sharing the sequence
    moe_latent: int = 0  # a latent MoE layer's latent width (its experts' input and output), else 0

    @property
    def tokens(self) -> float:
        """s x b / cp: the tokens of the micro-batch one rank keeps."""
        return self.seq_len * self.batch / self.cp


def layout_for(model: ModelConfig, batch: int, seq_len: int, tp: int, sp: bool, moe: bool,
               cp: int = 1) -> ActivationLayout:
    if model.is_mla:
        q_w = model.n_head * (model.qk_nope_head_dim + model.qk_rope_head_dim)
        kv_w, v_w = q_w, model.n_head * model.v_head_dim  # K/V are expanded per head before attention
    else:
        q_w = model.n_head * model.head_dim
        kv_w = model.num_key_value_heads * model.head_dim
        v_w = model.num_key_value_heads * (model.v_head_dim or model.head_dim)  # MiMo: v narrower
    latent = 0
    if moe:
        ffn = model.moe_top_k * model.expert_ffn_dim + model.moe_num_shared_experts * model.shared_expert_ffn_dim
        latent = model.moe_latent_dim or 0
    else:
        ffn = model.ffn_embed_dim
    # the frozen dataclass' fields set at once: its generated __init__ sets each through
    # object.__setattr__, which is most of the cost of a new shape's layout (a hot path)
    L = object.__new__(ActivationLayout)
    L.__dict__.update(seq_len=seq_len, batch=batch, hidden=model.hidden_dim, q_width=q_w, kv_width=kv_w, v_width=v_w,
                      n_head=model.n_head, ffn=ffn, gated=model.mlp_gated_linear_units, tp=tp, sp=sp, cp=cp,
                      moe_latent=latent)
    return L


def attention_activation_bytes(L: ActivationLayout, act_bytes: float, flash_attn: bool,
                               softmax_dropout: bool, attn_dropout: bool,
                               recompute: ActivationRecomputation,
                               linear_input_bytes: Optional[float] = None) -> float:
    """Attention block: QKV input, Q, K, V, (softmax out, its dropout mask and
    output), out-projection input, output dropout mask. Korthikanti: 11sbh + 5as²b.
    `linear_input_bytes` (default `act_bytes`): the width of the two linears' saved inputs
    (the QKV and output projections'; fp8 training keeps their 8-bit casts), the rest at `act_bytes`."""
    sb, t = L.tokens, L.tp
    lin = act_bytes if linear_input_bytes is None else linear_input_bytes
    outer = t if L.sp else 1  # tensors outside the TP region split only with SP
    if recompute in (ActivationRecomputation.ATTN, ActivationRecomputation.NORM_ATTN_NORM):
        return sb * L.hidden * act_bytes / outer  # only the block input is kept
    if recompute == ActivationRecomputation.FULL:
        return 0.0
    qkv_input = sb * L.hidden * lin / outer
    q_k_v = sb * (L.q_width + L.kv_width + L.v_width) * act_bytes / t
    out_proj_input = sb * L.q_width * lin / t
    dropout_mask = sb * L.hidden * 1 / outer if attn_dropout else 0.0
    score = 0.0
    if not flash_attn and recompute != ActivationRecomputation.ATTN_COMPUTE:
        s2b = L.n_head * L.tokens * L.seq_len / t  # local queries x all keys
        score = s2b * act_bytes  # softmax output
        if softmax_dropout:
            score += s2b * 1 + s2b * act_bytes  # dropout mask + dropout output
    return qkv_input + q_k_v + out_proj_input + dropout_mask + score


def mlp_activation_bytes(L: ActivationLayout, act_bytes: float, recompute: ActivationRecomputation,
                         first_linear_bytes: Optional[float] = None, act_input_bytes: Optional[float] = None,
                         second_linear_bytes: Optional[float] = None, recompute_act: bool = False,
                         with_dropout: bool = False, linear_input_bytes: Optional[float] = None) -> float:
    """MLP: first-linear input, activation input(s), second-linear input, dropout
    mask. Korthikanti: 2sbh + 8sbh + 8sbh + sbh = 19sbh for a 4h GeLU MLP.
    `linear_input_bytes` (default `act_bytes`): the width of the linears' saved inputs (fc1 /
    gate-up, fc2 / down, a latent MoE's latents) where no `*_bytes` override is given."""
    if recompute == ActivationRecomputation.FULL:
        return 0.0
    sb, t = L.tokens, L.tp
    outer = t if L.sp else 1
    lin = act_bytes if linear_input_bytes is None else linear_input_bytes
    fl = lin if first_linear_bytes is None else first_linear_bytes
    ai = act_bytes if act_input_bytes is None else act_input_bytes
    sl = lin if second_linear_bytes is None else second_linear_bytes
    # with NORM_ATTN_NORM the MLP input is the second norm's output, recomputed with that block
    first_in = 0.0 if recompute == ActivationRecomputation.NORM_ATTN_NORM else sb * L.hidden * fl / outer
    act_in = sb * L.ffn * ai * (2 if L.gated else 1) / t  # gate and up outputs for GLU
    second_in = 0.0 if recompute_act else sb * L.ffn * sl / t
    mask = sb * L.hidden * 1 / outer if with_dropout else 0.0
    # a latent MoE also keeps the latent its experts read and the latent sum fc2 projects back
    # (both projections replicated over TP, as vLLM builds them: split only with SP)
    latent = 2 * sb * L.moe_latent * fl / outer
    return first_in + act_in + second_in + mask + latent


def norm_activation_bytes(L: ActivationLayout, norm_bytes: float) -> float:
    """Input of one norm: sbh (2sbh at 16 bits), split by t only with SP."""
    return L.tokens * L.hidden * norm_bytes / (L.tp if L.sp else 1)


def layer_input_bytes(L: ActivationLayout, act_bytes: float) -> float:
    """What full recomputation keeps: the layer input, 2sbh at 16 bits
    (sequence-sharded when SP is on, as Megatron checkpoints it)."""
    return L.tokens * L.hidden * act_bytes / (L.tp if L.sp else 1)
