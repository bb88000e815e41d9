"""Build the `transformers` model of a config on the `meta` device (no memory, no weights).

The model is the causal LM (`AutoModelForCausalLM`), else the masked LM plus the bare
encoder (`AutoModel`: the engine may describe an encoder without its MLM head).
Multimodal configs are reduced to their text config, as the Hub import does, unless
`with_towers`: a wrapper whose loaded class holds a vision tower is then built whole.
Only classes registered in the installed transformers are used (no trust_remote_code).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from llm_analysis.errors import ConfigError, UnsupportedArchitectureError
from llm_analysis.hub.source import quiet_transformers


class ExactDependencyMissing(UnsupportedArchitectureError):
    """The model code could not run for want of a module (torch, a kernel package): no verdict on the model, so
    never cached as its refusal (a refusal made without torch had stuck once torch was installed)."""


def _dependency_missing(exc: BaseException) -> None:
    """Raise ExactDependencyMissing when `exc` is an ImportError (a missing module, not the model's own refusal)."""
    if isinstance(exc, ImportError):
        raise ExactDependencyMissing(
            f"the exact path needs torch and transformers (pip install \"llm-analysis[exact]\"): "
            f"{type(exc).__name__}: {_first_line(exc)}") from None


@dataclass
class MetaModels:
    """The models built for one config: `lm` (causal or masked LM), `base` (bare
    backbone, may be None), the config they were built from and the class names."""

    lm: Any
    base: Any
    config: Any
    lm_class: str
    base_class: Optional[str]
    task: str  # "causal-lm" | "masked-lm"


def lm_model_types() -> Dict[str, str]:
    """{model_type: task} for every type with a causal-LM or masked-LM auto class."""
    from transformers.models.auto import modeling_auto as ma
    types = {mt: "masked-lm" for mt in ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES}
    types.update({mt: "causal-lm" for mt in ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES})
    return dict(sorted(types.items()))


def config_object(hf_config: Any) -> Any:
    """A transformers config object from a dict (`config.json` content) or an object."""
    from transformers import AutoConfig, PretrainedConfig
    if isinstance(hf_config, PretrainedConfig):
        return hf_config
    if not isinstance(hf_config, dict) or not isinstance(hf_config.get("model_type"), str):
        raise UnsupportedArchitectureError(
            "exact verification needs a Hugging Face config dict with a 'model_type' string "
            f"(or a transformers PretrainedConfig); got {type(hf_config).__name__}")
    d = copy.deepcopy(hf_config)
    mt = d.pop("model_type")
    from llm_analysis.hub.source import architecture_model_type, strict_field_error
    # a model_type transformers does not register, on an architecture it has (Kimi-K2: kimi_k2 on
    # DeepseekV3ForCausalLM): built as that architecture, as the Hub import reads it
    mt = architecture_model_type(hf_config) or mt
    try:
        with quiet_transformers():
            return AutoConfig.for_model(mt, **d)
    except ValueError as exc:
        raise UnsupportedArchitectureError(
            f"model_type {mt!r} is not registered in the installed transformers; exact "
            f"verification cannot build it ({str(exc).splitlines()[0]})") from None
    except Exception as exc:  # huggingface_hub's strict config fields: a value of the wrong type ("64" for an int)
        wrong_type = strict_field_error(exc, hf_config, strings_only=False)
        if wrong_type is None:
            raise
        raise ConfigError(f"{wrong_type}; exact verification builds the model with transformers, which checks "
                          f"each field's type: fix the value in the config") from None


def _candidates(cfg: Any, task: str) -> List[Tuple[str, Any]]:
    """(class name, config) pairs to try, the text model first."""
    from transformers.models.auto import modeling_auto as ma
    mapping = (ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES if task == "causal-lm"
               else ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES)
    text = cfg.get_text_config()
    out: List[Tuple[str, Any]] = []
    if text is not cfg:
        if getattr(text, "model_type", None) in mapping:
            out.append((mapping[text.model_type], text))
        if cfg.model_type in mapping:
            out.append((mapping[cfg.model_type], text))
    if cfg.model_type in mapping:
        out.append((mapping[cfg.model_type], cfg))
    return out


def _instantiate(class_name: str, cfg: Any, dtype: str = "bfloat16") -> Any:
    import torch
    import transformers
    cls = getattr(transformers, class_name)
    cfg = copy.deepcopy(cfg)
    with quiet_transformers(), torch.device("meta"):
        # eager attention: its matmuls are visible to FlopCounterMode and need no kernel;
        # bf16 because the grouped-matmul expert kernels accept only bf16 inputs
        model = cls._from_config(cfg, attn_implementation="eager", dtype=getattr(torch, dtype))
    if any(p.device.type != "meta" for p in model.parameters()):
        # a legacy constructor (XLNet's torch.FloatTensor) ignores the device context and
        # makes real float32 tensors: moved to meta, in the model's dtype
        model = model.to(device="meta", dtype=getattr(torch, dtype))
    return model


def _wrapper_parts(hf_config: Any, cfg: Any) -> Optional[Tuple[Dict[str, Any], List[str], Optional[str]]]:
    """(config dict, its non-text parts, the class a user loads) of a wrapper config whose
    loaded class holds towers beside its language model (hub/model_class.py), else None."""
    from llm_analysis.hub.model_class import loaded_class_name, loaded_class_takes_wrapper, non_text_parts
    try:
        if cfg.get_text_config() is cfg:
            return None
    except ValueError:  # several text configs: build_meta_models refuses it with its own reason
        return None
    raw = hf_config if isinstance(hf_config, dict) else cfg.to_dict()
    parts, name = non_text_parts(raw, cfg), loaded_class_name(raw)
    return (raw, parts, name) if parts and loaded_class_takes_wrapper(name, cfg) else None


def _wrapper_class(hf_config: Any, cfg: Any) -> Optional[str]:
    """The class a user loads for a wrapper config when it holds towers beside its language
    model (a remote class named in `architectures`, which is never run, stands for transformers'
    own image-text-to-text class of the type: Kimi-K2.5), else None."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    wrapper = _wrapper_parts(hf_config, cfg)
    if wrapper is None:
        return None
    name = wrapper[2]
    if name is None or not hasattr(transformers, name):  # a remote class (not run): transformers' own for the type
        name = MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.get(cfg.model_type)
    return name if isinstance(name, str) and hasattr(transformers, name) else None


def towers_beside_the_language_model(hf_config: Any, cfg: Any) -> Optional[str]:
    """Why a multimodal wrapper cannot be derived from its language model, or None.

    The derivation builds a wrapper's language model (`text_config`), but the class a user loads
    may also hold a vision tower, audio encoder or image tokenizer (Llama 4's and Qwen3-VL's
    `*ForConditionalGeneration`): counting the language model alone would leave their weights
    out, silently. The rule is the Hub import's (hub/model_class.py), so both paths count the same
    class or refuse the same config; a text-only class in `architectures` (Llama4ForCausalLM)
    counts the language model alone."""
    from llm_analysis.hub.model_class import towers_refusal
    wrapper = _wrapper_parts(hf_config, cfg)
    if wrapper is None:
        return None
    _, parts, class_name = wrapper
    from llm_analysis.hub.vision import read_vision_tower
    if parts == ["vision_config"] and read_vision_tower(cfg, f"model_type {cfg.model_type!r}") is not None:
        # the Hub import describes this tower (hub/vision.py); the module tree reader does not
        return (f"model_type {cfg.model_type!r}: {class_name or 'the class it is loaded with'} holds the vision tower "
                "and its projector (vision_config) beside its language model; the module-tree derivation reads language "
                "models only (the Hub import's description of the whole class, hub/vision.py, is verified in its "
                "place)")
    return str(towers_refusal(f"model_type {cfg.model_type!r}", cfg.model_type, parts, class_name))


def tower_parameter_names(model: Any) -> List[str]:
    """Names of the parameters of a wrapper model that are neither its language model's
    (`get_decoder()`) nor its output projection's: the vision tower and projector."""
    language = {id(p) for p in model.get_decoder().parameters()}
    head = model.get_output_embeddings()
    language |= {id(p) for p in head.parameters()} if head is not None else set()
    return [n for n, p in model.named_parameters() if id(p) not in language]


def build_meta_models(hf_config: Any, with_base: bool = True, dtype: str = "bfloat16",
                      with_towers: bool = False) -> MetaModels:
    """The LM (and bare backbone) of `hf_config` on the meta device; with `with_towers`, a
    vision-language wrapper's whole class (see the module docstring; no backbone then).

    Raises UnsupportedArchitectureError when transformers has no causal/masked LM
    class for the type or cannot build it from this config."""
    cfg = config_object(hf_config)
    wrapper = _wrapper_class(hf_config, cfg) if with_towers else None
    if wrapper is not None:
        try:
            return MetaModels(_instantiate(wrapper, cfg, dtype), None, cfg, wrapper, None, "causal-lm")
        except Exception as exc:  # the model code refuses this config
            _dependency_missing(exc)
            raise UnsupportedArchitectureError(
                f"transformers could not build {wrapper} (model_type {cfg.model_type!r}) on the meta device: "
                f"{type(exc).__name__}: {_first_line(exc)}") from None
    types = lm_model_types()
    try:
        text_type = getattr(cfg.get_text_config(), "model_type", "")
    except ValueError as exc:  # several candidate text configs (MusicGen): no single LM
        raise UnsupportedArchitectureError(
            f"model_type {cfg.model_type!r}: {_first_line(exc)}") from None
    task = types.get(cfg.model_type) or types.get(text_type)
    if task is None:
        raise UnsupportedArchitectureError(
            f"model_type {cfg.model_type!r} has no causal-LM or masked-LM class in the installed "
            "transformers; it is not a text language model the engine describes")
    errors = []
    for class_name, sub in _candidates(cfg, task):
        try:
            lm = _instantiate(class_name, sub, dtype)
        except Exception as exc:  # any failure of the model code: try the next candidate
            _dependency_missing(exc)
            errors.append(f"{class_name}: {type(exc).__name__}: {_first_line(exc)}")
            continue
        base, base_class = _base_model(sub) if with_base else (None, None)
        return MetaModels(lm, base, sub, class_name, base_class, task)
    raise UnsupportedArchitectureError(
        f"transformers could not build model_type {cfg.model_type!r} on the meta device: "
        + ("; ".join(errors) or "no model class"))


def _base_model(cfg: Any) -> Tuple[Any, Optional[str]]:
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    name = MODEL_MAPPING_NAMES.get(cfg.model_type)
    if not isinstance(name, str):
        return None, None
    try:
        return _instantiate(name, cfg), name
    except Exception:  # the backbone is optional: the LM is the reference
        return None, None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else ""


def config_json(cfg: Any) -> Dict[str, Any]:
    """What `save_pretrained` writes as config.json (only values that differ from the
    class defaults, plus model_type), as a dict."""
    import json
    return json.loads(cfg.to_json_string(use_diff=True))
