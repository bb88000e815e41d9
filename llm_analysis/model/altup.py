"""Gemma 3n's residual-stream operators, a mixin of `LayerDescriber` (reached through
the hooks of `dense_variants.py`):

- AltUp (Baykal et al., "Alternating Updates for Efficient Transformers", NeurIPS 2023,
  arXiv 2301.13310; transformers' Gemma3nTextAltUp): the model keeps `altup_num_inputs`
  = n residual streams. Before the layers, n - 1 projections [hidden -> hidden] make the
  extra streams (altup_projections), after them n - 1 more bring them back
  (altup_unembed_projections). In every layer a router (a norm, then [hidden -> n], run
  once to predict and once to correct) yields per-token coefficients: prediction_coefs
  [n -> n^2] mix the n streams (a [T*hidden x n] x [n x n] product of activations),
  correction_coefs [n -> n] scale the correction; correct_output_scale is a [hidden] weight.
- LAuReL (Menghani et al., arXiv 2411.07501; Gemma3nTextLaurelBlock): a low-rank residual
  [hidden -> rank -> hidden] and a norm.
All of them are replicated over tensor parallelism (transformers' TP plan leaves them).
"""

from __future__ import annotations

from typing import List

from llm_analysis.model.records import Operator, Phase


class AltUpOps:
    """Mixin of `LayerDescriber`: AltUp and LAuReL (ModelConfig.altup_num_inputs, laurel_rank)."""

    def _params_op(self, name: str, group: str, params: int) -> Operator:
        """Learned parameters used element-wise (replicated on every TP rank)."""
        return Operator(name=name, group=group, kind="elementwise", params=params,
                        params_per_gpu=params, weight_bytes_per_gpu=params * self.w_bytes,
                        bytes_read_per_gpu=params * self.w_bytes, shapes=f"[{params}]")

    def _predict_op(self, tokens: int, hidden: int, n: int) -> Operator:
        """The streams mixed by per-token coefficients: [hidden x n] x [n x n] for each token,
        a product of two activations (no weight)."""
        flops = 2.0 * tokens * hidden * n * n
        return Operator(name="altup_predict", group="mlp", kind="matmul", flops=flops, flops_per_gpu=flops,
                        bytes_read_per_gpu=tokens * (hidden * n + n * n) * self.a_bytes,
                        bytes_written_per_gpu=tokens * hidden * n * self.a_bytes,
                        shapes=f"[{hidden}x{n}] x [{n}x{n}] x {tokens} tokens",
                        kernel_dims=(int(tokens * hidden), n, n))

    def altup_layer_ops(self, phase: Phase) -> List[Operator]:
        m, t = self.model, phase.tokens
        n, h = m.altup_num_inputs, m.hidden_dim
        ops: List[Operator] = []
        if n:
            ops += [self._norm("altup_router_norm", "norm", 2 * t, h),  # predict and correct
                    self._matmul("altup_modality_router", "mlp", phase, 2 * t, h, n, False),
                    self._matmul("altup_prediction_coefs", "mlp", phase, t, n, n * n, False),
                    self._predict_op(t, h, n),
                    self._matmul("altup_correction_coefs", "mlp", phase, t, n, n, False),
                    self._params_op("altup_correct_output_scale", "mlp", h)]
        if m.laurel_rank:
            r = m.laurel_rank
            ops += [self._matmul("laurel_linear_left", "mlp", phase, t, h, r, False),
                    self._matmul("laurel_linear_right", "mlp", phase, t, r, h, False),
                    self._norm("post_laurel_norm", "norm", t, h)]
        return ops

    def altup_stream_ops(self, phase: Phase, name: str) -> List[Operator]:
        """The n - 1 projections making the extra streams (`name` altup_projections) or
        folding them back (altup_unembed_projections)."""
        n, h = self.model.altup_num_inputs, self.model.hidden_dim
        if n < 2:
            return []
        group = "embedding" if name == "altup_projections" else "lm_head"
        return [self._matmul(name, group, phase, phase.tokens, h, h, False, copies=n - 1)]
