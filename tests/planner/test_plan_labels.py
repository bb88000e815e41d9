"""Issue 28 (planner side): every parallel dimension in every plan table, a legend under the
abbreviated columns, batches labelled per replica, and no-fit messages that name the binding
constraint (not memory when some candidates fit in memory)."""

from __future__ import annotations

import pytest

from llm_analysis.cli.plan import plan_infer_command
from llm_analysis.config import get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.planner import NoFeasiblePlanError, plan_inference, plan_training


def _table(text: str):
    """(header, rows) of a plan table: the lines before the first blank line, split on runs of spaces."""
    lines = text.split("\n\n")[0].splitlines()
    header = lines[0].split()
    return header, [line.split()[:len(header) - 1] for line in lines[1:]]


def _legend(text: str):
    """{column: meaning} of the legend block under a table."""
    block = text.split("legend:\n", 1)[1].split("\n\n")[0]
    return {line.split()[0]: line.split(None, 1)[1] for line in block.splitlines()}


@pytest.fixture(scope="module")
def long_sequence_training():
    # 64 GPUs at 128K tokens per sequence: the fastest layouts split the sequence (cp > 1), which a
    # table without a cp column shows as tp x pp x dp far below 64
    return plan_training("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], tokens=1e9, max_gpus=64,
                         global_batch_size=64)


def test_training_table_shows_every_parallel_dimension(long_sequence_training):
    header, rows = _table(long_sequence_training.table(5))
    for dim in ("tp", "cp", "pp", "dp", "ep"):
        assert dim in header
    col = {name: header.index(name) for name in ("tp", "cp", "pp", "dp", "gpus")}
    assert any(int(r[col["cp"]]) > 1 for r in rows)
    for r in rows:  # the dimensions shown multiply out to the GPU count shown
        assert int(r[col["tp"]]) * int(r[col["cp"]]) * int(r[col["pp"]]) * int(r[col["dp"]]) == int(r[col["gpus"]])


def test_training_table_has_a_legend_for_its_abbreviations(long_sequence_training):
    text = long_sequence_training.table(3)
    legend = _legend(text)
    for abbreviation in ("tp", "cp", "pp", "dp", "ep", "v", "zero", "rc", "mb", "binding"):
        assert abbreviation in legend
    assert "per replica (tp x cp x pp GPUs)" in legend["mb"]


def test_inference_table_has_a_legend_and_says_the_batch_is_per_replica():
    r = plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], {"max_tpot_s": 0.03}, seq_len=512,
                       num_tokens_to_generate=32, max_pp=1, max_batch_size=64)
    text = r.table(3)
    header, _ = _table(text)
    legend = _legend(text)
    for abbreviation in ("kv_B", "tp", "pp", "ep", "batch", "tok/s/gpu", "$/Mtok"):
        assert abbreviation in header and abbreviation in legend
    assert "per replica (tp x pp GPUs)" in legend["batch"]
    assert "per replica (tp x pp GPUs" in r.assumptions["batching"]


def test_no_fit_blames_the_tpot_target_not_memory():
    """Llama-3.1-70B on 40 GB A100s at 5 ms per token: layouts of 4-8 GPUs hold the model, so memory
    does not rule everything out; the TPOT target does. By hand: a decode step reads every weight
    once, 70.6e9 parameters x 2 bytes / 8 GPUs at 1.555 TB/s = 11.3 ms > 5 ms even at batch 1."""
    gpu = get_gpu_config_by_name("a100-sxm-40gb")
    params = 70.6e9
    floor_s = params * 2 / 8 / (gpu.hbm_bandwidth_in_GB_per_sec * 1e9)
    with pytest.raises(NoFeasiblePlanError) as e:
        plan_inference("meta-llama/Llama-3.1-70B", ["a100-sxm-40gb"], {"max_tpot_s": 0.005})
    err = e.value
    assert err.constraint == "tpot"
    assert err.value >= floor_s > err.limit == 0.005
    assert "Binding constraint: tpot" in str(err) and "fits in memory" in str(err)
    assert err.layout["tp"] * err.layout["pp"] >= 4  # a layout that holds the weights (141 GB over 40 GB GPUs)
    code, line = plan_infer_command("meta-llama/Llama-3.1-70B", "a100-sxm-40gb", max_tpot=0.005)
    assert code == 2 and "\n" not in line and "Binding constraint: tpot" in line
    assert line.index("tpot") < line.index("memory")


def test_no_fit_names_memory_when_nothing_fits():
    m = get_model_config_by_name("meta-llama/Llama-3.1-70B")
    assert m.name
    with pytest.raises(NoFeasiblePlanError) as e:
        plan_inference("meta-llama/Llama-3.1-70B", ["a100-sxm-40gb"], {"max_tpot_s": 0.05}, max_gpus=1)
    assert e.value.constraint == "memory" and "Binding constraint: memory" in str(e.value)


def test_the_table_says_whether_its_times_are_expected_or_lower_bounds():
    """A roofline plan's MFU near 1 must not read as a forecast (issue 28: `plan train` printed MFU 0.964
    with no caveat): the table says which model timed it."""
    from llm_analysis.planner.training import plan_training
    kw = dict(tokens=1e9, max_gpus=8, global_batch_size=8, seq_len=1024)
    bound = plan_training("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], perf_model="roofline", **kw).table()
    expected = plan_training("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], perf_model="calibrated", **kw).table()
    assert "times: lower bounds" in bound and "times: expected" not in bound
    assert "times: expected" in expected and "times: lower bounds" not in expected


def test_a_price_for_no_searched_gpu_is_refused_by_name():
    """--gpu_prices h100=2 (a name of three boards) or a price for a GPU the plan does not search had been dropped
    without a word, every $/Mtok left blank; a price under an alias of a searched GPU counts for it."""
    import pytest
    from llm_analysis.errors import ConfigError
    from llm_analysis.planner import plan_inference
    for prices, named in (({"h100": 2.0}, "'h100'"), ({"a100-sxm-80gb": 2.0}, "not a GPU this plan searches")):
        with pytest.raises(ConfigError) as err:
            plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], gpu_prices=prices, objective="cost")
        assert named in str(err.value) and "gpu_prices" in str(err.value)
    plan = plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], gpu_prices={"h100-sxm": 2.0}, objective="cost")
    assert plan.assumptions["gpu_prices_per_hour"] == {"h100-sxm-80gb": 2.0}
