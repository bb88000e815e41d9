"""HunYuan configs are refused naming what ModelConfig does not describe: the RMSNorms transformers'
HunYuanDenseV1Attention / HunYuanMoEV1Attention apply to each head's query and key after the rotary
embedding (query_layernorm, key_layernorm), not a harmless key of the config (eod_token_id, which the
generic mapping's refusal named before, or moe_topk)."""

from __future__ import annotations

import inspect

import pytest

from llm_analysis.errors import LLMAnalysisError
from llm_analysis.hub.entry import model_config_from_hf_dict

SMALL = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=128,
             vocab_size=256, num_hidden_layers=2, eod_token_id=3)


@pytest.mark.parametrize("model_type, module, extra", [
    ("hunyuan_v1_dense", "hunyuan_v1_dense.modeling_hunyuan_v1_dense", {}),
    ("hunyuan_v1_moe", "hunyuan_v1_moe.modeling_hunyuan_v1_moe", {"num_experts": 4, "moe_topk": 2}),
])
def test_hunyuan_refusal_names_the_query_key_norms(model_type, module, extra):
    transformers = pytest.importorskip("transformers")
    import importlib
    source = inspect.getsource(importlib.import_module(f"transformers.models.{module}"))
    # the feature named is the one transformers' attention builds (the independent source)
    assert "self.query_layernorm" in source and "self.key_layernorm" in source
    with pytest.raises(LLMAnalysisError) as info:
        model_config_from_hf_dict(dict(SMALL, model_type=model_type, **extra), f"tiny-{model_type}")
    message = str(info.value)
    assert "query_layernorm" in message and "key_layernorm" in message and "rotary" in message
    assert "eod_token_id" not in message and "\n" not in message
