"""llm_analysis.exact: meta-device verification of the engine against transformers.

Expected values are hand derivations written out here (module breakdown, the
grouped-matmul FLOP formula) or the transformers model itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llm_analysis.errors import UnsupportedArchitectureError
from llm_analysis.exact.module_tree import breakdown

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]

# a small Llama: h=64, 4 heads of 16, 2 KV heads, ffn 128, 2 layers, vocab 100, untied
TINY_LLAMA = dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=100,
                  max_position_embeddings=64, tie_word_embeddings=False)
H, F, L, V, KV = 64, 128, 2, 100, 2 * 16
TINY_LLAMA_PARAMS = (V * H  # embed_tokens
                     + L * (H * H + 2 * H * KV + H * H  # q, k, v, o
                            + 3 * H * F  # gate, up, down
                            + 2 * H)  # two RMSNorm weights
                     + H  # final norm
                     + V * H)  # untied lm_head
# Cohere's block: one LayerNorm (no bias) and a gated MLP, attention and MLP in parallel
TINY_COHERE = dict(TINY_LLAMA, model_type="cohere", tie_word_embeddings=True)


def test_breakdown_groups_layers_and_folds_experts():
    names = [("embed.weight", (10, 4)), ("layers.0.attn.q.weight", (4, 4)),
             ("layers.0.mlp.experts.0.w.weight", (8, 4)), ("layers.0.mlp.experts.1.w.weight", (8, 4)),
             ("layers.1.attn.q.weight", (4, 4)), ("layers.1.mlp.experts.0.w.weight", (6, 4)),
             ("layers.1.mlp.experts.1.w.weight", (6, 4)), ("norm.weight", (4,))]
    bd = breakdown(names)
    assert bd["total"] == 40 + 16 + 64 + 16 + 48 + 4
    st = bd["stacks"]["layers"]
    assert st["count"] == 2 and st["per_index"] == [16 + 64, 16 + 48]
    assert [k["indices"] for k in st["kinds"]] == [[0], [1]]  # per-layer widths: two kinds
    assert st["kinds"][0]["params"]["mlp.experts.#.w.weight"] == [[8, 4], 2]
    assert st["per_child"] == [{"attn": 16, "mlp": 64}, {"attn": 16, "mlp": 48}]  # per layer, by child module
    assert set(bd["outside"]) == {"embed.weight", "norm.weight"}


def test_grouped_mm_flops_formula():
    from llm_analysis.exact.flops import grouped_mm_flops
    # 12 token-expert rows of width 64 through experts (E, 64, 256): 2*12*64*256
    assert grouped_mm_flops((12, 64), (4, 64, 256), (4,), out_shape=(12, 256)) == 2 * 12 * 64 * 256


def test_truth_of_a_tiny_llama_matches_the_hand_count():
    from llm_analysis.exact.truth import architecture_truth
    t = architecture_truth(TINY_LLAMA)
    assert t["lm_class"] == "LlamaForCausalLM"
    assert t["params"]["total"] == TINY_LLAMA_PARAMS
    s = 16  # prefill of 16 tokens: every matmul 2*s*in*out, attention 2 x (2*s*s*head_dim) per head
    matmuls = 2 * s * (L * (2 * H * H + 2 * H * KV + 3 * H * F) + V * H)
    attention = L * 4 * 2 * (2 * s * s * 16)
    assert t["flops"]["total"] == matmuls + attention


def test_verify_exact_then_cached_without_torch(tmp_path):
    env = dict(os.environ, LLM_ANALYSIS_CACHE=str(tmp_path), PYTHONPATH=str(ROOT))
    code = ("import json, sys, logging; logging.disable(logging.WARNING)\n"
            "from llm_analysis.exact import verify_hf_config\n"
            f"r = verify_hf_config({TINY_LLAMA!r}, model_id='acme/tiny', revision='main')\n"
            "print(json.dumps([r['exact'], r['cached'], r['engine_params'], r['flops_exact'], "
            "'torch' in sys.modules]))")
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                      env=env, cwd=ROOT, timeout=300, check=True).stdout.splitlines()[-1])
            for _ in range(2)]
    assert runs[0] == [True, False, TINY_LLAMA_PARAMS, True, True]
    assert runs[1] == [True, True, TINY_LLAMA_PARAMS, True, False]  # second call: no torch


def test_verify_refuses_a_wrong_description_naming_the_part(tmp_path, monkeypatch):
    from llm_analysis.config import ModelConfig
    from llm_analysis.exact import verify_hf_config
    monkeypatch.setenv("LLM_ANALYSIS_CACHE", str(tmp_path))
    # the same Llama described with a non-gated MLP: 2*H*F instead of 3*H*F per layer
    wrong = ModelConfig(name="tiny", num_layers=L, n_head=4, num_key_value_heads=2, hidden_dim=H,
                        vocab_size=V, ffn_embed_dim=F, mlp_gated_linear_units=False,
                        norm_type="rmsnorm", norm_bias=False, position_embedding_type="rotary",
                        tie_word_embeddings=False, activation="silu")
    with pytest.raises(UnsupportedArchitectureError, match=r"mlp: engine 32,768, model 49,152"):
        verify_hf_config(TINY_LLAMA, model_id="acme/tiny", model_config=wrong)
    with pytest.raises(UnsupportedArchitectureError, match="mlp"):  # the refusal is cached too
        verify_hf_config(TINY_LLAMA, model_id="acme/tiny", model_config=wrong)
    assert len(list(Path(tmp_path, "exact").glob("*.json"))) == 1


def test_unknown_model_type_is_refused():
    from llm_analysis.exact.truth import architecture_truth
    with pytest.raises(UnsupportedArchitectureError, match="not registered"):
        architecture_truth({"model_type": "no-such-architecture"})


def test_a_refusal_for_want_of_torch_is_not_kept_as_the_model_s(tmp_path):
    """A model built while torch cannot be imported fails for want of a module, not for anything in the model: the
    error says the exact path needs torch, and nothing is cached, so the next run with torch derives the model
    (its refusal had been cached and kept refusing after torch was installed)."""
    env = dict(os.environ, LLM_ANALYSIS_CACHE=str(tmp_path), PYTHONPATH=str(ROOT))
    blocked = ("import sys, logging; logging.disable(logging.WARNING); sys.modules['torch'] = None\n"
               "from llm_analysis.exact.entry import description_for\n"
               "try:\n"
               f"    description_for({TINY_LLAMA!r}, 'acme/tiny', 'main')\n"
               "except Exception as exc:\n"
               "    print(type(exc).__name__, exc)\n")
    first = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, env=env, cwd=ROOT,
                           timeout=300).stdout
    assert "needs torch" in first, first
    ok = ("import logging; logging.disable(logging.WARNING)\n"
          "from llm_analysis.exact.entry import description_for\n"
          f"print(bool(description_for({TINY_LLAMA!r}, 'acme/tiny', 'main')))\n")
    second = subprocess.run([sys.executable, "-c", ok], capture_output=True, text=True, env=env, cwd=ROOT,
                            timeout=300)
    assert second.stdout.strip().endswith("True"), second.stderr[-1500:]
