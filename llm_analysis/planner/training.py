"""plan_training: the layout (tp/pp/dp/ep, interleaving), ZeRO stage,
recomputation and micro-batch that train a model on N tokens fastest or
cheapest on at most G GPUs with a given global batch.

Pruning (each decision counted in SearchStats):
- weights + gradients + Adam state per GPU (a lower bound of the peak) vs the
  GPU's memory rules out a (layout, ZeRO stage) for every recomputation and
  micro-batch;
- branch and bound on time: no iteration beats its model FLOPs spread over
  every GPU at the achieved FLOP/s plus the 1F1B bubble; layouts are visited
  best bound first and dropped once their bound exceeds the best found;
- recomputation only adds time (the recomputed forward), so for a given
  (layout, ZeRO stage, micro-batch) the first mode that fits is the fastest;
- memory never decreases with the micro-batch, so one DoesNotFitError's
  largest fitting batch places every larger micro-batch."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from llm_analysis.config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig
from llm_analysis.errors import ConfigError, DoesNotFitError
from llm_analysis.facade import LLMAnalysis
from llm_analysis.model import Phase
from llm_analysis.schema.context_limit import check_context
from llm_analysis.schema.options import MAX_TOTAL_TOKENS, ActivationRecomputation, DSZeRO, as_enum
from llm_analysis.training.memory import zero_without_sharding_text
import llm_analysis.planner.inputs as inputs
from llm_analysis.planner.errors import ClosestMiss
from llm_analysis.planner.result import PlanResult, SearchStats, pareto_front, rank
from llm_analysis.planner.space import (accounted_pp_options, divisors, ep_options, interleave_options, iteration_time_lower_bound_s, pp_options, tp_options,
                    training_state_bytes_lower_bound)

DEFAULT_RECOMPUTATION = (ActivationRecomputation.NONE, ActivationRecomputation.ATTN_COMPUTE,
                         ActivationRecomputation.FULL)


@dataclass(frozen=True)
class TrainLayout:
    gpu: GPUConfig
    dtype: DtypeConfig
    tp: int
    pp: int
    dp: int
    ep: int
    v: int
    cp: int = 1  # context parallelism (searched for long sequences: cp_options)
    # the embedding and the loss each take a layer's slot in the pipeline split (Megatron-Core's
    # account_for_embedding/loss_in_pipeline_split): searched where pp divides the layers only so
    accounted: bool = False

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def key(self) -> tuple:
        return (self.gpu.name, self.dtype.name, self.tp, self.pp, self.dp, self.ep, self.v, self.cp, self.accounted)

    @property
    def parallelism(self) -> Dict[str, Any]:
        """The ParallelismConfig fields of the layout."""
        out = {"tp_size": self.tp, "pp_size": self.pp, "dp_size": self.dp, "ep_size": self.ep,
               **({"cp_size": self.cp} if self.cp > 1 else {})}
        if self.accounted:
            out.update(account_for_embedding_in_pipeline_split=True, account_for_loss_in_pipeline_split=True)
        return out

    def describe(self) -> Dict[str, Any]:
        out = {"gpu": self.gpu.name, "dtype": self.dtype.name, "tp": self.tp, "pp": self.pp, "dp": self.dp,
               "ep": self.ep, "pipeline_interleave": self.v}
        if self.cp > 1:
            out["cp"] = self.cp
        if self.accounted:
            out["accounted_pipeline_split"] = True
        return out


def cp_options(seq_len: int) -> List[int]:
    """Context-parallel sizes worth trying: 1, and for sequences of 8K tokens and more
    the powers of two that keep 2 x cp dividing the sequence and >= 2K tokens per rank
    (Llama 3 trained 128K sequences with cp = 16: 8K tokens per rank)."""
    if seq_len < 8192:
        return [1]
    return [1] + [c for c in (2, 4, 8, 16, 32) if seq_len % (2 * c) == 0 and seq_len // c >= 2048]


@dataclass
class TrainSearch:
    model: ModelConfig
    gpus: List[GPUConfig]
    dtypes: inputs.DtypesPerGpu
    tokens: float
    gbs: int
    seq_len: int
    min_gpus: int
    max_gpus: int
    max_tp: Optional[int]
    max_pp: int
    max_interleave: int
    zero_stages: List[DSZeRO]
    recomputation: List[ActivationRecomputation]
    prices: Dict[str, float]
    objective: str
    analysis_kwargs: Dict[str, Any]
    num_params: int = 0
    model_flops_per_iter: float = 0.0
    # every analysis the search builds (the probe, each layout's, the bounds' rate) is of this class: a custom
    # architecture (an LLMAnalysis subclass, docs/custom-architectures.md) is planned as itself
    analysis_class: type = LLMAnalysis

    def layouts(self) -> List[TrainLayout]:
        out = []
        for gpu in self.gpus:
            for dtype in self.dtypes.of(gpu):
                for tp in tp_options(self.model, self.max_tp or gpu.num_gpus_per_node):
                    # the stage counts that divide the layers, and those that divide them with the embedding's
                    # and the loss's slots (accounted)
                    stages = [(pp, False) for pp in pp_options(self.model, self.max_pp, even_only=True)] + \
                        [(pp, True) for pp in accounted_pp_options(self.model, self.max_pp)]
                    for pp, accounted in stages:
                        for dp in divisors(self.gbs):
                            for cp in cp_options(self.seq_len):
                                if not self.min_gpus <= tp * cp * pp * dp <= self.max_gpus:
                                    continue
                                for ep in (e for e in ep_options(self.model, dp) if dp % e == 0):
                                    for v in interleave_options(self.model, pp, self.max_interleave,
                                                                2 if accounted else 0):
                                        out.append(TrainLayout(gpu, dtype, tp, pp, dp, ep, v, cp, accounted))
        return out

    def micro_batches(self, lay: TrainLayout) -> List[int]:
        """The micro-batches that split the global batch over the layout's data-parallel ranks; an
        interleaved layout only those leaving at least pp micro-batches per iteration (the schedule's rule:
        training/run.py `check_interleaved_micro_batches`)."""
        per_rank = self.gbs // lay.dp
        return [b for b in divisors(per_rank) if lay.v == 1 or per_rank // b >= lay.pp]

    def score(self, seconds: float, lay: TrainLayout) -> float:
        """The objective of a run of `seconds`: its time, or its cost in dollars."""
        if self.objective == "cost":
            return seconds * lay.gpus / 3600 * self.prices[lay.gpu.name]
        return seconds


def _bound_s(search: TrainSearch, lay: TrainLayout, b: int, flops_per_gpu_s: float) -> float:
    """Lower bound of the whole run's time at micro-batch b."""
    m = search.gbs // (lay.dp * b)
    it = iteration_time_lower_bound_s(search.model_flops_per_iter, lay.gpus, flops_per_gpu_s, lay.pp, m, lay.v)
    return it * search.tokens / (search.gbs * search.seq_len)


class _Ctx:
    """Mutable state of one search: counts, the incumbent, results."""

    def __init__(self, search: TrainSearch) -> None:
        self.search = search
        self.stats = SearchStats()
        self.miss = ClosestMiss()
        self.incumbent = float("inf")
        self.best_per_layout: Dict[tuple, Dict[str, Any]] = {}
        self.points: List[Dict[str, Any]] = []
        self.flops_per_gpu_s: Dict[tuple, float] = {}
        self.max_bound_ratio = 0.0  # max over evaluated candidates of bound / actual (must stay <= 1)

    def run(self, analysis, lay: TrainLayout, z: DSZeRO, rc, b: int) -> Optional[Dict[str, Any]]:
        s = self.search
        self.stats.evaluated_full += 1
        try:
            out = analysis.training(batch_size_per_gpu=b, global_batch_size=s.gbs, seq_len=s.seq_len,
                                    total_num_tokens=s.tokens, activation_recomputation=rc, ds_zero=z,
                                    pipeline_interleave=lay.v, cost_per_gpu_hour=s.prices.get(lay.gpu.name))
        except DoesNotFitError as e:
            self.miss.record("memory", e.needed_bytes, e.available_bytes,
                             {**lay.describe(), "ds_zero": z.value, "recompute": rc.value, "micro_batch": b})
            raise
        score = s.score(out["total_training_latency"], lay)
        bound = s.score(_bound_s(s, lay, b, self.flops_per_gpu_s[(lay.gpu.name, lay.dtype.name)]), lay)
        self.max_bound_ratio = max(self.max_bound_ratio, bound / score)
        self.incumbent = min(self.incumbent, score)
        self.points.append({**lay.describe(), "ds_zero": z.value, "activation_recomputation": rc.value,
                            "micro_batch": b, "total_training_latency": out["total_training_latency"],
                            "tokens_per_sec_per_gpu": out["tokens_per_sec_per_gpu"]})
        best = self.best_per_layout.get(lay.key)
        if best is None or score < best["score"]:
            self.best_per_layout[lay.key] = {"score": score, "summary": out, "ds_zero": z, "recompute": rc,
                                             "layout": lay, "analysis": analysis, "micro_batch": b}
        return out


def _search_zero(ctx: _Ctx, analysis, lay: TrainLayout, z: DSZeRO) -> None:
    """Every (recomputation, micro-batch) of one (layout, ZeRO stage)."""
    s, st = ctx.search, ctx.stats
    flops = ctx.flops_per_gpu_s[(lay.gpu.name, lay.dtype.name)]
    fitted: set = set()  # micro-batches a lighter recomputation already fits (heavier ones only add time)
    for rc in s.recomputation:
        fit_b = None
        for b in reversed(s.micro_batches(lay)):
            if b in fitted:
                st.ruled_out_by_bound += 1
            elif fit_b is not None and b > fit_b:
                st.decided_by_monotonicity += 1
            elif s.score(_bound_s(s, lay, b, flops), lay) >= ctx.incumbent:
                st.ruled_out_by_bound += 1
            else:
                try:
                    ctx.run(analysis, lay, z, rc, b)
                    fitted.add(b)
                except DoesNotFitError as e:
                    fit_b = e.max_batch_size if e.max_batch_size is not None else 0
                except ConfigError as e:
                    st.invalid += 1
                    ctx.miss.refused(f"{lay.describe()}, ds_zero {z.value}, micro-batch {b}: {e}")


def _search_layout(ctx: _Ctx, lay: TrainLayout) -> None:
    s, st = ctx.search, ctx.stats
    per_zero = len(s.recomputation) * len(s.micro_batches(lay))
    flops = ctx.flops_per_gpu_s[(lay.gpu.name, lay.dtype.name)]
    if s.score(_bound_s(s, lay, 1, flops), lay) >= ctx.incumbent:  # b = 1 has the smallest bubble bound
        st.ruled_out_by_bound += per_zero * len(s.zero_stages)
        return
    analysis = None
    mem = lay.gpu.memory_bytes
    for i, z in enumerate(s.zero_stages):
        if z.value > 0 and lay.dp * lay.cp == 1:  # nothing to shard over: ZeRO 0 is as good or better
            # (training() keeps such a run as asked and says the same in a note: training/memory.py)
            st.invalid += per_zero
            ctx.miss.refused(f"{lay.describe()}: {zero_without_sharding_text(z.value)} (searched only when "
                             "zero_stages holds 0); give zero_stages with 0, or more GPUs (max_gpus) so that dp >= 2")
            continue
        # ZeRO / the optimizer shard over dp x cp ranks, as the analysis does (training/run.py)
        need = training_state_bytes_lower_bound(s.num_params, lay.dtype, lay.tp, lay.pp, lay.dp * lay.cp, lay.ep,
                                                z.value)
        if need > mem:
            st.ruled_out_by_bound += per_zero
            ctx.miss.record("memory", need, mem, {**lay.describe(), "ds_zero": z.value})
            continue
        if analysis is None:
            try:
                analysis = s.analysis_class(s.model, lay.gpu, lay.dtype, ParallelismConfig(**lay.parallelism),
                                            **s.analysis_kwargs)
            except ConfigError as e:
                st.invalid += per_zero * (len(s.zero_stages) - i)
                ctx.miss.refused(f"{lay.describe()}: {e}")
                return
        _search_zero(ctx, analysis, lay, z)


TRAINING_COLUMNS = [
    ("gpu", lambda r: r["layout"]["gpu"]), ("dtype", lambda r: r["layout"]["dtype"]),
    ("tp", lambda r: str(r["layout"]["tp"])), ("cp", lambda r: str(r["layout"].get("cp", 1))),
    ("pp", lambda r: str(r["layout"]["pp"]) + ("+el" if r["layout"].get("accounted_pipeline_split") else "")),
    ("dp", lambda r: str(r["layout"]["dp"])),
    ("ep", lambda r: str(r["layout"]["ep"])),
    ("v", lambda r: str(r["layout"]["pipeline_interleave"])), ("zero", lambda r: str(r["layout"]["ds_zero"])),
    ("rc", lambda r: str(r["layout"]["activation_recomputation"])),
    ("mb", lambda r: str(r["layout"]["micro_batch"])), ("gpus", lambda r: str(r["figures"]["num_gpus"])),
    ("days", lambda r: f"{r['figures']['total_training_latency'] / 86400:.2f}"),
    ("iter_s", lambda r: f"{r['figures']['latency_per_iter']:.3f}"),
    ("mfu", lambda r: f"{r['figures']['mfu']:.3f}"),
    ("peak_GB", lambda r: f"{r['figures']['estimated_peak_memory_per_gpu'] / 1e9:.1f}"),
    ("cost_$", lambda r: "-" if r["figures"]["total_training_cost"] is None
     else f"{r['figures']['total_training_cost']:.4g}"),
]
# what each column of the table holds (printed under it: several names are abbreviations); every
# parallel dimension is a column, so tp x cp x pp x dp always multiplies out to the gpus column
TRAINING_LEGEND = {
    "tp": "tensor-parallel GPUs", "cp": "context-parallel GPUs (the sequence split across them)",
    "pp": "pipeline stages (+el: the embedding and the loss each take a layer's slot, Megatron-Core's "
          "account_for_embedding/loss_in_pipeline_split: the end stages hold one layer fewer)",
    "dp": "data-parallel replicas (each tp x cp x pp GPUs)",
    "ep": "expert-parallel ranks (within dp; MoE models)",
    "v": "pipeline interleave: virtual stages per GPU (1 = plain 1F1B)",
    "zero": "DeepSpeed ZeRO stage (0 = none; 1 optimizer, 2 + gradients, 3 + weights sharded over dp x cp)",
    "rc": "activation recomputation (0 none, 1 selective attention, 2 attention block, 3 norm-attention-norm, "
          "4 full layer)",
    "mb": "micro-batch: sequences per forward/backward pass per replica (tp x cp x pp GPUs)",
    "gpus": "tp x cp x pp x dp", "days": "total training time in days", "iter_s": "seconds per iteration",
    "mfu": "model FLOPs utilisation", "peak_GB": "estimated peak memory per GPU, GB (1e9 bytes)",
    "cost_$": "total training cost in dollars (needs --gpu_prices)",
}


# ZeRO-3 parameter gathers are timed at NCCL bandwidth, overlapped with compute. Checked against
# MosaicML's FSDP runs on 256-512 H100s (0.88-1.08x of measured); the DeepSpeed ZeRO-3 runs of
# Narayanan et al. 2021 (arXiv 2104.04473, Table 2) on 384-2240 A100s measured 1.3-3.2x slower
# than modelled (benchmarks/accuracy.py, family "DeepSpeed ZeRO-3"). Beyond the checked range a
# ZeRO-3 row is flagged rather than trusted.
ZERO3_TRUSTED_RANKS = 512


def _zero3_caution(dp: int) -> str:
    return (f"ZeRO-3 over {dp} ranks: beyond the {ZERO3_TRUSTED_RANKS} ranks its timing was checked on (FSDP, "
            "within 12%); DeepSpeed runs at 384-2240 ranks measured 1.3-3.2x slower than modelled. "
            "--zero_stages 0,1,2 leaves ZeRO-3 out")


def _memory_binds(search: TrainSearch, lay: TrainLayout, best: Dict[str, Any]) -> bool:
    """Whether memory binds the row: its peak leaves under 10% of the GPU free, or it shards (ZeRO) or
    recomputes because the same layout and micro-batch without either does not fit. A ZeRO stage or
    recomputation chosen because it is faster (ZeRO-1's sharded optimizer step) does not make memory bind."""
    out, z, rc = best["summary"], best["ds_zero"], best["recompute"]
    if out["memory_left_per_gpu"] < 0.1 * out["gpu_memory_per_gpu"]:
        return True
    if z.value == 0 and rc.value == 0:
        return False
    try:
        best["analysis"].training(batch_size_per_gpu=best["micro_batch"], global_batch_size=search.gbs,
                                  seq_len=search.seq_len, total_num_tokens=search.tokens,
                                  activation_recomputation=ActivationRecomputation.NONE, ds_zero=DSZeRO.NONE,
                                  pipeline_interleave=lay.v)
    except DoesNotFitError:
        return True
    return False


def _row(search: TrainSearch, lay: TrainLayout, best: Dict[str, Any]) -> Dict[str, Any]:
    out, z, rc = best["summary"], best["ds_zero"], best["recompute"]
    b = out["batch_size_per_gpu"]
    binding = []
    if _memory_binds(search, lay, best):
        binding.append("memory")
    if lay.gpus == search.max_gpus:
        binding.append("max_gpus")
    if out["gradient_accumulation_steps"] == 1:
        binding.append("global_batch_size")
    price = search.prices.get(lay.gpu.name)
    kwargs = {"batch_size_per_gpu": b, "global_batch_size": search.gbs, "seq_len": search.seq_len,
              "total_num_tokens": search.tokens, "activation_recomputation": rc.value, "ds_zero": z.value,
              "pipeline_interleave": lay.v, "cost_per_gpu_hour": price}
    keys = ("total_training_latency", "latency_per_iter", "gpu_hours", "mfu", "estimated_peak_memory_per_gpu",
            "tokens_per_sec_per_gpu", "gradient_accumulation_steps", "latency_per_iter_pipeline_bubble")
    fig = {k: out[k] for k in keys}
    fig.update(num_gpus=lay.gpus, num_nodes=-(-lay.gpus // lay.gpu.num_gpus_per_node),
               total_training_cost=out.get("total_training_cost"))
    return {"layout": {**lay.describe(), "ds_zero": z.value, "activation_recomputation": rc.value,
                       "micro_batch": b}, "figures": fig, "binding": binding or ["none"], "why": "",
            # (ZeRO-3 shards over dp x cp ranks: context-parallel ranks hold shards of the same replica)
            **({"caution": _zero3_caution(lay.dp * lay.cp)}
               if z == DSZeRO.STAGE_3 and lay.dp * lay.cp > ZERO3_TRUSTED_RANKS else {}),
            "reproduce": {"model_name": search.model.name, "gpu_name": lay.gpu.name, "dtype_name": lay.dtype.name,
                          "parallelism": lay.parallelism,
                          "analysis_kwargs": dict(search.analysis_kwargs), "training_kwargs": kwargs,
                          **inputs.class_named(search.analysis_class)}}


def _make_search(model, gpus, tokens, max_gpus, global_batch_size, seq_len, dtypes, objective, gpu_prices,
                 min_gpus, max_tp, max_pp, max_interleave, zero_stages, recomputation, analysis_kwargs,
                 analysis_class=LLMAnalysis) -> TrainSearch:
    m = inputs.model_config(model)
    cls = inputs.analysis_class(analysis_class)
    gpu_list = inputs.gpu_configs(gpus)
    objective = inputs.choice(objective, "objective", inputs.OBJECTIVES_TRAINING)
    # (training() refuses more for every layout: refused once here, by name, not as every candidate's miss)
    tokens = inputs.positive_number(tokens, "tokens", "a positive number of training tokens", MAX_TOTAL_TOKENS)
    max_g = inputs.positive_int(max_gpus, "max_gpus")
    min_g = inputs.positive_int(min_gpus, "min_gpus")
    if min_g > max_g:
        raise ConfigError(f"min_gpus = {min_g} is larger than max_gpus = {max_g}")
    gbs = inputs.positive_int(global_batch_size, "global_batch_size")
    s = inputs.positive_int(seq_len if seq_len is not None else (m.max_seq_len or 0), "seq_len")
    check_context(m, s, "seq_len")  # what training() refuses for every layout, refused once by name
    if gbs * s > tokens:
        raise ConfigError(f"tokens = {tokens:g} is fewer than one global batch (global_batch_size x seq_len = "
                          f"{gbs * s}): raise tokens or lower global_batch_size")
    if zero_stages is not None and not list(zero_stages):
        raise ConfigError("zero_stages is empty: give at least one of 0, 1, 2, 3 (e.g. --zero_stages 0,1,2)")
    zs = [as_enum(DSZeRO, z, "zero_stages") for z in (zero_stages or [0])]
    rcs = sorted({as_enum(ActivationRecomputation, r, "recomputation") for r in (recomputation or [0])},
                 key=lambda r: r.value)  # ascending: each mode recomputes more (and only adds time)
    search = TrainSearch(m, gpu_list, inputs.dtype_configs(dtypes, m, gpu_list), tokens, gbs, s, min_g, max_g,
                         inputs.optional_positive_int(max_tp, "max_tp"),
                         inputs.positive_int(max_pp if max_pp is not None else m.num_layers, "max_pp"),
                         inputs.positive_int(max_interleave, "max_interleave"), zs, rcs,
                         inputs.prices(gpu_prices, gpu_list, objective == "cost"), objective, dict(analysis_kwargs),
                         analysis_class=cls)
    search.analysis_kwargs["perf_model"] = inputs.perf_model(search.analysis_kwargs.get("perf_model", "roofline"))
    probe = inputs.probe_analysis(m, gpu_list, search.dtypes, search.analysis_kwargs, cls)
    search.analysis_kwargs.update(flops_efficiency=probe.flops_efficiency,
                                  hbm_memory_efficiency=probe.hbm_memory_efficiency)
    search.num_params = probe.get_num_params_total()
    # forward + backward (2x forward) FLOPs the kernels execute in one iteration, whatever the layout
    # (flash attention skips the masked half that the FLOP count includes: the bound must not)
    fwd = probe.describer.weighted_ops(Phase("train", gbs, s, s))
    search.model_flops_per_iter = 3 * sum(n * (op.flops - op.masked_flops) for n, op in fwd)
    return search


def plan_training(model: Union[str, ModelConfig], gpus: Sequence, tokens: float, max_gpus: int,
                  global_batch_size: int, seq_len: Optional[int] = None, *, dtypes: Sequence = ("w16a16e16",),
                  objective: str = "time", gpu_prices: Optional[Mapping[str, float]] = None, min_gpus: int = 1,
                  max_tp: Optional[int] = None, max_pp: Optional[int] = None, max_interleave: int = 8,
                  zero_stages: Sequence = (0, 1, 2, 3), recomputation: Sequence = DEFAULT_RECOMPUTATION,
                  flops_efficiency: Optional[float] = None, hbm_memory_efficiency: Optional[float] = None,
                  achieved_tflops: Optional[float] = None, perf_model: Any = "roofline",
                  analysis_class: type = LLMAnalysis) -> PlanResult:
    """Best training setups for `tokens` tokens on min_gpus..max_gpus GPUs with
    `global_batch_size` sequences of `seq_len` per iteration, ranked by
    `objective` ("time": total training time; "cost": dollars, needs
    `gpu_prices`). Searches tp (powers of two <= GPUs per node or max_tp), pp
    (divisors of the layer count <= max_pp), dp (divisors of the global
    batch), ep (MoE), interleaving (v with layers / pp divisible by v, <=
    max_interleave), ZeRO stage, recomputation mode and micro-batch. One row
    per layout (its best ZeRO/recomputation/micro-batch). `perf_model` times
    every candidate as LLMAnalysis does ("roofline", "calibrated", a profile
    path or Profile). `analysis_class`: the class every analysis of the plan is built as, LLMAnalysis
    (default) or a subclass describing a custom architecture (docs/custom-architectures.md); each row's
    reproduce names it (reproduce["analysis_class"])."""
    t0 = time.perf_counter()
    search = _make_search(model, gpus, tokens, max_gpus, global_batch_size, seq_len, dtypes, objective,
                          gpu_prices, min_gpus, max_tp, max_pp, max_interleave, zero_stages, recomputation,
                          {"flops_efficiency": flops_efficiency, "hbm_memory_efficiency": hbm_memory_efficiency,
                           "achieved_tflops": achieved_tflops, "perf_model": perf_model}, analysis_class)
    ctx = _Ctx(search)
    for gpu in search.gpus:
        for dtype in search.dtypes.of(gpu):
            ctx.flops_per_gpu_s[(gpu.name, dtype.name)] = _bound_flops_per_gpu_s(search, gpu, dtype)
    layouts = search.layouts()
    layouts.sort(key=lambda lay: search.score(_bound_s(search, lay, 1, ctx.flops_per_gpu_s[
        (lay.gpu.name, lay.dtype.name)]), lay))  # best bound first: a strong incumbent early prunes the rest
    for lay in layouts:
        ctx.stats.considered += len(search.zero_stages) * len(search.recomputation) * len(search.micro_batches(lay))
        _search_layout(ctx, lay)
    ctx.stats.wall_s = time.perf_counter() - t0
    if not ctx.best_per_layout:
        raise ctx.miss.error(f"training {search.model.name} on at most {search.max_gpus} GPUs")
    rows = [_row(search, best["layout"], best) for best in ctx.best_per_layout.values()]
    if objective == "cost":
        rows = rank(rows, lambda r: (r["figures"]["total_training_cost"], r["figures"]["total_training_latency"]),
                    "training cost", lambda r: r["figures"]["total_training_cost"], "$")
    else:
        rows = rank(rows, lambda r: (r["figures"]["total_training_latency"], r["figures"]["num_gpus"]),
                    "training time", lambda r: r["figures"]["total_training_latency"] / 86400, "days")
    front = pareto_front(ctx.points, "total_training_latency", "tokens_per_sec_per_gpu")
    return PlanResult("training", objective, rows, front, _training_assumptions(search), ctx.stats,
                      {"columns": TRAINING_COLUMNS, "legend": TRAINING_LEGEND, "max_bound_ratio": ctx.max_bound_ratio})


def _bound_flops_per_gpu_s(search: TrainSearch, gpu, dtype) -> float:
    """FLOP/s of the pruning bound: the analysis' own rate under the roofline; under a
    calibrated model the dtype's peak (the roofline at efficiency 1, default
    arguments), which no calibrated time beats, whatever efficiencies were given."""
    kwargs = search.analysis_kwargs
    if kwargs.get("perf_model", "roofline") != "roofline":
        kwargs = {}
    return search.analysis_class(search.model, gpu, dtype, **kwargs).get_TFLOPS_per_gpu() * 1e12


_ROOFLINE_TRAINING = ("llm_analysis training model (LLMAnalysis.training): roofline operator times, backward = 2x "
                      "forward, recomputation adds the recomputed forward, 1F1B bubble (p-1)/(v m), DP traffic "
                      "overlapped with the last backward; README 'Assumptions' (Training)")


def _training_assumptions(search: TrainSearch) -> Dict[str, Any]:
    return {
        **{k: v for k, v in search.analysis_kwargs.items()},
        "perf_model": inputs.perf_model_assumption(search.analysis_kwargs["perf_model"], _ROOFLINE_TRAINING),
        "optimizer": "Adam: 2 fp32 moments (8 B/param), plus an fp32 master copy (4 B/param) where the weights are "
                     "narrower than fp32 (none for fp32 weights, their own master); gradients in the weights' dtype, "
                     "at least 16-bit",
        "memory": "GPU memory = mem_per_GPU_in_GB x 1024**3 bytes, nothing reserved",
        "targets": {"tokens": search.tokens, "global_batch_size": search.gbs, "seq_len": search.seq_len,
                    "min_gpus": search.min_gpus, "max_gpus": search.max_gpus},
        "context_parallel": "cp in {1, 2, 4, ..., 32} for seq_len >= 8192 (2 x cp divides seq_len, >= 2048 "
                            "tokens per rank), ring K/V exchange; 1 below",
        "gpu_prices_per_hour": dict(search.prices),
        **inputs.class_named(search.analysis_class),
        **({"fp4": fp4} if (fp4 := search.dtypes.assumption()) is not None else {}),
    }
