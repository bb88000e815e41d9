"""Operators of the recurrent-mixer specs of a derived description (torch-free).

See derive_mixers.py for the specs. Conventions, as operators/mixers.py:
* a `state` spec is the recurrence itself: element-wise, so no FLOPs (what
  FlopCounterMode counts), unless it describes its matmuls (`recurrence_flops`); it reads its state when the phase continues a context and
  writes it after every inference pass (training keeps none), filed as a "scan"
  operator whose state read plays the KV cache's part (timing group `mixer_state`);
* state bytes per sequence: each part at the KV-cache dtype, except the parts the
  reference implementation keeps in float32 (4 bytes whatever the cache dtype);
* a padded causal convolution computes L + pad_outputs outputs per sequence in a
  prefill (eager) or L (serving kernels); a decode step computes `decode_outputs`
  (eager: 0 when transformers multiplies and sums element-wise) or 1 (serving).
A spec with a `decode_refusal` refuses every phase that continues a context.
"""

from __future__ import annotations

from typing import Any, Dict, List

from llm_analysis.errors import UnsupportedArchitectureError
from llm_analysis.model import Operator, Phase
from llm_analysis.model.mixers import ssd_flops
from llm_analysis.exact.mlstm_flops import mlstm_flops

FLOAT32_BYTES = 4.0


def state_bytes_per_seq(specs: List[Dict[str, Any]], kv_bytes: float) -> float:
    """Bytes of state one sequence keeps in one layer of this kind (whole layer, one GPU:
    the exact path refuses tp_size > 1 for state-keeping layers)."""
    return sum(elems * (FLOAT32_BYTES if fp32 else kv_bytes)
               for s in specs if s["op"] == "state" for _name, elems, fp32 in s["parts"])


def check_decode(phase: Phase, s: Dict[str, Any]) -> None:
    if phase.past_len > 0 and s.get("decode_refusal"):
        raise UnsupportedArchitectureError(f"{s['name']}: a decode step is not modelled ({s['decode_refusal']})")


def _conv_macs(phase: Phase, r: Dict[str, Any], serving: bool) -> int:
    """Per sequence, the causal depthwise conv: eager, L + k - 1 outputs (padding k - 1
    on both sides); a decode step convolves the k cached columns and the new one (2
    outputs); kernels 1 per token."""
    if phase.past_len > 0 and phase.q_len != 1:
        raise UnsupportedArchitectureError("a causal convolution (Mamba, short convolution) continuing a context "
                                           "with several new tokens per sequence (chunked prefill) is not modelled")
    if serving:
        outputs = phase.q_len
    else:
        outputs = 2 if phase.past_len > 0 else phase.q_len + r["kernel"] - 1
    return r["channels"] * r["kernel"] * outputs


def _mamba_flops(phase: Phase, r: Dict[str, Any], serving: bool) -> float:
    """Mamba-1: the conv and the read-out C h (d N per token). Mamba-2: the conv on
    (x, B, C) and the SSD scan (operators/mixers.py `ssd_flops`, the table path's)."""
    conv = 2.0 * phase.batch * _conv_macs(phase, r, serving)
    if r["kind"] == "mamba":
        return conv + 2.0 * phase.batch * r["channels"] * r["state_size"] * phase.q_len
    return conv + ssd_flops(phase.batch, phase.q_len, phase.past_len, r["heads"], r["head_dim"], r["state_size"],
                            r["chunk"], serving)


def _kda_flops(phase: Phase, r: Dict[str, Any], serving: bool) -> float:
    """The chunked Kimi delta rule, as operators/mixers.py `gated_delta_flops` (kda):
    per chunk of C and head (key and value width d), C^2 (K + 2V) + 3 C K V MACs, the
    eager forward padding to whole chunks; its decode step is element-wise (0), a
    kernel's reads the state for k and q and updates it (3 K V per head)."""
    heads, d, q = r["heads"], r["head_dim"], r["chunk"]
    if phase.past_len > 0 and phase.q_len == 1:
        return 2.0 * phase.batch * heads * 3 * d * d if serving else 0.0
    if serving:
        full, rest = divmod(phase.q_len, q)
        return 2.0 * phase.batch * heads * ((full * q * q + rest * rest) * 3 * d + 3 * phase.q_len * d * d)
    c = -(-phase.q_len // q)
    return 2.0 * phase.batch * heads * c * (q * q * 3 * d + 3 * q * d * d)


def recurrence_flops(phase: Phase, s: Dict[str, Any], serving: bool = False) -> float:
    """FLOPs of the recurrence's own matmuls (2 per multiply-accumulate) for `phase`.

    Lightning attention (MiniMax-01, arXiv 2501.08313; transformers'
    MiniMaxLightningAttention), per sequence and head of width d: a prompt is cut in
    blocks of B tokens (the last one shorter); each block of c tokens computes q k^T and
    its product with v (c^2 d MACs each), q against the carried state and the block's
    k^T v (c d^2 each). Continuing a context it runs token by token: k^T v and q times
    the state (2 d^2 MACs per token). Mamba: `_mamba_flops`. Element-wise recurrences
    (RWKV, RG-LRU) count 0."""
    r = s.get("recurrence")
    if not r:
        return 0.0
    if r["kind"] == "conv":  # a gated short convolution (LFM)
        return 2.0 * phase.batch * _conv_macs(phase, r, serving) * s["calls"]
    if r["kind"] == "kda":
        return (2.0 * phase.batch * _conv_macs(phase, r, serving) + _kda_flops(phase, r, serving)) * s["calls"]
    if r["kind"] in ("mamba", "mamba2"):
        return _mamba_flops(phase, r, serving) * s["calls"]
    if r["kind"] == "mlstm":  # xLSTM's matrix memory (mlstm_flops.py)
        return mlstm_flops(phase, r, serving) * s["calls"]
    heads, d, block = r["heads"], r["head_dim"], r["block"]
    if phase.past_len > 0:
        macs = 2 * d * d * phase.q_len
    else:
        full, rest = divmod(phase.q_len, block)
        macs = 2 * d * (full * block * block + rest * rest) + 2 * d * d * phase.q_len
    return 2.0 * phase.batch * heads * macs * s["calls"]


def state_op(phase: Phase, s: Dict[str, Any], kv_bytes: float, serving: bool = False) -> Operator:
    check_decode(phase, s)
    flops = recurrence_flops(phase, s, serving)
    per_seq = state_bytes_per_seq([s], kv_bytes) * s["calls"]
    read = phase.batch * per_seq if phase.past_len > 0 else 0.0
    written = phase.batch * per_seq if phase.name != "train" else 0.0
    parts = ", ".join(f"{n} {e}{' fp32' if f else ''}" for n, e, f in s["parts"])
    return Operator(name=s["name"], group=s["group"], kind="scan", flops=flops, flops_per_gpu=flops,
                    bytes_read_per_gpu=read,
                    bytes_written_per_gpu=written, kv_cache_bytes_read_per_gpu=read,
                    shapes=f"recurrence ({s.get('paper', '')}); state per sequence: {parts}")


def conv_outputs(phase: Phase, s: Dict[str, Any], serving: bool, rows: int) -> int:
    """Outputs per channel of a convolution spec over the whole phase (all sequences);
    `rows` (one output per row it sees) for a convolution no mixer pads."""
    if "pad_outputs" not in s:
        return rows
    if phase.past_len > 0 and phase.q_len == 1:  # a decode step
        return phase.batch * (1 if serving else s["decode_outputs"])
    return phase.tokens if serving else phase.batch * (phase.q_len + s["pad_outputs"])
