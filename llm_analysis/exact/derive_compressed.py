"""DeepSeek-V4's compressed attention (CSA / HCA), derived from the module tree.

DeepSeek-V4 (transformers 5.23 `DeepseekV4Attention`, models/deepseek_v4; the V4 report's
§2.3, cited by its docstrings) runs, besides a sliding window of W = `sliding_window` keys
(keys and values one shared tensor), compressed keys:

* HCA (`heavily_compressed_attention`): every m = compress_rates["heavily_compressed_attention"]
  (128) tokens are pooled into one compressed entry (a softmax-gated sum of the compressor's
  `kv_proj` outputs: element-wise, no matmul); the queries attend to the window and to the
  floor(L / m) entries emitted so far (L: tokens of the sequence so far);
* CSA (`compressed_sparse_attention`): an entry every m = 4 tokens, and a lightning indexer
  that scores every query against all floor(L / m) compressed indexer keys
  (`DeepseekV4IndexerScorer`: index_n_heads x index_head_dim per query and entry) and keeps
  the top `index_topk` for the core; transformers' eager core multiplies against all
  floor(L / m) entries and masks the rest.

So the core and the scorer compute q_len x (window keys + floor(L / m)) and
q_len x floor(L / m) pairs per head: a step function of the length (zero below m tokens),
which no per-pair or per-token operator carries. Before this module, the derivation fitted
the CSA core's entries as a wider score per pair (exact only when L / m is whole) and missed
the HCA entries and the scorer's growth: at 1024 tokens FlopCounterMode counted
109,253,230,592 FLOPs more than the description of the default config (23 HCA cores x
1,073,741,824 = 8 entries x 1024 queries x 64 heads x 2 x (512 + 512), and 20 scorers x
4,227,858,432 = 2 x 1024 x 64 x 128 x (256 - the 4 entries per query fitted at the probe)).

Described here as a `compressed` field of the attention core ({"rate", "topk", "only",
"entry_elems", "buffer_elems", "overlap_elems"}; the scorer is a core with `only` the
compressed keys and no value matmul), counted by `compressed_pairs`:
* eager (the transformers convention): q_len x floor(L / m) more pairs, L = kv_len;
* causal (serving kernels): the query at position p sees (p + 1) // m entries (HCA, and the
  indexer), min(index_topk, (p + 1) // m) for the CSA core (only the selected ones).
The cache per sequence and layer (`cache_elems`, checked against transformers' cache in the
tests): the window's min(L, W - 1) tokens of the one shared K=V tensor, floor(L / m)
entries, the L mod m tokens not yet pooled (their kv and gate projections) and, for CSA once
an entry exists, the overlap state (the last window's first-half kv and gate, m x head
width each), for the core's compressor and the indexer's. The hyper-connection streams
(mHC) and the hash routing of the first MoE layers verify as they are (per-token matmuls,
routed top-k).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional


def compressed_attention(lm: Any) -> Optional[str]:
    """The refusal reason when a module of `lm` pools keys into compressed entries (a
    `compressor` child with an integer `compress_rate`) in a layout `core_fields` does not
    read, else None."""
    rates = {}
    for path, module in lm.named_modules():
        comp = getattr(module, "compressor", None)
        rate = getattr(comp, "compress_rate", None)
        if isinstance(rate, int) and rate > 0 and core_fields(module) is None:
            rates.setdefault(type(comp).__name__, (path, rate))
    if not rates:
        return None
    found = ", ".join(f"{path}.compressor ({cls}, one entry per {rate} tokens)" for cls, (path, rate) in rates.items())
    return (f"{found}: compressed attention (DeepSeek-V4 CSA/HCA) attends to the sliding window plus one "
            "compressed entry per m tokens emitted so far, and CSA's lightning indexer scores every query against "
            "all of them: the attention and indexer FLOPs are q_len x floor(L / m) per head, a step function of "
            "the length that no per-pair or per-token operator carries, and its cache holds compressed entries, "
            "pooling buffers and overlap state besides the window (llm_analysis/exact/derive_compressed.py); this layout is not one it reads")


def _int(obj: Any, name: str) -> Optional[int]:
    v = getattr(obj, name, None)
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _pooling(comp: Any, head_dim: Optional[int], overlapping: bool) -> Optional[Dict[str, Any]]:
    """{"rate", "entry_elems", "buffer_elems", "overlap_elems"} of a compressor (or the
    indexer's) with `kv_proj` / `gate_proj` projections, else None."""
    rate = _int(comp, "compress_rate")
    kv, gate = getattr(comp, "kv_proj", None), getattr(comp, "gate_proj", None)
    if not rate or not head_dim or not hasattr(kv, "out_features") or not hasattr(gate, "out_features"):
        return None
    return {"rate": rate, "entry_elems": head_dim, "buffer_elems": int(kv.out_features + gate.out_features),
            "overlap_elems": 2 * rate * head_dim if overlapping else 0}


def core_fields(module: Any) -> Optional[Dict[str, Any]]:
    """Fields for the attention core of `module` when it has a compressor (else None):
    `compressed` and the window's cache of one shared K=V tensor per token."""
    comp = getattr(module, "compressor", None)
    if comp is None:
        return None
    indexer = getattr(comp, "indexer", None)
    pooled = _pooling(comp, _int(comp, "head_dim"), indexer is not None)
    head_dim = _int(module, "head_dim")
    if pooled is None or head_dim is None or (indexer is not None and indexer_fields(indexer) is None):
        return None
    topk = _int(indexer, "index_topk") if indexer is not None else None
    return {"compressed": dict(pooled, topk=topk, only=False), "cache_elems": head_dim}


def indexer_fields(indexer: Any) -> Optional[Dict[str, Any]]:
    """Heads, width and `compressed` of a lightning indexer's scorer (a core over the
    compressed indexer keys only, no value matmul), else None."""
    heads, width = _int(indexer, "num_heads"), _int(indexer, "head_dim")
    pooled = _pooling(indexer, width, True)
    if pooled is None or heads is None or not _int(indexer, "index_topk") or getattr(indexer, "scorer", None) is None:
        return None
    return {"heads": heads, "d_qk": width, "compressed": dict(pooled, topk=None, only=True)}


def scorer_specs(rel: str, module: Any, calls: int, parent: Any) -> Optional[List[Dict[str, Any]]]:
    """[the scorer's core] when `module` is the scorer of a lightning indexer, else None."""
    if getattr(parent, "scorer", None) is not module or not hasattr(parent, "index_topk"):
        return None
    fields = indexer_fields(parent)
    if fields is None:
        return None
    return [{"name": rel, "op": "attention", "params": 0, "calls": int(calls), "group": "attention",
             "heads": fields["heads"], "kv_heads": 1, "d_qk": fields["d_qk"], "d_v": 0, "window": None,
             "cache_elems": 0, "causal": True, "compressed": fields["compressed"]}]


def eager_keys(core: Dict[str, Any], kv_len: int) -> int:
    """Keys per query of the eager core at a prompt of kv_len tokens: all of them (the
    masked score matrix) plus the compressed entries, or the entries only."""
    comp = core.get("compressed")
    if not comp:
        return kv_len
    return (0 if comp["only"] else kv_len) + kv_len // comp["rate"]
