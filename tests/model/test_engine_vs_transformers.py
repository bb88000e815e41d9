"""The arithmetic engine checked against the real model code of `transformers`.

Expected values never come from our own output:
- parameters: every catalogue model that has its published Hugging Face
  `config.json` in tests/data/hf_configs/ is instantiated at full size on the
  `meta` device and its parameters are summed per module (tied weights once);
- FLOPs: small real-tensor copies of each family (same structure, a few layers,
  small widths, applied identically to the HF config and to our ModelConfig) run
  with eager attention (and eager experts) under
  `torch.utils.flop_counter.FlopCounterMode`, for a prefill and for one decode
  step that reuses the prefill's KV cache;
- KV cache: the bytes of the cache object the prefill returns.

Conventions pinned here (and stated in operators.py): eager attention computes
the whole q x kv score matrix of a prefill and masks it afterwards, also for
sliding-window layers (attention_flops="full"); logits are computed at every
position (logits="all"); a decode step with a sliding window attends to at most
`sliding_window` keys; a sliding-window layer keeps `sliding_window - 1` tokens
in its cache between steps (the new token's K/V makes the window during a
step), as transformers' DynamicSlidingWindowLayer and vLLM do.
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from llm_analysis.analysis import LLMAnalysis  # noqa: E402
from llm_analysis.config import (ModelConfig, ParallelismConfig,  # noqa: E402
                                 get_gpu_config_by_name, get_model_config_by_name, list_model_configs)
from llm_analysis.errors import ConfigError  # noqa: E402
from llm_analysis.model import Phase, layer_kinds  # noqa: E402

transformers.logging.set_verbosity_error()

HF_CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf_configs"
GPU = get_gpu_config_by_name("a100-sxm-80gb")
STEMS = sorted(p.stem for p in HF_CONFIGS.glob("*.json") if p.stem in set(list_model_configs()))


def raw_config(stem: str) -> dict:
    return json.loads((HF_CONFIGS / f"{stem}.json").read_text())


def analysis(cfg: ModelConfig, **kw) -> LLMAnalysis:
    return LLMAnalysis(cfg, GPU, **kw)


def build_hf(raw: dict, **kw):
    """The transformers model of a raw config.json: the causal LM, or the bare
    encoder (with pooler) for BERT, as the catalogue describes it."""
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM
    cfg = AutoConfig.for_model(**raw)
    auto = AutoModel if raw["model_type"] == "bert" else AutoModelForCausalLM
    return auto.from_config(cfg, **kw)


# ---------------------------------------------------------------------------
# Which module of the real model is which part of ours. Keys are module paths
# (prefixes of parameter names, matched at dot boundaries, longest first):
# inside a layer relative to the layer, outside relative to the model.
# Groups: attention | mlp (dense MLP, routed and shared experts) | router | norm;
# outside: embedding (input side: word / position / token-type embeddings, their
# norm, OPT's project_in) | final_norm | output (untied LM head, project_out, pooler).
# ---------------------------------------------------------------------------
_LLAMA_LAYER = {"self_attn": "attention", "mlp": "mlp", "input_layernorm": "norm",
                "post_attention_layernorm": "norm", "pre_feedforward_layernorm": "norm",
                "post_feedforward_layernorm": "norm", "mlp.gate": "router", "mlp.router": "router"}
_LLAMA_OUT = {"model.embed_tokens": "embedding", "model.norm": "final_norm", "lm_head": "output"}
_GPT2_LAYER = {"attn": "attention", "mlp": "mlp", "ln_1": "norm", "ln_2": "norm"}
_GPT2_OUT = {"transformer.wte": "embedding", "transformer.wpe": "embedding", "transformer.ln_f": "final_norm",
             "lm_head": "output"}
_FAMILY = {  # model_type: (path of the layer list, names inside a layer, names outside the layers)
    **{t: ("model.layers", _LLAMA_LAYER, _LLAMA_OUT) for t in
       ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "phi3", "gemma2", "gemma3_text",
        "deepseek_v2", "deepseek_v3", "gpt_oss")},
    **{t: ("transformer.h", _GPT2_LAYER, _GPT2_OUT) for t in ("gpt2", "gpt_bigcode", "gpt_neo", "gptj")},
    "bloom": ("transformer.h",
              {"self_attention": "attention", "mlp": "mlp", "input_layernorm": "norm",
               "post_attention_layernorm": "norm"},
              {"transformer.word_embeddings": "embedding", "transformer.word_embeddings_layernorm": "embedding",
               "transformer.ln_f": "final_norm", "lm_head": "output"}),
    "falcon": ("transformer.h",
               {"self_attention": "attention", "mlp": "mlp", "input_layernorm": "norm", "ln_attn": "norm",
                "ln_mlp": "norm"},
               {"transformer.word_embeddings": "embedding", "transformer.ln_f": "final_norm", "lm_head": "output"}),
    "gpt_neox": ("gpt_neox.layers",
                 {"attention": "attention", "mlp": "mlp", "input_layernorm": "norm",
                  "post_attention_layernorm": "norm"},
                 {"gpt_neox.embed_in": "embedding", "gpt_neox.final_layer_norm": "final_norm",
                  "lm_head": "output", "embed_out": "output"}),
    "opt": ("model.decoder.layers",
            {"self_attn": "attention", "fc1": "mlp", "fc2": "mlp", "self_attn_layer_norm": "norm",
             "final_layer_norm": "norm"},
            {"model.decoder.embed_tokens": "embedding", "model.decoder.embed_positions": "embedding",
             "model.decoder.project_in": "embedding", "model.decoder.project_out": "output",
             "model.decoder.final_layer_norm": "final_norm", "lm_head": "output"}),
    "bert": ("encoder.layer",
             {"attention.self": "attention", "attention.output.dense": "attention",
              "attention.output.LayerNorm": "norm", "intermediate": "mlp", "output.dense": "mlp",
              "output.LayerNorm": "norm"},
             {"embeddings": "embedding", "pooler": "output"}),
}


def _group_of(name: str, mapping: dict) -> str:
    best = None
    for prefix in mapping:
        if name == prefix or name.startswith(prefix + "."):
            if best is None or len(prefix) > len(best):
                best = prefix
    if best is None:
        raise AssertionError(f"parameter {name!r} is not mapped to an operator group; extend _FAMILY")
    return mapping[best]


def hf_param_counts(model, model_type: str) -> dict:
    """Parameter counts of the real model, per group and per layer."""
    layers_path, in_layer, outside = _FAMILY[model_type]
    layers = model.get_submodule(layers_path)
    out = {"total": sum(p.numel() for p in model.parameters()), "layers": [],
           "embedding": 0, "final_norm": 0, "output": 0, "routed_experts": 0}
    seen = set()
    for layer in layers:
        counts = {"attention": 0, "mlp": 0, "router": 0, "norm": 0}
        for name, p in layer.named_parameters():
            seen.add(id(p))
            counts[_group_of(name, in_layer)] += p.numel()
            if name.startswith("mlp.experts."):
                out["routed_experts"] += p.numel()
        out["layers"].append(counts)
    for name, p in model.named_parameters():  # tied weights appear once
        if id(p) not in seen:
            out[_group_of(name, outside)] += p.numel()
    return out


@functools.lru_cache(maxsize=None)
def full_size_counts(stem: str) -> dict:
    raw = raw_config(stem)
    with torch.device("meta"):
        model = build_hf(raw)
    counts = hf_param_counts(model, raw["model_type"])
    cfg = model.config
    counts["num_experts"] = next((getattr(cfg, a) for a in ("num_local_experts", "num_experts", "n_routed_experts")
                                  if getattr(cfg, a, None)), 1)
    counts["top_k"] = getattr(cfg, "num_experts_per_tok", 1) or 1
    return counts


def test_catalogue_covers_the_families():
    families = {raw_config(s)["model_type"] for s in STEMS}
    required = {"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma2", "gemma3_text", "phi3",
                "deepseek_v2", "deepseek_v3", "gpt_oss", "falcon", "gpt_neox", "gptj", "gpt_neo", "gpt2", "opt",
                "bloom", "bert", "gpt_bigcode"}
    assert required <= families, f"missing raw HF configs for {sorted(required - families)}"
    assert families <= set(_FAMILY), f"no module-name mapping for {sorted(families - set(_FAMILY))}"


@pytest.mark.parametrize("stem", STEMS)
def test_parameters_equal_transformers_full_size(stem):
    hf = full_size_counts(stem)
    cfg = get_model_config_by_name(stem)
    a = analysis(cfg)
    assert cfg.num_layers == len(hf["layers"])
    # whole model, and the parts outside the layers; a vision-language entry's vision tower and projector
    # (Gemma 3) are checked against its whole class in tests/catalogue (its file here is the text config)
    parts = a.get_num_params_breakdown()
    vision = parts.get("vision tower", 0) + parts.get("projector", 0)
    assert a.get_num_params_total() - vision == hf["total"]
    assert a.get_num_params_embedding() == hf["embedding"]
    assert a.get_num_params_output_embedding() == hf["output"]
    assert a.get_num_params_embedding(shared_embedding=False) == hf["embedding"] + hf["output"]
    assert a.get_num_params_last_layernorm() == hf["final_norm"]
    # every layer against the operator description of its kind (dense/MoE, full/sliding)
    d, ph = a.describer, Phase("prefill", 1, 1, 1)
    groups = {"attention": ("attention",), "mlp": ("mlp", "experts"), "router": ("router",), "norm": ("norm",)}
    for i, (kind, real) in enumerate(zip(layer_kinds(cfg), hf["layers"])):
        ops = d.layer_ops(ph, kind)
        ours = {g: sum(o.params for o in ops if o.group in gs) for g, gs in groups.items()}
        assert ours == real, f"layer {i} ({kind.label})"
    # the per-layer views (means over layers when layers differ)
    L = cfg.num_layers
    mean = {g: sum(layer[g] for layer in hf["layers"]) / L for g in groups}
    assert a.get_num_params_per_layer_attn() == mean["attention"]
    assert a.get_num_params_per_layer_mlp() == mean["mlp"]
    assert a.get_num_params_per_layer_router() == mean["router"]
    assert a.get_num_params_per_layer_layernorm() == mean["norm"]
    # active parameters: the top-k of E routed experts per token, everything else
    e, k = hf["num_experts"], hf["top_k"]
    if e > 1:
        assert hf["routed_experts"] % e == 0
        active = hf["total"] - hf["routed_experts"] + hf["routed_experts"] // e * k
    else:
        active = hf["total"]
    assert a.get_num_active_params_total() - vision == active


# ---------------------------------------------------------------------------
# Small real-tensor copies: (catalogue stem, overrides of the raw HF config,
# the same overrides in our ModelConfig's terms). Small widths, a few layers,
# windows smaller than the prompt, few experts.
# ---------------------------------------------------------------------------
B, S = 2, 7  # prefill batch and prompt length; the decode step is at context S + 1
V = 128
_D = dict(hidden_size=64, num_attention_heads=4, vocab_size=V)
_O = dict(hidden_dim=64, n_head=4, vocab_size=V)

SMALL = {
    "llama-gqa-untied": ("meta-llama_Llama-3.1-8B",
                         dict(_D, num_hidden_layers=2, intermediate_size=96, num_key_value_heads=2),
                         dict(_O, num_layers=2, ffn_embed_dim=96, num_key_value_heads=2)),
    "llama-tied": ("meta-llama_Llama-3.2-1B",
                   dict(_D, num_hidden_layers=2, intermediate_size=96, num_key_value_heads=2, head_dim=16),
                   dict(_O, num_layers=2, ffn_embed_dim=96, num_key_value_heads=2)),
    "mistral-sliding": ("mistralai_Mistral-7B-v0.1",
                        dict(_D, num_hidden_layers=2, intermediate_size=96, num_key_value_heads=2, sliding_window=4),
                        dict(_O, num_layers=2, ffn_embed_dim=96, num_key_value_heads=2, sliding_window=4)),
    "mixtral-moe": ("mistralai_Mixtral-8x7B-v0.1",
                    dict(_D, num_hidden_layers=2, intermediate_size=48, num_key_value_heads=2, num_local_experts=4,
                         num_experts_per_tok=2),
                    dict(_O, num_layers=2, ffn_embed_dim=48, moe_ffn_embed_dim=48, num_key_value_heads=2,
                         moe_num_experts=4, moe_top_k=2)),
    "qwen2-qkv-bias": ("Qwen_Qwen2.5-7B",
                       dict(_D, num_hidden_layers=2, intermediate_size=96, num_key_value_heads=2, max_window_layers=2),
                       dict(_O, num_layers=2, ffn_embed_dim=96, num_key_value_heads=2)),
    "qwen3-qk-norm": ("Qwen_Qwen3-8B",
                      dict(_D, num_hidden_layers=2, intermediate_size=96, num_key_value_heads=2, head_dim=32,
                           max_window_layers=2),
                      dict(_O, num_layers=2, ffn_embed_dim=96, num_key_value_heads=2, head_dim=32)),
    "qwen3-moe": ("Qwen_Qwen3-30B-A3B",
                  dict(_D, num_hidden_layers=2, intermediate_size=96, moe_intermediate_size=32, num_key_value_heads=2,
                       head_dim=16, num_experts=8, num_experts_per_tok=2, max_window_layers=2),
                  dict(_O, num_layers=2, ffn_embed_dim=96, moe_ffn_embed_dim=32, num_key_value_heads=2,
                       head_dim=16, moe_num_experts=8, moe_top_k=2)),
    "gemma2-sliding": ("google_gemma-2-2b",
                       dict(_D, num_hidden_layers=4, intermediate_size=96, num_key_value_heads=2, head_dim=16,
                            sliding_window=4, query_pre_attn_scalar=16,
                            layer_types=["sliding_attention", "full_attention"] * 2),
                       dict(_O, num_layers=4, ffn_embed_dim=96, num_key_value_heads=2, head_dim=16, sliding_window=4,
                            layer_types=["sliding_attention", "full_attention"] * 2)),
    "gemma3-mqa-sliding": ("google_gemma-3-1b-pt",
                           dict(_D, num_hidden_layers=3, intermediate_size=96, num_key_value_heads=1, head_dim=16,
                                sliding_window=4, query_pre_attn_scalar=16,
                                layer_types=["sliding_attention", "sliding_attention", "full_attention"]),
                           dict(_O, num_layers=3, ffn_embed_dim=96, num_key_value_heads=1, head_dim=16,
                                sliding_window=4,
                                layer_types=["sliding_attention", "sliding_attention", "full_attention"])),
    "phi3-fused": ("microsoft_Phi-3-mini-4k-instruct",
                   dict(_D, num_hidden_layers=2, intermediate_size=96, num_key_value_heads=4, sliding_window=4),
                   dict(_O, num_layers=2, ffn_embed_dim=96, num_key_value_heads=4, sliding_window=4)),
    "deepseek-v2-mla": ("deepseek-ai_DeepSeek-V2-Lite",
                        dict(_D, num_hidden_layers=3, intermediate_size=96, moe_intermediate_size=32,
                             num_key_value_heads=4, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8,
                             v_head_dim=8, n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=2,
                             first_k_dense_replace=1),
                        dict(_O, num_layers=3, ffn_embed_dim=96, moe_ffn_embed_dim=32, moe_shared_expert_ffn_dim=32,
                             num_key_value_heads=4, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8,
                             v_head_dim=8, moe_num_experts=8, moe_top_k=2, moe_num_shared_experts=2,
                             moe_first_dense_layers=1)),
    "deepseek-v3-mla-q-lora": ("deepseek-ai_DeepSeek-V3",
                               dict(_D, num_hidden_layers=4, intermediate_size=96, moe_intermediate_size=32,
                                    num_key_value_heads=4, q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8,
                                    qk_rope_head_dim=8, v_head_dim=8, n_routed_experts=16, n_group=4, topk_group=2,
                                    num_experts_per_tok=4, n_shared_experts=1, first_k_dense_replace=2),
                               dict(_O, num_layers=4, ffn_embed_dim=96, moe_ffn_embed_dim=32,
                                    moe_shared_expert_ffn_dim=32, num_key_value_heads=4, q_lora_rank=24,
                                    kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8,
                                    moe_num_experts=16, moe_top_k=4, moe_num_shared_experts=1,
                                    moe_first_dense_layers=2)),
    "gpt-oss-sinks-sliding-moe": ("openai_gpt-oss-20b",
                                  dict(_D, num_hidden_layers=2, intermediate_size=32, num_key_value_heads=2,
                                       head_dim=16, num_local_experts=8, num_experts_per_tok=2, experts_per_token=2,
                                       sliding_window=4, layer_types=["sliding_attention", "full_attention"]),
                                  dict(_O, num_layers=2, ffn_embed_dim=32, moe_ffn_embed_dim=32,
                                       num_key_value_heads=2, head_dim=16, moe_num_experts=8, moe_top_k=2,
                                       sliding_window=4, layer_types=["sliding_attention", "full_attention"])),
    "falcon-7b-mqa-parallel": ("tiiuae_falcon-7b",
                               dict(_D, num_hidden_layers=2),
                               dict(_O, num_layers=2, ffn_embed_dim=256, num_key_value_heads=1)),
    "falcon-40b-new-arch": ("tiiuae_falcon-40b",
                            dict(_D, num_hidden_layers=2, num_kv_heads=2),
                            dict(_O, num_layers=2, ffn_embed_dim=256, num_key_value_heads=2)),
    "gpt-neox-parallel": ("EleutherAI_gpt-neox-20b",
                          dict(_D, num_hidden_layers=2, intermediate_size=256),
                          dict(_O, num_layers=2, ffn_embed_dim=256)),
    "gptj": ("EleutherAI_gpt-j-6b",
             dict(n_embd=64, n_head=4, n_layer=2, rotary_dim=8, vocab_size=V),
             dict(_O, num_layers=2, ffn_embed_dim=256)),
    "gpt-neo-local": ("EleutherAI_gpt-neo-125m",
                      dict(_D, num_heads=4, num_layers=2, attention_types=[[["global", "local"], 1]],
                           attention_layers=["global", "local"], window_size=4),
                      dict(_O, num_layers=2, ffn_embed_dim=256, sliding_window=4,
                           layer_types=["full_attention", "sliding_attention"])),
    "gpt2": ("gpt2", dict(n_embd=64, n_head=4, n_layer=2, vocab_size=V),
             dict(_O, num_layers=2, ffn_embed_dim=256)),
    "opt-125m": ("facebook_opt-125m",
                 dict(_D, num_hidden_layers=2, ffn_dim=96, word_embed_proj_dim=64),
                 dict(_O, num_layers=2, ffn_embed_dim=96)),
    "opt-350m-project-in-out": ("facebook_opt-350m",
                                dict(_D, num_hidden_layers=2, ffn_dim=96, word_embed_proj_dim=32),
                                dict(_O, num_layers=2, ffn_embed_dim=96, embedding_dim=32)),
    "bloom-alibi": ("bigscience_bloom-560m", dict(hidden_size=64, n_head=4, n_layer=2, vocab_size=V),
                    dict(_O, num_layers=2, ffn_embed_dim=256)),
    "bert-encoder": ("bert-base-uncased", dict(_D, num_hidden_layers=2, intermediate_size=96),
                     dict(_O, num_layers=2, ffn_embed_dim=96)),
    "gpt-bigcode-mqa": ("bigcode_santacoder", dict(n_embd=64, n_head=4, n_layer=2, n_inner=96, vocab_size=V),
                        dict(_O, num_layers=2, ffn_embed_dim=96, num_key_value_heads=1)),
}

# Fields ModelConfig derives from others at validation: recomputed for the copy
# unless the update gives them (num_key_value_heads defaults to n_head: MHA).
_DERIVED = ("num_key_value_heads", "num_key_value_groups", "expansion_ratio", "head_dim")


def small_model_config(stem: str, update: dict) -> ModelConfig:
    data = get_model_config_by_name(stem).model_dump()
    for f in _DERIVED:
        data[f] = None
    data.update(update)
    return ModelConfig(**data)


def small_raw_config(stem: str, update: dict) -> dict:
    raw = dict(raw_config(stem), **update)
    if "layer_types" not in update:  # a published per-layer list has the full model's length
        raw.pop("layer_types", None)
    for k in ("pad_token_id", "bos_token_id", "eos_token_id"):  # ids must exist in the small vocabulary
        if isinstance(raw.get(k), int) and raw[k] >= raw.get("vocab_size", V):
            raw[k] = 0
    return raw


def _kv_cache_bytes(cache) -> int:
    return sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))


@functools.lru_cache(maxsize=None)
def small_run(case: str) -> dict:
    """Build the small copy, run a prefill and one decode step under FlopCounterMode."""
    stem, hf_update, _ = SMALL[case]
    raw = small_raw_config(stem, hf_update)
    torch.manual_seed(0)
    model = build_hf(raw, attn_implementation="eager", experts_implementation="eager").eval()
    ids = torch.randint(0, V, (B, S))
    out = {"params": sum(p.numel() for p in model.parameters()), "model_type": raw["model_type"]}
    with torch.no_grad():
        with FlopCounterMode(display=False) as fc:
            res = model(input_ids=ids, use_cache=raw["model_type"] != "bert")
        out["prefill_flops"] = fc.get_total_flops()
        out["prefill_by_module"] = {k: sum(v.values()) for k, v in fc.get_flop_counts().items()}
        if raw["model_type"] != "bert":
            cache = res.past_key_values
            out["kv_cache_bytes"] = _kv_cache_bytes(cache)
            out["kv_cache_element_size"] = cache.layers[0].keys.element_size()
            out["kv_cache_tokens"] = [layer.keys.shape[-2] for layer in cache.layers]
            with FlopCounterMode(display=False) as fc:
                model(input_ids=torch.randint(0, V, (B, 1)), past_key_values=cache, use_cache=True)
            out["decode_flops"] = fc.get_total_flops()
            out["decode_by_module"] = {k: sum(v.values()) for k, v in fc.get_flop_counts().items()}
    return out


def small_analysis(case: str, **kw) -> LLMAnalysis:
    stem, _, ours_update = SMALL[case]
    return analysis(small_model_config(stem, ours_update), **kw)


def _explain(by_module: dict) -> str:
    return "\n".join(f"  {k}: {v}" for k, v in sorted(by_module.items()) if "." in k and k.count(".") <= 4)


def test_small_copies_cover_the_families():
    families = {raw_config(stem)["model_type"] for stem, _, _ in SMALL.values()}
    assert families == {raw_config(s)["model_type"] for s in STEMS}


@pytest.mark.parametrize("case", sorted(SMALL))
def test_small_copy_has_the_same_parameters(case):
    """The overrides describe the same model on both sides (else FLOP checks prove nothing)."""
    assert small_analysis(case).get_num_params_total() == small_run(case)["params"]


@pytest.mark.parametrize("case", sorted(SMALL))
def test_prefill_flops_equal_flop_counter(case):
    run = small_run(case)
    ours = small_analysis(case).get_num_flops_fwd_total(B, S)
    assert ours == run["prefill_flops"], _explain(run["prefill_by_module"])


@pytest.mark.parametrize("case", sorted(c for c in SMALL if c not in ("bert-encoder", "gpt-neo-local")))
def test_decode_step_flops_equal_flop_counter(case):
    run = small_run(case)
    ours = small_analysis(case).get_num_flops_decode_step(B, S + 1)
    assert ours == run["decode_flops"], _explain(run["decode_by_module"])


# KV cache after the prefill, against the cache object. Families whose HF cache
# differs from what the model needs by an implementation choice of transformers
# (GPT-Neo local layers, Falcon-40B's broadcast K/V) are derived by hand below.
KV_CASES = {
    "llama-gqa-untied": "GQA", "qwen2-qkv-bias": "GQA", "phi3-fused": "MHA + sliding", "gpt2": "MHA",
    "bloom-alibi": "MHA", "falcon-7b-mqa-parallel": "MQA", "gpt-bigcode-mqa": "MQA",
    "mistral-sliding": "GQA + sliding (every layer)", "gemma2-sliding": "GQA + alternating sliding",
    "gemma3-mqa-sliding": "MQA + 2:1 sliding", "gpt-oss-sinks-sliding-moe": "GQA + sliding",
    "opt-350m-project-in-out": "MHA", "gpt-neox-parallel": "MHA", "gptj": "MHA", "qwen3-moe": "GQA",
    "mixtral-moe": "GQA", "qwen3-qk-norm": "GQA", "llama-tied": "GQA", "opt-125m": "MHA",
    # MLA: transformers 5 caches what serving engines cache: the normalised latent
    # c_KV (as "keys", one head of kv_lora_rank) and the rope key (as "values", one
    # head of qk_rope_head_dim), and re-expands them every step (see decode FLOPs).
    "deepseek-v2-mla": "MLA latent", "deepseek-v3-mla-q-lora": "MLA latent",
}


@pytest.mark.parametrize("case", sorted(KV_CASES))
def test_kv_cache_bytes_equal_cache_object(case):
    run = small_run(case)
    a = small_analysis(case)
    elt = run["kv_cache_element_size"]
    ours = a.get_memory_kv_cache_total(B, S, kv_cache_dtype_bytes=elt)
    assert ours == run["kv_cache_bytes"], f"tokens kept per layer: {run['kv_cache_tokens']}"
    assert a.get_memory_kv_cache_per_layer(B, S, elt) == run["kv_cache_bytes"] / a.model_config.num_layers


def test_sliding_window_cache_keeps_window_minus_one_tokens():
    """Pinned from the cache objects: window 4, prompt 7 -> sliding layers keep 3 tokens."""
    assert small_run("gemma2-sliding")["kv_cache_tokens"] == [3, S, 3, S]
    assert small_run("gemma3-mqa-sliding")["kv_cache_tokens"] == [3, 3, S]
    assert small_run("mistral-sliding")["kv_cache_tokens"] == [3, 3]


@pytest.mark.parametrize("case", ["deepseek-v2-mla", "deepseek-v3-mla-q-lora"])
def test_mla_kv_cache_by_hand(case):
    """MLA (DeepSeek-V2, arXiv 2405.04434 §2.1): kv_lora_rank + qk_rope_head_dim
    elements per token and layer, the same on every TP rank (the latent is not
    split by head)."""
    _, hf, _ = SMALL[case]
    run = small_run(case)
    elt = run["kv_cache_element_size"]
    latent = B * S * hf["num_hidden_layers"] * (hf["kv_lora_rank"] + hf["qk_rope_head_dim"])
    assert run["kv_cache_bytes"] == latent * elt
    for tp in (1, 2, 4):
        a = small_analysis(case, parallelism_config=ParallelismConfig(tp_size=tp))
        assert a.get_memory_kv_cache_total(B, S, kv_cache_dtype_bytes=1) == latent
    # full size: DeepSeek-V3 keeps 512 + 64 = 576 elements per token per layer
    v3 = analysis(get_model_config_by_name("deepseek-ai_DeepSeek-V3"))
    assert v3.get_memory_kv_cache_total(1, 1000, kv_cache_dtype_bytes=2) == 1000 * 61 * 576 * 2


def test_falcon_40b_kv_cache_by_hand():
    """Falcon-40B (new decoder architecture) has num_kv_heads K/V heads, but
    transformers broadcasts them to all query heads before caching
    (FalconAttention._split_heads). We count the distinct heads, as serving
    engines store them; the HF object is n_head / num_kv_heads times larger."""
    _, hf, _ = SMALL["falcon-40b-new-arch"]
    run = small_run("falcon-40b-new-arch")
    elt = run["kv_cache_element_size"]
    head_dim = hf["hidden_size"] // hf["num_attention_heads"]
    ours = small_analysis("falcon-40b-new-arch").get_memory_kv_cache_total(B, S, kv_cache_dtype_bytes=elt)
    assert ours == B * S * hf["num_hidden_layers"] * 2 * hf["num_kv_heads"] * head_dim * elt
    assert run["kv_cache_bytes"] == ours * hf["num_attention_heads"] // hf["num_kv_heads"]


def test_gpt_neo_local_attention_by_hand():
    """GPT-Neo's local layers attend to the last `window_size` tokens, but
    transformers keeps every token in their cache and, in a decode step,
    computes scores against all of them before masking. We count what the
    layer needs (window - 1 cached tokens, window keys per query); the
    difference to the HF object and FLOP count is exactly the masked part."""
    _, hf, _ = SMALL["gpt-neo-local"]
    run = small_run("gpt-neo-local")
    a = small_analysis("gpt-neo-local")
    elt = run["kv_cache_element_size"]
    h, w = hf["num_heads"], hf["window_size"]
    d = hf["hidden_size"] // h
    local_layers = hf["attention_layers"].count("local")
    assert run["kv_cache_tokens"] == [S, S]
    extra_cached = B * (S - (w - 1)) * 2 * h * d * local_layers
    assert run["kv_cache_bytes"] == a.get_memory_kv_cache_total(B, S, kv_cache_dtype_bytes=elt) + extra_cached * elt
    masked_pairs = B * h * ((S + 1) - w) * local_layers  # keys beyond the window, decode step at S + 1
    assert run["decode_flops"] == a.get_num_flops_decode_step(B, S + 1) + 2 * masked_pairs * (d + d)


def test_mla_absorbed_decode_by_hand():
    """mla_attention="absorb" (decode as vLLM/SGLang run it): instead of expanding
    all c cached latents through kv_b_proj (2*b*c*r*h*(dn+dv)) and attending with
    per-head keys (dn+dr) and values (dv), the query is mapped into the latent
    (2*b*h*dn*r), attention runs over latent+rope keys (r+dr) and latent values (r),
    and the output leaves the latent (2*b*h*r*dv). Prefill is the same in both."""
    case = "deepseek-v2-mla"
    _, hf, _ = SMALL[case]
    L, h, r = hf["num_hidden_layers"], hf["num_attention_heads"], hf["kv_lora_rank"]
    dn, dr, dv = hf["qk_nope_head_dim"], hf["qk_rope_head_dim"], hf["v_head_dim"]
    c = S + 1
    expand = small_analysis(case)
    absorb = small_analysis(case, mla_attention="absorb")
    assert absorb.get_num_flops_fwd_total(B, S) == expand.get_num_flops_fwd_total(B, S)
    assert absorb.get_num_params_total() == expand.get_num_params_total()
    per_layer_expand = 2 * B * c * r * h * (dn + dv) + 2 * B * h * c * (dn + dr + dv)
    per_layer_absorb = 2 * B * h * dn * r + 2 * B * h * c * (r + dr + r) + 2 * B * h * r * dv
    assert expand.get_num_flops_decode_step(B, c) - absorb.get_num_flops_decode_step(B, c) == \
        L * (per_layer_expand - per_layer_absorb)
    # the default is what transformers computes
    assert expand.get_num_flops_decode_step(B, c) == small_run(case)["decode_flops"]
    with pytest.raises(ConfigError, match="mla_attention"):
        small_analysis(case, mla_attention="latent")


def test_causal_convention_by_hand():
    """attention_flops="causal" counts only the unmasked pairs: a prompt of 7 with
    window 4 has 1+2+3+4+4+4+4 = 22 pairs per head in a sliding layer, 28 in a full one."""
    a_full = small_analysis("gemma2-sliding")
    a_causal = small_analysis("gemma2-sliding", attention_flops="causal")
    _, hf, _ = SMALL["gemma2-sliding"]
    h, d, layers = hf["num_attention_heads"], hf["head_dim"], hf["num_hidden_layers"]
    core = lambda pairs: 2 * B * h * pairs * (d + d)  # noqa: E731
    diff = a_full.get_num_flops_fwd_total(B, S) - a_causal.get_num_flops_fwd_total(B, S)
    assert diff == layers // 2 * (core(S * S) - core(22)) + layers // 2 * (core(S * S) - core(28))


# ---------------------------------------------------------------------------
# Parallel sharding, derived by hand
# ---------------------------------------------------------------------------
def _par(**kw) -> ParallelismConfig:
    return ParallelismConfig(**kw)


P1 = Phase("prefill", 1, 1, 1)


def test_tp_splits_weights_and_flops_of_llama_70b():
    cfg = get_model_config_by_name("meta-llama_Llama-3.1-70B")
    h, f, kvd, L, V70 = 8192, 28672, 8 * 128, 80, 128256
    one = analysis(cfg)
    norms = (2 * L + 1) * h * 2  # bytes of all RMSNorm weights (bf16), replicated on every TP rank
    for tp in (2, 4, 8):
        a = analysis(cfg, parallelism_config=_par(tp_size=tp))
        _, *parts = a.get_weight_memory_per_layer(return_breakdown=True)
        assert parts == [(2 * h * h + 2 * h * kvd) / tp * 2, 3 * h * f / tp * 2, 2 * h * 2]  # attn, mlp, norms
        assert a.get_memory_embedding() == 2 * V70 * h / tp * 2  # vocab-parallel input and output embeddings
        assert a.get_weight_memory_per_gpu() * tp == one.get_weight_memory_per_gpu() + (tp - 1) * norms
        ph = Phase("prefill", 2, 16, 16)
        ops, ops1 = a.describer.flat_ops(ph), one.describer.flat_ops(ph)
        assert a.get_num_flops_fwd_total(2, 16) == one.get_num_flops_fwd_total(2, 16)
        # per GPU: the executed work (flash attention's causal part), which TP splits evenly
        assert sum(o.flops_per_gpu for o in ops) * tp == sum(o.flops - o.masked_flops for o in ops1)
        assert sum(o.flops_per_gpu for o in ops1) == sum(o.flops - o.masked_flops for o in ops1)
        split = [o for o in a.describer.flat_ops(P1) if o.params and o.group != "norm"]
        assert sum(o.params_per_gpu for o in split) * tp == sum(o.params for o in split)
        assert all(o.params_per_gpu == o.params for o in a.describer.flat_ops(P1) if o.group == "norm")


@pytest.mark.parametrize("stem,kv_heads,head_dim", [("meta-llama_Llama-3.1-70B", 8, 128),
                                                    ("bigcode_santacoder", 1, 128),
                                                    ("google_gemma-3-27b-pt", 16, 128)])
def test_kv_heads_fewer_than_tp_are_replicated(stem, kv_heads, head_dim):
    cfg = get_model_config_by_name(stem)
    assert (cfg.num_key_value_heads, cfg.head_dim) == (kv_heads, head_dim)
    b, s = 3, 100  # shorter than every sliding window here
    for tp in (t for t in (1, 2, 4, 8, 16, 32) if cfg.n_head % t == 0):
        local = max(kv_heads // tp, 1)
        a = analysis(cfg, parallelism_config=_par(tp_size=tp))
        expected = b * s * cfg.num_layers * 2 * local * head_dim * 2
        assert a.get_memory_kv_cache_total(b, s, kv_cache_dtype_bytes=2) == expected
        layer = a.describer.layer_ops(P1, layer_kinds(cfg)[0])
        for name in ("k_proj", "v_proj"):
            op = next(o for o in layer if o.name == name)
            assert op.params_per_gpu == cfg.hidden_dim * local * head_dim + (local * head_dim if cfg.qkv_bias else 0)


def test_ep_divides_experts_of_mixtral():
    cfg = get_model_config_by_name("mistralai_Mixtral-8x7B-v0.1")
    h, f, e, k = 4096, 14336, 8, 2
    kind = layer_kinds(cfg)[0]
    base = {o.name: o for o in analysis(cfg).describer.layer_ops(P1, kind)}
    ph = Phase("prefill", 4, 64, 64)
    for ep in (2, 4, 8):
        a = analysis(cfg, parallelism_config=_par(ep_size=ep, dp_size=ep))
        ops = {o.name: o for o in a.describer.layer_ops(P1, kind)}
        for name in ("expert_gate_proj", "expert_up_proj", "expert_down_proj"):
            assert ops[name].params == e * h * f
            assert ops[name].params_per_gpu == e // ep * h * f
        for name, o in ops.items():
            if not name.startswith("expert_") and o.params:
                assert o.params_per_gpu == base[name].params_per_gpu
        expert_flops = sum(o.flops_per_gpu for o in a.describer.layer_ops(ph, kind) if o.name.startswith("expert_")
                           and o.kind == "matmul")
        # EP ranks are data-parallel ranks, each with its own batch of t tokens: with balanced
        # routing each rank runs t*k token-expert pairs (gathered from all ep ranks) on its e/ep experts
        assert expert_flops == 3 * 2 * (4 * 64) * k * h * f
    with pytest.raises(ConfigError, match="ep_size"):
        analysis(cfg, parallelism_config=_par(ep_size=3, dp_size=3))


@pytest.mark.parametrize("stem,pp", [("meta-llama_Llama-3.1-8B", 4), ("meta-llama_Llama-3.1-8B", 3),
                                     ("deepseek-ai_DeepSeek-V3", 4), ("openai_gpt-oss-20b", 5),
                                     ("google_gemma-3-4b-pt", 5), ("bigscience_bloom-560m", 2)])
def test_pp_stages_sum_to_the_model(stem, pp):
    cfg = get_model_config_by_name(stem)
    one = analysis(cfg)
    a = analysis(cfg, parallelism_config=_par(pp_size=pp))
    d = a.describer
    stage_ops = [d.flat_ops(P1, stage=s) for s in range(pp)]
    assert sum(sum(o.params for o in ops) for ops in stage_ops) == one.get_num_params_total()
    stage_weights = [sum(o.weight_bytes_per_gpu for o in ops) for ops in stage_ops]
    # a tied output embedding is stored again on the last stage (Megatron, vLLM)
    tied_copy = cfg.vocab_size * cfg.word_embedding_dim * 2 if cfg.tie_word_embeddings else 0
    assert sum(stage_weights) == one.get_weight_memory_per_gpu() + tied_copy
    assert a.get_weight_memory_per_gpu() == max(stage_weights)
    kv = [a.get_memory_kv_cache_total(2, 300, stage=s) for s in range(pp)]
    assert sum(kv) == one.get_memory_kv_cache_total(2, 300)
    assert a.get_memory_kv_cache_per_gpu(2, 300) == max(kv)
    ph = Phase("prefill", 2, 16, 16)
    assert sum(sum(o.flops for o in d.flat_ops(ph, stage=s)) for s in range(pp)) == one.get_num_flops_fwd_total(2, 16)
    sizes = [sum(n for label, n, _ in d.model_ops(P1, stage=s)
                 if label not in ("embedding", "head", "vision embedding", "vision block", "projector"))
             for s in range(pp)]
    assert sum(sizes) == cfg.num_layers and max(sizes) - min(sizes) <= 1


# ---------------------------------------------------------------------------
# Invariants over random valid configs (hypothesis)
# ---------------------------------------------------------------------------
@st.composite
def model_configs(draw):
    n_head = draw(st.sampled_from([1, 2, 4, 8, 16]))
    kv = draw(st.sampled_from([k for k in (1, 2, 4, 8, 16) if n_head % k == 0]))
    head_dim = draw(st.sampled_from([8, 16, 64, 128]))
    hidden = n_head * head_dim * draw(st.sampled_from([1, 2]))
    layers = draw(st.integers(1, 6))
    data = dict(name="random", num_layers=layers, n_head=n_head, num_key_value_heads=kv, head_dim=head_dim,
                hidden_dim=hidden, vocab_size=draw(st.integers(2, 70000)),
                ffn_embed_dim=16 * draw(st.integers(1, 512)), mlp_gated_linear_units=draw(st.booleans()),
                qkv_bias=draw(st.booleans()), tie_word_embeddings=draw(st.booleans()),
                norm_type=draw(st.sampled_from(["layernorm", "rmsnorm"])),
                parallel_attn_mlp=draw(st.booleans()),
                position_embedding_type=draw(st.sampled_from(["rotary", "learned", "alibi"])), max_seq_len=4096)
    if draw(st.booleans()):
        data["sliding_window"] = draw(st.integers(2, 64))
        data["layer_types"] = draw(st.lists(st.sampled_from(["sliding_attention", "full_attention"]),
                                            min_size=layers, max_size=layers))
    if draw(st.booleans()):
        e = draw(st.sampled_from([2, 4, 8, 16]))
        data.update(moe_num_experts=e, moe_top_k=draw(st.integers(1, e)),
                    moe_ffn_embed_dim=16 * draw(st.integers(1, 64)), moe_num_shared_experts=draw(st.integers(0, 2)), moe_first_dense_layers=draw(st.integers(0, layers)))
    if draw(st.booleans()):
        data.update(kv_lora_rank=16 * draw(st.integers(1, 8)), qk_nope_head_dim=16, qk_rope_head_dim=8,
                    v_head_dim=16, q_lora_rank=draw(st.sampled_from([None, 32])), num_key_value_heads=n_head)
    return ModelConfig(**data)


HYP = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _all_numbers(a: LLMAnalysis, b: int, s: int):
    yield a.get_num_params_total()
    yield a.get_num_active_params_total()
    yield a.get_num_params_embedding()
    yield a.get_num_params_per_layer()
    yield a.get_num_flops_fwd_total(b, s)
    yield a.get_num_flops_bwd_total(b, s)
    yield a.get_num_flops_total_attn_compute(b, s)
    yield a.get_num_flops_decode_step(b, s + 1)
    yield a.get_memory_kv_cache_total(b, s)
    yield a.get_weight_memory_per_gpu()
    yield a.get_activation_memory_per_layer(b, s, is_inference=False)
    yield a.get_activation_memory_per_layer(b, s, is_inference=True)
    for row in a.operators("decode", b, s):
        yield from (row["flops_per_gpu"], row["bytes_per_gpu"], row["latency_s"])


@HYP
@given(cfg=model_configs(), b=st.integers(1, 64), s=st.integers(1, 4096),
       mla=st.sampled_from(["expand", "absorb"]), attn=st.sampled_from(["full", "causal"]))
def test_nothing_negative_nan_or_infinite(cfg, b, s, mla, attn):
    a = analysis(cfg, mla_attention=mla, attention_flops=attn)
    for x in _all_numbers(a, b, s):
        assert math.isfinite(x) and x >= 0, x


@HYP
@given(cfg=model_configs(), b=st.integers(1, 64), s=st.integers(1, 4096), mla=st.sampled_from(["expand", "absorb"]))
def test_monotonic_in_batch_and_sequence(cfg, b, s, mla):
    a = analysis(cfg, mla_attention=mla)
    f = a.get_num_flops_fwd_total
    assert f(b + 1, s) > f(b, s) and f(b, s + 1) > f(b, s)
    assert a.get_num_flops_decode_step(b + 1, s) > a.get_num_flops_decode_step(b, s)
    assert a.get_num_flops_decode_step(b, s + 1) >= a.get_num_flops_decode_step(b, s)
    kv = a.get_memory_kv_cache_total
    assert kv(b + 1, s) >= kv(b, s) and kv(b, s + 1) >= kv(b, s)
    act = a.get_activation_memory_per_layer
    assert act(b + 1, s, is_inference=False) >= act(b, s, is_inference=False)
    assert act(b, s + 1, is_inference=False) >= act(b, s, is_inference=False)


def _grow(cfg: ModelConfig, **update) -> ModelConfig:
    data = cfg.model_dump()
    for f in ("num_key_value_groups", "expansion_ratio"):
        data[f] = None
    data.update(update)
    return ModelConfig(**data)


@HYP
@given(cfg=model_configs(), b=st.integers(1, 16), s=st.integers(1, 512))
def test_monotonic_in_layers_and_hidden_size(cfg, b, s):
    a = analysis(cfg)
    more_layers = dict(num_layers=cfg.num_layers + 1)
    if cfg.layer_types is not None:
        more_layers["layer_types"] = cfg.layer_types + ["full_attention"]
    wider = dict(hidden_dim=cfg.hidden_dim + cfg.n_head)
    for bigger in (analysis(_grow(cfg, **more_layers)), analysis(_grow(cfg, **wider))):
        assert bigger.get_num_params_total() > a.get_num_params_total()
        assert bigger.get_num_flops_fwd_total(b, s) > a.get_num_flops_fwd_total(b, s)
        assert bigger.get_num_flops_decode_step(b, s + 1) > a.get_num_flops_decode_step(b, s + 1)
        assert bigger.get_weight_memory_per_gpu() > a.get_weight_memory_per_gpu()
        assert bigger.get_memory_kv_cache_total(b, s) >= a.get_memory_kv_cache_total(b, s)


@HYP
@given(cfg=model_configs(), tp=st.sampled_from([1, 2, 4, 8, 16]))
def test_tp_keeps_totals(cfg, tp):
    if cfg.n_head % tp or cfg.ffn_embed_dim % tp or (cfg.is_moe and cfg.expert_ffn_dim % tp):
        with pytest.raises(ConfigError, match="tp_size"):
            analysis(cfg, parallelism_config=_par(tp_size=tp))
        return
    one, a = analysis(cfg), analysis(cfg, parallelism_config=_par(tp_size=tp))
    assert a.get_num_params_total() == one.get_num_params_total()
    assert a.get_num_flops_fwd_total(2, 33) == one.get_num_flops_fwd_total(2, 33)
    ph = Phase("prefill", 2, 33, 33)
    ops = a.describer.flat_ops(ph)
    for o in ops:  # each operator's executed work is split over at most tp GPUs (replicated ones: not at all)
        executed = o.flops - o.masked_flops  # (flash attention skips the masked part the count includes)
        assert executed / tp <= o.flops_per_gpu * (1 + 1e-12) and o.flops_per_gpu <= executed * (1 + 1e-12)
        assert o.params / tp <= o.params_per_gpu * (1 + 1e-12) or o.params == 0
    total = sum(o.flops - o.masked_flops for o in one.describer.flat_ops(ph))
    assert total <= one.get_num_flops_fwd_total(2, 33) * (1 + 1e-12)
    assert total / tp <= sum(o.flops_per_gpu for o in ops) * (1 + 1e-12) <= total * (1 + 1e-12)
    assert a.get_weight_memory_per_gpu() <= one.get_weight_memory_per_gpu()


# ---------------------------------------------------------------------------
# What the engine cannot describe exactly is refused, not guessed
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("stem,par,fragment", [
    ("meta-llama_Llama-3.1-8B", dict(tp_size=3), "must divide n_head = 32"),
    ("tiiuae_falcon-7b", dict(tp_size=2), "must divide n_head = 71"),
    ("Qwen_Qwen2.5-7B", dict(tp_size=28), "must divide ffn_embed_dim = 18944"),
    ("meta-llama_Llama-3.1-8B", dict(pp_size=33), "pp_size = 33 exceeds num_layers = 32"),
    ("mistralai_Mixtral-8x7B-v0.1", dict(ep_size=3, dp_size=3), "ep_size = 3 must divide moe_num_experts = 8"),
    ("meta-llama_Llama-3.1-8B", dict(ep_size=2, dp_size=2), "has no experts"),
])
def test_layouts_the_engine_cannot_describe_raise(stem, par, fragment):
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        analysis(get_model_config_by_name(stem), parallelism_config=_par(**par))


def test_kv_heads_neither_dividing_nor_divided_by_tp_raise():
    cfg = ModelConfig(name="odd-kv", num_layers=2, n_head=12, num_key_value_heads=6, hidden_dim=768,
                      vocab_size=1000, ffn_embed_dim=3072)
    with pytest.raises(ConfigError, match="num_key_value_heads = 6"):
        analysis(cfg, parallelism_config=_par(tp_size=4))


def test_ffn_width_not_divisible_by_tp_raises():
    cfg = ModelConfig(name="odd-ffn", num_layers=2, n_head=8, hidden_dim=512, vocab_size=1000, ffn_embed_dim=1000 + 4)
    assert analysis(cfg, parallelism_config=_par(tp_size=4))  # 1004 = 4 * 251
    with pytest.raises(ConfigError, match="must divide ffn_embed_dim = 1004"):
        analysis(cfg, parallelism_config=_par(tp_size=8))
    moe = ModelConfig(name="odd-expert", num_layers=2, n_head=8, hidden_dim=512, vocab_size=1000, ffn_embed_dim=2048,
                      moe_num_experts=4, moe_ffn_embed_dim=100)
    with pytest.raises(ConfigError, match="moe_ffn_embed_dim = 100"):
        analysis(moe, parallelism_config=_par(tp_size=8))


@pytest.mark.parametrize("kw,fragment", [(dict(attention_flops="half"), "attention_flops"),
                                         (dict(logits="first"), "logits"),
                                         (dict(mla_attention="naive"), "mla_attention")])
def test_unknown_conventions_raise(kw, fragment):
    with pytest.raises(ConfigError, match=fragment):
        analysis(get_model_config_by_name("gpt2"), **kw)
