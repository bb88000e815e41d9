"""Runs a planner row's `reproduce` entry through the public API (LLMAnalysis and its
inference()/training()), for the planner tests: a row's figures must be what it gives."""

from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.facade import LLMAnalysis


def run_reproduction(row):
    rep = row["reproduce"]
    a = LLMAnalysis(get_model_config_by_name(rep["model_name"]), get_gpu_config_by_name(rep["gpu_name"]),
                    get_dtype_config_by_name(rep["dtype_name"]), ParallelismConfig(**rep["parallelism"]),
                    **rep["analysis_kwargs"])
    if "inference_kwargs" in rep:
        return a.inference(**rep["inference_kwargs"])
    return a.training(**rep["training_kwargs"])
