"""serve() states, beside its calibrated times, how far this engine profile has been from published runs it
was not fitted on (the profile's `measured_accuracy`, written by benchmarks/serving_accuracy.py
--write_accuracy). The figures must be the benchmark's as it scores today: a profile refitted, or a model
changed, without them rewritten would print a stale margin, so the benchmark is run here and compared."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from llm_analysis.serving.engine import FRAMEWORKS, PROFILE_DIR

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import serving_accuracy as bench  # noqa: E402
import serving_layout_accuracy as layout_bench  # noqa: E402
from llm_analysis.config import ParallelismConfig  # noqa: E402


def _profile(framework):
    return json.loads((PROFILE_DIR / f"{framework}.json").read_text())


def _stated(framework):
    return _profile(framework)["measured_accuracy"]


def _margins(notes):
    return [n for n in notes if "published closed-loop runs" in n]


def _carries(note, m):
    return (f"{m['rows']} published" in note and f"median {m['ttft_median']:.0%} (p90 {m['ttft_p90']:.0%})" in note
            and f"TPOT by {m['tpot_median']:.0%} (p90 {m['tpot_p90']:.0%})" in note)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_calibrated_answers_carry_the_profiles_margin(analysis_builder, framework):
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", perf_model="calibrated")
    notes = a.serve(concurrency=8, input_len=512, output_len=64, framework=framework, num_requests=0)["notes"]
    margin = _margins(notes)
    assert len(margin) == 1 and _carries(margin[0], _stated(framework))
    assert "one tensor-parallel group per worker" in margin[0]


def test_layouts_carry_the_layout_margin(analysis_builder):
    # attention DP x expert parallelism: the figures of the layout rows, not those of one TP group
    a = analysis_builder("deepseek-ai/DeepSeek-V3", gpu="h200-sxm-141gb", dtype="fp8", attention_dp_size=8,
                         moe_ep_size=8, perf_model="calibrated")
    notes = a.serve(concurrency=64, input_len=1024, output_len=256, framework="sglang", num_requests=0)["notes"]
    margin = _margins(notes)
    assert len(margin) == 1 and _carries(margin[0], _profile("sglang")["measured_accuracy_layouts"]["aggregated"])
    assert "attention data, expert or pipeline parallelism" in margin[0]


def test_disaggregated_pools_carry_their_margin(analysis_builder):
    a = analysis_builder("deepseek-ai/DeepSeek-V3", gpu="h200-sxm-141gb", dtype="fp8", perf_model="calibrated")
    pools = {"prefill": {"workers": 1, "parallelism": ParallelismConfig(tp_size=8)},
             "decode": {"workers": 1, "parallelism": ParallelismConfig(tp_size=1, attention_dp_size=8, moe_ep_size=8)}}
    notes = a.serve(concurrency=64, input_len=1024, output_len=256, framework="trtllm", disaggregated=pools)["notes"]
    margin = _margins(notes)
    assert len(margin) == 1
    assert _carries(margin[0], _profile("trtllm")["measured_accuracy_layouts"]["disaggregated"])


def test_roofline_answers_carry_no_margin(analysis_builder):
    # the roofline's times are lower bounds: an error band of the calibrated model does not apply to them
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", perf_model="roofline")
    notes = a.serve(concurrency=8, input_len=512, output_len=64, framework="vllm", num_requests=0)["notes"]
    assert not _margins(notes)


def test_the_stated_margins_are_the_benchmarks_today():
    rows = bench.load_rows()
    excluded = bench.inconsistent_configs(rows)
    report = [r for r in rows if r.half == "report" and r.config not in excluded]
    groups = bench.score(report, "calibrated")
    for framework in FRAMEWORKS:
        now, stated = bench.accuracy_of(groups[framework]), _stated(framework)
        for key, value in now.items():
            assert stated[key] == pytest.approx(value, abs=0.002), (
                f"{framework} {key}: profile states {stated[key]}, the benchmark gives {value}: rerun "
                "python benchmarks/serving_accuracy.py --write_accuracy")


def test_the_stated_layout_margins_are_the_benchmarks_today():
    groups = layout_bench.score([r for r in layout_bench.load_rows() if r.half == "report"])
    for framework in FRAMEWORKS:
        stated = _profile(framework)["measured_accuracy_layouts"]
        for kind, name in (("agg", "aggregated"), ("disagg", "disaggregated")):
            g = groups.get(f"{kind} {framework}")
            if g is None or g["ok"] < layout_bench.MIN_STATED_ROWS:
                assert name not in stated, (framework, name)  # too few rows to state an error
                continue
            for key, value in bench.accuracy_of(g).items():
                assert stated[name][key] == pytest.approx(value, abs=0.002), (
                    f"{framework} {name} {key}: profile states {stated[name][key]}, the benchmark gives {value}: "
                    "rerun python benchmarks/serving_layout_accuracy.py --write_accuracy")
