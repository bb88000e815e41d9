"""Planner: searches layouts, GPU types and counts, data types and batches for
the best serving or training setup under memory, latency and load targets.

Built only on the public API (`LLMAnalysis`, `.inference()`, `.training()`),
so each plan's top row, fed back to that API, reproduces its figures."""

from llm_analysis.planner.errors import NoFeasiblePlanError
from llm_analysis.planner.inference import plan_inference
from llm_analysis.planner.inputs import SLO
from llm_analysis.planner.training import plan_training
from llm_analysis.planner.capacity import plan_serving_capacity
from llm_analysis.planner.result import PlanResult, SearchStats

__all__ = ["NoFeasiblePlanError", "PlanResult", "SLO", "SearchStats", "plan_inference", "plan_serving_capacity", "plan_training"]
