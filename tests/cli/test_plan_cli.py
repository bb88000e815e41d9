"""`llm-analysis plan infer|train` as a user runs it (subprocess): a plan prints a
table or JSON and exits 0; unmeetable targets and bad flags end in one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llm_analysis.config import get_gpu_config_by_name, get_model_config_by_name


def _run(*args):
    return subprocess.run([sys.executable, "-m", "llm_analysis", "plan", *args], capture_output=True, text=True,
                          timeout=300)


def test_plan_infer_json_rows_respect_the_targets_and_memory():
    r = _run("infer", "--model_name", "meta-llama/Llama-3.1-8B", "--gpu_names", "h100-sxm-80gb,a100-sxm-80gb",
             "--seq_len", "1024", "--num_tokens_to_generate", "128", "--max_tpot", "0.01", "--output_format", "json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    rows = plan["rows"]
    assert rows
    for row in rows:
        assert row["figures"]["time_per_output_token"] <= 0.01
    # hand check of the memory bound: 16-bit weights of the 8.03 B parameters split over tp*pp GPUs
    # must fit in the GPU's memory for every row the planner returns
    params = 8_030_261_248  # Llama-3.1-8B: sum of the published shapes (embeddings + 32 layers + head)
    for row in rows:
        lay = row["layout"]
        gpu_bytes = get_gpu_config_by_name(lay["gpu"]).mem_per_GPU_in_GB * 2**30
        assert 2 * params / (lay["tp"] * lay["pp"]) < gpu_bytes


def test_plan_infer_unmeetable_target_names_the_closest_miss():
    r = _run("infer", "--model_name", "meta-llama/Llama-3.1-8B", "--gpu_names", "h100-sxm-80gb", "--max_tpot", "1e-5")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "tpot" in lines[0] and "Traceback" not in r.stderr


def test_plan_unknown_flag_suggests_the_right_one():
    r = _run("infer", "--model_name", "gpt2", "--gpu_name", "h100-sxm-80gb")
    assert r.returncode == 2
    assert "--gpu_names" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_plan_train_table_lists_layouts_using_at_most_max_gpus():
    r = _run("train", "--model_name", "gpt2", "--gpu_names", "a100-sxm-80gb", "--total_num_tokens", "1e9",
             "--max_gpus", "8", "--global_batch_size", "64", "--seq_len", "1024", "--output_format", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert rows
    for row in rows:
        lay = row["layout"]
        assert lay["tp"] * lay["pp"] * lay["dp"] == row["figures"]["num_gpus"] <= 8
        # the global batch is micro-batch x accumulation steps x dp
        assert lay["micro_batch"] * row["figures"]["gradient_accumulation_steps"] * lay["dp"] == 64
    assert get_model_config_by_name("gpt2").num_layers == 12


def test_plan_train_zero_stages_flag_limits_the_stages_tried():
    base = ("train", "--model_name", "gpt2", "--gpu_names", "a100-sxm-80gb", "--total_num_tokens", "1e9",
            "--max_gpus", "8", "--global_batch_size", "64", "--seq_len", "1024", "--output_format", "json")
    for flag, allowed in (("0,1,2", {0, 1, 2}), ("3", {3})):
        r = _run(*base, "--zero_stages", flag)
        assert r.returncode == 0, r.stderr
        rows = json.loads(r.stdout)["rows"]
        assert rows and {row["layout"]["ds_zero"] for row in rows} <= allowed
    bad = _run(*base, "--zero_stages", "5")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "zero_stages = 5" in bad.stderr


def test_plan_train_flags_zero3_beyond_the_ranks_it_was_checked_on():
    # gpt2 on exactly 1024 GPUs with a global batch of 1024: dp = 1024 / (tp x pp); rows whose
    # ZeRO-3 shards over more than 512 ranks carry a caution, the others none
    from llm_analysis.planner.training import ZERO3_TRUSTED_RANKS, plan_training
    plan = plan_training("gpt2", ["a100-sxm-80gb"], tokens=1e10, max_gpus=1024, min_gpus=1024,
                         global_batch_size=1024, seq_len=1024, zero_stages=(3,))
    assert plan.rows
    flagged = [r for r in plan.rows if r["layout"]["dp"] > ZERO3_TRUSTED_RANKS]
    assert flagged, "expected at least one layout with dp > 512"
    for r in plan.rows:
        assert ("caution" in r) == (r["layout"]["dp"] > ZERO3_TRUSTED_RANKS)
    assert "caution: ZeRO-3 over" in plan.table(top=len(plan.rows))


def test_plan_errors_name_the_flag_the_user_typed():
    # the planner's parameters are gpus / slo.max_ttft_s / tokens; the command's flags differ
    cases = [(("infer", "--model_name", "gpt2", "--gpu_names", ""), "--gpu_names = []"),
             (("infer", "--model_name", "gpt2", "--gpu_names", "h100-sxm-80gb", "--max_ttft", "-1"), "--max_ttft = -1"),
             (("train", "--model_name", "gpt2", "--gpu_names", "a100-sxm-80gb", "--total_num_tokens", "0",
               "--max_gpus", "8", "--global_batch_size", "64"), "--total_num_tokens = 0")]
    for args, expected in cases:
        r = _run(*args)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and expected in r.stderr, r.stderr


def test_a_kv_cache_byte_width_that_is_no_number_is_one_line_naming_it():
    # it had ended in float()'s ValueError traceback, exit 1; "1,x" (fire's tuple) already got the planner's line
    for value in ("abc", "2,x"):
        r = _run("infer", "--model_name", "gpt2", "--gpu_names", "h100-sxm-80gb", "--max_ttft", "1",
                 "--kv_cache_dtype_bytes", value)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        bad = value.split(",")[-1]
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert f"--kv_cache_dtype_bytes = {bad!r} must be a positive number of bytes or None" in r.stderr


def test_plan_infer_names_the_default_lengths_that_exceed_the_context():
    """OPT-1.3B has 2048 learned positions; plan infer's default lengths are 2048 + 256 tokens. A user who typed no
    length learns which defaults overflowed (2048 + 256 = 2304 with a load, as engines count a request; 2303
    positions for a static batch, whose last token is never fed back), written as the flags to change."""
    cases = [(("-c", "8"), "--seq_len (default 2048) + --num_tokens_to_generate (default 256) = 2304 tokens"),
             (("--max_tpot", "0.05"), "--seq_len (default 2048) + --num_tokens_to_generate (default 256) - 1 = 2303"),
             (("-c", "8", "--seq_len", "2000"), "--seq_len + --num_tokens_to_generate (default 256) = 2256 tokens")]
    for flags, expected in cases:
        r = _run("infer", "facebook_opt-1.3b", "h200-sxm-141gb", *flags)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert expected in r.stderr, r.stderr


def test_plan_infer_emit_launch_prints_the_command_and_refuses_bad_values():
    base = ("infer", "--model_name", "meta-llama/Llama-3.1-8B", "--gpu_names", "h100-sxm-80gb", "--seq_len", "1024",
            "--num_tokens_to_generate", "128", "--max_ttft", "1", "--max_tpot", "0.03")
    r = _run(*base, "--request_rate", "4", "--framework", "vllm", "--emit_launch", "vllm")
    assert r.returncode == 0, r.stderr
    # a dense model: one tensor-parallel group per worker, vLLM's flag names
    assert "vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size " in r.stdout
    assert "--max-num-batched-tokens" in r.stdout and "--gpu-memory-utilization" in r.stdout
    for bad, needle in ((("--request_rate", "4", "--emit_launch", "foo"), "vllm, sglang, trtllm"),
                        (("--emit_launch", "sglang"), "load")):
        r = _run(*base, *bad)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr
        assert "--emit_launch = " in lines[0] and needle in lines[0]


def test_plan_plot_path_is_checked_before_the_search_and_its_folder_made(tmp_path):
    """--plot PATH writes the Pareto front there, making a missing folder as --html does; a path under a
    file is one line naming --plot, exit 2 (before this, a traceback after the whole search, exit 1)."""
    pytest.importorskip("matplotlib")
    base = ("infer", "meta-llama/Llama-3.1-8B", "h100-sxm-80gb", "--max_tpot", "0.05")
    target = tmp_path / "new" / "folder" / "front.png"
    r = _run(*base, "--plot", str(target))
    assert r.returncode == 0, r.stderr
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # a PNG file's signature
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    r = _run(*base, "--plot", str(blocker / "front.png"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "--plot" in r.stderr and "is not a directory" in r.stderr


def test_plan_top_must_be_a_positive_whole_number():
    """--top 0 printed a header without rows and --top -1 all rows but the last (a Python slice)."""
    base = ("infer", "meta-llama/Llama-3.1-8B", "h100-sxm-80gb", "--max_tpot", "0.05")
    for bad in ("0", "-1", "2.5"):
        r = _run(*base, "--top", bad)
        assert r.returncode == 2 and "--top" in r.stderr and bad in r.stderr, (bad, r.stderr)
    r = _run(*base, "--top", "2")
    numbers = [line.split()[0] for line in r.stdout.splitlines() if line.split()[1:2] == ["h100-sxm-80gb"]]
    assert r.returncode == 0 and numbers == ["1", "2"], r.stdout


def test_plan_train_refuses_more_tokens_than_the_limit_by_name():
    """1e18 tokens is above training()'s 1e17: named once, not reported as every candidate missing memory."""
    r = _run("train", "megatron-lm-175b", "a100-sxm-80gb", "1e18", "1024", "1536", "--seq_len", "2048")
    assert r.returncode == 2
    assert "--total_num_tokens" in r.stderr and "1e+18" in r.stderr and "1e+17" in r.stderr
    assert "memory" not in r.stderr


def test_plan_prints_each_warning_once_however_many_candidates_log_it():
    """Every candidate on an A100 with fp8 logs that the GPU has no fp8 units: stderr says it once."""
    r = _run("infer", "meta-llama/Llama-3.1-8B", "a100-sxm-80gb,h100-sxm-80gb", "--max_tpot", "0.05",
             "--dtype_names", "bf16,fp8")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("has no fp8 tensor cores") == 1, r.stderr


def test_plan_train_zero3_caution_counts_context_parallel_ranks():
    """ZeRO-3 shards a replica's states over dp x cp ranks (context-parallel ranks hold shards of the same
    replica; the plan table's legend says so): Llama-3.1-8B at 16K tokens on 1,024 GPUs with tp = pp = 1 searches
    dp x cp = 1,024 for every cp, and each such row is beyond the 512 ranks ZeRO-3's timing was checked on."""
    from llm_analysis.planner.training import ZERO3_TRUSTED_RANKS, plan_training
    plan = plan_training("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], tokens=1e12, max_gpus=1024, min_gpus=1024,
                         global_batch_size=256, seq_len=16384, zero_stages=(3,), max_tp=1, max_pp=1)
    with_cp = [r for r in plan.rows if r["layout"].get("cp", 1) > 1]
    assert with_cp, "expected rows with context parallelism"
    for r in plan.rows:
        ranks = r["layout"]["dp"] * r["layout"].get("cp", 1)
        assert ("caution" in r) == (ranks > ZERO3_TRUSTED_RANKS), r["layout"]
