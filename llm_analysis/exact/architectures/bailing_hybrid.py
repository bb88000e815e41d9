"""Kimi Delta Attention (arXiv 2510.26692) as Bailing's hybrid runs it
(transformers' BailingHybridDeltaAttention): the causal conv on (q, k, v) and the chunked
gated delta rule (chunk 64, transformers' default), per head a K x V state (float32 in
transformers' cache).

FLOPs of the chunked Kimi delta rule, as model/mixers.py `gated_delta_flops` (kda): per
chunk of C and head (key and value width d), C^2 (K + 2V) + 3 C K V MACs, the eager
forward padding to whole chunks; its decode step is element-wise (0), a kernel's reads the
state for k and q and updates it (3 K V per head).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List

from llm_analysis.model import Phase
from llm_analysis.exact.architectures.family import ClassRule
from llm_analysis.exact.architectures.recurrent_state import (Recurrence, RecurrentState, StatePart,
                                                              causal_conv_macs, elementwise_specs, state_spec)

_CHUNK = 64  # transformers' chunk of the delta rule


@dataclass(frozen=True)
class KimiDeltaRule(Recurrence):
    channels: int  # of the causal conv on (q, k, v)
    kernel: int
    heads: int
    head_dim: int
    chunk: int

    def _delta_rule_flops(self, phase: Phase, serving: bool) -> float:
        heads, d, q = self.heads, self.head_dim, self.chunk
        if phase.past_len > 0 and phase.q_len == 1:
            return 2.0 * phase.batch * heads * 3 * d * d if serving else 0.0
        if serving:
            full, rest = divmod(phase.q_len, q)
            return 2.0 * phase.batch * heads * ((full * q * q + rest * rest) * 3 * d + 3 * phase.q_len * d * d)
        c = -(-phase.q_len // q)
        return 2.0 * phase.batch * heads * c * (q * q * 3 * d + 3 * q * d * d)

    def flops(self, phase: Phase, serving: bool) -> float:
        conv = 2.0 * phase.batch * causal_conv_macs(phase, self.channels, self.kernel, serving)
        return conv + self._delta_rule_flops(phase, serving)


def _kda(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> List[Dict[str, Any]]:
    heads, d, k = int(module.num_heads), int(module.head_dim), int(module.conv_kernel_size)
    conv_dim = int(module.conv_dim)
    state = RecurrentState((StatePart("conv_state", conv_dim * k, False),
                            StatePart("recurrent_state", heads * d * d, True)),
                           "Kimi Delta Attention arXiv 2510.26692",
                           recurrence=KimiDeltaRule(conv_dim, k, heads, d, _CHUNK))
    return elementwise_specs(rel, fresh, calls) + [state_spec(rel, calls, state)]


RULES = {"BailingHybridDeltaAttention": ClassRule(specs=_kda)}
RECORDS = (KimiDeltaRule,)
