"""Plain functions behind `llm-analysis plan infer|train`: flag values in,
(exit_code, text) out, so the command line only has to hand flags over.

Exit codes: 0 a plan was found; 2 bad input (one line naming the flag) or no
candidate meets the targets (one line: the closest missed target and by how
much), as the other commands do."""

from __future__ import annotations

import inspect
import json
import math
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from llm_analysis.cli.fire_runner import configure_logging, perf_model_arg
from llm_analysis.cli.serve import json_object_flag, length_arguments
from llm_analysis.errors import ConfigError, LLMAnalysisError
from llm_analysis.schema.options import positive_int
from llm_analysis.units import seconds
from llm_analysis.planner.result import PlanResult

_FORMATS = ("table", "json")


def _names(value: Any, flag: str) -> List[str]:
    """A comma-separated string or a sequence (fire turns a,b into a tuple)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    raise LLMAnalysisError(f"--{flag} = {value!r} must be comma-separated names")


def _ints(value: Any) -> Optional[List[Any]]:
    """None, one integer, or a comma-separated list of them (fire turns 0,1,2 into a tuple);
    each value is validated by the planner, which names the flag."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [value]


def _number_or_text(value: str) -> Any:
    """A flag's list item as a float, or as given where it is none, for the planner's check to name it (a bare
    float() let its ValueError out as a traceback)."""
    try:
        return float(value)
    except ValueError:
        return value


def _prices(value: Any) -> Optional[Dict[str, float]]:
    """--gpu_prices h100-sxm-80gb=2.5,a100-sxm-80gb=1.4 (dollars per GPU-hour) or a dict."""
    if value is None or isinstance(value, dict):
        return value
    out = {}
    for item in _names(value, "gpu_prices"):
        name, _, price = item.partition("=")
        try:
            out[name.strip()] = float(price)
        except ValueError:
            raise LLMAnalysisError(f"--gpu_prices item {item!r} must be name=dollars_per_hour") from None
    return out


def _render(result: PlanResult, output_format: str, plot: Any, top: int, html_file: Any = None,
            model_name: str = "") -> str:
    if output_format not in _FORMATS:
        raise LLMAnalysisError(f"--output_format = {output_format!r} is not valid; use one of {', '.join(_FORMATS)}")
    json_text = json.dumps(_jsonable(result.to_dict()), indent=2)
    text = json_text if output_format == "json" else result.table(top) + _pool_and_launch_text(result)
    if html_file is not None:
        from llm_analysis.report.html import plan_page, write_page
        # (separate pools alone: no co-located row to show in detail)
        detail = _best_plan_analysis(result, model_name) if result.rows else (None, None)
        written = write_page(html_file, plan_page(result, json_text, *detail))
        if output_format != "json":
            text += f"\nHTML report written to {os.path.abspath(written)}"
    if plot:
        path = plot if isinstance(plot, Path) else Path(f"plan-{result.kind}-pareto.png")
        from llm_analysis.report.plan_chart import plot_front
        plot_front(result, path)
        if output_format != "json":
            text += f"\nPareto front written to {os.path.abspath(path)}"
    return text


def _pool_and_launch_text(result: PlanResult) -> str:
    """Below the table: the best disaggregated deployment (continuous batching) and the launch
    arguments of the chosen rows, when the plan holds them."""
    lines: List[str] = []
    pools = result.extra.get("disaggregated")
    if isinstance(pools, dict) and "rows" in pools:
        if pools["rows"]:
            best = pools["rows"][0]
            fig = best["figures"]
            lines += ["", f"disaggregated (best of {len(pools['rows'])}): {fig['num_gpus']} GPUs, "
                      f"{fig['latency_statistic']} TTFT {fig['time_to_first_token'] * 1e3:.1f} ms, "
                      f"TPOT {fig['time_per_output_token'] * 1e3:.2f} ms, "
                      f"{fig['tokens_per_sec_per_gpu']:.1f} tok/s/gpu; binding {','.join(best['binding'])}"]
            for role, pool in best["pools"].items():
                lay = pool["layout"]
                lines.append(f"  {role}: {pool['workers']} worker(s) of tp {lay['tp']} x adp {lay['attention_dp']}"
                             + ("" if lay["moe_ep"] is None else f", experts {lay['moe_tp']}x{lay['moe_ep']}")
                             + f" ({pool['num_gpus']} GPUs)")
            lines.append(f"  reproduce: {best['reproduce']['serve_call']}")
        else:
            lines += ["", "disaggregated: no pair of pool layouts meets every target"]
    from llm_analysis.planner.launch import launch_lines
    if result.rows and "launch" in result.best:
        lines += ["", "best row's " + launch_lines(result.best["launch"])[0]] + launch_lines(result.best["launch"])[1:]
    if isinstance(pools, dict) and pools.get("rows") and "launch" in pools["rows"][0]:
        lines += ([] if result.rows else [""]) + ["best disaggregated " + launch_lines(pools["rows"][0]["launch"])[0]]
        lines += launch_lines(pools["rows"][0]["launch"])[1:]
    return "\n".join(lines)


def _best_plan_analysis(result: PlanResult, model_name: str):
    """(analysis, summary) of the plan's best row, rebuilt from its `reproduce` arguments with the
    model as the user named it, as `infer` / `train` would run it (for the HTML page)."""
    from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                     get_model_config_by_name)
    from llm_analysis.facade import LLMAnalysis

    rep = result.best["reproduce"]
    par = dict(rep["parallelism"])
    adp = par.get("attention_dp_size", 1)
    if adp > 1:
        # inference() analyses no attention replicas: the nearest layout it does is one replica per data-
        # parallel rank with the experts spread over them (the same weights per GPU when moe_tp = 1)
        par = {"tp_size": par["tp_size"], "dp_size": adp, "ep_size": adp}
    else:
        par = {k: v for k, v in par.items() if k not in ("attention_dp_size", "moe_tp_size", "moe_ep_size")}
    analysis = LLMAnalysis(get_model_config_by_name(model_name), get_gpu_config_by_name(rep["gpu_name"]),
                           get_dtype_config_by_name(rep["dtype_name"]), ParallelismConfig(**par),
                           **rep["analysis_kwargs"])
    if "serve_kwargs" in rep:  # continuous batching: one replica's step in detail, at its mean running batch
        analysis = analysis.with_conventions(analysis.inference_conventions)
        batch = max(1, round(result.best["figures"]["mean_running_requests_per_replica"] / adp))
        kw = rep["serve_kwargs"]
        return analysis, analysis.inference(batch_size_per_gpu=batch, seq_len=kw["input_len"],
                                            num_tokens_to_generate=kw["output_len"])
    if "inference_kwargs" in rep:
        analysis = analysis.with_conventions(analysis.inference_conventions)  # the report counts as the summary
        return analysis, analysis.inference(**rep["inference_kwargs"])
    return analysis, analysis.training(**rep["training_kwargs"])


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items() if k != "columns"}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x if isinstance(x, (str, int, float, bool, type(None))) else str(x)


# the planner's parameter names that differ from the command's flags: an error about one
# names the flag the user typed
_FLAG_OF = {"lengths": "lengths_file",
            "model": "model_name", "gpus": "gpu_names", "dtypes": "dtype_names", "tokens": "total_num_tokens",
            "slo.max_ttft_s": "max_ttft", "slo.max_tpot_s": "max_tpot", "slo.request_rate_per_s": "request_rate",
            "slo.min_tokens_per_s": "min_tokens_per_s", "slo.concurrency": "concurrency",
            "slo.percentile": "percentile"}


_SPREAD_FLAG = {"seq_len": "input_len_spread", "num_tokens_to_generate": "output_len_spread"}


def _in_flag_terms(message: str, flags: Tuple[str, ...]) -> str:
    """`message` with a leading planner parameter name (`gpus = []`) written as the flag
    (`--gpu_names = []`); a leading sum of lengths (`seq_len + num_tokens_to_generate = 2304`) names
    both as flags."""
    sum_of = re.match(r"(\w+)( \(default \d+\))? \+ (\w+)\b", message)
    if sum_of and sum_of.group(1) in flags and sum_of.group(3) in flags:
        return f"--{sum_of.group(1)}{sum_of.group(2) or ''} + --{message[sum_of.start(3):]}"
    head = message.split(" ", 1)[0].split("[", 1)[0]
    flag = _FLAG_OF.get(head, head)
    for part, named in (("['spread']", _SPREAD_FLAG.get(flag)), ("['mean']", flag)):  # a length with its spread
        if message.startswith(head + part) and named in flags:
            return f"--{named}{message[len(head + part):]}"
    if flag in flags:
        message = f"--{flag}{message[len(head):]}"
    # a target named further on (a token-rate target beside the rate it exceeds) by its flag too
    for name, named in _FLAG_OF.items():
        if name.startswith("slo.") and named in flags:
            message = re.sub(rf"\b{re.escape(name)}\b", f"--{named}", message)
    return message


def _run(fn, output_format: str, plot: Any, top: int, flags: Tuple[str, ...] = (), html: Any = None,
         model_name: str = "") -> Tuple[int, str]:
    configure_logging("WARNING")  # warnings on stderr once each, not once per candidate analysed
    try:
        top = positive_int(top, "--top")  # (a Python slice would take 0 and -1 as "none" and "all but one")
        if html is not None:  # checked before the search runs
            from llm_analysis.report.html import html_path
            html = html_path(html)
        if plot and not (plot is True or plot == 1):  # a path (True: the default name), checked before the search
            from llm_analysis.report.files import output_file_path
            plot = output_file_path("--plot", plot, "pareto.png")
        return 0, _render(fn(), output_format, plot, top, html, model_name)
    except LLMAnalysisError as e:
        line = str(e).splitlines()[0] if str(e) else type(e).__name__
        return 2, f"error: {_in_flag_terms(line, flags)}"


def _lengths(seq_len, num_tokens_to_generate, input_len_spread, output_spread, lengths_file,
             lengths_tokenizer, continuous: bool) -> Dict[str, Any]:
    """plan_inference's length arguments from the flags (serve's rules, `length_arguments`); lengths that
    vary are refused, by flag, for static batches."""
    from llm_analysis.planner.inference import DEFAULT_OUTPUT_LEN, DEFAULT_SEQ_LEN
    given = [(f, v) for f, v in (("lengths_file", lengths_file), ("input_len_spread", input_len_spread),
                                 ("output_len_spread", output_spread)) if v]
    if given and not continuous:
        flag, value = given[0]
        raise ConfigError(f"--{flag} = {value!r} gives requests of mixed lengths, which continuous batching serves; a "
                          "static batch has one prompt and one output length: give a load (--request_rate, "
                          f"--concurrency or --min_tokens_per_s) without --batching static, or drop --{flag}")
    return length_arguments({"seq_len": (seq_len, DEFAULT_SEQ_LEN),
                             "num_tokens_to_generate": (num_tokens_to_generate, DEFAULT_OUTPUT_LEN)},
                            input_len_spread, output_spread, lengths_file, lengths_tokenizer)


def _one_length(mirrored, serving, mirrored_flag: str, serving_flag: str):
    """The length given under either flag (`plan infer` takes the mirrored system's name and serve()'s);
    a ConfigError when both are given and differ."""
    if serving is None:
        return mirrored
    if mirrored is not None and mirrored != serving:
        raise ConfigError(f"{serving_flag} = {serving!r} and {mirrored_flag} = {mirrored!r} name the same length; "
                          f"valid: give one of the two")
    return serving


def plan_infer_command(model_name: str, gpu_names: Any, seq_len: Optional[int] = None,
                       num_tokens_to_generate: Optional[int] = None,
                       max_ttft: Union[float, str, None] = None, max_tpot: Union[float, str, None] = None,
                       request_rate: Optional[float] = None, min_tokens_per_s: Optional[float] = None,
                       objective: str = "tokens_per_gpu", dtype_names: Any = "checkpoint",
                       kv_cache_dtype_bytes: Any = None, gpu_prices: Any = None, max_gpus: Optional[int] = None,
                       max_batch_size: int = 1024, disaggregate: bool = False,
                       flops_efficiency: Optional[float] = None, hbm_memory_efficiency: Optional[float] = None,
                       output_format: str = "table", plot: Any = False, top: int = 10,
                       perf_model: Optional[str] = None, gpu_profile: Optional[str] = None,
                       html: Optional[str] = None, concurrency: Optional[int] = None,
                       percentile: Optional[int] = None, batching: Optional[str] = None,
                       framework: Optional[str] = None, emit_launch: Optional[str] = None,
                       max_worker_gpus: Optional[int] = None, api_latency_s: Optional[float] = None,
                       scheduling_lookahead: Optional[int] = None,
                       benchmark_rounds: Optional[float] = None, input_len_spread: int = 0,
                       output_len_spread: int = 0, lengths_file: Optional[str] = None,
                       prefix_cache_share: Optional[float] = None, max_num_batched_tokens: Optional[int] = None,
                       max_num_seqs: Optional[int] = None,
                       gpu_memory_utilization: Optional[float] = None,
                       speculative: Union[str, dict, None] = None,
                       lengths_tokenizer: Optional[str] = None, max_tp: Optional[int] = None,
                       max_ep: Optional[int] = None, input_len: Optional[int] = None,
                       output_len: Optional[int] = None) -> Tuple[int, str]:
    """`plan infer`: the best serving setups (GPU type and count, tp/pp/ep, data type, KV dtype, batch) as a
    table (top rows) or JSON (all rows).

    Times are checked against the targets as the performance model gives them: expected times under
    --perf_model calibrated (the default), lower bounds under roofline. With a load (--request_rate,
    --concurrency or --min_tokens_per_s) replicas are sized with continuous batching: every fleet is
    timed by serve() on --framework, and each row carries the serve() call that reproduces it;
    --batching static keeps the static-batch search.

    Args:
        model_name: catalogue name, Hub id, config JSON path or local model directory.
        gpu_names: comma-separated catalogue GPU names to try (e.g. h100-sxm-80gb,a100-sxm-80gb).
        seq_len: prompt length in tokens (default 2048; the mean when --input_len_spread is given).
        num_tokens_to_generate: output tokens per request (default 256; the mean when
            --output_len_spread is given).
        input_len: the prompt length under serve()'s name (--seq_len; give one of the two).
        output_len: the output length under serve()'s name (--num_tokens_to_generate; give one of the two).
        max_ttft: time-to-first-token target; seconds, or a number with a unit (500ms, 0.5s, 2min).
        max_tpot: time-per-output-token target; seconds, or a number with a unit (50ms, 0.05s).
        request_rate: requests per second the fleet must sustain (replicas are added to meet it).
        min_tokens_per_s: output tokens per second the fleet must sustain.
        objective: tokens_per_gpu (default), fewest_gpus, or cost (dollars per million output tokens; needs --gpu_prices).
        dtype_names: comma-separated data types to try (catalogue names or bf16, fp8, int8, int4, awq, ...; fp4 is read per GPU: MXFP4 checkpoints by the GPU, NVFP4 only on GPUs with FP4 tensor cores; checkpoint, the default, is the checkpoint's weights as released: bf16 for a 16-bit release, fp8 / NVFP4 / MXFP4 as the engines run them on each GPU, weight-only where it has no tensor cores for them).
        kv_cache_dtype_bytes: comma-separated KV-cache bytes per element to try (none = the data type's).
        gpu_prices: dollars per GPU-hour, e.g. h100-sxm-80gb=2.5,a100-sxm-80gb=1.4.
        max_gpus: the most GPUs a plan may use.
        max_batch_size: the largest batch per replica tried.
        disaggregate: also size separate prefill and decode pools (DistServe-style); with a load, each pool's
            layout and the prefill:decode worker ratio on serve(disaggregated=...).
        flops_efficiency: fraction of peak FLOP/s reached, in (0, 1] (roofline model only).
        hbm_memory_efficiency: fraction of peak HBM bandwidth reached, in (0, 1] (roofline model only).
        output_format: table (the top rows, with a legend) or json (every row).
        plot: write the Pareto front as a PNG (True: plan-inference-pareto.png, or a path).
        top: how many rows the table shows.
        perf_model: calibrated (expected times; the default) or roofline (lower bounds at the efficiencies
            given; the default when --flops_efficiency or --hbm_memory_efficiency is given).
        gpu_profile: a calibration profile JSON; implies calibrated.
        html: write one self-contained HTML page to this file (opens offline, fetches nothing): the Pareto
            front with each point labelled, the sortable plans, and the best plan in detail.
        concurrency: closed-loop clients the fleet must serve, each sending its next request when the previous
            finishes (sizes replicas; not with --request_rate).
        percentile: check --max_ttft and --max_tpot on this percentile of the requests (50, 90 or 99); default:
            on the means.
        batching: continuous (default with a load: replicas sized with serve()) or static (one batch per
            replica, prefilled and decoded together: the default without a load).
        framework: the serving engine continuous batching models: vllm, sglang or trtllm (default: --emit_launch's
            engine when that is given, so that the launch printed runs what was timed; else vllm).
        emit_launch: vllm, sglang or trtllm: print the engine's launch command for the best row (JSON: every
            row's, under "launch"); needs a load. A layout the engine cannot express is said so.
        max_worker_gpus: the most GPUs one worker of an MoE model may span (tp x attention_dp; default 64).
        api_latency_s: with a load: the fixed API / tokenisation latency in every time to first token, seconds
            (default: the engine profile's, fitted on measured runs).
        scheduling_lookahead: with a load: steps the engine's scheduler plans ahead, 1 (the engines' default)
            or 0.
        benchmark_rounds: with --concurrency: requests per client of the benchmark run the mean TTFT is over
            (its clients start together; default: the engine profile's, fitted on measured runs); 0: the
            steady state alone (clients that never start together, as in production).
        input_len_spread: with a load: prompt lengths uniform over seq_len +- this many tokens (0: fixed; the
            flag serve takes).
        output_len_spread: with a load: output lengths uniform over num_tokens_to_generate +- this many tokens
            (0: fixed; the flag serve takes).
        lengths_file: with a load: a file of (input, output) token-length pairs the requests are drawn from,
            instead of the lengths above: .json (a list of pairs or of {"input_len", "output_len"} objects),
            .jsonl or .csv (input_len,output_len columns), or a ShareGPT-style conversation file with
            --lengths_tokenizer; read once.
        lengths_tokenizer: with a conversation --lengths_file: the tokenizer that counts its turns in tokens (a Hub
            id in the local cache or a local directory), as serve takes it.
        prefix_cache_share: with a load: share of each prompt already in the engine's prefix cache, in [0, 1)
            (whole blocks are skipped by prefill; default 0).
        max_num_batched_tokens: with a load: tokens one engine step may process, the chunked-prefill budget
            (default: the engine's for the GPU).
        max_num_seqs: with a load: requests running at once per attention replica (default: the engine's).
        gpu_memory_utilization: with a load: share of GPU memory the engine may use, in (0, 1] (default: the
            engine's).
        speculative: with a load: speculative decoding in every fleet, a JSON object as serve takes it:
            {"method": "mtp" | "draft_model", "draft_length": k (tokens verified per step),
            "mean_accepted_length": L in [1, k] or "acceptance_rate": a, "draft_model": name (draft_model
            only)}; --emit_launch then writes the engine's speculative flags.
        max_tp: the largest tensor-parallel size tried (default: every size the model's heads allow up to a node).
        max_ep: the largest expert-parallel size tried for an MoE model (moe_ep; default: the worker's GPUs).
    """
    from llm_analysis.planner.inference import plan_inference

    def go():
        # serve()'s names for the lengths, as a user coming from `serve` (and its --input_len_spread) types them
        prompt = _one_length(seq_len, input_len, "--seq_len", "--input_len")
        output = _one_length(num_tokens_to_generate, output_len, "--num_tokens_to_generate", "--output_len")
        kv = kv_cache_dtype_bytes
        if isinstance(kv, str):
            kv = [None if v in ("none", "None", "") else _number_or_text(v) for v in kv.split(",")]
        return plan_inference(model_name, _names(gpu_names, "gpu_names"),
                              {"max_ttft_s": seconds(max_ttft, "--max_ttft"), "max_tpot_s": seconds(max_tpot, "--max_tpot"),
                               "request_rate_per_s": request_rate,
                               "min_tokens_per_s": min_tokens_per_s, "concurrency": concurrency,
                               "percentile": percentile},
                              **_lengths(prompt, output, input_len_spread,
                                         output_len_spread, lengths_file, lengths_tokenizer,
                                         batching != "static" and any(v is not None for v in (
                                             request_rate, concurrency, min_tokens_per_s))),
                              objective=objective,
                              dtypes=_names(dtype_names, "dtype_names"), kv_cache_dtype_bytes=kv,
                              gpu_prices=_prices(gpu_prices), max_gpus=max_gpus, max_batch_size=max_batch_size,
                              max_tp=max_tp, max_ep=max_ep,
                              disaggregate=disaggregate, flops_efficiency=flops_efficiency,
                              hbm_memory_efficiency=hbm_memory_efficiency,
                              perf_model=perf_model_arg(perf_model, gpu_profile, rates_given=flops_efficiency
                                                        is not None or hbm_memory_efficiency is not None),
                              batching=batching,
                              framework=framework, emit_launch=emit_launch, max_worker_gpus=max_worker_gpus,
                              speculative=json_object_flag(speculative, "speculative"),
                              engine_options={k: v for k, v in (("api_latency_s", api_latency_s),
                                                                ("scheduling_lookahead", scheduling_lookahead),
                                                                ("benchmark_rounds", benchmark_rounds),
                                                                ("prefix_cache_share", prefix_cache_share),
                                                                ("max_num_batched_tokens", max_num_batched_tokens),
                                                                ("max_num_seqs", max_num_seqs),
                                                                ("gpu_memory_utilization", gpu_memory_utilization))
                                              if v is not None})
    return _run(go, output_format, plot, top, tuple(inspect.signature(plan_infer_command).parameters), html,
                model_name)


def plan_train_command(model_name: str, gpu_names: Any, total_num_tokens: float, max_gpus: int,
                       global_batch_size: int, seq_len: Optional[int] = None, objective: str = "time",
                       dtype_names: Any = "w16a16e16", gpu_prices: Any = None, min_gpus: int = 1,
                       flops_efficiency: Optional[float] = None, hbm_memory_efficiency: Optional[float] = None,
                       achieved_tflops: Optional[float] = None, output_format: str = "table", plot: Any = False,
                       top: int = 10, perf_model: Optional[str] = None, gpu_profile: Optional[str] = None,
                       zero_stages: Any = None, html: Optional[str] = None, max_tp: Optional[int] = None,
                       max_pp: Optional[int] = None) -> Tuple[int, str]:
    """`plan train`: the fastest (or cheapest) training setups: tp/cp/pp/dp/ep, interleaving, ZeRO stage,
    recomputation and micro-batch under the memory limit.

    Args:
        model_name: catalogue name, Hub id, config JSON path or local model directory.
        gpu_names: comma-separated catalogue GPU names to try.
        total_num_tokens: tokens to train on (e.g. 300e9).
        max_gpus: the most GPUs a plan may use.
        global_batch_size: sequences per iteration.
        seq_len: tokens per sequence (default: the model's maximum).
        objective: time (total training time, the default) or cost (dollars; needs --gpu_prices).
        dtype_names: comma-separated data types to try (catalogue names or bf16, fp8, ...; fp4 is read per GPU).
        gpu_prices: dollars per GPU-hour, e.g. h100-sxm-80gb=2.5.
        min_gpus: the fewest GPUs a plan may use.
        flops_efficiency: fraction of peak FLOP/s reached, in (0, 1] (roofline model only).
        hbm_memory_efficiency: fraction of peak HBM bandwidth reached, in (0, 1] (roofline model only).
        achieved_tflops: achieved TFLOP/s per GPU; overrides flops_efficiency.
        output_format: table (the top rows, with a legend) or json (every row).
        plot: write the Pareto front as a PNG (True: plan-training-pareto.png, or a path).
        top: how many rows the table shows.
        perf_model: calibrated (expected times; the default) or roofline (lower bounds at the efficiencies
            given; the default when --flops_efficiency, --hbm_memory_efficiency or --achieved_tflops is given).
        gpu_profile: a calibration profile JSON; implies calibrated.
        zero_stages: comma-separated ZeRO stages to try (default: 0,1,2,3).
        html: write one self-contained HTML page to this file (opens offline, fetches nothing): the Pareto
            front with each point labelled, the sortable plans, and the best plan in detail.
        max_tp: the largest tensor-parallel size tried (default: up to a node).
        max_pp: the largest number of pipeline stages tried (default: as the layers allow).
    """
    from llm_analysis.planner.training import plan_training

    def go():
        return plan_training(model_name, _names(gpu_names, "gpu_names"), tokens=total_num_tokens,
                             max_gpus=max_gpus, global_batch_size=global_batch_size, seq_len=seq_len,
                             dtypes=_names(dtype_names, "dtype_names"), objective=objective,
                             gpu_prices=_prices(gpu_prices), min_gpus=min_gpus, max_tp=max_tp, max_pp=max_pp,
                             flops_efficiency=flops_efficiency,
                             hbm_memory_efficiency=hbm_memory_efficiency, achieved_tflops=achieved_tflops,
                             perf_model=perf_model_arg(perf_model, gpu_profile, rates_given=any(
                                 v is not None for v in (flops_efficiency, hbm_memory_efficiency, achieved_tflops))),
                             **({} if zero_stages is None else {"zero_stages": _ints(zero_stages)}))
    return _run(go, output_format, plot, top, tuple(inspect.signature(plan_train_command).parameters), html,
                model_name)
