"""Pipeline stages in a serving worker (pp_size > 1): the step of a rank whose layers are split over
pp stages, the running batch cut into micro-batches.

The engines (vLLM's pp virtual engines, SGLang, TensorRT-LLM) keep pp micro-batches in flight, so every
stage works on one while the others are elsewhere (an assumption). One round (every running request
advances a token, the step's prefill chunks advance once) is the longest of:
- the busiest stage: m = min(pp, sequences) micro-batches (fewer sequences: the bubble), the prefill
  chunks riding in one (heavy), each stage serving heavy_k + (m - 1) x light_k;
- a micro-batch's latency: sum over stages of heavy_k + the hand-offs (quantities/latency.py), with the
  host's step as the engine adds it (`EngineSettings.step_with_host_s`);
- the host: m x the per-step overhead + the per-sequence overhead of every sequence.
With pp = 1 it is the plain step. Each stage is timed on its own operators (uneven splits as
model/pipeline_layout.py makes them, the remainder on the earlier stages as vLLM's get_pp_indices); the
KV cache and weights per GPU are those of the stage holding the most.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Sequence, Tuple

from llm_analysis.serving.step_time import chunk_totals


class StageView:
    """One pipeline stage of a describer, seen through the one call StepCosts makes
    (`weighted_ops(phase)`): that stage's operators instead of the whole model's."""

    def __init__(self, describer, stage: int):
        self.describer, self.stage = describer, stage

    def weighted_ops(self, phase, stage=None):
        return self.describer.weighted_ops(phase, self.stage)


def stage_representatives(describer, pp: int) -> List[int]:
    """For each stage, the first stage with the same operators (a stage's operators depend only on
    its layer kinds and counts and on whether it holds the embedding or the head): the middle stages
    of an even pipeline are timed once."""
    first_of, reps = {}, []
    for i, groups in enumerate(describer.stage_groups):
        reps.append(first_of.setdefault((i == 0, i == pp - 1, tuple(groups.items())), i))
    return reps


def gpu_only(engine):
    """The engine with no host overhead: a stage's step is GPU time (its layers' per-layer time, GPU-side,
    stays with it); the round adds the host's once."""
    return dataclasses.replace(engine, step_overhead_s=0.0, step_overhead_per_seq_s=0.0)


class PipelineStepTimer:
    """Seconds of one round of a pipelined rank (module docstring): the `StepTimer` interface serve()'s
    steady state, simulation and disaggregated pools read."""

    tokens_per_step = 1.0  # a round gives each of its sequences one token
    # the budget binds each micro-batch's step, not the round's decoders: its bound on decoders is not modelled
    budget_tokens_per_decoder = None

    def __init__(self, stage_timers: Dict[int, object], representatives: Sequence[int], engine, handoff_s):
        """`stage_timers`: a StepTimer (on a GPU-only engine) per representative stage;
        `representatives`: each stage's representative (stage_representatives); `handoff_s(tokens)`:
        seconds of the hand-offs of a micro-batch of `tokens` tokens across all pp - 1 boundaries."""
        self.timers, self.reps, self.engine, self.handoff_s = stage_timers, list(representatives), engine, handoff_s
        self.pp = len(self.reps)
        self.costs = stage_timers[self.reps[-1]].costs  # where callers keep what they derive (saturation rates)
        self.memo_key = ("pipeline", self.pp)

    def micro_batches(self, sequences: float) -> float:
        """m: pp micro-batches in flight, fewer when fewer sequences run (at least one)."""
        return min(float(self.pp), max(1.0, sequences))

    def step_s(self, decoders: float, decode_context_sum: float, chunks: Sequence[Tuple[float, float]] = (),
               sampled: float = None) -> float:
        prefill_tokens, sequences = chunk_totals(chunks)
        if decoders + prefill_tokens <= 0:
            return 0.0
        m = self.micro_batches(decoders + sequences)
        d, ctx = decoders / m, decode_context_sum / m
        heavy_sampled = None if sampled is None else max(sampled - (m - 1) * d, 0.0)
        heavy = {k: t.step_s(d, ctx, chunks, heavy_sampled) for k, t in self.timers.items()}
        light = {k: t.step_s(d, ctx) if m > 1 else 0.0 for k, t in self.timers.items()}
        e = self.engine
        busy_s = max(heavy[k] + (m - 1) * light[k] for k in self.timers)
        latency_s = e.step_with_host_s(sum(heavy[k] for k in self.reps) + self.handoff_s(d + prefill_tokens),
                                       d + sequences)
        host_s = e.host_busy_s(m, decoders + sequences)
        return max(busy_s, latency_s, host_s)


__all__ = ["PipelineStepTimer", "StageView", "stage_representatives", "gpu_only"]
