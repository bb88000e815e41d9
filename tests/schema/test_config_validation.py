"""Bad configuration input gets a clear error, and the documented defaults hold.

Every error test checks the exception type (ConfigError / UnknownNameError, both
ValueError subclasses) and that the message names the field, the value and, when a
file was read, the file. Defaults are those of the mirrored system's API reference.
"""

from __future__ import annotations

import json

import pytest

from llm_analysis.config import (
    DtypeConfig,
    GPUConfig,
    ModelConfig,
    ParallelismConfig,
    get_dtype_config_by_name,
    get_gpu_config_by_name,
    get_model_config_by_name,
    load_config_file,
)
from llm_analysis.errors import ConfigError, LLMAnalysisError, UnknownNameError

MODEL = {"name": "tiny", "num_layers": 4, "n_head": 8, "hidden_dim": 512, "vocab_size": 1000}
GPU = {"name": "toy-gpu", "mem_per_GPU_in_GB": 40, "hbm_bandwidth_in_GB_per_sec": 1555,
       "intra_node_bandwidth_in_GB_per_sec": 300, "intra_node_min_message_latency": 8e-06,
       "peak_fp16_TFLOPS": 312}


def _write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def _raises(exc_type, fn, *fragments):
    """Call fn, expect exc_type, check every fragment appears in the message."""
    with pytest.raises(exc_type) as info:
        fn()
    msg = str(info.value)
    for frag in fragments:
        assert str(frag) in msg, f"{frag!r} not in error message: {msg}"
    return msg


def test_error_hierarchy():
    assert issubclass(ConfigError, ValueError)
    assert issubclass(UnknownNameError, ConfigError)
    assert issubclass(UnknownNameError, ValueError)
    assert issubclass(ConfigError, LLMAnalysisError)


# --- files ---------------------------------------------------------------------

@pytest.mark.parametrize("getter", [get_model_config_by_name, get_gpu_config_by_name,
                                    get_dtype_config_by_name],
                         ids=["model", "gpu", "dtype"])
def test_malformed_json_names_the_file(tmp_path, getter):
    path = _write(tmp_path, "broken.json", '{"name": "x", "num_layers": 4,,}')
    _raises(ConfigError, lambda: getter(str(path)), str(path), "Malformed JSON", "line 1")


def test_json_that_is_not_an_object(tmp_path):
    path = _write(tmp_path, "list.json", "[1, 2, 3]")
    _raises(ConfigError, lambda: get_gpu_config_by_name(str(path)), str(path), "JSON object")


def test_missing_required_field_gpu_file(tmp_path):
    data = dict(GPU)
    del data["peak_fp16_TFLOPS"]
    path = _write(tmp_path, "gpu.json", data)
    _raises(ConfigError, lambda: get_gpu_config_by_name(str(path)),
            str(path), "'peak_fp16_TFLOPS'", "missing")


def test_missing_required_field_model_file(tmp_path):
    data = dict(MODEL)
    del data["n_head"]
    path = _write(tmp_path, "model.json", data)
    _raises(ConfigError, lambda: load_config_file(ModelConfig, path), str(path), "'n_head'", "missing")


def test_unknown_field_gpu_file(tmp_path):
    path = _write(tmp_path, "gpu.json", {**GPU, "peak_fp16_tflops": 999})
    msg = _raises(ConfigError, lambda: get_gpu_config_by_name(str(path)),
                  str(path), "unknown field 'peak_fp16_tflops'", "999")
    assert "peak_fp16_TFLOPS" in msg.split("valid fields are:")[1]  # lists the right spelling


def test_unknown_field_dtype_file(tmp_path):
    path = _write(tmp_path, "dt.json", {"name": "x", "weight_bit": 4})
    _raises(ConfigError, lambda: get_dtype_config_by_name(str(path)),
            str(path), "unknown field 'weight_bit'", "4", "weight_bits")


def test_unknown_field_direct_construction():
    _raises(ConfigError, lambda: ModelConfig(**MODEL, n_heads=8), "unknown field 'n_heads'", "8", "n_head")


def test_wrong_type_names_field_and_value(tmp_path):
    path = _write(tmp_path, "model.json", {**MODEL, "num_layers": "many"})
    _raises(ConfigError, lambda: load_config_file(ModelConfig, path), str(path), "'num_layers'", "'many'")


# --- sizes ---------------------------------------------------------------------

MODEL_SIZE_FIELDS = ["num_layers", "n_head", "hidden_dim", "vocab_size", "max_seq_len",
                     "num_key_value_heads", "ffn_embed_dim", "expansion_ratio", "moe_num_experts",
                     "moe_top_k", "head_dim"]


@pytest.mark.parametrize("value", [0, -1])
@pytest.mark.parametrize("field", MODEL_SIZE_FIELDS)
def test_nonpositive_model_size_direct(field, value):
    _raises(ConfigError, lambda: ModelConfig(**{**MODEL, field: value}), f"'{field}'", f"= {value}", "positive")


@pytest.mark.parametrize("field", ["num_layers", "n_head", "hidden_dim", "vocab_size"])
def test_nonpositive_model_size_in_file(tmp_path, field):
    path = _write(tmp_path, f"bad_{field}.json", {**MODEL, field: -4})
    _raises(ConfigError, lambda: load_config_file(ModelConfig, path), str(path), f"'{field}'", "-4")


@pytest.mark.parametrize("value", [0, -2])
@pytest.mark.parametrize("field", ["tp_size", "pp_size", "dp_size", "ep_size", "sp_size"])
def test_nonpositive_parallel_size(field, value):
    _raises(ConfigError, lambda: ParallelismConfig(**{field: value}), f"'{field}'", f"= {value}")


@pytest.mark.parametrize("field", ["mem_per_GPU_in_GB", "hbm_bandwidth_in_GB_per_sec",
                                   "intra_node_bandwidth_in_GB_per_sec", "peak_fp16_TFLOPS",
                                   "peak_i8_TFLOPS", "inter_node_bandwidth_in_GB_per_sec",
                                   "num_gpus_per_node"])
def test_nonpositive_gpu_size(tmp_path, field):
    # peak_i8_TFLOPS = 0 means "no int8 units" (the mirrored system's V100 files): only < 0 is invalid
    value = -1 if field == "peak_i8_TFLOPS" else 0
    path = _write(tmp_path, "gpu.json", {**GPU, field: value})
    _raises(ConfigError, lambda: get_gpu_config_by_name(str(path)), str(path), f"'{field}'", f"= {value}")


def test_negative_latency():
    _raises(ConfigError, lambda: GPUConfig(**{**GPU, "intra_node_min_message_latency": -1e-6}),
            "'intra_node_min_message_latency'", "-1e-06")


@pytest.mark.parametrize("bits", [0, 3, 12, -8])
def test_invalid_dtype_bits(bits):
    _raises(ConfigError, lambda: DtypeConfig(weight_bits=bits), "'weight_bits'", f"= {bits}", "(4, 8, 16, 32)")


def test_int_format_with_32_bits():
    _raises(ConfigError, lambda: DtypeConfig(weight_bits=32, weight_format="int"), "'weight_format'", "32")


# --- structure -----------------------------------------------------------------

def test_heads_not_divisible_by_kv_heads():
    msg = _raises(ConfigError, lambda: ModelConfig(**{**MODEL, "n_head": 32, "num_key_value_heads": 5}),
                  "num_key_value_heads", "5", "n_head", "32")
    assert "[1, 2, 4, 8, 16, 32]" in msg  # the valid choices


def test_kv_groups_must_divide_heads():
    _raises(ConfigError, lambda: ModelConfig(**{**MODEL, "n_head": 8, "num_key_value_groups": 3}),
            "'num_key_value_groups'", "3", "8")


def test_hidden_not_divisible_by_heads_without_head_dim():
    _raises(ConfigError, lambda: ModelConfig(**{**MODEL, "hidden_dim": 500, "n_head": 8}), "hidden_dim", "500", "8")
    assert ModelConfig(**{**MODEL, "hidden_dim": 500, "n_head": 8, "head_dim": 64}).head_dim == 64


def test_top_k_above_experts(tmp_path):
    path = _write(tmp_path, "moe.json", {**MODEL, "moe_num_experts": 8, "moe_top_k": 9})
    _raises(ConfigError, lambda: load_config_file(ModelConfig, path), str(path), "'moe_top_k'", "9", "8")


def test_layer_types_wrong_length():
    _raises(ConfigError, lambda: ModelConfig(**{**MODEL, "num_layers": 4, "sliding_window": 128,
                                                "layer_types": ["sliding_attention"] * 3}),
            "'layer_types'", "3", "num_layers = 4")


def test_layer_types_unknown_value():
    _raises(ConfigError, lambda: ModelConfig(**{**MODEL, "num_layers": 2,
                                                "layer_types": ["full_attention", "global"]}),
            "layer_types", "'global'", "full_attention")


def test_sliding_layers_need_a_window():
    _raises(ConfigError, lambda: ModelConfig(**{**MODEL, "num_layers": 2,
                                                "layer_types": ["full_attention", "sliding_attention"]}),
            "'sliding_window'", "layer_types")


def test_mla_needs_its_head_dims():
    _raises(ConfigError, lambda: ModelConfig(**{**MODEL, "kv_lora_rank": 512}), "qk_nope_head_dim", "v_head_dim")


# --- names ---------------------------------------------------------------------

def test_unknown_gpu_name_lists_closest():
    msg = _raises(UnknownNameError, lambda: get_gpu_config_by_name("a100-sxm-41gb"),
                  "'a100-sxm-41gb'", "a100-sxm-40gb", "list_gpu_configs")
    assert "Closest known names" in msg
    with pytest.raises(ValueError):  # code written for the mirrored system keeps working
        get_gpu_config_by_name("a100-sxm-41gb")
    with pytest.raises(KeyError):
        get_gpu_config_by_name("h100-sxm-96gb")  # ("h100-sxm" is one board: an alias, catalogue/gpu_aliases.py)


def test_unknown_dtype_name_lists_closest():
    _raises(UnknownNameError, lambda: get_dtype_config_by_name("w4a16e17"),
            "'w4a16e17'", "w4a16e16", "Closest known names")


def test_unknown_model_json_path(tmp_path):
    path = tmp_path / "no_such_model.json"
    _raises(ConfigError, lambda: get_model_config_by_name(str(path)), str(path), "does not exist")


def test_unknown_gpu_json_path(tmp_path):
    path = tmp_path / "no_such_gpu.json"
    _raises(UnknownNameError, lambda: get_gpu_config_by_name(str(path)), str(path))


def test_empty_model_name():
    _raises(ConfigError, lambda: get_model_config_by_name(""), "non-empty")


# --- defaults of the API reference ---------------------------------------------

def test_ffn_defaults_to_four_times_hidden():
    m = ModelConfig(**MODEL)
    assert m.ffn_embed_dim == 4 * 512
    assert m.expansion_ratio == 4


def test_expansion_ratio_used_when_given():
    m = ModelConfig(**{**MODEL, "hidden_dim": 4096, "n_head": 32, "expansion_ratio": 3.5})
    assert m.ffn_embed_dim == 14336  # 3.5 * 4096
    m = ModelConfig(**{**MODEL, "ffn_embed_dim": 1376})
    assert m.expansion_ratio == pytest.approx(1376 / 512)


def test_kv_heads_default_to_heads():
    m = ModelConfig(**MODEL)
    assert m.num_key_value_heads == 8 and m.num_key_value_groups == 1
    m = ModelConfig(**{**MODEL, "num_key_value_heads": 2})
    assert m.num_key_value_groups == 4
    m = ModelConfig(**{**MODEL, "num_key_value_groups": 4})
    assert m.num_key_value_heads == 2
    assert ModelConfig(**MODEL).head_dim == 512 // 8


def test_sp_size_defaults_to_tp_size():
    assert ParallelismConfig(tp_size=4).sp_size == 4
    assert ParallelismConfig(tp_size=4, sp_size=1).sp_size == 1
    p = ParallelismConfig()
    assert (p.tp_size, p.pp_size, p.dp_size, p.ep_size, p.sp_size) == (1, 1, 1, 1, 1)


def test_gpu_integer_peaks_default_from_fp16():
    g = GPUConfig(**GPU)
    assert g.peak_i8_TFLOPS == 2 * 312
    assert g.peak_i4_TFLOPS == 4 * 312
    # per GPU (one 200 Gb/s HDR NIC = 25 GB/s); the mirrored system used 200 per node
    assert g.inter_node_bandwidth_in_GB_per_sec == 200 / 8
    assert g.fast_link_group_size == g.num_gpus_per_node == 8
    g = GPUConfig(**GPU, peak_i8_TFLOPS=500)
    assert (g.peak_i8_TFLOPS, g.peak_i4_TFLOPS) == (500, 4 * 312)


def test_dtype_default_is_w16a16e16():
    d = DtypeConfig()
    assert (d.name, d.weight_bits, d.activation_bits, d.embedding_bits) == ("w16a16e16", 16, 16, 16)
    assert d.weight_bytes_per_param == 2


def test_mirrored_model_json_loads_unchanged(tmp_path):
    data = {"name": "EleutherAI_gpt-j-6b", "num_layers": 28, "n_head": 16, "hidden_dim": 4096,
            "vocab_size": 50400, "max_seq_len": 2048, "ffn_embed_dim": 16384, "model_type": "gptj"}
    path = _write(tmp_path, "EleutherAI_gpt-j-6b.json", data)
    m = get_model_config_by_name(str(path))
    assert isinstance(m, ModelConfig)
    for key, value in data.items():
        assert getattr(m, key) == value, key
    assert m.num_key_value_heads == 16
    assert m.head_dim == 4096 // 16
    assert m.expansion_ratio == 4


def test_mirrored_gpu_and_dtype_json_load_unchanged(tmp_path):
    gpu = {"name": "a100-sxm-40gb", "mem_per_GPU_in_GB": 40, "hbm_bandwidth_in_GB_per_sec": 1555,
           "intra_node_bandwidth_in_GB_per_sec": 300, "intra_node_min_message_latency": 8e-06,
           "peak_fp16_TFLOPS": 312, "peak_i8_TFLOPS": 624, "peak_i4_TFLOPS": 1248,
           "inter_node_bandwidth_in_GB_per_sec": 200}
    g = get_gpu_config_by_name(str(_write(tmp_path, "gpu.json", gpu)))
    for key, value in gpu.items():
        assert getattr(g, key) == value, key
    dt = {"name": "w4a8e32", "weight_bits": 4, "activation_bits": 8, "embedding_bits": 32}
    d = get_dtype_config_by_name(str(_write(tmp_path, "dt.json", dt)))
    for key, value in dt.items():
        assert getattr(d, key) == value, key


def test_bare_unknown_model_name_fails_fast_with_suggestions():
    """A bare name (no org/) that is not in the catalogue is answered at once, offline."""
    import time

    from llm_analysis.errors import UnknownNameError
    t = time.perf_counter()
    with pytest.raises(UnknownNameError) as e:
        get_model_config_by_name("Llama-3.1-8")
    assert time.perf_counter() - t < 1.0
    assert "meta-llama_Llama-3.1-8B" in str(e.value) and "full id" in str(e.value)
