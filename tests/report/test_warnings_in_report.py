"""Warnings reach the report's Warnings block and the JSON's `warnings`, once each, and
not stderr (issue 28 item 5). The two conditions are set up so that each must warn: fp8 on an
A100 (Ampere has no fp8 tensor cores: NVIDIA A100 datasheet lists FP16/BF16/TF32/INT8/INT4 only)
and a prompt past Llama 3.1's 131072-token context (its config.json's max_position_embeddings)."""

from __future__ import annotations

import json
import subprocess
import sys

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_dtype_config_by_name, get_gpu_config_by_name, get_model_config_by_name

ARGS = ["infer", "--model_name", "meta-llama/Llama-3.1-8B", "--gpu_name", "a100-sxm-80gb", "--dtype_name", "fp8",
        "--seq_len", "140000", "--num_tokens_to_generate", "4", "--perf_model", "roofline"]


def _run(*extra):
    return subprocess.run([sys.executable, "-m", "llm_analysis.analysis", *ARGS, *extra], capture_output=True,
                          text=True, timeout=120)


def _fp8(ws):
    return [w for w in ws if "no fp8 tensor cores" in w]


def _context(ws):
    return [w for w in ws if "exceeds" in w and "131072" in w]


def test_json_carries_each_warning_once_and_stderr_stays_quiet():
    run = _run("--output_format", "json")
    assert run.returncode == 0, run.stderr
    warnings = json.loads(run.stdout)["warnings"]
    assert len(_fp8(warnings)) == 1 and len(_context(warnings)) == 1, warnings
    assert "rope_scaling llama3 x8" in _context(warnings)[0]  # Llama 3.1 declares llama3 scaling x8
    assert run.stderr == ""


def test_the_report_prints_them_in_its_warnings_block():
    run = _run()
    assert run.returncode == 0, run.stderr
    block = run.stdout.split("Warnings ", 1)[1]
    flat = " ".join(block.split())
    assert flat.count("no fp8 tensor cores") == 1 and flat.count("exceeds meta-llama_Llama-3.1-8B") == 1
    assert run.stderr == ""


def test_debug_logging_still_shows_them_on_stderr():
    run = _run("--output_format", "json", "--log_level", "DEBUG")
    assert "no fp8 tensor cores" in run.stderr


def test_the_library_summary_has_them_too():
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("a100-sxm-80gb"),
                    get_dtype_config_by_name("fp8"))
    s = a.inference(batch_size_per_gpu=1, seq_len=140000, num_tokens_to_generate=4)
    assert len(_fp8(s["warnings"])) == 1 and len(_context(s["warnings"])) == 1
    clean = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"))
    assert clean.inference(batch_size_per_gpu=1, seq_len=1024, num_tokens_to_generate=4)["warnings"] == []


def test_serve_reports_its_warnings_too():
    args = [sys.executable, "-m", "llm_analysis", "serve", "--model_name", "meta-llama/Llama-3.1-8B", "--gpu_name",
            "a100-sxm-80gb", "--dtype_name", "fp8", "--concurrency", "8", "--num_requests", "200"]
    run = subprocess.run(args + ["--output_format", "json"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert len(_fp8(json.loads(run.stdout)["warnings"])) == 1 and run.stderr == ""
    text = subprocess.run(args, capture_output=True, text=True, timeout=120).stdout
    assert text.split("warnings:", 1)[1].count("no fp8 tensor cores") == 1
