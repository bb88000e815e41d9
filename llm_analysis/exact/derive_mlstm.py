"""xLSTM's mLSTM cell (derive path; needs the live modules).

transformers' xLSTM (Beck et al. 2024, arXiv 2405.04517) runs its sequence mixing in
`mlstm_layer.mlstm_backend` (xLSTMBackend), a module without parameters whose forward
calls pure-torch kernels (when the external `xlstm` package is absent): the chunkwise
form for whole chunks, then a token-by-token recurrence for what is left. FlopCounterMode
counts their matmuls, which the generic walk cannot explain: the backend has neither
projections of its own nor an attention core (no query-key matrix over the whole
sequence; its work grows with the chunk, not with the context). `HANDLERS` describes it:
a `state` spec whose `recurrence` (kind "mlstm") carries the shapes mlstm_flops.py turns
into FLOPs, and whose parts are the state transformers' xLSTMCache keeps per layer and
sequence: C (heads x d_qk x d_v), n (heads x d_qk) and m (heads), allocated at the
model's dtype (the KV-cache dtype here).

Only the "inference" mode (the default config's) is described: the "train" modes
refuse lengths that are not whole chunks or cannot return the state, so they are
refused here (the module tree could not be read) rather than guessed.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List

from llm_analysis.exact.derive_mixer_parts import elementwise_specs, state_spec

_PAPER = "xLSTM mLSTM arXiv 2405.04517 (chunkwise form arXiv 2503.14376)"
_NATIVE = {"chunkwise_kernel_fn": "mlstm_chunkwise_native_autograd",
           "sequence_kernel_fn": "mlstm_recurrent_sequence_native",
           "step_kernel_fn": "mlstm_recurrent_step_native"}


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
    parts = [["C", heads * d_qk * d_v, False], ["n", heads * d_qk, False], ["m", heads, False]]
    state = state_spec(rel, calls, parts, _PAPER)
    cache_widths = (getattr(cfg, "qk_dim", None), getattr(cfg, "v_dim", None))
    if cache_widths != (int(parent.qk_dim), int(parent.v_dim)):
        # xLSTMCache is allocated from the config's widths, rounded up to a multiple of 64,
        # the layer computes with the unrounded ones: transformers cannot continue a context
        state["decode_refusal"] = (f"transformers' xLSTMCache holds qk/v widths {cache_widths[0]}/{cache_widths[1]} "
                                   f"but the layer computes {parent.qk_dim}/{parent.v_dim}, so it cannot carry "
                                   "the state")
    state["recurrence"] = {"kind": "mlstm", "heads": heads, "d_qk": d_qk, "d_v": d_v,
                           "chunk": int(cfg.chunk_size), "max_chunk": int(cfg.max_inference_chunksize),
                           "split_refusal": state["decode_refusal"]}
    return elementwise_specs(rel, fresh, calls) + [state]


HANDLERS: Dict[str, Callable[..., List[Dict[str, Any]]]] = {"xLSTMBackend": _mlstm_backend}
