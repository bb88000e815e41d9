"""Experts that transformers' eager code runs densely, described as the routed model.

The walk (derive.py) finds a fused experts module whose [E, ...] weights see E rows per
token (`dense_experts`). With a routing top-k in the config it is described as routed
and marked (`mark_dense`); without one it is refused (`dense_experts_reason`).

Llama 4 (model card, https://github.com/meta-llama/llama-models/blob/main/models/llama4/MODEL_CARD.md:
Scout 17B active of 109B with 16 experts, Maverick 17B of 400B with 128; one routed plus
a shared expert per token) routes each token to its top-k experts, but transformers 5.23
(`Llama4TextExperts`, models/llama4/modeling_llama4.py) repeats every token once per
expert, scales each copy by its router score (0 outside the top-k) and runs all E copies:
the output of top-k routing at E/k times the routed matmuls. The description states the
routed FLOPs (what a serving engine computes and the active-parameter count implies) and
all E experts' parameters. Verification derives the eager extra from the weight shapes,
never a tolerance:

    FlopCounterMode(module) = described routed FLOPs + 2 x tokens x (E - k) x in x out (per weight),

per module at the probe and in total at both probes (derive_check.py); the coverage
reports (tests/exact_coverage.py) add the same `eager_extra_flops`. Torch-free.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from llm_analysis.exact.derive_specs import rows_per_token
from llm_analysis.exact.layer_phase import prefix_of

EAGER_EXPERTS = "eager_experts"  # spec field: E, the experts transformers runs every token through


def dense_experts(module: Any, rows: List[int], tokens: int) -> Optional[int]:
    """E when a fused experts module ([E, ...] weights) sees E rows per token: every
    token through every expert."""
    counts = {int(p.shape[0]) for p in module.parameters(recurse=False) if p.dim() == 3}
    per_token = rows_per_token(rows, tokens)
    return per_token if len(counts) == 1 and per_token > 1 and per_token in counts else None


def dense_experts_reason(path: str, cls: str, experts: int, k: Optional[int]) -> str:
    """Why a densely run experts module without a routing top-k is refused (with one it
    is described as routed)."""
    return (f"{path} ({cls}) runs every token through all {experts} experts, each output scaled by its "
            "router score, but the config sets no routing top-k: the routed computation the model stands "
            f"for is undefined (transformers computes all {experts} experts per token); set the number of "
            "experts each token uses (num_experts_per_tok)")


def mark_dense(specs: List[Dict[str, Any]], experts: Optional[int]) -> None:
    """Record on the routed-expert specs of a densely run module that transformers runs
    every token through all `experts` copies (the specs themselves stay routed)."""
    if not experts:
        return
    for s in specs:
        if s["op"] == "experts" and s.get("tokens") == "routed":
            s[EAGER_EXPERTS] = int(experts)


def spec_extra_flops(s: Dict[str, Any], tokens: int, top_k: int) -> int:
    """FLOPs transformers' eager forward computes for spec `s` beyond the described routed
    ones, for `tokens` tokens: 2 x tokens x (E - k) x in x out per run (0 for a spec
    that is not marked)."""
    e = s.get(EAGER_EXPERTS)
    if not e:
        return 0
    return 2 * tokens * (int(e) - int(top_k)) * int(s["in"]) * int(s["out"]) * int(s.get("calls", 1))


def has_dense_experts(desc: Optional[Dict[str, Any]]) -> bool:
    return bool(desc) and any(s.get(EAGER_EXPERTS) for kind in desc.get("kinds", ()) for s in kind)


def eager_extra_flops(desc: Optional[Dict[str, Any]], batch: int, seq_len: int) -> int:
    """(E/k - 1) x the routed expert FLOPs of one prefill of `batch` x `seq_len` tokens,
    over every layer execution: what FlopCounterMode counts for the transformers model
    beyond the description's prefill FLOPs (0 for a description without dense experts)."""
    if not has_dense_experts(desc):
        return 0
    k = int((desc.get("experts") or {}).get("top_k") or 0)
    tokens = batch * (seq_len + prefix_of(desc))
    return sum(spec_extra_flops(s, tokens, k) for index, _owns in desc["layers"] for s in desc["kinds"][index])


def dense_note(desc: Optional[Dict[str, Any]]) -> str:
    """The sentence the derived ModelConfig's `source` carries for such a model."""
    if not has_dense_experts(desc):
        return ""
    e = next(s[EAGER_EXPERTS] for kind in desc["kinds"] for s in kind if s.get(EAGER_EXPERTS))
    k = desc["experts"]["top_k"]
    return (f"; routed experts counted as top-{k} of {e} (transformers' eager code runs every token through "
            f"all {e}, {e / k:g}x those FLOPs: see llm_analysis/exact/dense_experts.py)")
