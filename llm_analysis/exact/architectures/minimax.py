"""MiniMax's lightning attention (MiniMax-01, arXiv 2501.08313, §2.2; transformers'
MiniMaxLightningAttention): a linear attention computed block by block, whose state per
head is the decayed sum of k^T v (d x d, model dtype).

FLOPs per sequence and head of width d: a prompt is cut in blocks of B tokens (the last
one shorter); each block of c tokens computes q k^T and its product with v (c^2 d MACs
each), q against the carried state and the block's k^T v (c d^2 each). Continuing a
context it runs token by token: k^T v and q times the state (2 d^2 MACs per token).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List

from llm_analysis.model import Phase
from llm_analysis.exact.architectures.family import ClassRule
from llm_analysis.exact.architectures.recurrent_state import (Recurrence, RecurrentState, StatePart,
                                                              elementwise_specs, state_spec)

_PAPER = "MiniMax-01 arXiv 2501.08313"


@dataclass(frozen=True)
class LightningAttention(Recurrence):
    heads: int
    head_dim: int
    block: int

    def flops(self, phase: Phase, serving: bool) -> float:
        d, block = self.head_dim, self.block
        if phase.past_len > 0:
            macs = 2 * d * d * phase.q_len
        else:
            full, rest = divmod(phase.q_len, block)
            macs = 2 * d * (full * block * block + rest * rest) + 2 * d * d * phase.q_len
        return 2.0 * phase.batch * self.heads * macs


def _lightning(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> List[Dict[str, Any]]:
    heads, d = int(module.num_attention_heads), int(module.head_dim)
    state = RecurrentState((StatePart("kv_state", heads * d * d, False),), _PAPER,
                           recurrence=LightningAttention(heads, d, int(module.block_size)))
    return elementwise_specs(rel, fresh, calls) + [state_spec(rel, calls, state)]


RULES = {"MiniMaxLightningAttention": ClassRule(specs=_lightning)}
RECORDS = (LightningAttention,)
