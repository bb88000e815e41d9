"""Entry points `infer` and `train` (names, arguments and defaults of the
mirrored system) and the `fire` command line around them:

    python -m llm_analysis.analysis infer --model_name ... --gpu_name ...
    python -m llm_analysis infer ...      (same)
    llm-analysis train ...                (installed console script)
"""

from __future__ import annotations

import json
import logging
import sys
from typing import List, Optional

from .analysis import ActivationRecomputation, DSZeRO, LLMAnalysis, _enum
from .cli_support import configure_logging, run_fire
from .config import ParallelismConfig, build_config, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
from .constant import FLOPS_EFFICIENCY, HBM_MEMORY_EFFICIENCY, INTER_NODE_MEMORY_EFFICIENCY, \
    INTRA_NODE_MEMORY_EFFICIENCY, NUM_GPUS_PER_NODE
from .errors import ConfigError

logger = logging.getLogger("llm_analysis")

_OUTPUT_FORMATS = ("text", "json", "none")


def _check_output_format(output_format: str) -> str:
    if output_format not in _OUTPUT_FORMATS:
        raise ConfigError(f"output_format = {output_format!r}; valid: {', '.join(_OUTPUT_FORMATS)}")
    return output_format


def _present(analysis: LLMAnalysis, summary: dict, kind: str, output_format: str, plot: bool,
             output_dir: Optional[str], output_file_suffix: str) -> None:
    from . import report
    if output_dir is not None:
        report.write_summary_files(analysis, summary, output_dir, False, output_file_suffix, kind=kind)
        if plot:
            from . import plots
            plots.write_charts(analysis, summary, output_dir, kind=kind, suffix=output_file_suffix)
    elif plot:
        raise ConfigError("plot=True needs output_dir to write the charts into")
    if output_format == "json":
        print(json.dumps(report.jsonable(summary), indent=2))
    elif output_format == "text":
        print(report.render(analysis, summary, kind))


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
          attention_flops: str = "full", logits: str = "all", quiet: bool = False) -> dict:
    """Inference analysis of a model on a GPU.

    Args:
        model_name: catalogue name (`python -m llm_analysis.config list_model_configs`), Hub id
            (e.g. meta-llama/Llama-3.1-8B), path to a config JSON, or a local model directory.
        gpu_name: catalogue GPU name (e.g. a100-sxm-40gb, h100-sxm-80gb).
        dtype_name: weights/activations/embedding bits, e.g. w16a16e16, w8a16e16, w4a16e16, fp8.
        log_level: DEBUG, INFO, WARNING or ERROR (DEBUG also shows tracebacks on errors).
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
        flops_efficiency: fraction of peak FLOP/s reached, in (0, 1] (default 1: lower-bound times).
        hbm_memory_efficiency: fraction of peak HBM bandwidth reached, in (0, 1].
        intra_node_memory_efficiency: fraction of the intra-node link bandwidth reached.
        inter_node_memory_efficiency: fraction of the inter-node bandwidth reached.
        cost_per_gpu_hour: dollars per GPU-hour, for cost per 1k tokens.
        output_dir: write the summary (JSON + readable text) here.
        output_file_suffix: suffix for the output file names.
        ep_size: expert-parallel size for MoE models (must divide dp_size and the number of experts).
        output_format: text (readable report), json (machine-readable summary only) or none.
        plot: with output_dir, also write charts (needs matplotlib: pip install llm-analysis[plot]).
        attention_flops: full (eager attention, the whole score matrix) or causal (flash kernels).
        logits: all (logits at every prompt position) or last (only the last, as servers do).
        quiet: print nothing (return the summary only).
    Returns:
        The summary dict (base units: seconds, bytes, FLOPs).
    """
    configure_logging(log_level)
    output_format = "none" if quiet else _check_output_format(output_format)
    analysis = LLMAnalysis(
        get_model_config_by_name(model_name), get_gpu_config_by_name(gpu_name), get_dtype_config_by_name(dtype_name),
        build_config(ParallelismConfig, dict(tp_size=tp_size, pp_size=pp_size, dp_size=dp_size, ep_size=ep_size,
                                             sp_size=sp_size)),
        achieved_tflops=achieved_tflops, achieved_memory_bandwidth_GBs=achieved_memory_bandwidth_GBs,
        flops_efficiency=flops_efficiency, hbm_memory_efficiency=hbm_memory_efficiency,
        intra_node_memory_efficiency=intra_node_memory_efficiency,
        inter_node_memory_efficiency=inter_node_memory_efficiency, attention_flops=attention_flops, logits=logits)
    summary = analysis.inference(batch_size_per_gpu=batch_size_per_gpu, seq_len=seq_len,
                                 num_tokens_to_generate=num_tokens_to_generate, use_kv_cache=use_kv_cache,
                                 ds_zero=_enum(DSZeRO, ds_zero, "ds_zero"),
                                 layernorm_dtype_bytes=layernorm_dtype_bytes,
                                 kv_cache_dtype_bytes=kv_cache_dtype_bytes, cost_per_gpu_hour=cost_per_gpu_hour)
    _present(analysis, summary, "inference", output_format, plot, output_dir, output_file_suffix)
    return summary


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
          plot: bool = False, quiet: bool = False) -> dict:
    """Training analysis of a model on a cluster of GPUs.

    Args:
        model_name: catalogue name, Hub id, config JSON path or local model directory.
        gpu_name: catalogue GPU name.
        dtype_name: data types (e.g. w16a16e16 for bf16/fp16 mixed precision).
        log_level: DEBUG, INFO, WARNING or ERROR.
        batch_size_per_gpu: micro-batch size per GPU (None: the largest that fits).
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
        master_weights_dtype_bytes: bytes of the optimizer's master weights.
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
        output_dir: write the summary (JSON + readable text) here.
        output_file_suffix: suffix for the output file names.
        cost_per_gpu_hour: dollars per GPU-hour, for the run's cost.
        output_format: text, json or none.
        plot: with output_dir, also write charts.
        quiet: print nothing.
    Returns:
        The summary dict (base units).
    """
    configure_logging(log_level)
    output_format = "none" if quiet else _check_output_format(output_format)
    model = get_model_config_by_name(model_name)
    if dp_size is None:
        if total_num_gpus is not None:
            if total_num_gpus % (tp_size * pp_size):
                raise ConfigError(f"total_num_gpus = {total_num_gpus} is not divisible by tp_size * pp_size = "
                                  f"{tp_size * pp_size}")
            dp_size = total_num_gpus // (tp_size * pp_size)
        else:
            dp_size = 1
    elif total_num_gpus is not None and total_num_gpus != dp_size * tp_size * pp_size:
        raise ConfigError(f"total_num_gpus = {total_num_gpus} != dp_size * tp_size * pp_size = "
                          f"{dp_size * tp_size * pp_size}")
    if seq_len is None:
        seq_len = model.max_seq_len or 2048
    analysis = LLMAnalysis(
        model, get_gpu_config_by_name(gpu_name), get_dtype_config_by_name(dtype_name),
        build_config(ParallelismConfig, dict(tp_size=tp_size, pp_size=pp_size, dp_size=dp_size, ep_size=ep_size,
                                             sp_size=sp_size)),
        achieved_tflops=achieved_tflops, flops_efficiency=flops_efficiency,
        hbm_memory_efficiency=hbm_memory_efficiency, intra_node_memory_efficiency=intra_node_memory_efficiency,
        inter_node_memory_efficiency=inter_node_memory_efficiency, num_gpus_per_node=num_gpus_per_node)
    kwargs = {}
    if cost_per_gpu_hour is not None:
        kwargs["cost_per_gpu_hour"] = cost_per_gpu_hour
    summary = analysis.training(
        batch_size_per_gpu=batch_size_per_gpu, gradient_accumulation_steps=gradient_accumulation_steps,
        global_batch_size=global_batch_size, seq_len=seq_len, total_num_tokens=total_num_tokens,
        activation_recomputation=_enum(ActivationRecomputation, activation_recomputation, "activation_recomputation"),
        ds_zero=_enum(DSZeRO, ds_zero, "ds_zero"), layernorm_dtype_bytes=layernorm_dtype_bytes,
        master_weights_dtype_bytes=master_weights_dtype_bytes, other_op_bytes=other_op_bytes, flash_attn=flash_attn,
        softmax_dropout=softmax_dropout, mlp_activation_quant_bits=mlp_activation_quant_bits,
        mlp_1linear_quant_bits=mlp_1linear_quant_bits, mlp_gelu_input_quant_bits=mlp_gelu_input_quant_bits,
        mlp_2linear_quant_bits=mlp_2linear_quant_bits, mlp_recompute_gelu=mlp_recompute_gelu, **kwargs)
    _present(analysis, summary, "training", output_format, plot, output_dir, output_file_suffix)
    return summary


class _AnalysisCLI:
    """llm-analysis: parameters, FLOPs, memory and time of transformer LLMs.

    Commands: infer, train. `<command> --help` lists every flag.
    """

    infer = staticmethod(infer)
    train = staticmethod(train)


def _no_return_value(fn):
    """fire prints a returned dict; the CLI prints its own report instead."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        fn(*args, **kwargs)
        return None
    return wrapper


def main(argv: Optional[List[str]] = None) -> int:
    cli = {"infer": _no_return_value(infer), "train": _no_return_value(train)}
    return run_fire(cli, argv, prog="llm-analysis")
