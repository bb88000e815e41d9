"""Short causal convolutions at any site of a layer (derive path; needs the live modules).

LFM's short convolution is a layer's sequence mixer (derive_mixers.py). Inkling and
Inkling2 (transformers' InklingShortConvolution, Inkling2ShortConvolution) run the same
kind of causal depthwise convolution at several other sites of every layer: on the keys
and values inside attention (`self_attn.k_sconv`, `v_sconv`), after the attention block
(`attn_sconv`, `post_attention_convolution`) and after the MLP (`mlp_sconv`,
`post_mlp_convolution`). Each is a residual `x + conv(x)` over the sequence, so each
keeps a state per sequence between decode steps, whatever block it sits in.

What transformers computes (its eager fallback of `causal_conv1d_fn` /
`causal_conv1d_update`, the ones that run without the Hub kernels):
* prefill: `F.conv1d` on the channels-first input with padding k - 1 on both sides,
  sliced to the first L outputs: L + k - 1 outputs of k MACs per channel and sequence
  (`recurrence` kind "conv" in tree_mixers.py, the rule LFM's conv follows);
* decode step: the cached k columns and the new one convolved without padding (2
  outputs, the last one kept);
* state: the cache's `update_conv_state` keeps the last `conv_kernel_size` (k) inputs
  per channel; the module casts its input to float32 first, so the cache holds float32
  whatever the model dtype.

Inkling2's full-attention layers convolve keys and values with per-token taps
(`Inkling2DynamicShortConvolution`): static taps plus taps projected from the layer
input (`weight_proj`, a Linear the generic walk reads), applied as an element-wise
multiply-and-sum over an unfolded window, which FlopCounterMode does not count (0
FLOPs, prefill and decode); its state is the same k float32 inputs per channel.

The site's block (attention or MLP) is read from its path as the generic walk reads
a projection's (derive_roles.block_group): state and timing are filed under it.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List

from llm_analysis.exact.derive_mixer_parts import elementwise_specs, state_spec
from llm_analysis.exact.derive_roles import block_group

_SOURCE = "short causal convolution of transformers' Inkling / Inkling2"


def _site_state(rel: str, calls: int, channels: int, kernel: int, counted: bool) -> Dict[str, Any]:
    """The k float32 inputs per channel the cache keeps; `counted`: the conv is an
    `F.conv1d` FlopCounterMode counts (else element-wise, 0 FLOPs)."""
    group = block_group(rel, [])
    state = state_spec(rel, calls, [["conv_state", channels * kernel, True]], _SOURCE, group=group)
    if counted:
        state["recurrence"] = {"kind": "conv", "channels": channels, "kernel": kernel}
    return state


def _short_conv_site(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
                     ) -> List[Dict[str, Any]]:
    """A depthwise nn.Conv1d run as a function on its weight (its parameters are the
    child conv1d's: read by the generic walk, which sees it never called)."""
    conv = module.conv1d
    channels, k = int(conv.in_channels), int(module.conv_kernel_size)
    if int(conv.groups) != channels or int(conv.kernel_size[0]) != k:
        raise ValueError(f"{rel}: a short convolution that is not depthwise with kernel {k}")
    group = block_group(rel, [])
    return elementwise_specs(rel, fresh, calls, group) + [_site_state(rel, calls, channels, k, True)]


def _dynamic_short_conv_site(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
                             ) -> List[Dict[str, Any]]:
    """Inkling2's per-token-tap convolution: static taps [k, channels] (element-wise)."""
    k, channels = (int(x) for x in module.static_weight.shape)
    group = block_group(rel, [])
    return elementwise_specs(rel, fresh, calls, group) + [_site_state(rel, calls, channels, k, False)]


HANDLERS: Dict[str, Callable[..., List[Dict[str, Any]]]] = {
    "InklingShortConvolution": _short_conv_site,
    "Inkling2ShortConvolution": _short_conv_site,
    "Inkling2DynamicShortConvolution": _dynamic_short_conv_site,
}
