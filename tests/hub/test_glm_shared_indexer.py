"""GLM-5.2's shared indexers (IndexCache, arXiv 2603.12201; transformers 5.23 GlmMoeDsaAttention):
`indexer_types` names each layer "full" (it runs its own lightning indexer and selects its
index_topk keys) or "shared" (it builds no indexer and attends with the top-k of the previous
full layer). A shared layer therefore holds no indexer weights, spends no indexer FLOPs and
caches no indexer keys, while its sparse attention still reads index_topk keys.

Expected values: transformers on the meta device for a small copy (parameters and an eager
prefill's FLOPs under FlopCounterMode), and hand derivations from the config fields written
out in each test.
"""

from __future__ import annotations

import copy
import math

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, get_gpu_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.hub.mapping import map_hf_config
from llm_analysis.model import Phase

GPU = get_gpu_config_by_name("a100-sxm-80gb")
BATCH, SEQ = 1, 16

# a small GLM-5.2: 5 layers, the first dense, indexers on layers 0 and 3
HIDDEN, Q_LORA, KV_LORA, ROPE, NOPE, V, HEADS = 64, 32, 16, 8, 8, 12, 4
INDEX_HEADS, INDEX_DIM, TOPK = 3, 16, 8
KINDS = ["full", "shared", "shared", "full", "shared"]
GLM52 = dict(hidden_size=HIDDEN, num_attention_heads=HEADS, num_key_value_heads=HEADS, q_lora_rank=Q_LORA,
             kv_lora_rank=KV_LORA, qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE, v_head_dim=V, vocab_size=96,
             intermediate_size=80, moe_intermediate_size=24, n_routed_experts=8, num_experts_per_tok=2,
             n_shared_experts=1, n_group=1, topk_group=1, max_position_embeddings=64, num_hidden_layers=5,
             first_k_dense_replace=1, index_n_heads=INDEX_HEADS, index_head_dim=INDEX_DIM, index_topk=TOPK,
             indexer_types=KINDS)
FULL, SHARED = KINDS.count("full"), KINDS.count("shared")


def _ours(keys: dict) -> ModelConfig:
    return map_hf_config(copy.deepcopy(keys) | {"model_type": "glm_moe_dsa"}, name="test/glm52", source="test",
                         what="test/glm52", trust_remote_code=False, revision=None)


def _indexer_params_by_hand() -> int:
    """One indexer: wq_b [q_lora x heads*dim], wk [hidden x dim], k_norm LayerNorm(dim) with
    weight and bias, weights_proj [hidden x heads]; no biases on the projections."""
    return Q_LORA * INDEX_HEADS * INDEX_DIM + HIDDEN * INDEX_DIM + 2 * INDEX_DIM + HIDDEN * INDEX_HEADS


def _indexer_prefill_flops_by_hand(s: int) -> int:
    """One indexer over an eager prefill of s tokens: the three projections (2 x tokens x in x
    out), q . k for every head over the whole s x s matrix, and the weighting of the heads'
    scores (one multiply-add per head per pair)."""
    projections = 2 * s * (Q_LORA * INDEX_HEADS * INDEX_DIM + HIDDEN * INDEX_DIM + HIDDEN * INDEX_HEADS)
    return projections + 2 * s * s * INDEX_HEADS * INDEX_DIM + 2 * s * s * INDEX_HEADS


def test_family_maps_indexer_types_to_layer_indexer():
    cfg = _ours(GLM52)
    assert cfg.layer_indexer == [k == "full" for k in KINDS]
    assert [cfg.layer_has_indexer(i) for i in range(5)] == [True, False, False, True, False]


def test_params_and_prefill_flops_equal_transformers():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode
    transformers.logging.set_verbosity_error()
    hf = transformers.AutoConfig.for_model("glm_moe_dsa", **copy.deepcopy(GLM52))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf, attn_implementation="eager", dtype=torch.bfloat16)
    # the layers transformers builds without an indexer are the shared ones
    assert [layer.self_attn.indexer is not None for layer in model.model.layers] == [k == "full" for k in KINDS]
    real_params = sum(p.numel() for p in model.parameters())
    # torch has no FLOP formula for the fused experts' grouped matmul: 2 x output elements x reduction
    mapping = {torch.ops.aten._grouped_mm: lambda a, b, *args, out_shape=None, **kw: 2 * math.prod(out_shape) * a[-1]}
    counter = FlopCounterMode(display=False, custom_mapping=mapping)
    ids = torch.arange(BATCH * SEQ, device="meta").reshape(BATCH, SEQ) % hf.vocab_size
    with torch.no_grad(), counter:
        model.eval()(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
    a = LLMAnalysis(_ours(GLM52), GPU)
    rows = a.operators("prefill", BATCH, SEQ, per_layer=False)
    assert a.get_num_params_total() == real_params
    assert sum(r["flops"] for r in rows if r["kind"] in ("matmul", "attention")) == counter.get_total_flops()


def test_indexer_parts_by_hand():
    """Only the FULL layers hold an indexer: its parameters and prefill FLOPs counted that
    many times, and the model is lighter than one indexer per layer by SHARED indexers."""
    a = LLMAnalysis(_ours(GLM52), GPU)
    rows = a.operators("prefill", BATCH, SEQ, per_layer=False)
    index_rows = [r for r in rows if r["name"].startswith("index_")]
    assert sum(r["params"] for r in index_rows) == FULL * _indexer_params_by_hand()
    assert sum(r["flops"] for r in index_rows) == FULL * _indexer_prefill_flops_by_hand(SEQ)
    every_layer = LLMAnalysis(_ours({**GLM52, "indexer_types": ["full"] * 5}), GPU)
    assert every_layer.get_num_params_total() - a.get_num_params_total() == SHARED * _indexer_params_by_hand()


def test_shared_layer_decode_attends_top_k_without_an_indexer():
    """A decode step at context 100: every layer's sparse attention reads TOPK latents
    (2 x heads x TOPK x (q.k width + v width) FLOPs); only a full layer scores all 100 keys
    and caches an indexer key beside the MLA latent and rope key."""
    a = LLMAnalysis(_ours(GLM52), GPU)
    d, phase = a.describer, Phase("decode", 1, 1, 100)
    full = next(k for k in d.layer_groups if not k.reuses_topk)
    shared = next(k for k in d.layer_groups if k.reuses_topk)
    for kind in (full, shared):
        ops = {o.name: o for o in d.layer_ops(phase, kind)}
        assert ops["attention_core"].flops == 2 * HEADS * TOPK * (NOPE + ROPE + V)
        assert ops["attention_core"].kv_cache_bytes_read_per_gpu == TOPK * (KV_LORA + ROPE) * d.kv_bytes
        assert ("index_scores" in ops) == (kind is full)
    assert {o.name: o for o in d.layer_ops(phase, full)}["index_scores"].flops == 2 * 100 * INDEX_HEADS * (INDEX_DIM + 1)
    assert d.kv_cache_elems_per_token_per_gpu(full) == KV_LORA + ROPE + INDEX_DIM
    assert d.kv_cache_elems_per_token_per_gpu(shared) == KV_LORA + ROPE


def test_kv_cache_holds_indexer_keys_only_on_full_layers():
    """Per token: every layer's latent and rope key, plus one INDEX_DIM key per full layer."""
    a = LLMAnalysis(_ours(GLM52), GPU)
    batch, seq = 2, 100
    per_token = 5 * (KV_LORA + ROPE) + FULL * INDEX_DIM
    assert a.get_memory_kv_cache_total(batch, seq) == batch * seq * per_token * a.describer.kv_bytes


def test_indexer_schedule_of_a_raw_config_follows_transformers():
    """Without transformers the family derives indexer_types as GlmMoeDsaConfig does, from
    index_topk_pattern or index_topk_freq / index_skip_topk_offset."""
    transformers = pytest.importorskip("transformers")
    from llm_analysis.hub.families.moe import _indexer_kinds_from_schedule
    from llm_analysis.hub.source import Src
    for keys in ({"index_topk_freq": 4, "index_skip_topk_offset": 3}, {"index_topk_freq": 2},
                 {"index_topk_pattern": "FSFFS" * 2}, {}):
        raw = {**{k: v for k, v in GLM52.items() if k != "indexer_types"}, "num_hidden_layers": 10, **keys}
        hf = transformers.AutoConfig.for_model("glm_moe_dsa", **copy.deepcopy(raw))
        assert _indexer_kinds_from_schedule(Src(None, raw), 10) == hf.indexer_types, keys


@pytest.mark.parametrize("kinds, fragment", [
    (["shared", "full", "full", "full", "full"], "the first 'full'"),
    (["full", "shared", "full"], "num_hidden_layers = 5"),
    (["full", "skip", "full", "full", "full"], "'full' or 'shared'"),
])
def test_bad_indexer_types_are_refused_naming_the_field(kinds, fragment):
    with pytest.raises(ConfigError, match="indexer_types") as info:
        _ours({**GLM52, "indexer_types": kinds})
    assert fragment in str(info.value)


@pytest.mark.parametrize("update", [
    dict(layer_indexer=[False, True]),  # the first layer has no earlier selection to reuse
    dict(layer_indexer=[True]),  # one entry per layer
    dict(layer_indexer=[True, False], index_n_heads=None, index_head_dim=None, index_topk=None),
])
def test_layer_indexer_is_validated(update):
    base = dict(name="i", num_layers=2, n_head=4, hidden_dim=64, vocab_size=96, q_lora_rank=32, kv_lora_rank=16,
                qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12, index_n_heads=3, index_head_dim=16,
                index_topk=8)
    with pytest.raises(ConfigError, match="layer_indexer"):
        ModelConfig(**{**base, **update})
