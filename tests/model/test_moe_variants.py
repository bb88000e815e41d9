"""MLA / MoE decoder variants of issue 14 (operators/variants.py, hub_families_moe2.py)
checked against the real transformers classes.

Expected values come from the model code, never from our output: each small config
is built by `transformers` on the meta device (parameters summed over
`named_parameters()`, tied weights once) and run for a 16-token prefill under
`torch.utils.flop_counter.FlopCounterMode` with eager attention. torch 2.13 has no
FLOP formula for `aten._grouped_mm` (fused experts): the test supplies the textbook
one, 2 x output elements x reduction length. The gate, the indexer and the MoE output
norm also have hand derivations written out below.
"""

from __future__ import annotations

import copy
import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from llm_analysis.analysis import LLMAnalysis  # noqa: E402
from llm_analysis.config import ModelConfig, ParallelismConfig, get_gpu_config_by_name  # noqa: E402
from llm_analysis.errors import ConfigError  # noqa: E402
from llm_analysis.hub.errors import HubImportError  # noqa: E402
from llm_analysis.hub.mapping import map_hf_config  # noqa: E402

transformers.logging.set_verbosity_error()
GPU = get_gpu_config_by_name("a100-sxm-80gb")
BATCH, SEQ = 1, 16

_MLA = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=32,
            kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12, vocab_size=96,
            intermediate_size=80, moe_intermediate_size=24, n_routed_experts=8, num_experts_per_tok=2,
            n_group=1, topk_group=1, max_position_embeddings=64)
_GQA = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=96,
            intermediate_size=80, moe_intermediate_size=24, num_experts=8, num_experts_per_tok=2,
            max_position_embeddings=64)
_MIMO = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=1, head_dim=16, v_head_dim=8,
             vocab_size=96, intermediate_size=80, moe_intermediate_size=24, n_routed_experts=8,
             num_experts_per_tok=2, sliding_window=8, max_position_embeddings=64)
_INDEXER = dict(index_n_heads=3, index_head_dim=16, index_topk=8)

# (model_type, config keys): small copies that exercise each row's patterns
CASES = {
    "glm4_moe_lite": ("glm4_moe_lite", {**_MLA, "num_hidden_layers": 4, "n_shared_experts": 2,
                                        "mlp_layer_types": ["dense", "dense", "sparse", "sparse"]}),
    # q_proj without a q latent is bias-free whatever attention_bias says (DeepseekV3Attention)
    "glm4_moe_lite_no_q_lora": ("glm4_moe_lite", {**_MLA, "num_hidden_layers": 3, "q_lora_rank": None,
                                                  "attention_bias": True}),
    "deepseek_v3_no_q_lora": ("deepseek_v3", {**_MLA, "num_hidden_layers": 2, "q_lora_rank": None,
                                              "attention_bias": True, "first_k_dense_replace": 1}),
    # mlp_bias is not read by YoutuMLP (Qwen3MLP): bias-free
    "youtu": ("youtu", {k: v for k, v in _MLA.items() if k not in (
        "moe_intermediate_size", "n_routed_experts", "num_experts_per_tok", "n_group", "topk_group")}
        | {"num_hidden_layers": 2, "mlp_bias": True}),
    "axk1": ("axk1", {**_MLA, "num_hidden_layers": 5, "n_shared_experts": 1, "first_k_dense_replace": 1,
                      "moe_layer_freq": 2}),
    "deepseek_v32": ("deepseek_v32", {**_MLA, **_INDEXER, "num_hidden_layers": 3, "n_shared_experts": 1,
                                      "first_k_dense_replace": 1}),
    "glm_moe_dsa": ("glm_moe_dsa", {**_MLA, **_INDEXER, "num_hidden_layers": 3, "n_shared_experts": 1,
                                    "first_k_dense_replace": 2}),
    "afmoe": ("afmoe", {**_GQA, "num_hidden_layers": 4, "num_dense_layers": 2, "num_shared_experts": 2,
                        "sliding_window": 8, "global_attn_every_n_layers": 2}),
    "beam": ("beam", {**_GQA, "num_hidden_layers": 4, "sliding_window": 8, "n_group": 1, "topk_group": 1,
                      "mlp_layer_types": ["dense", "sparse", "dense", "sparse"]}),
    "laguna_per_head": ("laguna", {**_GQA, "num_hidden_layers": 3, "gating": True,
                                   "shared_expert_intermediate_size": 40}),
    "laguna_per_element": ("laguna", {**_GQA, "num_hidden_layers": 2, "gating": "per-element",
                                      "shared_expert_intermediate_size": 40}),
    "minimax_m3_vl_text": ("minimax_m3_vl_text", {
        **{k: v for k, v in _GQA.items() if k not in ("num_experts", "moe_intermediate_size")},
        "num_local_experts": 8, "dense_intermediate_size": 56, "shared_intermediate_size": 40,
        "num_hidden_layers": 3, "mlp_layer_types": ["dense", "sparse", "sparse"]}),
    # MiMo-V2-Flash: sliding layers double the KV heads and hold sinks; values narrower
    # than queries/keys (v_head_dim 8 vs head_dim 16)
    "mimo_v2_flash": ("mimo_v2_flash", {**_MIMO, "num_hidden_layers": 4}),
    "mimo_v2_flash_bias_types": ("mimo_v2_flash", {
        **_MIMO, "num_hidden_layers": 3, "attention_bias": True, "num_key_value_heads": 2,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
        "mlp_layer_types": ["sparse", "dense", "sparse"]}),
}


def _grouped_mm_flops(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * math.prod(out_shape) * a_shape[-1]


def _hf_config(model_type: str, keys: dict):
    return transformers.AutoConfig.for_model(model_type, **copy.deepcopy(keys))


def _real_figures(model_type: str, keys: dict, device: str = "meta"):
    """(parameters, prefill FLOPs) of the transformers causal LM of this config, on
    meta tensors or (routing that needs values: JetMoE) small real ones on the CPU."""
    cfg = _hf_config(model_type, keys)
    dtype = torch.bfloat16 if device == "meta" else torch.float32
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", dtype=dtype)
    params = sum(p.numel() for _, p in model.named_parameters())
    mapping = {getattr(torch.ops.aten, n): _grouped_mm_flops for n in ("_grouped_mm",)
               if hasattr(torch.ops.aten, n)}
    counter = FlopCounterMode(display=False, custom_mapping=mapping)
    ids = torch.arange(BATCH * SEQ, device=device).reshape(BATCH, SEQ) % cfg.vocab_size
    model.eval()
    with torch.no_grad(), counter:
        model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
    return params, counter.get_total_flops()


def _ours(model_type: str, keys: dict) -> ModelConfig:
    d = _hf_config(model_type, keys).to_dict()
    return map_hf_config(d, name=f"test/{model_type}", source="test", what=f"test/{model_type}",
                         trust_remote_code=False, revision=None)


def _engine_figures(cfg: ModelConfig, **par):
    a = LLMAnalysis(cfg, GPU, parallelism_config=ParallelismConfig(**par)) if par else LLMAnalysis(cfg, GPU)
    rows = a.operators("prefill", BATCH, SEQ, per_layer=False)
    flops = sum(r["flops"] for r in rows if r["kind"] in ("matmul", "attention"))
    return int(a.get_num_params_total()), int(flops), rows


@pytest.mark.parametrize("case", sorted(CASES))
def test_params_and_prefill_flops_equal_transformers(case):
    model_type, keys = CASES[case]
    real_params, real_flops = _real_figures(model_type, keys)
    params, flops, _ = _engine_figures(_ours(model_type, keys))
    assert (params, flops) == (real_params, real_flops)


# JetMoE routes with data-dependent shapes (meta tensors cannot run it): a small real copy
JETMOE = dict(hidden_size=64, num_key_value_heads=2, kv_channels=16, intermediate_size=40, vocab_size=96,
              num_local_experts=4, num_experts_per_tok=2, num_hidden_layers=2, max_position_embeddings=64)


@pytest.mark.parametrize("update", [{}, {"num_experts_per_tok": 1}, {"tie_word_embeddings": False}])
def test_jetmoe_attention_experts_equal_transformers(update):
    torch.manual_seed(0)
    keys = {**JETMOE, **update}
    real_params, real_flops = _real_figures("jetmoe", keys, device="cpu")
    params, flops, _ = _engine_figures(_ours("jetmoe", keys))
    assert (params, flops) == (real_params, real_flops)


# LongCat-Flash: two MLA sublayers and a shortcut MoE per layer. Its expert loop needs
# real values; with zero_expert_num = 0 every pick is an FFN expert (deterministic FLOPs)
LONGCAT = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=16,
               qk_nope_head_dim=8, qk_rope_head_dim=8, qk_head_dim=16, v_head_dim=12, head_dim=8,
               vocab_size=96, ffn_hidden_size=80, expert_ffn_hidden_size=24, n_routed_experts=6, moe_topk=2,
               num_layers=2, max_position_embeddings=64)


@pytest.mark.parametrize("zero_experts", [0, 3])
def test_longcat_equals_transformers(zero_experts):
    torch.manual_seed(0)
    keys = {**LONGCAT, "zero_expert_num": zero_experts}
    real_params, real_flops = _real_figures("longcat_flash", keys, device="cpu")
    params, flops, _ = _engine_figures(_ours("longcat_flash", keys))
    assert params == real_params
    if zero_experts == 0:
        assert flops == real_flops


def test_zero_compute_experts_by_hand():
    """Z identity experts beside E FFN experts: the router gains h*Z weights and 2*t*h*Z
    FLOPs; the routed FFN FLOPs scale by E/(E+Z) (uniform routing: k*E/(E+Z) of a
    token's k picks are FFN experts); the unused gate/up weights are Z*2*h*f."""
    base = dict(name="z", num_layers=1, n_head=4, hidden_dim=64, vocab_size=96, ffn_embed_dim=80,
                moe_num_experts=6, moe_top_k=2, moe_ffn_embed_dim=24, mlp_gated_linear_units=True)
    plain = _engine_figures(ModelConfig(**base))
    zero = _engine_figures(ModelConfig(**base, moe_zero_experts=3, moe_zero_experts_hold_weights=True))
    h, f, e, z, k, t = 64, 24, 6, 3, 2, SEQ
    assert zero[0] - plain[0] == h * z + z * 2 * h * f
    routed = 2 * t * k * 3 * h * f  # gate, up and down of k experts per token
    assert zero[1] - plain[1] == pytest.approx(2 * t * h * z + routed * (e / (e + z) - 1))


def test_attention_experts_by_hand():
    """E attention experts, top-k: q and o hold E * h * (kv_heads*d) weights each (plus
    o's bias of h), a router h*E; the FLOPs are those of q/o with n_head = k*kv_heads
    heads, plus 2*t*h*E for the router."""
    base = dict(name="a", num_layers=1, n_head=4, num_key_value_heads=2, head_dim=16, hidden_dim=64,
                vocab_size=96, ffn_embed_dim=80, moe_num_experts=4, moe_top_k=2, attn_out_bias=True)
    plain = _engine_figures(ModelConfig(**base))
    moa = _engine_figures(ModelConfig(**base, attn_experts=4))
    h, e, kvd, t = 64, 4, 2 * 16, SEQ
    assert moa[0] - plain[0] == 2 * (e * h * kvd) - 2 * (h * 4 * 16) + h * e
    assert moa[1] - plain[1] == 2 * t * h * e


def _op(rows, name):
    return [r for r in rows if r["name"] == name]


def test_attention_output_gate_by_hand():
    """Per-element gate: W_g [hidden x heads*head_dim] -> 2*t*h*(heads*head_dim) FLOPs,
    h*heads*head_dim params; per-head: [hidden x heads]; Beam adds one bias per head."""
    base = dict(name="g", num_layers=2, n_head=4, num_key_value_heads=2, hidden_dim=64, head_dim=16,
                vocab_size=96, ffn_embed_dim=80)
    plain = _engine_figures(ModelConfig(**base))
    element = _engine_figures(ModelConfig(**base, attn_output_gate="per_element",
                                          attn_output_gate_head_bias=True))
    head = _engine_figures(ModelConfig(**base, attn_output_gate="per_head"))
    t, h, layers = BATCH * SEQ, 64, 2
    assert element[0] - plain[0] == layers * (h * 4 * 16 + 4)
    assert element[1] - plain[1] == layers * 2 * t * h * 4 * 16
    assert head[0] - plain[0] == layers * h * 4
    assert head[1] - plain[1] == layers * 2 * t * h * 4


def test_indexer_by_hand():
    """DeepSeek-V3.2 indexer per layer: wq_b [q_lora x H*D], wk [h x D], LayerNorm(D)
    with bias, weights_proj [h x H]; the scores of an eager prefill cost
    2*s*s*H*D (q.k) + 2*s*s*H (weighting by head) FLOPs."""
    base = dict(name="i", num_layers=3, n_head=4, hidden_dim=64, vocab_size=96, ffn_embed_dim=80,
                q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12)
    plain = _engine_figures(ModelConfig(**base))
    H, D, q, h, s = 3, 16, 32, 64, SEQ
    idx = _engine_figures(ModelConfig(**base, index_n_heads=H, index_head_dim=D, index_topk=8))
    assert idx[0] - plain[0] == 3 * (q * H * D + h * D + 2 * D + h * H)
    per_layer = 2 * s * (q * H * D + h * D + h * H) + 2 * s * s * H * D + 2 * s * s * H
    assert idx[1] - plain[1] == 3 * per_layer


def test_indexer_top_k_bounds_decode_attention_and_caches_its_keys():
    """A decode step at context 100 with index_topk 8 attends to 8 keys (the sparse
    attention), while the indexer scores all 100; the cache holds one index_head_dim
    key per token per layer on top of the MLA latent."""
    base = dict(name="i", num_layers=1, n_head=4, hidden_dim=64, vocab_size=96, ffn_embed_dim=80,
                q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12,
                index_n_heads=3, index_head_dim=16, index_topk=8)
    a = LLMAnalysis(ModelConfig(**base), GPU)
    from llm_analysis.model import Phase
    kind = next(iter(a.describer.layer_groups))
    ops = {o.name: o for o in a.describer.layer_ops(Phase("decode", 1, 1, 100), kind)}
    assert ops["attention_core"].flops == 2 * 4 * 8 * (16 + 12)
    assert ops["index_scores"].flops == 2 * 100 * 3 * (16 + 1)
    assert a.describer.kv_cache_elems_per_token_per_gpu(kind) == 16 + 8 + 16
    # cache reads: the core its 8 latents (16 + 8 wide), the indexer all 100 keys (16 wide)
    kv_bytes = a.describer.kv_bytes
    assert ops["attention_core"].kv_cache_bytes_read_per_gpu == 8 * (16 + 8) * kv_bytes
    assert ops["index_scores"].kv_cache_bytes_read_per_gpu == 100 * 16 * kv_bytes


def test_moe_output_norm_only_on_moe_layers():
    base = dict(name="n", num_layers=4, n_head=4, hidden_dim=64, vocab_size=96, ffn_embed_dim=80,
                moe_num_experts=4, moe_top_k=2, moe_first_dense_layers=1, norm_type="rmsnorm",
                norm_bias=False)
    plain = _engine_figures(ModelConfig(**base))
    normed = _engine_figures(ModelConfig(**base, moe_output_norm=True))
    assert normed[0] - plain[0] == 3 * 64  # one hidden-wide RMSNorm weight on 3 MoE layers


@pytest.mark.parametrize("update, fragment", [
    (dict(index_n_heads=3), "set all of them or none"),
    (dict(index_n_heads=3, index_head_dim=16, index_topk=8, q_lora_rank=None), "q_lora_rank"),
    (dict(index_n_heads=0, index_head_dim=16, index_topk=8), "index_n_heads"),
    (dict(attn_output_gate_head_bias=True), "attn_output_gate"),
    (dict(moe_zero_experts=2), "moe_zero_experts"),
    (dict(kv_lora_rank=None, attn_experts=4, num_key_value_heads=4, moe_num_experts=4, moe_top_k=2),
     "attn_experts"),
])
def test_indexer_fields_are_validated(update, fragment):
    base = dict(name="i", num_layers=1, n_head=4, hidden_dim=64, vocab_size=96, q_lora_rank=32,
                kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12)
    with pytest.raises(ConfigError, match=fragment):
        ModelConfig(**{**base, **update})


def test_indexer_under_context_parallelism_is_refused():
    cfg = ModelConfig(name="i", num_layers=1, n_head=4, hidden_dim=64, vocab_size=96, q_lora_rank=32,
                      kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12,
                      index_n_heads=3, index_head_dim=16, index_topk=8)
    with pytest.raises(ConfigError, match="cp_size = 2"):
        LLMAnalysis(cfg, GPU, parallelism_config=ParallelismConfig(cp_size=2))


@pytest.mark.parametrize("model_type, keys, fragment", [
    # shared indexers are described (tests/hub/test_glm_shared_indexer.py); a first layer
    # reusing a top-k no earlier layer selected is not
    ("glm_moe_dsa", {**_MLA, **_INDEXER, "num_hidden_layers": 3, "first_k_dense_replace": 1,
                     "indexer_types": ["shared", "full", "full"]},
     "indexer_types"),
    ("laguna", {**_GQA, "num_hidden_layers": 2, "num_attention_heads_per_layer": [4, 2]},
     "num_attention_heads_per_layer"),
    ("jetmoe", {**JETMOE, "num_local_experts": 1, "num_experts_per_tok": 1}, "num_local_experts=1"),
    ("minimax_m3_vl_text", {**_GQA, "num_hidden_layers": 2, "num_local_experts": 8,
                            "layer_types": ["full_attention", "minimax_m3_sparse"]}, "minimax_m3_sparse"),
])
def test_undescribed_variants_are_refused(model_type, keys, fragment):
    with pytest.raises(HubImportError, match=fragment):
        _ours(model_type, keys)


@pytest.mark.parametrize("model_type, feature", [
    # (llama4_text left this list: its decoder is described, tests/hub/test_llama4_decoder.py)
    ("deepseek_v4", "hyper-connections"), ("hy_v4", "hyper-connections"), ("dots3_note_text", "per_layer_config"),
    ("axk2", "gated RMSNorms"),
    ("inkling_text", "convolutions"), ("inkling2_text", "convolutions"),
])
def test_unmodelled_types_refuse_naming_the_feature(model_type, feature):
    from llm_analysis.errors import UnsupportedArchitectureError
    from llm_analysis.hub.families.table import SUPPORTED_MODEL_TYPES
    with pytest.raises(UnsupportedArchitectureError, match=feature):
        _ours(model_type, {})
    assert model_type not in SUPPORTED_MODEL_TYPES


def _indexer_ops(phase, conventions=None):
    """The operators of one DSA layer (MLA with a 3-head, 16-wide indexer, top-8) at `phase`."""
    from llm_analysis.model import Phase  # noqa: F401  (phase built by the caller)
    base = dict(name="i", num_layers=1, n_head=4, hidden_dim=64, vocab_size=96, ffn_embed_dim=80,
                q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12,
                index_n_heads=3, index_head_dim=16, index_topk=8)
    a = LLMAnalysis(ModelConfig(**base), GPU)
    if conventions is not None:
        a = a.with_conventions(a.conventions_named(conventions))
    d = a.describer
    kind = next(iter(d.layer_groups))
    return d, kind, {o.name: o for o in d.layer_ops(phase, kind)}


def test_indexer_top_k_is_its_own_pass_over_fp32_logits():
    """Decode at context 100 (batch 2): the scoring writes one fp32 logit per cached key, the top-k
    pass reads them back and writes 8 int32 indices per sequence; at context 5 (< top-8) it keeps all
    5. Comparisons are not FLOPs: the new pass adds no FLOPs and no parameters."""
    from llm_analysis.model import Phase
    _, _, ops = _indexer_ops(Phase("decode", 2, 1, 100))
    assert ops["index_scores"].bytes_written_per_gpu == 2 * 100 * 4
    topk = ops["index_topk"]
    assert topk.bytes_read_per_gpu == 2 * 100 * 4
    assert topk.bytes_written_per_gpu == 2 * 8 * 4
    assert (topk.flops, topk.flops_per_gpu, topk.params) == (0, 0, 0)
    assert topk.kind == "attention"  # a sequence operator: its work follows each sequence's context
    _, _, short = _indexer_ops(Phase("decode", 2, 1, 5))
    assert short["index_topk"].bytes_written_per_gpu == 2 * 5 * 4


def test_indexer_top_k_of_a_causal_prefill():
    """A 16-token prefill under the serving (causal) conventions: query i (1-based) scores i keys
    (136 logits) and keeps min(i, 8) of them: 1+2+...+8 + 8*8 = 100 indices."""
    from llm_analysis.model import Phase
    _, _, ops = _indexer_ops(Phase("prefill", 1, 16, 16), conventions="serving")
    assert ops["index_scores"].bytes_written_per_gpu == 136 * 4
    assert ops["index_topk"].bytes_read_per_gpu == 136 * 4
    assert ops["index_topk"].bytes_written_per_gpu == (36 + 64) * 4


def test_indexer_q_quantisation_and_key_cache_write():
    """The indexer's q (3 heads x 16 per token) leaves in FP8 with one fp32 scale per 128 elements;
    its key (16 per token) is written into the indexer cache by a pass of its own, so the attention
    core writes only its latent (16 + 8): together they write the whole cache entry once."""
    from llm_analysis.model import Phase
    d, kind, ops = _indexer_ops(Phase("decode", 4, 1, 50))
    t, a, kv = 4, d.a_bytes, d.kv_bytes
    q = ops["index_q_quant"]
    assert q.bytes_read_per_gpu == t * 3 * 16 * a
    assert q.bytes_written_per_gpu == t * 3 * 16 * 1 + t * 3 * 16 / 128 * 4
    k = ops["index_k_cache_write"]
    assert (k.bytes_read_per_gpu, k.bytes_written_per_gpu) == (t * 16 * a, t * 16 * kv)
    core = ops["attention_core"]
    out = t * 4 * 12 * a  # 4 heads x v_head_dim 12
    assert core.bytes_written_per_gpu == out + t * (16 + 8) * kv
    assert core.bytes_written_per_gpu - out + k.bytes_written_per_gpu == \
        t * d.kv_cache_elems_per_token_per_gpu(kind) * kv
    assert all((o.flops, o.params) == (0, 0) for o in (q, k))


_ACROSS = dict(name="q", num_layers=2, n_head=4, num_key_value_heads=2, hidden_dim=64, head_dim=16,
               vocab_size=96, ffn_embed_dim=80, qk_norm=True, qk_norm_per_head=True)


def test_qk_norm_across_heads_all_reduces_the_sums_of_squares_under_tp():
    """MiniMax-M2's q/k RMSNorm spans all heads (RMSNorm(n_head*head_dim)); with tp = 2 each rank
    holds 2 of the 4 query heads, so before scaling the ranks all-reduce each token's two fp32 sums
    of squares (q's and k's): 6 tokens -> 6 x 2 x 4 = 48 bytes per GPU, once per layer. One rank
    needs none; the counts (parameters, FLOPs) are those of the same norms per head."""
    from llm_analysis.model import Phase
    across = ModelConfig(**_ACROSS, qk_norm_across_heads=True)
    a = LLMAnalysis(across, GPU, parallelism_config=ParallelismConfig(tp_size=2))
    kind = next(iter(a.describer.layer_groups))
    ops = [o for o in a.describer.layer_ops(Phase("decode", 6, 1, 40), kind) if o.name == "tp_all_reduce_qk_norm"]
    assert len(ops) == 1
    op = ops[0]
    assert (op.collective, op.comm_group, op.comm_group_size, op.comm_bytes_per_gpu) == ("all_reduce", "tp", 2, 48)
    one = LLMAnalysis(across, GPU)
    assert not [o for o in one.describer.layer_ops(Phase("decode", 6, 1, 40), kind)
                if o.name == "tp_all_reduce_qk_norm"]
    per_head = _engine_figures(ModelConfig(**_ACROSS), tp_size=2)
    assert _engine_figures(across, tp_size=2)[:2] == per_head[:2]


def test_qk_norm_across_heads_needs_norms_spanning_the_heads():
    with pytest.raises(ValueError, match="qk_norm_across_heads"):
        ModelConfig(**{**_ACROSS, "qk_norm_per_head": False}, qk_norm_across_heads=True)
