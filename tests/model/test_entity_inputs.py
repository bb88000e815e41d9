"""LUKE (arXiv 2010.01057) mapped by its family row (hub_families_entities.py), checked
against the real transformers LukeModel built on CPU from small configs (the meta
device cannot run it: its embeddings call .item()). Our parameter count must equal the
model's, and our prefill FLOPs what FlopCounterMode counts for one forward of word
tokens (the entity embeddings and entity-aware queries then do not run). A hand
derivation pins the entity parameters; bad entity fields are refused by name.
"""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, get_gpu_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.hub.mapping import map_hf_config

GPU = get_gpu_config_by_name("a100-sxm-80gb")
BATCH, SEQ = 2, 8

_SMALL = dict(model_type="luke", vocab_size=97, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
              intermediate_size=48, max_position_embeddings=40, type_vocab_size=3,
              entity_vocab_size=50, entity_emb_size=16)
CASES = {
    "luke": _SMALL,
    "luke-no-aware-attention": dict(_SMALL, use_entity_aware_attention=False),
    "luke-entity-as-wide": dict(_SMALL, entity_emb_size=32),  # no entity_embedding_dense
    # LukeModel's code reads neither key (BERT's rows refuse them): still absolute, no cross
    "luke-ignored-bert-keys": dict(_SMALL, position_embedding_type="relative_key", is_decoder=True,
                                   add_cross_attention=True),
}


def _import(raw: dict) -> ModelConfig:
    return map_hf_config(dict(raw), name="test/luke", source="test", what="test config",
                         trust_remote_code=False, revision=None)


def _real_model(raw: dict):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**raw)
    return transformers.AutoModel.from_config(cfg, attn_implementation="eager").eval()


def _real_flops(model) -> int:
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    for p in model.parameters():
        p.requires_grad_(False)
    ids = torch.randint(4, 90, (BATCH, SEQ))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=ids)
    return counter.get_total_flops()


@pytest.mark.parametrize("case", sorted(CASES))
def test_params_and_flops_equal_transformers(case):
    raw = CASES[case]
    model = _real_model(raw)
    a = LLMAnalysis(_import(raw), GPU)
    assert a.get_num_params_total() == sum(p.numel() for p in model.parameters()), case
    rows = a.operators("prefill", BATCH, SEQ, per_layer=False)
    engine_flops = int(sum(r["flops"] for r in rows if r["kind"] in ("matmul", "attention")))
    assert engine_flops == _real_flops(model), case


def test_entity_parameters_by_hand():
    """h=32, 3 layers, entities 50 x 16: entity table 800, dense 16 x 32 = 512 (no bias),
    positions 40 x 32 = 1280, token types 3 x 32 = 96, LayerNorm 64; per layer three
    queries of 32 x 32 + 32 = 1056 each. None of it runs on word tokens: no FLOPs."""
    cfg = _import(CASES["luke"])
    bert = cfg.model_copy(update={"entity_inputs": None})
    with_entities, without = LLMAnalysis(cfg, GPU), LLMAnalysis(bert, GPU)
    assert with_entities.get_num_params_total() - without.get_num_params_total() == \
        800 + 512 + 1280 + 96 + 64 + 3 * 3 * 1056
    flops = [sum(r["flops"] for r in a.operators("prefill", BATCH, SEQ, per_layer=False))
             for a in (with_entities, without)]
    assert flops[0] == flops[1]


@pytest.mark.parametrize("entity, words", [
    (dict(vocab_size=0, emb_dim=8, position_rows=4, type_rows=1), "entity_inputs.vocab_size"),
    (dict(vocab_size=10, emb_dim=8, position_rows=-1, type_rows=1), "entity_inputs.position_rows"),
])
def test_bad_fields_named(entity, words):
    with pytest.raises(ConfigError, match=words):
        ModelConfig(name="m", num_layers=2, n_head=4, hidden_dim=32, vocab_size=100, entity_inputs=entity)
