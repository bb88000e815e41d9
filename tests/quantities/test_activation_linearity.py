"""Training activation memory is proportional to the micro-batch.

training/memory.py computes the per-layer and embedding activation bytes for one
sequence and multiplies by the micro-batch b. That rests on a structural fact, checked
here independently of that shortcut: every tensor a layer keeps for backward
(Korthikanti et al. 2022, arXiv 2205.05198, Table 2: sbh terms and as^2b score terms; the
mixers' operator inputs; cross-attention's encoder keys/values) carries b as a factor, so
`_activation_parts` evaluated directly at b equals b times its value at b = 1, for every
shipped model, recomputation mode, attention kernel and layout (tp with and without
sequence parallelism, context parallelism), up to float rounding.
"""
import os

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.hub.mapping import map_hf_config
from llm_analysis.schema.options import ActivationRecomputation as AR
from llm_analysis.training.memory import _activation_parts, _parts

# this module's analyses warn of nothing its tests check (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("quiet_package_warnings")

CONFIG_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "llm_analysis", "model_configs")
SHIPPED = sorted(f[:-5] for f in os.listdir(CONFIG_DIR) if f.endswith(".json"))
# architectures the shipped configs do not cover: a cross-attention decoder, a Mamba/attention/MoE
# hybrid and a pure Mamba-2 stack (small configs in the transformers config keys)
HUB = {
    "bart": dict(model_type="bart", d_model=256, decoder_layers=2, encoder_layers=2, decoder_attention_heads=4,
                 encoder_attention_heads=4, decoder_ffn_dim=1024, encoder_ffn_dim=1024, vocab_size=1000,
                 max_position_embeddings=1024),
    "jamba": dict(model_type="jamba", hidden_size=512, num_attention_heads=8, num_key_value_heads=4,
                  num_hidden_layers=8, intermediate_size=1024, vocab_size=1000, max_position_embeddings=4096,
                  attn_layer_period=4, attn_layer_offset=2, expert_layer_period=2, expert_layer_offset=1,
                  num_experts=4, num_experts_per_tok=2, mamba_d_state=16, mamba_dt_rank=32),
    "mamba2": dict(model_type="mamba2", hidden_size=512, num_hidden_layers=4, vocab_size=1000, state_size=64,
                   num_heads=16, head_dim=64, n_groups=1, chunk_size=64, expand=2),
}
OPTIONS = [dict(flash_attn=True, softmax_dropout=False), dict(flash_attn=False, softmax_dropout=True)]
LAYOUTS = [dict(tp_size=1), dict(tp_size=2, sp_size=2), dict(tp_size=2, cp_size=3)]


def _kwargs(options):
    kw = dict(layernorm_dtype_bytes=4, mlp_activation_quant_bits=None, mlp_1linear_quant_bits=None,
              mlp_gelu_input_quant_bits=None, mlp_2linear_quant_bits=None, mlp_recompute_gelu=False)
    kw.update(options)
    return kw


def _analysis(model, layout):
    return LLMAnalysis(model, get_gpu_config_by_name("h100-sxm-80gb"), get_dtype_config_by_name("w16a16e16"),
                       ParallelismConfig(**layout))


def _check(model, layouts=LAYOUTS, encoder_seq_len=None):
    checked = 0
    for layout in layouts:
        try:
            a = _analysis(model, layout).with_encoder_seq_len(encoder_seq_len)
        except Exception:  # a layout the model does not admit (heads not divisible by tp, ...)
            continue
        for rc in AR:
            for options in OPTIONS:
                kw = _kwargs(options)
                for seq_len in (1, 96, 1000):
                    one = _activation_parts(a, 1, seq_len, rc, kw)
                    for b in (2, 3, 7):
                        direct = _activation_parts(a, b, seq_len, rc, kw)
                        assert direct == pytest.approx([b * x for x in one], rel=1e-12, abs=0), \
                            (model.name, layout, rc, options, seq_len, b)
                        # the shortcut training/memory.py takes (one sequence's figures, scaled)
                        assert _parts(a, b, seq_len, rc, kw) == pytest.approx(direct, rel=1e-12, abs=0)
                        checked += 1
    assert checked, f"{model.name}: no layout was checked"


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_model_activations_scale_with_micro_batch(name):
    _check(get_model_config_by_name(name))


@pytest.mark.parametrize("model_type", sorted(HUB))
def test_hub_architecture_activations_scale_with_micro_batch(model_type):
    cfg = map_hf_config(HUB[model_type], name=model_type, source="test", what=model_type, trust_remote_code=False,
                        revision=None)
    _check(cfg, [dict(tp_size=1), dict(tp_size=2, sp_size=2)], encoder_seq_len=300 if model_type == "bart" else None)
