"""Non-default options of the Hub family rows, checked against the real model code.

tests/test_architecture_coverage.py checks each model type's *default* config. The
rows also read flags whose non-default values change the architecture (q/k norms,
parallel blocks, biases, post-norms, shared experts); here each such variant of a
small config is built by transformers on the meta device and `verify_hf_config`
compares our parameters and prefill FLOPs (FlopCounterMode) with it.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
from transformers import AutoConfig  # noqa: E402

import llm_analysis.hub.entry as hf_import  # noqa: E402
from llm_analysis.errors import UnsupportedArchitectureError  # noqa: E402
from llm_analysis.exact import verify_hf_config  # noqa: E402

SMALL = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
             intermediate_size=128, vocab_size=256, max_position_embeddings=128)

VARIANTS = [
    ("cohere", dict(use_qk_norm=True)),
    ("phi", dict(qk_layernorm=True)),
    ("stablelm", dict(use_parallel_residual=True, use_qkv_bias=True)),
    ("persimmon", dict(qk_layernorm=False)),
    ("hyperclovax", dict(use_post_norm=False)),
    ("ernie4_5", dict(use_bias=True)),
    ("granitemoeshared", dict(shared_intermediate_size=96, num_local_experts=4)),
    ("starcoder2", dict(use_bias=False)),
    ("seed_oss", dict(attention_bias=False, attention_out_bias=True)),
    ("olmoe", dict(num_experts=4, num_experts_per_tok=2)),
    # MptBlock drops every bias whatever no_bias says
    ("mpt", dict(no_bias=False, d_model=64, n_heads=4, n_layers=2)),
    ("electra", dict(embedding_size=32)),
    ("codegen", dict(n_embd=64, n_head=4, n_layer=2, rotary_dim=8, n_positions=128)),
    # BERT-family encoders (hub/families/encoders.py)
    ("big_bird", dict(attention_type="original_full", use_bias=False)),
    ("big_bird", dict(attention_type="original_full", hidden_act="gelu")),
    ("rembert", dict(input_embedding_size=32)),
    ("rembert", dict(input_embedding_size=64)),  # as wide as hidden: still projected
    ("tapas", dict(type_vocab_sizes=[3, 7, 11])),
    ("gte", dict(type_vocab_size=2, hidden_act="silu")),
    ("nomic_bert", dict(type_vocab_size=0)),
    ("jina_embeddings_v3", dict(type_vocab_size=2)),
    ("yoso", dict(type_vocab_size=2)),
    ("bert-generation", dict()),
    # mixture-of-experts decoders (hub/families/moe.py)
    ("glm4_moe", dict(use_qk_norm=True, attention_bias=True, n_routed_experts=4, num_experts_per_tok=2,
                      moe_intermediate_size=32, n_shared_experts=2, first_k_dense_replace=1)),
    ("glm4_moe", dict(num_attention_heads=6, num_key_value_heads=2, n_routed_experts=4,
                      num_experts_per_tok=2, moe_intermediate_size=32, first_k_dense_replace=0)),
    ("solar_open", dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                        n_shared_experts=2, attention_bias=True)),
    ("exaone_moe", dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                        num_shared_experts=2, mlp_layer_types=["dense", "sparse"])),
    ("hy_v3", dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                   num_shared_experts=0, attention_bias=True, mlp_bias=True,
                   mlp_layer_types=["sparse", "sparse"])),
    ("ernie4_5_moe", dict(moe_num_experts=4, moe_k=2, moe_intermediate_size=32, num_hidden_layers=4,
                          moe_layer_start_index=0, moe_layer_interval=2, moe_num_shared_experts=1)),
    ("aria_text", dict(moe_num_experts=4, moe_topk=2, moe_num_shared_experts=1, mlp_bias=True)),
    ("flint", dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                   shared_expert_intermediate_size=48, mlp_only_layers=[0], attention_bias=True)),
    ("kolibri1", dict(num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                      shared_expert_intermediate_size=48)),
    ("mellum", dict(num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                    attention_bias=True, mlp_layer_types=["dense", "sparse"])),
    ("cohere2_moe", dict(num_experts=4, num_experts_per_tok=2, num_shared_experts=1,
                         rms_norm_eps=1e-5)),
    ("cohere2_moe", dict(num_experts=4, num_experts_per_tok=2, mlp_layer_types=["dense", "sparse"],
                         prefix_dense_intermediate_size=128)),
]


def _config(mt: str, update: dict) -> dict:
    keys = dict(SMALL)
    if mt in ("mpt", "codegen"):
        keys = dict(vocab_size=256)
    return AutoConfig.for_model(mt, **{**keys, **update}).to_dict()


@pytest.mark.parametrize("mt,update", VARIANTS,
                         ids=[f"{m}-{'-'.join(f'{k}={v}' for k, v in u.items())}" for m, u in VARIANTS])
def test_variant_is_exact_against_the_meta_model(mt, update, tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_ANALYSIS_CACHE", str(tmp_path))
    verdict = verify_hf_config(_config(mt, update), model_id=f"small/{mt}", use_cache=False)
    assert verdict["exact"] and verdict["engine_params"] == verdict["model_params"]
    assert verdict["flops_exact"] is not False


@pytest.mark.parametrize("mt,update,word", [
    ("stablelm", dict(qk_layernorm=True), "qk_layernorm"),
    ("ernie", dict(use_task_id=True), "use_task_id"),
    ("mpt", dict(attn_config=dict(alibi=False)), "alibi"),
    ("big_bird", dict(attention_type="block_sparse"), "block-sparse"),
    ("yoso", dict(use_expectation=False), "use_expectation"),
    ("yoso", dict(conv_window=3), "conv_window"),
    ("bert-generation", dict(is_decoder=True, add_cross_attention=True), "add_cross_attention"),
    ("cohere2_moe", dict(num_experts=4, num_experts_per_tok=2, mlp_layer_types=["dense", "sparse"],
                         prefix_dense_intermediate_size=96), "prefix_dense_intermediate_size"),
    ("ernie4_5_moe", dict(moe_num_experts=4, moe_k=2, num_hidden_layers=4, moe_layer_start_index=0,
                          moe_layer_end_index=1), "first k layers dense"),
])
def test_variants_the_rows_do_not_describe_are_refused(mt, update, word):
    keys = dict(vocab_size=256) if mt == "mpt" else SMALL
    raw = AutoConfig.for_model(mt, **{**keys, **update}).to_dict()
    with pytest.raises(hf_import.HubImportError, match=word):
        hf_import.model_config_from_hf_dict(raw, name=f"small/{mt}")


def test_refusals_suggest_the_exact_extra():
    # bitnet, the example before, is exact since i14-dense: hrm_text stays refused
    raw = AutoConfig.for_model("hrm_text", **SMALL).to_dict()
    with pytest.raises(UnsupportedArchitectureError, match=r"llm-analysis\[exact\]"):
        hf_import.model_config_from_hf_dict(raw, name="small/hrm_text")
