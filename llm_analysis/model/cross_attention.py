"""Cross-attention operators: the decoder of an encoder-decoder model (BART, T5-style
decoders, Whisper, TrOCR; Vaswani et al. 2017, arXiv 1706.03762 §3.2.3) attends in
every layer to the encoder's output.

One cross-attention block per layer: a norm, q projected from the decoder tokens,
k and v projected from the encoder output (`cross_attention_dim` wide), attention of
every decoder token over all `encoder_seq_len` encoder positions (no causal mask),
the output projection and, under tensor parallelism, one more all-reduce. Heads are
split over TP as in self-attention.

The encoder output is the same for every decoder step, so k/v are projected once per
request, in the phase that sees the whole prompt (prefill, or a training step), and
kept: the cross KV cache, layers x batch x encoder_seq_len x 2 x kv width elements
(transformers' EncoderDecoderCache, vLLM's cross-attention cache). A decode step
reads them and projects nothing.

The encoder length is an input of the analysis (`encoder_seq_len`); the encoder
itself (its layers, its FLOPs) is not described. `encoder_seq_len = 0` describes the
decoder run without encoder states (what `*ForCausalLM` classes do when given none):
the block is skipped, its weights are held and do no work.
"""

from __future__ import annotations

from typing import List, Optional

from llm_analysis.errors import ConfigError
from llm_analysis.schema.options import ActivationRecomputation
from llm_analysis.model.records import LayerKind, Operator, Phase

__all__ = ["CrossAttentionOps", "check_encoder_seq_len", "ENCODER_LEN_HINT"]

ENCODER_LEN_HINT = ("pass encoder_seq_len (the number of encoder positions the decoder attends to, e.g. "
                    "the source sentence's tokens or Whisper's 1500 audio frames; CLI --encoder_seq_len; "
                    "0 = the decoder alone, without encoder states)")


def check_encoder_seq_len(model, encoder_seq_len) -> Optional[int]:
    """`encoder_seq_len` as an int >= 0 (None stays None), refused when the model has no
    cross-attention yet a positive length is given (ConfigError naming the field)."""
    if encoder_seq_len is None:
        return None
    if isinstance(encoder_seq_len, bool) or not isinstance(encoder_seq_len, int) or encoder_seq_len < 0:
        raise ConfigError(f"encoder_seq_len = {encoder_seq_len!r} must be an integer >= 0 "
                          "(0: the decoder without encoder states)")
    if encoder_seq_len > 0 and not model.cross_attention:
        raise ConfigError(f"encoder_seq_len = {encoder_seq_len} but {model.name} has no cross-attention "
                          "(cross_attention=False); drop encoder_seq_len")
    return encoder_seq_len


class CrossAttentionOps:
    """Mixin of `LayerDescriber`: the cross-attention block and its cache."""

    encoder_seq_len: Optional[int] = None  # set by the describer

    def encoder_len(self, phase: Phase) -> int:
        """Encoder positions the cross-attention of `phase` attends to; refused when the
        analysis was given none and the phase asks for work (not only for shapes)."""
        if self.encoder_seq_len is not None:
            return self.encoder_seq_len
        if phase.shapes_only:
            return 0
        raise ConfigError(f"{self.model.name} has cross-attention (an encoder-decoder decoder): its FLOPs, "
                          f"time and cache depend on the encoder length; {ENCODER_LEN_HINT}")

    def cross_attention_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        """The cross-attention block of one decoder layer (none without cross-attention)."""
        m = self.model
        if not m.cross_attention:
            return []
        n_enc = self.encoder_len(phase)
        t = phase.tokens
        heads_gpu = m.n_head // self.tp
        q_out, kv_out = m.n_head * m.head_dim, m.num_key_value_heads * m.head_dim
        kv_shard = m.num_key_value_heads / self.kv_heads_per_gpu
        # k/v of the encoder output: projected in a phase that starts a sequence, read
        # from the cross KV cache by decode steps
        kv_tokens = phase.batch * n_enc if phase.past_len == 0 else 0
        rc = ActivationRecomputation.ATTN
        ops = [
            self._norm("cross_attn_norm", "norm", t, m.hidden_dim, recompute_class=rc),
            self._matmul("cross_q_proj", "attention", phase, t, m.hidden_dim, q_out, m.qkv_bias,
                         shard=self.tp, lora_target="q_proj"),
            self._matmul("cross_k_proj", "attention", phase, kv_tokens, m.encoder_output_dim, kv_out, m.key_bias,
                         shard=kv_shard, lora_target="k_proj"),
            self._matmul("cross_v_proj", "attention", phase, kv_tokens, m.encoder_output_dim, kv_out, m.qkv_bias,
                         shard=kv_shard, lora_target="v_proj"),
            self._cross_core(phase, n_enc, heads_gpu),
            self._matmul("cross_o_proj", "attention", phase, t, q_out, m.hidden_dim, m.attn_out_bias,
                         shard=self.tp, shard_input=True, lora_target="o_proj"),
        ]
        for op in ops[1:]:
            if op.recompute_class.value > rc.value:
                op.recompute_class = rc
        if kv_tokens == 0:  # k/v not projected now: their weights are held, not read
            for op in ops[2:4]:
                op.bytes_read_per_gpu = op.bytes_written_per_gpu = 0.0
        if n_enc == 0:  # no encoder states: transformers skips the whole block
            for op in ops:
                op.flops = op.flops_per_gpu = op.bytes_read_per_gpu = op.bytes_written_per_gpu = 0.0
                op.kv_cache_bytes_read_per_gpu = 0.0
            return ops
        return ops + self._cross_tp_comm(t)

    def _cross_core(self, phase: Phase, n_enc: int, heads_gpu: int) -> Operator:
        """softmax(q k^T) v of every decoder token over all n_enc encoder positions."""
        m = self.model
        d = m.head_dim
        flops = 2.0 * phase.batch * m.n_head * phase.q_len * n_enc * (d + d)
        kv_elems = phase.batch * n_enc * self.cross_kv_elems_per_position_per_gpu()
        cached = phase.past_len > 0  # decode: k/v come from the cross KV cache
        kv_read = kv_elems * (self.kv_bytes if cached else self.a_bytes)
        written = phase.tokens * heads_gpu * d * self.a_bytes
        if not cached:
            written += kv_elems * self.kv_bytes  # the cross KV cache is filled
        return Operator(
            name="cross_attention_core", group="attention", kind="attention", flops=flops,
            flops_per_gpu=flops * heads_gpu / m.n_head,
            bytes_read_per_gpu=phase.tokens * heads_gpu * d * self.a_bytes + kv_read,
            bytes_written_per_gpu=written, kv_cache_bytes_read_per_gpu=kv_read if cached else 0.0,
            recompute_class=ActivationRecomputation.ATTN_COMPUTE,
            shapes=f"{heads_gpu} heads x {phase.q_len} q x {n_enc} encoder positions, d={d}",
            kernel_dims=(phase.q_len,))

    def _cross_tp_comm(self, tokens: int) -> List[Operator]:
        """The all-reduce closing the row-parallel output projection (reduce-scatter +
        all-gather under sequence parallelism), as after self-attention."""
        if self.tp == 1:
            return []
        elems = tokens * self.model.hidden_dim
        rc = ActivationRecomputation.ATTN
        if self.par.sp_size > 1:
            return [self._collective("tp_reduce_scatter_cross_attention", "reduce_scatter", "tp", self.tp, elems, rc),
                    self._collective("tp_all_gather_cross_attention", "all_gather", "tp", self.tp, elems, rc)]
        return [self._collective("tp_all_reduce_cross_attention", "all_reduce", "tp", self.tp, elems, rc)]

    def cross_kv_elems_per_position_per_gpu(self) -> float:
        """Cross-cache elements per encoder position per layer on one GPU (k and v)."""
        return 2.0 * self.kv_heads_per_gpu * self.model.head_dim

    def cross_kv_cache_bytes_per_gpu(self, batch_size: int, num_layers: int) -> float:
        """Bytes of the cross KV cache of `num_layers` layers for `batch_size` requests."""
        if not self.model.cross_attention:
            return 0.0
        n_enc = self.encoder_len(Phase("decode", batch_size, 1, 2))
        return num_layers * batch_size * n_enc * self.cross_kv_elems_per_position_per_gpu() * self.kv_bytes

    def check_cross_attention_layout(self) -> None:
        """Layouts the cross-attention description does not cover are refused."""
        if self.model.cross_attention and self.par.cp_size > 1:
            raise ConfigError(f"cp_size = {self.par.cp_size} with the cross-attention of {self.model.name} is not "
                              "modelled (the encoder states would be split or replicated over CP); use cp_size=1")
