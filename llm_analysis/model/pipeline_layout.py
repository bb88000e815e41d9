"""How many transformer layers each pipeline stage holds.

By default the layers split evenly, earlier stages taking the remainder (as
Megatron-LM does when they do not divide). `ParallelismConfig`'s
`num_layers_in_first_pipeline_stage` / `num_layers_in_last_pipeline_stage`
(the names of Megatron-Core's TransformerConfig fields) fix the end stages and
split the rest over the others the same way. The first stage also holds the
embedding and the most micro-batches in flight under 1F1B, the last the LM head
and the logits, so training recipes give them fewer layers: Llama 3 405B took
one layer off each (126 layers over 16 stages: 7, 14 x 8, 7; arXiv 2407.21783
§3.3.2). Megatron-Core's `account_for_embedding_in_pipeline_split` /
`account_for_loss_in_pipeline_split` (ParallelismConfig fields of the same names) do
that by rule: the embedding and the loss (LM head) each count as one layer, the
num_layers + 1 or + 2 slots split evenly over the stages (refused unless they divide,
as Megatron-Core refuses it: TransformerConfig.__post_init__), and the first stage
holds one layer fewer, the last one fewer (NeMo's Llama 3.1 405B recipes: 126 + 2
slots over 8 stages, 15, 16 x 6, 15)."""

from __future__ import annotations

from typing import List, Optional

from llm_analysis.config import ModelConfig, ParallelismConfig
from llm_analysis.errors import ConfigError

FIRST = "num_layers_in_first_pipeline_stage"
LAST = "num_layers_in_last_pipeline_stage"


def _check_count(name: str, n: Optional[int], pp: int, num_layers: int, model: str) -> None:
    if n is None:
        return
    if pp == 1:
        raise ConfigError(f"{name} = {n} needs pp_size > 1 (pp_size = 1 holds all {num_layers} layers of "
                          f"{model} on one stage); drop it or use pp_size >= 2")
    # every other stage keeps at least one layer (an empty stage is not modelled)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= num_layers - (pp - 1):
        raise ConfigError(f"{name} = {n!r} of {model} with pp_size = {pp}: valid values are whole numbers "
                          f"1..{num_layers - (pp - 1)} (every other stage keeps at least one layer)")


EMBEDDING_SLOT = "account_for_embedding_in_pipeline_split"
LOSS_SLOT = "account_for_loss_in_pipeline_split"


def end_slots(par: ParallelismConfig) -> tuple:
    """(first stage, last stage): the layer slots the embedding and the loss take there (0 or 1 each)."""
    return int(getattr(par, EMBEDDING_SLOT, False)), int(getattr(par, LOSS_SLOT, False))


def _accounted_counts(model: ModelConfig, par: ParallelismConfig) -> List[int]:
    """The stages' layers when the embedding and / or the loss take a layer's slot (module docstring)."""
    pp, n = par.pp_size, model.num_layers
    emb, loss = end_slots(par)
    given = [f for f in (FIRST, LAST) if getattr(par, f, None) is not None]
    if given:
        raise ConfigError(f"{' and '.join(given)} with {EMBEDDING_SLOT if emb else LOSS_SLOT} = True: two ways of "
                          f"splitting the layers over the stages; valid: give one of them")
    slots = n + emb + loss

    def splits(stages: int) -> bool:  # the slots divide, and every stage keeps a layer beside the embedding / loss
        per = slots // stages
        return slots % stages == 0 and (n if stages == 1 else min(per - emb, per - loss)) >= 1
    if not splits(pp):
        valid = [d for d in range(1, slots + 1) if splits(d)]
        raise ConfigError(f"pp_size = {pp} must divide the {slots} layer slots of {model.name} ({n} layers"
                          f"{' + the embedding' if emb else ''}{' + the loss' if loss else ''}: "
                          f"{EMBEDDING_SLOT} / {LOSS_SLOT}), each stage keeping a layer; valid pp_size: {valid}")
    per = slots // pp
    counts = [per] * pp
    counts[0] -= emb
    counts[-1] -= loss
    return counts


def stage_layer_counts(model: ModelConfig, par: ParallelismConfig) -> List[int]:
    """Layers of each pipeline stage, first to last (module docstring); ConfigError
    naming the field and the valid values when the fixed end stages do not fit."""
    if any(end_slots(par)):
        return _accounted_counts(model, par)
    pp, n = par.pp_size, model.num_layers
    first, last = getattr(par, FIRST, None), getattr(par, LAST, None)
    for name, value in ((FIRST, first), (LAST, last)):
        _check_count(name, value, pp, n, model.name)
    fixed = [c for c in (first, last) if c is not None]
    if pp == 2 and len(fixed) == 2 and first + last != n:
        raise ConfigError(f"{FIRST} = {first} + {LAST} = {last} must equal num_layers = {n} of {model.name} "
                          f"with pp_size = 2 (no middle stages); e.g. {FIRST} = {first}, {LAST} = {n - first}")
    rest_stages = pp - len(fixed)
    rest_layers = n - sum(fixed)
    if rest_layers < rest_stages:
        raise ConfigError(f"{FIRST} = {first} and {LAST} = {last} leave {rest_layers} of the {n} layers of "
                          f"{model.name} for the other {rest_stages} stages (pp_size = {pp}); each needs at least "
                          f"one: the end stages may hold {n - rest_stages} layers together")
    base, extra = divmod(rest_layers, rest_stages) if rest_stages else (0, 0)
    rest = [base + (1 if i < extra else 0) for i in range(rest_stages)]  # earlier stages take the remainder
    return ([first] if first is not None else []) + rest + ([last] if last is not None else [])
