"""Checks of the per-layer attention shape fields of ModelConfig: per-layer key/value
head counts, per-layer attention sinks, and a value head width different from the
query/key head width on multi-head attention (MiMo-V2-Flash, transformers 5.23
MiMoV2FlashAttention: sliding layers have twice the key/value heads and a learned
sink logit per head; values are v_head_dim wide, queries/keys head_dim), and layers
whose values are the key projection's output (Gemma 4's attention_k_eq_v).

Kept apart from schema/model.py so that module stays small; it raises ValueError,
which pydantic turns into the ConfigError naming the field.
"""

from __future__ import annotations

__all__ = ["check_layer_attention_fields"]


def check_layer_attention_fields(m) -> None:
    """`layer_kv_heads` / `layer_attn_sinks` / `layer_values_from_keys` hold one entry per
    layer; each KV-head count divides n_head; neither they nor an MHA `v_head_dim` combine
    with MLA or attention experts (those describe their own shapes); per-layer KV heads
    combine with per-layer head widths (Gemma 4), sinks and `v_head_dim` do not."""
    kv = m.layer_kv_heads
    if kv is not None:
        if len(kv) != m.num_layers or any(h <= 0 or m.n_head % h for h in kv):
            raise ValueError(f"field 'layer_kv_heads' = {kv!r} must hold one key/value head count per layer "
                             f"(num_layers = {m.num_layers}), each dividing n_head = {m.n_head}")
    sinks = m.layer_attn_sinks
    if sinks is not None:
        if len(sinks) != m.num_layers:
            raise ValueError(f"field 'layer_attn_sinks' has {len(sinks)} entries; it must have one per layer "
                             f"(num_layers = {m.num_layers})")
        if m.attn_sinks:
            raise ValueError("fields 'attn_sinks' (every layer) and 'layer_attn_sinks' (per layer) are both "
                             "set; give one of them")
    split_v = not m.is_mla and m.v_head_dim is not None
    given = [f for f, on in (("layer_kv_heads", kv is not None), ("layer_attn_sinks", sinks is not None),
                             ("v_head_dim", split_v)) if on]
    if given and (m.is_mla or m.attn_experts or m.cross_attention or m.kv_shared_layers):
        raise ValueError(f"fields {given} describe plain multi-head attention; they do not combine with "
                         "MLA (kv_lora_rank), attn_experts, cross_attention or kv_shared_layers")
    # per-layer KV heads beside per-layer head widths (Gemma 4's full-attention layers: wider heads,
    # fewer KV heads); sinks and a separate value width are not described per head width
    width_given = [f for f in ("layer_attn_sinks", "v_head_dim") if f in given]
    if width_given and m.layer_head_dims is not None:
        raise ValueError(f"fields {width_given} do not combine with per-layer head widths (layer_head_dims)")
    _check_values_from_keys(m)


def _check_values_from_keys(m) -> None:
    """`layer_values_from_keys`: one flag per layer, on multi-head attention whose values are
    as wide as its keys (they are the key projection's output)."""
    flags = m.layer_values_from_keys
    if flags is None:
        return
    if len(flags) != m.num_layers:
        raise ValueError(f"field 'layer_values_from_keys' has {len(flags)} entries; it must have one per layer "
                         f"(num_layers = {m.num_layers})")
    if any(flags) and (m.is_mla or m.attn_experts or m.cross_attention or m.v_head_dim is not None):
        raise ValueError("field 'layer_values_from_keys' (values reused from the key projection) needs plain "
                         "multi-head attention with values as wide as keys: it does not combine with MLA "
                         "(kv_lora_rank), attn_experts, cross_attention or v_head_dim")
