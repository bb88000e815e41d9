"""The reference figures of one config: parameters (per module) and prefill FLOPs of
the real `transformers` model built on the meta device."""

from __future__ import annotations

from typing import Any, Dict

from llm_analysis.exact.flops import prefill_flops
from llm_analysis.exact.meta_model import build_meta_models, config_json, config_object, tower_parameter_names
from llm_analysis.exact.module_tree import breakdown, numel

PREFILL_BATCH = 1
PREFILL_SEQ_LEN = 16


def named_shapes(model: Any):
    # named_parameters() yields a tied (shared) parameter once: tied weights count once
    return [(n, tuple(p.shape)) for n, p in model.named_parameters()]


def architecture_truth(hf_config: Any, with_flops: bool = True) -> Dict[str, Any]:
    """{"config": config.json dict, "task", "lm_class", "params": breakdown of the LM,
    "base_class", "base_params": breakdown of the bare backbone (or None),
    "flops": {...} or None, "flops_error": reason or None, "base_flops", "base_flops_error"
    (the backbone's), "phase": {...}}.

    A vision-language wrapper whose loaded class holds a vision tower is built whole (the
    class a user loads); "params" then has "towers": the tower's and projector's parameters
    ("total", and "in_stacks": those inside repeated blocks).

    Raises UnsupportedArchitectureError when the model cannot be built."""
    cfg = config_object(hf_config)
    models = build_meta_models(cfg, with_towers=True)
    out: Dict[str, Any] = {
        "config": config_json(cfg),
        "text_model_type": getattr(models.config, "model_type", None),
        "task": models.task,
        "lm_class": models.lm_class,
        "params": breakdown(named_shapes(models.lm)),
        "base_class": models.base_class,
        "base_params": breakdown(named_shapes(models.base)) if models.base is not None else None,
        "phase": {"batch_size": PREFILL_BATCH, "seq_len": PREFILL_SEQ_LEN},
        "flops": None, "flops_error": None, "base_flops": None, "base_flops_error": None,
    }
    if models.base is None and models.config is cfg and cfg.get_text_config() is not cfg:
        out["params"]["towers"] = _towers(models.lm)
    if with_flops:
        out["flops"], out["flops_error"] = _flops(models.lm, models.lm_class, models.config)
        if models.base is not None and not models.lm_class.endswith("ForCausalLM"):
            # encoders are often described without their LM head: count the backbone too
            out["base_flops"], out["base_flops_error"] = _flops(models.base, models.base_class, models.config)
    return out


def _towers(model: Any) -> Dict[str, int]:
    shapes = dict(named_shapes(model))
    names = tower_parameter_names(model)
    in_stacks = [n for n in names if any(part.isdigit() for part in n.split("."))]
    return {"total": sum(numel(shapes[n]) for n in names), "in_stacks": sum(numel(shapes[n]) for n in in_stacks)}


def _flops(model: Any, class_name: str, cfg: Any):
    """FlopCounterMode's prefill count on meta tensors, or on a CPU twin of a small model
    whose forward reads values (cpu_verify.py)."""
    flops, error = prefill_flops(model, PREFILL_BATCH, PREFILL_SEQ_LEN)
    if flops is None:
        from llm_analysis.exact.cpu_verify import cpu_prefill_flops
        flops, error = cpu_prefill_flops(class_name, cfg, model, error, PREFILL_BATCH, PREFILL_SEQ_LEN)
    return flops, error
