"""Which weights a quantised checkpoint stores in its low-bit format.

OpenAI's gpt-oss releases store only the routed experts' weights in MXFP4: their config.json's
quantization_config is {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn",
"model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}, so attention, router, embeddings and LM head
(and, as in any checkpoint, the norms and biases) stay bf16. `ModelConfig.checkpoint_quantized_weights =
"routed_experts"` says so. A run whose weight dtype is the checkpoint's own format (`mxfp4`, `w4a16e16-mxfp4`,
`w4a8e16-mxfp4` for gpt-oss) holds the weights as the checkpoint stores them: the routed experts' matrices at
the dtype's width (4.25 bits for MXFP4), every other weight at 16 bits. Any other dtype (bf16, or an fp8 /
NVFP4 quantisation of one's own) quantises the whole model as before.
"""

from __future__ import annotations

from typing import Optional

from llm_analysis.schema.dtype import DtypeConfig
from llm_analysis.schema.model import ModelConfig

# the weights a checkpoint leaves out of its low-bit format are stored as bf16 (gpt-oss's safetensors)
UNCONVERTED_WEIGHT_BYTES = 2.0


def stored_weights(dtype: DtypeConfig) -> Optional[str]:
    """How `dtype` stores weights, in the terms of a model's `checkpoint_weight_format`: None for 16-bit floats,
    "fp8", "nvfp4", "mxfp4", or e.g. "int4" / "int8" (AWQ / GPTQ / W8A8 checkpoints, never a catalogue release's)."""
    if dtype.weight_format in ("nvfp4", "mxfp4"):
        return dtype.weight_format
    if dtype.weight_format == "float":
        return {16: None, 8: "fp8"}.get(dtype.weight_bits, f"float{dtype.weight_bits}")
    return f"{dtype.weight_format}{dtype.weight_bits}"


def only_routed_experts_low_bit(model: ModelConfig, dtype: DtypeConfig) -> bool:
    """Whether this run holds the checkpoint's weights as stored with only the routed experts in its low-bit
    format: the checkpoint says so and the dtype's weights are that format."""
    return (model.checkpoint_quantized_weights == "routed_experts"
            and model.checkpoint_weight_format is not None
            and stored_weights(dtype) == model.checkpoint_weight_format)


def layer_weight_bytes_per_param(model: ModelConfig, dtype: DtypeConfig) -> float:
    """Bytes per parameter of every layer weight but the routed experts' matrices (embeddings and LM head
    have their own width, `embedding_bits`)."""
    if only_routed_experts_low_bit(model, dtype):
        return UNCONVERTED_WEIGHT_BYTES
    return dtype.weight_bytes_per_param
