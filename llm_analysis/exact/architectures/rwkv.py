"""RWKV-4's time mix and channel mix (Peng et al., arXiv 2305.13048, §3-4, RNN mode).

The WKV recurrence is element-wise in the eager forward (0 FLOPs under FlopCounterMode);
what a decode step keeps per sequence is the WKV numerator and denominator per channel,
the running maximum transformers keeps for numerical stability (all float32), and the
previous token of each token-shift (time mix and channel mix).
"""

from __future__ import annotations

from typing import Any, Dict, List

from llm_analysis.exact.architectures.family import ClassRule
from llm_analysis.exact.architectures.recurrent_state import RecurrentState, StatePart, elementwise_specs, state_spec

_PAPER = "RWKV arXiv 2305.13048"


def _time_mix(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> List[Dict[str, Any]]:
    a, h = int(module.time_decay.shape[0]), int(module.time_mix_key.shape[-1])
    parts = (StatePart("token_shift", h, False), StatePart("wkv_numerator", a, True),
             StatePart("wkv_denominator", a, True), StatePart("wkv_max", a, True))
    return elementwise_specs(rel, fresh, calls) + [state_spec(rel, calls, RecurrentState(parts, _PAPER))]


def _channel_mix(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> List[Dict[str, Any]]:
    h = int(module.time_mix_key.shape[-1])
    # RWKV's channel mix is the block's MLP, with a token shift of its own
    state = RecurrentState((StatePart("token_shift", h, False),), _PAPER)
    return elementwise_specs(rel, fresh, calls, "mlp") + [state_spec(rel, calls, state, "mlp")]


RULES = {"RwkvSelfAttention": ClassRule(specs=_time_mix), "RwkvFeedForward": ClassRule(specs=_channel_mix)}
RECORDS = ()
