"""Names of the summary's keys: labels of layer parts, time and memory terms,
and the order parts are listed in. Shared by the text report and the charts."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

PART_LABELS = {
    "embedding": "embeddings",
    "attention": "attention",
    "attention_kv_cache": "attention over KV cache",
    "mixer_state": "mixers over their state",
    "attention_core": "attention core (QK^T, AV)",
    "mlp": "MLP",
    "experts": "MoE experts",
    "router": "MoE router",
    "norm": "norms",
    "lm_head": "LM head (logits)",
    "tp_communication": "TP communication",
    "pp_communication": "PP hand-off",
    "ep_communication": "EP all-to-all",
    "cp_communication": "CP K/V exchange",
    "dp_communication": "DP communication",
    "communication": "communication",
}
_PART_ORDER = list(PART_LABELS)


def part_label(key: str) -> str:
    return PART_LABELS.get(key, key.replace("_", " "))


def part_sort_key(key: str) -> Tuple[int, str]:
    """Known parts in the order of PART_LABELS, then the others by name."""
    return (_PART_ORDER.index(key) if key in _PART_ORDER else len(_PART_ORDER), key)


# ------------------------------------------------------------ training time
# `latency_per_iter_<part>` of the training summary: (part, label, what it is spent on)
TRAIN_TIME_PARTS = (
    ("fwd_compute", "forward compute", "compute"), ("bwd_compute", "backward compute", "compute"),
    ("recompute", "recomputation", "compute"), ("tp_comm", "TP communication", "communication"),
    ("ep_comm", "EP all-to-all", "communication"), ("cp_comm", "CP K/V exchange (exposed)", "communication"),
    ("pp_comm", "PP hand-off", "communication"),
    ("pipeline_bubble", "pipeline bubble", "memory"),
    ("dp_comm", "DP communication (exposed)", "communication"),
    ("optimizer_step", "optimizer step", "memory"),
)
TRAIN_TIME_LABELS = {part: label for part, label, _ in TRAIN_TIME_PARTS}
TRAIN_TIME_KINDS = {part: kind for part, _, kind in TRAIN_TIME_PARTS}
TIME_PREFIX = "latency_per_iter_"
# latency_per_iter_* keys that are not parts of the iteration's time (the calibrated model's
# latency_per_iter_lower_bound is the whole iteration's roofline bound)
_TIME_NOT_PARTS = ("using_flops", "dp_comm_total", "dp_comm_hidden", "lower_bound")


def train_time_parts(summary: Dict[str, Any]) -> Dict[str, float]:
    """{part: seconds} of the training summary's `latency_per_iter_<part>` terms."""
    return {k[len(TIME_PREFIX):]: v for k, v in summary.items()
            if k.startswith(TIME_PREFIX) and not k.endswith(_TIME_NOT_PARTS) and isinstance(v, (int, float))}


def train_time_label(part: str) -> str:
    return TRAIN_TIME_LABELS.get(part, part.replace("_", " "))


# ---------------------------------------------------------- memory per GPU
# (summary key, label in the text report, label on the chart, colour key)
TRAIN_MEMORY_TERMS = (
    ("weight_memory_per_gpu", "weights", "weights", "weights"),
    ("gradient_memory_per_gpu", "gradients", "gradients", "gradients"),
    ("optimizer_state_memory_per_gpu", "optimizer states", "optimizer states", "optimizer_states"),
    ("activation_memory_per_gpu", "activations", "activations", "activations"),
    ("activation_memory_recompute_buffer_per_gpu", "recomputation buffer", "recompute buffer", "recompute_buffer"),
    ("zero_buffer_memory_per_gpu", "ZeRO gather buffers", "ZeRO buffers", "zero_buffers"),
    ("gradient_bucket_memory_per_gpu", "gradient bucket", "grad bucket", "zero_buffers"),
    ("cuda_context_memory_per_gpu", "CUDA context", "CUDA context", "zero_buffers"),
    ("fragmentation_memory_per_gpu", "allocator fragmentation", "fragmentation", "zero_buffers"),
)
# keys of the inference summary's memory_breakdown_per_gpu
INFERENCE_MEMORY_LABELS = {"weights": "weights", "kv_cache": "KV cache", "activations": "activations",
                           "free": "free"}


def gpu_memory_bytes(analysis, summary: Dict[str, Any]) -> float:
    """The GPU's memory as the summary states it (catalogue GB are 10^9 bytes)."""
    return summary.get("gpu_memory_per_gpu") or analysis.gpu_config.memory_bytes


def per_replica(analysis) -> str:
    """How a batch is counted. `batch_size_per_gpu` (the mirrored name) is the batch of one model
    replica: its tp x cp x pp GPUs all work on the same sequences. 'per GPU' only when a replica
    is one GPU; otherwise 'per replica (tp 8 x pp 2 = 16 GPUs)', so that nobody reads a tp-8
    batch of 64 as 64 sequences on every GPU."""
    p = analysis.parallelism_config
    sizes = [(name, n) for name, n in (("tp", p.tp_size), ("cp", p.cp_size), ("pp", p.pp_size)) if n > 1]
    if not sizes:
        return "per GPU"
    gpus = p.tp_size * p.cp_size * p.pp_size
    return f"per replica ({' x '.join(f'{name} {n}' for name, n in sizes)} = {gpus} GPUs)"


def params_line(total: float, active: Optional[float], active_without_embedding: Optional[float], fmt) -> str:
    """'116.83 G total, 5.71 G active per token (5.13 G without the input-embedding table)' for a
    model with experts; the total alone for a dense one. Model cards differ on that table (Qwen
    and Mistral count it, OpenAI's gpt-oss card does not): both figures, named."""
    line = fmt("params", total)
    if active and active != total:
        line += f" total, {fmt('params', active)} active per token"
        if active_without_embedding and active_without_embedding != active:
            line += f" ({fmt('params', active_without_embedding)} without the input-embedding table)"
    return line
