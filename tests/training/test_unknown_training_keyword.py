"""An unknown training() keyword is a TypeError (Python's convention) that names training(), not the internal
run_training(), and says what is valid; a ParallelismConfig field (cp_comm) is pointed to ParallelismConfig(...).
The same message under both performance models (the roofline calls run_training directly).

Expected values from independent sources: training()'s own signature (every named parameter is a valid keyword,
so the list states each), the typos' intended names as a reader spells them, and the law that the pointer works
(ParallelismConfig(cp_comm=...) builds an analysis whose training() runs)."""

import inspect

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig

MODELS = ("roofline", "calibrated")
KW = dict(batch_size_per_gpu=1, seq_len=256)


def _message(perf_model, **bad):
    a = LLMAnalysis("facebook_opt-1.3b", "a100-sxm-80gb", perf_model=perf_model)
    with pytest.raises(TypeError) as err:
        a.training(**KW, **bad)
    return str(err.value)


@pytest.mark.parametrize("perf_model", MODELS)
def test_a_typo_names_training_its_closest_and_the_valid_keywords(perf_model, quiet_package_warnings):
    message = _message(perf_model, seqlen=4)
    assert message.startswith("training() got an unexpected keyword argument 'seqlen'") and "run_training" not in message
    assert "closest: seq_len" in message
    named = [p for p, v in inspect.signature(LLMAnalysis.training).parameters.items()
             if p != "self" and v.kind is not inspect.Parameter.VAR_KEYWORD]
    listed = message.split("valid keywords: ")[1].split(", ")
    assert set(named) <= set(listed)
    # a typo of a layout field points there too
    assert "cp_comm (ParallelismConfig(cp_comm=...))" in _message(perf_model, cpcomm="all_to_all")


@pytest.mark.parametrize("perf_model", MODELS)
def test_a_parallelism_field_points_to_parallelism_config(perf_model, quiet_package_warnings):
    message = _message(perf_model, cp_comm="all_to_all")
    assert message.startswith("training() got an unexpected keyword argument 'cp_comm'")
    assert "ParallelismConfig(cp_comm=...)" in message
    # where the message points, the field is taken
    a = LLMAnalysis("facebook_opt-1.3b", "a100-sxm-80gb", parallelism_config=ParallelismConfig(cp_size=2,
                    cp_comm="all_to_all"), perf_model=perf_model)
    assert a.training(**KW)["latency_per_iter"] > 0


def test_both_models_give_the_same_message(quiet_package_warnings):
    for bad in ({"cpcomm": 1}, {"cp_comm": "all_to_all"}, {"no_such_option": 3}):
        assert _message("roofline", **bad) == _message("calibrated", **bad)
