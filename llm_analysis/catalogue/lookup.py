"""The JSON catalogues shipped in the package (`model_configs/`, `gpu_configs/`,
`dtype_configs/`): lazy loading, lookup by name (or a model's Hub id), listing and
saving entries.

Model lookup that may reach a JSON path, a local model directory or the Hub lives in
`model_lookup.py`, which sits above the Hub import; this module needs only the schema.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional

from llm_analysis.catalogue.dtype_aliases import meaning_hint, resolve_dtype_alias
from llm_analysis.catalogue.gpu_aliases import resolve_gpu_alias
from llm_analysis.errors import ConfigError, UnknownNameError, refuse_number_as_name, unknown_name_error
from llm_analysis.schema.dtype import DtypeConfig
from llm_analysis.schema.gpu import GPUConfig
from llm_analysis.schema.loading import load_config_file
from llm_analysis.schema.model import ModelConfig

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the catalogues stay where the mirrored system keeps them
MODEL_CONFIGS_DIR = PACKAGE_DIR / "model_configs"
GPU_CONFIGS_DIR = PACKAGE_DIR / "gpu_configs"
DTYPE_CONFIGS_DIR = PACKAGE_DIR / "dtype_configs"
# Hub checkpoints with a catalogue entry's shapes (instruction-tuned, quantised, renamed releases)
CHECKPOINT_VARIANTS_FILE = Path(__file__).resolve().with_name("checkpoint_variants.json")


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


def find_model_config(name: str) -> Optional[ModelConfig]:
    """A copy of the catalogue entry `name` (also by Hub id, case-insensitively), or of the entry whose
    architecture a checkpoint variant has (checkpoint_variants.json), or None."""
    for key in (name, hub_id_to_catalogue_name(name)):
        if key in model_configs:
            return model_configs[key].model_copy(deep=True)
    lowered = hub_id_to_catalogue_name(name).lower()
    for key in model_configs.names():
        if key.lower() == lowered:
            return model_configs[key].model_copy(deep=True)
    return _checkpoint_variant(name)


def _checkpoint_variants() -> dict:
    return json.loads(CHECKPOINT_VARIANTS_FILE.read_text())


def checkpoint_variant_names() -> List[str]:
    """The catalogue-style names (org_name) of the checkpoint variants, for suggestions."""
    return sorted(hub_id_to_catalogue_name(v) for v in _checkpoint_variants()["variants"])


# how a release may store its weights (ModelConfig.checkpoint_weight_format; None: 16-bit floats)
_CHECKPOINT_FORMATS = (None, "fp8", "nvfp4", "mxfp4")


def _variant_weight_format(variant: str, entry: dict) -> Optional[str]:
    """The variant's own checkpoint_weight_format: required of every variant, since a release stores its weights
    as its publisher quantised them, not as the entry whose shapes it has (nvidia/DeepSeek-R1-FP4 is NVFP4 where
    DeepSeek-R1 is FP8; nvidia/Llama-3.3-70B-Instruct-FP8 is FP8 where Llama 3.3 is 16-bit)."""
    if "checkpoint_weight_format" not in entry or entry["checkpoint_weight_format"] not in _CHECKPOINT_FORMATS:
        raise ConfigError(f"{CHECKPOINT_VARIANTS_FILE.name}: variant {variant!r} has checkpoint_weight_format = "
                          f"{entry.get('checkpoint_weight_format', '<missing>')!r}; valid: null (16-bit), "
                          f"{', '.join(repr(f) for f in _CHECKPOINT_FORMATS if f)}")
    return entry["checkpoint_weight_format"]


def _checkpoint_variant(name: str) -> Optional[ModelConfig]:
    """A checkpoint of checkpoint_variants.json under its own name: a copy of the entry whose shapes it
    has, with the weight format of its own release, its source saying which and why; a model of a renamed
    Hub organisation as its new name has it."""
    table = _checkpoint_variants()
    lowered = hub_id_to_catalogue_name(name).lower()
    for variant, entry in table["variants"].items():
        if hub_id_to_catalogue_name(variant).lower() == lowered:
            base = model_configs[entry["architecture_of"]]
            weights = _variant_weight_format(variant, entry)
            update = {"name": hub_id_to_catalogue_name(variant), "checkpoint_weight_format": weights,
                      "source": f"Checkpoint {variant}: {entry['why']}; weights stored as "
                                f"{weights or '16-bit floats'}; so the architecture of catalogue entry "
                                f"{base.name} ({base.source})"}
            if "max_seq_len" in entry:  # the release's own context length
                update["max_seq_len"] = int(entry["max_seq_len"])
            return base.model_copy(deep=True, update=update)
    org, sep, rest = name.partition("/") if "/" in name else name.partition("_")
    renamed = table["organisations"].get(org.lower()) if sep else None
    if renamed is None:
        return None
    cfg = find_model_config(f"{renamed['now']}/{rest}")
    if cfg is None:
        return None
    return cfg.model_copy(update={"name": hub_id_to_catalogue_name(f"{org}/{rest}"),
                                  "source": f"{org}/{rest}: {renamed['why']}; as {renamed['now']}/{rest}: {cfg.source}"})


def _get_by_name(kind: str, catalogue: Catalogue, cls, name: str):
    """A copy of catalogue entry `name`, or the config in JSON file `name`."""
    refuse_number_as_name(f"{kind}_name", name, kind, catalogue.names)  # gpu_name=4090: the digits of a name
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{kind}_name = {name!r} must be a non-empty string: a catalogue name or a .json path; "
                          f"list them with `python -m llm_analysis.config list_{kind}_configs`")
    if name in catalogue:
        return catalogue[name].model_copy(deep=True)
    if name.endswith(".json") and Path(name).is_file():
        return load_config_file(cls, name)
    raise unknown_name_error(kind, str(name), catalogue.names())


def get_gpu_config_by_name(name: str) -> GPUConfig:
    """A catalogue GPU by its name (`h100-sxm-80gb`), a .json path, or a name that means one entry (`b200`,
    aiconfigurator's `h200_sxm`: catalogue/gpu_aliases.py)."""
    if isinstance(name, str) and name not in gpu_configs and not name.endswith(".json"):
        name = resolve_gpu_alias(name, gpu_configs.names()) or name
    return _get_by_name("gpu", gpu_configs, GPUConfig, name)


def get_dtype_config_by_name(name: str) -> DtypeConfig:
    """A catalogue dtype by its name (`w16a16e16`), a .json path, or a name users type (`bf16`, `int4`,
    `awq`: catalogue/dtype_aliases.py)."""
    if isinstance(name, str) and name not in dtype_configs and not name.endswith(".json"):
        alias = resolve_dtype_alias(name)
        if alias is None and meaning_hint(name):  # e.g. 'int', 'q4', 'float': candidates by what they say
            raise UnknownNameError(f"Unknown dtype name {name!r}.{meaning_hint(name)} Give one of those names; "
                                   f"list all with `python -m llm_analysis.config list_dtype_configs`.")
        name = alias or name
    return _get_by_name("dtype", dtype_configs, DtypeConfig, name)


def fp4_gpu_names() -> List[str]:
    """Catalogue GPUs with FP4 tensor cores (for error messages)."""
    return sorted(n for n, g in gpu_configs.items() if g.peak_fp4_TFLOPS)


# the data-type word that names a width and a kind but not a format: which 4-bit float format it is,
# is the checkpoint's (the one an engine serves), and how it runs is the GPU's
GENERIC_FP4 = "fp4"
# the data-type word for the checkpoint's weights as released (16-bit, fp8, NVFP4 or MXFP4), run as the
# engines run that format on the GPU: what `plan infer` searches unless told otherwise
GENERIC_CHECKPOINT = "checkpoint"
GENERIC_DTYPE_WORDS = (GENERIC_FP4, GENERIC_CHECKPOINT)


def generic_word(name) -> Optional[str]:
    """The generic data-type word `name` is ("fp4", "checkpoint": read per model and GPU), else None."""
    if not isinstance(name, str):
        return None
    key = name.strip().lower()
    return key if key in GENERIC_DTYPE_WORDS else None


def checkpoint_dtype_name(model: ModelConfig, gpu: GPUConfig) -> str:
    """The catalogue dtype that holds `model`'s released weights as stored, run as the engines run that format
    on `gpu`:
    - 16-bit (no `checkpoint_weight_format`): w16a16e16;
    - fp8 (DeepSeek-V3/R1, Qwen3-*-FP8, MiniMax-M2): fp8 weights and activations on GPUs with fp8 tensor cores
      (Ada, Hopper, Blackwell); elsewhere (Ampere) the weights stay fp8 in memory and are widened in weight-only
      kernels (vLLM's FP8 Marlin), 16-bit activations: w8a16e16-fp8;
    - NVFP4: weights and activations on GPUs with FP4 tensor cores (Blackwell); elsewhere weight-only kernels
      (vLLM's NVFP4 Marlin): w4a16e16-nvfp4;
    - MXFP4 (gpt-oss): as "fp4" reads it (`dtype_for_setup`)."""
    stored = model.checkpoint_weight_format
    if stored == "fp8":
        return "fp8" if gpu.peak_fp8_TFLOPS else "w8a16e16-fp8"
    if stored == "nvfp4":
        return "nvfp4" if gpu.peak_fp4_TFLOPS else "w4a16e16-nvfp4"
    if stored == "mxfp4":
        return "w4a8e16-mxfp4" if gpu.peak_fp4_TFLOPS else "w4a16e16-mxfp4"
    return "w16a16e16"


def dtype_for_setup(name: str, model: ModelConfig, gpu: GPUConfig) -> DtypeConfig:
    """`get_dtype_config_by_name(name)`, except that "fp4" (which alone could mean NVFP4 or MXFP4) is read
    for this model on this GPU:
    - a checkpoint released in MXFP4 (gpt-oss: `checkpoint_weight_format`) runs as the engines run it:
      MXFP4 weights with 8-bit activations on GPUs with FP4 tensor cores (Blackwell: TensorRT-LLM's and
      vLLM's W4A8 MXFP4 x MXFP8 MoE kernels), with 16-bit activations elsewhere (Hopper: weight-only
      kernels, the weights widened to 16 bits in the GEMM) -- `w4a8e16-mxfp4` / `w4a16e16-mxfp4`;
    - any other model means NVFP4 (NVIDIA's 4-bit float releases and TensorRT-LLM's / ModelOpt's FP4
      quantisation), weights and activations, which needs FP4 tensor cores (refused without them, naming
      the GPUs that have them).
    "checkpoint" is the checkpoint's weights as released, on this GPU (`checkpoint_dtype_name`)."""
    word = generic_word(name)
    if word is None:
        return get_dtype_config_by_name(name)
    if word == GENERIC_CHECKPOINT or model.checkpoint_weight_format == "mxfp4":
        return get_dtype_config_by_name(checkpoint_dtype_name(model, gpu))
    if not gpu.peak_fp4_TFLOPS:
        raise ConfigError(f"dtype {name!r} for {model.name} means NVFP4 weights and activations (its checkpoint states "
                          f"no MXFP4), which need FP4 tensor cores; GPU {gpu.name!r} has none. GPUs with FP4: "
                          f"{', '.join(fp4_gpu_names())}; or FP4 weights only: w4a16e16-nvfp4")
    return get_dtype_config_by_name("nvfp4")


def list_model_configs() -> List[str]:
    return model_configs.names()


def list_gpu_configs() -> List[str]:
    return gpu_configs.names()


def list_dtype_configs() -> List[str]:
    return dtype_configs.names()


def dump_config(cfg, configs_dir: Optional[str], default_dir: Path) -> str:
    """Save `cfg` as `<configs_dir or default_dir>/<name>.json` (only non-default fields),
    atomically (write a temporary file, then rename)."""
    out_dir = Path(configs_dir) if configs_dir else default_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{hub_id_to_catalogue_name(cfg.name)}.json"
    data = cfg.model_dump(exclude_defaults=True)
    data["name"] = hub_id_to_catalogue_name(cfg.name)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=4) + "\n")
    tmp.replace(path)
    return str(path)


def dump_gpu_config_by_name(name: str, gpu_configs_dir: Optional[str] = None) -> str:
    return dump_config(get_gpu_config_by_name(name), gpu_configs_dir, GPU_CONFIGS_DIR)


def dump_dtype_config_by_name(name: str, dtype_configs_dir: Optional[str] = None) -> str:
    return dump_config(get_dtype_config_by_name(name), dtype_configs_dir, DTYPE_CONFIGS_DIR)
