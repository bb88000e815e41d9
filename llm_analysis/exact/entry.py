"""Public entry of the exact path: an `LLMAnalysis` of any model transformers can build.

The first call for a (model id, revision, config, transformers version, engine code)
derives and verifies the description (derive.py, derive_check.py) and caches it, or the
refusal (cache.py); when the tree cannot be derived, the family table's description is
used if it verifies exactly (verify.py). Later calls read the JSON and import neither
torch nor transformers. Repository code is never run (no trust_remote_code).
"""

from __future__ import annotations

import copy
import re
from typing import Any, Dict, Optional, Tuple

from llm_analysis.config import DtypeConfig, ParallelismConfig
from llm_analysis.schema.dtype import SIGNATURE_DEFAULT_DTYPE
from llm_analysis.schema.parallelism import SIGNATURE_DEFAULT_PARALLELISM
from llm_analysis.errors import ConfigError, UnsupportedArchitectureError
import llm_analysis.exact.cache as cache
from llm_analysis.exact.known_limits import explained

_KIND = "module-tree description"


def load_hf_config(model: Any, revision: Optional[str] = None) -> Tuple[Dict[str, Any], Optional[str]]:
    """(config.json dict, model id or None) for a dict, or a name resolved as every other
    command resolves it (`model_lookup.hf_config_by_name`: catalogue name, config.json
    path, local directory or Hub id)."""
    from llm_analysis.catalogue.model_lookup import hf_config_by_name
    if isinstance(model, dict):
        return copy.deepcopy(model), None
    if not isinstance(model, str) or not model:
        raise ConfigError(f"model = {model!r}: give a catalogue name, a Hub id (org/name), a local model "
                          "directory, a config.json path or a config dict")
    return hf_config_by_name(model, revision)


def description_for(hf_config: Dict[str, Any], model_id: Optional[str] = None, revision: Optional[str] = None,
                    use_cache: bool = True) -> Dict[str, Any]:
    """The verified description of `hf_config` (cached), or UnsupportedArchitectureError."""
    from llm_analysis.exact.architectures import decode_description
    name = model_id or str(hf_config.get("_name_or_path") or hf_config.get("model_type") or "model")
    key = cache.cache_key(model_id, revision, hf_config, {"kind": _KIND}, cache.DERIVED_SOURCES)
    record = cache.load(key) if use_cache else None
    if record is None or record.get("kind") != _KIND:
        record = _derive_record(hf_config, name)
        cache.store(key, record)
    if record["description"] is None:
        raise UnsupportedArchitectureError(record["message"])
    # the record holds the description's JSON form; its typed records (architectures/) are read back
    return decode_description(record["description"])


def _derive_record(hf_config: Dict[str, Any], name: str) -> Dict[str, Any]:
    try:
        from llm_analysis.exact.derive import derive_description  # imports torch and transformers
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise UnsupportedArchitectureError(
            f"the exact path needs torch and transformers (pip install \"llm-analysis[exact]\"): {exc}") from None
    from llm_analysis.exact.architectures import encode_description
    from llm_analysis.exact.meta_model import ExactDependencyMissing
    try:
        return {"kind": _KIND, "description": encode_description(derive_description(hf_config, name)),
                "message": None}
    except ExactDependencyMissing:  # no verdict on the model: raised, not stored as its refusal
        raise
    except UnsupportedArchitectureError as exc:
        return {"kind": _KIND, "description": None, "message": explained(str(exc), hf_config)}


def analysis_from_hf(model: Any, gpu_config: Any, dtype_config: DtypeConfig = SIGNATURE_DEFAULT_DTYPE,
                     parallelism_config: ParallelismConfig = SIGNATURE_DEFAULT_PARALLELISM, revision: Optional[str] = None,
                     use_cache: bool = True, **kwargs: Any) -> Any:
    """An LLMAnalysis (subclass) of `model` (Hub id, local dir, config.json path or dict)
    whose operators are derived from the transformers module tree: parameters and
    matmul FLOPs exact by construction and verified. `kwargs` go to LLMAnalysis
    (efficiencies, conventions). Raises UnsupportedArchitectureError when the model
    cannot be derived exactly."""
    cls, model_config = exact_analysis_class(model, revision, use_cache)
    return cls(model_config, gpu_config, dtype_config, parallelism_config, **kwargs)


def exact_analysis_class(model: Any, revision: Optional[str] = None, use_cache: bool = True) -> Tuple[type, Any]:
    """(LLMAnalysis subclass bound to the derived description, its ModelConfig): what
    the CLI's --exact flag uses in place of LLMAnalysis and the catalogue config."""
    from llm_analysis.exact.exact_analysis import analysis_class
    from llm_analysis.exact.tree_model import model_config_for
    hf_config, model_id = load_hf_config(model, revision)
    name = model_id or (model if isinstance(model, str) else str(hf_config.get("model_type", "model")))
    try:
        desc = description_for(hf_config, model_id, revision, use_cache)
    except UnsupportedArchitectureError as derive_refusal:
        return _verified_table(hf_config, model_id, revision, use_cache, name, derive_refusal)
    return analysis_class(desc), with_checkpoint_weights(model_config_for(desc, name), hf_config, name)


def with_checkpoint_weights(cfg: Any, hf_config: Dict[str, Any], name: str) -> Any:
    """`cfg` (derived from the module tree, which holds no quantisation) with the weight format its config.json's
    quantization_config states and which weights it covers, as the Hub import reads them (hub/quantization.py):
    gpt-oss's MXFP4 routed experts, beside bf16 attention, router, embeddings and LM head."""
    from llm_analysis.hub.quantization import checkpoint_quantized_weights, checkpoint_weight_format
    weights = checkpoint_weight_format(hf_config)
    if weights is None:
        return cfg
    covered = checkpoint_quantized_weights(hf_config, f"config.json of {name}", cfg) or "all"
    if not cfg.is_moe:  # (no routed experts found in the tree: nothing the format could cover alone)
        covered = "all"
    return cfg.model_copy(update={"checkpoint_weight_format": weights, "checkpoint_quantized_weights": covered})


def _verified_table(hf_config: Dict[str, Any], model_id: Optional[str], revision: Optional[str], use_cache: bool,
                    name: str, derive_refusal: UnsupportedArchitectureError) -> Tuple[type, Any]:
    """(LLMAnalysis, the family table's ModelConfig) when the module tree cannot be
    derived (e.g. state-space mixers, which the derivation does not describe) but the
    Hub import's description verifies against the same model: parameters part by part
    and the prefill FLOPs under FlopCounterMode (verify.py; cached like the derivation).
    Otherwise the derivation's refusal, with the table's reason appended."""
    from llm_analysis.facade import LLMAnalysis
    from llm_analysis.hub.entry import model_config_from_hf_dict
    from llm_analysis.exact.verify import verify_hf_config
    try:
        model_config = model_config_from_hf_dict(hf_config, name=name)
        verify_hf_config(hf_config, model_id, revision, model_config=model_config, use_cache=use_cache)
    except ConfigError as table_refusal:  # HubImportError / UnsupportedArchitectureError included
        # one line (a command-line error is one line); the table's reason only where it says something else
        derived, table = " ".join(str(derive_refusal).split()), " ".join(str(table_refusal).split())
        table_news = _sentences_not_in(table, derived)
        either = f"; the family table does not describe it exactly either: {table_news}" if table_news else ""
        raise UnsupportedArchitectureError(f"{derived}{either}") from None
    return LLMAnalysis, model_config



# What a refusal opens with to say whose it is (`model_type 'llava': `, `model 'org/name': `, `local model '…': `):
# the two paths name the same model differently, so a reason they share is compared without it.
_REFUSAL_SUBJECT = re.compile(r"^(?:local )?model(?:_type)? '[^']*': ")
# a sentence ends at a full stop followed by a capital or a bracket; "e.g. Gemma3" and "i.e. X" do not end one
_SENTENCE_END = re.compile(r"(?<!e\.g\.)(?<!i\.e\.)(?<=\.)\s+(?=[A-Z(])")


def _sentences_not_in(text: str, already_said: str) -> str:
    """The sentences of `text` that `already_said` does not hold (each without its subject prefix), joined:
    the table's reason appended to the derivation's says only what the derivation's did not (a Llava wrapper is
    refused by both for the same vision-tower reason, which was printed twice)."""
    return " ".join(s for s in _SENTENCE_END.split(text) if s and _REFUSAL_SUBJECT.sub("", s) not in already_said)
