"""Tokens a model prepends to every sequence itself (torch-free; used by `derive.py`).

CPM-Ant (transformers `CpmAntModel.forward`) puts `prompt_length` learned prompt ids
before the input ids of every sequence, runs its layers over both and drops the
prompt's hidden states before the LM head. A prefill of s tokens therefore runs the
layers over P + s tokens per sequence, attention over (P + s)^2 pairs; a decode step
runs the new tokens only, attending to the P prompt positions kept in the cache too.

The probe sees it as layers whose rows per sequence exceed the prompt length by a
constant P (at two probe lengths). The description records `prefix_tokens`: P, and
the layers' operators (projections, attention cores, collectives, the KV cache) are
those of `prefixed_phase`: P more keys and, in a pass over the prompt (nothing
cached yet), P more queries; the embedding and the head keep the phase as given.
Verification checks all of it against FlopCounterMode at two lengths, like every
other reading. (A decode step also re-embeds the whole sequence before dropping all
but the new tokens: lookups, no FLOPs; they are not counted.)
"""

from __future__ import annotations

from typing import Any, Dict, List


def prefix_rows(rows: List[int], batch: int, seq_len: int) -> int:
    """P when every call saw batch * (seq_len + P) rows with P > 0, else 0."""
    if not rows or rows[0] % batch:
        return 0
    extra = rows[0] // batch - seq_len
    return extra if extra > 0 and all(r == rows[0] for r in rows) else 0


def is_prefixed(rows: List[int], batch: int, seq_len: int, prefix: int) -> bool:
    return bool(prefix) and bool(rows) and all(r == batch * (seq_len + prefix) for r in rows)


def prefixed_phase(phase: Any, prefix: int) -> Any:
    """The phase the layers of a model with `prefix` prepended tokens run: P more keys;
    in a pass over the prompt (nothing cached yet) P more queries too."""
    from dataclasses import replace
    if not prefix:
        return phase
    q = phase.q_len + prefix if phase.past_len == 0 else phase.q_len
    return replace(phase, q_len=q, kv_len=phase.kv_len + prefix)


def prefix_of(desc: Dict[str, Any]) -> int:
    return int(desc.get("prefix_tokens") or 0)
