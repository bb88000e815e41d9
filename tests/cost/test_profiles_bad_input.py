"""Bad calibration profiles (issue 27, "Bad input"): a missing GPU entry, an unknown key, an
efficiency below 0 or above 1, a table that is not monotone where it must be: one
ConfigError naming the file, the key and the value. A GPU or dtype with no measured data
is answered with a stated fallback, never an exception."""

from __future__ import annotations

import json
import math

import pytest

import llm_analysis.cost.profiles as profiles
from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_dtype_config_by_name, get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.cost.profiles import KINDS, PARAMETERS, load_profile
from llm_analysis.errors import ConfigError

MODEL = get_model_config_by_name("Qwen_Qwen3-0.6B")
A100 = get_gpu_config_by_name("a100-sxm-80gb")


def _write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def _ampere(**changes):
    doc = load_profile("ampere").to_dict()
    doc.update(changes)
    return doc


def _with_param(key, value):
    doc = _ampere()
    doc["parameters"][key] = {"value": value, "source": "test"}
    return doc


def _refused(tmp_path, doc, *fragments, name="bad.json"):
    with pytest.raises(ConfigError) as e:
        load_profile(_write(tmp_path, name, doc))
    message = str(e.value)
    assert "\n" not in message
    for fragment in (name, *fragments):
        assert fragment in message, (fragment, message)


# ---------------------------------------------------------------- the file's shape
def test_missing_or_empty_gpus_entry(tmp_path):
    doc = _ampere()
    del doc["gpus"]
    _refused(tmp_path, doc, "'gpus'", "None")
    _refused(tmp_path, _ampere(gpus={}), "'gpus'", "{}", name="empty.json")


def test_gpu_entry_without_sms_or_not_an_object(tmp_path):
    _refused(tmp_path, _ampere(gpus={"a100-sxm-80gb": {}}), "a100-sxm-80gb", "num_sms", "None")
    _refused(tmp_path, _ampere(gpus={"a100-sxm-80gb": 108}), "a100-sxm-80gb", "108", name="int.json")
    _refused(tmp_path, _ampere(gpus={"a100-sxm-80gb": {"num_sms": 108, "clock": 1}}), "'clock'", name="key.json")


def test_profile_for_another_gpu_names_the_field_and_the_gpu(tmp_path):
    path = _write(tmp_path, "h100only.json", _ampere(gpus={"h100-sxm-80gb": {"num_sms": 132}}))
    with pytest.raises(ConfigError, match="h100only.json.*'gpus'.*a100-sxm-80gb"):
        LLMAnalysis(MODEL, A100, perf_model=path)


def test_unknown_keys(tmp_path):
    _refused(tmp_path, _ampere(tuning="fast"), "'tuning'")
    _refused(tmp_path, _with_param("warp_magic", 1.0), "'warp_magic'", name="param.json")


# ---------------------------------------------------------------- values by kind
@pytest.mark.parametrize("key", [k for k, (kind, _) in PARAMETERS.items() if kind == "efficiency"])
def test_an_efficiency_is_refused_below_zero_and_above_one(tmp_path, key):
    _refused(tmp_path, _with_param(key, -0.1), key, "-0.1")
    _refused(tmp_path, _with_param(key, 1.2), key, "1.2", "0 < v <= 1", name="above.json")
    load_profile(_write(tmp_path, "one.json", _with_param(key, 1.0)))  # exactly the spec: allowed


def test_ratios_may_exceed_one(tmp_path):
    """NVLink SHARP's all-reduce bus bandwidth above the line rate (1.067 on 8 H100, the
    shipped Hopper value) and a tree faster than the ring are ratios, not efficiencies."""
    assert PARAMETERS["nvls_busbw_factor"][0] == "ratio0" and PARAMETERS["tree_bw_factor"][0] == "ratio"
    assert load_profile("hopper").values["nvls_busbw_factor"] > 1
    assert load_profile(_write(tmp_path, "tree.json", _with_param("tree_bw_factor", 1.1))).tree_bw_factor == 1.1
    _refused(tmp_path, _with_param("tree_bw_factor", -1), "'tree_bw_factor'", "-1", name="neg.json")


def test_every_parameter_has_a_kind_and_every_shipped_efficiency_is_at_most_one():
    for key, (kind, _) in PARAMETERS.items():
        assert kind in KINDS or kind == "tiles", key
    for gen in profiles.list_generations():
        p = load_profile(gen)
        for key, value in p.values.items():
            if PARAMETERS[key][0] == "efficiency":
                assert 0 < value <= 1, (gen, key, value)


def test_a_ratio_times_its_efficiency_stays_below_one(tmp_path):
    doc = _with_param("hbm_efficiency", 0.9)
    doc["parameters"]["weight_only_int8_stream_factor"] = {"value": 1.5, "source": "test"}
    _refused(tmp_path, doc, "'weight_only_int8_stream_factor'", "1.5", "'hbm_efficiency'")


def test_non_number_value(tmp_path):
    _refused(tmp_path, _with_param("hbm_efficiency", "0.8"), "'hbm_efficiency'", "'0.8'")
    _refused(tmp_path, _with_param("hbm_efficiency", True), "'hbm_efficiency'", "True", name="bool.json")


# ---------------------------------------------------------------- monotone tables
def test_tile_table_must_not_rise_as_tiles_shrink(tmp_path):
    """A smaller threadblock tile reuses each operand over fewer outputs (gemm.py): its
    relative efficiency may not exceed a larger tile's."""
    rising = [[128, 256, 0.8], [64, 64, 0.9]]
    _refused(tmp_path, _with_param("gemm_tile_shapes", rising), "'gemm_tile_shapes'", "[64, 64, 0.9]")
    _refused(tmp_path, _with_param("gemm_tile_shapes", [[128, 0, 1.0]]), "'gemm_tile_shapes'", name="zero.json")
    ok = [[128, 256, 1.0], [256, 128, 1.0], [64, 64, 0.7]]  # equal areas in any order
    assert load_profile(_write(tmp_path, "ok.json", _with_param("gemm_tile_shapes", ok))).gemm_tile_shapes[2][2] == 0.7


def test_every_shipped_tile_table_is_monotone():
    for gen in profiles.list_generations():
        tiles = load_profile(gen).gemm_tile_shapes
        for big in tiles:
            for small in tiles:
                if big[0] * big[1] > small[0] * small[1]:
                    assert big[2] >= small[2], (gen, big, small)


# ---------------------------------------------------------------- derived profiles
def test_derived_profile_refusals(tmp_path):
    gpus = {"a100-sxm-80gb": {"num_sms": 108}}
    _refused(tmp_path, {"generation": "x", "derived_from": "pascal", "fallback": "f", "gpus": gpus},
             "'derived_from'", "'pascal'")
    _refused(tmp_path, {"generation": "x", "derived_from": "ampere", "gpus": gpus}, "'fallback'", "None",
             name="nofallback.json")
    _refused(tmp_path, dict(_ampere(), fallback="assumed"), "'fallback'", "'derived_from'", name="stray.json")
    _refused(tmp_path, {"generation": "x", "derived_from": "blackwell-ultra", "fallback": "f", "gpus": gpus},
             "'blackwell-ultra'", name="chain.json")
    _refused(tmp_path, {"generation": "x", "derived_from": "ampere", "fallback": "f", "gpus": gpus,
                        "parameters": {"hbm_efficiency": {"value": 3, "source": "t"}}}, "'hbm_efficiency'", "3",
             name="override.json")


def test_derived_profile_is_its_base_with_its_own_values(tmp_path):
    doc = {"generation": "ampere-like", "derived_from": "ampere", "fallback": "assumed: Ampere's efficiencies",
           "gpus": {"a100-sxm-80gb": {"num_sms": 108}},
           "parameters": {"hbm_efficiency": {"value": 0.5, "source": "test"}}}
    p = load_profile(_write(tmp_path, "derived.json", doc))
    base = load_profile("ampere")
    assert p.values == {**base.values, "hbm_efficiency": 0.5}
    assert p.fallback == "assumed: Ampere's efficiencies" and p.derived_from == "ampere"
    assert p.sources["gemm_plateau_efficiency"] == "ampere.json: " + base.sources["gemm_plateau_efficiency"]


def test_a_gpu_listed_by_two_profiles_is_refused(tmp_path, monkeypatch):
    for name in ("one", "two"):
        (tmp_path / f"{name}.json").write_text(json.dumps(dict(_ampere(), generation=name)))
    monkeypatch.setattr(profiles, "PROFILE_DIR", tmp_path)
    profiles._gpu_to_generation.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"two.json: gpus\['a100-.*is also listed by one.json"):
            profiles.generation_of("a100-sxm-80gb")
    finally:
        profiles._gpu_to_generation.cache_clear()
        load_profile.cache_clear()


# ---------------------------------------------------------------- no measured data: a stated fallback
def test_a_gpu_no_profile_lists_gets_the_nearest_in_spec_with_a_note():
    """A user's GPU with an A100-SXM-80GB's spec sheet under another name: the calibrated model
    answers (no exception) with that GPU's profile and SM count, so the times are the A100's
    to the last bit, and the notes say what stands in."""
    mine = A100.model_copy(update={"name": "my-a100"})
    kw = dict(batch_size_per_gpu=2, seq_len=256, num_tokens_to_generate=16)
    got = LLMAnalysis(MODEL, mine, perf_model="calibrated").inference(**kw)
    want = LLMAnalysis(MODEL, A100, perf_model="calibrated").inference(**kw)
    assert got["total_latency"] == want["total_latency"] and got["prefill_latency"] == want["prefill_latency"]
    note = [n for n in got["notes"] if "no calibration profile lists GPU 'my-a100'" in n]
    assert len(note) == 1 and "a100-sxm-80gb" in note[0] and "108" in note[0]
    tr = LLMAnalysis(MODEL, mine, perf_model="calibrated").training(batch_size_per_gpu=1, seq_len=512)
    assert math.isfinite(tr["latency_per_iter"]) and any("my-a100" in n for n in tr["notes"])


def test_nearest_in_spec_prefers_the_same_kind_of_link():
    """An xGMI GPU with an H100's peaks is answered with an AMD profile, not Hopper's."""
    h100 = get_gpu_config_by_name("h100-sxm-80gb")
    mine = h100.model_copy(update={"name": "my-xgmi", "intra_node_link": "xgmi"})
    p = profiles.profile_for_gpu(mine)
    assert p.generation.startswith("cdna") and "my-xgmi" in p.gpus


def test_dtype_without_its_own_gemm_efficiency_is_timed_with_a_note(tmp_path):
    """fp8 on an H100 under a Hopper profile without an fp8 plateau: timed at the 16-bit plateau
    of the fp8 peak (989 x 2 = 1979 TFLOP/s dense), said in the notes; under the shipped Hopper
    profile (its own fp8 plateau) no note. fp8 on an A100 (no fp8 units) runs at the 16-bit
    peak, which the 16-bit plateau describes: no note either."""
    kw = dict(batch_size_per_gpu=2, seq_len=256, num_tokens_to_generate=16)
    fp8 = get_dtype_config_by_name("fp8")
    h100 = get_gpu_config_by_name("h100-sxm-80gb")
    doc = load_profile("hopper").to_dict()
    del doc["parameters"]["gemm_fp8_plateau_efficiency"]
    path = _write(tmp_path, "hopper-no-fp8.json", doc)
    s = LLMAnalysis(MODEL, h100, fp8, perf_model=path).inference(**kw)
    assert math.isfinite(s["total_latency"]) and s["total_latency"] > 0
    note = [n for n in s["notes"] if "no fp8 GEMM efficiency in profile hopper-no-fp8.json" in n]
    assert len(note) == 1 and "1979" in note[0]
    shipped = LLMAnalysis(MODEL, h100, fp8, perf_model="calibrated").inference(**kw)
    assert not any("GEMM efficiency" in n for n in shipped["notes"])
    amp = LLMAnalysis(MODEL, A100, fp8, perf_model="calibrated").inference(**kw)
    assert math.isfinite(amp["total_latency"]) and not any("GEMM efficiency" in n for n in amp["notes"])


def test_fp4_gemms_on_blackwell_say_they_borrow_the_16_bit_plateau(tmp_path):
    """A Blackwell profile without gemm_fp4_plateau_efficiency times FP4 GEMMs at the 16-bit plateau and
    says so; the shipped one has its own (measured NVFP4 GEMMs, issue 27): no note."""
    nvfp4 = get_dtype_config_by_name("w4a4e16-nvfp4")
    b200 = get_gpu_config_by_name("b200-180gb")
    doc = load_profile("blackwell").to_dict()
    del doc["parameters"]["gemm_fp4_plateau_efficiency"]
    path = _write(tmp_path, "blackwell.json", doc)
    kw = dict(batch_size_per_gpu=8, seq_len=512, num_tokens_to_generate=16)
    s = LLMAnalysis(MODEL, b200, nvfp4, perf_model=path).inference(**kw)
    assert math.isfinite(s["total_latency"]) and s["total_latency"] > 0
    assert any("no fp4 GEMM efficiency in profile blackwell.json" in n for n in s["notes"])
    shipped = LLMAnalysis(MODEL, b200, nvfp4, perf_model="calibrated").inference(**kw)
    assert not any("GEMM efficiency" in n for n in shipped["notes"])
