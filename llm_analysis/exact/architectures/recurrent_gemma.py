"""Griffin / RecurrentGemma's recurrent block (De et al., arXiv 2402.19427, §2.4).

The RG-LRU hidden state h_t = a_t * h_{t-1} + sqrt(1 - a_t^2) * (i_t * x_t) is kept per
LRU channel in float32; its two gates are block-diagonal matmuls (baddbmm: heads x block
x block per token, `row_flops`). The temporal convolution is an nn.Conv1d padded k - 1 on
both sides and sliced (L + k - 1 outputs per sequence in a prefill); transformers keeps its
last k - 1 inputs for `hidden_size` channels, and its eager decode step multiplies that
window by the kernel element-wise and sums (no matmul).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from llm_analysis.exact.architectures.family import ClassRule
from llm_analysis.exact.architectures.recurrent_state import (CausalConvOutputs, RecurrentState, StatePart,
                                                              elementwise_specs, mixer_spec, padded_conv_spec,
                                                              state_spec)

_PAPER = "Griffin arXiv 2402.19427"


def _rg_lru(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> List[Dict[str, Any]]:
    """Two block-diagonal gates (baddbmm: heads x block x block per token) and the LRU state."""
    heads, block = (int(x) for x in module.input_gate_weight.shape[:2])
    gates = mixer_spec(f"{rel}.gates", "row_flops", 0, calls, flops_per_row=2 * 2 * heads * block * block,
                       **{"class": type(module).__name__})
    state = RecurrentState((StatePart("rg_lru", int(module.recurrent_param.shape[0]), True),), _PAPER)
    return [gates] + elementwise_specs(rel, fresh, calls) + [state_spec(rel, calls, state)]


def _recurrent_block(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
                     ) -> List[Dict[str, Any]]:
    k = int(module.conv1d_width)
    conv_channels = int(module.hidden_size)  # the shape of transformers' conv1d_state
    state = RecurrentState((StatePart("conv_state", conv_channels * (k - 1), False),), _PAPER)
    return elementwise_specs(rel, fresh, calls) + [state_spec(rel, calls, state)]


def _temporal_conv(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
                   ) -> Optional[List[Dict[str, Any]]]:
    """The block's causal depthwise Conv1d, padded k - 1 on both sides (stride 1)."""
    if module is not getattr(parent, "conv_1d", None):
        return None
    k, pad = int(module.kernel_size[0]), int(module.padding[0])
    # the eager decode step multiplies the cached window by the kernel element-wise and sums
    return [padded_conv_spec(rel, module, fresh, calls, pad, CausalConvOutputs(2 * pad - k + 1, 0))]


RULES = {"RecurrentGemmaRglru": ClassRule(specs=_rg_lru),
         "RecurrentGemmaRecurrentBlock": ClassRule(specs=_recurrent_block, child_specs=_temporal_conv)}
RECORDS = ()
