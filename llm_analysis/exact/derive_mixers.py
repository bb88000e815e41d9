"""Specs of known recurrent sequence mixers (derive path; needs the live modules).

The generic walk (derive.py) reads projections, norms and attention cores; a
recurrent mixer also keeps a state per sequence instead of a KV cache, and owns
parameters that are no projection (decays, token-shift mixes, block-diagonal gates).
For the mixer modules listed here, `mixer_specs` returns their specs, read from the
module's real parameter and state shapes:

* `param`: element-wise parameters (no FLOPs FlopCounterMode counts);
* `row_flops`: block-diagonal gate matmuls (a batched matmul per token), FLOPs per
  token from the weight shapes (verified against FlopCounterMode like every spec);
* `state`: the state one sequence keeps in this module between decode steps,
  `parts` = [[name, elements, kept in float32]] (see tree_mixers.py for its bytes);
  `decode_refusal` a reason when a decode step cannot be described (then the decode
  phase is refused, prefill and training are not);
* `conv` of a padded causal depthwise convolution run by the mixer:
  `pad_outputs` extra outputs per sequence in prefill (the eager forward pads
  k - 1 on both sides, then slices) and `decode_outputs` outputs per sequence the
  eager decode step computes as a convolution (0 when it is an element-wise
  multiply-and-sum).

Recurrences (element-wise in the eager forward, 0 FLOPs under FlopCounterMode):
* RWKV-4 (Peng et al., arXiv 2305.13048, §3-4, RNN mode): the WKV numerator and
  denominator per channel, plus the running maximum transformers keeps for numerical
  stability (all float32), and the previous token of each token-shift (time mix and
  channel mix);
* MiniMax lightning attention (MiniMax-01, arXiv 2501.08313, §2.2; a linear attention
  computed block by block): its matmuls are counted (`recurrence` in the state spec,
  FLOPs in tree_mixers.py); the state is the decayed sum of k^T v per head (d x d);
* Griffin / RecurrentGemma (De et al., arXiv 2402.19427, §2.4): the RG-LRU hidden
  state h_t = a_t * h_{t-1} + sqrt(1 - a_t^2) * (i_t * x_t) per LRU channel (float32)
  and the last k - 1 inputs of the temporal convolution (transformers keeps them
  for `hidden_size` channels).

Handlers kept in their own modules and registered here: short convolutions at any
site of a layer (derive_sconv_sites.py: Inkling, Inkling2), block attention residuals
over depth (derive_block_residuals.py: Inkling2) and xLSTM's mLSTM cell
(derive_mlstm.py; its FLOPs in mlstm_flops.py).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from llm_analysis.exact.derive_compressed import scorer_specs
from llm_analysis.exact.derive_mixer_parts import elementwise_specs as _elementwise
from llm_analysis.exact.derive_mixer_parts import mixer_spec as _spec
from llm_analysis.exact.derive_mixer_parts import state_spec as _state
from llm_analysis.exact.derive_block_residuals import HANDLERS as _DEPTH_HANDLERS
from llm_analysis.exact.derive_mlstm import HANDLERS as _MLSTM_HANDLERS
from llm_analysis.exact.derive_sconv_sites import HANDLERS as _SCONV_HANDLERS
from llm_analysis.exact.derive_zaya import zaya_specs

_RWKV = "RWKV arXiv 2305.13048"


def _rwkv_time_mix(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> List[Dict[str, Any]]:
    a, h = int(module.time_decay.shape[0]), int(module.time_mix_key.shape[-1])
    parts = [["token_shift", h, False], ["wkv_numerator", a, True], ["wkv_denominator", a, True],
             ["wkv_max", a, True]]
    return _elementwise(rel, fresh, calls) + [_state(rel, calls, parts, _RWKV)]


def _rwkv_channel_mix(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
                      ) -> List[Dict[str, Any]]:
    h = int(module.time_mix_key.shape[-1])
    # RWKV's channel mix is the block's MLP, with a token shift of its own
    return _elementwise(rel, fresh, calls, "mlp") + [_state(rel, calls, [["token_shift", h, False]], _RWKV, "mlp")]


_GRIFFIN = "Griffin arXiv 2402.19427"


def _rg_lru(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> List[Dict[str, Any]]:
    """Two block-diagonal gates (baddbmm: heads x block x block per token) and the LRU state."""
    heads, block = (int(x) for x in module.input_gate_weight.shape[:2])
    gates = _spec(f"{rel}.gates", "row_flops", 0, calls, flops_per_row=2 * 2 * heads * block * block,
                  **{"class": type(module).__name__})
    width = int(module.recurrent_param.shape[0])
    return [gates] + _elementwise(rel, fresh, calls) + [_state(rel, calls, [["rg_lru", width, True]], _GRIFFIN)]


def _griffin_block(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
                   ) -> List[Dict[str, Any]]:
    k = int(module.conv1d_width)
    conv_channels = int(module.hidden_size)  # the shape of transformers' conv1d_state
    return _elementwise(rel, fresh, calls) + [
        _state(rel, calls, [["conv_state", conv_channels * (k - 1), False]], _GRIFFIN)]


def _padded_conv(rel: str, module: Any, fresh: Dict[str, int], calls: int, decode_outputs: int
                 ) -> List[Dict[str, Any]]:
    """A causal depthwise Conv1d padded k - 1 on both sides (stride 1)."""
    k, pad = int(module.kernel_size[0]), int(module.padding[0])
    return [_spec(rel, "conv", sum(fresh.values()), calls, **{
        "in": int(module.in_channels), "out": int(module.out_channels), "bias": module.bias is not None,
        "kernel": k, "conv_groups": int(module.groups), "padding": pad, "pad_outputs": 2 * pad - k + 1,
        "decode_outputs": decode_outputs})]


def _griffin_conv(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
                  ) -> Optional[List[Dict[str, Any]]]:
    if type(parent).__name__ != "RecurrentGemmaRecurrentBlock":
        return None
    # the eager decode step multiplies the cached window by the kernel element-wise and sums
    return _padded_conv(rel, module, fresh, calls, decode_outputs=0)


_MINIMAX = "MiniMax-01 arXiv 2501.08313"


def _lightning(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> List[Dict[str, Any]]:
    """MiniMax's lightning attention: per head a d x d key-value state (model dtype)."""
    heads, d = int(module.num_attention_heads), int(module.head_dim)
    state = _state(rel, calls, [["kv_state", heads * d * d, False]], _MINIMAX)
    state["recurrence"] = {"kind": "lightning", "heads": heads, "head_dim": d, "block": int(module.block_size)}
    return _elementwise(rel, fresh, calls) + [state]


_ZAMBA = "Mamba arXiv 2312.00752 (per-head variant of Zamba arXiv 2405.16712)"


def _zamba_mamba(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> List[Dict[str, Any]]:
    """Zamba's multi-head Mamba: per-head x_proj and dt_proj applied per token (batched
    matmuls), a causal depthwise conv run as a function on the conv1d module's weight,
    and the selective scan whose read-out C h is a matmul per token."""
    d, n, r = int(module.intermediate_size), int(module.ssm_state_size), int(module.time_step_rank)
    k = int(module.conv_kernel_size)
    proj = _spec(f"{rel}.x_dt_proj", "row_flops", 0, calls, flops_per_row=2 * d * (r + 2 * n) + 2 * d * r,
                 **{"class": type(module).__name__})
    # transformers' cache: the conv's last k inputs (model dtype), the SSM state (float32:
    # the scan multiplies by exp(dt A) in float32)
    state = _state(rel, calls, [["conv_state", d * k, False], ["ssm_state", d * n, True]], _ZAMBA)
    state["recurrence"] = {"kind": "mamba", "channels": d, "state_size": n, "kernel": k}
    return [proj] + _elementwise(rel, fresh, calls) + [state]


_MAMBA2 = "Mamba-2 SSD arXiv 2405.21060 (in Zamba2)"


def _mamba2(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> List[Dict[str, Any]]:
    """Mamba-2: the conv on (x, B, C) run as a function on the conv1d module's weight and
    the chunked SSD scan (its einsums), per head a P x N state."""
    heads, p, n = int(module.num_heads), int(module.head_dim), int(module.ssm_state_size)
    conv_dim, k = int(module.conv_dim), int(module.conv_kernel_size)
    # transformers' cache: conv state in the model dtype, SSM state in float32 (the eager
    # SSD computes its chunk states in float32)
    state = _state(rel, calls, [["conv_state", conv_dim * k, False], ["ssm_state", heads * p * n, True]], _MAMBA2)
    state["recurrence"] = {"kind": "mamba2", "channels": conv_dim, "kernel": k, "heads": heads, "head_dim": p,
                           "state_size": n, "chunk": int(module.chunk_size)}
    return _elementwise(rel, fresh, calls) + [state]


def _short_conv(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> List[Dict[str, Any]]:
    """LFM's gated short convolution (B * x, a causal depthwise conv run as a function on
    the conv module's weight, C * conv): the conv's last k inputs per channel as state."""
    channels, k = int(module.conv.in_channels), int(module.conv_kernel_size)
    state = _state(rel, calls, [["conv_state", channels * k, False]], "LFM2 short convolution (transformers)")
    state["recurrence"] = {"kind": "conv", "channels": channels, "kernel": k}
    return _elementwise(rel, fresh, calls) + [state]


def _kda(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> List[Dict[str, Any]]:
    """Kimi Delta Attention (arXiv 2510.26692) as Bailing's hybrid runs it: the conv on
    (q, k, v) and the chunked gated delta rule (chunk 64, transformers' default), per
    head a K x V state (float32 in transformers' cache)."""
    heads, d, k = int(module.num_heads), int(module.head_dim), int(module.conv_kernel_size)
    conv_dim = int(module.conv_dim)
    state = _state(rel, calls, [["conv_state", conv_dim * k, False], ["recurrent_state", heads * d * d, True]],
                   "Kimi Delta Attention arXiv 2510.26692")
    state["recurrence"] = {"kind": "kda", "channels": conv_dim, "kernel": k, "heads": heads, "head_dim": d,
                           "chunk": 64}
    return _elementwise(rel, fresh, calls) + [state]


_HANDLERS: Dict[str, Callable[..., Optional[List[Dict[str, Any]]]]] = {
    "RwkvSelfAttention": _rwkv_time_mix,
    "RwkvFeedForward": _rwkv_channel_mix,
    "RecurrentGemmaRglru": _rg_lru,
    "RecurrentGemmaRecurrentBlock": _griffin_block,
    "Conv1d": _griffin_conv,
    "MiniMaxLightningAttention": _lightning,
    "ZambaMambaMixer": _zamba_mamba,
    "Zamba2MambaMixer": _mamba2,
    "Lfm3ShortConv": _short_conv,
    "BailingHybridDeltaAttention": _kda,
    **_SCONV_HANDLERS,  # short convolutions at any site of a layer (Inkling)
    **_MLSTM_HANDLERS,  # xLSTM's mLSTM cell
    **_DEPTH_HANDLERS,  # block attention residuals over depth (Inkling2)
}


def mixer_specs(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
                ) -> Optional[List[Dict[str, Any]]]:
    """Specs of `module` (path `rel` in its layer, `fresh` its new parameters, `calls`
    runs per layer execution, `parent` the module holding it) when it is a known
    recurrent mixer or a part of one, else None (the generic walk reads it)."""
    zaya = zaya_specs(rel, module, fresh, calls, parent)  # ZAYA's CCA projection (derive_zaya.py)
    if zaya is not None:
        return zaya
    scorer = scorer_specs(rel or type(module).__name__, module, calls, parent)  # derive_compressed.py
    if scorer is not None:
        return scorer
    handler = _HANDLERS.get(type(module).__name__)
    if handler is None:
        return None
    return handler(rel or type(module).__name__, module, fresh, calls, parent)
