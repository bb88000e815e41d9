"""perf_model="calibrated" from generated programs (cost/calibrated_programs.py) returns what
the loops over the same phase tables return, bit for bit (`calibrated_table_splits` filed by
`GroupTimes` / training/stage.py), and what the operators built one by one return to 1e-12
(the tables' polynomials round differently from the builders' formulas)."""

from __future__ import annotations

import logging
import math

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
import llm_analysis.cost.gemm as gemm
from llm_analysis.cost.calibrated import CalibratedCostModel
from llm_analysis.cost.profiles import profile_for_gpu
import llm_analysis.model.phase_table as phase_table_module
from llm_analysis.model.phase_table import phase_table
from llm_analysis.cost.phase_programs import phase_program

SETUPS = [  # model, gpu, dtype, parallelism, LLMAnalysis options
    ("facebook_opt-1.3b", "a100-sxm-40gb", "w16a16e16", dict(tp_size=2), {}),
    ("NousResearch_Llama-2-7b-hf", "a100-sxm-80gb", "w8a16e16", dict(tp_size=1, dp_size=2), {}),  # weight-only int8
    ("meta-llama_Llama-3.1-8B", "h100-sxm-80gb", "fp8", dict(tp_size=2, dp_size=4), {}),  # fp8 GEMM plateau
    ("google_gemma-2-9b", "h100-sxm-80gb", "w16a16e16", dict(tp_size=2, dp_size=2), {}),  # sliding windows
    ("tiiuae_falcon-40b", "a100-sxm-80gb", "w16a16e16", dict(tp_size=4, pp_size=4), {}),  # pipeline stages
    ("deepseek-ai_DeepSeek-V2-Lite", "h100-sxm-80gb", "w16a16e16", dict(tp_size=2, dp_size=2), {}),  # MLA
    ("Qwen_Qwen3-0.6B", "a100-sxm-80gb", "w16a16e16", {}, dict(kernel_launch="eager")),
]
INFERENCE = [dict(batch_size_per_gpu=4, seq_len=512, num_tokens_to_generate=128),
             dict(batch_size_per_gpu=1, seq_len=777, num_tokens_to_generate=1),  # one step: first = last
             dict(batch_size_per_gpu=3, seq_len=100, num_tokens_to_generate=2),
             dict(batch_size_per_gpu=64, seq_len=4000, num_tokens_to_generate=300),  # long: a window's edge
             dict(batch_size_per_gpu=2, seq_len=300, num_tokens_to_generate=40, ds_zero=3)]
TRAINING = [dict(batch_size_per_gpu=2, seq_len=512, gradient_accumulation_steps=2, total_num_tokens=1e9),
            dict(batch_size_per_gpu=1, seq_len=1000, gradient_accumulation_steps=4, activation_recomputation=1,
                 ds_zero=1),
            dict(batch_size_per_gpu=3, seq_len=333, gradient_accumulation_steps=2, activation_recomputation=2,
                 ds_zero=3, overlap_tp_comm=True)]


def _analysis(name, gpu, dtype, par, opts):
    return LLMAnalysis(get_model_config_by_name(name), get_gpu_config_by_name(gpu), get_dtype_config_by_name(dtype),
                       ParallelismConfig(**par), perf_model="calibrated", **opts)


def _results(setup):
    logging.disable(logging.WARNING)
    a, out = _analysis(*setup), []
    for fn, calls in ((a.inference, INFERENCE), (a.training, TRAINING)):
        for kw in calls:
            try:
                out.append(fn(**kw))
            except Exception as e:  # the same refusal either way (e.g. does not fit)
                out.append((type(e).__name__, str(e)))
    logging.disable(logging.NOTSET)
    return out


def _tiers(monkeypatch, fit_after, compile_after):
    monkeypatch.setattr(phase_table_module, "FIT_AFTER", fit_after)
    monkeypatch.setattr(phase_table_module, "COMPILE_AFTER", compile_after)


def _leaves(x, path=""):
    """(path, value) of every leaf of nested dicts, lists and tuples."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _leaves(v, f"{path}.{k}")
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, x


def _close(got, want):
    got, want = list(_leaves(got)), list(_leaves(want))
    assert [p for p, _ in got] == [p for p, _ in want]
    for (path, g), (_, w) in zip(got, want):
        assert (math.isclose(g, w, rel_tol=1e-12, abs_tol=0) if isinstance(w, float) else g == w), (path, g, w)


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s[0]}-{s[2]}")
def test_programs_are_the_table_loops_bit_for_bit(setup, monkeypatch):
    _tiers(monkeypatch, 0, 0)
    compiled = _results(setup)
    _tiers(monkeypatch, 0, 10**9)
    loops = _results(setup)
    assert compiled == loops


@pytest.mark.parametrize("setup", SETUPS[:3], ids=lambda s: f"{s[0]}-{s[2]}")
def test_programs_are_the_operators(setup, monkeypatch):
    _tiers(monkeypatch, 0, 0)
    compiled = _results(setup)
    monkeypatch.setattr(CalibratedCostModel, "accepts_table", lambda self, table: False)
    _close(compiled, _results(setup))


def test_the_programs_are_used(monkeypatch):
    """With the tiers at 0 a calibrated call runs the generated programs (not the loops)."""
    _tiers(monkeypatch, 0, 0)
    a = _analysis(*SETUPS[0])
    a.inference(**INFERENCE[0])
    a.training(**TRAINING[0])
    cm = a.cost_model
    d = a.with_conventions(a.conventions_named(None)).describer  # what inference() analyses
    for kind in ("prefill", "decode"):
        assert getattr(phase_program(cm, phase_table(d, kind), kind), "__name__", "").endswith(f"{kind}_program")
    assert any(k[1] == "train_stage" for k in cm.__dict__["_training_view"].__dict__["_phase_programs"])


def test_gemm_shape_is_the_tile_model():
    """`GemmShape` (N, K worked out once) against the tile and wave quantisation of
    gemm.py's docstring written out for each candidate tile, on shapes around tile and wave
    edges (hand derivation: tiles = ceil(M/tm) ceil(N/tn); split-K when tiles < SMs)."""
    for gpu, sms in (("a100-sxm-80gb", 108), ("h100-sxm-80gb", 132)):
        p = profile_for_gpu(gpu)
        for n, k in ((768, 768), (11008, 4096), (50272, 2048), (128, 100)):
            shape = gemm.GemmShape(n, k, p, sms)
            for m in (1, 7, 64, 127, 128, 129, 1000, 13824, 13825, 50000):
                best = 0.0
                for tm, tn, rel in p.gemm_tile_shapes:
                    tiles = math.ceil(m / tm) * math.ceil(n / tn)
                    splits = max(1, min(sms // tiles, int(k // p.gemm_splitk_min_k))) if tiles < sms else 1
                    waves = math.ceil(tiles * splits / sms)
                    fill = m * n / (math.ceil(m / tm) * tm * math.ceil(n / tn) * tn)
                    best = max(best, rel * fill * (tiles * splits / (waves * sms)))
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


@pytest.mark.parametrize("setup", [("facebook_opt-1.3b", "a100-sxm-40gb", dict(tp_size=2), {}),
                                   ("NousResearch_Llama-2-7b-hf", "h100-sxm-80gb", dict(tp_size=4), {}),
                                   ("meta-llama_Llama-3.1-70B", "a100-sxm-80gb", dict(tp_size=8),
                                    dict(num_gpus_per_node=4))],  # TP across nodes: a called collective
                         ids=lambda s: s[0])
def test_bound_functions_are_the_loops_bit_for_bit(setup, monkeypatch):
    """cost/calibrated_bound.py's generated totals against `table_splits` + `GroupTimes`."""
    from llm_analysis.cost.calibrated_bound import roofline_decode_s, roofline_phase_s
    name, gpu, par, opts = setup
    a = LLMAnalysis(get_model_config_by_name(name), get_gpu_config_by_name(gpu),
                    parallelism_config=ParallelismConfig(**par), flops_efficiency=0.7, **opts)
    roof, d = a.lower_bound_cost_model, a.describer
    prefill, decode = phase_table(d, "prefill"), phase_table(d, "decode")
    got, want = [], []
    for compile_after, out in ((0, got), (10**9, want)):
        monkeypatch.setattr(phase_table_module, "COMPILE_AFTER", compile_after)
        roof.__dict__.pop("_bound_functions", None)
        for b, x in [(1, 2), (3, 1000), (64, 8191), (7, 100_003)]:
            out.append(roofline_phase_s(roof, prefill, b, x))
            out += [roofline_decode_s(roof, decode, b, x, steps) for steps in (1, 2, 500)]
        if compile_after == 0:  # the generated path was taken
            assert len(roof.__dict__["_bound_functions"]) == 2
    assert got == want
