"""The shipped model catalogue (llm_analysis/model_configs/*.json).

Every catalogue entry is loaded through the public API. Every entry that has a
published Hugging Face config (tests/data/hf_configs/<stem>.json, the raw
`config.json` of the Hub repo) is compared field by field with the
`transformers` configuration class built from that raw file. The mapping from
transformers attributes to our fields is written out here, independently of
`llm_analysis.hub.entry`, and the architecture-family flags (biases, norms,
positions, gating, ...) come from how the transformers modeling code of each
`model_type` builds its modules. Models without a Hub config are checked
against the figures their papers publish.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (MODEL_CONFIGS_DIR, ModelConfig, get_gpu_config_by_name, get_model_config_by_name,
                                 list_model_configs)

transformers = pytest.importorskip("transformers")

HF_CONFIGS_DIR = Path(__file__).resolve().parents[1] / "data" / "hf_configs"

# Names of the mirrored system's catalogue, exactly as it ships them.
MIRRORED_NAMES = [
    "EleutherAI_gpt-j-6b", "EleutherAI_gpt-neo-1.3B", "EleutherAI_gpt-neo-125m",
    "EleutherAI_gpt-neo-2.7B", "NousResearch_Llama-2-7b-hf", "PygmalionAI_pygmalion-6b",
    "allenai_scibert_scivocab_uncased", "bert-base-cased", "bert-base-multilingual-cased",
    "bert-base-uncased", "bert-large", "bigcode_santacoder", "bigscience_bloom-560m",
    "bigscience_bloom-7b1", "bigscience_bloomz-560m", "bigscience_bloomz-7b1-mt",
    "bigscience_test-bloomd-6b3", "bloom-175b", "decapoda-research_llama-13b-hf",
    "decapoda-research_llama-30b-hf", "decapoda-research_llama-65b-hf",
    "decapoda-research_llama-7b-hf", "distilgpt2", "dslim_bert-base-NER", "facebook_opt-1.3b",
    "facebook_opt-125m", "facebook_opt-13b", "facebook_opt-175b", "facebook_opt-350m",
    "facebook_opt-6.7b", "facebook_opt-66b", "fxmarty_tiny-llama-fast-tokenizer", "gpt2",
    "gpt2-large", "gpt2-medium", "gpt2-xl", "lmsys_vicuna-7b-delta-v0", "megatron-lm-175b",
    "megatron-lm-530b", "mt-nlg-530b", "test-13b", "upstage_Llama-2-70b-instruct-v2",
]
# Hub ids of the mirrored names that have an owner (looked up with "/" too).
MIRRORED_HUB_IDS = [n.replace("_", "/", 1) for n in MIRRORED_NAMES if "_" in n]

CURRENT_HUB_IDS = [
    "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-13b-hf", "meta-llama/Llama-2-70b-hf",
    "meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-70B", "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-405B", "meta-llama/Llama-3.2-1B",
    "meta-llama/Llama-3.2-3B", "meta-llama/Llama-3.3-70B-Instruct", "mistralai/Mistral-7B-v0.1",
    "mistralai/Mistral-7B-v0.3", "mistralai/Mistral-Nemo-Base-2407",
    "mistralai/Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x22B-v0.1", "Qwen/Qwen2.5-0.5B",
    "Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-14B", "Qwen/Qwen2.5-32B", "Qwen/Qwen2.5-72B",
    "Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B", "Qwen/Qwen3-32B", "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-235B-A22B", "google/gemma-2-2b", "google/gemma-2-9b", "google/gemma-2-27b",
    "google/gemma-3-1b-pt", "google/gemma-3-4b-pt", "google/gemma-3-12b-pt",
    "google/gemma-3-27b-pt", "microsoft/Phi-3-mini-4k-instruct",
    "microsoft/Phi-3-medium-4k-instruct", "microsoft/phi-4", "deepseek-ai/DeepSeek-V2-Lite",
    "deepseek-ai/DeepSeek-V3", "openai/gpt-oss-20b", "openai/gpt-oss-120b", "tiiuae/falcon-7b",
    "tiiuae/falcon-40b", "EleutherAI/gpt-neox-20b",
]
CURRENT_NAMES = [h.replace("/", "_") for h in CURRENT_HUB_IDS]
ALL_NAMES = MIRRORED_NAMES + CURRENT_NAMES

# Catalogue entries without a published Hugging Face config.
NON_HF = {"megatron-lm-175b", "megatron-lm-530b", "mt-nlg-530b", "test-13b", "facebook_opt-175b"}
HF_STEMS = sorted(p.stem for p in HF_CONFIGS_DIR.glob("*.json"))


# ---------------------------------------------------------------------------
# catalogue presence and loading
# ---------------------------------------------------------------------------

def test_catalogue_lists_every_model():
    names = set(list_model_configs())
    missing = sorted(set(ALL_NAMES) - names)
    assert not missing, f"catalogue lacks {missing}"
    assert len(set(ALL_NAMES)) == len(ALL_NAMES) == 85


@pytest.mark.parametrize("name", ALL_NAMES)
def test_catalogue_file_is_valid(name):
    path = MODEL_CONFIGS_DIR / f"{name}.json"
    data = json.loads(path.read_text())
    assert data["name"] == name == path.stem
    assert data.get("source"), "every catalogue file cites its source"
    cfg = ModelConfig(**data)  # rejects unknown fields
    assert cfg.num_layers > 0 and cfg.hidden_dim > 0
    assert not re.search(r"(^|[\s\"'])/(home|root|tmp|work|Users)/", path.read_text()), \
        "no absolute machine paths in catalogue files"


@pytest.mark.parametrize("name", ALL_NAMES)
def test_name_resolves(name):
    cfg = get_model_config_by_name(name)
    assert cfg.name == name


@pytest.mark.parametrize("hub_id", CURRENT_HUB_IDS + MIRRORED_HUB_IDS)
def test_hub_id_resolves_to_catalogue(hub_id):
    cfg = get_model_config_by_name(hub_id)
    assert cfg.name == hub_id.replace("/", "_")


def test_every_hf_model_has_a_raw_config():
    expected = sorted(set(ALL_NAMES) - NON_HF)
    assert HF_STEMS == expected


@pytest.mark.parametrize("stem", HF_STEMS)
def test_raw_config_is_a_hub_config(stem):
    raw = json.loads((HF_CONFIGS_DIR / f"{stem}.json").read_text())
    assert "model_type" in raw
    cfg = transformers.AutoConfig.for_model(**raw)
    assert type(cfg).__name__ != "PretrainedConfig"
    assert "source" not in raw and "name" not in raw  # a Hub file, not a catalogue file


# ---------------------------------------------------------------------------
# field-by-field comparison with the transformers configuration classes
# ---------------------------------------------------------------------------

GATED = {"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma2", "gemma3_text",
         "phi3", "deepseek_v2", "deepseek_v3", "gpt_oss"}
RMSNORM = GATED
ROTARY = GATED | {"gptj", "gpt_neox"}
LEARNED = {"gpt2", "gpt_neo", "gpt_bigcode", "opt", "bert"}


def _hf_config(stem):
    raw = json.loads((HF_CONFIGS_DIR / f"{stem}.json").read_text())
    cfg = transformers.AutoConfig.for_model(**raw)
    return cfg.get_text_config()


def _get(c, *names, default=None):
    for n in names:
        v = getattr(c, n, None)
        if v is not None:
            return v
    return default


def expected_from_transformers(c) -> dict:
    """Our ModelConfig fields as the transformers config (and its modeling code) defines them."""
    mt = c.model_type
    L, H, nh = c.num_hidden_layers, c.hidden_size, c.num_attention_heads
    e = {"num_layers": L, "hidden_dim": H, "n_head": nh, "vocab_size": c.vocab_size,
         "model_type": mt, "tie_word_embeddings": bool(c.tie_word_embeddings)}

    # key/value heads
    if mt == "gpt_bigcode":
        e["num_key_value_heads"] = 1 if c.multi_query else nh
    elif mt == "falcon":
        e["num_key_value_heads"] = (c.num_kv_heads if c.new_decoder_architecture
                                    else (1 if c.multi_query else nh))
    else:
        e["num_key_value_heads"] = _get(c, "num_key_value_heads", default=nh)

    # MLP width
    if mt in ("gpt2", "gptj", "gpt_bigcode"):
        e["ffn_embed_dim"] = c.n_inner or 4 * H
    elif mt == "gpt_neo":
        e["ffn_embed_dim"] = c.intermediate_size or 4 * H
    elif mt == "opt":
        e["ffn_embed_dim"] = c.ffn_dim
    elif mt == "bloom":
        e["ffn_embed_dim"] = 4 * H
    elif mt == "falcon":
        e["ffn_embed_dim"] = c.ffn_hidden_size
    else:
        e["ffn_embed_dim"] = c.intermediate_size

    # head dim; MLA
    if getattr(c, "kv_lora_rank", None):
        e.update(head_dim=c.qk_nope_head_dim + c.qk_rope_head_dim, q_lora_rank=c.q_lora_rank,
                 kv_lora_rank=c.kv_lora_rank, qk_nope_head_dim=c.qk_nope_head_dim,
                 qk_rope_head_dim=c.qk_rope_head_dim, v_head_dim=c.v_head_dim)
    else:
        e.update(head_dim=_get(c, "head_dim", default=H // nh), kv_lora_rank=None)

    # positions and context
    if mt == "bloom":
        e["position_embedding_type"] = "alibi"
    elif mt == "falcon":
        e["position_embedding_type"] = "alibi" if c.alibi else "rotary"
        e["max_seq_len"] = c.max_position_embeddings
    elif mt in LEARNED:
        e["position_embedding_type"] = "learned"
        n_pos = _get(c, "n_positions", "max_position_embeddings")
        e["max_seq_len"] = n_pos
        e["num_position_embeddings"] = n_pos + 2 if mt == "opt" else n_pos  # OPT offset 2
    else:
        assert mt in ROTARY, mt
        e["position_embedding_type"] = "rotary"
        e["max_seq_len"] = c.max_position_embeddings

    # attention pattern: (window, one type per layer)
    if mt == "gpt_neo":
        window = c.window_size
        types = ["full_attention" if t == "global" else "sliding_attention" for t in c.attention_layers]
    elif getattr(c, "layer_types", None) is not None:
        window = c.sliding_window
        types = list(c.layer_types)
    elif getattr(c, "sliding_window", None) is not None:  # Mistral v0.1, Phi-3: every layer
        window = c.sliding_window
        types = ["sliding_attention"] * L
    else:
        window, types = None, ["full_attention"] * L
    e["sliding_window"] = window if "sliding_attention" in types else None
    e["_layer_types"] = types

    # mixture of experts
    moe = dict(moe_num_experts=1, moe_top_k=1, moe_num_shared_experts=0, moe_first_dense_layers=0,
               moe_layer_freq=1, moe_router_bias=False, moe_expert_bias=False)
    if mt in ("mixtral", "gpt_oss"):
        moe.update(moe_num_experts=c.num_local_experts, moe_top_k=c.num_experts_per_tok,
                   _expert_ffn=c.intermediate_size)
        if mt == "gpt_oss":
            moe.update(moe_router_bias=True, moe_expert_bias=True)
    elif mt == "qwen3_moe":
        assert not c.mlp_only_layers
        moe.update(moe_num_experts=c.num_experts, moe_top_k=c.num_experts_per_tok,
                   moe_layer_freq=c.decoder_sparse_step, _expert_ffn=c.moe_intermediate_size)
    elif mt in ("deepseek_v2", "deepseek_v3"):
        moe.update(moe_num_experts=c.n_routed_experts, moe_top_k=c.num_experts_per_tok,
                   moe_num_shared_experts=c.n_shared_experts,
                   moe_first_dense_layers=c.first_k_dense_replace,
                   moe_layer_freq=_get(c, "moe_layer_freq", default=1),
                   _expert_ffn=c.moe_intermediate_size, _shared_ffn=c.moe_intermediate_size)
    e.update(moe)

    # architecture family, as the modeling code builds it
    e["mlp_gated_linear_units"] = mt in GATED
    e["norm_type"] = "rmsnorm" if mt in RMSNORM else "layernorm"
    e["norm_bias"] = mt not in RMSNORM
    e["qk_norm"] = mt in ("qwen3", "qwen3_moe", "gemma3_text")
    e["attn_sinks"] = mt == "gpt_oss"
    e["num_norms_per_layer"] = {"gemma2": 4, "gemma3_text": 4, "gptj": 1}.get(mt, 2)
    e["parallel_attn_mlp"] = mt == "gptj"
    if mt == "gpt_neox":
        e["parallel_attn_mlp"] = bool(c.use_parallel_residual)
    if mt == "falcon":
        e["parallel_attn_mlp"] = bool(c.parallel_attn)
        e["num_norms_per_layer"] = 2 if c.new_decoder_architecture else 1
    all_bias = {"gpt2", "gpt_bigcode", "bloom", "bert", "gpt_neox"}
    if mt in all_bias:
        e.update(qkv_bias=True, attn_out_bias=True, mlp_bias=True)
    elif mt == "opt":
        e.update(qkv_bias=c.enable_bias, attn_out_bias=c.enable_bias, mlp_bias=c.enable_bias)
    elif mt == "falcon":
        e.update(qkv_bias=c.bias, attn_out_bias=c.bias, mlp_bias=c.bias)
    elif mt == "gpt_neo":
        e.update(qkv_bias=False, attn_out_bias=True, mlp_bias=True)
    elif mt == "gptj":
        e.update(qkv_bias=False, attn_out_bias=False, mlp_bias=True)
    elif mt == "qwen2":
        e.update(qkv_bias=True, attn_out_bias=False, mlp_bias=False)
    else:
        ab = bool(getattr(c, "attention_bias", False))
        e.update(qkv_bias=ab, attn_out_bias=ab, mlp_bias=bool(getattr(c, "mlp_bias", False)))
    e["embedding_norm"] = mt in ("bloom", "bert")
    e["final_norm"] = (c.do_layer_norm_before and not c._remove_final_layer_norm) if mt == "opt" \
        else mt != "bert"
    e["embedding_dim"] = (c.word_embed_proj_dim if mt == "opt" and c.word_embed_proj_dim != H
                          else None)
    e["type_vocab_size"] = c.type_vocab_size if mt == "bert" else 0
    e["encoder_only"] = e["pooler"] = mt == "bert"
    e["lm_head"] = mt != "bert"
    e["lm_head_bias"] = mt == "gptj"
    return e


@pytest.mark.parametrize("stem", HF_STEMS)
def test_catalogue_matches_transformers_config(stem):
    ours = get_model_config_by_name(stem)
    exp = expected_from_transformers(_hf_config(stem))
    layer_types = exp.pop("_layer_types")
    expert_ffn = exp.pop("_expert_ffn", None)
    shared_ffn = exp.pop("_shared_ffn", None)
    mismatches = {k: (getattr(ours, k), v) for k, v in exp.items() if getattr(ours, k) != v}
    assert not mismatches, f"{stem}: field: (ours, transformers) {mismatches}"
    assert [ours.layer_attention_type(i) for i in range(ours.num_layers)] == layer_types
    if ours.is_moe:
        assert ours.expert_ffn_dim == expert_ffn
        assert [ours.is_moe_layer(i) for i in range(ours.num_layers)].count(True) == \
            ours.num_layers - ours.moe_first_dense_layers
    if shared_ffn is not None:
        assert ours.shared_expert_ffn_dim == shared_ffn


def test_comparison_detects_a_wrong_field():
    """The comparison above fails on a catalogue entry that differs from the Hub config."""
    exp = expected_from_transformers(_hf_config("meta-llama_Llama-3.1-8B"))
    ours = get_model_config_by_name("meta-llama_Llama-3.1-8B")
    assert ours.num_key_value_heads == exp["num_key_value_heads"] == 8
    wrong = ours.model_copy(update={"num_key_value_heads": 32, "ffn_embed_dim": 16384})
    assert wrong.num_key_value_heads != exp["num_key_value_heads"]
    assert wrong.ffn_embed_dim != exp["ffn_embed_dim"]


def test_gemma3_multimodal_files_hold_the_text_config():
    for stem in ("google_gemma-3-4b-pt", "google_gemma-3-12b-pt", "google_gemma-3-27b-pt"):
        raw = json.loads((HF_CONFIGS_DIR / f"{stem}.json").read_text())
        assert raw["model_type"] == "gemma3_text"


@pytest.mark.parametrize("stem", ["google_gemma-3-4b-pt", "google_gemma-3-12b-pt", "google_gemma-3-27b-pt"])
def test_gemma3_multimodal_entries_count_the_checkpoint_whole(stem):
    """The Gemma 3 4B / 12B / 27B checkpoints load as Gemma3ForConditionalGeneration: the decoder (the text
    config kept in tests/data/hf_configs) plus the SigLIP tower and projector, whose vision_config the three
    share (Gemma 3 report, arXiv 2503.19786, section 2.1; published copy: tests/data/hub_fixtures/
    google_gemma-3-4b-it.json). The catalogue entry's total equals transformers' build of that class."""
    import torch
    text = json.loads((HF_CONFIGS_DIR / f"{stem}.json").read_text())
    vlm = json.loads((Path(__file__).resolve().parents[1] / "data" / "hub_fixtures" /
                      "google_gemma-3-4b-it.json").read_text())
    wrapper = transformers.Gemma3Config(text_config=text, vision_config=vlm["vision_config"],
                                        mm_tokens_per_image=vlm["mm_tokens_per_image"])
    with torch.device("meta"):
        model = transformers.Gemma3ForConditionalGeneration(wrapper)
    ours = LLMAnalysis(get_model_config_by_name(stem), get_gpu_config_by_name("a100-sxm-80gb"))
    assert ours.get_num_params_total() == sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------
# models without a Hub config: published figures
# ---------------------------------------------------------------------------

def _megatron_params(cfg: ModelConfig) -> float:
    """Narayanan et al. 2021 (arXiv 2104.04473) Sec. 5.1:
    P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h))."""
    l, h, V, s = cfg.num_layers, cfg.hidden_dim, cfg.vocab_size, cfg.max_seq_len
    return 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h))


def test_megatron_lm_175b_is_gpt3_175b():
    # GPT-3 175B: Brown et al. 2020 (arXiv 2005.14165) Table 2.1; Megatron pads the
    # GPT-2 vocabulary (50257) to 51200 (arXiv 2104.04473, which reports 174.6B, Table 2).
    c = get_model_config_by_name("megatron-lm-175b")
    assert (c.num_layers, c.hidden_dim, c.n_head, c.max_seq_len) == (96, 12288, 96, 2048)
    assert c.vocab_size == 51200 and c.ffn_embed_dim == 4 * 12288
    assert _megatron_params(c) == pytest.approx(174.6e9, abs=0.05e9)


@pytest.mark.parametrize("name", ["megatron-lm-530b", "mt-nlg-530b"])
def test_530b_models(name):
    # MT-NLG 530B: Smith et al. 2022 (arXiv 2201.11990): 105 layers, hidden 20480, 128 heads,
    # sequence 2048; the same shape is the 529.6B row of arXiv 2104.04473 Table 1 (V = 51200).
    c = get_model_config_by_name(name)
    assert (c.num_layers, c.hidden_dim, c.n_head, c.max_seq_len) == (105, 20480, 128, 2048)
    assert c.ffn_embed_dim == 4 * 20480
    assert _megatron_params(c) == pytest.approx(529.6e9, abs=0.05e9)


def test_test_13b():
    # 13B GPT test model of the mirrored system; the OPT-13B shape (arXiv 2205.01068 Table 1).
    c = get_model_config_by_name("test-13b")
    assert (c.num_layers, c.hidden_dim, c.n_head, c.ffn_embed_dim, c.vocab_size, c.max_seq_len) == \
        (40, 5120, 40, 20480, 50272, 2048)


def test_opt_175b():
    # OPT-175B: Zhang et al. 2022 (arXiv 2205.01068) Table 1: 96 layers, 96 heads, 12288.
    c = get_model_config_by_name("facebook/opt-175b")
    assert (c.num_layers, c.n_head, c.hidden_dim, c.ffn_embed_dim) == (96, 96, 12288, 49152)
    assert c.vocab_size == 50272 and c.num_position_embeddings == 2050


def test_bloom_175b_is_bigscience_bloom():
    # BLOOM 176B: BigScience 2022 (arXiv 2211.05100) Table 3: 70 layers, hidden 14336, 112 heads,
    # vocabulary 250880, sequence length 2048.
    c = get_model_config_by_name("bloom-175b")
    assert (c.num_layers, c.hidden_dim, c.n_head, c.vocab_size, c.max_seq_len) == \
        (70, 14336, 112, 250880, 2048)
    assert c.position_embedding_type == "alibi" and c.embedding_norm


# the attributes transformers' configuration classes give the dropout on the residual stream (after the
# attention output and the MLP): GPT-2 / GPT-J / Phi, BLOOM / Falcon / NeoX, BERT, OPT / BART
_RESIDUAL_DROPOUT = ("resid_pdrop", "hidden_dropout", "hidden_dropout_prob", "dropout")


@pytest.mark.parametrize("stem", [s for s in HF_STEMS if s not in MIRRORED_NAMES and s in set(list_model_configs())])
def test_hidden_dropout_follows_the_configs_residual_dropout(stem):
    """Training stores Korthikanti's residual dropout masks only where the model applies that dropout: a
    positive probability in the transformers configuration (GPT-2's resid_pdrop 0.1, OPT's dropout 0.1);
    LLaMA / Qwen / Mistral / Gemma configs have none and BLOOM / Falcon / NeoX / Phi set 0, so their entries
    say hidden_dropout False. (The mirrored system's names keep its default.)"""
    text = _hf_config(stem)  # the transformers configuration, defaults filled in
    values = [getattr(text, k, None) for k in _RESIDUAL_DROPOUT]
    applies = any(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values)
    assert get_model_config_by_name(stem).hidden_dropout == applies
