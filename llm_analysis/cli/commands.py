"""Entry points `infer` and `train` (names, arguments and defaults of the
mirrored system) and the `fire` command line around them:

    python -m llm_analysis.analysis infer --model_name ... --gpu_name ...
    python -m llm_analysis infer ...      (same)
    llm-analysis train ...                (installed console script)
"""

import functools
import inspect
import logging
import os
from typing import List, Optional

from llm_analysis.facade import LLMAnalysis
from llm_analysis.schema.options import MAX_PARALLEL_SIZE, ActivationRecomputation, DSZeRO, as_enum as _enum, integer, optional_integer
from llm_analysis.cli.help_text import for_fire
from llm_analysis.training.micro_batch_choice import fastest_fitting_micro_batch
from llm_analysis.cli.fire_runner import configure_logging, perf_model_arg, run_fire, warnings_for_the_report, write_stdout
from llm_analysis.cli.serve import serve
from llm_analysis.catalogue.lookup import dtype_for_setup
from llm_analysis.config import ParallelismConfig, build_config, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.units import HBM_MEMORY_EFFICIENCY, INTER_NODE_MEMORY_EFFICIENCY, \
    INTRA_NODE_MEMORY_EFFICIENCY, NUM_GPUS_PER_NODE
from llm_analysis.errors import ConfigError

# (no `from __future__ import annotations` here: fire shows the real types in --help)

logger = logging.getLogger("llm_analysis")

_OUTPUT_FORMATS = ("text", "json", "none")


def _check_output_format(output_format: str) -> str:
    if output_format not in _OUTPUT_FORMATS:
        raise ConfigError(f"output_format = {output_format!r} is not valid; use one of {', '.join(_OUTPUT_FORMATS)}")
    return output_format


def _check_outputs(output_format: str, quiet: bool, plot: bool, output_dir: Optional[str]) -> str:
    """Validate the presentation flags before any arithmetic runs."""
    output_format = "none" if quiet else _check_output_format(output_format)
    if plot and output_dir is None:
        raise ConfigError("plot=True needs output_dir: the charts are written there (add --output_dir DIR)")
    if plot:
        from llm_analysis.report.charts import require_matplotlib
        require_matplotlib()
    return output_format


def _model_and_class(model_name: str, exact: bool):
    """(ModelConfig, analysis class): the table-driven mapping and LLMAnalysis, or with
    --exact the description derived from the transformers module tree (llm_analysis.exact)."""
    if not exact:
        return get_model_config_by_name(model_name), LLMAnalysis
    from llm_analysis.exact import exact_analysis_class
    cls, model = exact_analysis_class(model_name)
    return model, cls


def _html_file(html):
    """--html checked before any arithmetic runs (None: no page to write)."""
    if html is None:
        return None
    from llm_analysis.report.html import html_path
    return html_path(html)


def _present(analysis: LLMAnalysis, summary: dict, kind: str, output_format: str, plot: bool,
             output_dir: Optional[str], output_file_suffix: str, sweep_kwargs: Optional[dict] = None,
             html_file=None) -> None:
    """Write the files (output_dir), the charts (plot), the HTML page (html_file) and print
    the report (text) or the JSON summary (json: stdout holds nothing else)."""
    import llm_analysis.report.render as report
    from llm_analysis.report.collected_warnings import merged
    # what the command logged outside the analysis' calls too (loading the model, choosing a batch)
    summary["warnings"] = merged(summary.get("warnings") or [], warnings_for_the_report())
    written = None
    if html_file is not None:
        from llm_analysis.report.html import analysis_page, write_page
        json_text = report.to_json(report.summary_with_setup(analysis, summary))
        written = write_page(html_file, analysis_page(analysis, summary, kind, json_text))
    if output_format == "none" and output_dir is None:
        return
    if output_dir is not None:
        try:
            report.write_summary_files(analysis, summary, output_dir, False, output_file_suffix, kind=kind)
            if plot:
                import llm_analysis.report.charts as plots
                paths = plots.write_charts(analysis, summary, output_dir, kind=kind, suffix=output_file_suffix,
                                           sweep_kwargs=sweep_kwargs)
                logger.info("wrote charts: %s", ", ".join(os.path.basename(p) for p in paths))
        except OSError as err:
            raise ConfigError(f"cannot write into output_dir = {output_dir!r}: {err.strerror or err} "
                              f"({err.filename or output_dir}); choose a writable directory") from None
    if output_format == "json":
        write_stdout(report.to_json(report.summary_with_setup(analysis, summary)))
    elif output_format == "text":
        write_stdout(report.render(analysis, summary, kind))
        if written is not None:
            write_stdout(f"\nHTML report written to {os.path.abspath(written)}")


def _parallelism(**fields) -> ParallelismConfig:
    """The layout flags as a ParallelismConfig (one-line ConfigError when invalid)."""
    return build_config(ParallelismConfig, fields)


def infer(model_name: str = "facebook_opt-1.3b", gpu_name: str = "a100-sxm-40gb", dtype_name: str = "w16a16e16",
          log_level: str = "INFO", batch_size_per_gpu: int = 1, ds_zero: int = 0, dp_size: int = 1,
          tp_size: int = 1, pp_size: int = 1, sp_size: Optional[int] = None, seq_len: int = 512,
          num_tokens_to_generate: int = 32, use_kv_cache: bool = True, layernorm_dtype_bytes: int = 2,
          kv_cache_dtype_bytes: Optional[int] = None, achieved_tflops: Optional[float] = None,
          achieved_memory_bandwidth_GBs: Optional[float] = None, flops_efficiency: Optional[float] = None,
          hbm_memory_efficiency: Optional[float] = None,
          intra_node_memory_efficiency: float = INTRA_NODE_MEMORY_EFFICIENCY,
          inter_node_memory_efficiency: float = INTER_NODE_MEMORY_EFFICIENCY,
          cost_per_gpu_hour: Optional[float] = None, output_dir: Optional[str] = None,
          output_file_suffix: str = "", ep_size: int = 1, output_format: str = "text", plot: bool = False,
          attention_flops: Optional[str] = None, logits: Optional[str] = None, quiet: bool = False,
          mla_attention: Optional[str] = None, serving: bool = False, kv_cache_dtype: Optional[str] = None,
          conventions: str = "serving", perf_model: Optional[str] = None, gpu_profile: Optional[str] = None,
          cp_size: int = 1, cp_comm: str = "ring", num_layers_in_first_pipeline_stage: Optional[int] = None,
          num_layers_in_last_pipeline_stage: Optional[int] = None, exact: bool = False,
          encoder_seq_len: Optional[int] = None, html: Optional[str] = None,
          image_tokens: Optional[int] = None, kernel_launch: Optional[str] = None) -> dict:
    """Inference analysis of a model on a GPU: time to first token, time per output token, memory, largest batch.

    Prints a readable report (setup, summary, parameters/FLOPs/time per layer part
    with what bounds each, memory per GPU, warnings). --output_format json prints
    the summary as JSON on stdout and nothing else; --output_dir also writes it as
    JSON and text, --plot adds charts. Times are expected times (the calibrated
    model) with the roofline lower bound beside each (`*_lower_bound` in JSON);
    --perf_model roofline prints lower bounds alone. All JSON values are in base
    units (seconds, bytes, FLOPs). Errors end with one line and exit code 2; add
    --debug to see the traceback.

    Example: llm-analysis infer --model_name meta-llama/Llama-3.1-8B --gpu_name h100-sxm-80gb --batch_size_per_gpu 8

    Args:
        model_name: catalogue name (`python -m llm_analysis.config list_model_configs`), Hub id
            (e.g. meta-llama/Llama-3.1-8B), path to a config JSON, or a local model directory.
        gpu_name: catalogue GPU name (e.g. a100-sxm-40gb, h100-sxm-80gb).
        dtype_name: weights/activations/embedding bits, e.g. w16a16e16, w8a16e16, w4a16e16, fp8.
        log_level: DEBUG, INFO, WARNING or ERROR, on stderr (DEBUG also shows tracebacks on errors).
        batch_size_per_gpu: concurrent sequences per model replica.
        ds_zero: DeepSpeed ZeRO stage 0-3 (3 shards weights over dp_size).
        dp_size: data-parallel replicas.
        tp_size: tensor-parallel size (must divide the number of heads).
        pp_size: pipeline-parallel stages.
        sp_size: sequence-parallel size (defaults to tp_size).
        seq_len: prompt length in tokens.
        num_tokens_to_generate: tokens to generate (the first comes from the prefill).
        use_kv_cache: keep keys/values between decode steps.
        layernorm_dtype_bytes: bytes of norm activations.
        kv_cache_dtype_bytes: bytes per cached element (default: the activation dtype).
        achieved_tflops: achieved TFLOP/s per GPU; overrides flops_efficiency.
        achieved_memory_bandwidth_GBs: achieved HBM GB/s; overrides hbm_memory_efficiency.
        flops_efficiency: fraction of peak FLOP/s reached, in (0, 1]; given, it times the roofline at it (default:
            the calibrated model's expected times; with --perf_model roofline, 1: lower-bound times).
        hbm_memory_efficiency: fraction of peak HBM bandwidth reached, in (0, 1].
        intra_node_memory_efficiency: fraction of the intra-node link bandwidth reached.
        inter_node_memory_efficiency: fraction of the inter-node bandwidth reached.
        cost_per_gpu_hour: dollars per GPU-hour, for cost per 1k tokens.
        output_dir: write the summary here as <setup>-inference-....json and .txt (the name holds model, GPU,
            dtype, tp/pp/dp/ep/sp, efficiencies, batch and lengths).
        output_file_suffix: suffix for the output file names.
        ep_size: expert-parallel size for MoE models (must divide dp_size and the number of experts).
        output_format: text (readable report), json (machine-readable summary only) or none.
        plot: with output_dir, also write PNG charts: roofline, latency and memory breakdowns, batch sweep
            (needs matplotlib: pip install llm-analysis[plot]).
        attention_flops: full (eager attention, the whole score matrix) or causal (flash kernels);
            default: from --conventions.
        logits: all (logits at every prompt position) or last (only the last, as servers do);
            default: from --conventions.
        mla_attention: expand (DeepSeek MLA decode re-expands the cached latent, as transformers does)
            or absorb (projections folded into q and output, as vLLM/SGLang decode); default: from
            --conventions.
        serving: same as --conventions serving (the default; kept for older command lines).
        conventions: serving (default: what vLLM/SGLang/TensorRT-LLM run: attention_flops=causal,
            logits=last, mla_attention=absorb, q/k/v and gate/up each one fused GEMM, paged KV) or
            transformers (the eager forward that torch's FlopCounterMode measures: full, all, expand,
            every projection its own GEMM).
        quiet: print nothing (return the summary only).
        kv_cache_dtype: KV-cache element type: fp16, bf16, fp8 (fp8_e4m3, fp8_e5m2), int8 or fp32; refused
            when the GPU has no unit for it (fp8 needs fp8 tensor cores). Default: the activation dtype.
        perf_model: calibrated (expected times from the GPU generation's fitted profile, each shown with its
            roofline lower bound) or roofline (lower bounds at the efficiencies given). Default: calibrated,
            or roofline when --achieved_tflops, --achieved_memory_bandwidth_GBs, --flops_efficiency or
            --hbm_memory_efficiency is given (rates you state are the roofline's).
        gpu_profile: a calibration profile JSON (e.g. saved from llm_analysis.calibrate); implies calibrated.
        cp_size: context-parallel size for prefill (each rank holds seq_len / cp prompt tokens); needs
            --num_tokens_to_generate 1 (decode under CP is not modelled) and 2 x cp_size dividing seq_len.
        cp_comm: ring (K/V blocks around the CP ring, overlapped with attention) or all_to_all (Ulysses).
        num_layers_in_first_pipeline_stage: layers of the first pipeline stage (default: an even split, earlier
            stages taking the remainder); the other stages split the rest.
        num_layers_in_last_pipeline_stage: layers of the last pipeline stage (same rule).
        exact: derive the model's operators from its transformers module tree (catalogue name, Hub id, local
            directory or config.json; needs pip install llm-analysis[exact]): parameters and FLOPs verified
            exactly, or refused.
        encoder_seq_len: encoder positions the decoder of an encoder-decoder model (BART, Whisper, ...) attends
            to; required for such models (0: the decoder alone, without encoder states).
        html: write one self-contained HTML page to this file (opens offline, fetches nothing): summary,
            sortable per-operator tables, roofline chart with hoverable operators, time and memory breakdowns.
        image_tokens: image tokens in each request's prompt (vision-language models; part of seq_len): the
            prefill runs the vision tower and projector on them. Without it a text-only request is timed (the
            vision weights still count in memory).
        kernel_launch: how the engine launches kernels, which sets the calibrated model's per-kernel floor:
            graph (default: CUDA graphs, as vLLM / SGLang / TensorRT-LLM decode), eager (PyTorch dispatching
            each kernel from Python) or native (a C++ engine launching every kernel without CUDA graphs:
            FasterTransformer, TensorRT-LLM's GptSession).
    Returns:
        The summary dict (base units: seconds, bytes, FLOPs).
    """
    configure_logging(log_level, warnings_in_report=True)
    output_format = _check_outputs(output_format, quiet, plot, output_dir)
    html_file = _html_file(html)
    model, analysis_class = _model_and_class(model_name, exact)
    gpu = get_gpu_config_by_name(gpu_name)
    analysis = analysis_class(
        model, gpu, dtype_for_setup(dtype_name, model, gpu),  # 'fp4': by checkpoint and GPU
        _parallelism(tp_size=tp_size, pp_size=pp_size, dp_size=dp_size, ep_size=ep_size, sp_size=sp_size,
                     cp_size=cp_size, cp_comm=cp_comm,
                     num_layers_in_first_pipeline_stage=num_layers_in_first_pipeline_stage,
                     num_layers_in_last_pipeline_stage=num_layers_in_last_pipeline_stage),
        achieved_tflops=achieved_tflops, achieved_memory_bandwidth_GBs=achieved_memory_bandwidth_GBs,
        flops_efficiency=flops_efficiency, hbm_memory_efficiency=hbm_memory_efficiency,
        intra_node_memory_efficiency=intra_node_memory_efficiency,
        inter_node_memory_efficiency=inter_node_memory_efficiency,
        attention_flops=attention_flops, logits=logits, mla_attention=mla_attention,
        conventions="serving" if serving else conventions,
        perf_model=perf_model_arg(perf_model, gpu_profile, rates_given=any(
            v is not None for v in (achieved_tflops, achieved_memory_bandwidth_GBs, flops_efficiency,
                                    hbm_memory_efficiency))
            or intra_node_memory_efficiency != 1 or inter_node_memory_efficiency != 1),
        kernel_launch=kernel_launch)
    analysis = analysis.with_conventions(analysis.inference_conventions)  # the report counts as the summary
    analysis = analysis.with_encoder_seq_len(encoder_seq_len)  # cross-attention models (the report too)
    analysis = analysis.with_image_tokens(image_tokens)  # vision-language models (the report too)
    summary = analysis.inference(batch_size_per_gpu=batch_size_per_gpu, seq_len=seq_len,
                                 num_tokens_to_generate=num_tokens_to_generate, use_kv_cache=use_kv_cache,
                                 ds_zero=_enum(DSZeRO, ds_zero, "ds_zero"),
                                 layernorm_dtype_bytes=layernorm_dtype_bytes,
                                 kv_cache_dtype_bytes=kv_cache_dtype_bytes, cost_per_gpu_hour=cost_per_gpu_hour,
                                 kv_cache_dtype=kv_cache_dtype)
    sweep = dict(seq_len=seq_len, num_tokens_to_generate=num_tokens_to_generate, use_kv_cache=use_kv_cache,
                 ds_zero=ds_zero, layernorm_dtype_bytes=layernorm_dtype_bytes,
                 kv_cache_dtype_bytes=kv_cache_dtype_bytes, kv_cache_dtype=kv_cache_dtype)
    _present(analysis, summary, "inference", output_format, plot, output_dir, output_file_suffix, sweep, html_file)
    return summary


def _train_layout(tp_size, pp_size, dp_size, total_num_gpus, cp_size=1, dp_shard=None, dp_replicate=None):
    """(tp, pp, dp) checked as integers; dp from total_num_gpus = tp * cp * pp * dp, or from HSDP's
    dp_shard x dp_replicate, when not given."""
    tp_size = integer(tp_size, "tp_size", 1, MAX_PARALLEL_SIZE)
    pp_size = integer(pp_size, "pp_size", 1, MAX_PARALLEL_SIZE)
    cp_size = integer(cp_size, "cp_size", 1, MAX_PARALLEL_SIZE)
    dp_size = optional_integer(dp_size, "dp_size", 1, MAX_PARALLEL_SIZE)
    total_num_gpus = optional_integer(total_num_gpus, "total_num_gpus", 1, MAX_PARALLEL_SIZE)
    per_replica = tp_size * cp_size * pp_size
    if dp_size is None and dp_shard is not None and dp_replicate is not None:
        dp_size = integer(dp_shard, "dp_shard", 1, MAX_PARALLEL_SIZE) * integer(dp_replicate, "dp_replicate", 1,
                                                                                MAX_PARALLEL_SIZE)
    if dp_size is None:
        if total_num_gpus is not None:
            if total_num_gpus % per_replica:
                rest = total_num_gpus // (tp_size * pp_size) if total_num_gpus % (tp_size * pp_size) == 0 else 0
                valid = f"valid cp_size: the divisors of {rest}" if rest else "tp_size * pp_size does not divide it"
                raise ConfigError(f"total_num_gpus = {total_num_gpus} is not divisible by tp_size * cp_size * "
                                  f"pp_size = {per_replica}; {valid}")
            dp_size = total_num_gpus // per_replica
        else:
            dp_size = 1
    elif total_num_gpus is not None and total_num_gpus != dp_size * per_replica:
        raise ConfigError(f"total_num_gpus = {total_num_gpus} != dp_size * tp_size * cp_size * pp_size = "
                          f"{dp_size * per_replica}")
    return tp_size, pp_size, dp_size


def train(model_name: str = "facebook_opt-1.3b", gpu_name: str = "a100-sxm-40gb", dtype_name: str = "w16a16e16",
          log_level: str = "INFO", batch_size_per_gpu: Optional[int] = None,
          gradient_accumulation_steps: Optional[int] = None, global_batch_size: Optional[int] = None,
          seq_len: Optional[int] = None, total_num_tokens: Optional[int] = None, activation_recomputation: int = 0,
          ds_zero: int = 0, dp_size: Optional[int] = None, tp_size: int = 1, pp_size: int = 1,
          sp_size: Optional[int] = None, ep_size: int = 1, total_num_gpus: Optional[int] = None,
          layernorm_dtype_bytes: int = 4, master_weights_dtype_bytes: int = 4, other_op_bytes: Optional[int] = None,
          flash_attn: bool = True, softmax_dropout: bool = False, mlp_activation_quant_bits: Optional[int] = None,
          mlp_1linear_quant_bits: Optional[int] = None, mlp_gelu_input_quant_bits: Optional[int] = None,
          mlp_2linear_quant_bits: Optional[int] = None, mlp_recompute_gelu: bool = False,
          achieved_tflops: Optional[float] = None, flops_efficiency: Optional[float] = None,
          hbm_memory_efficiency: float = HBM_MEMORY_EFFICIENCY,
          intra_node_memory_efficiency: float = INTRA_NODE_MEMORY_EFFICIENCY,
          inter_node_memory_efficiency: float = INTER_NODE_MEMORY_EFFICIENCY,
          num_gpus_per_node: int = NUM_GPUS_PER_NODE, output_dir: Optional[str] = None,
          output_file_suffix: str = "", cost_per_gpu_hour: Optional[float] = None, output_format: str = "text",
          plot: bool = False, quiet: bool = False, pipeline_interleave: int = 1, perf_model: Optional[str] = None,
          gpu_profile: Optional[str] = None, cp_size: int = 1, cp_comm: str = "ring",
          dp_shard: Optional[int] = None, dp_replicate: Optional[int] = None, distributed_optimizer: bool = False,
          grad_reduce_in_fp32: bool = False, grad_bucket_params: float = 0, cuda_context_bytes: float = 0,
          memory_fragmentation: float = 0, num_layers_in_first_pipeline_stage: Optional[int] = None,
          num_layers_in_last_pipeline_stage: Optional[int] = None, exact: bool = False,
          encoder_seq_len: Optional[int] = None, zero3_gather_bytes_per_s: Optional[float] = None,
          zero3_recompute_gather: bool = False, html: Optional[str] = None,
          overlap_dp_comm: Optional[float] = None, account_for_embedding_in_pipeline_split: bool = False,
          account_for_loss_in_pipeline_split: bool = False) -> dict:
    """Training analysis of a model on a cluster of GPUs: memory per GPU, time per iteration, days, GPU-hours, cost.

    Prints a readable report (setup, summary, memory per GPU, time and memory
    breakdowns, warnings). --output_format json prints the summary as JSON on
    stdout and nothing else; --output_dir also writes it as JSON and text, --plot
    adds charts. All JSON values are in base units (seconds, bytes, FLOPs). Errors
    end with one line and exit code 2; add --debug to see the traceback.

    Example: llm-analysis train --model_name megatron-lm-175b --gpu_name a100-sxm-80gb --tp_size 8 --pp_size 16
    --total_num_gpus 1024 --global_batch_size 1536 --seq_len 2048 --total_num_tokens 300e9
    --activation_recomputation 4 --achieved_tflops 140

    Args:
        model_name: catalogue name (`python -m llm_analysis.config list_model_configs`), Hub id, path to a
            config JSON, or a local model directory.
        gpu_name: catalogue GPU name (e.g. a100-sxm-80gb, h100-sxm-80gb).
        dtype_name: data types (e.g. w16a16e16 for bf16/fp16 mixed precision).
        log_level: DEBUG, INFO, WARNING or ERROR, on stderr (DEBUG also shows tracebacks on errors).
        batch_size_per_gpu: micro-batch size per GPU (default: of those that fit, the smallest whose time per sample
            is within 1% of the fastest; the report says which and why).
        gradient_accumulation_steps: micro-batches per iteration.
        global_batch_size: sequences per iteration across data-parallel ranks.
        seq_len: sequence length (default: the model's max_seq_len).
        total_num_tokens: tokens of the whole run, for total time and GPU-hours.
        activation_recomputation: 0 none, 1 attention core, 2 attention, 3 norm-attention-norm, 4 full.
        ds_zero: DeepSpeed ZeRO stage 0-3.
        dp_size: data-parallel size (default: total_num_gpus / (tp_size * pp_size), else 1).
        tp_size: tensor-parallel size.
        pp_size: pipeline-parallel stages.
        sp_size: sequence-parallel size (defaults to tp_size).
        ep_size: expert-parallel size (MoE; divides dp_size).
        total_num_gpus: total GPUs (alternative to dp_size).
        layernorm_dtype_bytes: bytes of stored norm inputs.
        master_weights_dtype_bytes: bytes of the optimizer's master weights, held only where the weights are
            narrower (fp32 weights are their own master); 0: no master copy.
        other_op_bytes: optimizer-state bytes per parameter besides master weights (Adam: 8).
        flash_attn: flash attention (no s^2 activations).
        softmax_dropout: dropout after softmax.
        mlp_activation_quant_bits: bits of all stored MLP activations.
        mlp_1linear_quant_bits: bits of the stored first-linear input.
        mlp_gelu_input_quant_bits: bits of the stored activation-function input.
        mlp_2linear_quant_bits: bits of the stored second-linear input.
        mlp_recompute_gelu: recompute the activation function in backward.
        achieved_tflops: achieved TFLOP/s per GPU; overrides flops_efficiency.
        flops_efficiency: fraction of peak FLOP/s, in (0, 1].
        hbm_memory_efficiency: fraction of HBM bandwidth, in (0, 1].
        intra_node_memory_efficiency: fraction of intra-node link bandwidth.
        inter_node_memory_efficiency: fraction of inter-node bandwidth.
        num_gpus_per_node: GPUs per node (decides which groups cross nodes).
        output_dir: write the summary here as <setup>-training-....json and .txt (the name holds model, GPU,
            dtype, tp/pp/dp/ep/sp, efficiencies, batch and sequence length).
        output_file_suffix: suffix for the output file names.
        cost_per_gpu_hour: dollars per GPU-hour, for the run's cost.
        output_format: text (readable report), json (machine-readable summary only) or none.
        plot: with output_dir, also write PNG charts of the time and memory breakdowns
            (needs matplotlib: pip install llm-analysis[plot]).
        quiet: print nothing (return the summary only).
        pipeline_interleave: virtual pipeline stages per GPU (interleaved 1F1B schedule; shrinks the bubble).
        perf_model: calibrated (expected times with their roofline lower bounds) or roofline (lower bounds at
            the efficiencies given). Default: calibrated, or roofline when --achieved_tflops or
            --flops_efficiency is given (rates you state are the roofline's).
        gpu_profile: a calibration profile JSON (e.g. saved from llm_analysis.calibrate); implies calibrated.
        cp_size: context-parallel size: each rank holds seq_len / cp tokens (2 x cp_size must divide seq_len).
        cp_comm: ring (K/V blocks around the CP ring, overlapped with attention) or all_to_all (Ulysses).
        dp_shard: HSDP: ranks sharing one ZeRO/FSDP-sharded copy (default dp_size).
        dp_replicate: HSDP: copies of the sharded model (dp_size = dp_shard x dp_replicate).
        distributed_optimizer: optimizer states sharded over dp x cp (Megatron's distributed optimizer, ZeRO-1).
        grad_reduce_in_fp32: gradients in an fp32 main-grad buffer, reduced in fp32 (Megatron bf16).
        grad_bucket_params: parameters of one gradient bucket held outside the gradients (0: none).
        cuda_context_bytes: CUDA context and library workspaces per GPU, bytes (0: not counted; ~1e9 typical).
        memory_fragmentation: allocator fragmentation as a fraction of allocated memory (0: none; 0.05-0.1).
        num_layers_in_first_pipeline_stage: layers of the first pipeline stage (default: an even split, earlier
            stages taking the remainder; Llama 3 405B: 7 of 126 over pp 16); the other stages split the rest.
        num_layers_in_last_pipeline_stage: layers of the last pipeline stage (same rule).
        account_for_embedding_in_pipeline_split: Megatron-Core's split counting the embedding as one layer of the
            first stage (with --account_for_loss_in_pipeline_split, NeMo's Llama 3.1 405B recipes: 126 + 2 slots
            over pp 8 stages, 15, 16 x 6, 15); num_layers + slots must divide by pp_size (and by pipeline_interleave
            per stage).
        account_for_loss_in_pipeline_split: the same for the loss (LM head) on the last stage.
        exact: derive the model's operators from its transformers module tree (see infer --exact).
        encoder_seq_len: encoder positions a cross-attention decoder attends to (see infer).
        zero3_gather_bytes_per_s: with ds_zero 3, the framework's cap on its gather / reduce-scatter rate per
            GPU, bytes/s (DeepSpeed v0.3: ~22.5e9, README "Planning"); the lower bound ignores it.
        zero3_recompute_gather: with ds_zero 3 and full recomputation, the recomputed forward gathers the
            layers' weights again (DeepSpeed's ZeRO-3; not PyTorch FSDP).
        html: write one self-contained HTML page to this file (opens offline, fetches nothing): summary,
            sortable per-operator table, roofline chart with hoverable operators, time and memory breakdowns.
        overlap_dp_comm: the share in [0, 1] of each data-parallel transfer that runs under the compute it
            overlaps (default: all of it, training()'s True; DeepSpeed v0.3's ZeRO-3: ~0.62, docs/planner.md).
    Returns:
        The summary dict (base units).
    """
    configure_logging(log_level, warnings_in_report=True)
    output_format = _check_outputs(output_format, quiet, plot, output_dir)
    html_file = _html_file(html)
    model, analysis_class = _model_and_class(model_name, exact)
    tp_size, pp_size, dp_size = _train_layout(tp_size, pp_size, dp_size, total_num_gpus, cp_size, dp_shard,
                                              dp_replicate)
    seq_len = seq_len if seq_len is not None else (model.max_seq_len or 2048)
    gpu = get_gpu_config_by_name(gpu_name)
    analysis = analysis_class(
        model, gpu, dtype_for_setup(dtype_name, model, gpu),  # 'fp4': by checkpoint and GPU
        _parallelism(tp_size=tp_size, pp_size=pp_size, dp_size=dp_size, ep_size=ep_size, sp_size=sp_size,
                     cp_size=cp_size, cp_comm=cp_comm, dp_shard=dp_shard, dp_replicate=dp_replicate,
                     num_layers_in_first_pipeline_stage=num_layers_in_first_pipeline_stage,
                     num_layers_in_last_pipeline_stage=num_layers_in_last_pipeline_stage,
                     account_for_embedding_in_pipeline_split=account_for_embedding_in_pipeline_split,
                     account_for_loss_in_pipeline_split=account_for_loss_in_pipeline_split),
        achieved_tflops=achieved_tflops, flops_efficiency=flops_efficiency,
        hbm_memory_efficiency=hbm_memory_efficiency, intra_node_memory_efficiency=intra_node_memory_efficiency,
        inter_node_memory_efficiency=inter_node_memory_efficiency, num_gpus_per_node=num_gpus_per_node,
        # (a rate or efficiency stated: the roofline at it; the mirrored defaults, hbm 1 and links 1, state none)
        perf_model=perf_model_arg(perf_model, gpu_profile, rates_given=achieved_tflops is not None
                                  or flops_efficiency is not None or hbm_memory_efficiency not in (None, 1)
                                  or intra_node_memory_efficiency != 1 or inter_node_memory_efficiency != 1)
    ).with_encoder_seq_len(encoder_seq_len)
    kwargs = _set_options(distributed_optimizer=distributed_optimizer, grad_reduce_in_fp32=grad_reduce_in_fp32,
                          grad_bucket_params=grad_bucket_params, cuda_context_bytes=cuda_context_bytes,
                          memory_fragmentation=memory_fragmentation, cost_per_gpu_hour=cost_per_gpu_hour,
                          pipeline_interleave=pipeline_interleave, zero3_gather_bytes_per_s=zero3_gather_bytes_per_s,
                          zero3_recompute_gather=zero3_recompute_gather)
    if overlap_dp_comm is not None:  # (a given 0 is a share too: no overlap)
        kwargs["overlap_dp_comm"] = overlap_dp_comm
    if isinstance(total_num_tokens, float) and total_num_tokens.is_integer():
        total_num_tokens = int(total_num_tokens)  # 300e9 on the command line is a float
    train_kwargs = dict(
        global_batch_size=global_batch_size, seq_len=seq_len, total_num_tokens=total_num_tokens,
        activation_recomputation=_enum(ActivationRecomputation, activation_recomputation, "activation_recomputation"),
        ds_zero=_enum(DSZeRO, ds_zero, "ds_zero"), layernorm_dtype_bytes=layernorm_dtype_bytes,
        master_weights_dtype_bytes=master_weights_dtype_bytes, other_op_bytes=other_op_bytes, flash_attn=flash_attn,
        softmax_dropout=softmax_dropout, mlp_activation_quant_bits=mlp_activation_quant_bits,
        mlp_1linear_quant_bits=mlp_1linear_quant_bits, mlp_gelu_input_quant_bits=mlp_gelu_input_quant_bits,
        mlp_2linear_quant_bits=mlp_2linear_quant_bits, mlp_recompute_gelu=mlp_recompute_gelu, **kwargs)
    if batch_size_per_gpu is None and gradient_accumulation_steps is None:
        summary = fastest_fitting_micro_batch(analysis.training, train_kwargs)
    else:
        summary = analysis.training(batch_size_per_gpu=batch_size_per_gpu,
                                    gradient_accumulation_steps=gradient_accumulation_steps, **train_kwargs)
    _present(analysis, summary, "training", output_format, plot, output_dir, output_file_suffix, html_file=html_file)
    return summary


def _set_options(cost_per_gpu_hour: Optional[float], pipeline_interleave: int,
                 zero3_gather_bytes_per_s: Optional[float] = None, **switches) -> dict:
    """The training() options the command line set: switches that are on (not 0/False),
    a cost and a ZeRO-3 rate cap when given (a given 0 is refused by training()),
    interleaving when not 1 (so training()'s own defaults apply)."""
    kwargs = {k: v for k, v in switches.items() if v}
    for name, value in (("cost_per_gpu_hour", cost_per_gpu_hour), ("zero3_gather_bytes_per_s", zero3_gather_bytes_per_s)):
        if value is not None:
            kwargs[name] = value
    if pipeline_interleave != 1:
        kwargs["pipeline_interleave"] = pipeline_interleave
    return kwargs


def _plan_command(command):
    """fire binding of a planner command: its text on stdout (exit 0), or its one-line
    error through the package's error path (exit 2)."""
    def run(*args, **kwargs):
        code, text = command(*args, **kwargs)
        if code != 0:
            raise ConfigError(text[len("error: "):] if text.startswith("error: ") else text)
        write_stdout(text)
    return for_fire(command, call=run)


class _PlanCommand(staticmethod):
    """A planner command held by the `plan` class itself, built on first use. `plan --help` shows fire the class,
    whose commands fire lists only among its static methods (commands set in __init__ showed only when an
    instance was made, by `plan` without --help); cli/plan.py is still imported only when a plan command is
    named or listed."""

    def __init__(self, function_name: str):
        super().__init__(_plan_command)  # (a placeholder: __get__ gives the command)
        self.function_name = function_name

    def __get__(self, instance, owner=None):
        import llm_analysis.cli.plan as plan_cli
        return _bound_plan_command(getattr(plan_cli, self.function_name))


@functools.lru_cache(maxsize=None)  # one wrapper per command: `plan.infer is plan.infer`
def _bound_plan_command(function):
    return _plan_command(function)


class _PlanCLI:
    """Search layouts: `plan infer` (serving: GPU type and count, tp/pp/ep, dtype, KV dtype,
    batch under TTFT/TPOT/rate targets) and `plan train` (tp/pp/dp/ep, ZeRO, recomputation,
    micro-batch, interleaving under the memory limit). `plan <command> --help` lists every flag."""

    infer = _PlanCommand("plan_infer_command")
    train = _PlanCommand("plan_train_command")


class LLMAnalysisCLI:
    """Parameters, FLOPs, memory and time of transformer LLMs, from the model's shapes.

    `infer` analyses serving (prefill, decode, KV cache, largest batch, throughput);
    `train` analyses a training run (memory per GPU, time per iteration, days, GPU-hours);
    `plan infer|train` searches the best layout, GPU count and batch under targets.
    `<command> --help` lists every flag. Errors end with one line and exit code 2;
    add --debug (or --log_level DEBUG) to see the traceback.
    """

    infer = staticmethod(for_fire(infer))
    train = staticmethod(for_fire(train))
    serve = staticmethod(for_fire(serve))
    plan = _PlanCLI


@functools.lru_cache(maxsize=None)  # (one wrapper per name: `analysis.train is analysis.train`)
def library_call(name: str):
    """The module-level `infer` / `train` as `from llm_analysis.analysis import train` gives them (the
    mirrored API). The mirrored system logs its report at INFO, so a call with log_level WARNING or ERROR
    prints nothing there and only returns the summary: so here, unless the call names output_format or
    quiet itself. At INFO or DEBUG it prints the report as the command does. The command line
    (`python -m llm_analysis.analysis train ...`) runs the commands themselves: its report is its output."""
    command = {"infer": infer, "train": train}[name]
    signature = inspect.signature(command)

    @functools.wraps(command)
    def call(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        level = str(bound.arguments.get("log_level", "INFO")).upper()
        if level in ("WARNING", "ERROR", "CRITICAL") and not {"quiet", "output_format"} & set(bound.arguments):
            bound.arguments["quiet"] = True
        return command(*bound.args, **bound.kwargs)

    return call


def main(argv: Optional[List[str]] = None) -> int:
    """`python -m llm_analysis[.analysis] infer|train ...` and the `llm-analysis` script."""
    return run_fire(LLMAnalysisCLI, argv, prog="llm-analysis")
