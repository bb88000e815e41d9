"""Served models resolve offline by the names serving engines and their benchmarks use.

1. Catalogue entries written from real config.json files (tests/data/hf_configs_aiconfigurator/, SOURCES.md
   there; scripts/catalogue_from_served_configs.py): each resolves by its Hub id without the network and
   counts exactly what transformers builds from that config.json on the meta device (checked here by name
   for one model of each family; tests/hub/test_aiconfigurator_configs.py checks every config's import
   against transformers, and the entries are checked here to equal that import).
2. Checkpoint variants (llm_analysis/catalogue/checkpoint_variants.json: instruction-tuned and quantised
   releases with a catalogue entry's shapes): each resolves under its own name, to a real entry, and the
   published parameter counts of the model cards confirm the mapping.
3. A renamed Hub organisation (zhipuai -> zai-org) finds the model under its new name, and a name that is
   neither stays an error naming it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.catalogue.lookup import CHECKPOINT_VARIANTS_FILE, MODEL_CONFIGS_DIR, model_configs
from llm_analysis.config import get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.errors import LLMAnalysisError

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "tests" / "data" / "hf_configs_aiconfigurator"
GPU = get_gpu_config_by_name("h100-sxm-80gb")
OFFLINE = {"HF_HUB_OFFLINE": "1"}


def _script():
    spec = importlib.util.spec_from_file_location("catalogue_from_served_configs",
                                                  ROOT / "scripts" / "catalogue_from_served_configs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()
WRITTEN = sorted(p.stem for p in MODEL_CONFIGS_DIR.glob("*.json") if SCRIPT.MARK in json.loads(p.read_text())["source"])


@pytest.fixture(autouse=True)
def hub_offline(monkeypatch):
    """No lookup here may reach for the network: every name must resolve from the package alone."""
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)


def test_every_importable_served_config_has_an_entry_equal_to_its_import():
    imported = SCRIPT.entries()
    counted = {stem for stem, data in imported.items() if data is not None}
    assert len(WRITTEN) >= 55 and set(WRITTEN) == counted
    for stem in WRITTEN:
        on_disk = json.loads((MODEL_CONFIGS_DIR / f"{stem}.json").read_text())
        assert on_disk == imported[stem], f"{stem}: the entry differs from the import of its config.json"


def _transformers_params(stem: str) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    raw = json.loads((RAW / f"{stem}.json").read_text())
    cls = getattr(transformers, raw["architectures"][0])
    try:
        hf = transformers.AutoConfig.for_model(**raw)
    except ValueError:  # a model_type transformers does not register: its architecture's config class
        hf = cls.config_class(**{k: v for k, v in raw.items() if k != "model_type"})
    with torch.device("meta"):
        model = cls._from_config(hf, dtype=torch.bfloat16)
    return sum(p.numel() for p in model.parameters())


# one checkpoint of each family the entries add, looked up as a user types it
@pytest.mark.parametrize("hub_id", ["Qwen/Qwen3-235B-A22B-FP8", "deepseek-ai/DeepSeek-R1", "zai-org/GLM-5-FP8",
                                    "nvidia/Llama-3.1-70B-Instruct-FP8", "Qwen/Qwen3-VL-8B-Instruct",
                                    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "meta-llama/Llama-4-Scout-17B-16E-Instruct",
                                    "moonshotai/Kimi-K2-Instruct"])
def test_entry_by_hub_id_counts_what_transformers_builds(hub_id):
    cfg = get_model_config_by_name(hub_id)
    assert cfg.name == hub_id.replace("/", "_")
    assert LLMAnalysis(cfg, GPU).get_num_params_total() == _transformers_params(hub_id.replace("/", "_"))


def _variants() -> dict:
    return json.loads(CHECKPOINT_VARIANTS_FILE.read_text())


VARIANTS = sorted(_variants()["variants"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_resolves_under_its_own_name_to_a_real_entry(variant):
    entry = _variants()["variants"][variant]
    assert entry["architecture_of"] in model_configs, f"{variant}: no catalogue entry {entry['architecture_of']}"
    assert variant.replace("/", "_") not in model_configs, f"{variant} has its own entry: the variant is not needed"
    assert len(entry["why"]) > 40
    cfg = get_model_config_by_name(variant)
    base = model_configs[entry["architecture_of"]]
    assert cfg.name == variant.replace("/", "_") and variant in cfg.source and base.name in cfg.source
    # its own: name, source, the release's weight format (tests/catalogue/test_checkpoint_weight_formats.py)
    # and context length where given
    own = {"name", "source", "checkpoint_weight_format"} | ({"max_seq_len"} if "max_seq_len" in entry else set())
    assert cfg.model_dump(exclude=own) == base.model_dump(exclude=own)
    assert cfg.checkpoint_weight_format == entry["checkpoint_weight_format"]
    assert cfg.max_seq_len == entry.get("max_seq_len", base.max_seq_len)
    # case-insensitively, as catalogue names are
    assert get_model_config_by_name(variant.lower()).num_layers == base.num_layers


# published parameter counts of the checkpoints (model cards / the Hub's safetensors totals), to 0.5%
PUBLISHED_PARAMS = {
    # huggingface.co/meta-llama/Llama-3.1-8B-Instruct: 8.03B parameters (safetensors total)
    "meta-llama/Llama-3.1-8B-Instruct": 8.03e9,
    # huggingface.co/meta-llama/Llama-3.1-70B-Instruct: 70.6B
    "meta-llama/Llama-3.1-70B-Instruct": 70.6e9,
    # huggingface.co/meta-llama/Llama-3.1-405B-Instruct: 406B (405.9B)
    "meta-llama/Llama-3.1-405B-Instruct": 405.9e9,
    # DeepSeek-R1 model card: 671B total parameters (the 14B multi-token-prediction module aside)
    "deepseek-ai/DeepSeek-R1-0528": 671e9,
    "nvidia/DeepSeek-R1-FP4": 671e9,
    # Qwen3-8B model card: 8.2B parameters
    "Qwen/Qwen3-8B-FP8": 8.2e9,
    # Qwen3-0.6B model card: 0.6B parameters (0.44B without embeddings; tied embeddings)
    "Qwen/Qwen3-0.6B-FP8": 0.6e9,
    # Qwen3-235B-A22B-Instruct-2507 / Qwen3-30B-A3B-Instruct-2507 model cards: 235B and 30.5B parameters
    "Qwen/Qwen3-235B-A22B-Instruct-2507": 235e9,
    "Qwen/Qwen3-30B-A3B-Instruct-2507": 30.5e9,
}


@pytest.mark.parametrize("variant", sorted(PUBLISHED_PARAMS))
def test_variant_has_its_published_parameter_count(variant):
    n = LLMAnalysis(get_model_config_by_name(variant), GPU).get_num_params_total()
    assert abs(n / PUBLISHED_PARAMS[variant] - 1) < 0.005 if PUBLISHED_PARAMS[variant] > 1e9 else \
        abs(n / PUBLISHED_PARAMS[variant] - 1) < 0.02


# the architecture tables of the model cards (huggingface.co/Qwen/<name>): layers, query / KV heads, experts,
# activated experts, native context
MODEL_CARD_ARCHITECTURE = {
    "Qwen/Qwen3-235B-A22B-Instruct-2507": (94, 64, 4, 128, 8, 262144),
    "Qwen/Qwen3-30B-A3B-Instruct-2507": (48, 32, 4, 128, 8, 262144),
}


@pytest.mark.parametrize("variant", sorted(MODEL_CARD_ARCHITECTURE))
def test_variant_has_its_model_cards_architecture(variant):
    cfg = get_model_config_by_name(variant)
    assert (cfg.num_layers, cfg.n_head, cfg.num_key_value_heads, cfg.moe_num_experts, cfg.moe_top_k,
            cfg.max_seq_len) == MODEL_CARD_ARCHITECTURE[variant]


def test_an_instruction_tuned_variant_has_the_shapes_of_its_quantised_sibling_config():
    """Independent of the variants file: NVIDIA's FP8 checkpoint of Llama-3.1-70B-Instruct ships its own
    config.json (tests/data); the variant meta-llama/Llama-3.1-70B-Instruct, mapped to the pretrained
    Llama-3.1-70B entry, must have exactly its shapes."""
    variant = get_model_config_by_name("meta-llama/Llama-3.1-70B-Instruct")
    sibling = get_model_config_by_name(str(RAW / "nvidia_Llama-3.1-70B-Instruct-FP8.json"))
    assert variant.model_dump(exclude={"name", "source"}) == sibling.model_dump(exclude={"name", "source"})


def test_renamed_organisation_finds_the_model_under_its_new_name():
    cfg = get_model_config_by_name("zhipuai/GLM-5.1")
    new = get_model_config_by_name("zai-org/GLM-5.1")
    assert cfg.name == "zhipuai_GLM-5.1" and "zai-org/GLM-5.1" in cfg.source
    assert cfg.model_dump(exclude={"name", "source"}) == new.model_dump(exclude={"name", "source"})


def test_a_name_neither_catalogued_nor_a_variant_stays_an_error_naming_it():
    with pytest.raises(LLMAnalysisError, match="zhipuai/GLM-9"):
        get_model_config_by_name("zhipuai/GLM-9")
    with pytest.raises(LLMAnalysisError, match="Llama-3.1-8B-Instruct"):  # suggested: the variant
        get_model_config_by_name("Llama-3.1-8B-Instruct")


def test_cli_infers_a_quantised_checkpoint_by_its_hub_name_offline():
    env = {**__import__("os").environ, **OFFLINE}
    out = subprocess.run([sys.executable, "-m", "llm_analysis.analysis", "infer", "--model_name",
                          "nvidia/Llama-3.1-8B-Instruct-FP8", "--gpu_name", "h100-sxm-80gb", "--dtype_name", "fp8",
                          "--seq_len", "512", "--num_tokens_to_generate", "64", "--output_format", "json"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "nvidia_Llama-3.1-8B-Instruct-FP8" in out.stdout
