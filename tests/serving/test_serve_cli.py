"""`llm-analysis serve` as a user runs it (subprocess): the readable report, --output_format json,
one-line errors with exit code 2, and a --help that documents every flag."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

from llm_analysis.cli.help_text import args_section
from llm_analysis.cli.serve import serve

BASE = ["serve", "--model_name", "meta-llama/Llama-3.1-8B", "--gpu_name", "h100-sxm-80gb", "--num_requests", "200"]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "llm_analysis", *args], capture_output=True, text=True, timeout=300)


def test_closed_loop_report():
    r = _run(*BASE, "--tp_size", "2", "--concurrency", "16", "--input_len", "1024", "--output_len", "256")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "16 concurrent clients (closed loop)" in out and "2 x h100-sxm-80gb" in out
    for label in ("time to first token", "time per output token", "end-to-end latency", "throughput:",
                  "saturation:", "KV pool:", "notes:"):
        assert label in out, label


def test_open_loop_json():
    r = _run(*BASE, "--request_rate", "2", "--input_len", "512", "--input_len_spread", "256", "--output_len", "64",
             "--framework", "sglang", "--output_format", "json")
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)  # stdout holds the JSON and nothing else
    assert answer["mode"] == "open_loop" and answer["framework"] == "sglang" and answer["request_rate"] == 2
    assert answer["ttft_p90_s"] >= answer["ttft_p50_s"] > 0
    assert answer["requests_per_s"] == pytest.approx(2.0)
    assert answer["setup"]["model_name"] == "meta-llama_Llama-3.1-8B"


def test_saturated_is_a_report_not_an_error():
    r = _run(*BASE, "--request_rate", "1e5")
    assert r.returncode == 0, r.stderr
    assert "grows without bound" in r.stdout


@pytest.mark.parametrize("flags,words", [
    (["--concurrency", "0"], ["concurrency = 0", "integer in [1,"]),
    (["--concurrency", "4", "--request_rate", "3"], ["exactly one"]),
    (["--concurrency", "4", "--framework", "tgi"], ["framework = 'tgi'", "'vllm', 'sglang', 'trtllm'"]),
    (["--concurrency", "4", "--input_len", "200000"], ["exceeds", "max_seq_len = 131072"]),
    (["--concurrency", "4", "--gpu_memory_utilization", "2"], ["gpu_memory_utilization = 2"]),
    # a file's pairs are the lengths: a length or a spread beside them would be silently ignored
    (["--concurrency", "4", "--lengths_file", "pairs.csv", "--input_len_spread", "5"],
     ["--lengths_file = 'pairs.csv' given with --input_len_spread = 5", "not both"]),
    (["--concurrency", "4", "--lengths_file", "pairs.csv", "--output_len", "64"], ["--output_len = 64", "not both"]),
    # valid JSON of another kind is not "unparseable": it is named as what it is
    (["--concurrency", "4", "--speculative", "[1,2]"], ["--speculative = [1, 2]", "JSON array, not an object"]),
    (["--concurrency", "4", "--disaggregated", "3"], ["--disaggregated = 3", "JSON number, not an object"]),
    # the pools' layouts are in the JSON: layout flags beside it went unread (2 GPUs served, 48 implied)
    (["--concurrency", "4", "--tp_size", "2", "--pp_size", "2", "--disaggregated",
      '{"prefill": {"workers": 1, "parallelism": {"tp_size": 1}}, "decode": {"workers": 1, "parallelism": '
      '{"tp_size": 1}}}'], ["--tp_size 2, --pp_size 2 with --disaggregated", "\"parallelism\""]),
])
def test_errors_are_one_line_exit_2(flags, words):
    r = _run(*BASE, *flags)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llm-analysis: error:")
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_every_flag_is_documented_with_its_unit():
    documented = args_section(serve.__doc__)
    flags = [p for p in inspect.signature(serve).parameters]
    assert set(flags) == set(documented)
    for flag in ("input_len", "output_len", "input_len_spread", "output_len_spread", "max_num_batched_tokens",
                 "block_size"):
        assert "tokens" in documented[flag], flag
    assert "per second" in documented["request_rate"]
    r = _run("serve", "--help")
    assert r.returncode == 0
    for flag in flags:
        assert f"--{flag}" in r.stdout, flag


def test_the_engine_timing_options_the_notes_name_are_flags_too():
    """The notes name benchmark_rounds (0: the steady state alone) and scheduling_lookahead (0 or 1), and the
    fitted API latency: the command line takes them as serve() does, with the same numbers; a latency the
    caller gives is said to be given, not the profile's. With one client nothing waits for other clients'
    prefills nor for a planned step, so there TTFT moves by exactly the API latency given less the profile's."""
    from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                     get_model_config_by_name)
    from llm_analysis.facade import LLMAnalysis
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
                    get_dtype_config_by_name("w16a16e16"), ParallelismConfig(), perf_model="calibrated")
    work = dict(concurrency=32, input_len=2000, output_len=200, num_requests=0)
    flags = ["--concurrency", "32", "--input_len", "2000", "--output_len", "200", "--num_requests", "0",
             "--output_format", "json"]
    for option, value in (("benchmark_rounds", 0), ("scheduling_lookahead", 0), ("api_latency_s", 0.05)):
        r = _run(*BASE[:5], *flags, f"--{option}", str(value))
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        assert got["ttft_s"] == pytest.approx(a.serve(**work, **{option: value})["ttft_s"], rel=1e-9), option
        assert got["ttft_s"] != pytest.approx(a.serve(**work)["ttft_s"], rel=1e-3), option  # the flag took effect
        assert any(n.endswith("(engine profile; api_latency_s as given)") for n in got["notes"]) \
            == (option == "api_latency_s")
    # the closed loop's run length: fitted unless given
    given_rounds = a.serve(**work, benchmark_rounds=10)["notes"]
    assert any("(benchmark_rounds as given;" in n for n in given_rounds)
    assert not any("fitted per engine" in n for n in given_rounds)
    assert any("(benchmark_rounds fitted per engine" in n for n in a.serve(**work)["notes"])
    one = dict(work, concurrency=1)
    profile_s = a.serve(**one)["ttft_s"]
    given_s = a.serve(**one, api_latency_s=0.05)["ttft_s"]
    from llm_analysis.serving.engine import load_engine_profile
    assert given_s - profile_s == pytest.approx(0.05 - load_engine_profile("vllm")["api_latency_s"]["value"], rel=1e-9)
