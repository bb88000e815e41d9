"""ZeRO-3 traffic terms of training() (llm_analysis/training/zero3.py): a framework's rate
cap on its gathers, the recomputation's extra gather, a partial overlap share; hand-derived
from the small GPT of test_training.py (its hand parameter count) and the cap's definition."""

from __future__ import annotations

import pytest

from llm_analysis.analysis import ActivationRecomputation as R
from llm_analysis.errors import ConfigError
from test_training import H_, L_, S_, V_, _ring, _small, gpt_params

DP, M = 4, 3
KW = dict(batch_size_per_gpu=1, gradient_accumulation_steps=M, seq_len=S_, ds_zero=3)
RATE = 1e8  # bytes/s per GPU: far below the network's, so the cap decides every transfer


def _received(nbytes: float, n: int = DP) -> float:
    """Bytes each of n ranks receives in an all-gather / reduce-scatter of nbytes: (n - 1)/n of them."""
    return nbytes * (n - 1) / n


def test_the_rate_cap_sets_each_zero3_transfer():
    """Per micro-batch: a weight gather in forward, another in backward, a gradient
    reduce-scatter, each of 2 x P bytes (16-bit), at (n - 1)/n of them / rate."""
    P = gpt_params(L_, H_, V_, S_)
    one = _received(2 * P) / RATE
    assert one > _ring("all_gather", 2 * P, DP, "inter")  # the cap, not NCCL, decides
    r = _small(dp=DP, num_gpus_per_node=1).training(**KW, overlap_dp_comm=False, zero3_gather_bytes_per_s=RATE)
    assert r["latency_per_iter_dp_comm"] == pytest.approx(M * 3 * one, rel=1e-12)


def test_a_cap_above_nccl_rate_changes_nothing():
    a = _small(dp=DP, num_gpus_per_node=1)
    plain = a.training(**KW, overlap_dp_comm=False)
    fast = a.training(**KW, overlap_dp_comm=False, zero3_gather_bytes_per_s=1e15)
    assert fast["latency_per_iter_dp_comm"] == plain["latency_per_iter_dp_comm"]


def test_full_recomputation_gathers_the_layers_weights_again():
    """The recomputed forward gathers the transformer layers' weights (not the embeddings
    nor the final norm, which it does not run): L (12h^2 + 13h) parameters, 2 bytes each."""
    P, layers = gpt_params(L_, H_, V_, S_), L_ * (12 * H_ * H_ + 13 * H_)
    a = _small(dp=DP, num_gpus_per_node=1)
    kw = dict(KW, overlap_dp_comm=False, zero3_gather_bytes_per_s=RATE, activation_recomputation=R.FULL)
    again = a.training(**kw, zero3_recompute_gather=True)["latency_per_iter_dp_comm"]
    once = a.training(**kw)["latency_per_iter_dp_comm"]
    assert once == pytest.approx(M * 3 * _received(2 * P) / RATE, rel=1e-12)
    assert again == pytest.approx(M * (3 * _received(2 * P) + _received(2 * layers)) / RATE, rel=1e-12)


def test_selective_recomputation_of_the_attention_core_gathers_nothing_more():
    a = _small(dp=DP, num_gpus_per_node=1)
    kw = dict(KW, overlap_dp_comm=False, zero3_gather_bytes_per_s=RATE, activation_recomputation=R.ATTN_COMPUTE)
    assert a.training(**kw, zero3_recompute_gather=True)["latency_per_iter_dp_comm"] == \
        a.training(**kw)["latency_per_iter_dp_comm"]


def test_an_overlap_share_hides_at_most_that_share_of_each_transfer():
    """exposed = traffic - min(window, s x traffic) per transfer: the forward gather under the
    forward compute, the backward gather + reduce-scatter under backward + recomputation. The rate
    is set so each transfer is longer than its window but s x transfer shorter: full overlap
    would hide the whole window, the share hides s of the transfer."""
    P, s = gpt_params(L_, H_, V_, S_), 0.25
    a = _small(dp=DP, num_gpus_per_node=1)
    kw = dict(KW, batch_size_per_gpu=256)  # (windows long enough for the capped transfers to exceed NCCL's)
    plain = a.training(**kw)
    fwd_window = plain["latency_per_iter_fwd_compute"] / M
    bwd_window = (plain["latency_per_iter_bwd_compute"] + plain["latency_per_iter_recompute"]) / M
    rate = _received(2 * P) / (2 * fwd_window)  # the forward gather takes twice its window
    one = _received(2 * P) / rate
    assert one > fwd_window > s * one and 2 * one > bwd_window > s * 2 * one
    assert one > _ring("all_gather", 2 * P, DP, "inter")  # the cap, not NCCL, decides
    r = a.training(**kw, overlap_dp_comm=s, zero3_gather_bytes_per_s=rate)
    assert r["latency_per_iter_fwd_compute"] / M == fwd_window  # (the windows do not depend on the rate)
    expected = M * ((1 - s) * one + (1 - s) * 2 * one)
    assert r["latency_per_iter_dp_comm"] == pytest.approx(expected, rel=1e-12)
    full = a.training(**kw, zero3_gather_bytes_per_s=rate)["latency_per_iter_dp_comm"]
    assert full == pytest.approx(M * (one - fwd_window + 2 * one - bwd_window), rel=1e-12)


def test_share_one_is_full_overlap_and_zero_is_none():
    a = _small(dp=DP, num_gpus_per_node=1)
    kw = dict(KW, zero3_gather_bytes_per_s=RATE)
    assert a.training(**kw, overlap_dp_comm=1.0)["latency_per_iter"] == \
        pytest.approx(a.training(**kw, overlap_dp_comm=True)["latency_per_iter"], rel=1e-12)
    assert a.training(**kw, overlap_dp_comm=0.0)["latency_per_iter"] == \
        pytest.approx(a.training(**kw, overlap_dp_comm=False)["latency_per_iter"], rel=1e-12)


def test_the_calibrated_lower_bound_moves_gathers_at_nccl_rates():
    """The cap is a framework's inefficiency: the roofline bound of a calibrated call ignores it."""
    a = _small(dp=DP, num_gpus_per_node=1, perf_model="calibrated")
    capped = a.training(**KW, zero3_gather_bytes_per_s=RATE)
    plain = a.training(**KW)
    assert capped["latency_per_iter_lower_bound"] == plain["latency_per_iter_lower_bound"]
    assert capped["latency_per_iter"] > plain["latency_per_iter"]


@pytest.mark.parametrize("extra,field", [
    (dict(zero3_gather_bytes_per_s=0), "zero3_gather_bytes_per_s"),
    (dict(zero3_gather_bytes_per_s="fast"), "zero3_gather_bytes_per_s"),
    (dict(zero3_recompute_gather="maybe"), "zero3_recompute_gather"),
    (dict(overlap_dp_comm=1.5), "overlap_dp_comm"),
    (dict(overlap_dp_comm=-0.1), "overlap_dp_comm"),
    (dict(zero3_recompute_gather=True, activation_recomputation=R.ATTN), "zero3_recompute_gather"),
    (dict(zero3_gather_bytes_per_s=1e9, ds_zero=1), "zero3_gather_bytes_per_s"),
])
def test_bad_terms_are_refused_naming_the_field(extra, field):
    with pytest.raises(ConfigError, match=field):
        _small(dp=DP, num_gpus_per_node=1).training(**{**KW, **extra})
