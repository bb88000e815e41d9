"""Kernel-efficiency model (cost/gemm.py): shape effects derived by hand."""

import json
import math

import pytest

from llm_analysis.config import get_gpu_config_by_name
import llm_analysis.cost.gemm as gemm
from llm_analysis.cost.profiles import (ConfigError, check_profile_matches_gpu, load_profile, profile_for_gpu,
                                        profile_from_dict)

H100 = get_gpu_config_by_name("h100-sxm-80gb")
HOPPER = profile_for_gpu("h100-sxm-80gb")
SMS = HOPPER.num_sms("h100-sxm-80gb")  # 132 (NVIDIA H100 whitepaper: 132 SMs on SXM5)
PEAK = H100.peak_bf16_TFLOPS * 1e12
HBM = H100.hbm_bandwidth_in_GB_per_sec * 1e9


def gemm_s(m, n, k, launch="graph"):
    bytes_moved = 2 * (m * k + k * n + m * n)
    return gemm.gemm_time_s(m, n, k, bytes_moved, PEAK, HBM, HOPPER, SMS, launch=launch)


def test_sm_count_is_the_whitepapers():
    assert SMS == 132


def test_time_never_falls_when_m_grows():
    times = [gemm_s(m, 4096, 4096) for m in range(1, 4097, 7)]
    assert all(b >= a * (1 - 1e-12) for a, b in zip(times, times[1:]))  # equal up to rounding


def test_efficiency_stays_below_the_plateau():
    for m in (1, 16, 128, 1000, 8192):
        for k in (64, 4096):
            e = gemm.gemm_efficiency(m, 8192, k, HOPPER, SMS)
            assert 0 < e < HOPPER.gemm_plateau_efficiency <= 1


def test_wave_quantisation_step_at_the_tile_boundary():
    # Hand derivation for kernels that run whole waves (gemm_wave_tail 1: fp8 GEMMs, Ampere), N = 12 x 256 =
    # 3072. With 128x256 tiles, M = 11 x 128 = 1408 gives 11 x 12 = 132 tiles = exactly one wave on 132 SMs
    # (tile and wave fill 1). One more row (M = 1409) needs 12 x 12 = 144 tiles = 2 waves, 144/264 = 0.545
    # full. The best candidate is then 64x128 (relative efficiency 0.8): 23 x 24 = 552 tiles in 5 waves
    # (660 slots), tile fill 1409/1472 -> 0.8 x 0.836 x 0.957 = 0.64 of the one-wave case.
    whole_waves = HOPPER.with_values({"gemm_wave_tail": 1.0}, "whole waves")
    before = gemm.gemm_efficiency(1408, 3072, 8192, whole_waves, SMS)
    after = gemm.gemm_efficiency(1409, 3072, 8192, whole_waves, SMS)
    assert after < 0.8 * before
    assert after == pytest.approx(0.8 * (552 / 660) * (1409 / 1472) * before, rel=1e-9)
    # fp8 GEMMs run whole waves whatever the profile's 16-bit tail
    assert gemm.gemm_efficiency(1409, 3072, 8192, HOPPER, SMS, fp8=True) == pytest.approx(
        0.8 * (552 / 660) * (1409 / 1472) * gemm.gemm_efficiency(1408, 3072, 8192, HOPPER, SMS, fp8=True), rel=1e-9)


def test_a_stream_k_schedule_pays_the_partial_tile_not_the_idle_wave():
    # Hopper's 16-bit GEMMs (gemm_wave_tail 0): the same M = 1409 keeps 128x256 tiles, 12 x 12 = 144 tiles
    # spread over the 132 SMs with no idle tail; only the partly covered row tile costs: 1409 / 1536
    assert HOPPER.values["gemm_wave_tail"] == 0.0
    before = gemm.gemm_efficiency(1408, 3072, 8192, HOPPER, SMS)
    after = gemm.gemm_efficiency(1409, 3072, 8192, HOPPER, SMS)
    assert after == pytest.approx(1409 / 1536 * before, rel=1e-9)
    # fewer tiles than SMs: stream-K splits K as finely as its slices allow (K 4096 / 256 = 16 slices),
    # so M = 512 and 513 (64 and 80 tiles of 128 x 256 at N = 4096) both keep every SM busy: their
    # efficiencies differ by the partial row tile alone, 513 / 640
    e512 = gemm.gemm_efficiency(512, 4096, 4096, HOPPER, SMS)
    e513 = gemm.gemm_efficiency(513, 4096, 4096, HOPPER, SMS)
    assert e513 >= e512 * 513 / 640 * (1 - 1e-12)


def test_one_row_past_a_tile_costs_what_the_measured_gemms_show():
    # aiconfigurator's H100 bf16 GEMM table (github:ai-dynamo/aiconfigurator @ 095f58a, aic-core/.../h100_sxm/
    # gemm/trtllm/1.3.0rc20/gemm_perf.parquet, Apache-2.0), N = K = 4096: M = 512 25.2 us, 513 26.0 us
    # (+3%); 1024 45.3 us, 1025 46.7 us (+3%). Whole waves and whole splits had made 513 take 88% longer.
    for m, measured_ratio in ((512, 26.0 / 25.2), (1024, 46.7 / 45.3)):
        ratio = gemm_s(m + 1, 4096, 4096) / gemm_s(m, 4096, 4096)
        assert ratio < 1.25 * measured_ratio


def test_small_m_is_memory_or_latency_bound():
    # M = 1 (batch-1 decode): weights 4096 x 4096 x 2 B = 33.6 MB streamed at <= 0.88 x 3.35 TB/s
    # take >= 11.4 us, while the FLOPs at peak would take 2 x 4096^2 / 989e12 = 0.034 us.
    t = gemm_s(1, 4096, 4096)
    assert t >= 2 * 4096 * 4096 / (0.88 * HBM)
    assert t > 100 * 2 * 4096 * 4096 / PEAK


def test_batch1_decode_step_not_faster_than_its_launches():
    # GPT-2 small (12 layers, h = 768, 4h MLP) batch 1 decode, fp16: per layer 4 GEMMs
    # (qkv, out, up, down), attention, 2 norms, activation, 2 residual adds = 10 kernels.
    # Hand derivation: weights 12 x 12 h^2 x 2 B = 170 MB -> 51 us at the full 3.35 TB/s;
    # 120 kernels under CUDA graphs at >= 2.5 us each -> >= 300 us. The step is launch-bound.
    h, layers, ctx = 768, 12, 512
    per_layer = (gemm_s(1, 3 * h, h) + gemm_s(1, h, h) + gemm_s(1, 4 * h, h) + gemm_s(1, h, 4 * h)
                 + gemm.attention_decode_time_s(2 * ctx * h * 2, 4 * ctx * h, PEAK, HBM, HOPPER)
                 + 5 * gemm.streaming_time_s(3 * h * 2, HBM, HOPPER))
    step = layers * per_layer
    assert step >= layers * 10 * HOPPER.kernel_floor_graph_s
    assert step > 5 * (layers * 12 * h * h * 2) / HBM


def test_eager_floor_is_not_below_graph_floor():
    assert gemm.kernel_floor_s(HOPPER, "eager") >= gemm.kernel_floor_s(HOPPER, "graph")
    with pytest.raises(ConfigError, match="launch"):
        gemm.kernel_floor_s(HOPPER, "jit")


def test_flash_prefill_efficiency_rises_with_length():
    # (the half length is measured since issue 27: 1118 on Hopper, it was an assumed 512)
    half = HOPPER.attn_prefill_half_seq
    e = [gemm.flash_prefill_efficiency(s, HOPPER) for s in (128, half, 4 * half, 16384)]
    assert e == sorted(e) and e[-1] < HOPPER.attn_prefill_efficiency
    assert e[1] == pytest.approx(HOPPER.attn_prefill_efficiency / 2)  # half the plateau at attn_prefill_half_seq


def test_profiles_refuse_unknown_keys_and_other_gpus(tmp_path):
    doc = load_profile("ampere").to_dict()
    doc["parameters"]["gemm_magic"] = {"value": 1, "source": "x"}
    with pytest.raises(ConfigError, match="gemm_magic"):
        profile_from_dict(doc, "user.json")
    doc = load_profile("ampere").to_dict()
    doc["parameters"]["hbm_efficiency"]["value"] = -1
    with pytest.raises(ConfigError, match="hbm_efficiency"):
        profile_from_dict(json.loads(json.dumps(doc)), "user.json")
    with pytest.raises(ConfigError, match="gpus"):
        check_profile_matches_gpu(load_profile("ampere"), "h100-sxm-80gb")


def test_gemm_shape_is_the_tile_model():
    """`GemmShape` (N, K worked out once) against the tile and wave quantisation of
    gemm.py's docstring written out for each candidate tile, on shapes around tile and wave
    edges (hand derivation: tiles = ceil(M/tm) ceil(N/tn); split-K when tiles < SMs; whole waves
    and whole splits with a wave tail of 1 (Ampere), none with 0 (Hopper's 16-bit GEMMs: K split
    into as many slices as fill the SMs, capped by K / gemm_splitk_min_k, and no idle tail))."""
    for gpu, sms in (("a100-sxm-80gb", 108), ("h100-sxm-80gb", 132)):
        p = profile_for_gpu(gpu)
        tail = p.values.get("gemm_wave_tail", 1.0)
        for n, k in ((768, 768), (11008, 4096), (50272, 2048), (128, 100)):
            shape = gemm.GemmShape(n, k, p, sms)
            for m in (1, 7, 64, 127, 128, 129, 1000, 13824, 13825, 50000):
                best = 0.0
                for tm, tn, rel in p.gemm_tile_shapes:
                    tiles = math.ceil(m / tm) * math.ceil(n / tn)
                    fill = m * n / (math.ceil(m / tm) * tm * math.ceil(n / tn) * tn)
                    if tail == 1.0:
                        splits = max(1, min(sms // tiles, int(k // p.gemm_splitk_min_k))) if tiles < sms else 1
                        waves = math.ceil(tiles * splits / sms)
                        busy = tiles * splits / (waves * sms)
                    else:
                        assert tail == 0.0
                        busy = 1.0 if tiles >= sms else max(tiles, min(tiles * int(k // p.gemm_splitk_min_k), sms)) / sms
                    best = max(best, rel * fill * busy)
                want = p.gemm_plateau_efficiency * best * k / (k + p.gemm_k_half)
                assert shape(m) == pytest.approx(want, rel=1e-14)
                assert shape(m) == gemm.gemm_efficiency(m, n, k, p, sms)  # memoised: the same float


def _tile_loop(shape, m):
    """`GemmShape`'s efficiency from `_best_tile`, its tile loop, with no memo or bucket."""
    return shape.plateau * shape._best_tile(m) * shape.k / shape.k_total


def test_gemm_buckets_are_the_tile_loop_bit_for_bit():
    """`GemmShape.miss` takes the winning tile of M's bucket (ceil(M / rows_m), else the fine
    ceil(M / fine_m): `gemm_buckets.tile_winner`) and returns the tile loop's float at every M,
    near tile and wave edges and far out, fp8 too, also where two tiles tie or the tiles left
    out of the coarse buckets might win (buckets left to the fine ones, or to the loop)."""
    import random
    rng = random.Random(6)
    ties = fine = 0
    for gpu, sms in (("a100-sxm-80gb", 108), ("h100-sxm-80gb", 132)):
        p = profile_for_gpu(gpu)
        shapes = [(768, 768), (11008, 4096), (50272, 2048), (128, 100), (1, 1), (17, 3), (6144, 2048)]
        shapes += [(rng.randint(1, 30000), rng.randint(1, 20000)) for _ in range(8)]
        for n, k in shapes:
            for fp8 in (False, True):
                shape = gemm.GemmShape(n, k, p, sms, fp8=fp8)
                for m in list(range(1, 1200)) + [rng.randint(1, 3_000_000) for _ in range(1500)]:
                    assert shape.miss(m) == _tile_loop(shape, m), (gpu, n, k, fp8, m)
                ties += sum(1 for w in shape.fine_winners.values() if not w)
                fine += len(shape.fine_winners)
                assert shape.rows_m > shape.fine_m  # (the profiles' 16-row tiles: two widths)
    assert ties and fine  # (some buckets do tie: the fine buckets' and the loop's paths are exercised)
