"""A batch sweep of an inference setup: `analysis.inference` at batch sizes 1, 2,
4, ... up to the largest that fits, and the batch at which a decode step turns
compute-bound. A driver over the analysis object's public methods (its operator
records carry FLOPs and bytes per GPU); the sweep chart draws what it returns."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from llm_analysis.errors import DoesNotFitError


def decode_compute_bound_batch(analysis, seq_len: int, context_len: int, limit: int = 1 << 22) -> Optional[int]:
    """Smallest batch at which the decode step's MLP (or experts) matmuls, taken
    together, reach the ridge point (memory is not checked); None above `limit`."""
    ridge = analysis.get_ridge_point()

    def compute_bound(b: int) -> bool:
        rows = [r for r in analysis.operators("decode", b, seq_len, context_len, per_layer=False)
                if r["group"] in ("mlp", "experts") and r["kind"] == "matmul"]
        f = sum(r["flops_per_gpu"] for r in rows)
        by = sum(r["bytes_per_gpu"] for r in rows)
        return by > 0 and f / by >= ridge

    if compute_bound(1):
        return 1
    hi = 2
    while not compute_bound(hi):
        hi *= 2
        if hi > limit:
            return None
    lo = hi // 2
    while hi - lo > 1:  # bisect: lo is memory-bound, hi compute-bound
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if compute_bound(mid) else (mid, hi)
    return hi


def _batches(max_b: int, max_points: int) -> List[int]:
    """1, 2, 4, ... below max_b, then max_b itself."""
    batches = []
    b = 1
    while b < max_b and len(batches) < max_points - 1:
        batches.append(b)
        b *= 2
    batches.append(max(max_b, 1))
    return batches


def batch_sweep(analysis, summary: Dict[str, Any], sweep_kwargs: Optional[Dict[str, Any]] = None,
                max_points: int = 40) -> Dict[str, Any]:
    """analysis.inference over batch sizes 1, 2, 4, ... up to the largest that fits.

    Returns {'batch': [...], 'tpot_s': [...], 'ttft_s': [...], 'decode_tokens_per_sec': [...],
    'max_batch': int, 'compute_bound_batch': int or None}."""
    kw = dict(seq_len=summary.get("seq_len", 512), num_tokens_to_generate=summary.get("num_tokens_to_generate", 32),
              use_kv_cache=summary.get("use_kv_cache", True))
    kw.update(sweep_kwargs or {})
    max_b = min(summary.get("decode_max_batch_size_per_gpu") or 1, summary.get("prefill_max_batch_size_per_gpu")
                or 1)
    out = {"batch": [], "tpot_s": [], "ttft_s": [], "decode_tokens_per_sec": [], "max_batch": max_b}
    for b in _batches(max_b, max_points):
        try:
            s = analysis.inference(batch_size_per_gpu=b, **kw)
        except DoesNotFitError:
            break
        out["batch"].append(b)
        out["tpot_s"].append(s["decode_latency"])
        out["ttft_s"].append(s["prefill_latency"])
        out["decode_tokens_per_sec"].append(s["decode_tokens_per_sec"])
    seq = kw["seq_len"]
    ctx = seq + max(kw["num_tokens_to_generate"] // 2, 1)  # the middle of the generation
    out["compute_bound_batch"] = decode_compute_bound_batch(analysis, seq, ctx)
    return out
