"""FLOPs of xLSTM's mLSTM cell for one phase (torch-free; specs from derive_mlstm.py).

The mLSTM (Beck et al. 2024, "xLSTM: Extended Long Short-Term Memory", arXiv
2405.04517, §2.3) keeps per head a matrix memory C (d_qk x d_v), a normaliser n
(d_qk) and a stabiliser m (a scalar). transformers' native backend (xLSTMBackend in
"inference" mode, `wrap_chunkwise_arbitrary_sequence_length`) runs a prompt of P
tokens as floor(P / L) chunks of L tokens in the chunkwise-parallel form (Beck et al.
2025, "Tiled Flash Linear Attention", arXiv 2503.14376, §3) and the P mod L tokens
left over one by one in the recurrent form; a single token is one recurrent step.
FlopCounterMode counts their matmuls (gates, exponentials and sums are element-wise):

* one chunk of L tokens, per head (`mlstm_chunkwise_recurrent_fw_C` then
  `mlstm_chunkwise_parallel_fw_H`): the chunk's state update K^T V (L d_qk d_v MACs),
  the intra-chunk scores Q K^T (L^2 d_qk) and their product with V (L^2 d_v), the
  inter-chunk read-out Q C (L d_qk d_v) and Q n (L d_qk);
* one recurrent step, per head (`mlstm_recurrent_step_native`): the outer product
  k v^T added to C (d_qk d_v MACs), h = q C (d_qk d_v) and q . n (d_qk).

In eval mode (prefill and decode; not training) the model first cuts a prompt longer
than `max_inference_chunksize` into pieces of that many tokens, each run as above
with the state carried over. A decode step is one recurrent step per sequence.
Under the "serving" conventions (attention_flops="causal") the leftover tokens of a
prompt form one shorter chunk (a chunkwise kernel's work) instead of recurrent steps.
"""

from __future__ import annotations

from typing import Any, Dict

from llm_analysis.errors import UnsupportedArchitectureError
from llm_analysis.model import Phase


def chunk_macs(chunk: int, d_qk: int, d_v: int) -> int:
    """Multiply-accumulates of one chunk of `chunk` tokens in the chunkwise-parallel form, per head."""
    return 2 * chunk * d_qk * d_v + chunk * chunk * (d_qk + d_v) + chunk * d_qk


def step_macs(d_qk: int, d_v: int) -> int:
    """Multiply-accumulates of one recurrent step, per head."""
    return 2 * d_qk * d_v + d_qk


def _piece_macs(tokens: int, r: Dict[str, Any], serving: bool) -> int:
    """One call of the backend on `tokens` tokens of a sequence, per head."""
    chunk, d_qk, d_v = r["chunk"], r["d_qk"], r["d_v"]
    if tokens == 1:
        return step_macs(d_qk, d_v)
    full, rest = divmod(tokens, chunk)
    left = (chunk_macs(rest, d_qk, d_v) if rest else 0) if serving else rest * step_macs(d_qk, d_v)
    return full * chunk_macs(chunk, d_qk, d_v) + left


def mlstm_flops(phase: Phase, r: Dict[str, Any], serving: bool = False) -> float:
    """FLOPs (2 per multiply-accumulate) of one mLSTM layer's cell over `phase`."""
    q, piece = phase.q_len, r.get("max_chunk")
    if phase.name == "train" or not piece or q <= piece:
        macs = _piece_macs(q, r, serving)
    elif r.get("split_refusal"):  # the split carries the state through the cache
        raise UnsupportedArchitectureError(f"a prompt of {q} tokens, longer than max_inference_chunksize "
                                           f"= {piece}, is not modelled: {r['split_refusal']}")
    else:  # the model's own split of a long prompt, in eval mode only
        full, rest = divmod(q, piece)
        macs = full * _piece_macs(piece, r, serving) + (_piece_macs(rest, r, serving) if rest else 0)
    return 2.0 * phase.batch * r["heads"] * macs
