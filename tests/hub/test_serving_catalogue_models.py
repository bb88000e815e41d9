"""The models of the serving validation rows (benchmarks/data/validation/serving_dev.csv) load from
the catalogue by the name the rows use, count exactly what transformers builds, and serve.

MiniMax-M2.5 and GLM-5 are causal LMs: the entry must equal the class their config.json names,
built on the meta device. Qwen3.5-397B-A17B and Kimi-K2.5 ship as vision-language checkpoints; their
entries count the whole class (what an engine loading the checkpoint holds), and their vision tower and
projector parts equal the vision parts of that class as transformers builds it. The raw configs are tests/data/hf_configs_aiconfigurator/ (SOURCES.md).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "tests" / "data" / "hf_configs_aiconfigurator"
SERVING_ROWS = ROOT / "benchmarks" / "data" / "validation" / "serving_dev.csv"

# the name the serving rows use -> (raw config file, transformers class the checkpoint loads as,
# top-level modules of that class that are not the language model)
MODELS = {
    "MiniMaxAI/MiniMax-M2.5": ("MiniMaxAI_MiniMax-M2.5", "MiniMaxM2ForCausalLM", ()),
    "zhipuai/GLM-5": ("zai-org_GLM-5", "GlmMoeDsaForCausalLM", ()),
    "Qwen/Qwen3.5-397B-A17B": ("Qwen_Qwen3.5-397B-A17B", "Qwen3_5MoeForConditionalGeneration", ("visual",)),
    # the config names the repository's remote class KimiK25ForConditionalGeneration; transformers
    # registers model_type kimi_k25 with its own Kimi_K25ForConditionalGeneration
    "moonshotai/Kimi-K2.5": ("moonshotai_Kimi-K2.5", "Kimi_K25ForConditionalGeneration",
                             ("vision_tower", "mm_projector")),
}
# a layout each model is served at in the rows (csv system, precision, tp), as the catalogue names them
LAYOUTS = {
    "MiniMaxAI/MiniMax-M2.5": ("h200-sxm-141gb", "fp8", 4, "vllm"),
    "zhipuai/GLM-5": ("h200-sxm-141gb", "fp8", 8, "sglang"),
    "Qwen/Qwen3.5-397B-A17B": ("b200-180gb", "w16a16e16", 8, "sglang"),
    "moonshotai/Kimi-K2.5": ("b200-180gb", "nvfp4", 8, "vllm"),
}


def _whole_class_params_by_part(stem: str, class_name: str):
    raw = json.loads((RAW / f"{stem}.json").read_text())
    cfg = transformers.AutoConfig.for_model(**raw)
    with torch.device("meta"):
        model = getattr(transformers, class_name)._from_config(cfg, dtype=torch.bfloat16)
    parts = {}
    for name, p in model.named_parameters():
        top = name.split(".")[1] if name.startswith("model.") else name.split(".")[0]
        parts[top] = parts.get(top, 0) + p.numel()
    return parts


def test_the_rows_name_these_models():
    with open(SERVING_ROWS, newline="") as f:
        names = {row["model_path"] for row in csv.DictReader(f)}
    assert set(MODELS) <= names


@pytest.mark.parametrize("name", sorted(MODELS))
def test_entry_counts_what_transformers_builds(name):
    stem, class_name, vision_parts = MODELS[name]
    cfg = get_model_config_by_name(name)
    assert cfg.name == name.replace("/", "_")
    parts = _whole_class_params_by_part(stem, class_name)
    vision = sum(parts[p] for p in vision_parts)
    assert (vision > 0) == bool(vision_parts)
    ours = LLMAnalysis(cfg, get_gpu_config_by_name("h200-sxm-141gb"))
    assert ours.get_num_params_total() == sum(parts.values())
    breakdown = ours.get_num_params_breakdown()
    assert breakdown.get("vision tower", 0) + breakdown.get("projector", 0) == vision
    assert "Hugging Face Hub config.json of" in cfg.source and "Apache-2.0" in cfg.source


@pytest.mark.parametrize("name", sorted(MODELS))
def test_entry_serves_at_a_layout_of_the_rows(name):
    gpu, dtype, tp, framework = LAYOUTS[name]
    a = LLMAnalysis(get_model_config_by_name(name), get_gpu_config_by_name(gpu), get_dtype_config_by_name(dtype),
                    ParallelismConfig(tp_size=tp), perf_model="calibrated")
    out = a.serve(concurrency=8, input_len=1024, output_len=128, framework=framework)
    for key in ("ttft_s", "tpot_s"):
        assert math.isfinite(out[key]) and out[key] > 0, (key, out[key])
