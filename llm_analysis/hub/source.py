"""Reading a Hugging Face model config: the transformers config object (defaults filled in) when the
library knows the `model_type`, else the raw `config.json` dict; attribute access that records what is
missing; and the value conversions every family mapping shares. `transformers` is imported only inside
the functions that need it (start-up time).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from llm_analysis.hub.errors import HubImportError, UnmappableConfig
from llm_analysis.errors import warn

# one logger for the whole Hub import, under the name users already filter on
logger = logging.getLogger("llm_analysis.hub.entry")

__all__ = ["Src", "Fields", "transformers_config", "decode_special_floats", "as_int", "activation",
           "attention_layout", "moe_layout"]

Fields = Dict[str, Any]


@contextlib.contextmanager
def quiet_transformers():
    """transformers' own logging at ERROR level for the block (no-op without transformers)."""
    try:
        from transformers.utils import logging as tlog
    except Exception:  # pragma: no cover
        yield
        return
    old = tlog.get_verbosity()
    tlog.set_verbosity_error()
    try:
        yield
    finally:
        tlog.set_verbosity(old)


# transformers 5 writes the floats plain JSON has no spelling for as {"__float__": "Infinity"} (its
# PreTrainedConfig._encode_special_floats: Bamba's default time_step_limit (0.0, inf)) and decodes them when
# it reads a config file (_decode_special_floats); a dict handed to from_dict is not decoded
_FLOAT_TAG_KEY = "__float__"
_FLOAT_TAG_VALUES = {"Infinity": float("inf"), "-Infinity": float("-inf"), "NaN": float("nan")}


def decode_special_floats(obj: Any) -> Any:
    """`obj` with every {"__float__": "Infinity" | "-Infinity" | "NaN"} replaced by that float, as
    transformers reads a config.json (an object with another tag or other keys is left as it is)."""
    if isinstance(obj, dict):
        if set(obj) == {_FLOAT_TAG_KEY} and isinstance(obj[_FLOAT_TAG_KEY], str):
            return _FLOAT_TAG_VALUES.get(obj[_FLOAT_TAG_KEY], obj)
        return {k: decode_special_floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode_special_floats(v) for v in obj]
    return obj


def transformers_config(d: Dict[str, Any], *, name: str, revision: Optional[str],
                         trust_remote_code: bool, what: str):
    """The transformers config object for `d`, or None (unknown type / transformers absent)."""
    d = decode_special_floats(d)
    model_type = d.get("model_type")
    try:
        with quiet_transformers():
            from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    except Exception as exc:  # transformers missing or broken: map the raw JSON
        logger.info("transformers unavailable (%s); mapping the raw config.json of %s", exc, what)
        return None
    auto_map = d.get("auto_map") or {}
    remote = isinstance(auto_map, dict) and "AutoConfig" in auto_map
    if not (isinstance(model_type, str) and model_type in CONFIG_MAPPING) and not (trust_remote_code and remote):
        # a repository that ships a transformers architecture under a model_type of its own (Kimi-K2:
        # kimi_k2 on DeepseekV3ForCausalLM): engines load it by the architecture's name, so its config is
        # read as that architecture's config class reads it
        known = architecture_model_type(d)
        if known is not None:
            logger.info("%s: model_type %r is not registered in transformers; reading it as %r, the config of "
                        "the architecture it names (%s)", what, model_type, known, d["architectures"][0])
            model_type, d = known, {k: v for k, v in d.items() if k != "model_type"}
    if isinstance(model_type, str) and model_type in CONFIG_MAPPING:
        try:
            with quiet_transformers():
                return CONFIG_MAPPING[model_type].from_dict(copy.deepcopy(d))
        except Exception as exc:
            wrong_type = strict_field_error(exc, d)
            if wrong_type is not None:  # a field of the wrong type: a broken config, not one to read around
                raise UnmappableConfig(f"{what}: {wrong_type}; fix the value in the config.json") from None
            warn(logger, "transformers could not build its %r config for %s (%s: %s); mapping the "
                         "raw config.json instead", model_type, what, type(exc).__name__,
                         str(exc).strip().splitlines()[-1] if str(exc).strip() else "")
            return None
    if trust_remote_code and remote:
        try:
            with quiet_transformers():
                from transformers import AutoConfig
                return AutoConfig.from_pretrained(name, revision=revision, trust_remote_code=True)
        except Exception as exc:
            raise HubImportError(
                f"Running the remote configuration code of {what} failed: "
                f"{type(exc).__name__}: {exc}") from None
    if remote:
        logger.info("%s has custom configuration code (auto_map); not running it without "
                    "trust_remote_code=True, mapping the raw config.json", what)
    return None


# transformers' configs check their fields' types (huggingface_hub strict dataclasses): named, not imported
_STRICT_FIELD_ERRORS = ("StrictDataclassFieldValidationError", "StrictDataclassClassValidationError")


def strict_field_error(exc: BaseException, d: Dict[str, Any], strings_only: bool = True) -> Optional[str]:
    """"config field 'hidden_size' = '64': TypeError: ... expected int, got str" when `exc` is transformers'
    refusal of a string field value of another type (tie_word_embeddings = "yes" was read as tied), else None;
    `strings_only=False`: of any value (building the model itself, as --exact does, needs every field right)."""
    if type(exc).__name__ not in _STRICT_FIELD_ERRORS:
        return None
    lines = str(exc).splitlines() or [type(exc).__name__]
    named = re.search(r"field '([^']+)'", lines[0])
    value = d.get(named.group(1)) if named else None
    if strings_only and not isinstance(value, str):
        # a string where the field takes a number or a bool ("yes", "64", "big") is a broken config; other kinds
        # are left to the mapping's own checks (NaN / Infinity named as config.json spells them; a list where
        # transformers wants a tuple, as Nemotron-H's time_step_limit, is no size the counts read)
        return None
    where = f"config field {named.group(1)!r} = {value!r}" if named else "a config field"
    return f"{where}: {lines[1].strip() if len(lines) > 1 else lines[0]}"


def architecture_model_type(d: Dict[str, Any]) -> Optional[str]:
    """The transformers model_type whose causal-LM class is the one `architectures` names, when the config's
    own model_type is not registered (None otherwise, or when transformers has no such class)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    archs = d.get("architectures")
    if d.get("model_type") in CONFIG_MAPPING or not isinstance(archs, list) or not archs:
        return None
    # several model types share a class (LlamaForCausalLM serves internlm3 and iquestcoder besides llama, whose
    # defaults differ: internlm3's head_dim 128 counted a small Llama 78% large): the one whose config class
    # names the class (LlamaConfig for LlamaForCausalLM), else the first registered
    candidates = [t for t, name in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()
                  if name == archs[0] and t in CONFIG_MAPPING]
    named = [t for t in candidates if str(archs[0]).startswith(CONFIG_MAPPING_NAMES.get(t, "").removesuffix("Config"))
             and CONFIG_MAPPING_NAMES.get(t, "").removesuffix("Config")]
    if named:  # (the longest name; between model types of one config class, the one spelled like it: gpt2)
        return max(named, key=lambda t: (len(CONFIG_MAPPING_NAMES[t]), t.replace("-", "").replace("_", "") ==
                                         CONFIG_MAPPING_NAMES[t].removesuffix("Config").lower()))
    return candidates[0] if candidates else None


def unknown_to_transformers(model_type: Any) -> Optional[str]:
    """The installed transformers' version when it does not know `model_type` (so nothing but the
    raw keys can describe the model), else None (known, not a string, or transformers absent)."""
    if not isinstance(model_type, str):
        return None
    try:
        with quiet_transformers():
            import transformers
            from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    except Exception:
        return None
    return None if model_type in CONFIG_MAPPING else transformers.__version__


_MISSING = object()


class Src:
    """Reads attributes from a transformers config (defaults filled in) or a raw dict,
    recording the required ones that are absent."""

    def __init__(self, obj: Any, raw: Dict[str, Any]):
        self.obj = obj
        self.raw = raw
        self.missing: List[str] = []

    def _lookup(self, key: str) -> Any:
        if self.obj is not None:
            try:
                return getattr(self.obj, key)
            except Exception:  # absent, or a transformers property that raises on an odd config
                pass
        return self.raw.get(key, _MISSING)

    def has(self, key: str) -> bool:
        v = self._lookup(key)
        return v is not _MISSING and v is not None

    def get(self, *keys: str, default: Any = _MISSING) -> Any:
        for k in keys:
            v = self._lookup(k)
            if v is not _MISSING and v is not None:
                return v
        if default is _MISSING:
            self.missing.append(keys[0] if len(keys) == 1 else " or ".join(keys))
            return None
        return default

    def req_int(self, *keys: str) -> Optional[int]:
        v = self.get(*keys)
        return None if v is None else as_int(v, keys[0])

    def opt_int(self, *keys: str, default: Any = None) -> Optional[int]:
        v = self.get(*keys, default=default)
        return None if v is None else as_int(v, keys[0])


def as_int(v: Any, key: str) -> int:
    if isinstance(v, float) and not math.isfinite(v):  # config.json may spell NaN / Infinity
        spelled = "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
        raise UnmappableConfig(f"attribute {key!r} = {spelled} must be a finite integer")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v:
        raise UnmappableConfig(f"attribute {key!r} = {v!r} must be an integer")
    return int(v)


_ACTIVATIONS = {
    "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh",
    "gelu_accurate": "gelu_tanh", "gelu_python_tanh": "gelu_tanh", "gelu_tanh": "gelu_tanh",
    "gelu": "gelu", "gelu_python": "gelu", "gelu_10": "gelu",
    "silu": "silu", "swish": "silu", "relu": "relu", "quick_gelu": "quick_gelu",
    "relu2": "relu2", "tanh": "tanh", "sigmoid": "sigmoid", "mish": "mish",
}


# the activation names transformers builds (transformers 5.23 activations.py ACT2CLS, Apache-2.0), and gpt-oss's
# `swigluoai` (its MLP applies its own clamped SwiGLU; the config names it): any other name is a config transformers
# refuses to build (ACT2FN raises KeyError), so it is refused here too, not counted as some activation
KNOWN_ACTIVATIONS = frozenset((
    "gelu", "gelu_10", "gelu_accurate", "gelu_fast", "gelu_new", "gelu_python", "gelu_python_tanh",
    "gelu_pytorch_tanh", "hardswish", "laplace", "leaky_relu", "linear", "mish", "prelu", "quick_gelu", "relu",
    "relu2", "relu6", "sigmoid", "silu", "sqrtsoftplus", "swish", "tanh", "xielu", "swigluoai",
)) | frozenset(_ACTIVATIONS)


def activation(v: Any, key: str = "hidden_act") -> str:
    """The activation named by a config's `key` value `v`, normalised; a name no model builds is refused."""
    if not isinstance(v, str):
        return "gelu"
    name = v.lower()
    if name not in KNOWN_ACTIVATIONS:
        raise UnmappableConfig(f"{key} = {v!r} is not an activation transformers builds (its ACT2FN refuses it); "
                               f"valid: {', '.join(sorted(KNOWN_ACTIVATIONS))}")
    return _ACTIVATIONS.get(name, name)


def _positive_or_none(v: Any) -> Optional[int]:
    try:
        iv = None if isinstance(v, bool) else int(v)
    except (TypeError, ValueError):  # (None among them)
        return None
    return iv if iv is not None and iv > 0 else None


def attention_layout(layer_types: Any, sliding_window: Any, num_layers: Optional[int],
                      what: str) -> Tuple[Optional[int], Optional[List[str]]]:
    """(sliding_window, layer_types) as ModelConfig wants them: layer_types only when
    layers differ; sliding_window only when some layer slides."""
    window = _positive_or_none(sliding_window)
    if layer_types is None:
        return window, None  # every layer slides when a window is set (Mistral v0.1, Phi-3)
    lt = [str(t) for t in layer_types]
    odd = sorted(set(lt) - {"full_attention", "sliding_attention"})
    if odd:
        raise UnmappableConfig(
            f"{what}: layer_types contains {odd}; ModelConfig describes only full_attention and "
            "sliding_attention layers")
    if num_layers is not None and len(lt) != num_layers:
        raise UnmappableConfig(f"{what}: layer_types has {len(lt)} entries for {num_layers} layers")
    if all(t == "full_attention" for t in lt):
        return None, None
    if window is None:
        raise UnmappableConfig(f"{what}: layer_types lists sliding_attention layers but "
                               "sliding_window is not set")
    if all(t == "sliding_attention" for t in lt):
        return window, None
    return window, lt


def moe_layout(moe_layers: Iterable[int], num_layers: int, what: str) -> Tuple[int, int]:
    """(moe_first_dense_layers, moe_layer_freq) that reproduce the set of MoE layers."""
    layers = sorted(set(moe_layers))
    if not layers:
        raise UnmappableConfig(f"{what}: the config declares experts but no layer is a MoE layer")
    first = layers[0]
    freq = layers[1] - layers[0] if len(layers) > 1 else max(1, num_layers - first)
    rebuilt = [i for i in range(num_layers) if i >= first and (i - first) % freq == 0]
    if rebuilt != layers:
        raise UnmappableConfig(
            f"{what}: MoE layers {layers} are not 'the first k layers dense, then every n-th layer', "
            "which is what ModelConfig (moe_first_dense_layers, moe_layer_freq) can describe")
    return first, freq
