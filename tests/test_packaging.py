"""The installed package (not the source tree) works and ships its catalogues, and
importing it stays light (no transformers / torch / huggingface_hub)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC_PKG = REPO / "llm_analysis"

PROBE = """
import json, sys
import llm_analysis, llm_analysis.config as c, llm_analysis.analysis
print(json.dumps({
    "file": llm_analysis.__file__,
    "models": c.list_model_configs(), "gpus": c.list_gpu_configs(), "dtypes": c.list_dtype_configs(),
    "heavy": sorted(m for m in ("transformers", "torch", "huggingface_hub", "matplotlib") if m in sys.modules),
}))
"""


def _probe(tmp_path):
    # run from an empty directory so that `import llm_analysis` finds the installed copy
    r = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    if r.returncode != 0 and "No module named 'llm_analysis'" in r.stderr:
        pytest.skip("llm_analysis is not installed (pip install .)")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_installed_package_ships_every_catalogue_file(tmp_path):
    info = _probe(tmp_path)
    for folder, key in (("model_configs", "models"), ("gpu_configs", "gpus"), ("dtype_configs", "dtypes")):
        expected = sorted(p.stem for p in (SRC_PKG / folder).glob("*.json"))
        assert info[key] == expected, folder
    installed = Path(info["file"]).parent
    if installed.resolve() != SRC_PKG.resolve():  # a real (non-editable) install: check its files
        for folder in ("model_configs", "gpu_configs", "dtype_configs"):
            assert len(list((installed / folder).glob("*.json"))) == len(list((SRC_PKG / folder).glob("*.json")))


def test_import_does_not_pull_heavy_libraries(tmp_path):
    assert _probe(tmp_path)["heavy"] == []


def test_every_installed_catalogue_file_loads(tmp_path):
    code = ("import llm_analysis.config as c\n"
            "for n in c.list_model_configs(): c.get_model_config_by_name(n)\n"
            "for n in c.list_gpu_configs(): c.get_gpu_config_by_name(n)\n"
            "for n in c.list_dtype_configs(): c.get_dtype_config_by_name(n)\n"
            "c.get_model_config_by_name('meta-llama/Llama-3.1-8B-Instruct')  # catalogue/checkpoint_variants.json\n"
            "print('ok', len(c.list_model_configs()))")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    if "No module named 'llm_analysis'" in r.stderr:
        pytest.skip("llm_analysis is not installed")
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stderr
