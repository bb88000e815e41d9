"""Checks and coercion of the planner's arguments: one-line ConfigErrors that
name the argument, its value and what is valid."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Dict, List, Mapping, Optional, Union

from llm_analysis.catalogue.lookup import GENERIC_CHECKPOINT, dtype_for_setup, generic_word
from llm_analysis.config import (DtypeConfig, GPUConfig, ModelConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                      get_model_config_by_name)
from llm_analysis.errors import ConfigError, LLMAnalysisError
from llm_analysis.model.checkpoint_weights import stored_weights
from llm_analysis.schema.options import choice, optional_positive_int, positive_int, positive_number  # noqa: F401 (the one set)
from llm_analysis.serving.engine import MAX_NUM_REQUESTS

OBJECTIVES_INFERENCE = ("cost", "tokens_per_gpu", "fewest_gpus")
OBJECTIVES_TRAINING = ("time", "cost")
PERCENTILES = (50, 90, 99)  # the percentiles serve() reports
BATCHING = ("continuous", "static")


@dataclass(frozen=True)
class SLO:
    """Serving targets. Times in seconds; None = no target.

    max_ttft_s: time to first token (static batching: the prefill of the batch);
    max_tpot_s: time per output token (static batching: the mean decode step);
    request_rate_per_s: offered load in requests per second, Poisson arrivals (sizes dp replicas);
    min_tokens_per_s: generated tokens per second the fleet must sustain;
    concurrency: closed-loop clients, each sending its next request when the previous one finishes
        (sizes dp replicas; not with request_rate_per_s);
    percentile: None: the latency targets are on the means; 50, 90 or 99: on that percentile of
        the requests (continuous batching: serve()'s ttft_p<q>_s and tpot_p<q>_s; a static batch
        has no spread, every request of it sees the batch's times, so there they are the means).
    """

    max_ttft_s: Optional[float] = None
    max_tpot_s: Optional[float] = None
    request_rate_per_s: Optional[float] = None
    min_tokens_per_s: Optional[float] = None
    concurrency: Optional[int] = None
    percentile: Optional[int] = None

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "percentile":
                if v is not None and (not _is_number(v) or v not in PERCENTILES):
                    raise ConfigError(f"slo.percentile = {v!r} must be one of {', '.join(map(str, PERCENTILES))} "
                                      "or None (targets on the means)")
            elif f.name == "concurrency":
                if v is not None and not (_is_number(v) and v >= 1 and float(v).is_integer()):
                    raise ConfigError(f"slo.concurrency = {v!r} must be a whole number of clients >= 1 or None")
                if v is not None and v > MAX_NUM_REQUESTS:
                    # a row carries serve()'s simulated percentiles, whose warm-up runs every client's first request
                    raise ConfigError(f"slo.concurrency = {v!r} exceeds {MAX_NUM_REQUESTS}, the most closed-loop "
                                      "clients the planner sizes fleets for (each row's serve() call simulates every "
                                      f"client's first request); valid: at most {MAX_NUM_REQUESTS} clients, or the "
                                      "load as a request rate (request_rate_per_s, on the command line --request_rate: "
                                      "an open loop has no such limit)")
            elif v is not None and not (_is_number(v) and v > 0):
                raise ConfigError(f"slo.{f.name} = {v!r} must be a positive number or None")
        if self.concurrency is not None and self.request_rate_per_s is not None:
            raise ConfigError(f"slo.concurrency = {self.concurrency!r} is given with a request rate "
                              f"({self.request_rate_per_s!r}/s): give one load, closed-loop clients or a request "
                              "rate")

    @property
    def has_load(self) -> bool:
        """A load to size replicas for: a request rate, a token rate or closed-loop clients."""
        return any(v is not None for v in (self.request_rate_per_s, self.min_tokens_per_s, self.concurrency))

    @classmethod
    def from_any(cls, value: Union[None, "SLO", Mapping[str, Any]]) -> "SLO":
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            valid = [f.name for f in fields(cls)]
            unknown = [k for k in value if k not in valid]
            if unknown:
                raise ConfigError(f"slo has unknown key {unknown[0]!r}; valid keys: {', '.join(valid)}")
            return cls(**value)
        raise ConfigError(f"slo = {value!r} must be None, an SLO or a dict")


def check_token_target(slo: SLO, output_mean_tokens: float) -> None:
    """With a request rate, min_tokens_per_s is a target the fleet must reach, not the load (the rate is): a
    fleet generates what it is sent, rate x mean output length tokens/s, and no more, so a target above that
    is met by no fleet. Refused once, before the search, as NoFeasiblePlanError on min_tokens_per_s, the
    constraint each fleet of closed-loop clients that falls short of it is refused on."""
    if slo.request_rate_per_s is None or slo.min_tokens_per_s is None:
        return
    from llm_analysis.planner.errors import NoFeasiblePlanError
    offered = slo.request_rate_per_s * output_mean_tokens
    if offered < slo.min_tokens_per_s * (1 - 1e-12):
        raise NoFeasiblePlanError(
            f"slo.min_tokens_per_s = {slo.min_tokens_per_s:g} tokens/s is more than slo.request_rate_per_s = "
            f"{slo.request_rate_per_s:g} generates: {slo.request_rate_per_s:g} requests/s x {output_mean_tokens:g} "
            f"tokens = {offered:g} tokens/s is the offered load, and a fleet generates what it is sent, no more; "
            f"valid: min_tokens_per_s <= {offered:g} with this rate, a higher rate, or min_tokens_per_s alone "
            "(then served as min_tokens_per_s / output length requests/s)",
            constraint="min_tokens_per_s", value=offered, limit=slo.min_tokens_per_s)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def model_config(model: Union[str, ModelConfig]) -> ModelConfig:
    if isinstance(model, ModelConfig):
        return model
    if isinstance(model, str) and model:
        return get_model_config_by_name(model)
    refuse_analysis_as_model(model)
    raise ConfigError(f"model = {model!r} must be a model name or a ModelConfig")


def refuse_analysis_as_model(model: Any) -> None:
    """An LLMAnalysis class or instance given as the model: the planner builds an analysis per candidate
    layout, so a custom architecture is named by its class (`analysis_class=`), the model by its config."""
    from llm_analysis.facade import LLMAnalysis
    if isinstance(model, type) and issubclass(model, LLMAnalysis):
        raise ConfigError(f"model = {model.__name__} is an analysis class, not a model: give the model's name or "
                          f"ModelConfig as `model` and the class as analysis_class={model.__name__} (the planner "
                          "builds one analysis of that class per candidate layout)")
    if isinstance(model, LLMAnalysis):
        cls = type(model).__name__
        raise ConfigError(f"model = a {cls} instance is an analysis, not a model: give its .model_config as `model` "
                          f"and its class as analysis_class={cls} (the planner builds one analysis of that class "
                          "per candidate layout, on its own GPUs, data types and parallelism)")


def analysis_class(value: Any) -> type:
    """The class every analysis of a plan is built as: LLMAnalysis or a subclass (a custom architecture,
    docs/custom-architectures.md)."""
    from llm_analysis.facade import LLMAnalysis
    if isinstance(value, type) and issubclass(value, LLMAnalysis):
        return value
    raise ConfigError(f"analysis_class = {value!r} must be LLMAnalysis or a subclass of it (a class, not an "
                      "instance: e.g. analysis_class=AdapterLLMAnalysis from examples/custom_architecture.py)")



def gpu_configs(gpus: Any) -> List[GPUConfig]:
    if isinstance(gpus, str):
        gpus = [g for g in gpus.split(",") if g.strip()]
    if gpus is None or not isinstance(gpus, (list, tuple)) or len(gpus) == 0:
        raise ConfigError(f"gpus = {gpus!r} must be a non-empty list of GPU names (e.g. ['h100-sxm-80gb'])")
    return [g if isinstance(g, GPUConfig) else get_gpu_config_by_name(str(g).strip()) for g in gpus]


@dataclass(frozen=True)
class DtypesPerGpu:
    """The data types the search tries on each GPU (`of`). Every name means one catalogue data type on
    every GPU, except "fp4" and "checkpoint", which `infer`, `train` and `serve` read for the model on the GPU
    (catalogue/lookup.py dtype_for_setup): for "fp4", an MXFP4 checkpoint (gpt-oss) runs as w4a8e16-mxfp4 on
    GPUs with FP4 tensor cores and w4a16e16-mxfp4 elsewhere; any other model as nvfp4, which a GPU without
    FP4 tensor cores cannot run: that GPU is searched without it, and `skipped` says why. "checkpoint" is
    the checkpoint's weights as released, run as the engines run them on each GPU (`as_released`)."""

    by_gpu: Dict[str, List[DtypeConfig]]
    resolved: Dict[str, str]  # what "fp4" became on each GPU that runs it
    skipped: Dict[str, str]  # GPU name: why "fp4" is not searched on it
    as_released: Dict[str, str]  # what "checkpoint" became on each GPU (empty when not asked for)

    def of(self, gpu: GPUConfig) -> List[DtypeConfig]:
        return self.by_gpu[gpu.name]

    def assumption(self) -> Optional[str]:
        """The planner's statement of what "fp4" meant per GPU (None when it was not asked for)."""
        if not self.resolved and not self.skipped:
            return None
        parts = [f"{gpu}: {name}" for gpu, name in self.resolved.items()]
        parts += [f"{gpu}: not searched ({why})" for gpu, why in self.skipped.items()]
        return "'fp4' read for the model on each GPU (catalogue/lookup.py dtype_for_setup): " + "; ".join(parts)

    def released_assumption(self, model: ModelConfig) -> Optional[str]:
        """The planner's statement of what "checkpoint" meant per GPU, for a checkpoint of low-bit weights (a
        16-bit one is w16a16e16 everywhere: nothing to state); None when the word was not asked for."""
        stored = model.checkpoint_weight_format
        if not self.as_released or stored is None:
            return None
        parts = []
        for gpu, name in self.as_released.items():
            config = get_dtype_config_by_name(name)
            how = "weight-only kernels: 16-bit activations" if config.activation_bits == 16 else \
                f"{config.activation_bits}-bit activations"
            parts.append(f"{gpu}: {name} ({how})")
        return (f"'checkpoint' (the default): {model.name}'s {stored} weights as released, run as the engines run "
                f"them on each GPU: {'; '.join(parts)}; --dtype_names bf16 (library: dtypes=['w16a16e16']) plans "
                f"them widened to 16 bits")

    def checkpoint_note(self, model: ModelConfig) -> Optional[str]:
        """What the rows hold when the model's checkpoint stores low-bit weights and no data type searched holds
        them so (gpt-oss's MXFP4 experts planned at the default w16a16e16: 234 GB where the release is 65 GB);
        None otherwise."""
        stored = model.checkpoint_weight_format
        if stored not in ("fp8", "nvfp4", "mxfp4"):
            return None
        searched = {c.name: c for configs in self.by_gpu.values() for c in configs}
        if any(stored_weights(c) == stored for c in searched.values()):
            return None
        named = "fp4" if stored != "fp8" else "fp8"
        return (f"{model.name}'s checkpoint stores {stored} weights; these rows hold them as "
                f"{', '.join(searched)}: --dtype_names {named} (library: dtypes=['{named}']) plans the checkpoint "
                f"as it is stored")


def dtype_configs(dtypes: Any, model: ModelConfig, gpus: List[GPUConfig]) -> DtypesPerGpu:
    """`dtypes` (names or DtypeConfigs) resolved on each GPU of the search (see DtypesPerGpu); a name
    that means nothing is refused for all of them, and so is "fp4" when no GPU can run it."""
    if isinstance(dtypes, (str, DtypeConfig)):
        dtypes = [dtypes]
    if not isinstance(dtypes, (list, tuple)) or len(dtypes) == 0:
        raise ConfigError(f"dtypes = {dtypes!r} must be a non-empty list of dtype names (e.g. ['w16a16e16'])")
    by_gpu: Dict[str, List[DtypeConfig]] = {gpu.name: [] for gpu in gpus}
    resolved: Dict[str, str] = {}
    skipped: Dict[str, str] = {}
    as_released: Dict[str, str] = {}
    refusal = None
    for d in dtypes:
        word = None if isinstance(d, DtypeConfig) else generic_word(d)
        if word is None:
            config = d if isinstance(d, DtypeConfig) else get_dtype_config_by_name(str(d).strip())
            for gpu in gpus:
                by_gpu[gpu.name].append(config)
            continue
        if word == GENERIC_CHECKPOINT:  # every GPU runs the release, some in weight-only kernels
            for gpu in gpus:
                config = dtype_for_setup(word, model, gpu)
                by_gpu[gpu.name].append(config)
                as_released[gpu.name] = config.name
            continue
        for gpu in gpus:
            try:
                config = dtype_for_setup(str(d), model, gpu)
            except ConfigError as err:  # NVFP4 on a GPU without FP4 tensor cores
                refusal = refusal or err
                skipped[gpu.name] = f"{model.name}'s 'fp4' is NVFP4, which needs FP4 tensor cores"
                continue
            by_gpu[gpu.name].append(config)
            resolved[gpu.name] = config.name
    if not any(by_gpu.values()):
        raise refusal
    # a data type named twice on a GPU ("fp4" and "nvfp4") is searched once
    by_gpu = {gpu: list({c.name: c for c in configs}.values()) for gpu, configs in by_gpu.items()}
    return DtypesPerGpu(by_gpu, resolved, skipped, as_released)


def kv_options(values: Any) -> List[Optional[float]]:
    """KV-cache bytes per element to try; None = the dtype's activation bytes."""
    if values is None or _is_number(values):
        values = [values]
    if not isinstance(values, (list, tuple)) or not values:
        raise ConfigError(f"kv_cache_dtype_bytes = {values!r} must be a number, None or a non-empty list of them")
    for v in values:
        if v is not None and not (_is_number(v) and v > 0):
            raise ConfigError(f"kv_cache_dtype_bytes = {v!r} must be a positive number of bytes or None")
    return list(dict.fromkeys(values))


def prices(gpu_prices: Optional[Mapping[str, float]], gpus: List[GPUConfig], required: bool) -> Dict[str, float]:
    """$/GPU-hour per GPU name; every GPU must have one when the objective is cost."""
    searched = {g.name for g in gpus}
    named = {}
    for name, v in dict(gpu_prices or {}).items():
        if not (_is_number(v) and v >= 0):
            raise ConfigError(f"gpu_prices[{name!r}] = {v!r} must be a non-negative number of dollars per GPU-hour")
        named[_priced_gpu(name, searched)] = v
    gpu_prices = named
    if required:
        missing = [g.name for g in gpus if g.name not in gpu_prices]
        if missing:
            raise ConfigError(f"gpu_prices has no $/GPU-hour for {', '.join(missing)}; the cost objective needs "
                              f"one per GPU (e.g. gpu_prices={{{missing[0]!r}: 2.5}})")
    return gpu_prices


def _priced_gpu(name: Any, searched) -> str:
    """The searched GPU a gpu_prices name stands for (its catalogue spelling or an alias of it); a price for a GPU
    not searched, or for no GPU, is refused by name: it had been dropped without a word (`--gpu_prices h100=2`
    left every $/Mtok blank)."""
    resolved = name
    if name not in searched:
        from llm_analysis.catalogue.lookup import get_gpu_config_by_name
        try:
            resolved = get_gpu_config_by_name(name).name
        except LLMAnalysisError as err:
            raise ConfigError(f"gpu_prices names {name!r}: {err}") from None
    if resolved not in searched:
        raise ConfigError(f"gpu_prices names {name!r}, which is not a GPU this plan searches; valid: "
                          f"{', '.join(sorted(searched))}")
    return resolved


def class_named(cls: type) -> Dict[str, str]:
    """A row's reproduce names the analysis class when it is not LLMAnalysis (a stock plan's rows stay as
    they were): {"analysis_class": its name}."""
    from llm_analysis.facade import LLMAnalysis
    return {} if cls is LLMAnalysis else {"analysis_class": cls.__name__}


def perf_model(value: Any) -> Any:
    """The planner's `perf_model`, as LLMAnalysis takes it (cost/calibrated.py
    `check_perf_model`); checked against each GPU when the search is built."""
    from llm_analysis.cost.calibrated import check_perf_model
    return check_perf_model(value)


def perf_model_assumption(value: Any, roofline_text: str) -> str:
    """What times the candidates, for a plan's stated assumptions."""
    if value == "roofline":
        return roofline_text
    source = ("the shipped profile of each GPU's generation (llm_analysis/cost/profiles)" if value == "calibrated"
              else f"the profile {getattr(value, 'origin', None) or value}")
    return ("calibrated (README 'Performance models'): expected times of a well-tuned framework from " + source +
            "; every target is checked against the expected times, and pruning bounds use the roofline at "
            "efficiency 1, which is never above them")


def probe_analyses(model: ModelConfig, gpus: List[GPUConfig], dtypes: DtypesPerGpu, kwargs: Dict[str, Any],
                   cls: type) -> list:
    """One analysis per GPU that runs a data type, at its first: a perf model that does not fit a GPU (a
    profile for another GPU, a GPU without a shipped profile) is refused by name, not skipped later; the
    first's resolved efficiencies and parameter count seed the search, and each GPU's engine defaults are
    checked on its own (planner/inference.py). `cls`: the plan's analysis_class (the parameter count
    that seeds the pruning bounds is the custom architecture's)."""
    return [cls(model, gpu, dtypes.of(gpu)[0], **kwargs) for gpu in gpus if dtypes.of(gpu)]


def probe_analysis(model: ModelConfig, gpus: List[GPUConfig], dtypes: DtypesPerGpu, kwargs: Dict[str, Any],
                   cls: type):
    """The first of `probe_analyses`."""
    return probe_analyses(model, gpus, dtypes, kwargs, cls)[0]
