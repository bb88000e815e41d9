"""A micro-batch chosen without the user's (library `training()` and the command line) under an interleaved
pipeline schedule leaves at least pp_size micro-batches per iteration: Megatron-Core's interleaved 1F1B
refuses fewer (training/run.check_interleaved_micro_batches), so choosing one that leaves fewer turned a
runnable request into an error. Expected values come from training() called at each micro-batch by hand."""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.errors import ConfigError, DoesNotFitError
from llm_analysis.training.micro_batch_choice import fastest_fitting_micro_batch

PP, DP, V, SEQ = 4, 2, 2, 2048


@pytest.fixture(scope="module")
def analysis():
    return LLMAnalysis(get_model_config_by_name("meta-llama/Llama-2-7b-hf"), get_gpu_config_by_name("a100-sxm-80gb"),
                       get_dtype_config_by_name("w16a16e16"), ParallelismConfig(pp_size=PP, dp_size=DP))


def _runs_at(analysis, global_batch):
    """{micro-batch: summary} for every micro-batch that divides the sequences per rank, fits, and leaves
    >= PP micro-batches, each given by hand."""
    per_rank = global_batch // DP
    runs = {}
    for b in range(1, per_rank + 1):
        if per_rank % b or per_rank // b < PP:
            continue
        try:
            runs[b] = analysis.training(seq_len=SEQ, pipeline_interleave=V, global_batch_size=global_batch,
                                        batch_size_per_gpu=b)
        except DoesNotFitError:
            continue
    return runs


@pytest.mark.parametrize("global_batch", [8, 16, 32])
def test_library_takes_the_largest_fitting_micro_batch_that_leaves_pp_steps(analysis, global_batch):
    runs = _runs_at(analysis, global_batch)
    assert runs, "the hand enumeration found no runnable micro-batch"
    got = analysis.training(seq_len=SEQ, pipeline_interleave=V, global_batch_size=global_batch)
    assert got["batch_size_per_gpu"] == max(runs)
    assert got["gradient_accumulation_steps"] == global_batch // DP // max(runs) >= PP
    assert got["latency_per_iter"] == pytest.approx(runs[max(runs)]["latency_per_iter"], rel=1e-12)
    assert "leaving at least pp_size = 4 micro-batches" in got["notes"][0]


def test_library_without_any_batch_takes_pp_steps(analysis):
    got = analysis.training(seq_len=SEQ, pipeline_interleave=V)
    assert got["gradient_accumulation_steps"] == PP
    # the largest micro-batch that fits at PP steps: one more does not fit (checked by hand)
    b = got["batch_size_per_gpu"]
    analysis.training(seq_len=SEQ, pipeline_interleave=V, batch_size_per_gpu=b, gradient_accumulation_steps=PP)
    with pytest.raises(DoesNotFitError):
        analysis.training(seq_len=SEQ, pipeline_interleave=V, batch_size_per_gpu=b + 1, gradient_accumulation_steps=PP)


def test_explicit_steps_below_pp_still_refused(analysis):
    with pytest.raises(ConfigError, match="needs at least pp_size = 4 micro-batches"):
        analysis.training(seq_len=SEQ, pipeline_interleave=V, gradient_accumulation_steps=2)
    with pytest.raises(ConfigError, match="needs at least pp_size = 4 micro-batches"):
        analysis.training(seq_len=SEQ, pipeline_interleave=V, global_batch_size=4)  # 2 per rank < 4 stages


@pytest.mark.parametrize("global_batch", [16, 32])
def test_command_line_rule_only_weighs_runnable_micro_batches(analysis, global_batch):
    runs = _runs_at(analysis, global_batch)
    per_sample = {b: r["latency_per_iter"] / global_batch for b, r in runs.items()}
    fastest = min(per_sample.values())
    expected = min(b for b, t in per_sample.items() if t <= fastest * 1.01)
    got = fastest_fitting_micro_batch(analysis.training, {"seq_len": SEQ, "pipeline_interleave": V,
                                                          "global_batch_size": global_batch})
    assert got["batch_size_per_gpu"] == expected
    assert f"the {len(runs)} that fit" in got["notes"][0]
