"""Block attention residuals (derive path; needs the live modules).

Block AttnRes ("Attention Residuals", MoonshotAI, 2026; repository
MoonshotAI/Attention-Residuals) replaces the residual sum with a softmax attention over
depth: at each site a learned pseudo-query (one vector, or a few) attends, separately at
every token position, over the block representations completed so far plus the current
partial sum. transformers' Inkling2 (Inkling2BlockAttentionResidual) runs it before
attention (`attention_input`: 1 query, 3 in full-attention layers for q, k and v),
before the MLP (`mlp_input`) and before the final norm (`final_input`), as one
`F.scaled_dot_product_attention` per token: q [n_q, d] against n_b block states [n_b, d]
(keys and values alike), i.e. 2 n_q n_b d MACs per token.

The number of block states n_b depends on where the site is: the model starts with none,
and appends the layer input at every block boundary (layer index divisible by
`n_layers_per_attn_res_block`), after the layer for the model's own list and before its
MLP for the layer's copy. So before layer i the list holds ceil(i / n) states; the
attention input sees those plus the partial sum, the MLP input one more when layer i is
a boundary, the final input ceil(L / n) + 1. The work is per token and independent of
the context: a `row_flops` spec (the same for prefill, decode and training), checked
against FlopCounterMode like every spec.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List

from llm_analysis.exact.derive_mixer_parts import elementwise_specs, mixer_spec
from llm_analysis.exact.derive_roles import block_group


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


HANDLERS: Dict[str, Callable[..., List[Dict[str, Any]]]] = {
    "Inkling2BlockAttentionResidual": _block_attention_residual,
}
