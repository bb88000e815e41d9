"""The pipeline bubble with unequal stages, derived by hand from the stage sizes (docs/training.md).

Narayanan et al. 2021 (arXiv 2104.04473) §2.2: under 1F1B the bottleneck stage runs its m micro-batches back to
back and waits, once, for the first forward to reach it and the last backward to leave every other stage; with p
equal stages that is (p - 1)(t_f + t_b) = (p - 1)/(v m) of the ideal time, with unequal ones the sum of the OTHER
stages' micro-batch times (/ v with v interleaved chunks). Here 8 layers over 4 stages as 1 + 3 + 3 + 1
(num_layers_in_first/last_pipeline_stage) and a 64-token vocabulary (embedding and head ~1% of a layer's time):
stage times 1, 3, 3, 1 layers (+ the point-to-point transfers each stage sends), so the bubble is 5 layer times
(+ 3 transfers), where the equal-stage formula the docs had stated gives 9."""

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name


def test_bubble_is_the_other_stages_times_not_p_minus_1_bottlenecks():
    model = ModelConfig(name="gpt-8l", num_layers=8, n_head=16, hidden_dim=2048, vocab_size=64, max_seq_len=2048,
                        qkv_bias=True, attn_out_bias=True, mlp_bias=True, position_embedding_type="learned")
    p, m, v = 4, 8, 1
    par = ParallelismConfig(pp_size=p, num_layers_in_first_pipeline_stage=1, num_layers_in_last_pipeline_stage=1)
    a = LLMAnalysis(model, get_gpu_config_by_name("a100-sxm-80gb"), get_dtype_config_by_name("bf16"), par)
    r = a.training(batch_size_per_gpu=1, gradient_accumulation_steps=m, seq_len=2048, pipeline_interleave=v)
    pp_per_mb = r["latency_per_iter_pp_comm"] / m  # the transfers each stage sends per micro-batch
    # the bottleneck stage holds 3 layers: its micro-batch (latency_per_micro_batch) is 3 layer times + transfers
    layer_s = (r["latency_per_micro_batch"] - pp_per_mb) / 3
    stage_s = [n * layer_s + pp_per_mb for n in (1, 3, 3, 1)]
    by_hand = (sum(stage_s) - max(stage_s)) / v  # 5 layer times + 3 transfers
    assert r["latency_per_iter_pipeline_bubble"] == pytest.approx(by_hand, rel=2e-2)
    equal_stage_formula = (p - 1) / (v * m) * (m * r["latency_per_micro_batch"])  # 9 layer times + 3 transfers
    assert r["latency_per_iter_pipeline_bubble"] < 0.7 * equal_stage_formula
