"""Rows of the Hub family table for encoders. Each row describes the bare encoder (the `*Model`
class: no LM head; the `*ForMaskedLM` head at the end of this file), following the transformers
modelling code it names; what a row cannot describe exactly is refused by a check naming it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict

from llm_analysis.hub.errors import UnmappableConfig, not_modelled
from llm_analysis.hub.families.bases import (BERT, BIASES, LAYERNORM, LLAMA, MODERNBERT, NO_BIASES,
                                             RefuseFeature)
from llm_analysis.hub.source import Fields, Src
from llm_analysis.hub.spec import Act, Family, Flag, Opt, Reader, Refuse, Req, Same, Total, When

__all__ = ["ENCODER_FAMILIES"]

# Relative position embeddings and cross-attention (is_decoder + add_cross_attention adds a
# cross-attention block to every layer) are refused. The rows written first refuse them as a config the
# row cannot read (UnmappableConfig), the later ones (`*_FEATURE`) as a feature ModelConfig lacks
# (UnsupportedArchitecture, with the [exact] hint): each row keeps the refusal its users have seen.
_ABSOLUTE, _ABSOLUTE_FEATURE = (
    refuse("position_embedding_type", ("absolute", None), default="absolute", reason="relative position embeddings")
    for refuse in (Refuse, RefuseFeature))
_NO_CROSS, _NO_CROSS_FEATURE = (
    refuse("add_cross_attention", (False,), default=False, as_bool=True, reason="cross-attention to an encoder")
    for refuse in (Refuse, RefuseFeature))
_BERT_CHECKS = (_ABSOLUTE, _NO_CROSS)
# Rotary post-LN encoders (JinaEmbeddingsV3Layer, GteLayer, NomicBertLayer): BERT's
# embedding LayerNorm and post-attention / post-MLP LayerNorms, no position table
_ROTARY_BERT = {**BERT, "position_embedding_type": "rotary", "num_position_embeddings": None,
                "head_dim": Opt("head_dim"), "type_vocab_size": Opt("type_vocab_size", default=0)}


def _rembert_mapping(src: Src, f: Fields, what: str) -> None:
    """RemBertEncoder always holds `embedding_hidden_mapping_in`, even when the input
    embeddings are as wide as hidden."""
    f["embedding_proj_in_dim"] = f.get("embedding_dim")


def _yoso_attention(src: Src, f: Fields, what: str) -> None:
    """YosoSelfAttention: with `use_expectation` it computes the LSH collision
    expectation over every query/key pair (dense-attention matmuls); the sampled
    hashing path and the optional depthwise conv (`conv_window`) are not described."""
    if not bool(src.get("use_expectation", default=True)) or src.get("conv_window", default=None):
        raise UnmappableConfig(f"{what}: YOSO with use_expectation=False (sampled LSH attention) or "
                               "a conv_window cannot be described by ModelConfig")


def _tables(*specs):
    """A step setting `extra_embedding_tables` from (rows, width) specs: a spec is a
    config key, a field already read, or a callable (src, fields) -> int."""
    def step(src: Src, f: Fields, what: str) -> None:
        def value(spec):
            if callable(spec):
                return spec(src, f)
            return f[spec] if spec in f else src.req_int(spec)
        tables = [(value(r), value(w)) for r, w in specs]
        f["extra_embedding_tables"] = [t for t in tables if None not in t]
    return step


def _xlm_languages(src: Src, f: Fields, what: str) -> None:
    """XLMModel / FlaubertModel: a language table only when n_langs > 1 and use_lang_emb."""
    langs = src.opt_int("n_langs", default=1) or 1
    if langs > 1 and bool(src.get("use_lang_emb", default=True)):
        f["extra_embedding_tables"] = [(langs, f["hidden_dim"])]


def _albert_layers(src: Src, f: Fields, what: str) -> None:
    """AlbertTransformer: hidden layer i runs group int(i / (num_hidden_layers /
    num_hidden_groups)), each group one AlbertLayer here (inner_group_num = 1);
    embedding_hidden_mapping_in exists whatever the widths."""
    inner = src.opt_int("inner_group_num", default=1)
    groups = src.opt_int("num_hidden_groups", default=1)
    n = f.get("num_layers")
    if inner != 1:
        raise not_modelled(f"{what}: inner_group_num = {inner} (several layers per ALBERT group) "
                               "cannot be described by ModelConfig; only inner_group_num = 1")
    if n is None or groups is None or groups < 1 or n % groups:
        raise not_modelled(f"{what}: num_hidden_groups = {groups} must divide num_hidden_layers = {n} "
                               "(uneven ALBERT groups cannot be described by ModelConfig)")
    f.update(num_unique_layers=groups, embedding_proj_in_dim=f.get("embedding_dim"))


def _esmc_shapes(src: Src, f: Fields, what: str) -> None:
    """EsmcAttention normalises q and k over hidden_size: it builds only when all
    heads have keys and values and n_head * head_dim == hidden_size."""
    heads, kv = f.get("n_head"), f.get("num_key_value_heads") or f.get("n_head")
    width = (f.get("head_dim") or f["hidden_dim"] // heads) * heads
    if kv != heads or width != f["hidden_dim"]:
        raise not_modelled(f"{what}: ESM C with num_key_value_heads = {kv} or heads x head_dim = {width} "
                               f"!= hidden_size = {f['hidden_dim']} (its q/k LayerNorms span hidden_size) "
                               "cannot be described by ModelConfig")


def _roc_bert_inputs(src: Src, f: Fields, what: str) -> None:
    """RoCBertEmbeddings: pronunciation and shape tables always exist; with concat_input
    the word embedding is concatenated with the enabled ones and projected back to
    hidden (map_inputs_layer, with a bias), before positions and token types are added."""
    _tables(("pronunciation_vocab_size", "pronunciation_embed_dim"),
            ("shape_vocab_size", "shape_embed_dim"))(src, f, what)
    if not bool(src.get("concat_input", default=True)):
        return
    width = f["hidden_dim"]
    for flag, key in (("enable_pronunciation", "pronunciation_embed_dim"), ("enable_shape", "shape_embed_dim")):
        if bool(src.get(flag, default=True)):
            width += src.req_int(key) or 0
    if width == f["hidden_dim"]:
        raise not_modelled(f"{what}: concat_input with neither shape nor pronunciation enabled still "
                               "projects hidden -> hidden (map_inputs_layer), which the description omits")
    f.update(embedding_proj_in_dim=width, embedding_proj_bias=True)


def _xmod_adapters(src: Src, f: Fields, what: str) -> None:
    """XmodOutput: one XmodAdapter (hidden -> hidden // adapter_reduction_factor ->
    hidden, biased) per language; adapter_layer_norm adds a LayerNorm per layer."""
    languages = src.get("languages", default=None)
    if not isinstance(languages, (list, tuple)) or not languages:
        raise UnmappableConfig(f"{what}: languages = {languages!r} must list the adapters' languages")
    f.update(adapter_dim=f["hidden_dim"] // (src.req_int("adapter_reduction_factor") or 1),
             num_adapters=len(languages))
    if bool(src.get("adapter_layer_norm", default=False)):
        f["num_norms_per_layer"] = 3


def _deberta_embeddings(src: Src, f: Fields, what: str) -> None:
    """DebertaEmbeddings / DebertaV2Embeddings: word, position (position_biased_input)
    and token-type tables of embedding_size, projected to hidden without a bias, then
    the LayerNorm at hidden; no conv layer (DeBERTa-v2 conv_kernel_size)."""
    width = src.opt_int("embedding_size")
    if width is not None and width != f["hidden_dim"]:
        raise not_modelled(f"{what}: embedding_size = {width} != hidden_size: DeBERTa normalises after the "
                               "projection, which ModelConfig cannot describe")
    head = src.opt_int("attention_head_size")
    if head is not None and head * f["n_head"] != f["hidden_dim"]:
        raise not_modelled(f"{what}: attention_head_size = {head} x {f['n_head']} heads != hidden_size: the "
                               "attention output projection reads hidden_size features (the model cannot run)")
    if (src.opt_int("conv_kernel_size", default=0) or 0) > 0:
        raise not_modelled(f"{what}: conv_kernel_size > 0 (DeBERTa-v2's convolution beside the first layer) "
                               "cannot be described by ModelConfig")
    if not bool(src.get("position_biased_input", default=True)):
        f.update(position_embedding_type="none", num_position_embeddings=None)


def _pos_att_types(src: Src, what: str) -> list:
    kinds = src.get("pos_att_type", default=None) or []
    if isinstance(kinds, str):
        kinds = [k.strip() for k in kinds.lower().split("|") if k.strip()]
    odd = sorted(set(map(str, kinds)) - {"c2p", "p2c"})
    if odd:
        raise not_modelled(f"{what}: pos_att_type {odd} cannot be described by ModelConfig (c2p, p2c can)")
    return list(kinds)


def _span(src: Src, f: Fields) -> int:
    """max_relative_positions, else max_position_embeddings (both versions)."""
    span = src.opt_int("max_relative_positions", default=-1) or -1
    return span if span >= 1 else f["max_seq_len"]


def _deberta_relative(version: int):
    """A step: DeBERTa's embeddings and, with relative_attention, its DisentangledSelfAttention. v1: own
    pos_proj (c2p, no bias) and pos_q_proj (p2c) over the 2 x min(length, max_relative_positions) central
    table rows; v2: span position_buckets, else max_relative_positions, else max_position_embeddings."""
    def step(src: Src, f: Fields, what: str) -> None:
        _deberta_embeddings(src, f, what)
        if not bool(src.get("relative_attention", default=False)):
            return
        kinds = _pos_att_types(src, what)
        if version == 1:
            f["relative_attention"] = dict(span=_span(src, f), c2p="c2p" in kinds, p2c="p2c" in kinds,
                                           span_follows_length=True, c2p_bias=False)
            return
        span = src.opt_int("position_buckets", default=-1) or -1
        norm = str(src.get("norm_rel_ebd", default="none") or "none").lower()
        f["relative_attention"] = dict(
            span=span if span > 0 else _span(src, f), c2p="c2p" in kinds, p2c="p2c" in kinds,
            shared_projections=bool(src.get("share_att_key", default=False)),
            table_norm="layer_norm" in [x.strip() for x in norm.split("|")])
    return step


# XLMModel / FlaubertModel: post-LN BERT-like blocks of emb_dim, FFN 4 x emb_dim,
# learned positions (the sinusoidal option fills the same table), no token types or pooler
_XLM = {
    "hidden_dim": Req("emb_dim", "hidden_size"), "num_layers": Req("n_layers", "num_hidden_layers"),
    "n_head": Req("n_heads", "num_attention_heads"), "vocab_size": Req("vocab_size", "n_words"),
    "max_seq_len": Req("max_position_embeddings"), "ffn_embed_dim": Same("hidden_dim", times=4),
    "activation": When(Flag("gelu_activation", default=True), "gelu", "relu"),
    **BIASES, **LAYERNORM, "embedding_norm": True, "position_embedding_type": "learned",
    "num_position_embeddings": Same("max_seq_len"), "type_vocab_size": 0,
    "encoder_only": True, "pooler": False, "lm_head": False, "final_norm": False,
}
_XLM_CHECKS = (RefuseFeature("is_encoder", (True,), default=True, as_bool=True, reason="an XLM decoder"),
               RefuseFeature("causal", (False,), default=False, as_bool=True,
                             reason="causal attention: an XLM language model generating with a cache"))
# Llama-shaped bidirectional encoders: the bare model ends with its final norm
_LLAMA_ENCODER = {**LLAMA, "mlp_bias": Flag("mlp_bias", default=False), "encoder_only": True,
                  "lm_head": False}

# DebertaModel / DebertaV2Model: BERT blocks without a pooler, token types only when
# type_vocab_size > 0; DeBERTa v1 fuses q/k/v in one bias-free in_proj with separate
# q and v biases (no key bias)
_DEBERTA = {**BERT, "type_vocab_size": Opt("type_vocab_size", default=0), "pooler": False}

# pre-LN BERTs (MegatronBertLayer, XLMRobertaXLLayer): a norm before attention and
# before the MLP, a final encoder norm, none after the embeddings
_PRE_LN_BERT = {**BERT, "embedding_norm": False, "final_norm": True}


def _luke_entities(src: Src, f: Fields, what: str) -> None:
    """LukeEntityEmbeddings: [entity_vocab_size x entity_emb_size] entities, position
    and token-type tables as wide as hidden with the word ones' rows; LukeSelfAttention
    adds three query projections with use_entity_aware_attention."""
    f["entity_inputs"] = dict(
        vocab_size=src.req_int("entity_vocab_size"), emb_dim=src.req_int("entity_emb_size"),
        position_rows=f["num_position_embeddings"], type_rows=f["type_vocab_size"],
        aware_attention=bool(src.get("use_entity_aware_attention", default=True)))


ENCODER_FAMILIES: Dict[str, Family] = {
    # BERT-style encoders: token types, embedding LayerNorm, pooler, no lm_head
    **{t: Family(BERT, checks=(_ABSOLUTE,))
       for t in ("bert", "roberta", "xlm-roberta", "camembert", "data2vec-text", "ibert")},
    "megatron-bert": Family(_PRE_LN_BERT, checks=(_ABSOLUTE,)),
    "xlm-roberta-xl": Family(_PRE_LN_BERT, checks=(_ABSOLUTE,)),
    # RoBERTa-PreLayerNorm: pre-LN layers, the embedding LayerNorm and a final LayerNorm
    "roberta-prelayernorm": Family({**BERT, "final_norm": True}, checks=(_ABSOLUTE,)),
    # ERNIE (1.0/2.0/3.0): BERT, plus task-type embeddings when use_task_id
    "ernie": Family(BERT, checks=(_ABSOLUTE, Refuse(
        "use_task_id", (False,), default=False, as_bool=True, reason="task-type embeddings"))),
    # ELECTRA (ElectraEmbeddings): word, position and token-type embeddings and their
    # LayerNorm at embedding_size, then embeddings_project (with bias) to hidden; no pooler
    "electra": Family({**BERT, "embedding_dim": Opt("embedding_size"), "pooler": False,
                       "factorized_embeddings": True, "embedding_proj_bias": True},
                      checks=(_ABSOLUTE,)),
    # DistilBERT (TransformerBlock): post-LN BERT layers without token types or pooler
    "distilbert": Family(
        {**BERT, "num_layers": Req("n_layers"), "n_head": Req("n_heads"), "hidden_dim": Req("dim"),
         "ffn_embed_dim": Req("hidden_dim"), "activation": Act("activation", default="gelu"),
         "type_vocab_size": 0, "pooler": False}),
    # BertGenerationEncoder: word + position embeddings (no token types), no pooler
    "bert-generation": Family({**BERT, "type_vocab_size": 0, "pooler": False},
                              checks=_BERT_CHECKS),
    # RemBERT (RemBertEmbeddings): embeddings of input_embedding_size, projected to
    # hidden with a bias (embedding_hidden_mapping_in); output_embedding_size is the
    # LM head's only
    "rembert": Family({**BERT, "embedding_dim": Req("input_embedding_size"),
                       "factorized_embeddings": True, "embedding_proj_bias": True},
                      checks=_BERT_CHECKS, steps=(_rembert_mapping,)),
    # TAPAS (TapasEmbeddings): one token-type table per entry of type_vocab_sizes, all
    # hidden wide and summed: their rows add up
    "tapas": Family({**BERT, "type_vocab_size": Total("type_vocab_sizes")}, checks=_BERT_CHECKS),
    # BigBird with full attention (attention_type="original_full"): BERT with a q/k/v
    # bias flag; block-sparse attention has other FLOPs
    "big_bird": Family({**BERT, "qkv_bias": Flag("use_bias", default=True)},
                       checks=_BERT_CHECKS + (Refuse(
                           "attention_type", ("original_full",), default="block_sparse",
                           reason="block-sparse attention"),)),
    # YOSO (YosoEmbeddings): positions offset by 2 rows, no pooler
    "yoso": Family({**BERT, "num_position_embeddings": Same("max_seq_len", plus=2),
                    "pooler": False}, checks=_BERT_CHECKS + (_yoso_attention,)),
    # Jina Embeddings v3: rotary BERT with biases everywhere and a pooler
    "jina_embeddings_v3": Family(_ROTARY_BERT),
    # GTE (GteMLP): gated MLP, only down_proj biased; no pooler in GteModel's default
    "gte": Family({**_ROTARY_BERT, "mlp_gated_linear_units": True, "mlp_bias": False,
                   "mlp_down_bias": True, "pooler": False}),
    # NomicBERT: no linear biases (the norms keep theirs), gated MLP, no pooler by default
    "nomic_bert": Family({**_ROTARY_BERT, **NO_BIASES, "mlp_gated_linear_units": True,
                          "activation": Act("hidden_act", default="silu"), "pooler": False}),
    "deberta-v2": Family(_DEBERTA, steps=(_deberta_relative(2),)),
    "deberta": Family({**_DEBERTA, "k_proj_bias": False},
                      checks=(RefuseFeature("talking_head", (False,), default=False, as_bool=True,
                                            reason="talking-head attention"),),
                      steps=(_deberta_relative(1),)),
    "roc_bert": Family(BERT, checks=(_ABSOLUTE_FEATURE, _NO_CROSS_FEATURE), steps=(_roc_bert_inputs,)),
    # XmodModel (post-LN; pre_norm adds norms elsewhere): BERT with language adapters
    "xmod": Family(BERT, checks=(_ABSOLUTE_FEATURE, _NO_CROSS_FEATURE, RefuseFeature(
        "pre_norm", (False,), default=False, as_bool=True, reason="pre-norm X-MOD layers")),
        steps=(_xmod_adapters,)),
    # ModernBertModel (bases.MODERNBERT; its causal-LM decoder is a row of dense.py)
    "modernbert": Family(MODERNBERT),
    # LayoutLMEmbeddings: x, y, h and w tables of max_2d_position_embeddings rows, hidden wide, added to
    # the word, position and token-type embeddings
    "layoutlm": Family(BERT, checks=(_ABSOLUTE_FEATURE, _NO_CROSS_FEATURE),
                       steps=(_tables(*[("max_2d_position_embeddings", "hidden_dim")] * 4),)),
    # MPNetModel: no token types; one relative-position bias table [buckets x heads]
    # in the encoder, shared by all layers (its bias add is not a matmul)
    "mpnet": Family({**BERT, "type_vocab_size": 0},
                    steps=(_tables(("relative_attention_num_buckets", "n_head")),)),
    # RoFormerModel: factorised word/token-type embeddings and norm at embedding_size,
    # projected (with a bias) when it differs from hidden; rotary positions read from a
    # stored sinusoid table [max_position_embeddings x head_dim]; no pooler
    "roformer": Family({**BERT, "position_embedding_type": "rotary", "num_position_embeddings": None,
                        "embedding_dim": Opt("embedding_size"), "factorized_embeddings": True,
                        "embedding_proj_bias": True, "pooler": False},
                       checks=(_NO_CROSS_FEATURE,), steps=(_tables(("max_seq_len", lambda src, f: f["hidden_dim"] // f["n_head"])),)),
    "xlm": Family(_XLM, checks=_XLM_CHECKS, steps=(_xlm_languages,)),
    "flaubert": Family(_XLM, checks=_XLM_CHECKS, steps=(_xlm_languages,)),
    # AlbertModel (arXiv 1909.11942): factorised embeddings projected with a bias, one
    # set of layer weights per group reused across the depth, a pooler
    "albert": Family({**BERT, "embedding_dim": Req("embedding_size"), "factorized_embeddings": True,
                      "embedding_proj_bias": True}, checks=(_ABSOLUTE_FEATURE,), steps=(_albert_layers,)),
    # UltrabertModel: Llama layers with bidirectional (sliding-window) attention
    "ultrabert": Family(_LLAMA_ENCODER),
    # EsmcModel: LayerNorms with biases in the blocks, a bias-free final LayerNorm,
    # bias-free LayerNorms on q and k over all heads
    "esmc": Family({**_LLAMA_ENCODER, **LAYERNORM, "final_norm_bias": False, "qk_norm": True,
                    "qk_norm_per_head": True, "qk_norm_bias": False}, steps=(_esmc_shapes,)),
    # LukeModel: BERT embeddings, post-LN BERT layers, a pooler; its code reads neither
    # position_embedding_type nor add_cross_attention (always absolute, never cross)
    "luke": Family(BERT, steps=(_luke_entities,), ignores=("add_cross_attention",)),
}


# The head of each family's *ForMaskedLM class, counted when the config's `architectures`
# names that class (hub/model_class.py); checked against transformers on the meta device in
# tests/hub/test_masked_lm_heads.py. BertForMaskedLM builds BertModel without its pooler
# and BertLMPredictionHead: a hidden x hidden dense with bias, the activation, a LayerNorm,
# then the output projection (tied to the word embeddings unless tie_word_embeddings is
# false) with its own vocab-sized bias. RoBERTa's, DistilBERT's, DeBERTa's, MPNet's, TAPAS's,
# ESM-C's and the rotary BERTs' heads have that shape.
class _XlmPlainSoftmax(Reader):
    """XLMPredLayer's transform ("none"); with asm=True it is an adaptive softmax
    (AdaptiveLogSoftmaxWithLoss: clusters of other widths), which is refused."""

    def read(self, src, f, what):
        if bool(src.get("asm", default=False)):
            raise not_modelled(f"{what}: asm=True (an adaptive-softmax output layer) in the LM head "
                               "is not modelled")
        return "none"


class _OneOutputBias(Reader):
    """True (the head's vocab-sized bias) when the BERT-style head is tied: the decoder's bias
    is then tied to the head's `bias` parameter (BertForMaskedLM._tied_weights_keys). Untied,
    both stay separate parameters (two vocab-sized biases, one unused), which ModelConfig
    cannot describe: refused."""

    def read(self, src, f, what):
        if not bool(src.get("tie_word_embeddings", default=True)):
            raise not_modelled(f"{what}: tie_word_embeddings=False in a BERT-style masked-LM head leaves "
                               "two vocab-sized output biases (the decoder's and the head's own), which "
                               "is not modelled")
        return True


_TIED = Flag("tie_word_embeddings", default=True)
_PLAIN_MLM_HEAD = {"pooler": False, "lm_head": True, "lm_head_bias": True, "lm_head_transform": "dense_bias"}
_BERT_MLM_HEAD = {**_PLAIN_MLM_HEAD, "lm_head_bias": _OneOutputBias()}
_MASKED_LM_HEADS: Dict[str, Dict[str, Any]] = {
    **{t: _BERT_MLM_HEAD for t in (
        "bert", "roberta", "xlm-roberta", "camembert", "data2vec-text", "ibert", "megatron-bert",
        "xlm-roberta-xl", "roberta-prelayernorm", "ernie", "tapas", "yoso", "jina_embeddings_v3",
        "nomic_bert", "deberta-v2", "deberta", "roc_bert", "xmod", "mpnet")},
    # DistilBERT's vocab_projector, GTE's and ESM-C's decoders hold the only output bias
    **{t: _PLAIN_MLM_HEAD for t in ("distilbert", "gte", "esmc")},
    # LayoutLMForMaskedLM keeps LayoutLMModel's pooler
    "layoutlm": {**_BERT_MLM_HEAD, "pooler": True},
    # XLMWithLMHeadModel / FlaubertWithLMHeadModel: XLMPredLayer, the output projection with a
    # bias and no transform (its adaptive softmax, asm=True, is refused)
    **dict.fromkeys(("xlm", "flaubert"), {"lm_head": True, "lm_head_bias": True,
                                          "lm_head_transform": _XlmPlainSoftmax(), "tie_word_embeddings": _TIED}),
    # ModernBertPredictionHead: dense (bias: classifier_bias), activation, norm (the model's
    # norm_bias); the decoder's bias is decoder_bias
    "modernbert": {"lm_head": True, "lm_head_bias": Flag("decoder_bias", default=True), "tie_word_embeddings": _TIED,
                   "lm_head_transform": When(Flag("classifier_bias", default=False), "dense_bias", "dense")},
}
# No head row, so their masked-LM class is refused by name: ALBERT's and ELECTRA's heads
# project to embedding_size, RemBERT's to output_embedding_size (a decoupled output
# embedding), RoFormer's to embedding_size; LUKE adds entity predictions; BigBird and
# Ultrabert heads are unchecked.
ENCODER_FAMILIES = {t: replace(row, masked_lm_head=_MASKED_LM_HEADS.get(t)) for t, row in ENCODER_FAMILIES.items()}
