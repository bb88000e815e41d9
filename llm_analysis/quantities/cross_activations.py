"""Activations a cross-attention block keeps for the backward pass (training of an
encoder-decoder decoder; model/cross_attention.py describes the block).

The terms of Korthikanti et al. 2022 (arXiv 2205.05198 §4.1) for self-attention,
with the keys and values over the encoder's `encoder_seq_len` positions instead of
the decoder's own: the block's input (norm output, the q projection's input), Q,
K and V (TP-split by heads), the softmax output over decoder x encoder positions
(not kept with flash attention), the output projection's input and the output
dropout mask, plus the input of the block's norm. The encoder output the k/v
projections read is one tensor shared by every layer, part of the encoder's
activations, which are not described.
"""

from __future__ import annotations

from typing import Optional

from llm_analysis.quantities.activation_layout import ActivationLayout
from llm_analysis.schema.options import ActivationRecomputation as AR

__all__ = ["cross_attention_train_bytes"]


def cross_attention_train_bytes(L: ActivationLayout, act_bytes: float, norm_bytes: float, encoder_seq_len: int,
                                flash_attn: bool, softmax_dropout: bool, dropout: bool, rc: AR,
                                linear_input_bytes: Optional[float] = None) -> float:
    """Bytes one layer's cross-attention keeps for backward on one GPU. `norm_bytes`:
    bytes of the stored input of one norm (the block's own norm). `linear_input_bytes`
    (default `act_bytes`): the saved inputs of the q and output projections (fp8 training
    keeps their 8-bit casts); the checkpointed block input of ATTN recomputation is `act_bytes`."""
    lin = act_bytes if linear_input_bytes is None else linear_input_bytes
    if rc == AR.FULL or encoder_seq_len == 0:  # without encoder states the block is skipped
        return 0.0
    sb, t = L.tokens, L.tp
    outer = t if L.sp else 1
    if rc in (AR.ATTN, AR.NORM_ATTN_NORM):
        return sb * L.hidden * act_bytes / outer  # the block (its norm included) is recomputed from its input
    block_input = sb * L.hidden * lin / outer
    enc_tokens = L.batch * encoder_seq_len
    q = sb * L.q_width * act_bytes / t
    k_v = enc_tokens * (L.kv_width + L.v_width) * act_bytes / t
    out_proj_input = sb * L.q_width * lin / t
    mask = sb * L.hidden / outer if dropout else 0.0
    scores = 0.0
    if not flash_attn and rc != AR.ATTN_COMPUTE:
        pairs = L.n_head * sb * encoder_seq_len / t
        scores = pairs * act_bytes + (pairs * (1 + act_bytes) if softmax_dropout else 0.0)
    return norm_bytes + block_input + q + k_v + out_proj_input + mask + scores
