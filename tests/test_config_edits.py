"""An analysis follows assignments to the fields of the configuration objects it was built on
(`analysis.model_config.num_layers = 48`), as the mirrored system does (it reads its configurations
at every call): before, the operator description and cost model kept the values read at construction
and every later call printed the old numbers without a word."""

import copy
import gc
import weakref

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.errors import ConfigError


def _opt(tp=1):
    return LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), get_gpu_config_by_name("a100-sxm-40gb"),
                       get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=tp))


def _same_values_fresh(a):
    """A new analysis on copies of `a`'s configurations as they are now."""
    return LLMAnalysis(a.model_config.model_copy(deep=True), a.gpu_config.model_copy(deep=True),
                       a.dtype_config.model_copy(deep=True), a.parallelism_config.model_copy(deep=True))


def test_more_layers_add_the_hand_counted_opt_layer():
    # an OPT decoder layer (hidden h, FFN 4h): q, k, v, o with biases 4h^2 + 4h; fc1, fc2 with biases
    # 8h^2 + 4h + h; two LayerNorms 4h -> 12 h^2 + 13 h per layer
    a = _opt()
    h = a.model_config.hidden_dim
    before = a.get_num_params_total()
    a.model_config.num_layers += 24
    assert a.get_num_params_total() - before == 24 * (12 * h * h + 13 * h)


@pytest.mark.parametrize("edit", ["tp", "bandwidth", "weight_bits"])
def test_an_edited_analysis_answers_as_a_new_one_on_the_same_values(edit):
    a = _opt()
    a.inference(batch_size_per_gpu=2, seq_len=128, num_tokens_to_generate=8)  # (everything built and cached)
    a.training(batch_size_per_gpu=1, seq_len=128, total_num_tokens=1e6)
    if edit == "tp":
        a.parallelism_config.tp_size = 2
    elif edit == "bandwidth":
        a.gpu_config.hbm_bandwidth_in_GB_per_sec /= 2
    else:
        a.dtype_config.weight_bits = 8
    got = a.inference(batch_size_per_gpu=2, seq_len=128, num_tokens_to_generate=8)
    fresh = _same_values_fresh(a)  # (after the call: with what the configurations derive from the edit, sp_size)
    want = fresh.inference(batch_size_per_gpu=2, seq_len=128, num_tokens_to_generate=8)
    for key in ("total_latency", "prefill_latency", "weight_memory_per_gpu", "kv_cache_memory_per_gpu"):
        assert got[key] == pytest.approx(want[key], rel=1e-12), key
    got = a.training(batch_size_per_gpu=1, seq_len=128, total_num_tokens=1e6)
    want = fresh.training(batch_size_per_gpu=1, seq_len=128, total_num_tokens=1e6)
    assert got["latency_per_iter"] == pytest.approx(want["latency_per_iter"], rel=1e-12)


def test_decode_bound_by_memory_slows_by_the_bandwidth_ratio():
    # one sequence decoding: every step streams the weights, memory-bound: halving the HBM bandwidth
    # doubles each step's weight-streaming time (the roofline's memory term is bytes / bandwidth)
    a = _opt()
    before = a.inference(batch_size_per_gpu=1, seq_len=16, num_tokens_to_generate=64)
    a.gpu_config.hbm_bandwidth_in_GB_per_sec /= 2
    after = a.inference(batch_size_per_gpu=1, seq_len=16, num_tokens_to_generate=64)
    assert after["decode_latency"] / before["decode_latency"] == pytest.approx(2.0, rel=0.02)


def test_an_invalid_value_is_refused_naming_the_field_and_a_valid_one_accepted_again():
    a = _opt()
    a.model_config.num_layers = -3
    with pytest.raises(ConfigError, match=r"num_layers.*-3.*positive"):
        a.inference(batch_size_per_gpu=1, seq_len=16, num_tokens_to_generate=4)
    a.model_config.num_layers = 24
    assert a.get_num_params_total() == _same_values_fresh(a).get_num_params_total()
    a.parallelism_config.tp_size = 3  # 32 heads over 3 GPUs
    with pytest.raises(ConfigError, match="tp_size = 3 must divide n_head = 32"):
        a.get_num_params_total()


def test_several_assignments_through_an_invalid_state_are_followed_once_done():
    # 2048 / 24 heads is no integer head width: valid again once hidden_dim is 24 x 64
    a = _opt()
    a.model_config.n_head = 24
    a.model_config.num_key_value_heads = 24
    a.model_config.hidden_dim = 24 * 64
    a.model_config.head_dim = 64
    assert a.get_num_params_total() == _same_values_fresh(a).get_num_params_total()


def test_a_vision_tower_edit_reaches_the_model_count():
    # a SigLIP encoder layer (hidden h, FFN f): q, k, v, o with biases 4h^2 + 4h; fc1, fc2 with biases
    # 2hf + f + h; two LayerNorms with biases 4h
    m = get_model_config_by_name("google_gemma-3-4b-pt")
    a = LLMAnalysis(m, "h100-sxm-80gb", "w16a16e16")
    before = a.get_num_params_total()
    tower = m.vision_tower
    tower.num_layers += 1
    h, f = tower.hidden_dim, tower.ffn_embed_dim
    assert a.get_num_params_total() - before == 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h


def test_an_edit_of_another_object_rebuilds_nothing():
    a = _opt()
    describer = a.describer
    other = get_model_config_by_name("facebook_opt-1.3b")
    other.num_layers = 2
    assert a.describer is describer


def test_an_analysis_is_freed_as_before():
    a = _opt()
    gone = weakref.ref(a)
    del a
    gc.collect()
    assert gone() is None


def test_a_deep_copy_follows_its_own_configurations():
    a = _opt()
    h = a.model_config.hidden_dim
    b = copy.deepcopy(a)
    before = a.get_num_params_total()
    b.model_config.num_layers += 1
    assert b.get_num_params_total() - before == 12 * h * h + 13 * h  # (as test_more_layers_...)
    assert a.get_num_params_total() == before  # the original's configuration is not the copy's


def test_a_script_exits_without_noise_from_the_watch(tmp_path):
    # analyses built in a loop and left to the interpreter's exit: the edit watch holds no weakref callback
    # that runs during shutdown ("Exception ignored in: <function WeakMethod.__new__.<locals>._cb>" before)
    import subprocess
    import sys
    script = tmp_path / "loop.py"
    script.write_text(
        "from llm_analysis.analysis import LLMAnalysis\n"
        "from llm_analysis.config import ParallelismConfig\n"
        "from llm_analysis.schema.options import ActivationRecomputation as AR\n"
        "for tp, sp in [(1, 1), (8, 1), (8, 8)]:\n"
        "    a = LLMAnalysis('megatron-lm-175b', 'a100-sxm-80gb', 'w16a16e16', ParallelismConfig(tp_size=tp, sp_size=sp))\n"
        "    mc = a.model_config\n"  # (a configuration still held by a module global at exit)
        "    for rc in [AR.NONE, AR.ATTN_COMPUTE, AR.FULL]:\n"
        "        print(a.get_activation_memory_per_layer(1, 2048, is_inference=False, activation_recomputation=rc,\n"
        "                                                layernorm_dtype_bytes=2, flash_attn=False, softmax_dropout=True))\n")
    import os
    from pathlib import Path
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))  # (this checkout's package)
    for _ in range(3):
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr
        assert "Exception ignored" not in r.stderr, r.stderr


@pytest.mark.parametrize("model, before, after", [
    ("mistralai/Mixtral-8x7B-v0.1", 2, 4),  # experts split moe_tp_size = tp_size ways, derived at construction
    ("meta-llama/Llama-2-70b-hf", 8, 4),
    ("NousResearch_Llama-2-7b-hf", 1, 4),   # sequence parallelism: sp_size = tp_size, derived too
])
def test_a_tp_size_edit_derives_what_the_constructor_derives(model, before, after):
    a = LLMAnalysis(model, "h100-sxm-80gb", "w16a16e16", ParallelismConfig(tp_size=before))
    a.inference(batch_size_per_gpu=2, seq_len=256, num_tokens_to_generate=8)
    a.parallelism_config.tp_size = after
    got = a.inference(batch_size_per_gpu=2, seq_len=256, num_tokens_to_generate=8)
    fresh = LLMAnalysis(model, "h100-sxm-80gb", "w16a16e16", ParallelismConfig(tp_size=after))
    want = fresh.inference(batch_size_per_gpu=2, seq_len=256, num_tokens_to_generate=8)
    assert got["time_per_output_token"] == pytest.approx(want["time_per_output_token"], rel=1e-12)
    assert got["weight_memory_per_gpu"] == pytest.approx(want["weight_memory_per_gpu"], rel=1e-12)
    p = a.parallelism_config
    assert (p.sp_size, p.moe_tp_size, p.moe_ep_size) == (after, after, 1)


def test_an_edit_of_a_default_layout_or_dtype_stays_in_its_analysis():
    # Python evaluates a default argument once: an analysis built without a layout or data type that
    # handed out that one object would pass an edit of it to every later analysis (and to the planner's).
    # Hand count: an analysis built afterwards still has tp_size 1 and 16-bit weights, so its weight memory
    # is its parameter count x 2 bytes, whatever the first analysis was edited to.
    a = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), get_gpu_config_by_name("a100-sxm-40gb"))
    a.parallelism_config.tp_size = 2
    a.dtype_config.weight_bits = 8
    b = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), get_gpu_config_by_name("a100-sxm-40gb"))
    assert (b.parallelism_config.tp_size, b.dtype_config.weight_bits) == (1, 16)
    assert b.get_weight_memory_per_gpu() == 2 * b.get_num_params_total()
    # the edited analysis follows its own edit: 8-bit weights over 2 GPUs (tp splits all but norms/embeddings)
    assert a.get_weight_memory_per_gpu() < b.get_weight_memory_per_gpu() / 3
