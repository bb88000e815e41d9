"""Every catalogue model states how its released checkpoint stores its weights (`checkpoint_weight_format`),
as the checkpoint's own files say: the planner's launch arguments run those weights (planner/launch.py).

Independent source: the real files of the releases in tests/data/hf_configs_aiconfigurator/ (copied byte for
byte from ai-dynamo/aiconfigurator, Apache-2.0; SOURCES.md there), read here by the rules the formats are
published under, written out below rather than taken from the package:
- config.json `quantization_config.quant_method` "mxfp4" (transformers' Mxfp4Config, gpt-oss) -> mxfp4;
  "fp8" without a quant_algo (FineGrainedFP8Config: DeepSeek, Qwen -FP8, Kimi-K2, GLM -FP8) -> fp8;
- NVIDIA TensorRT Model Optimizer (ModelOpt) exports: `quant_algo` "FP8" -> fp8, "NVFP4" -> nvfp4, stated in
  config.json (quant_method "modelopt", or ModelOpt named as its producer) or in hf_quant_config.json (its
  "quantization" block; vLLM "detects ModelOpt checkpoints via hf_quant_config.json", docs.vllm.ai
  features/quantization/modelopt);
- MIXED_PRECISION (a format per layer) and compressed-tensors (Kimi-K2.5's int4 experts) name no single
  format of the schema's: none is stated;
- no quantisation stated anywhere: 16-bit (None).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import pytest

from llm_analysis.catalogue import lookup
from llm_analysis.catalogue.lookup import CHECKPOINT_VARIANTS_FILE, MODEL_CONFIGS_DIR
from llm_analysis.config import get_model_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.hub.entry import model_config_from_hf_dict

DATA = Path(__file__).resolve().parents[1] / "data"
SERVED = DATA / "hf_configs_aiconfigurator"
QUANT = SERVED / "hf_quant_config"


def _modelopt(algo: str) -> Optional[str]:
    return {"FP8": "fp8", "NVFP4": "nvfp4"}.get(algo)


def _stated(stem: str) -> Optional[str]:
    """The weight format release `stem`'s files state, by the rules of the module docstring."""
    raw = json.loads((SERVED / f"{stem}.json").read_text())
    q = raw.get("quantization_config") or (raw.get("text_config") or {}).get("quantization_config")
    if q is None and (QUANT / f"{stem}.json").exists():
        return _modelopt(json.loads((QUANT / f"{stem}.json").read_text())["quantization"]["quant_algo"])
    if q is None:
        return None
    method = q.get("quant_method")
    if method == "mxfp4":
        return "mxfp4"
    if method == "fp8" and "quant_algo" not in q:
        return "fp8"
    if method == "modelopt" or (method is None and q.get("producer", {}).get("name") == "modelopt"):
        return _modelopt(q.get("quant_algo"))
    return None  # compressed-tensors, MIXED_PRECISION


SHIPPED_WITH_A_COPY = sorted(p.stem for p in SERVED.glob("*.json") if (MODEL_CONFIGS_DIR / p.name).exists())


def test_the_copies_cover_the_quantised_releases_the_reviewer_named():
    for stem in ("deepseek-ai_DeepSeek-V3", "moonshotai_Kimi-K2-Instruct", "deepseek-ai_DeepSeek-V3.2",
                 "MiniMaxAI_MiniMax-M2.5", "Qwen_Qwen3-32B-FP8", "openai_gpt-oss-120b", "zai-org_GLM-5-FP8",
                 "nvidia_Qwen3-235B-A22B-NVFP4", "nvidia_DeepSeek-V3.1-NVFP4"):
        assert stem in SHIPPED_WITH_A_COPY and _stated(stem) is not None, stem


@pytest.mark.parametrize("stem", SHIPPED_WITH_A_COPY)
def test_every_entry_states_the_format_its_release_s_files_state(stem):
    assert get_model_config_by_name(stem).checkpoint_weight_format == _stated(stem)


def test_deepseek_v3_is_an_fp8_checkpoint_as_its_config_says():
    q = json.loads((SERVED / "deepseek-ai_DeepSeek-V3.json").read_text())["quantization_config"]
    assert q["quant_method"] == "fp8" and q["weight_block_size"] == [128, 128]
    cfg = get_model_config_by_name("deepseek-ai/DeepSeek-V3")
    assert cfg.checkpoint_weight_format == "fp8" and "deepseek-ai_DeepSeek-V3.json" in cfg.source


def test_the_hub_import_reads_a_modelopt_fp8_export_named_by_its_producer():
    # Qwen/Qwen3-32B-FP8-Static-PerTensor: quantization_config has producer modelopt and quant_algo FP8, no
    # quant_method; its hf_quant_config.json (aiconfigurator's copy) says quant_algo FP8 too
    raw = json.loads((SERVED / "Qwen_Qwen3-32B-FP8-Static-PerTensor.json").read_text())
    assert "quant_method" not in raw["quantization_config"]
    assert model_config_from_hf_dict(raw, "q").checkpoint_weight_format == "fp8"
    modelopt_fp8 = {**raw, "quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}}
    assert model_config_from_hf_dict(modelopt_fp8, "q").checkpoint_weight_format == "fp8"
    mixed = {**raw, "quantization_config": {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}}
    assert model_config_from_hf_dict(mixed, "q").checkpoint_weight_format is None


# The checkpoint variants' own formats, from how each publisher releases: NVIDIA's TensorRT Model Optimizer
# quantisations are named by their format (-FP8: FP8; -FP4 / -NVFP4: NVFP4, its only 4-bit float), Qwen's
# -FP8 releases are fine-grained FP8 as Qwen3-32B-FP8's copy shows, DeepSeek releases its post-trainings in
# FP8 as DeepSeek-V3's and R1's copies show, and the instruction-tuned Llama 3.1 / Qwen3 2507 releases are
# 16-bit as their base releases' copies are.
def _expected_variant_format(variant: str) -> Optional[str]:
    if variant.endswith("-FP8"):
        return "fp8"
    if variant.startswith("nvidia/") and variant.endswith(("-FP4", "-NVFP4")):
        return "nvfp4"
    if variant.startswith("deepseek-ai/"):
        return _stated("deepseek-ai_DeepSeek-R1")
    return None


VARIANTS = sorted(json.loads(CHECKPOINT_VARIANTS_FILE.read_text())["variants"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_variant_carries_its_own_release_s_format(variant):
    assert get_model_config_by_name(variant).checkpoint_weight_format == _expected_variant_format(variant)


def test_a_variant_s_format_is_not_its_architecture_entry_s():
    # nvidia/DeepSeek-R1-FP4 has DeepSeek-R1's shapes, whose release is FP8; NVIDIA's is NVFP4
    assert _stated("deepseek-ai_DeepSeek-R1") == "fp8"
    assert get_model_config_by_name("nvidia/DeepSeek-R1-FP4").checkpoint_weight_format == "nvfp4"
    # nvidia/Llama-3.3-70B-Instruct-FP8 has 16-bit Llama 3.3's shapes
    assert get_model_config_by_name("meta-llama/Llama-3.3-70B-Instruct").checkpoint_weight_format is None
    assert get_model_config_by_name("nvidia/Llama-3.3-70B-Instruct-FP8").checkpoint_weight_format == "fp8"
    # DeepSeek's own V3.1 has the shapes of NVIDIA's NVFP4 quantisation of it
    assert get_model_config_by_name("nvidia/DeepSeek-V3.1-NVFP4").checkpoint_weight_format == "nvfp4"
    assert get_model_config_by_name("deepseek-ai/DeepSeek-V3.1").checkpoint_weight_format == "fp8"


def test_a_variant_without_its_format_is_refused_naming_it(tmp_path, monkeypatch):
    table = json.loads(CHECKPOINT_VARIANTS_FILE.read_text())
    del table["variants"]["nvidia/DeepSeek-R1-FP4"]["checkpoint_weight_format"]
    table["variants"]["Qwen/Qwen3-8B-FP8"]["checkpoint_weight_format"] = "fp6"
    path = tmp_path / "checkpoint_variants.json"
    path.write_text(json.dumps(table))
    monkeypatch.setattr(lookup, "CHECKPOINT_VARIANTS_FILE", path)
    with pytest.raises(ConfigError, match="nvidia/DeepSeek-R1-FP4.*checkpoint_weight_format.*missing.*valid: null"):
        get_model_config_by_name("nvidia/DeepSeek-R1-FP4")
    with pytest.raises(ConfigError, match="Qwen/Qwen3-8B-FP8.*'fp6'.*valid"):
        get_model_config_by_name("Qwen/Qwen3-8B-FP8")
