"""Varied configurations of a model type, derived from its default config.

Issue 14 asks that the coverage check also hold "on other configurations of these
model types", not only on each type's default config. From the default config of a
type (`AutoConfig.for_model(model_type)`, the same the default truth uses) this
module derives small variants, each changing one thing a published checkpoint of
the type may change:

* `layers`: fewer layers (every per-layer list cut to the same length); every other
  variant starts from this small base so the meta model builds fast;
* `kv_heads`: grouped-query attention when the default is multi-head, multi-head
  when it is grouped;
* `flip:<key>`: every boolean key flipped (tied embeddings, biases, qk-norm,
  parallel blocks, sliding window on/off, ...), one per variant;
* `int:<key>`: every structural integer changed (widths, head counts, head_dim,
  expert counts, routed top-k, shared experts, dense-layer prefix, MoE step, vocab,
  learned positions, LoRA ranks of MLA, ...), one per variant;
* `set:<key>`: a key the default leaves unset (FFN width, window, kv heads) set;
* `rope_scaling`: a YaRN scaling entry where the type uses rotary positions;
* `layer_types` / `list:<key>`: a different per-layer pattern.

A variant transformers cannot build is dropped by the generator (recorded as such).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Dict, Iterator, List, Tuple

SMALL_LAYERS = 6  # enough for a 1-in-6 sliding/full pattern and a dense prefix + MoE layers
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "decoder_layers")

# keys about I/O or generation, not the architecture: flipping them tells nothing
_SKIP_BOOLS = {
    "use_cache", "return_dict", "output_hidden_states", "output_attentions", "torchscript",
    "is_encoder_decoder", "is_decoder", "tie_encoder_decoder", "use_bfloat16", "tf_legacy_loss",
    "output_router_logits", "use_return_dict", "gradient_checkpointing", "_attn_implementation_autoset",
    "chunk_size_feed_forward", "is_composition",
}
_SKIP_INTS = re.compile(r"token_id|_id$|num_labels|max_length|min_length|beam|chunk|batch|seed|"
                        r"no_repeat|initializer|^transformers|bucket|cache|^hash|sample|pad|"
                        r"dtype|num_return|length_penalty|_eps|epsilon", re.IGNORECASE)
_STRUCTURAL_INT = re.compile(
    r"size|dim|head|expert|per_tok|top_?k|rank|step|replace|window|group|vocab|layer|position|"
    r"interval|freq|ratio|dense|shared|n_embd|n_inner|d_model|d_ff|dff|width|num_|n_|block|kernel|"
    r"conv|state|lora|sink|latent", re.IGNORECASE)


def layer_key(d: Dict[str, Any]) -> str | None:
    for k in LAYER_KEYS:
        if isinstance(d.get(k), int) and not isinstance(d.get(k), bool):
            return k
    return None


def _cut_lists(d: Dict[str, Any], old: int, new: int) -> Dict[str, Any]:
    """Per-layer lists (length == number of layers) cut to `new` entries; lists of layer
    indices (e.g. MoE layers) drop the indices past the new depth."""
    out = {}
    for k, v in d.items():
        if isinstance(v, list) and len(v) == old and old != new:
            v = v[:new]
        elif (isinstance(v, list) and v and all(isinstance(i, int) and not isinstance(i, bool) for i in v)
              and k.endswith(("layers", "layer_ids", "layer_idx", "layers_idx")) and max(v) >= new):
            v = [i for i in v if i < new]
        out[k] = v
    return out


def small_base(full: Dict[str, Any]) -> Dict[str, Any] | None:
    """The default config with at most SMALL_LAYERS layers (None: no layer key)."""
    key = layer_key(full)
    if key is None:
        return None
    old = full[key]
    new = min(old, SMALL_LAYERS)
    d = _cut_lists(full, old, new)
    d[key] = new
    return d


def _new_int(key: str, v: int, d: Dict[str, Any]) -> int | None:
    if v <= 0:
        return 1
    if v == 1:
        return 2
    if key in ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads",
               "decoder_attention_heads"):
        return v // 2 if v % 2 == 0 else v + 1
    if v < 16:  # counts: experts, top-k, groups, shared experts, dense prefix
        return v - 1 if v > 2 else v + 1
    return v // 2 if v % 4 == 0 else v + v // 2


def _int_variants(base: Dict[str, Any]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    lk = layer_key(base)
    for k, v in base.items():
        if (not isinstance(v, int) or isinstance(v, bool) or k == lk or k.startswith("_")
                or _SKIP_INTS.search(k) or not _STRUCTURAL_INT.search(k)):
            continue
        d = copy.deepcopy(base)
        if k in ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num"):
            heads = next((base[h] for h in ("num_attention_heads", "n_head", "num_heads")
                          if isinstance(base.get(h), int)), None)
            if not heads:
                continue
            d[k] = heads if v != heads else max(1, heads // 4)
        else:
            d[k] = _new_int(k, v, base)
            for kv in ("num_key_value_heads", "num_kv_heads"):  # fewer heads than kv heads is invalid
                if k in ("num_attention_heads", "n_head", "num_heads") and isinstance(d.get(kv), int):
                    d[kv] = min(d[kv], d[k])
        yield f"int:{k}", d


def _bool_variants(base: Dict[str, Any]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    for k, v in base.items():
        if isinstance(v, bool) and k not in _SKIP_BOOLS and not k.startswith("_"):
            d = copy.deepcopy(base)
            d[k] = not v
            if k == "use_sliding_window" and not v and not base.get("sliding_window"):
                d["sliding_window"] = 64
            yield f"flip:{k}", d


# keys a default config may leave unset (None) whose setting changes the shapes
_UNSET = {"n_inner": lambda d: 2 * (d.get("n_embd") or d.get("hidden_size") or 64),
          "sliding_window": lambda d: 64,
          "num_key_value_heads": lambda d: max(1, (d.get("num_attention_heads") or 4) // 4),
          "head_dim": lambda d: 2 * (d.get("hidden_size", 64) // max(1, d.get("num_attention_heads") or 1))}


def _unset_variants(base: Dict[str, Any]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    for k, value_of in _UNSET.items():
        if k in base and base[k] is None:
            d = copy.deepcopy(base)
            d[k] = value_of(base)
            yield f"set:{k}", d


def _rope_variant(base: Dict[str, Any]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    rp = base.get("rope_parameters")
    if not isinstance(rp, dict) or "rope_type" not in rp:
        return  # no rotary entry (or one per layer type): not varied
    d = copy.deepcopy(base)
    d["rope_parameters"] = dict(rp, rope_type="yarn", factor=4.0,
                                original_max_position_embeddings=base.get("max_position_embeddings") or 4096)
    yield "rope_scaling", d


def _list_variants(base: Dict[str, Any]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    n = base.get(layer_key(base) or "", 0)
    for k, v in base.items():
        if not isinstance(v, list) or not v or k.startswith("_"):
            continue
        d = copy.deepcopy(base)
        if len(v) == n and len(set(map(json.dumps, v))) > 1:
            d[k] = list(reversed(v))  # another per-layer pattern with the same entries
        elif all(isinstance(i, int) and not isinstance(i, bool) for i in v) and k.endswith("layers"):
            d[k] = [i for i in range(n) if i not in v][:max(1, len(v))]  # other layer indices
        else:
            continue
        yield ("layer_types" if k == "layer_types" else f"list:{k}"), d


def variants(full: Dict[str, Any]) -> List[Tuple[str, Dict[str, Any]]]:
    """[(variant name, config dict)] for the full default config dict of a type."""
    base = small_base(full)
    if base is None:
        return []
    out = [("layers", base)]
    for gen in (_bool_variants, _int_variants, _unset_variants, _rope_variant, _list_variants):
        out.extend(gen(base))
    return out
