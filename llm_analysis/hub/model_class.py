"""Which transformers class a user loads for a config, and what it holds beyond a language model.

The count is that of the model a user puts on the GPU: the class the config's `architectures` names, else
the one transformers' Auto classes pick for generation (causal LM, then image-text-to-text, masked LM, bare
model). A multimodal wrapper is counted by its language model only when that class reads `text_config`
alone (e.g. `Qwen3_5ForCausalLM`); a class that takes the whole wrapper config is counted whole where
hub/vision.py describes its tower, else refused (`towers_refusal`) rather than counted without its parts.
`transformers` is imported only when a wrapper is met (start-up time).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from llm_analysis.hub.errors import UnsupportedArchitecture, not_modelled

__all__ = ["NON_TEXT_PARTS", "non_text_parts", "loaded_class_name", "loaded_class_takes_wrapper",
           "towers_refusal", "named_masked_lm_class", "masked_lm_refusal", "named_decoder_class",
           "task_head_refusal"]

#: sub-config keys of the parts a multimodal wrapper holds beside its language model,
#: with how messages name them
NON_TEXT_PARTS = {
    "vision_config": "vision tower and its projector",
    "audio_config": "audio encoder and its projector",
    "vq_config": "VQ image tokenizer",
}

# the Auto mappings a user's generation (or, for encoders, masked-LM) code goes through, in
# the order a config without `architectures` is resolved
_AUTO_MAPPINGS = ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
                  "MODEL_FOR_MASKED_LM_MAPPING_NAMES", "MODEL_MAPPING_NAMES")


def non_text_parts(d: Dict[str, Any], obj: Any) -> List[str]:
    """The keys of NON_TEXT_PARTS the config sets (raw, or filled in by the transformers config class)."""
    return [key for key in NON_TEXT_PARTS if d.get(key) or getattr(obj, key, None) is not None]


def loaded_class_name(d: Dict[str, Any]) -> Optional[str]:
    """The first of `architectures`, else the Auto mappings' choice for the model_type; None: neither names one."""
    arch = d.get("architectures")
    if isinstance(arch, (list, tuple)) and arch and isinstance(arch[0], str):
        return arch[0]
    model_type = d.get("model_type")
    if not isinstance(model_type, str):
        return None
    try:
        from transformers.models.auto import modeling_auto
    except Exception:  # transformers absent: no Auto mapping to consult
        return None
    for mapping in _AUTO_MAPPINGS:
        name = getattr(modeling_auto, mapping, {}).get(model_type)
        if isinstance(name, str):
            return name
    return None


def loaded_class_takes_wrapper(class_name: Optional[str], wrapper_obj: Any) -> bool:
    """True unless transformers' class `class_name` is known to read the language model's config alone (its
    `config_class` differs from the wrapper's); an unknown class (remote code, no transformers) counts as
    taking the wrapper."""
    if class_name is None or wrapper_obj is None:
        return True
    try:
        import transformers
        cls = getattr(transformers, class_name, None)
        config_class = getattr(cls, "config_class", None)
    except Exception:
        return True
    if not isinstance(config_class, type):
        return True
    return isinstance(wrapper_obj, config_class)


def towers_refusal(what: str, model_type: Any, parts: List[str], class_name: Optional[str]
                   ) -> UnsupportedArchitecture:
    named = " and ".join(f"{NON_TEXT_PARTS[k]} ({k})" for k in parts)
    # not `not_modelled`: its pointer to the exact path would lead to the same refusal there
    return UnsupportedArchitecture(
        f"{what}: {class_name or 'the class it is loaded with'} (model_type {model_type!r}) holds the {named} "
        f"beside its language model, which ModelConfig does not describe ({NON_TEXT_PARTS[parts[0]].split(' and ')[0]} "
        "not modelled: it needs its own operator kind), so the language model alone would be counted without their "
        "weights and work. To count the language model alone where transformers has a text-only class "
        "that reads text_config (e.g. Gemma3ForCausalLM, Qwen3_5ForCausalLM), name it in architectures.")


def named_masked_lm_class(d: Dict[str, Any], model_type: Any) -> Optional[str]:
    """The masked-LM class of `model_type` when `architectures` names it (encoder plus MLM head), else None
    (the bare encoder, as embedding and feature-extraction code loads it)."""
    arch = d.get("architectures")
    if not (isinstance(arch, (list, tuple)) and arch and isinstance(model_type, str)):
        return None
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES
    except Exception:  # transformers absent: no mapping to tell the class
        return None
    masked = MODEL_FOR_MASKED_LM_MAPPING_NAMES.get(model_type)
    return masked if masked is not None and arch[0] == masked else None


def masked_lm_refusal(what: str, model_type: Any, class_name: str) -> UnsupportedArchitecture:
    return not_modelled(
        f"{what}: architectures names {class_name} (model_type {model_type!r}), whose masked-LM head "
        "(its own projections, norms or output embedding) ModelConfig does not describe for this family "
        "(masked-LM head not modelled). To count the bare encoder, remove architectures or name the "
        "encoder's base class there")


# transformers' task heads on a decoder that ModelConfig does not describe (a `score` /
# `qa_outputs` / `classifier` projection of num_labels in place of the LM head), by the Auto
# mapping that lists them and the suffix their class names share
_TASK_HEADS = {
    "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES": "ForSequenceClassification",
    "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES": "ForTokenClassification",
    "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES": "ForQuestionAnswering",
    "MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES": "ForMultipleChoice",
}


def named_decoder_class(d: Dict[str, Any], model_type: Any) -> Optional[str]:
    """What the class a decoder config's `architectures` names holds in place of the LM head: "base" for the
    bare model (e.g. Qwen3Model), the class name for a task head (Qwen3ForSequenceClassification), else None
    (a causal LM, no `architectures`, or a class not known here)."""
    arch = d.get("architectures")
    if not (isinstance(arch, (list, tuple)) and arch and isinstance(arch[0], str)):
        return None
    name = arch[0]
    try:
        from transformers.models.auto import modeling_auto
    except Exception:  # transformers absent: the task heads are still named by their suffix
        modeling_auto = None

    def listed(mapping: str) -> bool:
        value = getattr(modeling_auto, mapping, {}).get(model_type) if modeling_auto is not None else None
        return name == value or (isinstance(value, (list, tuple)) and name in value)

    if isinstance(model_type, str) and any(listed(m) for m in _AUTO_MAPPINGS[:3]):
        return None  # a class that holds an LM head (causal, image-text-to-text, masked)
    if any(listed(m) or name.endswith(suffix) for m, suffix in _TASK_HEADS.items()):
        return name
    if isinstance(model_type, str) and listed("MODEL_MAPPING_NAMES"):
        return "base"
    return None


def task_head_refusal(what: str, model_type: Any, class_name: str) -> UnsupportedArchitecture:
    return UnsupportedArchitecture(
        f"{what}: architectures names {class_name} (model_type {model_type!r}), whose task head (a projection "
        "of num_labels outputs in place of the LM head) ModelConfig does not describe (task head not modelled); "
        "counting the causal LM instead would add an LM head that class does not hold. To count the causal LM, "
        "name its *ForCausalLM class in architectures; for the bare model (no head), its base *Model class")
