"""`plan infer` and `plan train` read the generic data type "fp4" for the model on each GPU they search,
as `infer`, `train`, `serve` and `LLMAnalysis(...)` read it (catalogue/lookup.py dtype_for_setup).

Independent facts (the same as tests/catalogue/test_names_in_the_constructor.py): gpt-oss's config.json
states `quantization_config.quant_method = "mxfp4"`; on Hopper (no FP4 tensor cores: the H100 datasheet
lists FP8 as its narrowest tensor-core format) MXFP4 weights are widened in weight-only kernels (16-bit
activations), on Blackwell (FP4 tensor cores) the engines' MoE kernels take MXFP8 activations (W4A8). Any
other model's "fp4" is NVFP4 weights and activations, which only a GPU with FP4 tensor cores runs: the
planner searches the other GPUs without it and says so, and refuses only when no GPU can run it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llm_analysis.errors import ConfigError
from llm_analysis.planner.inference import plan_inference
from llm_analysis.planner.training import plan_training

HOPPER, BLACKWELL = "h100-sxm-80gb", "b200-180gb"
SLO = {"max_ttft_s": 2.0, "request_rate_per_s": 2.0}


def _dtypes_by_gpu(result):
    out = {}
    for row in result.rows:
        out.setdefault(row["layout"]["gpu"], set()).add(row["layout"]["dtype"])
    return out


def test_an_mxfp4_checkpoint_runs_w4a16_on_hopper_and_w4a8_on_blackwell():
    result = plan_inference("openai/gpt-oss-120b", [HOPPER, BLACKWELL], SLO, dtypes=["fp4"], seq_len=1024,
                            num_tokens_to_generate=128)
    assert _dtypes_by_gpu(result) == {HOPPER: {"w4a16e16-mxfp4"}, BLACKWELL: {"w4a8e16-mxfp4"}}
    stated = result.assumptions["fp4"]
    assert f"{HOPPER}: w4a16e16-mxfp4" in stated and f"{BLACKWELL}: w4a8e16-mxfp4" in stated


def test_nvfp4_is_searched_only_where_fp4_tensor_cores_are():
    result = plan_inference("meta-llama/Llama-3.1-8B", [HOPPER, BLACKWELL], SLO, dtypes=["fp4", "fp8"],
                            seq_len=1024, num_tokens_to_generate=128, batching="continuous")
    by_gpu = _dtypes_by_gpu(result)
    assert "nvfp4" not in by_gpu.get(HOPPER, set())
    assert f"{HOPPER}: not searched" in result.assumptions["fp4"] and f"{BLACKWELL}: nvfp4" in result.assumptions["fp4"]


def test_no_gpu_that_runs_it_is_refused_naming_the_word_and_the_gpu():
    with pytest.raises(ConfigError) as err:
        plan_inference("meta-llama/Llama-3.1-8B", [HOPPER], SLO, dtypes=["fp4"])
    assert "'fp4'" in str(err.value) and HOPPER in str(err.value) and BLACKWELL in str(err.value)


def test_fp4_and_nvfp4_together_are_one_data_type():
    result = plan_inference("meta-llama/Llama-3.1-8B", [BLACKWELL], {"max_tpot_s": 0.05}, dtypes=["fp4", "nvfp4"],
                            seq_len=1024, num_tokens_to_generate=128)
    rows = [r for r in result.rows if r["layout"]["dtype"] == "nvfp4"]
    layouts = [json.dumps(r["layout"], sort_keys=True) for r in rows]
    assert rows and len(layouts) == len(set(layouts))  # no layout searched (and ranked) twice


def test_plan_train_reads_it_per_gpu_too():
    result = plan_training("meta-llama/Llama-3.1-8B", [HOPPER, BLACKWELL], 1e9, 8, 64, 4096, dtypes=["fp4", "bf16"])
    by_gpu = _dtypes_by_gpu(result)
    assert "nvfp4" in by_gpu[BLACKWELL] and "nvfp4" not in by_gpu.get(HOPPER, set())
    assert f"{HOPPER}: not searched" in result.assumptions["fp4"]


def test_the_cli_refuses_in_one_line_with_exit_2():
    r = subprocess.run([sys.executable, "-m", "llm_analysis", "plan", "infer", "--model_name", "meta-llama/Llama-3.1-8B",
                        "--gpu_names", HOPPER, "--dtype_names", "fp4"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "'fp4'" in lines[0] and "Traceback" not in r.stderr


def test_a_plan_that_widens_the_checkpoint_says_so_and_how_to_plan_it_as_stored():
    """gpt-oss's checkpoint stores its experts in MXFP4 (config.json's quantization_config); planned at
    w16a16e16 the rows hold 16-bit weights, which the plan states with the dtype that plans the
    checkpoint as stored. Searching 'fp4' (stored as the checkpoint is) states nothing; nor does a 16-bit model."""
    widened = plan_inference("openai/gpt-oss-120b", [HOPPER], SLO, seq_len=512, num_tokens_to_generate=64,
                             dtypes=["w16a16e16"])
    note = widened.assumptions["checkpoint"]
    assert "stores mxfp4 weights" in note and "w16a16e16" in note and "--dtype_names fp4" in note
    assert "dtypes: openai_gpt-oss-120b's checkpoint stores mxfp4" in widened.table()
    stored = plan_inference("openai/gpt-oss-120b", [HOPPER], SLO, seq_len=512, num_tokens_to_generate=64,
                            dtypes=["fp4"])
    assert "checkpoint" not in stored.assumptions
    plain = plan_inference("meta-llama/Llama-3.1-8B", [HOPPER], SLO, seq_len=512, num_tokens_to_generate=64)
    assert "checkpoint" not in plain.assumptions


def test_the_default_plans_the_release_as_each_gpu_runs_it():
    """Without dtypes the plan searches the checkpoint as released ("checkpoint"): DeepSeek-R1's config.json
    states FP8 weights (quant_method "fp8"); H100 has FP8 tensor cores, A100 none (the engines' FP8 Marlin
    kernels: weight-only, 16-bit activations). The plan says what the word became on each GPU and, holding
    the release as stored, states no widening; a 16-bit release states nothing."""
    result = plan_inference("deepseek-ai/DeepSeek-R1", ["a100-sxm-80gb", HOPPER], {"max_tpot_s": 0.2},
                            seq_len=512, num_tokens_to_generate=64)
    assert _dtypes_by_gpu(result).get(HOPPER) == {"fp8"}
    stated = result.assumptions["checkpoint_dtype"]
    assert f"{HOPPER}: fp8" in stated and "a100-sxm-80gb: w8a16e16-fp8 (weight-only" in stated
    assert "checkpoint" not in result.assumptions and "dtypes: 'checkpoint' (the default)" in result.table()
    plain = plan_inference("meta-llama/Llama-3.1-8B", [HOPPER], SLO, seq_len=512, num_tokens_to_generate=64)
    assert _dtypes_by_gpu(plain) == {HOPPER: {"w16a16e16"}} and "checkpoint_dtype" not in plain.assumptions


def test_the_cli_default_plans_the_release():
    r = subprocess.run([sys.executable, "-m", "llm_analysis", "plan", "infer", "--model_name", "openai/gpt-oss-20b",
                        "--gpu_names", BLACKWELL, "--max_tpot", "0.05", "--seq_len", "512",
                        "--num_tokens_to_generate", "64"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    first_row = r.stdout.splitlines()[1].split()
    assert first_row[2] == "w4a8e16-mxfp4"  # (# gpu dtype ...)
