"""Perceiver IO (Jaegle et al. 2021, arXiv 2107.14795) through the exact path: layers on a
fixed latent array and fixed output queries instead of the tokens
(llm_analysis/exact/architectures/perceiver.py; issue 14).

Expected values come from transformers' PerceiverForMaskedLM of the same config on the
meta device: its parameters and FlopCounterMode's count of one forward, at lengths and
batch sizes the derivation never probed (it probes 2 x 16, 2 x 24 and 1 x 64 here), and
a hand derivation of the encoder's cross-attention written out below.
"""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_analysis.config import get_gpu_config_by_name  # noqa: E402
from llm_analysis.errors import UnsupportedArchitectureError  # noqa: E402
from llm_analysis.exact.architectures.perceiver import FixedRows, InputTokens, LatentAttention  # noqa: E402
from llm_analysis.exact.compare import engine_matmul_flops  # noqa: E402
from llm_analysis.exact.derive import derive_description  # noqa: E402
from llm_analysis.exact.derive_check import build_analysis  # noqa: E402
from llm_analysis.exact.meta_model import build_meta_models  # noqa: E402
from llm_analysis.exact.probe import run_probe  # noqa: E402
from llm_analysis.model import Phase  # noqa: E402

SMALL = {"num_latents": 8, "d_latents": 64, "d_model": 32, "num_self_attention_heads": 4,
         "num_cross_attention_heads": 2, "num_self_attends_per_block": 2, "max_position_embeddings": 64,
         "vocab_size": 262}
LENGTHS = (1, 5, 17, 40, 64)


def _config(**kw):
    from transformers import AutoConfig
    return AutoConfig.for_model("perceiver", **dict(SMALL, **kw))


pytestmark = pytest.mark.usefixtures("exact_cache")  # tests/conftest.py


# num_latents 16 equals the probe's length, 1 is one row per sequence: still latents
@pytest.mark.parametrize("extra", [{}, {"num_blocks": 3}, {"cross_attention_shape_for_attention": "q"},
                                   {"num_latents": 16}, {"num_latents": 1},
                                   {"use_query_residual": False, "self_attention_widening_factor": 2,
                                    "cross_attention_widening_factor": 3}])
def test_perceiver_params_and_flops_match_flopcountermode(extra):
    cfg = _config(**extra)
    desc = derive_description(cfg, "perceiver")
    analysis = build_analysis(desc, "perceiver")
    lm = build_meta_models(cfg, with_base=False, dtype="float32").lm
    assert int(analysis.get_num_params_total()) == sum(int(p.numel()) for p in lm.parameters())
    for seq_len, batch in itertools.product(LENGTHS, (1, 3)):
        counted, why = run_probe(lm, batch, seq_len)  # FlopCounterMode over one forward
        assert counted is not None, why
        assert engine_matmul_flops(analysis, batch, seq_len) == counted.total_flops, (seq_len, batch)


def test_perceiver_cross_attention_scales_with_latents_times_tokens():
    desc = derive_description(_config(num_blocks=3), "perceiver")
    # cross-attention, each of the 2 latent layers run num_blocks = 3 times (weights shared:
    # owned by the first execution only), decoder cross-attention
    assert [owns for _, owns in desc["layers"]] == [True] + [True, False, False] * 2 + [True]
    cross = next(s for s in desc["kinds"][desc["layers"][0][0]] if s["op"] == "attention")
    assert cross["variant"] == LatentAttention(queries=FixedRows(8), keys=InputTokens())
    # by hand at 2 x 16 tokens: 2 heads; cross_attention_shape_for_attention "kv": q.k in
    # d_model = 32 channels (16 per head), values too; 8 latents against 16 tokens
    assert cross["probe_flops"] == 2 * 2 * 2 * 8 * 16 * (16 + 16)
    analysis = build_analysis(desc, "perceiver")
    core = lambda n: analysis.describer._spec_op(Phase("prefill", 1, n, n), cross, None, True)[0].flops  # noqa: E731
    assert core(40) == 2 * 2 * 8 * 40 * 32 == 2 * core(20)  # linear in the tokens, not quadratic


def test_perceiver_refuses_inputs_longer_than_its_position_table():
    analysis = build_analysis(derive_description(_config(), "perceiver"), "perceiver")
    with pytest.raises(UnsupportedArchitectureError, match="max_position_embeddings = 64"):
        engine_matmul_flops(analysis, 1, 65)


def test_perceiver_default_config_trains_and_counts_at_an_unprobed_length():
    """The default PerceiverForMaskedLM (269M parameters; 256 latents of 1280, 26 latent
    self-attention layers, 2048 output queries): its FLOPs on meta tensors (FlopCounterMode
    with the module tracker's backward hooks off, exact/flops.forward_only) at 1 x 100."""
    from transformers import AutoConfig
    cfg = AutoConfig.for_model("perceiver")
    desc = derive_description(cfg, "perceiver")
    analysis = build_analysis(desc, "perceiver", gpu_config=get_gpu_config_by_name("h100-sxm-80gb"))
    lm = build_meta_models(cfg, with_base=False, dtype="float32").lm
    counted, why = run_probe(lm, 1, 100)
    assert counted is not None, why
    assert engine_matmul_flops(analysis, 1, 100) == counted.total_flops
    assert int(analysis.get_num_params_total()) == 269_319_430
    t = analysis.training(batch_size_per_gpu=1, seq_len=100, total_num_tokens=100, gradient_accumulation_steps=1)
    assert t["num_flops_total_per_micro_batch"] == pytest.approx(3 * counted.total_flops, rel=0.02)


def test_perceiver_inference_is_one_forward():
    """Encoder-only: inference is the prefill; no decode step is built (the latent
    description has none) and generating tokens is refused as for every encoder."""
    from llm_analysis.errors import ConfigError
    analysis = build_analysis(derive_description(_config(), "perceiver"), "perceiver", conventions="transformers")
    s = analysis.inference(batch_size_per_gpu=3, seq_len=40, num_tokens_to_generate=1)
    assert s["prefill_num_flops_fwd_total"] == engine_matmul_flops(analysis, 3, 40)
    assert s["decode_num_flops_fwd_total"] == s["decode_latency"] == s["kv_cache_memory_per_gpu"] == 0
    with pytest.raises(ConfigError, match="encoder-only"):
        analysis.inference(batch_size_per_gpu=1, seq_len=40, num_tokens_to_generate=2)
