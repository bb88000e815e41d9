"""Operators of attention and MoE variants (issue 14): the gate on the attention
output, the lightning indexer of DeepSeek sparse attention, the norm on a MoE
block's output, and a latent MoE's projections into and out of the experts' space.
Each builder takes the `LayerDescriber` and is called from a one-line hook in
`attention.py` / `mlp.py`; with the ModelConfig defaults every
builder returns nothing, so other models are unchanged.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from llm_analysis.errors import ConfigError
from llm_analysis.model.records import LayerKind, Operator, Phase, causal_pairs


def output_gate_ops(d, phase: Phase, heads_gpu: int, d_v: int) -> List[Operator]:
    """Gated attention (Qiu et al. 2025, arXiv 2505.06708): before o_proj the heads'
    output is multiplied by act(x @ W_g), W_g [hidden x n_head*d_v] (one gate per
    element) or [hidden x n_head] (one per head). Column-parallel over TP like q_proj.
    The element-wise multiply (and Beam's per-head gate bias, its only parameters)
    is memory-bound: bytes, no matmul FLOPs."""
    m = d.model
    if m.attn_output_gate == "none":
        return []
    width = m.n_head * d_v if m.attn_output_gate == "per_element" else m.n_head
    gate = d.matmul_op("attn_gate_proj", "attention", phase, phase.tokens, m.hidden_dim, width, False,
                       shard=d.tp)
    elems = phase.tokens * heads_gpu * d_v
    bias = m.n_head if m.attn_output_gate_head_bias else 0
    bias_gpu = heads_gpu if bias else 0
    mul = Operator(name="attn_gate", group="attention", kind="elementwise", params=bias,
                   params_per_gpu=bias_gpu, weight_bytes_per_gpu=bias_gpu * d.w_bytes,
                   bytes_read_per_gpu=(elems + phase.tokens * width / d.tp) * d.a_bytes,
                   bytes_written_per_gpu=elems * d.a_bytes,
                   shapes=f"{m.attn_output_gate} gate x {elems:.0f}")
    return [gate, mul]


def sparse_key_limit(model, kind: LayerKind) -> Optional[int]:
    """Keys one query attends to at most: the sliding window, or the indexer's top-k
    (DeepSeek sparse attention selects index_topk cached tokens per query)."""
    if kind.attention == "sliding_attention" and model.sliding_window:
        return model.sliding_window
    return model.index_topk


def indexer_cache_elems(model, kind: LayerKind) -> int:
    """Elements per token per layer of the indexer's key cache (one index_head_dim key,
    shared by the indexer heads, as the MLA latent is: replicated over TP). A layer reusing
    an earlier layer's top-k (ModelConfig.layer_indexer) caches none: transformers writes
    indexer keys only from a layer's own indexer (DynamicIndexedLayer.update_indexer), and
    vLLM builds the indexer, which owns the indexer key cache, only on layers that select
    (DeepseekV2MLAAttention, vllm/model_executor/models/deepseek_v2.py, IndexCache)."""
    if not model.has_indexer or model.encoder_only or kind.reuses_topk:
        return 0
    return model.index_head_dim


def indexer_ops(d, phase: Phase, kind: LayerKind) -> List[Operator]:
    """The lightning indexer of one layer (DeepSeek-V3.2; transformers DeepseekV32Indexer):
    q = wq_b(q latent) [heads x dim], k = LayerNorm(wk(x)) [dim], w = weights_proj(x)
    [heads]; score[s, t] = sum_h w[s, h] * relu(q[s, h] . k[t]) over every cached token.
    The projections are replicated over TP (small; vLLM does so). The scores cost
    2 * heads * (dim + 1) FLOPs per (query, key) pair, over the causal pairs (or the
    whole matrix in eager prefill, as the reference code computes it). A layer reusing an
    earlier layer's top-k (GLM-5.2's "shared" layers) has no indexer: nothing here."""
    m = d.model
    if not m.has_indexer or kind.reuses_topk:
        return []
    t, nh, hd = phase.tokens, m.index_n_heads, m.index_head_dim
    ops = [d.matmul_op("index_q_proj", "attention", phase, t, m.q_lora_rank, nh * hd, False),
           d.matmul_op("index_k_proj", "attention", phase, t, m.hidden_dim, hd, False),
           d.norm_op("index_k_norm", "attention", t, hd, bias=True),
           d.matmul_op("index_weights_proj", "attention", phase, t, m.hidden_dim, nh, False),
           *index_qk_store_ops(d, t, nh, hd)]
    causal = d.conv.attention_flops == "causal" or phase.past_len > 0
    if causal:
        pairs = causal_pairs(phase.q_len, phase.past_len, None)
        # each query keeps min(top-k, keys it sees): the causal pairs under a "window" of top-k
        selected = causal_pairs(phase.q_len, phase.past_len, m.index_topk)
    else:  # eager prefill: the whole score matrix, masked afterwards; top-k of every row
        pairs = phase.q_len * phase.kv_len
        selected = phase.q_len * min(m.index_topk, phase.kv_len)
    flops = 2.0 * phase.batch * pairs * nh * (hd + 1)
    cached = phase.batch * phase.kv_len * hd * d.kv_bytes if phase.past_len > 0 else 0.0
    logits_bytes = phase.batch * pairs * INDEX_LOGIT_BYTES
    ops.append(Operator(
        name="index_scores", group="attention", kind="attention", flops=flops, flops_per_gpu=flops,
        bytes_read_per_gpu=t * nh * (hd + 1) * d.a_bytes + cached,
        # one fp32 logit per (query, key) scored (the new keys' cache writes are the attention core's)
        bytes_written_per_gpu=logits_bytes,
        kv_cache_bytes_read_per_gpu=cached, kernel_dims=(phase.q_len,),
        shapes=f"{nh} heads x {phase.q_len} q x {phase.kv_len} keys, d={hd}"))
    ops.append(index_topk_op(phase, m.index_topk, logits_bytes, phase.batch * selected))
    return ops


def index_qk_store_ops(d, tokens: int, heads: int, dim: int) -> List[Operator]:
    """The passes that carry the indexer's q and k to the scoring kernel, each a kernel of its own
    in the engines that run DeepSeek sparse attention (SGLang's and vLLM's indexers, the DeepSeek-V3.2
    reference): the lightning indexer scores in FP8 (DeepSeek-V3.2-Exp report, 2025), so its queries
    are quantised to 8 bits with one fp32 scale per 128 elements (the reference's act_quant), and each
    new key is written into the indexer's key cache (vLLM's indexer_k_quant_and_cache, SGLang's
    index_k buffer store; the attention core writes only its own latent). Bytes only: no matmul
    FLOPs. (transformers casts q and k to fp32 instead of 8 bits: the same pass, wider; the
    engines' form is described.)"""
    q_elems, k_elems = tokens * heads * dim, tokens * dim
    q_written = q_elems * INDEX_Q_BYTES + q_elems / INDEX_QUANT_BLOCK * INDEX_SCALE_BYTES
    return [Operator(name="index_q_quant", group="attention", kind="elementwise",
                     bytes_read_per_gpu=q_elems * d.a_bytes, bytes_written_per_gpu=q_written,
                     shapes=f"{heads} heads x {dim} x {tokens}"),
            Operator(name="index_k_cache_write", group="attention", kind="elementwise",
                     bytes_read_per_gpu=k_elems * d.a_bytes, bytes_written_per_gpu=k_elems * d.kv_bytes,
                     shapes=f"[{dim}] x {tokens}")]


INDEX_Q_BYTES = 1  # the indexer's queries in FP8 (DeepSeek-V3.2-Exp: the indexer runs in FP8)
INDEX_QUANT_BLOCK = 128  # elements per fp32 scale (the reference's act_quant block_size)
INDEX_SCALE_BYTES = 4
INDEX_LOGIT_BYTES = 4  # the indexer's scores are fp32 (transformers: q.float() @ k; DeepGEMM's MQA logits)
INDEX_BYTES = 4  # int32 token indices


def index_topk_op(phase: Phase, topk: int, logits_bytes: float, selected: float) -> Operator:
    """The indexer's top-k selection, a pass of its own after the scoring kernel in every
    implementation: transformers' `index_scores.topk` (GlmMoeDsaIndexer, DeepseekV32Indexer), the
    DeepSeek-V3.2 reference's fp8_index kernel then `topk`, SGLang's DeepGEMM (paged) MQA-logits
    kernel then fast_topk_transform, vLLM's and TensorRT-LLM's top-k kernels after the logits. It
    reads the fp32 logits the scoring wrote and writes the int32 indices of the `selected` keys
    (min(top-k, keys seen) per query). No matmul FLOPs (comparisons are not counted as FLOPs,
    as FlopCounterMode does not count them); a sequence operator (kind "attention"): its work
    follows each sequence's context."""
    return Operator(
        name="index_topk", group="attention", kind="attention",
        bytes_read_per_gpu=logits_bytes, bytes_written_per_gpu=selected * INDEX_BYTES,
        kernel_dims=(phase.q_len,),
        shapes=f"top-{topk} of {phase.kv_len} keys x {phase.q_len} q")


QK_NORM_STAT_BYTES = 4  # the sums of squares travel in fp32 (vLLM: q.to(float32).pow(2).mean(...))


def qk_norm_reduce_ops(d, phase: Phase, with_k: bool = True) -> List[Operator]:
    """q/k norms over all heads together (ModelConfig.qk_norm_across_heads, MiniMax-M2) split over
    TP: a rank holds n_head / tp of the heads, so the RMS of a token's q (and k) needs the other
    ranks' sums of squares: one all-reduce of 2 fp32 values per token (q's and k's, sent together,
    as vLLM's MiniMaxText01RMSNormTP.forward_qk does) before the norms scale. Nothing with one rank."""
    if not d.model.qk_norm_across_heads or d.tp == 1:
        return []
    stats = 2 if with_k else 1
    op = d.collective_op("tp_all_reduce_qk_norm", "all_reduce", "tp", d.tp, phase.tokens * stats)
    op.comm_bytes_per_gpu = phase.tokens * stats * QK_NORM_STAT_BYTES
    op.shapes = f"{stats} fp32 sums of squares x {phase.tokens} tokens over tp={d.tp}"
    return [op]


def moe_output_ops(d, phase: Phase) -> List[Operator]:
    """On the MoE block's output: A.X-K1's post_mlp_layernorm (a hidden-wide norm) and
    JetMoE's bias (one hidden-wide vector after the experts' outputs are merged)."""
    m, ops = d.model, []
    if m.moe_output_bias:
        h = m.hidden_dim
        ops.append(Operator(name="moe_output_bias", group="experts", kind="elementwise", params=h,
                            params_per_gpu=h, weight_bytes_per_gpu=h * d.w_bytes,
                            bytes_read_per_gpu=(phase.tokens * h) * d.a_bytes + h * d.w_bytes,
                            bytes_written_per_gpu=phase.tokens * h * d.a_bytes, shapes=f"[{h}] bias"))
    if m.moe_output_norm:
        ops.append(d.norm_op("moe_output_norm", "norm", phase.tokens, m.hidden_dim))
    return ops


def check_variant_layout(d) -> None:
    """Layouts the variants are not described under: attention experts split over TP
    by whole heads; context parallelism would have to exchange the indexer's keys as
    well as the attention's (not modelled)."""
    m, tp = d.model, d.par.tp_size
    if m.attn_experts and m.num_key_value_heads % tp:
        raise ConfigError(f"tp_size = {tp} must divide num_key_value_heads = {m.num_key_value_heads} of "
                          f"{m.name}: each attention expert's q/o projection holds that many heads; valid "
                          f"tp_size: {[x for x in range(1, m.num_key_value_heads + 1) if m.num_key_value_heads % x == 0]}")
    if d.model.has_indexer and d.par.cp_size > 1:
        raise ConfigError(f"cp_size = {d.par.cp_size}: context parallelism of {d.model.name}'s sparse-"
                          "attention indexer (index_topk set) is not modelled; use cp_size=1")


def expert_projection_op(d, name: str, phase: Phase, d_in: int, d_out: int, bias: bool,
                         row_parallel: bool) -> Operator:
    """q_proj (hidden -> kv_heads*head_dim) or o_proj (back) of JetMoE's attention
    experts (JetMoeMoA): every token runs through moe_top_k of attn_experts experts, so
    the FLOPs are those of one projection of top_k * kv_heads heads (= n_head) while all
    experts' weights exist; the bias (o_proj's, added after the merge) is one vector."""
    m = d.model
    e, k, t = m.attn_experts, m.moe_top_k, phase.tokens
    op = d.matmul_op(name, "attention", phase, t * k, d_in, d_out, False, shard=d.tp,
                     shard_input=row_parallel)
    one = d.matmul_op(name, "attention", phase, 0, d_in, d_out, False, shard=d.tp, shard_input=row_parallel)
    active = min(e, e * (1.0 - (1.0 - k / e) ** t))  # distinct experts the tokens reach (uniform routing)
    bias_params = d_out if bias else 0
    op.params = one.params * e + bias_params
    op.active_params = one.params * k + bias_params  # a token's q / o: its top-k experts' projections
    op.params_per_gpu = one.params_per_gpu * e + bias_params
    op.weight_bytes_per_gpu = op.params_per_gpu * d.w_bytes
    op.bytes_read_per_gpu += (one.params_per_gpu * (active - 1) + bias_params) * d.w_bytes
    op.shapes = f"{op.shapes}, {e} attention experts top-{k}"
    return op


def attention_router_ops(d, phase: Phase) -> List[Operator]:
    """The router of JetMoE's attention experts: [hidden x attn_experts], replicated."""
    m = d.model
    if not m.attn_experts:
        return []
    return [d.matmul_op("attn_router", "router", phase, phase.tokens, m.hidden_dim, m.attn_experts, False)]


def zero_expert_weight_ops(d, one_expert: List[Operator], ep_size: int) -> List[Operator]:
    """The gate/up weights transformers allocates for LongCat's zero-computation experts
    (LongcatFlashExperts.gate_up_proj has E + Z rows, down_proj E): held like the
    routed experts' (split over EP and TP), never read or computed."""
    m = d.model
    if not (m.moe_zero_experts and m.moe_zero_experts_hold_weights):
        return []
    ups = [op for op in one_expert if op.kind == "matmul"][:-1]  # gate/up; _ffn_ops ends with down_proj
    params = m.moe_zero_experts * sum(op.params for op in ups)
    params_gpu = m.moe_zero_experts * sum(op.params_per_gpu for op in ups) / ep_size
    return [Operator(name="zero_expert_weights", group="experts", kind="elementwise", params=params, active_params=0,
                     params_per_gpu=params_gpu, weight_bytes_per_gpu=params_gpu * d.expert_w_bytes,
                     expert_role="routed", shapes=f"{m.moe_zero_experts} unused gate/up weights")]


def latent_projection_ops(d, phase: Phase) -> Tuple[List[Operator], List[Operator]]:
    """A latent MoE's projections around its routed experts (transformers NemotronHMoE with
    moe_latent_size): (fc1_latent_proj [hidden x latent] before the experts, fc2_latent_proj
    [latent x hidden] after them), once per token (not per routed copy), biases as mlp_bias;
    ([], []) without a latent space. Replicated over TP, as vLLM builds them (ReplicatedLinear):
    every rank projects its tokens whole. Neither is a routed expert: every token uses both."""
    m = d.model
    if m.moe_latent_dim is None:
        return [], []
    t, h, latent = phase.tokens, m.hidden_dim, m.moe_latent_dim
    into = d.matmul_op("moe_latent_in_proj", "experts", phase, t, h, latent, m.mlp_bias, lora_target="fc1_latent_proj")
    out = d.matmul_op("moe_latent_out_proj", "experts", phase, t, latent, h, m.mlp_bias,
                      lora_target="fc2_latent_proj")
    return [into], [out]
