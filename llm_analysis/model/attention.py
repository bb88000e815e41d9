"""Attention operators of a layer: projections (MHA, GQA/MQA, MLA), the
attention core over the KV cache, sinks and the output projection."""

from __future__ import annotations

from typing import List, Optional

from llm_analysis.schema.options import ActivationRecomputation
from llm_analysis.model.records import LayerKind, Operator, Phase, causal_pairs, chunked_pairs
from llm_analysis.model.variants import (attention_router_ops, expert_projection_op, indexer_cache_elems, indexer_ops,
                       output_gate_ops, qk_norm_reduce_ops, sparse_key_limit)


class AttentionOps:
    """Mixin of `LayerDescriber`: attention and the KV cache."""

    def attention_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        """The attention block; every operator of it is recomputed under ATTN
        (the core already under ATTN_COMPUTE)."""
        ops = self._attention_block_ops(phase, kind)
        for op in ops:
            if op.recompute_class.value > ActivationRecomputation.ATTN.value:
                op.recompute_class = ActivationRecomputation.ATTN
        return ops

    def _attention_block_ops(self, phase: Phase, kind: LayerKind) -> List[Operator]:
        m, t = self.model, phase.tokens
        ops: List[Operator] = []
        heads_gpu = m.n_head // self.tp
        if m.is_mla:
            d_qk = m.qk_nope_head_dim + m.qk_rope_head_dim
            d_v = m.v_head_dim
            kv_a = self._matmul("kv_a_proj", "attention", phase, t, m.hidden_dim,
                                m.kv_lora_rank + m.qk_rope_head_dim, m.qkv_bias)
            if m.q_lora_rank:
                # the low-rank down projections are replicated over TP (as vLLM does), and read the
                # same input: fused under serving conventions (vLLM's and SGLang's fused_qkv_a_proj)
                q_a = self._matmul("q_a_proj", "attention", phase, t, m.hidden_dim, m.q_lora_rank, m.qkv_bias)
                down = self._fused_projections("fused_qkv_a_proj", [q_a, kv_a])
                ops += down[:1]
                ops.append(self._norm("q_a_norm", "attention", t, m.q_lora_rank))
                ops.append(self._matmul("q_b_proj", "attention", phase, t, m.q_lora_rank, m.n_head * d_qk,
                                        False, shard=self.tp))
                ops += down[1:]  # (separate: kv_a_proj after q's, as the modules run)
            else:
                # bias-free whatever attention_bias says (DeepseekV2/V3Attention.q_proj); q is
                # sharded over TP, the latent down projection replicated: two kernels
                ops.append(self._matmul("q_proj", "attention", phase, t, m.hidden_dim, m.n_head * d_qk,
                                        False, shard=self.tp))
                ops.append(kv_a)
            ops.append(self._norm("kv_a_norm", "attention", t, m.kv_lora_rank))
            ops += indexer_ops(self, phase, kind)
            if self.conv.mla == "absorb" and phase.past_len > 0:
                # decode with kv_b_proj absorbed (DeepSeek-V2 paper §2.1.2; vLLM, SGLang):
                # q_nope goes into the latent space per head, attention runs over the cached
                # latent (+ rope key), its output leaves the latent per head; no cache expansion
                r = m.kv_lora_rank
                ops.append(self._matmul("kv_b_proj_q_absorb", "attention", phase, t, m.qk_nope_head_dim, r,
                                        False, shard=self.tp, copies=m.n_head, shard_copies=True))
                ops.append(self._attention_core(phase, kind, r + m.qk_rope_head_dim, r, heads_gpu))
                ops.append(self._matmul("kv_b_proj_v_up", "attention", phase, t, r, d_v, False,
                                        shard=self.tp, copies=m.n_head, shard_copies=True))
                return ops + self._attention_out_ops(phase, heads_gpu, d_v)
            # eager (transformers): the cache holds the latent, so every step re-expands all
            # cached tokens through kv_b_proj into per-head keys and values
            kv_tokens = phase.batch * self.attended_len(kind, phase.kv_len) if phase.past_len > 0 else t
            ops.append(self._matmul("kv_b_proj", "attention", phase, kv_tokens, m.kv_lora_rank,
                                    m.n_head * (m.qk_nope_head_dim + d_v), False, shard=self.tp))
        else:
            hd, d_v, kv_heads = self.head_dim_of(kind), self.v_head_dim_of(kind), self.kv_heads_of(kind)
            d_qk = hd
            q_out, kv_out = m.n_head * hd, kv_heads * hd
            projections = []
            if m.attn_experts:  # JetMoE: q from moe_top_k of attn_experts experts
                ops += attention_router_ops(self, phase)
                ops.append(expert_projection_op(self, "q_proj", phase, m.hidden_dim, kv_out, m.qkv_bias, False))
            else:
                projections.append(self._matmul("q_proj", "attention", phase, t, m.hidden_dim, q_out, m.qkv_bias,
                                                shard=self.tp))
            kv_shard = kv_heads / self.kv_heads_per_gpu_of(kind)
            if not kind.kv_shared:  # a KV-sharing layer reads an earlier layer's keys and values
                projections.append(self._matmul("k_proj", "attention", phase, t, m.hidden_dim, kv_out, m.key_bias,
                                                shard=kv_shard))
                if not kind.values_from_keys:  # else the values are k_proj's output (Gemma 4's k_eq_v)
                    projections.append(self._matmul("v_proj", "attention", phase, t, m.hidden_dim, kv_heads * d_v,
                                                    m.qkv_bias, shard=kv_shard))
            # q, k and v read the same hidden states: one GEMM under serving conventions
            ops += self._fused_projections("qkv_proj", projections)
            if m.qk_norm:
                ops += qk_norm_reduce_ops(self, phase, with_k=not kind.kv_shared)
                ops += self._qk_norm_ops(t, hd, with_k=not kind.kv_shared, kv_heads=kv_heads)
        ops.append(self._attention_core(phase, kind, d_qk, d_v, heads_gpu))
        return ops + self._attention_out_ops(phase, heads_gpu, d_v, kind)

    def _qk_norm_ops(self, tokens: int, head_dim: int, with_k: bool = True, kv_heads: int = 0) -> list:
        """Norms of q and k: one [head_dim] weight shared by the heads (Qwen3), or one per
        head (OLMo-2, Cohere, StableLM: the same elements, heads x head_dim weights)."""
        m = self.model
        ops = []
        for name, heads in (("q_norm", m.n_head), ("k_norm", kv_heads or m.num_key_value_heads))[:2 if with_k else 1]:
            copies = heads if m.qk_norm_per_head else 1
            ops.append(self._norm(name, "attention", tokens * heads // copies, head_dim,
                                  bias=m.qk_norm_bias, copies=copies))
        return ops

    def _attention_out_ops(self, phase: Phase, heads_gpu: int, d_v: int,
                           kind: Optional[LayerKind] = None) -> List[Operator]:
        """Attention sinks (if any: every layer, or this kind's) and the output projection."""
        m = self.model
        ops: List[Operator] = self.attention_extra_ops(phase, heads_gpu, d_v)
        if m.attn_sinks or (kind is not None and kind.sinks):
            ops.append(Operator(name="attn_sinks", group="attention", kind="elementwise",
                                params=m.n_head, params_per_gpu=heads_gpu,
                                weight_bytes_per_gpu=heads_gpu * self.w_bytes))
        ops += output_gate_ops(self, phase, heads_gpu, d_v)
        if m.attn_experts:
            ops.append(expert_projection_op(self, "o_proj", phase, m.num_key_value_heads * d_v, m.hidden_dim,
                                            m.attn_out_bias, True))
            return ops
        ops.append(self._matmul("o_proj", "attention", phase, phase.tokens, m.n_head * d_v, m.hidden_dim,
                                m.attn_out_bias, shard=self.tp, shard_input=True))
        return ops

    def kv_cache_elems_per_token_per_gpu(self, kind: LayerKind) -> float:
        """Elements cached per token per layer on one GPU (0 for encoders). A layer whose values
        come from the key projection (layer_values_from_keys, Gemma 4) caches keys and values as
        any other: the key gets k_norm and the rotary, the value v_norm alone, so they differ
        (transformers' cache stores both, and so does a paged cache that holds K and V)."""
        m = self.model
        # mixer layers keep a state instead (mixers.py), unless attention runs beside them
        if m.encoder_only or not (kind.attends or (kind.is_mixer and m.mixer_parallel_attention)):
            return 0.0
        if m.is_mla:  # replicated on every TP rank (and the indexer's keys, if any)
            return float(m.kv_lora_rank + m.qk_rope_head_dim + indexer_cache_elems(m, kind))
        if kind.kv_shared:  # it reads the cache of an earlier layer (kv_shared_layers)
            return 0.0
        return self.kv_heads_per_gpu_of(kind) * (self.head_dim_of(kind) + self.v_head_dim_of(kind))

    def kv_elems_read_per_token_per_gpu(self, kind: LayerKind) -> float:
        """Key/value elements the attention core reads per attended token: its own cache's,
        or for a KV-sharing layer those of the layer whose cache it reuses (same shapes)."""
        if kind.kv_shared and not self.model.encoder_only:
            return float(self.kv_heads_per_gpu_of(kind) * (self.head_dim_of(kind) + self.v_head_dim_of(kind)))
        return self.kv_cache_elems_per_token_per_gpu(kind)

    def head_dim_of(self, kind: LayerKind) -> int:
        """The attention head width of layers of this kind (ModelConfig.layer_head_dims)."""
        return kind.head_dim or self.model.head_dim

    def v_head_dim_of(self, kind: LayerKind) -> int:
        """The value head width of multi-head attention: v_head_dim when set (MiMo-V2-Flash),
        else the query/key width."""
        m = self.model
        return m.v_head_dim if m.v_head_dim and not m.is_mla else self.head_dim_of(kind)

    def kv_heads_of(self, kind: LayerKind) -> int:
        """Key/value heads of layers of this kind (ModelConfig.layer_kv_heads)."""
        return kind.kv_heads or self.model.num_key_value_heads

    def kv_heads_per_gpu_of(self, kind: LayerKind) -> int:
        """This kind's KV heads on one GPU: split over TP, one replicated when fewer."""
        return max(self.kv_heads_of(kind) // self.tp, 1)

    def attended_len(self, kind: LayerKind, context_len: int) -> int:
        """Keys a query at context length c attends to (itself included). A chunked layer
        (ModelConfig.sliding_window_chunked) under the causal (executed) conventions: the
        keys of its own chunk, (c - 1) mod C + 1; under the eager ones transformers'
        sliding cache of C - 1 tokens and itself, min(c, C)."""
        chunk = self.chunk_of(kind)
        if chunk and self.conv.attention_flops == "causal" and context_len > 0:
            return (context_len - 1) % chunk + 1
        limit = sparse_key_limit(self.model, kind)
        return context_len if limit is None else min(context_len, limit)

    def chunk_of(self, kind: LayerKind) -> int:
        """C when layers of this kind run chunked local attention (Llama 4), else 0."""
        m = self.model
        chunked = m.sliding_window_chunked and kind.attention == "sliding_attention"
        return m.sliding_window if chunked else 0

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
        window = sparse_key_limit(m, kind)
        if m.encoder_only:  # bidirectional: every (query, key) pair, counted and executed
            pairs = executed_pairs = phase.q_len * phase.kv_len
        else:
            # the (query, key) pairs a flash kernel computes (FlashAttention-2/3, cuDNN, FlashInfer in
            # training and serving): tiles above the causal diagonal or outside the window are skipped
            chunk = self.chunk_of(kind)
            executed_pairs = (chunked_pairs(phase.q_len, phase.past_len, chunk) if chunk
                              else causal_pairs(phase.q_len, phase.past_len, window))
            if self.conv.attention_flops == "causal":
                pairs = executed_pairs
            elif phase.q_len == 1:
                pairs = self.attended_len(kind, phase.kv_len)
            elif phase.past_len == 0:
                pairs = phase.q_len * phase.kv_len  # eager: whole matrix, masked afterwards
            else:
                pairs = phase.q_len * self.attended_len(kind, phase.kv_len)
        per_pair = 2.0 * phase.batch * m.n_head * (d_qk + d_v) * self.attention_core_passes
        flops = per_pair * pairs
        # the time follows the executed work; `flops` keeps the convention's count (FlopCounterMode's
        # whole matrix under "transformers") and `masked_flops` the difference
        flops_gpu = per_pair * executed_pairs * heads_gpu / m.n_head
        attended = self.attended_len(kind, phase.kv_len)
        # q in, output out; keys/values: read from the cache (decode) or produced now
        q_elems = phase.tokens * heads_gpu * d_qk
        out_elems = phase.tokens * heads_gpu * d_v
        kv_read_bytes = 0.0
        # the core reads its own keys/values; the indexer's keys are read by index_scores
        core_elems = self.kv_elems_read_per_token_per_gpu(kind) - indexer_cache_elems(m, kind)
        if phase.past_len > 0 and not m.encoder_only:
            kv_read_bytes = phase.batch * attended * core_elems * self.kv_bytes
            kv_new_bytes = 0.0
        else:
            kv_new_bytes = phase.tokens * core_elems * self.a_bytes
            if m.encoder_only:
                kv_new_bytes = phase.tokens * self.kv_heads_per_gpu_of(kind) * (d_qk + d_v) * self.a_bytes
        return Operator(
            name="attention_core", group="attention", kind="attention", flops=flops,
            flops_per_gpu=flops_gpu, masked_flops=per_pair * (pairs - executed_pairs),
            bytes_read_per_gpu=q_elems * self.a_bytes + kv_read_bytes + kv_new_bytes,
            # the new tokens' cache entries (the indexer's keys are written by index_k_cache_write)
            bytes_written_per_gpu=out_elems * self.a_bytes
            + phase.tokens * (self.kv_cache_elems_per_token_per_gpu(kind) - indexer_cache_elems(m, kind))
            * self.kv_bytes,
            kv_cache_bytes_read_per_gpu=kv_read_bytes,
            recompute_class=ActivationRecomputation.ATTN_COMPUTE,
            shapes=f"{heads_gpu} heads x {phase.q_len} q x {attended} kv, d={d_qk}/{d_v}",
            kernel_dims=(phase.q_len,),
        )
