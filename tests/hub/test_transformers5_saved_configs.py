"""Configs as transformers 5 saves them: `to_json_file` writes the floats JSON has no literal for as
{"__float__": "Infinity"} (Bamba's default time_step_limit is (0.0, inf)), and transformers decodes
them when it reads the file. A Bamba config so saved was counted with every layer a Mamba-2 mixer:
its configuration class refused the undecoded tag, and the raw-config fallback did not read
attn_layer_indices, where BambaConfig names its attention layers.

Expected counts: transformers building BambaForCausalLM on the meta device, and a hand count of
the layer kinds from BambaConfig.layers_block_type's rule (layer i attends when attn_layer_indices
lists it).
"""

from __future__ import annotations

import json

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.errors import LLMAnalysisError
from llm_analysis.hub.entry import model_config_from_hf_dict

GPU = get_gpu_config_by_name("h100-sxm-80gb")
BAMBA = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128, vocab_size=256,
             num_hidden_layers=4, mamba_n_heads=8, mamba_d_head=16, mamba_d_state=16, mamba_n_groups=1,
             mamba_expand=2, mamba_chunk_size=16, pad_token_id=0, bos_token_id=None, eos_token_id=None)


def _saved(tmp_path, attn_layer_indices):
    """(the folder transformers saved the config in, transformers' parameter count of the model)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    cfg = transformers.AutoConfig.for_model("bamba", attn_layer_indices=attn_layer_indices, **BAMBA)
    cfg.to_json_file(str(tmp_path / "config.json"))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    return tmp_path, sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("attn_layer_indices", [[1], [0, 2]])
def test_bamba_saved_by_transformers_is_counted_as_transformers_builds_it(tmp_path, attn_layer_indices, caplog):
    folder, expected = _saved(tmp_path, attn_layer_indices)
    text = (folder / "config.json").read_text()
    if '"__float__"' not in text:
        pytest.skip("this transformers writes no __float__ tags")
    cfg = get_model_config_by_name(str(folder))
    assert LLMAnalysis(cfg, GPU).get_num_params_total() == expected
    # read by transformers' own configuration class, not around it
    assert "could not build" not in caplog.text
    assert [i for i, kind in enumerate(cfg.layer_types) if kind == "full_attention"] == attn_layer_indices


def test_the_float_tag_is_decoded_as_transformers_decodes_it():
    from llm_analysis.hub.source import decode_special_floats
    d = {"a": [0.0, {"__float__": "Infinity"}], "b": {"__float__": "-Infinity"}, "c": {"x": {"__float__": "NaN"}},
         "d": {"__float__": "Other"}, "e": {"__float__": "NaN", "more": 1}}
    out = decode_special_floats(d)
    assert out["a"] == [0.0, float("inf")] and out["b"] == float("-inf") and out["c"]["x"] != out["c"]["x"]
    assert out["d"] == {"__float__": "Other"} and out["e"] == {"__float__": "NaN", "more": 1}  # not tags: as they are


@pytest.mark.parametrize("attn_layer_indices, attention_layers", [([1], [1]), ([0, 2], [0, 2]), ([], []),
                                                                 ([3, 7], [3])])
def test_bamba_raw_config_reads_its_attention_layers(monkeypatch, attn_layer_indices, attention_layers):
    """Without transformers' configuration object (transformers absent, or refusing another field) the raw
    attn_layer_indices still say which layers attend; an index past the last layer names none, as in
    BambaConfig.layers_block_type."""
    import llm_analysis.hub.mapping as mapping
    monkeypatch.setattr(mapping, "transformers_config", lambda *a, **k: None)
    raw = dict(BAMBA, model_type="bamba", architectures=["BambaForCausalLM"], mamba_d_conv=4,
               attn_layer_indices=attn_layer_indices)
    cfg = model_config_from_hf_dict(raw, "tiny-bamba")
    assert [i for i, kind in enumerate(cfg.layer_types) if kind == "full_attention"] == attention_layers
    assert all(kind == "mamba2" for i, kind in enumerate(cfg.layer_types) if i not in attention_layers)


def test_bamba_raw_attention_indices_that_are_no_layer_numbers_are_refused(monkeypatch):
    import llm_analysis.hub.mapping as mapping
    monkeypatch.setattr(mapping, "transformers_config", lambda *a, **k: None)
    raw = dict(BAMBA, model_type="bamba", mamba_d_conv=4, attn_layer_indices="1,3")
    with pytest.raises(LLMAnalysisError) as info:
        model_config_from_hf_dict(raw, "tiny-bamba")
    assert "attn_layer_indices" in str(info.value) and "'1,3'" in str(info.value)


def test_bamba_raw_count_matches_transformers(tmp_path, monkeypatch):
    """The raw fallback's count of the saved file equals transformers' count too."""
    folder, expected = _saved(tmp_path, [1])
    import llm_analysis.hub.mapping as mapping
    monkeypatch.setattr(mapping, "transformers_config", lambda *a, **k: None)
    raw = json.loads((folder / "config.json").read_text())
    assert LLMAnalysis(model_config_from_hf_dict(raw, "tiny-bamba"), GPU).get_num_params_total() == expected
