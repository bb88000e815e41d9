"""The data-type names users type (`bf16`, `int4`, `awq`, ...) and the catalogue entry each stands for.

The catalogue names a dtype by its three widths (`w16a16e16`: 16-bit weights, activations and
embeddings), as the mirrored system does; engines and papers name it by format. Each alias below
resolves to one catalogue entry; the choice where a word admits several readings is the one the
serving engines mean by it:
- `int8` is int8 weights *and* activations on int8 tensor cores (SmoothQuant W8A8, TensorRT-LLM's
  `int8_sq`, vLLM's w8a8); weight-only int8 is `w8a16e16` by its catalogue name.
- `int4` is 4-bit integer weights with 16-bit activations (W4A16): no mainstream engine runs int4
  activations. `awq` and `gptq` are W4A16 with a 16-bit scale and a 4-bit zero point per group of 128
  weights, their default group size (AWQ, arXiv 2306.00978 §4; GPTQ, arXiv 2210.17323 §5; the checkpoints'
  scales and qzeros tensors).
- `fp8`, `nvfp4`, `mxfp4` are catalogue names already.
- The quantisation modes engines name (`fp8_block`, `int8_sq`, `int4_awq`, `w4a16_mxfp4`, `nvfp4_wo`, ...:
  TensorRT-LLM's QuantAlgo, aiconfigurator's GEMM / MoE quant modes) are the entry of their weight and
  activation formats.
Words that name only a bit width (`8bit`, `4bit`) are ambiguous: they are refused with the candidates.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from llm_analysis.errors import ConfigError

# alias (lower case) -> catalogue dtype name
DTYPE_ALIASES: Dict[str, str] = {
    "bf16": "w16a16e16", "bfloat16": "w16a16e16",
    "fp16": "w16a16e16", "float16": "w16a16e16", "half": "w16a16e16",
    "fp32": "w32a32e32", "float32": "w32a32e32",
    # fp32 values with TF32 matmuls (torch.backends.cuda.matmul.allow_tf32 = True; off by default since PyTorch 1.12)
    "tf32": "w32a32e32-tf32", "tensorfloat32": "w32a32e32-tf32",
    "fp8": "fp8", "float8": "fp8",
    # E4M3 is the format the fp8 entry is (weights and activations; E5M2 is a gradient format), as the KV-cache
    # dtype names it (--kv_cache_dtype fp8_e4m3) and torch spells it (float8_e4m3fn)
    "fp8_e4m3": "fp8", "e4m3": "fp8", "float8_e4m3fn": "fp8",
    # the catalogue's names without their embedding width (16 bits: what every engine keeps it in)
    "w16a16": "w16a16e16", "w32a32": "w32a32e32", "w8a16": "w8a16e16", "w4a8": "w4a8e16", "w4a4": "w4a4e16",
    "int8": "w8a8e16", "w8a8": "w8a8e16",
    "int4": "w4a16e16", "w4a16": "w4a16e16",
    "awq": "w4a16e16-g128", "gptq": "w4a16e16-g128",
    "nvfp4": "nvfp4", "mxfp4": "mxfp4",
    # the quantisation modes serving engines and their planners name (TensorRT-LLM's QuantAlgo, aiconfigurator's
    # GEMMQuantMode / MoEQuantMode): a format's per-block scales (fp8_block: one per 128 x 128 weights) are a
    # share of a percent of the bytes, so the format is what decides the entry
    "fp8_block": "fp8", "fp8_static": "fp8", "fp8_ootb": "fp8", "fp8_block_scales": "fp8",
    "int8_wo": "w8a16e16", "int4_wo": "w4a16e16", "sq": "w8a8e16", "int8_sq": "w8a8e16",
    "int4_awq": "w4a16e16-g128", "w4a16_awq": "w4a16e16-g128",
    "nvfp4_wo": "w4a16e16-nvfp4", "w4a16_nvfp4": "w4a16e16-nvfp4",
    "w4a16_mxfp4": "w4a16e16-mxfp4", "w4a8_mxfp4_mxfp8": "w4a8e16-mxfp4", "w4a8_mxfp4_fp8": "w4a8e16-mxfp4",
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


# what a word is about, by the stems it contains: the aliases of that family of formats
_FAMILIES: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("bf8", ("fp8",)),  # AMD's name for fp8 E5M2
    ("int", ("int8", "int4", "awq", "gptq")), ("q", ("int8", "int4", "awq", "gptq")),
    ("bf", ("bf16",)), ("half", ("fp16",)), ("float", ("fp32", "tf32", "bf16", "fp16", "fp8", "nvfp4", "mxfp4")),
    ("fp", ("fp32", "tf32", "bf16", "fp16", "fp8", "nvfp4", "mxfp4")),
)
_DESCRIPTIONS = {"w16a16e16": "16-bit weights and activations", "w32a32e32": "32-bit (fp32 matmuls)",
                 "w32a32e32-tf32": "32-bit values, TF32 matmuls", "fp8": "fp8 weights and "
                 "activations", "w8a8e16": "int8 weights and activations", "w4a16e16": "int4 weights, 16-bit "
                 "activations", "w4a16e16-g128": "int4 weights in groups of 128 (scale and zero point each)", "nvfp4": "NVIDIA fp4",
                 "mxfp4": "OCP microscaling fp4"}


def _weight_bits(alias: str) -> int:
    """Weight width of the catalogue entry an alias names (w4a16e16 -> 4, fp8 -> 8, nvfp4 -> 4)."""
    target = DTYPE_ALIASES[alias]
    return int(re.match(r"\D*(\d+)", target).group(1))


def aliases_by_meaning(name: str) -> List[str]:
    """The aliases a word not in the catalogue could mean, by what it says rather than how it is
    spelled: the format family its stems name (int, fp, float, bf, q...) and the width its digits
    name ('q4' -> int4, awq, gptq; 'fp' -> every float format). Empty when the word says neither."""
    key = name.strip().lower()
    if re.match(r"w\d+a\d+", key):  # a catalogue-style name: its spelling is what to match (closest names)
        return []
    found: List[str] = []
    for stem, aliases in _FAMILIES:
        if stem in key:
            found += [a for a in aliases if a not in found]
    widths = {int(d) for d in re.findall(r"\d+", key)}
    if widths:  # the width narrows the family (or picks among all aliases); a family it empties stays whole
        canonical = list({target: alias for alias, target in reversed(DTYPE_ALIASES.items())}.values())[::-1]
        narrowed = [a for a in (found or canonical) if _weight_bits(a) in widths]
        found = narrowed or found
    return list(dict.fromkeys(found))


def meaning_hint(name: str) -> str:
    """' It could mean: int8 (w8a8e16: int8 weights and activations), ...' or ''."""
    options = aliases_by_meaning(name)
    if not options:
        return ""
    return " It could mean: " + ", ".join(
        f"{a} ({DTYPE_ALIASES[a]}: {_DESCRIPTIONS.get(DTYPE_ALIASES[a], DTYPE_ALIASES[a])})" for a in options) + "."
