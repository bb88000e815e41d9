"""`ModelConfig`: the shapes of a transformer language model, validated (pydantic v2).

Architecture families are *data* here (fields of ModelConfig), never branches on a
model's name in the analysis."""

from __future__ import annotations

from typing import List, Literal, Optional, Tuple

from pydantic import model_validator

from .context_limit import RopeScaling
from .schema_base import StrictModel
from .schema_encoders import RelativeAttention, check_encoder_fields

__all__ = ["ModelConfig", "AttentionLayerType"]

AttentionLayerType = Literal["full_attention", "sliding_attention"]


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
    model_type: Optional[str] = None  # informational (the HF model_type); never branched on
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
    qk_norm_bias: bool = False  # the q/k norms are LayerNorms with a bias (Persimmon, Phi)
    attn_sinks: bool = False  # one learned sink logit per head (gpt-oss)
    relative_attention: Optional[RelativeAttention] = None  # DeBERTa-v2 disentangled attention
    # Sliding-window attention: the window, and which layers use it. When
    # `sliding_window` is set and `layer_types` is None, every layer slides
    # (Mistral 7B v0.1); `layer_types` lists each layer explicitly otherwise.
    sliding_window: Optional[int] = None
    layer_types: Optional[List[AttentionLayerType]] = None

    # --- multi-head latent attention (DeepSeek-V2/V3, arXiv 2405.04434) -----
    q_lora_rank: Optional[int] = None  # None: q is projected directly from hidden
    kv_lora_rank: Optional[int] = None  # set => MLA; the KV cache holds this latent
    qk_nope_head_dim: Optional[int] = None
    qk_rope_head_dim: Optional[int] = None
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
    hidden_dropout: bool = True  # training stores Korthikanti's dropout masks; LLaMA / MPT use none (False)
    encoder_only: bool = False  # bidirectional attention, no generation / KV cache
    # layers holding their own weights when the stack reuses them (ALBERT): num_layers layer
    # executions run over this many distinct layers; None: every layer has its own
    num_unique_layers: Optional[int] = None
    first_layer_attn_norm: bool = True  # False: layer 0 has no norm before attention (ModernBERT)
    # --- cross-attention (the decoder of an encoder-decoder model: BART, Whisper, ...) ----
    # every layer also attends to the encoder's output: its own norm, q from the decoder
    # tokens, k/v projected from the encoder output once per request (the cross KV cache),
    # an output projection; biases as the self-attention's (operators/cross_attention.py)
    cross_attention: bool = False
    cross_attention_dim: Optional[int] = None  # width of the encoder output; default hidden_dim
    source: str = ""  # where the numbers come from (Hub id, paper)

    @model_validator(mode="after")
    def _fill_and_check(self) -> "ModelConfig":
        # the order of the checks decides which error a config with several faults gets
        self._check_signs()
        self._fill_heads()
        self._fill_widths()
        self._check_layout()
        check_encoder_fields(self)
        return self

    def _check_signs(self) -> None:
        self._positive("num_layers", "n_head", "hidden_dim", "vocab_size", "max_seq_len",
                       "num_key_value_heads", "ffn_embed_dim", "expansion_ratio", "moe_num_experts",
                       "moe_top_k", "head_dim", "sliding_window", "q_lora_rank", "kv_lora_rank",
                       "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "moe_ffn_embed_dim",
                       "moe_shared_expert_ffn_dim", "moe_layer_freq", "num_position_embeddings",
                       "embedding_dim", "num_norms_per_layer", "num_key_value_groups",
                       "cross_attention_dim")
        self._positive("moe_num_shared_experts", "moe_first_dense_layers", "type_vocab_size", lo_open=False)

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
        if self.moe_first_dense_layers > self.num_layers:
            raise ValueError(f"field 'moe_first_dense_layers' = {self.moe_first_dense_layers} "
                             f"exceeds num_layers = {self.num_layers}")

    # --- derived views (no arithmetic beyond shapes) ------------------------
    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def is_moe(self) -> bool:
        return self.moe_num_experts > 1

    def is_moe_layer(self, layer_idx: int) -> bool:
        """Whether layer `layer_idx` (0-based) has routed experts."""
        if not self.is_moe or layer_idx < self.moe_first_dense_layers:
            return False
        return (layer_idx - self.moe_first_dense_layers) % self.moe_layer_freq == 0

    def layer_attention_type(self, layer_idx: int) -> str:
        if self.layer_types is not None:
            return self.layer_types[layer_idx]
        return "sliding_attention" if self.sliding_window is not None else "full_attention"

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
