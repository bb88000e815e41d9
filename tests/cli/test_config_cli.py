"""`python -m llm_analysis.config <command>` as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys

from llm_analysis.config import get_model_config_by_name, list_gpu_configs


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "llm_analysis.config", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def test_list_and_get(tmp_path):
    r = run("list_gpu_configs", cwd=tmp_path)
    assert r.returncode == 0
    assert r.stdout.split() == list_gpu_configs()
    r = run("get_model_config_by_name", "meta-llama/Llama-3.1-8B", cwd=tmp_path)
    assert r.returncode == 0
    assert "num_key_value_heads" in r.stdout and "128256" in r.stdout


def test_dump_writes_a_catalogue_file_that_loads_back(tmp_path):
    r = run("dump_model_config_by_name", "Qwen/Qwen3-30B-A3B", "--model_configs_dir", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "Qwen_Qwen3-30B-A3B.json"
    data = json.loads(path.read_text())
    assert data["moe_num_experts"] == 128 and data["moe_top_k"] == 8  # Qwen3-30B-A3B config.json
    reloaded = get_model_config_by_name(str(path))
    original = get_model_config_by_name("Qwen/Qwen3-30B-A3B")
    assert reloaded.model_dump(exclude={"name"}) == original.model_dump(exclude={"name"})


def test_unknown_names_exit_2_with_one_line(tmp_path):
    r = run("get_gpu_config_by_name", "h100-sxm-96gb", cwd=tmp_path)  # no such board ("h100-sxm" is one: an alias)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "h100-sxm-80gb" in r.stderr  # closest names listed
    r = run("get_gpu_config_by_name", "h100", cwd=tmp_path)  # SXM, PCIe or NVL: ambiguous, refused with them
    assert r.returncode == 2 and "h100-pcie-80gb" in r.stderr and "h100-nvl-94gb" in r.stderr
    r = run("get_dtype_config_by_name", "w5a16", cwd=tmp_path)
    assert r.returncode == 2 and "Unknown dtype name 'w5a16'" in r.stderr
