"""`calibrate(measurements) -> Profile`: fit the calibrated performance model to a
few measured points of one's own cluster, through the public API.

Each measurement is a dict (or `cost.calibrate.Measurement`)::

    {"id": "llama8b-b1-prefill128",
     "setup": {"model_name": "meta-llama_Llama-3.1-8B",   # or "model_config": a ModelConfig
               "gpu_name": "h100-sxm-80gb", "dtype_name": "w16a16e16",
               "tp_size": 1, "pp_size": 1, "dp_size": 1, "ep_size": 1,   # optional, default 1
               "mode": "inference",                       # or "training"
               "args": {"batch_size_per_gpu": 1, "seq_len": 128, "num_tokens_to_generate": 1},
               "quantity": "prefill_latency",             # a summary key (default total_latency /
                                                          # latency_per_iter); "tokens" for tokens/s
               "kernel_launch": "graph"},                 # optional (LLMAnalysis kernel_launch)
     "value": 7.1, "unit": "ms"}                          # s | ms | us, or tokens/s

The predictor is `LLMAnalysis(..., perf_model=<trial profile>)` and its
inference()/training() summary, so the fitted profile predicts exactly what
the API will report. All measurements must use GPUs of one generation; the
starting point is that generation's shipped profile. The returned Profile
lists the measured GPUs only; save it with `save_profile(profile, path)` and
reuse it with `LLMAnalysis(..., perf_model=path)` or `--gpu_profile path`.
Refusals (one line, nothing fitted): fewer points than parameters, times mixed
with throughputs, setups the model cannot express (CPU/NVMe offload), unknown
fields, several GPU generations.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from llm_analysis.config import ModelConfig, ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.cost.calibrate import CalibrationError, Measurement, calibrate as _fit, check_measurements
from llm_analysis.cost.profiles import Profile, generation_of, load_profile, save_profile
from llm_analysis.errors import ConfigError
from llm_analysis.facade import LLMAnalysis

DEFAULT_PARAMETERS = ("gemm_plateau_efficiency", "hbm_efficiency")
_SETUP_KEYS = {"model_name", "model_config", "gpu_name", "dtype_name", "tp_size", "pp_size", "dp_size", "ep_size",
               "sp_size", "mode", "args", "quantity", "tokens", "kernel_launch", "num_gpus_per_node",
               "cpu_offload", "activation_cpu_offload", "optimizer_cpu_offload", "nvme_offload"}
_DEFAULT_QUANTITY = {"inference": "total_latency", "training": "latency_per_iter"}


def _check_setup(m: Measurement) -> None:
    extra = set(m.setup) - _SETUP_KEYS
    if extra:
        raise CalibrationError(f"measurement {m.id!r}: unknown setup field {sorted(extra)[0]!r}; valid: "
                               f"{', '.join(sorted(_SETUP_KEYS))}")
    if m.setup.get("mode", "inference") not in _DEFAULT_QUANTITY:
        raise CalibrationError(f"measurement {m.id!r}: setup['mode'] = {m.setup['mode']!r}; valid: inference, training")
    if "gpu_name" not in m.setup or ("model_name" not in m.setup and "model_config" not in m.setup):
        raise CalibrationError(f"measurement {m.id!r}: setup needs 'gpu_name' and 'model_name' (or 'model_config')")


def predict_s(setup: Mapping, profile: Profile) -> float:
    """The measured quantity of one setup as the API predicts it under `profile`, in seconds."""
    model = setup.get("model_config")
    if not isinstance(model, ModelConfig):
        model = get_model_config_by_name(setup["model_name"])
    par = ParallelismConfig(**{k: setup[k] for k in ("tp_size", "pp_size", "dp_size", "ep_size", "sp_size")
                               if k in setup})
    a = LLMAnalysis(model, get_gpu_config_by_name(setup["gpu_name"]),
                    get_dtype_config_by_name(setup.get("dtype_name", "w16a16e16")), par, perf_model=profile,
                    kernel_launch=setup.get("kernel_launch"),
                    **({"num_gpus_per_node": setup["num_gpus_per_node"]} if "num_gpus_per_node" in setup else {}))
    mode = setup.get("mode", "inference")
    summary = (a.inference if mode == "inference" else a.training)(**setup.get("args", {}))
    return summary[setup.get("quantity", _DEFAULT_QUANTITY[mode])]


def calibrate(measurements: Iterable, parameters: Sequence[str] = DEFAULT_PARAMETERS) -> Profile:
    """Fit `parameters` of the calibrated model to `measurements` (see the module docstring)."""
    recs = check_measurements(list(measurements), parameters)
    for m in recs:
        _check_setup(m)
    try:
        gens = {generation_of(get_gpu_config_by_name(m.setup["gpu_name"]).name) for m in recs}
    except ConfigError as e:
        raise CalibrationError(str(e).splitlines()[0]) from None
    if len(gens) > 1:
        raise CalibrationError(f"the measurements use GPUs of {len(gens)} generations ({', '.join(sorted(gens))}); "
                               "fit one profile per generation")
    base = load_profile(gens.pop())
    gpus = {m.setup["gpu_name"] for m in recs}
    base = Profile(base.generation, base.values, base.sources, {g: base.gpus[g] for g in gpus if g in base.gpus},
                   "calibrate()")
    return _fit(recs, predict_s, base, parameters)


__all__ = ["calibrate", "predict_s", "save_profile", "CalibrationError"]
