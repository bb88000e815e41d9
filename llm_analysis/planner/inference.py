"""plan_inference: which GPU, how many, which tp/pp/ep, data type, KV dtype and
batch serve a model best under time-to-first-token, time-per-output-token and
load targets (objective: cost, tokens/s per GPU or fewest GPUs)."""

from __future__ import annotations

import math
import os
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from llm_analysis.config import ModelConfig
from llm_analysis.errors import ConfigError
from llm_analysis.facade import LLMAnalysis
import llm_analysis.planner.inputs as inputs
from llm_analysis.planner.batch_search import ServeTargets
from llm_analysis.planner.errors import ClosestMiss
from llm_analysis.planner.result import PlanResult, SearchStats, pareto_front
from llm_analysis.planner.continuous import (CONTINUOUS_COLUMNS, ContinuousLoad, collect_continuous,
                                             continuous_assumptions, continuous_legend, kv_cache_name)
from llm_analysis.planner.launch import LAUNCH_ENGINES, check_engine, pools_launch, row_launch
from llm_analysis.planner.pools import collect_pools, pools_assumptions
from llm_analysis.planner.serving import SERVING_CONVENTIONS, Search, _row, each_layout_outcome, rank_rows
from llm_analysis.planner.static_fleet import size_fleet
from llm_analysis.schema.context_limit import check_context
from llm_analysis.schema.options import choice
from llm_analysis.serving.engine import FRAMEWORKS, check_options, engine_settings
from llm_analysis.serving.rank import check_whole_prompts_fit
from llm_analysis.serving.speculative import speculative_decoding
from llm_analysis.serving.workload import check_load, make_lengths

DEFAULT_SEQ_LEN, DEFAULT_OUTPUT_LEN = 2048, 256  # tokens per request when the call names none

INFERENCE_COLUMNS = [
    ("gpu", lambda r: r["layout"]["gpu"]), ("dtype", lambda r: r["layout"]["dtype"]),
    ("kv_B", lambda r: str(r["layout"]["kv_cache_dtype_bytes"] or "-")),
    ("tp", lambda r: str(r["layout"]["tp"])), ("pp", lambda r: str(r["layout"]["pp"])),
    ("ep", lambda r: str(r["layout"]["ep"])), ("batch", lambda r: str(r["figures"]["batch_size_per_gpu"])),
    ("replicas", lambda r: str(r["figures"]["replicas"])), ("gpus", lambda r: str(r["figures"]["num_gpus"])),
    ("ttft_ms", lambda r: f"{r['figures']['time_to_first_token'] * 1e3:.1f}"),
    ("tpot_ms", lambda r: f"{r['figures']['time_per_output_token'] * 1e3:.2f}"),
    ("tok/s/gpu", lambda r: f"{r['figures']['tokens_per_sec_per_gpu']:.1f}"),
    ("$/Mtok", lambda r: "-" if r["figures"]["cost_per_million_tokens"] is None
     else f"{r['figures']['cost_per_million_tokens']:.3f}"),
]
INFERENCE_LEGEND = {
    "kv_B": "KV-cache bytes per element (- = the data type's)", "tp": "tensor-parallel GPUs",
    "pp": "pipeline stages", "ep": "expert-parallel ranks (MoE; a replica is then tp x pp x ep GPUs)",
    "batch": "requests batched together per replica (tp x pp GPUs), prefilled together and decoded together "
             "(inference()'s batch_size_per_gpu)",
    "replicas": "copies of the layout that share the load", "gpus": "replicas x tp x pp x ep",
    "ttft_ms": "time to first token, ms (the batch's prefill)", "tpot_ms": "time per output token, ms (mean decode step)",
    "tok/s/gpu": "generated tokens per second per GPU (under clients or a rate: the fleet's at that load)",
    "$/Mtok": "dollars per million generated tokens (under clients or a rate: at that load)",
}


def make_search(model, gpus, dtypes, kv_cache_dtype_bytes, objective_needs_price: bool, gpu_prices,
                max_gpus, max_tp, max_pp, max_ep, max_batch_size, flops_efficiency, hbm_memory_efficiency,
                conventions, perf_model="roofline", analysis_class=LLMAnalysis) -> Search:
    """Checks the shared arguments of the serving planners and builds the search."""
    m = inputs.model_config(model)
    cls = inputs.analysis_class(analysis_class)
    if max_ep is not None and not m.is_moe:  # a bound on the experts' spread bounds nothing on a dense model
        raise ConfigError(f"max_ep = {max_ep!r}: {m.name} has no experts, so no expert-parallel size is searched; "
                          "valid: leave max_ep out (its layouts' GPUs are bounded by max_tp, max_pp and max_gpus)")
    gpu_list = inputs.gpu_configs(gpus)
    conv = dict(SERVING_CONVENTIONS if conventions is None else conventions)
    search = Search(model=m, gpus=gpu_list, dtypes=inputs.dtype_configs(dtypes, m, gpu_list),
                    kv_options=inputs.kv_options(kv_cache_dtype_bytes),
                    prices=inputs.prices(gpu_prices, gpu_list, objective_needs_price),
                    max_gpus=inputs.optional_positive_int(max_gpus, "max_gpus"),
                    max_tp=inputs.optional_positive_int(max_tp, "max_tp"),
                    max_pp=inputs.positive_int(max_pp, "max_pp"),
                    max_ep=inputs.optional_positive_int(max_ep, "max_ep"),
                    max_batch=inputs.positive_int(max_batch_size, "max_batch_size"),
                    analysis_kwargs={"flops_efficiency": flops_efficiency,
                                     "hbm_memory_efficiency": hbm_memory_efficiency, **conv,
                                     "perf_model": inputs.perf_model(perf_model)},
                    analysis_class=cls)
    # resolves the efficiencies (None -> the package default) and checks them once
    search.probes = inputs.probe_analyses(m, gpu_list, search.dtypes, search.analysis_kwargs, cls)
    probe = search.probe = search.probes[0]
    search.analysis_kwargs.update(flops_efficiency=probe.flops_efficiency,
                                  hbm_memory_efficiency=probe.hbm_memory_efficiency)
    search.num_params = probe.get_num_params_total()
    return search


_ROOFLINE_SERVING = ("llm_analysis roofline (LLMAnalysis.inference): operator time = max(FLOPs / (peak x "
                     "flops_efficiency), bytes / (HBM bandwidth x hbm_memory_efficiency)); TP/EP/PP collectives "
                     "over the GPU's links; README 'Assumptions'")


def serving_assumptions(search: Search) -> Dict[str, Any]:
    kw = search.analysis_kwargs
    return {
        "perf_model": inputs.perf_model_assumption(kw["perf_model"], _ROOFLINE_SERVING),
        "flops_efficiency": kw["flops_efficiency"], "hbm_memory_efficiency": kw["hbm_memory_efficiency"],
        "conventions": {k: kw[k] for k in ("attention_flops", "logits", "mla_attention")},
        "batching": "static: a replica runs batch_size_per_gpu x ep requests together from prefill to the last "
                    "token (batch_size_per_gpu is per replica (tp x pp GPUs, x ep for MoE), named as inference() "
                    "names it); TTFT = the prefill of that batch, TPOT = the mean decode step",
        "cost": "cost_per_million_tokens = $/GPU-hour x tp x pp GPUs x request time / (batch x generated tokens) "
                "x 1e6 = inference()['total_cost_per_1k_tokens'] x 1000 (generated tokens only)",
        "fleet": "each replica runs the batch its share of the load forms (planner/static_fleet.py): concurrency "
                 "clients: replicas = ceil(concurrency / (b* x ep)), b* the largest batch meeting the targets (more "
                 "while min_tokens_per_s falls short), a replica of k clients runs batches of ceil(k / ep) and "
                 "generates k x n / request time (Little's law per replica); request_rate: replicas = ceil(rate x "
                 "request time(b*) / (b* x ep)), each replica's batch the smallest b with b x ep >= rate / replicas "
                 "x request time(b) (it keeps up with its share), the fleet generating rate x n; min_tokens_per_s "
                 "alone: full batches, replicas = ceil(min_tokens_per_s / replica generated tokens/s); 1 replica "
                 "without a load target",
        "expert_parallel": "ep ranks are data-parallel for the dense part (dp_size = ep_size in ParallelismConfig)",
        "memory": "GPU memory = mem_per_GPU_in_GB x 1024**3 bytes, nothing reserved for the framework",
        "gpu_prices_per_hour": dict(search.prices),
        **inputs.class_named(search.analysis_class),
    }


def _check_targets(slo: inputs.SLO, n: int, disaggregate: bool) -> None:
    if n == 1 and slo.max_tpot_s is not None:
        raise ConfigError("slo.max_tpot_s is set but num_tokens_to_generate = 1 generates no decode step: "
                          "drop max_tpot_s or generate more than one token")
    if disaggregate and n == 1:
        raise ConfigError("disaggregate = True needs num_tokens_to_generate > 1 (there is no decode pool to size)")


def plan_inference(model: Union[str, ModelConfig], gpus: Sequence, slo: Union[None, inputs.SLO, Mapping] = None, *,
                   seq_len: Union[int, Mapping, None] = None, num_tokens_to_generate: Union[int, Mapping, None] = None,
                   lengths: Any = None, dtypes: Sequence = ("checkpoint",),
                   kv_cache_dtype_bytes=None, objective: str = "tokens_per_gpu",
                   gpu_prices: Optional[Mapping[str, float]] = None, max_gpus: Optional[int] = None,
                   max_tp: Optional[int] = None, max_pp: int = 8, max_ep: Optional[int] = None,
                   max_batch_size: int = 1024, disaggregate: bool = False,
                   flops_efficiency: Optional[float] = None, hbm_memory_efficiency: Optional[float] = None,
                   conventions: Optional[Mapping[str, str]] = None, perf_model: Any = "roofline",
                   batching: Optional[str] = None, framework: Optional[str] = None,
                   engine_options: Optional[Mapping[str, Any]] = None, max_worker_gpus: Optional[int] = None,
                   emit_launch: Optional[str] = None, speculative: Optional[Mapping[str, Any]] = None,
                   analysis_class: type = LLMAnalysis) -> PlanResult:
    """Best serving setups, ranked by `objective` ("cost": $ per million
    generated tokens, needs `gpu_prices` {gpu name: $/GPU-hour}; "tokens_per_gpu";
    "fewest_gpus"). Searches GPU type, tp (powers of two, <= GPUs per node or
    max_tp), pp (powers of two <= max_pp), ep (MoE), each dtype name of
    `dtypes` (default "checkpoint": the checkpoint's weights as released, read per GPU by
    catalogue/lookup.py dtype_for_setup), each KV byte width of `kv_cache_dtype_bytes` (None = the dtype's)
    and the batch 1..max_batch_size; dp replicas follow from the load targets.
    With `disaggregate=True` also sizes separate prefill and decode pools
    (result.extra["disaggregated"]). `perf_model` times every candidate as
    LLMAnalysis does ("roofline", "calibrated", a profile path or Profile): with
    "calibrated" the targets are checked against expected times, not lower
    bounds.

    `batching`: "continuous" sizes each layout's replicas with `LLMAnalysis.serve()` on
    `framework` ("vllm", "sglang", "trtllm"; None: `emit_launch`'s engine when that is given, so that
    the launch printed runs what was timed, else "vllm"; `engine_options` are serve()'s engine keyword
    arguments) for the load in `slo` (request_rate_per_s, concurrency or min_tokens_per_s), the
    latency targets on the means or on `slo["percentile"]` (planner/continuous.py); "static" keeps
    the static-batch search (a replica prefills and decodes one batch together). None (default):
    continuous when `slo` holds a load, static otherwise. For MoE models the continuous search
    covers worker layouts (tp x attention_dp GPUs, experts over moe_tp x moe_ep of them, up to
    `max_worker_gpus` GPUs per worker; planner/layouts.py), and with `disaggregate=True` it sizes
    prefill and decode pools on serve(disaggregated=...) (planner/pools.py: each pool's layout and
    the worker ratio; result.extra["disaggregated"]["rows"]); without a load the pools stay static.
    `emit_launch` ("vllm", "sglang", "trtllm"; continuous batching only) adds to every row the
    engine's launch arguments that reproduce it (row["launch"], planner/launch.py).

    The requests' lengths: `seq_len` (prompt, default 2048) and `num_tokens_to_generate` (output, default
    256) in tokens. With
    continuous batching they may also be what serve() takes for a workload of mixed lengths: either
    one as {"mean": m, "spread": s} (uniform over m - s .. m + s), or `lengths` instead of both (a
    list of (input, output) pairs, or a .json / .jsonl / .csv file of them, read once); each fleet is
    then timed on that workload, and a token-rate target becomes requests at min_tokens_per_s / the
    mean output length per second. Static batches have one length: a spread or `lengths` is refused.

    `speculative` (continuous batching): serve()'s speculative decoding ({"method": "mtp" | "draft_model",
    "draft_length": k, "mean_accepted_length": L or "acceptance_rate": a, "draft_model": name}) in every
    fleet's decode steps and in each row's reproduce and launch arguments.
    `analysis_class`: the class every analysis of the plan is built as, LLMAnalysis (default) or a subclass
    describing a custom architecture (docs/custom-architectures.md): probes, rows, pools and bounds are all
    of it, and each row's reproduce names it (reproduce["analysis_class"], the class in serve_call).

    Raises NoFeasiblePlanError naming the binding constraint (the one that ruled out the
    candidates that fit in memory), ConfigError on bad arguments."""
    t0 = time.perf_counter()
    slo = inputs.SLO.from_any(slo)
    objective = inputs.choice(objective, "objective", inputs.OBJECTIVES_INFERENCE)
    batching = _batching(batching, slo)
    names = _length_names(seq_len, num_tokens_to_generate)
    seq_len, num_tokens_to_generate, mixed = _lengths_given(seq_len, num_tokens_to_generate, lengths, batching)
    if not mixed:
        s = inputs.positive_int(seq_len, "seq_len")
        n = inputs.positive_int(num_tokens_to_generate, "num_tokens_to_generate")
        _check_targets(slo, n, bool(disaggregate))
    search = make_search(model, gpus, dtypes, kv_cache_dtype_bytes, objective == "cost", gpu_prices, max_gpus,
                         max_tp, max_pp, max_ep, max_batch_size, flops_efficiency, hbm_memory_efficiency, conventions,
                         perf_model, analysis_class)
    if batching == "continuous":
        # what serve() would refuse for every layout is refused here, once, by name; a file is read once
        spec = make_lengths(search.model, seq_len, num_tokens_to_generate, lengths, names)
        if mixed:
            s, n = round(spec.input_mean), spec.max_output  # n: whether any request decodes (max_tpot, pools)
            _check_targets(slo, n, bool(disaggregate))
    else:  # (the check inference() makes for every layout, made once with the lengths named as given)
        check_context(search.model, s + n - 1, f"{names[0]} + {names[1]} - 1")
    # a token-rate target beside a request rate: the rate is the load, and the tokens it can generate are known
    inputs.check_token_target(slo, spec.output_mean if batching == "continuous" else n)
    max_worker_gpus = inputs.optional_positive_int(max_worker_gpus, "max_worker_gpus")
    engine_options = _engine_options(engine_options)  # checked whatever the batching: a bad name is an error
    if batching != "continuous":
        _refuse_engine_arguments(emit_launch, engine_options, speculative)
    elif emit_launch is not None:
        check_engine(emit_launch)
    stats, miss = SearchStats(), ClosestMiss()
    if batching == "continuous":
        engine = framework if framework is not None else emit_launch if emit_launch is not None else "vllm"
        load = _continuous_load(search, slo, spec, seq_len, num_tokens_to_generate, lengths,
                                choice(engine, "framework", FRAMEWORKS), engine_options, speculative)
        rows, points = collect_continuous(search, load, objective, stats, miss, max_worker_gpus)
        extra: Dict[str, Any] = {"columns": CONTINUOUS_COLUMNS, "legend": continuous_legend(slo.percentile)}
    else:
        rows, points = _collect(search, slo, s, n, stats, miss)
        extra = {"columns": INFERENCE_COLUMNS, "legend": INFERENCE_LEGEND}
    if disaggregate and batching == "continuous":
        pool_rows = collect_pools(search, load, objective, stats, ClosestMiss(), max_worker_gpus)
        extra["disaggregated"] = {"rows": rank_rows(pool_rows, objective, True) if pool_rows else [],
                                  "assumptions": pools_assumptions(load)}
    elif disaggregate:
        from llm_analysis.planner.disagg import plan_disaggregated
        extra["disaggregated"] = plan_disaggregated(search, slo, s, n, objective, stats, ClosestMiss())
    stats.wall_s = time.perf_counter() - t0
    # the load the plan was asked for beside the lengths (a refusal for want of GPUs is the load's doing)
    asked = "; ".join(w for w in (f"{slo.request_rate_per_s:g} requests/s" if slo.request_rate_per_s else "",
                                  f"{slo.concurrency:g} clients" if slo.concurrency else "",
                                  f"{slo.min_tokens_per_s:g} tokens/s" if slo.min_tokens_per_s else "") if w)
    what = f"serving {search.model.name} (" + (load.workload_text if batching == "continuous"
                                               else f"seq_len {s}, {n} tokens") + (f"; {asked}" if asked else "") + ")"
    if not rows:
        if not extra.get("disaggregated", {}).get("rows"):
            raise miss.error(what)
        # separate pools meet the targets where no co-located fleet does (a 7-GPU cap: 5 prefill + 1 decode
        # workers, where every co-located fleet needs 8): those rows, and why no co-located one is listed
        extra["no_colocated_plan"] = str(miss.error(what))
    rows = rank_rows(rows, objective, slo.has_load)
    if emit_launch is not None:
        _add_launches(search, model, emit_launch, rows, extra.get("disaggregated", {}).get("rows", []))
    front = pareto_front(points, "time_per_output_token", "tokens_per_sec_per_gpu")
    assumptions = serving_assumptions(search)
    if batching == "continuous":
        assumptions.update(continuous_assumptions(load))
        assumptions.pop("cost")
        assumptions["cost"] = ("cost_per_million_tokens = $/GPU-hour x GPUs / (generated tokens/s x 3600) x 1e6 at "
                               "the offered load")
    else:
        assumptions["workload"] = f"seq_len {s}, {n} tokens; static batches (each prefilled and decoded together)"
        if slo.concurrency is not None or slo.request_rate_per_s is not None:
            # under clients or a rate a row's cost is the fleet's at the load (serving._row), not the full batch's
            assumptions["cost"] = ("cost_per_million_tokens = $/GPU-hour x GPUs / (the fleet's generated tokens/s at "
                                   "the offered load, figures['fleet_tokens_per_s'], x 3600) x 1e6; "
                                   "inference()['total_cost_per_1k_tokens'] x 1000 is a full batch's, back to back")
        if slo.percentile is not None:
            assumptions["percentile"] = (f"static batches have no spread (every request of a batch sees its TTFT "
                                         f"and TPOT): the p{slo.percentile} targets are checked on the batch's times")
    assumptions["targets"] = {**slo.__dict__, **({"seq_len": s, "num_tokens_to_generate": n} if not mixed
                                                 else {"lengths": load.workload_text})}
    if (fp4 := search.dtypes.assumption()) is not None:
        assumptions["fp4"] = fp4
    if (released := search.dtypes.released_assumption(search.model)) is not None:
        assumptions["checkpoint_dtype"] = released
    if (stored := search.dtypes.checkpoint_note(search.model)) is not None:
        assumptions["checkpoint"] = stored
    if search.refused_gpus:
        assumptions["refused_gpus"] = dict(search.refused_gpus)
    return PlanResult("inference", objective, rows, front, assumptions, stats, extra)


def _add_launches(search: Search, model, engine: str, rows: List[Dict[str, Any]],
                  pool_rows: List[Dict[str, Any]]) -> None:
    """row["launch"]: the engine's launch arguments of every row, the model named as the caller named it."""
    model_arg = model if isinstance(model, str) else search.model.name
    per_node = {g.name: g.num_gpus_per_node for g in search.gpus}
    moe = search.model.is_moe
    checkpoint = search.model.checkpoint_weight_format  # what the emitted model's weights are stored in
    for row in rows:
        row["launch"] = row_launch(engine, model_arg, row, per_node[row["layout"]["gpu"]], moe, checkpoint)
    for row in pool_rows:
        row["launch"] = pools_launch(engine, model_arg, row["pools"], per_node[row["layout"]["gpu"]], moe,
                                     row.get("reproduce", {}).get("serve_kwargs", {}).get("speculative"),
                                     row["layout"]["dtype"], checkpoint)


def _length_names(seq_len, num_tokens_to_generate) -> tuple:
    """How an error about the two lengths names them: a default the caller did not give says so (a
    user who never typed a length must learn where 2304 tokens came from)."""
    return (("seq_len" if seq_len is not None else f"seq_len (default {DEFAULT_SEQ_LEN})"),
            ("num_tokens_to_generate" if num_tokens_to_generate is not None
             else f"num_tokens_to_generate (default {DEFAULT_OUTPUT_LEN})"))


def _lengths_given(seq_len, num_tokens_to_generate, lengths, batching: str):
    """(seq_len, num_tokens_to_generate, mixed): the two lengths with their defaults (none beside `lengths`),
    and whether the requests' lengths vary (a spread, or pairs), which only continuous batching serves."""
    if lengths is not None and (seq_len is not None or num_tokens_to_generate is not None):
        both = " and ".join(f"{k} = {v!r}" for k, v in (("seq_len", seq_len),
                                                          ("num_tokens_to_generate", num_tokens_to_generate))
                            if v is not None)
        raise ConfigError(f"lengths = {lengths!r} given with {both}: the pairs are the requests' lengths; give the "
                          "pairs or seq_len and num_tokens_to_generate, not both")
    if lengths is None:
        seq_len = DEFAULT_SEQ_LEN if seq_len is None else seq_len
        num_tokens_to_generate = DEFAULT_OUTPUT_LEN if num_tokens_to_generate is None else num_tokens_to_generate
    seq_len, num_tokens_to_generate = _one_length(seq_len), _one_length(num_tokens_to_generate)
    mixed = lengths is not None or isinstance(seq_len, Mapping) or isinstance(num_tokens_to_generate, Mapping)
    if mixed and batching != "continuous":
        raise ConfigError(_static_one_length(seq_len, num_tokens_to_generate, lengths))
    return seq_len, num_tokens_to_generate, mixed


def _refuse_engine_arguments(emit_launch, engine_options: Dict[str, Any], speculative) -> None:
    """Static batches run no engine: a launch to emit, engine options or speculative decoding would do nothing."""
    if emit_launch is not None:
        check_engine(emit_launch)
        raise ConfigError(f"emit_launch = {emit_launch!r} writes the engine launch of a continuous-batching row: "
                          "give a load (request_rate_per_s, concurrency or min_tokens_per_s); valid: "
                          f"{', '.join(LAUNCH_ENGINES)} with a load, or None")
    if speculative is not None:
        raise ConfigError(f"speculative = {speculative!r} sets serve()'s speculative decoding, which only continuous "
                          "batching runs: give a load (request_rate_per_s, concurrency or min_tokens_per_s); valid "
                          "without a load: None")
    if engine_options:
        key, value = next(iter(engine_options.items()))
        raise ConfigError(f"{key} = {value!r} (engine_options) sets serve()'s engine, which only continuous batching "
                          "runs: give a load (request_rate_per_s, concurrency or min_tokens_per_s); valid without a "
                          "load: no engine options")


def _continuous_load(search: Search, slo: inputs.SLO, spec, seq_len, num_tokens_to_generate, lengths, framework: str,
                     engine_options: Dict[str, Any], speculative) -> ContinuousLoad:
    """What every fleet's serve() call is given, each part checked once here by name (a bad value would
    otherwise be refused by every layout's serve() and read as no layout fitting)."""
    workload = ({"lengths": spec.pairs} if spec.pairs is not None  # the file read once, passed as one array
                else {"input_len": seq_len, "output_len": num_tokens_to_generate})
    load = ContinuousLoad(slo, workload, spec.output_mean, framework, engine_options, _workload_text(spec, lengths),
                          _as_written(lengths), None if speculative is None else dict(speculative))
    check_load(slo.concurrency, load.request_rate)
    _check_engine_per_gpu(search, framework, engine_options, spec)
    speculative_decoding(search.probe, speculative)
    for kv in search.kv_options:
        kv_cache_name(kv)
    return load


def _check_engine_per_gpu(search: Search, framework: str, engine_options: Dict[str, Any], spec) -> None:
    """The engine as each GPU type would run it (its defaults depend on the GPU: vLLM's max_num_seqs is 1024
    on an H100, 256 on an A100), checked once per type: a type the engine refuses outright (a token budget
    below its default max_num_seqs, a prompt longer than its budget) is left out of the search and named in
    the plan; when every type is refused, the first refusal is the plan's error."""
    refusals = {}
    for probe in search.probes:
        try:
            check_whole_prompts_fit(engine_settings(probe, framework, engine_options), spec)
        except ConfigError as e:
            refusals[probe.gpu_config.name] = str(e)
    if refusals and len(refusals) == len(search.probes):
        raise ConfigError(next(iter(refusals.values())))
    search.refused_gpus = refusals
    search.gpus = [g for g in search.gpus if g.name not in refusals]


def _as_written(lengths):
    """`lengths` as a row's reproduce writes it (JSON): a path as text, an array as a list."""
    if isinstance(lengths, os.PathLike):
        return str(lengths)
    if isinstance(lengths, Mapping):  # a conversation file and its tokenizer
        return {**lengths, "file": str(lengths["file"])}
    return lengths.tolist() if hasattr(lengths, "tolist") else lengths


def _one_length(value):
    """{"mean": m} or {"mean": m, "spread": 0} is the one length m (any other value as given)."""
    if isinstance(value, Mapping) and "mean" in value and set(value) <= {"mean", "spread"} \
            and value.get("spread", 0) == 0:
        return value["mean"]
    return value


def _static_one_length(seq_len, num_tokens_to_generate, lengths) -> str:
    given = (f"lengths = {lengths!r}" if lengths is not None
             else f"seq_len = {seq_len!r}" if isinstance(seq_len, Mapping)
             else f"num_tokens_to_generate = {num_tokens_to_generate!r}")
    return (f"{given} is a workload of mixed lengths, which continuous batching serves: a static batch has one "
            f"prompt and one output length. Give a load (request_rate_per_s, concurrency or min_tokens_per_s), or "
            f"whole numbers of tokens for seq_len and num_tokens_to_generate")


def _workload_text(spec, lengths) -> str:
    """The requests' lengths in words (the plan's targets, its errors)."""
    if spec.pairs is not None:
        if isinstance(lengths, Mapping):  # a conversation file and its tokenizer
            source = f" from {str(lengths['file'])!r} (tokenizer {lengths.get('tokenizer')!r})"
        else:
            source = f" from {str(lengths)!r}" if isinstance(lengths, (str, os.PathLike)) else ""
        return (f"{len(spec.pairs)} (input, output) length pairs{source}: means {spec.input_mean:.0f} and "
                f"{spec.output_mean:.0f} tokens")
    spread = (lambda mean, s: f"{mean:.0f}" + (f" +- {s}" if s else ""))  # noqa: E731
    return (f"seq_len {spread(spec.input_mean, spec.input_spread)}, "
            f"{spread(spec.output_mean, spec.output_spread)} tokens")


def _batching(batching: Optional[str], slo: inputs.SLO) -> str:
    if batching is None:
        return "continuous" if slo.has_load else "static"
    batching = choice(batching, "batching", inputs.BATCHING)
    if batching == "continuous" and not slo.has_load:
        raise ConfigError("batching = 'continuous' sizes replicas for a load: give slo request_rate_per_s, "
                          "concurrency or min_tokens_per_s (or batching = 'static')")
    return batching


def _engine_options(options: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """serve()'s engine options, checked once (an unknown name is an error, not a skipped layout)."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ConfigError(f"engine_options = {options!r} must be a dict of serve() engine options")
    check_options(dict(options))
    for key in ("concurrency", "request_rate", "input_len", "output_len", "framework", "lengths"):
        if key in options:
            raise ConfigError(f"engine_options[{key!r}] is set by the planner (from slo, seq_len, "
                              "num_tokens_to_generate, framework); valid: the engine options of serve()")
    return dict(options)


def _collect(search: Search, slo: inputs.SLO, s: int, n: int, stats: SearchStats, miss: ClosestMiss):
    rows: List[Dict[str, Any]] = []
    points: List[Dict[str, Any]] = []
    at_load = slo.concurrency is not None or slo.request_rate_per_s is not None

    def targets(lay, kv):
        # closed-loop clients hold one slot each: no batch per GPU beyond ceil(clients / ep) ever forms (what
        # each replica's share of the load forms is the fleet's, static_fleet.py)
        most = search.max_batch if slo.concurrency is None else max(1, min(search.max_batch,
                                                                           math.ceil(int(slo.concurrency) / lay.ep)))
        return ServeTargets(s, n, slo.max_ttft_s, slo.max_tpot_s, most, kv, search.prices.get(lay.gpu.name),
                            "max_batch_size" if most == search.max_batch else "concurrency")

    for lay, kv, out in each_layout_outcome(search, targets, stats, miss):
        t = targets(lay, kv)
        built: List[Any] = []  # the layout's analysis, built when the load's batch is not the search's

        def run(b: int, t=t, lay=lay, built=built) -> Dict[str, Any]:
            if not built:
                built.append(search.analysis(lay))
            stats.evaluated_full += 1
            return built[0].inference(batch_size_per_gpu=b, seq_len=t.seq_len,
                                      num_tokens_to_generate=t.num_tokens_to_generate,
                                      kv_cache_dtype_bytes=t.kv_cache_dtype_bytes,
                                      cost_per_gpu_hour=t.cost_per_gpu_hour)

        max_replicas = math.inf if search.max_gpus is None else search.max_gpus // lay.gpus
        layout = lay.describe(kv)
        fleet = size_fleet(out.summary, out.binding, lay.ep, n, slo, run, max_replicas,
                           lambda c, v, lim, r, layout=layout: miss.record(c, v, lim, {**layout, "replicas": r}))
        if fleet is None:
            continue
        row = _row(search, lay, kv, fleet, t, slo)
        if search.max_gpus is not None and row["figures"]["num_gpus"] > search.max_gpus:
            miss.record("max_gpus", row["figures"]["num_gpus"], search.max_gpus, row["layout"])
            continue
        rows.append(row)
        # under a load a point is the fleet (the batch its shares form, its tokens/s at the load): a larger
        # batch the search met the targets with is one the load would not form
        for p in ([fleet.summary] if at_load else out.feasible_points):
            points.append({**row["layout"], "batch_size_per_gpu": p["batch_size_per_gpu"],
                           "time_per_output_token": p["time_per_output_token"],
                           "time_to_first_token": p["time_to_first_token"],
                           "tokens_per_sec_per_gpu": row["figures"]["tokens_per_sec_per_gpu"] if at_load
                           else p["total_tokens_per_sec_per_gpu"]})
    return rows, points
