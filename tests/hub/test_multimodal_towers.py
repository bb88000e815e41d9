"""A vision-language model is never counted silently without its vision tower
(issue 29): the class a user loads (the config's `architectures`, else the Auto class
for generation) decides what is counted. A class that takes the whole multimodal config is
counted whole (vision tower, projector, decoder, head) where its tower is described
(Qwen3-VL, Qwen3-VL-MoE, Qwen3.5, Gemma 3, Kimi-K2.5: hub/vision.py) and otherwise refused naming
its vision tower; a text-only class that
reads `text_config` alone (Qwen3_5ForCausalLM, Gemma3ForCausalLM) is counted exactly.

Configs are built from transformers' own defaults at small sizes (AutoConfig.for_model),
except the published Gemma 3 config in tests/data/hub_fixtures/ and a Kimi-K2.5-shaped config
(model_type unknown to transformers, remote code) written here. Expected counts come from
transformers building the class on the meta device; each refusal is checked against the
same build holding vision parameters, so a refusal is never of a model the text decoder
would have counted whole.
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
from llm_analysis.config import ModelConfig, get_gpu_config_by_name
from llm_analysis.errors import UnsupportedArchitectureError
from llm_analysis.hub.mapping import map_hf_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

ROOT = Path(__file__).resolve().parents[2]
GPU = get_gpu_config_by_name("a100-sxm-80gb")
GEMMA3_4B_IT = ROOT / "tests" / "data" / "hub_fixtures" / "google_gemma-3-4b-it.json"

SMALL_TEXT = dict(vocab_size=200, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16)
SMALL_QWEN3_VL_VISION = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                             deepstack_visual_indexes=[0, 1])


def _wrapper(model_type: str, text: dict, vision: dict, architectures=None) -> dict:
    cfg = transformers.AutoConfig.for_model(model_type, text_config=text, vision_config=vision).to_dict()
    if architectures is not None:
        cfg["architectures"] = architectures
    return cfg


def _import(raw: dict) -> ModelConfig:
    return map_hf_config(json.loads(json.dumps(raw)), name="test/multimodal", source="test",
                         what="test config", trust_remote_code=False, revision=None)


def _meta_build(raw: dict, class_name: str):
    cfg = transformers.AutoConfig.for_model(**json.loads(json.dumps(raw)))
    cls = getattr(transformers, class_name)
    if not isinstance(cfg, cls.config_class):  # a text-only class reads the text config
        cfg = cfg.text_config
    with torch.device("meta"):
        return cls(cfg)


def _vision_params(model) -> int:
    return sum(p.numel() for n, p in model.named_parameters() if "visual" in n or "vision" in n
               or "multi_modal_projector" in n)


def _refused_naming_the_tower(raw: dict, class_name: str):
    with pytest.raises(UnsupportedArchitectureError) as info:
        _import(raw)
    message = str(info.value)
    assert "vision tower" in message and "vision_config" in message and class_name in message, message
    assert "\n" not in message


QWEN3_VL_CASES = {
    "qwen3_vl": ("Qwen3VLForConditionalGeneration", SMALL_TEXT),
    "qwen3_vl_moe": ("Qwen3VLMoeForConditionalGeneration",
                     dict(SMALL_TEXT, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)),
}


@pytest.mark.parametrize("model_type", sorted(QWEN3_VL_CASES))
@pytest.mark.parametrize("named", [True, False], ids=["architectures", "auto-class"])
def test_qwen3_vl_is_counted_whole_with_its_vision_tower(model_type, named):
    """Formerly refused naming the tower; now counted whole, the tower's parameters included
    (the part a text-only count would miss), part by part."""
    class_name, text = QWEN3_VL_CASES[model_type]
    raw = _wrapper(model_type, text, SMALL_QWEN3_VL_VISION, [class_name] if named else None)
    model = _meta_build(raw, class_name)
    assert _vision_params(model) > 0
    analysis = LLMAnalysis(_import(raw), GPU)
    assert analysis.get_num_params_total() == sum(p.numel() for p in model.parameters())
    parts = analysis.get_num_params_breakdown()
    assert parts["vision tower"] + parts["projector"] == _vision_params(model)


def test_kimi_k25_shaped_remote_code_config_is_counted_whole():
    """architectures names the repository's remote class (not run); transformers registers
    model_type kimi_k25 with its own Kimi_K25ForConditionalGeneration, which
    AutoModelForImageTextToText builds: counted as that class, tower and projector included
    (formerly refused naming the tower)."""
    text = transformers.DeepseekV3Config(vocab_size=200, hidden_size=64, intermediate_size=128,
                                         moe_intermediate_size=32, num_hidden_layers=2,
                                         num_attention_heads=4, n_routed_experts=4, num_experts_per_tok=2,
                                         q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=16,
                                         qk_rope_head_dim=8, v_head_dim=16, first_k_dense_replace=1).to_dict()
    raw = {"model_type": "kimi_k25", "architectures": ["KimiK25ForConditionalGeneration"],
           "auto_map": {"AutoConfig": "configuration_kimi_k25.KimiK25Config",
                        "AutoModel": "modeling_kimi_k25.KimiK25ForConditionalGeneration"},
           "text_config": text,
           "vision_config": {"patch_size": 14, "init_pos_emb_height": 64, "merge_kernel_size": [2, 2],
                             "vt_hidden_size": 32, "vt_num_hidden_layers": 2}}
    assert _import(text).moe_num_experts == 4  # the text decoder alone maps
    model = _meta_build(raw, "Kimi_K25ForConditionalGeneration")
    assert _vision_params(model) + sum(p.numel() for n, p in model.named_parameters() if "mm_projector" in n) > 0
    analysis = LLMAnalysis(_import(raw), GPU)
    assert analysis.get_num_params_total() == sum(p.numel() for p in model.parameters())


def test_published_gemma3_config_is_counted_whole():
    """google/gemma-3-4b-it as published: the SigLIP tower (416,866,032 parameters in transformers' build)
    and projector are counted beside the decoder, the total equal to Gemma3ForConditionalGeneration's."""
    raw = json.loads(GEMMA3_4B_IT.read_text())
    assert raw["architectures"] == ["Gemma3ForConditionalGeneration"]
    model = _meta_build(raw, "Gemma3ForConditionalGeneration")
    parts = LLMAnalysis(_import(raw), GPU).get_num_params_breakdown()
    assert parts["vision tower"] + parts["projector"] == _vision_params(model)
    assert LLMAnalysis(_import(raw), GPU).get_num_params_total() == sum(p.numel() for p in model.parameters())


def test_gemma3_with_the_siglip_pooling_head_is_refused():
    """vision_use_head = True adds SigLIP's attention-pooling head, which Gemma 3's tower does not run:
    refused by name rather than counted without it."""
    raw = json.loads(GEMMA3_4B_IT.read_text())
    raw["vision_config"]["vision_use_head"] = True
    assert "head" in {n.split(".")[2] for n, _ in _meta_build(raw, "Gemma3ForConditionalGeneration")
                      .named_parameters() if n.startswith("model.vision_tower.")}
    with pytest.raises(Exception, match="vision_use_head = True"):
        _import(raw)


def test_gemma3_text_only_class_is_counted_exactly():
    text = dict(SMALL_TEXT, sliding_window=8, layer_types=["sliding_attention", "full_attention"])
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                  image_size=28, patch_size=14, vision_use_head=False)  # as Gemma 3's published configs
    whole = _wrapper("gemma3", text, vision, ["Gemma3ForConditionalGeneration"])
    whole["mm_tokens_per_image"] = 4
    model = _meta_build(whole, "Gemma3ForConditionalGeneration")
    assert _vision_params(model) > 0
    assert LLMAnalysis(_import(whole), GPU).get_num_params_total() == sum(p.numel() for p in model.parameters())
    text_only = dict(whole, architectures=["Gemma3ForCausalLM"])
    model = _meta_build(text_only, "Gemma3ForCausalLM")
    assert LLMAnalysis(_import(text_only), GPU).get_num_params_total() == sum(p.numel() for p in model.parameters())


def test_qwen3_5_text_only_class_and_its_vlm_class_are_both_counted_exactly():
    text = dict(SMALL_TEXT, layer_types=["linear_attention", "full_attention"], linear_num_key_heads=2,
                linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8)
    vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64)
    causal = _wrapper("qwen3_5", text, vision, ["Qwen3_5ForCausalLM"])
    model = _meta_build(causal, "Qwen3_5ForCausalLM")
    assert _vision_params(model) == 0
    assert LLMAnalysis(_import(causal), GPU).get_num_params_total() == sum(p.numel() for p in model.parameters())
    whole = dict(causal, architectures=["Qwen3_5ForConditionalGeneration"])
    vlm = _meta_build(whole, "Qwen3_5ForConditionalGeneration")
    assert _vision_params(vlm) > 0
    analysis = LLMAnalysis(_import(whole), GPU)
    assert analysis.get_num_params_total() == sum(p.numel() for p in vlm.parameters())
    assert analysis.get_num_params_total() - _vision_params(vlm) == sum(p.numel() for p in model.parameters())


def test_fuyu_patch_projection_is_refused():
    raw = transformers.AutoConfig.for_model("fuyu", text_config=dict(SMALL_TEXT, model_type="persimmon"),
                                            hidden_size=64).to_dict()
    with torch.device("meta"):
        model = transformers.FuyuForCausalLM(transformers.AutoConfig.for_model(**raw))
    assert sum(p.numel() for n, p in model.named_parameters() if "vision_embed_tokens" in n) > 0
    with pytest.raises(UnsupportedArchitectureError, match="vision_embed_tokens"):
        _import(raw)


def test_hub_import_counts_qwen3_vl_with_its_vision_tower(loopback_hub):
    """Through the real huggingface_hub client in a fresh interpreter: the tower comes along
    (it was refused before it was described)."""
    raw = _wrapper("qwen3_vl", SMALL_TEXT, SMALL_QWEN3_VL_VISION, ["Qwen3VLForConditionalGeneration"])
    hub = loopback_hub({"Qwen/tiny-qwen3-vl": {"main": {"config.json": json.dumps(raw).encode()}}})
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("HF_", "HUGGING_FACE_", "TRANSFORMERS_")) and "PROXY" not in k.upper()}
        env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(Path(tmp) / "hf-home"), HF_HUB_DISABLE_TELEMETRY="1",
                   NO_PROXY="127.0.0.1,localhost", PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
        p = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "hub_server.py"), "client"],
                           input=json.dumps([{"op": "by_name", "name": "Qwen/tiny-qwen3-vl"}]),
                           capture_output=True, text=True, cwd=ROOT, env=env, timeout=150)
    assert "@@RESULTS@@" in p.stdout, p.stderr[-4000:]
    (result,) = json.loads(p.stdout.split("@@RESULTS@@", 1)[1])["results"]
    assert "ok" in result, result
    tower = result["ok"]["vision_tower"]
    assert (tower["num_layers"], tower["hidden_dim"], tower["patches_per_token"]) == (2, 32, 4)
