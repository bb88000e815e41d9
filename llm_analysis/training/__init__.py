"""Training analysis: memory per GPU, time per iteration and of the whole run,
MFU, LoRA / QLoRA (assumptions in `training/run.py`)."""

from .batch import config_batch_size_and_gradient_accumulation_steps
from .lora import NF4_BITS_PER_PARAM, NF4_BITS_PER_PARAM_DOUBLE_QUANT, LoRAConfig, lora_adapter_ops
from .run import run_training
from .stage import Stage, build_stage

__all__ = ["run_training", "LoRAConfig", "config_batch_size_and_gradient_accumulation_steps",
           "NF4_BITS_PER_PARAM", "NF4_BITS_PER_PARAM_DOUBLE_QUANT", "lora_adapter_ops", "Stage", "build_stage"]
