"""Training analysis: memory per GPU, time per iteration and of the whole run,
MFU, LoRA / QLoRA (assumptions in `training/run.py`)."""

from llm_analysis.training.batch import config_batch_size_and_gradient_accumulation_steps
from llm_analysis.training.lora import NF4_BITS_PER_PARAM, NF4_BITS_PER_PARAM_DOUBLE_QUANT, LoRAConfig, lora_adapter_ops
from llm_analysis.training.run import run_training
from llm_analysis.training.stage import Stage, build_stage

__all__ = ["run_training", "LoRAConfig", "config_batch_size_and_gradient_accumulation_steps",
           "NF4_BITS_PER_PARAM", "NF4_BITS_PER_PARAM_DOUBLE_QUANT", "lora_adapter_ops", "Stage", "build_stage"]
