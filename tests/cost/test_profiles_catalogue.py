"""Every catalogue GPU has a calibration profile (issue 27 item 4): both cost models answer
inference() and training() on every GPU of llm_analysis/gpu_configs/ with finite positive
times, and the calibrated summary states the fallback exactly for the GPUs with no
measurements of their own."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_dtype_config_by_name, get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.cost.profiles import generation_of, load_profile

GPU_DIR = Path(__file__).resolve().parents[2] / "llm_analysis" / "gpu_configs"
CATALOGUE_GPUS = sorted(p.stem for p in GPU_DIR.glob("*.json"))
# Written by hand, not read from the profiles: the catalogue GPUs that no generation profile
# listed before issue 27 (the calibrated model refused them) and whose profile is therefore
# another generation's applied to their own spec sheet.
WITHOUT_MEASUREMENTS = {"b300-270gb", "gb300-nvl72-279gb", "h20-96gb", "mi355x-288gb", "tpu-v4-32gb",
                        "tpu-v5e-16gb", "tpu-v5p-95gb", "tpu-v6e-32gb"}
MODEL = get_model_config_by_name("Qwen_Qwen3-0.6B")
BF16 = get_dtype_config_by_name("w16a16e16")


def _positive(x) -> bool:
    return isinstance(x, float) and math.isfinite(x) and x > 0


def test_the_hand_list_names_catalogue_gpus():
    assert WITHOUT_MEASUREMENTS <= set(CATALOGUE_GPUS)
    assert len(CATALOGUE_GPUS) >= 36


@pytest.mark.parametrize("perf_model", ["roofline", "calibrated"])
@pytest.mark.parametrize("gpu_name", CATALOGUE_GPUS)
def test_every_catalogue_gpu_answers_both_cost_models(gpu_name, perf_model):
    a = LLMAnalysis(MODEL, get_gpu_config_by_name(gpu_name), BF16, perf_model=perf_model)
    inf = a.inference(batch_size_per_gpu=2, seq_len=256, num_tokens_to_generate=16)
    tr = a.training(batch_size_per_gpu=1, seq_len=512, total_num_tokens=1e8)
    for key in ("prefill_latency", "decode_latency", "total_latency"):
        assert _positive(inf[key]), (key, inf[key])
    for key in ("latency_fwd", "latency_per_iter", "total_training_latency"):
        assert _positive(tr[key]), (key, tr[key])
    if perf_model == "calibrated":
        fallback = load_profile(generation_of(gpu_name)).fallback
        if gpu_name in WITHOUT_MEASUREMENTS:
            assert fallback and fallback in inf["notes"] and fallback in tr["notes"]
            # the note names the GPU family it is about (B300, GB300, H20, MI355X, TPU)
            assert gpu_name.split("-")[0].upper() in fallback or "TPU" in fallback
        else:
            assert fallback == ""
            assert not any("measurements" in n or "calibration profile" in n for n in inf["notes"] + tr["notes"])
    else:  # the roofline rests on no profile: no fallback to state
        assert not any("measurements" in n or "calibration profile" in n for n in inf["notes"] + tr["notes"])
