"""LFM's gated short convolution (transformers' Lfm3ShortConv): B * x, a causal depthwise
convolution run as a function on the conv module's weight, C * conv. What a decode step
keeps is the conv's last k inputs per channel (model dtype); its matmul FLOPs are the
convolution's (recurrent_state.ShortConvolution).
"""

from __future__ import annotations

from typing import Any, Dict, List

from llm_analysis.exact.architectures.family import ClassRule
from llm_analysis.exact.architectures.recurrent_state import (RecurrentState, ShortConvolution, StatePart,
                                                              elementwise_specs, state_spec)


def _short_conv(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> List[Dict[str, Any]]:
    channels, k = int(module.conv.in_channels), int(module.conv_kernel_size)
    state = RecurrentState((StatePart("conv_state", channels * k, False),), "LFM2 short convolution (transformers)",
                           recurrence=ShortConvolution(channels, k))
    return elementwise_specs(rel, fresh, calls) + [state_spec(rel, calls, state)]


RULES = {"Lfm3ShortConv": ClassRule(specs=_short_conv)}
RECORDS = ()
