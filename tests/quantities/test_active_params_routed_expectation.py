"""Active parameters are those one token's forward uses, as the FLOPs count them (docs/hub-import.md):

- LongCat-Flash's zero-computation experts: the router picks k of E real + Z identity experts, so a
  token runs k·E/(E+Z) real experts on average (the FFN FLOPs' expectation); the Z rows of gate/up
  weights transformers allocates for the zero experts (LongcatFlashExperts.gate_up_proj has E + Z
  rows) are never read. Counted k/E of all routed weights before, zero-expert rows included
  (36.4 B active for the default config against ~27 B in the LongCat-Flash paper).
- JetMoE's attention experts (JetMoeMoA, self_attention.experts input_linear / output_linear) are
  routed top-k of num_local_experts like its MLP experts; every one was counted active before
  (3.54 B for the 24-layer default against the card's 2.2 B).

Expected: transformers' parameter count of the model on the meta device, less a hand count of what a
token does not use, from the weight shapes transformers builds (written out below).
"""

from __future__ import annotations

import json

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_gpu_config_by_name
from llm_analysis.hub.entry import model_config_from_hf_dict

GPU = get_gpu_config_by_name("h100-sxm-80gb")


def _built(model_type: str, **kw):
    """(our analysis of the config, transformers' parameter count of its causal LM)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    cfg = transformers.AutoConfig.for_model(model_type, **kw)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    a = LLMAnalysis(model_config_from_hf_dict(json.loads(cfg.to_json_string()), f"tiny-{model_type}"), GPU)
    return a, sum(p.numel() for p in model.parameters())


def test_longcat_active_params_take_the_routed_expectation_and_skip_zero_expert_weights():
    h, f, e, z, k, layers = 64, 32, 6, 2, 2, 2
    # num_layers: LongcatFlashDecoderLayer's, one MoE each (num_hidden_layers counts its two sublayers)
    a, total = _built("longcat_flash", hidden_size=h, num_layers=layers, num_attention_heads=4,
                      vocab_size=128, ffn_hidden_size=96, expert_ffn_hidden_size=f, n_routed_experts=e,
                      zero_expert_num=z, moe_topk=k, kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8,
                      qk_nope_head_dim=8, v_head_dim=16)
    assert a.get_num_params_total() == total
    # per layer: E experts of gate/up [h x 2f] and down [f x h]; Z more gate/up rows [h x 2f], unused;
    # a token runs k·E/(E+Z) = 1.5 of the real experts
    one_expert = 2 * f * h + f * h
    idle = e * one_expert + z * 2 * f * h - one_expert * k * e / (e + z)
    assert idle == 6 * 6144 + 2 * 4096 - 1.5 * 6144 == 35840
    assert a.get_num_active_params_total() == total - layers * idle


def test_longcat_default_active_params_near_the_paper():
    """LongCat-Flash (arXiv 2509.01322): 560 B total of which "~27 B" activated on average (18.6-31.3 B)."""
    a, _ = _built("longcat_flash")
    assert 27e9 < a.get_num_active_params_total() < 29e9


def test_jetmoe_attention_experts_are_routed_top_k():
    h, e, k, kv_width, f, layers = 64, 4, 2, 2 * 16, 96, 2
    a, total = _built("jetmoe", hidden_size=h, num_hidden_layers=layers, num_key_value_heads=2, kv_channels=16,
                      vocab_size=128, intermediate_size=f, num_local_experts=e, num_experts_per_tok=k)
    assert a.get_num_params_total() == total
    # per layer, E - k experts idle per token: attention experts' input_linear [h x kv_width] and
    # output_linear [kv_width x h]; MLP experts' input_linear [h x 2f] (GLU) and output_linear [f x h]
    idle_attention = (e - k) * 2 * h * kv_width
    idle_mlp = (e - k) * (h * 2 * f + f * h)
    assert (idle_attention, idle_mlp) == (8192, 36864)
    assert a.get_num_active_params_total() == total - layers * (idle_attention + idle_mlp)
    # the per-layer figure is the same rule: all of a layer's parameters less what a token leaves idle
    assert a.get_num_active_params_per_layer() == pytest.approx(
        a.get_num_params_per_layer() - (idle_attention + idle_mlp))


def test_jetmoe_default_active_params_near_the_card():
    """jetmoe/jetmoe-8b card: 8 B parameters, 2.2 B active (24 layers)."""
    a, _ = _built("jetmoe", num_hidden_layers=24)
    assert 2.2e9 < a.get_num_active_params_total() < 2.4e9
