"""Import of Hugging Face configs (llm_analysis/hub/: entry.py, the mapping and the family table).

Three independent sources check the mapping:

* hand-derived expectations for one or two published models per family
  (`EXPECTED`, values from the published config.json, model cards and papers);
* the real model code: every raw config is built into its `transformers` model on
  the `meta` device and its parameter count is compared with the engine's count
  of the mapped ModelConfig (`count_params`: the operator description that every
  figure comes from), which pins down every bias, norm, gate, expert, tie and
  projection the mapping decides;
* the shipped catalogue (`llm_analysis/model_configs`), written by hand from the
  same configs: shape fields must agree.

Hub access goes through the real `huggingface_hub` client in a subprocess (it
reads HF_ENDPOINT / HF_HOME / HF_HUB_OFFLINE when imported) against the loopback
server of tests/support/hub_server.py.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

import pytest

from hub_server import FakeHub, commit_sha
import llm_analysis.hub.entry as hf_import
from llm_analysis.config import ModelConfig, get_model_config_by_name, model_configs
from llm_analysis.errors import ConfigError, HubImportError, UnsupportedArchitectureError

ROOT = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parents[1]
FIXTURES = TESTS / "data" / "hub_fixtures"  # ours: published config.json files
HF_CONFIGS = TESTS / "data" / "hf_configs"  # the catalogue's raw configs (stem = catalogue name)

FULL, SLIDE = "full_attention", "sliding_attention"


def fixture(hub_id: str) -> Dict[str, Any]:
    return json.loads((FIXTURES / f"{hub_id.replace('/', '_')}.json").read_text())


def language_model_config(raw: Dict[str, Any]) -> Dict[str, Any]:
    """`raw` as counted here: a multimodal config (text_config beside a vision_config) names
    its text-only causal-LM class in `architectures`, so its language model is counted alone
    (what the EXPECTED fields and the catalogue's Gemma 3 entries describe); the published
    config names the *ForConditionalGeneration class with the vision tower, which is refused
    (tests/hub/test_multimodal_towers.py)."""
    if not (isinstance(raw.get("text_config"), dict) and raw.get("vision_config") is not None):
        return raw
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    text_type = raw["text_config"].get("model_type") or \
        CONFIG_MAPPING[raw["model_type"]].sub_configs["text_config"].model_type
    return dict(raw, architectures=[MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[text_type]])


def bare_encoder_config(raw: Dict[str, Any]) -> Dict[str, Any]:
    """`raw` naming its bare encoder class instead of its *ForMaskedLM class: the catalogue's
    BERT entries describe BertModel (with its pooler), not the masked LM the config names."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES
    mt, arch = raw.get("model_type"), raw.get("architectures") or [None]
    if mt in MODEL_FOR_MASKED_LM_MAPPING_NAMES and arch[0] == MODEL_FOR_MASKED_LM_MAPPING_NAMES[mt]:
        return dict(raw, architectures=[MODEL_MAPPING_NAMES[mt]])
    return raw


def counted_fixture(hub_id: str) -> Dict[str, Any]:
    return language_model_config(fixture(hub_id))


# ---------------------------------------------------------------------------
# hand-derived expectations (published configs, model cards, papers)
# ---------------------------------------------------------------------------

GPT2_LIKE = dict(qkv_bias=True, attn_out_bias=True, mlp_bias=True, norm_type="layernorm",
                 norm_bias=True, position_embedding_type="learned", mlp_gated_linear_units=False,
                 tie_word_embeddings=True, num_norms_per_layer=2, final_norm=True)
LLAMA_LIKE = dict(qkv_bias=False, attn_out_bias=False, mlp_bias=False, norm_type="rmsnorm",
                  norm_bias=False, position_embedding_type="rotary", mlp_gated_linear_units=True,
                  activation="silu", num_norms_per_layer=2, parallel_attn_mlp=False)

EXPECTED: Dict[str, Dict[str, Any]] = {
    "openai-community/gpt2": dict(GPT2_LIKE, num_layers=12, n_head=12, num_key_value_heads=12,
                                  hidden_dim=768, ffn_embed_dim=3072, vocab_size=50257, head_dim=64,
                                  max_seq_len=1024, num_position_embeddings=1024,
                                  activation="gelu_tanh", model_type="gpt2"),
    "distilbert/distilgpt2": dict(GPT2_LIKE, num_layers=6, n_head=12, hidden_dim=768,
                                  ffn_embed_dim=3072, vocab_size=50257, num_position_embeddings=1024),
    "EleutherAI/gpt-j-6b": dict(num_layers=28, n_head=16, num_key_value_heads=16, hidden_dim=4096,
                                ffn_embed_dim=16384, vocab_size=50400, head_dim=256,
                                position_embedding_type="rotary", parallel_attn_mlp=True,
                                num_norms_per_layer=1, qkv_bias=False, attn_out_bias=False,
                                mlp_bias=True, lm_head_bias=True, tie_word_embeddings=False,
                                norm_type="layernorm", norm_bias=True),
    "EleutherAI/gpt-neo-125m": dict(num_layers=12, n_head=12, hidden_dim=768, ffn_embed_dim=3072,
                                    vocab_size=50257, qkv_bias=False, attn_out_bias=True,
                                    mlp_bias=True, position_embedding_type="learned",
                                    num_position_embeddings=2048, sliding_window=256,
                                    layer_types=[FULL, SLIDE] * 6, tie_word_embeddings=True),
    "EleutherAI/pythia-160m": dict(num_layers=12, n_head=12, hidden_dim=768, ffn_embed_dim=3072,
                                   vocab_size=50304, position_embedding_type="rotary",
                                   parallel_attn_mlp=True, num_norms_per_layer=2, qkv_bias=True,
                                   attn_out_bias=True, mlp_bias=True, tie_word_embeddings=False),
    "facebook/opt-350m": dict(num_layers=24, n_head=16, hidden_dim=1024, ffn_embed_dim=4096,
                              vocab_size=50272, embedding_dim=512, num_position_embeddings=2050,
                              final_norm=False, activation="relu", qkv_bias=True,
                              attn_out_bias=True, mlp_bias=True, tie_word_embeddings=True,
                              max_seq_len=2048),
    "facebook/opt-125m": dict(num_layers=12, n_head=12, hidden_dim=768, ffn_embed_dim=3072,
                              embedding_dim=None, num_position_embeddings=2050, final_norm=True),
    "bigscience/bloom-560m": dict(num_layers=24, n_head=16, hidden_dim=1024, ffn_embed_dim=4096,
                                  vocab_size=250880, position_embedding_type="alibi",
                                  embedding_norm=True, qkv_bias=True, attn_out_bias=True,
                                  mlp_bias=True, norm_type="layernorm", tie_word_embeddings=True),
    # its config names BertForMaskedLM: BertModel without the pooler, plus the MLM head
    # (dense + LayerNorm transform, the tied output projection and its bias)
    "google-bert/bert-base-uncased": dict(num_layers=12, n_head=12, hidden_dim=768,
                                          ffn_embed_dim=3072, vocab_size=30522,
                                          encoder_only=True, pooler=False, lm_head=True,
                                          lm_head_bias=True, lm_head_transform="dense_bias",
                                          tie_word_embeddings=True,
                                          final_norm=False, embedding_norm=True,
                                          type_vocab_size=2, num_position_embeddings=512,
                                          position_embedding_type="learned", qkv_bias=True,
                                          mlp_bias=True, activation="gelu"),
    "bigcode/gpt_bigcode-santacoder": dict(GPT2_LIKE, num_layers=24, n_head=16,
                                           num_key_value_heads=1, hidden_dim=2048,
                                           ffn_embed_dim=8192, vocab_size=49280,
                                           num_position_embeddings=2048),
    "meta-llama/Llama-3.1-8B": dict(LLAMA_LIKE, num_layers=32, n_head=32, num_key_value_heads=8,
                                    hidden_dim=4096, ffn_embed_dim=14336, vocab_size=128256,
                                    head_dim=128, tie_word_embeddings=False, sliding_window=None,
                                    layer_types=None, max_seq_len=131072),
    "meta-llama/Llama-3.2-1B": dict(LLAMA_LIKE, num_layers=16, n_head=32, num_key_value_heads=8,
                                    hidden_dim=2048, ffn_embed_dim=8192, head_dim=64,
                                    tie_word_embeddings=True),
    "mistralai/Mistral-7B-v0.1": dict(LLAMA_LIKE, num_layers=32, n_head=32, num_key_value_heads=8,
                                      hidden_dim=4096, ffn_embed_dim=14336, vocab_size=32000,
                                      sliding_window=4096, layer_types=None,
                                      tie_word_embeddings=False),
    "Qwen/Qwen2.5-7B": dict(LLAMA_LIKE, num_layers=28, n_head=28, num_key_value_heads=4,
                            hidden_dim=3584, ffn_embed_dim=18944, vocab_size=152064,
                            qkv_bias=True, attn_out_bias=False, sliding_window=None,
                            layer_types=None, tie_word_embeddings=False),
    "Qwen/Qwen3-8B": dict(LLAMA_LIKE, num_layers=36, n_head=32, num_key_value_heads=8,
                          hidden_dim=4096, ffn_embed_dim=12288, vocab_size=151936, head_dim=128,
                          qk_norm=True, sliding_window=None, tie_word_embeddings=False),
    "microsoft/Phi-3-mini-4k-instruct": dict(LLAMA_LIKE, num_layers=32, n_head=32,
                                             num_key_value_heads=32, hidden_dim=3072,
                                             ffn_embed_dim=8192, vocab_size=32064,
                                             sliding_window=2047, layer_types=None),
    "microsoft/phi-4": dict(LLAMA_LIKE, num_layers=40, n_head=40, num_key_value_heads=10,
                            hidden_dim=5120, ffn_embed_dim=17920, vocab_size=100352,
                            sliding_window=None),
    "mistralai/Mixtral-8x7B-v0.1": dict(LLAMA_LIKE, num_layers=32, n_head=32, num_key_value_heads=8,
                                        hidden_dim=4096, ffn_embed_dim=14336, moe_num_experts=8,
                                        moe_top_k=2, moe_ffn_embed_dim=14336,
                                        moe_first_dense_layers=0, moe_layer_freq=1,
                                        moe_num_shared_experts=0, moe_router_bias=False),
    "Qwen/Qwen3-30B-A3B": dict(LLAMA_LIKE, num_layers=48, n_head=32, num_key_value_heads=4,
                               hidden_dim=2048, head_dim=128, qk_norm=True, moe_num_experts=128,
                               moe_top_k=8, moe_ffn_embed_dim=768, moe_first_dense_layers=0,
                               moe_layer_freq=1, moe_num_shared_experts=0),
    "Qwen/Qwen1.5-MoE-A2.7B": dict(LLAMA_LIKE, num_layers=24, n_head=16, num_key_value_heads=16,
                                   hidden_dim=2048, qkv_bias=True, attn_out_bias=False,
                                   moe_num_experts=60, moe_top_k=4, moe_ffn_embed_dim=1408,
                                   moe_num_shared_experts=1, moe_shared_expert_ffn_dim=5632,
                                   moe_shared_expert_gate=True, sliding_window=None),
    "google/gemma-2-9b": dict(LLAMA_LIKE, activation="gelu_tanh", num_layers=42, n_head=16,
                              num_key_value_heads=8, hidden_dim=3584, ffn_embed_dim=14336,
                              vocab_size=256000, head_dim=256, num_norms_per_layer=4,
                              sliding_window=4096, layer_types=[SLIDE, FULL] * 21,
                              tie_word_embeddings=True, qk_norm=False),
    # Gemma 1: config.json says hidden_act "gelu", but GemmaConfig's hidden_activation (None
    # in the file) defaults to gelu_pytorch_tanh, which the model uses; 8.54B parameters
    # (28 * (3*3072*24576 + 3072*16*256*4 + 2*3072) + 256000*3072 + 3072 = 8,537,680,896)
    "google/gemma-7b": dict(LLAMA_LIKE, activation="gelu_tanh", num_layers=28, n_head=16,
                            num_key_value_heads=16, hidden_dim=3072, ffn_embed_dim=24576,
                            vocab_size=256000, head_dim=256, max_seq_len=8192,
                            sliding_window=None, layer_types=None, tie_word_embeddings=True,
                            qk_norm=False),
    "google/gemma-3-4b-it": dict(LLAMA_LIKE, activation="gelu_tanh", num_layers=34, n_head=8,
                                 num_key_value_heads=4, hidden_dim=2560, ffn_embed_dim=10240,
                                 vocab_size=262208, head_dim=256, num_norms_per_layer=4,
                                 qk_norm=True, sliding_window=1024,
                                 layer_types=([SLIDE] * 5 + [FULL]) * 5 + [SLIDE] * 4,
                                 tie_word_embeddings=True, model_type="gemma3"),
    "google/gemma-3-1b-pt": dict(num_layers=26, n_head=4, num_key_value_heads=1, hidden_dim=1152,
                                 ffn_embed_dim=6912, vocab_size=262144, head_dim=256,
                                 sliding_window=512, qk_norm=True, num_norms_per_layer=4,
                                 layer_types=([SLIDE] * 5 + [FULL]) * 4 + [SLIDE] * 2),
    "deepseek-ai/DeepSeek-V2-Lite": dict(num_layers=27, n_head=16, hidden_dim=2048,
                                         ffn_embed_dim=10944, vocab_size=102400, q_lora_rank=None,
                                         kv_lora_rank=512, qk_nope_head_dim=128,
                                         qk_rope_head_dim=64, v_head_dim=128, moe_num_experts=64,
                                         moe_top_k=6, moe_ffn_embed_dim=1408,
                                         moe_num_shared_experts=2, moe_shared_expert_ffn_dim=1408,
                                         moe_first_dense_layers=1, moe_layer_freq=1,
                                         mlp_gated_linear_units=True, norm_type="rmsnorm",
                                         tie_word_embeddings=False),
    "deepseek-ai/DeepSeek-V3": dict(num_layers=61, n_head=128, hidden_dim=7168, ffn_embed_dim=18432,
                                    vocab_size=129280, q_lora_rank=1536, kv_lora_rank=512,
                                    qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
                                    moe_num_experts=256, moe_top_k=8, moe_ffn_embed_dim=2048,
                                    moe_num_shared_experts=1, moe_shared_expert_ffn_dim=2048,
                                    moe_first_dense_layers=3, moe_layer_freq=1,
                                    moe_router_bias=False),
    "openai/gpt-oss-20b": dict(num_layers=24, n_head=64, num_key_value_heads=8, hidden_dim=2880,
                               head_dim=64, vocab_size=201088, moe_num_experts=32, moe_top_k=4,
                               moe_ffn_embed_dim=2880, attn_sinks=True, moe_router_bias=True,
                               moe_expert_bias=True, qkv_bias=True, attn_out_bias=True,
                               sliding_window=128, layer_types=[SLIDE, FULL] * 12,
                               tie_word_embeddings=False, norm_type="rmsnorm",
                               mlp_gated_linear_units=True),
    "tiiuae/falcon-7b": dict(num_layers=32, n_head=71, num_key_value_heads=1, hidden_dim=4544,
                             ffn_embed_dim=18176, vocab_size=65024, head_dim=64,
                             position_embedding_type="rotary", parallel_attn_mlp=True,
                             num_norms_per_layer=1, qkv_bias=False, attn_out_bias=False,
                             mlp_bias=False, norm_type="layernorm", norm_bias=True,
                             tie_word_embeddings=True),
    "tiiuae/falcon-40b": dict(num_layers=60, n_head=128, num_key_value_heads=8, hidden_dim=8192,
                              ffn_embed_dim=32768, parallel_attn_mlp=True, num_norms_per_layer=2,
                              qkv_bias=False),
}


def check_expected(cfg: ModelConfig, hub_id: str) -> None:
    got = {k: getattr(cfg, k) for k in EXPECTED[hub_id]}
    wrong = {k: (got[k], v) for k, v in EXPECTED[hub_id].items() if got[k] != v}
    assert not wrong, f"{hub_id}: field: (mapped, expected): {wrong}"


@pytest.mark.parametrize("hub_id", sorted(EXPECTED))
def test_family_mapping_from_dict(hub_id):
    cfg = hf_import.model_config_from_hf_dict(counted_fixture(hub_id), name=hub_id)
    check_expected(cfg, hub_id)
    assert cfg.name == hub_id


# ---------------------------------------------------------------------------
# the real model code: parameter count of the transformers model on `meta`
# ---------------------------------------------------------------------------

def count_params(c: ModelConfig) -> int:
    """Parameters of the mapped ModelConfig as the engine counts them (the operator
    description behind every figure), to be compared with the real model."""
    from llm_analysis.config import get_gpu_config_by_name
    from llm_analysis.facade import LLMAnalysis
    return LLMAnalysis(c, get_gpu_config_by_name("a100-sxm-80gb")).get_num_params_total()


def _meta_model_params(raw: Dict[str, Any], encoder_only: bool, masked_lm: bool = False) -> int:
    """The transformers model's parameters: the causal LM, the bare encoder, or (an encoder
    whose config names its *ForMaskedLM class) the masked LM."""
    torch = pytest.importorskip("torch")
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    cfg = CONFIG_MAPPING[raw["model_type"]].from_dict(copy.deepcopy(raw))
    if getattr(cfg, "text_config", None) is not None:
        cfg = cfg.text_config  # multimodal: the language model
    auto = (AutoModelForMaskedLM if masked_lm else AutoModel) if encoder_only else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(cfg)
    return sum(p.numel() for p in model.parameters())  # shared (tied) tensors counted once


def _all_raw_configs() -> List[Path]:
    return sorted(FIXTURES.glob("*.json")) + sorted(HF_CONFIGS.glob("*.json"))


@pytest.mark.parametrize("path", _all_raw_configs(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_param_count_matches_transformers_model(path):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    raw = json.loads(path.read_text())
    if raw.get("model_type") not in CONFIG_MAPPING:
        pytest.skip(f"transformers has no model_type {raw.get('model_type')!r}")
    cfg = hf_import.model_config_from_hf_dict(language_model_config(raw), name=path.stem)
    real = _meta_model_params(raw, cfg.encoder_only, masked_lm=cfg.encoder_only and cfg.lm_head)
    assert count_params(cfg) == real, (
        f"{path.stem}: parameters from the mapped ModelConfig {count_params(cfg):,} != "
        f"transformers model {real:,} (diff {count_params(cfg) - real:+,})")


def test_param_oracle_is_sensitive_to_each_flag():
    """The count above can fail: flipping any mapped flag changes it."""
    cfg = hf_import.model_config_from_hf_dict(fixture("openai/gpt-oss-20b"), name="x")
    base = count_params(cfg)
    for field in ("qkv_bias", "attn_out_bias", "attn_sinks", "moe_router_bias", "moe_expert_bias",
                  "tie_word_embeddings", "final_norm", "lm_head_bias", "qk_norm", "norm_bias"):
        flipped = cfg.model_copy(update={field: not getattr(cfg, field)})
        assert count_params(flipped) != base, field
    assert count_params(cfg.model_copy(update={"num_norms_per_layer": 4})) != base


# ---------------------------------------------------------------------------
# agreement with the shipped catalogue
# ---------------------------------------------------------------------------

SHAPE_FIELDS = [
    "num_layers", "n_head", "num_key_value_heads", "hidden_dim", "ffn_embed_dim", "vocab_size",
    "head_dim", "tie_word_embeddings", "mlp_gated_linear_units", "activation", "qkv_bias",
    "attn_out_bias", "mlp_bias", "qk_norm", "attn_sinks", "norm_type", "norm_bias",
    "num_norms_per_layer", "final_norm", "embedding_norm", "position_embedding_type",
    "num_position_embeddings", "type_vocab_size", "embedding_dim", "lm_head", "lm_head_bias",
    "pooler", "parallel_attn_mlp", "encoder_only", "sliding_window", "layer_types", "q_lora_rank",
    "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "moe_num_experts",
    "moe_top_k", "expert_ffn_dim", "moe_num_shared_experts", "shared_expert_ffn_dim",
    "moe_shared_expert_gate", "moe_first_dense_layers", "moe_layer_freq", "moe_router_bias",
    "moe_expert_bias",
]


def _catalogue_pairs():
    pairs = []
    for path in sorted(HF_CONFIGS.glob("*.json")):
        if path.stem in model_configs:
            pairs.append((path, path.stem))
    for path in sorted(FIXTURES.glob("*.json")):
        for stem in (path.stem, path.stem.split("_", 1)[-1]):
            if stem in model_configs:
                pairs.append((path, stem))
                break
    return pairs


def _shape(cfg: ModelConfig) -> Dict[str, Any]:
    out = {k: getattr(cfg, k) for k in SHAPE_FIELDS}
    if not cfg.is_moe:  # expert fields mean nothing on a dense model
        for k in list(out):
            if k.startswith("moe_") or k in ("expert_ffn_dim", "shared_expert_ffn_dim"):
                out.pop(k)
    if cfg.position_embedding_type != "learned":
        out.pop("num_position_embeddings")
    return out


@pytest.mark.parametrize("path,stem", _catalogue_pairs(),
                         ids=lambda v: f"{v.parent.name}/{v.stem}" if isinstance(v, Path) else v)
def test_mapping_agrees_with_catalogue(path, stem):
    raw = bare_encoder_config(language_model_config(json.loads(path.read_text())))
    mapped = _shape(hf_import.model_config_from_hf_dict(raw, name=stem))
    shipped = _shape(model_configs[stem])
    diffs = {k: {"hf_import": mapped.get(k), "catalogue": shipped.get(k)}
             for k in sorted(set(mapped) | set(shipped)) if mapped.get(k) != shipped.get(k)}
    assert not diffs, f"{path.name} vs model_configs/{stem}.json: {json.dumps(diffs)}"


# ---------------------------------------------------------------------------
# local files and directories, unmappable configs, detection
# ---------------------------------------------------------------------------

def test_by_name_on_local_directory(tmp_path):
    d = tmp_path / "my-llama"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(fixture("meta-llama/Llama-3.1-8B")))
    cfg = get_model_config_by_name(str(d))
    check_expected(cfg, "meta-llama/Llama-3.1-8B")
    assert cfg.name == "my-llama"


def test_by_name_on_local_directory_without_config(tmp_path):
    with pytest.raises(ConfigError, match="config.json"):
        get_model_config_by_name(str(tmp_path))


def test_by_name_on_hf_style_json_path(tmp_path):
    p = tmp_path / "deepseek-v3.json"
    p.write_text(json.dumps(fixture("deepseek-ai/DeepSeek-V3")))
    cfg = get_model_config_by_name(str(p))
    check_expected(cfg, "deepseek-ai/DeepSeek-V3")
    assert cfg.name == "deepseek-v3"


def test_by_name_on_our_own_json_path_is_not_treated_as_hf(tmp_path):
    ours = {"name": "tiny", "num_layers": 2, "n_head": 4, "hidden_dim": 64, "vocab_size": 100,
            "model_type": "llama"}
    assert not hf_import.looks_like_hf_config(ours)
    p = tmp_path / "tiny.json"
    p.write_text(json.dumps(ours))
    assert get_model_config_by_name(str(p)).hidden_dim == 64


@pytest.mark.parametrize("hub_id", ["openai-community/gpt2", "EleutherAI/gpt-neo-125m",
                                    "google/gemma-3-4b-it", "deepseek-ai/DeepSeek-V3"])
def test_looks_like_hf_config(hub_id):
    assert hf_import.looks_like_hf_config(fixture(hub_id))


def test_looks_like_hf_config_rejects_non_configs():
    assert not hf_import.looks_like_hf_config({})
    assert not hf_import.looks_like_hf_config([1, 2])
    assert not hf_import.looks_like_hf_config({"foo": 1})


MYSTERY = {"model_type": "mystery-net", "architectures": ["MysteryForCausalLM"],
           "hidden_size": 512, "num_hidden_layers": 4}


def test_unmappable_config_names_missing_attributes_and_model_type():
    with pytest.raises(hf_import.UnmappableConfig) as err:
        hf_import.model_config_from_hf_dict(MYSTERY, name="acme/mystery")
    msg = str(err.value)
    for word in ("num_attention_heads", "vocab_size", "mystery-net", "acme/mystery"):
        assert word in msg
    assert "hidden_size" not in msg.split("lacks", 1)[1]
    assert err.value.__cause__ is None


def test_unknown_family_with_common_keys_maps_generically(caplog):
    raw = dict(MYSTERY, num_attention_heads=8, vocab_size=1000, intermediate_size=1536,
               num_key_value_heads=2, rms_norm_eps=1e-6, hidden_act="silu", rope_theta=1e4,
               tie_word_embeddings=False)
    with caplog.at_level("WARNING", logger="llm_analysis.hub.entry"):
        cfg = hf_import.model_config_from_hf_dict(raw, name="acme/mystery")
    assert (cfg.num_layers, cfg.n_head, cfg.num_key_value_heads, cfg.ffn_embed_dim) == (4, 8, 2, 1536)
    assert cfg.mlp_gated_linear_units and cfg.norm_type == "rmsnorm"
    assert cfg.position_embedding_type == "rotary" and not cfg.tie_word_embeddings
    assert "no dedicated mapping" in caplog.text and "assumed" in caplog.text


def test_generic_mapping_refuses_keys_it_does_not_model():
    """An unknown type with one key outside the Llama shape (here a per-layer MLP
    width table) is refused, naming the key and the [exact] extra, never guessed."""
    raw = dict(MYSTERY, num_attention_heads=8, vocab_size=1000, intermediate_size=1536,
               rms_norm_eps=1e-6, hidden_act="silu", per_layer_intermediate_sizes=[1536] * 4)
    with pytest.raises(UnsupportedArchitectureError) as err:
        hf_import.model_config_from_hf_dict(raw, name="acme/mystery")
    msg = str(err.value)
    assert "per_layer_intermediate_sizes" in msg and 'llm-analysis[exact]' in msg
    assert isinstance(err.value, HubImportError)
    # a non-gated or LayerNorm model is not the Llama shape either
    for extra, word in (({"hidden_act": "gelu"}, "hidden_act"),
                        ({"rms_norm_eps": None, "layer_norm_eps": 1e-5}, "layer_norm_eps")):
        with pytest.raises(UnsupportedArchitectureError, match=word):
            hf_import.model_config_from_hf_dict(dict(raw, per_layer_intermediate_sizes=None,
                                                     **extra), name="acme/mystery")


def test_generic_mapping_refuses_types_whose_code_is_not_llama(monkeypatch):
    """OLMo-2's config has only Llama keys, but Olmo2DecoderLayer adds q/k norms over all
    heads: without its row, the generic mapping would count it as Llama. A type listed in
    NOT_LLAMA_SHAPED is refused (naming what differs) instead; and a listed type never
    also has a row (the entry would be dead)."""
    from transformers import AutoConfig

    from llm_analysis.hub.families.table import FAMILIES
    from llm_analysis.hub.generic import NOT_LLAMA_SHAPED
    assert not set(NOT_LLAMA_SHAPED) & set(FAMILIES)
    raw = AutoConfig.for_model("olmo2").to_dict()
    monkeypatch.delitem(FAMILIES, "olmo2")
    cfg = hf_import.model_config_from_hf_dict(raw, name="acme/olmo2")  # keys alone pass
    assert not cfg.qk_norm
    monkeypatch.setitem(NOT_LLAMA_SHAPED, "olmo2", "q/k norms over all heads")
    with pytest.raises(UnsupportedArchitectureError, match="q/k norms over all heads"):
        hf_import.model_config_from_hf_dict(raw, name="acme/olmo2")


def test_a_family_of_the_common_shape_is_one_table_row(monkeypatch, caplog):
    """Registering one row maps an unknown model_type exactly: Qwen2.5-7B's config under a
    made-up type must count what the real Qwen2 model holds (and skip the generic guess)."""
    from llm_analysis.hub.families.table import FAMILIES, LLAMA
    from llm_analysis.hub.spec import Family
    monkeypatch.setitem(FAMILIES, "acme_qwen", Family({**LLAMA, "qkv_bias": True,
                                                       "attn_out_bias": False}))
    raw = fixture("Qwen/Qwen2.5-7B")
    with caplog.at_level("WARNING", logger="llm_analysis.hub.entry"):
        cfg = hf_import.model_config_from_hf_dict(dict(raw, model_type="acme_qwen"), name="acme")
    assert "no dedicated mapping" not in caplog.text
    assert count_params(cfg) == _meta_model_params(raw, encoder_only=False)


def test_moe_layer_pattern_that_modelconfig_cannot_express_is_refused():
    raw = dict(fixture("Qwen/Qwen3-30B-A3B"), mlp_only_layers=[1, 5])
    with pytest.raises(hf_import.UnmappableConfig, match="MoE layers"):
        hf_import.model_config_from_hf_dict(raw, name="q")


def test_moe_layer_prefix_and_step_are_mapped():
    raw = dict(fixture("Qwen/Qwen3-30B-A3B"), mlp_only_layers=[0, 1, 2])
    cfg = hf_import.model_config_from_hf_dict(raw, name="q")
    assert (cfg.moe_first_dense_layers, cfg.moe_layer_freq) == (3, 1)
    raw = dict(fixture("Qwen/Qwen3-30B-A3B"), decoder_sparse_step=2)  # MoE at layers 1, 3, 5, ...
    cfg = hf_import.model_config_from_hf_dict(raw, name="q")
    assert [i for i in range(6) if cfg.is_moe_layer(i)] == [1, 3, 5]


def test_malformed_attribute_values_are_hub_import_errors():
    raw = dict(fixture("EleutherAI/gpt-neo-125m"), attention_types=[["global", "twelve"]])
    raw.pop("attention_layers")
    with pytest.raises(HubImportError) as err:
        hf_import.model_config_from_hf_dict(raw, name="neo")
    assert err.value.__cause__ is None and "neo" in str(err.value)
    with pytest.raises(hf_import.UnmappableConfig, match="hidden_size"):
        hf_import.model_config_from_hf_dict(dict(fixture("Qwen/Qwen3-8B"), hidden_size="4096"),
                                            name="q")


def test_unknown_layer_type_is_refused():
    raw = dict(fixture("openai/gpt-oss-20b"))
    raw["layer_types"] = ["chunked_attention", "full_attention"] * 12
    with pytest.raises(hf_import.UnmappableConfig, match="chunked_attention"):
        hf_import.model_config_from_hf_dict(raw, name="x")


def test_qwen2_sliding_window_layers_follow_max_window_layers():
    raw = dict(fixture("Qwen/Qwen2.5-7B"), use_sliding_window=True, sliding_window=4096,
               max_window_layers=20)
    cfg = hf_import.model_config_from_hf_dict(raw, name="q")
    assert cfg.sliding_window == 4096
    assert cfg.layer_types == [FULL] * 20 + [SLIDE] * 8


def test_falls_back_to_raw_json_when_transformers_rejects_the_config():
    # LlamaConfig's strict validation rejects hidden_size % heads != 0 even with head_dim set
    raw = {"model_type": "llama", "hidden_size": 100, "num_attention_heads": 3, "head_dim": 32,
           "num_hidden_layers": 2, "intermediate_size": 256, "vocab_size": 1000,
           "num_key_value_heads": 1}
    cfg = hf_import.model_config_from_hf_dict(raw, name="odd")
    assert (cfg.hidden_dim, cfg.n_head, cfg.head_dim, cfg.num_key_value_heads) == (100, 3, 32, 1)
    assert cfg.mlp_gated_linear_units and not cfg.tie_word_embeddings  # Llama defaults


def test_invalid_shapes_become_hub_import_errors():
    raw = dict(fixture("meta-llama/Llama-3.1-8B"), num_key_value_heads=7)
    with pytest.raises(HubImportError, match="num_key_value_heads"):
        hf_import.model_config_from_hf_dict(raw, name="bad")


@pytest.mark.parametrize("bad", ["not a valid id", "a//b", "-bad-"])
def test_invalid_hub_id_is_repo_not_found_without_network(bad):
    # huggingface_hub validates the id before any request
    with pytest.raises(hf_import.RepoNotFound, match="not a valid Hugging Face model id") as err:
        hf_import.get_model_config_from_hf(bad)
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_by_name_typo_gets_catalogue_suggestions_without_network():
    with pytest.raises(ConfigError, match="meta-llama_Llama-3.1-8B"):
        get_model_config_by_name("llama 3.1 8b")


def test_importing_the_package_stays_light():
    code = ("import sys, llm_analysis, llm_analysis.config, llm_analysis.hub.entry; "
            "print(sorted(m for m in ('torch', 'transformers', 'huggingface_hub') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------
# through the real huggingface_hub client against the loopback Hub
# ---------------------------------------------------------------------------

GATED = "meta-llama/Llama-3.1-8B"
GOOD_TOKEN = "hf_loopback_token_with_access"
NOT_FETCHED_ONLINE = "EleutherAI/pythia-160m"  # served, but only ever asked for offline
GPT2_V1 = dict(fixture("openai-community/gpt2"), n_layer=3)
HUB_FAMILIES = [h for h in sorted(EXPECTED) if h not in (GATED, NOT_FETCHED_ONLINE)]


# the repository's own configuration class: its default intermediate_size (1234) is not in
# config.json, so a mapped ffn_embed_dim of 1234 shows that this code ran
REMOTE_CONFIG_CODE = """
from transformers import PreTrainedConfig


class CustomConfig(PreTrainedConfig):
    model_type = "mystery-net"

    def __init__(self, hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
                 vocab_size=1000, intermediate_size=1234, **kwargs):
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.vocab_size = vocab_size
        self.intermediate_size = intermediate_size
        super().__init__(**kwargs)
"""


def _repos() -> Dict[str, Dict[str, Dict[str, bytes]]]:
    repos = {h: {"main": {"config.json": json.dumps(counted_fixture(h)).encode()}} for h in EXPECTED}
    repos["openai-community/gpt2"]["v1.0"] = {"config.json": json.dumps(GPT2_V1).encode()}
    repos["openai-community/gpt2"]["refs/pr/1"] = {"config.json": json.dumps(
        dict(GPT2_V1, n_layer=5)).encode()}
    repos["acme/mystery"] = {"main": {"config.json": json.dumps(MYSTERY).encode()}}
    repos["acme/custom-code"] = {"main": {
        "config.json": json.dumps(dict(MYSTERY, num_attention_heads=8, vocab_size=1000,
                                       rms_norm_eps=1e-6, hidden_act="silu",
                                       auto_map={"AutoConfig": "configuration_custom.CustomConfig"})).encode(),
        "configuration_custom.py": REMOTE_CONFIG_CODE.encode()}}
    repos["acme/no-config"] = {"main": {"README.md": b"# a dataset\n"}}
    return repos


def _client_env(endpoint: str, home: Path, **extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGING_FACE_", "TRANSFORMERS_")) and "PROXY" not in k.upper()}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(home), HF_HUB_DISABLE_TELEMETRY="1",
               NO_PROXY="127.0.0.1,localhost",
               PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    env.update(extra)
    return env


def _client_cmd() -> List[str]:
    return [sys.executable, str(TESTS / "support" / "hub_server.py"), "client"]


def _parse(stdout: str, stderr: str) -> Dict[str, Any]:
    assert "@@RESULTS@@" in stdout, f"client crashed:\n{stderr[-4000:]}"
    return json.loads(stdout.split("@@RESULTS@@", 1)[1])


def _run_client(ops: List[dict], env: Dict[str, str]) -> Dict[str, Any]:
    p = subprocess.run(_client_cmd(), input=json.dumps(ops), capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=120)
    return _parse(p.stdout, p.stderr)


@pytest.fixture(scope="module", autouse=True)
def refused_client():
    """Client against a port where nothing listens (connection refused). huggingface_hub
    retries with backoff (~23 s) before giving up, so this client starts before the
    first test of the module and runs while the others do."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
        s.close()
        ops_file = tmp / "refused-ops.json"
        ops_file.write_text(json.dumps([{"op": "hf", "name": "openai-community/gpt2"}]))
        with open(ops_file) as ops_in:
            proc = subprocess.Popen(_client_cmd(), stdin=ops_in, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                    env=_client_env(dead, tmp / "empty-home"))
        result: Dict[str, Any] = {}

        def outcome() -> Dict[str, Any]:
            if not result:
                out, err = proc.communicate(timeout=90)
                result.update(_parse(out, err)["results"][0], dead_endpoint=dead)
            return result

        try:
            yield outcome
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@pytest.fixture(scope="module")
def hub_runs(refused_client):
    """Runs every Hub scenario once; the tests below check the recorded outcomes."""
    online_ops = (
        [{"op": "hf", "name": h} for h in HUB_FAMILIES]
        + [{"op": "hf", "name": "openai-community/gpt2", "revision": "v1.0"},
           {"op": "hf", "name": "openai-community/gpt2", "revision": "refs/pr/1"},
           {"op": "hf", "name": "openai-community/gpt2",
            "revision": commit_sha("openai-community/gpt2", "v1.0")},
           {"op": "hf", "name": GATED},
           {"op": "hf", "name": GATED, "env": {"HF_TOKEN": "hf_wrong"}},
           {"op": "hf", "name": GATED, "env": {"HF_TOKEN": GOOD_TOKEN}},
           {"op": "hf", "name": "nobody/nothing"},
           {"op": "by_name", "name": "nobody/nothing"},
           {"op": "hf", "name": "openai-community/gpt2", "revision": "no-such-branch"},
           {"op": "hf", "name": "acme/no-config"},
           {"op": "hf", "name": "acme/mystery", "revision": "main"},
           {"op": "hf", "name": "acme/custom-code"},
           {"op": "hf", "name": "acme/custom-code", "trust_remote_code": True},
           {"op": "config_hf", "name": "Qwen/Qwen3-8B"},
           {"op": "by_name", "name": "google/gemma-3-4b-it"}])
    offline_ops = [{"op": "hf", "name": "openai-community/gpt2"},
                   {"op": "hf", "name": "openai-community/gpt2", "revision": "v1.0"},
                   {"op": "hf", "name": GATED},
                   {"op": "hf", "name": NOT_FETCHED_ONLINE}]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "hf-home"  # HF_HOME shared by the runs: the cache carries over
        with FakeHub(_repos(), gated={GATED: {GOOD_TOKEN}}, max_lifetime=150) as hub:
            online = _run_client(online_ops, _client_env(hub.endpoint, home))
            online_requests = list(hub.requests)
            offline = _run_client(offline_ops, _client_env(hub.endpoint, home, HF_HUB_OFFLINE="1"))
            offline_requests = hub.requests[len(online_requests):]
        # a web server that is not a Hub (wrong HF_ENDPOINT, captive portal)
        with FakeHub({}, hub_like=False, max_lifetime=60) as portal:
            not_hub = _run_client([{"op": "hf", "name": "openai-community/gpt2"},
                                   {"op": "hf", "name": NOT_FETCHED_ONLINE}],
                                  _client_env(portal.endpoint, home))
    yield dict(online=dict(zip([json.dumps(o, sort_keys=True) for o in online_ops],
                               online["results"])),
               online_requests=online_requests, offline=offline["results"],
               offline_requests=offline_requests, not_hub=not_hub["results"])


def _res(runs, **op) -> dict:
    return runs["online"][json.dumps(op, sort_keys=True)]


def _ok(r: dict) -> ModelConfig:
    assert "ok" in r, f"{r.get('error')}: {r.get('message')}"
    return ModelConfig(**r["ok"])


def _err(r: dict, cls: type, *words: str) -> str:
    assert "error" in r, f"expected {cls.__name__}, got a config"
    assert cls.__name__ in r["mro"], f"{r['error']} is not a {cls.__name__}: {r['message']}"
    assert not r["chained"], "library exception chained onto ours"
    inside = [f for f in r["frames"] if os.sep + "huggingface_hub" + os.sep in f
              or os.sep + "transformers" + os.sep in f]
    assert not inside, f"traceback reaches into the libraries:\n{r['traceback']}"
    for w in words:
        assert w in r["message"], f"{w!r} not in {r['message']!r}"
    return r["message"]


@pytest.mark.parametrize("hub_id", HUB_FAMILIES)
def test_hub_import_of_each_family(hub_runs, hub_id):
    cfg = _ok(_res(hub_runs, op="hf", name=hub_id))
    check_expected(cfg, hub_id)
    assert cfg.name == hub_id
    assert cfg.source == f"huggingface.co/{hub_id}@main"
    assert cfg == hf_import.model_config_from_hf_dict(counted_fixture(hub_id), name=hub_id,
                                                      source=cfg.source)


def test_hub_covers_at_least_ten_families():
    assert len({fixture(h)["model_type"] for h in HUB_FAMILIES}) >= 10


def test_hub_download_uses_the_hub_protocol(hub_runs):
    reqs = [(m, p) for m, p, _ in hub_runs["online_requests"]]
    assert ("HEAD", "/openai-community/gpt2/resolve/main/config.json") in reqs
    commit = commit_sha("openai-community/gpt2", "main")
    assert ("GET", f"/api/resolve-cache/models/openai-community/gpt2/{commit}/config.json") in reqs


@pytest.mark.parametrize("revision,layers", [("v1.0", 3), ("refs/pr/1", 5)])
def test_hub_revision_reaches_the_server(hub_runs, revision, layers):
    cfg = _ok(_res(hub_runs, op="hf", name="openai-community/gpt2", revision=revision))
    assert cfg.num_layers == layers
    assert cfg.source == f"huggingface.co/openai-community/gpt2@{revision}"
    quoted = revision.replace("/", "%2F")
    assert any(p == f"/openai-community/gpt2/resolve/{quoted}/config.json"
               for _, p, _ in hub_runs["online_requests"])


def test_hub_revision_by_commit_hash(hub_runs):
    commit = commit_sha("openai-community/gpt2", "v1.0")
    cfg = _ok(_res(hub_runs, op="hf", name="openai-community/gpt2", revision=commit))
    assert cfg.num_layers == 3 and cfg.source.endswith(f"@{commit}")


def test_hub_gated_without_token_says_how_to_authenticate(hub_runs):
    msg = _err(_res(hub_runs, op="hf", name=GATED), hf_import.GatedRepo,
               GATED, "'main'", "HF_TOKEN", "huggingface-cli login")
    assert "gated" in msg


def test_hub_gated_with_a_token_lacking_access(hub_runs):
    _err(_res(hub_runs, op="hf", name=GATED, env={"HF_TOKEN": "hf_wrong"}), hf_import.GatedRepo,
         GATED, "no access")


def test_hub_gated_with_a_good_token_works(hub_runs):
    cfg = _ok(_res(hub_runs, op="hf", name=GATED, env={"HF_TOKEN": GOOD_TOKEN}))
    check_expected(cfg, GATED)
    assert ("HEAD", f"/{GATED}/resolve/main/config.json", f"Bearer {GOOD_TOKEN}") in \
        hub_runs["online_requests"]
    # HF_TOKEN is only sent when set (no implicit token elsewhere)
    assert all(a is None for m, p, a in hub_runs["online_requests"] if "gpt2" in p)


def test_hub_missing_repo_is_repo_not_found(hub_runs):
    _err(_res(hub_runs, op="hf", name="nobody/nothing"), hf_import.RepoNotFound, "nobody/nothing",
         "'main'")


def test_by_name_turns_a_missing_repo_into_an_unknown_name(hub_runs):
    _err(_res(hub_runs, op="by_name", name="nobody/nothing"), ConfigError, "nobody/nothing")


def test_hub_missing_revision(hub_runs):
    _err(_res(hub_runs, op="hf", name="openai-community/gpt2", revision="no-such-branch"),
         hf_import.RevisionNotFound, "openai-community/gpt2", "no-such-branch")


def test_hub_repo_without_config_json(hub_runs):
    _err(_res(hub_runs, op="hf", name="acme/no-config"), HubImportError, "acme/no-config",
         "config.json")


def test_hub_unmappable_config_names_missing_attributes(hub_runs):
    _err(_res(hub_runs, op="hf", name="acme/mystery", revision="main"), hf_import.UnmappableConfig,
         "acme/mystery", "'main'", "mystery-net", "num_attention_heads", "vocab_size")


def test_hub_runs_remote_code_only_when_trusted(hub_runs):
    # without the code, config.json lacks the MLP width: a clean refusal, no guess
    untrusted = _res(hub_runs, op="hf", name="acme/custom-code")
    _err(untrusted, hf_import.UnmappableConfig, "intermediate_size")
    trusted = _ok(_res(hub_runs, op="hf", name="acme/custom-code", trust_remote_code=True))
    assert trusted.ffn_embed_dim == 1234  # the default of the repository's config class
    reqs = [p for _, p, _ in hub_runs["online_requests"]]
    starts = [i for i, p in enumerate(reqs) if p == "/acme/custom-code/resolve/main/config.json"]
    untrusted_reqs = reqs[starts[0]:starts[1]]  # the untrusted import ran first
    assert not any(p.endswith(".py") for p in untrusted_reqs), untrusted_reqs
    assert any(p.endswith("/configuration_custom.py") for p in reqs[starts[1]:])


def test_config_module_entry_points_use_the_hub(hub_runs):
    check_expected(_ok(_res(hub_runs, op="config_hf", name="Qwen/Qwen3-8B")), "Qwen/Qwen3-8B")
    check_expected(_ok(_res(hub_runs, op="by_name", name="google/gemma-3-4b-it")),
                   "google/gemma-3-4b-it")


def test_offline_uses_the_cache(hub_runs):
    gpt2, gpt2_v1, gated, _ = hub_runs["offline"]
    check_expected(_ok(gpt2), "openai-community/gpt2")
    assert _ok(gpt2_v1).num_layers == 3
    check_expected(_ok(gated), GATED)  # cached after the authorised download; no token needed
    assert hub_runs["offline_requests"] == [], "offline mode made HTTP requests"


def test_offline_without_cache_is_a_clear_error(hub_runs):
    _err(hub_runs["offline"][3], hf_import.HubOffline, NOT_FETCHED_ONLINE, "HF_HUB_OFFLINE",
         "'main'")


def test_endpoint_that_is_not_a_hub_falls_back_to_cache_then_explains(hub_runs):
    check_expected(_ok(hub_runs["not_hub"][0]), "openai-community/gpt2")
    _err(hub_runs["not_hub"][1], hf_import.HubUnreachable, NOT_FETCHED_ONLINE, "HF_ENDPOINT")


def test_unreachable_hub_is_a_clear_error(refused_client):
    r = refused_client()
    _err(r, hf_import.HubUnreachable, "openai-community/gpt2", "'main'", r["dead_endpoint"],
         "could not be reached")


def test_deepseek_moe_layer_freq_other_than_one_is_refused():
    """transformers' DeepseekV3DecoderLayer builds a MoE block on every layer from first_k_dense_replace on and
    never reads moe_layer_freq (checked here on its meta build: 3 MoE layers of 4 with moe_layer_freq = 2),
    while DeepSeek's reference code and vLLM make every second layer MoE: the config is refused naming the
    field, not counted as one of the two."""
    import torch
    import transformers
    from llm_analysis.hub.errors import UnmappableConfig
    from llm_analysis.hub.mapping import map_hf_config
    raw = transformers.AutoConfig.for_model(
        "deepseek_v3", vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8, num_experts_per_tok=2,
        first_k_dense_replace=1, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8,
        v_head_dim=8).to_dict()
    raw["moe_layer_freq"] = 2
    with torch.device("meta"):
        built = transformers.DeepseekV3ForCausalLM(transformers.DeepseekV3Config(**raw))
    assert sum(hasattr(layer.mlp, "experts") for layer in built.model.layers) == 3
    with pytest.raises(UnmappableConfig, match=r"moe_layer_freq = 2.*first_k_dense_replace = 1") as info:
        map_hf_config(dict(raw), name="t", source="t", what="test config", trust_remote_code=False, revision=None)
    assert "\n" not in str(info.value)
    raw["moe_layer_freq"] = 1
    cfg = map_hf_config(dict(raw), name="t", source="t", what="test config", trust_remote_code=False, revision=None)
    assert (cfg.moe_first_dense_layers, cfg.moe_layer_freq) == (1, 1)


@pytest.mark.parametrize("named,warned", [("BartForConditionalGeneration", True), ("BartForCausalLM", False)])
def test_encoder_decoder_class_named_whole_warns_that_the_encoder_is_not_counted(named, warned, caplog):
    """An encoder-decoder config maps to its decoder; a config whose architectures names the whole model
    (BartForConditionalGeneration) holds the encoder too, which transformers' meta build shows (its parameters
    beyond BartForCausalLM's are the encoder's): that is warned, naming the class; naming the decoder-only
    class is counted exactly, unwarned."""
    import logging
    import torch
    import transformers
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import get_gpu_config_by_name
    from llm_analysis.hub.mapping import map_hf_config
    raw = transformers.AutoConfig.for_model(
        "bart", vocab_size=256, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64).to_dict()
    raw["architectures"] = [named]
    with torch.device("meta"):
        whole = transformers.BartForConditionalGeneration(transformers.BartConfig(**raw))
        decoder = transformers.BartForCausalLM(transformers.BartConfig(**raw))
    encoder = sum(p.numel() for n, p in whole.named_parameters() if ".encoder." in n and "embed_tokens" not in n)
    assert sum(p.numel() for p in whole.parameters()) > sum(p.numel() for p in decoder.parameters()) and encoder > 0
    with caplog.at_level(logging.WARNING, logger="llm_analysis"):
        cfg = map_hf_config(dict(raw), name="t", source="t", what="test config", trust_remote_code=False,
                            revision=None)
    said = [r.getMessage() for r in caplog.records if "encoder" in r.getMessage() and named in r.getMessage()]
    assert bool(said) == warned
    assert LLMAnalysis(cfg, get_gpu_config_by_name("a100-sxm-80gb")).get_num_params_total() == \
        sum(p.numel() for p in decoder.parameters())
