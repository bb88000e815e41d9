"""Real config.json files of served models (tests/data/hf_configs_aiconfigurator/, SOURCES.md there):
each one, loaded as a user loads a config.json path, is either counted exactly as transformers builds
the class a user loads, or refused with a reason naming the feature not modelled. None is silently
wrong, and none fails on syntax transformers accepts (`Infinity` in Nemotron's configs).

Expected counts come from transformers on the meta device: the class the config's `architectures`
names when transformers has it, else the one its Auto classes pick for generation. For the configs
counted, the per-part parameters and one prefill's matmul FLOPs (FlopCounterMode, full size, meta
tensors) are checked too, through `llm_analysis.exact.verify_hf_config`. Each refusal is pinned to the
feature it names, so a refusal turning into a count (or into another refusal) is noticed here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.errors import ConfigError

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

RAW = Path(__file__).resolve().parents[2] / "tests" / "data" / "hf_configs_aiconfigurator"
GPU = get_gpu_config_by_name("a100-sxm-80gb")
EXACT = "exact"

# what each config must give: EXACT, or a phrase its refusal must hold (the feature not modelled)
VISION = "holds the vision tower"
EXPECTED = {
    "MiniMaxAI_MiniMax-M2.5": EXACT,
    "MiniMaxAI_MiniMax-M2.7": EXACT,
    "MiniMaxAI_MiniMax-M3": "shared experts",  # model_type minimax_m3: not registered in transformers
    "Qwen_Qwen3-0.6B": EXACT,
    "Qwen_Qwen3-1.7B": EXACT,
    "Qwen_Qwen3-235B-A22B-FP8": EXACT,
    "Qwen_Qwen3-235B-A22B": EXACT,
    "Qwen_Qwen3-30B-A3B-FP8": EXACT,
    "Qwen_Qwen3-30B-A3B": EXACT,
    "Qwen_Qwen3-32B-FP8-Static-PerTensor": EXACT,
    "Qwen_Qwen3-32B-FP8": EXACT,
    "Qwen_Qwen3-32B": EXACT,
    "Qwen_Qwen3-8B": EXACT,
    "Qwen_Qwen3-Coder-480B-A35B-Instruct": EXACT,
    "Qwen_Qwen3-VL-235B-A22B-Instruct": EXACT,  # vision tower and projector counted
    "Qwen_Qwen3-VL-2B-Instruct": EXACT,  # vision tower and projector counted
    "Qwen_Qwen3-VL-30B-A3B-Instruct": EXACT,  # vision tower and projector counted
    "Qwen_Qwen3-VL-32B-Instruct": EXACT,  # vision tower and projector counted
    "Qwen_Qwen3-VL-32B-Thinking": EXACT,  # vision tower and projector counted
    "Qwen_Qwen3-VL-4B-Instruct": EXACT,  # vision tower and projector counted
    "Qwen_Qwen3-VL-8B-Instruct": EXACT,  # vision tower and projector counted
    "Qwen_Qwen3.5-122B-A10B": EXACT,  # vision tower and projector counted
    "Qwen_Qwen3.5-27B": EXACT,  # vision tower and projector counted
    "Qwen_Qwen3.5-35B-A3B": EXACT,  # vision tower and projector counted
    "Qwen_Qwen3.5-397B-A17B": EXACT,  # vision tower and projector counted
    "XiaomiMiMo_MiMo-7B-Base": "num_nextn_predict_layers",  # model_type mimo: not in transformers
    "XiaomiMiMo_MiMo-V2-Flash": EXACT,
    "deepseek-ai_DeepSeek-R1": EXACT,
    "deepseek-ai_DeepSeek-V3.2": EXACT,
    "deepseek-ai_DeepSeek-V3": EXACT,
    "deepseek-ai_DeepSeek-V4-Flash": "hyper-connections",
    "deepseek-ai_DeepSeek-V4-Pro": "hyper-connections",
    "google_gemma-4-26B-A4B": EXACT,  # vision tower and projector counted; keys reused as values
    "meta-llama_Llama-4-Maverick-17B-128E-Instruct": EXACT,  # vision tower counted; eager all-expert FLOPs
    "meta-llama_Llama-4-Scout-17B-16E-Instruct": EXACT,  # vision tower counted; eager all-expert FLOPs
    "meta-llama_Meta-Llama-3.1-405B": EXACT,
    "meta-llama_Meta-Llama-3.1-70B": EXACT,
    "meta-llama_Meta-Llama-3.1-8B": EXACT,
    "mistralai_Mixtral-8x22B-v0.1": EXACT,
    "mistralai_Mixtral-8x7B-v0.1": EXACT,
    # model_type kimi_k2 is not registered in transformers; its architectures names DeepseekV3ForCausalLM,
    # the class engines load it as: counted as that class builds it from this config
    "moonshotai_Kimi-K2-Instruct": EXACT,
    "moonshotai_Kimi-K2.5": EXACT,  # as transformers' Kimi_K25ForConditionalGeneration (the remote class is not run)
    "moonshotai_Kimi-K3": VISION,
    "nvidia_DeepSeek-V3.1-NVFP4": EXACT,
    "nvidia_DeepSeek-V3.2-NVFP4": EXACT,
    "nvidia_DeepSeek-V4-Flash-NVFP4": "hyper-connections",
    "nvidia_DeepSeek-V4-Pro-NVFP4": "hyper-connections",
    "nvidia_GLM-5-NVFP4": EXACT,
    "nvidia_GLM-5.1-NVFP4": EXACT,
    "nvidia_GLM-5.2-NVFP4": EXACT,  # indexers shared between layers (indexer_types)
    "nvidia_Gemma-4-26B-A4B-NVFP4": EXACT,  # vision tower and projector counted; keys reused as values
    "nvidia_Gemma-4-31B-IT-NVFP4": EXACT,  # vision tower and projector counted; keys reused as values
    "nvidia_Kimi-K2.5-NVFP4": EXACT,  # as transformers' Kimi_K25ForConditionalGeneration (the remote class is not run)
    "nvidia_Kimi-K2.6-NVFP4": EXACT,  # as transformers' Kimi_K25ForConditionalGeneration (the remote class is not run)
    "nvidia_Kimi-K2.7-Code-NVFP4": EXACT,  # as transformers' Kimi_K25ForConditionalGeneration (the remote class is not run)
    "nvidia_Llama-3.1-70B-Instruct-FP8": EXACT,
    "nvidia_Llama-3_3-Nemotron-Super-49B-v1": "block_configs",  # per-layer NAS blocks, remote code
    "nvidia_MiniMax-M2.5-NVFP4": EXACT,
    "nvidia_MiniMax-M2.7-NVFP4": EXACT,
    "nvidia_MiniMax-M3-NVFP4": VISION,
    "nvidia_NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": EXACT,
    "nvidia_NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4": EXACT,
    "nvidia_NVIDIA-Nemotron-3-Super-120B-A12B-FP8": EXACT,  # latent MoE; config holds Infinity
    "nvidia_NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4": EXACT,  # latent MoE
    "nvidia_NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16": EXACT,  # latent MoE
    "nvidia_NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8": EXACT,  # latent MoE
    "nvidia_NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4": EXACT,  # latent MoE
    "nvidia_NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4": EXACT,
    "nvidia_Nemotron-H-56B-Base-8K": EXACT,  # its config holds Infinity
    "nvidia_Qwen3-235B-A22B-NVFP4": EXACT,
    "nvidia_Qwen3.5-122B-A10B-NVFP4": EXACT,  # vision tower and projector counted
    "nvidia_Qwen3.5-397B-A17B-NVFP4": EXACT,  # vision tower and projector counted
    "nvidia_Qwen3.6-27B-NVFP4": EXACT,  # vision tower and projector counted
    "nvidia_Qwen3.6-35B-A3B-NVFP4": EXACT,  # vision tower and projector counted
    "openai_gpt-oss-120b": EXACT,
    "openai_gpt-oss-20b": EXACT,
    "sgl-project_DeepSeek-V4-Flash-FP8": "hc_mult",  # model_type deepseek_ref: not in transformers
    "sgl-project_DeepSeek-V4-Pro-FP8": "hc_mult",
    "stepfun-ai_Step-3.7-Flash-FP8": VISION,
    "stepfun-ai_Step-3.7-Flash": VISION,
    "zai-org_GLM-5-FP8": EXACT,
    "zai-org_GLM-5.1-FP8": EXACT,
    "zai-org_GLM-5.1": EXACT,
    "zai-org_GLM-5.2-FP8": EXACT,
    "zai-org_GLM-5.2": EXACT,
    "zai-org_GLM-5": EXACT,
}
# the floor of the count: raise it when a family becomes exact (issue 29 asks for 60 of its 79)
MIN_EXACT = 73
STEMS = sorted(p.stem for p in RAW.glob("*.json"))


def _raw(stem: str) -> dict:
    return json.loads((RAW / f"{stem}.json").read_text())  # Python's json reads Infinity / NaN, as transformers


def _loaded_class(raw: dict):
    """The transformers class a user loads, or None when transformers has none for this config."""
    from transformers.models.auto import modeling_auto
    named = (raw.get("architectures") or [None])[0]
    if named and hasattr(transformers, named):
        return getattr(transformers, named)
    for mapping in ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"):
        name = getattr(modeling_auto, mapping).get(raw.get("model_type"))
        if name:
            return getattr(transformers, name)
    return None


def _transformers_config(raw: dict, cls):
    """transformers' config of `raw`; for a model_type it does not register, the config class of the
    architecture class `cls` (what an engine loading the checkpoint by its architecture name reads)."""
    if _transformers_reads(raw):
        return transformers.AutoConfig.for_model(**raw)
    return cls.config_class(**{k: v for k, v in raw.items() if k != "model_type"})


def _transformers_reads(raw: dict) -> bool:
    try:
        transformers.AutoConfig.for_model(**raw)
    except ValueError:  # model_type not registered (remote code only)
        return False
    return True


def test_every_fixture_has_an_expectation():
    assert STEMS == sorted(EXPECTED)
    assert len(STEMS) == 86


def test_count_of_exact_configs():
    exact = sum(1 for v in EXPECTED.values() if v == EXACT)
    print(f"{exact} exact, {len(EXPECTED) - exact} refused, of {len(EXPECTED)} real configs")
    assert exact >= MIN_EXACT


@pytest.mark.parametrize("stem", STEMS)
def test_real_config_is_exact_or_refused_naming_the_feature(stem):
    raw = _raw(stem)
    expected = EXPECTED[stem]
    try:
        cfg = get_model_config_by_name(str(RAW / f"{stem}.json"))  # as a user gives a config.json path
    except ConfigError as exc:
        message = str(exc)
        assert expected != EXACT, f"{stem} should be counted, was refused: {message}"
        assert expected in message, f"{stem}: refusal does not name {expected!r}: {message}"
        if _transformers_reads(raw):  # refused on meaning, never on syntax transformers accepts
            assert "JSON" not in message, message
        return
    assert expected == EXACT, f"{stem} was counted but should be refused naming {expected!r}"
    cls = _loaded_class(raw)
    assert cls is not None, f"{stem}: counted, but transformers builds no class to check it against"
    hf = _transformers_config(raw, cls)
    with torch.device("meta"):
        model = cls._from_config(hf, dtype=torch.bfloat16)
    assert LLMAnalysis(cfg, GPU).get_num_params_total() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("stem", [s for s in STEMS if EXPECTED[s] == EXACT])
def test_counted_config_matches_part_by_part_and_prefill_flops(stem):
    from llm_analysis.exact.verify import verify_hf_config
    verdict = verify_hf_config(_raw(stem), model_id=stem, use_cache=False)  # raises when a part differs
    assert verdict["exact"] and verdict["flops_exact"] is True, verdict
