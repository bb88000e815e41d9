"""How a framework moves ZeRO-3 traffic, beyond what NCCL's collectives cost, and
how much of the data-parallel traffic runs under compute: the switchable terms of
training()'s data-parallel time. Every default reproduces the plain model (NCCL
rates, one gather per forward and per backward, `overlap_dp_comm=True`).

- `zero3_gather_bytes_per_s`: a cap on the rate (bytes each GPU receives per
  second) at which the framework completes a ZeRO-3 weight all-gather or gradient
  reduce-scatter, whatever the link; the time of each is the larger of NCCL's and
  (bytes received per GPU) / rate. DeepSpeed's first ZeRO-3 (v0.3.13, 2021)
  all-gathered each sub-module's parameters one tensor at a time, copied them into
  place from Python and called `torch.cuda.synchronize()` after every fetch
  (deepspeed/runtime/zero/stage3.py, `_all_gather` / `_synchronize_communication`);
  on one 8x A100 NVLink node a 5.1B-parameter BERT's forward took ~470 ms under
  ZeRO-3 against ~60 ms under ZeRO-2 (github:deepspeedai/DeepSpeed issue #1174 and
  pull request #1188, 2021): ~10 GB of fp16 weights gathered at ~25 GB/s per GPU
  over NVLink, an eighth of what NCCL reaches there.
- `zero3_recompute_gather`: with full activation recomputation the recomputed
  forward gathers the layers' weights again, so a micro-batch gathers them three
  times (forward, recomputed forward, backward) before the gradient reduce-scatter.
  DeepSpeed's ZeRO-3 fetches a sub-module's parameters in a forward pre-hook and
  releases them in the forward post-hook, and the recomputation runs the
  sub-modules' forward again with those hooks (stage3.py v0.3.13,
  `pre_sub_module_forward_function` / `post_sub_module_forward_function`).
  PyTorch FSDP gathers a unit once for its backward and the recomputation inside
  it uses those weights: leave it off there. Full recomputation gathers the
  layers' weights again; NONE and ATTN_COMPUTE recompute no weighted operator,
  so nothing more; ATTN and NORM_ATTN_NORM recompute some projections, whose
  weights ZeRO-3 may or may not still hold, so they are refused with this term on.
- `overlap_dp_comm` as a share s in [0, 1] (True is 1, False is 0): of each
  data-parallel transfer, at most s of it runs under the compute it overlaps
  (training/run.py names which); exposed = traffic - min(compute, s x traffic).
  A share below 1 states that part of the transfer serialises with compute, as
  DeepSpeed v0.3's device-wide synchronisation after each fetch does.

The README's "Planning" section gives the values fitted on the DeepSpeed ZeRO-3
runs of Narayanan et al. 2021 (arXiv 2104.04473, Table 2) and how.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from llm_analysis.errors import ConfigError
from llm_analysis.schema.options import ActivationRecomputation, DSZeRO, boolean, number, positive_number


@dataclass(frozen=True)
class Zero3Traffic:
    gather_bytes_per_s: Optional[float] = None  # None: NCCL's rates only
    recompute_gather: bool = False

    @classmethod
    def from_kwargs(cls, kw: Dict[str, Any], rc: ActivationRecomputation, ds_zero: DSZeRO) -> "Zero3Traffic":
        rate, again = kw["zero3_gather_bytes_per_s"], kw["zero3_recompute_gather"]
        if rate is None and again is False:
            return _PLAIN  # the default: nothing to validate or build
        if ds_zero != DSZeRO.STAGE_3:
            field = "zero3_gather_bytes_per_s" if rate is not None else "zero3_recompute_gather"
            raise ConfigError(f"{field} = {rate if rate is not None else again!r} describes ZeRO-3 weight gathers, "
                              f"but ds_zero = {ds_zero.value}; set ds_zero=3 or leave it at its default")
        if rate is not None:
            rate = positive_number(rate, "zero3_gather_bytes_per_s", "a rate in bytes per second per GPU")
        again = boolean(again, "zero3_recompute_gather")
        if again and rc in (ActivationRecomputation.ATTN, ActivationRecomputation.NORM_ATTN_NORM):
            raise ConfigError(
                f"zero3_recompute_gather = True is modelled with activation_recomputation = FULL (the whole "
                f"layer's weights gathered again), NONE or ATTN_COMPUTE (no weights recomputed), not {rc.name}: "
                "which of the recomputed projections' weights the framework still holds is not known; "
                "use FULL, or turn it off")
        return cls(rate, again)

    def capped_s(self, nccl_s: float, total_bytes: float, group: int) -> float:
        """A ZeRO-3 gather or reduce-scatter of `total_bytes` over `group` ranks: NCCL's time,
        or the framework's rate cap on the (group - 1)/group of them each rank receives."""
        if self.gather_bytes_per_s is None or group <= 1:
            return nccl_s
        return max(nccl_s, total_bytes * (group - 1) / group / self.gather_bytes_per_s)


_PLAIN = Zero3Traffic()


def overlap_share(value) -> float:
    """`overlap_dp_comm`: True / False as given (the common case), else a share in [0, 1]."""
    if type(value) is bool:
        return value
    if isinstance(value, str) or (isinstance(value, int) and value in (0, 1)):
        return boolean(value, "overlap_dp_comm")
    return number(value, "overlap_dp_comm", 0.0, 1.0, lo_open=False,
                  what="True, False or the share of each data-parallel transfer that can run under "
                       "compute, in [0, 1]")


def exposed_s(traffic_s: float, window_s: float, share) -> float:
    """What of a transfer the compute window it overlaps does not hide: traffic - min(window,
    s x traffic) (share True is 1: the excess over the window, t - min(w, t) = max(0, t - w))."""
    return traffic_s - min(window_s, share * traffic_s)
