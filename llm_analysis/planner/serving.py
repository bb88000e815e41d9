"""The serving search shared by plan_inference, disaggregation and capacity:
candidate layouts, the pruned per-layout batch search, rows and ranking.

Built only on the public API (`LLMAnalysis(...)`, `.inference(...)`,
`.get_num_params_total()`), so every figure of a row is what
`LLMAnalysis(...).inference(**row["reproduce"]["inference_kwargs"])` returns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from llm_analysis.config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig
from llm_analysis.errors import ConfigError
from llm_analysis.facade import LLMAnalysis
import llm_analysis.planner.inputs as inputs
from llm_analysis.planner.batch_search import BatchOutcome, ServeTargets, largest_batch
from llm_analysis.planner.errors import ClosestMiss
from llm_analysis.planner.result import SearchStats, rank
from llm_analysis.planner.static_fleet import StaticFleet
from llm_analysis.planner.space import ep_options, pp_options, tp_options, weight_bytes_lower_bound

# Serving engines compute causal attention with flash kernels, only the last
# prompt position's logits, and absorbed MLA (README "Assumptions").
SERVING_CONVENTIONS = {"attention_flops": "causal", "logits": "last", "mla_attention": "absorb"}


@dataclass
class Layout:
    gpu: GPUConfig
    dtype: DtypeConfig
    tp: int
    pp: int
    ep: int

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.ep

    def describe(self, kv: Optional[float]) -> Dict[str, Any]:
        return {"gpu": self.gpu.name, "dtype": self.dtype.name, "tp": self.tp, "pp": self.pp, "ep": self.ep,
                "kv_cache_dtype_bytes": kv}


@dataclass
class Search:
    """Everything the per-layout search needs, checked once."""

    model: ModelConfig
    gpus: List[GPUConfig]
    dtypes: inputs.DtypesPerGpu
    kv_options: List[Optional[float]]
    prices: Dict[str, float]
    max_gpus: Optional[int]
    max_tp: Optional[int]
    max_pp: int
    max_ep: Optional[int]
    max_batch: int
    analysis_kwargs: Dict[str, Any]
    num_params: int = 0
    probe: Any = None  # the first GPU's analysis (make_search): what option checks run on
    probes: List[Any] = field(default_factory=list)  # one per GPU type (engine defaults differ)
    refused_gpus: Dict[str, str] = field(default_factory=dict)  # GPU types left out, and why
    # every analysis the search builds (probes, rows, pools, bounds) is of this class: a custom architecture
    # (an LLMAnalysis subclass, docs/custom-architectures.md) is planned as itself, not as the stock model
    analysis_class: type = LLMAnalysis

    def layouts(self) -> Iterator[Layout]:
        for gpu in self.gpus:
            per_node = gpu.num_gpus_per_node
            for dtype in self.dtypes.of(gpu):
                for tp in tp_options(self.model, self.max_tp or per_node):
                    for pp in pp_options(self.model, self.max_pp, even_only=False):
                        for ep in ep_options(self.model, self.max_ep or per_node):
                            lay = Layout(gpu, dtype, tp, pp, ep)
                            if self.max_gpus is None or lay.gpus <= self.max_gpus:
                                yield lay

    def analysis(self, lay: Layout) -> LLMAnalysis:
        par = ParallelismConfig(tp_size=lay.tp, pp_size=lay.pp, dp_size=lay.ep, ep_size=lay.ep)
        return self.analysis_class(self.model, lay.gpu, lay.dtype, par, **self.analysis_kwargs)

    def reproduce(self, lay: Layout, kwargs: Dict[str, Any]) -> Dict[str, Any]:
        return {"model_name": self.model.name, "gpu_name": lay.gpu.name, "dtype_name": lay.dtype.name,
                "parallelism": {"tp_size": lay.tp, "pp_size": lay.pp, "dp_size": lay.ep, "ep_size": lay.ep},
                "analysis_kwargs": dict(self.analysis_kwargs), "inference_kwargs": kwargs,
                **inputs.class_named(self.analysis_class)}


def each_layout_outcome(search: Search, targets_for, stats: SearchStats, miss: ClosestMiss
                        ) -> Iterator[Tuple[Layout, Optional[float], BatchOutcome]]:
    """Runs the pruned search over every layout x KV option, yielding the
    layouts that meet the targets with their largest batch. `targets_for(lay,
    kv)` gives the ServeTargets of a candidate."""
    for lay in search.layouts():
        mem = lay.gpu.memory_bytes
        bound = weight_bytes_lower_bound(search.num_params, lay.dtype, lay.tp, lay.pp, lay.ep)
        n_kv = len(search.kv_options)
        stats.considered += search.max_batch * n_kv
        if bound > mem:  # cannot hold even its weights: every batch and KV option is out
            stats.ruled_out_by_bound += search.max_batch * n_kv
            miss.record("memory", bound, mem, lay.describe(None))
            continue
        try:
            analysis = search.analysis(lay)  # one per (gpu, dtype, layout), reused over KV options and batches
        except ConfigError:
            stats.invalid += search.max_batch * n_kv
            continue
        for kv in search.kv_options:
            out = largest_batch(analysis, targets_for(lay, kv), stats, miss, lay.describe(kv))
            if out is not None:
                yield lay, kv, out


def _row(search: Search, lay: Layout, kv, fleet: StaticFleet, t: ServeTargets, slo: inputs.SLO) -> Dict[str, Any]:
    """A static row: its batch and times are inference()'s at the batch the fleet's largest share forms
    (`reproduce`); under a load (clients or a rate) its tokens/s per GPU and cost are the fleet's at that
    load (static_fleet.py), which a full batch's own figure would overstate (batch_tokens_per_sec_per_gpu)."""
    s = fleet.summary
    replicas = fleet.replicas
    gpus = replicas * lay.gpus
    price = search.prices.get(lay.gpu.name)
    at_load = slo.concurrency is not None or slo.request_rate_per_s is not None
    per_gpu = fleet.tokens_per_s / gpus if at_load else s["total_tokens_per_sec_per_gpu"]
    cost = None if price is None else (price * gpus / 3600 / fleet.tokens_per_s * 1e6 if at_load
                                       else s["total_cost_per_1k_tokens"] * 1000)
    fig = {"batch_size_per_gpu": s["batch_size_per_gpu"], "time_to_first_token": s["time_to_first_token"],
           "time_per_output_token": s["time_per_output_token"], "total_latency": s["total_latency"],
           "tokens_per_sec_per_gpu": per_gpu,
           "decode_tokens_per_sec_per_gpu": s["decode_tokens_per_sec_per_gpu"],
           "weight_memory_per_gpu": s["weight_memory_per_gpu"], "kv_cache_memory_per_gpu": s["kv_cache_memory_per_gpu"],
           "memory_used_per_gpu": s["memory_used_per_gpu"], "replicas": replicas, "num_gpus": gpus,
           "num_nodes": math.ceil(gpus / lay.gpu.num_gpus_per_node),
           "cost_per_million_tokens": cost,
           "fleet_cost_per_hour": None if price is None else price * gpus}
    if at_load:
        fig.update(fleet_tokens_per_s=fleet.tokens_per_s,
                   batch_tokens_per_sec_per_gpu=s["total_tokens_per_sec_per_gpu"])
    kwargs = {"batch_size_per_gpu": s["batch_size_per_gpu"], "seq_len": t.seq_len,
              "num_tokens_to_generate": t.num_tokens_to_generate, "kv_cache_dtype_bytes": kv,
              "cost_per_gpu_hour": price}
    return {"layout": lay.describe(kv), "figures": fig, "binding": fleet.binding, "why": "",
            "reproduce": search.reproduce(lay, kwargs)}


OBJECTIVE_RANK = {
    "cost": ("cost per million generated tokens", "$",
             lambda r, load: r["figures"]["fleet_cost_per_hour"] if load else r["figures"]["cost_per_million_tokens"]),
    "tokens_per_gpu": ("generated tokens/s per GPU", "tokens/s", lambda r, load: r["figures"]["tokens_per_sec_per_gpu"]),
    "fewest_gpus": ("GPUs", "GPUs", lambda r, load: r["figures"]["num_gpus"]),
}


def rank_rows(rows: List[Dict], objective: str, load: bool) -> List[Dict]:
    label, unit, value = OBJECTIVE_RANK[objective]
    if objective == "cost" and load:
        label, unit = "fleet cost at the offered load", "$/h"
    tie = lambda r: (-r["figures"]["tokens_per_sec_per_gpu"], r["figures"]["time_per_output_token"])  # noqa: E731
    if objective == "tokens_per_gpu":
        return rank(rows, lambda r: (-value(r, load),) + tie(r)[1:], label, lambda r: value(r, load), unit,
                    "ranked by the lower time per output token")
    return rank(rows, lambda r: (value(r, load),) + tie(r), label, lambda r: value(r, load), unit,
                "ranked by the more generated tokens/s per GPU, then the lower time per output token")
