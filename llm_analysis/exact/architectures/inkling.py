"""Inkling and Inkling2: short convolutions at any site of a layer, and Inkling2's block
attention residuals over depth.

Short convolutions. LFM's short convolution is a layer's sequence mixer (lfm.py). Inkling
and Inkling2 (transformers' InklingShortConvolution, Inkling2ShortConvolution) run the same
kind of causal depthwise convolution at several other sites of every layer: on the keys and
values inside attention (`self_attn.k_sconv`, `v_sconv`), after the attention block
(`attn_sconv`, `post_attention_convolution`) and after the MLP (`mlp_sconv`,
`post_mlp_convolution`). Each is a residual `x + conv(x)` over the sequence, so each keeps a
state per sequence between decode steps, whatever block it sits in. What transformers
computes (its eager fallback of `causal_conv1d_fn` / `causal_conv1d_update`, the ones that
run without the Hub kernels):
* prefill: `F.conv1d` on the channels-first input with padding k - 1 on both sides, sliced
  to the first L outputs: L + k - 1 outputs of k MACs per channel and sequence (the rule
  LFM's conv follows: recurrent_state.ShortConvolution);
* decode step: the cached k columns and the new one convolved without padding (2 outputs,
  the last one kept);
* state: the cache's `update_conv_state` keeps the last `conv_kernel_size` (k) inputs per
  channel; the module casts its input to float32 first, so the cache holds float32
  whatever the model dtype.
Inkling2's full-attention layers convolve keys and values with per-token taps
(`Inkling2DynamicShortConvolution`): static taps plus taps projected from the layer input
(`weight_proj`, a Linear the generic walk reads), applied as an element-wise
multiply-and-sum over an unfolded window, which FlopCounterMode does not count (0 FLOPs,
prefill and decode); its state is the same k float32 inputs per channel. The site's block
(attention or MLP) is read from its path as the generic walk reads a projection's
(derive_specs.block_group): state and timing are filed under it.

Block attention residuals (Block AttnRes, "Attention Residuals", MoonshotAI, 2026;
repository MoonshotAI/Attention-Residuals) replace the residual sum with a softmax attention
over depth: at each site a learned pseudo-query (one vector, or a few) attends, separately at
every token position, over the block representations completed so far plus the current
partial sum. Inkling2 (Inkling2BlockAttentionResidual) runs it before attention
(`attention_input`: 1 query, 3 in full-attention layers for q, k and v), before the MLP
(`mlp_input`) and before the final norm (`final_input`), as one
`F.scaled_dot_product_attention` per token: q [n_q, d] against n_b block states [n_b, d]
(keys and values alike), i.e. 2 n_q n_b d MACs per token. The model starts with no block
state and appends the layer input at every block boundary (layer index divisible by
`n_layers_per_attn_res_block`), after the layer for the model's own list and before its MLP
for the layer's copy. So before layer i the list holds ceil(i / n) states; the attention
input sees those plus the partial sum, the MLP input one more when layer i is a boundary,
the final input ceil(L / n) + 1. The work is per token and independent of the context: a
`row_flops` spec (the same for prefill, decode and training).
"""

from __future__ import annotations

from typing import Any, Dict, List

from llm_analysis.exact.architectures.family import ClassRule
from llm_analysis.exact.architectures.recurrent_state import (RecurrentState, ShortConvolution, StatePart,
                                                              elementwise_specs, mixer_spec, state_spec)
from llm_analysis.exact.derive_specs import block_group

_SOURCE = "short causal convolution of transformers' Inkling / Inkling2"


def _site_state(rel: str, calls: int, channels: int, kernel: int, counted: bool) -> Dict[str, Any]:
    """The k float32 inputs per channel the cache keeps; `counted`: the conv is an
    `F.conv1d` FlopCounterMode counts (else element-wise, 0 FLOPs)."""
    state = RecurrentState((StatePart("conv_state", channels * kernel, True),), _SOURCE,
                           recurrence=ShortConvolution(channels, kernel) if counted else None)
    return state_spec(rel, calls, state, group=block_group(rel, []))


def _short_conv_site(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
                     ) -> List[Dict[str, Any]]:
    """A depthwise nn.Conv1d run as a function on its weight (its parameters are the
    child conv1d's: read by the generic walk, which sees it never called)."""
    conv = module.conv1d
    channels, k = int(conv.in_channels), int(module.conv_kernel_size)
    if int(conv.groups) != channels or int(conv.kernel_size[0]) != k:
        raise ValueError(f"{rel}: a short convolution that is not depthwise with kernel {k}")
    return elementwise_specs(rel, fresh, calls, block_group(rel, [])) + [_site_state(rel, calls, channels, k, True)]


def _dynamic_short_conv_site(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
                             ) -> List[Dict[str, Any]]:
    """Inkling2's per-token-tap convolution: static taps [k, channels] (element-wise)."""
    k, channels = (int(x) for x in module.static_weight.shape)
    return elementwise_specs(rel, fresh, calls, block_group(rel, [])) + [_site_state(rel, calls, channels, k, False)]


def _blocks_before(layer_index: int, per_block: int) -> int:
    """Block states in the model's list before layer `layer_index` (boundaries 0, n, 2n, ...)."""
    return -(-layer_index // per_block)


def _attended_states(module: Any, parent: Any) -> int:
    """n_b of this site (module docstring), read from the module holding it."""
    cfg = getattr(parent, "config", None)
    if cfg is not None and hasattr(parent, "layers"):  # the text model's final input
        return _blocks_before(len(parent.layers), int(cfg.n_layers_per_attn_res_block)) + 1
    attn = parent.self_attn
    before = _blocks_before(int(attn.layer_idx), int(attn.config.n_layers_per_attn_res_block))
    if module is getattr(parent, "mlp_input", None):
        return before + 1 + (1 if parent.is_block_boundary else 0)
    if module is getattr(parent, "attention_input", None):
        return before + 1
    raise ValueError(f"{type(module).__name__} at an unknown site of {type(parent).__name__}")


def _block_attention_residual(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
                              ) -> List[Dict[str, Any]]:
    query = module.query
    queries, width = (1, int(query.shape[0])) if query.dim() == 1 else (int(query.shape[0]), int(query.shape[1]))
    states = _attended_states(module, parent)
    group = block_group(rel, [])
    # scores q k^T and their product with the states: 2 x (n_q n_b d) MACs per token
    scores = mixer_spec(f"{rel}.depth_attention", "row_flops", 0, calls, group=group,
                        flops_per_row=2 * 2 * queries * states * width, **{"class": type(module).__name__})
    return [scores] + elementwise_specs(rel, fresh, calls, group)


RULES = {
    "InklingShortConvolution": ClassRule(specs=_short_conv_site),
    "Inkling2ShortConvolution": ClassRule(specs=_short_conv_site),
    "Inkling2DynamicShortConvolution": ClassRule(specs=_dynamic_short_conv_site),
    "Inkling2BlockAttentionResidual": ClassRule(specs=_block_attention_residual),
}
RECORDS = ()
