"""The fast path (phase tables compiled to straight-line code: operators/table_code.py,
phase_programs.py) returns what the reference path returns: the per-operator sum over
the operator records the builders produce (which tests/test_engine_vs_transformers.py
checks against the real models).

The reference is forced by a cost model that is a subclass of the roofline (the tables
serve only the roofline itself, `timing.roofline_table`): same arithmetic, operator by
operator. Floats agree to 1e-12 relative; everything else exactly."""

from __future__ import annotations

import logging
import math
from dataclasses import asdict

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.cost import RooflineCostModel
from llm_analysis.cost.links import collective_time_s, ring_terms
from llm_analysis.model import Phase
from llm_analysis.schema.options import ActivationRecomputation
import llm_analysis.model.phase_table as phase_table_module
from llm_analysis.model.phase_table import FIELDS, phase_of, phase_table, used_phase_table
from llm_analysis.cost.phase_programs import phase_program
from llm_analysis.quantities.group_times import GroupTimes, roofline_table
from llm_analysis.training.stage import build_stage

logging.disable(logging.WARNING)


class PerOperatorRoofline(RooflineCostModel):
    """The roofline, timed operator by operator (no phase table serves a subclass)."""


class ReferenceAnalysis(LLMAnalysis):
    cost_model_class = PerOperatorRoofline


SETUPS = [  # model, gpu, parallelism, LLMAnalysis options
    ("facebook_opt-1.3b", "a100-sxm-40gb", dict(tp_size=2), {}),
    ("facebook_opt-1.3b", "a100-sxm-80gb", dict(pp_size=3, num_layers_in_first_pipeline_stage=6),
     dict(flops_efficiency=0.6, hbm_memory_efficiency=0.8)),
    ("meta-llama_Llama-3.1-8B", "h100-sxm-80gb", dict(tp_size=4, dp_size=2), {}),
    ("meta-llama_Llama-3.1-70B", "a100-sxm-80gb", dict(tp_size=8, pp_size=2, dp_size=2),
     dict(num_gpus_per_node=4)),  # TP spans nodes: the hierarchical (called) collective
    ("NousResearch_Llama-2-7b-hf", "a100-sxm-40gb", dict(tp_size=2, sp_size=1), dict(achieved_tflops=150)),
    ("Qwen_Qwen3-8B", "h100-sxm-80gb", dict(tp_size=2), dict(conventions="transformers")),
    ("bert-base-uncased", "a100-sxm-40gb", {}, {}),
    ("tiiuae_falcon-7b", "h100-sxm-80gb", {}, {}),
    # sliding windows (4096): tables below and above the window, operators at its edge
    ("google_gemma-2-2b", "h100-sxm-80gb", dict(tp_size=2), {}),  # sliding and full layers interleaved
    ("mistralai_Mistral-7B-v0.1", "a100-sxm-80gb", dict(tp_size=2, pp_size=2), {}),  # every layer sliding
]
AROUND_WINDOW = [dict(batch_size_per_gpu=2, seq_len=4000, num_tokens_to_generate=300),  # decode crosses it
                 dict(batch_size_per_gpu=1, seq_len=5000, num_tokens_to_generate=20),
                 dict(batch_size_per_gpu=1, seq_len=4094, num_tokens_to_generate=5),
                 dict(batch_size_per_gpu=3, seq_len=4090, num_tokens_to_generate=2)]
INFERENCE = [dict(batch_size_per_gpu=4, seq_len=512, num_tokens_to_generate=128),
             dict(batch_size_per_gpu=1, seq_len=777, num_tokens_to_generate=1),
             dict(batch_size_per_gpu=3, seq_len=100, num_tokens_to_generate=2),
             dict(batch_size_per_gpu=2, seq_len=300, num_tokens_to_generate=40, ds_zero=3)]
TRAINING = [dict(batch_size_per_gpu=2, seq_len=512, gradient_accumulation_steps=2, total_num_tokens=1e9),
            dict(batch_size_per_gpu=1, seq_len=1000, gradient_accumulation_steps=4, activation_recomputation=1,
                 ds_zero=1),
            dict(batch_size_per_gpu=1, seq_len=333, gradient_accumulation_steps=2, activation_recomputation=4,
                 ds_zero=3, overlap_tp_comm=True)]


def _close(got, want, path=""):
    if isinstance(want, dict):
        assert got.keys() == want.keys(), path
        for k in want:
            _close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            _close(g, w, f"{path}[{i}]")
    elif isinstance(want, float):
        assert isinstance(got, float) and math.isclose(got, want, rel_tol=1e-12, abs_tol=0), (path, got, want)
    else:
        assert got == want, (path, got, want)


def _pair(name, gpu, par, opts):
    args = (get_model_config_by_name(name), get_gpu_config_by_name(gpu), get_dtype_config_by_name("w16a16e16"),
            ParallelismConfig(**par))
    return LLMAnalysis(*args, **opts), ReferenceAnalysis(*args, **opts)


def _call(fn, kw):
    try:
        return fn(**kw)
    except Exception as e:  # the same refusal either way (e.g. does not fit)
        return type(e).__name__, str(e)


@pytest.fixture
def compile_at_once(monkeypatch):
    """Tables fitted and compiled from their first use (normally after FIT_AFTER / COMPILE_AFTER uses)."""
    monkeypatch.setattr(phase_table_module, "FIT_AFTER", 0)
    monkeypatch.setattr(phase_table_module, "COMPILE_AFTER", 0)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "table-loops"])
@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s[0]}-{s[2]}")
def test_fast_path_equals_per_operator_path(setup, compiled, monkeypatch):
    monkeypatch.setattr(phase_table_module, "FIT_AFTER", 0)
    monkeypatch.setattr(phase_table_module, "COMPILE_AFTER", 0 if compiled else 10**9)
    fast, ref = _pair(*setup)
    assert roofline_table(fast.cost_model, fast.describer, "prefill", x=512) is not None  # the fast path is taken
    assert roofline_table(ref.cost_model, ref.describer, "prefill", x=512) is None  # the reference is not
    sliding = bool(fast.model_config.sliding_window)
    for kw in INFERENCE + (AROUND_WINDOW if sliding else []):
        _close(_call(fast.inference, kw), _call(ref.inference, kw), f"inference {kw}")
    if not fast.model_config.encoder_only:
        around = [dict(kw, seq_len=s) for kw in TRAINING[:1] for s in (4094, 4100, 6000)] if sliding else []
        for kw in TRAINING + around:
            _close(_call(fast.training, kw), _call(ref.training, kw), f"training {kw}")


def _table_and_ops(a, phase, b, x, stage=None):
    d = a.describer
    table = phase_table(d, phase, stage)
    weighted = [(p.repeat, o) for p in d.build_model_parts(phase_of(phase, b, x), stage) for o in p.ops]
    return table, weighted


@pytest.mark.parametrize("setup", SETUPS[:4], ids=lambda s: f"{s[0]}-{s[2]}")
def test_programs_equal_operator_loops(setup, compile_at_once):
    """Each program against GroupTimes over the built operators, at shapes far from the probes."""
    a, ref = _pair(*setup)
    cm = a.cost_model
    for b, x in [(1, 2), (3, 1000), (64, 8191), (7, 100_003)]:  # decode reads a KV cache from context 2 on
        table, ops = _table_and_ops(a, "prefill", b, x)
        groups, flops, total_s = phase_program(cm, table, "prefill")(b, x)
        acc = GroupTimes().add_ops(cm, ops)
        _close(float(total_s), acc.total_s)
        _close(groups, acc.finish())
        _close(float(flops), float(sum(n * o.flops for n, o in ops)))
        for rc in ActivationRecomputation:  # a training stage, against the reference's per-operator build
            ph = Phase("train", b, x, x)
            _close(asdict(build_stage(a, ph, 0, rc, None, True)), asdict(build_stage(ref, ph, 0, rc, None, True)))
        for steps in (1, 2, 500):
            table, first = _table_and_ops(a, "decode", b, x)
            _, last = _table_and_ops(a, "decode", b, x + steps - 1)
            groups, first_s, last_s, total_s = phase_program(cm, table, "decode")(b, x, x + steps - 1, steps)
            acc = GroupTimes().add_steps(cm, first, last, steps)
            _close(float(total_s), acc.total_s)
            _close(groups, acc.finish())
            _close(float(first_s), a.weighted_time_s(first))
            _close(float(last_s), a.weighted_time_s(last))


@pytest.mark.parametrize("phase", ["prefill", "decode", "train"])
def test_generated_figures_are_the_loop_bit_for_bit(phase, compile_at_once):
    table = phase_table(_pair(*SETUPS[2])[0].describer, phase)
    for b, x in [(1, 1), (5, 333), (13, 100_001)]:
        for f in range(len(FIELDS)):
            loop = table.evaluate_loop(b, x, f)
            assert table.evaluate(b, x, f) == loop
            assert table.total(b, x, f) == sum(n * v for n, v in zip(table.repeats, loop))
            assert table.largest(b, x, f) == max(loop, default=0.0)


@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"])
@pytest.mark.parametrize("n", [1, 2, 8])
def test_ring_terms_are_collective_time(kind, n):
    """phase_programs writes `links.ring_terms` out; they must give `collective_time_s`."""
    cm = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), get_gpu_config_by_name("h100-sxm-80gb"),
                     parallelism_config=ParallelismConfig(tp_size=8)).cost_model
    link = cm.link("tp", n)
    terms = ring_terms(kind, n, link)
    if terms is None:
        assert n == 1
        return
    factor, bytes_per_s, hop_s, floor_s = terms
    for nbytes in (1.0, 3e3, 7.5e6, 2e9):
        assert max(factor * nbytes / bytes_per_s + hop_s, floor_s) == collective_time_s(kind, nbytes, n, link)


def test_tables_compile_only_once_used_enough(monkeypatch):
    """A table is walked by loop until it has served COMPILE_AFTER figures, then compiled."""
    monkeypatch.setattr(phase_table_module, "FIT_AFTER", 0)
    a, _ = _pair(*SETUPS[0])
    view = a.with_conventions(a.conventions_named(None))  # what inference() analyses (serving conventions)
    table = phase_table(view.describer, "prefill")
    assert phase_program(view.cost_model, table, "prefill") is None
    for k in range(phase_table_module.COMPILE_AFTER + 1):
        a.inference(batch_size_per_gpu=1 + k % 7, seq_len=100 + k, num_tokens_to_generate=4)
    assert phase_program(view.cost_model, table, "prefill") is not None


def test_tables_fitted_only_once_asked_for_enough(monkeypatch):
    """The analysis builds operators per call until a phase kind was asked for FIT_AFTER times."""
    monkeypatch.setattr(phase_table_module, "FIT_AFTER", 8)
    a, _ = _pair(*SETUPS[0])
    d = a.describer
    assert [used_phase_table(d, "train", 0, x=100) is None for _ in range(8)] == [True] * 8
    assert used_phase_table(d, "train", 0, x=100) is phase_table(d, "train", 0)
