"""The mirrored system's tiny/test catalogue entries (issue 11, item 7).

The mirrored system's current model catalogue also ships five small models. Our
entries are derived from their Hub `config.json` (reconstructed in
tests/data/hf_configs_mirrored/, see the README there); here the transformers
model is built from the same dict on the `meta` device and its parameters are
counted, and the mirrored system's own JSON files (quoted verbatim below) must
load unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_analysis.config import (ModelConfig, get_gpu_config_by_name, get_model_config_by_name,
                                 list_model_configs)
from llm_analysis.facade import LLMAnalysis

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

RAW_DIR = Path(__file__).resolve().parents[1] / "data" / "hf_configs_mirrored"
NAMES = [
    "hf-internal-testing_tiny-random-BloomForCausalLM",
    "hf-internal-testing_tiny-random-GPTNeoModel",
    "hf-internal-testing_tiny-random-gpt_neo",
    "sentence-transformers_all-MiniLM-L6-v2",
    "trl-internal-testing_tiny-random-GPTNeoForCausalLM",
]

# The mirrored system's files, verbatim (llm_analysis/model_configs/<name>.json of
# github.com/cli99/llm-analysis): they must load as they are.
MIRRORED_FILES = {
    "hf-internal-testing_tiny-random-BloomForCausalLM": dict(
        num_layers=5, n_head=4, hidden_dim=32, vocab_size=1024, max_seq_len=None,
        ffn_embed_dim=128, model_type="bloom"),
    "hf-internal-testing_tiny-random-GPTNeoModel": dict(
        num_layers=4, n_head=4, hidden_dim=32, vocab_size=1024, max_seq_len=512,
        ffn_embed_dim=128, model_type="gpt_neo"),
    "hf-internal-testing_tiny-random-gpt_neo": dict(
        num_layers=4, n_head=4, hidden_dim=32, vocab_size=1000, max_seq_len=512,
        ffn_embed_dim=128, model_type="gpt_neo"),
    "sentence-transformers_all-MiniLM-L6-v2": dict(
        num_layers=6, n_head=12, hidden_dim=384, vocab_size=30522, max_seq_len=512,
        ffn_embed_dim=1536, model_type="bert"),
    "trl-internal-testing_tiny-random-GPTNeoForCausalLM": dict(
        num_layers=4, n_head=4, hidden_dim=32, vocab_size=1024, max_seq_len=512,
        ffn_embed_dim=128, model_type="gpt_neo"),
}


def _raw(name: str) -> dict:
    return json.loads((RAW_DIR / f"{name}.json").read_text())


def _hf_param_count(raw: dict) -> int:
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM
    cfg = AutoConfig.for_model(**raw)
    # BERT: the bare encoder with pooler (what sentence-transformers loads);
    # decoders: the causal LM (its head is tied, so it adds no parameter).
    auto = AutoModel if raw["model_type"] == "bert" else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(cfg)
    return sum(p.numel() for p in model.parameters())  # tied weights once


@pytest.mark.parametrize("name", NAMES)
def test_listed_and_resolves(name):
    assert name in list_model_configs()
    assert get_model_config_by_name(name).name == name
    hub_id = name.replace("_", "/", 1)
    assert get_model_config_by_name(hub_id).name == name


@pytest.mark.parametrize("name", NAMES)
def test_mirrored_file_loads_unchanged(name):
    data = dict(name=name, **MIRRORED_FILES[name])
    theirs = ModelConfig(**data)
    ours = get_model_config_by_name(name)
    for field, value in MIRRORED_FILES[name].items():
        if field == "max_seq_len" and value is None:
            continue
        assert getattr(theirs, field) == getattr(ours, field) == value, field


@pytest.mark.parametrize("name", NAMES)
def test_params_equal_transformers(name):
    ours = LLMAnalysis(get_model_config_by_name(name), get_gpu_config_by_name("a100-sxm-80gb"))
    assert ours.get_num_params_total() == _hf_param_count(_raw(name))


def test_minilm_params_hand_derivation():
    # BERT encoder with pooler, h = 384, L = 6, ffn 1536, V = 30522, 512 positions, 2 types:
    # embeddings (V + 512 + 2) h + LayerNorm 2h = 11,918,592
    # per layer: 4 (h^2 + h) + 2 (h * 1536) + 1536 + h + 2 x LayerNorm 2h = 1,774,464
    # pooler h^2 + h = 147,840; total 22,713,216 (model card: 22.7M).
    h, f = 384, 1536
    emb = (30522 + 512 + 2) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h * f + f + h + 2 * 2 * h
    expected = emb + 6 * layer + h * h + h
    assert expected == 22_713_216
    ours = LLMAnalysis(get_model_config_by_name("sentence-transformers/all-MiniLM-L6-v2"),
                       get_gpu_config_by_name("a100-sxm-80gb"))
    assert ours.get_num_params_total() == expected
    assert round(expected / 1e6, 1) == 22.7


def test_tiny_gpt_neo_attention_pattern_follows_config():
    raw = _raw("hf-internal-testing_tiny-random-GPTNeoModel")
    hf = transformers.AutoConfig.for_model(**raw)
    ours = get_model_config_by_name("hf-internal-testing_tiny-random-GPTNeoModel")
    expected = ["full_attention" if t == "global" else "sliding_attention" for t in hf.attention_layers]
    assert [ours.layer_attention_type(i) for i in range(ours.num_layers)] == expected
    assert ours.sliding_window == hf.window_size == 7
