"""A decoder config is counted as the class its `architectures` names (docs/hub-import.md), not as the
causal LM whatever it names: the bare model (Qwen3Model) holds no LM head; a task-head class
(Qwen3ForSequenceClassification, ...) holds a num_labels projection ModelConfig does not describe,
so it is refused in one line naming the class. Before, every one was counted with an LM head
(131,520 parameters for the small Qwen3 below, where transformers builds 115,136 for Qwen3Model).

Expected counts: transformers building the named class on the meta device.
"""

from __future__ import annotations

import json

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_gpu_config_by_name
from llm_analysis.errors import LLMAnalysisError
from llm_analysis.hub.entry import model_config_from_hf_dict

GPU = get_gpu_config_by_name("h100-sxm-80gb")
QWEN3 = dict(model_type="qwen3", hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=32, vocab_size=256, tie_word_embeddings=False)


def _transformers_count(class_name: str) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    cfg = transformers.AutoConfig.for_model(**QWEN3)
    with torch.device("meta"):
        model = getattr(transformers, class_name)(cfg)
    return sum(p.numel() for p in model.parameters())


def _ours(architectures):
    d = dict(QWEN3, **({"architectures": architectures} if architectures else {}))
    return LLMAnalysis(model_config_from_hf_dict(json.loads(json.dumps(d)), "tiny-qwen3"), GPU)


@pytest.mark.parametrize("architectures, class_name", [(["Qwen3Model"], "Qwen3Model"),
                                                       (["Qwen3ForCausalLM"], "Qwen3ForCausalLM"),
                                                       (None, "Qwen3ForCausalLM")])
def test_the_named_class_is_counted(architectures, class_name):
    assert _ours(architectures).get_num_params_total() == _transformers_count(class_name)


def test_the_bare_model_is_the_causal_lm_less_its_head():
    """Hand count: the untied LM head is vocab x hidden = 256 x 64."""
    assert _ours(["Qwen3ForCausalLM"]).get_num_params_total() - _ours(["Qwen3Model"]).get_num_params_total() == 256 * 64
    assert not _ours(["Qwen3Model"]).model_config.lm_head


@pytest.mark.parametrize("class_name", ["Qwen3ForSequenceClassification", "Qwen3ForTokenClassification",
                                        "Qwen3ForQuestionAnswering"])
def test_a_task_head_class_is_refused_naming_it(class_name):
    # transformers' own count differs from the causal LM's: counting the LM would be wrong
    assert _transformers_count(class_name) != _transformers_count("Qwen3ForCausalLM")
    with pytest.raises(LLMAnalysisError) as info:
        _ours([class_name])
    message = str(info.value)
    assert class_name in message and "task head not modelled" in message and "\n" not in message


def test_encoders_keep_their_own_rules():
    """BERT with a token-classification head (the catalogue's dslim/bert-base-NER) is still the bare
    encoder its family row describes, not refused."""
    bert = dict(model_type="bert", architectures=["BertForTokenClassification"], hidden_size=64,
                num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=100)
    assert model_config_from_hf_dict(bert, "tiny-bert").encoder_only
