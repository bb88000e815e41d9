"""What a family's rule can change in the exact path, and the typed records it writes.

A family registers a `ClassRule` per transformers class it handles; each hook is optional:
`specs(rel, module, fresh, calls, parent)` gives a module's specs (None: the generic walk
reads it); `child_specs` the same for the children of such a module (ZAYA's CCA
convolutions); `attention_core` adds the family's `AttentionVariant` to a core; `model`
makes a `ModelRule` when the class is in the model. Records in a description (`RowSource`
tokens, `AttentionVariant`, `RecurrentState`) are frozen dataclasses that records.py
writes to JSON and reads back. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from llm_analysis.model import causal_pairs

Spec = Dict[str, Any]
SpecsHandler = Callable[[str, Any, Dict[str, int], int, Any], Optional[List[Spec]]]
CoreHandler = Callable[[Spec, Any, Any, Optional[int]], Spec]


@dataclass(frozen=True)
class ClassRule:
    """The hooks a family registers for one transformers class (module docstring)."""

    specs: Optional[SpecsHandler] = None
    child_specs: Optional[SpecsHandler] = None
    attention_core: Optional[CoreHandler] = None
    model: Optional[Callable[[Any, Any, Any, Any], "ModelRule"]] = None


class ModelRule:
    """What a family changes in the walk over one model (derive.py). Every default leaves
    the generic walk as it is."""

    def refusal(self) -> Optional[str]:
        """Why the model cannot be described, checked before the walk."""
        return None

    def layers(self, walk: Any, stacks: List[str], layers: List[str]) -> Tuple[List[str], List[str]]:
        """The layer stacks and layers in order, given the generic ones."""
        return stacks, layers

    def kinds(self, walk: Any, layers: List[str]) -> Optional[Tuple[List[List[Spec]], List[List[Any]]]]:
        """(kinds, layers) of the description when the family reads its layers itself."""
        return None

    def token_source(self, path: str) -> Optional["RowSource"]:
        """The rows the module at `path` sees, when the family fixes them."""
        return None

    def reads_every_token(self, rows: List[int], batch: int, seq_len: int) -> bool:
        """True when `rows` (rows per call) are every token of the phase as the family runs it."""
        return False

    def rows_per_token(self, rows: List[int], tokens: int) -> int:
        """Rows per token of a module that sees several, when the generic reading finds none."""
        return 0

    def site_specs(self, walk: Any, path: str, rel: str, module: Any, own_per_exec: int,
                   per_exec: int) -> Optional[List[Spec]]:
        """Specs of a module's FLOPs that no projection of its own explains."""
        return None

    def description_fields(self) -> Dict[str, Any]:
        """Fields the family adds to the description."""
        return {}

    def finish(self, desc: Dict[str, Any]) -> None:
        """Limits the family records in the finished description (longest input, refused phases)."""


class RowSource:
    """A spec's `tokens` when the rows it sees are none of the generic sources
    (all | batch | logits | routed | none)."""

    # True when layers reading it see another number of rows than the input has tokens
    # (pooled stages, a latent array): training's activation estimate does not follow them
    differs_from_tokens = False

    def rows(self, phase: Any, description: Dict[str, Any]) -> int:
        raise NotImplementedError


class AttentionVariant:
    """How a family's attention core differs from the generic one (tree_describer._core_op);
    an attention spec without a `variant` is read through this base, whose answers are
    the generic core's."""

    # derive.py: a module computing more than its eager core has the rest fitted as
    # per-token work; False when the variant's own FLOPs are not the eager core's
    fits_remainder = True

    def operator(self, describer: Any, phase: Any, spec: Spec) -> Any:
        """The whole Operator of the core, or None to build the generic one."""
        return None

    def causal_pairs(self, q_len: int, past_len: int, window: Optional[int]) -> int:
        """(query, key) pairs a serving kernel computes (the causal convention)."""
        return causal_pairs(q_len, past_len, window)

    def with_entries(self, pairs: int, q_len: int, past_len: int, causal: bool) -> Tuple[int, int]:
        """(pairs including keys beyond the window's, such keys each sequence reads from
        the cache when the phase continues a context)."""
        return pairs, 0

    def reads_window(self) -> bool:
        """True when a step continuing a context reads the window's cached keys and values."""
        return True

    def entry_elements(self) -> int:
        """Cached elements of one key beyond the window's (a compressed entry)."""
        return 0

    def core_flops(self, spec: Spec, phase: Any) -> Optional[float]:
        """FLOPs of the core over `phase` when they are not 2 x pairs x widths."""
        return None

    def eager_keys(self, kv_len: int) -> int:
        """Keys per query of transformers' eager core at a prompt of kv_len tokens."""
        return kv_len

    def cached_elems(self, seq_len: int) -> int:
        """Elements one sequence caches beyond the window's tokens after seq_len tokens."""
        return 0


PLAIN_CORE = AttentionVariant()
