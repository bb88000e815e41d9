"""Map a Hugging Face config (dict, plus the transformers config object when the library can build it)
to a ModelConfig: unwrap a multimodal config to its language model where the class a user loads reads it
alone (else refuse: hub/model_class.py), pick the family row by `model_type` (or the generic mapping),
read the fields (with the masked-LM head when `architectures` names that class) and validate them.
Anything the ModelConfig fields cannot describe exactly, or a malformed value, raises `UnmappableConfig`
rather than being approximated silently.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from llm_analysis.schema.context_limit import rope_scaling_from_hf
from llm_analysis.errors import ConfigError, warn
from llm_analysis.hub.errors import EXACT_HINT, HubImportError, UnmappableConfig, UnsupportedArchitecture
from llm_analysis.hub.families.table import FAMILIES
from llm_analysis.hub.generic import map_generic
from llm_analysis.hub.guards import check_unread_shape_keys
from llm_analysis.hub.model_class import (loaded_class_name, loaded_class_takes_wrapper, masked_lm_refusal,
                                         named_decoder_class, named_masked_lm_class, non_text_parts,
                                         task_head_refusal, towers_refusal)
from llm_analysis.hub.source import (Fields, Src, decode_special_floats, logger, transformers_config,
                                     unknown_to_transformers)
from llm_analysis.hub.quantization import checkpoint_quantized_weights, checkpoint_weight_format
from llm_analysis.hub.spec import read_family, read_masked_lm_head
from llm_analysis.hub.vision import read_vision_tower
from llm_analysis.schema.loading import build_config
from llm_analysis.schema.model import ModelConfig

__all__ = ["map_hf_config", "map_generic"]

def _language_model(d: Dict[str, Any], obj: Any, *, name: str, what: str
                    ) -> Tuple[Any, Dict[str, Any], Optional[str], Optional[Dict[str, Any]]]:
    """(config object, raw dict, model_type, vision tower fields or None) of the part to map: the config
    itself, or the `text_config` of a multimodal wrapper whose loaded class reads it alone or holds beside
    it only a vision tower hub/vision.py describes; a wrapper whose class holds other parts is refused."""
    model_type = d.get("model_type")
    mt = getattr(obj, "model_type", None) or model_type
    text_cfg = getattr(obj, "text_config", None) if obj is not None else None
    if text_cfg is None and isinstance(d.get("text_config"), dict) and "num_hidden_layers" not in d:
        text_cfg = d["text_config"]
    if text_cfg is None or mt in FAMILIES:
        return obj, d, mt, None
    parts = non_text_parts(d, obj)
    loaded = loaded_class_name(d)
    tower = None
    if parts and loaded_class_takes_wrapper(loaded, obj):
        tower = read_vision_tower(obj, what) if parts == ["vision_config"] else None
        if tower is None:
            raise towers_refusal(what, model_type, parts, loaded)
    if isinstance(text_cfg, dict):
        raw = dict(text_cfg)
        sub_obj = transformers_config(raw, name=name, revision=None, trust_remote_code=False,
                                      what=what) if raw.get("model_type") else None
    else:
        sub_obj = text_cfg
        try:
            raw = text_cfg.to_dict()
        except Exception:
            raw = {}
    mt = getattr(sub_obj, "model_type", None) or raw.get("model_type") or (
        "gemma3_text" if model_type == "gemma3" else None)
    if tower is None:
        logger.info("%s is a multimodal %r config; mapping its language model (%r) only",
                    what, model_type, mt)
    return sub_obj, raw, mt, tower


def _read_fields(src: Src, mt: Any, model_type: Any, what: str, raw_top: Dict[str, Any]) -> Fields:
    """The fields of the family row of `mt` (or the generic mapping); `raw_top`: the config as given."""
    family = FAMILIES.get(mt) if isinstance(mt, str) else None
    try:
        fields = read_family(family, src, what) if family else map_generic(src, what)
        if family:
            check_unread_shape_keys(src, fields, what, family.ignores)
    except HubImportError:
        raise
    except (TypeError, ValueError, KeyError, IndexError) as exc:  # malformed attribute values
        raise UnmappableConfig(f"Cannot map the config of {what} (model_type {model_type!r}): "
                               f"{type(exc).__name__}: {exc}") from None
    masked_lm = named_masked_lm_class(raw_top, mt) if family and fields.get("encoder_only") else None
    if masked_lm is not None:
        if family.masked_lm_head is None:
            raise masked_lm_refusal(what, model_type, masked_lm)
        read_masked_lm_head(family, src, fields, what)
    if src.missing:
        missing = sorted(set(src.missing))
        version = None if family else unknown_to_transformers(model_type)
        # an unknown type has no defaults to fill the gaps: say what would make it readable
        hint = (f"; model_type {model_type!r} is not a type transformers {version} knows, so only these "
                "standard attributes could describe it: add them to the config, or give a model_type "
                "transformers knows") if version else ""
        raise UnmappableConfig(
            f"Cannot map the config of {what} (model_type {model_type!r}): it lacks the attribute"
            f"{'s' if len(missing) > 1 else ''} {', '.join(missing)}{hint}")
    return fields


def _remote_code_hint(d: Dict[str, Any], name: str) -> Optional[str]:
    """What to do when a config that ships its own code (auto_map, not run by default) could not be mapped."""
    auto_map = d.get("auto_map")
    if not isinstance(auto_map, dict) or not auto_map:
        return None
    target = auto_map.get("AutoConfig") or next(iter(auto_map.values()))
    return (f"It declares remote code (auto_map -> {target!r}) that llm-analysis does not run "
            "by default: if you trust the repository, call "
            f"llm_analysis.config.get_model_config_from_hf({name!r}, trust_remote_code=True) so its "
            "configuration class fills in the attributes, or give a config.json with the standard "
            "attribute names.")


def map_hf_config(d: Dict[str, Any], *, name: str, source: str, what: str, trust_remote_code: bool,
                  revision: Optional[str]) -> ModelConfig:
    """The ModelConfig of config dict `d` of model `name` (`what` names it in messages)."""
    d = decode_special_floats(d)  # as transformers reads a config.json: the raw keys the same values
    model_type = d.get("model_type")
    obj = transformers_config(d, name=name, revision=revision,
                              trust_remote_code=trust_remote_code, what=what)
    wrapper_obj = obj
    obj, raw, mt, tower = _language_model(d, obj, name=name, what=what)
    src = Src(obj, raw)
    try:
        fields = _read_fields(src, mt, model_type, what, d)
    except HubImportError as exc:
        hint = None if trust_remote_code or obj is not None else _remote_code_hint(d, name)
        if hint is None:
            raise
        raise type(exc)(f"{str(exc).rstrip('.')}. {hint}") from None
    _count_the_named_decoder_class(d, raw, fields, mt, what)
    top_tie = d.get("tie_word_embeddings")
    if tower is not None and wrapper_obj is not None:  # the wrapper's class is loaded: its flag, defaults filled
        top_tie = getattr(wrapper_obj, "tie_word_embeddings", top_tie)
    if top_tie is not None and raw is not d and fields.get("lm_head", True):  # no head: no tie to decide
        text_tie = raw.get("tie_word_embeddings")
        # the wrapper's class is loaded (its tower counted): the wrapper's flag governs its head
        if tower is None and text_tie is not None and bool(text_tie) != bool(top_tie):
            # the wrapper's flag governs its own LM class, the text model's the text-only
            # class: the count depends on which class is meant
            raise UnsupportedArchitecture(
                f"{what}: the multimodal config says tie_word_embeddings={bool(top_tie)} but its "
                f"language model's config says {bool(text_tie)}; whether the output projection "
                f"is a separate weight depends on the model class. To count it, {EXACT_HINT}.")
        fields["tie_word_embeddings"] = bool(top_tie)
    if fields.get("position_embedding_type") == "rotary":  # the scaling any rotary family declares
        fields["rope_scaling"] = rope_scaling_from_hf(src.get("rope_parameters", "rope_scaling", default=None))
    fields = {k: v for k, v in fields.items() if v is not None}
    if not residual_dropout(src):
        fields["hidden_dropout"] = False
    if tower is not None:
        fields["vision_tower"] = tower
    fields["checkpoint_weight_format"] = checkpoint_weight_format(d)
    _warn_decoder_of_encoder_decoder(d, fields, what)
    fields.update(name=name, source=source, model_type=str(model_type) if model_type else None)
    if fields["model_type"] is None:
        fields.pop("model_type")
    try:
        cfg = build_config(ModelConfig, fields, source=None)
    except ConfigError as exc:
        raise UnmappableConfig(f"The config of {what} (model_type {model_type!r}) maps to an "
                               f"invalid ModelConfig: {exc}") from None
    # which weights the checkpoint's format covers is read against the layers the rest of the config maps to
    covered = checkpoint_quantized_weights(d, what, cfg)
    return cfg if covered is None else cfg.model_copy(update={"checkpoint_quantized_weights": covered})


def _count_the_named_decoder_class(d: Dict[str, Any], raw: Dict[str, Any], fields: Fields, mt: Any,
                                   what: str) -> None:
    """A decoder is counted as the class its `architectures` names (docs/hub-import.md): the bare model
    (Qwen3Model) without the LM head; a task head is refused. Encoders, encoder-decoders and multimodal
    wrappers (their class is chosen in `_language_model`) are left as they are."""
    if raw is not d or fields.get("encoder_only") or fields.get("cross_attention") or not fields.get("lm_head", True):
        return
    named = named_decoder_class(d, mt)
    if named is None:
        return
    if named != "base":
        raise task_head_refusal(what, d.get("model_type"), named)
    logger.info("%s: architectures names %s, the bare model: counted without an LM head", what, d["architectures"][0])
    fields["lm_head"] = False


def _warn_decoder_of_encoder_decoder(d: Dict[str, Any], fields: Fields, what: str) -> None:
    """An encoder-decoder config maps to its decoder (docs/hub-import.md); when `architectures` names the whole
    model (BartForConditionalGeneration), say that its encoder is not counted rather than count silently short."""
    arch = d.get("architectures")
    named = arch[0] if isinstance(arch, (list, tuple)) and arch and isinstance(arch[0], str) else None
    if fields.get("cross_attention") and named and not named.endswith("ForCausalLM"):
        warn(logger, "%s: architectures names %s, which holds the encoder beside the decoder; only the decoder "
                     "(with its cross-attention, as the *ForCausalLM class) is counted: the encoder's parameters, "
                     "weight memory and work are not (its output length is the encoder_seq_len input)",
                     what, named)


# the attributes under which transformers' classes take the dropout on the residual stream (after the
# attention output and after the MLP: Korthikanti's two 1-byte masks per layer in training): GPT-2, GPT-J
# and Phi `resid_pdrop`, BLOOM, Falcon and GPT-NeoX `hidden_dropout`, BERT `hidden_dropout_prob`, OPT and
# BART `dropout`. LLaMA, Mistral, Qwen, Gemma and DeepSeek have none: their classes apply no such dropout.
RESIDUAL_DROPOUT_KEYS = ("resid_pdrop", "hidden_dropout", "hidden_dropout_prob", "dropout")


def residual_dropout(src: Src) -> bool:
    """Whether training stores residual dropout masks: a positive probability under one of
    RESIDUAL_DROPOUT_KEYS (at probability 0 PyTorch's dropout returns its input and keeps no mask)."""
    values = (src.get(key, default=None) for key in RESIDUAL_DROPOUT_KEYS)
    return any(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values)
