"""How benchmarks/measured_operator_values.py reads a measured fused-MoE table's cells (`moe_cells`), and
which of them the grouped-GEMM shares are read off (`moe_unit_ratios`: compute-bound cells of at least
MOE_MIN_TOKENS_PER_EXPERT tokens per expert). The table here is made up so that every figure can be
derived by hand below: tokens routed uniformly, the experts they reach, the weights those experts stream."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from llm_analysis.config import get_gpu_config_by_name
from llm_analysis.cost.gemm import gemm_efficiency
from llm_analysis.cost.profiles import load_profile

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import measured_operator_values as mov  # noqa: E402

GPU = "h100-sxm-80gb"
HIDDEN, INTER, TOP_K, EXPERTS = 4096, 1024, 2, 8


def _doc(latency_ms):
    """One bf16 shape (moe_tp 1) measured at 16 and 4096 tokens."""
    return {"gpu": GPU, "moe": {"bfloat16": {"shapes": [[HIDDEN, INTER, TOP_K, EXPERTS, 1]],
                                             "num_tokens": [16, 4096], "latency_ms": [latency_ms],
                                             "source": {"repository": "made up", "commit": "0" * 40, "path": "this test",
                                                        "framework": "-", "device": "-", "licence": "-"}}}}


def _by_hand(tokens: int, ms: float):
    """(M, ratio, stream share) of one cell, derived without the script."""
    pairs = tokens * TOP_K
    reached = EXPERTS * (1 - (1 - 1 / EXPERTS) ** pairs)  # experts that at least one pair reaches
    m = round(pairs / reached)
    gpu, p = get_gpu_config_by_name(GPU), load_profile("hopper")
    stream_s = 3 * reached * HIDDEN * INTER * 2 / (gpu.hbm_bandwidth_in_GB_per_sec * 1e9 * p.hbm_efficiency)
    unit = p.with_values({"gemm_plateau_efficiency": 1.0, "gemm_k_half": mov.GEMM_K_HALF}, "plateau 1")
    sms = p.num_sms(GPU)
    # gate and up (N = INTER, K = HIDDEN), down (N = HIDDEN, K = INTER), each 2 x pairs x N x K FLOPs
    unit_s = sum(2 * pairs * n * k / (gpu.peak_fp16_TFLOPS * 1e12 * gemm_efficiency(m, n, k, unit, sms))
                 for n, k in ((INTER, HIDDEN), (INTER, HIDDEN), (HIDDEN, INTER)))
    return m, unit_s / (ms * 1e-3), stream_s / (ms * 1e-3)


def test_cells_follow_the_hand_derivation():
    cells = list(mov.moe_cells(_doc([0.05, 2.0]), "hopper", mov.GEMM_K_HALF))
    assert [(c[0], c[1]) for c in cells] == [("16-bit", "bfloat16")] * 2
    for (_, _, m, ratio, stream), (tokens, ms) in zip(cells, ((16, 0.05), (4096, 2.0))):
        want_m, want_ratio, want_stream = _by_hand(tokens, ms)
        assert m == want_m
        assert ratio == pytest.approx(want_ratio, rel=1e-9)
        assert stream == pytest.approx(want_stream, rel=1e-9)
    # 16 tokens x top 2 over 8 experts: every expert reached, 4 tokens each; 4096: 1024 each
    assert [c[2] for c in cells] == [4, 1024]


def test_shares_skip_small_and_bandwidth_bound_cells():
    # the 16-token cell (1 ms: its weights stream in well under half of it) is below
    # MOE_MIN_TOKENS_PER_EXPERT: only the 4096-token cell is read
    assert _by_hand(16, 1.0)[2] < mov.MOE_STREAM_SHARE
    ratio, _ = mov.moe_unit_ratios(_doc([1.0, 2.0]), "hopper", mov.GEMM_K_HALF)["16-bit"]
    assert ratio == pytest.approx(_by_hand(4096, 2.0)[1], rel=1e-9)
    # a latency so short that the weights' streaming takes most of it: the cell is bandwidth-bound, none left
    _, _, stream = _by_hand(4096, 1.0)
    fast_ms = 1.0 * stream / (2 * mov.MOE_STREAM_SHARE)  # streaming takes 2 x the limit of the measured time
    assert math.isclose(_by_hand(4096, fast_ms)[2], 2 * mov.MOE_STREAM_SHARE, rel_tol=1e-9)
    assert mov.moe_unit_ratios(_doc([0.05, fast_ms]), "hopper", mov.GEMM_K_HALF) == {}
