"""Training memory per GPU of every pipeline stage: weights, gradients,
optimizer states (views/state.py), activations in flight, recomputation and
ZeRO buffers; the largest micro-batch that fits; the does-not-fit message."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from llm_analysis.units import GB
from llm_analysis.schema.options import ActivationRecomputation
from llm_analysis.quantities.state import (gradient_bytes_per_param, master_copy_bytes_per_param,
                                          optimizer_and_gradient_bytes, trained_weight_bytes_per_param)
from llm_analysis.training.lora import LoRAConfig
from llm_analysis.training.overheads import FrameworkMemory
from llm_analysis.training.stage import Stage


def _in_flight(stage: int, p: int, m: int, v: int) -> float:
    """Micro-batches whose activations stage `stage` holds at the 1F1B peak. Interleaved (v > 1):
    Megatron's warm-up runs (p - stage - 1) x 2 + (v - 1) x p model chunks, each 1/v of the stage's
    layers, before the steady state's one more: p + (p - 2 stage - 1) / v micro-batches' worth
    (the first stage's p + (p - 1) / v of Korthikanti et al. 2022, section 4.2.3)."""
    if p == 1:
        return 1.0
    if v == 1:
        return float(min(m, p - stage))
    return float(min(m, p + (p - 2 * stage - 1) / v))


def trained_gradient_bytes_per_param(analysis, lora: Optional[LoRAConfig],
                                     fw: FrameworkMemory = FrameworkMemory()) -> float:
    """Gradients of what is trained: the weights (views/state.py; 4 bytes in an fp32
    main-grad buffer), or the LoRA adapters in their dtype."""
    if lora is not None:
        return lora.adapter_dtype_bytes
    return fw.grad_bytes_per_param(gradient_bytes_per_param(analysis.dtype_config))


def trained_weight_bytes(analysis, lora: Optional[LoRAConfig]) -> float:
    """Bytes of a trained weight as stored: the dtype's weight width, or the LoRA adapters' dtype."""
    return lora.adapter_dtype_bytes if lora is not None else trained_weight_bytes_per_param(analysis.dtype_config)


def _with_overheads(d: Dict[str, float], b: int, fw: FrameworkMemory, bucket_bytes: float) -> Dict[str, float]:
    """Add the framework terms (training/overheads.py) to a stage's breakdown."""
    static = _static_sum(d["weights"], d["gradients"], d["optimizer_states"], d["zero_buffers"], bucket_bytes)
    act = d["activations"] + d["recompute_buffer"]
    frag = fw.memory_fragmentation
    d.update(gradient_bucket=bucket_bytes, cuda_context=fw.cuda_context_bytes,
             fragmentation=frag * (static + act))
    d["peak"] = static + act + d["fragmentation"] + fw.cuda_context_bytes
    d["static"] = _static_total(static, fw)
    d["activations_per_sample"] = _per_sample(act, b, fw)
    return d


def _static_sum(weights: float, grads: float, opt: float, zero_buf: float, bucket: float) -> float:
    return weights + opt + grads + zero_buf + bucket


def _static_total(static: float, fw: FrameworkMemory) -> float:
    """Memory that does not grow with the micro-batch, with fragmentation and CUDA context."""
    return static * (1 + fw.memory_fragmentation) + fw.cuda_context_bytes


def _per_sample(act: float, b: int, fw: FrameworkMemory) -> float:
    """Activation memory one sample of a micro-batch of b adds, with fragmentation."""
    return act * (1 + fw.memory_fragmentation) / b


def static_bytes(analysis, stages: List[Stage], ds_zero, master_bytes: float, other_op_bytes: Optional[float],
                 lora: Optional[LoRAConfig], fw: FrameworkMemory = FrameworkMemory()) -> List[Tuple[float, ...]]:
    """Per stage (weights, gradients, optimizer states, ZeRO buffers, gradient bucket) in
    bytes per GPU: the part of the memory no micro-batch, length or recomputation changes
    (callers cache it across calls)."""
    p = analysis.parallelism_config
    grad_bytes = trained_gradient_bytes_per_param(analysis, lora, fw)
    # the master copy only where the trained weights are narrower than it (fp32 weights are their own master)
    master_copy = master_copy_bytes_per_param(master_bytes, trained_weight_bytes(analysis, lora))
    state_zero = fw.state_zero(ds_zero)
    out = []
    for st in stages:
        if ds_zero.value >= 3:  # dense weights shard over dp, experts over their own replicas (dp / ep)
            w = (st.weight_bytes_gpu - st.dp_expert_weight_bytes_gpu) / p.shard_group_size \
                + st.dp_expert_weight_bytes_gpu / p.expert_shard_group_size
        else:
            w = st.weight_bytes_gpu
        opt, grad = optimizer_and_gradient_bytes(p, st.dense_params_gpu, st.expert_params_gpu, master_copy,
                                                 other_op_bytes, state_zero, grad_bytes)
        zero_buf = 0.0
        if ds_zero.value >= 3:
            # the module running and the one prefetched next: the largest matrix (the embedding or LM head
            # where they are the largest) beside a layer's largest, its neighbour in the order modules run
            zero_buf += st.max_op_weight_bytes_gpu + st.max_layer_op_weight_bytes_gpu
        if ds_zero.value >= 2:
            zero_buf += grad_bytes * st.max_op_trainable_params_gpu
        bucket = grad_bytes * min(fw.grad_bucket_params, st.dense_params_gpu + st.expert_params_gpu)
        out.append((w, grad, opt, zero_buf, bucket))
    return out


def zero_shards_nothing(p) -> bool:
    """ZeRO over a shard group of one rank (dp_shard x cp = 1, the experts' group likewise): every rank holds
    the whole state, as without ZeRO, while DeepSpeed still allocates its stage's buffers (`static_bytes`)."""
    return p.shard_group_size == 1 and p.expert_shard_group_size == 1


def zero_without_sharding_text(ds_zero: int, buffer_bytes: Optional[float] = None) -> str:
    """What ZeRO stage `ds_zero` over one data-parallel rank costs, one wording for training()'s note and the
    planner's reason: it shards nothing; stages 2 and 3 keep DeepSpeed's buffers (`buffer_bytes` per GPU where
    known), so ZeRO 0 fits the same layout with less memory; stage 1 has none and is the same as ZeRO 0."""
    head = f"ds_zero {ds_zero} over one data-parallel rank (dp x cp = 1) shards nothing"
    if ds_zero < 2 or buffer_bytes == 0:
        return f"{head}: the same memory and time as ds_zero 0"
    if buffer_bytes is None:
        return (f"{head}, and DeepSpeed still allocates its ZeRO-{ds_zero} buffers: ds_zero 0 fits the same layout "
                "with less memory (dominated)")
    return (f"{head}, and DeepSpeed still allocates its ZeRO-{ds_zero} buffers ({buffer_bytes / GB:.2f} GB per GPU, "
            f"in the peak): ds_zero 0 fits the same layout with {buffer_bytes / GB:.2f} GB less memory")


def _activation_parts(analysis, b: int, seq_len: int, rc, act_kwargs: Dict[str, Any]) -> Tuple[float, ...]:
    """(per layer under rc, per layer without recomputation, input embedding, logits, and the per-layer figure's
    attention, MLP and norm parts (0.2.2's breakdown: `stage_activation_parts`)) bytes."""
    per_layer, attn, mlp, norm = analysis.get_activation_memory_per_layer(b, seq_len, False, rc, **act_kwargs,
                                                                          return_breakdown=True)
    per_layer_none = per_layer if rc == ActivationRecomputation.NONE else analysis.get_activation_memory_per_layer(
        b, seq_len, False, ActivationRecomputation.NONE, **act_kwargs)
    return (per_layer, per_layer_none, analysis.get_activation_memory_input_embedding(b, seq_len),
            analysis.get_activation_memory_output_embedding(b, seq_len), attn, mlp, norm)


def _parts(analysis, b: int, seq_len: int, rc, act_kwargs: Dict[str, Any]) -> Tuple[float, ...]:
    """`_activation_parts`, kept per (seq_len, rc, options) for one sequence and scaled by b:
    every stored tensor of Korthikanti et al. 2022 (arXiv 2205.05198, Table 2) and of the
    mixers' operator inputs carries the micro-batch as a factor, so a micro-batch of b keeps
    b times what one sequence keeps (equal up to float rounding, ~1e-16 relative; checked
    for every shipped model in tests/test_activation_linearity.py). The fit-batch probe needs
    the one-sequence figures anyway, so a call with a new micro-batch computes nothing more."""
    one = analysis.describer.phase_memo(
        ("train_activation_parts", seq_len, rc, tuple(act_kwargs.items())),
        lambda: _activation_parts(analysis, 1, seq_len, rc, act_kwargs))
    return one if b == 1 else tuple(x * b for x in one)


def activation_bytes(analysis, stages: List[Stage], b: int, seq_len: int, m: Optional[int], v: int, rc,
                     act_kwargs: Dict[str, Any]) -> List[Tuple[float, float]]:
    """Per stage (activations in flight, recomputation buffer) in bytes per GPU for
    micro-batch b with m micro-batches per iteration (None: the pipeline is full)."""
    p = analysis.parallelism_config
    # the per-layer and embedding figures depend on neither the stages nor m (_parts)
    per_layer, per_layer_none, emb_act, logits_act = _parts(analysis, b, seq_len, rc, act_kwargs)[:4]
    mm = m if m is not None else p.pp_size
    out = []
    for st in stages:
        k = _in_flight(st.index, p.pp_size, mm, v)
        act = per_layer * st.num_layers * k
        if st.index == 0:
            act += emb_act * k
        if st.index == p.pp_size - 1:
            act += logits_act
        rc_buffer = (per_layer_none - per_layer) if (st.num_layers and rc != ActivationRecomputation.NONE) else 0.0
        out.append((act, rc_buffer))
    return out


def stage_activation_parts(analysis, stages: List[Stage], index: int, b: int, seq_len: int, m: int, v: int, rc,
                           act_kwargs: Dict[str, Any]) -> Dict[str, float]:
    """Stage `index`'s activations in flight by llm-analysis 0.2.2's parts (bytes per GPU): the layers'
    attention, MLP and norm inputs, as `activation_bytes` counts them (the per-layer mean x the stage's layers x
    micro-batches in flight), and the logits (`embedding_output`, last stage). The embedding's output (first
    stage) is in none of 0.2.2's parts: `input_embedding` holds it, so that the five sum to the stage's figure."""
    p = analysis.parallelism_config
    st = stages[index]
    k = _in_flight(st.index, p.pp_size, m, v)
    _, _, emb_act, logits_act, attn, mlp, norm = _parts(analysis, b, seq_len, rc, act_kwargs)  # (kept: no rework)
    layers = st.num_layers * k
    first, last = st.index == 0, st.index == p.pp_size - 1
    return {"attn": attn * layers, "mlp": mlp * layers, "layernorm": norm * layers,
            "embedding_output": logits_act if last else 0.0, "input_embedding": emb_act * k if first else 0.0}


def stage_memory(analysis, stages: List[Stage], b: int, seq_len: int, m: Optional[int], v: int, ds_zero, rc,
                 act_kwargs: Dict[str, Any], master_bytes: float, other_op_bytes: Optional[float],
                 lora: Optional[LoRAConfig], fw: FrameworkMemory = FrameworkMemory(),
                 static: Optional[List[Tuple[float, ...]]] = None) -> List[Dict[str, float]]:
    """Memory breakdown (bytes per GPU) of every stage for micro-batch b with m
    micro-batches per iteration (None: assume the pipeline is full); `static`: the
    stages' `static_bytes` when the caller has them."""
    if static is None:
        static = static_bytes(analysis, stages, ds_zero, master_bytes, other_op_bytes, lora, fw)
    out = []
    for (w, grad, opt, zero_buf, bucket), (act, rc_buffer) in zip(
            static, activation_bytes(analysis, stages, b, seq_len, m, v, rc, act_kwargs)):
        d = {"weights": w, "gradients": grad, "optimizer_states": opt, "activations": act,
             "recompute_buffer": rc_buffer, "zero_buffers": zero_buf}
        out.append(_with_overheads(d, b, fw, bucket))
    return out


def max_batch_from_parts(mem: float, static: List[Tuple[float, ...]], acts: List[Tuple[float, float]],
                         fw: FrameworkMemory) -> int:
    """The largest micro-batch that fits, from the parts of the micro-batch-1 breakdown
    without building it (the same arithmetic as _with_overheads with b = 1): per stage,
    the memory left after the static bytes over the bytes each sample adds; the smallest."""
    best = None
    for (w, grad, opt, zero_buf, bucket), (act, rc_buffer) in zip(static, acts):
        free = mem - _static_total(_static_sum(w, grad, opt, zero_buf, bucket), fw)
        if free <= 0:
            return 0
        per = _per_sample(act + rc_buffer, 1, fw)
        n = int(free // per) if per > 0 else 10**9
        best = n if best is None else min(best, n)
    return max(best or 0, 0)


def _overhead_text(need: Dict[str, float]) -> str:
    names = {"gradient_bucket": "gradient bucket", "cuda_context": "CUDA context", "fragmentation": "fragmentation"}
    return "".join(f", {label} {need[k] / GB:.2f} GB" for k, label in names.items() if need.get(k))


def fit_message(analysis, need: Dict[str, float], mem: float, b: int, seq_len: int, max_b: int,
                 ds_zero, rc, alt: Dict[str, float]) -> str:
    p = analysis.parallelism_config
    cp = f", cp={p.cp_size}" if p.cp_size > 1 else ""
    head = (f"{analysis.model_config.name} training on {analysis.gpu_config.name} (tp={p.tp_size}{cp}, pp={p.pp_size}, "
            f"dp={p.dp_size}, ZeRO-{ds_zero.value}, recomputation {rc.name}, {analysis.dtype_config.name}) needs "
            f"{need['peak'] / GB:.2f} GB per GPU for micro-batch {b} x {seq_len} tokens (weights "
            f"{need['weights'] / GB:.2f} GB, gradients {need['gradients'] / GB:.2f} GB, optimizer states "
            f"{need['optimizer_states'] / GB:.2f} GB, activations {need['activations'] / GB:.2f} GB, "
            f"recomputation buffer {need['recompute_buffer'] / GB:.2f} GB, ZeRO buffers "
            f"{need['zero_buffers'] / GB:.2f} GB{_overhead_text(need)}) but the GPU has {mem / GB:.2f} GB.")
    tips = []
    if max_b >= 1:
        tips.append(f"a smaller micro-batch (batch_size_per_gpu <= {max_b} fits)")
    else:
        tips.append("no micro-batch fits as is")
    def peak(key: str) -> str:
        # an alternative's own peak, said to be still too large where it is (it helps only with another change)
        over = f", still above the GPU's {mem / GB:.2f} GB" if alt[key] > mem else ""
        return f"peak {alt[key] / GB:.2f} GB{over}"
    if "zero3" in alt and p.dp_size > 1:
        tips.append(f"ZeRO stage 3 (ds_zero=3, {peak('zero3')})")
    elif ds_zero.value < 3:
        static = need["weights"] + need["gradients"] + need["optimizer_states"]
        tips.append(f"data parallelism with ZeRO (ds_zero=3 over dp_size=8 would leave {static / 8 / GB:.2f} GB "
                    "of the weights, gradients and optimizer states per GPU)")
    if "full_recompute" in alt:
        tips.append(f"full activation recomputation (activation_recomputation=4, {peak('full_recompute')})")
    tips.append(f"more tensor or pipeline parallelism (tp_size={p.tp_size * 2} or pp_size={p.pp_size * 2} "
                "roughly halves weights, gradients and optimizer states per GPU)")
    return f"{head} What would help: {'; '.join(tips)}."

