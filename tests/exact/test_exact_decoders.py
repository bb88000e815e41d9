"""Decoder (and encoder) types the exact path derives after issue 14's decoder round
(llm_analysis/exact): matmuls the model runs at its top level (NeoMME's factorised
unembedding), recurrent-depth layer stacks (HRM-Text), tokens the model prepends to
every sequence (CPM-Ant's prompt).

Small configs keep CI time low. Expected values come from the transformers model of
the same config built here on the meta device: its parameters (named_parameters, tied
weights once) and FlopCounterMode's count of a prefill (batch 1, 16 tokens, a phase the
derivation does not probe, and a longer one where the per-token / per-sequence
readings differ).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_analysis.config import get_gpu_config_by_name  # noqa: E402
from llm_analysis.errors import UnsupportedArchitectureError  # noqa: E402
from llm_analysis.exact import analysis_from_hf  # noqa: E402
from llm_analysis.exact.compare import engine_matmul_flops  # noqa: E402
from llm_analysis.exact.flops import prefill_flops  # noqa: E402
from llm_analysis.exact.meta_model import build_meta_models, config_object  # noqa: E402
from llm_analysis.exact.truth import architecture_truth  # noqa: E402
from exact_pairs import exact_and_truth  # noqa: E402

GPU = get_gpu_config_by_name("h100-sxm-80gb")


pytestmark = pytest.mark.usefixtures("exact_cache")  # tests/conftest.py


def _exact_and_truth(cfg):
    return exact_and_truth(cfg, GPU)


def _flops_at(cfg, batch, seq_len):
    flops, error = prefill_flops(build_meta_models(config_object(cfg), with_base=False).lm, batch, seq_len)
    assert error is None
    return flops["total"]


NEOMME = {"model_type": "neomme", "hidden_size": 128, "num_hidden_layers": 3, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 256, "vocab_size": 1024,
          "embedding_rank": 64, "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
          "per_layer_config": {"00": {"sliding_window": 32}, "01": {"sliding_window": 32},
                               "02": {"sliding_window": None}},
          "max_position_embeddings": 512}


def test_top_level_matmul_is_counted_per_token():
    # NeoMMEForMaskedLM.forward multiplies the hidden states by a tied [h x rank] weight
    # itself (no module): 2 * tokens * 128 * 64 FLOPs, per token, not per sequence
    derived, truth, a = _exact_and_truth(NEOMME)
    assert derived == truth
    top = [s for s in a.describer.description["embedding"] if s["op"] == "row_flops"]
    assert [(s["tokens"], s["flops_per_row"]) for s in top] == [("all", 2 * 128 * 64)]
    assert engine_matmul_flops(a, 1, 200) == _flops_at(NEOMME, 1, 200)


def _decode_step_flops(small, batch, prompt, full_ids=False):
    """FlopCounterMode's count of one decode step of a small real model after a
    `prompt`-token prefill into its cache (`full_ids`: the model takes the whole
    sequence and drops what its cache holds itself, as CPM-Ant)."""
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import AutoConfig, AutoModelForCausalLM
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**small), attn_implementation="eager").eval()
    ids = torch.randint(0, small["vocab_size"], (batch, prompt))
    with torch.no_grad():
        cache = model(input_ids=ids, use_cache=True).past_key_values
        counter = FlopCounterMode(display=False)
        with counter:
            step = torch.cat([ids, ids[:, :1]], dim=1) if full_ids else ids[:, :1]
            model(input_ids=step, past_key_values=cache, use_cache=True)
    return counter.get_total_flops()


HRM = {"model_type": "hrm_text", "hidden_size": 128, "num_attention_heads": 4, "head_dim": 32,
       "intermediate_size": 256, "vocab_size": 1024, "num_layers_per_stack": 2, "H_cycles": 2, "L_cycles": 3,
       "L_bp_cycles": [3, 3], "max_position_embeddings": 512}


def test_recurrent_stacks_count_every_execution():
    # HRM-Text: a low-level stack run L_cycles times per high-level cycle, then the
    # high-level stack, H_cycles times: 2 * 2 * 3 + 2 * 2 = 16 layer executions of 4 layers
    derived, truth, a = _exact_and_truth(HRM)
    assert derived == truth
    desc = a.describer.description
    assert (len(desc["layers"]), sum(owns for _, owns in desc["layers"])) == (16, 4)
    assert engine_matmul_flops(a, 1, 200) == _flops_at(HRM, 1, 200)
    # one decode step: every execution attends to its own cached keys (one cache slot each)
    batch, prompt = 2, 8
    rows = a.operators("decode", batch, prompt, context_len=prompt + 1, per_layer=False)
    assert sum(r["flops"] for r in rows if r["kind"] in ("matmul", "attention")) == _decode_step_flops(HRM, batch, prompt)
    # every execution trains (L_bp_cycles covers all three low-level cycles)
    assert "refused_phases" not in desc
    assert a.operators("train", 1, 16)


def test_executions_without_gradients_refuse_training_only():
    # L_bp_cycles [1, 1]: one of the three low-level cycles per high-level cycle runs with
    # gradients, the other two under torch.no_grad: 2 * 2 of the 8 low-level stack runs,
    # 2 layers each
    cfg = dict(HRM, L_bp_cycles=[1, 1])
    a = analysis_from_hf(cfg, GPU)
    assert a.get_num_params_total() == architecture_truth(cfg, with_flops=False)["params"]["total"]
    assert a.describer.description["refused_phases"]["train"].startswith("HrmTextForCausalLM runs 8 of its 16")
    a.operators("prefill", 1, 16)
    with pytest.raises(UnsupportedArchitectureError, match="train phase cannot be described.*without gradients"):
        a.operators("train", 1, 16)
    with pytest.raises(UnsupportedArchitectureError, match="without gradients"):
        a.training(batch_size_per_gpu=1, seq_len=16)


CPMANT = {"model_type": "cpmant", "hidden_size": 128, "num_attention_heads": 4, "dim_head": 32, "dim_ff": 256,
          "num_hidden_layers": 2, "vocab_size": 1024, "prompt_length": 8, "prompt_types": 4, "segment_types": 4}


def test_prepended_prompt_tokens_run_through_the_layers():
    # CPM-Ant runs its 8 prompt ids before every sequence: a prefill of s tokens is
    # 2 layers x (s + 8) rows of projections and (s + 8)^2 attention pairs per head;
    # the LM head sees the s real tokens
    derived, truth, a = _exact_and_truth(CPMANT)
    assert derived == truth
    assert a.describer.description["prefix_tokens"] == 8
    assert engine_matmul_flops(a, 1, 200) == _flops_at(CPMANT, 1, 200)
    h, ff, v, t = 128, 256, 1024, 16
    per_layer = 2 * (t + 8) * (4 * h * h + 3 * h * ff) + 2 * 4 * (t + 8) ** 2 * (32 + 32)
    assert derived[1] == 2 * per_layer + 2 * t * h * v
    # a decode step: the new token attends to the prompt's cached keys too
    batch, prompt = 2, 8
    rows = a.operators("decode", batch, prompt, context_len=prompt + 1, per_layer=False)
    engine = sum(r["flops"] for r in rows if r["kind"] in ("matmul", "attention"))
    assert engine == _decode_step_flops(CPMANT, batch, prompt, full_ids=True)
    # its cache holds the prompt's 8 positions too
    assert a.describer.cached_len(a.describer.kinds_in_order[0], 100) == 108


GIT = {"model_type": "git", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
       "intermediate_size": 256, "vocab_size": 1024, "max_position_embeddings": 256,
       "vision_config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
                         "num_attention_heads": 2, "image_size": 32, "patch_size": 16}}
MLLAMA = {"model_type": "mllama",
          "text_config": {"hidden_size": 128, "num_hidden_layers": 4, "cross_attention_layers": [1, 3],
                          "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 256,
                          "vocab_size": 1024, "pad_token_id": 0, "max_position_embeddings": 256},
          "vision_config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                            "num_global_layers": 1, "attention_heads": 2, "image_size": 32, "patch_size": 16,
                            "vision_output_dim": 128}}
PHI4MM = {"model_type": "phi4_multimodal", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 2, "intermediate_size": 256, "vocab_size": 1024, "pad_token_id": 0,
          "max_position_embeddings": 256, "original_max_position_embeddings": 256}


IDLE = [(GIT, ["git.image_encoder", "git.visual_projection"]), (MLLAMA, ["model.layers.1", "model.layers.3"]),
        (PHI4MM, ["model.embed_tokens_extend.image_embed", "model.embed_tokens_extend.audio_embed"])]


@pytest.mark.parametrize("cfg,idle_modules", IDLE, ids=["git", "mllama", "phi4_multimodal"])
def test_parts_a_text_only_forward_never_runs_hold_parameters_only(cfg, idle_modules):
    # GIT's image encoder, Mllama's cross-attention layers (skipped without image
    # features) and Phi-4-multimodal's image/audio embedders do not run on text tokens:
    # counted as parameters, no FLOPs, named in the ModelConfig's source
    derived, truth, a = _exact_and_truth(cfg)
    assert derived == truth
    assert engine_matmul_flops(a, 1, 100) == _flops_at(cfg, 1, 100)
    lm = build_meta_models(config_object(cfg), with_base=False).lm
    idle = sum(p.numel() for m in idle_modules for p in lm.get_submodule(m).parameters())
    assert f"; {idle:,} parameters in modules a text-only forward never runs" in a.model_config.source


DSV2 = {"model_type": "deepseek_v2", "hidden_size": 128, "num_hidden_layers": 2, "first_k_dense_replace": 1,
        "intermediate_size": 256, "moe_intermediate_size": 64, "n_routed_experts": 8, "n_shared_experts": 1,
        "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 64, "kv_lora_rank": 32,
        "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "vocab_size": 1024, "pad_token_id": 0,
        "max_position_embeddings": 256}


def test_a_config_without_routing_top_k_is_refused_and_one_with_it_is_exact():
    # DeepSeek-V2's default config leaves num_experts_per_tok None: transformers' own
    # forward fails (topk of None); set, the type derives exactly
    with pytest.raises(UnsupportedArchitectureError, match="num_experts_per_tok = None"):
        analysis_from_hf(DSV2, GPU)
    derived, truth, _ = _exact_and_truth(dict(DSV2, num_experts_per_tok=2))
    assert derived == truth
