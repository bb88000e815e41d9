"""The micro-batch the command line trains with when the user names none: the smallest of those that
fit whose time per sample is within `TIME_PER_SAMPLE_TOLERANCE` (1%) of the fastest, never simply the
largest.

The largest micro-batch that fits (what the mirrored library call `training()` picks, and keeps
picking) leaves few micro-batches per iteration: under pipeline parallelism the bubble, (p - 1) / m
of the iteration for p stages and m micro-batches, then dominates (GPT-3 175B on 1024 A100 at
tp 8, pp 16: micro-batch 64 leaves m = 3 and an 83% bubble, 227 days instead of ~42). So every
micro-batch that fits and divides the sequences each data-parallel rank processes per iteration is
timed. The fastest alone is not kept: past the size that fills the GPU, a larger micro-batch saves
a fraction of a percent of the time and holds proportionally more activation memory, so the smallest
within 1% of the fastest time per sample is (a difference below 1% is also below what the
model resolves). The global batch stays the user's (or, when not given, the one the largest
micro-batch implies)."""

from __future__ import annotations

from typing import Any, Callable, Dict

from llm_analysis.errors import DoesNotFitError
from llm_analysis.training.run import is_batch_choice_note

# a micro-batch whose time per sample is at most this share above the fastest counts as as fast
TIME_PER_SAMPLE_TOLERANCE = 0.01


def time_per_sample_s(summary: Dict[str, Any]) -> float:
    """Seconds of an iteration per sequence of its global batch."""
    return summary["latency_per_iter"] / summary["global_batch_size"]


def fastest_fitting_micro_batch(train: Callable[..., Dict[str, Any]], kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """`train(**kwargs)` (an analysis' `training`) at the smallest micro-batch whose time per sample
    is within TIME_PER_SAMPLE_TOLERANCE of the fastest of those that fit; the summary's notes say
    which was chosen and why. `kwargs` must leave batch_size_per_gpu and gradient_accumulation_steps
    unset."""
    largest = train(**kwargs)
    largest_b = largest["batch_size_per_gpu"]
    per_rank = largest_b * largest["gradient_accumulation_steps"]
    # an interleaved schedule runs only with >= pp_size micro-batches (training.run.check_interleaved_micro_batches)
    least_steps = largest["pp_size"] if kwargs.get("pipeline_interleave", 1) > 1 else 1
    fits = [b for b in range(1, min(per_rank, largest["max_batch_size_per_gpu"]) + 1)
            if per_rank % b == 0 and per_rank // b >= least_steps]
    fixed = {**kwargs, "global_batch_size": largest["global_batch_size"]}
    runs = {largest_b: largest}
    for b in fits:
        if b not in runs:
            try:
                runs[b] = train(**{**fixed, "batch_size_per_gpu": b})
            except DoesNotFitError:  # (not feasible: skipped)
                continue
    per_sample = {b: time_per_sample_s(r) for b, r in runs.items()}
    fastest_b = min(runs, key=lambda b: (per_sample[b], b))
    limit = per_sample[fastest_b] * (1 + TIME_PER_SAMPLE_TOLERANCE)
    chosen_b = min(b for b in runs if per_sample[b] <= limit)
    chosen = runs[chosen_b]
    why = (f"the smallest of the {len(runs)} that fit and divide the {per_rank} sequences per data-parallel rank "
           f"whose time per sample is within {TIME_PER_SAMPLE_TOLERANCE:.0%} of the fastest")
    if fastest_b == chosen_b:
        why += f" (the fastest, {per_sample[chosen_b]:.3g} s per sample)"
    else:
        above_pct = 100 * (per_sample[chosen_b] / per_sample[fastest_b] - 1)
        why += (f" ({per_sample[chosen_b]:.4g} s per sample, {above_pct:.2g}% above micro-batch {fastest_b}'s "
                f"{per_sample[fastest_b]:.4g} s, which holds more activation memory)")
    if largest_b not in (chosen_b, fastest_b):
        why += f"; the largest that fits, {largest_b}, takes {per_sample[largest_b]:.3g} s per sample"
    chosen["notes"] = [f"micro-batch {chosen_b} (batch_size_per_gpu) chosen: {why}; pass batch_size_per_gpu "
                       f"(--batch_size_per_gpu) to fix it"] + \
        [n for n in chosen.get("notes", []) if not is_batch_choice_note(n)]
    return chosen
