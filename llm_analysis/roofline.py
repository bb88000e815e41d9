"""Compatibility: the roofline moved to `llm_analysis.cost.roofline`."""

from .cost.roofline import Roofline, peak_tflops_for_dtype  # noqa: F401
