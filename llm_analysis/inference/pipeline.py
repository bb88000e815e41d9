"""A batch of requests through pipeline stages in micro-batches.

With p stages and the batch split into m micro-batches (GPipe, Huang et al. 2019,
arXiv 1811.06965; FasterTransformer and TensorRT-LLM split the batch the same
way), the stages overlap:
- a forward pass of the batch (prefill) takes sum(stage times) + (m - 1) x
  max(stage time), each stage time for one micro-batch of b/m sequences and
  including the hand-off to the next stage;
- a decode step cannot start a micro-batch's next token before that micro-batch
  has left the last stage, and each stage serves the m micro-batches in turn, so
  one step of the whole batch takes max(m x max(stage time), sum(stage times)).
m = 1 is the batch running stage after stage. We take the m (1, powers of two and the
batch itself; an uneven split timed at its largest micro-batch) that gives the shortest time, as a
well-tuned engine would choose it: with memory-bound stages micro-batching gains
nothing (every micro-batch reads the stage's weights again), with compute-bound
stages it hides all but (p - 1) of the m + p - 1 slots."""

from __future__ import annotations

from typing import List, Optional

from llm_analysis.model import Phase
from llm_analysis.model.describer import LayerDescriber
from llm_analysis.quantities.group_times import timed_table


def _micro_batch_counts(batch: int) -> List[int]:
    """1, the powers of two below the batch, and the batch itself: an uneven split (7 sequences in 4
    micro-batches) is timed at its largest micro-batch, ceil(batch / m) sequences each (`_micro_batch`), what an
    engine pads the others to; only divisors had been tried, and 7 sequences over 4 stages took 11% longer a
    step than 8 (OPT-1.3B, pp 4)."""
    counts, m = [1], 2
    while m < batch:
        counts.append(m)
        m *= 2
    if batch > 1:
        counts.append(batch)
    return counts


def _micro_batch(batch: int, m: int) -> int:
    """The sequences of the largest of m micro-batches of `batch` (the others padded to it)."""
    return -(-batch // m)


def _stage_representatives(d, p: int) -> List[int]:
    """For each stage, the first stage with the same operators: a stage's operators depend
    only on its layer kinds and counts and on whether it holds the embedding (first) or the
    head (last) (`LayerDescriber.build_model_parts`), so the middle stages of an even
    pipeline are one computation (kept per describer)."""
    def build() -> List[int]:
        if any(getattr(type(d), name) is not getattr(LayerDescriber, name)
               for name in ("build_model_parts", "model_parts", "weighted_ops")):
            return list(range(p))  # a subclass placing operators per stage: each stage its own
        first_of, reps = {}, []
        for i, groups in enumerate(d.stage_groups):
            sig = (i == 0, i == p - 1, tuple(groups.items()))
            reps.append(first_of.setdefault(sig, i))
        return reps
    return d.memoized(("pipeline_stage_representatives", p), build)


def _table_stage_times_s(analysis, d, phase: Phase, p: int) -> Optional[List[float]]:
    """Each stage's seconds for one pass of `phase` (no hand-off) from the whole model's phase table
    (model/phase_table.py: no operators built), for a model of one layer kind: the table lists the
    operators before the layers (embedding, a vision tower: the first stage's), one layer's and those
    after them (the head: the last stage's), each with its repeat count; a stage runs its own number
    of layers (the last stage's head times as the whole model's: a tied weight's copy there changes
    its memory, not its FLOPs or bytes). None where there is no such table."""
    if len(d.layer_groups) != 1:
        return None
    cm, x = analysis.cost_model, phase.kv_len  # (x: the prompt length, or a decode step's context)
    table = timed_table(cm, d, phase.name, x=x)
    if table is None:
        return None
    layer_rows = [i for i, layer in enumerate(table.is_layer) if layer]
    first, last = layer_rows[0], layer_rows[-1]
    if len(layer_rows) != last - first + 1:  # (the layer's operators not in one run)
        return None
    split = cm.table_split_s(table, table.figure_array(phase.batch, x), x)
    one_copy_s = (split.kernels[0] + split.kernels[1]).tolist()  # each operator once (collectives: 0 here)
    for repeats, t in zip(table.collective_repeats, split.collectives):
        for i, _ in repeats:
            one_copy_s[i] += t
    n = table.repeats
    before_s = sum(n[i] * one_copy_s[i] for i in range(first))
    layer_s = sum(one_copy_s[first:last + 1])
    after_s = sum(n[i] * one_copy_s[i] for i in range(last + 1, len(one_copy_s)))
    return [sum(d.stage_groups[i].values()) * layer_s + (before_s if i == 0 else 0.0)
            + (after_s if i == p - 1 else 0.0) for i in range(p)]


def stage_times_s(analysis, d, phase: Phase) -> List[float]:
    """Seconds of each pipeline stage for one pass of `phase`, hand-off included
    (stages with the same operators timed once: the same floats)."""
    p = analysis.parallelism_config.pp_size
    handoff = analysis.pipeline_handoff_time_s(phase.batch, phase.q_len) / (p - 1)
    from_table = _table_stage_times_s(analysis, d, phase, p)
    if from_table is not None:
        return [t + (handoff if i < p - 1 else 0.0) for i, t in enumerate(from_table)]
    op_time_s, seen = analysis.cost_model.op_time_s, {}
    lists, own = [], []  # the operator lists stay referenced, so no id below is reused during the call

    def time_s(op) -> float:  # a layer kind's operators are shared by the stages holding it: timed once
        t = seen.get(id(op))
        if t is None:
            t = seen[id(op)] = op_time_s(op)
        return t
    for i, rep in enumerate(_stage_representatives(d, p)):
        if rep < i:
            own.append(own[rep])
            continue
        lists.append(d.weighted_ops(phase, stage=i))
        own.append(sum(n * time_s(op) for n, op in lists[-1]))  # as quantities/latency.weighted_time_s adds them
    return [t + (handoff if i < p - 1 else 0.0) for i, t in enumerate(own)]


def pipelined_prefill_s(analysis, d, batch: int, seq_len: int) -> float:
    """Shortest prefill of `batch` prompts over the micro-batch counts (module docstring)."""
    def time_s(m: int) -> float:
        stages = stage_times_s(analysis, d, Phase("prefill", _micro_batch(batch, m), seq_len, seq_len))
        return sum(stages) + (m - 1) * max(stages)
    return d.cost_memo(analysis.cost_model, ("pipelined_prefill_s", batch, seq_len),
                       lambda: min(time_s(m) for m in _micro_batch_counts(batch)))


def pipelined_decode_ratio(analysis, d, batch: int, context_len: int) -> float:
    """Time of one micro-batched decode step at `context_len` over the same step
    run stage after stage (<= 1; module docstring)."""
    def step_s(m: int) -> float:
        stages = stage_times_s(analysis, d, Phase("decode", _micro_batch(batch, m), 1, context_len))
        return max(m * max(stages), sum(stages))

    def ratio() -> float:
        whole = step_s(1)
        return min(step_s(m) for m in _micro_batch_counts(batch)) / whole if whole else 1.0
    return d.cost_memo(analysis.cost_model, ("pipelined_decode_ratio", batch, context_len), ratio)
