"""Funnel Transformer (Dai et al. 2020, arXiv 2006.03236) through the exact path: pooled
blocks whose layers see fewer rows than the input has tokens (llm_analysis/exact/
architectures/funnel.py; issue 14).

Expected values come from transformers' FunnelForMaskedLM of the same (small) config on
the meta device: its parameters and FlopCounterMode's count of one forward, at lengths
and batch sizes the derivation never probed (it probes 2 x 16 and 1 x 1024 tokens), for
every combination of separate_cls, truncate_seq and pool_q_only (and factorized attention);
and hand-derived row counts and attention FLOPs written out below.
"""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_analysis.errors import UnsupportedArchitectureError  # noqa: E402
from llm_analysis.exact.compare import engine_matmul_flops  # noqa: E402
from llm_analysis.exact.derive import derive_description  # noqa: E402
from llm_analysis.exact.derive_check import build_analysis  # noqa: E402
from llm_analysis.exact.meta_model import build_meta_models  # noqa: E402
from llm_analysis.exact.probe import run_probe  # noqa: E402
from llm_analysis.exact.architectures.funnel import PoolingOptions, PoolStage, relative_rows, stage_rows  # noqa: E402

SMALL = {"model_type": "funnel", "d_model": 64, "n_head": 4, "d_head": 16, "d_inner": 128, "vocab_size": 1000,
         "block_sizes": [1, 2, 1], "num_decoder_layers": 1}
# lengths never probed; odd ones exercise the ceil of each pooling; 1 makes a stage of one row;
# 3 is too short for transformers with separate_cls and truncate_seq (refused)
LENGTHS = (1, 3, 5, 17, 23, 33, 100)


def _config(**kw):
    from transformers import AutoConfig
    cfg = dict(SMALL, **kw)
    return AutoConfig.for_model(cfg.pop("model_type"), **cfg)


pytestmark = pytest.mark.usefixtures("exact_cache")  # tests/conftest.py


# every combination of the pooling options with relative-shift attention; factorized
# attention (appendix A.2.2) with the default options and with all of them off
@pytest.mark.parametrize("separate_cls,truncate_seq,pool_q_only,attention_type",
                         [(*opts, "relative_shift") for opts in itertools.product([True, False], repeat=3)]
                         + [(True, True, True, "factorized"), (False, False, False, "factorized")])
def test_funnel_params_and_flops_match_flopcountermode(separate_cls, truncate_seq, pool_q_only, attention_type):
    cfg = _config(separate_cls=separate_cls, truncate_seq=truncate_seq, pool_q_only=pool_q_only,
                  attention_type=attention_type)
    desc = derive_description(cfg, "funnel")  # verified at 2 x 16 tokens and at the long probe itself
    analysis = build_analysis(desc, "funnel")
    lm = build_meta_models(cfg, with_base=False, dtype="float32").lm
    assert int(analysis.get_num_params_total()) == sum(int(p.numel()) for p in lm.parameters())
    for seq_len, batch in itertools.product(LENGTHS, (1, 3)):
        counted, why = run_probe(lm, batch, seq_len)  # FlopCounterMode over one forward
        if counted is None:  # transformers itself cannot run this length: the analysis refuses it
            with pytest.raises(UnsupportedArchitectureError, match="relative shift"):
                engine_matmul_flops(analysis, batch, seq_len)
            continue
        assert engine_matmul_flops(analysis, batch, seq_len) == counted.total_flops, (seq_len, batch)


def test_funnel_stage_rows_by_hand():
    # transformers pools with ceil_mode: 17 -> 9 -> 5; with separate_cls and not
    # truncate_seq the <cls> row is prepended first: 16 -> ceil(17/2) = 9 -> ceil(10/2) = 5
    default = PoolingOptions(separate_cls=True, truncate_seq=True, pool_q_only=True)
    assert [stage_rows(17, k, default) for k in range(3)] == [17, 9, 5]
    assert [stage_rows(16, k, default) for k in range(3)] == [16, 8, 4]
    keep_last = PoolingOptions(separate_cls=True, truncate_seq=False, pool_q_only=True)
    assert [stage_rows(16, k, keep_last) for k in range(3)] == [16, 9, 5]
    # no pooling once a stage has 2 rows (separate_cls) or 1 row (otherwise)
    assert stage_rows(3, 4, default) == 2
    assert stage_rows(3, 4, PoolingOptions(separate_cls=False, truncate_seq=True, pool_q_only=True)) == 1
    # block 0 relative positions: arange(2S, -S, -1), 2S of them (appendix A.2.1)
    assert relative_rows(16, 0, 1, default) == 32
    # block 1, pooled queries [-1, 1, 3, ..., 13] against keys 0..15 at stride 1 and shift 2:
    # arange(-1 + 2 x 8, -1 - 15 - 1, -1) = 15 .. -16, 32 positions
    assert relative_rows(16, 1, 2, default) == 32


def test_funnel_default_config_rows_and_attention_by_hand():
    """The default FunnelForMaskedLM (block_sizes 4, 4, 4; d_model 768, 12 heads of 64)
    at 2 x 16 tokens: the first layer of block 1 takes queries at 8 rows, keys at 16."""
    from transformers import AutoConfig
    desc = derive_description(AutoConfig.for_model("funnel"), "funnel")
    kinds = [desc["kinds"][k] for k, _ in desc["layers"]]
    assert len(kinds) == 12 + 2  # three blocks of four layers, two decoder layers
    first_pooled = kinds[4]
    tokens = {s["name"]: s["tokens"] for s in first_pooled if s["op"] == "linear"}
    assert tokens["attention.q_head"] == PoolStage(1) and tokens["attention.k_head"] == PoolStage(0)
    assert tokens["ffn.linear_1"] == PoolStage(1)
    core = next(s for s in first_pooled if s["op"] == "attention")
    b, h, d, lq, lk, r = 2, 12, 64, 8, 16, 32
    by_hand = (2 * b * h * lq * lk * 2 * d  # q.k and scores x v
               + 2 * r * 768 * h * d  # relative positions projected per head, once for the batch
               + 2 * b * h * lq * r * d  # queries against relative positions
               + 2 * b * h * lq * 2 * d)  # queries against the two token-type embeddings
    assert core["probe_flops"] == by_hand  # FlopCounterMode's count of the attention module itself


def test_funnel_block_repeats_are_refused():
    # a repeated first layer of a pooled block runs pooled once, then unpooled
    with pytest.raises(UnsupportedArchitectureError, match="block_repeats"):
        derive_description(_config(block_repeats=[1, 2, 1]), "funnel")


def test_funnel_factorized_attention_by_hand():
    """Factorized relative attention at 2 x 16 tokens, first layer of block 1 (8 queries,
    16 keys; d_model 64, 4 heads of 16): queries projected into the 64 sinusoid channels,
    scored against the keys' two sinusoid tables, besides content, values, token types."""
    desc = derive_description(_config(attention_type="factorized"), "funnel")
    core = next(s for s in desc["kinds"][desc["layers"][1][0]] if s["op"] == "attention")
    b, h, d, lq, lk, d_model = 2, 4, 16, 8, 16, 64
    assert core["probe_flops"] == (2 * b * h * lq * lk * 2 * d + 2 * b * h * lq * 2 * d
                                   + 2 * b * lq * h * d * d_model + 2 * 2 * b * h * lq * lk * d_model)


def test_funnel_inference_is_one_forward_and_training_three():
    """Encoder-only: inference is the prefill (no decode step is built: the pooled
    description has none), training counts forward + 2 x backward of the same matmuls."""
    from llm_analysis.config import get_gpu_config_by_name
    # "transformers" conventions: logits at every position, as FlopCounterMode counts them
    analysis = build_analysis(derive_description(_config(), "funnel"), "funnel",
                              gpu_config=get_gpu_config_by_name("h100-sxm-80gb"), conventions="transformers")
    s = analysis.inference(batch_size_per_gpu=2, seq_len=33, num_tokens_to_generate=1)
    assert s["prefill_num_flops_fwd_total"] == engine_matmul_flops(analysis, 2, 33)
    assert s["decode_num_flops_fwd_total"] == s["decode_latency"] == s["kv_cache_memory_per_gpu"] == 0
    assert s["total_latency"] == s["prefill_latency"] > 0
    t = analysis.training(batch_size_per_gpu=2, seq_len=33, total_num_tokens=66, gradient_accumulation_steps=1)
    assert t["num_flops_total_per_micro_batch"] == pytest.approx(3 * engine_matmul_flops(analysis, 2, 33), rel=0.02)
