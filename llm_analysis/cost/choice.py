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

import dataclasses
import difflib
import inspect
import logging
from functools import lru_cache
from typing import Any, Dict, Tuple

from llm_analysis.cost import RooflineCostModel
from llm_analysis.cost.model import with_cost_model
from llm_analysis.cost.calibrated import CalibratedCostModel, call_cost_model
from llm_analysis.cost.gemm import LAUNCH_MODES
from llm_analysis.errors import ConfigError, warn
from llm_analysis.inference import run_inference
from llm_analysis.inference.lower_bound import inference_lower_bounds
from llm_analysis.inference.run import cached_inference_times
from llm_analysis.model.checkpoint_weights import only_routed_experts_low_bit
from llm_analysis.quantities.setup_entries import calibrated_rate_entries
from llm_analysis.schema.parallelism import ParallelismConfig
from llm_analysis.training import run_training
from llm_analysis.training.request import TrainingRequest
from llm_analysis.training.run import bound_stages, iteration_time, stages_for, training_run

logger = logging.getLogger(__name__)

TRAINING_BOUND_KEYS = ("latency_fwd", "latency_per_micro_batch", "latency_per_iter", "total_training_latency")


def roofline_model(a, cls=RooflineCostModel):
    return cls(a.gpu_config, a.dtype_config, a.parallelism_config, flops_efficiency=a.flops_efficiency,
               hbm_memory_efficiency=a.hbm_memory_efficiency,
               intra_node_memory_efficiency=a.intra_node_memory_efficiency,
               inter_node_memory_efficiency=a.inter_node_memory_efficiency, achieved_tflops=a.achieved_tflops,
               achieved_memory_bandwidth_GBs=a.achieved_memory_bandwidth_GBs, num_gpus_per_node=a.num_gpus_per_node)


def warn_roofline_rates_beside_calibrated(a) -> None:
    """Under a calibrated model the analysis' efficiencies and achieved rates set only the roofline reported
    beside its times (`<key>_lower_bound`): at efficiency 1 and the spec sheet's rates a lower bound, below
    them a figure that can exceed the expected time. Said once per analysis (in every summary's warnings),
    naming what was given."""
    if a.profile is None:
        return
    # (an efficiency beside an achieved rate is the rate over its peak, not an input: the rate is named instead)
    given = [f"{name} = {value:g}" for name, value, derived in (
        ("flops_efficiency", a.flops_efficiency, a.achieved_tflops is not None),
        ("hbm_memory_efficiency", a.hbm_memory_efficiency, a.achieved_memory_bandwidth_GBs is not None),
        ("intra_node_memory_efficiency", a.intra_node_memory_efficiency, False),
        ("inter_node_memory_efficiency", a.inter_node_memory_efficiency, False)) if value != 1 and not derived]
    given += [f"{name} = {value:g}" for name, value in (("achieved_tflops", a.achieved_tflops),
                                                         ("achieved_memory_bandwidth_GBs",
                                                          a.achieved_memory_bandwidth_GBs)) if value is not None]
    if given:
        warn(logger, "%s: perf_model=%r takes its rates from its profile and ignores these; they set only the "
                     "roofline reported beside it (the *_lower_bound entries), which is then no lower bound and can "
                     "exceed the expected time (perf_model='roofline' uses them)", ", ".join(given),
                     _label(a))


def check_launch(kernel_launch):
    """kernel_launch of LLMAnalysis: None (CUDA graphs for inference(), eager for training()),
    "graph", "eager" (PyTorch, kernels dispatched from Python) or "native" (a C++ engine launching
    every kernel without CUDA graphs: FasterTransformer) for both."""
    if kernel_launch is not None and kernel_launch not in LAUNCH_MODES:
        raise ConfigError(f"kernel_launch = {kernel_launch!r}; valid: None, {', '.join(map(repr, LAUNCH_MODES))}")
    return kernel_launch


def cost_model(a):
    if a.profile is not None:
        # inference() names no engine: under native launches (C++ engines: FasterTransformer, TensorRT-LLM's
        # GptSession) its tensor parallelism runs as their NCCL all-reduce per block (cost/engine_allreduce.py);
        # otherwise as the layout states, like training; serve() times its steps with its engine's measured
        # all-reduce (serving/step_time.py)
        launch = a.kernel_launch or "graph"
        return CalibratedCostModel(a.gpu_config, a.dtype_config, a.parallelism_config, a.profile, launch,
                                   a.num_gpus_per_node, allreduce_engine="nccl" if launch == "native" else None,
                                   dense_16bit=only_routed_experts_low_bit(a.model_config, a.dtype_config))
    if a.cost_model_class is RooflineCostModel:
        return a.lower_bound_cost_model
    return roofline_model(a, a.cost_model_class)


def _label(a) -> str:
    return a.perf_model if isinstance(a.perf_model, str) else (a.profile.origin or a.profile.generation)


def inference(a, args: Dict[str, Any]) -> dict:
    """run_inference(a, **args): its summary hook is `inference_summary_hook(a)`. Under the calibrated
    model with kernels launched without CUDA graphs (`kernel_launch="native"` or "eager": a C++ engine's
    or PyTorch's static batches, FasterTransformer, TensorRT-LLM's GptSession) the call is timed by its
    sustained view (`CalibratedCostModel.for_inference`: compute at the power-limited sustained share, as
    a training step's). Under CUDA graphs (the default: the serving engines) it keeps the model serve()
    times its steps with, whose engine profiles were fitted without that share, so that one client of
    serve() is one inference() call (an assumption of scope, docs/performance-models.md)."""
    cm = a.cost_model
    view = call_cost_model(cm, a.kernel_launch, training=False)
    return run_inference(a if view is cm else with_cost_model(a, view), **args)


def inference_summary_hook(a):
    """The hook run_inference calls on the summary of `a`: when `a` times with its calibrated
    model (the analysis itself, or a view of it with its conventions) its `<key>_lower_bound`
    entries and `perf_model`; None under the roofline, or for a view timed by another cost model
    (`with_cost_model`)."""
    calibrated = a.profile is not None and isinstance(a.cost_model, CalibratedCostModel)
    return _calibrated_entries if calibrated else None


def _calibrated_entries(a, d, t: Dict[str, Any], summary: Dict[str, Any], ds_zero) -> None:
    """run_inference's summary hook under the calibrated model: the roofline's times of the call
    (`<key>_lower_bound`) and `perf_model`."""
    shape = (summary["batch_size_per_gpu"], summary["seq_len"], summary["num_tokens_to_generate"],
             summary["use_kv_cache"], ds_zero)
    prefill_s, step_s, decode_s, total_s = _inference_bounds(a, d, shape)
    # each `<key>_lower_bound` in the order of the keys it bounds (a chained assignment stores left first)
    summary["prefill_latency_lower_bound"] = summary["time_to_first_token_lower_bound"] = prefill_s
    summary["decode_latency_lower_bound"] = summary["time_per_output_token_lower_bound"] = step_s
    summary["total_decode_latency_lower_bound"] = decode_s
    summary["total_latency_lower_bound"] = total_s
    summary.update(calibrated_rate_entries(a))
    summary["perf_model"] = _label(a)


def _inference_bounds(a, d, shape) -> Tuple[float, float, float, float]:
    """The roofline's (prefill, decode step, decode total, total) seconds of the call: its
    inference times on the analysis' roofline (inference/lower_bound.py)."""
    bound = with_cost_model(a, a.lower_bound_cost_model)
    totals = inference_lower_bounds(bound, d, *shape)
    if totals is None:
        t = cached_inference_times(bound, d, *shape)
        totals = t["prefill_s"], t["decode_step_s"], t["decode_total_s"], t["total_s"]
    return totals


@lru_cache(maxsize=1)
def _run_training_defaults() -> Dict[str, Any]:
    return {k: p.default for k, p in inspect.signature(run_training).parameters.items() if k != "analysis"}


def _training_bounds(a, view, req: TrainingRequest, summary: Dict[str, Any]) -> Dict[str, float]:
    """The roofline's times of the call the calibrated run on `view` just analysed (`req`: the request it
    validated, which depends on no cost model): its stages (the run's own, re-timed: `bound_stages`) and
    iteration time at the micro-batch and accumulation steps that run chose (they depend on memory only,
    which no cost model changes), as `run_training` / `training_summary` compute them, without the validation,
    memory, batch choice and summary a full second run would redo. A ZeRO-3 rate cap
    (`zero3_gather_bytes_per_s`) is a framework's inefficiency, not the hardware's: the
    bound moves the gathers at NCCL's rates (training/zero3.py)."""
    bound = with_cost_model(a, a.lower_bound_cost_model)
    if req.zero3.gather_bytes_per_s is not None:
        req = dataclasses.replace(req, zero3=dataclasses.replace(req.zero3, gather_bytes_per_s=None))
    b, m = summary["batch_size_per_gpu"], summary["gradient_accumulation_steps"]
    stages = bound_stages(bound, req, b, stages_for(view, req, b))
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


def unexpected_training_keyword(name: str) -> TypeError:
    """The error of a training() keyword it does not take: named as training()'s (not the internal
    run_training's), with the closest valid keywords and all of them; a ParallelismConfig field (cp_comm,
    tp_size) is pointed to ParallelismConfig(...), where the layout is given. A TypeError, Python's
    convention for an unexpected keyword argument."""
    valid = sorted([*_run_training_defaults(), "encoder_seq_len"])  # (encoder_seq_len: the facade's own)
    layout = list(ParallelismConfig.model_fields)
    head = f"training() got an unexpected keyword argument {name!r}"
    if name in layout:
        return TypeError(f"{head}: {name} is a ParallelismConfig field; give it when building the analysis, "
                         f"LLMAnalysis(..., parallelism_config=ParallelismConfig({name}=...))")
    near = difflib.get_close_matches(name, valid + layout, n=3, cutoff=0.6)
    hint = "; closest: " + ", ".join(f"{n} (ParallelismConfig({n}=...))" if n in layout else n for n in near) \
        if near else ""
    return TypeError(f"{head}{hint}; valid keywords: {', '.join(valid)}")


def check_training_keywords(args: Dict[str, Any]) -> None:
    """Every keyword of a training() call is one it takes, under either model (the roofline calls
    run_training, the calibrated model training_run with its own arguments): the same error for both."""
    defaults = _run_training_defaults()
    unknown = next((k for k in args if k not in defaults), None)
    if unknown is not None:
        raise unexpected_training_keyword(unknown)


def _eager_run(view, args: Dict[str, Any]):
    """`training_run` of the call's arguments (output_dir popped, checked by `check_training_keywords`)
    on the eager-floor view: the summary and the validated request."""
    kw = dict(_run_training_defaults(), **args)
    kw["output_dir"] = None
    return training_run(view, kw)


def training(a, args: Dict[str, Any]) -> dict:
    """Training under the eager kernel floor; the lower bound from the same call on the roofline
    (batch and accumulation steps depend on memory only, so both runs choose the same)."""
    check_training_keywords(args)
    if args.get("lora") is not None and a.conventions.projections == "fused":
        # LoRA adapters attach to the q, k, v, gate and up modules one by one (PEFT on the model's
        # modules; a fused GEMM has no q_proj to adapt): the run is described with them separate
        a = a.with_conventions(dataclasses.replace(a.conventions, projections="separate"))
    if a.profile is None:
        return run_training(a, **args)
    output_dir = args.pop("output_dir")
    # the cost model's training view (kept by it: its phase times stay cached between calls)
    view = with_cost_model(a, a.cost_model.for_call(a.kernel_launch, training=True))  # (compute share: calibrated.py)
    summary, req = _eager_run(view, args)
    # the same call on the roofline (its stages kept per shape with every call's)
    summary.update(_training_bounds(a, view, req, summary))
    # the efficiencies of the rates the times used (the training view's, not the analysis' inference view:
    # achieved_tflops = flops_efficiency x peak)
    summary.update(calibrated_rate_entries(view))
    summary["perf_model"] = _label(a)
    if output_dir is not None:
        a.output_summary_dict(summary, output_dir, print_human_readable=True,
                              output_file_suffix=args.get("output_file_suffix", ""))
    return summary
