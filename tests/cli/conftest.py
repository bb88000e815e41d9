"""Fixtures of the command-line tests: the installed entry points run in subprocesses from an empty temporary
directory without PYTHONPATH, so the installed package is what runs (CI: `pip install .`); when the package is
not installed, this checkout on PYTHONPATH."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _base_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", NO_COLOR="1", COLUMNS="200")
    return env


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    e = _base_env()
    probe = subprocess.run([sys.executable, "-c", "import llm_analysis"], cwd=tmp_path_factory.mktemp("probe"),
                           env=e, capture_output=True)
    if probe.returncode != 0:  # not installed: run this checkout
        e["PYTHONPATH"] = str(REPO)
    return e


@pytest.fixture()
def run(env, tmp_path):
    def _run(*args, module="llm_analysis.analysis", extra_env=None):
        cmd = [sys.executable, "-m", module, *args] if module else list(args)
        return subprocess.run(cmd, cwd=tmp_path, env={**env, **(extra_env or {})}, capture_output=True, text=True,
                              timeout=300)
    return _run
