"""`serve --html` writes its page whenever the text report prints. The page's engine-step detail is
`infer`'s static batch of the mean running requests, which prefills every prompt at once: at loads the
engine runs (it prefills a token budget a step) that batch can exceed the GPU's memory as `infer` counts
it, and then the page leaves the step out and says so, instead of failing the command (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llm_analysis.errors import DoesNotFitError

REPO = Path(__file__).resolve().parents[2]
SETUP = ["serve", "--model_name", "meta-llama/Llama-3.1-8B", "--gpu_name", "h100-sxm-80gb", "--perf_model",
         "calibrated"]


def _cli(args, cwd):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "llm_analysis.analysis", *SETUP, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("load", [["--concurrency", "300", "--num_requests", "0"],
                                  ["--request_rate", "1000", "--num_requests", "400"]])
def test_html_page_written_when_the_step_does_not_fit_statically(tmp_path, analysis_builder, load):
    answer = json.loads(_cli([*load, "--output_format", "json"], tmp_path).stdout)
    batch = max(1, round(answer["mean_running_requests_per_replica"]))
    # the case's premise, from infer itself: the static batch of the mean running requests does not fit
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", perf_model="calibrated")
    with pytest.raises(DoesNotFitError):
        a.inference(batch_size_per_gpu=batch, seq_len=round(answer["input_len_mean"]),
                    num_tokens_to_generate=max(2, round(answer["output_len_mean"])))
    plain = _cli(load, tmp_path)
    page = tmp_path / "serve.html"
    with_page = _cli([*load, "--html", str(page)], tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert with_page.returncode == 0, with_page.stderr
    # the same text report, and the page's line after it
    assert with_page.stdout == plain.stdout + f"\nHTML report written to {page.resolve()}\n"
    html = page.read_text()
    assert f"The engine step of {batch} running requests" in html and "is left out" in html
