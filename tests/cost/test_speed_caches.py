"""The speed work must not change what a call returns.

Per-phase results are cached per describer (`LayerDescriber.phase_memo`), so
these tests check that a result never depends on the calls made before it (same
numbers as a fresh analysis, in any order, even after the caller edits a
returned breakdown), that every `update_*` method drops what it invalidates, and
that layer counts are grouped without visiting the layers one by one."""

from __future__ import annotations

import random

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name, list_model_configs)
from llm_analysis.errors import DoesNotFitError
import llm_analysis.model.records as records

# this module's analyses warn of nothing its tests check (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("quiet_package_warnings")

A100_40 = get_gpu_config_by_name("a100-sxm-40gb")
H100 = get_gpu_config_by_name("h100-sxm-80gb")
BF16 = get_dtype_config_by_name("w16a16e16")

SETUPS = [  # dense tied (OPT), sliding window (Gemma 2), MoE with EP, pipeline
    ("facebook_opt-1.3b", A100_40, dict(tp_size=2)),
    ("google_gemma-2-9b", H100, dict(tp_size=2, sp_size=2)),
    ("mistralai_Mixtral-8x7B-v0.1", H100, dict(tp_size=2, dp_size=4, ep_size=4)),
    ("meta-llama_Llama-3.1-8B", H100, dict(tp_size=2, pp_size=2, dp_size=2)),
]

CALLS = [
    ("inference", dict(batch_size_per_gpu=4, seq_len=512, num_tokens_to_generate=128)),
    ("inference", dict(batch_size_per_gpu=1, seq_len=1500, num_tokens_to_generate=300)),
    ("inference", dict(batch_size_per_gpu=4, seq_len=512, num_tokens_to_generate=128, kv_cache_dtype_bytes=1)),
    ("inference", dict(batch_size_per_gpu=2, seq_len=512, num_tokens_to_generate=16, use_kv_cache=False)),
    ("inference", dict(batch_size_per_gpu=2, seq_len=256, num_tokens_to_generate=8, ds_zero=3)),
    ("training", dict(batch_size_per_gpu=1, seq_len=512, gradient_accumulation_steps=4, total_num_tokens=1e9)),
    ("training", dict(batch_size_per_gpu=2, seq_len=1024, gradient_accumulation_steps=2, activation_recomputation=2,
                      ds_zero=1)),
    ("training", dict(batch_size_per_gpu=1, seq_len=512, gradient_accumulation_steps=2, ds_zero=3,
                      activation_recomputation=4, overlap_tp_comm=True)),
    ("training", dict(batch_size_per_gpu=1, seq_len=512, gradient_accumulation_steps=2,
                      lora=dict(rank=8, target_modules=["q_proj", "v_proj"]))),
]


def _analysis(name, gpu, par):
    return LLMAnalysis(get_model_config_by_name(name), gpu, BF16, ParallelismConfig(**par))


def _call(a, method, kw):
    try:
        return getattr(a, method)(**kw)
    except DoesNotFitError as e:  # the message carries the numbers
        return str(e)


@pytest.mark.parametrize("name,gpu,par", SETUPS)
def test_results_do_not_depend_on_call_history(name, gpu, par):
    fresh = [_call(_analysis(name, gpu, par), m, kw) for m, kw in CALLS]
    shared = _analysis(name, gpu, par)
    order = list(range(len(CALLS))) * 2
    random.Random(12).shuffle(order)
    for i in order:
        got = _call(shared, *CALLS[i])
        assert got == fresh[i], CALLS[i]
        if isinstance(got, dict):  # a caller editing what it got must not change the next answer
            for key in ("prefill_latency_breakdown", "decode_latency_breakdown"):
                for group in got.get(key, {}).values():
                    group["latency_s"] = -1.0
            got["notes"] = None


def test_update_methods_drop_cached_results():
    name = "meta-llama_Llama-3.1-8B"
    kw = dict(batch_size_per_gpu=4, seq_len=512, num_tokens_to_generate=64)
    a = LLMAnalysis(get_model_config_by_name(name), H100, BF16, ParallelismConfig(tp_size=2))
    a.inference(**kw)
    a.training(batch_size_per_gpu=1, seq_len=512, gradient_accumulation_steps=2)
    updates = [
        ("update_gpu_config", get_gpu_config_by_name("a100-sxm-80gb"), "gpu_config"),
        ("update_parallelism_config", ParallelismConfig(tp_size=4), "parallelism_config"),
        ("update_dtype_config", get_dtype_config_by_name("w8a16e16"), "dtype_config"),
        ("update_model_config", get_model_config_by_name("meta-llama_Llama-3.2-3B"), "model_config"),
    ]
    for method, value, field in updates:
        getattr(a, method)(value)
        ref = LLMAnalysis(a.model_config, a.gpu_config, a.dtype_config, a.parallelism_config,
                          flops_efficiency=a.flops_efficiency, hbm_memory_efficiency=a.hbm_memory_efficiency)
        assert getattr(a, field) is value
        assert a.inference(**kw) == ref.inference(**kw), method
        train = dict(batch_size_per_gpu=1, seq_len=512, gradient_accumulation_steps=2)
        assert _call(a, "training", train) == _call(ref, "training", train), method
    before = a.inference(**kw)["prefill_latency"]
    a.update_float_efficiency(0.5)
    a.update_hbm_memory_efficiency(0.5)
    ref = LLMAnalysis(a.model_config, a.gpu_config, a.dtype_config, a.parallelism_config, flops_efficiency=0.5,
                      hbm_memory_efficiency=0.5)
    assert a.inference(**kw) == ref.inference(**kw)
    assert a.inference(**kw)["prefill_latency"] > before  # halving both rates slows the prefill


def _layer_by_layer(model, start, end):
    groups = {}
    for k in records.layer_kinds(model)[start:end]:
        groups[k] = groups.get(k, 0) + 1
    return list(groups.items())


def _models_with_moe_variants():
    for name in list_model_configs():
        m = get_model_config_by_name(name)
        yield m
        if m.is_moe:  # dense first layers and every k-th MoE layer, as DeepSeek / Llama 4 lay them out
            for first, freq in ((1, 1), (3, 2), (0, 3), (2, 4)):
                yield m.model_copy(update={"moe_first_dense_layers": first, "moe_layer_freq": freq})


def test_layer_groups_match_counting_layer_by_layer():
    checked = 0
    for m in _models_with_moe_variants():
        assert list(records.layer_groups(m).items()) == _layer_by_layer(m, 0, m.num_layers), m.name
        for pp in range(1, min(m.num_layers, 7) + 1):
            base, extra = divmod(m.num_layers, pp)
            starts = [s * base + min(s, extra) for s in range(pp + 1)]
            expected = [_layer_by_layer(m, starts[s], starts[s + 1]) for s in range(pp)]
            assert [list(g.items()) for g in records.stage_layer_groups(m, pp)] == expected, (m.name, pp)
        checked += 1
    assert checked > 80


def test_300k_identical_layers_are_never_visited_one_by_one(monkeypatch):
    def refuse(model):
        raise AssertionError("layer_kinds walks every layer")
    monkeypatch.setattr(records, "layer_kinds", refuse)
    opt = get_model_config_by_name("facebook_opt-1.3b")
    big_gpu = A100_40.model_copy(update={"mem_per_GPU_in_GB": 1e9})
    n_layers = 300_000
    small = LLMAnalysis(opt, big_gpu)
    big = LLMAnalysis(opt.model_copy(update={"num_layers": n_layers}), big_gpu, parallelism_config=ParallelismConfig(
        pp_size=3))
    # OPT layer, h = 2048: q, k, v, out projections with biases 4(h^2 + h); fc1 h x 4h + 4h and
    # fc2 4h x h + h; two LayerNorms with weight and bias 4h: 12h^2 + 13h = 50,358,272
    h = 2048
    assert 12 * h * h + 13 * h == 50_358_272
    assert big.get_num_params_total() - small.get_num_params_total() == (n_layers - opt.num_layers) * 50_358_272
    assert big.inference(batch_size_per_gpu=1, seq_len=64, num_tokens_to_generate=4)["total_latency"] > 0
    assert big.training(batch_size_per_gpu=1, seq_len=64, gradient_accumulation_steps=4)["latency_per_iter"] > 0


def test_cached_training_options_still_validate_each_call():
    # training() keeps validated options per argument values and their types: a value equal to a
    # cached valid one but of another type (True == 1) must still be checked on its own
    from llm_analysis.errors import ConfigError
    a = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), get_gpu_config_by_name("a100-sxm-80gb"),
                    get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=2, dp_size=2))
    kw = dict(batch_size_per_gpu=1, seq_len=256, total_num_tokens=1e9, gradient_accumulation_steps=1)
    assert a.training(ds_zero=1, **kw)["ds_zero"] == 1
    with pytest.raises(ConfigError, match="ds_zero = True"):
        a.training(ds_zero=True, **kw)
    lora = {"rank": 8, "target_modules": ["q_proj", "v_proj"]}  # a dict: unhashable, validated every call
    first = a.training(lora=lora, **kw)
    assert a.training(lora=dict(lora), **kw) == first
    with pytest.raises(ConfigError, match="target_modules"):
        a.training(lora={"rank": 8, "target_modules": ["no_such_proj"]}, **kw)


def test_unknown_training_argument_is_the_same_type_error_under_both_models():
    # the calibrated path validates its arguments without calling run_training: an argument
    # training() does not take raises the same error under both models, naming training() (the
    # caller's function, not the internal run_training) and the valid keywords
    msgs = []
    for pm in ("roofline", "calibrated"):
        a = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), get_gpu_config_by_name("a100-sxm-80gb"),
                        perf_model=pm)
        with pytest.raises(TypeError) as e:
            a.training(batch_size_per_gpu=1, seq_len=256, no_such_option=3)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "no_such_option" in msgs[0]
    assert msgs[0].startswith("training() got an unexpected keyword argument") and "valid keywords:" in msgs[0]


def test_calibrated_per_analysis_entries_follow_updates():
    """The entries a calibrated summary computes once per analysis (the rates beside the lower
    bounds, the profile's notes, the active parameters without the input embedding) follow every
    update: after update_float_efficiency / update_gpu_config / update_model_config a call returns
    what a fresh analysis with those inputs returns."""
    kw = dict(batch_size_per_gpu=2, seq_len=300, num_tokens_to_generate=20)
    a = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), A100_40, BF16, ParallelismConfig(tp_size=2),
                    perf_model="calibrated")
    a.inference(**kw), a.training(batch_size_per_gpu=1, seq_len=256, gradient_accumulation_steps=1)
    a.update_float_efficiency(0.5)
    fresh = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), A100_40, BF16, ParallelismConfig(tp_size=2),
                        perf_model="calibrated", flops_efficiency=0.5)
    got, want = a.inference(**kw), fresh.inference(**kw)
    assert got["lower_bound_flops_efficiency"] == want["lower_bound_flops_efficiency"] == 0.5
    assert got["lower_bound_tflops"] == want["lower_bound_tflops"]
    a.update_gpu_config(get_gpu_config_by_name("l40s-48gb"))  # (a profile derived from another GPU: a note)
    a.update_model_config(get_model_config_by_name("meta-llama_Llama-3.2-3B"))
    fresh = LLMAnalysis(get_model_config_by_name("meta-llama_Llama-3.2-3B"), get_gpu_config_by_name("l40s-48gb"),
                        BF16, ParallelismConfig(tp_size=2), perf_model="calibrated", flops_efficiency=0.5)
    for method, call in (("inference", kw), ("training", dict(batch_size_per_gpu=1, seq_len=256,
                                                                gradient_accumulation_steps=1))):
        got, want = getattr(a, method)(**call), getattr(fresh, method)(**call)
        for key in ("notes", "flops_efficiency", "hbm_memory_efficiency", "lower_bound_tflops",
                    "lower_bound_memory_bandwidth_GBs", "num_active_params_without_input_embedding"):
            assert got[key] == want[key], (method, key)
