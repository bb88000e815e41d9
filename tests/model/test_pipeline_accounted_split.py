"""Megatron-Core's pipeline split that counts the embedding and the loss as one layer each
(ParallelismConfig.account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split,
model/pipeline_layout.py).

Independent source: Megatron-Core's TransformerConfig.__post_init__ (megatron/core/transformer/
transformer_config.py): num_layers + 1 for the embedding + 1 for the loss must be divisible by
pipeline_model_parallel_size, and with virtual stages the layers of each pipeline rank, so counted, by
virtual_pipeline_model_parallel_size; the first stage's first slot is the embedding, the last stage's last
slot the loss. NeMo's Llama 3.1 405B recipes set both (NVIDIA/cloudai cloudai_nemorun.py,
cloudai_llama3_405b_recipe) to run its 126 layers over pp 8 x vp 8. Hand derivation for 126 layers:
128 slots / 8 stages = 16 a stage, so 15, 16 x 6, 15; over 16 stages 8 a stage: 7, 8 x 14, 7.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from llm_analysis.config import ParallelismConfig, get_model_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.facade import LLMAnalysis
from llm_analysis.model.pipeline_layout import stage_layer_counts

BOTH = dict(account_for_embedding_in_pipeline_split=True, account_for_loss_in_pipeline_split=True)
L405 = "meta-llama/Llama-3.1-405B"


def _counts(model: str, **par):
    return stage_layer_counts(get_model_config_by_name(model), ParallelismConfig(**par))


def test_the_slots_split_evenly_and_the_ends_give_one_up():
    assert _counts(L405, pp_size=8, **BOTH) == [15] + [16] * 6 + [15]
    assert _counts(L405, pp_size=16, **BOTH) == [7] + [8] * 14 + [7]
    # the embedding alone: 127 slots, a prime: only one stage splits them
    assert _counts(L405, pp_size=1, account_for_embedding_in_pipeline_split=True) == [126]
    # Llama-3.1-70B: 80 layers + the loss = 81 slots over 3 stages of 27: 27, 27, 26
    assert _counts("meta-llama/Llama-3.1-70B", pp_size=3, account_for_loss_in_pipeline_split=True) == [27, 27, 26]


def test_slots_that_do_not_divide_are_refused_with_the_stage_counts_that_do():
    with pytest.raises(ConfigError) as err:
        _counts(L405, pp_size=6, **BOTH)  # 128 slots
    text = str(err.value)
    assert "pp_size = 6" in text and "128 layer slots" in text and "[1, 2, 4, 8, 16, 32, 64]" in text


def test_two_ways_of_splitting_at_once_are_refused():
    with pytest.raises(ConfigError, match="two ways of splitting"):
        _counts(L405, pp_size=8, num_layers_in_first_pipeline_stage=15, **BOTH)


def test_the_split_is_the_same_layout_as_its_stated_end_stages():
    """Without virtual stages the accounted split is a layout the explicit end-stage counts state too: the
    same iteration, to the float."""
    kw = dict(batch_size_per_gpu=1, global_batch_size=64, seq_len=4096, ds_zero=1, activation_recomputation=4)
    accounted = LLMAnalysis(L405, "h100-sxm-80gb", "w16a16e16", ParallelismConfig(tp_size=8, pp_size=8, dp_size=2, **BOTH))
    stated = LLMAnalysis(L405, "h100-sxm-80gb", "w16a16e16", ParallelismConfig(
        tp_size=8, pp_size=8, dp_size=2, num_layers_in_first_pipeline_stage=15, num_layers_in_last_pipeline_stage=15))
    assert accounted.training(**kw)["latency_per_iter"] == stated.training(**kw)["latency_per_iter"]


def test_virtual_stages_divide_the_slots_not_the_layers():
    """126 layers over pp 8: the stages hold 15 and 16 layers, which 8 virtual stages do not split (refused, the
    refusal naming the accounted split); counted with the two slots, 16 a stage, 2 a virtual stage, they do."""
    kw = dict(batch_size_per_gpu=1, global_batch_size=64, seq_len=8192, pipeline_interleave=8, ds_zero=1)
    plain = LLMAnalysis(L405, "gb200-nvl72-186gb", "w16a16e16", ParallelismConfig(tp_size=4, pp_size=8, cp_size=2,
                                                                                   dp_size=2))
    with pytest.raises(ConfigError) as err:
        plain.training(**kw)
    assert "account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split = True" in str(err.value)
    accounted = LLMAnalysis(L405, "gb200-nvl72-186gb", "w16a16e16", ParallelismConfig(tp_size=4, pp_size=8, cp_size=2,
                                                                                       dp_size=2, **BOTH))
    interleaved = accounted.training(**kw)
    once = accounted.training(**dict(kw, pipeline_interleave=1))
    # the interleaved schedule's fill and drain: 1/v of the plain schedule's over the same stages (the stages'
    # hand-off per micro-batch, 2 hops x v, is the only other term the bubble carries)
    assert interleaved["latency_per_iter_pipeline_bubble"] < once["latency_per_iter_pipeline_bubble"] / 4


@pytest.mark.parametrize("model,layout,first,last", [
    # a tensor-parallel worker: 80 layers + 2 slots over 2 stages of 41: 40, 40
    ("meta-llama/Llama-3.1-70B", dict(tp_size=2), 40, 40),
    # a worker with attention replicas and expert parallelism (its stages rebuilt per replica, serving/layout.py):
    # 48 layers + 2 slots over 5 stages of 10: 9, 10, 10, 10, 9 (an even split of the layers is 10, 10, 10, 9, 9)
    ("Qwen/Qwen3-30B-A3B", dict(tp_size=1, attention_dp_size=2, moe_ep_size=2), 9, 9)])
def test_serve_runs_the_split_as_its_end_stage_counts(model, layout, first, last):
    pp = 2 if first == 40 else 5
    accounted = LLMAnalysis(model, "h100-sxm-80gb", "fp8", ParallelismConfig(pp_size=pp, **layout, **BOTH))
    stated = LLMAnalysis(model, "h100-sxm-80gb", "fp8", ParallelismConfig(
        pp_size=pp, **layout, num_layers_in_first_pipeline_stage=first, num_layers_in_last_pipeline_stage=last))
    kw = dict(concurrency=8, input_len=1024, output_len=128)
    a, b = accounted.serve(**kw), stated.serve(**kw)
    for key in ("tpot_s", "ttft_s", "weight_memory_per_gpu", "kv_pool_tokens_per_replica"):
        assert a[key] == b[key], key


def test_train_takes_the_flags_and_reports_the_stages():
    r = subprocess.run([sys.executable, "-m", "llm_analysis", "train", "--model_name", L405, "--gpu_name",
                        "h100-sxm-80gb", "--tp_size", "8", "--pp_size", "16", "--total_num_gpus", "256",
                        "--seq_len", "4096", "--global_batch_size", "256", "--batch_size_per_gpu", "1",
                        "--ds_zero", "1", "--account_for_embedding_in_pipeline_split", "True",
                        "--account_for_loss_in_pipeline_split", "True"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "layers per stage 7, 14 x 8, 7" in r.stdout
