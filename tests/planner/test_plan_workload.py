"""`plan infer` on the workload serve() takes: prompt and output lengths with a spread, or (input, output)
pairs inline or from a file, and the engine options that shape a deployment (prefix cache share, token
budget, running requests, memory share). Every fleet is timed by serve() on that workload, and each row's
serve() call, run again, gives its figures."""

from __future__ import annotations

import json

import pytest

from llm_analysis.cli.plan import plan_infer_command
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.facade import LLMAnalysis
from llm_analysis.planner import plan_inference

MODEL, GPU = "meta-llama/Llama-3.1-8B", "h100-sxm-80gb"
PAIRS = [(200, 40), (1800, 200), (600, 120)]


def _replay(row):
    """The row's own serve() call, run again."""
    rep = row["reproduce"]
    a = LLMAnalysis(get_model_config_by_name(rep["model_name"]), get_gpu_config_by_name(rep["gpu_name"]),
                    get_dtype_config_by_name(rep["dtype_name"]), ParallelismConfig(**rep["parallelism"]),
                    **rep["analysis_kwargs"])
    return a.serve(**rep["serve_kwargs"])


def test_lengths_with_a_spread_reach_every_serve_call_and_a_token_rate_is_over_the_mean_output():
    spread_in, spread_out = {"mean": 512, "spread": 256}, {"mean": 128, "spread": 64}
    r = plan_inference(MODEL, [GPU], {"max_tpot_s": 0.05, "min_tokens_per_s": 6400},
                       seq_len=spread_in, num_tokens_to_generate=spread_out)
    kw = r.best["reproduce"]["serve_kwargs"]
    assert kw["input_len"] == spread_in and kw["output_len"] == spread_out
    # 6400 output tokens/s of requests producing 128 tokens on average: 50 requests/s
    assert kw["request_rate"] == pytest.approx(6400 / 128)
    s = _replay(r.best)
    assert s["ttft_s"] == r.best["figures"]["ttft_s"] and s["tpot_s"] == r.best["figures"]["tpot_s"]
    assert s["output_tokens_per_s"] >= 6400 * (1 - 1e-9)
    assert r.assumptions["targets"]["lengths"] == "seq_len 512 +- 256, 128 +- 64 tokens"


def test_pairs_from_a_file_plan_as_the_same_pairs_inline_and_rows_name_the_file(tmp_path):
    path = tmp_path / "lengths.csv"
    path.write_text("input_len,output_len\n" + "".join(f"{i},{o}\n" for i, o in PAIRS))
    slo = {"max_ttft_s": 1.0, "max_tpot_s": 0.05, "concurrency": 48, "percentile": 90}
    from_file = plan_inference(MODEL, [GPU], slo, lengths=str(path))
    inline = plan_inference(MODEL, [GPU], slo, lengths=PAIRS)
    assert [row["figures"] for row in from_file.rows] == [row["figures"] for row in inline.rows]
    assert from_file.best["reproduce"]["serve_kwargs"]["lengths"] == str(path)
    assert f"lengths='{path}'" in from_file.best["reproduce"]["serve_call"]
    assert inline.best["reproduce"]["serve_kwargs"]["lengths"] == PAIRS
    s = _replay(from_file.best)
    assert s["ttft_p90_s"] == from_file.best["figures"]["time_to_first_token"]
    # the pairs' means, by hand
    assert s["input_len_mean"] == pytest.approx((200 + 1800 + 600) / 3)
    assert s["output_len_mean"] == pytest.approx((40 + 200 + 120) / 3)


def test_cli_plan_infer_takes_serves_workload_flags(tmp_path):
    path = tmp_path / "lengths.json"
    path.write_text(json.dumps([{"input_len": i, "output_len": o} for i, o in PAIRS]))
    base = dict(max_tpot="50ms", request_rate=4, output_format="json")
    code, text = plan_infer_command(MODEL, GPU, lengths_file=str(path), prefix_cache_share=0.5,
                                    max_num_batched_tokens=4096, max_num_seqs=64, gpu_memory_utilization=0.85,
                                    **base)
    assert code == 0, text
    kw = json.loads(text)["rows"][0]["reproduce"]["serve_kwargs"]
    assert kw["lengths"] == str(path)
    assert (kw["prefix_cache_share"], kw["max_num_batched_tokens"], kw["max_num_seqs"],
            kw["gpu_memory_utilization"]) == (0.5, 4096, 64, 0.85)
    code, text = plan_infer_command(MODEL, GPU, seq_len=1000, input_len_spread=200, output_len_spread=50,
                                    **base)
    assert code == 0, text
    kw = json.loads(text)["rows"][0]["reproduce"]["serve_kwargs"]
    assert kw["input_len"] == {"mean": 1000, "spread": 200} and kw["output_len"] == {"mean": 256, "spread": 50}


@pytest.mark.parametrize("flags, starts", [
    # static batches (no load) have one length: the flag that asked for more is named
    (dict(max_tpot="50ms", input_len_spread=100), "error: --input_len_spread = 100"),
    (dict(max_tpot="50ms", request_rate=4, batching="static", lengths_file="x.csv"), "error: --lengths_file = 'x.csv'"),
    # a spread reaching the mean is named by its flag, with the valid range
    (dict(max_tpot="50ms", request_rate=4, seq_len=100, input_len_spread=100), "error: --input_len_spread = 100"),
    (dict(max_tpot="50ms", request_rate=4, lengths_file="x.csv", input_len_spread=10),
     "error: --lengths_file = 'x.csv'"),
    (dict(max_tpot="50ms", request_rate=4, lengths_file="no_such.csv"), "error: --lengths_file = 'no_such.csv'"),
    (dict(max_tpot="50ms", request_rate=4, prefix_cache_share=1.5), "error: --prefix_cache_share = 1.5"),
    (dict(max_tpot="50ms", request_rate=4, max_num_seqs=0), "error: --max_num_seqs = 0"),
])
def test_cli_plan_infer_refuses_a_bad_workload_in_one_line_naming_the_flag(flags, starts):
    code, line = plan_infer_command(MODEL, GPU, **flags)
    assert code == 2 and line.startswith(starts) and "\n" not in line, line


def test_the_table_says_what_workload_it_was_planned_for():
    r = plan_inference(MODEL, [GPU], {"max_tpot_s": 0.05, "concurrency": 16}, lengths=PAIRS,
                       speculative={"method": "mtp", "draft_length": 2, "acceptance_rate": 0.8})
    assert ("workload: 16 closed-loop clients; 3 (input, output) length pairs: means 867 and 120 tokens; vllm, "
            "continuous batching, speculative decoding (mtp, 2 tokens verified per step)") in r.table().splitlines()
    r = plan_inference(MODEL, [GPU], {"max_tpot_s": 0.05}, seq_len=512, num_tokens_to_generate=64)
    assert "workload: seq_len 512, 64 tokens; static batches (each prefilled and decoded together)" \
        in r.table().splitlines()


def test_a_spread_of_zero_is_one_length():
    fixed = plan_inference(MODEL, [GPU], {"max_tpot_s": 0.05}, seq_len=512, num_tokens_to_generate=64)
    zero = plan_inference(MODEL, [GPU], {"max_tpot_s": 0.05}, seq_len={"mean": 512, "spread": 0},
                          num_tokens_to_generate={"mean": 64})
    assert [r["figures"] for r in zero.rows] == [r["figures"] for r in fixed.rows]


def test_plan_infer_takes_serve_length_names_and_refuses_two_different_lengths():
    """`plan infer --input_len / --output_len` (serve()'s names) plan exactly as --seq_len /
    --num_tokens_to_generate; both names with different lengths are one error naming both flags."""
    slo = dict(max_tpot=0.05, concurrency=16, output_format="json")
    by_serve_names = plan_infer_command(MODEL, GPU, input_len=1024, output_len=128, **slo)
    by_mirrored_names = plan_infer_command(MODEL, GPU, seq_len=1024, num_tokens_to_generate=128, **slo)
    assert by_serve_names[0] == by_mirrored_names[0] == 0
    serve_names, mirrored_names = json.loads(by_serve_names[1]), json.loads(by_mirrored_names[1])
    assert serve_names["rows"] == mirrored_names["rows"]  # (the search's own timing differs between runs)
    assert serve_names["rows"][0]["reproduce"]["serve_kwargs"]["input_len"] == 1024
    assert serve_names["rows"][0]["reproduce"]["serve_kwargs"]["output_len"] == 128
    code, text = plan_infer_command(MODEL, GPU, input_len=1024, seq_len=512, **slo)
    assert code == 2 and "--input_len = 1024 and --seq_len = 512" in text
