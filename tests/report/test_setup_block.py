"""The JSON's `setup` block says what the run used, consistently with the summary's top-level keys.

Under the calibrated model the summary's `flops_efficiency` / `hbm_memory_efficiency` are the profile's (what the
times reach) and the constructor's go under `lower_bound_*`; `setup` had stated the constructor's under the plain
names (1.0 beside a top-level 0.83), and the file names read `fe1-hbme1`. Expected values: the law "a key that
`setup` and the top level both hold has one value", and the constructor's inputs as this test passes them."""

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.report.render import output_file_stem, summary_with_setup, to_json

import json

# constructor inputs the lower bounds run at: values the profiles never hold, so a setup echoing them under the
# plain names (the run's efficiency) is told apart from one stating the profile's
FE_GIVEN, HBME_GIVEN = 0.61, 0.93


def _analysis(perf_model, model="meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", dp=1):
    return LLMAnalysis(get_model_config_by_name(model), get_gpu_config_by_name(gpu),
                       get_dtype_config_by_name("w16a16e16"), ParallelismConfig(dp_size=dp),
                       flops_efficiency=FE_GIVEN, hbm_memory_efficiency=HBME_GIVEN, perf_model=perf_model)


def _infer(a):
    return a.inference(batch_size_per_gpu=8, seq_len=2048, num_tokens_to_generate=256)


def _train(a):
    return a.training(batch_size_per_gpu=1, global_batch_size=8, seq_len=2048, ds_zero=3)


@pytest.mark.parametrize("perf_model", ["calibrated", "roofline"])
@pytest.mark.parametrize("run", [_infer, _train], ids=["inference", "training"])
def test_setup_agrees_with_the_top_level_keys(perf_model, run, quiet_package_warnings):
    a = _analysis(perf_model, dp=8 if run is _train else 1)
    doc = json.loads(to_json(summary_with_setup(a, run(a))))
    setup = doc["setup"]
    shared = [k for k in setup if k in doc]
    assert {"flops_efficiency", "hbm_memory_efficiency"} <= set(shared)
    assert {k: setup[k] for k in shared} == {k: doc[k] for k in shared}
    assert setup["perf_model"] == perf_model
    if perf_model == "calibrated":
        # the constructor's inputs, named as what they are: the roofline lower bound's
        assert (setup["lower_bound_flops_efficiency"], setup["lower_bound_hbm_memory_efficiency"]) == \
            (FE_GIVEN, HBME_GIVEN)
        assert setup["flops_efficiency"] != FE_GIVEN  # the profile's plateau, which the times use
    else:
        assert (setup["flops_efficiency"], setup["hbm_memory_efficiency"]) == (FE_GIVEN, HBME_GIVEN)


def test_a_serve_answer_setup_does_not_state_the_lower_bound_efficiency_as_the_runs(quiet_package_warnings):
    """serve()'s answer has no top-level efficiencies: its setup under the calibrated model still states the
    profile's (those an inference of the same analysis states), the constructor's as lower_bound_*."""
    a = _analysis("calibrated")
    setup = summary_with_setup(a, {"perf_model": "calibrated"})["setup"]
    expected = _infer(a)
    assert setup["flops_efficiency"] == expected["flops_efficiency"] != FE_GIVEN
    assert setup["hbm_memory_efficiency"] == expected["hbm_memory_efficiency"] != HBME_GIVEN
    assert setup["lower_bound_flops_efficiency"] == FE_GIVEN


def test_file_names_keep_the_mirrored_convention_under_both_models(quiet_package_warnings):
    """The mirrored convention fe<..>-hbme<..> (the constructor's arguments) under both models, so that scripts
    find the files by the same names; the calibrated run's files add -calibrated (and do not overwrite the
    roofline's)."""
    roof, cal = _analysis("roofline"), _analysis("calibrated")
    assert f"-fe{FE_GIVEN:g}-hbme{HBME_GIVEN:g}-inference" in output_file_stem(roof, "inference")
    assert f"-fe{FE_GIVEN:g}-hbme{HBME_GIVEN:g}-calibrated-inference" in output_file_stem(cal, "inference")
