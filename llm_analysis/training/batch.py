"""Batch configuration: global batch = batch per GPU x accumulation steps x dp."""

from __future__ import annotations

from typing import Optional, Tuple

from llm_analysis.errors import ConfigError, DoesNotFitError
from llm_analysis.quantities.arguments import plain
from llm_analysis.schema.options import integer, optional_positive_int

# The largest max_batch_size_per_gpu taken: the largest whole number a float holds exactly, above any
# batch that fits in a GPU (training() derives it as memory // bytes per sequence, memory <= 1e15 bytes,
# so it may exceed the sanity limit of a batch given by hand).
MAX_FITTING_BATCH = 2**53


def _max_batch(value) -> int:
    """max_batch_size_per_gpu as a whole number >= 0 (None: 0, nothing fits); int() truncated 8.5 to 8
    and raised a TypeError or OverflowError for a list or infinity."""
    if value is None:
        return 0
    try:
        return integer(plain(value), "max_batch_size_per_gpu", 0, MAX_FITTING_BATCH)
    except ConfigError:
        raise ConfigError(f"max_batch_size_per_gpu = {value!r} must be a whole number in [0, 2**53] (the largest batch "
                          "per GPU that fits)") from None


def config_batch_size_and_gradient_accumulation_steps(dp_size: int, max_batch_size_per_gpu: int,
                                                      batch_size_per_gpu: Optional[int] = None,
                                                      gradient_accumulation_steps: Optional[int] = None,
                                                      global_batch_size: Optional[int] = None
                                                      ) -> Tuple[int, int, int]:
    """(batch_size_per_gpu, gradient_accumulation_steps, global_batch_size) with
    global = batch per GPU x accumulation steps x dp_size.

    Any two determine the third; one alone is completed with the others at their
    natural value (batch alone: 1 step; steps alone: the largest batch that fits;
    global alone: the largest batch per GPU <= max_batch_size_per_gpu that
    divides global / dp_size); none picks the largest batch that fits and 1 step.
    An inconsistent or indivisible combination raises ConfigError naming the
    values. Whether the batch fits in memory is the caller's check (training()
    raises DoesNotFitError with the numbers).
    """
    dp = optional_positive_int(plain(dp_size), "dp_size")
    bs = optional_positive_int(plain(batch_size_per_gpu), "batch_size_per_gpu")
    gas = optional_positive_int(plain(gradient_accumulation_steps), "gradient_accumulation_steps")
    gbs = optional_positive_int(plain(global_batch_size), "global_batch_size")
    max_b = _max_batch(max_batch_size_per_gpu)

    def need_fit():
        if max_b < 1:
            raise DoesNotFitError(
                f"not even batch_size_per_gpu = 1 fits (max_batch_size_per_gpu = {max_b}); "
                "shard more (ZeRO, tensor/pipeline parallelism) or recompute activations",
                needed_bytes=float("nan"), available_bytes=float("nan"), max_batch_size=max_b)
        return max_b

    if bs is not None and gas is not None and gbs is not None:
        if bs * gas * dp != gbs:
            raise ConfigError(
                f"global_batch_size = {gbs} != batch_size_per_gpu ({bs}) x gradient_accumulation_steps ({gas}) "
                f"x dp_size ({dp}) = {bs * gas * dp}")
        return bs, gas, gbs
    if bs is not None and gas is not None:
        return bs, gas, bs * gas * dp
    if bs is not None and gbs is not None:
        if gbs % (bs * dp):
            raise ConfigError(
                f"global_batch_size = {gbs} is not divisible by batch_size_per_gpu ({bs}) x dp_size ({dp}) = "
                f"{bs * dp}; valid global_batch_size: multiples of {bs * dp}")
        return bs, gbs // (bs * dp), gbs
    if gas is not None and gbs is not None:
        if gbs % (gas * dp):
            raise ConfigError(
                f"global_batch_size = {gbs} is not divisible by gradient_accumulation_steps ({gas}) x dp_size "
                f"({dp}) = {gas * dp}; valid global_batch_size: multiples of {gas * dp}")
        return gbs // (gas * dp), gas, gbs
    if bs is not None:
        return bs, 1, bs * dp
    if gas is not None:
        b = need_fit()
        return b, gas, b * gas * dp
    if gbs is not None:
        if gbs % dp:
            raise ConfigError(f"global_batch_size = {gbs} is not divisible by dp_size = {dp}; "
                              f"valid global_batch_size: multiples of {dp}")
        per_rank = gbs // dp
        b = min(need_fit(), per_rank)
        while per_rank % b:
            b -= 1
        return b, per_rank // b, gbs
    b = need_fit()
    return b, 1, b * dp

