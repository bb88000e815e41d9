"""Library fuzz of `LLMAnalysis`: the constructor, inference(), training() and the mirrored views
`get_*` as a user's Python code calls them, with the values such code produces and a command line
never does (numpy scalars, bools, None, 8.0 and 8.5, NaN and infinities, huge ints, numeric strings,
containers, enums as ints or names). The command line is fuzzed in tests/cli/test_cli_fuzz.py.

The contract: every call returns its normal result with finite plain numbers, or raises the
package's own error (`LLMAnalysisError`) naming the argument; a numpy scalar means what the Python
number it holds means. A seeded sweep of several thousand such calls found the bugs pinned by the
hand cases below (each reproduces what the call did before its fix); the sweep test keeps a sample.
"""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pytest

from llm_analysis.analysis import ActivationRecomputation, DSZeRO, LLMAnalysis, ParallelismConfig
from llm_analysis.errors import DoesNotFitError, LLMAnalysisError
from answers import leaves, refused

INF, NAN = float("inf"), float("nan")


_refused = refused


_BASES = {}


def _base(name: str) -> LLMAnalysis:
    """The analyses the sweep calls (built once: the calls do not change them)."""
    if name not in _BASES:
        tp2 = ParallelismConfig(tp_size=2)
        _BASES[name] = {
            "llama": lambda: LLMAnalysis("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", "bf16", tp2),
            "calibrated": lambda: LLMAnalysis("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", "bf16", tp2,
                                              perf_model="calibrated"),
            "moe": lambda: LLMAnalysis("mistralai/Mixtral-8x7B-v0.1", "h100-sxm-80gb", "bf16",
                                       ParallelismConfig(tp_size=4, ep_size=2, dp_size=2)),
            "train": lambda: LLMAnalysis("meta-llama/Llama-3.2-1B", "a100-sxm-40gb", "bf16",
                                         ParallelismConfig(tp_size=2, pp_size=2, dp_size=4), num_gpus_per_node=8),
        }[name]()
    return _BASES[name]


# ----------------------------------------------------------------------------- the seeded sweep
# argument kinds: what a value must be to be taken (the oracle `_must_refuse` below)
COUNT, COUNT_OR_NONE, FLAG, FLAG_OR_NONE, BYTES, BYTES_OR_NONE, ZERO, RC, BITS, NUMBER_OR_NONE = (
    "count", "count?", "flag", "flag?", "bytes", "bytes?", "zero", "rc", "bits", "number?")
BS = {"batch_size": (COUNT, 2), "seq_len": (COUNT, 128)}
METHODS = {
    "inference": {"batch_size_per_gpu": (COUNT, 1), "seq_len": (COUNT, 256), "num_tokens_to_generate": (COUNT, 8),
                  "use_kv_cache": (FLAG, True), "ds_zero": (ZERO, 0), "kv_cache_dtype_bytes": (BYTES_OR_NONE, None),
                  "cost_per_gpu_hour": (NUMBER_OR_NONE, None), "encoder_seq_len": ("encoder", None)},
    "training": {"batch_size_per_gpu": (COUNT_OR_NONE, 1), "seq_len": (COUNT, 256),
                 "gradient_accumulation_steps": (COUNT_OR_NONE, None), "activation_recomputation": (RC, 0),
                 "ds_zero": (ZERO, 0), "master_weights_dtype_bytes": (BYTES, 4), "flash_attn": (FLAG, True),
                 "mlp_activation_quant_bits": (BITS, None), "total_num_tokens": (NUMBER_OR_NONE, None)},
    "get_memory_kv_cache_per_gpu": dict(BS, kv_cache_dtype_bytes=(BYTES_OR_NONE, None)),
    "get_memory_kv_cache_total": dict(BS, stage=("stage", None)),
    "get_activation_memory_per_layer": dict(BS, is_inference=(FLAG, False), activation_recomputation=(RC, 0),
                                            layernorm_dtype_bytes=(BYTES, 4), return_breakdown=(FLAG, False)),
    "get_activation_memory_per_layer_mlp": dict(BS, is_inference=(FLAG, False), moe=(FLAG_OR_NONE, None),
                                                mlp_1linear_quant_bits=(BITS, None)),
    "get_activation_memory_per_layernorm": dict(BS, dtype_bytes=(BYTES, 4)),
    "get_activation_memory_input_embedding": BS, "get_activation_memory_output_embedding": BS,
    "get_loss_bwd_memory": BS, "get_num_flops_fwd_total": BS,
    "get_num_flops_decode_step": {"batch_size": (COUNT, 2), "context_len": (COUNT, 128)},
    "get_latency_fwd_per_layernorm": dict(BS, dtype_bytes=(BYTES, 4)),
    "get_latency_fwd_per_tp_comm": dict(BS, dtype_bytes=(BYTES, 2)),
    "get_latency_fwd": dict(BS, is_inference=(FLAG, True), ds_zero=(ZERO, 0)),
    "get_weight_memory_per_layer": {"ds_zero": (ZERO, 0), "return_breakdown": (FLAG, False)},
    "get_num_params_embedding": {"shared_embedding": (FLAG, True)},
    "get_memory_optimizer_state_and_gradient_per_layer": {"master_weights_dtype_bytes": (BYTES, 4),
                                                          "other_op_bytes": (BYTES_OR_NONE, None),
                                                          "ds_zero": (ZERO, 0)},
    "get_latency_weight_update": {"ds_zero": (ZERO, 0), "trainable_params_per_gpu": (NUMBER_OR_NONE, None)},
    "pipeline_handoff_time_s": {"batch_size": ("amount", 2), "tokens_per_seq": ("amount", 128),
                                "scatter_gather": (FLAG, False)},
    "config_batch_size_and_gradient_accumulation_steps": {"max_batch_size_per_gpu": ("max_batch", 4),
                                                          "batch_size_per_gpu": (COUNT_OR_NONE, None)},
}
VALUES = [np.int64(8), np.int32(4), np.uint8(3), np.int16(2), np.float32(0.5), np.float64(8.0), np.float16(2.0),
          np.bool_(True), np.bool_(False), True, False, None, 8.0, 8.5, NAN, INF, -INF, -0.0, 0, 1, 3, -1, 10**30,
          "8", "abc", "", "false", "STAGE_3", [8], (8,), {"a": 1}, object(), DSZeRO.STAGE_2,
          ActivationRecomputation.FULL]


def _python(value):
    """The plain Python value a numpy scalar holds (None for anything else)."""
    return value.item() if isinstance(value, np.generic) else None


def _number(value):
    """`value` as the finite-or-not float a caller means by it, or None when it is no number."""
    value = _python(value) if isinstance(value, np.generic) else value
    if isinstance(value, bool) or value is None or isinstance(value, (list, tuple, dict)) or type(value) is object:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _must_refuse(kind: str, value) -> bool:
    """Whether the contract requires `value` to be refused for an argument of `kind` (values it
    may either take or refuse, e.g. 0 for a flag, are not asked about)."""
    value = _python(value) if isinstance(value, np.generic) else value
    if value is None:
        return kind in (COUNT, FLAG, BYTES, ZERO, RC, "amount")
    if kind in (FLAG, FLAG_OR_NONE):
        return not isinstance(value, bool) and not (type(value) is int and value in (0, 1)) and not (
            isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"))
    if isinstance(value, bool) or isinstance(value, (list, tuple, dict)) or type(value) is object:
        return kind not in ("encoder",)  # (encoder_seq_len: refused by the model check either way)
    x = _number(value)
    if kind in (COUNT, COUNT_OR_NONE, "stage", "max_batch"):
        return x is None or not math.isfinite(x) or x != int(x)
    if kind in (BYTES, BYTES_OR_NONE, NUMBER_OR_NONE, "amount"):
        return x is None or not math.isfinite(x)
    return False


def _problems(result):
    """NaN / infinity / numpy values anywhere in a result."""
    for path, v in leaves(result, "result"):
        if isinstance(v, np.generic):
            yield f"{path} is a numpy {type(v).__name__}"
        elif isinstance(v, float) and not math.isfinite(v):
            yield f"{path} = {v}"


def _call(base: str, method: str, kwargs: dict):
    """(outcome, result or exception): "ok", "does not fit", "refused" (the package's own error) or
    "crash" (any other exception, numpy's overflow warnings included)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            return "ok", getattr(_base(base), method)(**kwargs)
        except DoesNotFitError as exc:
            return "does not fit", exc
        except LLMAnalysisError as exc:
            return "refused", exc
        except Exception as exc:  # noqa: BLE001 (what the sweep looks for)
            return "crash", exc


def _case(rng: random.Random):
    method = rng.choice(sorted(METHODS))
    base = "train" if method == "training" else rng.choice(["llama", "calibrated", "moe", "train"])
    spec = METHODS[method]
    kwargs = {name: default for name, (_, default) in spec.items()}
    changed = rng.sample(sorted(spec), rng.choice([1, 1, 2]))
    for name in changed:
        kwargs[name] = rng.choice(VALUES)
    return base, method, kwargs, changed


def spec_kind(method: str, name: str) -> str:
    return METHODS[method][name][0]


SWEEP_SEED, SWEEP_CALLS = 20_240_613, 150


def test_seeded_library_sweep():
    """150 seeded calls: a normal result (finite, plain numbers) or the package's own error naming a
    changed argument; never a value the contract refuses taken; a numpy scalar as its Python number."""
    rng = random.Random(SWEEP_SEED)
    failures = []
    for _ in range(SWEEP_CALLS):
        base, method, kwargs, changed = _case(rng)
        desc = f"[{base}] {method}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
        status, result = _call(base, method, kwargs)
        if status == "crash":
            failures.append(f"{desc}: {type(result).__name__}: {result}"[:400])
            continue
        if status == "refused" and not any(name in str(result) for name in changed):
            failures.append(f"{desc}: the message names none of {changed}: {result}"[:400])
        if status == "ok":
            failures += [f"{desc}: {p}" for p in _problems(result)]
            failures += [f"{desc}: {name} = {kwargs[name]!r} taken" for name in changed
                         if _must_refuse(spec_kind(method, name), kwargs[name])]
        for name in changed:  # a numpy scalar means the Python number it holds
            if isinstance(kwargs[name], np.generic):
                other = _call(base, method, {**kwargs, name: _python(kwargs[name])})
                if other[0] != status or (status == "ok" and repr(other[1]) != repr(result)):
                    failures.append(f"{desc}: {name} = {kwargs[name]!r} gives {status} {result!r:.80}, "
                                    f"{_python(kwargs[name])!r} gives {other[0]} {other[1]!r:.80}")
    assert not failures, "\n".join(failures[:20])


# -------------------------------------------------------------------------------- hand cases
def _llama(pp: int = 1) -> LLMAnalysis:
    return LLMAnalysis("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", "bf16", ParallelismConfig(tp_size=2, pp_size=pp))


@pytest.mark.parametrize("call, field", [
    (lambda a: a.get_memory_kv_cache_per_gpu(2, "abc"), "seq_len"),  # was a TypeError
    (lambda a: a.get_memory_kv_cache_per_layer(NAN, 128), "batch_size"),  # was NaN bytes
    (lambda a: a.get_memory_kv_cache_per_gpu(2, 128, kv_cache_dtype_bytes=-INF), "kv_cache_dtype_bytes"),  # -inf
    (lambda a: a.get_activation_memory_output_embedding(-INF, 128), "batch_size"),  # was -inf bytes
    (lambda a: a.get_activation_memory_input_embedding(8.5, 128), "batch_size"),  # 8.5 sequences taken
    (lambda a: a.get_loss_bwd_memory(True, 128), "batch_size"),  # True taken as one sequence
    (lambda a: a.get_activation_memory_per_layernorm(2, "nan"), "seq_len"),  # was a TypeError
    (lambda a: a.get_activation_memory_per_layer(2, [8], is_inference=False), "seq_len"),  # a TypeError
    (lambda a: a.get_latency_fwd_per_layernorm(2, 128, NAN), "dtype_bytes"),  # was a NaN time
    (lambda a: a.get_latency_fwd_per_tp_comm(2, 128, -INF), "dtype_bytes"),  # was 0.0 s
    (lambda a: a.pipeline_handoff_time_s(2, None), "tokens_per_seq"),  # was a TypeError
    (lambda a: a.get_memory_kv_cache_total(2, 128, stage=5), "stage"),  # was an IndexError
    (lambda a: a.get_memory_kv_cache_total(2, 128, stage=-1), "stage"),  # was the last stage, silently
])
def test_views_check_their_shape_arguments(call, field):
    # views that never build a phase (make_phase) used batch_size, seq_len, the element bytes and
    # the stage as given
    _refused(lambda: call(_llama(pp=2)), field)


def test_decode_step_flops_read_a_numeric_string_context():
    # was: TypeError '>' not supported between 'str' and 'int' (compared before it was checked)
    a = _llama()
    assert a.get_num_flops_decode_step(2, "3") == a.get_num_flops_decode_step(2, 3)


def test_view_flags_are_read_as_flags_not_by_truth():
    a = _llama()
    # 'False' was true: the inference live set (11.0 MB) instead of what training keeps (21.0 MB)
    assert a.get_activation_memory_per_layer(2, 128, is_inference="False") == \
        a.get_activation_memory_per_layer(2, 128, is_inference=False)
    # 'no' was true: the input table alone instead of the table and the untied LM head
    assert a.get_num_params_embedding(shared_embedding="no") == a.get_num_params_embedding(shared_embedding=False)
    _refused(lambda: a.get_activation_memory_per_layer_mlp(2, 128, is_inference=False, moe=3), "moe")  # was 0.0
    _refused(lambda: a.get_weight_memory_per_layer(return_breakdown=[]), "return_breakdown")  # [] was False


def test_optimizer_state_views_check_their_bytes():
    a = _llama()
    _refused(lambda: a.get_memory_optimizer_state_and_gradient_per_layer(master_weights_dtype_bytes=NAN),
             "master_weights_dtype_bytes")  # was (nan, ...)
    _refused(lambda: a.get_memory_optimizer_state_and_gradient_embedding(other_op_bytes="x"),
             "other_op_bytes")  # was a TypeError
    _refused(lambda: a.get_latency_weight_update(trainable_params_per_gpu=1e308),
             "trainable_params_per_gpu")  # was inf seconds


def test_unused_compatibility_arguments_are_checked():
    # accepted for API compatibility and unused: a slip was silently ignored
    a = _llama()
    _refused(lambda: a.get_latency_fwd(2, 128, ds_zero="3x"), "ds_zero")
    _refused(lambda: a.operators("prefill", 1, 8, context_len=INF), "context_len")


def test_numpy_bool_is_neither_a_count_nor_refused_as_a_flag():
    a = _llama()
    # np.True_ was read as a batch of 1 and as ZeRO stage 1 (float(np.True_) is 1.0)
    _refused(lambda: a.inference(batch_size_per_gpu=np.True_), "batch_size_per_gpu")
    _refused(lambda: a.get_num_flops_fwd_total(np.True_, 128), "batch_size")
    _refused(lambda: a.training(batch_size_per_gpu=1, seq_len=256, ds_zero=np.True_), "ds_zero")
    # ... and refused where a bool is taken
    assert a.inference(use_kv_cache=np.False_) == a.inference(use_kv_cache=False)
    assert a.training(batch_size_per_gpu=1, seq_len=256, flash_attn=np.True_)["latency_per_iter"] == \
        a.training(batch_size_per_gpu=1, seq_len=256, flash_attn=True)["latency_per_iter"]


def test_numpy_integers_mean_their_python_integers():
    a = _llama()
    # refused: model/cross_attention.py and training/lora.py took only Python ints
    assert a.inference(encoder_seq_len=np.int64(0)) == a.inference(encoder_seq_len=0)
    b = LLMAnalysis("meta-llama/Llama-3.2-1B", "h100-sxm-80gb")
    assert b.training(batch_size_per_gpu=1, seq_len=256, lora={"rank": np.int64(8)}) == \
        b.training(batch_size_per_gpu=1, seq_len=256, lora={"rank": 8})
    # small numpy widths overflowed in the unchecked views: np.int16(2) x 128 x 4096 wrapped to 0 bytes,
    # np.uint8(200) x 4096 raised an OverflowError
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        # b x s x h x 2 bytes (bf16), split over tp = 2 (sequence parallelism: sp_size = tp_size)
        assert a.get_activation_memory_input_embedding(np.int16(2), 128) == 2 * 128 * 4096 * 2 / 2
        assert a.get_memory_kv_cache_per_gpu(np.uint8(200), 4096) == a.get_memory_kv_cache_per_gpu(200, 4096)


@pytest.mark.parametrize("kwargs, field", [
    ({"flops_efficiency": 5e-324}, "flops_efficiency"),  # was ValueError: cannot convert float NaN to integer
    ({"hbm_memory_efficiency": 1e-320}, "hbm_memory_efficiency"),  # the same
    ({"intra_node_memory_efficiency": 1e-320}, "intra_node_memory_efficiency"),  # was inf latencies
    ({"achieved_tflops": 1e-300}, "achieved_tflops"),  # was an inf total_training_latency
    ({"achieved_memory_bandwidth_GBs": 1e-300}, "achieved_memory_bandwidth_GBs"),  # the same
])
def test_rates_below_a_millionth_of_the_peak_refused(kwargs, field):
    def run():
        a = LLMAnalysis("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", "bf16", ParallelismConfig(tp_size=2, pp_size=2),
                        **kwargs)
        for summary in (a.inference(), a.training(batch_size_per_gpu=1, seq_len=512, total_num_tokens=1e12)):
            assert all(math.isfinite(v) for v in summary.values() if isinstance(v, float))
    _refused(run, field, "1e-06" if "efficiency" in field else "millionth")
    # a millionth of the peak is still taken, with finite times
    a = LLMAnalysis("gpt2", "h100-sxm-80gb", flops_efficiency=1e-6, hbm_memory_efficiency=1e-6)
    assert math.isfinite(a.training(batch_size_per_gpu=1, seq_len=128, total_num_tokens=1e12)["total_training_latency"])


def test_kv_cache_element_below_one_bit_refused():
    # was: OverflowError (cannot convert float infinity to integer) in inference/memory.py max_batch
    _refused(lambda: _llama().inference(kv_cache_dtype_bytes=1e-320), "kv_cache_dtype_bytes", "0.125")
    assert _llama().inference(kv_cache_dtype_bytes=0.5)["max_batch_total_tokens"] > 0


def test_output_dir_must_be_a_path():
    # was: TypeError from pathlib (expected str, bytes or os.PathLike object, not int)
    _refused(lambda: _llama().inference(output_dir=8), "output_dir")
    _refused(lambda: _llama().training(batch_size_per_gpu=1, seq_len=256, output_dir=["out"]), "output_dir")


def test_conventions_must_be_a_name():
    _refused(lambda: _llama().conventions_named([]), "conventions", "serving")  # was: unhashable type 'list'
    _refused(lambda: _llama().inference(conventions={}), "conventions")  # the same
    _refused(lambda: LLMAnalysis("gpt2", "h100-sxm-80gb", conventions=0), "conventions")  # was the default


def test_max_batch_size_per_gpu_is_a_whole_number():
    a = _llama()
    _refused(lambda: a.config_batch_size_and_gradient_accumulation_steps(8.5), "max_batch_size_per_gpu")  # was 8
    _refused(lambda: a.config_batch_size_and_gradient_accumulation_steps([8]), "max_batch_size_per_gpu")  # TypeError
    _refused(lambda: a.config_batch_size_and_gradient_accumulation_steps(INF), "max_batch_size_per_gpu")  # Overflow
    assert a.config_batch_size_and_gradient_accumulation_steps(np.int64(8)) == (8, 1, 8)


@pytest.mark.parametrize("seq_len", [8.0, "8", np.int64(8)])
def test_image_tokens_checked_against_any_spelling_of_seq_len(seq_len):
    # 8.0 and '8' skipped the check (it compared ints only): 100 image tokens ran in an 8-token prompt
    a = LLMAnalysis("Qwen/Qwen3-VL-2B-Instruct", "h100-sxm-80gb")
    _refused(lambda: a.inference(seq_len=seq_len, image_tokens=100, num_tokens_to_generate=2), "image_tokens",
             "seq_len")


def test_lora_double_quant_is_a_flag():
    # "no" was taken as true (double quantization on: 1.482 GB instead of 1.528 GB)
    b = LLMAnalysis("meta-llama/Llama-3.2-1B", "h100-sxm-80gb")
    run = lambda dq: b.training(batch_size_per_gpu=1, seq_len=256,  # noqa: E731
                                lora={"rank": 8, "base_weight_bits": 4, "double_quant": dq})
    assert run("no")["estimated_peak_memory_per_gpu"] == run(False)["estimated_peak_memory_per_gpu"]
    _refused(lambda: run([]), "double_quant")


def test_summary_writers_refuse_what_is_not_a_summary_or_a_folder(tmp_path):
    """output_summary_dict / get_readable_summary_dict with a non-dict summary or a non-path folder
    raised TypeErrors from pathlib and from iterating an int; each now names the argument."""
    a = _base("llama")
    summary = a.inference(batch_size_per_gpu=1, seq_len=16, num_tokens_to_generate=2)
    _refused(lambda: a.output_summary_dict(summary, 8), "output_dir", "8", "folder path")
    _refused(lambda: a.get_readable_summary_dict(8), "summary_dict", "8", "summary dict")
    _refused(lambda: a.output_summary_dict([1], str(tmp_path)), "summary_dict", "[1]")
    assert a.output_summary_dict(summary, str(tmp_path), print_human_readable=False).endswith(".json")
