"""The data-type config: bits and number formats of weights, activations and embeddings,
and the scales of quantised weights (group size, scale bits; set by an FP4 format).

It rejects unknown fields and validates sizes; errors are `llm_analysis.errors.ConfigError`
naming field, value and what is valid (schema/loading.py adds the file)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import model_validator

from llm_analysis.schema.base import StrictModel
from llm_analysis.schema.formats import FP4_FORMATS

__all__ = ["DtypeConfig"]


class DtypeConfig(StrictModel):
    """Bits of weights, activations and embeddings; `*_format` tells fp8 from int8."""

    name: str = "w16a16e16"
    weight_bits: int = 16
    activation_bits: int = 16
    embedding_bits: int = 16
    # 8 bits + float = fp8, + int = int8; nvfp4 / mxfp4: block-scaled 4-bit floats
    # (formats.FP4_FORMATS), their block scales counted in the bytes per value; "tf32" (32-bit activations
    # only): fp32 values whose matmuls round them to TF32 on tensor cores (torch.backends.cuda.matmul.allow_tf32),
    # where 32-bit "float" matmuls run at the GPU's fp32 rate, PyTorch's default since 1.12
    weight_format: Literal["float", "int", "nvfp4", "mxfp4"] = "float"
    activation_format: Literal["float", "int", "nvfp4", "mxfp4", "tf32"] = "float"
    # Weight-only quantization stores scales: one `quant_scale_bits` scale per
    # `quant_group_size` weights (e.g. 4-bit, group 128, fp16 scales). None = no overhead.
    # An FP4 weight format fills them from the format (NVFP4 16 x 8 bits, MXFP4 32 x 8).
    quant_group_size: Optional[int] = None
    quant_scale_bits: int = 16
    source: str = ""

    @model_validator(mode="after")
    def _check(self) -> "DtypeConfig":
        valid = (4, 8, 16, 32)
        for f in ("weight_bits", "activation_bits", "embedding_bits"):
            if getattr(self, f) not in valid:
                raise ValueError(f"field {f!r} = {getattr(self, f)!r} must be one of {valid}")
        self._positive("quant_group_size", "quant_scale_bits")
        if self.weight_format == "int" and self.weight_bits > 16:
            raise ValueError(f"field 'weight_format' = 'int' with weight_bits = {self.weight_bits}")
        if self.activation_format == "tf32" and (self.activation_bits, self.weight_bits, self.weight_format) != \
                (32, 32, "float"):
            raise ValueError(f"field 'activation_format' = 'tf32' (TF32 matmuls of fp32 values) needs "
                             f"activation_bits = 32 and 32-bit float weights; got activation_bits = "
                             f"{self.activation_bits}, weight_bits = {self.weight_bits} ({self.weight_format})")
        self._check_block_formats()
        return self

    def _check_block_formats(self) -> None:
        for f, bits in (("weight_format", self.weight_bits), ("activation_format", self.activation_bits)):
            fmt = FP4_FORMATS.get(getattr(self, f))
            if fmt is not None and bits != fmt.element_bits:
                raise ValueError(f"field {f!r} = {getattr(self, f)!r} needs {f.split('_')[0]}_bits = "
                                 f"{fmt.element_bits}, got {bits}")
        if self.activation_format in FP4_FORMATS and self.weight_format != self.activation_format:
            raise ValueError(f"field 'activation_format' = {self.activation_format!r} needs the same "
                             f"weight_format (FP4 GEMMs take both operands in it), got {self.weight_format!r}")
        fmt = FP4_FORMATS.get(self.weight_format)
        if fmt is None:
            return
        if self.quant_group_size is None:
            self.quant_group_size, self.quant_scale_bits = fmt.block_size, fmt.scale_bits
        elif (self.quant_group_size, self.quant_scale_bits) != (fmt.block_size, fmt.scale_bits):
            raise ValueError(
                f"weight_format {self.weight_format!r} has one {fmt.scale_bits}-bit scale per "
                f"{fmt.block_size} values; got quant_group_size = {self.quant_group_size}, "
                f"quant_scale_bits = {self.quant_scale_bits}")

    @property
    def weight_bytes_per_param(self) -> float:
        """Bytes per stored weight including quantization-scale overhead."""
        overhead = self.quant_scale_bits / self.quant_group_size if self.quant_group_size else 0.0
        return (self.weight_bits + overhead) / 8

    @property
    def activation_bytes_per_element(self) -> float:
        """Bytes per activation value, with the block scales of an FP4 format."""
        fmt = FP4_FORMATS.get(self.activation_format)
        return (fmt.bits_per_value if fmt else self.activation_bits) / 8


# The default of the `dtype_config` arguments (LLMAnalysis, analysis_from_hf): one object, which each analysis
# replaces by its own copy (schema/options.py owned_instance).
SIGNATURE_DEFAULT_DTYPE = DtypeConfig()
