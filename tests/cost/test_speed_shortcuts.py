"""Shortcuts of the new-shape hot path (issue 12) return what the general path returns.

Each shortcut reads, once per analysis, what the general path reads per call; the
expected values here come from that general path (the views, or the per-stage sum),
so a shortcut that drifts from it fails. Bit-for-bit equality is asserted: the
shortcuts keep the same products in the same order."""

from __future__ import annotations

import random

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.cost import RooflineCostModel
from llm_analysis.cost.choice import with_cost_model
from llm_analysis.hub.mapping import map_hf_config
from llm_analysis.inference import run_inference
from llm_analysis.inference.memory import _kv_cache_bytes
from llm_analysis.inference.pipeline import stage_times_s
from llm_analysis.model import Phase

# this module's analyses warn of nothing its tests check (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("quiet_package_warnings")

H100 = get_gpu_config_by_name("h100-sxm-80gb")
JAMBA = dict(model_type="jamba", hidden_size=2048, num_attention_heads=16, num_key_value_heads=8, num_hidden_layers=8,
             intermediate_size=5632, vocab_size=65536, max_position_embeddings=4096, attn_layer_period=4,
             attn_layer_offset=2, expert_layer_period=2, expert_layer_offset=1, num_experts=8,
             num_experts_per_tok=2, mamba_d_state=16, mamba_dt_rank=128)
BART = dict(model_type="bart", d_model=1024, decoder_layers=12, encoder_layers=12, decoder_attention_heads=16,
            encoder_attention_heads=16, decoder_ffn_dim=4096, encoder_ffn_dim=4096, vocab_size=50265,
            max_position_embeddings=1024)


def _hub(config, name):
    return map_hf_config(config, name=name, source="test", what=name, trust_remote_code=False, revision=None)


KV_SETUPS = [  # dense, sliding windows over uneven stages, MLA, mixers + MoE, cross-attention
    (lambda: get_model_config_by_name("facebook_opt-1.3b"), dict(tp_size=2), {}),
    (lambda: get_model_config_by_name("google_gemma-2-9b"), dict(tp_size=2, pp_size=3), {}),
    (lambda: get_model_config_by_name("deepseek-ai_DeepSeek-V2-Lite"), {}, {}),
    (lambda: _hub(JAMBA, "jamba-small"), dict(tp_size=2), {}),
    (lambda: _hub(BART, "bart-ish"), {}, dict(encoder_seq_len=300)),
]


@pytest.mark.parametrize("make_model,par,extra", KV_SETUPS)
def test_batch1_kv_cache_plan_is_the_view(make_model, par, extra):
    a = LLMAnalysis(make_model(), H100, parallelism_config=ParallelismConfig(**par))
    a = a.with_encoder_seq_len(extra.get("encoder_seq_len"))
    rng = random.Random(12)
    window = a.model_config.sliding_window or 4096
    lengths = list(range(1, 20)) + [window - 2, window - 1, window, window + 1] + rng.sample(range(20, 200_000), 60)
    for kv_bytes in (None, 1):
        d = a.describer_for(kv_bytes)
        for n in lengths:
            assert _kv_cache_bytes(a, d, 1, n, kv_bytes) == a.get_memory_kv_cache_per_gpu(1, n, kv_bytes), (n, kv_bytes)


@pytest.mark.parametrize("par", [dict(pp_size=4), dict(pp_size=3), dict(pp_size=5, num_layers_in_first_pipeline_stage=4),
                                 dict(pp_size=8, tp_size=2)])
def test_pipeline_stages_timed_once_per_kind_are_each_stage_timed(par):
    a = LLMAnalysis(get_model_config_by_name("meta-llama_Llama-3.1-70B"), H100,
                    parallelism_config=ParallelismConfig(**par))
    d, p = a.describer, a.parallelism_config.pp_size
    for phase in (Phase("prefill", 3, 700, 700), Phase("decode", 5, 1, 901)):
        handoff = a.pipeline_handoff_time_s(phase.batch, phase.q_len) / (p - 1)
        # every stage timed on its own operators
        want = [a.weighted_time_s([(part.repeat, op) for part in d.build_model_parts(phase, i) for op in part.ops])
                + (handoff if i < p - 1 else 0.0) for i in range(p)]
        # (relative 1e-12, DESIGN.md §3: a stage's sum is read off the phase table, in another order)
        assert stage_times_s(a, d, phase) == pytest.approx(want, rel=1e-12)


def test_summary_static_entries_follow_the_cost_model():
    """A view timed by another cost model shares the describer, not the summary's rates."""
    a = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), H100)
    first = run_inference(a, batch_size_per_gpu=2, seq_len=128, num_tokens_to_generate=8)
    slow = RooflineCostModel(a.gpu_config, a.dtype_config, a.parallelism_config, flops_efficiency=0.5,
                             hbm_memory_efficiency=0.5)
    view = run_inference(with_cost_model(a, slow), batch_size_per_gpu=2, seq_len=128, num_tokens_to_generate=8)
    assert view["achieved_tflops"] == slow.achieved_tflops == first["achieved_tflops"] / 2
    assert view["ridge_point_flops_per_byte"] == slow.ridge_point
    again = run_inference(a, batch_size_per_gpu=2, seq_len=128, num_tokens_to_generate=8)
    assert again["achieved_tflops"] == first["achieved_tflops"]


def test_training_shape_free_parts_follow_the_cost_model():
    a = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), H100,
                    parallelism_config=ParallelismConfig(dp_size=4))
    kw = dict(batch_size_per_gpu=2, seq_len=256, gradient_accumulation_steps=1, ds_zero=1)
    first = a.training(**kw)
    slow = RooflineCostModel(a.gpu_config, a.dtype_config, a.parallelism_config, hbm_memory_efficiency=0.5,
                             intra_node_memory_efficiency=0.5)
    view = with_cost_model(a, slow).training(**kw)
    # memory-bound optimizer step at half the bandwidth; data-parallel traffic over half the link
    assert view["latency_per_iter_optimizer_step"] == pytest.approx(2 * first["latency_per_iter_optimizer_step"])
    assert view["latency_per_iter_dp_comm_total"] > first["latency_per_iter_dp_comm_total"]
    assert a.training(**kw) == first
