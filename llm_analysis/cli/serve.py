"""`llm-analysis serve`: a deployment under load (LLMAnalysis.serve, llm_analysis/serving/)."""

import json
import os
from typing import Any, Dict, Optional, Union

from llm_analysis.cli.fire_runner import configure_logging, perf_model_arg, warnings_for_the_report, write_stdout
from llm_analysis.catalogue.lookup import dtype_for_setup
from llm_analysis.config import ParallelismConfig, build_config, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.errors import ConfigError, DoesNotFitError
from llm_analysis.facade import LLMAnalysis
from llm_analysis.report.collected_warnings import merged
from llm_analysis.report.units import format_seconds
from llm_analysis.report.render import summary_with_setup, to_json
from llm_analysis.serving.workload import DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN

# (no `from __future__ import annotations` here: fire shows the real types in --help)

_OUTPUT_FORMATS = ("text", "json", "none")


def length_arguments(lengths: Dict[str, Any], input_len_spread: int, output_len_spread: int,
                     lengths_file: Optional[str], lengths_tokenizer: Optional[str]) -> Dict[str, Any]:
    """The length flags as the library takes them, for `serve` and `plan infer`: `lengths` is {name: (value or
    None, default)} of the command's two length flags (input, then output). Returns those two (a number, or
    {"mean", "spread"} with a spread), or {"lengths": the file, or {"file", "tokenizer"}}. A length or
    spread beside a file (it would be ignored), or a tokenizer without one, is one error naming the flags."""
    (input_name, (input_len, input_default)), (output_name, (output_len, output_default)) = lengths.items()
    if lengths_file is not None:
        beside = [f"--{f} = {v!r}" for f, v in ((input_name, input_len), (output_name, output_len),
                                                ("input_len_spread", input_len_spread),
                                                ("output_len_spread", output_len_spread)) if v]
        if beside:
            raise ConfigError(f"--lengths_file = {lengths_file!r} given with {', '.join(beside)}: the file's pairs are "
                              "the requests' lengths; give the file or the lengths, not both")
        return {"lengths": lengths_file if lengths_tokenizer is None
                else {"file": lengths_file, "tokenizer": lengths_tokenizer}}
    if lengths_tokenizer is not None:
        raise ConfigError(f"--lengths_tokenizer = {lengths_tokenizer!r} counts the turns of a conversation "
                          "--lengths_file, and none is given; give --lengths_file with it, or drop --lengths_tokenizer")

    def length(value, default, spread):
        if value is None and not spread:  # the library's default, which its errors name as one
            return None
        mean = default if value is None else value
        return mean if not spread else {"mean": mean, "spread": spread}

    return {input_name: length(input_len, input_default, input_len_spread),
            output_name: length(output_len, output_default, output_len_spread)}


def _time(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _layout_text(answer: Dict[str, Any], p) -> str:
    """The deployment's workers as the header states them (pools when disaggregated)."""
    if answer.get("disaggregated"):
        return (f"prefill {answer['prefill_workers']} x {answer['prefill_gpus_per_worker']} GPUs, decode "
                f"{answer['decode_workers']} x {answer['decode_gpus_per_worker']} GPUs")
    text = f"{answer['num_replicas']} replica(s) of tp={p.tp_size}" + (f" x pp={p.pp_size}" if p.pp_size > 1 else "")
    if answer.get("attention_dp_size", 1) > 1 or answer.get("moe_ep_size", 1) > 1:
        text += (f" x attention_dp={answer['attention_dp_size']}, experts moe_tp={answer['moe_tp_size']} x "
                 f"moe_ep={answer['moe_ep_size']}")
        if answer.get("moe_redundant_experts"):
            text += f" with {answer['moe_redundant_experts']} redundant expert copies"
    return text


def _rate(requests_per_s: Optional[float]) -> str:
    return "none (nothing to decode)" if requests_per_s is None else f"{requests_per_s:.3g} requests/s"


def _pools_lines(answer: Dict[str, Any]) -> list:
    """The disaggregated pools as the answer states them: each pool's workers, layout and capacity, the
    pool that limits the deployment, the prefill queue and the KV transfer between the pools (figures of
    serving/disaggregated.py, formatted here, none worked out)."""
    limiting = answer["limiting_pool"]
    lines = []
    for pool in ("prefill", "decode"):
        binds = " -- limits the deployment" if limiting in (pool, "both") else ""
        lines.append(f"{pool} pool: {answer[f'{pool}_workers']} worker(s) x {answer[f'{pool}_gpus_per_worker']} GPUs "
                     f"({answer[f'{pool}_layout']}), capacity "
                     f"{_rate(answer[f'{pool}_capacity_request_rate_per_s'])}{binds}")
    wait = answer["prefill_queue_wait_s"]
    lines.append(f"prefill queue: wait {'unbounded' if wait is None else format_seconds(wait)}, then batches of "
                 f"{answer['prefill_batch_size']} prompt(s) per rank taking {format_seconds(answer['prefill_batch_s'])}")
    link = answer["kv_transfer_link"]
    over = "at the stated kv_transfer_GB_per_s" if link == "stated" else f"point to point over {link}"
    lines.append(f"KV transfer: {format_seconds(answer['kv_transfer_s'])} per request, "
                 f"{answer['kv_transfer_bytes_per_gpu'] / 1e6:.4g} MB from each prefill GPU, {over}")
    return lines


def report(analysis: LLMAnalysis, answer: Dict[str, Any]) -> str:
    """The answer as text: setup, load, latencies (mean and percentiles), throughput, saturation (with
    disaggregated pools: each pool, the prefill queue, the KV transfer), KV pool, notes."""
    p = analysis.parallelism_config
    load = (f"{answer['concurrency']} concurrent clients (closed loop)" if answer["concurrency"] is not None else
            f"{answer['request_rate']:g} requests/s (open loop, Poisson)")
    lines = [
        f"serve: {analysis.model_config.name} on {answer['num_gpus']} x {analysis.gpu_config.name} "
        f"({_layout_text(answer, p)}), {analysis.dtype_config.name}, "
        f"{answer['framework']}, perf_model={answer['perf_model']}",
        f"load: {load}; input {answer['input_len_mean']:g} tokens, output {answer['output_len_mean']:g} tokens (means)",
        "",
        f"{'':24s}{'mean':>12s}{'p50':>12s}{'p90':>12s}{'p99':>12s}",
    ]
    for name, label in (("ttft", "time to first token"), ("tpot", "time per output token"),
                        ("e2e", "end-to-end latency")):
        lines.append(f"{label:24s}" + "".join(f"{_time(answer[k]):>12s}" for k in
                                              (f"{name}_s", f"{name}_p50_s", f"{name}_p90_s", f"{name}_p99_s")))
    lines += [
        "",
        f"throughput: {answer['requests_per_s']:.3g} requests/s, {answer['output_tokens_per_s']:.4g} output tokens/s "
        f"({answer['output_tokens_per_s_per_gpu']:.4g} per GPU)",
        f"saturation: {answer['saturation_request_rate_per_s']:.3g} requests/s"
        + (" -- the request rate is above it: the queue grows without bound" if answer["saturated"] else ""),
        *(_pools_lines(answer) if answer.get("disaggregated") else []),
        f"KV pool: {answer['kv_pool_tokens_per_replica']} tokens per replica "
        f"({answer['kv_pool_bytes_per_gpu'] / 1e9:.2f} GB per GPU), {answer['kv_occupancy']:.0%} in use; at most {answer['max_running_requests_per_replica']} "
        f"requests running per replica",
        f"memory per GPU{' (decode pool)' if answer.get('disaggregated') else ''}: weights "
        f"{answer['weight_memory_per_gpu'] / 1e9:.2f} GB, KV pool {answer['kv_pool_bytes_per_gpu'] / 1e9:.2f} GB, "
        f"engine workspace {answer['workspace_memory_per_gpu'] / 1e9:.2f} GB (activations, logits, CUDA graphs, "
        f"buffers) of {answer['gpu_memory_per_gpu'] / 1e9:.2f} GB",
        f"engine: max_num_batched_tokens {answer['max_num_batched_tokens']}, max_num_seqs {answer['max_num_seqs']}, "
        f"gpu_memory_utilization {answer['gpu_memory_utilization']:g}, block_size {answer['block_size']}, "
        f"kv_cache_dtype {answer['kv_cache_dtype']}",
        "",
        "notes:",
    ]
    lines += [f"- {n}" for n in answer["notes"]]
    if answer.get("warnings"):
        lines += ["", "warnings:"] + [f"! {w}" for w in answer["warnings"]]
    return "\n".join(lines)


def json_object_flag(value, flag: str) -> Optional[dict]:
    """A dict flag: as fire parsed it (a Python literal) or a JSON string; None when not given."""
    if value is None or isinstance(value, dict):
        return value
    if not isinstance(value, str):  # valid JSON that fire already read as another kind: a list, a number
        kind = {list: "array", tuple: "array", bool: "boolean", int: "number", float: "number"}.get(type(value), "value")
        raise ConfigError(f"--{flag} = {value!r} is a JSON {kind}, not an object: give {{\"key\": value, ...}}")
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"--{flag} = {value!r} does not parse as JSON ({err}); give a JSON object") from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"--{flag} = {value!r} must be a JSON object")
    return parsed


def serve(model_name: str = "meta-llama/Llama-3.1-8B", gpu_name: str = "h100-sxm-80gb",
          dtype_name: str = "checkpoint", tp_size: int = 1, dp_size: int = 1, attention_dp_size: int = 1,
          moe_tp_size: Optional[int] = None, moe_ep_size: Optional[int] = None,
          moe_redundant_experts: Optional[int] = None, pp_size: int = 1, concurrency: Optional[int] = None,
          request_rate: Optional[float] = None, input_len: Optional[int] = None, output_len: Optional[int] = None,
          input_len_spread: int = 0, output_len_spread: int = 0, lengths_file: Optional[str] = None,
          lengths_tokenizer: Optional[str] = None,
          framework: str = "vllm", max_num_batched_tokens: Optional[int] = None, max_num_seqs: Optional[int] = None,
          gpu_memory_utilization: Optional[float] = None, block_size: Optional[int] = None,
          prefix_cache_share: float = 0.0, kv_cache_dtype: Optional[str] = None, seed: int = 0,
          num_requests: Optional[int] = None, api_latency_s: Optional[float] = None,
          scheduling_lookahead: Optional[int] = None, benchmark_rounds: Optional[float] = None,
          sliding_window_cache: Optional[str] = None, speculative: Union[str, dict, None] = None,
          disaggregated: Union[str, dict, None] = None, perf_model: str = "calibrated", gpu_profile: Optional[str] = None,
          output_format: str = "text", quiet: bool = False, log_level: str = "INFO",
          html: Optional[str] = None) -> dict:
    """Serving under load: time to first token, time per output token and end-to-end latency (means, p50,
    p90, p99), throughput, KV pool and saturation rate of replicas of a model under a serving engine.

    Continuous batching: every engine step decodes one token for each running request and prefills waiting
    prompts within the token budget; each step is timed on the cost model from the model's operators. A
    closed loop (--concurrency: clients each sending the next request when the previous finishes) has its
    means in closed form and its percentiles from a seeded simulation; an open loop (--request_rate: Poisson
    arrivals) comes from the simulation. A request rate above what the replicas can serve is not an error:
    the report says the queue grows without bound and gives the saturation rate (within 10% of it, the notes
    say the queue depends on how long the load lasts: --num_requests). All JSON values are in base
    units (seconds, tokens, requests, bytes). Errors end with one line and exit code 2; add --debug to see
    the traceback.

    Example: llm-analysis serve --model_name meta-llama/Llama-3.1-70B --gpu_name h100-sxm-80gb --dtype_name fp8
    --tp_size 4 --concurrency 64 --input_len 1024 --output_len 1024 --framework vllm

    Args:
        model_name: catalogue name (`python -m llm_analysis.config list_model_configs`), Hub id, path to a
            config JSON, or a local model directory.
        gpu_name: catalogue GPU name (e.g. h100-sxm-80gb, h200-sxm-141gb, b200-180gb).
        dtype_name: weights/activations/embedding bits, e.g. w16a16e16 (bf16), fp8, nvfp4, w4a16e16; checkpoint (the default) is the release's own weights as the GPU runs them, as an engine loads them: bf16 for a 16-bit release, fp8 / NVFP4 / MXFP4 otherwise (weight-only where the GPU has no tensor cores for them).
        tp_size: tensor-parallel GPUs of one replica (must divide the number of heads).
        dp_size: replicas (workers) sharing the load (clients round robin, the request rate evenly).
        attention_dp_size: attention replicas inside one worker (the worker spans tp_size x attention_dp_size
            GPUs; each replica runs its own share of the requests; SGLang --enable-dp-attention, TensorRT-LLM
            enable_attention_dp).
        moe_tp_size: each routed expert split over this many of the worker's GPUs (default: tp_size, or the
            worker's GPUs over --moe_ep_size).
        moe_ep_size: routed experts spread over this many GPU groups of the worker (default: attention_dp_size);
            moe_tp_size x moe_ep_size = tp_size x attention_dp_size.
        moe_redundant_experts: redundant copies of routed experts spread with them over the --moe_ep_size groups
            (expert-parallel load balancing: SGLang --ep-num-redundant-experts, TensorRT-LLM's load-balancer
            slots, vLLM's EPLB); experts plus copies must split evenly over the groups, so a --moe_ep_size
            that does not divide the experts needs them (256 experts over 72 groups: 32); default: none.
        pp_size: pipeline stages of one worker, each of tp_size x attention_dp_size GPUs holding its layers (the
            running requests in micro-batches over the stages).
        concurrency: closed loop: concurrent clients over all replicas, each sending its next request when the
            previous one finishes (give this or --request_rate).
        request_rate: open loop: Poisson arrivals, requests per second over all replicas.
        input_len: prompt length in tokens (default 1024; the mean when --input_len_spread is given).
        output_len: generated tokens per request (default 128; the mean when --output_len_spread is given).
        input_len_spread: prompt lengths uniform over input_len +- this many tokens (0: fixed).
        output_len_spread: output lengths uniform over output_len +- this many tokens (0: fixed).
        lengths_file: a file of (input, output) token-length pairs to draw requests from, instead of the lengths
            above: .json (a list of pairs or of {"input_len", "output_len"} objects), .jsonl or .csv
            (input_len,output_len columns); or a ShareGPT-style conversation file (.json) with
            --lengths_tokenizer.
        lengths_tokenizer: with a conversation --lengths_file: the tokenizer that counts its turns in tokens
            (the model's Hub id in the local cache, or a local tokenizer directory); the first turn of each
            conversation is the prompt, the second the output, pairs kept as vllm bench serve keeps them (each
            side >= 4 tokens, prompt <= 1024, both <= 2048).
        framework: serving engine whose scheduling, defaults and overheads apply: vllm, sglang or trtllm.
        max_num_batched_tokens: tokens one engine step of an attention replica may process, the chunked-prefill
            budget (a worker's when attention_dp_size = 1; default: the engine's for this GPU).
        max_num_seqs: requests running at once per attention replica (a worker runs attention_dp_size times as
            many; default: the engine's).
        gpu_memory_utilization: share of GPU memory the engine may use, in (0, 1] (vLLM's
            gpu_memory_utilization, SGLang's mem_fraction_static, TensorRT-LLM's free_gpu_memory_fraction;
            default: the engine's).
        block_size: tokens per KV-cache block (default: the engine's: vLLM 16, SGLang 1, TensorRT-LLM 32).
        prefix_cache_share: share of each prompt already in the prefix cache, in [0, 1) (whole blocks are
            skipped by prefill).
        kv_cache_dtype: KV-cache element type: auto (the engine's default), fp8, bf16, fp16, int8.
        seed: seed of the simulation (arrivals, length draws, API-latency jitter); same seed, same answer.
        num_requests: requests the simulation measures after its warm-up (default 4000; 0 with --concurrency:
            no simulation, means only).
        api_latency_s: fixed API / tokenisation latency in every time to first token, seconds (default: the
            engine profile's, fitted on measured runs).
        scheduling_lookahead: steps the scheduler plans ahead of the GPU: 1 (the engines' default: vLLM's async
            scheduling, SGLang's and TensorRT-LLM's overlap schedulers) or 0 (a scheduler that plans each step
            after the previous one ends, e.g. --disable-overlap-schedule).
        benchmark_rounds: closed loop: requests per client of the benchmark run the mean TTFT is over (its
            clients start together, so the first round queues behind each other's prefills; default: the
            engine profile's, fitted on measured runs); 0: the steady state alone (a long run, or clients that
            never start together).
        sliding_window_cache: how sliding-window layers (gpt-oss, Gemma) hold the KV cache: window_groups
            (vLLM's hybrid manager, its default: only the blocks of each request's window), window_pool (SGLang's
            separate window pool, its default for gpt-oss), full (every layer holds every token: TensorRT-LLM's
            default, vLLM's --disable-hybrid-kv-cache-manager).
        speculative: speculative decoding, a JSON object: {"method": "mtp" | "draft_model", "draft_length": k
            (tokens verified per step), "mean_accepted_length": L in [1, k] or "acceptance_rate": a,
            "draft_model": name (draft_model only)}.
        disaggregated: prefill and decode pools, a JSON object: {"prefill": {"workers": n, "parallelism":
            {"tp_size": ..., "attention_dp_size": ...}, "batch_size": b}, "decode": {...}} (replaces the
            layout flags above).
        perf_model: calibrated (default: expected times from the GPU generation's fitted profile, as the engine
            profiles were fitted) or roofline (lower-bound kernel times).
        gpu_profile: a calibration profile JSON (e.g. saved from llm_analysis.calibrate); implies calibrated.
        output_format: text (readable report), json (the answer only, on stdout) or none.
        quiet: print nothing (return the answer only).
        log_level: DEBUG, INFO, WARNING or ERROR, on stderr (DEBUG also shows tracebacks on errors).
        html: write one self-contained HTML page to this file (opens offline, fetches nothing): the serving
            figures, latency percentiles, the notes, and one engine step in detail (operators you can sort, the
            roofline with hoverable operators, time and memory breakdowns) at the mean running batch.
    Returns:
        The answer dict (base units: seconds, tokens, requests, bytes).
    """
    configure_logging(log_level, warnings_in_report=True)
    if output_format not in _OUTPUT_FORMATS:
        raise ConfigError(f"output_format = {output_format!r} is not valid; use one of {', '.join(_OUTPUT_FORMATS)}")
    output_format = "none" if quiet else output_format
    if html is not None:  # checked before any arithmetic runs (imported only then: start-up time)
        from llm_analysis.report.html import html_path
        html = html_path(html)
    model, gpu = get_model_config_by_name(model_name), get_gpu_config_by_name(gpu_name)
    analysis = LLMAnalysis(model, gpu, dtype_for_setup(dtype_name, model, gpu),  # 'fp4': by checkpoint and GPU
                           build_config(ParallelismConfig, {"tp_size": tp_size, "dp_size": dp_size,
                                                            "attention_dp_size": attention_dp_size,
                                                            "pp_size": pp_size,
                                                            **({"moe_tp_size": moe_tp_size} if moe_tp_size else {}),
                                                            **({"moe_ep_size": moe_ep_size} if moe_ep_size else {}),
                                                            **({"moe_redundant_experts": moe_redundant_experts}
                                                               if moe_redundant_experts is not None else {})}),
                           perf_model=perf_model_arg(perf_model, gpu_profile))
    options = {k: v for k, v in (("max_num_batched_tokens", max_num_batched_tokens), ("max_num_seqs", max_num_seqs),
                                 ("gpu_memory_utilization", gpu_memory_utilization), ("block_size", block_size),
                                 ("kv_cache_dtype", kv_cache_dtype), ("num_requests", num_requests),
                                 ("api_latency_s", api_latency_s), ("scheduling_lookahead", scheduling_lookahead),
                                 ("benchmark_rounds", benchmark_rounds),
                                 ("sliding_window_cache", sliding_window_cache))
               if v is not None}
    lengths = length_arguments({"input_len": (input_len, DEFAULT_INPUT_LEN),
                                "output_len": (output_len, DEFAULT_OUTPUT_LEN)},
                               input_len_spread, output_len_spread, lengths_file, lengths_tokenizer)
    for flag, value in (("speculative", speculative), ("disaggregated", disaggregated)):
        parsed = json_object_flag(value, flag)
        if parsed is not None:
            options[flag] = parsed
    if "disaggregated" in options:  # the pools' layouts are in the JSON: a layout flag beside it would go unread
        given = [f"--{name} {value}" for name, value, default in (
            ("tp_size", tp_size, 1), ("dp_size", dp_size, 1), ("attention_dp_size", attention_dp_size, 1),
            ("moe_tp_size", moe_tp_size, None), ("moe_ep_size", moe_ep_size, None),
            ("moe_redundant_experts", moe_redundant_experts, None), ("pp_size", pp_size, 1)) if value != default]
        if given:
            raise ConfigError(f"{', '.join(given)} with --disaggregated: each pool's layout is its \"parallelism\" in "
                              "the JSON (and its worker count \"workers\"); drop the layout flags or put them there")
    answer = analysis.serve(concurrency=concurrency, request_rate=request_rate, framework=framework,
                            prefix_cache_share=prefix_cache_share, seed=seed, **lengths, **options)
    answer["warnings"] = merged(answer.get("warnings") or [], warnings_for_the_report())  # in the report, not stderr
    written = None if html is None else _write_html(html, analysis, answer)
    if output_format == "json":
        write_stdout(to_json(summary_with_setup(analysis, answer)))
    elif output_format == "text":
        write_stdout(report(analysis, answer))
        if written is not None:
            write_stdout(f"\nHTML report written to {os.path.abspath(written)}")
    return answer


def _write_html(path, analysis: LLMAnalysis, answer: Dict[str, Any]) -> str:
    """The serve page: the answer, and one engine step as `infer` analyses it (a static batch of the
    mean number of running requests per replica at the mean prompt; none for disaggregated pools,
    whose workers are other analyses, nor for attention-DP / expert-parallel workers)."""
    from llm_analysis.report.html import serve_page, write_page
    step = left_out = None
    running = answer.get("mean_running_requests_per_replica")
    # inference() times one tensor-parallel group: a worker with attention replicas or expert parallelism
    # (serving/layout.py) is not one, so its page shows no step it would misstate
    plain = answer.get("attention_dp_size", 1) == 1 and answer.get("moe_ep_size", 1) == 1
    if not answer.get("disaggregated") and running and plain:
        batch = max(1, round(running))
        try:
            step = analysis.inference(batch_size_per_gpu=batch, seq_len=max(1, round(answer["input_len_mean"])),
                                      num_tokens_to_generate=max(2, round(answer["output_len_mean"])))
        except DoesNotFitError as e:
            # infer's static batch holds every prompt's prefill activations at once; the engine prefills a
            # token budget a step, so a batch it runs can be one infer refuses: the page leaves the step out
            # and says why, instead of failing the command whose report stands (the text report prints)
            left_out = (f"The engine step of {batch} running requests (the mean number per replica) at the mean "
                        f"prompt is left out: as <code>infer</code> analyses it, a static batch that prefills "
                        f"every prompt at once, it needs {e.needed_bytes / 1e9:.2f} GB per GPU of the "
                        f"{e.available_bytes / 1e9:.2f} GB the GPU has"
                        + (f" (it fits {e.max_batch_size} such requests)" if e.max_batch_size else "")
                        + f". The engine runs this batch: it prefills at most max_num_batched_tokens = "
                        f"{answer.get('max_num_batched_tokens')} tokens a step. The serving figures above do "
                        f"not depend on it.")
    return write_page(path, serve_page(analysis, answer, to_json(summary_with_setup(analysis, answer)), step,
                                       left_out))
