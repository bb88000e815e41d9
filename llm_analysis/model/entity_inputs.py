"""LUKE's entity parameters (`ModelConfig.entity_inputs`, arXiv 2010.01057 §3): the
entity embeddings (table, projection to hidden, position and token-type tables,
LayerNorm) and the entity-aware query projections of every layer. The phases the
package analyses feed word tokens only; transformers' LukeModel then skips the entity
embeddings and LukeSelfAttention uses only the word query (the w2e / e2w / e2e queries
run only beside entity tokens). So these operators hold parameters and weight memory
(replicated over TP, as LUKE has no TP plan) but no FLOPs and no reads.
"""

from __future__ import annotations

from typing import List

from llm_analysis.model.records import Operator

__all__ = ["entity_attention_ops", "entity_embedding_ops"]


def _idle(d, name: str, group: str, params: int, shapes: str) -> Operator:
    """Weights present in the model that the analysed phases do not run."""
    return Operator(name=name, group=group, kind="embedding", params=params, params_per_gpu=params,
                    weight_bytes_per_gpu=params * d.e_bytes, shapes=shapes + " (entity tokens only)")


def entity_embedding_ops(d) -> List[Operator]:
    """LukeEntityEmbeddings of describer `d`'s model (none without entity_inputs)."""
    m, e = d.model, d.model.entity_inputs
    if e is None:
        return []
    h = m.hidden_dim
    ops = [_idle(d, "entity_embedding", "embedding", e.vocab_size * e.emb_dim, f"[{e.vocab_size}x{e.emb_dim}]")]
    if e.emb_dim != h:  # entity_embedding_dense: Linear(emb_dim, hidden, bias=False)
        ops.append(_idle(d, "entity_embedding_dense", "embedding", e.emb_dim * h, f"[{e.emb_dim}x{h}]"))
    for name, rows in (("entity_position_embedding", e.position_rows), ("entity_token_type_embedding", e.type_rows)):
        if rows:
            ops.append(_idle(d, name, "embedding", rows * h, f"[{rows}x{h}]"))
    # the entity LayerNorm: weight and bias (the word embedding norm's kind)
    ops.append(_idle(d, "entity_embedding_norm", "embedding", 2 * h, f"[{h}] x 2"))
    return ops


def entity_attention_ops(d) -> List[Operator]:
    """The w2e, e2w and e2e query projections of one layer (hidden -> heads x head_dim,
    biased as the word query)."""
    m, e = d.model, d.model.entity_inputs
    if e is None or not e.aware_attention:
        return []
    width = m.n_head * m.head_dim
    n = m.hidden_dim * width + (width if m.qkv_bias else 0)
    return [_idle(d, f"{which}_query", "attention", n, f"[{m.hidden_dim}x{width}]")
            for which in ("w2e", "e2w", "e2e")]
