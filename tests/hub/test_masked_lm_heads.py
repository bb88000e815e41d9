"""Encoders are counted as the class a user loads (issue 29): when the config's
`architectures` names the family's *ForMaskedLM class, its masked-LM head is counted (the
BERT-style transform, norm, output projection and bias; no pooler where the class drops
it); a head the family row does not describe (ALBERT, ELECTRA, RemBERT, RoFormer, LUKE) is
refused by name. Without `architectures` (or naming the bare class) the bare encoder is
counted, as before.

Expected parameters and FLOPs come from transformers: the *ForMaskedLM class built from the
same small config (real CPU tensors for FlopCounterMode, meta tensors for counts).
"""

from __future__ import annotations

import json

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, get_gpu_config_by_name
from llm_analysis.errors import UnsupportedArchitectureError
from llm_analysis.hub.mapping import map_hf_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES  # noqa: E402

GPU = get_gpu_config_by_name("a100-sxm-80gb")
BATCH, SEQ = 2, 8
BERT_SMALL = dict(vocab_size=97, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                  intermediate_size=48, max_position_embeddings=40, type_vocab_size=3)
LLAMA_SMALL = dict(vocab_size=97, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                   intermediate_size=48, max_position_embeddings=64)

COUNTED = {
    "bert": dict(model_type="bert", **BERT_SMALL),
    "distilbert-untied": dict(model_type="distilbert", vocab_size=97, dim=32, n_layers=2, n_heads=4,
                              hidden_dim=48, max_position_embeddings=40, tie_word_embeddings=False),
    "xlm-untied": dict(model_type="xlm", vocab_size=97, emb_dim=32, n_layers=2, n_heads=4, n_langs=3,
                       max_position_embeddings=40, tie_word_embeddings=False),
    "roberta": dict(model_type="roberta", **BERT_SMALL),
    "xlm-roberta": dict(model_type="xlm-roberta", **BERT_SMALL),
    "distilbert": dict(model_type="distilbert", vocab_size=97, dim=32, n_layers=2, n_heads=4, hidden_dim=48,
                       max_position_embeddings=40),
    "deberta-v2": dict(model_type="deberta-v2", **BERT_SMALL),
    "megatron-bert": dict(model_type="megatron-bert", **BERT_SMALL),
    "layoutlm": dict(model_type="layoutlm", **BERT_SMALL, max_2d_position_embeddings=24),
    "mpnet": dict(model_type="mpnet", **{k: v for k, v in BERT_SMALL.items() if k != "type_vocab_size"},
                  relative_attention_num_buckets=32),
    "xlm": dict(model_type="xlm", vocab_size=97, emb_dim=32, n_layers=2, n_heads=4, n_langs=3,
                max_position_embeddings=40),
    "modernbert": dict(model_type="modernbert", **LLAMA_SMALL, local_attention=4, global_attn_every_n_layers=2,
                       pad_token_id=0),
    "modernbert-biased-head": dict(model_type="modernbert", **LLAMA_SMALL, local_attention=4,
                                   global_attn_every_n_layers=2, pad_token_id=0, classifier_bias=True,
                                   decoder_bias=False),
}

REFUSED = {
    "albert": dict(model_type="albert", **BERT_SMALL, embedding_size=16),
    "electra": dict(model_type="electra", **BERT_SMALL, embedding_size=16),
    "rembert": dict(model_type="rembert", **BERT_SMALL, input_embedding_size=16, output_embedding_size=24),
    "roformer": dict(model_type="roformer", **BERT_SMALL, embedding_size=16),
    "luke": dict(model_type="luke", **BERT_SMALL, entity_vocab_size=50, entity_emb_size=16),
}


def _masked_lm_class(raw: dict) -> str:
    return MODEL_FOR_MASKED_LM_MAPPING_NAMES[raw["model_type"]]


def _import(raw: dict) -> ModelConfig:
    return map_hf_config(json.loads(json.dumps(raw)), name=f"test/{raw['model_type']}", source="test",
                         what="test config", trust_remote_code=False, revision=None)


def _real(raw: dict, class_name: str, device: str):
    cfg = transformers.AutoConfig.for_model(**raw)
    torch.manual_seed(0)
    with torch.device(device):
        try:
            return getattr(transformers, class_name)._from_config(cfg, attn_implementation="eager").eval()
        except (ValueError, TypeError):
            return getattr(transformers, class_name)._from_config(cfg).eval()


def _params(model) -> int:
    return sum(p.numel() for p in model.parameters())  # a tied weight once


def _real_flops(model) -> int:
    from torch.utils.flop_counter import FlopCounterMode
    ids = torch.randint(4, 90, (BATCH, SEQ))
    for p in model.parameters():
        p.requires_grad_(False)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=ids)
    return counter.get_total_flops()


def _engine_flops(a: LLMAnalysis) -> int:
    rows = a.operators("prefill", BATCH, SEQ, per_layer=False)
    return int(sum(r["flops"] for r in rows if r["kind"] in ("matmul", "attention")))


@pytest.mark.parametrize("case", sorted(COUNTED))
def test_masked_lm_class_named_in_architectures_is_counted(case):
    raw = COUNTED[case]
    cls = _masked_lm_class(raw)
    cfg = _import(dict(raw, architectures=[cls]))
    assert cfg.lm_head
    assert LLMAnalysis(cfg, GPU).get_num_params_total() == _params(_real(raw, cls, "meta")), case


@pytest.mark.parametrize("case", ["bert", "roberta", "distilbert", "xlm", "modernbert"])
def test_masked_lm_prefill_flops_equal_flop_counter(case):
    """The head runs at every position of a masked-LM forward."""
    raw = COUNTED[case]
    cls = _masked_lm_class(raw)
    a = LLMAnalysis(_import(dict(raw, architectures=[cls])), GPU)
    assert _engine_flops(a) == _real_flops(_real(raw, cls, "cpu")), case


@pytest.mark.parametrize("case", ["bert", "xlm", "modernbert"])
def test_without_architectures_the_bare_encoder_is_counted(case):
    raw = COUNTED[case]
    bare = transformers.AutoModel.from_config(transformers.AutoConfig.for_model(**raw))
    for named in (None, [type(bare).__name__]):
        cfg = _import(raw if named is None else dict(raw, architectures=named))
        assert not cfg.lm_head
        assert LLMAnalysis(cfg, GPU).get_num_params_total() == _params(bare)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_masked_lm_head_not_described_is_refused(case):
    raw = REFUSED[case]
    cls = _masked_lm_class(raw)
    with pytest.raises(UnsupportedArchitectureError) as info:
        _import(dict(raw, architectures=[cls]))
    assert cls in str(info.value) and "masked-LM head" in str(info.value) and "\n" not in str(info.value)


def test_untied_bert_head_with_two_output_biases_is_refused():
    """Untied, BertLMPredictionHead keeps the decoder's bias and its own `bias` apart."""
    raw = dict(COUNTED["bert"], tie_word_embeddings=False)
    head = _real(raw, "BertForMaskedLM", "meta").cls.predictions
    assert head.decoder.bias is not head.bias  # the two biases the description cannot hold
    with pytest.raises(UnsupportedArchitectureError, match="two vocab-sized output biases"):
        _import(dict(raw, architectures=["BertForMaskedLM"]))


def test_xlm_adaptive_softmax_head_is_refused():
    raw = dict(COUNTED["xlm"], asm=True, n_words=97, asm_cutoffs=[20, 50], architectures=["XLMWithLMHeadModel"])
    with pytest.raises(UnsupportedArchitectureError, match="asm=True"):
        _import(raw)
