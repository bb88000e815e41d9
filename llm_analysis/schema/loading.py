"""Building a config (model, GPU, data type, parallelism: any `schema.base.StrictModel`)
from a dict or a JSON file, with readable errors: one `llm_analysis.errors.ConfigError`
naming the config class, the fields at fault, what is valid and the file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict

from pydantic import ValidationError

from llm_analysis.errors import ConfigError
from llm_analysis.schema.base import format_validation_error

__all__ = ["build_config", "load_config_file"]


def build_config(cls, data: Dict[str, Any], source: str | None = None):
    """Build a config from a dict, turning pydantic errors into one ConfigError."""
    try:
        return cls(**data)
    except ConfigError as err:
        if getattr(err, "validation_error", None) is None:
            raise
        raise ConfigError(format_validation_error(cls.__name__, err.validation_error, source, cls)) from None
    except ValidationError as err:
        raise ConfigError(format_validation_error(cls.__name__, err, source, cls)) from None
    except TypeError as err:
        raise ConfigError(f"Invalid {cls.__name__}{' in ' + source if source else ''}: {err}") from None


def load_config_file(cls, path: str | os.PathLike):
    """Build a config of class `cls` from a JSON file; a ConfigError names the file."""
    from llm_analysis.utils import load_json_object
    path = Path(path)
    data = load_json_object(path, f"{cls.__name__} file {path}")
    return build_config(cls, data, source=str(path))
