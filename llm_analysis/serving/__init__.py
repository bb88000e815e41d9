"""Serving under load (continuous batching, request rates, tails): see DESIGN.md section 5 and
serving/run.py."""

from llm_analysis.serving.run import serve

__all__ = ["serve"]
