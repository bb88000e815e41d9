"""Encoder families mapped by table (hub/families/encoders.py) checked against the real
transformers model: small configs of each family are imported through the family
table, the bare `*Model` is built from the same config with real (tiny) CPU tensors,
and our parameter count and prefill FLOPs must equal the model's parameters (tied
weights once) and what `torch.utils.flop_counter.FlopCounterMode` counts for one
forward. Hand derivations pin the new operator kinds (extra lookup tables, shared
layers); configs the description cannot follow must be refused by name.
"""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, ParallelismConfig, get_gpu_config_by_name
from llm_analysis.errors import ConfigError, UnsupportedArchitectureError
from llm_analysis.hub.mapping import map_hf_config

GPU = get_gpu_config_by_name("a100-sxm-80gb")
BATCH, SEQ = 2, 8

_BERT_SMALL = dict(vocab_size=97, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                   intermediate_size=48, max_position_embeddings=40, type_vocab_size=3)
_LLAMA_SMALL = dict(vocab_size=97, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                    num_key_value_heads=4, intermediate_size=48, max_position_embeddings=64)

CASES = {
    "layoutlm": dict(model_type="layoutlm", **_BERT_SMALL, max_2d_position_embeddings=24),
    "roc_bert": dict(model_type="roc_bert", **_BERT_SMALL, pronunciation_vocab_size=30,
                     pronunciation_embed_dim=16, shape_vocab_size=50, shape_embed_dim=8),
    "roc_bert-no-shape": dict(model_type="roc_bert", **_BERT_SMALL, pronunciation_vocab_size=30,
                              pronunciation_embed_dim=16, shape_vocab_size=50, shape_embed_dim=8,
                              enable_shape=False),
    "roc_bert-summed": dict(model_type="roc_bert", **_BERT_SMALL, pronunciation_vocab_size=30,
                            pronunciation_embed_dim=32, shape_vocab_size=50, shape_embed_dim=32,
                            concat_input=False),
    "xmod": dict(model_type="xmod", **_BERT_SMALL, languages=["en_XX", "de_DE", "fr_XX"],
                 default_language="de_DE", adapter_reduction_factor=4),
    "xmod-adapter-norm": dict(model_type="xmod", **_BERT_SMALL, languages=["en_XX"], default_language="en_XX",
                              adapter_layer_norm=True, adapter_reuse_layer_norm=False),
    "deberta-v2": dict(model_type="deberta-v2", **_BERT_SMALL),
    "deberta-v3-style": dict(model_type="deberta-v2", **{**_BERT_SMALL, "type_vocab_size": 0},
                             relative_attention=True, position_buckets=8, max_relative_positions=40,
                             pos_att_type="p2c|c2p", share_att_key=True, norm_rel_ebd="layer_norm",
                             position_biased_input=False),
    "deberta-v2-own-projections": dict(model_type="deberta-v2", **_BERT_SMALL, relative_attention=True,
                                       max_relative_positions=6, pos_att_type=["c2p"]),
    "deberta-v2-both-own": dict(model_type="deberta-v2", **_BERT_SMALL, relative_attention=True,
                                pos_att_type=["c2p", "p2c"]),
    "deberta": dict(model_type="deberta", **_BERT_SMALL),
    "deberta-relative": dict(model_type="deberta", **_BERT_SMALL, relative_attention=True,
                             pos_att_type="c2p|p2c", max_relative_positions=5),
    "deberta-relative-long-span": dict(model_type="deberta", **_BERT_SMALL, relative_attention=True,
                                       pos_att_type=["p2c"], position_biased_input=False),
    "mpnet": dict(model_type="mpnet", **{k: v for k, v in _BERT_SMALL.items() if k != "type_vocab_size"},
                  relative_attention_num_buckets=32),
    "roformer-factorised": dict(model_type="roformer", **_BERT_SMALL, embedding_size=16),
    "roformer": dict(model_type="roformer", **_BERT_SMALL, embedding_size=32),
    "xlm": dict(model_type="xlm", vocab_size=97, emb_dim=32, n_layers=2, n_heads=4, n_langs=3,
                max_position_embeddings=40),
    "xlm-one-language": dict(model_type="xlm", vocab_size=97, emb_dim=32, n_layers=2, n_heads=4,
                             n_langs=1, max_position_embeddings=40, gelu_activation=False),
    "xlm-no-language-table": dict(model_type="xlm", vocab_size=97, emb_dim=32, n_layers=2, n_heads=4,
                                  n_langs=4, use_lang_emb=False, max_position_embeddings=40),
    "flaubert": dict(model_type="flaubert", vocab_size=97, emb_dim=32, n_layers=2, n_heads=4,
                     n_langs=2, max_position_embeddings=40, layerdrop=0.1),
    "albert": dict(model_type="albert", **_BERT_SMALL, embedding_size=16),
    "albert-equal-widths": dict(model_type="albert", **_BERT_SMALL, embedding_size=32),  # still projected
    "albert-groups": dict(model_type="albert", **{**_BERT_SMALL, "num_hidden_layers": 4},
                          embedding_size=16, num_hidden_groups=2),
    "ultrabert": dict(model_type="ultrabert", **_LLAMA_SMALL, head_dim=8, sliding_window=4,
                      layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
    "modernbert": dict(model_type="modernbert", **{k: v for k, v in _LLAMA_SMALL.items()
                                                   if k != "num_key_value_heads"},
                       local_attention=4, global_attn_every_n_layers=2, pad_token_id=0),
    "modernbert-biased": dict(model_type="modernbert", **{k: v for k, v in _LLAMA_SMALL.items()
                                                          if k != "num_key_value_heads"},
                              attention_bias=True, mlp_bias=True, norm_bias=True, pad_token_id=0),
    "modernbert-decoder": dict(model_type="modernbert-decoder", **{k: v for k, v in _LLAMA_SMALL.items()
                                                                   if k != "num_key_value_heads"},
                               local_attention=6, global_attn_every_n_layers=2, pad_token_id=0),
    "modernbert-decoder-biased": dict(model_type="modernbert-decoder",
                                      **{k: v for k, v in _LLAMA_SMALL.items() if k != "num_key_value_heads"},
                                      attention_bias=True, mlp_bias=True, norm_bias=True, classifier_bias=True,
                                      decoder_bias=False, pad_token_id=0, tie_word_embeddings=False),
    "esmc": dict(model_type="esmc", **_LLAMA_SMALL, head_dim=8),
    "esmc-biased": dict(model_type="esmc", **_LLAMA_SMALL, head_dim=8, attention_bias=True, mlp_bias=True),
    "ultrabert-gqa": dict(model_type="ultrabert", **{**_LLAMA_SMALL, "num_key_value_heads": 2},
                          attention_bias=True, mlp_bias=True),
}


def _import(raw: dict) -> ModelConfig:
    return map_hf_config(dict(raw), name=f"test/{raw['model_type']}", source="test", what="test config",
                         trust_remote_code=False, revision=None)


def _real_model(raw: dict, lm: bool = False):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    cfg = transformers.AutoConfig.for_model(**raw)
    torch.manual_seed(0)
    auto = transformers.AutoModelForCausalLM if lm else transformers.AutoModel
    try:
        return auto.from_config(cfg, attn_implementation="eager").eval()
    except (ValueError, TypeError):  # models without an eager switch
        return auto.from_config(cfg).eval()


def _real_params(model) -> int:
    return sum(p.numel() for p in model.parameters())  # parameters() yields a tied weight once


def _real_flops(model) -> int:
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    ids = torch.randint(4, 90, (BATCH, SEQ))
    for p in model.parameters():  # FlopCounterMode's module hooks trip over slices of leaf weights
        p.requires_grad_(False)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        try:
            model(input_ids=ids, use_cache=False)  # one forward: no cache to build
        except TypeError:  # forwards without use_cache
            model(input_ids=ids)
    return counter.get_total_flops()


def _engine_flops(a: LLMAnalysis) -> int:
    rows = a.operators("prefill", BATCH, SEQ, per_layer=False)
    return int(sum(r["flops"] for r in rows if r["kind"] in ("matmul", "attention")))


@pytest.mark.parametrize("case", sorted(CASES))
def test_params_and_flops_equal_transformers(case):
    raw = CASES[case]
    cfg = _import(raw)
    model = _real_model(raw, lm=cfg.lm_head)  # decoders: the causal LM, encoders: the bare model
    a = LLMAnalysis(cfg, GPU)
    assert a.get_num_params_total() == _real_params(model), case
    assert _engine_flops(a) == _real_flops(model), case


# --------------------------------------------------------------- hand derivations

def _bert_layer_params(h: int, ffn: int) -> int:
    """q, k, v, out (weights and biases), two LayerNorms, up and down with biases."""
    return 4 * (h * h + h) + 2 * 2 * h + (h * ffn + ffn) + (ffn * h + h)


def test_albert_shared_layers_by_hand():
    """ALBERT (arXiv 1909.11942 §3.1), 4 hidden layers in 2 groups: 2 distinct layers
    hold weights, 4 executions run. h=32, ffn=48, embedding 16, vocab 97, 40 positions,
    3 token types."""
    cfg = _import(CASES["albert-groups"])
    h, ffn, e = 32, 48, 16
    embeddings = (97 + 40 + 3) * e + 2 * e + (e * h + h)  # tables, LayerNorm, mapping_in
    pooler = h * h + h
    a = LLMAnalysis(cfg, GPU)
    assert a.get_num_params_total() == embeddings + 2 * _bert_layer_params(h, ffn) + pooler
    t = BATCH * SEQ
    per_layer = 2 * t * (4 * h * h + 2 * h * ffn) + 2 * BATCH * 4 * SEQ * SEQ * (h // 4) * 2
    flops = 4 * per_layer + 2 * t * e * h + 2 * BATCH * h * h
    assert _engine_flops(a) == flops


def test_shared_layers_on_pipeline_stages():
    """pp=2 over 4 executions of 2 groups: each stage runs 2 executions of its own group
    and holds that group's weights once; weights per GPU follow, FLOPs do not change."""
    cfg = _import(CASES["albert-groups"])
    one, two = LLMAnalysis(cfg, GPU), LLMAnalysis(cfg, GPU, parallelism_config=ParallelismConfig(pp_size=2))
    stages = two.describer.stage_groups
    assert [sorted(g.values()) for g in stages] == [[1, 1], [1, 1]]
    assert [sum(n for k, n in g.items() if k.owns_params) for g in stages] == [1, 1]
    assert _engine_flops(one) == _engine_flops(two)
    assert two.get_num_params_total() == one.get_num_params_total()


def test_shared_execution_reads_weights_it_does_not_hold():
    cfg = _import(CASES["albert"])  # 3 executions of one layer
    d = LLMAnalysis(cfg, GPU).describer
    owner, repeat = sorted(d.layer_groups, key=lambda k: not k.owns_params)
    assert (d.layer_groups[owner], d.layer_groups[repeat]) == (1, 2)
    from llm_analysis.model import Phase
    ph = Phase("prefill", 1, 4, 4)
    held = {o.name: o for o in d.layer_ops(ph, owner)}
    for o in d.layer_ops(ph, repeat):
        assert o.params == 0 and o.weight_bytes_per_gpu == 0
        assert o.flops == held[o.name].flops
        assert o.shared_weight_bytes_read_per_gpu == held[o.name].weight_bytes_per_gpu
        assert o.activation_bytes_per_gpu == held[o.name].activation_bytes_per_gpu


def test_extra_tables_by_hand():
    """LayoutLM: four [max_2d x hidden] box tables on top of BERT's embeddings."""
    cfg = _import(CASES["layoutlm"])
    assert cfg.extra_embedding_tables == [(24, 32)] * 4
    bert = cfg.model_copy(update={"extra_embedding_tables": []})
    diff = LLMAnalysis(cfg, GPU).get_num_params_total() - LLMAnalysis(bert, GPU).get_num_params_total()
    assert diff == 4 * 24 * 32


# --------------------------------------------------------------------- refusals

@pytest.mark.parametrize("raw, words", [
    (dict(CASES["albert"], inner_group_num=2), "inner_group_num"),
    (dict(CASES["albert"], num_hidden_groups=2), "num_hidden_groups"),
    (dict(CASES["xlm"], causal=True), "causal"),
    (dict(CASES["deberta-v2"], attention_head_size=4), "attention_head_size"),
    (dict(CASES["deberta-v2"], embedding_size=16), "embedding_size"),
    (dict(CASES["deberta-v2"], conv_kernel_size=3), "conv_kernel_size"),
    (dict(CASES["deberta-v3-style"], pos_att_type=["c2p", "p2p"]), "pos_att_type"),
    (dict(CASES["deberta"], talking_head=True), "talking_head"),
    (dict(CASES["esmc"], num_key_value_heads=2), "num_key_value_heads"),
    (dict(CASES["layoutlm"], position_embedding_type="relative_key"), "position_embedding_type"),
    (dict(CASES["roformer"], is_decoder=True, add_cross_attention=True), "add_cross_attention"),
])
def test_refused_by_name(raw, words):
    with pytest.raises(UnsupportedArchitectureError, match=words) as refusal:
        _import(raw)
    assert "llm-analysis[exact]" in str(refusal.value)


@pytest.mark.parametrize("fields, words", [
    (dict(num_unique_layers=5), "num_unique_layers"),
    (dict(num_unique_layers=0), "num_unique_layers"),
    (dict(extra_embedding_tables=[(0, 8)]), "extra_embedding_tables"),
])
def test_bad_fields_named(fields, words):
    with pytest.raises(ConfigError, match=words):
        ModelConfig(name="m", num_layers=6, n_head=4, hidden_dim=32, vocab_size=100, **fields)


def test_language_adapters_by_hand():
    """X-MOD, 3 languages, h=32, reduction 4 (a=8), 3 layers: every layer holds 3 adapters
    of h*a + a + a*h + h parameters; a token runs one: 2 * 2*h*a FLOPs per token per layer."""
    cfg = _import(CASES["xmod"])
    assert (cfg.adapter_dim, cfg.num_adapters) == (8, 3)
    plain = cfg.model_copy(update={"adapter_dim": None, "num_adapters": 1})
    with_adapters, without = LLMAnalysis(cfg, GPU), LLMAnalysis(plain, GPU)
    h, a, layers, t = 32, 8, 3, BATCH * SEQ
    assert with_adapters.get_num_params_total() - without.get_num_params_total() == layers * 3 * (2 * h * a + a + h)
    assert _engine_flops(with_adapters) - _engine_flops(without) == layers * 2 * t * 2 * h * a


def test_multimodal_wrapper_of_a_headless_encoder():
    """ModernVBERT's text model is a ModernBERT encoder without an LM head: the wrapper's
    tie_word_embeddings (which governs its own head) cannot change the encoder's count.
    The encoder is counted alone when `architectures` names the text-only class; the
    wrapper's own classes hold a vision tower, which is refused by name."""
    text = dict(CASES["modernbert"], tie_word_embeddings=True)
    wrapper = dict(model_type="modernvbert", tie_word_embeddings=False, text_config=text)
    wrapped = _import(dict(wrapper, architectures=["ModernBertModel"]))
    assert (LLMAnalysis(wrapped, GPU).get_num_params_total()
            == _real_params(_real_model(CASES["modernbert"])))
    with pytest.raises(UnsupportedArchitectureError, match="vision tower"):
        _import(wrapper)


def test_disentangled_attention_by_hand():
    """DeBERTa-v2 (arXiv 2006.03654 §3.1) with 8 position buckets: a table of R = 16 rows
    x h = 32 and its LayerNorm; per layer (3) the R rows go through the content query
    and key projections (shared: no new weights, 2 x 2*R*h*h FLOPs) and every query and
    every key meets them per head (H = 4, d = 8): c2p and p2c, 2 x 2*B*H*S*R*d FLOPs."""
    cfg = _import(CASES["deberta-v3-style"])
    plain = cfg.model_copy(update={"relative_attention": None})
    rel, base = LLMAnalysis(cfg, GPU), LLMAnalysis(plain, GPU)
    R, h, H, d, layers = 16, 32, 4, 8, 3
    assert rel.get_num_params_total() - base.get_num_params_total() == R * h + 2 * h
    per_layer = 2 * 2 * R * h * h + 2 * 2 * BATCH * H * SEQ * R * d
    assert _engine_flops(rel) - _engine_flops(base) == layers * per_layer
    own = cfg.model_copy(update={"relative_attention": cfg.relative_attention.model_copy(
        update={"shared_projections": False, "p2c": False})})
    # own projections: only pos_key_proj (c2p), h*h + h new weights per layer
    assert LLMAnalysis(own, GPU).get_num_params_total() - base.get_num_params_total() == (
        R * h + 2 * h + layers * (h * h + h))


# ------------------------------------------------------- published checkpoints
# config.json of published checkpoints (the architecture keys; the rest take the
# transformers defaults), built at full size on the meta device for the parameter count
PUBLISHED = {
    "albert/albert-base-v2": dict(model_type="albert", embedding_size=128, hidden_size=768,
                                  num_attention_heads=12, intermediate_size=3072, num_hidden_layers=12,
                                  vocab_size=30000, max_position_embeddings=512, hidden_act="gelu_new"),
    "microsoft/deberta-v3-base": dict(model_type="deberta-v2", hidden_size=768, num_attention_heads=12,
                                      num_hidden_layers=12, intermediate_size=3072, vocab_size=128100,
                                      max_position_embeddings=512, relative_attention=True,
                                      position_buckets=256, norm_rel_ebd="layer_norm", share_att_key=True,
                                      pos_att_type="p2c|c2p", max_relative_positions=-1,
                                      position_biased_input=False, type_vocab_size=0),
    "microsoft/deberta-base": dict(model_type="deberta", hidden_size=768, num_attention_heads=12,
                                   num_hidden_layers=12, intermediate_size=3072, vocab_size=50265,
                                   max_position_embeddings=512, relative_attention=True,
                                   pos_att_type="c2p|p2c", max_relative_positions=-1, type_vocab_size=0),
    "answerdotai/ModernBERT-base": dict(model_type="modernbert", hidden_size=768, num_attention_heads=12,
                                        num_hidden_layers=22, intermediate_size=1152, vocab_size=50368,
                                        global_attn_every_n_layers=3, local_attention=128),
    "microsoft/mpnet-base": dict(model_type="mpnet", hidden_size=768, num_attention_heads=12,
                                 num_hidden_layers=12, intermediate_size=3072, vocab_size=30527,
                                 max_position_embeddings=514, relative_attention_num_buckets=32),
}


@pytest.mark.parametrize("repo", sorted(PUBLISHED))
def test_published_configs_count_like_the_meta_model(repo):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    raw = PUBLISHED[repo]
    cfg = transformers.AutoConfig.for_model(**raw)
    with torch.device("meta"):
        model = transformers.AutoModel.from_config(cfg)
    assert LLMAnalysis(_import(raw), GPU).get_num_params_total() == _real_params(model), repo


def test_published_sizes():
    """ALBERT-base: 12M parameters (arXiv 1909.11942 Table 1); DeBERTa-v3-base: 86M
    backbone parameters plus 98M in the embedding of its 128K vocabulary (its model
    card): 184M in all."""
    albert = LLMAnalysis(_import(PUBLISHED["albert/albert-base-v2"]), GPU)
    assert round(albert.get_num_params_total() / 1e6) == 12
    deberta = LLMAnalysis(_import(PUBLISHED["microsoft/deberta-v3-base"]), GPU)
    assert round(deberta.get_num_params_total() / 1e6) == 86 + 98


def test_head_transform_and_first_layer_norm_by_hand():
    """ModernBERT-decoder (h = 32, 3 layers, bias-free norms): the head transform adds a
    bias-free h x h projection and a norm of h weights, 2*t*h*h FLOPs at every position;
    layer 0 holding no norm before attention removes h weights."""
    cfg = _import(CASES["modernbert-decoder"])
    h, t = 32, BATCH * SEQ
    plain = LLMAnalysis(cfg.model_copy(update={"lm_head_transform": "none"}), GPU)
    a = LLMAnalysis(cfg, GPU)
    assert a.get_num_params_total() - plain.get_num_params_total() == h * h + h
    assert _engine_flops(a) - _engine_flops(plain) == 2 * t * h * h
    every_norm = LLMAnalysis(cfg.model_copy(update={"first_layer_attn_norm": True}), GPU)
    assert every_norm.get_num_params_total() - a.get_num_params_total() == h
