"""The public namespace of the mirrored API: `LLMAnalysis`, `ActivationRecomputation`,
`DSZeRO`, `infer`, `train` and the config helpers, and `python -m
llm_analysis.analysis infer|train`. Nothing inside the package imports this module.
"""

from __future__ import annotations

if __name__ == "__main__":
    # `python -m llm_analysis.analysis`: hand over to the CLI at once, so this file
    # is not executed twice (once as __main__, once as the module the CLI imports)
    from llm_analysis.cli.commands import main as _main
    raise SystemExit(_main())

from llm_analysis.config import (DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig,  # noqa: F401,E402 (re-exported)
                     get_dtype_config_by_name, get_gpu_config_by_name, get_model_config_by_name)
from llm_analysis.facade import LLMAnalysis  # noqa: F401,E402
from llm_analysis.schema.options import ActivationRecomputation, DSZeRO  # noqa: F401,E402
from llm_analysis.utils import _latency_to_string, _num_to_string, within_range  # noqa: F401,E402 (re-exported)
# the standard-library names the mirrored module's reference lists among its members (it imported them)
from enum import Enum  # noqa: F401,E402
from functools import total_ordering  # noqa: F401,E402
from pprint import pformat  # noqa: F401,E402

def __getattr__(name: str):
    """`infer` and `train` live in cli.py (with their full signatures for `fire`);
    resolved lazily because cli.py builds on the classes above (PEP 562)."""
    if name in ("infer", "train"):
        import llm_analysis.cli.commands as cli
        return cli.library_call(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# `from llm_analysis.analysis import *` gives what the mirrored module's reference lists, infer and train
# included (they resolve through __getattr__ above, which a star-import reads through __all__)
__all__ = ["LLMAnalysis", "ActivationRecomputation", "DSZeRO", "DtypeConfig", "GPUConfig", "ModelConfig",
           "ParallelismConfig", "get_dtype_config_by_name", "get_gpu_config_by_name", "get_model_config_by_name",
           "within_range", "infer", "train", "Enum", "total_ordering", "pformat"]
