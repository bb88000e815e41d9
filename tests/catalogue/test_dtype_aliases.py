"""Data-type names users type resolve to the catalogue entry of that format (catalogue/dtype_aliases.py).

Expected widths come from the formats themselves, not from our catalogue: bf16 / fp16 are 16-bit
weights and activations; fp32 32-bit; int8 (SmoothQuant W8A8) 8-bit integer weights and activations;
int4 4-bit integer weights with 16-bit activations; AWQ (arXiv 2306.00978 §4) and GPTQ
(arXiv 2210.17323 §5) 4-bit weights with a 16-bit scale per group of 128; NVFP4 4-bit E2M1 in blocks
of 16, MXFP4 in blocks of 32 (OCP MX spec v1.0)."""

import pytest

from llm_analysis.config import get_dtype_config_by_name
from llm_analysis.errors import ConfigError

# alias -> (weight bits, activation bits, weight format, quantisation group size or None)
EXPECTED = {
    "bf16": (16, 16, "float", None), "BF16": (16, 16, "float", None), "fp16": (16, 16, "float", None),
    "float16": (16, 16, "float", None), "fp32": (32, 32, "float", None), "fp8": (8, 8, "float", None),
    "int8": (8, 8, "int", None), "int4": (4, 16, "int", None),
    "awq": (4, 16, "int", 128), "gptq": (4, 16, "int", 128),
    "nvfp4": (4, 4, "nvfp4", 16), "mxfp4": (4, 4, "mxfp4", 32),
    # engines' quantisation modes, by what their names say (TensorRT-LLM QuantAlgo, aiconfigurator quant modes):
    # fp8 weights and activations with block scales; int8 weight-only; int4 weight-only; SmoothQuant W8A8;
    # AWQ; NVFP4 weights dequantised to 16-bit; MXFP4 weights with 16-bit or 8-bit (MXFP8) activations
    "fp8_block": (8, 8, "float", None), "FP8_BLOCK_SCALES": (8, 8, "float", None), "int8_wo": (8, 16, "int", None),
    "int4_wo": (4, 16, "int", None), "int8_sq": (8, 8, "int", None), "int4_awq": (4, 16, "int", 128),
    "nvfp4_wo": (4, 16, "nvfp4", 16), "w4a16_mxfp4": (4, 16, "mxfp4", 32), "w4a8_mxfp4_mxfp8": (4, 8, "mxfp4", 32),
}


@pytest.mark.parametrize("alias", sorted(EXPECTED))
def test_alias_resolves_to_an_entry_of_that_format(alias):
    d = get_dtype_config_by_name(alias)
    w, a, fmt, group = EXPECTED[alias]
    assert (d.weight_bits, d.activation_bits, d.weight_format) == (w, a, fmt)
    assert getattr(d, "quant_group_size", None) in ((group,) if group else (None, 0, 1))


def test_catalogue_names_still_win():
    assert get_dtype_config_by_name("w8a16e16").weight_bits == 8
    assert get_dtype_config_by_name("w8a16e16").activation_bits == 16


@pytest.mark.parametrize("word", ["4bit", "8bit", "16BIT"])
def test_a_width_without_a_format_is_refused_with_the_candidates(word):
    with pytest.raises(ConfigError, match=r"ambiguous: it could mean .*w\d+a"):
        get_dtype_config_by_name(word)


def test_unknown_names_are_still_unknown():
    with pytest.raises(ConfigError, match="Unknown dtype name 'int3'"):
        get_dtype_config_by_name("int3")


# ---- words that are no alias: suggestions by meaning, not spelling (issue 28 item 4)
@pytest.mark.parametrize("word, expected", [
    ("int", ["int8", "int4", "awq", "gptq"]),      # integer formats, whatever their width
    ("q4", ["int4", "awq", "gptq"]),               # a quantised 4-bit word: the 4-bit integer formats
    ("fp4", ["nvfp4", "mxfp4"]),                   # a float word of width 4: the two fp4 formats
    ("bf8", ["fp8"]),                              # AMD's name for fp8 E5M2
])
def test_a_word_that_is_no_alias_lists_what_it_could_mean(word, expected):
    from llm_analysis.catalogue.dtype_aliases import aliases_by_meaning
    from llm_analysis.errors import UnknownNameError
    assert aliases_by_meaning(word) == expected
    with pytest.raises(UnknownNameError) as err:
        get_dtype_config_by_name(word)
    message = str(err.value)
    assert f"'{word}'" in message and all(f"{a} (" in message for a in expected)
    # ranked by meaning: 'fp4' must not suggest 4-bit integer formats, which a spelling match would
    assert word != "fp4" or "int4" not in message


def test_catalogue_style_names_still_get_the_closest_spellings():
    from llm_analysis.errors import UnknownNameError
    with pytest.raises(UnknownNameError, match="Closest known names: w4a16e16"):
        get_dtype_config_by_name("w4a16e17")


@pytest.mark.parametrize("typed,entry,bits", [
    ("fp8_e4m3", "fp8", (8, 8)),          # what --kv_cache_dtype already takes; E4M3 is the fp8 entry's format
    ("float8_e4m3fn", "fp8", (8, 8)),     # torch's spelling
    ("w16a16", "w16a16e16", (16, 16)),    # the catalogue names without the embedding width
    ("w8a16", "w8a16e16", (8, 16)),
    ("w4a8", "w4a8e16", (4, 8)),
    ("w4a4", "w4a4e16", (4, 4)),
])
def test_names_users_type_for_formats_the_catalogue_has(typed, entry, bits):
    """Each name means one catalogue entry whose weight and activation widths are the ones it spells."""
    d = get_dtype_config_by_name(typed)
    assert d.name == entry and (d.weight_bits, d.activation_bits) == bits
