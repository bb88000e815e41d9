"""The phase a model's layers run, given the phase asked for (torch-free).

Prepended tokens: CPM-Ant (`CpmAntModel.forward`) puts `prompt_length` learned ids before
every sequence, runs its layers over both and drops them before the head. The probe sees
layers with a constant P more rows per sequence (at two lengths); the description records
`prefix_tokens` and the layers run `prefixed_phase`: P more keys and, over the prompt, P
more queries; embedding and head keep the phase. (A decode step also re-embeds the whole
sequence: lookups, no FLOPs; not counted.)

Padded inputs: Longformer pads every input to a multiple of its window
(architectures/longformer.py): `pad_to_multiple`, `padded_phase`.
"""

from __future__ import annotations

from dataclasses import replace
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
    if not prefix:
        return phase
    q = phase.q_len + prefix if phase.past_len == 0 else phase.q_len
    return replace(phase, q_len=q, kv_len=phase.kv_len + prefix)


def prefix_of(desc: Dict[str, Any]) -> int:
    return int(desc.get("prefix_tokens") or 0)


# Padded inputs. The description's `pad_to_multiple` m: the embedding and every layer run
# on the new tokens padded to a multiple of m (a pass over the prompt; a phase with cached
# context is left as given), the head on the tokens given.
def padded_len(seq_len: int, multiple: int) -> int:
    return -(-seq_len // multiple) * multiple if multiple else seq_len


def is_padded(rows: List[int], batch: int, seq_len: int, multiple: int) -> bool:
    """True when every call saw the padded tokens of every sequence."""
    return bool(multiple) and bool(rows) and all(r == batch * padded_len(seq_len, multiple) for r in rows)


def pad_of(desc: Dict[str, Any]) -> int:
    return int(desc.get("pad_to_multiple") or 0)


def padded_phase(phase: Any, multiple: int) -> Any:
    """The phase the embedding and the layers run: the new tokens padded to a multiple
    of `multiple`; a phase with cached context unchanged."""
    if not multiple or phase.past_len > 0:
        return phase
    q = padded_len(phase.q_len, multiple)
    return replace(phase, q_len=q, kv_len=q)
