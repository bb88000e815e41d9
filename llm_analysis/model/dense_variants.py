"""Operators of dense decoder variants (issue 14), a mixin of `LayerDescriber`.

Each is switched on by a ModelConfig field whose default adds nothing, so every other
model's description is unchanged:
- `sub_norms` (BitNet b1.58, arXiv 2402.17764): a norm over the attention output
  before o_proj and one over the MLP hidden before down_proj;
- `mlp_act_params`: learned scalars of the activation (xIELU in Apertus: alpha_p, alpha_n);
- `differential_attention` (arXiv 2410.05258, transformers' DiffLlamaAttention): four
  [head_dim] lambda vectors; the eager code runs the attention core twice, once per
  half of the values (each repeated to all heads), so the core's FLOPs double;
- `attn_dynamic_mask` (DogeAttention): dt_proj [kv_heads*head_dim -> kv_heads] over
  the values of every attended position, and one learned A per KV head;
- `residual_scale_vectors` (Doge): learned [hidden] residual weights per layer;
- `last_layer_attn_out_bias` (GPT-NeoX-Japanese): only the last layer's attention
  output projection has a bias, counted once with the head (same pipeline stage).
Element-wise work (norms, scales, the activation's scalars) has no matmul FLOPs.
"""

from __future__ import annotations

from typing import List

from llm_analysis.model.altup import AltUpOps
from llm_analysis.model.records import LayerKind, Operator, Phase


class DenseVariantOps(AltUpOps):
    """Mixin of `LayerDescriber`: the extra operators of dense decoder variants."""

    @property
    def attention_core_passes(self) -> int:
        """How many times the attention core runs per layer (2 for differential attention)."""
        return 2 if self.model.differential_attention else 1

    def attention_extra_ops(self, phase: Phase, heads_gpu: int, d_v: int) -> List[Operator]:
        """Operators of the attention block that run before the output projection."""
        m = self.model
        ops: List[Operator] = []
        if m.differential_attention:
            ops.append(self._params_op("diff_attn_lambdas", "attention", 4 * d_v))
        if m.attn_dynamic_mask:
            kv = m.num_key_value_heads
            # eager transformers projects the values of every attended position (the
            # cache included) at each forward, as it does for MLA's kv_b_proj
            tokens = phase.batch * phase.kv_len
            ops.append(self._matmul("dt_proj", "attention", phase, tokens, kv * d_v, kv,
                                    m.qkv_bias))
            ops.append(self._params_op("dynamic_mask_A", "attention", kv))
        if m.sub_norms:
            ops.append(self._norm("attn_sub_norm", "attention", phase.tokens, m.n_head * d_v))
        return ops

    def dense_mlp_extras(self, ops: List[Operator], phase: Phase, tokens: int, ffn: int) -> List[Operator]:
        """The dense MLP's operators with the activation's scalars and the sub-norm
        (before down_proj) inserted."""
        m = self.model
        extra: List[Operator] = []
        if m.mlp_act_params:
            extra.append(self._params_op("act_params", "mlp", m.mlp_act_params))
        if m.sub_norms:
            extra.append(self._norm("ffn_sub_norm", "mlp", tokens, ffn))
        if not extra:
            return ops
        return ops[:-1] + extra + ops[-1:]  # down_proj is the last operator

    def layer_extra_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        m, t = self.model, phase.tokens
        ops: List[Operator] = []
        if m.residual_scale_vectors:
            ops.append(self._params_op("residual_scales", "norm", m.residual_scale_vectors * m.hidden_dim))
        if m.per_layer_input_dim:
            # Gemma4TextDecoderLayer: gate the hidden state down to the layer's input width,
            # multiply by the layer's input, project back, norm (replicated over TP)
            d = m.per_layer_input_dim
            ops.append(self._matmul("per_layer_input_gate", "mlp", phase, t, m.hidden_dim, d, False))
            ops.append(self._matmul("per_layer_projection", "mlp", phase, t, d, m.hidden_dim, False))
            ops.append(self._norm("post_per_layer_input_norm", "norm", t, m.hidden_dim))
        return ops + self.altup_layer_ops(phase)

    def embedding_extra_ops(self, phase: Phase) -> List[Operator]:
        """Per-layer embeddings (Gemma4TextModel, Gemma3nTextModel): one table of every
        layer's inputs, the embeddings projected to the same width, and a norm over each
        layer's slice (replicated over TP, as transformers' TP plan leaves them)."""
        m, t = self.model, phase.tokens
        streams = self.altup_stream_ops(phase, "altup_projections")
        if not m.per_layer_input_dim:
            return streams
        width = m.num_layers * m.per_layer_input_dim
        rows = m.per_layer_input_vocab_size or m.vocab_size
        params = rows * width
        table = Operator(name="per_layer_embedding", group="embedding", kind="embedding", params=params,
                         params_per_gpu=params, weight_bytes_per_gpu=params * self.e_bytes,
                         bytes_read_per_gpu=t * width * self.e_bytes,
                         bytes_written_per_gpu=t * width * self.a_bytes,
                         shapes=f"[{rows}x{width}] lookup x {t}")
        return [table,
                self._matmul("per_layer_model_projection", "embedding", phase, t, m.hidden_dim, width, False),
                self._norm("per_layer_projection_norm", "embedding", t * m.num_layers, m.per_layer_input_dim)
                ] + streams

    def head_extra_ops(self, phase: Phase) -> List[Operator]:
        ops = self.altup_stream_ops(phase, "altup_unembed_projections")
        if self.model.last_layer_attn_out_bias:
            ops.append(self._params_op("last_layer_o_proj_bias", "attention", self.model.hidden_dim))
        return ops
