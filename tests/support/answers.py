"""Helpers the bad-input tests share: walking an answer's nested values, and a serve() call that must be
refused with a one-line message."""

from __future__ import annotations

import pytest

from llm_analysis.errors import ConfigError


def leaves(value, path: str = ""):
    """(path, value) of every value in an answer that is neither a dict nor a list / tuple."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, f"{path}[{k!r}]")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def serve_refused(a, *words, **kw) -> str:
    """a.serve(**kw) raises one one-line ConfigError whose message holds every word; the message."""
    with pytest.raises(ConfigError) as err:
        a.serve(**kw)
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)
    return message
