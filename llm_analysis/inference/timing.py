"""Times of inference phases: prefill, decode steps (closed form over the
context), decode without a KV cache, the ZeRO-3 weight gather. Every operator
time comes from the analysis' cost model, from the phase table's figures where
the describer has a table (model/phase_table.py), else from the operators built
for the shape.

`prefill_time` and `decode_time` keep their result per (cost model, shape) in the
describer's bounded phase cache (`LayerDescriber.cost_memo`) and hand out copies of
the group breakdowns, so callers may change them; `prefill_phase` and `decode_phase`
compute (inference/run.py keeps a whole call's times instead)."""

from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np

from llm_analysis.cost.affine import sum_affine, sum_max_affine
from llm_analysis.model import Phase
from llm_analysis.model.phase_table import BYTES_PER_GPU, FLOPS, FLOPS_PER_GPU, MASKED_FLOPS, PhaseTable
from llm_analysis.schema.options import DSZeRO
from llm_analysis.quantities.group_times import (GroupTimes, PhaseGroups, finished_group, table_groups, table_time_s,
                                                timed_table)


def prefill_time(analysis, d, batch: int, seq_len: int) -> Tuple[float, Dict, float]:
    """(seconds, group breakdown, FLOPs of the whole model) of one prefill of `batch`
    prompts of `seq_len` tokens, through every pipeline stage in turn."""
    total_s, groups, flops, _ = d.cost_memo(analysis.cost_model, ("prefill_time", batch, seq_len),
                                            lambda: prefill_phase(analysis, d, batch, seq_len))
    return total_s, groups.finished(), flops


def stage_handoff_s(analysis, batch: int, tokens_per_seq: int) -> float:
    """`pipeline_handoff_time_s`, which is 0.0 without pipeline stages (quantities/latency.py)."""
    if analysis.parallelism_config.pp_size == 1:
        return 0.0
    return analysis.pipeline_handoff_time_s(batch, tokens_per_seq)


def prefill_phase(analysis, d, batch: int, seq_len: int) -> Tuple[float, PhaseGroups, float, float]:
    """`prefill_time` computed, not kept: (seconds, the group breakdown to be read, FLOPs as the
    conventions count them, of those the FLOPs no kernel executes: records.Operator.masked_flops)."""
    table = timed_table(analysis.cost_model, d, "prefill", x=seq_len)
    pp_s = stage_handoff_s(analysis, batch, seq_len)
    if table is not None:  # every operator from the table's figures
        figures = table.figure_array(batch, seq_len)
        split = analysis.cost_model.table_split_s(table, figures, seq_len)
        groups = table_groups(table, lambda: np.concatenate((split.kernels, figures[FLOPS_PER_GPU:BYTES_PER_GPU + 1])),
                              split.collectives, pp_s)
        flops, masked = (figures[[FLOPS, MASKED_FLOPS]] @ table.repeat_array).tolist()
        return table_time_s(table, split.kernels, split.collectives) + pp_s, groups, flops, masked
    ops = d.weighted_ops(Phase("prefill", batch, seq_len, seq_len))
    finished = _with_handoff(GroupTimes().add_ops(analysis.cost_model, ops).finish(), pp_s)
    return (sum(g["latency_s"] for g in finished.values()), PhaseGroups(groups=finished),
            sum(n * o.flops for n, o in ops), sum(n * o.masked_flops for n, o in ops))


def _with_handoff(groups: Dict[str, Dict], handoff_s: float) -> Dict[str, Dict]:
    """`groups` with the pipeline stages' hand-offs as a group of their own (none without stages)."""
    if handoff_s:
        groups["pp_communication"] = finished_group(0.0, 0.0, handoff_s, 0.0, 0.0)
    return groups


def _window_breaks(d, lo: int, hi: int) -> List[int]:
    """Context lengths where some layer's attended length stops growing (over the
    describer's layer kinds, not the layers: O(1) in the layer count)."""
    model = d.model
    ws = set()
    if model.sliding_window:
        for kind in d.layer_groups:
            if kind.attention == "sliding_attention" and lo <= model.sliding_window < hi:
                ws.add(model.sliding_window)
            if kind.attention == "sliding_attention" and model.sliding_window_chunked:
                # chunked local attention (Llama 4): the attended length restarts at every chunk
                chunk = model.sliding_window
                ws.update(range(-(-lo // chunk) * chunk, hi, chunk))
    return sorted(ws)


def decode_time(analysis, d, batch: int, seq_len: int, num_steps: int) -> Tuple[float, Dict, float, float]:
    """Total time of `num_steps` decode steps at contexts seq_len+1 .. seq_len+num_steps,
    their breakdown, and the first and last step times. Between window
    boundaries every operator's work is affine in the context, so the steps are
    summed in closed form (`CostModel.steps_split_s`)."""
    total_s, groups, first_s, last_s = d.cost_memo(analysis.cost_model, ("decode_time", batch, seq_len, num_steps),
                                                   lambda: decode_phase(analysis, d, batch, seq_len, num_steps))
    return total_s, groups.finished(), first_s, last_s


def decode_phase(analysis, d, batch: int, seq_len: int, num_steps: int) -> Tuple[float, PhaseGroups, float, float]:
    """`decode_time` computed, not kept: (seconds, the group breakdown to be read, first and last
    step's seconds)."""
    cm = analysis.cost_model
    table = timed_table(cm, d, "decode", x=seq_len + 1)
    # one table for every step (a sliding window's edge in between: the stretches below)
    if table is not None and table is timed_table(cm, d, "decode", x=seq_len + max(num_steps, 1)):
        return _decode_time_table(analysis, table, batch, seq_len, num_steps)
    step = lambda c: d.weighted_ops(Phase("decode", batch, 1, c))  # noqa: E731
    handoff = analysis.pipeline_handoff_time_s(batch, 1)
    first = step(seq_len + 1)
    first_s = analysis.weighted_time_s(first) + handoff
    if num_steps <= 0:
        return 0.0, PhaseGroups(groups={}), first_s, first_s
    lo, hi = seq_len + 1, seq_len + num_steps
    last = step(hi)
    last_s = analysis.weighted_time_s(last) + handoff
    acc = GroupTimes()
    bounds = [lo] + [w + 1 for w in _window_breaks(d, lo, hi)] + [hi + 1]
    for c_a, c_end in zip(bounds[:-1], bounds[1:]):
        c_b = c_end - 1
        ops_a = first if c_a == lo else step(c_a)
        ops_b = ops_a if c_b == c_a else (last if c_b == hi else step(c_b))
        acc.add_steps(analysis.cost_model, ops_a, ops_b, c_b - c_a + 1)
    finished = _with_handoff(acc.finish(), handoff * num_steps)
    return sum(g["latency_s"] for g in finished.values()), PhaseGroups(groups=finished), first_s, last_s


def _decode_time_table(analysis, table: PhaseTable, batch: int, seq_len: int,
                       num_steps: int) -> Tuple[float, PhaseGroups, float, float]:
    """`decode_phase` from the phase table (one stretch of contexts: the cost model sums the steps,
    `CostModel.table_steps_split_s`)."""
    handoff = stage_handoff_s(analysis, batch, 1)
    n = max(num_steps, 1)
    steps = analysis.cost_model.table_steps_split_s(table, batch, seq_len + 1, n)
    first = steps.first
    first_s = table_time_s(table, first.kernels, first.collectives) + handoff
    if num_steps <= 0:
        return 0.0, PhaseGroups(groups={}), first_s, first_s
    # the last step and the sum over the steps: every operator as at the first step (n times), but
    # for the kernels whose work grows with the context (their sums from the cost model)
    at_first = {i: float(first.kernels[0, i] + first.kernels[1, i]) for i, _, _, _ in steps.growing}
    last_s = first_s + sum(table.repeats[i] * (sum(last) - at_first[i]) for i, _, last, _ in steps.growing)
    total_s = n * (first_s - handoff) + sum(table.repeats[i] * (sum(summed) - n * at_first[i])
                                            for i, summed, _, _ in steps.growing) + handoff * num_steps

    def rows() -> np.ndarray:
        out = np.concatenate((first.kernels, steps.figures[FLOPS_PER_GPU:BYTES_PER_GPU + 1])) * n
        for i, summed, _, flops_bytes in steps.growing:
            out[:, i] = summed + flops_bytes
        return out
    return total_s, table_groups(table, rows, [n * t for t in first.collectives], handoff * num_steps), first_s, last_s


def decode_time_without_cache(analysis, d, batch: int, seq_len: int, num_steps: int) -> Tuple[float, PhaseGroups]:
    """Each step is a full forward over its whole context (estimated from <= 33 samples)."""
    acc = GroupTimes()
    if num_steps <= 0:
        return 0.0, PhaseGroups(groups={})
    samples = min(num_steps, 33)
    for j in range(samples):
        i = 1 + round(j * (num_steps - 1) / max(samples - 1, 1))
        c = seq_len + i
        acc.add_ops(analysis.cost_model, d.weighted_ops(Phase("prefill", batch, c, c)), times=num_steps / samples)
    return acc.total_s, PhaseGroups(groups=acc.finish())


def uncached_step_times(analysis, d, batch: int, seq_len: int, steps: int) -> Tuple[float, float]:
    """(first, last) step time without a KV cache: a forward over the whole context."""
    first = analysis.weighted_time_s(d.weighted_ops(Phase("prefill", batch, seq_len + 1, seq_len + 1)))
    c = seq_len + max(steps, 1)
    return first, analysis.weighted_time_s(d.weighted_ops(Phase("prefill", batch, c, c)))


def zero3_weight_gather_time(analysis) -> float:
    """All-gather of one GPU's (TP/PP-sharded) weights over the data-parallel
    group: what every forward pass of ZeRO-3 inference waits for."""
    p = analysis.parallelism_config
    return analysis.cost_model.collective_s("all_gather", analysis.get_weight_memory_per_gpu(DSZeRO.NONE),
                                            p.dp_size, "dp")


def _exposed(seconds: float) -> Dict[str, float]:
    """The group entry of an exposed weight gather (a communication, however short)."""
    return dict(finished_group(0.0, 0.0, seconds, 0.0, 0.0), bound="communication")


def expose_zero3_gather(analysis, t: Dict, steps: int) -> None:
    """ZeRO-3 inference: every forward pass gathers the dp-sharded weights,
    prefetched under the pass's compute; only the excess shows (decode steps
    summed treating the step time as affine in the context). Updates `t` (the
    times of `inference_times`) in place."""
    gather_s = zero3_weight_gather_time(analysis)
    exposed = max(0.0, gather_s - t["prefill_s"])
    t["prefill_s"] += exposed
    t["prefill_groups"].add("dp_communication", _exposed(exposed))
    if steps:
        first, last = t["first_step_s"], t["last_step_s"]
        slope = (last - first) / max(steps - 1, 1)
        # sum_k max(gather, step_k) comes back split into the steps where the
        # gather wins and those where the step does; both halves count. What the
        # gather adds is that sum minus the steps' own time (>= 0 by construction;
        # max() only absorbs rounding).
        gather_wins, step_wins = sum_max_affine(gather_s, 0.0, first, slope, steps)
        exposed = max(0.0, gather_wins + step_wins - sum_affine(first, slope, 0, steps))
        t["decode_total_s"] += exposed
        t["decode_groups"].add("dp_communication", _exposed(exposed))
        t["first_step_s"], t["last_step_s"] = max(first, gather_s), max(last, gather_s)
