"""Import a model's shapes from a Hugging Face `config.json`: the public entry points.

`get_model_config_from_hf` downloads `config.json` (hub/download.py) and maps it to a `ModelConfig`
(hub/mapping.py). When `transformers` knows the `model_type`, the dict is first turned into the library's
own config class, so the defaults the real model code would use are filled in (e.g. Gemma 3's
`text_config` lists only what differs from `Gemma3TextConfig`). No code from a repository is run unless
`trust_remote_code=True`. Every failure raises a `HubImportError` subclass naming the model id and
revision. Neither library is imported at module import time.

Layout (in `hub/`): `errors` <- `download` (fetch) and `source` (reading a config) <- `spec` (table
vocabulary) <- `hooks` <- `families/` (the table, rows by kind) and `model_class` (which transformers class
a config is counted as) <- `mapping` (driver) <- this module.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Dict, Optional

from llm_analysis.errors import ConfigError, HubImportError, warn
from llm_analysis.hub.download import QUANT_SIDECAR, download_config_json, download_quant_sidecar, read_json_file
from llm_analysis.hub.quantization import with_modelopt_sidecar
from llm_analysis.hub.errors import (GatedRepo, HubOffline, HubUnreachable, RepoNotFound,  # noqa: F401 (re-exported)
                         RevisionNotFound, UnmappableConfig, describe_model)
from llm_analysis.hub.families.table import SUPPORTED_MODEL_TYPES  # noqa: F401 (re-exported)
from llm_analysis.hub.mapping import map_hf_config
from llm_analysis.schema.model import ModelConfig

logger = logging.getLogger("llm_analysis.hub.entry")

__all__ = [
    "RepoNotFound", "GatedRepo", "RevisionNotFound", "HubOffline", "HubUnreachable",
    "UnmappableConfig", "get_model_config_from_hf", "model_config_from_hf_dict",
    "model_config_from_local_dir", "looks_like_hf_config", "SUPPORTED_MODEL_TYPES",
]


def get_model_config_from_hf(name: str, revision: Optional[str] = None,
                             trust_remote_code: bool = False) -> ModelConfig:
    """Download `config.json` of Hub model `name` (at `revision`, default main) and map it.

    Raises `RepoNotFound`, `GatedRepo`, `RevisionNotFound`, `HubOffline`,
    `HubUnreachable`, `UnmappableConfig` (all `HubImportError`)."""
    if not isinstance(name, str) or not name.strip():
        raise RepoNotFound(f"model id must be a non-empty string, got {name!r}")
    if revision is not None and (not isinstance(revision, str) or not revision):
        raise HubImportError(f"revision must be a non-empty string or None, got {revision!r}")
    what = describe_model(name, revision)
    path, _endpoint = download_config_json(name, revision)
    data = read_json_file(path, what)
    if "quantization_config" not in data:  # a ModelOpt release may state its quantisation only beside it
        sidecar, why = download_quant_sidecar(name, revision)
        if sidecar is not None:
            data = with_modelopt_sidecar(data, read_json_file(sidecar, what))
        elif why is not None:
            warn(logger, "%s: %s could not be read (%s): a ModelOpt checkpoint's quantisation, which that file "
                 "states where config.json states none, is not read; the weights count at the dtype you give",
                 what, QUANT_SIDECAR, why)
    return map_hf_config(data, name=name, source=f"huggingface.co/{name}@{revision or 'main'}",
                         what=what, trust_remote_code=trust_remote_code, revision=revision)


def model_config_from_hf_dict(d: Dict[str, Any], name: str, source: str = "",
                              what: Optional[str] = None) -> ModelConfig:
    """Map a Hugging Face config dict (the content of `config.json`) to a ModelConfig; `what`
    names it in messages (default "model NAME"; a file read from disk is named by its path).

    Never runs repository code (there is no repository to fetch it from)."""
    if not isinstance(d, dict):
        raise HubImportError(f"a Hugging Face config must be a dict, got {type(d).__name__}")
    return map_hf_config(d, name=name, source=source, what=what or f"model {name!r}",
                         trust_remote_code=False, revision=None)


def model_config_from_local_dir(path: str | os.PathLike) -> ModelConfig:
    """Map `path/config.json` of a local model directory (e.g. a `save_pretrained` output)."""
    p = Path(path)
    cfg_path = p / "config.json"
    if not cfg_path.is_file():
        raise ConfigError(f"{str(p)!r} is a directory but holds no config.json; give a model "
                          "directory saved by transformers, a config .json file or a catalogue name")
    name = p.resolve().name or str(p)
    data = read_json_file(cfg_path, f"local model directory {str(p)!r}")
    sidecar = p / QUANT_SIDECAR  # a ModelOpt release's quantisation, beside config.json
    if sidecar.is_file():
        data = with_modelopt_sidecar(data, read_json_file(sidecar, f"local model directory {str(p)!r}"))
    return map_hf_config(data, name=name, source=str(cfg_path), what=f"local model {str(p)!r}",
                         trust_remote_code=False, revision=None)


_HF_STYLE_KEYS = frozenset({
    "model_type", "architectures", "transformers_version", "_name_or_path", "torch_dtype", "dtype",
    "hidden_size", "num_hidden_layers", "num_attention_heads", "n_embd", "n_layer", "n_positions",
    "intermediate_size", "max_position_embeddings", "d_model", "text_config", "auto_map",
})


def looks_like_hf_config(d: Any) -> bool:
    """True for a transformers `config.json` dict, False for our own ModelConfig JSON."""
    if not isinstance(d, dict) or not d:
        return False
    ours = set(ModelConfig.model_fields)
    if set(d) <= ours:
        return False  # every key is a ModelConfig field (it may carry model_type too)
    return bool(_HF_STYLE_KEYS & set(d))
