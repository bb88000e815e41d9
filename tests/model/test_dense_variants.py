"""Dense decoder variants (issue 14): Apertus, BitNet, CTRL, DiffLlama, Doge,
GPT-NeoX-Japanese, Moshi, Gemma 4 (per-layer head widths, per-layer embeddings).

Expected values come from independent sources:
- the real transformers classes built from small, non-default configs on the meta
  device: parameters summed per module (tied weights once) and prefill FLOPs counted
  by `FlopCounterMode` (llm_analysis.exact.truth.architecture_truth, torch only);
- hand derivations of the new operators, written out below;
- refusals: configs with features the rows do not describe raise UnsupportedArchitecture.
"""

from __future__ import annotations

import logging

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, ParallelismConfig, get_gpu_config_by_name
from llm_analysis.errors import ConfigError, UnsupportedArchitectureError
from llm_analysis.hub.mapping import map_hf_config
from llm_analysis.model import Phase, layer_groups

GPU = get_gpu_config_by_name("a100-sxm-80gb")
_SMALL = dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=3, intermediate_size=96,
              vocab_size=128, max_position_embeddings=64)

# small configs that differ from the defaults where the rows read something
CONFIGS = {
    "apertus": dict(_SMALL, model_type="apertus", num_key_value_heads=2, attention_bias=True),
    "apertus-silu": dict(_SMALL, model_type="apertus", hidden_act="silu", tie_word_embeddings=True),
    "bitnet": dict(_SMALL, model_type="bitnet", num_key_value_heads=1),
    "diffllama": dict(_SMALL, model_type="diffllama", num_key_value_heads=2, head_dim=8,
                      attention_bias=True),
    "doge": dict(_SMALL, model_type="doge", num_key_value_heads=2, attention_bias=True, mlp_bias=True),
    "gpt_neox_japanese": dict(_SMALL, model_type="gpt_neox_japanese", intermediate_multiple_size=3),
    "moshi": dict(_SMALL, model_type="moshi", num_key_value_heads=4, head_dim=16, ffn_dim=192),
    "ctrl": dict(model_type="ctrl", n_embd=64, n_head=4, n_layer=3, dff=96, vocab_size=128,
                 n_positions=32),
    "gemma4_text": dict(_SMALL, model_type="gemma4_text", num_hidden_layers=6, num_key_value_heads=2,
                        head_dim=16, sliding_window=8, hidden_size_per_layer_input=8,
                        vocab_size_per_layer_input=100, global_head_dim=32),
    "gemma4_text-no-ple": dict(_SMALL, model_type="gemma4_text", num_hidden_layers=4,
                               num_key_value_heads=4, head_dim=16, sliding_window=8,
                               hidden_size_per_layer_input=0, global_head_dim=8,
                               layer_types=["sliding_attention", "full_attention"] * 2),
    "gemma4_text-kv-shared": dict(_SMALL, model_type="gemma4_text", num_hidden_layers=6,
                                  num_key_value_heads=2, head_dim=16, sliding_window=8,
                                  hidden_size_per_layer_input=8, vocab_size_per_layer_input=100,
                                  global_head_dim=32, num_kv_shared_layers=2, use_double_wide_mlp=True,
                                  layer_types=["sliding_attention", "full_attention"] * 3),
    # once refused (test_unmodelled_features_are_refused), now described: keys reused as values in
    # the full-attention layers, and a per-layer KV head count
    "gemma4_text-k-eq-v": dict(_SMALL, model_type="gemma4_text", num_hidden_layers=6, num_key_value_heads=2,
                               head_dim=16, sliding_window=8, hidden_size_per_layer_input=0,
                               global_head_dim=32, attention_k_eq_v=True, num_global_key_value_heads=1),
    "gemma4_text-kv-override": dict(_SMALL, model_type="gemma4_text", num_hidden_layers=6, num_key_value_heads=2,
                                    head_dim=16, sliding_window=8, hidden_size_per_layer_input=8,
                                    vocab_size_per_layer_input=100, global_head_dim=32,
                                    per_layer_config={"05": {"num_key_value_heads": 1}}),
    "gemma3n_text": dict(_SMALL, model_type="gemma3n_text", num_hidden_layers=6, num_key_value_heads=2,
                         head_dim=16, sliding_window=8, intermediate_size=[96, 96, 128, 128, 96, 64],
                         num_kv_shared_layers=2, altup_num_inputs=3, laurel_rank=8,
                         hidden_size_per_layer_input=8, vocab_size_per_layer_input=100,
                         activation_sparsity_pattern=[0.95, 0.95, 0.0, 0.0, 0.0, 0.0],
                         layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2),
    "gemma4_unified_text": dict(_SMALL, model_type="gemma4_unified_text", num_hidden_layers=6,
                                num_key_value_heads=2, head_dim=16, sliding_window=8,
                                global_head_dim=24),
}


def _import(raw: dict, name: str = "test") -> ModelConfig:
    logging.disable(logging.WARNING)
    try:
        return map_hf_config(raw, name=name, source="test", what=name, trust_remote_code=False,
                             revision=None)
    finally:
        logging.disable(logging.NOTSET)


@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_params_and_prefill_flops_match_transformers(key):
    pytest.importorskip("torch")
    from llm_analysis.exact.compare import compare
    from llm_analysis.exact.truth import architecture_truth

    truth = architecture_truth(dict(CONFIGS[key]))
    cfg = _import(truth["config"], key)
    verdict = compare(LLMAnalysis(cfg, GPU), truth)
    assert verdict["params_exact"], (verdict["engine_params"], verdict["model_params"],
                                     verdict["param_differences"])
    assert verdict["flops_exact"], (verdict["engine_flops"], verdict["model_flops"])


# ---------------------------------------------------------------------------
# hand derivations of the new operators (tiny Llama-shaped base, untied head)
# ---------------------------------------------------------------------------
H, HEADS, F, V, L = 32, 4, 48, 100, 4


def _cfg(**kw) -> ModelConfig:
    base = dict(name="t", num_layers=L, n_head=HEADS, hidden_dim=H, vocab_size=V, ffn_embed_dim=F,
                mlp_gated_linear_units=True, norm_type="rmsnorm", norm_bias=False,
                position_embedding_type="rotary", tie_word_embeddings=False)
    return ModelConfig(**{**base, **kw})


def _params(cfg: ModelConfig, **kw) -> int:
    return int(LLMAnalysis(cfg, GPU, **kw).get_num_params_total())


def _prefill_flops(cfg: ModelConfig, seq: int = 10) -> int:
    rows = LLMAnalysis(cfg, GPU).operators("prefill", 1, seq, per_layer=False)
    return int(sum(r["flops"] for r in rows if r["kind"] in ("matmul", "attention")))


def _llama_params(head_dims, ffn_dims) -> int:
    """Embedding + head (2*V*H), final norm H; per layer q/k/v/o (MHA) 4*H*heads*d,
    gated MLP 3*H*f, two norms 2*H."""
    layers = sum(4 * H * HEADS * d + 3 * H * f + 2 * H for d, f in zip(head_dims, ffn_dims))
    return 2 * V * H + H + layers


def test_per_layer_widths_by_hand():
    heads, ffns = [8, 16, 8, 16], [48, 48, 96, 96]
    cfg = _cfg(layer_head_dims=heads, layer_ffn_dims=ffns)
    assert _params(cfg) == _llama_params(heads, ffns)
    # equal shapes share a kind: (8, 48), (16, 48), (8, 96), (16, 96) once each
    assert sorted(layer_groups(cfg).values()) == [1, 1, 1, 1]
    two = _cfg(layer_head_dims=[8, 16, 8, 16])
    assert sorted(layer_groups(two).values()) == [2, 2]
    # prefill at s tokens: matmuls 2*s*params(matmul) per layer, attention core
    # 2*heads*s*s*(d+d), head 2*s*H*V
    s = 10
    mm = sum(2 * s * (4 * H * HEADS * d + 3 * H * f) for d, f in zip(heads, ffns))
    core = sum(2 * HEADS * s * s * 2 * d for d in heads)
    assert _prefill_flops(cfg, s) == mm + core + 2 * s * H * V


def test_per_layer_widths_split_over_pipeline_stages_and_tp():
    cfg = _cfg(layer_head_dims=[8, 16, 8, 16], layer_ffn_dims=[48, 48, 96, 96])
    total = _params(cfg)
    a = LLMAnalysis(cfg, GPU, parallelism_config=ParallelismConfig(tp_size=2, pp_size=2))
    assert int(a.get_num_params_total()) == total


def test_per_layer_input_embeddings_by_hand():
    d, rows = 6, 50
    cfg = _cfg(per_layer_input_dim=d, per_layer_input_vocab_size=rows)
    base = _llama_params([H // HEADS] * L, [F] * L)
    # table rows x (L*d), projection H x (L*d), its norm d; per layer gate H*d,
    # projection d*H, norm H
    assert _params(cfg) == base + rows * L * d + H * L * d + d + L * (2 * H * d + H)
    s = 10
    extra = 2 * s * H * L * d + L * (2 * 2 * s * H * d)
    assert _prefill_flops(cfg, s) == _prefill_flops(_cfg(), s) + extra


def test_dense_variant_fields_by_hand():
    base = _params(_cfg())
    hd = H // HEADS
    assert _params(_cfg(mlp_act_params=2)) == base + 2 * L
    assert _params(_cfg(sub_norms=True)) == base + L * (H + F)  # [heads*d] and [ffn] norms
    assert _params(_cfg(differential_attention=True)) == base + L * 4 * hd
    assert _params(_cfg(residual_scale_vectors=2)) == base + L * 2 * H
    assert _params(_cfg(embedding_vocab_size=V + 1)) == base + H
    assert _params(_cfg(last_layer_attn_out_bias=True)) == base + H
    kv = 2
    assert (_params(_cfg(attn_dynamic_mask=True, num_key_value_heads=kv))
            == _params(_cfg(num_key_value_heads=kv)) + L * (kv * hd * kv + kv))


def test_altup_and_laurel_by_hand():
    n, r, s = 3, 5, 10
    base = _params(_cfg())
    # model: 2 x (n-1) [H x H] stream projections; per layer: router norm H, router H*n,
    # prediction coefs n*n^2, correction coefs n*n, output scale H; LAuReL H*r + r*H + norm H
    per_layer = H + H * n + n ** 3 + n * n + H + 2 * H * r + H
    cfg = _cfg(altup_num_inputs=n, laurel_rank=r)
    assert _params(cfg) == base + 2 * (n - 1) * H * H + L * per_layer
    # FLOPs: the projections 2*s*H*H each; per layer the router twice 2*(2s)*H*n, the
    # coefficients 2*s*n*n^2 and 2*s*n*n, the mix 2*s*H*n*n, LAuReL 2*(2*s*H*r)
    layer = 2 * 2 * s * H * n + 2 * s * n ** 3 + 2 * s * n * n + 2 * s * H * n * n + 2 * 2 * s * H * r
    assert _prefill_flops(cfg, s) == _prefill_flops(_cfg(), s) + 2 * (n - 1) * 2 * s * H * H + L * layer


def test_kv_shared_layers_have_no_kv_projections_and_no_cache():
    kv, hd, shared, s = 2, H // HEADS, 3, 10
    cfg, plain = _cfg(kv_shared_layers=shared, num_key_value_heads=kv), _cfg(num_key_value_heads=kv)
    assert _params(cfg) == _params(plain) - shared * 2 * H * kv * hd
    assert _prefill_flops(cfg, s) == _prefill_flops(plain, s) - shared * 2 * 2 * s * H * kv * hd
    a, b = LLMAnalysis(cfg, GPU), LLMAnalysis(plain, GPU)
    # the cache holds only the layers that make their own keys and values
    assert a.get_memory_kv_cache_total(1, 100) * L == b.get_memory_kv_cache_total(1, 100) * (L - shared)
    assert sum(n for k, n in a.describer.layer_groups.items() if k.kv_shared) == shared
    # a decode step still reads the reused keys and values
    step = Phase("decode", batch=1, q_len=1, kv_len=50)
    kind = next(k for k in a.describer.layer_groups if k.kv_shared)
    core = next(o for o in a.describer.layer_ops(step, kind) if o.kind == "attention")
    assert core.kv_cache_bytes_read_per_gpu == 50 * 2 * kv * hd * a.describer.kv_bytes


def test_differential_attention_runs_the_core_twice():
    s = 10
    core = 2 * HEADS * s * s * 2 * (H // HEADS)  # QK^T and AV of one pass, per layer
    assert _prefill_flops(_cfg(differential_attention=True), s) == _prefill_flops(_cfg(), s) + L * core


def test_dynamic_mask_projects_every_cached_value_in_decode():
    kv, hd = 2, H // HEADS
    cfg = _cfg(attn_dynamic_mask=True, num_key_value_heads=kv)
    a = LLMAnalysis(cfg, GPU)
    ops = a.describer.layer_ops(Phase("decode", batch=1, q_len=1, kv_len=20), next(iter(a.describer.layer_groups)))
    dt = next(o for o in ops if o.name == "dt_proj")
    assert dt.flops == 2 * 20 * kv * hd * kv


@pytest.mark.parametrize("kw, field", [
    (dict(layer_head_dims=[8, 8]), "layer_head_dims"),
    (dict(layer_ffn_dims=[48, 0, 48, 48]), "layer_ffn_dims"),
    (dict(moe_num_experts=4, moe_top_k=2, sub_norms=True), "sub_norms"),
    (dict(embedding_vocab_size=V + 1, tie_word_embeddings=True), "embedding_vocab_size"),
    (dict(mlp_act_params=-1), "mlp_act_params"),
])
def test_invalid_fields_name_the_field(kw, field):
    with pytest.raises(ConfigError, match=field):
        _cfg(**kw)


def test_tp_must_divide_every_per_layer_ffn_width():
    cfg = _cfg(layer_ffn_dims=[48, 50, 48, 50])
    with pytest.raises(ConfigError, match="layer_ffn_dims"):
        LLMAnalysis(cfg, GPU, parallelism_config=ParallelismConfig(tp_size=4))


# ---------------------------------------------------------------------------
# refusals
# ---------------------------------------------------------------------------
_G4 = CONFIGS["gemma4_text"]


@pytest.mark.parametrize("raw, words", [
    (dict(_G4, use_bidirectional_attention="all"), "bidirectional"),
    (dict(_G4, per_layer_config={"02": {"intermediate_size": 128}}), "intermediate_size"),
    (dict(CONFIGS["doge"], is_moe=True), "CDMoE"),
    (dict(_SMALL, model_type="gemma3n_text", altup_num_inputs=1), "AltUp"),
    (dict(_SMALL, model_type="hrm_text"), "H_cycles"),
])
def test_unmodelled_features_are_refused(raw, words):
    with pytest.raises(UnsupportedArchitectureError, match=words):
        _import(raw)


def test_refused_rows_are_not_listed_as_supported():
    from llm_analysis.hub.entry import SUPPORTED_MODEL_TYPES
    assert "gemma4_text" in SUPPORTED_MODEL_TYPES and "apertus" in SUPPORTED_MODEL_TYPES
    assert "hrm_text" not in SUPPORTED_MODEL_TYPES and "git" not in SUPPORTED_MODEL_TYPES


def test_raw_configs_without_the_attention_pattern_are_refused():
    """Without transformers' config class the pattern the class derives is unknown."""
    from llm_analysis.errors import HubImportError
    from llm_analysis.hub.families.table import FAMILIES
    from llm_analysis.hub.source import Src
    from llm_analysis.hub.spec import read_family
    raw = {k: v for k, v in CONFIGS["gemma3n_text"].items() if k != "layer_types"}
    with pytest.raises(HubImportError, match="layer_types"):
        read_family(FAMILIES["gemma3n_text"], Src(None, raw), "raw gemma3n")


@pytest.mark.parametrize("pp", [2, 3, 4])
def test_kv_sharing_and_altup_split_over_pipeline_stages(pp):
    cfg = _cfg(kv_shared_layers=3, altup_num_inputs=3, laurel_rank=4, per_layer_input_dim=4,
               layer_head_dims=[8, 16, 8, 16])
    a = LLMAnalysis(cfg, GPU, parallelism_config=ParallelismConfig(pp_size=pp))
    stages = a.describer.stage_groups
    assert sum(sum(g.values()) for g in stages) == L
    assert sum(n for g in stages for k, n in g.items() if k.kv_shared) == 3
    assert int(a.get_num_params_total()) == _params(cfg)


def test_kv_sharing_keeps_layer_counting_independent_of_depth():
    n = 100_000
    cfg = _cfg(num_layers=n, kv_shared_layers=n // 3, sliding_window=64,
               layer_types=["sliding_attention", "full_attention"] * (n // 2))
    groups = layer_groups(cfg)
    assert sum(groups.values()) == n and len(groups) == 4
    assert sum(c for k, c in groups.items() if k.kv_shared) == n // 3


def test_per_layer_widths_have_the_sanity_limit_of_their_model_wide_fields():
    """layer_ffn_dims / layer_head_dims are capped like ffn_embed_dim / head_dim
    (options.MAX_DIM, README 'Input limits'), not only checked for sign."""
    from llm_analysis.config import ModelConfig
    from llm_analysis.errors import ConfigError
    from llm_analysis.schema.options import MAX_DIM
    for field in ("layer_ffn_dims", "layer_head_dims"):
        with pytest.raises(ConfigError, match=field):
            ModelConfig(name="x", num_layers=2, n_head=4, hidden_dim=64, vocab_size=100,
                        **{field: [MAX_DIM + 1, 16]})
