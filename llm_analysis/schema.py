"""The configuration schema: pydantic v2 models of a model, a GPU, data types and a
parallelism layout, and building them from dicts and JSON files with readable errors.

Every config rejects unknown fields and validates sizes; errors are `llm_analysis.errors.ConfigError`
naming field, value, what is valid and (when loading a file) the file. Architecture families are
*data* here (fields of ModelConfig), never branches on a model's name in the analysis. A leaf of the
data layer: it imports only leaves and `context_limit` (and pydantic).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from . import options as _lim
from .context_limit import RopeScaling
from .errors import ConfigError
from .formats import FP4_FORMATS
from .hsdp import hsdp_sizes

__all__ = ["ModelConfig", "GPUConfig", "DtypeConfig", "ParallelismConfig", "AttentionLayerType",
           "build_config", "load_config_file"]


class _StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False, frozen=False)

    def __init__(self, /, **data: Any) -> None:
        # Direct construction (ModelConfig(...)) raises ConfigError too, not pydantic's
        # ValidationError; build_config re-formats it with the file name.
        try:
            super().__init__(**data)
        except ValidationError as err:
            exc = ConfigError(_format_validation_error(type(self).__name__, err, None, type(self)))
            exc.validation_error = err
            raise exc from None

    def _positive(self, *fields: str, allow_none: bool = True, lo_open: bool = True) -> None:
        """Each field finite, > 0 (>= 0 with lo_open=False) and within its sanity
        limit (`_LIMITS`, from options.MAX_*; README 'Input limits')."""
        for f in fields:
            v = getattr(self, f)
            if v is None and allow_none:
                continue
            if v is None or not math.isfinite(v) or v < 0 or (lo_open and v == 0):
                raise ValueError(f"field {f!r} = {v!r} must be a finite {'positive' if lo_open else 'non-negative'} "
                                 "number")
            hi = _LIMITS.get(f)
            if hi is not None and v > hi:
                raise ValueError(f"field {f!r} = {v!r} exceeds the sanity limit {hi:g} (README 'Input limits')")

    def to_dict(self) -> Dict[str, Any]:
        return self.model_dump()


_LIMITS: Dict[str, float] = {
    **dict.fromkeys(("num_layers", "moe_first_dense_layers", "moe_layer_freq"), _lim.MAX_NUM_LAYERS),
    **dict.fromkeys(("hidden_dim", "vocab_size", "ffn_embed_dim", "head_dim", "q_lora_rank", "kv_lora_rank",
                     "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "moe_ffn_embed_dim",
                     "moe_shared_expert_ffn_dim", "embedding_dim", "type_vocab_size"), _lim.MAX_DIM),
    **dict.fromkeys(("n_head", "num_key_value_heads", "num_key_value_groups", "moe_num_experts", "moe_top_k",
                     "moe_num_shared_experts"), _lim.MAX_HEADS),
    "expansion_ratio": _lim.MAX_DIM, "num_norms_per_layer": _lim.MAX_NORMS_PER_LAYER,
    **dict.fromkeys(("max_seq_len", "sliding_window", "num_position_embeddings"), _lim.MAX_SEQ_LEN),
    "mem_per_GPU_in_GB": _lim.MAX_MEMORY_GB,
    **dict.fromkeys(("hbm_bandwidth_in_GB_per_sec", "intra_node_bandwidth_in_GB_per_sec",
                     "inter_node_bandwidth_in_GB_per_sec", "pcie_bandwidth_in_GB_per_sec"),
                    _lim.MAX_BANDWIDTH_GB_PER_S),
    **dict.fromkeys(("peak_fp16_TFLOPS", "peak_i8_TFLOPS", "peak_i4_TFLOPS", "peak_bf16_TFLOPS", "peak_fp8_TFLOPS",
                     "peak_tf32_TFLOPS", "peak_fp32_TFLOPS", "peak_fp4_TFLOPS"), _lim.MAX_TFLOPS),
    **dict.fromkeys(("nvlink_domain_size", "nics_per_node"), _lim.MAX_PARALLEL_SIZE),
    "nic_bandwidth_in_GB_per_sec": _lim.MAX_BANDWIDTH_GB_PER_S,
    **dict.fromkeys(("intra_node_min_message_latency", "inter_node_min_message_latency", "intra_node_hop_latency",
                     "inter_node_hop_latency"), _lim.MAX_SECONDS),
    **dict.fromkeys(("num_gpus_per_node", "fast_link_group_size", "tp_size", "pp_size", "dp_size", "ep_size",
                     "sp_size", "rdp_size"), _lim.MAX_PARALLEL_SIZE),
    "quant_group_size": _lim.MAX_DIM, "quant_scale_bits": 64,
}

AttentionLayerType = Literal["full_attention", "sliding_attention"]


class ModelConfig(_StrictModel):
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
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3, Gemma 3): 2*head_dim params
    # q/k norm weights for every head ([heads x head_dim]: OLMo-2's norm over all heads,
    # Cohere's and StableLM's per-head norms) instead of one [head_dim] shared by all heads
    qk_norm_per_head: bool = False
    qk_norm_bias: bool = False  # the q/k norms are LayerNorms with a bias (Persimmon, Phi)
    attn_sinks: bool = False  # one learned sink logit per head (gpt-oss)
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
    tie_word_embeddings: bool = True  # the mirrored system always assumed tied
    lm_head: bool = True  # False for encoder-only bases (no output projection)
    lm_head_bias: bool = False  # GPT-J's lm_head has a bias
    pooler: bool = False  # BERT pooler: Linear(hidden, hidden) with bias
    parallel_attn_mlp: bool = False  # GPT-J / GPT-NeoX / Falcon: attention and MLP read the same input
    hidden_dropout: bool = True  # training stores Korthikanti's dropout masks; LLaMA / MPT use none (False)
    encoder_only: bool = False  # bidirectional attention, no generation / KV cache
    source: str = ""  # where the numbers come from (Hub id, paper)

    @model_validator(mode="after")
    def _fill_and_check(self) -> "ModelConfig":
        # the order of the checks decides which error a config with several faults gets
        self._check_signs()
        self._fill_heads()
        self._fill_widths()
        self._check_layout()
        return self

    def _check_signs(self) -> None:
        self._positive("num_layers", "n_head", "hidden_dim", "vocab_size", "max_seq_len",
                       "num_key_value_heads", "ffn_embed_dim", "expansion_ratio", "moe_num_experts",
                       "moe_top_k", "head_dim", "sliding_window", "q_lora_rank", "kv_lora_rank",
                       "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "moe_ffn_embed_dim",
                       "moe_shared_expert_ffn_dim", "moe_layer_freq", "num_position_embeddings",
                       "embedding_dim", "num_norms_per_layer", "num_key_value_groups")
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
    def word_embedding_dim(self) -> int:
        return self.embedding_dim or self.hidden_dim


class GPUConfig(_StrictModel):
    """One GPU model and the links around it.

    Units: `mem_per_GPU_in_GB` is decimal GB (10**9 bytes) as on the spec sheet;
    bandwidths are decimal GB/s *per direction per GPU*; peaks are dense TFLOP/s
    (never the 2:4-sparsity figures); `intra_node_min_message_latency` is seconds.
    """

    name: str
    mem_per_GPU_in_GB: float
    hbm_bandwidth_in_GB_per_sec: float
    intra_node_bandwidth_in_GB_per_sec: float
    intra_node_min_message_latency: float
    peak_fp16_TFLOPS: float
    # default 2x / 4x fp16 (as the mirrored system); 0 = no integer tensor units (the
    # mirrored system's V100 files): int8 / int4 GEMMs are refused on that GPU
    peak_i8_TFLOPS: Optional[float] = None
    peak_i4_TFLOPS: Optional[float] = None
    # per GPU per direction: one 200 Gb/s HDR InfiniBand NIC per GPU = 25 GB/s. (The mirrored
    # system used 200 as a per-node figure; ours is per GPU, so its files are 8x optimistic.)
    inter_node_bandwidth_in_GB_per_sec: float = 25
    peak_bf16_TFLOPS: Optional[float] = None  # None: the hardware has no bf16 tensor path
    peak_fp8_TFLOPS: Optional[float] = None  # None: no fp8 tensor cores
    peak_tf32_TFLOPS: Optional[float] = None
    peak_fp32_TFLOPS: Optional[float] = None  # non-tensor fp32
    peak_fp4_TFLOPS: Optional[float] = None  # NVFP4/MXFP4 dense; None: no FP4 tensor cores
    intra_node_link: Literal["nvlink", "pcie", "xgmi", "ici"] = "nvlink"  # ici: TPU torus
    num_gpus_per_node: int = 8  # GPUs per host / compute tray (a GB200 tray holds 4)
    # GPUs joined by the fast link, across nodes too: 72 for a GB200/GB300 NVL72 rack,
    # the ICI slice of a TPU. Default: fast_link_group_size (the node).
    nvlink_domain_size: Optional[int] = None
    # Network interface cards per node and the speed of one (per direction), for the
    # collective model; None: one per GPU at inter_node_bandwidth_in_GB_per_sec.
    nics_per_node: Optional[int] = None
    nic_bandwidth_in_GB_per_sec: Optional[float] = None
    # GPUs joined all-to-all by the fast link; larger groups fall back to PCIe
    # (A40: NVLink bridges join pairs only). Default: the whole node.
    fast_link_group_size: Optional[int] = None
    pcie_bandwidth_in_GB_per_sec: float = 32.0
    # Latency model of a collective: max(min message latency, bandwidth term +
    # hops x hop latency). The mirrored system's `intra_node_min_message_latency`
    # is the floor; a hop (one ring step) costs ~1 us over NVLink/PCIe P2P and
    # ~5 us over InfiniBand (NCCL LL protocol figures).
    inter_node_min_message_latency: float = 1e-05
    intra_node_hop_latency: float = 1e-06
    inter_node_hop_latency: float = 5e-06
    source: str = ""

    @model_validator(mode="after")
    def _fill_and_check(self) -> "GPUConfig":
        self._positive("mem_per_GPU_in_GB", "hbm_bandwidth_in_GB_per_sec",
                       "intra_node_bandwidth_in_GB_per_sec", "peak_fp16_TFLOPS",
                       "inter_node_bandwidth_in_GB_per_sec", "peak_bf16_TFLOPS",
                       "peak_fp8_TFLOPS", "peak_tf32_TFLOPS", "peak_fp32_TFLOPS", "peak_fp4_TFLOPS",
                       "num_gpus_per_node", "fast_link_group_size", "pcie_bandwidth_in_GB_per_sec",
                       "nvlink_domain_size", "nics_per_node", "nic_bandwidth_in_GB_per_sec")
        self._positive("peak_i8_TFLOPS", "peak_i4_TFLOPS", lo_open=False)  # 0 = no integer tensor units
        self._positive("intra_node_min_message_latency", "inter_node_min_message_latency", "intra_node_hop_latency",
                       "inter_node_hop_latency", lo_open=False)  # seconds
        if self.peak_i8_TFLOPS is None:
            self.peak_i8_TFLOPS = 2 * self.peak_fp16_TFLOPS
        if self.peak_i4_TFLOPS is None:
            self.peak_i4_TFLOPS = 4 * self.peak_fp16_TFLOPS
        if self.fast_link_group_size is None:
            self.fast_link_group_size = self.num_gpus_per_node
        if self.nvlink_domain_size is None:
            self.nvlink_domain_size = self.fast_link_group_size
        if self.nvlink_domain_size < self.fast_link_group_size:
            raise ValueError(f"field 'nvlink_domain_size' = {self.nvlink_domain_size} is smaller than "
                             f"fast_link_group_size = {self.fast_link_group_size}")
        return self


class DtypeConfig(_StrictModel):
    """Bits of weights, activations and embeddings; `*_format` tells fp8 from int8."""

    name: str = "w16a16e16"
    weight_bits: int = 16
    activation_bits: int = 16
    embedding_bits: int = 16
    # 8 bits + float = fp8, + int = int8; nvfp4 / mxfp4: block-scaled 4-bit floats
    # (formats.FP4_FORMATS), their block scales counted in the bytes per value
    weight_format: Literal["float", "int", "nvfp4", "mxfp4"] = "float"
    activation_format: Literal["float", "int", "nvfp4", "mxfp4"] = "float"
    # Weight-only quantization stores scales: one `quant_scale_bits` scale per
    # `quant_group_size` weights (e.g. 4-bit, group 128, fp16 scales). None = no overhead.
    # An FP4 weight format fills them from the format (NVFP4 16 x 8 bits, MXFP4 32 x 8).
    quant_group_size: Optional[int] = None
    quant_scale_bits: int = 16
    source: str = ""

    @model_validator(mode="after")
    def _check(self) -> "DtypeConfig":
        valid = (4, 8, 16, 32)
        for f in ("weight_bits", "activation_bits", "embedding_bits"):
            if getattr(self, f) not in valid:
                raise ValueError(f"field {f!r} = {getattr(self, f)!r} must be one of {valid}")
        self._positive("quant_group_size", "quant_scale_bits")
        if self.weight_format == "int" and self.weight_bits > 16:
            raise ValueError(f"field 'weight_format' = 'int' with weight_bits = {self.weight_bits}")
        self._check_block_formats()
        return self

    def _check_block_formats(self) -> None:
        for f, bits in (("weight_format", self.weight_bits), ("activation_format", self.activation_bits)):
            fmt = FP4_FORMATS.get(getattr(self, f))
            if fmt is not None and bits != fmt.element_bits:
                raise ValueError(f"field {f!r} = {getattr(self, f)!r} needs {f.split('_')[0]}_bits = "
                                 f"{fmt.element_bits}, got {bits}")
        if self.activation_format in FP4_FORMATS and self.weight_format != self.activation_format:
            raise ValueError(f"field 'activation_format' = {self.activation_format!r} needs the same "
                             f"weight_format (FP4 GEMMs take both operands in it), got {self.weight_format!r}")
        fmt = FP4_FORMATS.get(self.weight_format)
        if fmt is None:
            return
        if self.quant_group_size is None:
            self.quant_group_size, self.quant_scale_bits = fmt.block_size, fmt.scale_bits
        elif (self.quant_group_size, self.quant_scale_bits) != (fmt.block_size, fmt.scale_bits):
            raise ValueError(
                f"weight_format {self.weight_format!r} has one {fmt.scale_bits}-bit scale per "
                f"{fmt.block_size} values; got quant_group_size = {self.quant_group_size}, "
                f"quant_scale_bits = {self.quant_scale_bits}")

    @property
    def weight_bytes_per_param(self) -> float:
        """Bytes per stored weight including quantization-scale overhead."""
        overhead = self.quant_scale_bits / self.quant_group_size if self.quant_group_size else 0.0
        return (self.weight_bits + overhead) / 8

    @property
    def activation_bytes_per_element(self) -> float:
        """Bytes per activation value, with the block scales of an FP4 format."""
        fmt = FP4_FORMATS.get(self.activation_format)
        return (fmt.bits_per_value if fmt else self.activation_bits) / 8


class ParallelismConfig(_StrictModel):
    """GPUs = tp * cp * pp * dp (ranks TP, CP, PP, DP); experts over `ep_size` DP ranks (rdp = dp // ep);
    sp_size defaults to tp_size; cp_size / cp_comm: operators/context_parallel.py; HSDP dp_shard x
    dp_replicate = dp_size (hsdp.py); ZeRO shards over dp_shard x cp ranks (shard_group_size)."""

    tp_size: int = 1
    pp_size: int = 1
    dp_size: int = 1
    ep_size: int = 1
    sp_size: Optional[int] = None
    rdp_size: Optional[int] = None
    cp_size: int = 1
    cp_comm: Literal["ring", "all_to_all"] = "ring"
    dp_shard: Optional[int] = None
    dp_replicate: Optional[int] = None
    num_layers_in_first_pipeline_stage: Optional[int] = None  # uneven stages: operators/pipeline_layout.py
    num_layers_in_last_pipeline_stage: Optional[int] = None

    _hsdp = model_validator(mode="before")(classmethod(lambda cls, d: hsdp_sizes(d) if isinstance(d, dict) else d))

    @model_validator(mode="after")
    def _fill_and_check(self) -> "ParallelismConfig":
        self._positive("tp_size", "pp_size", "dp_size", "ep_size", "sp_size", "rdp_size", "cp_size",
                       "dp_shard", "dp_replicate")
        if self.sp_size is None:
            self.sp_size = self.tp_size
        if self.rdp_size is None:
            self.rdp_size = max(1, self.dp_size // self.ep_size)
        self.dp_shard, self.dp_replicate = self.dp_shard or self.dp_size, self.dp_replicate or 1  # HSDP: hsdp.py
        return self

    num_gpus = property(lambda self: self.tp_size * self.cp_size * self.pp_size * self.dp_size)
    shard_group_size = property(lambda self: self.dp_shard * self.cp_size)  # gradient reduction, ZeRO shards
    expert_shard_group_size = property(lambda s: max(1, s.rdp_size * s.dp_shard // s.dp_size) * s.cp_size)


# ---------------------------------------------------------------------------
# construction helpers with readable errors
# ---------------------------------------------------------------------------

def _format_validation_error(cls_name: str, err: ValidationError, source: str | None,
                             cls: Any = None) -> str:
    where = f" in {source}" if source else ""
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(config)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            valid = ", ".join((cls or _CLASSES[cls_name]).model_fields)
            msg = f"unknown field {loc!r} (value {e.get('input')!r}); valid fields are: {valid}"
        elif e["type"] == "missing":
            msg = f"required field {loc!r} is missing"
        elif loc != "(config)":
            msg = f"field {loc!r} = {e.get('input')!r}: {msg}"
        lines.append(msg)
    return f"Invalid {cls_name}{where}: " + "; ".join(lines)


def build_config(cls, data: Dict[str, Any], source: str | None = None):
    """Build a config from a dict, turning pydantic errors into one ConfigError."""
    try:
        return cls(**data)
    except ConfigError as err:
        if getattr(err, "validation_error", None) is None:
            raise
        raise ConfigError(_format_validation_error(cls.__name__, err.validation_error, source, cls)) from None
    except ValidationError as err:
        raise ConfigError(_format_validation_error(cls.__name__, err, source, cls)) from None
    except TypeError as err:
        raise ConfigError(f"Invalid {cls.__name__}{' in ' + source if source else ''}: {err}") from None


_CLASSES = {c.__name__: c for c in (ModelConfig, GPUConfig, DtypeConfig, ParallelismConfig)}


def load_config_file(cls, path: str | os.PathLike):
    from .utils import load_json_object
    path = Path(path)
    data = load_json_object(path, f"{cls.__name__} file {path}")
    return build_config(cls, data, source=str(path))
