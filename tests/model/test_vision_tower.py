"""The vision tower and projector of a vision-language model (model/vision_tower.py, hub/vision.py):
parameters per part and the image's FLOPs against transformers on small copies of the models
(CPU, real tensors: the vision forward reads the image grid), the text-only request unchanged,
the tensor-parallel split, and the refusals of an image input that cannot be timed.

Expected values come from transformers (parameters of the built class, FlopCounterMode over the
vision forward of one image) or from hand derivations written here."""

from __future__ import annotations

import json

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, ParallelismConfig, get_gpu_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.hub.entry import model_config_from_hf_dict
from llm_analysis.hub.vision import read_vision_tower
from llm_analysis.model.vision_tower import vision_shard
from llm_analysis.schema.vision_tower import VisionTower

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

GPU = get_gpu_config_by_name("a100-sxm-80gb")
ROPE = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3], "mrope_interleaved": True}
TEXT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=256, max_position_embeddings=512, rope_parameters=ROPE)
# patch 4 x 4, 2 frames, 3 channels: 96 pixels per patch; 2 x 2 patches per image token
QWEN_VISION = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=4, in_channels=3, patch_size=4,
                   temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=64, num_position_embeddings=64)
QWEN3_5_TEXT = dict(TEXT, layer_types=["linear_attention", "full_attention"], linear_num_key_heads=2,
                    linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8)
CASES = {
    "qwen3_vl": ("Qwen3VLForConditionalGeneration", TEXT, dict(QWEN_VISION, deepstack_visual_indexes=[0, 1])),
    "qwen3_5": ("Qwen3_5ForConditionalGeneration", QWEN3_5_TEXT, QWEN_VISION),
}


def _config(model_type: str) -> dict:
    class_name, text, vision = CASES[model_type]
    return {"model_type": model_type, "architectures": [class_name], "text_config": text, "vision_config": vision,
            "tie_word_embeddings": False}


def _model(raw: dict):
    hf = transformers.AutoConfig.for_model(**json.loads(json.dumps(raw)))
    return getattr(transformers, raw["architectures"][0])._from_config(hf, attn_implementation="eager",
                                                                        dtype=torch.float32)


def _analysis(raw: dict, **par) -> LLMAnalysis:
    return LLMAnalysis(model_config_from_hf_dict(json.loads(json.dumps(raw)), name="tiny-vlm"), GPU,
                       parallelism_config=ParallelismConfig(**par))


def _vision_flops(analysis: LLMAnalysis, batch: int, seq_len: int) -> float:
    rows = analysis.operators("prefill", batch, seq_len, per_layer=False)
    return sum(r["flops"] for r in rows if r["group"] in ("vision tower", "projector"))


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_parameters_per_part_match_transformers(model_type):
    raw = _config(model_type)
    model = _model(raw)
    parts = _analysis(raw).get_num_params_breakdown()
    visual = model.model.visual
    merger = sum(p.numel() for n, p in visual.named_parameters() if "merger" in n)  # merger and deepstack mergers
    assert parts["vision tower"] == sum(p.numel() for p in visual.parameters()) - merger
    assert parts["projector"] == merger
    assert _analysis(raw).get_num_params_total() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("model_type", sorted(CASES))
@pytest.mark.parametrize("grid", [(8, 8), (4, 12)], ids=["8x8", "4x12"])
def test_image_flops_match_flop_counter_mode(model_type, grid):
    """One image of h x w patches (2 frames: one temporal patch): h w / 4 image tokens."""
    raw = _config(model_type)
    model = _model(raw)
    h, w = grid
    pixels = torch.randn(h * w, 3 * 2 * 4 * 4)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model.model.visual(pixels, grid_thw=torch.tensor([[1, h, w]]))
    image_tokens = h * w // 4
    engine = _vision_flops(_analysis(raw).with_image_tokens(image_tokens), 1, 64)
    assert engine == counter.get_total_flops()


def test_image_flops_by_hand():
    """Qwen3-VL tiny, N = 16 image tokens, P = 64 patches, h = 32, heads 4 x 8, FFN 64, merged
    width 128, out 64, deepstack mergers 2: per block 2P(h 3h + h h + 2 h 64) + 4 P^2 h."""
    raw = _config("qwen3_vl")
    n, p, h = 16, 64, 32
    blocks = 2 * (2 * p * (h * 3 * h + h * h + 2 * h * 64) + 4 * p * p * h)
    patch = 2 * p * 96 * h
    merger = 2 * n * (128 * 128 + 128 * 64)
    expected = patch + blocks + 3 * merger  # the merger and two deepstack mergers
    assert _vision_flops(_analysis(raw).with_image_tokens(n), 1, 64) == expected
    # per request: a batch of 3 runs three images
    assert _vision_flops(_analysis(raw).with_image_tokens(n), 3, 64) == 3 * expected


def test_text_only_request_runs_no_vision_work_but_holds_its_weights():
    raw = _config("qwen3_vl")
    a = _analysis(raw)
    assert _vision_flops(a, 2, 64) == 0
    text_only = a.inference(batch_size_per_gpu=1, seq_len=64, num_tokens_to_generate=4)
    with_image = a.inference(batch_size_per_gpu=1, seq_len=64, num_tokens_to_generate=4, image_tokens=16)
    assert with_image["prefill_latency"] > text_only["prefill_latency"]
    assert with_image["decode_latency"] == text_only["decode_latency"]  # the image is encoded once, in prefill
    assert with_image["weight_memory_per_gpu"] == text_only["weight_memory_per_gpu"]
    vision_params = sum(v for k, v in a.get_num_params_breakdown().items() if k in ("vision tower", "projector"))
    assert vision_params > 0
    # 2 bytes per parameter (w16): the tower's weights are in the weight memory
    assert text_only["weight_memory_per_gpu"] >= 2 * a.get_num_params_total()
    assert with_image["image_tokens"] == 16 and "image_tokens" not in text_only


def test_tensor_parallel_splits_the_blocks_and_projector_and_replicates_the_rest():
    raw = _config("qwen3_vl")
    one, two = _analysis(raw), _analysis(raw, tp_size=2)
    rows = lambda a: {r["name"]: r for r in a.operators("prefill", 1, 64)}  # noqa: E731
    r1, r2 = rows(one), rows(two)
    for name in ("vision_qkv", "vision_mlp_up", "vision_mlp_down", "projector_linear_2"):
        assert r2[name]["params_per_gpu"] == r1[name]["params_per_gpu"] / 2, name
    for name in ("patch_embedding", "vision_position_embedding", "vision_norm_1"):
        assert r2[name]["params_per_gpu"] == r1[name]["params_per_gpu"], name
    # a split that does not divide the tower's heads: the whole tower replicated (vLLM's data mode)
    tower = VisionTower(num_layers=1, hidden_dim=48, n_head=6, ffn_embed_dim=96, patch_input_dim=12)
    assert (vision_shard(tower, 2), vision_shard(tower, 3), vision_shard(tower, 4)) == (2, 3, 1)


def test_image_input_refusals():
    raw = _config("qwen3_vl")
    a = _analysis(raw)
    with pytest.raises(ConfigError, match="exceeds seq_len"):
        a.inference(seq_len=8, image_tokens=16)
    with pytest.raises(ConfigError, match="image_tokens"):
        a.with_image_tokens(-1)
    text = LLMAnalysis(model_config_from_hf_dict(dict(TEXT, model_type="qwen3"), name="text"), GPU)
    with pytest.raises(ConfigError, match="no vision tower"):
        text.inference(seq_len=64, image_tokens=16)


def test_image_input_refused_where_the_patch_rule_is_not_described():
    """Llama 4's tower and projector are counted (their weights, against transformers) but how many
    patches an image token stands for is not described: an image input is refused, naming why."""
    vision = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=28,
                  patch_size=14, projector_input_dim=32, projector_output_dim=32, vision_output_dim=32)
    hf = transformers.AutoConfig.for_model("llama4", text_config=dict(hidden_size=64, num_hidden_layers=1),
                                           vision_config=vision)
    with torch.device("meta"):
        model = transformers.Llama4ForConditionalGeneration(hf)
    held = sum(p.numel() for n, p in model.named_parameters()
               if n.startswith(("vision_model.", "multi_modal_projector.")))
    tower = VisionTower(**read_vision_tower(hf, "tiny llama4"))
    assert tower.patches_per_token is None
    # the tower beside a small decoder of our own (transformers' Llama 4 decoder is refused by its own row)
    text = ModelConfig(name="decoder", num_layers=1, n_head=4, hidden_dim=64, vocab_size=256, vision_tower=tower)
    a = LLMAnalysis(text, GPU)
    parts = a.get_num_params_breakdown()
    assert parts["vision tower"] + parts["projector"] == held
    with pytest.raises(ConfigError, match="patches_per_token"):
        a.inference(seq_len=64, image_tokens=16)


def test_infer_cli_with_image_tokens_as_a_user_runs_it(tmp_path):
    """`infer --image_tokens N` on a config.json path: the prefill FLOPs grow by the image's
    (the JSON summary), and an image longer than the prompt is one line, exit 2."""
    import subprocess
    import sys
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_config("qwen3_vl")))
    base = [sys.executable, "-m", "llm_analysis", "infer", "--model_name", str(path), "--gpu_name", "a100-sxm-80gb",
            "--seq_len", "64", "--num_tokens_to_generate", "2", "--output_format", "json"]
    runs = [subprocess.run(base + extra, capture_output=True, text=True, timeout=300)
            for extra in ([], ["--image_tokens", "16"])]
    text_only, with_image = (json.loads(r.stdout) for r in runs)
    expected = _vision_flops(_analysis(_config("qwen3_vl")).with_image_tokens(16), 1, 64)
    assert with_image["prefill_num_flops_fwd_total"] - text_only["prefill_num_flops_fwd_total"] == expected
    bad = subprocess.run(base + ["--image_tokens", "65"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "image_tokens = 65 exceeds seq_len = 64" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr


# Gemma 3: SigLIP at 56 x 56 pixels in 14 x 14 patches (16 patches), pooled to 4 image tokens per image
GEMMA3_TEXT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, vocab_size=256, sliding_window=8,
                   layer_types=["sliding_attention", "full_attention"])
GEMMA3_VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                     image_size=56, patch_size=14, vision_use_head=False)


def _gemma3_config() -> dict:
    return {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "text_config": GEMMA3_TEXT,
            "vision_config": GEMMA3_VISION, "mm_tokens_per_image": 4}


def test_gemma3_parameters_per_part_match_transformers():
    raw = _gemma3_config()
    model = _model(raw)
    parts = _analysis(raw).get_num_params_breakdown()
    assert parts["vision tower"] == sum(p.numel() for p in model.model.vision_tower.parameters())
    assert parts["projector"] == sum(p.numel() for p in model.model.multi_modal_projector.parameters())
    assert _analysis(raw).get_num_params_total() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("images", [1, 3])
def test_gemma3_image_flops_match_flop_counter_mode(images):
    """Each image gives 4 image tokens from its 16 patches, attention within each image's own patches:
    `images` images of one request are 4 x images image tokens."""
    raw = _gemma3_config()
    model = _model(raw)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model.model.get_image_features(torch.randn(images, 3, 56, 56))
    engine = _vision_flops(_analysis(raw).with_image_tokens(4 * images), 1, 64)
    assert engine == counter.get_total_flops()


def test_gemma3_image_tokens_are_whole_images():
    """Every Gemma 3 image is resized to one size: 4 image tokens each here, so 6 is refused naming the rule."""
    with pytest.raises(ConfigError, match=r"image_tokens = 6: .* multiple of 4"):
        _analysis(_gemma3_config()).with_image_tokens(6)
