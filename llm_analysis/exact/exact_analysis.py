"""The LLMAnalysis subclass of a derived description (torch-free): the facade with
`ModuleTreeDescriber` bound to the description as its describer."""

from __future__ import annotations

from typing import Any, Dict

from llm_analysis.facade import LLMAnalysis
from llm_analysis.exact.tree_describer import ModuleTreeDescriber


def analysis_class(desc: Dict[str, Any]) -> type:
    """An LLMAnalysis subclass whose describer is bound to `desc`."""
    return type("ExactLLMAnalysis", (LLMAnalysis,), {"describer_class": ModuleTreeDescriber.for_description(desc)})


__all__ = ["analysis_class"]
