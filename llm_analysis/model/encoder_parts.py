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
  executions e % r == 0 own the weights;
* bottleneck adapters after the MLP (`ModelConfig.adapter_dim`, X-MOD, arXiv
  2205.06266): `num_adapters` per layer hold weights, each token runs one of them;
* a transform before the LM head (`ModelConfig.lm_head_transform`): a hidden x hidden
  projection, activation and norm at every logits position;
* a first layer without the norm before attention (`ModelConfig.first_layer_attn_norm`
  False: ModernBERT's layer 0 reads the embedding norm's output directly).
Shared layers and a first layer apart make layers differ beyond MoE / attention kind: such
models get `VariantLayerKind`s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from llm_analysis.config import ModelConfig
from llm_analysis.model.records import LayerKind, Operator, Phase

__all__ = ["VariantLayerKind", "adapter_ops", "extra_table_ops", "has_variant_layers", "head_transform_ops",
           "variant_layer_groups", "without_params"]


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


def adapter_ops(d, phase: Phase) -> List[Operator]:
    """Down and up projections of the adapters of one layer (replicated over TP): FLOPs
    of the one each token runs; parameters and weight reads of all (a batch may mix
    every language)."""
    m = d.model
    if m.adapter_dim is None:
        return []
    ops = [d.matmul_op("adapter_down", "mlp", phase, phase.tokens, m.hidden_dim, m.adapter_dim, True),
           d.matmul_op("adapter_up", "mlp", phase, phase.tokens, m.adapter_dim, m.hidden_dim, True)]
    for op in ops:
        op.params *= m.num_adapters
        op.params_per_gpu *= m.num_adapters
        extra_bytes = op.weight_bytes_per_gpu * (m.num_adapters - 1)
        op.weight_bytes_per_gpu += extra_bytes
        op.bytes_read_per_gpu += extra_bytes
    return ops


def head_transform_ops(d, phase: Phase, tokens: int) -> List[Operator]:
    """The dense + norm before the LM head (replicated over TP), on the logits tokens."""
    m = d.model
    if m.lm_head_transform == "none":
        return []
    return [d.matmul_op("lm_head_transform", "lm_head", phase, tokens, m.hidden_dim, m.hidden_dim,
                        m.lm_head_transform == "dense_bias"),
            d.norm_op("lm_head_transform_norm", "lm_head", tokens, m.hidden_dim)]


@dataclass(frozen=True)
class VariantLayerKind(LayerKind):
    """A layer kind of a model whose layers differ beyond MoE / attention kind:
    `owns_params` False for an execution of a layer whose weights an earlier execution
    holds; `first` for layer 0 when it lacks the norm before attention."""

    owns_params: bool = True
    first: bool = False

    @property
    def label(self) -> str:
        return super().label + ("" if self.owns_params else " (shared)") + (" (first)" if self.first else "")


def has_variant_layers(model: ModelConfig) -> bool:
    return model.num_unique_layers is not None or not model.first_layer_attn_norm


def _owns(model: ModelConfig, i: int) -> bool:
    return model.num_unique_layers is None or i % (model.num_layers // model.num_unique_layers) == 0


def variant_layer_groups(model: ModelConfig, counts: Optional[List[int]] = None) -> List[Dict[LayerKind, int]]:
    """Layer groups of each pipeline stage (`counts[s]` consecutive layers; one stage of
    all layers when None), kinds split into owning and repeated executions and layer 0
    apart when it lacks the norm before attention (O(num_layers): such stacks are shallow)."""
    stages, start = [], 0
    for n in counts or [model.num_layers]:
        groups: Dict[LayerKind, int] = {}
        for i in range(start, start + n):
            k = VariantLayerKind(model.is_moe_layer(i), model.layer_attention_type(i), _owns(model, i),
                                 i == 0 and not model.first_layer_attn_norm)
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
