"""benchmarks/measure_kernels.py (issue 27 item 6) runs end to end on the CPU with --dry-run
and writes the JSON the fit script reads: environment first, then one list per section, each
row with its shape, time and work."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "measure_kernels.py"

SECTION_KEYS = {
    "gemm": {"dtype", "m", "n", "k", "time_s", "flops", "bytes", "tflops_per_s"},
    "attention_prefill": {"causal", "batch", "heads", "kv_heads", "head_dim", "seq_len", "time_s", "flops", "bytes",
                          "tflops_per_s"},
    "attention_decode": {"batch", "heads", "kv_heads", "head_dim", "kv_len", "time_s", "flops", "kv_bytes",
                         "gb_per_s"},
    "decode_step": {"model", "layers", "hidden", "batch", "context_len", "framework", "time_s"},
}
ENVIRONMENT_KEYS = {"device", "dry_run", "torch", "transformers", "gpu_name", "driver", "cuda", "created_utc",
                    "wall_s"}


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("kernels") / "tiny.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(out.read_text())


def test_dry_run_writes_the_schema(dry_run):
    assert dry_run["schema"] == "llm_analysis.measure_kernels/1"
    assert ENVIRONMENT_KEYS <= set(dry_run["environment"])
    assert dry_run["environment"]["device"] == "cpu" and dry_run["environment"]["dry_run"] is True
    for section, keys in SECTION_KEYS.items():
        rows = dry_run[section]
        assert rows, section
        for row in rows:
            assert set(row) == keys, (section, set(row) ^ keys)
            assert math.isfinite(row["time_s"]) and row["time_s"] > 0


def test_dry_run_covers_both_causal_modes_and_says_why_fp8_is_left_out(dry_run):
    assert {r["causal"] for r in dry_run["attention_prefill"]} == {False, True}
    assert any("fp8" in s["what"] and s["why"] for s in dry_run["skipped"])
    assert {r["dtype"] for r in dry_run["gemm"]} == {"bf16"}


def test_gemm_rows_count_their_work_by_hand(dry_run):
    """2 M N K FLOPs; bf16 operands (2 bytes) in, a bf16 output out."""
    for r in dry_run["gemm"]:
        assert r["flops"] == 2 * r["m"] * r["n"] * r["k"]
        assert r["bytes"] == 2 * (r["m"] * r["k"] + r["n"] * r["k"]) + 2 * r["m"] * r["n"]


def test_causal_prefill_counts_the_unmasked_half(dry_run):
    """A causal s x s score matrix keeps s (s + 1) / 2 entries: the flash kernel's work."""
    rows = {(r["seq_len"], r["causal"]): r for r in dry_run["attention_prefill"]}
    for (s, causal), r in rows.items():
        full = 4 * r["batch"] * r["heads"] * s * s * r["head_dim"]
        assert r["flops"] == pytest.approx(full * (s + 1) / (2 * s) if causal else full)


def test_without_a_gpu_and_without_dry_run_it_says_so(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "x.json"), "--sections", "gemm"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--dry-run" in proc.stderr and "Traceback" not in proc.stderr
