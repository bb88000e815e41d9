"""The JSON form of the typed records (family.py) in a cached description: a record is
{"record": class name, field: value, ...}, an enum member {"record": class name, "value": v};
reading back takes the classes by name (architectures/__init__.py).
"""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from enum import Enum
from typing import Any, Dict

RECORD_KEY = "record"


def encode(obj: Any) -> Any:
    """`obj` with every record in it replaced by its JSON form."""
    if isinstance(obj, Enum):
        return {RECORD_KEY: type(obj).__name__, "value": obj.value}
    if is_dataclass(obj) and not isinstance(obj, type):
        return {RECORD_KEY: type(obj).__name__, **{f.name: encode(getattr(obj, f.name)) for f in fields(obj)}}
    if isinstance(obj, dict):
        return {k: encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    return obj


def decode(obj: Any, types: Dict[str, type]) -> Any:
    """The inverse of `encode`, given the record classes by name (a record's list fields
    become the tuples the frozen records hold)."""
    if isinstance(obj, list):
        return [decode(v, types) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if RECORD_KEY not in obj:
        return {k: decode(v, types) for k, v in obj.items()}
    cls = types[obj[RECORD_KEY]]
    if issubclass(cls, Enum):
        return cls(obj["value"])
    values = {k: decode(v, types) for k, v in obj.items() if k != RECORD_KEY}
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def kind_signature(specs: Any) -> str:
    """A layer kind's specs as one string: layers with equal signatures are one kind."""
    return json.dumps(encode(specs), sort_keys=True)
