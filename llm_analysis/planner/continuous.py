"""The serving planner on continuous batching: how many replicas of which layout serve a load
(Poisson requests per second, closed-loop clients, or output tokens per second) under latency
targets on means or percentiles, each fleet timed by `LLMAnalysis.serve()` (serving/: the engine
steps, KV pool and queueing of vLLM, SGLang or TensorRT-LLM), not by static batches.

For every GPU type, data type, worker layout and KV-cache type the search
1. builds one replica (a worker: tp GPUs for dense models; for MoE models tp x attention_dp GPUs
   with the experts over moe_tp x moe_ep of them, planner/layouts.py) and asks serve() for a
   request alone (one closed-loop client): the floor of TTFT and TPOT. A layout whose floor misses
   a target is out at any replica count (its miss is recorded);
2. starts at the fewest replicas that each run below NEAR_SATURATION (90%) of their saturation rate
   (at or above it the queue grows without bound; within 10% of it the queue, and TTFT, depend on how
   long the load lasts: serving/answer.py) and adds replicas, doubling, then bisecting between the last count
   that missed and the first that met every target: latencies fall as each replica's share of the
   load falls. Each count is one serve() call of the whole fleet (dp_size = replicas), so the
   row's figures are exactly what its `reproduce["serve_call"]` returns.
Layouts are searched in order of their fewest possible GPUs (its GPUs x the replicas that keep up
with the rate), least first (`collect_continuous`): one whose bound is above the best fleet found is
not searched, and a worker wider than that fleet is not built.

`binding` names what a fleet of one replica fewer misses: a latency target (`ttft`, `tpot`, or
`ttft_p90` ... on a percentile), `saturation` (the offered rate is above 90% of what it completes) or
`min_tokens_per_s`; `none` when one replica meets every target.

A token-rate target alone is served as Poisson requests at min_tokens_per_s / mean output length per
second; with a request rate the rate is the load and min_tokens_per_s a target its fleet must reach (a rate
whose requests x mean output length fall short of it is refused before the search:
`inputs.check_token_target`), as with closed-loop clients.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from llm_analysis.errors import ConfigError, DoesNotFitError
from llm_analysis.facade import LLMAnalysis
import llm_analysis.planner.inputs as inputs
from llm_analysis.planner.errors import ClosestMiss
from llm_analysis.planner.layouts import Worker, workers_of
from llm_analysis.planner.result import SearchStats
from llm_analysis.planner.space import weight_bytes_lower_bound
from llm_analysis.serving.answer import NEAR_SATURATION, accuracy_summary
from llm_analysis.serving.engine import stated_accuracy

# the planner's KV-cache bytes per element -> the engine's kv_cache_dtype name (None: the engine's default)
KV_NAME_OF_BYTES = {1: "fp8", 2: "fp16", 4: "fp32"}
MAX_REPLICAS = 4096  # the search stops adding replicas here (a latency floor is what would stop it)
# requests the simulation runs while a replica count is searched (open loop, percentile targets); the
# chosen count is then confirmed, and its figures taken, on the engine's full simulation
# (serving/engine.py DEFAULT_NUM_REQUESTS) unless the caller set num_requests
SCREEN_REQUESTS = 500

CONTINUOUS_COLUMNS = [
    ("gpu", lambda r: r["layout"]["gpu"]), ("dtype", lambda r: r["layout"]["dtype"]),
    ("kv", lambda r: r["layout"]["kv_cache_dtype"]),
    ("tp", lambda r: str(r["layout"]["tp"])), ("adp", lambda r: str(r["layout"]["attention_dp"])),
    ("moe", lambda r: "-" if r["layout"]["moe_ep"] is None else f"{r['layout']['moe_tp']}x{r['layout']['moe_ep']}"
     + (f"+{r['layout']['moe_redundant_experts']}" if r["layout"].get("moe_redundant_experts") else "")),
    ("replicas", lambda r: str(r["figures"]["replicas"])), ("gpus", lambda r: str(r["figures"]["num_gpus"])),
    ("running", lambda r: f"{r['figures']['mean_running_requests_per_replica']:.1f}"),
    ("ttft_ms", lambda r: f"{r['figures']['time_to_first_token'] * 1e3:.1f}"),
    ("tpot_ms", lambda r: f"{r['figures']['time_per_output_token'] * 1e3:.2f}"),
    ("tok/s/gpu", lambda r: f"{r['figures']['tokens_per_sec_per_gpu']:.1f}"),
    ("$/Mtok", lambda r: "-" if r["figures"]["cost_per_million_tokens"] is None
     else f"{r['figures']['cost_per_million_tokens']:.3f}"),
]


def continuous_legend(percentile: Optional[int]) -> Dict[str, str]:
    stat = "mean" if percentile is None else f"p{percentile}"
    return {
        "kv": "KV-cache dtype the engine runs (auto = the model's compute dtype)",
        "tp": "tensor-parallel GPUs of each attention replica",
        "adp": "attention replicas per worker (attention data parallelism; a worker is tp x adp GPUs)",
        "moe": "routed experts split moe_tp x moe_ep over the worker's GPUs (each expert moe_tp ways, experts over "
               "moe_ep groups; +r: r redundant expert copies spread with them)",
        "replicas": "workers (copies of the layout) sharing the load",
        "gpus": "replicas x tp x adp GPUs",
        "running": "mean requests running at once per worker, continuous batching",
        "ttft_ms": f"time to first token, ms ({stat} over requests, queueing included)",
        "tpot_ms": f"time per output token, ms ({stat} over requests)",
        "tok/s/gpu": "generated tokens per second per GPU at the offered load",
        "$/Mtok": "dollars per million generated tokens at the offered load",
        "binding": "what a fleet of one replica fewer misses (saturation: the offered rate is above 90% of "
                   "what it completes; none: one replica meets every target)",
    }


@dataclass
class ContinuousLoad:
    """What the fleet serves, as serve() takes it, and the targets checked on its answer."""

    slo: inputs.SLO
    workload: Dict[str, Any]  # serve()'s lengths: input_len and output_len (tokens or {mean, spread}), or lengths
    output_mean: float  # tokens per request, on average
    framework: str
    engine_options: Dict[str, Any]
    workload_text: str = ""  # the lengths in words
    lengths_given: Any = None  # `lengths` as the caller gave it (a path, pairs), as a row's reproduce writes it
    speculative: Optional[Dict[str, Any]] = None  # serve()'s speculative decoding, as given

    def as_given(self, kwargs: Dict[str, Any]) -> Dict[str, Any]:
        """serve() keyword arguments as a row reproduces them: the length pairs the search passes as one
        checked array (a file is read once) named as the caller gave them (its path, or its list)."""
        if "lengths" not in kwargs or self.lengths_given is None:
            return kwargs
        return {**kwargs, "lengths": self.lengths_given}

    @property
    def request_rate(self) -> Optional[float]:
        """The open loop's requests/s: the rate given; a token-rate target alone becomes requests at
        min_tokens_per_s / the mean output length (given with a rate or clients, it is a target the fleet's
        answer is checked against, `misses`, never the load)."""
        if self.slo.request_rate_per_s is not None or self.slo.concurrency is not None:
            return self.slo.request_rate_per_s
        if self.slo.min_tokens_per_s is not None:
            return self.slo.min_tokens_per_s / self.output_mean
        return None

    def serve_kwargs(self, kv_name: Optional[str], means_only: bool) -> Dict[str, Any]:
        load = ({"concurrency": int(self.slo.concurrency)} if self.slo.concurrency is not None
                else {"request_rate": self.request_rate})
        kw = {**load, **self.workload, "framework": self.framework, **self.engine_options}
        if self.speculative is not None:
            kw["speculative"] = self.speculative
        if kv_name is not None:
            kw["kv_cache_dtype"] = kv_name
        if means_only and self.slo.concurrency is not None:
            kw["num_requests"] = 0  # the closed loop's means come from its steady state: no simulation needed
        return kw

    def latency_keys(self) -> Tuple[str, str]:
        q = self.slo.percentile
        return ("ttft_s", "tpot_s") if q is None else (f"ttft_p{q}_s", f"tpot_p{q}_s")

    def alone_kwargs(self, kv_name: Optional[str]) -> Dict[str, Any]:
        """serve() keyword arguments of a request alone: one closed-loop client, its steady state only."""
        kw = {k: v for k, v in self.serve_kwargs(kv_name, True).items()
              if k not in ("request_rate", "concurrency", "num_requests")}
        return {**kw, "concurrency": 1, "num_requests": 0}

    def misses(self, s: Dict[str, Any]) -> List[Tuple[str, float, float]]:
        """(constraint, value, limit) of every target the answer `s` misses."""
        out = []
        # a simulated open loop near saturation misses: its queue there depends on how long the run lasts
        # (serve()'s `near_saturation`; a disaggregated answer's queue is in closed form, never near)
        if s["saturated"] or s["near_saturation"]:
            out.append(("saturation", s["request_rate"] / s["num_replicas"],
                        NEAR_SATURATION * s["saturation_request_rate_per_s"] / s["num_replicas"]))
            if s["saturated"]:  # no latency is a number: nothing else to check
                return out
        ttft_key, tpot_key = self.latency_keys()
        suffix = "" if self.slo.percentile is None else f"_p{self.slo.percentile}"
        for name, key, limit in (("ttft", ttft_key, self.slo.max_ttft_s), ("tpot", tpot_key, self.slo.max_tpot_s)):
            value = s.get(key)
            if limit is not None and value is not None and value > limit:
                out.append((name + suffix, value, limit))
        if self.slo.min_tokens_per_s is not None and s["output_tokens_per_s"] < self.slo.min_tokens_per_s * (1 - 1e-12):
            out.append(("min_tokens_per_s", s["output_tokens_per_s"], self.slo.min_tokens_per_s))
        return out


def kv_cache_name(kv_bytes: Optional[float]) -> Optional[str]:
    """The engine's KV-cache dtype for the planner's byte width (None: the engine's default)."""
    if kv_bytes is None:
        return None
    name = KV_NAME_OF_BYTES.get(kv_bytes)
    if name is None:
        raise ConfigError(f"kv_cache_dtype_bytes = {kv_bytes!r} has no KV-cache type a serving engine runs; "
                          f"valid with continuous batching: None (the engine's default), "
                          + ", ".join(f"{b} ({n})" for b, n in KV_NAME_OF_BYTES.items()))
    return name


def _fleet(search, lay: Worker, replicas: int) -> LLMAnalysis:
    """One serve() fleet of `replicas` workers of `lay`, as the plan's analysis class."""
    return search.analysis_class(search.model, lay.gpu, lay.dtype, lay.parallelism(replicas),
                                 **search.analysis_kwargs)


def serve_call_text(search, lay: Worker, parallelism_text: str, serve_kw: str) -> str:
    """The Python call that reproduces a row (the `serve()` arguments as a readable string), on the plan's
    analysis class (a custom architecture's subclass by its name: the caller imports it)."""
    analysis_kw = "".join(f", {k}={v!r}" for k, v in search.analysis_kwargs.items())
    return (f"{search.analysis_class.__name__}(get_model_config_by_name({search.model.name!r}), "
            f"get_gpu_config_by_name({lay.gpu.name!r}), "
            f"get_dtype_config_by_name({lay.dtype.name!r}), {parallelism_text}{analysis_kw}).serve({serve_kw})")


def objective_weight(search, objective: str) -> Callable[[Worker], float]:
    """What the objective counts per GPU of a layout: its price under "cost", else 1."""
    return lambda lay: search.prices.get(lay.gpu.name, 1.0) if objective == "cost" else 1.0


class _LayoutSearch:
    """The replica count search of one (layout, KV type)."""

    def __init__(self, search, lay, kv_name: Optional[str], load: ContinuousLoad, stats: SearchStats,
                 miss: ClosestMiss, describe: Dict[str, Any]):
        self.search, self.lay, self.kv_name, self.load = search, lay, kv_name, load
        self.stats, self.miss, self.describe = stats, miss, describe
        self.means_only = load.slo.percentile is None
        # the search's calls simulate (open loop, or percentile targets): it runs them shorter, then confirms
        self.screening = ((load.slo.concurrency is None or not self.means_only)
                          and "num_requests" not in load.engine_options)
        self.answers: Dict[int, Dict[str, Any]] = {}  # the search's answers by replica count
        self.full_answers: Dict[int, Dict[str, Any]] = {}  # the row's own call (full simulation) by count
        self.saturation_per_replica = math.inf  # requests/s one replica completes flat out (from floor())
        self._first_count: Optional[int] = None  # first_count(), once known

    def search_kwargs(self) -> Dict[str, Any]:
        kw = self.load.serve_kwargs(self.kv_name, self.means_only)
        if self.screening:
            kw["num_requests"] = SCREEN_REQUESTS
        return kw

    def serve(self, replicas: int) -> Dict[str, Any]:
        self.stats.evaluated_full += 1
        return _fleet(self.search, self.lay, replicas).serve(**self.search_kwargs())

    def full_at(self, replicas: int) -> Dict[str, Any]:
        """The answer of the row's own serve() call (the engine's full simulation) at `replicas`."""
        if replicas not in self.full_answers:
            kwargs = self.load.serve_kwargs(self.kv_name, means_only=False)
            if kwargs == self.search_kwargs():
                self.full_answers[replicas] = self.at(replicas)
            else:
                self.stats.evaluated_full += 1
                self.full_answers[replicas] = _fleet(self.search, self.lay, replicas).serve(**kwargs)
        return self.full_answers[replicas]

    def at(self, replicas: int) -> Dict[str, Any]:
        if replicas not in self.answers:
            self.answers[replicas] = self.serve(replicas)
        return self.answers[replicas]

    def floor(self, simulate: bool) -> Optional[Dict[str, Any]]:
        """A request alone on one replica (one closed-loop client); None (miss recorded) when even it
        misses a latency target: no replica count can then meet it. Without `simulate`, the steady
        state only (its means; the percentile targets are checked with `simulate`)."""
        kw = self.load.alone_kwargs(self.kv_name)
        if simulate:
            kw.pop("num_requests")
            if "num_requests" in self.search_kwargs():
                kw["num_requests"] = self.search_kwargs()["num_requests"]
        self.stats.evaluated_full += 1
        alone = _fleet(self.search, self.lay, 1).serve(**kw)
        self.saturation_per_replica = alone["saturation_request_rate_per_s"]
        slo = self.load.slo
        targets = inputs.SLO(max_ttft_s=slo.max_ttft_s, max_tpot_s=slo.max_tpot_s,
                             percentile=slo.percentile if simulate else None)
        misses = ContinuousLoad(targets, self.load.workload, self.load.output_mean, self.load.framework,
                                {}).misses(alone)
        if misses and (simulate or self.means_only):
            self.miss.record_all(misses, {**self.describe, "replicas": "any (a request alone)"})
            return None
        return alone

    def first_count(self) -> int:
        """The fewest replicas that each run below NEAR_SATURATION of their saturation rate (1 for
        closed-loop clients), on the saturation serve() judges an open loop by. The request alone gives
        the engine's two-point saturation, which can be below that verdict's (its scan of the running
        counts: vLLM, Llama-3.1-8B, H100, 128 + 1,024 tokens, 17.33 against 17.50 requests/s), so a
        count above 1 is taken from one replica's own answer at the rate (saturated there: no
        simulation); the alone figure had put the start, and the max_gpus bound, one replica high."""
        rate = self.load.request_rate
        if rate is None:
            return 1
        if self._first_count is None:
            count = max(1, math.floor(rate / (NEAR_SATURATION * self.saturation_per_replica)) + 1)
            if count > 1:
                verdict = self.at(1)["saturation_request_rate_per_s"]
                count = max(1, math.floor(rate / (NEAR_SATURATION * verdict)) + 1)
            self._first_count = count
        return self._first_count

    def gpu_bound(self) -> int:
        return self.first_count() * self.lay.gpus

    def cap(self) -> int:
        cap = MAX_REPLICAS
        if self.search.max_gpus is not None:
            cap = min(cap, self.search.max_gpus // self.lay.gpus)
        if self.load.slo.concurrency is not None:
            cap = min(cap, int(self.load.slo.concurrency))  # more replicas than clients stay idle
        return cap

    def fewest_replicas(self) -> Optional[int]:
        """The fewest replicas meeting every target, or None (the closest miss recorded)."""
        cap = self.cap()
        start = self.first_count()
        if start > cap:  # even the fewest replicas that keep up with the rate are more than the cap allows
            where = {**self.describe, "replicas": f"{start} (the fewest that keep up with the request rate; the "
                                                  "latency targets may need more)"}
            if self.search.max_gpus is not None and start * self.lay.gpus > self.search.max_gpus:
                # the user's limit, stated as given (not the whole workers it leaves room for)
                self.miss.record("max_gpus", start * self.lay.gpus, self.search.max_gpus, where)
            else:  # the search's own bound (MAX_REPLICAS, or one replica per client), not a limit the user set
                self.miss.record("max_replicas", start, cap, where)
            return None
        found = _fewest_meeting(lambda n: bool(self.load.misses(self.at(n))), 0, start, cap)
        if found is None:
            self._record_miss(self.at(cap), cap)
            return None
        self.stats.considered += cap
        self.stats.decided_by_monotonicity += max(0, cap - len(self.answers))
        return found

    def final(self, replicas: int) -> Optional[Tuple[int, Dict[str, Any], Dict[str, Any], List[str]]]:
        """(replicas, answer, serve() keyword arguments, binding) of the chosen fleet, from the row's own
        call (the engine's full simulation: percentiles, and the open loop's means). A count found on
        the shorter simulation is confirmed on the full one: where the full run misses a target, the
        fewest that meet them from there (`_fewest_meeting`: a short run near saturation has not yet
        built its queue, so the full count can be several replicas more), and a replica taken away
        while one fewer meets them; None when the full run needs more replicas than the cap."""
        kwargs = self.load.serve_kwargs(self.kv_name, means_only=False)
        if not self.screening:
            return replicas, self.full_at(replicas), kwargs, self.binding(replicas, self.at)
        cap = self.cap()
        if self.load.misses(self.full_at(replicas)):  # the screen's count falls short on the full run
            more = _fewest_meeting(lambda n: bool(self.load.misses(self.full_at(n))), replicas, replicas + 1, cap) \
                if replicas < cap else None
            if more is None:
                self._record_miss(self.full_at(cap), cap)
                return None
            replicas = more
        while replicas > self.first_count() and not self.load.misses(self.full_at(replicas - 1)):
            replicas -= 1
        return replicas, self.full_at(replicas), kwargs, self.binding(replicas, self.full_at)

    def _record_miss(self, answer: Dict[str, Any], replicas: int) -> None:
        self.miss.record_all(self.load.misses(answer), {**self.describe, "replicas": replicas})

    def binding(self, replicas: int, answer_at: Callable[[int], Dict[str, Any]]) -> List[str]:
        """What one replica fewer misses (below the first count tried too: saturation, and the latency
        targets its near-saturated queue misses beside it)."""
        return ["none"] if replicas == 1 else [m[0] for m in self.load.misses(answer_at(replicas - 1))] or ["none"]


def _fewest_meeting(misses: Callable[[int], bool], known_miss: int, start: int, cap: int) -> Optional[int]:
    """The fewest replicas in (known_miss, cap] for which `misses` is False, latencies falling as
    replicas are added: from `start`, steps of 1, 2, 4, ... up to a count that meets the targets, then
    bisection between the last miss and it; None when even `cap` misses."""
    lo, hi, step = known_miss, start, 1
    while misses(hi):
        lo = hi
        if hi >= cap:
            return None
        hi = min(cap, hi + step)
        step *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if misses(mid):
            lo = mid
        else:
            hi = mid
    return hi


ENGINE_SETTING_KEYS = ("max_num_batched_tokens", "max_num_seqs", "gpu_memory_utilization", "block_size",
                       "kv_cache_dtype")


def fleet_figures(search, lay: Worker, s: Dict[str, Any], load: ContinuousLoad, head: Dict[str, Any],
                  pools: Dict[str, Any], answer_keys: Tuple[str, ...]) -> Dict[str, Any]:
    """A serving row's figures from its serve() answer `s`: `head` and `pools` (the worker counts) around
    its GPUs and nodes, the latencies at the targets' statistic, tokens/s and cost, then `answer_keys`
    of the answer as they are."""
    ttft_key, tpot_key = load.latency_keys()
    percentile = load.slo.percentile
    gpus = s["num_gpus"]
    price = search.prices.get(lay.gpu.name)
    fleet_cost = None if price is None else price * gpus
    tokens_per_s = s["output_tokens_per_s"]
    return {**head, "num_gpus": gpus, "num_nodes": math.ceil(gpus / lay.gpu.num_gpus_per_node), **pools,
            "time_to_first_token": s[ttft_key], "time_per_output_token": s[tpot_key] or 0.0,
            "latency_statistic": "mean" if percentile is None else f"p{percentile}",
            "tokens_per_sec_per_gpu": s["output_tokens_per_s_per_gpu"], "fleet_cost_per_hour": fleet_cost,
            "cost_per_million_tokens": None if fleet_cost is None or not tokens_per_s
            else fleet_cost / 3600 / tokens_per_s * 1e6, **{key: s.get(key) for key in answer_keys}}


def _row(search, lay: Worker, replicas: int, s: Dict[str, Any], kwargs: Dict[str, Any], binding: List[str],
         load: ContinuousLoad) -> Dict[str, Any]:
    fig = fleet_figures(search, lay, s, load, {"replicas": replicas, "gpus_per_replica": lay.gpus}, {},
                        ("ttft_s", "tpot_s", "e2e_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s",
                         "tpot_p90_s", "tpot_p99_s", "requests_per_s", "output_tokens_per_s",
                         "saturation_request_rate_per_s", "mean_running_requests_per_replica",
                         "max_running_requests_per_replica", "kv_occupancy", "kv_pool_tokens_per_replica",
                         "preemptions", "weight_memory_per_gpu", "kv_pool_bytes_per_gpu", "workspace_memory_per_gpu",
                         "gpu_memory_per_gpu"))
    # the engine settings serve() resolved (per attention replica): what a launch command sets
    fig["engine_settings"] = {k: s[k] for k in ENGINE_SETTING_KEYS}
    layout = {"gpu": lay.gpu.name, "dtype": lay.dtype.name, "tp": lay.tp, "attention_dp": lay.attention_dp,
              "moe_tp": lay.moe_tp if lay.is_moe else None, "moe_ep": lay.moe_ep if lay.is_moe else None,
              "gpus_per_worker": lay.gpus, "pp": 1, "ep": lay.moe_ep if lay.is_moe else 1,
              "kv_cache_dtype": s["kv_cache_dtype"], "framework": s["framework"]}
    if lay.redundant_experts:  # the rack worker's expert copies (planner/layouts.py)
        layout.update(moe_redundant_experts=lay.redundant_experts, moe_expert_slots=lay.expert_slots)
    reproduce = {"model_name": search.model.name, "gpu_name": lay.gpu.name, "dtype_name": lay.dtype.name,
                 "parallelism": lay.parallelism_fields(replicas),
                 "analysis_kwargs": dict(search.analysis_kwargs), "serve_kwargs": dict(kwargs),
                 **inputs.class_named(search.analysis_class),
                 "serve_call": serve_call_text(search, lay, lay.parallelism_text(replicas),
                                               ", ".join(f"{k}={v!r}" for k, v in kwargs.items()))}
    return {"layout": layout, "figures": fig, "binding": binding, "why": "", "reproduce": reproduce}


def _level_candidates(search, level: List[Worker], load: ContinuousLoad, stats: SearchStats,
                      miss: ClosestMiss) -> List[_LayoutSearch]:
    """The (layout, KV type) pairs of one worker width that hold the model and whose request alone meets
    the targets, each knowing the fewest GPUs it could serve the load on (its GPUs x the fewest
    replicas that keep up with the rate)."""
    out = []
    for lay in level:
        mem = lay.gpu.memory_bytes
        # each parameter is stored at least once among the worker's GPUs (a lower bound: the attention
        # side is replicated over the attention replicas)
        bound = weight_bytes_lower_bound(search.num_params, lay.dtype, lay.gpus, 1, 1)
        if bound > mem:  # cannot hold even its weights
            stats.considered += len(search.kv_options)
            stats.ruled_out_by_bound += len(search.kv_options)
            miss.record("memory", bound, mem, lay.describe())
            continue
        try:
            _fleet(search, lay, 1)
        except ConfigError:  # the analysis refuses the layout (e.g. heads not divisible by tp)
            stats.considered += len(search.kv_options)
            stats.invalid += len(search.kv_options)
            continue
        for kv in search.kv_options:
            kv_name = kv_cache_name(kv)
            describe = {**lay.describe(), "kv_cache_dtype": kv_name or "engine default"}
            one = _LayoutSearch(search, lay, kv_name, load, stats, miss, describe)
            try:
                if one.floor(simulate=False) is not None:
                    out.append(one)
            except DoesNotFitError as e:
                miss.record("memory", e.needed_bytes, e.available_bytes, describe)
            except ConfigError as e:  # the engine's KV pool cannot hold one request beside the weights
                # (the workload, engine options and KV type were checked before the search: this is the
                # one refusal serve() makes per layout)
                stats.considered += 1
                stats.invalid += 1
                miss.refused(f"{describe}: {e}")
    return out


def collect_continuous(search, load: ContinuousLoad, objective: str, stats: SearchStats, miss: ClosestMiss,
                       max_worker_gpus: Optional[int] = None):
    """(rows, Pareto points) of the (layout, KV type) candidates that meet the targets at some replica
    count, searched best first (module docstring). A worker width bounds its candidates not yet built (a
    fleet holds at least one worker), so a width is built only when its bound comes up; with a load,
    both objectives rank fleets by GPUs or by dollars per hour."""
    rows: List[Dict[str, Any]] = []
    points: List[Dict[str, Any]] = []

    weight = objective_weight(search, objective)
    levels: Dict[float, List[Worker]] = {}
    for lay in workers_of(search, load.framework, max_worker_gpus):
        levels.setdefault(lay.gpus * weight(lay), []).append(lay)
    # (bound, kind, order, item): kind 0 a width still to build, 1 a candidate; at equal bounds a width
    # is built first, so that its candidates join those of the same bound
    queue = [(width, 0, i, width) for i, width in enumerate(sorted(levels))]
    heapq.heapify(queue)
    order = len(queue)
    best = math.inf
    while queue:
        bound, kind, _, item = heapq.heappop(queue)
        if kind == 0:
            if bound > best:  # one worker alone costs more than the best fleet
                n = len(levels[item]) * len(search.kv_options)
                stats.considered += n
                stats.ruled_out_by_bound += n
                continue
            for one in _level_candidates(search, levels[item], load, stats, miss):
                heapq.heappush(queue, (one.gpu_bound() * weight(one.lay), 1, order, one))
                order += 1
            continue
        one = item
        if bound > best:
            stats.considered += 1
            stats.ruled_out_by_bound += 1
            continue
        if not one.means_only and one.floor(simulate=True) is None:
            continue
        replicas = one.fewest_replicas()
        if replicas is None:
            continue
        if one.screening and replicas * one.lay.gpus * weight(one.lay) > best:
            # worse than the best fleet on the shorter simulation: not confirmed, no row
            stats.ruled_out_by_bound += 1
            continue
        confirmed = one.final(replicas)
        if confirmed is None:
            continue
        replicas, s, kwargs, binding = confirmed
        row = _row(search, one.lay, replicas, s, load.as_given(kwargs), binding, load)
        best = min(best, row["figures"]["num_gpus"] * weight(one.lay))
        rows.append(row)
        for n, ans in sorted((one.full_answers if one.screening else one.answers).items()):
            if not load.misses(ans):
                points.append({**row["layout"], "replicas": n, "num_gpus": ans["num_gpus"],
                               "time_per_output_token": ans["tpot_s"] or 0.0,
                               "time_to_first_token": ans["ttft_s"],
                               "tokens_per_sec_per_gpu": ans["output_tokens_per_s_per_gpu"]})
    return rows, points


def continuous_assumptions(load: ContinuousLoad) -> Dict[str, Any]:
    stat = "means" if load.slo.percentile is None else f"p{load.slo.percentile} over requests"
    clients = (f"{load.slo.concurrency:g} closed-loop clients" if load.slo.concurrency is not None
               else f"{load.request_rate:g} requests/s (Poisson)")
    spec = "" if load.speculative is None else (f", speculative decoding ({load.speculative.get('method', 'mtp')}, "
                                               f"{load.speculative.get('draft_length')} tokens verified per step)")
    out = {
        "workload": f"{clients}; {load.workload_text}; {load.framework}, continuous batching{spec}",
        "batching": "continuous",
        "batching_detail": (f"continuous (in-flight) batching on {load.framework}: every fleet is timed by "
                            "LLMAnalysis.serve() (engine steps mixing prefill chunks and decodes, the KV pool as the "
                            "engine sizes it, queueing); each row's reproduce['serve_call'] returns its figures. "
                            f"Latency targets are checked on the {stat}."),
        "fleet": ("replicas = the fewest copies of the layout (dp_size) whose serve() answer meets every target: "
                  "from the fewest that keep up with the request rate, doubling then bisecting (latencies fall as "
                  "each replica's share of the load falls)"),
        "load": ("closed loop: concurrency clients spread round robin over the replicas" if load.slo.concurrency
                 is not None else f"open loop: Poisson arrivals at {load.request_rate:g} requests/s"
                 + (" (min_tokens_per_s / mean output length)" if load.slo.request_rate_per_s is None else "")
                 + " split evenly over the replicas"),
        "layouts": ("dense models: one tensor-parallel group per worker; MoE models: every worker layout "
                    f"{load.framework} runs (tp x attention_dp GPUs, experts over moe_tp x moe_ep of them; with "
                    "attention_dp > 1 only whole experts per GPU, moe_tp = 1, since serve() does not time the token "
                    "gather an expert tensor-parallel group would need; planner/layouts.py), pp = 1"),
        "engine": f"{load.framework} with its profile's defaults (llm_analysis/catalogue/engine_profiles)"
                  + (f", options {load.engine_options}" if load.engine_options else ""),
    }
    margin = accuracy_summary(load.framework, stated_accuracy(load.framework))
    if margin:  # printed beside calibrated times only (PlanResult.times_line): the roofline gives bounds
        out["calibrated_measured_error"] = margin
    return out


__all__ = ["CONTINUOUS_COLUMNS", "ContinuousLoad", "collect_continuous", "continuous_assumptions",
           "continuous_legend", "kv_cache_name"]
