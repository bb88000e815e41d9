"""Resolve a model by name: the catalogue first, then a JSON file, a local model
directory or the Hugging Face Hub.

This is the one module that combines the catalogue with the Hub import; the Hub
import modules are loaded only when a name is not in the catalogue, so `infer` on a
shipped model never imports them (nor huggingface_hub/transformers).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

from llm_analysis.catalogue.lookup import (MODEL_CONFIGS_DIR, checkpoint_variant_names, dtype_configs, dtype_for_setup,
                                          dump_config, find_model_config, get_gpu_config_by_name, gpu_configs,
                                          model_configs)
from llm_analysis.errors import ConfigError, refuse_number_as_name, unknown_name_error, warn
from llm_analysis.schema.dtype import DtypeConfig
from llm_analysis.schema.gpu import GPUConfig
from llm_analysis.schema.loading import load_config_file
from llm_analysis.schema.model import ModelConfig
from llm_analysis.schema.options import instance

logger = logging.getLogger(__name__)


def get_model_config_by_name(name_or_path: str, revision: Optional[str] = None,
                             trust_remote_code: bool = False) -> ModelConfig:
    """Resolve a model by, in order: catalogue name (or its Hub id), a `.json`
    file path, a local model directory holding a `config.json`, the Hugging Face Hub."""
    refuse_number_as_name("model_name", name_or_path, "model", _known_names)
    if not isinstance(name_or_path, str) or not name_or_path:
        raise ConfigError(f"model name must be a non-empty string, got {name_or_path!r}")
    cfg = find_model_config(name_or_path)
    path = Path(name_or_path)
    if cfg is not None:
        if (path / "config.json").is_file():  # (transformers' from_pretrained would read the folder: say which)
            warn(logger, "%r names both a catalogue entry and a local model directory; the catalogue entry is "
                         "used (the documented order); give the directory as ./%s to read it instead",
                         name_or_path, name_or_path)
        return cfg
    if name_or_path.endswith(".json"):
        return _from_json_file(name_or_path)
    if path.is_dir():
        import llm_analysis.hub.entry as hf_import
        return hf_import.model_config_from_local_dir(path)
    if "/" not in name_or_path:
        # Hub repos are "org/name"; a bare name that is not in the catalogue is a
        # typo far more often than a legacy Hub id: answer at once, do not wait
        # on the network.
        err = unknown_name_error("model", name_or_path, _known_names())
        raise type(err)(f"{err} For a Hugging Face model give its full id, e.g. meta-llama/Llama-3.1-8B.") from None
    return _from_hub(name_or_path, revision, trust_remote_code)


def _known_names():
    """The names a model lookup knows without the Hub, for suggestions: entries and checkpoint variants."""
    return model_configs.names() + checkpoint_variant_names()


def _from_json_file(name_or_path: str) -> ModelConfig:
    """Our own ModelConfig JSON, or a transformers `config.json` saved under another name."""
    path = Path(name_or_path)
    if not path.is_file():
        raise ConfigError(f"model config file {name_or_path!r} does not exist")
    import llm_analysis.hub.entry as hf_import
    from llm_analysis.utils import load_json_object
    # NaN / Infinity read as transformers reads them; our own ModelConfig JSON is then
    # read strictly by load_config_file (every size of ours must be finite)
    data = load_json_object(path, f"model config file {path}", allow_non_finite=True)
    if isinstance(data, dict) and hf_import.looks_like_hf_config(data):
        return hf_import.model_config_from_hf_dict(data, name=path.stem, what=f"config file {name_or_path!r}")
    return load_config_file(ModelConfig, path)


def _from_hub(name: str, revision: Optional[str], trust_remote_code: bool) -> ModelConfig:
    import llm_analysis.hub.entry as hf_import
    try:
        return hf_import.get_model_config_from_hf(name, revision=revision,
                                                  trust_remote_code=trust_remote_code)
    except hf_import.RepoNotFound:
        err = unknown_name_error("model", name, _known_names())
        raise type(err)(f"{err} It is not on the Hugging Face Hub either.") from None
    except (hf_import.HubOffline, hf_import.HubUnreachable) as hub_err:
        near = unknown_name_error("model", name, _known_names())
        raise type(hub_err)(f"{hub_err} Not in the catalogue either: {near}") from None


def get_model_config_from_hf(name: str, revision: Optional[str] = None,
                             trust_remote_code: bool = False) -> ModelConfig:
    """Fetch `config.json` of a Hub model with huggingface_hub and map it."""
    import llm_analysis.hub.entry as hf_import
    return hf_import.get_model_config_from_hf(name, revision=revision,
                                              trust_remote_code=trust_remote_code)


# catalogue entries imported from the Hub say so in `source` (see model_configs/*.json)
_HUB_SOURCE = re.compile(r"^Hugging Face Hub config\.json of ([\w.-]+/[\w.-]+)")


def catalogue_hub_id(cfg: ModelConfig) -> Optional[str]:
    """The Hub repo a catalogue entry was imported from, or None (a paper's figures)."""
    match = _HUB_SOURCE.match(cfg.source or "")
    return match.group(1) if match else None


def hf_config_by_name(name_or_path: str, revision: Optional[str] = None) -> Tuple[Dict[str, Any], Optional[str]]:
    """(transformers config.json dict, Hub id or None) of a model named as
    `get_model_config_by_name` accepts it: a catalogue name (its config.json is fetched
    from the Hub repo the entry was imported from), a config.json path, a local model
    directory or a Hub id. For the paths that need the model's own transformers config
    (`--exact`); a catalogue entry written from a paper has none: ConfigError."""
    refuse_number_as_name("model_name", name_or_path, "model", _known_names)
    if not isinstance(name_or_path, str) or not name_or_path:
        raise ConfigError(f"model name must be a non-empty string, got {name_or_path!r}")
    from llm_analysis.hub.download import download_config_json, read_json_file
    cfg = find_model_config(name_or_path)
    if cfg is not None:
        hub_id = catalogue_hub_id(cfg)
        if hub_id is None and "/" in name_or_path:
            hub_id = name_or_path  # a Hub id that also names a paper's entry: ask the Hub
        if hub_id is None:
            raise ConfigError(f"model {name_or_path!r} is a catalogue entry written from published figures "
                              f"({cfg.source[:80]}...), not from a transformers config: the exact path needs "
                              "one; give a Hub id, a local model directory or a config.json")
        name_or_path = hub_id
    elif name_or_path.endswith(".json") or Path(name_or_path).exists():
        path = Path(name_or_path) / "config.json" if Path(name_or_path).is_dir() else Path(name_or_path)
        if not path.is_file():
            raise ConfigError(f"model config file {str(path)!r} does not exist")
        return read_json_file(str(path), f"config of {name_or_path}"), None
    elif "/" not in name_or_path:
        err = unknown_name_error("model", name_or_path, _known_names())
        raise type(err)(f"{err} For a Hugging Face model give its full id, e.g. meta-llama/Llama-3.1-8B.") from None
    path, _endpoint = download_config_json(name_or_path, revision)
    return read_json_file(path, name_or_path), name_or_path


def dump_model_config_by_name(name: str, model_configs_dir: Optional[str] = None) -> str:
    """Resolve a model (catalogue, file, directory or Hub) and save it as a catalogue
    file; returns the written path. Defaults to the package's model_configs/."""
    cfg = get_model_config_by_name(name)
    path = dump_config(cfg, model_configs_dir, MODEL_CONFIGS_DIR)
    model_configs[Path(path).stem] = cfg
    return path


def configs_by_name(model: Union[ModelConfig, str], gpu: Union[GPUConfig, str],
                    dtype: Union[DtypeConfig, str]) -> Tuple[ModelConfig, GPUConfig, DtypeConfig]:
    """`LLMAnalysis`'s first three arguments with each name looked up as the CLI looks it up (the catalogue and
    its aliases, then the Hub for a model), the word "fp4" read for that model and GPU (`dtype_for_setup`);
    anything not a name is returned as given, for the constructor's own type checks."""
    # a number is neither a name nor a config: say which names its digits come closest to
    refuse_number_as_name("model_config", model, "model", _known_names)
    refuse_number_as_name("gpu_config", gpu, "gpu", gpu_configs.names)
    refuse_number_as_name("dtype_config", dtype, "dtype", dtype_configs.names)
    model = get_model_config_by_name(model) if isinstance(model, str) else model
    gpu = get_gpu_config_by_name(gpu) if isinstance(gpu, str) else gpu
    if isinstance(dtype, str):
        dtype = dtype_for_setup(dtype, instance(model, ModelConfig, "model_config"), instance(gpu, GPUConfig, "gpu_config"))
    return model, gpu, dtype
