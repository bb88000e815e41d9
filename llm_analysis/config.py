"""Configuration data, the public namespace: model, GPU, data-type and parallelism
configs, the JSON catalogues shipped in the package, and lookup by name (catalogue,
JSON path, local model directory, Hugging Face Hub); `python -m llm_analysis.config`
queries the catalogues through fire.

The code lives below this module, which only re-exports it (nothing here is imported
by the modules it names):
- `schema.py`: the pydantic configs, `build_config`, `load_config_file`;
- `catalogue.py`: the shipped catalogues, lookup by name, listing, saving;
- `model_lookup.py`: model lookup that falls back to a JSON file, a local directory
  or the Hub (`hf_import.py` and the `hub_*` modules, loaded only when needed).
"""

from __future__ import annotations

from typing import List, Optional

from llm_analysis.catalogue.lookup import (  # noqa: F401 (re-exported)
    DTYPE_CONFIGS_DIR, GPU_CONFIGS_DIR, MODEL_CONFIGS_DIR, PACKAGE_DIR, Catalogue, dtype_configs,
    dump_dtype_config_by_name, dump_gpu_config_by_name, get_dtype_config_by_name,
    get_gpu_config_by_name, gpu_configs, hub_id_to_catalogue_name, list_dtype_configs,
    list_gpu_configs, list_model_configs, model_configs)
from llm_analysis.catalogue.model_lookup import (  # noqa: F401 (re-exported)
    dump_model_config_by_name, get_model_config_by_name, get_model_config_from_hf)
from llm_analysis.schema.dtype import DtypeConfig  # noqa: F401 (re-exported)
from llm_analysis.schema.gpu import GPUConfig  # noqa: F401 (re-exported)
from llm_analysis.schema.loading import build_config, load_config_file  # noqa: F401 (re-exported)
from llm_analysis.schema.model import AttentionLayerType, ModelConfig  # noqa: F401 (re-exported)
from llm_analysis.schema.parallelism import ParallelismConfig  # noqa: F401 (re-exported)

__all__ = [
    "ModelConfig", "GPUConfig", "DtypeConfig", "ParallelismConfig", "AttentionLayerType",
    "build_config", "load_config_file", "Catalogue", "model_configs", "gpu_configs",
    "dtype_configs", "hub_id_to_catalogue_name", "PACKAGE_DIR", "MODEL_CONFIGS_DIR",
    "GPU_CONFIGS_DIR", "DTYPE_CONFIGS_DIR", "get_model_config_by_name", "get_model_config_from_hf",
    "get_gpu_config_by_name", "get_dtype_config_by_name", "list_model_configs", "list_gpu_configs",
    "list_dtype_configs", "dump_model_config_by_name", "dump_gpu_config_by_name",
    "dump_dtype_config_by_name", "main",
]


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
    from llm_analysis.cli.fire_runner import run_fire
    return run_fire(_ConfigCLI, argv, prog="llm_analysis.config")


if __name__ == "__main__":
    raise SystemExit(main())
