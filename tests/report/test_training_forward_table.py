"""The training report's per-part forward table is timed as the training() call was: under the calibrated
model by its training view (the compute share the header's rates line states), so the table's total is the
summary's latency_fwd and its ridge point the header's; under the roofline the analysis' own model."""

import re

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig
from llm_analysis.report.render import render

KW = dict(batch_size_per_gpu=1, seq_len=8192, global_batch_size=64, ds_zero=1, activation_recomputation=4)


def _ms(text):
    value, unit = re.match(r"([\d.]+) (ms|s)", text).groups()
    return float(value) * (1e-3 if unit == "ms" else 1.0)


@pytest.mark.parametrize("perf_model", ["calibrated", "roofline"])
def test_the_forward_table_totals_the_summary_latency_fwd(perf_model):
    a = LLMAnalysis("meta-llama_Meta-Llama-3-8B", "h100-sxm-80gb", parallelism_config=ParallelismConfig(dp_size=8),
                    perf_model=perf_model)
    s = a.training(**KW)
    text = render(a, s, "training", color=False)
    table = text[text.index("Forward pass of one micro-batch"):]
    total = re.search(r"^total\s+\S+ \S+\s+\S+ \S+\s+([\d.]+ m?s)", table, re.M).group(1)
    # the printed total (two or three significant decimals) against the summary's figure
    assert _ms(total) == pytest.approx(s["latency_fwd"], rel=2e-3)
    ridges = set(re.findall(r"ridge point (\d+)", text))
    assert len(ridges) == 1  # the caption's and the header's
