"""A refusal reason that names a model's own limit (used by `derive.py`; reads the config).

A config with routed experts and no routing top-k (DeepSeek-V2's default config:
`num_experts_per_tok = None`): transformers itself cannot run it; the refusal says which
key to set. (Experts run densely without a top-k are refused in dense_experts.py.)
"""

from __future__ import annotations

from typing import Any, Optional

from llm_analysis.exact.derive_roles import _TOPK_KEYS, num_experts, top_k


def missing_top_k(cfg: Any) -> Optional[str]:
    """Why a config with routed experts cannot route, or None."""
    experts = num_experts(cfg)
    if not experts or top_k(cfg) is not None:
        return None
    unset = [k for k in _TOPK_KEYS if k in getattr(cfg, "__dict__", {}) and getattr(cfg, k) is None]
    if not unset:
        return None
    return (f"its config has {experts} routed experts but {unset[0]} = None, so no expert routing is defined "
            f"and transformers itself cannot run it; set {unset[0]} to the experts each token uses, a whole number "
            f"from 1 to {experts}")


def towers_beside_the_language_model(hf_config: Any, cfg: Any) -> Optional[str]:
    """Why a multimodal wrapper cannot be derived from its language model, or None.

    The exact path builds the language model of a wrapper config (meta_model.py reads its
    `text_config`), but the class a user loads (`architectures`, else transformers' Auto class
    for generation) may also hold a vision tower, audio encoder or image tokenizer (Llama 4's and
    Qwen3-VL's `*ForConditionalGeneration`): a count of the language model alone would leave
    their weights out, silently. The rule is the Hub import's (hub/model_class.py), so both paths
    count the same class or refuse the same config; naming a text-only class in `architectures`
    (Llama4ForCausalLM) counts the language model alone."""
    from llm_analysis.hub.model_class import (loaded_class_name, loaded_class_takes_wrapper, non_text_parts,
                                              towers_refusal)
    try:
        if cfg.get_text_config() is cfg:
            return None
    except ValueError:  # several text configs: build_meta_models refuses it with its own reason
        return None
    raw = hf_config if isinstance(hf_config, dict) else cfg.to_dict()
    parts = non_text_parts(raw, cfg)
    class_name = loaded_class_name(raw)
    if not parts or not loaded_class_takes_wrapper(class_name, cfg):
        return None
    from llm_analysis.hub.vision import read_vision_tower
    if parts == ["vision_config"] and read_vision_tower(cfg, f"model_type {cfg.model_type!r}") is not None:
        # the Hub import describes this tower (hub/vision.py); the module tree reader does not
        return (f"model_type {cfg.model_type!r}: {class_name or 'the class it is loaded with'} holds the vision tower "
                "and its projector (vision_config) beside its language model; the module-tree derivation reads language "
                "models only (the Hub import's description of the whole class, hub/vision.py, is verified in its "
                "place)")
    return str(towers_refusal(f"model_type {cfg.model_type!r}", cfg.model_type, parts, class_name))
