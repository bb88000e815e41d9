"""DeepSeek-V4's compressed attention: why the module-tree description refuses it.

DeepSeek-V4 (transformers 5.23 `DeepseekV4Attention`, models/deepseek_v4; the V4 report's
§2.3, cited by its docstrings) runs two kinds of attention layers besides a sliding
window of W = `sliding_window` keys (keys and values one shared tensor):

* HCA (`heavily_compressed_attention`): every m' = compress_rates["heavily_compressed_attention"]
  (128) tokens are pooled into one compressed entry (a softmax-gated sum of
  `compressor.kv_proj` outputs: element-wise, no matmul); the queries attend to the window
  and to the floor(L / m') entries emitted so far;
* CSA (`compressed_sparse_attention`): entries every m = 4 tokens, and a lightning indexer
  that scores every query against all floor(L / m) compressed indexer keys
  (index_n_heads x index_head_dim per query and entry, `DeepseekV4IndexerScorer`'s matmul)
  and keeps the top `index_topk` for the core; transformers' eager core then multiplies
  against all floor(L / m) entries and masks the rest.

The FLOPs of the core and of the scorer are therefore q_len x (keys + floor(L / m)) and
q_len x floor(L / m) per head: a step function of the length, zero below m tokens. A
description by pairs and tokens fits them only at lengths where L / m is whole and
non-zero: at the probe (16 tokens) HCA has no entry, and at 1024 tokens FlopCounterMode
counts 109,253,230,592 FLOPs more than such a description of the default config: 23 HCA
cores x 1,073,741,824 (8 entries x 1024 queries x 64 heads x 2 x (512 + 512)) and 20
indexer scorers x 4,227,858,432 (2 x 1024 x 64 x 128 x (256 - 4 entries fitted at the
probe's rate)). The cache is not a per-token KV cache either: the window (W - 1 tokens of
one shared K=V tensor), the compressed entries, the not-yet-pooled tokens' kv and gate
projections, and CSA's overlap state. The hyper-connection streams (mHC) and the hash
routing of the first MoE layers do verify (per-token matmuls, routed top-k).

This module finds such attention modules so the derivation refuses them with that
reason (derive.py), rather than fitting the compressed keys as a wider score per pair.
"""

from __future__ import annotations

from typing import Any, Optional


def compressed_attention(lm: Any) -> Optional[str]:
    """The refusal reason when a module of `lm` pools keys into compressed entries
    (a `compressor` child with an integer `compress_rate`), else None."""
    rates = {}
    for path, module in lm.named_modules():
        comp = getattr(module, "compressor", None)
        rate = getattr(comp, "compress_rate", None)
        if isinstance(rate, int) and rate > 0:
            rates.setdefault(type(comp).__name__, (path, rate))
    if not rates:
        return None
    found = ", ".join(f"{path}.compressor ({cls}, one entry per {rate} tokens)" for cls, (path, rate) in rates.items())
    return (f"{found}: compressed attention (DeepSeek-V4 CSA/HCA) attends to the sliding window plus one "
            "compressed entry per m tokens emitted so far, and CSA's lightning indexer scores every query against "
            "all of them: the attention and indexer FLOPs are q_len x floor(L / m) per head, a step function of "
            "the length that no per-pair or per-token operator carries, and its cache holds compressed entries, "
            "pooling buffers and overlap state besides the window (llm_analysis/exact/derive_compressed.py)")
