"""Errors of the Hugging Face Hub import (all `HubImportError`, hence `ConfigError`).

Messages name the model id and revision; see `describe_model`."""

from __future__ import annotations

from typing import Optional

from llm_analysis.errors import HubImportError, UnsupportedArchitectureError

__all__ = ["HubImportError", "not_modelled", "RepoNotFound", "GatedRepo", "RevisionNotFound", "HubOffline",
           "HubUnreachable", "UnmappableConfig", "UnsupportedArchitecture", "describe_model"]


class RepoNotFound(HubImportError):
    """No such model repository on the Hub (or it is private and we have no access)."""


class GatedRepo(HubImportError):
    """The repository is gated: the user must accept its terms and authenticate."""


class RevisionNotFound(HubImportError):
    """The repository exists but the requested revision (branch, tag, commit) does not."""


class HubOffline(HubImportError):
    """HF_HUB_OFFLINE is set and the config is not in the local cache."""


class HubUnreachable(HubImportError):
    """The Hub endpoint could not be reached and the config is not in the local cache."""


class UnmappableConfig(HubImportError):
    """The config lacks attributes we need, or describes something ModelConfig cannot."""


class UnsupportedArchitecture(UnmappableConfig, UnsupportedArchitectureError):
    """The config is well formed but describes an architecture whose shapes we cannot
    derive from the config alone (no family row; keys or features the generic mapping
    does not model). Both a `HubImportError` and an `UnsupportedArchitectureError`."""


EXACT_HINT = ('pip install "llm-analysis[exact]" and check it with '
              'llm_analysis.exact.verify_hf_config, which counts the real transformers model')


def describe_model(name: str, revision: Optional[str]) -> str:
    """How messages name a Hub model: `model 'org/name' (revision 'main')`."""
    return f"model {name!r} (revision {revision or 'main'!r})"


def not_modelled(message: str) -> "UnsupportedArchitecture":
    """The refusal of a feature the table does not model, pointing at the exact path."""
    return UnsupportedArchitecture(f"{message.rstrip('.')}. To count it, {EXACT_HINT}.")
