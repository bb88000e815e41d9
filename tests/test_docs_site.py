"""The documentation site (mkdocs.yml, docs/) builds without a warning, and the README stays short.

`mkdocs build --strict` fails on a broken link to a page or file and on a page left out of the nav;
links to a heading of another page (`page.md#heading`) are checked here against the built HTML,
since MkDocs before 1.6 cannot check anchors itself."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 250

# the two commands of "Quick start": CI runs the second one
QUICK_START_COMMANDS = (
    "pip install . && python -m llm_analysis.analysis infer --model_name meta-llama/Llama-3.1-8B "
    "--gpu_name h100-sxm-80gb --batch_size_per_gpu 8 --seq_len 2048 --num_tokens_to_generate 256",
    'pip install torch==2.13.0 && pip install ".[test]" && python -m pytest -q',
)

needs_mkdocs = pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed")


def _quick_start(text: str) -> str:
    match = re.search(r"^## Quick start\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, "README.md has no '## Quick start' section followed by another section"
    return match.group(1)


def test_readme_is_short_and_keeps_quick_start():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_README_LINES
    blocks = re.findall(r"```sh\n(.*?)\n```", _quick_start(text), re.S)
    assert tuple(blocks) == QUICK_START_COMMANDS


def test_readme_links_to_docs_exist():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\((docs/[^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets, "README.md links to no docs page"
    missing = sorted({t for t in targets if not (ROOT / t).is_file()})
    assert not missing, f"README.md links to missing files: {missing}"


@needs_mkdocs
def test_mkdocs_build_strict(tmp_path):
    site = tmp_path / "site"
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (site / "index.html").is_file()
    assert (site / "roofline_example.png").is_file()

    # every `page.md#anchor` (or `#anchor`) link of a page names a heading id of its target page
    broken = []
    for page in sorted(DOCS.glob("*.md")):
        for target, anchor in re.findall(r"\]\(([\w./-]*\.md)?#([^)\s]+)\)", page.read_text(encoding="utf-8")):
            target_md = (page.parent / target if target else page).resolve()
            rel = target_md.relative_to(DOCS.resolve())
            html = site / ("index.html" if rel.stem == "index" else f"{rel.stem}/index.html")
            if not html.is_file() or f'id="{anchor}"' not in html.read_text(encoding="utf-8"):
                broken.append(f"{page.name} -> {target or page.name}#{anchor}")
    assert not broken, f"links to missing headings: {broken}"
