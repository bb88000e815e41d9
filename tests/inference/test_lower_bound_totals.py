"""A calibrated inference() call reports the roofline's times of the same call as `<key>_lower_bound`
(cost/choice.py). inference/lower_bound.py works them out from the phase tables' totals
(`RooflineCostModel.table_total_s`, `table_steps_total_s`) without the breakdowns; the expected
values here come from a roofline analysis' own inference(), which times the same call operator group
by operator group: they must agree for every kind of model and layout the totals handle (collectives,
sliding windows that end among the decode steps, latent attention, experts, pipeline hand-offs, one
generated token)."""

from __future__ import annotations

import pytest

from builders import build_analysis
from llm_analysis.config import ParallelismConfig

CASES = [
    ("meta-llama/Llama-3.1-8B", ParallelismConfig(tp_size=2), 7, 517, 37),
    ("meta-llama/Llama-3.1-8B", ParallelismConfig(tp_size=1), 3, 100, 1),  # no decode step
    ("meta-llama/Llama-3.1-8B", ParallelismConfig(tp_size=2, pp_size=2), 1, 300, 20),  # hand-offs
    ("mistralai/Mistral-7B-v0.1", ParallelismConfig(tp_size=1), 2, 4090, 30),  # the window ends mid-decode
    ("google/gemma-2-9b", ParallelismConfig(tp_size=2), 4, 1000, 50),  # local and global layers
    ("deepseek-ai/DeepSeek-V2-Lite", ParallelismConfig(tp_size=1), 5, 800, 25),  # latent attention, experts
    ("Qwen/Qwen3-30B-A3B", ParallelismConfig(tp_size=2, ep_size=2, dp_size=2), 8, 256, 64),
]
KEYS = {"prefill_latency_lower_bound": "prefill_latency", "decode_latency_lower_bound": "decode_latency",
        "total_decode_latency_lower_bound": "total_decode_latency", "total_latency_lower_bound": "total_latency"}


@pytest.mark.parametrize("model,parallelism,batch,prompt,generated", CASES)
def test_the_lower_bounds_are_the_roofline_analysis_own_times(model, parallelism, batch, prompt, generated):
    shape = dict(batch_size_per_gpu=batch, seq_len=prompt, num_tokens_to_generate=generated)
    calibrated = build_analysis(model, gpu="h100-sxm-80gb", parallelism=parallelism,
                                perf_model="calibrated").inference(**shape)
    roofline = build_analysis(model, gpu="h100-sxm-80gb", parallelism=parallelism).inference(**shape)
    for bound_key, roofline_key in KEYS.items():
        assert calibrated[bound_key] == pytest.approx(roofline[roofline_key], rel=1e-12), bound_key
