"""`--exact` resolves model names as every other command does (model_lookup.hf_config_by_name):
a catalogue name, including the CLI's default model, reaches the config.json of the Hub
repo its entry was imported from.

The Hub is replaced by a function that serves one config.json and records the request;
expected parameters come from the transformers model built on the meta device here.
"""

from __future__ import annotations

import json

import pytest

import llm_analysis.hub.download as hub_download
from llm_analysis.errors import ConfigError
from llm_analysis.catalogue.model_lookup import hf_config_by_name

# config.json of facebook/opt-1.3b on the Hugging Face Hub (the fields that define the model)
OPT_1_3B = {"model_type": "opt", "activation_function": "relu", "do_layer_norm_before": True, "ffn_dim": 8192,
            "hidden_size": 2048, "max_position_embeddings": 2048, "num_attention_heads": 32,
            "num_hidden_layers": 24, "vocab_size": 50272, "word_embed_proj_dim": 2048,
            "enable_bias": True, "layer_norm_elementwise_affine": True, "tie_word_embeddings": True,
            "bos_token_id": 2, "eos_token_id": 2, "pad_token_id": 1}


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    """Serves OPT_1_3B for any repo; returns the list of (repo, revision) asked for."""
    class Requests(list):
        served = OPT_1_3B
    requests = Requests()
    path = tmp_path / "config.json"

    def download(name, revision):
        requests.append((name, revision))
        path.write_text(json.dumps(requests.served))
        return str(path), "http://fake-hub"
    monkeypatch.setattr(hub_download, "download_config_json", download)
    monkeypatch.setenv("LLM_ANALYSIS_CACHE", str(tmp_path / "cache"))
    return requests


def test_catalogue_name_resolves_to_the_hub_repo_it_was_imported_from(fake_hub):
    cfg, model_id = hf_config_by_name("facebook_opt-1.3b")
    assert (model_id, fake_hub) == ("facebook/opt-1.3b", [("facebook/opt-1.3b", None)])
    assert cfg == OPT_1_3B
    # a renamed repo: the entry's source names the current one
    assert hf_config_by_name("bert-base-cased")[1] == "google-bert/bert-base-cased"


def test_files_and_directories_need_no_hub(tmp_path, fake_hub):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    assert hf_config_by_name(str(tmp_path / "m")) == ({"model_type": "gpt2"}, None)
    assert hf_config_by_name(str(tmp_path / "m" / "config.json")) == ({"model_type": "gpt2"}, None)
    assert fake_hub == []


def test_entries_without_a_transformers_config_and_typos_are_config_errors(fake_hub):
    with pytest.raises(ConfigError, match="facebook_opt-175b.*published figures"):
        hf_config_by_name("facebook_opt-175b")
    with pytest.raises(ConfigError, match="facebok_opt-1.3b"):
        hf_config_by_name("facebok_opt-1.3b")
    assert fake_hub == []


def test_a_hub_id_naming_a_papers_entry_still_asks_the_hub(fake_hub):
    # facebook/opt-175b matches the catalogue entry written from the OPT paper, but as a Hub id
    # it names a repo: its config.json is what --exact needs
    assert hf_config_by_name("facebook/opt-175b")[1] == "facebook/opt-175b"
    assert fake_hub == [("facebook/opt-175b", None)]


def test_cli_default_model_runs_exact(fake_hub):
    # the derivation reads each distinct layer once: 24 identical layers cost CI time and
    # test nothing more than 2 (the routing of the default name is the point here)
    fake_hub.served = dict(OPT_1_3B, num_hidden_layers=2)
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import llm_analysis.cli.commands as cli
    with torch.device("meta"):
        model = transformers.OPTForCausalLM(transformers.OPTConfig(**fake_hub.served))
    expected = sum(p.numel() for p in model.parameters())  # tied embedding and head once
    summary = cli.infer(exact=True, output_format="json", quiet=True)  # the default model, facebook_opt-1.3b
    assert fake_hub == [("facebook/opt-1.3b", None)]
    assert summary["num_params_total"] == expected


@pytest.mark.parametrize("field,value", [("hidden_size", "64"), ("tie_word_embeddings", "yes"), ("hidden_size", 64.5)])
def test_exact_names_a_config_field_of_the_wrong_type_in_one_line(tmp_path, field, value):
    """A local config.json with a value transformers' config refuses by type: `--exact` printed a 24-frame
    traceback from huggingface_hub's field validation and exited 1; one line naming the field and value, exit 2."""
    import subprocess
    import sys
    folder = tmp_path / "model"
    folder.mkdir()
    keys = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 1000, "hidden_size": 64,
            "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
    keys[field] = value
    (folder / "config.json").write_text(json.dumps(keys))
    run = subprocess.run([sys.executable, "-m", "llm_analysis.analysis", "train", "--model_name", str(folder),
                          "--exact", "True", "--gpu_name", "h100-sxm-80gb", "--seq_len", "512",
                          "--batch_size_per_gpu", "1"], capture_output=True, text=True, timeout=300)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert len(lines) == 1 and f"config field {field!r} = {value!r}" in lines[0], lines
