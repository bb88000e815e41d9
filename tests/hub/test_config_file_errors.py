"""Issue 29, bad input: a config.json whose model_type transformers does not know, read from a file,
is refused in one message naming the file, the missing fields and what would make it readable; the
CLI prints that one line and exits 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llm_analysis.config import get_model_config_by_name
from llm_analysis.errors import ConfigError

transformers = pytest.importorskip("transformers")


def _write(tmp_path, data) -> str:
    path = tmp_path / "unknown_family.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_unknown_model_type_names_file_fields_and_remedy(tmp_path):
    path = _write(tmp_path, {"model_type": "foo_bar", "hidden_size": 8})
    with pytest.raises(ConfigError) as info:
        get_model_config_by_name(path)
    message = str(info.value)
    assert path in message  # the file
    for field in ("intermediate_size", "num_attention_heads", "num_hidden_layers", "vocab_size"):
        assert field in message  # each missing field
    assert "hidden_size" not in message.split("lacks", 1)[1]  # the one given is not asked for
    assert f"transformers {transformers.__version__} knows" in message  # why no defaults fill them
    assert "add them to the config" in message  # what would make it work


def test_known_model_type_is_not_called_unknown(tmp_path):
    # a type transformers knows fills missing sizes from its defaults, as transformers builds it
    path = _write(tmp_path, {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
                             "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100})
    cfg = get_model_config_by_name(path)
    assert (cfg.num_layers, cfg.hidden_dim, cfg.vocab_size) == (2, 64, 100)


def test_cli_unknown_model_type_exits_2_with_one_line(tmp_path):
    path = _write(tmp_path, {"model_type": "foo_bar", "hidden_size": 8})
    run = subprocess.run([sys.executable, "-m", "llm_analysis.analysis", "infer", "--model_name", path,
                          "--gpu_name", "a100-sxm-80gb"], capture_output=True, text=True)
    assert run.returncode == 2
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and path in lines[0] and "num_hidden_layers" in lines[0], run.stderr


@pytest.mark.parametrize("model_type", ["my_llama", None])
def test_an_unregistered_model_type_is_read_as_the_class_its_architectures_name(tmp_path, model_type):
    """model_type my_llama (or none) with architectures ["LlamaForCausalLM"]: the class is shared by llama,
    internlm3 and iquestcoder, and internlm3's head_dim default (128) counted this small Llama at 392,512
    parameters. Expected: the real LlamaForCausalLM built from the same keys (meta device)."""
    torch = pytest.importorskip("torch")
    keys = {"architectures": ["LlamaForCausalLM"], "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 176,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "tie_word_embeddings": False}
    data = dict(keys, **({} if model_type is None else {"model_type": model_type}))
    cfg = get_model_config_by_name(_write(tmp_path, data))
    real_keys = {k: v for k, v in keys.items() if k != "architectures"}
    with torch.device("meta"):
        real = transformers.LlamaForCausalLM(transformers.LlamaConfig(**real_keys))
    want = sum(p.numel() for p in real.parameters())  # 220,480
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import get_gpu_config_by_name
    assert LLMAnalysis(cfg, get_gpu_config_by_name("h100-sxm-80gb")).get_num_params_total() == want


@pytest.mark.parametrize("experts,top_k,words", [
    (-4, 2, ["routed experts is -4", "whole number >= 2"]),
    (4, 0, ["(top-k) is 0 of 4 experts", "from 1 to 4"]),
    (4, 8, ["(top-k) is 8 of 4 experts", "from 1 to 4"]),
])
def test_mixture_of_experts_counts_out_of_range_are_refused_by_name(tmp_path, experts, top_k, words):
    """-4 experts was read as a dense model and top-k 0 as 1, with no word: a token routed to 0 experts, or to
    more experts than there are, describes no model."""
    path = _write(tmp_path, {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "vocab_size": 1000,
                             "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "num_key_value_heads": 2, "num_local_experts": experts,
                             "num_experts_per_tok": top_k})
    with pytest.raises(ConfigError) as info:
        get_model_config_by_name(path)
    for w in words:
        assert w in str(info.value), str(info.value)


@pytest.mark.parametrize("field,value", [("tie_word_embeddings", "yes"), ("sliding_window", "big")])
def test_a_field_transformers_refuses_by_type_is_refused_not_read_around(tmp_path, field, value):
    """transformers' config refuses tie_word_embeddings = "yes" (a bool field): the import fell back to the raw
    keys with a warning and read "yes" as tied, counting 156,480 parameters where the untied model it would be
    has 220,480. A broken field is named instead (the config class, not the raw keys, decides a field's type)."""
    keys = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "vocab_size": 1000, "hidden_size": 64,
            "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
    keys[field] = value
    with pytest.raises(ConfigError, match=f"config field {field!r} = {value!r}"):
        get_model_config_by_name(_write(tmp_path, keys))


_SMALL_LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 512}


@pytest.mark.parametrize("extra, named", [
    ({"hidden_act": "foo"}, ("hidden_act = 'foo'", "silu", "gelu_new")),
    ({"rope_scaling": {"rope_type": "nonsense", "factor": 2.0}}, ("rope_type = 'nonsense'", "llama3", "yarn"))])
def test_values_transformers_refuses_to_build_are_refused_by_name(tmp_path, extra, named):
    """A config transformers cannot build (ACT2FN has no 'foo'; no RoPE initialiser is called 'nonsense': each a
    KeyError building the real LlamaForCausalLM, checked below) had been read as a plain Llama and reported in
    full, exit 0. Now one line naming the field, the value and the valid names; the CLI exits 2."""
    torch = pytest.importorskip("torch")
    config = transformers.LlamaConfig(**{k: v for k, v in {**_SMALL_LLAMA, **extra}.items() if k != "model_type"})
    with pytest.raises(KeyError), torch.device("meta"):
        transformers.LlamaForCausalLM(config)
    path = _write(tmp_path, {**_SMALL_LLAMA, **extra})
    with pytest.raises(ConfigError) as info:
        get_model_config_by_name(path)
    for text in named:
        assert text in str(info.value)
    run = subprocess.run([sys.executable, "-m", "llm_analysis.analysis", "infer", "--model_name", path,
                          "--gpu_name", "a100-sxm-80gb"], capture_output=True, text=True)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == 2 and len(lines) == 1 and named[0] in lines[0], run.stderr


@pytest.mark.parametrize("model_type, named", [
    ("qwen4", ("model_type 'qwen4'", "nor one transformers", "closest mapped: qwen3")),
    (None, ("states no model_type",))])
def test_an_unmapped_model_type_is_named_for_what_it_is(tmp_path, model_type, named):
    """A typo'd model_type (transformers registers no 'qwen4': its CONFIG_MAPPING, checked here) or none at all
    had been refused for 'no rms_norm_eps (not an RMSNorm model)' alone; the message now says the type is unknown
    and names the closest families mapped, or that the config states none."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    assert model_type not in CONFIG_MAPPING
    data = {k: v for k, v in _SMALL_LLAMA.items() if k != "model_type"}
    if model_type is not None:
        data["model_type"] = model_type
    with pytest.raises(ConfigError) as info:
        get_model_config_by_name(_write(tmp_path, data))
    for text in named:
        assert text in str(info.value)
