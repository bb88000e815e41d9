"""Inference analysis: prefill, decode step by step, memory, largest batch,
throughput and cost (assumptions in `inference/run.py`)."""

from llm_analysis.cost.affine import sum_affine, sum_max_affine
from llm_analysis.inference.memory import inference_memory, memory_terms
from llm_analysis.inference.run import inference_times, run_inference
from llm_analysis.inference.timing import (decode_time, decode_time_without_cache, prefill_time,
                     zero3_weight_gather_time)

__all__ = ["run_inference", "inference_times", "inference_memory", "memory_terms", "prefill_time",
           "decode_time", "decode_time_without_cache", "zero3_weight_gather_time",
           "sum_affine", "sum_max_affine"]
