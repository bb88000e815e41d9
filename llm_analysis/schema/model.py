"""`ModelConfig`: the shapes of a transformer language model, validated (pydantic v2).

Architecture families are *data* here (fields of ModelConfig), never branches on a
model's name in the analysis."""

from __future__ import annotations

from typing import List, Literal, Optional, Tuple

from pydantic import model_validator

import llm_analysis.schema.options as _lim
from llm_analysis.schema.context_limit import RopeScaling
from llm_analysis.schema.base import StrictModel
from llm_analysis.schema.encoder_fields import EntityInputs, RelativeAttention, check_encoder_fields
from llm_analysis.schema.layer_attention_fields import check_layer_attention_fields
from llm_analysis.schema.vision_tower import VisionTower

__all__ = ["ModelConfig", "AttentionLayerType", "MIXER_LAYER_TYPES"]

# a layer's sequence mixer: attention (full or sliding), a mixer with a constant-size
# state instead of a KV cache (the "mixers" fields below; model/mixers.py), or "mlp":
# none, the layer is its MLP alone (Nemotron-H)
AttentionLayerType = Literal["full_attention", "sliding_attention", "mamba", "mamba2", "short_conv",
                             "gated_delta_net", "kda", "mlp"]
MIXER_LAYER_TYPES = ("mamba", "mamba2", "short_conv", "gated_delta_net", "kda")


class ModelConfig(StrictModel):
    """Shapes of a transformer language model.

    The first fields are those of the mirrored system (its JSON files load as they
    are); the rest describe the architecture families exactly. Defaults describe a
    GPT-2/GPT-3 style decoder (LayerNorm with bias, learned positions absent,
    tied embeddings, 4x non-gated MLP), which is what the mirrored system assumed.
    """

    name: str
    num_layers: int
    n_head: int
    hidden_dim: int
    vocab_size: int
    max_seq_len: Optional[int] = None
    num_key_value_heads: Optional[int] = None  # default: n_head (MHA); 1 = MQA
    num_key_value_groups: Optional[int] = None  # n_head // num_key_value_heads (derived)
    ffn_embed_dim: Optional[int] = None  # default: expansion_ratio * hidden_dim, else 4x
    expansion_ratio: Optional[float] = None
    model_type: Optional[str] = None  # the HF model_type: branched on only where an engine profile lists the
    # architectures it treats apart (serving: SGLang's window pool for sliding-window layers)
    moe_num_experts: int = 1
    moe_top_k: int = 1
    mlp_gated_linear_units: bool = False  # SwiGLU/GeGLU: gate, up and down projections

    # --- attention ---------------------------------------------------------
    head_dim: Optional[int] = None  # default hidden_dim // n_head (Gemma, Qwen3 set it)
    qkv_bias: bool = False  # bias on the q/k/v projections (GPT-2, Qwen2, BLOOM, ...)
    attn_out_bias: bool = False  # bias on the attention output projection
    k_proj_bias: Optional[bool] = None  # the key projection's bias if not qkv_bias (Whisper, DeBERTa: none)
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3, Gemma 3): 2*head_dim params
    # q/k norm weights for every head ([heads x head_dim]: OLMo-2's norm over all heads,
    # Cohere's and StableLM's per-head norms) instead of one [head_dim] shared by all heads
    qk_norm_per_head: bool = False
    # the q (and k) RMS is taken over all heads together, not per head (MiniMax-M2's
    # RMSNorm(n_head*head_dim)): under TP each rank holds some heads, so the norm needs every
    # rank's sum of squares (one all-reduce of 2 values per token; vLLM's MiniMaxText01RMSNormTP)
    qk_norm_across_heads: bool = False
    qk_norm_bias: bool = False  # the q/k norms are LayerNorms with a bias (Persimmon, Phi)
    attn_sinks: bool = False  # one learned sink logit per head (gpt-oss)
    relative_attention: Optional[RelativeAttention] = None  # DeBERTa-v2 disentangled attention
    # Sliding-window attention: the window, and which layers use it. When
    # `sliding_window` is set and `layer_types` is None, every layer slides
    # (Mistral 7B v0.1); `layer_types` lists each layer explicitly otherwise.
    sliding_window: Optional[int] = None
    layer_types: Optional[List[AttentionLayerType]] = None
    # the sliding layers attend within aligned chunks of `sliding_window` tokens rather than
    # to the last `sliding_window` tokens (Llama 4's chunked local attention, attention_chunk_size):
    # a query at position p sees the p mod C + 1 keys of its own chunk. transformers' eager
    # forward masks the whole score matrix and caches the last C - 1 tokens
    # (DynamicSlidingWindowLayer), as for a window of C: the eager ("full") conventions count
    # these layers as sliding ones; the causal (executed / serving) conventions count the
    # chunk's pairs and, in decode, the chunk's keys ((context - 1) mod C + 1). The cache a
    # layer keeps is at most C - 1 tokens either way (model/attention.py cached_len).
    sliding_window_chunked: bool = False

    # --- multi-head latent attention (DeepSeek-V2/V3, arXiv 2405.04434) -----
    q_lora_rank: Optional[int] = None  # None: q is projected directly from hidden
    kv_lora_rank: Optional[int] = None  # set => MLA; the KV cache holds this latent
    qk_nope_head_dim: Optional[int] = None
    qk_rope_head_dim: Optional[int] = None
    # value head width: required by MLA; on multi-head attention None means head_dim
    # (MiMo-V2-Flash: values 128 wide, queries/keys 192)
    v_head_dim: Optional[int] = None

    # --- MLP ---------------------------------------------------------------
    activation: str = "gelu"  # gelu | gelu_tanh | relu | silu | ... (elementwise)
    mlp_bias: bool = False  # bias on the MLP (and dense-expert) linear layers
    mlp_down_bias: Optional[bool] = None  # the down projection's bias if not mlp_bias (GTE: down only)
    # bottleneck adapters after the MLP (X-MOD, arXiv 2205.06266): num_adapters of them per
    # layer (one per language), hidden -> adapter_dim -> hidden with biases; a token runs one
    adapter_dim: Optional[int] = None
    num_adapters: int = 1

    # --- mixture of experts ------------------------------------------------
    moe_ffn_embed_dim: Optional[int] = None  # per routed expert; default ffn_embed_dim
    moe_num_shared_experts: int = 0
    moe_shared_expert_ffn_dim: Optional[int] = None  # per shared expert; default moe_ffn_embed_dim
    moe_shared_expert_gate: bool = False  # sigmoid gate Linear(hidden, 1) on the shared expert (Qwen2-MoE)
    moe_first_dense_layers: int = 0  # the first k layers are dense (DeepSeek first_k_dense_replace)
    moe_layer_freq: int = 1  # after those, every k-th layer is MoE (1 = all)
    moe_router_bias: bool = False  # bias on the router linear (gpt-oss)
    moe_expert_bias: bool = False  # biases inside each expert's projections (gpt-oss)
    # transformers' eager forward runs every token through every routed expert, each copy scaled
    # by its router score (0 outside the top-k): Llama4TextMoe. The output is top-k routing's;
    # the eager ("full") conventions count moe_num_experts / moe_top_k times the routed experts'
    # matmul FLOPs, as FlopCounterMode measures, the extra as counted-not-executed
    # (Operator.masked_flops); the executed / serving conventions count top-k, as vLLM and SGLang
    # run it. Parameters and weights are those of all experts either way.
    moe_eager_all_experts: bool = False

    # --- MoE / attention variants (issue 14: MLA and MoE decoders) -----------
    # A gate on the attention output before o_proj (Gated Attention, arXiv 2505.06708):
    # out *= act(Linear(hidden, n)), n = n_head * v-head width ("per_element": AFMoE,
    # Beam, HY-V4) or n_head, broadcast over each head ("per_head": Laguna, dots3).
    attn_output_gate: Literal["none", "per_element", "per_head"] = "none"
    attn_output_gate_head_bias: bool = False  # one learned gate bias per head, no matmul (Beam)
    moe_output_norm: bool = False  # a norm on the MoE block's output, MoE layers only (A.X-K1)
    moe_output_bias: bool = False  # one hidden-wide bias on the MoE block's output (JetMoE)
    # Zero-computation (identity) experts the router can pick besides the moe_num_experts
    # FFN experts (LongCat-Flash, arXiv 2509.01322): the router scores E + Z experts and a
    # token's top-k picks spend FFN FLOPs only on FFN experts, k * E / (E + Z) of them on
    # average under uniform routing (the count is data-dependent; this is its expectation).
    moe_zero_experts: int = 0
    # transformers' LongcatFlashExperts allocates gate/up weights for the zero experts too
    # (never used): parameters and weight memory, never read
    moe_zero_experts_hold_weights: bool = False
    # Latent MoE (Nemotron-3 Super / Ultra; transformers NemotronHMoE with moe_latent_size):
    # the routed experts run in a latent space this wide. Per token, fc1_latent_proj
    # [hidden x latent] before the experts and fc2_latent_proj [latent x hidden] after them
    # (biases as mlp_bias); the experts' projections are latent wide, and expert-parallel
    # dispatch / combine carry latent-wide vectors. The router and the shared experts read
    # the hidden state itself (model/variants.py latent_projection_ops). None: no latent space.
    moe_latent_dim: Optional[int] = None
    # Mixture of attention heads (JetMoE, arXiv 2404.07413): q_proj and o_proj are
    # `attn_experts` expert pairs of num_key_value_heads * head_dim each; a router
    # [hidden x attn_experts] picks moe_top_k of them per token, so n_head must equal
    # moe_top_k * num_key_value_heads. 0: ordinary attention.
    attn_experts: int = 0
    # DeepSeek sparse attention's lightning indexer (DeepSeek-V3.2-Exp report, 2025): per
    # layer wq_b [q_lora_rank x heads*dim], wk [hidden x dim] + LayerNorm(dim), weights_proj
    # [hidden x heads]; it scores every cached token and attention reads index_topk of them.
    # Set all three or none; needs MLA with q_lora_rank (the indexer reads q's latent).
    index_n_heads: Optional[int] = None
    index_head_dim: Optional[int] = None
    index_topk: Optional[int] = None
    # which layers hold an indexer (GLM-5.2's IndexCache sharing, arXiv 2603.12201; transformers
    # GlmMoeDsaAttention): True runs its own ("full"), False reuses the top-k of the nearest
    # earlier True layer ("shared": no indexer weights, FLOPs or indexer key cache; attention
    # still reads index_topk keys). None: every layer has one. Needs the indexer fields; the
    # first entry must be True (a shared layer needs an earlier selection).
    layer_indexer: Optional[List[bool]] = None
    # --- mixers: layers whose `layer_types` entry is "mamba" (Mamba-1 selective SSM,
    # arXiv 2312.00752), "mamba2" (SSD, arXiv 2405.21060), "short_conv" (LFM2's gated
    # depthwise convolution), "gated_delta_net" (Gated DeltaNet, arXiv 2412.06464; Qwen3-Next) or
    # "kda" (Kimi Delta Attention, arXiv 2510.26692) run that mixer instead of attention
    # (model/mixers.py) ----
    ssm_inner_dim: Optional[int] = None  # Mamba's d_inner (expand x hidden); default 2 x hidden_dim
    ssm_state_size: Optional[int] = None  # N: state per channel (Mamba-1) or per head channel (Mamba-2)
    ssm_dt_rank: Optional[int] = None  # Mamba-1 dt projection rank; default ceil(hidden_dim / 16)
    ssm_num_heads: Optional[int] = None  # Mamba-2 heads (ssm_inner_dim = heads x head width)
    ssm_num_groups: int = 1  # Mamba-2 groups sharing B and C
    ssm_chunk_size: int = 256  # Mamba-2 SSD chunk length (the eager scan pads to a multiple)
    ssm_dt_bc_norms: bool = False  # Mamba-1 with RMSNorms on dt, B and C (Jamba)
    ssm_gated_norm: bool = True  # Mamba-2's gated RMSNorm (ssm_inner_dim weights) before out_proj
    mixer_conv_kernel: int = 4  # width of the causal depthwise convolution (d_conv, LFM2 L_cache)
    mixer_conv_bias: bool = True  # bias of that convolution
    # bytes per element of the recurrent state (Mamba SSM / delta-rule state, not the conv state) when the
    # model fixes its dtype (Nemotron-H's mamba_ssm_cache_dtype, which vLLM follows); None: the KV cache's
    ssm_state_dtype_bytes: Optional[float] = None
    mixer_proj_bias: bool = False  # bias of the mixer's in_proj and out_proj
    gdn_num_key_heads: Optional[int] = None  # gated delta net: query/key heads
    gdn_num_value_heads: Optional[int] = None  # value heads (a multiple of the key heads)
    gdn_key_head_dim: Optional[int] = None
    gdn_value_head_dim: Optional[int] = None
    gdn_chunk_size: int = 64  # chunk of the chunked delta rule (the eager form pads to a multiple)
    kda_gate_rank: Optional[int] = None  # KDA: rank of the low-rank forget-gate and output-gate projections
    # False: a layer is norm + sequence mixer only, no MLP (Mamba, Mamba-2); layer_types
    # "mlp" layers still hold theirs (Nemotron-H: each layer is one block)
    layer_mlp: bool = True
    # every mixer layer also runs attention on the same normed input, the outputs summed (Falcon-H1)
    mixer_parallel_attention: bool = False

    # --- norms, embeddings, block layout ------------------------------------
    norm_type: Literal["layernorm", "rmsnorm"] = "layernorm"
    norm_bias: bool = True  # LayerNorm has a bias; set False for RMSNorm / bias-free LN
    norm_affine: bool = True  # False: the block norms hold no weights at all (OLMo's LayerNorm)
    num_norms_per_layer: Optional[int] = None  # default 2 (1 when parallel_attn_mlp)
    final_norm: bool = True  # a norm after the last layer
    final_norm_bias: Optional[bool] = None  # the final norm's bias if not norm_bias (ESM C: none)
    embedding_norm: bool = False  # a norm right after the embeddings (BLOOM, BERT)
    # sinusoidal (XGLM, Whisper-style fixed tables) and alibi hold no parameters
    position_embedding_type: Literal["learned", "rotary", "alibi", "sinusoidal", "none"] = "learned"
    num_position_embeddings: Optional[int] = None  # rows of a learned table; default max_seq_len
    rope_scaling: RopeScaling = None  # as HF declares it (minus rope_theta); named past max_seq_len
    type_vocab_size: int = 0  # BERT token-type embeddings
    embedding_dim: Optional[int] = None  # word-embedding width if != hidden (OPT-350m: in/out projections)
    embedding_proj_bias: bool = False  # the embedding -> hidden projection has a bias (ELECTRA, ALBERT)
    # position and token-type embeddings and the embedding norm are embedding_dim wide,
    # projected to hidden after the norm (ELECTRA, ALBERT), not hidden wide (OPT-350m)
    factorized_embeddings: bool = False
    # more lookup tables, (rows, width) each, whose weights are parameters: LayoutLM's 2-D
    # box positions, MPNet's relative-position buckets [buckets x heads], RoFormer's stored
    # sinusoid table [positions x head_dim], XLM's language table (schema_encoders.py)
    extra_embedding_tables: List[Tuple[int, int]] = []
    # LUKE's entity tables and entity-aware query projections: parameters the analysed
    # word-token phases never run (schema_encoders.EntityInputs)
    entity_inputs: Optional[EntityInputs] = None
    # input width of an embedding -> hidden projection that exists whatever the widths: the
    # word embedding's (ALBERT, RemBERT), or its concatenation with other lookups (RoC-BERT's
    # map_inputs_layer); None: a projection only when embedding_dim differs from hidden
    embedding_proj_in_dim: Optional[int] = None
    tie_word_embeddings: bool = True  # the mirrored system always assumed tied
    lm_head: bool = True  # False for encoder-only bases (no output projection)
    lm_head_bias: bool = False  # GPT-J's lm_head has a bias
    # a transform before the LM head: Linear(hidden, hidden) (with a bias: "dense_bias"),
    # activation, norm (BERT's MLM head, ModernBERT-decoder's lm_head)
    lm_head_transform: Literal["none", "dense", "dense_bias"] = "none"
    pooler: bool = False  # BERT pooler: Linear(hidden, hidden) with bias
    parallel_attn_mlp: bool = False  # GPT-J / GPT-NeoX / Falcon: attention and MLP read the same input
    # training stores Korthikanti's residual dropout masks; False where the model applies none (the Hub
    # import reads the configuration's probability: LLaMA / Qwen / Mistral have none; docs/training.md)
    hidden_dropout: bool = True
    encoder_only: bool = False  # bidirectional attention, no generation / KV cache
    # layers holding their own weights when the stack reuses them (ALBERT): num_layers layer
    # executions run over this many distinct layers; None: every layer has its own
    num_unique_layers: Optional[int] = None
    first_layer_attn_norm: bool = True  # False: layer 0 has no norm before attention (ModernBERT)
    # --- cross-attention (the decoder of an encoder-decoder model: BART, Whisper, ...) ----
    # every layer also attends to the encoder's output: its own norm, q from the decoder
    # tokens, k/v projected from the encoder output once per request (the cross KV cache),
    # an output projection; biases as the self-attention's (model/cross_attention.py)
    cross_attention: bool = False
    cross_attention_dim: Optional[int] = None  # width of the encoder output; default hidden_dim
    source: str = ""  # where the numbers come from (Hub id, paper)
    # the weight format of the released checkpoint, as its config.json's quantization_config states it
    # (gpt-oss: mxfp4; NVIDIA's ModelOpt releases: nvfp4; block-scaled releases: fp8); None: unstated or
    # 16-bit. It decides what the generic data-type word "fp4" means for this model (catalogue/lookup.py
    # dtype_for_setup); the counts read it only beside checkpoint_quantized_weights below
    checkpoint_weight_format: Optional[Literal["fp8", "nvfp4", "mxfp4"]] = None
    # which weights that format covers: "all", or "routed_experts" only (gpt-oss: its quantization_config's
    # modules_to_not_convert keeps attention, router, embeddings and LM head in bf16). When a run's weight
    # dtype is the checkpoint's format, the weights it does not cover are counted at 16 bits
    # (model/checkpoint_weights.py)
    checkpoint_quantized_weights: Literal["all", "routed_experts"] = "all"

    # --- dense decoder variants (issue 14); the defaults leave every other model as it was
    # learned scalars inside the MLP activation, per layer (xIELU, Apertus: alpha_p, alpha_n)
    mlp_act_params: int = 0
    # BitNet b1.58 sub-norms (arXiv 2402.17764; BitNetAttention/BitNetMLP): a norm over the
    # attention output before o_proj and one over the MLP hidden before down_proj
    sub_norms: bool = False
    # Differential attention (arXiv 2410.05258, DiffLlama): four [head_dim] lambda vectors
    # per layer; transformers runs the attention core twice (once per half of the values)
    differential_attention: bool = False
    # Doge's dynamic mask (DogeAttention): dt_proj [kv_heads*head_dim -> kv_heads] over the
    # cached values and one learned A per KV head
    attn_dynamic_mask: bool = False
    residual_scale_vectors: int = 0  # learned [hidden] residual weights per layer (Doge: 2)
    embedding_vocab_size: Optional[int] = None  # input-embedding rows if != vocab_size (Moshi)
    # only the last layer's attention output projection has a bias (GPT-NeoX-Japanese)
    last_layer_attn_out_bias: bool = False
    # per-layer widths, one entry per layer (None: head_dim / ffn_embed_dim everywhere);
    # layers of equal widths share one LayerKind (model/records.py layer_groups)
    layer_head_dims: Optional[List[int]] = None  # attention head width (Gemma 4 per_layer_config)
    layer_ffn_dims: Optional[List[int]] = None  # dense MLP width (Gemma 3n intermediate_size list)
    # per-layer embeddings (Gemma 4 / Gemma 3n "PLE"): a [per_layer_input_vocab_size x
    # num_layers*per_layer_input_dim] table, a projection of the embeddings to it and a norm;
    # in every layer a gate [hidden -> dim], a projection [dim -> hidden] and a norm
    per_layer_input_dim: int = 0
    per_layer_input_vocab_size: Optional[int] = None  # default vocab_size
    # Gemma 3n (Gemma3nTextDecoderLayer): AltUp over this many residual streams (arXiv
    # 2301.13310; 0 = none), LAuReL low-rank residual of this rank (arXiv 2411.07501; 0 =
    # none), and the last kv_shared_layers layers reuse an earlier layer's keys and values
    altup_num_inputs: int = 0
    laurel_rank: int = 0
    kv_shared_layers: int = 0
    # per-layer key/value heads and attention sinks (MiMo-V2-Flash: sliding layers have twice
    # the KV heads and a sink logit per head); None: num_key_value_heads / attn_sinks everywhere
    layer_kv_heads: Optional[List[int]] = None
    layer_attn_sinks: Optional[List[bool]] = None
    # per layer: the layer has no v_proj, its values are the key projection's output (Gemma 4's
    # attention_k_eq_v on full-attention layers: v = v_norm(k_proj(x)) while k = rope(k_norm(k_proj(x))),
    # so keys and values still differ and both are cached); None: every layer projects its values
    layer_values_from_keys: Optional[List[bool]] = None
    # Gemma 4's router (Gemma4TextRouter): a learned [hidden] scale on its normed input and a learned
    # [moe_num_experts] scale on the top-k weights, beside the projection [hidden x experts]
    moe_router_scales: bool = False
    # the vision encoder and projector of a vision-language model (schema/vision_tower.py)
    vision_tower: Optional[VisionTower] = None

    @model_validator(mode="after")
    def _fill_and_check(self) -> "ModelConfig":
        # the order of the checks decides which error a config with several faults gets
        self._check_signs()
        self._fill_heads()
        self._fill_widths()
        self._check_layout()
        self._check_dense_variants()
        self._check_mixers()
        check_encoder_fields(self)
        check_layer_attention_fields(self)
        self._check_latent_moe()
        self._check_state_dtype()
        self._check_checkpoint_quantized_weights()
        return self

    def _check_signs(self) -> None:
        self._positive("num_layers", "n_head", "hidden_dim", "vocab_size", "max_seq_len",
                       "num_key_value_heads", "ffn_embed_dim", "expansion_ratio", "moe_num_experts",
                       "moe_top_k", "head_dim", "sliding_window", "q_lora_rank", "kv_lora_rank",
                       "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "moe_ffn_embed_dim",
                       "moe_shared_expert_ffn_dim", "moe_layer_freq", "num_position_embeddings",
                       "embedding_dim", "num_norms_per_layer", "num_key_value_groups",
                       "cross_attention_dim", "embedding_vocab_size", "per_layer_input_vocab_size",
                       "index_n_heads", "index_head_dim", "index_topk",
                       "ssm_inner_dim", "ssm_state_size", "ssm_dt_rank", "ssm_num_heads", "ssm_num_groups",
                       "ssm_chunk_size", "mixer_conv_kernel", "gdn_num_key_heads", "gdn_num_value_heads",
                       "gdn_key_head_dim", "gdn_value_head_dim", "gdn_chunk_size", "kda_gate_rank",
                       "embedding_proj_in_dim", "adapter_dim", "num_adapters")
        self._positive("moe_num_shared_experts", "moe_first_dense_layers", "type_vocab_size",
                       "mlp_act_params", "residual_scale_vectors", "per_layer_input_dim",
                       "altup_num_inputs", "laurel_rank", "kv_shared_layers", "attn_experts",
                       "moe_zero_experts", lo_open=False)

    def _fill_heads(self) -> None:
        """Key/value heads (MHA by default, or from the group count) and head_dim."""
        if self.num_key_value_heads is None:
            if self.num_key_value_groups is not None:
                if self.n_head % self.num_key_value_groups:
                    raise ValueError(
                        f"field 'num_key_value_groups' = {self.num_key_value_groups} must divide "
                        f"n_head = {self.n_head}")
                self.num_key_value_heads = self.n_head // self.num_key_value_groups
            else:
                self.num_key_value_heads = self.n_head
        if self.n_head % self.num_key_value_heads:
            raise ValueError(
                f"n_head = {self.n_head} is not divisible by num_key_value_heads = "
                f"{self.num_key_value_heads}; valid num_key_value_heads are the divisors of "
                f"{self.n_head}: {[d for d in range(1, self.n_head + 1) if self.n_head % d == 0]}")
        self.num_key_value_groups = self.n_head // self.num_key_value_heads
        if self.head_dim is None:
            if self.hidden_dim % self.n_head:
                raise ValueError(
                    f"hidden_dim = {self.hidden_dim} is not divisible by n_head = {self.n_head}; "
                    "give head_dim explicitly")
            self.head_dim = self.hidden_dim // self.n_head

    def _fill_widths(self) -> None:
        """Defaults that cannot fail: MLP width and ratio, norms per layer, position rows."""
        if self.ffn_embed_dim is None:
            ratio = self.expansion_ratio if self.expansion_ratio is not None else 4
            self.ffn_embed_dim = int(round(ratio * self.hidden_dim))
        if self.expansion_ratio is None:
            self.expansion_ratio = self.ffn_embed_dim / self.hidden_dim
        if self.num_norms_per_layer is None:
            self.num_norms_per_layer = 1 if self.parallel_attn_mlp else 2
        if self.position_embedding_type == "learned" and self.num_position_embeddings is None:
            if self.max_seq_len is not None:
                self.num_position_embeddings = self.max_seq_len

    def _check_layout(self) -> None:
        """Experts, per-layer attention kinds and MLA shapes agree with each other."""
        if self.moe_top_k > self.moe_num_experts:
            raise ValueError(
                f"field 'moe_top_k' = {self.moe_top_k} must be <= moe_num_experts = {self.moe_num_experts}")
        if self.layer_types is not None:
            if len(self.layer_types) != self.num_layers:
                raise ValueError(
                    f"field 'layer_types' has {len(self.layer_types)} entries; it must have one per "
                    f"layer (num_layers = {self.num_layers})")
            if "sliding_attention" in self.layer_types and self.sliding_window is None:
                raise ValueError("field 'layer_types' names sliding_attention layers but "
                                 "'sliding_window' is not set")
        if self.sliding_window_chunked and self.sliding_window is None:
            raise ValueError("field 'sliding_window_chunked' = True needs the chunk length in "
                             "'sliding_window' (and the chunked layers as sliding_attention in layer_types)")
        if self.moe_eager_all_experts and self.moe_num_experts <= 1:
            raise ValueError(f"field 'moe_eager_all_experts' = True needs routed experts (moe_num_experts > 1, "
                             f"got {self.moe_num_experts}): set it False")
        if self.is_mla:
            missing = [f for f in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
                       if getattr(self, f) is None]
            if missing:
                raise ValueError(f"multi-head latent attention (kv_lora_rank set) needs {missing}")
        if self.cross_attention_dim is not None and not self.cross_attention:
            raise ValueError(f"field 'cross_attention_dim' = {self.cross_attention_dim} is set but "
                             "'cross_attention' is False; set cross_attention=True or drop the width")
        if self.cross_attention and self.encoder_only:
            raise ValueError("fields 'cross_attention' and 'encoder_only' are both True; cross-attention "
                             "belongs to the decoder of an encoder-decoder model")
        self._check_variants()
        if self.moe_first_dense_layers > self.num_layers:
            raise ValueError(f"field 'moe_first_dense_layers' = {self.moe_first_dense_layers} "
                             f"exceeds num_layers = {self.num_layers}")

    def _check_dense_variants(self) -> None:
        """The dense-variant fields describe what they can (model/dense_variants.py)."""
        if self.is_moe and (self.sub_norms or self.mlp_act_params):
            raise ValueError("fields 'sub_norms' and 'mlp_act_params' describe a dense MLP; "
                             f"moe_num_experts = {self.moe_num_experts}: set them False / 0")
        for f in ("layer_head_dims", "layer_ffn_dims"):
            widths = getattr(self, f)
            if widths is None:
                continue
            if len(widths) != self.num_layers or any(not 0 < w <= _lim.MAX_DIM for w in widths):
                raise ValueError(f"field '{f}' = {widths!r} must hold one width in 1..{_lim.MAX_DIM} per layer "
                                 f"(num_layers = {self.num_layers})")
        if self.kv_shared_layers >= self.num_layers or (self.kv_shared_layers and self.is_mla):
            raise ValueError(f"field 'kv_shared_layers' = {self.kv_shared_layers}: the layers reusing "
                             "keys and values need an earlier multi-head attention layer "
                             f"(num_layers = {self.num_layers})")
        if self.layer_head_dims is not None and self.is_mla:
            raise ValueError("field 'layer_head_dims' describes multi-head attention, not MLA "
                             "(kv_lora_rank is set)")
        if self.layer_ffn_dims is not None and self.is_moe:
            raise ValueError("field 'layer_ffn_dims' describes dense MLPs; "
                             f"moe_num_experts = {self.moe_num_experts}")
        if (self.embedding_vocab_size not in (None, self.vocab_size) and self.tie_word_embeddings
                and self.lm_head):
            raise ValueError(f"field 'embedding_vocab_size' = {self.embedding_vocab_size} differs from "
                             f"vocab_size = {self.vocab_size} but the embeddings are tied (one matrix): "
                             "set tie_word_embeddings=False or embedding_vocab_size=None")

    def _check_variants(self) -> None:
        """The variant fields agree: the indexer's three fields come together, on MLA with a
        q latent; a gate bias needs a gate, zero experts routed ones; attention experts fit
        the head counts."""
        if self.qk_norm_across_heads and not (self.qk_norm and self.qk_norm_per_head):
            raise ValueError("field 'qk_norm_across_heads' = True describes q/k norms whose weights span "
                             "every head: set qk_norm=True and qk_norm_per_head=True")
        index = {f: getattr(self, f) for f in ("index_n_heads", "index_head_dim", "index_topk")}
        given = [f for f, v in index.items() if v is not None]
        if given and len(given) != len(index):
            raise ValueError(f"fields {sorted(index)} describe one indexer: set all of them or none "
                             f"(got {index})")
        if self.attn_output_gate_head_bias and self.attn_output_gate == "none":
            raise ValueError("field 'attn_output_gate_head_bias' = True needs an attention output gate: "
                             "set attn_output_gate to 'per_element' or 'per_head'")
        if self.moe_zero_experts and not self.is_moe:
            raise ValueError(f"field 'moe_zero_experts' = {self.moe_zero_experts} needs routed experts "
                             "(moe_num_experts > 1)")
        if self.attn_experts and (self.is_mla or self.moe_top_k > self.attn_experts
                                  or self.moe_top_k * self.num_key_value_heads != self.n_head):
            raise ValueError(f"field 'attn_experts' = {self.attn_experts}: attention experts need "
                             f"moe_top_k ({self.moe_top_k}) <= attn_experts and n_head ({self.n_head}) = "
                             f"moe_top_k x num_key_value_heads ({self.num_key_value_heads}), without MLA")
        indexers = self.layer_indexer
        if indexers is not None and (not given or len(indexers) != self.num_layers or not indexers[0]):
            raise ValueError(f"field 'layer_indexer' = {indexers!r} must hold one entry per layer (num_layers = "
                             f"{self.num_layers}), the first True (a layer reusing the top-k of an earlier "
                             "indexer needs one before it), beside index_n_heads, index_head_dim and index_topk")
        if given and not (self.is_mla and self.q_lora_rank):
            raise ValueError(f"field 'index_n_heads' = {self.index_n_heads}: the lightning indexer reads "
                             "the query latent of multi-head latent attention; set kv_lora_rank and "
                             "q_lora_rank too")

    def _check_latent_moe(self) -> None:
        """A latent space for the routed experts needs routed experts, and a sane width."""
        if self.moe_latent_dim is None:
            return
        self._positive("moe_latent_dim")
        if self.moe_latent_dim > _lim.MAX_DIM:
            raise ValueError(f"field 'moe_latent_dim' = {self.moe_latent_dim} exceeds the sanity limit "
                             f"{_lim.MAX_DIM:g} (README 'Input limits')")
        if not self.is_moe:
            raise ValueError(f"field 'moe_latent_dim' = {self.moe_latent_dim} is the width the routed experts "
                             f"run in, but moe_num_experts = {self.moe_num_experts} (no routed experts): set "
                             "moe_num_experts > 1 or moe_latent_dim=None")

    def _check_checkpoint_quantized_weights(self) -> None:
        """Low-bit routed experts need a low-bit checkpoint format and routed experts."""
        if self.checkpoint_quantized_weights == "all":
            return
        if self.checkpoint_weight_format is None or not self.is_moe:
            raise ValueError(f"field 'checkpoint_quantized_weights' = {self.checkpoint_quantized_weights!r} says "
                             "only the routed experts are stored in the checkpoint's low-bit format, but "
                             f"checkpoint_weight_format = {self.checkpoint_weight_format!r} and moe_num_experts = "
                             f"{self.moe_num_experts}: it needs a format (fp8, nvfp4, mxfp4) and routed experts "
                             "(moe_num_experts > 1); else set it to 'all'")

    def _check_state_dtype(self) -> None:
        """A recurrent-state dtype needs mixer layers that keep a state, and a real dtype width."""
        width = self.ssm_state_dtype_bytes
        if width is None:
            return
        if width not in (1, 2, 4, 8):
            raise ValueError(f"field 'ssm_state_dtype_bytes' = {width!r} must be 1, 2, 4 or 8 (bytes per element "
                             "of the recurrent state) or None (the KV cache's dtype)")
        if not self.mixer_kinds - {"short_conv"}:
            raise ValueError(f"field 'ssm_state_dtype_bytes' = {width!r} sizes a recurrent state, but layer_types "
                             "holds no mamba / mamba2 / gated_delta_net / kda layer: set it to None")

    def _check_mixers(self) -> None:
        """Mixer shapes: what each mixer kind in `layer_types` needs, filled or refused."""
        kinds = self.mixer_kinds
        if not self.has_mlp_layers and self.is_moe:
            raise ValueError("field 'layer_mlp' = False (layers without an MLP) and no 'mlp' layer in "
                             f"layer_types contradicts moe_num_experts = {self.moe_num_experts}")
        if not kinds:
            return
        if {"mamba", "mamba2"} & kinds:
            if self.ssm_state_size is None:
                raise ValueError(f"layer_types names {sorted(kinds)} layers: field 'ssm_state_size' "
                                 "(the SSM state size N) is required")
            if self.ssm_inner_dim is None:
                self.ssm_inner_dim = 2 * self.hidden_dim
        if "mamba" in kinds and self.ssm_dt_rank is None:
            self.ssm_dt_rank = -(-self.hidden_dim // 16)
        if "mamba2" in kinds:
            heads, groups = self.ssm_num_heads, self.ssm_num_groups
            if heads is None or self.ssm_inner_dim % heads:
                raise ValueError(f"field 'ssm_num_heads' = {heads!r} must be set and divide ssm_inner_dim = "
                                 f"{self.ssm_inner_dim} (Mamba-2 heads share the inner width)")
            if heads % groups:
                raise ValueError(f"field 'ssm_num_groups' = {groups} must divide ssm_num_heads = {heads}")
        if {"gated_delta_net", "kda"} & kinds:
            self._check_gated_delta_net()
        if "kda" in kinds and (self.kda_gate_rank is None or self.gdn_num_key_heads != self.gdn_num_value_heads):
            raise ValueError(f"kda layers need field 'kda_gate_rank' (got {self.kda_gate_rank!r}) and as many key "
                             f"as value heads (gdn_num_key_heads = {self.gdn_num_key_heads}, gdn_num_value_heads = "
                             f"{self.gdn_num_value_heads})")

    def _check_gated_delta_net(self) -> None:
        fields = ("gdn_num_key_heads", "gdn_num_value_heads", "gdn_key_head_dim", "gdn_value_head_dim")
        missing = [f for f in fields if getattr(self, f) is None]
        if missing:
            raise ValueError(f"layer_types names delta-rule (gated_delta_net / kda) layers: fields {missing} "
                             "are required")
        if self.gdn_num_value_heads % self.gdn_num_key_heads:
            raise ValueError(f"field 'gdn_num_value_heads' = {self.gdn_num_value_heads} must be a multiple of "
                             f"gdn_num_key_heads = {self.gdn_num_key_heads} (each key head serves whole value heads)")

    # --- derived views (no arithmetic beyond shapes) ------------------------
    @property
    def mixer_kinds(self) -> set:
        """The mixer kinds (MIXER_LAYER_TYPES) some layer uses; empty for pure attention."""
        return set(self.layer_types or ()) & set(MIXER_LAYER_TYPES)

    @property
    def has_attention(self) -> bool:
        """Whether some layer attends (False for pure state-space models)."""
        return (self.layer_types is None or self.mixer_parallel_attention
                or any(t not in MIXER_LAYER_TYPES + ("mlp",) for t in self.layer_types))

    @property
    def has_mlp_layers(self) -> bool:
        """Whether some layer holds an MLP (dense or experts)."""
        return self.layer_mlp or "mlp" in (self.layer_types or ())

    def layer_has_mlp(self, layer_idx: int) -> bool:
        return self.layer_mlp or self.layer_attention_type(layer_idx) == "mlp"

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def is_moe(self) -> bool:
        return self.moe_num_experts > 1

    def is_moe_layer(self, layer_idx: int) -> bool:
        """Whether layer `layer_idx` (0-based) has routed experts (a layer without an MLP never)."""
        if not self.is_moe or layer_idx < self.moe_first_dense_layers or not self.layer_has_mlp(layer_idx):
            return False
        return (layer_idx - self.moe_first_dense_layers) % self.moe_layer_freq == 0

    def layer_attention_type(self, layer_idx: int) -> str:
        if self.layer_types is not None:
            return self.layer_types[layer_idx]
        return "sliding_attention" if self.sliding_window is not None else "full_attention"

    @property
    def has_indexer(self) -> bool:
        return self.index_topk is not None

    def layer_has_indexer(self, layer_idx: int) -> bool:
        """Whether layer `layer_idx` runs its own indexer (False: none, or it reuses an
        earlier layer's top-k selection)."""
        return self.has_indexer and (self.layer_indexer is None or self.layer_indexer[layer_idx])

    @property
    def expert_io_dim(self) -> int:
        """Width of a routed expert's input and output: the latent width of a latent MoE,
        else the hidden width."""
        return self.moe_latent_dim or self.hidden_dim

    @property
    def expert_ffn_dim(self) -> int:
        return self.moe_ffn_embed_dim or self.ffn_embed_dim

    @property
    def shared_expert_ffn_dim(self) -> int:
        return self.moe_shared_expert_ffn_dim or self.expert_ffn_dim

    @property
    def encoder_output_dim(self) -> int:
        """Width of the encoder states the cross-attention K/V projections read."""
        return self.cross_attention_dim or self.hidden_dim

    @property
    def key_bias(self) -> bool:
        return self.qkv_bias if self.k_proj_bias is None else self.k_proj_bias

    @property
    def word_embedding_dim(self) -> int:
        return self.embedding_dim or self.hidden_dim
