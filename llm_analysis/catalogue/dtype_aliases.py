"""The data-type names users type (`bf16`, `int4`, `awq`, ...) and the catalogue entry each stands for.

The catalogue names a dtype by its three widths (`w16a16e16`: 16-bit weights, activations and
embeddings), as the mirrored system does; engines and papers name it by format. Each alias below
resolves to one catalogue entry; the choice where a word admits several readings is the one the
serving engines mean by it:
- `int8` is int8 weights *and* activations on int8 tensor cores (SmoothQuant W8A8, TensorRT-LLM's
  `int8_sq`, vLLM's w8a8); weight-only int8 is `w8a16e16` by its catalogue name.
- `int4` is 4-bit integer weights with 16-bit activations (W4A16): no mainstream engine runs int4
  activations. `awq` and `gptq` are W4A16 with one 16-bit scale per group of 128 weights, their
  default group size (AWQ, arXiv 2306.00978 §4; GPTQ, arXiv 2210.17323 §5).
- `fp8`, `nvfp4`, `mxfp4` are catalogue names already.
Words that name only a bit width (`8bit`, `4bit`) are ambiguous: they are refused with the candidates.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from llm_analysis.errors import ConfigError

# alias (lower case) -> catalogue dtype name
DTYPE_ALIASES: Dict[str, str] = {
    "bf16": "w16a16e16", "bfloat16": "w16a16e16",
    "fp16": "w16a16e16", "float16": "w16a16e16", "half": "w16a16e16",
    "fp32": "w32a32e32", "float32": "w32a32e32",
    "fp8": "fp8", "float8": "fp8",
    "int8": "w8a8e16", "w8a8": "w8a8e16",
    "int4": "w4a16e16", "w4a16": "w4a16e16",
    "awq": "w4a16e16-g128", "gptq": "w4a16e16-g128",
    "nvfp4": "nvfp4", "mxfp4": "mxfp4",
}

# words that name a width but not a format: refused, with what they could mean
AMBIGUOUS_DTYPE_WORDS: Dict[str, Tuple[str, ...]] = {
    "8bit": ("w8a8e16 (int8 weights and activations)", "w8a16e16 (int8 weights only)", "fp8"),
    "4bit": ("w4a16e16 (int4 weights only)", "w4a16e16-g128 (AWQ / GPTQ)", "nvfp4", "mxfp4"),
    "16bit": ("w16a16e16 (bf16 or fp16)",),
}


def resolve_dtype_alias(name: str) -> Optional[str]:
    """The catalogue name `name` stands for (None if it is no alias); ConfigError for an ambiguous word."""
    key = name.strip().lower()
    if key in AMBIGUOUS_DTYPE_WORDS:
        raise ConfigError(f"dtype_name = {name!r} is ambiguous: it could mean "
                          f"{', '.join(AMBIGUOUS_DTYPE_WORDS[key])}; give one of those names")
    return DTYPE_ALIASES.get(key)


def alias_table() -> str:
    """The aliases as text lines `alias -> catalogue name` (for --help and the docs)."""
    return "\n".join(f"{alias} -> {name}" for alias, name in DTYPE_ALIASES.items())
