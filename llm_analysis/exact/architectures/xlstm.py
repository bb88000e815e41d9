"""xLSTM's mLSTM cell: its specs and its FLOPs.

transformers' xLSTM (Beck et al. 2024, arXiv 2405.04517) mixes the sequence in
`mlstm_layer.mlstm_backend`, a parameter-free module running pure-torch kernels (without
the external `xlstm` package) whose matmuls are neither projections nor an attention
core. It is a `state` spec with an `MlstmCell` recurrence; its parts are what xLSTMCache
keeps per layer and sequence: C (heads x d_qk x d_v), n (heads x d_qk), m (heads), at
the model's dtype (the KV-cache dtype here).

Only the "inference" mode (the default config's) is described: the "train" modes refuse
lengths that are not whole chunks or cannot return the state, so they are refused here
(the module tree could not be read) rather than guessed.

FLOPs. The mLSTM (Beck et al. 2024, §2.3) keeps per head a matrix memory C (d_qk x d_v),
a normaliser n (d_qk) and a stabiliser m (a scalar). transformers' native backend
("inference" mode, `wrap_chunkwise_arbitrary_sequence_length`) runs a prompt of P tokens
as floor(P / L) chunks of L tokens in the chunkwise-parallel form (Beck et al. 2025, "Tiled
Flash Linear Attention", arXiv 2503.14376, §3) and the P mod L tokens left over one by one
in the recurrent form; a single token is one recurrent step. FlopCounterMode counts their
matmuls (gates, exponentials and sums are element-wise):

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

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from llm_analysis.errors import UnsupportedArchitectureError
from llm_analysis.model import Phase
from llm_analysis.exact.architectures.family import ClassRule
from llm_analysis.exact.architectures.recurrent_state import (Recurrence, RecurrentState, StatePart,
                                                              elementwise_specs, state_spec)

_PAPER = "xLSTM mLSTM arXiv 2405.04517 (chunkwise form arXiv 2503.14376)"
_NATIVE = {"chunkwise_kernel_fn": "mlstm_chunkwise_native_autograd",
           "sequence_kernel_fn": "mlstm_recurrent_sequence_native",
           "step_kernel_fn": "mlstm_recurrent_step_native"}


def chunk_macs(chunk: int, d_qk: int, d_v: int) -> int:
    """Multiply-accumulates of one chunk of `chunk` tokens in the chunkwise-parallel form, per head."""
    return 2 * chunk * d_qk * d_v + chunk * chunk * (d_qk + d_v) + chunk * d_qk


def step_macs(d_qk: int, d_v: int) -> int:
    """Multiply-accumulates of one recurrent step, per head."""
    return 2 * d_qk * d_v + d_qk


@dataclass(frozen=True)
class MlstmCell(Recurrence):
    heads: int
    d_qk: int
    d_v: int
    chunk: int
    max_chunk: Optional[int]  # max_inference_chunksize: the model's split of a long prompt
    split_refusal: Optional[str] = None  # why the split (it carries the state) is not described

    def _piece_macs(self, tokens: int, serving: bool) -> int:
        """One call of the backend on `tokens` tokens of a sequence, per head."""
        if tokens == 1:
            return step_macs(self.d_qk, self.d_v)
        full, rest = divmod(tokens, self.chunk)
        if serving:
            left = chunk_macs(rest, self.d_qk, self.d_v) if rest else 0
        else:
            left = rest * step_macs(self.d_qk, self.d_v)
        return full * chunk_macs(self.chunk, self.d_qk, self.d_v) + left

    def flops(self, phase: Phase, serving: bool) -> float:
        """FLOPs (2 per multiply-accumulate) of one mLSTM layer's cell over `phase`."""
        q, piece = phase.q_len, self.max_chunk
        if phase.name == "train" or not piece or q <= piece:
            macs = self._piece_macs(q, serving)
        elif self.split_refusal:
            raise UnsupportedArchitectureError(f"a prompt of {q} tokens, longer than max_inference_chunksize "
                                               f"= {piece}, is not modelled: {self.split_refusal}")
        else:  # the model's own split of a long prompt, in eval mode only
            full, rest = divmod(q, piece)
            macs = full * self._piece_macs(piece, serving) + (self._piece_macs(rest, serving) if rest else 0)
        return 2.0 * phase.batch * self.heads * macs


def _check_native(rel: str, module: Any) -> None:
    """The described kernels are transformers' pure-torch ones, in inference mode."""
    for attr, name in _NATIVE.items():
        found = getattr(getattr(module, attr, None), "__name__", None)
        if found != name:
            raise ValueError(f"{rel}: mLSTM kernel {attr} is {found!r}, not transformers' native {name}")
    mode = getattr(module.config, "mode", None)
    if mode != "inference":
        raise ValueError(f"{rel}: mLSTM backend mode {mode!r} is not modelled (only 'inference')")


def _mlstm_backend(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
                   ) -> List[Dict[str, Any]]:
    _check_native(rel, module)
    cfg = module.config
    heads = int(cfg.num_heads)
    d_qk, d_v = int(parent.qk_dim) // heads, int(parent.v_dim) // heads
    if d_qk * heads != int(parent.qk_dim) or d_v * heads != int(parent.v_dim):
        raise ValueError(f"{rel}: qk/v widths {parent.qk_dim}/{parent.v_dim} do not split into {heads} heads")
    refusal = None
    cache_widths = (getattr(cfg, "qk_dim", None), getattr(cfg, "v_dim", None))
    if cache_widths != (int(parent.qk_dim), int(parent.v_dim)):
        # xLSTMCache is allocated from the config's widths, rounded up to a multiple of 64,
        # the layer computes with the unrounded ones: transformers cannot continue a context
        refusal = (f"transformers' xLSTMCache holds qk/v widths {cache_widths[0]}/{cache_widths[1]} "
                   f"but the layer computes {parent.qk_dim}/{parent.v_dim}, so it cannot carry the state")
    parts = (StatePart("C", heads * d_qk * d_v, False), StatePart("n", heads * d_qk, False),
             StatePart("m", heads, False))
    cell = MlstmCell(heads, d_qk, d_v, int(cfg.chunk_size), int(cfg.max_inference_chunksize), refusal)
    return elementwise_specs(rel, fresh, calls) + [state_spec(rel, calls, RecurrentState(parts, _PAPER, refusal, cell))]


RULES = {"xLSTMBackend": ClassRule(specs=_mlstm_backend)}
RECORDS = (MlstmCell,)
