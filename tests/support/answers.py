"""Helpers the bad-input tests share: walking an answer's nested values, a call that must be refused by the
package's own error, and a serve() call that must be refused with a one-line message."""

from __future__ import annotations

import pytest

from llm_analysis.errors import ConfigError, LLMAnalysisError


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


def refused(fn, *words):
    """fn() raises the package's own error whose message names every word."""
    with pytest.raises(LLMAnalysisError) as info:
        fn()
    msg = str(info.value)
    for w in words:
        assert w.lower() in msg.lower(), f"{w!r} not in {msg!r}"
    return msg
