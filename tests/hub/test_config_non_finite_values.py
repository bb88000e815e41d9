"""A config.json that transformers reads is read: NaN, Infinity and -Infinity (Python's json
and transformers accept them; Nemotron-H and Nemotron-3 configs hold
`"time_step_limit": [0.0, Infinity]`) are refused only where a value means a size.

Expected parameter counts come from transformers building the causal LM on the meta device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.errors import LLMAnalysisError

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "support"
GPU = get_gpu_config_by_name("a100-sxm-80gb")

# a small Nemotron-H (Mamba-2 / attention / MLP blocks), written as transformers writes it
NEMOTRON_H = dict(model_type="nemotron_h", architectures=["NemotronHForCausalLM"], vocab_size=100,
                  hidden_size=64, num_hidden_layers=4, hybrid_override_pattern="M*M-",
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=128,
                  mamba_num_heads=4, mamba_head_dim=16, n_groups=2, ssm_state_size=8,
                  time_step_limit=[0.0, "@INF@"], time_step_floor="@NAN@", tie_word_embeddings=False)


def _config_text(cfg: dict) -> str:
    """JSON as Nemotron's config.json spells non-finite floats (bare Infinity / NaN)."""
    return json.dumps(cfg).replace('"@INF@"', "Infinity").replace('"@NAN@"', "NaN").replace(
        '"@-INF@"', "-Infinity")


def _meta_params(cfg: dict) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    hf = transformers.AutoConfig.for_model(**json.loads(_config_text(cfg)))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf)
    return sum(p.numel() for p in model.parameters())


def test_text_holds_bare_non_finite_literals():
    text = _config_text(NEMOTRON_H)
    assert "Infinity" in text and "NaN" in text and '"@' not in text
    with pytest.raises(ValueError):  # strict JSON refuses it: the case this file is about
        json.loads(text, parse_constant=lambda token: (_ for _ in ()).throw(ValueError(token)))


@pytest.mark.parametrize("form", ["json_path", "model_directory"])
def test_local_config_with_infinity_is_counted(tmp_path, form):
    (tmp_path / "model").mkdir()
    path = tmp_path / "model" / "config.json"
    path.write_text(_config_text(NEMOTRON_H))
    cfg = get_model_config_by_name(str(path) if form == "json_path" else str(path.parent))
    assert LLMAnalysis(cfg, GPU).get_num_params_total() == _meta_params(NEMOTRON_H)


@pytest.mark.parametrize("literal", ["Infinity", "-Infinity", "NaN"])
def test_non_finite_size_is_refused_naming_the_key(tmp_path, literal):
    """Refused on meaning: a width that is not a finite integer."""
    path = tmp_path / "config.json"
    path.write_text(_config_text(NEMOTRON_H).replace('"hidden_size": 64', f'"hidden_size": {literal}'))
    with pytest.raises(LLMAnalysisError) as info:
        get_model_config_by_name(str(path))
    assert "hidden_size" in str(info.value) and literal in str(info.value)


def test_our_own_config_file_stays_strict(tmp_path):
    """A ModelConfig JSON of ours (not a transformers config) keeps refusing non-finite numbers."""
    ours = get_model_config_by_name("meta-llama_Llama-2-7b-hf").model_dump()
    path = tmp_path / "ours.json"
    path.write_text(json.dumps(ours).replace(f'"hidden_dim": {ours["hidden_dim"]}', '"hidden_dim": Infinity'))
    with pytest.raises(LLMAnalysisError) as info:
        get_model_config_by_name(str(path))
    assert "ours.json" in str(info.value) and "Infinity" in str(info.value)


def test_hub_config_with_infinity_is_counted(loopback_hub):
    """Through the real huggingface_hub client (a fresh interpreter) against the loopback Hub."""
    hub = loopback_hub({"nvidia/tiny-nemotron-h": {"main": {"config.json": _config_text(NEMOTRON_H).encode()}}})
    ops = [{"op": "hf", "name": "nvidia/tiny-nemotron-h"}, {"op": "by_name", "name": "nvidia/tiny-nemotron-h"}]
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("HF_", "HUGGING_FACE_", "TRANSFORMERS_")) and "PROXY" not in k.upper()}
        env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(Path(tmp) / "hf-home"), HF_HUB_DISABLE_TELEMETRY="1",
                   NO_PROXY="127.0.0.1,localhost", PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
        p = subprocess.run([sys.executable, str(SUPPORT / "hub_server.py"), "client"], input=json.dumps(ops),
                           capture_output=True, text=True, cwd=ROOT, env=env, timeout=150)
    assert "@@RESULTS@@" in p.stdout, p.stderr[-4000:]
    results = json.loads(p.stdout.split("@@RESULTS@@", 1)[1])["results"]
    from llm_analysis.config import ModelConfig
    expected = _meta_params(NEMOTRON_H)
    for result in results:
        assert "ok" in result, result.get("message")
        assert LLMAnalysis(ModelConfig(**result["ok"]), GPU).get_num_params_total() == expected
