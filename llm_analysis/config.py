"""Configuration data: model, GPU, data-type and parallelism configs, the JSON
catalogues shipped in the package, and lookup by name (catalogue, JSON path,
local model directory, Hugging Face Hub).

Every config is a pydantic v2 model that rejects unknown fields and validates
sizes; errors are `llm_analysis.errors.ConfigError` naming field, value, what is
valid and (when loading a file) the file.

Architecture families are *data* here (fields of ModelConfig), never branches on a
model's name in the analysis.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from .errors import ConfigError, unknown_name_error

logger = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent
MODEL_CONFIGS_DIR = PACKAGE_DIR / "model_configs"
GPU_CONFIGS_DIR = PACKAGE_DIR / "gpu_configs"
DTYPE_CONFIGS_DIR = PACKAGE_DIR / "dtype_configs"


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

    def _positive(self, *fields: str, allow_none: bool = True) -> None:
        for f in fields:
            v = getattr(self, f)
            if v is None and allow_none:
                continue
            if v is None or v <= 0:
                raise ValueError(f"field {f!r} = {v!r} must be a positive number")

    def to_dict(self) -> Dict[str, Any]:
        return self.model_dump()


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
    num_norms_per_layer: Optional[int] = None  # default 2 (1 when parallel_attn_mlp)
    final_norm: bool = True  # a norm after the last layer
    embedding_norm: bool = False  # a norm right after the embeddings (BLOOM, BERT)
    position_embedding_type: Literal["learned", "rotary", "alibi", "none"] = "learned"
    num_position_embeddings: Optional[int] = None  # rows of a learned table; default max_seq_len
    type_vocab_size: int = 0  # BERT token-type embeddings
    embedding_dim: Optional[int] = None  # word-embedding width if != hidden (OPT-350m: in/out projections)
    tie_word_embeddings: bool = True  # the mirrored system always assumed tied
    lm_head: bool = True  # False for encoder-only bases (no output projection)
    lm_head_bias: bool = False  # GPT-J's lm_head has a bias
    pooler: bool = False  # BERT pooler: Linear(hidden, hidden) with bias
    parallel_attn_mlp: bool = False  # GPT-J / GPT-NeoX / Falcon: attention and MLP read the same input
    encoder_only: bool = False  # bidirectional attention, no generation / KV cache
    source: str = ""  # where the numbers come from (Hub id, paper)

    @model_validator(mode="after")
    def _fill_and_check(self) -> "ModelConfig":
        self._positive("num_layers", "n_head", "hidden_dim", "vocab_size", "max_seq_len",
                       "num_key_value_heads", "ffn_embed_dim", "expansion_ratio", "moe_num_experts",
                       "moe_top_k", "head_dim", "sliding_window", "q_lora_rank", "kv_lora_rank",
                       "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "moe_ffn_embed_dim",
                       "moe_shared_expert_ffn_dim", "moe_layer_freq", "num_position_embeddings",
                       "embedding_dim", "num_norms_per_layer")
        for f in ("moe_num_shared_experts", "moe_first_dense_layers", "type_vocab_size"):
            if getattr(self, f) < 0:
                raise ValueError(f"field {f!r} = {getattr(self, f)!r} must be >= 0")
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
        if self.ffn_embed_dim is None:
            ratio = self.expansion_ratio if self.expansion_ratio is not None else 4
            self.ffn_embed_dim = int(round(ratio * self.hidden_dim))
        if self.expansion_ratio is None:
            self.expansion_ratio = self.ffn_embed_dim / self.hidden_dim
        if self.head_dim is None:
            if self.hidden_dim % self.n_head:
                raise ValueError(
                    f"hidden_dim = {self.hidden_dim} is not divisible by n_head = {self.n_head}; "
                    "give head_dim explicitly")
            self.head_dim = self.hidden_dim // self.n_head
        if self.moe_top_k > self.moe_num_experts:
            raise ValueError(
                f"field 'moe_top_k' = {self.moe_top_k} must be <= moe_num_experts = {self.moe_num_experts}")
        if self.num_norms_per_layer is None:
            self.num_norms_per_layer = 1 if self.parallel_attn_mlp else 2
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
        if self.position_embedding_type == "learned" and self.num_position_embeddings is None:
            if self.max_seq_len is not None:
                self.num_position_embeddings = self.max_seq_len
        return self

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
    peak_i8_TFLOPS: Optional[float] = None  # default 2x fp16 (as the mirrored system)
    peak_i4_TFLOPS: Optional[float] = None  # default 4x fp16
    # per GPU per direction: one 200 Gb/s HDR InfiniBand NIC per GPU = 25 GB/s. (The mirrored
    # system used 200 as a per-node figure; ours is per GPU, so its files are 8x optimistic.)
    inter_node_bandwidth_in_GB_per_sec: float = 25
    peak_bf16_TFLOPS: Optional[float] = None  # None: the hardware has no bf16 tensor path
    peak_fp8_TFLOPS: Optional[float] = None  # None: no fp8 tensor cores
    peak_tf32_TFLOPS: Optional[float] = None
    peak_fp32_TFLOPS: Optional[float] = None  # non-tensor fp32
    intra_node_link: Literal["nvlink", "pcie", "xgmi"] = "nvlink"
    num_gpus_per_node: int = 8
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
                       "intra_node_bandwidth_in_GB_per_sec", "peak_fp16_TFLOPS", "peak_i8_TFLOPS",
                       "peak_i4_TFLOPS", "inter_node_bandwidth_in_GB_per_sec", "peak_bf16_TFLOPS",
                       "peak_fp8_TFLOPS", "peak_tf32_TFLOPS", "peak_fp32_TFLOPS", "num_gpus_per_node",
                       "fast_link_group_size", "pcie_bandwidth_in_GB_per_sec")
        for f in ("intra_node_min_message_latency", "inter_node_min_message_latency", "intra_node_hop_latency",
                  "inter_node_hop_latency"):
            if getattr(self, f) < 0:
                raise ValueError(f"field {f!r} = {getattr(self, f)!r} must be >= 0 (seconds)")
        if self.peak_i8_TFLOPS is None:
            self.peak_i8_TFLOPS = 2 * self.peak_fp16_TFLOPS
        if self.peak_i4_TFLOPS is None:
            self.peak_i4_TFLOPS = 4 * self.peak_fp16_TFLOPS
        if self.fast_link_group_size is None:
            self.fast_link_group_size = self.num_gpus_per_node
        return self


class DtypeConfig(_StrictModel):
    """Bits of weights, activations and embeddings; `*_format` tells fp8 from int8."""

    name: str = "w16a16e16"
    weight_bits: int = 16
    activation_bits: int = 16
    embedding_bits: int = 16
    weight_format: Literal["float", "int"] = "float"  # 8 bits + float = fp8, + int = int8
    activation_format: Literal["float", "int"] = "float"
    # Weight-only quantization stores scales: one `quant_scale_bits` scale per
    # `quant_group_size` weights (e.g. 4-bit, group 128, fp16 scales). None = no overhead.
    quant_group_size: Optional[int] = None
    quant_scale_bits: int = 16

    @model_validator(mode="after")
    def _check(self) -> "DtypeConfig":
        valid = (4, 8, 16, 32)
        for f in ("weight_bits", "activation_bits", "embedding_bits"):
            if getattr(self, f) not in valid:
                raise ValueError(f"field {f!r} = {getattr(self, f)!r} must be one of {valid}")
        self._positive("quant_group_size", "quant_scale_bits")
        if self.weight_format == "int" and self.weight_bits > 16:
            raise ValueError(f"field 'weight_format' = 'int' with weight_bits = {self.weight_bits}")
        return self

    @property
    def weight_bytes_per_param(self) -> float:
        """Bytes per stored weight including quantization-scale overhead."""
        overhead = self.quant_scale_bits / self.quant_group_size if self.quant_group_size else 0.0
        return (self.weight_bits + overhead) / 8


class ParallelismConfig(_StrictModel):
    """Sizes of the parallel groups.

    GPUs in a replica = tp_size * pp_size; total GPUs = tp * pp * dp. Experts are
    sharded over `ep_size` ranks of the data-parallel group (DeepSpeed-MoE /
    Megatron expert parallelism), so ep_size must divide dp_size, and
    `rdp_size` = dp_size // ep_size is how many copies of each expert exist.
    `sp_size` defaults to tp_size (Megatron sequence parallelism inside the TP group).
    """

    tp_size: int = 1
    pp_size: int = 1
    dp_size: int = 1
    ep_size: int = 1
    sp_size: Optional[int] = None
    rdp_size: Optional[int] = None

    @model_validator(mode="after")
    def _fill_and_check(self) -> "ParallelismConfig":
        self._positive("tp_size", "pp_size", "dp_size", "ep_size", "sp_size", "rdp_size")
        if self.sp_size is None:
            self.sp_size = self.tp_size
        if self.rdp_size is None:
            self.rdp_size = max(1, self.dp_size // self.ep_size)
        return self


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
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError(f"Malformed JSON in {path}: {err.msg} at line {err.lineno} column {err.colno}") from None
    except OSError as err:
        raise ConfigError(f"Cannot read {cls.__name__} file {path}: {err.strerror}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object, not {type(data).__name__}")
    return build_config(cls, data, source=str(path))


class Catalogue(dict):
    """A name -> config mapping backed by one JSON file per entry in a folder.

    Entries are read and validated when first looked up (so `infer` on one model
    parses three files, not 129: start-up time); anything that enumerates the
    catalogue (iteration, len, keys, items, values) reads every file first.
    Entries added in code (e.g. by `dump_model_config_by_name`) live alongside.
    """

    def __init__(self, cls, directory: Path):
        super().__init__()
        self._cls, self._dir, self._complete = cls, directory, False
        # the names are the file stems: listing a folder is cheap
        self._stems = {p.stem for p in directory.glob("*.json")}

    def _load_one(self, key) -> bool:
        if isinstance(key, str) and key in self._stems and not dict.__contains__(self, key):
            dict.__setitem__(self, key, load_config_file(self._cls, self._dir / f"{key}.json"))
        return dict.__contains__(self, key)

    def _load_all(self) -> None:
        if not self._complete:
            for stem in sorted(self._stems):
                self._load_one(stem)
            self._complete = True

    def __contains__(self, key) -> bool:
        return self._load_one(key)

    def __missing__(self, key):
        if self._load_one(key):
            return dict.__getitem__(self, key)
        raise KeyError(key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def __iter__(self):
        self._load_all()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._load_all()
        return dict.__len__(self)

    def keys(self):
        self._load_all()
        return dict.keys(self)

    def items(self):
        self._load_all()
        return dict.items(self)

    def values(self):
        self._load_all()
        return dict.values(self)

    def names(self) -> List[str]:
        """Every entry's name without reading the files."""
        return sorted(self._stems | set(dict.keys(self)))


model_configs: Dict[str, ModelConfig] = Catalogue(ModelConfig, MODEL_CONFIGS_DIR)
gpu_configs: Dict[str, GPUConfig] = Catalogue(GPUConfig, GPU_CONFIGS_DIR)
dtype_configs: Dict[str, DtypeConfig] = Catalogue(DtypeConfig, DTYPE_CONFIGS_DIR)


def hub_id_to_catalogue_name(name: str) -> str:
    """`meta-llama/Llama-3.1-8B` -> `meta-llama_Llama-3.1-8B` (the catalogue file stem)."""
    return name.replace("/", "_")


def _catalogue_lookup(name: str) -> Optional[ModelConfig]:
    for key in (name, hub_id_to_catalogue_name(name)):
        if key in model_configs:
            return model_configs[key].model_copy(deep=True)
    lowered = hub_id_to_catalogue_name(name).lower()
    for key in model_configs.names():
        if key.lower() == lowered:
            return model_configs[key].model_copy(deep=True)
    return None


# ---------------------------------------------------------------------------
# public lookup API (names of the mirrored system)
# ---------------------------------------------------------------------------

def get_model_config_by_name(name_or_path: str, revision: Optional[str] = None,
                             trust_remote_code: bool = False) -> ModelConfig:
    """Resolve a model by, in order: catalogue name (or its Hub id), a `.json`
    file path, a local model directory holding a `config.json`, the Hugging Face Hub."""
    if not isinstance(name_or_path, str) or not name_or_path:
        raise ConfigError(f"model name must be a non-empty string, got {name_or_path!r}")
    cfg = _catalogue_lookup(name_or_path)
    if cfg is not None:
        return cfg
    path = Path(name_or_path)
    if name_or_path.endswith(".json"):
        if not path.is_file():
            raise ConfigError(f"model config file {name_or_path!r} does not exist")
        with open(path) as fh:
            try:
                data = json.load(fh)
            except json.JSONDecodeError as err:
                raise ConfigError(f"Malformed JSON in {path}: {err.msg} at line {err.lineno}") from None
        from . import hf_import
        if isinstance(data, dict) and hf_import.looks_like_hf_config(data):
            return hf_import.model_config_from_hf_dict(data, name=path.stem)
        return load_config_file(ModelConfig, path)
    if path.is_dir():
        from . import hf_import
        return hf_import.model_config_from_local_dir(path)
    if "/" not in name_or_path:
        # Hub repos are "org/name"; a bare name that is not in the catalogue is a
        # typo far more often than a legacy Hub id: answer at once, do not wait
        # on the network.
        err = unknown_name_error("model", name_or_path, model_configs.names())
        raise type(err)(f"{err} For a Hugging Face model give its full id, e.g. meta-llama/Llama-3.1-8B.") from None
    from . import hf_import
    try:
        return hf_import.get_model_config_from_hf(name_or_path, revision=revision,
                                                  trust_remote_code=trust_remote_code)
    except hf_import.RepoNotFound:
        err = unknown_name_error("model", name_or_path, model_configs.names())
        raise type(err)(f"{err} It is not on the Hugging Face Hub either.") from None
    except (hf_import.HubOffline, hf_import.HubUnreachable) as hub_err:
        near = unknown_name_error("model", name_or_path, model_configs.names())
        raise type(hub_err)(f"{hub_err} Not in the catalogue either: {near}") from None


def get_model_config_from_hf(name: str, revision: Optional[str] = None,
                             trust_remote_code: bool = False) -> ModelConfig:
    """Fetch `config.json` of a Hub model with huggingface_hub and map it."""
    from . import hf_import
    return hf_import.get_model_config_from_hf(name, revision=revision,
                                              trust_remote_code=trust_remote_code)


def get_gpu_config_by_name(name: str) -> GPUConfig:
    if name in gpu_configs:
        return gpu_configs[name].model_copy(deep=True)
    if isinstance(name, str) and name.endswith(".json") and Path(name).is_file():
        return load_config_file(GPUConfig, name)
    raise unknown_name_error("gpu", str(name), gpu_configs.names())


def get_dtype_config_by_name(name: str) -> DtypeConfig:
    if name in dtype_configs:
        return dtype_configs[name].model_copy(deep=True)
    if isinstance(name, str) and name.endswith(".json") and Path(name).is_file():
        return load_config_file(DtypeConfig, name)
    raise unknown_name_error("dtype", str(name), dtype_configs.names())


def list_model_configs() -> List[str]:
    return model_configs.names()


def list_gpu_configs() -> List[str]:
    return gpu_configs.names()


def list_dtype_configs() -> List[str]:
    return dtype_configs.names()


def _dump(cfg: _StrictModel, model_configs_dir: Optional[str], default_dir: Path) -> str:
    out_dir = Path(model_configs_dir) if model_configs_dir else default_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{hub_id_to_catalogue_name(cfg.name)}.json"
    data = cfg.model_dump(exclude_defaults=True)
    data["name"] = hub_id_to_catalogue_name(cfg.name)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=4) + "\n")
    tmp.replace(path)
    return str(path)


def dump_model_config_by_name(name: str, model_configs_dir: Optional[str] = None) -> str:
    """Resolve a model (catalogue, file, directory or Hub) and save it as a catalogue
    file; returns the written path. Defaults to the package's model_configs/."""
    cfg = get_model_config_by_name(name)
    path = _dump(cfg, model_configs_dir, MODEL_CONFIGS_DIR)
    model_configs[Path(path).stem] = cfg
    return path


def dump_gpu_config_by_name(name: str, gpu_configs_dir: Optional[str] = None) -> str:
    return _dump(get_gpu_config_by_name(name), gpu_configs_dir, GPU_CONFIGS_DIR)


def dump_dtype_config_by_name(name: str, dtype_configs_dir: Optional[str] = None) -> str:
    return _dump(get_dtype_config_by_name(name), dtype_configs_dir, DTYPE_CONFIGS_DIR)


class _ConfigCLI:
    """Query the catalogues: list, get and dump model, GPU and dtype configs."""

    list_model_configs = staticmethod(list_model_configs)
    list_gpu_configs = staticmethod(list_gpu_configs)
    list_dtype_configs = staticmethod(list_dtype_configs)

    @staticmethod
    def get_model_config_by_name(name: str, revision: Optional[str] = None) -> dict:
        return get_model_config_by_name(name, revision=revision).model_dump()

    @staticmethod
    def get_gpu_config_by_name(name: str) -> dict:
        return get_gpu_config_by_name(name).model_dump()

    @staticmethod
    def get_dtype_config_by_name(name: str) -> dict:
        return get_dtype_config_by_name(name).model_dump()

    @staticmethod
    def get_model_config_from_hf(name: str, revision: Optional[str] = None) -> dict:
        return get_model_config_from_hf(name, revision=revision).model_dump()

    dump_model_config_by_name = staticmethod(dump_model_config_by_name)
    dump_gpu_config_by_name = staticmethod(dump_gpu_config_by_name)
    dump_dtype_config_by_name = staticmethod(dump_dtype_config_by_name)


def main(argv: Optional[List[str]] = None) -> int:
    from .cli_support import run_fire
    return run_fire(_ConfigCLI, argv, prog="llm_analysis.config")


if __name__ == "__main__":
    raise SystemExit(main())
