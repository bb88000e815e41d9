"""DeepSeek-V4's compressed attention (CSA / HCA): read from the module tree, counted per phase.

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
q_len x floor(L / m) pairs per head: a step function of the length (zero below m tokens)
that no per-pair or per-token operator carries (fitted as a wider score per pair, the
default config missed 109,253,230,592 FLOPs at 1024 tokens).

Described here as the `CompressedKeys` variant of the attention core (the scorer is a core
with `only` the compressed keys and no value matmul):
* eager (the transformers convention): q_len x floor(L / m) more pairs, L = kv_len, masked
  afterwards;
* causal (serving kernels): the query at position p sees (p + 1) // m entries (HCA, and the
  indexer; those whole windows before it), min(index_topk, (p + 1) // m) for the CSA core
  (only the selected ones).
The cache per sequence and layer (`cached_elems`, checked against transformers' cache in
the tests): the window's min(L, W - 1) tokens of the one shared K=V tensor, floor(L / m)
entries, the L mod m tokens not yet pooled (their kv and gate projections) and, for CSA once
an entry exists, the overlap state (the last window's first-half kv and gate, m x head width
each), for the core's compressor and the indexer's. The hyper-connection streams (mHC) and
the hash routing of the first MoE layers verify as they are (per-token matmuls, routed top-k).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from llm_analysis.exact.architectures.family import AttentionVariant, ClassRule, ModelRule


@dataclass(frozen=True)
class CompressedKeys(AttentionVariant):
    """One compressed entry per `rate` tokens emitted so far, attended to besides the window
    keys (or, `only`, alone: the lightning indexer's scorer); `topk` caps the entries a
    serving kernel attends to per query (CSA's selected blocks)."""

    rate: int
    topk: Optional[int]
    only: bool
    entry_elems: int  # cached elements of one entry
    buffer_elems: int  # cached elements of one token not yet pooled (its kv and gate projections)
    overlap_elems: int  # CSA's overlap state, once an entry exists

    def reads_window(self) -> bool:
        return not self.only

    def entry_elements(self) -> int:
        return self.entry_elems

    def _capped_sum(self, n: int) -> int:
        """sum over j = 1 .. n of min(topk, j // rate)."""
        if self.topk is None or n < self.topk * self.rate:
            return _causal_sum(n, self.rate)
        below = self.topk * self.rate - 1  # j // rate < topk up to here
        return _causal_sum(below, self.rate) + self.topk * (n - below)

    def compressed_pairs(self, q_len: int, past_len: int, causal: bool) -> int:
        """(query, entry) pairs of the queries at positions past_len .. past_len + q_len - 1."""
        kv_len = past_len + q_len
        if not causal:
            return q_len * (kv_len // self.rate)
        return self._capped_sum(kv_len) - self._capped_sum(past_len)

    def with_entries(self, pairs: int, q_len: int, past_len: int, causal: bool) -> Tuple[int, int]:
        pairs = (0 if self.only else pairs) + self.compressed_pairs(q_len, past_len, causal)
        read = (past_len + q_len) // self.rate
        if causal and self.topk:
            read = min(read, self.topk)
        return pairs, (read if past_len > 0 else 0)

    def eager_keys(self, kv_len: int) -> int:
        """All prompt keys (the masked score matrix) plus the compressed entries, or the entries only."""
        return (0 if self.only else kv_len) + kv_len // self.rate

    def cached_elems(self, seq_len: int) -> int:
        """The entries, the tokens not yet pooled and, once an entry exists, the overlap state."""
        n = seq_len // self.rate
        return n * self.entry_elems + (seq_len % self.rate) * self.buffer_elems + (self.overlap_elems if n else 0)


def _causal_sum(n: int, rate: int) -> int:
    """sum over j = 1 .. n of j // rate."""
    q, r = divmod(n, rate)
    return rate * q * (q - 1) // 2 + q * (r + 1)


def _int(obj: Any, name: str) -> Optional[int]:
    v = getattr(obj, name, None)
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _pooling(comp: Any, head_dim: Optional[int], overlapping: bool, topk: Optional[int], only: bool
             ) -> Optional[CompressedKeys]:
    """The entries of a compressor (or the indexer's) with `kv_proj` / `gate_proj` projections, else None."""
    rate = _int(comp, "compress_rate")
    kv, gate = getattr(comp, "kv_proj", None), getattr(comp, "gate_proj", None)
    if not rate or not head_dim or not hasattr(kv, "out_features") or not hasattr(gate, "out_features"):
        return None
    return CompressedKeys(rate, topk, only, head_dim, int(kv.out_features + gate.out_features),
                          2 * rate * head_dim if overlapping else 0)


def _scorer_keys(indexer: Any) -> Optional[Tuple[int, int, CompressedKeys]]:
    """(heads, width, compressed keys) of a lightning indexer's scorer (a core over the
    compressed indexer keys only, no value matmul), else None."""
    heads, width = _int(indexer, "num_heads"), _int(indexer, "head_dim")
    keys = _pooling(indexer, width, True, None, True)
    if keys is None or heads is None or not _int(indexer, "index_topk") or getattr(indexer, "scorer", None) is None:
        return None
    return heads, width, keys


def _core_keys(module: Any) -> Optional[CompressedKeys]:
    """The compressed keys of an attention module with a compressor in the layout read here, else None."""
    comp = getattr(module, "compressor", None)
    indexer = getattr(comp, "indexer", None)
    topk = _int(indexer, "index_topk") if indexer is not None else None
    keys = _pooling(comp, _int(comp, "head_dim"), indexer is not None, topk, False)
    if keys is None or _int(module, "head_dim") is None or (indexer is not None and _scorer_keys(indexer) is None):
        return None
    return keys


def _attention_core(core: Dict[str, Any], module: Any, cfg: Any, layer_index: Optional[int]) -> Dict[str, Any]:
    """A layer with a compressor: its compressed keys, and the window's cache of one shared
    K=V tensor per token."""
    keys = _core_keys(module) if getattr(module, "compressor", None) is not None else None
    if keys is None:
        return core
    return dict(core, variant=keys, cache_elems=_int(module, "head_dim"))


def _scorer(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any) -> Optional[List[Dict[str, Any]]]:
    """The scorer's core, when `module` is the scorer of a lightning indexer."""
    if getattr(parent, "scorer", None) is not module or not hasattr(parent, "index_topk"):
        return None
    found = _scorer_keys(parent)
    if found is None:
        return None
    heads, width, keys = found
    return [{"name": rel, "op": "attention", "params": 0, "calls": int(calls), "group": "attention",
             "heads": heads, "kv_heads": 1, "d_qk": width, "d_v": 0, "window": None,
             "cache_elems": 0, "causal": True, "variant": keys}]


class _CompressedModel(ModelRule):
    def __init__(self, lm: Any, cfg: Any, probe: Any, module: Any):
        self.lm = lm

    def refusal(self) -> Optional[str]:
        """Why a module that pools keys into compressed entries (a `compressor` child with an
        integer `compress_rate`) cannot be read, else None."""
        rates = {}
        for path, module in self.lm.named_modules():
            comp = getattr(module, "compressor", None)
            rate = getattr(comp, "compress_rate", None)
            if isinstance(rate, int) and rate > 0 and _core_keys(module) is None:
                rates.setdefault(type(comp).__name__, (path, rate))
        if not rates:
            return None
        found = ", ".join(f"{path}.compressor ({cls}, one entry per {rate} tokens)"
                          for cls, (path, rate) in rates.items())
        return (f"{found}: compressed attention (DeepSeek-V4 CSA/HCA) attends to the sliding window plus one "
                "compressed entry per m tokens emitted so far, and CSA's lightning indexer scores every query "
                "against all of them: the attention and indexer FLOPs are q_len x floor(L / m) per head, a step "
                "function of the length that no per-pair or per-token operator carries, and its cache holds "
                "compressed entries, pooling buffers and overlap state besides the window "
                "(llm_analysis/exact/architectures/deepseek_v4.py); this layout is not one it reads")


RULES = {"DeepseekV4Attention": ClassRule(attention_core=_attention_core, model=_CompressedModel),
         "DeepseekV4IndexerScorer": ClassRule(specs=_scorer)}
RECORDS = (CompressedKeys,)
