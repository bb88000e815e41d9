"""The part names of llm-analysis 0.2.2's latency breakdowns, from our operator groups.

0.2.2 splits a forward pass into six parts (`latency_fwd_{attn, mlp, layernorm, tp_comm,
input_embedding, output_embedding_loss}`) and a layer into four (attn, mlp, layernorm,
tp_comm). Our operator groups (group_times.py) map onto them:

    attention (and mixer blocks)      -> attn
    mlp, experts, router              -> mlp
    norm                              -> layernorm
    tp_communication                  -> tp_comm
    embedding                         -> input_embedding
    lm_head                           -> output_embedding_loss

tp_comm holds every tensor-parallel collective, the vocab-parallel embedding's all-reduce
included (0.2.2 counts that one in input_embedding, as get_latency_fwd_input_embedding still does).
A decode step's KV-cache read (`attention_kv_cache`, `mixer_state`) is not in attn: 0.2.2
reports it apart as `kv_cache_latency`, and so do we. Groups 0.2.2 has no part for
(ep / cp / pp communication, a vision tower, ...) go under extra keys named after the group
(`<prefix>latency_fwd_ep_comm`, `..._vision_tower`), so that all the keys still sum to the total."""

from __future__ import annotations

from typing import Dict

MIRROR_PARTS = ("attn", "mlp", "layernorm", "tp_comm", "input_embedding", "output_embedding_loss")

_PART_OF_GROUP = {
    "attention": "attn", "mlp": "mlp", "experts": "mlp", "router": "mlp", "norm": "layernorm",
    "tp_communication": "tp_comm", "embedding": "input_embedding", "lm_head": "output_embedding_loss",
}


def part_of_group(group: str) -> str:
    """The 0.2.2 part a group's time is filed under; an extra part named after the group
    (`ep_communication` -> `ep_comm`, spaces as underscores) where 0.2.2 has none."""
    if group in _PART_OF_GROUP:
        return _PART_OF_GROUP[group]
    return group.replace("_communication", "_comm").replace(" ", "_")


def mirror_parts(group_latency_s: Dict[str, float], prefix: str = "") -> Dict[str, float]:
    """`{prefix}latency_fwd_<part>` for 0.2.2's six parts (0.0 when absent), then the extra parts."""
    out = {f"{prefix}latency_fwd_{p}": 0.0 for p in MIRROR_PARTS}
    for group, t in group_latency_s.items():
        key = f"{prefix}latency_fwd_{part_of_group(group)}"
        out[key] = out.get(key, 0.0) + t
    return out


# the KV-cache read of a decode step: 0.2.2 reports it apart (kv_cache_latency), not among the parts
KV_CACHE_GROUPS = ("attention_kv_cache", "mixer_state")


def mirror_summary_parts(groups: Dict[str, Dict[str, float]], prefix: str) -> Dict[str, float]:
    """`{prefix}latency_fwd_<part>` from a summary's group breakdown (`{group: {"latency_s": ...}}`): 0.2.2's six
    parts, then the extra parts (`..._ep_comm`, ...), the KV-cache read left out (`kv_cache_latency` holds it).
    Like the breakdown they restate, they are one pass unpipelined: they sum to `prefill_latency_unpipelined`
    (a decode step's with `kv_cache_latency`), which pipeline stages shorten to the phase's latency."""
    return mirror_parts({g: v["latency_s"] for g, v in groups.items() if g not in KV_CACHE_GROUPS}, prefix)
