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


def _stated(framework):
    return json.loads((PROFILE_DIR / f"{framework}.json").read_text())["measured_accuracy"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_calibrated_answers_carry_the_profiles_margin(analysis_builder, framework):
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", perf_model="calibrated")
    notes = a.serve(concurrency=8, input_len=512, output_len=64, framework=framework, num_requests=0)["notes"]
    m = _stated(framework)
    margin = [n for n in notes if "published closed-loop runs" in n]
    assert len(margin) == 1
    assert f"{m['rows']} published" in margin[0]
    assert f"median {m['ttft_median']:.0%} (p90 {m['ttft_p90']:.0%})" in margin[0]
    assert f"TPOT by {m['tpot_median']:.0%} (p90 {m['tpot_p90']:.0%})" in margin[0]


def test_roofline_answers_carry_no_margin(analysis_builder):
    # the roofline's times are lower bounds: an error band of the calibrated model does not apply to them
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", perf_model="roofline")
    notes = a.serve(concurrency=8, input_len=512, output_len=64, framework="vllm", num_requests=0)["notes"]
    assert not [n for n in notes if "published closed-loop runs" in n]


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
