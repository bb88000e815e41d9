"""Activation bytes per GPU: what training keeps for the backward pass
(Korthikanti et al. 2022 formulas in `memory.py`, composed per layer here) and
the largest live set of inference (from the operator records)."""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, Optional, Tuple, Union

from llm_analysis.quantities.activation_layout import (ActivationLayout, attention_activation_bytes, layer_input_bytes, layout_for,
                      mlp_activation_bytes, norm_activation_bytes)
from llm_analysis.schema.options import ActivationRecomputation as AR
from llm_analysis.quantities.arguments import bits, count, element_bytes, flag, optional_flag, recomputation
from llm_analysis.quantities.cross_activations import cross_attention_train_bytes
from llm_analysis.quantities.phases import make_phase


def act_bytes(a) -> float:
    """Bytes per element of the activation dtype: what inference keeps and a pipeline hop sends."""
    return a.dtype_config.activation_bits / 8


BYTES_16BIT = 2.0


def saved_bytes(a) -> float:
    """Training: bytes per element of every tensor kept for backward except the linears' inputs
    (norm inputs are `layernorm_dtype_bytes`, dropout masks 1 byte). Low-precision training
    (TransformerEngine's fp8, and the int8 / FP4 recipes timed as it) keeps activations in 16 bits and
    casts only the GEMM operands: Q/K/V for the 16-bit attention kernel, the gate/up outputs the
    activation function reads, the embedding output and the logits stay 16-bit (docs/training.md)."""
    return max(act_bytes(a), BYTES_16BIT)


def linear_input_bytes(a) -> float:
    """Training: bytes per element of a linear's saved input. TE's fp8 `Linear` saves the quantised
    copy of its input for the weight-gradient GEMM, so the QKV, attention-output, fc1 / gate-up and
    fc2 / down inputs are kept at the activation format's width (an FP4 format's block scales included)."""
    return a.dtype_config.activation_bytes_per_element


LAYOUT_CACHE_SIZE = 64  # layouts kept per describer; a sweep over shapes clears and refills it


def layout(a, batch_size: int, seq_len: int, moe: bool) -> ActivationLayout:
    # one layout serves the several formulas of a call (and the rc / no-rc pair of training
    # memory); kept in a small dict of the describer's rather than its phase cache: building
    # one costs less than a phase-cache probe, and they would push out costlier entries there
    d = a.describer
    cache = d.memoized(("activation_layouts",), dict)
    key = (batch_size, seq_len, moe)
    L = cache.get(key)
    if L is None:
        if len(cache) >= LAYOUT_CACHE_SIZE:
            cache.clear()
        p = a.parallelism_config
        L = cache[key] = layout_for(a.model_config, batch_size, seq_len, p.tp_size, p.sp_size > 1, moe, p.cp_size)
    return L


def inference_live_bytes(a, batch_size: int, seq_len: int, groups: Tuple[str, ...]) -> float:
    """Largest input+output set of one operator in `groups` (inference reuses buffers)."""
    ph = make_phase("prefill", batch_size, seq_len)
    d = a.describer
    return max((o.activation_bytes_per_gpu for kind in d.layer_groups for o in d.layer_ops(ph, kind)
                if o.group in groups), default=0.0)


def per_layernorm(a, batch_size: int, seq_len: int, dtype_bytes: float) -> float:
    batch_size, seq_len = count(batch_size, "batch_size"), count(seq_len, "seq_len")
    dtype_bytes = element_bytes(dtype_bytes, "dtype_bytes")
    return norm_activation_bytes(layout(a, batch_size, seq_len, False), dtype_bytes)


def attention_train(a, batch_size: int, seq_len: int, flash_attn: bool, softmax_dropout: bool,
                    attn_dropout: bool, rc: AR) -> float:
    """Mean over the layers of what their sequence mixing keeps: Korthikanti's attention
    terms, a mixer's operator inputs (model/mixers.py), nothing for MLP-only layers."""
    attn = attention_activation_bytes(layout(a, batch_size, seq_len, False), saved_bytes(a), flash_attn,
                                      softmax_dropout, attn_dropout, rc, linear_input_bytes(a))
    m, d = a.model_config, a.describer
    if d.memoized("attention_only_layers", lambda: not m.mixer_kinds and "mlp" not in (m.layer_types or ())):
        return attn
    total, count = 0.0, 0
    for kind, n in d.layer_groups.items():
        has_mixer = d.layer_blocks(kind)[0]
        attends = has_mixer and (kind.attends or m.mixer_parallel_attention)
        mixer = d.mixer_train_activation_bytes(batch_size, seq_len, kind, rc, attends) if kind.is_mixer else 0.0
        total += n * ((attn if attends else 0.0) + mixer)
        count += n
    return total / count


def mlp_train(a, batch_size: int, seq_len: int, rc: AR, first_linear_bits: Optional[int],
              act_input_bits: Optional[int], second_linear_bits: Optional[int], recompute_act: bool,
              gated_linear_units: Optional[bool], with_dropout: bool, moe: Optional[bool]) -> float:
    """Mean over the layers (of the `moe` kind when given) of the stored MLP activations."""
    to_bytes = lambda bits: None if bits is None else bits / 8  # noqa: E731
    total, count = 0.0, 0
    for kind, n in a.describer.layer_groups.items():
        if moe is not None and kind.moe != moe:
            continue
        if not a.describer.layer_blocks(kind)[1]:  # a layer without an MLP (Mamba, Nemotron-H)
            count += n
            continue
        L = layout(a, batch_size, seq_len, kind.moe)
        if gated_linear_units is not None:
            L = replace(L, gated=gated_linear_units)
        total += n * mlp_activation_bytes(L, saved_bytes(a), rc, to_bytes(first_linear_bits), to_bytes(act_input_bits),
                                          to_bytes(second_linear_bits), recompute_act, with_dropout,
                                          linear_input_bytes(a))
        count += n
    return total / count if count else 0.0


def stored_norms(num_norms: int, rc: AR) -> int:
    """Norm inputs a layer keeps: the ones its recomputation mode does not repeat."""
    if rc == AR.NORM_ATTN_NORM:
        return max(num_norms - 2, 0)  # both norms around attention are recomputed
    if rc == AR.ATTN:
        return max(num_norms - 1, 0)  # the norm feeding attention is recomputed with it
    return num_norms


def per_layer_train(a, batch_size: int, seq_len: int, rc: AR, layernorm_dtype_bytes: float, flash_attn: bool,
                    softmax_dropout: bool, mlp_bits: Tuple[Optional[int], Optional[int], Optional[int]],
                    mlp_recompute_gelu: bool) -> Tuple[float, Dict[str, float]]:
    """(bytes one layer keeps for backward, breakdown). Korthikanti et al. 2022:
    sbh(34 + 5as/h) for a GPT layer without recomputation or parallelism."""
    if rc == AR.FULL:
        total = layer_input_bytes(layout(a, batch_size, seq_len, False), saved_bytes(a))
        return total, {"attn": 0.0, "mlp": 0.0, "layernorm": 0.0, "layer_input": total}
    dropout = a.model_config.hidden_dropout
    attn = attention_train(a, batch_size, seq_len, flash_attn, softmax_dropout, dropout, rc)
    if a.model_config.cross_attention:  # the cross-attention block (quantities/cross_activations.py)
        n_enc = a.describer.encoder_len(make_phase("train", batch_size, seq_len))
        attn += cross_attention_train_bytes(layout(a, batch_size, seq_len, False), saved_bytes(a),
                                            per_layernorm(a, batch_size, seq_len, layernorm_dtype_bytes), n_enc,
                                            flash_attn, softmax_dropout, dropout, rc, linear_input_bytes(a))
    # like attention's output dropout mask: Korthikanti's 19sbh MLP term includes the
    # 1-byte mask of the dropout after the MLP
    mlp = mlp_train(a, batch_size, seq_len, rc, *mlp_bits, mlp_recompute_gelu, None, dropout, None)
    norm = stored_norms(a.model_config.num_norms_per_layer, rc) * per_layernorm(a, batch_size, seq_len,
                                                                                 layernorm_dtype_bytes)
    return attn + mlp + norm, {"attn": attn, "mlp": mlp, "layernorm": norm}


def per_layer_inference(a, batch_size: int, seq_len: int) -> Tuple[float, Dict[str, float]]:
    attn = inference_live_bytes(a, batch_size, seq_len, ("attention",))
    mlp = inference_live_bytes(a, batch_size, seq_len, ("mlp", "experts", "router"))
    norm = inference_live_bytes(a, batch_size, seq_len, ("norm",))
    return max(attn, mlp, norm), {"attn": attn, "mlp": mlp, "layernorm": norm}


def input_embedding(a, batch_size: int, seq_len: int) -> float:
    """The embedding output kept for backward (split by t with SP, by cp with CP), 16 bits or wider."""
    batch_size, seq_len = count(batch_size, "batch_size"), count(seq_len, "seq_len")
    p = a.parallelism_config
    return (batch_size * seq_len * a.model_config.hidden_dim * saved_bytes(a)
            / (p.tp_size if p.sp_size > 1 else 1) / p.cp_size)


def output_embedding(a, batch_size: int, seq_len: int) -> float:
    """The logits (vocab-parallel over TP, the rank's seq/cp positions), 16 bits (or the wider
    activation dtype): the output head runs in 16 bits under fp8 training."""
    batch_size, seq_len = count(batch_size, "batch_size"), count(seq_len, "seq_len")
    if not a.model_config.lm_head:
        return 0.0
    vocab_gpu = -(-a.model_config.vocab_size // a.parallelism_config.tp_size)
    return batch_size * seq_len * vocab_gpu * saved_bytes(a) / a.parallelism_config.cp_size


def loss_backward(a, batch_size: int, seq_len: int) -> float:
    """Temporary bytes of the loss' backward pass: the gradient of the logits, one tensor of
    the logits' shape and dtype (vocab-parallel over TP, the rank's seq/cp positions; none
    without an LM head). The mirrored system's definition (`get_loss_bwd_memory`)."""
    return output_embedding(a, batch_size, seq_len)


def mlp_quant_bits(activation_bits: Optional[int], first_linear_bits: Optional[int],
                   act_input_bits: Optional[int], second_linear_bits: Optional[int]):
    """(first-linear input, activation input, second-linear input) storage bits;
    `mlp_activation_quant_bits` sets all three."""
    if activation_bits is not None:
        return activation_bits, activation_bits, activation_bits
    return first_linear_bits, act_input_bits, second_linear_bits


def _rc(value) -> AR:
    return recomputation(value)


def per_layer_attn(a, batch_size: int, seq_len: int, is_inference: bool, flash_attn: bool, softmax_dropout: bool,
                   attn_dropout: bool, activation_recomputation) -> float:
    rc = _rc(activation_recomputation)
    batch_size, seq_len = count(batch_size, "batch_size"), count(seq_len, "seq_len")
    flash_attn, softmax_dropout = flag(flash_attn, "flash_attn"), flag(softmax_dropout, "softmax_dropout")
    attn_dropout = flag(attn_dropout, "attn_dropout")
    if flag(is_inference, "is_inference"):
        live = inference_live_bytes(a, batch_size, seq_len, ("attention",))
        if flash_attn or not a.model_config.has_attention:
            return live
        # without flash attention the scores are materialised: the eager code holds the score matrix and its
        # softmax at once, each batch x local heads x seq^2 in the activation dtype (flash_attn=False had been
        # ignored here, while training counts its softmax output)
        L = layout(a, batch_size, seq_len, False)
        return live + 2.0 * L.n_head / L.tp * L.tokens * L.seq_len * act_bytes(a)
    return attention_train(a, batch_size, seq_len, flash_attn, softmax_dropout, attn_dropout, rc)


def per_layer_mlp(a, batch_size: int, seq_len: int, is_inference: bool, activation_recomputation,
                  activation_bits: Optional[int], first_linear_bits: Optional[int], act_input_bits: Optional[int],
                  second_linear_bits: Optional[int], recompute_gelu: bool, gated_linear_units: Optional[bool],
                  with_dropout: bool, moe: Optional[bool]) -> float:
    """Stored MLP activations of one layer (mean over the layers, of the `moe` kind when
    given), with the quantised storage bits of `mlp_quant_bits`; inference: the largest live
    set of the MLP block."""
    rc = _rc(activation_recomputation)
    batch_size, seq_len = count(batch_size, "batch_size"), count(seq_len, "seq_len")
    quant = mlp_quant_bits(bits(activation_bits, "mlp_activation_quant_bits"),
                           bits(first_linear_bits, "mlp_1linear_quant_bits"),
                           bits(act_input_bits, "mlp_gelu_input_quant_bits"),
                           bits(second_linear_bits, "mlp_2linear_quant_bits"))
    recompute_gelu, with_dropout = flag(recompute_gelu, "recompute_gelu"), flag(with_dropout, "with_dropout")
    gated_linear_units, moe = optional_flag(gated_linear_units, "gated_linear_units"), optional_flag(moe, "moe")
    if flag(is_inference, "is_inference"):
        return inference_live_bytes(a, batch_size, seq_len, ("mlp", "experts", "router"))
    return mlp_train(a, batch_size, seq_len, rc, *quant, recompute_gelu, gated_linear_units, with_dropout, moe)


def per_layer(a, batch_size: int, seq_len: int, is_inference: bool, activation_recomputation,
              layernorm_dtype_bytes: float, flash_attn: bool, softmax_dropout: bool,
              mlp_activation_bits: Optional[int], mlp_first_linear_bits: Optional[int],
              mlp_act_input_bits: Optional[int], mlp_second_linear_bits: Optional[int], mlp_recompute_gelu: bool,
              return_breakdown: bool = False) -> Union[float, Tuple[float, float, float, float]]:
    """Training: what one layer keeps for backward; inference: its largest live set
    (the training-only arguments do not apply). With return_breakdown the tuple (total, attention,
    MLP, norm bytes), as llm-analysis 0.2.2 returns it (full recomputation: (total, 0, 0, 0), the
    layer input being all that is kept)."""
    rc = _rc(activation_recomputation)
    batch_size, seq_len = count(batch_size, "batch_size"), count(seq_len, "seq_len")
    layernorm_dtype_bytes = element_bytes(layernorm_dtype_bytes, "layernorm_dtype_bytes")
    flash_attn, softmax_dropout = flag(flash_attn, "flash_attn"), flag(softmax_dropout, "softmax_dropout")
    quant = mlp_quant_bits(bits(mlp_activation_bits, "mlp_activation_quant_bits"),
                           bits(mlp_first_linear_bits, "mlp_1linear_quant_bits"),
                           bits(mlp_act_input_bits, "mlp_gelu_input_quant_bits"),
                           bits(mlp_second_linear_bits, "mlp_2linear_quant_bits"))
    mlp_recompute_gelu = flag(mlp_recompute_gelu, "mlp_recompute_gelu")
    if flag(is_inference, "is_inference"):
        total, parts = per_layer_inference(a, batch_size, seq_len)
    else:
        total, parts = per_layer_train(a, batch_size, seq_len, rc, layernorm_dtype_bytes, flash_attn,
                                       softmax_dropout, quant, mlp_recompute_gelu)
    if flag(return_breakdown, "return_breakdown"):
        return total, parts["attn"], parts["mlp"], parts["layernorm"]
    return total
