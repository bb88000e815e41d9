"""ZAYA's Compressed Convolutional Attention projection (derive path; reads live modules).

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

Described as: two `conv` specs (`pad_outputs` k1 - 1 and 0, `decode_outputs` k1 and 1:
tree_mixers.conv_outputs), v_proj_delayed as a projection of every token plus a
parameter-free copy over `batch_fresh` rows (one per sequence in a forward without
cached context, none otherwise: tree_describer), and a `state` spec for what a decode
step keeps besides the KV cache: the last c columns of [q, k] per channel (the
convolutions' input) and the delayed value of the last token (G d / 2), in the model
dtype as transformers' cache holds them. The attention core after it is the usual one
(its KV cache holds the full keys and values, G x 2d per token).

Everything is verified against the model's parameters and FlopCounterMode per module,
at the probe and the long probe, like every derived description.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

_CCA = "ZayaCCAProjection"
_PAPER = "ZAYA1 CCA arXiv 2510.04476"
BATCH_FRESH = "batch_fresh"  # token source: one row per sequence when the forward has no cached context


def _spec(name: str, op: str, params: int, calls: int, **extra: Any) -> Dict[str, Any]:
    s = {"name": name, "op": op, "params": int(params), "tokens": "all", "calls": int(calls), "group": "attention",
         "in": 0, "out": 0, "bias": False, "copies": 1, "expert_role": None, "tp": "unknown"}
    s.update(extra)
    return s


def _conv(rel: str, module: Any, fresh: Dict[str, int], calls: int, pad_outputs: int, decode_outputs: int
          ) -> List[Dict[str, Any]]:
    return [_spec(rel, "conv", sum(fresh.values()), calls, **{
        "in": int(module.in_channels), "out": int(module.out_channels), "bias": module.bias is not None,
        "kernel": int(module.kernel_size[0]), "conv_groups": int(module.groups), "padding": 0,
        "pad_outputs": pad_outputs, "decode_outputs": decode_outputs})]


def _delayed_value(rel: str, module: Any, fresh: Dict[str, int], calls: int) -> List[Dict[str, Any]]:
    """v_proj_delayed over every new token, and once more over one zero row per sequence
    in a forward that starts its sequences (the initial delayed value)."""
    runs = max(calls // 2, 1)  # the probe ran it twice per layer execution: tokens, then the zero row
    shape = {"in": int(module.in_features), "out": int(module.out_features), "bias": module.bias is not None}
    every = _spec(rel, "linear", sum(fresh.values()), runs, **shape)
    first = _spec(f"{rel}.initial_state", "linear", 0, runs, tokens=BATCH_FRESH, **shape)
    return [every, first]


def _state(rel: str, module: Any, calls: int) -> List[Dict[str, Any]]:
    conv = module.conv_qk_depthwise
    pad = int(module.conv_kernel_size)  # (k0 - 1) + (k1 - 1) cached columns
    delayed = int(module.v_proj_delayed.out_features)
    parts = [["qk_conv_state", int(conv.in_channels) * pad, False], ["delayed_value", delayed, False]]
    return [_spec(f"{rel}.state", "state", 0, calls, parts=parts, state_elems=int(sum(p[1] for p in parts)),
                  decode_refusal=None, paper=_PAPER)]


def zaya_specs(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
               ) -> Optional[List[Dict[str, Any]]]:
    """Specs of ZAYA's CCA projection and of its children, else None."""
    cls = type(module).__name__
    if cls == _CCA:
        return _state(rel or cls, module, calls)
    if type(parent).__name__ != _CCA:
        return None
    k1 = int(parent.grouped_kernel_size)
    if module is parent.conv_qk_depthwise:
        return _conv(rel, module, fresh, calls, pad_outputs=k1 - 1, decode_outputs=k1)
    if module is parent.conv_qk_grouped:
        return _conv(rel, module, fresh, calls, pad_outputs=0, decode_outputs=1)
    if module is parent.v_proj_delayed:
        return _delayed_value(rel, module, fresh, calls)
    return None
