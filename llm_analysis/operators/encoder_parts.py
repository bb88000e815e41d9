"""Operators of encoder variants the plain BERT/GPT layout lacks, hooked into
`LayerDescriber` by small calls:

* extra lookup tables (`ModelConfig.extra_embedding_tables`): each table's weights
  are parameters and each is read once per token; lookups are not FLOPs;
* layers shared across the depth (`ModelConfig.num_unique_layers`, ALBERT,
  arXiv 1909.11942 §3.1): the stack runs `num_layers` layer executions over
  `num_unique_layers` distinct layers. Every execution has its FLOPs and reads its
  weights (bytes), but only the first execution of each distinct layer holds them
  (parameters, weight memory). Execution e runs distinct layer e // r with
  r = num_layers / num_unique_layers (ALBERT's groups of consecutive layers), so
  executions e % r == 0 own the weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from ..config import ModelConfig
from .records import LayerKind, Operator, Phase

__all__ = ["SharedLayerKind", "extra_table_ops", "shared_layer_groups", "without_params"]


def extra_table_ops(d, phase: Phase) -> List[Operator]:
    """One lookup per extra table of describer `d`'s model (replicated over TP)."""
    t, ops = phase.tokens, []
    for i, (rows, width) in enumerate(d.model.extra_embedding_tables):
        n = rows * width
        ops.append(Operator(name=f"extra_embedding_{i}", group="embedding", kind="embedding", params=n,
                            params_per_gpu=n, weight_bytes_per_gpu=n * d.e_bytes,
                            bytes_read_per_gpu=t * width * d.e_bytes, bytes_written_per_gpu=t * width * d.a_bytes,
                            shapes=f"[{rows}x{width}] lookup x {t}"))
    return ops


@dataclass(frozen=True)
class SharedLayerKind(LayerKind):
    """A layer kind of a model with shared layers: `owns_params` False for an execution
    of a layer whose weights an earlier execution holds."""

    owns_params: bool = True

    @property
    def label(self) -> str:
        return super().label + ("" if self.owns_params else " (shared)")


def _owns(model: ModelConfig, i: int) -> bool:
    return i % (model.num_layers // model.num_unique_layers) == 0


def shared_layer_groups(model: ModelConfig, counts: Optional[List[int]] = None) -> List[Dict[LayerKind, int]]:
    """Layer groups of each pipeline stage (`counts[s]` consecutive layers; one stage of
    all layers when None), kinds split into owning and repeated executions."""
    stages, start = [], 0
    for n in counts or [model.num_layers]:
        groups: Dict[LayerKind, int] = {}
        for i in range(start, start + n):
            k = SharedLayerKind(model.is_moe_layer(i), model.layer_attention_type(i), _owns(model, i))
            groups[k] = groups.get(k, 0) + 1
        stages.append(groups)
        start += n
    return stages


def without_params(ops: List[Operator]) -> List[Operator]:
    """The operators of a repeated execution: same FLOPs and bytes read, no parameters
    or weight memory of their own: the weights they read are another operator's
    (`shared_weight_bytes_read_per_gpu`). The operators are fresh: edited in place."""
    for op in ops:
        op.shared_weight_bytes_read_per_gpu += op.weight_bytes_per_gpu
        op.params, op.params_per_gpu, op.weight_bytes_per_gpu = 0, 0.0, 0.0
    return ops
