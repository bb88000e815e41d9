"""The micro-batch the command line trains with when the user names none: the shortest iteration
of those that fit, never simply the largest.

The largest micro-batch that fits (what the mirrored library call `training()` picks, and keeps
picking) leaves few micro-batches per iteration: under pipeline parallelism the bubble, (p - 1) / m
of the iteration for p stages and m micro-batches, then dominates (GPT-3 175B on 1024 A100 at
tp 8, pp 16: micro-batch 64 leaves m = 3 and an 83% bubble, 227 days instead of ~42). So every
micro-batch that fits and divides the sequences each data-parallel rank processes per iteration is
timed, and the fastest kept; the global batch stays the user's (or, when not given, the one the
largest micro-batch implies)."""

from __future__ import annotations

from typing import Any, Callable, Dict


def fastest_fitting_micro_batch(train: Callable[..., Dict[str, Any]], kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """`train(**kwargs)` (an analysis' `training`) at the micro-batch with the shortest iteration; the
    summary's notes say which was chosen and why. `kwargs` must leave batch_size_per_gpu and
    gradient_accumulation_steps unset."""
    largest = train(**kwargs)
    per_rank = largest["batch_size_per_gpu"] * largest["gradient_accumulation_steps"]
    fits = [b for b in range(1, min(per_rank, largest["max_batch_size_per_gpu"]) + 1) if per_rank % b == 0]
    fixed = {**kwargs, "global_batch_size": largest["global_batch_size"]}
    runs = {largest["batch_size_per_gpu"]: largest}
    for b in fits:
        if b not in runs:
            runs[b] = train(**{**fixed, "batch_size_per_gpu": b})
    best_b = min(runs, key=lambda b: (runs[b]["latency_per_iter"], -b))
    best = runs[best_b]
    if best_b != largest["batch_size_per_gpu"]:
        best["notes"] = [f"micro-batch {best_b} per model replica chosen: the shortest iteration of the {len(runs)} that fit "
                         f"and divide the {per_rank} sequences per data-parallel rank (the largest that fits, "
                         f"{largest['batch_size_per_gpu']}, takes {largest['latency_per_iter']:.3g} s per iteration "
                         f"against {best['latency_per_iter']:.3g} s); pass --batch_size_per_gpu to fix it"] + \
            list(best.get("notes", []))
    return best
