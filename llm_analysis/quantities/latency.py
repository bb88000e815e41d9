"""Latency views: operator times from the cost model, summed per layer, per
group or over the model (forward pass of one pipeline replica)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from llm_analysis.cost.calibrated import call_cost_model
from llm_analysis.cost.model import with_cost_model
from llm_analysis.model import Operator, Phase
from llm_analysis.quantities.group_times import GroupTimes
from llm_analysis.quantities.mirror_parts import mirror_parts
import llm_analysis.quantities.flops as flops_view
import llm_analysis.quantities.memory as memory_view
from llm_analysis.quantities.activations import act_bytes
from llm_analysis.quantities.arguments import amount, count, element_bytes, flag
from llm_analysis.schema.options import MAX_BATCH_SIZE, MAX_SEQ_LEN
from llm_analysis.quantities.phases import layer_mean, make_phase

Weighted = List[Tuple[int, Operator]]


def ops_time_s(a, ops: List[Operator]) -> float:
    return sum(a.cost_model.op_time_s(op) for op in ops)


def weighted_time_s(a, weighted: Weighted) -> float:
    """Time of (repeat count, operator) pairs: collectives pay their latency every time."""
    op_time_s = a.cost_model.op_time_s
    return sum(n * op_time_s(op) for n, op in weighted)


def group_breakdown(a, weighted: Weighted) -> Dict[str, Dict[str, Any]]:
    """Time per operator group with its compute / memory / communication split."""
    return GroupTimes().add_ops(a.cost_model, weighted).finish()


def layer_time_mean(a, ph: Phase, groups: Optional[Tuple[str, ...]] = None,
                    kinds: Optional[Tuple[str, ...]] = None) -> float:
    def time_of(ops):
        return ops_time_s(a, [o for o in ops if (groups is None or o.group in groups)
                              and (kinds is None or o.kind in kinds)])
    return layer_mean(a, ph, time_of)


def prefill_layer_mean(a, batch_size: int, seq_len: int, groups: Optional[Tuple[str, ...]] = None,
                       kinds: Optional[Tuple[str, ...]] = None) -> float:
    return layer_time_mean(a, make_phase("prefill", batch_size, seq_len), groups, kinds)


def tp_comm(a, batch_size: int, seq_len: int, dtype_bytes: float) -> float:
    """One ring all-reduce of the layer output over the TP group (a sequence split over
    context-parallel ranks all-reduces only its own part, as the operator records do)."""
    batch_size, seq_len = count(batch_size, "batch_size"), count(seq_len, "seq_len")
    dtype_bytes = element_bytes(dtype_bytes, "dtype_bytes")
    p = a.parallelism_config
    if p.tp_size == 1:
        return 0.0
    tokens = batch_size * seq_len / (p.cp_size if seq_len > 1 else 1)
    return a.cost_model.collective_s("all_reduce", tokens * a.model_config.hidden_dim * dtype_bytes, p.tp_size, "tp")


def moe_alltoall_per_layer(a, batch_size: int, seq_len: int) -> float:
    """Expert-parallel all-to-alls of one layer: the collectives of the EP group."""
    ph = make_phase("prefill", batch_size, seq_len)
    return layer_mean(a, ph, lambda ops: ops_time_s(a, [o for o in ops if o.comm_group == "ep"]))


def layernorm(a, batch_size: int, seq_len: int, dtype_bytes: float) -> float:
    """One norm: read and write sbh elements of dtype_bytes; under sequence parallelism a GPU normalises its
    1/tp slice of the sequence (as the per-layer breakdown and get_activation_memory_per_layernorm count it)."""
    batch_size, seq_len = count(batch_size, "batch_size"), count(seq_len, "seq_len")
    dtype_bytes = element_bytes(dtype_bytes, "dtype_bytes")
    elems = a.describer.sequence_parallel_tokens(batch_size * seq_len) * a.model_config.hidden_dim
    op = Operator(name="layernorm", group="norm", kind="norm", bytes_read_per_gpu=elems * dtype_bytes,
                  bytes_written_per_gpu=elems * dtype_bytes)
    return a.cost_model.op_time_s(op)


def per_layer(a, batch_size: int, seq_len: int) -> Tuple[float, Dict[str, float]]:
    """(mean forward time of a layer, breakdown) under 0.2.2's keys attn, mlp, layernorm and
    tp_comm; the other collectives of a layer (expert-parallel all-to-alls, context-parallel
    exchanges) under extra keys `<group>_comm` where the layer has them (mirror_parts.py)."""
    ph = make_phase("prefill", batch_size, seq_len)
    breakdown = {
        "attn": layer_time_mean(a, ph, ("attention",)),
        "mlp": layer_time_mean(a, ph, ("mlp", "experts", "router")),
        "layernorm": layer_time_mean(a, ph, ("norm",)),
        "tp_comm": _comm_time_mean(a, ph, "tp"),
    }
    comm_groups = sorted({o.comm_group for kind in a.describer.layer_groups for o in a.describer.layer_ops(ph, kind)
                          if o.group == "communication" and o.comm_group != "tp"})
    for g in comm_groups:
        t = _comm_time_mean(a, ph, g)
        if t:
            breakdown[f"{g}_comm"] = t
    return sum(breakdown.values()), breakdown


def _comm_time_mean(a, ph: Phase, comm_group: str) -> float:
    return layer_mean(a, ph, lambda ops: ops_time_s(
        a, [o for o in ops if o.group == "communication" and o.comm_group == comm_group]))


def input_embedding(a, batch_size: int, seq_len: int) -> float:
    return ops_time_s(a, a.describer.embedding_ops(make_phase("prefill", batch_size, seq_len)))


def output_embedding(a, batch_size: int, seq_len: int) -> float:
    ph = make_phase("prefill", batch_size, seq_len)
    return ops_time_s(a, [o for o in a.describer.head_ops(ph) if o.group == "lm_head"])


def pipeline_handoff_s(a, batch_size: int, tokens_per_seq: int, scatter_gather: bool = False) -> float:
    """Point-to-point sends of the hidden states between pipeline stages.

    `scatter_gather` (training): Megatron-LM's scatter/gather hand-off (Narayanan
    et al. 2021, arXiv 2104.04473 §4.1; `scatter_gather_tensors_in_pipeline`, on by
    default): without sequence parallelism every TP rank holds the same hidden
    states, so each sends only its 1/tp slice to its peer of the next stage (over
    its own NIC) and the receivers all-gather the slices over the TP group's
    NVLink. Serving engines send the whole tensor from every rank (default). `batch_size` and
    `tokens_per_seq` may be means (serve()'s micro-batches), so any positive number is taken."""
    batch_size = amount(batch_size, "batch_size", MAX_BATCH_SIZE)
    tokens_per_seq = amount(tokens_per_seq, "tokens_per_seq", MAX_SEQ_LEN)
    scatter_gather = flag(scatter_gather, "scatter_gather")
    p = a.parallelism_config
    if p.pp_size == 1:
        return 0.0
    elems = batch_size * tokens_per_seq * a.model_config.hidden_dim / (p.tp_size if p.sp_size > 1 else 1)
    if tokens_per_seq > 1:  # a sequence split over context-parallel ranks: each sends its part
        elems /= p.cp_size
    nbytes = elems * act_bytes(a)
    if scatter_gather and p.tp_size > 1 and p.sp_size == 1:
        cm = a.cost_model
        hop_s = cm.collective_s("p2p", nbytes / p.tp_size, 2, "pp") + cm.collective_s(
            "all_gather", nbytes, p.tp_size, "tp")
        # never slower than sending the whole tensor (a small message gains nothing from the split)
        return (p.pp_size - 1) * min(hop_s, cm.collective_s("p2p", nbytes, 2, "pp"))
    return (p.pp_size - 1) * a.cost_model.collective_s("p2p", nbytes, 2, "pp")


def forward_view(a, is_inference: bool):
    """The analysis a forward pass is timed by: `a` as inference() times it, or (is_inference False) as
    training() does, whose cost model under perf_model="calibrated" is its training view (training rates, the
    eager kernel floor: cost/calibrated.py `call_cost_model`), so that get_latency_fwd(..., is_inference=False)
    is training()'s `latency_fwd` and the training report's forward table reads the same. A roofline times
    both alike (the analysis itself)."""
    if flag(is_inference, "is_inference"):
        return a
    training_model = call_cost_model(a.cost_model, a.kernel_launch, training=True)
    return a if training_model is a.cost_model else with_cost_model(a, training_model)


def forward(a, batch_size: int, seq_len: int, breakdown_prefix: str = "") -> Tuple[float, Dict[str, float]]:
    """(forward time of the whole model on one pipeline replica, breakdown)."""
    ph = make_phase("prefill", batch_size, seq_len)
    groups = group_breakdown(a, a.describer.weighted_ops(ph))
    # 0.2.2's six keys `<prefix>latency_fwd_<part>`, then extra parts (mirror_parts.py)
    latency_s = {k: v["latency_s"] for k, v in groups.items()}
    pp_s = pipeline_handoff_s(a, batch_size, seq_len)
    if pp_s:
        latency_s["pp_communication"] = pp_s
    breakdown = mirror_parts(latency_s, breakdown_prefix)
    return sum(breakdown.values()), breakdown


def pivot(a) -> float:
    """(weight bytes / HBM bandwidth) / (forward FLOPs of one token / FLOP/s)."""
    cm = a.cost_model
    weight_s = memory_view.weights_per_gpu(a) / cm.hbm_bytes_per_s
    flops_one_token = flops_view.model_flops(a, 1, 1) / a.parallelism_config.tp_size
    return weight_s / (flops_one_token / cm.flops_per_s)



def operator_rows(a, ph: Phase, per_layer: bool = True) -> List[Dict[str, Any]]:
    """The operator records of a phase as plain dicts, with their time and bound."""
    cm = a.cost_model
    rows = []
    for label, n, ops in a.describer.model_ops(ph):
        for op in ops:
            o = op if per_layer else op.scaled(n)
            rows.append({
                "layer_group": label, "repeat": n if per_layer else 1, "name": o.name, "group": o.group,
                "kind": o.kind, "shapes": o.shapes, "params": o.params, "params_per_gpu": o.params_per_gpu,
                "flops": o.flops, "flops_per_gpu": o.flops_per_gpu, "bytes_per_gpu": o.bytes_per_gpu,
                "weight_bytes_per_gpu": o.weight_bytes_per_gpu,
                "kv_cache_bytes_read_per_gpu": o.kv_cache_bytes_read_per_gpu,
                "arithmetic_intensity": o.arithmetic_intensity,
                "latency_s": cm.op_time_s(o), "bound": cm.op_bound(o),
                "collective": o.collective, "comm_bytes_per_gpu": o.comm_bytes_per_gpu,
            })
    return rows
