"""ParallelismConfig's serving worker layout: attention_dp_size, moe_tp_size, moe_ep_size (issue 26).

The defaults keep every existing config's meaning (moe_tp = tp, moe_ep = 1 without attention-DP);
tp x attention_dp must equal moe_tp x moe_ep (the experts live on the worker's own GPUs)."""

from __future__ import annotations

import pytest

from llm_analysis.config import ParallelismConfig
from llm_analysis.errors import ConfigError


def test_defaults_mean_what_they_meant():
    for tp in (1, 2, 8):
        p = ParallelismConfig(tp_size=tp)
        assert (p.attention_dp_size, p.moe_tp_size, p.moe_ep_size) == (1, tp, 1)
        assert p.worker_gpus == tp
        assert p.num_gpus == tp  # the training/inference GPU count is unchanged
    assert ParallelismConfig(tp_size=2, dp_size=4, ep_size=4).moe_ep_size == 1  # ep_size keeps its own meaning


def test_attention_dp_spreads_experts_over_its_replicas():
    p = ParallelismConfig(tp_size=1, attention_dp_size=8)
    assert (p.moe_tp_size, p.moe_ep_size, p.worker_gpus) == (1, 8, 8)
    p = ParallelismConfig(tp_size=2, attention_dp_size=4)
    assert (p.moe_tp_size, p.moe_ep_size) == (2, 4)


def test_one_moe_size_gives_the_other():
    assert ParallelismConfig(tp_size=8, moe_ep_size=8).moe_tp_size == 1  # "TEP": attention TP 8, experts EP 8
    assert ParallelismConfig(tp_size=8, moe_tp_size=2).moe_ep_size == 4
    assert ParallelismConfig(tp_size=2, attention_dp_size=2, moe_ep_size=4).moe_tp_size == 1


@pytest.mark.parametrize("fields,named", [
    (dict(tp_size=2, attention_dp_size=2, moe_tp_size=3, moe_ep_size=2), ("tp_size x attention_dp_size", "moe_tp_size x moe_ep_size")),
    (dict(tp_size=4, moe_tp_size=1, moe_ep_size=2), ("= 4", "= 2")),
    (dict(tp_size=2, moe_ep_size=3), ("moe_ep_size = 3", "must divide")),
    (dict(tp_size=8, moe_tp_size=3), ("moe_tp_size = 3",)),
    (dict(attention_dp_size=0), ("attention_dp_size",)),
    (dict(moe_ep_size=-1), ("moe_ep_size",)),
])
def test_bad_layouts_name_the_fields(fields, named):
    with pytest.raises(ConfigError) as err:
        ParallelismConfig(**fields)
    for text in named:
        assert text in str(err.value)


# ---- moe_tp_size = moe_ep_size = 1 on a larger worker: layout tables' "no experts" (aiconfigurator's silicon
# sample README: "dense models carry 1s in the moe columns"), a wrong split for a model with experts

def test_ones_in_the_moe_fields_are_taken_by_the_schema_which_cannot_know_the_model():
    p = ParallelismConfig(tp_size=4, moe_tp_size=1, moe_ep_size=1)
    assert (p.moe_tp_size, p.moe_ep_size, p.worker_gpus) == (1, 1, 4)
    with pytest.raises(ConfigError, match="moe_tp_size x moe_ep_size = 1 x 2"):  # any other short split stays refused
        ParallelismConfig(tp_size=4, moe_tp_size=1, moe_ep_size=2)


def test_a_dense_model_reads_ones_as_no_experts():
    """A dense model has no experts to split: its answers with the 1s equal those without the fields."""
    from llm_analysis.analysis import LLMAnalysis
    ones = LLMAnalysis("Qwen/Qwen3-32B", "h100-sxm-80gb", "fp8", ParallelismConfig(tp_size=4, moe_tp_size=1, moe_ep_size=1),
                       perf_model="calibrated")
    plain = LLMAnalysis("Qwen/Qwen3-32B", "h100-sxm-80gb", "fp8", ParallelismConfig(tp_size=4), perf_model="calibrated")
    for framework in ("vllm", "trtllm"):
        s1, s2 = (x.serve(concurrency=16, input_len=1024, output_len=128, framework=framework) for x in (ones, plain))
        assert (s1["ttft_s"], s1["tpot_s"], s1["num_gpus"]) == (s2["ttft_s"], s2["tpot_s"], s2["num_gpus"])
        assert s1["num_gpus"] == 4
    i1, i2 = (x.inference(batch_size_per_gpu=2, seq_len=512, num_tokens_to_generate=16) for x in (ones, plain))
    assert i1["total_latency"] == i2["total_latency"]


def test_a_model_with_experts_refuses_ones_as_the_schema_refuses_any_short_split():
    from llm_analysis.analysis import LLMAnalysis
    ones = ParallelismConfig(tp_size=4, moe_tp_size=1, moe_ep_size=1)
    with pytest.raises(ConfigError) as err:
        LLMAnalysis("Qwen/Qwen3-235B-A22B", "h200-sxm-141gb", "fp8", ones)
    message = str(err.value)
    assert "tp_size x attention_dp_size = 4 x 1 = 4" in message and "moe_tp_size x moe_ep_size = 1 x 1 = 1" in message
    assert "(4, 1), (2, 2), (1, 4)" in message
    # the same in a disaggregated pool, named by its pool
    a = LLMAnalysis("Qwen/Qwen3-235B-A22B", "h200-sxm-141gb", "fp8", ParallelismConfig(tp_size=4))
    pools = {"prefill": {"workers": 1, "parallelism": ParallelismConfig(tp_size=4)},
             "decode": {"workers": 1, "parallelism": ones}}
    with pytest.raises(ConfigError) as err:
        a.serve(concurrency=8, input_len=1024, output_len=128, framework="trtllm", disaggregated=pools)
    assert "decode" in str(err.value) and "moe_tp_size x moe_ep_size = 1 x 1 = 1" in str(err.value)


# ---- every size of the layout has the sanity limit of a parallel group (docs/input-limits.md: 2^24 GPUs in a
# parallel group). Round 31's CLI sweep of `serve` found attention_dp_size = 10^40 accepted and ending in an
# OverflowError inside the simulation, where tp_size, pp_size and dp_size were refused with one line.

@pytest.mark.parametrize("field", ["tp_size", "pp_size", "dp_size", "ep_size", "cp_size", "attention_dp_size",
                                   "moe_tp_size", "moe_ep_size", "dp_shard", "dp_replicate"])
def test_every_layout_size_has_the_parallel_group_limit(field):
    limit = 2 ** 24  # the stated limit, docs/input-limits.md
    with pytest.raises(ConfigError, match=f"'{field}' = {10 ** 40} exceeds the sanity limit"):
        ParallelismConfig(**{field: 10 ** 40})
    with pytest.raises(ConfigError, match=f"'{field}' = {limit + 1} exceeds the sanity limit"):
        ParallelismConfig(**{field: limit + 1})


def test_serve_refuses_a_huge_attention_dp_in_one_line(tmp_path):
    """The command line as the sweep ran it: exit 2 and one line naming the field, not a traceback."""
    import subprocess
    import sys
    cmd = [sys.executable, "-m", "llm_analysis.analysis", "serve", "--model_name", "meta-llama/Llama-3.1-8B",
           "--gpu_name", "h100-sxm-80gb", "--input_len", "512", "--output_len", "64", "--request_rate", "10",
           "--attention_dp_size", "9" * 40]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 2, run.stderr[-2000:]
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "attention_dp_size" in lines[0] and "sanity limit" in lines[0], run.stderr[-2000:]


@pytest.mark.parametrize("sp", [16, 4, 3])
def test_sequence_parallel_size_is_the_tensor_parallel_group_or_off(sp):
    """Megatron's sequence parallelism splits the activations over the tensor-parallel group: sp_size = 16 or 4
    with tp_size = 8 was read as "on" and answered as sp_size = 8, while the summary printed the size given."""
    with pytest.raises(ConfigError, match=f"sp_size = {sp} with tp_size = 8.*valid: sp_size = 8 \\(on\\) or 1 \\(off\\)"):
        ParallelismConfig(tp_size=8, sp_size=sp)
    assert ParallelismConfig(tp_size=8, sp_size=1).sp_size == 1 and ParallelismConfig(tp_size=8).sp_size == 8
