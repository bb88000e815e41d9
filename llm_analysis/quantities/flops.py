"""FLOPs: the sum of the operators' `flops` (whole model, unsharded; 2 per
multiply-accumulate of matmuls and the attention core)."""

from __future__ import annotations

from typing import Optional, Tuple

from llm_analysis.model import sum_field
from llm_analysis.model.phase_table import FIELDS, phase_table
from llm_analysis.quantities.arguments import count
from llm_analysis.quantities.phases import layer_mean, make_phase

FLOPS = FIELDS.index("flops")


def model_flops(a, batch_size: int, seq_len: int, groups: Optional[Tuple[str, ...]] = None,
                phase: str = "prefill", context_len: Optional[int] = None) -> float:
    ph = make_phase(phase, batch_size, seq_len, context_len)
    d = a.describer
    table = phase_table(d, ph.name, x=ph.kv_len) if groups is None else None
    if table is not None:  # no operators built (model/phase_table.py)
        return table.total(ph.batch, ph.kv_len, FLOPS)
    return d.phase_memo(("model_flops", ph, groups), lambda: sum(
        n * o.flops for n, o in d.weighted_ops(ph) if groups is None or o.group in groups))


def backward_total(a, batch_size: int, seq_len: int) -> float:
    """Backward FLOPs: twice the forward (the gradients w.r.t. the inputs and w.r.t. the
    weights each cost one forward's multiply-adds)."""
    return 2 * model_flops(a, batch_size, seq_len)


def per_layer(a, batch_size: int, seq_len: int, groups: Optional[Tuple[str, ...]] = None) -> float:
    """Forward FLOPs of one layer's operators in `groups` (mean over layers)."""
    ph = make_phase("prefill", batch_size, seq_len)
    return layer_mean(a, ph, lambda ops: sum_field(ops, "flops", groups))


def attention_core(a, batch_size: int, seq_len: int) -> float:
    """FLOPs of the attention core of all layers (what ATTN_COMPUTE recomputes)."""
    ph = make_phase("prefill", batch_size, seq_len)
    return sum(n * o.flops for n, o in a.describer.weighted_ops(ph) if o.kind == "attention")


def decode_step(a, batch_size: int, context_len: int) -> float:
    """One decode step: batch_size new tokens attending to `context_len` tokens each."""
    context_len = count(context_len, "context_len")  # (compared below, before make_phase checks it)
    return model_flops(a, batch_size, context_len - 1 if context_len > 1 else 1, phase="decode",
                       context_len=context_len)
