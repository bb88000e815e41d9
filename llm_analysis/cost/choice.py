"""The performance model of an `LLMAnalysis`: which cost model times its
operators, and the lower bound reported beside a calibrated prediction.

perf_model="roofline" (default): every time is the roofline's (cost/model.py)
at the analysis' efficiencies, as before. perf_model="calibrated" (or a
profile): every time is the calibrated model's (cost/calibrated.py), with the
CUDA-graph kernel floor for inference() and the eager one for training()
(`kernel_launch` forces one for both); the
summary keeps the same keys and adds the roofline figures beside them as
`<key>_lower_bound` (the roofline at the analysis' efficiency arguments,
default 1: a true lower bound), plus `perf_model` naming the profile.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from functools import lru_cache
from typing import Any, Dict, Optional, Tuple

from llm_analysis.cost import RooflineCostModel
from llm_analysis.cost.calibrated import CalibratedCostModel
from llm_analysis.cost.gemm import LAUNCH_MODES
from llm_analysis.inference.lower_bound import inference_lower_bounds
from llm_analysis.inference.plan import inference_plan
from llm_analysis.errors import ConfigError
from llm_analysis.inference import inference_times, run_inference
from llm_analysis.training import run_training
from llm_analysis.training.request import TrainingRequest
from llm_analysis.training.run import iteration_time, stages_for, training_run

TRAINING_BOUND_KEYS = ("latency_fwd", "latency_per_micro_batch", "latency_per_iter", "total_training_latency")


def roofline_model(a, cls=RooflineCostModel):
    return cls(a.gpu_config, a.dtype_config, a.parallelism_config, flops_efficiency=a.flops_efficiency,
               hbm_memory_efficiency=a.hbm_memory_efficiency,
               intra_node_memory_efficiency=a.intra_node_memory_efficiency,
               inter_node_memory_efficiency=a.inter_node_memory_efficiency, achieved_tflops=a.achieved_tflops,
               achieved_memory_bandwidth_GBs=a.achieved_memory_bandwidth_GBs, num_gpus_per_node=a.num_gpus_per_node)


def check_launch(kernel_launch):
    """kernel_launch of LLMAnalysis: None (CUDA graphs for inference(), eager for training()),
    "graph" or "eager" for both (e.g. "eager" for a C++ engine without graphs: FasterTransformer)."""
    if kernel_launch is not None and kernel_launch not in LAUNCH_MODES:
        raise ConfigError(f"kernel_launch = {kernel_launch!r}; valid: None, {', '.join(map(repr, LAUNCH_MODES))}")
    return kernel_launch


def cost_model(a):
    if a.profile is not None:
        return CalibratedCostModel(a.gpu_config, a.dtype_config, a.parallelism_config, a.profile,
                                   a.kernel_launch or "graph", a.num_gpus_per_node, a.lower_bound_cost_model)
    if a.cost_model_class is RooflineCostModel:
        return a.lower_bound_cost_model
    return roofline_model(a, a.cost_model_class)


@lru_cache(maxsize=None)
def _plain_copy(cls) -> bool:
    """Whether copy.copy of a `cls` instance is a new instance with its __dict__'s items (the
    default protocol: no __copy__, __reduce__, __getstate__, __new__ or __slots__ of its own)."""
    # (object.__getstate__ exists from Python 3.11 on: compared through getattr on 3.10)
    return (getattr(cls, "__copy__", None) is None and cls.__reduce_ex__ is object.__reduce_ex__
            and cls.__reduce__ is object.__reduce__
            and getattr(cls, "__getstate__", None) is getattr(object, "__getstate__", None)
            and cls.__new__ is object.__new__ and not any("__slots__" in vars(k) for k in cls.__mro__))


def with_cost_model(a, model):
    """A shallow view of the analysis whose operators are timed by `model` (configs
    and the describer are shared, so nothing is rebuilt)."""
    cls = type(a)
    if _plain_copy(cls):  # copy.copy's result without its generic protocol (~3x faster)
        view = object.__new__(cls)
        view.__dict__.update(a.__dict__)
    else:
        view = copy.copy(a)
    view.__dict__["cost_model"] = model
    return view


def _label(a) -> str:
    return a.perf_model if isinstance(a.perf_model, str) else (a.profile.origin or a.profile.generation)


def inference(a, args: Dict[str, Any]) -> dict:
    """run_inference(a, **args): its summary hook is `inference_summary_hook(a)`, which
    run_inference asks for only when it computes a summary (a repeated call passes nothing
    more under the calibrated model than under the roofline)."""
    return run_inference(a, **args)


def inference_summary_hook(a):
    """The hook run_inference calls on a new summary of `a`: when `a` times with its calibrated
    model (the analysis itself, or a view of it with its conventions) its `<key>_lower_bound`
    entries and `perf_model`; None under the roofline, or for a view timed by another cost model
    (`with_cost_model`)."""
    calibrated = a.profile is not None and isinstance(a.cost_model, CalibratedCostModel)
    return _calibrated_entries if calibrated else None


def _calibrated_entries(a, d, t: Dict[str, Any], summary: Dict[str, Any], ds_zero) -> None:
    """run_inference's summary hook under the calibrated model: the roofline's times of the call
    (`<key>_lower_bound`) and `perf_model`. It runs once per new summary (run.py keeps the
    finished summary for a repeated call)."""
    prefill_s, step_s, decode_s, total_s = _fused_bounds(a, d, t, summary, ds_zero) or \
        _kept_bounds(a, d, summary, ds_zero)
    # each `<key>_lower_bound` in the order of the keys it bounds (a chained assignment stores left first)
    summary["prefill_latency_lower_bound"] = summary["time_to_first_token_lower_bound"] = prefill_s
    summary["decode_latency_lower_bound"] = summary["time_per_output_token_lower_bound"] = step_s
    summary["total_decode_latency_lower_bound"] = decode_s
    summary["total_latency_lower_bound"] = total_s
    summary["perf_model"] = _label(a)


def _fused_bounds(a, d, t: Dict[str, Any], summary: Dict[str, Any],
                  ds_zero) -> Optional[Tuple[float, float, float, float]]:
    """(prefill_s, decode_step_s, decode_total_s, total_s) of `inference_lower_bounds` from
    the totals the calibrated programs computed beside their own times (their `bound_out`, kept in
    the describer's plan: inference/plan.py; cost/calibrated_programs.py) when their last calls
    made this call's times `t` (the groups dicts they returned are t's: no later call ran them, so
    they ran for this shape; a single token's decode step by its arguments), in the plain case
    without pipeline stages (whose hand-offs are 0.0: x + 0.0 is x) and when they computed the
    bound of the analysis' roofline (the cost model's bound model); None otherwise (this call's
    phase times came from the cache, say)."""
    if not summary["use_kv_cache"] or (a.parallelism_config.dp_size > 1 and ds_zero.value == 3):
        return None
    plan = inference_plan(a, d)  # (none under pipeline stages)
    if plan is None or plan.prefill_bound is None or a.cost_model.bound_model is not a.lower_bound_cost_model \
            or a.model_config.encoder_only:
        return None
    p, q = plan.prefill_bound[0], plan.decode_bound[0]  # (groups, total), (groups, first, total, b, x0, n)
    n = summary["num_tokens_to_generate"]
    # (a single token's call keeps no decode groups: its step is known by the program's arguments)
    if p is None or q is None or p[0] is not t["prefill_groups"] or (
            q[0] is not t["decode_groups"] if n > 1 else
            (q[3] != summary["batch_size_per_gpu"] or q[4] != summary["seq_len"] + 1 or q[5] != 1)):
        return None
    prefill_s, steps_s = p[1], q[2]
    total, step_s = (steps_s, steps_s / (n - 1)) if n > 1 else (0.0, q[1])
    return prefill_s, step_s, total, prefill_s + total


def _kept_bounds(a, d, summary: Dict[str, Any], ds_zero) -> Tuple[float, float, float, float]:
    """The roofline's (prefill, decode step, decode total, total) seconds of the call where
    `_fused_bounds` has none, kept per shape."""
    shape = (summary["batch_size_per_gpu"], summary["seq_len"], summary["num_tokens_to_generate"],
             summary["use_kv_cache"], ds_zero)
    return d.cost_memo(a.lower_bound_cost_model, ("inference_lower_bound",) + shape,
                       lambda: _inference_bounds(a, d, shape))


def _inference_bounds(a, d, shape) -> Tuple[float, float, float, float]:
    """The roofline's times of the call where `_fused_bounds` has none: from the phase tables
    (inference/lower_bound.py) where the case is plain, else its full timing pass."""
    bound = with_cost_model(a, a.lower_bound_cost_model)
    t = inference_lower_bounds(bound, d, *shape)
    if t is None:
        t = inference_times(bound, d, *shape)
        if bound.model_config.encoder_only:
            t["decode_step_s"] = 0.0
    return t["prefill_s"], t["decode_step_s"], t["decode_total_s"], t["total_s"]


@lru_cache(maxsize=1)
def _run_training_defaults() -> Dict[str, Any]:
    return {k: p.default for k, p in inspect.signature(run_training).parameters.items() if k != "analysis"}


def _training_bounds(a, req: TrainingRequest, summary: Dict[str, Any]) -> Dict[str, float]:
    """The roofline's times of the call the calibrated run just analysed (`req`: the request it
    validated, which depends on no cost model): its stages and iteration time at the micro-batch
    and accumulation steps that run chose (they depend on memory only, which no cost model
    changes), as `run_training` / `training_summary` compute them, without the validation,
    memory, batch choice and summary a full second run would redo. A ZeRO-3 rate cap
    (`zero3_gather_bytes_per_s`) is a framework's inefficiency, not the hardware's: the
    bound moves the gathers at NCCL's rates (training/zero3.py)."""
    bound = with_cost_model(a, a.lower_bound_cost_model)
    if req.zero3.gather_bytes_per_s is not None:
        req = dataclasses.replace(req, zero3=dataclasses.replace(req.zero3, gather_bytes_per_s=None))
    b, m = summary["batch_size_per_gpu"], summary["gradient_accumulation_steps"]
    stages = stages_for(bound, req, b)
    times = iteration_time(bound, req, stages, b, m)
    it = times["latency_per_iter"]
    # training_summary's latency_fwd (the hand-off is 0.0 without pipeline stages) and _whole_run's total
    handoff_s = 0.0 if bound.parallelism_config.pp_size == 1 else \
        bound.pipeline_handoff_time_s(b, req.seq_len, scatter_gather=True)
    latency_fwd = sum(s_.fwd_compute + s_.tp_fwd + s_.ep_fwd + s_.cp_fwd for s_ in stages) + handoff_s
    total = None if req.total_num_tokens is None else \
        it * (req.total_num_tokens / (summary["global_batch_size"] * req.seq_len))
    return {"latency_fwd_lower_bound": latency_fwd, "latency_per_micro_batch_lower_bound": times["t_mb"],
            "latency_per_iter_lower_bound": it, "total_training_latency_lower_bound": total}


def _eager_run(view, args: Dict[str, Any]):
    """`training_run` of the call's arguments (output_dir popped) on the eager-floor view: the
    summary and the validated request. An argument run_training does not take raises the
    TypeError a call of run_training would."""
    defaults = _run_training_defaults()
    kw = dict(defaults, **args)
    if len(kw) != len(defaults):  # (every known name is in the defaults: one more is unknown)
        unknown = next(k for k in args if k not in defaults)
        raise TypeError(f"run_training() got an unexpected keyword argument {unknown!r}")
    kw["output_dir"] = None
    return training_run(view, kw)


def training(a, args: Dict[str, Any]) -> dict:
    """Training under the eager kernel floor; the lower bound from the same call on the roofline
    (batch and accumulation steps depend on memory only, so both runs choose the same)."""
    if a.profile is None:
        return run_training(a, **args)
    output_dir = args.pop("output_dir")
    # one eager-floor model per cost model (dropped with it): its phase times stay cached between calls
    cm, launch = a.cost_model, a.kernel_launch or "eager"
    eager = cm.__dict__.get("_training_view")
    if eager is None or eager.launch != launch:
        eager = cm.__dict__["_training_view"] = cm.with_launch(launch)
    summary, req = _eager_run(with_cost_model(a, eager), args)
    # the same call on the roofline, kept per validated options (one hashed key part), length,
    # token total and the batch the run chose: everything the bound depends on
    key = ("training_lower_bound", req.options_key, req.seq_len, req.total_num_tokens,
           summary["batch_size_per_gpu"], summary["gradient_accumulation_steps"], summary["global_batch_size"])
    bounds = a.describer.cost_memo(a.lower_bound_cost_model, key, lambda: _training_bounds(a, req, summary))
    summary.update(bounds)
    summary["perf_model"] = _label(a)
    if output_dir is not None:
        a.output_summary_dict(summary, output_dir, print_human_readable=True,
                              output_file_suffix=args.get("output_file_suffix", ""))
    return summary
