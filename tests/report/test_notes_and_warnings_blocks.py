"""The text report's "Notes" block holds the JSON's `notes` and its "Warnings" block the JSON's `warnings`.

The README defines `warnings` as what the call logged and `notes` as the assumptions that matter for the
figures; the report printed both under "Warnings", so a reader saw two warnings where the JSON had none.
Expected values: the internal law "each block of the text report lists exactly the JSON's list of that name",
for infer and train (rendered from one summary) and for the HTML page's blocks. The fp8-on-A100 run must warn
(the A100 datasheet lists no FP8 tensor cores); the Llama-3.1-8B decode at batch 8 is memory-bound (a note)."""

from __future__ import annotations

import re
from typing import Dict, List

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.report.render import render

HEADING = re.compile(r"^(\S.*?) ─{3,}$")


def _blocks(text: str) -> Dict[str, List[str]]:
    """The items of each block marked `-` (notes) or `!` (warnings): heading -> items, without whitespace."""
    out: Dict[str, List[str]] = {}
    current = None
    for line in text.splitlines():
        m = HEADING.match(line)
        if m:
            current = out.setdefault(m.group(1), [])
            continue
        item = re.match(r"^ ([-!]) {2}(.*)$", line)
        if current is not None and item:
            current.append("".join(item.group(2).split()))
        elif current is not None and current and line.startswith("    ") and line.strip():
            current[-1] += "".join(line.split())
    return out


def _folded(items) -> List[str]:
    # without whitespace: the report wraps lines at spaces and after hyphens
    return ["".join(str(i).split()) for i in items]


def _infer(gpu: str, dtype: str):
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name(gpu),
                    get_dtype_config_by_name(dtype))
    return a, a.inference(batch_size_per_gpu=8, seq_len=2048, num_tokens_to_generate=256)


def _train():
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-2-7b-hf"), get_gpu_config_by_name("a100-sxm-80gb"),
                    get_dtype_config_by_name("fp8"), ParallelismConfig(dp_size=8))
    return a, a.training(batch_size_per_gpu=1, global_batch_size=8, seq_len=2048, ds_zero=3)


@pytest.mark.parametrize("case", ["infer-h100-bf16", "infer-a100-fp8", "train-a100-fp8"])
def test_each_block_lists_exactly_the_json_list_of_its_name(case):
    gpu, dtype = case.split("-")[1:]
    a, s = _train() if case.startswith("train") else _infer(f"{gpu}-sxm-80gb", dtype)
    kind = "training" if case.startswith("train") else "inference"
    blocks = _blocks(render(a, s, kind, color=False))
    warnings, notes = _folded(s["warnings"]), _folded(n for n in s["notes"] if n not in s["warnings"])
    assert blocks.get("Warnings", []) == warnings
    assert blocks.get("Notes", []) == notes
    if case == "infer-h100-bf16":  # the reviewer's case: notes, no warnings
        assert notes and not warnings and "Warnings" not in blocks
    if "fp8" in case:  # each kind must warn here: fp8 on an A100 is timed at its 16-bit peak
        assert any("fp8" in w for w in warnings)


def test_the_html_page_keeps_them_apart_too():
    from llm_analysis.report.html_elements import HtmlSections
    from llm_analysis.report.tables import report_sections

    a, s = _infer("a100-sxm-80gb", "fp8")
    rep = HtmlSections()
    report_sections(rep, a, s, "inference")
    page = rep.text()
    lists = dict(re.findall(r'<ul class="(notes|warnings)">(.*?)</ul>', page))
    assert len(re.findall("<li>", lists["warnings"])) == len(s["warnings"]) >= 1
    assert len(re.findall("<li>", lists["notes"])) == len([n for n in s["notes"] if n not in s["warnings"]]) >= 1
