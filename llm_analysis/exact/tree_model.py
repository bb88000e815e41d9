"""The `ModelConfig` that accompanies a derived description (torch-free): the fields the
rest of the engine reads (name, layers, widths, heads, vocabulary, length, MLP width,
experts, sliding windows), from the first layer of each kind. Counts come from the
description itself.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from llm_analysis.config import ModelConfig
from llm_analysis.errors import UnsupportedArchitectureError
from llm_analysis.exact.dense_experts import dense_note
from llm_analysis.exact.tree_layout import kind_window


def _first(specs: List[Dict[str, Any]], **match) -> Optional[Dict[str, Any]]:
    return next((s for s in specs if all(s.get(k) == v for k, v in match.items())), None)


def _ffn(specs: List[Dict[str, Any]], role: Optional[str]) -> Dict[str, Any]:
    """(width, gated) of the MLP (role None) or routed experts: the input width of the
    row-parallel projection back to the hidden state; gated when two projections, or a
    fused one twice as wide, feed it."""
    group = "mlp" if role is None else "experts"
    row = next((s for s in specs if s.get("group") == group and s.get("expert_role") == role
                and s.get("tp") == "row"), None)
    if row is None:
        return {}
    ups = [s for s in specs if s.get("group") == group and s.get("expert_role") == role and s.get("tp") == "column"]
    gated = len(ups) >= 2 or any(s["out"] == 2 * row["in"] for s in ups)
    return {"width": row["in"], "gated": gated}


def _idle_note(desc: Dict[str, Any]) -> str:
    """Says how many parameters sit in modules a text-only forward never runs
    (derive_stacks.idle_spec): counted, with no FLOPs."""
    specs = desc["embedding"] + desc["head"] + [s for k, owns in desc["layers"] if owns for s in desc["kinds"][k]]
    idle = sum(s["params"] for s in specs if s.get("idle"))
    return f"; {idle:,} parameters in modules a text-only forward never runs (image/audio parts: " \
           "counted, no FLOPs)" if idle else ""


def _attention_free_encoder(desc: Dict[str, Any], kinds: List[List[Dict[str, Any]]], name: str
                            ) -> Dict[str, Any]:
    """The attention stand-in of an encoder that mixes tokens without attention (FNet's
    Fourier transform, Lee-Thorp et al. 2021, arXiv 2105.03824, whose FLOPs FlopCounterMode
    does not count): no decode phase, no KV cache; one head as wide as the hidden state
    stands for the mixer in the activation-memory estimate. A model with attention
    projections but no attention core counted (MRA: its attention runs in CUDA kernels,
    and without them transformers returns zeros) is refused: the core is real work that
    nothing here measured."""
    projections = sorted({s["name"] for k in kinds for s in k if s.get("group") == "attention"})
    if desc["task"] != "masked-lm" or projections:
        why = (f": it has attention projections ({', '.join(projections[:3])}) but FlopCounterMode counted no "
               "attention core (computed by a kernel it does not see, or skipped on this installation)"
               if projections else "")
        raise UnsupportedArchitectureError(f"{name}: no attention layer found in the module tree{why}")
    return {"heads": 1, "kv_heads": 1, "d_qk": desc["hidden_dim"]}


def model_config_for(desc: Dict[str, Any], name: str) -> ModelConfig:
    kinds = [desc["kinds"][k] for k, _ in desc["layers"]]
    attn = next((_first(k, op="attention") for k in kinds if _first(k, op="attention")), None)
    if attn is None and any(_first(k, op="state") for k in kinds):
        # a recurrent model (architectures/: RWKV, xLSTM): no heads; one "head" of the hidden width
        # stands in for the fields reports and the activation-memory estimate read
        attn = {"heads": 1, "kv_heads": 1, "d_qk": desc["hidden_dim"]}
    if attn is None:
        attn = _attention_free_encoder(desc, kinds, name)
    windows = [kind_window(k) for k in kinds]
    window = max((w for w in windows if w), default=None)
    mlp = next((f for f in (_ffn(k, None) for k in kinds) if f), {})
    experts = desc.get("experts")
    routed = next((f for f in (_ffn(k, "routed") for k in kinds) if f), {})
    heads = attn["heads"]
    kv = attn["kv_heads"] if attn["kv_heads"] and heads % attn["kv_heads"] == 0 else heads
    fields: Dict[str, Any] = dict(
        name=name, num_layers=len(kinds), n_head=heads, hidden_dim=desc["hidden_dim"],
        vocab_size=desc["vocab_size"], max_seq_len=desc.get("max_seq_len"), num_key_value_heads=kv,
        head_dim=attn["d_qk"], ffn_embed_dim=mlp.get("width") or routed.get("width"),
        mlp_gated_linear_units=bool(mlp.get("gated", routed.get("gated", False))),
        model_type=desc.get("model_type"), encoder_only=desc["task"] == "masked-lm",
        position_embedding_type="none", tie_word_embeddings=False,
        source=f"derived from the transformers module tree of {desc.get('lm_class')}{_idle_note(desc)}"
               f"{dense_note(desc)}")
    if window:
        fields.update(sliding_window=window,
                      layer_types=["sliding_attention" if w else "full_attention" for w in windows])
    if experts and experts.get("count") and experts.get("top_k"):
        fields.update(moe_num_experts=experts["count"], moe_top_k=experts["top_k"],
                      moe_ffn_embed_dim=routed.get("width"))
    return ModelConfig(**fields)
