"""ZAYA's Compressed Convolutional Attention projection.

ZAYA1 (Zyphra; CCA: Figliolia et al. 2025, arXiv 2510.04476) replaces the q/k/v
projections of attention with `ZayaCCAProjection` (transformers 5.23,
models/zaya/modeling_zaya.py). Per token, with H query heads, G KV heads, head width d,
kernels k0 (`cca_time0`) and k1 (`cca_time1`):

* q = x Wq (H d) and k = x Wk (G d), as usual projections;
* the concatenation [q, k] ((H + G) d channels) runs through a causal depthwise
  convolution of kernel k0 and then a grouped convolution of kernel k1 with H + G
  groups (one per head), both unpadded over the input left-padded by
  c = (k0 - 1) + (k1 - 1) positions (in a prefill: zeros; continuing a context: the c
  columns cached before). So the depthwise convolution computes q_len + k1 - 1 outputs
  per sequence, the grouped one q_len: 2 x channels x k0 x (q_len + k1 - 1) and
  2 x channels x d x k1 x q_len FLOPs per sequence (channels/(H + G) = d inputs per
  output of the grouped one). A decode step (q_len = 1) computes k1 and 1 outputs;
* the value of each head is half "current" (v_proj_current: x_t W, G d / 2 wide) and
  half "delayed" (v_proj_delayed applied to x_{t-1}): transformers projects every new
  token with v_proj_delayed and shifts the result by one position. The first position
  of a sequence takes the delayed value of the previous token, read from the cache when
  the forward continues a context; in a forward that starts its sequences (prefill,
  training) transformers builds it by running v_proj_delayed once more on one zero row
  per sequence (its bias, or zeros), which FlopCounterMode counts: 2 x hidden x G d / 2
  FLOPs per sequence. That is why the module sees batch x q_len + batch rows.

Described as: two `conv` specs (`CausalConvOutputs` k1 - 1 and 0 extra prefill outputs,
k1 and 1 decode outputs), v_proj_delayed as a projection of every token plus a
parameter-free copy over `SequenceStartRows` (one row per sequence in a forward without
cached context, none otherwise), and a `state` spec for what a decode step keeps besides
the KV cache: the last c columns of [q, k] per channel (the convolutions' input) and the
delayed value of the last token (G d / 2), in the model dtype as transformers' cache holds
them. The attention core after it is the usual one (its KV cache holds the full keys and
values, G x 2d per token).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from llm_analysis.exact.architectures.family import ClassRule, RowSource
from llm_analysis.exact.architectures.recurrent_state import (CausalConvOutputs, RecurrentState, StatePart,
                                                              mixer_spec, padded_conv_spec, state_spec)

_PAPER = "ZAYA1 CCA arXiv 2510.04476"


@dataclass(frozen=True)
class SequenceStartRows(RowSource):
    """One row per sequence in a forward that starts its sequences (no cached context)."""

    def rows(self, phase: Any, description: Dict[str, Any]) -> int:
        return phase.batch if phase.past_len == 0 else 0


def _delayed_value(rel: str, module: Any, fresh: Dict[str, int], calls: int) -> List[Dict[str, Any]]:
    """v_proj_delayed over every new token, and once more over one zero row per sequence
    in a forward that starts its sequences (the initial delayed value)."""
    runs = max(calls // 2, 1)  # the probe ran it twice per layer execution: tokens, then the zero row
    shape = {"in": int(module.in_features), "out": int(module.out_features), "bias": module.bias is not None}
    every = mixer_spec(rel, "linear", sum(fresh.values()), runs, **shape)
    first = mixer_spec(f"{rel}.initial_state", "linear", 0, runs, tokens=SequenceStartRows(), **shape)
    return [every, first]


def _projection_state(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
                      ) -> List[Dict[str, Any]]:
    """The state of the CCA projection itself (its children are `_projection_parts`)."""
    conv = module.conv_qk_depthwise
    pad = int(module.conv_kernel_size)  # (k0 - 1) + (k1 - 1) cached columns
    parts = (StatePart("qk_conv_state", int(conv.in_channels) * pad, False),
             StatePart("delayed_value", int(module.v_proj_delayed.out_features), False))
    return [state_spec(rel, calls, RecurrentState(parts, _PAPER))]


def _projection_parts(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
                      ) -> Optional[List[Dict[str, Any]]]:
    """The convolutions and the delayed value projection of a CCA projection, else None."""
    k1 = int(parent.grouped_kernel_size)
    if module is parent.conv_qk_depthwise:
        return [padded_conv_spec(rel, module, fresh, calls, 0, CausalConvOutputs(k1 - 1, k1))]
    if module is parent.conv_qk_grouped:
        return [padded_conv_spec(rel, module, fresh, calls, 0, CausalConvOutputs(0, 1))]
    if module is parent.v_proj_delayed:
        return _delayed_value(rel, module, fresh, calls)
    return None


RULES = {"ZayaCCAProjection": ClassRule(specs=_projection_state, child_specs=_projection_parts)}
RECORDS = (SequenceStartRows,)
