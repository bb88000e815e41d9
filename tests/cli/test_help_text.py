"""`--help` shows every flag of every command whole, with plain types (cli/help_text.py), and time
flags take units (units.seconds). Run as a user runs the command line (subprocess).

The expected text is each command's own hand-written `Args:` entry (its docstring), so a flag whose
description fire cuts at a continuation line (`default: from --conventions.` read as a new entry)
or drops fails here."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from llm_analysis.cli.commands import infer, train
from llm_analysis.cli.help_text import args_section
from llm_analysis.cli.plan import plan_infer_command, plan_train_command
from llm_analysis.cli.serve import serve
from llm_analysis.errors import ConfigError
from llm_analysis.units import seconds

REPO = Path(__file__).resolve().parents[2]
COMMANDS = {("infer",): infer, ("train",): train, ("serve",): serve, ("plan", "infer"): plan_infer_command,
            ("plan", "train"): plan_train_command}


def _help(argv) -> str:
    out = subprocess.run([sys.executable, "-m", "llm_analysis", *argv, "--help"], capture_output=True, text=True,
                         cwd=REPO, env={"PAGER": "cat", "PATH": "/usr/bin:/bin", "COLUMNS": "10000"}, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("argv", list(COMMANDS), ids=[" ".join(a) for a in COMMANDS])
def test_every_flag_is_documented_whole(argv):
    fn = COMMANDS[argv]
    doc = args_section(fn.__doc__)
    flags = list(inspect.signature(fn).parameters)
    assert set(flags) <= set(doc), f"flags without a description: {sorted(set(flags) - set(doc))}"
    text = " ".join(_help(argv).split())
    for flag in flags:
        assert f"--{flag}" in text or flag.upper() in text, flag
        assert " ".join(doc[flag].split()) in text, f"--{flag}: help does not show {doc[flag]!r}"
    assert "Optional['" not in text and "'str'" not in text  # types print plainly
    assert "Optional[Union]" not in text  # a flag taking JSON or a dict prints as the string it is given
    assert "-h, --" not in text  # -h is help: no flag may be offered as its short form


def test_args_section_joins_continuation_lines_even_when_they_look_like_entries():
    doc = """Summary.

    Args:
        a: first line
            default: from --conventions.
        b: one line.
    Returns:
        x: not a flag.
    """
    assert args_section(doc) == {"a": "first line default: from --conventions.", "b": "one line."}


@pytest.mark.parametrize("given,expected_s", [(0.5, 0.5), (2, 2), ("0.5", 0.5), ("500ms", 0.5), ("0.5s", 0.5),
                                              ("250 us", 250e-6), ("2min", 120.0), ("1e-3s", 1e-3), (None, None)])
def test_times_take_units_and_bare_numbers_are_seconds(given, expected_s):
    got = seconds(given, "--max_ttft")
    assert got == pytest.approx(expected_s) if expected_s is not None else got is None


@pytest.mark.parametrize("bad", ["500 fortnights", "fast", "5h", "ms"])
def test_a_time_with_an_unknown_unit_names_the_flag_and_the_valid_units(bad):
    with pytest.raises(ConfigError, match=r"--max_ttft = .* is not a time: .*ms, s, min"):
        seconds(bad, "--max_ttft")


def test_plan_reads_a_ttft_with_a_unit_as_the_same_target():
    base = ["plan", "infer", "facebook_opt-1.3b", "a100-sxm-40gb", "--output_format", "json", "--max_tpot", "1",
            "--seq_len", "512", "--num_tokens_to_generate", "64"]
    runs = [subprocess.run([sys.executable, "-m", "llm_analysis", *base, "--max_ttft", v], capture_output=True,
                           text=True, cwd=REPO, timeout=300) for v in ("500ms", "0.5")]
    docs = [json.loads(r.stdout) for r in runs]
    assert docs[0]["assumptions"]["targets"]["max_ttft_s"] == 0.5 == docs[1]["assumptions"]["targets"]["max_ttft_s"]
    bad = subprocess.run([sys.executable, "-m", "llm_analysis", *base, "--max_ttft", "500 fortnights"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert re.search(r"--max_ttft = '500 fortnights' is not a time", bad.stderr)


def test_serve_engine_limits_are_stated_per_attention_replica():
    """The engine's limits apply to each attention replica, as the engines apply them (docs/serving.md: "the
    engine's settings (max_num_seqs, the token budget) are per rank"): Qwen3-30B-A3B on four H200 as 4 attention
    replicas with max_num_seqs = 8 runs 4 x 8 = 32 requests at once per worker, not 8. The help said "requests
    running at once per replica", and serve's replicas are its workers (--dp_size)."""
    from builders import build_analysis
    from llm_analysis.config import ParallelismConfig
    a = build_analysis("Qwen/Qwen3-30B-A3B", gpu="h200-sxm-141gb", perf_model="calibrated",
                       parallelism=ParallelismConfig(tp_size=1, attention_dp_size=4, moe_ep_size=4))
    s = a.serve(concurrency=64, max_num_seqs=8, framework="sglang", num_requests=0)
    assert s["max_running_requests_per_rank"] == 8 and s["max_running_requests_per_replica"] == 4 * 8
    doc = args_section(serve.__doc__)
    assert "per attention replica" in doc["max_num_seqs"] and "per replica" not in doc["max_num_seqs"]
    assert "of an attention replica" in doc["max_num_batched_tokens"]
