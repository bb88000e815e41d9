"""Families that need their own rule on the exact path, registered by transformers class name.

The generic walk (derive.py) and describer (tree_describer.py) read any model from its
module tree; a family whose modules they cannot read (a recurrent mixer's state, pooled or
latent rows, sliding-chunk or compressed attention, n-stream decoders) has one module
here, named for the family, that registers a `ClassRule` (family.py) for each
transformers class it handles in its `RULES`, and lists in `RECORDS` the typed records it
writes into descriptions. This module collects them:

* `module_specs`: specs of a module whose class (or whose parent's class) a family
  registered, else None;
* `attention_core`: an attention core with the variant a family gives the module's class;
* `model_rules`: the `ModelRule`s of the families whose classes the model holds;
* `encode_description` / `decode_description`: a description to and from its JSON form.

Nothing here imports torch or transformers.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from llm_analysis.exact.architectures import (bailing_hybrid, deepseek_v4, funnel, inkling, lfm,
                                              llama_chunked_attention, longformer, minimax, perceiver, prophetnet,
                                              recurrent_gemma, rwkv, xlstm, zamba, zaya)
from llm_analysis.exact.architectures.family import ClassRule, ModelRule
from llm_analysis.exact.architectures.records import decode, encode, kind_signature
from llm_analysis.exact.architectures.recurrent_state import (CausalConvOutputs, RecurrentState, ShortConvolution,
                                                              StatePart)

_FAMILIES = (bailing_hybrid, deepseek_v4, funnel, inkling, lfm, llama_chunked_attention, longformer, minimax,
             perceiver, prophetnet, recurrent_gemma, rwkv, xlstm, zamba, zaya)


def _registry() -> Dict[str, ClassRule]:
    rules: Dict[str, ClassRule] = {}
    for family in _FAMILIES:
        for name, rule in family.RULES.items():
            if name in rules:
                raise ValueError(f"{family.__name__} registers {name}, which another family registered")
            rules[name] = rule
    return rules


REGISTRY: Dict[str, ClassRule] = _registry()  # transformers class name -> its family's rule
RECORD_TYPES: Dict[str, type] = {cls.__name__: cls for cls in (
    StatePart, RecurrentState, ShortConvolution, CausalConvOutputs,
    *(cls for family in _FAMILIES for cls in family.RECORDS))}


def module_specs(rel: str, module: Any, fresh: Dict[str, int], calls: int, parent: Any
                 ) -> Optional[List[Dict[str, Any]]]:
    """Specs of `module` (path `rel` in its layer, `fresh` its new parameters, `calls`
    runs per layer execution, `parent` the module holding it) when a family registered its
    class, or its parent's class for its children; else None (the generic walk reads it)."""
    name = rel or type(module).__name__
    own = REGISTRY.get(type(module).__name__)
    specs = own.specs(name, module, fresh, calls, parent) if own and own.specs else None
    holder = REGISTRY.get(type(parent).__name__) if specs is None and parent is not None else None
    if holder and holder.child_specs:
        specs = holder.child_specs(name, module, fresh, calls, parent)
    return specs


def attention_core(core: Dict[str, Any], module: Any, cfg: Any, layer_index: Optional[int]) -> Dict[str, Any]:
    """`core` (read in `module` by derive_specs.attention_spec) with its family's variant."""
    rule = REGISTRY.get(type(module).__name__)
    return rule.attention_core(core, module, cfg, layer_index) if rule and rule.attention_core else core


def model_rules(lm: Any, cfg: Any, probe: Any) -> List[ModelRule]:
    """The model rules of the families whose classes `lm` holds, in module order."""
    rules, made = [], set()
    for _, module in lm.named_modules():
        rule = REGISTRY.get(type(module).__name__)
        if rule and rule.model and rule.model not in made:
            made.add(rule.model)
            rules.append(rule.model(lm, cfg, probe, module))
    return rules


def encode_description(desc: Dict[str, Any]) -> Dict[str, Any]:
    """The JSON form of a description (records.py)."""
    return encode(desc)


def decode_description(data: Dict[str, Any]) -> Dict[str, Any]:
    """A description read back from its JSON form."""
    return decode(data, RECORD_TYPES)


__all__ = ["REGISTRY", "attention_core", "decode_description", "encode_description", "kind_signature",
           "model_rules", "module_specs"]
