"""Zamba's multi-head Mamba (Zamba arXiv 2405.16712) and Zamba2's Mamba-2 mixer
(Mamba-2 SSD, arXiv 2405.21060).

* Zamba: per-head x_proj and dt_proj applied per token (batched matmuls: `row_flops`), a
  causal depthwise conv run as a function on the conv1d module's weight, and the selective
  scan (Mamba, arXiv 2312.00752) whose read-out C h is a matmul per token (d N);
* Zamba2: the conv on (x, B, C) run as a function on the conv1d module's weight and the
  chunked SSD scan (its einsums, model/mixers.py `ssd_flops`, the table path's), per head
  a P x N state.
transformers' caches hold the conv's last k inputs in the model dtype and the SSM state in
float32 (the scan multiplies by exp(dt A), and the eager SSD computes its chunk states, in
float32).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List

from llm_analysis.model import Phase
from llm_analysis.model.mixers import ssd_flops
from llm_analysis.exact.architectures.family import ClassRule
from llm_analysis.exact.architectures.recurrent_state import (Recurrence, RecurrentState, StatePart,
                                                              causal_conv_macs, elementwise_specs, mixer_spec,
                                                              state_spec)

_ZAMBA = "Mamba arXiv 2312.00752 (per-head variant of Zamba arXiv 2405.16712)"
_MAMBA2 = "Mamba-2 SSD arXiv 2405.21060 (in Zamba2)"


@dataclass(frozen=True)
class MambaScan(Recurrence):
    """Mamba-1: the conv and the read-out C h (d N per token)."""

    channels: int
    state_size: int
    kernel: int

    def flops(self, phase: Phase, serving: bool) -> float:
        conv = 2.0 * phase.batch * causal_conv_macs(phase, self.channels, self.kernel, serving)
        return conv + 2.0 * phase.batch * self.channels * self.state_size * phase.q_len


@dataclass(frozen=True)
class Mamba2Scan(Recurrence):
    """Mamba-2: the conv on (x, B, C) and the SSD scan."""

    channels: int
    kernel: int
    heads: int
    head_dim: int
    state_size: int
    chunk: int

    def flops(self, phase: Phase, serving: bool) -> float:
        conv = 2.0 * phase.batch * causal_conv_macs(phase, self.channels, self.kernel, serving)
        return conv + ssd_flops(phase.batch, phase.q_len, phase.past_len, self.heads, self.head_dim,
                                self.state_size, self.chunk, serving)


def _zamba_mamba(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> List[Dict[str, Any]]:
    d, n, r = int(module.intermediate_size), int(module.ssm_state_size), int(module.time_step_rank)
    k = int(module.conv_kernel_size)
    proj = mixer_spec(f"{rel}.x_dt_proj", "row_flops", 0, calls, flops_per_row=2 * d * (r + 2 * n) + 2 * d * r,
                      **{"class": type(module).__name__})
    state = RecurrentState((StatePart("conv_state", d * k, False), StatePart("ssm_state", d * n, True)), _ZAMBA,
                           recurrence=MambaScan(d, n, k))
    return [proj] + elementwise_specs(rel, fresh, calls) + [state_spec(rel, calls, state)]


def _mamba2(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> List[Dict[str, Any]]:
    heads, p, n = int(module.num_heads), int(module.head_dim), int(module.ssm_state_size)
    conv_dim, k = int(module.conv_dim), int(module.conv_kernel_size)
    state = RecurrentState((StatePart("conv_state", conv_dim * k, False),
                            StatePart("ssm_state", heads * p * n, True)), _MAMBA2,
                           recurrence=Mamba2Scan(conv_dim, k, heads, p, n, int(module.chunk_size)))
    return elementwise_specs(rel, fresh, calls) + [state_spec(rel, calls, state)]


RULES = {"ZambaMambaMixer": ClassRule(specs=_zamba_mamba), "Zamba2MambaMixer": ClassRule(specs=_mamba2)}
RECORDS = (MambaScan, Mamba2Scan)
