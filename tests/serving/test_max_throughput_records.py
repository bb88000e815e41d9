"""TensorRT-LLM's perf-overview rows state a maximum-throughput run (`trtllm-bench throughput`:
every request sent at once), not a batch: benchmarks/accuracy_records.py scores them against
serve()'s saturation request rate and never fits the cost-model profiles on them (their step times
also hang on the engine profile, fitted on serving rows)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import accuracy  # noqa: E402
import accuracy_records as ar  # noqa: E402
import fit_profiles  # noqa: E402

VALIDATION = ROOT / "benchmarks" / "data" / "validation"


def _perf_overview_records():
    return [r for r in accuracy.load_records(VALIDATION) if "max throughput" in str(r["setup"].get("batch", ""))]


def test_every_max_throughput_record_is_scored_as_seconds_per_request():
    recs = _perf_overview_records()
    assert len(recs) == 55  # the 55 rows the dev set holds (34 FP8, 21 FP4)
    for rec in recs:
        case = ar.case_of(rec)
        # measured: output_len / the run's total output tokens per second (hand: one request's share)
        want = rec["setup"]["output_len"] / rec["measured"]["total_output_tokens_per_s"]
        assert abs(case.measured_s - want) <= 1e-12 * want
        assert case.fitted_on is False


def test_profile_fits_leave_the_max_throughput_records_out():
    recs = _perf_overview_records()
    cases = fit_profiles.generation_cases("hopper", lambda rec: True, recs)
    assert recs and cases == {}
