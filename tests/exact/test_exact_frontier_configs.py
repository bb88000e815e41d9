"""The exact path (`analysis_from_hf`: operators derived from the transformers module tree) over real
configs of the frontier families the family table refuses (issue 29 item 3): each is counted as
transformers builds the class a user loads, or refused naming why; never the language model alone
of a class that also holds a vision tower.

Configs: tests/data/hf_configs_aiconfigurator/ (SOURCES.md). Expected parameters come from the
loaded class built on the meta device; the exact path itself checks its description against
FlopCounterMode at two prefill lengths before answering.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_analysis.config import get_gpu_config_by_name
from llm_analysis.errors import UnsupportedArchitectureError

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

RAW = Path(__file__).resolve().parents[2] / "tests" / "data" / "hf_configs_aiconfigurator"
GPU = get_gpu_config_by_name("a100-sxm-80gb")

# config -> (the class a user loads, None when the exact path must refuse; phrase the refusal holds)
FRONTIER = {
    # two kinds of indexer layer (full / shared: a layer reusing the previous full layer's top-k);
    # the family table counts it too (ModelConfig.layer_indexer, tests/hub/test_glm_shared_indexer.py)
    "zai-org_GLM-5.2": ("GlmMoeDsaForCausalLM", None),
    # hyper-connections, compressed attention, low-rank output projections
    "deepseek-ai_DeepSeek-V4-Flash": ("DeepseekV4ForCausalLM", None),
    # *ForConditionalGeneration classes holding a vision tower: refused, not counted text-only,
    # unless the Hub import describes the tower (then its description of the whole class is verified)
    # Llama 4: the family table describes its decoder (chunked attention, eager all-expert FLOPs) and
    # the Hub import its tower, so the whole class is counted (tests/hub/test_llama4_decoder.py)
    "meta-llama_Llama-4-Scout-17B-16E-Instruct": ("Llama4ForConditionalGeneration", None),
    "Qwen_Qwen3-VL-2B-Instruct": ("Qwen3VLForConditionalGeneration", None),
    "google_gemma-4-26B-A4B": ("Gemma4ForConditionalGeneration", None),
    "nvidia_MiniMax-M3-NVFP4": (None, "vision tower"),
    # Nemotron-3 Super's latent MoE beside Mamba-2 mixers (ModelConfig.moe_latent_dim)
    "nvidia_NVIDIA-Nemotron-3-Super-120B-A12B-FP8": ("NemotronHForCausalLM", None),
}


def _raw(stem: str) -> dict:
    return json.loads((RAW / f"{stem}.json").read_text())


def _meta_params(raw: dict, class_name: str) -> int:
    cfg = transformers.AutoConfig.for_model(**raw)
    cls = getattr(transformers, class_name)
    if not isinstance(cfg, cls.config_class):  # a text-only class reads the language model's config
        cfg = cfg.get_text_config()
    with torch.device("meta"):
        model = cls._from_config(cfg, dtype=torch.bfloat16)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("stem", sorted(FRONTIER))
def test_frontier_config_on_the_exact_path(stem, exact_cache):
    from llm_analysis.exact import analysis_from_hf
    class_name, refusal = FRONTIER[stem]
    raw = _raw(stem)
    if class_name is None:
        with pytest.raises(UnsupportedArchitectureError) as info:
            analysis_from_hf(raw, GPU)
        assert refusal in str(info.value), str(info.value)
        return
    assert raw["architectures"] == [class_name]
    assert analysis_from_hf(raw, GPU).get_num_params_total() == _meta_params(raw, class_name)


def test_llama4_text_class_named_in_architectures_counts_the_language_model(exact_cache):
    """The refusal's own advice: naming transformers' text-only class counts the language model."""
    from llm_analysis.exact import analysis_from_hf
    raw = dict(_raw("meta-llama_Llama-4-Scout-17B-16E-Instruct"), architectures=["Llama4ForCausalLM"])
    whole = _meta_params(_raw("meta-llama_Llama-4-Scout-17B-16E-Instruct"), "Llama4ForConditionalGeneration")
    text = _meta_params(raw, "Llama4ForCausalLM")
    assert text < whole  # the vision tower and projector the refusal is about
    assert analysis_from_hf(raw, GPU).get_num_params_total() == text
