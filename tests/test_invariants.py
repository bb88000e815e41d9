"""Property-based invariants (issue 13, DESIGN §5) with hypothesis, bounded in time.

Random valid setups (catalogue models of several families, GPUs, dtypes, layouts,
batches, lengths, efficiencies) must give finite, non-negative figures, and the
physics must hold: more batch or more generated tokens never lowers latency or
memory; higher efficiency never raises time; total parameters do not depend on
the layout or the data types; the largest batch fits and one more does not; a
decode step never gets cheaper as the context grows; ZeRO-3 <= 2 <= 1 <= 0 memory
per GPU for dp >= 2. Random invalid inputs end in the package's own errors.

Each property runs a bounded number of examples (`deadline=None`: the first call
of a model pays its description); the whole file stays under ~60 s.
"""

from __future__ import annotations

import math
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.errors import DoesNotFitError, LLMAnalysisError

# small models of distinct families: learned/rotary positions, GQA, MoE, MLA,
# sliding windows, parallel blocks, biases
MODELS = ["gpt2", "facebook_opt-125m", "EleutherAI_gpt-neo-125m", "Qwen_Qwen3-0.6B", "meta-llama_Llama-3.2-1B",
          "google_gemma-2-2b", "mistralai_Mistral-7B-v0.1", "Qwen_Qwen3-30B-A3B", "deepseek-ai_DeepSeek-V2-Lite",
          "EleutherAI_gpt-j-6b", "bigscience_bloom-560m", "openai_gpt-oss-20b"]
GPUS = ["a100-sxm-80gb", "h100-sxm-80gb", "b200-180gb", "mi300x-192gb", "l40s-48gb"]
DTYPES = ["w16a16e16", "w8a16e16", "w4a16e16-g128", "fp8"]

SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)


@lru_cache(maxsize=None)
def _model(name):
    return get_model_config_by_name(name)


@lru_cache(maxsize=None)
def _gpu(name):
    return get_gpu_config_by_name(name)


@lru_cache(maxsize=None)
def _dtype(name):
    return get_dtype_config_by_name(name)


def _analysis(model, gpu="b200-180gb", dtype="w16a16e16", tp=1, pp=1, dp=1, **kw):
    return LLMAnalysis(_model(model), _gpu(gpu), _dtype(dtype), ParallelismConfig(tp_size=tp, pp_size=pp, dp_size=dp),
                       **kw)


def _tp_for(model, tp):
    m = _model(model)
    return tp if m.n_head % tp == 0 and m.num_key_value_heads % tp in (0, tp) else 1


def _numbers(d, path=""):
    """Every number in a (nested) summary."""
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _numbers(v, f"{path}{k}.")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            yield f"{path}{k}", v


def _fits(fn):
    try:
        return fn()
    except DoesNotFitError:
        assume(False)


setup = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS), "gpu": st.sampled_from(GPUS), "dtype": st.sampled_from(DTYPES),
    "tp": st.sampled_from([1, 2, 4]), "batch": st.integers(1, 32), "seq": st.integers(1, 4096),
    "gen": st.integers(1, 256), "eff": st.floats(0.05, 1.0), "hbm": st.floats(0.05, 1.0),
})


def _infer(s, **over):
    s = {**s, **over}
    max_len = _model(s["model"]).max_seq_len
    if max_len is not None:  # beyond it a learned-position model refuses (tested elsewhere)
        s["seq"] = min(s["seq"], max_len // 2)
        s["gen"] = min(s["gen"], max_len // 2)
    a = _analysis(s["model"], s["gpu"], s["dtype"], tp=_tp_for(s["model"], s["tp"]),
                  flops_efficiency=s["eff"], hbm_memory_efficiency=s["hbm"])
    return a.inference(batch_size_per_gpu=s["batch"], seq_len=s["seq"], num_tokens_to_generate=s["gen"])


# -------------------------------------------------------------------- inference
# MLA / gpt-oss sinks / MoE models with a learned-position limit make some random
# setups invalid (encoder-only is not in the list): those end in our errors.
@settings(max_examples=25, **SETTINGS)
@given(setup)
def test_inference_figures_finite_non_negative(s):
    out = _fits(lambda: _infer(s))
    for k, v in _numbers(out):
        if k == "memory_breakdown_per_gpu.free" or k == "memory_left_per_gpu":
            continue  # headroom: non-negative because it fits
        assert math.isfinite(v) and v >= 0, (k, v)
    assert out["memory_left_per_gpu"] >= 0


@settings(max_examples=12, **SETTINGS)
@given(setup, st.integers(1, 32), st.integers(1, 256))
def test_more_batch_or_tokens_never_cheaper(s, more_b, more_n):
    lo = _fits(lambda: _infer(s))
    hi = _fits(lambda: _infer(s, batch=s["batch"] + more_b, gen=s["gen"] + more_n))
    for k in ("total_latency", "prefill_latency", "total_decode_latency", "memory_used_per_gpu",
              "kv_cache_memory_per_gpu", "decode_activation_memory_per_gpu"):
        assert hi[k] >= lo[k] * (1 - 1e-12), (k, lo[k], hi[k])


@settings(max_examples=12, **SETTINGS)
@given(setup, st.floats(0.0, 0.95))
def test_higher_efficiency_never_raises_time(s, frac):
    lo_eff = {k: min(s[k], max(s[k] * (1 - frac), 0.01)) for k in ("eff", "hbm")}
    slow = _fits(lambda: _infer(s, **lo_eff))
    fast = _fits(lambda: _infer(s))
    for k in ("prefill_latency", "time_per_output_token", "total_latency"):
        assert fast[k] <= slow[k] * (1 + 1e-12), (k, slow[k], fast[k])


@settings(max_examples=10, **SETTINGS)
@given(setup, st.integers(1, 100_000))
def test_decode_step_never_cheaper_with_longer_context(s, extra):
    a = _analysis(s["model"], s["gpu"], s["dtype"], tp=_tp_for(s["model"], s["tp"]),
                  flops_efficiency=s["eff"], hbm_memory_efficiency=s["hbm"])
    short = a.weighted_time_s(a.describer.weighted_ops(_phase(s["batch"], s["seq"])))
    long = a.weighted_time_s(a.describer.weighted_ops(_phase(s["batch"], s["seq"] + extra)))
    assert long >= short * (1 - 1e-12)


def _phase(batch, context):
    from llm_analysis.model import Phase
    return Phase("decode", batch, 1, context)


@settings(max_examples=12, **SETTINGS)
@given(st.sampled_from(MODELS), st.sampled_from(["a100-sxm-40gb", "l40s-48gb", "h100-sxm-80gb"]),
       st.integers(1, 8192), st.integers(1, 512))
def test_max_batch_fits_and_one_more_does_not(model, gpu, seq, gen):
    max_len = _model(model).max_seq_len
    if max_len is not None:  # stay within the positions the model encodes
        seq, gen = min(seq, max_len // 2), min(gen, max_len // 2)
    a = _analysis(model, gpu)
    try:
        out = a.inference(batch_size_per_gpu=1, seq_len=seq, num_tokens_to_generate=gen)
    except DoesNotFitError as err:
        assert err.max_batch_size == 0
        return
    b = min(out["prefill_max_batch_size_per_gpu"], out["decode_max_batch_size_per_gpu"])
    assume(b < 10**6)
    a.inference(batch_size_per_gpu=b, seq_len=seq, num_tokens_to_generate=gen)  # fits
    with pytest.raises(DoesNotFitError):
        a.inference(batch_size_per_gpu=b + 1, seq_len=seq, num_tokens_to_generate=gen)


# ------------------------------------------------------------------------ serve
serving = st.fixed_dictionaries({
    "model": st.sampled_from(["Qwen_Qwen3-0.6B", "meta-llama_Llama-3.2-1B", "Qwen_Qwen3-30B-A3B",
                              "deepseek-ai_DeepSeek-V2-Lite", "openai_gpt-oss-20b", "google_gemma-2-2b"]),
    "gpu": st.sampled_from(["h100-sxm-80gb", "b200-180gb", "h200-sxm-141gb"]),
    "framework": st.sampled_from(["vllm", "sglang", "trtllm"]),
    "closed": st.booleans(), "load": st.sampled_from([1, 3, 16, 200]), "input": st.sampled_from([1, 100, 3000]),
    "output": st.sampled_from([1, 2, 300]), "disaggregated": st.booleans(),
    "decode_layout": st.sampled_from([dict(tp_size=1), dict(tp_size=2, pp_size=2),
                                      dict(tp_size=1, attention_dp_size=2, moe_tp_size=1, moe_ep_size=2)]),
})


def _serve(s):
    a = _analysis(s["model"], s["gpu"], perf_model="calibrated")
    kw = dict(input_len=s["input"], output_len=s["output"], framework=s["framework"], num_requests=300)
    kw["concurrency" if s["closed"] else "request_rate"] = s["load"]
    if s["disaggregated"]:
        layout = dict(s["decode_layout"])
        if not _model(s["model"]).is_moe:  # (experts over ranks need experts)
            layout.pop("moe_ep_size", None), layout.pop("moe_tp_size", None)
        kw["disaggregated"] = {"prefill": {"workers": 1, "parallelism": ParallelismConfig()},
                               "decode": {"workers": 1, "parallelism": ParallelismConfig(**layout)}}
    try:
        return a.serve(**kw)
    except LLMAnalysisError:
        assume(False)


@settings(max_examples=30, **SETTINGS)
@given(serving)
def test_serve_figures_non_negative_and_percentiles_ordered(s):
    """Every latency, rate and size serve() returns is a number >= 0 (a capacity that no request uses, such as
    a decode pool when each request yields one token, may be inf; a saturated answer's latencies are None);
    the percentiles of each latency are ordered p50 <= p90 <= p99; the first token never comes after the last."""
    out = _serve(s)
    for key, v in _numbers(out):
        assert not math.isnan(v) and v >= 0, (key, v)
        assert math.isfinite(v) or key.endswith("capacity_request_rate_per_s"), (key, v)
    if out["saturated"]:
        return
    for name in ("ttft", "tpot", "e2e"):
        p = [out[f"{name}_p{q}_s"] for q in (50, 90, 99)]
        if name == "tpot" and s["output"] == 1:
            assert p == [None] * 3  # one token: no step between tokens
            continue
        assert p[0] <= p[1] <= p[2], (name, p)
    assert out["ttft_s"] <= out["e2e_s"]


# -------------------------------------------------------------- params, training
@settings(max_examples=12, **SETTINGS)
@given(st.sampled_from(MODELS), st.sampled_from(DTYPES), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]))
def test_total_params_independent_of_layout_and_dtype(model, dtype, tp, pp):
    ref = _analysis(model).get_num_params_total()
    other = _analysis(model, dtype=dtype, tp=_tp_for(model, tp), pp=pp).get_num_params_total()
    assert other == ref


@settings(max_examples=10, **SETTINGS)
@given(st.sampled_from(["gpt2", "facebook_opt-125m", "meta-llama_Llama-3.2-1B", "Qwen_Qwen3-0.6B",
                        "Qwen_Qwen3-30B-A3B"]),
       st.sampled_from([2, 4, 8]), st.integers(1, 4), st.sampled_from([128, 512, 1024]))
def test_zero_stages_order_memory(model, dp, batch, seq):
    a = _analysis(model, "b200-180gb", dp=dp)
    peak = []
    for z in (0, 1, 2, 3):
        try:
            out = a.training(batch_size_per_gpu=batch, seq_len=seq, ds_zero=z, gradient_accumulation_steps=1)
        except DoesNotFitError as err:  # the error carries the peak it would need
            peak.append(err.needed_bytes)
            continue
        peak.append(out["estimated_peak_memory_per_gpu"])
        for k, v in _numbers(out):
            if "left" not in k and "free" not in k and "headroom" not in k:
                assert math.isfinite(v) and v >= 0, (k, v)
    assert peak[3] <= peak[2] <= peak[1] <= peak[0]


# ---------------------------------------------------------------- invalid input
junk = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                 st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                 st.sampled_from(["1e3", "0x10", "", "nan", "inf", "-1", "1e400", "\u00e9\u20ac", "8"]))

INFER_ARGS = ["batch_size_per_gpu", "seq_len", "num_tokens_to_generate", "use_kv_cache", "ds_zero",
              "layernorm_dtype_bytes", "kv_cache_dtype_bytes", "cost_per_gpu_hour"]
TRAIN_ARGS = ["batch_size_per_gpu", "gradient_accumulation_steps", "global_batch_size", "seq_len",
              "total_num_tokens", "activation_recomputation", "ds_zero", "layernorm_dtype_bytes",
              "master_weights_dtype_bytes", "other_op_bytes", "flash_attn", "mlp_activation_quant_bits",
              "mlp_1linear_quant_bits", "pipeline_interleave", "lora", "cost_per_gpu_hour"]
CTOR_ARGS = ["achieved_tflops", "achieved_memory_bandwidth_GBs", "flops_efficiency", "hbm_memory_efficiency",
             "intra_node_memory_efficiency", "inter_node_memory_efficiency", "num_gpus_per_node",
             "attention_flops", "logits", "mla_attention"]


def _only_our_errors(fn):
    try:
        out = fn()
    except LLMAnalysisError:
        return
    for k, v in _numbers(out):
        assert math.isfinite(v), (k, v)


@settings(max_examples=60, **SETTINGS)
@given(st.sampled_from(INFER_ARGS), junk)
def test_invalid_inference_arguments_end_in_our_errors(arg, value):
    a = _analysis("gpt2")
    _only_our_errors(lambda: a.inference(**{"seq_len": 64, "num_tokens_to_generate": 4, arg: value}))


@settings(max_examples=60, **SETTINGS)
@given(st.sampled_from(TRAIN_ARGS), junk)
def test_invalid_training_arguments_end_in_our_errors(arg, value):
    a = _analysis("gpt2")
    _only_our_errors(lambda: a.training(**{"batch_size_per_gpu": 1, "seq_len": 64, arg: value}))


@settings(max_examples=40, **SETTINGS)
@given(st.sampled_from(CTOR_ARGS), junk)
def test_invalid_constructor_arguments_end_in_our_errors(arg, value):
    _only_our_errors(lambda: _analysis("gpt2", **{arg: value}).inference(seq_len=64, num_tokens_to_generate=4))


@settings(max_examples=40, **SETTINGS)
@given(st.sampled_from(["num_layers", "n_head", "hidden_dim", "vocab_size", "max_seq_len", "num_key_value_heads",
                        "num_key_value_groups", "ffn_embed_dim", "expansion_ratio", "moe_num_experts", "moe_top_k",
                        "num_norms_per_layer", "head_dim", "sliding_window"]), junk)
def test_invalid_model_fields_end_in_our_errors(field, value):
    from llm_analysis.config import ModelConfig
    d = _model("gpt2").model_dump()
    d[field] = value
    if field == "num_key_value_groups":
        d.pop("num_key_value_heads")
    _only_our_errors(lambda: _analysis_of(ModelConfig(**d)).inference(seq_len=64, num_tokens_to_generate=4))


def _analysis_of(model):
    return LLMAnalysis(model, _gpu("b200-180gb"))


@settings(max_examples=40, **SETTINGS)
@given(st.sampled_from(["mem_per_GPU_in_GB", "hbm_bandwidth_in_GB_per_sec", "intra_node_bandwidth_in_GB_per_sec",
                        "intra_node_min_message_latency", "peak_fp16_TFLOPS", "peak_bf16_TFLOPS",
                        "inter_node_bandwidth_in_GB_per_sec", "num_gpus_per_node", "fast_link_group_size"]), junk)
def test_invalid_gpu_fields_end_in_our_errors(field, value):
    from llm_analysis.config import GPUConfig
    d = _gpu("h100-sxm-80gb").model_dump()
    d[field] = value
    _only_our_errors(lambda: LLMAnalysis(_model("gpt2"), GPUConfig(**d)).inference(seq_len=64,
                                                                                   num_tokens_to_generate=4))
