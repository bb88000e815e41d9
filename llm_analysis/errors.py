"""Error types users can catch. All are ValueError subclasses so that code written
against the mirrored system (which raised ValueError/AssertionError) keeps working
with `except ValueError`. Also `warn`, the one way the package warns."""

from __future__ import annotations

import difflib
import logging
import numbers
from typing import Callable, Iterable, List

# the `warnings` lists of the analysis calls running now (report/collected_warnings.py opens and closes them)
OPEN_WARNING_LISTS: List[List[str]] = []


def warn(logger: logging.Logger, msg: str, *args) -> None:
    """Log a warning and file it, once, in the `warnings` of every call running now. Filed here and not by a
    logging handler: a summary's `warnings` must not depend on the caller's logging setup (a logger set to
    ERROR, or logging.disable, creates no record for a handler to see)."""
    message = msg % args if args else msg
    for messages in OPEN_WARNING_LISTS:
        if message not in messages:  # the same warning from several cost models: once
            messages.append(message)
    logger.warning(msg, *args, stacklevel=2)


class LLMAnalysisError(ValueError):
    """Base class of every error this package raises on bad input."""


class ConfigError(LLMAnalysisError):
    """A configuration value is invalid: names the field, the value and what is valid."""


class UnknownNameError(ConfigError, KeyError):
    """A catalogue lookup failed; the message lists the closest known names."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.args[0] if self.args else ""


class HubImportError(ConfigError):
    """A model config could not be fetched from the Hugging Face Hub or mapped."""


class UnsupportedArchitectureError(ConfigError):
    """The engine cannot describe this configuration exactly and refuses to guess."""


class DoesNotFitError(LLMAnalysisError):
    """The requested setup needs more memory per GPU than the GPU has.

    Attributes carry the numbers so callers can act on them programmatically.
    """

    def __init__(self, message: str, *, needed_bytes: float, available_bytes: float,
                 max_batch_size: int | None = None, breakdown: dict | None = None):
        super().__init__(message)
        self.needed_bytes = needed_bytes
        self.available_bytes = available_bytes
        self.max_batch_size = max_batch_size
        self.breakdown = breakdown or {}


def closest_names(name: str, known: Iterable[str], n: int = 5) -> list[str]:
    """The known names closest to `name` (case-insensitive fuzzy match)."""
    known = list(known)
    lowered = {k.lower(): k for k in known}
    matches = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.3)
    # substring hits first: "llama-3.1-8b" should find "meta-llama_Llama-3.1-8B"
    subs = [k for k in known if name.lower() in k.lower() and k not in matches]
    return list(dict.fromkeys(subs + [lowered[m] for m in matches]))[:n]


def unknown_name_error(kind: str, name: str, known: Iterable[str]) -> UnknownNameError:
    known = sorted(known)
    near = closest_names(name, known)
    hint = f" Closest known names: {', '.join(near)}." if near else ""
    return UnknownNameError(
        f"Unknown {kind} name {name!r}.{hint} "
        f"List all with `python -m llm_analysis.config list_{kind}_configs`."
    )


def refuse_number_as_name(field: str, value, kind: str, known: Callable[[], Iterable[str]]) -> None:
    """Refuse a number given where a name is wanted (`gpu_name=4090`): names are text, and the closest names are
    those the number's digits come closest to (`rtx-4090-24gb`), so the caller sees what was probably meant.
    `known`: the kind's names, read only when refusing."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return
    near = closest_names(str(value), sorted(known()))
    hint = f" Closest known names to {str(value)!r}: {', '.join(near)}." if near else ""
    forms = "catalogue name, a Hub id" if kind == "model" else "catalogue name"
    raise ConfigError(f"{field} = {value!r} is a number, not a name: give a {kind} {forms} or a .json path "
                      f"as text.{hint} List all with `python -m llm_analysis.config list_{kind}_configs`.")
