"""The serving engine a deployment runs: its profile (catalogue/engine_profiles/<framework>.json, each
value with its source) and the caller's options, resolved for one GPU and layout: how it schedules,
its defaults, and the fitted costs the cost model does not hold (per step, per sequence, per layer,
API latency). `host_overlap`: the host's work added to the GPU's, or prepared a step ahead (TensorRT-LLM's
overlap scheduler: the longer of the two; `EngineSettings.step_with_host_s`). `moe_kernels`: the MoE
kernel family whose measured grouped GEMM share times routed experts (cost/calibrated.py).
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from llm_analysis.cost.precision import kv_cache_bytes_per_element
from llm_analysis.errors import ConfigError
from llm_analysis.schema.options import MAX_BATCH_SIZE, MAX_SEQ_LEN, choice, integer, non_negative_number, number

FRAMEWORKS = ("vllm", "sglang", "trtllm")
PROFILE_DIR = Path(__file__).resolve().parents[1] / "catalogue" / "engine_profiles"
DECIMAL_GB = 10**9  # the engine profiles state their memory sizes in decimal GB

# what `serve()` accepts besides the workload, with what each stands for (for the error on an unknown one)
ENGINE_OPTIONS = {
    "max_num_batched_tokens": "tokens one step may process (the chunked-prefill token budget)",
    "max_num_seqs": "requests running at once",
    "gpu_memory_utilization": "share of GPU memory the engine may use (its meaning per engine: the profile)",
    "block_size": "tokens per KV-cache block",
    "prefix_cache_share": "share of each prompt already in the prefix cache, in [0, 1)",
    "kv_cache_dtype": "KV-cache element type (auto, fp8, bf16, fp16, ...)",
    "seed": "seed of the simulation (arrivals, length draws, API-latency jitter)",
    "num_requests": "requests the simulation measures (tails, open loop); 0: no simulation (closed loop: means only)",
    "api_latency_s": "fixed API / tokenisation latency in every time to first token, seconds",
    "step_overhead_s": "host overhead of every engine step, seconds (an engine that overlaps its host's work with "
                       "the GPU's: the part its lookahead leaves exposed)",
    "step_overhead_per_seq_s": "host overhead per running sequence per step, seconds (an engine that overlaps its "
                               "host's work with the GPU's: its host step per sequence, hidden unless longer than "
                               "the GPU's)",
    "step_overhead_per_layer_s": "time per transformer layer per step beyond the cost model's operators, seconds "
                                 "(the engine's extra kernels and launch gaps in every layer)",
    "expert_spread_scale": "experts over expert-parallel groups (moe_ep > 1): scale on the busiest group's load "
                           "over the mean under uniform routing (serving/layout.py busiest_group_factor; the "
                           "profile's fitted value by default)",
    "scheduling_lookahead": "steps the scheduler plans ahead of the GPU (1: vLLM's async scheduling, SGLang's and "
                            "TensorRT-LLM's overlap schedulers, their defaults; 0: a scheduler that plans each step "
                            "after the previous one ends): a request arriving while others run waits that many more "
                            "steps before its prefill",
    "sliding_window_cache": "how sliding-window layers hold the KV cache: 'window_groups' (vLLM's hybrid manager: "
                            "blocks for the window only), 'window_pool' (SGLang's separate window pool), 'full' "
                            "(every layer holds every token: vLLM's --disable-hybrid-kv-cache-manager, TensorRT-LLM "
                            "without a per-layer attention window); default: the engine's for the model",
    "benchmark_rounds": "closed loop: requests per client of the benchmark run the mean is over (its clients start "
                        "together, so the first round queues behind each other's prefills); 0: the steady state "
                        "alone",
}
# the profile's fitted values a caller may replace (the notes say which were given): the host / API
# overheads, and the closed loop's benchmark run length
FITTED_OVERHEADS = ("api_latency_s", "step_overhead_s", "step_overhead_per_seq_s", "step_overhead_per_layer_s")
FITTED_VALUES = FITTED_OVERHEADS + ("benchmark_rounds",)
DEFAULT_NUM_REQUESTS = 4000
MAX_NUM_REQUESTS = 10**6


def load_engine_profile(framework: str) -> Dict[str, Any]:
    """The profile of `framework` (one of FRAMEWORKS) as stored (checked before the cache, which would
    hash a dict or a list given as the framework before any check could name it)."""
    return _stored_profile(choice(framework, "framework", FRAMEWORKS))


@lru_cache(maxsize=None)
def _stored_profile(framework: str) -> Dict[str, Any]:
    return json.loads((PROFILE_DIR / f"{framework}.json").read_text())


def check_runs_on(profile: Dict[str, Any], gpu) -> None:
    """A ConfigError unless the engine runs on the GPU's vendor's hardware (its profile's `runs_on`): TensorRT-LLM
    on an AMD or TPU part had been timed and planned as if it ran there, on a profile fitted on NVIDIA GPUs."""
    vendors = profile["runs_on"]["value"]
    if gpu.vendor not in vendors:
        others = [f for f in FRAMEWORKS if gpu.vendor in load_engine_profile(f)["runs_on"]["value"]]
        raise ConfigError(f"framework = {profile['framework']!r} runs on {', '.join(vendors)} hardware, not on "
                          f"{gpu.name} ({gpu.vendor}); valid frameworks there: {', '.join(others) or 'none'}")


def _rule_holds(rule: Dict[str, Any], gpu_memory_GiB: float, tp_size: int, gpu_name: str) -> bool:
    """Whether every condition a rule states holds: GPU memory bounds (at least `min_gpu_memory_GiB`,
    below `max_gpu_memory_GiB`), tensor-parallel bounds (at least `min_tp`, below `max_tp`), and no
    `gpu_name_excludes` word in the GPU's name."""
    if rule.get("gpu_name_excludes", "\0") in gpu_name.lower():
        return False
    return (gpu_memory_GiB >= rule.get("min_gpu_memory_GiB", -math.inf)
            and gpu_memory_GiB < rule.get("max_gpu_memory_GiB", math.inf)
            and tp_size >= rule.get("min_tp", -math.inf) and tp_size < rule.get("max_tp", math.inf))


def _by_rules(entry, gpu_memory_GiB: float, tp_size: int, gpu_name: str):
    """The value of a profile entry with `rules` (the first whose conditions all hold), else its
    default; an entry with `value` is that value; a plain number is itself."""
    if not isinstance(entry, dict):
        return entry
    if "value" in entry:
        return entry["value"]
    for rule in entry.get("rules", ()):
        if _rule_holds(rule, gpu_memory_GiB, tp_size, gpu_name):
            return rule["value"]
    return entry["default"]


def _reserved_share(reserve: Dict[str, Any], gpu_memory_GiB: float, tp_size: int, token_budget: int,
                    graph_max_batch: int) -> float:
    """An engine that sizes its static share from what it keeps back (SGLang's mem_fraction_static):
    reserved MiB = base + per budget token x max(token budget, least budget) + per tensor-parallel GPU x tp
    + per captured decode sequence x the largest captured batch, at least `floor_MiB` on GPUs above
    `floor_above_GiB`; the share is 1 - reserved / the GPU's MiB (rounded to 3 places, as the engine
    rounds it)."""
    gpu_MiB = gpu_memory_GiB * 1024
    reserved = (reserve["base_MiB"] + reserve["per_budget_token_MiB"] * max(token_budget, reserve["least_budget_tokens"])
                + reserve["per_tp_MiB"] * tp_size + reserve["per_graph_sequence_MiB"] * graph_max_batch)
    if gpu_memory_GiB > reserve["floor_above_GiB"]:
        reserved = max(reserved, reserve["floor_MiB"])
    return round((gpu_MiB - reserved) / gpu_MiB, 3)


@dataclass(frozen=True)
class EngineSettings:
    """A profile with the caller's options, for one GPU and layout (every field resolved)."""

    framework: str
    mixed_batches: bool  # prefill chunks share steps with decodes (else prefill-only steps)
    chunked_prefill: bool  # prompts longer than the step's free budget are split over steps
    admission: str  # "on_demand": KV blocks as tokens arrive (preempt when full); "full_request": reserve all;
    # "output_estimate": admit while the pool holds the prompt and (clipped) output of the new request and a share
    # of every running request's remaining (clipped) output (SGLang's PrefillAdder); blocks as tokens arrive
    output_reserve_share: float  # "output_estimate": the share of running requests' remaining output kept free
    output_reserve_clip_tokens: int  # "output_estimate": outputs are counted up to this many tokens
    token_budget: int  # max_num_batched_tokens
    max_num_seqs: int
    memory_share: float
    memory_share_of: str  # "total" (vLLM), "static" (SGLang: weights + KV), "free" (TensorRT-LLM)
    block_size: int
    # how sliding-window layers hold the KV cache (kv_pool.sliding_window_terms): "full", "window_groups" (vLLM's
    # hybrid manager) or "window_pool" (SGLang's pool of window_pool_ratio x the full layers' tokens)
    sliding_window_cache: str
    window_pool_ratio: float
    prefix_cache_share: float
    kv_cache_dtype: str
    kv_cache_bytes: float
    graph_decode_max_batch: int  # decode-only steps up to this many sequences replay CUDA graphs
    graph_mixed_max_tokens: int  # steps with prefill work up to this many tokens do too
    runtime_reserved_bytes: float
    graph_pool_bytes: float
    api_latency_s: float
    step_overhead_s: float
    step_overhead_per_seq_s: float
    step_overhead_per_layer_s: float  # GPU-side: time per layer per step beyond the operators (StepTimer.step_s)
    host_overlap: bool  # the host prepares the next step while the GPU runs this one (step_with_host_s)
    benchmark_rounds: float  # closed loop: the run's requests per client (the starting burst is 1 / R of it)
    scheduling_lookahead: int  # steps planned ahead of the GPU: an arrival joins that many steps later
    moe_kernels: str  # the MoE kernel family whose measured grouped GEMM share times routed experts
    moe_kernels_wide_ep: str  # the same with the experts split over expert-parallel ranks
    expert_spread_scale: float  # moe_ep > 1: scale on the busiest expert group's spread (serving/layout.py)
    prefill_contention: float  # disaggregated closed loop: share of a prefill batch waited per other client (serving/disaggregated.py)
    seed: int
    num_requests: int
    # the profile's calibrated errors on published runs it was not fitted on (benchmarks/serving_accuracy.py and
    # serving_layout_accuracy.py --write_accuracy), per kind of deployment (ACCURACY_KINDS): (kind, (rows, TTFT
    # median, TTFT p90, TPOT median, TPOT p90)) of |predicted / measured - 1|
    measured_accuracy: Tuple[Tuple[str, Tuple[int, float, float, float, float]], ...] = ()
    # the fitted values (FITTED_VALUES) the caller gave instead of the profile's (the notes name them)
    given_fitted: Tuple[str, ...] = ()

    def accuracy(self, kind: str) -> Optional[Tuple[int, float, float, float, float]]:
        """The stated errors for deployments of `kind` (ACCURACY_KINDS), None where the profile states none."""
        return dict(self.measured_accuracy).get(kind)

    def step_with_host_s(self, gpu_s: float, sequences: float) -> float:
        """One step of `gpu_s` seconds of GPU work over `sequences` running sequences, with the host's.

        Without `host_overlap` the host's work follows the GPU's: step_overhead_s + step_overhead_per_seq_s
        per sequence is added. With it (TensorRT-LLM's overlap scheduler, on by default: the host schedules
        and prepares step n + 1 and handles step n - 1's outputs while the GPU runs step n), the host's own
        step, step_overhead_per_seq_s per sequence, hides under the GPU's and shows only when it is longer;
        step_overhead_s is what the lookahead leaves exposed on every step (the hand-over between the two)."""
        if self.host_overlap:
            return max(gpu_s + self.step_overhead_s, self.host_busy_s(1, sequences))
        return gpu_s + self.host_busy_s(1, sequences)

    def host_busy_s(self, steps: float, sequences: float) -> float:
        """The host's own work for `steps` steps over `sequences` sequences in all: per step and per
        sequence; an overlapping engine's per-step overhead is what its lookahead leaves exposed on the
        GPU's side (`step_with_host_s`), not host work, so its host works per sequence only."""
        per_step = 0.0 if self.host_overlap else steps * self.step_overhead_s
        return per_step + self.step_overhead_per_seq_s * sequences

    def uses_graphs(self, tokens: float, has_prefill: bool) -> bool:
        """Whether a step of `tokens` tokens replays a CUDA graph (else its kernels launch eagerly)."""
        return tokens <= (self.graph_mixed_max_tokens if has_prefill else self.graph_decode_max_batch)


# keywords that are not engine options but a spelling of something serve() takes otherwise (the command
# line's flags, the mirrored inference()'s names)
_SPELLED_OTHERWISE = {
    "input_len_spread": "a spread goes with its length: input_len={'mean': m, 'spread': s}",
    "output_len_spread": "a spread goes with its length: output_len={'mean': m, 'spread': s}",
    "seq_len": "serve() takes the prompt length as input_len",
    "num_tokens_to_generate": "serve() takes the output length as output_len",
    "lengths_file": "serve() takes a file of (input, output) pairs as lengths='path'",
}


def check_options(options: Dict[str, Any]) -> None:
    """A ConfigError for the first option `serve()` does not take, naming the close ones."""
    for key in options:
        if key not in ENGINE_OPTIONS:
            near = difflib.get_close_matches(key, list(ENGINE_OPTIONS), n=3, cutoff=0.6)
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            if key in _SPELLED_OTHERWISE:
                hint = f" ({_SPELLED_OTHERWISE[key]})"
            raise ConfigError(f"engine option {key!r} is not known{hint}; valid: {', '.join(ENGINE_OPTIONS)}")


def _kv_cache_bytes(name: str, profile: Dict[str, Any], analysis) -> tuple:
    """(dtype name, bytes per element) of the KV cache: "auto" is the model's compute dtype (16 bits
    below 32-bit activations), or the profile's choice for quantised checkpoints."""
    dtype = analysis.dtype_config
    if name == "auto":
        entry = profile["kv_cache_dtype"]
        quantised = entry.get("quantised_checkpoint_value")
        formats = entry.get("quantised_checkpoint_formats")  # weight formats whose checkpoints state an FP8 cache
        if (quantised and dtype.weight_format != "int" and max(dtype.weight_bits, dtype.activation_bits) <= 8
                and (formats is None or dtype.weight_format in formats)):
            try:
                return quantised, float(kv_cache_bytes_per_element(quantised, analysis.gpu_config))
            except ConfigError:  # the GPU has no unit for it: the engine keeps the model dtype
                pass
        return "auto", 4.0 if dtype.activation_bits >= 32 else 2.0
    return name, float(kv_cache_bytes_per_element(name, analysis.gpu_config))


SLIDING_WINDOW_CACHES = ("full", "window_groups", "window_pool")


def _sliding_window_cache(profile: Dict[str, Any], model, given: Optional[str]) -> str:
    """How the engine caches the model's sliding-window layers: the caller's choice, else the profile's, which
    for SGLang's separate window pool holds only for the model types the engine gives one (the others: "full")."""
    entry = profile["sliding_window_cache"]
    if given is not None:
        valid = [c for c in SLIDING_WINDOW_CACHES if c != "window_pool" or "window_pool_ratio" in entry]
        return choice(given, "sliding_window_cache", tuple(valid))
    if entry["value"] == "window_pool" and model.model_type not in entry["model_types"]:
        return "full"
    return entry["value"]


def engine_settings(analysis, framework: str, options: Dict[str, Any]) -> EngineSettings:
    """The engine of `framework` on the analysis' GPU and layout, with `options` (checked: each
    bad value is one ConfigError naming the option, the value and what is valid)."""
    check_options(options)
    profile = load_engine_profile(framework)
    check_runs_on(profile, analysis.gpu_config)
    gpu_GiB = analysis.gpu_config.mem_per_GPU_in_GB  # (read in GiB, as the catalogue states it)
    tp = analysis.parallelism_config.tp_size
    get = options.get

    def resolved(key: str, option: str):
        value = get(option)
        return _by_rules(profile[key], gpu_GiB, tp, analysis.gpu_config.name) if value is None else value

    kv_name = get("kv_cache_dtype", profile["kv_cache_dtype"]["value"])
    if not isinstance(kv_name, str):
        raise ConfigError(f"kv_cache_dtype = {kv_name!r} must be a name: 'auto', 'fp8', 'bf16', 'fp16', ...")
    kv_name, kv_bytes = _kv_cache_bytes(kv_name, profile, analysis)
    graphs = profile["cuda_graphs"]
    graph_decode_max_batch = _by_rules(graphs["decode_max_batch"], gpu_GiB, tp, analysis.gpu_config.name)
    scheduling = profile["scheduling"]
    token_budget = integer(resolved("max_num_batched_tokens", "max_num_batched_tokens"), "max_num_batched_tokens", 1,
                           MAX_SEQ_LEN)
    share = get("gpu_memory_utilization")
    if share is None and "reserved" in profile["memory_share"]:  # the engine keeps back what it needs, the rest is static
        share = _reserved_share(profile["memory_share"]["reserved"], gpu_GiB, tp, token_budget, graph_decode_max_batch)
        if share <= 0:  # the engine's own rule leaves nothing: name what drove it, not an option never given
            raise ConfigError(
                f"max_num_batched_tokens = {token_budget}: {profile['framework']}'s default memory share keeps back "
                f"memory for the activations of a prefill chunk of that many tokens (and its runtime), more than "
                f"the {gpu_GiB:g} GiB of {analysis.gpu_config.name} (share {share}); give a smaller "
                f"max_num_batched_tokens or set gpu_memory_utilization in (0, 1]")
    elif share is None:
        share = _by_rules(profile["memory_share"], gpu_GiB, tp, analysis.gpu_config.name)
    max_num_seqs = integer(resolved("max_num_seqs", "max_num_seqs"), "max_num_seqs", 1, MAX_BATCH_SIZE)
    if scheduling.get("token_budget_at_least_max_num_seqs") and token_budget < max_num_seqs:
        # the engine refuses to start (every running sequence needs a token of the step): so do we
        given = [k for k in ("max_num_batched_tokens", "max_num_seqs") if get(k) is None]
        defaults = f" ({' and '.join(given)} the engine's default)" if given else ""
        raise ConfigError(f"max_num_batched_tokens = {token_budget} < max_num_seqs = {max_num_seqs}{defaults}: "
                          f"{profile['framework']} refuses to start unless every running sequence has a token of the "
                          f"step; valid: max_num_batched_tokens >= max_num_seqs (raise the one, or lower the other)")
    return EngineSettings(
        framework=profile["framework"],
        mixed_batches=scheduling["mixed_batches"], chunked_prefill=scheduling["chunked_prefill"],
        admission=scheduling["admission"],
        output_reserve_share=scheduling.get("output_reserve_share", 0.0),
        output_reserve_clip_tokens=scheduling.get("output_reserve_clip_tokens", 0),
        token_budget=token_budget,
        max_num_seqs=max_num_seqs,
        memory_share=number(share, "gpu_memory_utilization", 0.0, 1.0),
        memory_share_of=profile["memory_share"]["of"],
        block_size=integer(get("block_size", profile["block_size"]["value"]), "block_size", 1, 2**20),
        sliding_window_cache=_sliding_window_cache(profile, analysis.model_config, get("sliding_window_cache")),
        window_pool_ratio=profile["sliding_window_cache"].get("window_pool_ratio", 0.0),
        prefix_cache_share=_share_below_one(get("prefix_cache_share", 0.0), "prefix_cache_share"),
        kv_cache_dtype=kv_name, kv_cache_bytes=kv_bytes,
        graph_decode_max_batch=graph_decode_max_batch, graph_mixed_max_tokens=graphs["mixed_max_tokens"],
        runtime_reserved_bytes=profile["runtime_reserved_GB"]["value"] * DECIMAL_GB,
        graph_pool_bytes=profile["cuda_graph_pool_GB"]["value"] * DECIMAL_GB,
        api_latency_s=non_negative_number(get("api_latency_s", profile["api_latency_s"]["value"]), "api_latency_s",
                                          3600.0),
        step_overhead_s=non_negative_number(get("step_overhead_s", profile["step_overhead_s"]["value"]),
                                            "step_overhead_s", 60.0),
        step_overhead_per_seq_s=non_negative_number(
            get("step_overhead_per_seq_s", profile["step_overhead_per_seq_s"]["value"]), "step_overhead_per_seq_s",
            1.0),
        step_overhead_per_layer_s=non_negative_number(
            get("step_overhead_per_layer_s", profile["step_overhead_per_layer_s"]["value"]),
            "step_overhead_per_layer_s", 1.0),
        host_overlap=bool(profile["host_overlap"]["value"]),
        benchmark_rounds=_rounds(get("benchmark_rounds", profile["benchmark_rounds"]["value"])),
        scheduling_lookahead=choice(get("scheduling_lookahead", profile["scheduling_lookahead"]["value"]),
                                    "scheduling_lookahead", (0, 1)),
        moe_kernels=profile["moe_kernels"]["value"], moe_kernels_wide_ep=profile["moe_kernels"]["wide_ep_value"],
        expert_spread_scale=non_negative_number(
            get("expert_spread_scale", profile["expert_spread_scale"]["value"]), "expert_spread_scale", 10.0),
        prefill_contention=profile["prefill_contention"]["value"],
        seed=integer(get("seed", 0), "seed", 0, 2**63 - 1),
        num_requests=integer(get("num_requests", DEFAULT_NUM_REQUESTS), "num_requests", 0, MAX_NUM_REQUESTS),
        measured_accuracy=_measured_accuracy(profile),
        given_fitted=tuple(k for k in FITTED_VALUES if get(k) is not None),
    )


# the deployments a profile's stated errors cover: one tensor-parallel group per worker; workers with
# attention DP, expert or pipeline parallelism; disaggregated prefill and decode pools
ACCURACY_KINDS = ("one_group", "aggregated_layout", "disaggregated")


def stated_accuracy(framework: str) -> Dict[str, Tuple[int, float, float, float, float]]:
    """The errors `framework`'s profile states per kind of deployment (ACCURACY_KINDS order)."""
    return dict(_measured_accuracy(load_engine_profile(framework)))


def _measured_accuracy(profile: Dict[str, Any]) -> Tuple[Tuple[str, Tuple[int, float, float, float, float]], ...]:
    layouts = profile.get("measured_accuracy_layouts", {})
    stated = {"one_group": profile.get("measured_accuracy"), "aggregated_layout": layouts.get("aggregated"),
              "disaggregated": layouts.get("disaggregated")}
    return tuple((kind, (m["rows"], m["ttft_median"], m["ttft_p90"], m["tpot_median"], m["tpot_p90"]))
                 for kind, m in stated.items() if m is not None)


def _rounds(value) -> float:
    """benchmark_rounds: 0 (the steady state alone) or at least one request per client."""
    v = non_negative_number(value, "benchmark_rounds", 1e9)
    if 0 < v < 1:
        raise ConfigError(f"benchmark_rounds = {value!r} must be 0 (the steady state alone) or at least 1 request "
                          "per client")
    return v


def _share_below_one(value, field: str) -> float:
    """A share in [0, 1) (a request whose whole prompt is cached still prefills its last token)."""
    what = "a share in [0, 1)"
    v = number(value, field, 0.0, 1.0, lo_open=False, what=what)
    if v >= 1.0:
        raise ConfigError(f"{field} = {value!r} must be {what}: a request whose whole prompt is cached still "
                          "prefills its last token")
    return v


__all__ = ["ENGINE_OPTIONS", "EngineSettings", "FRAMEWORKS", "engine_settings", "load_engine_profile"]
