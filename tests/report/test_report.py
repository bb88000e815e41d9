"""The readable report and the output files (in-process; the CLI itself is in test_cli.py)."""

import json
import math
import re
from pathlib import Path

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
import llm_analysis.report.render as report
from llm_analysis.report.render import fmt, output_file_stem, readable_summary, unit_of

ANSI = re.compile(r"\x1b\[")


@pytest.fixture(scope="module")
def llama70b():
    a = LLMAnalysis(get_model_config_by_name("upstage_Llama-2-70b-instruct-v2"),
                    get_gpu_config_by_name("a100-sxm-40gb"), get_dtype_config_by_name("w16a16e16"),
                    ParallelismConfig(tp_size=8))
    return a, a.inference(batch_size_per_gpu=20, seq_len=1024, num_tokens_to_generate=1024)


@pytest.mark.parametrize("key,value,expected", [
    ("hbm_memory_efficiency", 1.0, "100%"),
    ("flops_efficiency", 0.55, "55%"),
    ("achieved_memory_bandwidth_GBs", 3350.0, "3350 GB/s"),
    ("achieved_tflops", 989.0, "989 TFLOP/s"),
    ("weight_memory_per_gpu", 17.25e9, "17.25 GB"),
    ("decode_activation_memory_per_gpu", 983040.0, "983.04 KB"),
    ("kv_cache_memory_per_gpu", 1.68e9, "1.68 GB"),
    ("prefill_latency", 1.5712, "1.57 s"),
    ("time_per_output_token", 0.014674, "14.67 ms"),
    ("ridge_point_flops_per_byte", 200.64, "201 FLOPs/byte"),
    ("prefill_num_flops_fwd_total", 2.87e15, "2.87 PFLOPs"),
    ("decode_tokens_per_sec", 1363.2, "1.4 K tok/s"),
    ("num_params_total", 68_976_648_192, "68.98 G"),
    ("decode_max_batch_size_per_gpu", 271, "271"),
    ("total_cost_per_1k_tokens", 0.004081, "$0.00408"),
    ("total_training_cost", 2083437.73, "$2,083,437.73"),
    ("gpu_hours", 1041719.2, "1,041,719 GPU-hours"),
    ("mfu", 0.276, "27.6%"),
    ("achieved_flops_per_s", 114.7e12, "114.7 TFLOP/s"),
    ("achieved_flops", 312.0, "312 TFLOP/s"),  # llm-analysis 0.2.2's key: TFLOP/s
    ("peak_memory_pipeline_stage", 3, "3"),
    ("total_training_latency", 42.4 * 86400, "42.4 days"),
])
def test_values_carry_their_units(key, value, expected):
    assert fmt(key, value) == expected


def test_nested_breakdown_values_take_the_unit_of_their_dict():
    text = readable_summary({"memory_breakdown_per_gpu": {"weights": 17.25e9, "free": 20.07e9}})
    assert "weights: 17.25 GB" in text and "free: 20.07 GB" in text
    assert unit_of("weights") is None and unit_of("memory_breakdown_per_gpu") == "bytes"


def test_report_has_every_section_and_the_seed_figures(llama70b):
    a, s = llama70b
    text = report.render(a, s, "inference", color=False)
    for section in ("llm-analysis · inference", "Summary", "Per layer part", "Parameters and weights by layer part",
                    "Prefill (time to first token", "Decode, one step", "Memory per GPU", "Notes"):
        assert section in text, section
    # seeds/000: KV cache 1.68 GB (weights 17.25 GB: our untied LM head counts too); its decode max
    # batch 271 divides 40e9 bytes, the report shows the summary's figure (40 GiB: tests/test_inference.py)
    assert re.search(r"KV cache\s+1\.68 GB", text)
    assert f"decode {s['decode_max_batch_size_per_gpu']}" in text
    assert re.search(r"weights\s+17\.25 GB", text)
    # the bound of each part and its arithmetic intensity
    assert re.search(r"MLP\s+.*compute", text) and re.search(r"MLP\s+.*memory", text)
    assert "ridge point 201" in text
    assert not ANSI.search(text)
    assert max(len(line) for line in text.splitlines()) <= 110
    assert all(line == line.rstrip() for line in text.splitlines())


def test_color_only_when_asked(llama70b):
    a, s = llama70b
    assert ANSI.search(report.render(a, s, "inference", color=True))


def test_notes_are_printed_as_notes(llama70b):
    a, s = llama70b
    s = dict(s, notes=["a note that matters"], warnings=[])
    text = report.render(a, s, "inference", color=False)
    assert re.search(r"Notes.*\n(.*\n)*.*-\s+a note that matters", text) and "Warnings" not in text


def test_unknown_keys_are_still_shown(llama70b):
    a, s = llama70b
    text = report.render(a, dict(s, my_extra_memory_per_gpu=3e9, my_breakdown={"x_latency": 0.5}), "inference",
                         color=False)
    assert re.search(r"my_extra_memory_per_gpu\s+3\.00 GB", text)
    assert "my breakdown" in text and "500.0 ms" in text


def test_training_report_shows_time_memory_days_and_cost():
    from llm_analysis.analysis import train
    s = train(model_name="megatron-lm-175b", gpu_name="a100-sxm-80gb", tp_size=8, pp_size=16, total_num_gpus=1024,
              global_batch_size=1536, batch_size_per_gpu=1, seq_len=2048, total_num_tokens=300e9,
              activation_recomputation=4, achieved_tflops=140, cost_per_gpu_hour=2.0, quiet=True)
    a = LLMAnalysis(get_model_config_by_name("megatron-lm-175b"), get_gpu_config_by_name("a100-sxm-80gb"),
                    parallelism_config=ParallelismConfig(tp_size=8, pp_size=16, dp_size=8), achieved_tflops=140)
    text = report.render(a, s, "training", color=False)
    for needle in ("llm-analysis · training", "Time per iteration", "Memory per GPU", "optimizer states",
                   "pipeline bubble", "training time", "days", "GPU-hours", "cost", "MFU", "FLOPs"):
        assert needle in text, needle
    assert "Other values" not in text or "latency_per_iter_fwd_compute" not in text


def test_file_stem_names_the_setup_and_is_safe(llama70b):
    a, s = llama70b
    stem = output_file_stem(a, "inference", "my run/2 ü", s)
    assert stem.startswith("upstage_Llama-2-70b-instruct-v2-a100-sxm-40gb-w16a16e16-tp8-pp1-dp1-ep1-sp8-fe1-hbme1")
    assert "inference" in stem and "bs20-seq1024-gen1024" in stem and stem.endswith("my_run_2")
    assert re.fullmatch(r"[A-Za-z0-9._+=-]+", stem)
    b = LLMAnalysis(a.model_config, a.gpu_config, a.dtype_config, a.parallelism_config, flops_efficiency=0.5,
                    hbm_memory_efficiency=0.85, achieved_tflops=150)
    # the achieved rate overrides the efficiency beside it, which then reads as 150 / 312 (A100's 16-bit peak) = 0.481
    assert "fe0.481-hbme0.85-tflops150" in output_file_stem(b, "inference")
    long = output_file_stem(a, "inference", "x" * 300, s)
    assert len(long) <= 200


def test_summary_files_are_complete_and_atomic(llama70b, tmp_path):
    a, s = llama70b
    path = Path(report.write_summary_files(a, s, str(tmp_path / "out"), False, "t", kind="inference"))
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == sorted([path.name, path.with_suffix(".txt").name])  # no temporary files left
    data = json.loads(path.read_text())
    assert data["setup"]["tp_size"] == 8 and data["setup"]["gpu_name"] == "a100-sxm-40gb"
    for k, v in s.items():
        assert k in data
        if isinstance(v, float):
            assert math.isclose(data[k], v, rel_tol=1e-12)
    text = path.with_suffix(".txt").read_text()
    assert "Summary" in text and "All values" in text
    for k in s:
        assert k in text


def test_json_is_strict_even_with_infinities(llama70b):
    doc = report.to_json({"x": float("inf"), "y": float("nan"), "z": 1.0})
    assert json.loads(doc) == {"x": "inf", "y": "nan", "z": 1.0}


def _package_imports(path: Path):
    """Modules of llm_analysis a file imports (absolute, at any depth; the package has no relative imports)."""
    import ast
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert not node.level, (path.name, "relative import")
            if node.module and node.module.startswith("llm_analysis."):
                yield node.module[len("llm_analysis."):]
        elif isinstance(node, ast.Import):
            yield from (a.name[len("llm_analysis."):] for a in node.names if a.name.startswith("llm_analysis."))


def test_presentation_imports_only_downward():
    """Presentation (llm_analysis/report/) draws what the orchestrators return: no module of it imports
    the facade, the orchestrators, the planner, the commands or the public namespace; the tables and
    chart parts never import the entry points (report/render.py, report/charts.py), so no cycle can
    run through them."""
    root = Path(report.__file__).parent
    upward = ("analysis", "facade", "inference", "training", "planner", "serving", "cli")
    entry_points = {"report.render", "report.charts"}
    files = sorted(root.glob("*.py"))
    assert len(files) >= 10, files
    for f in files:
        imported = set(_package_imports(f))
        if f.stem == "charts":  # the charts' entry point runs the batch sweep it draws (as plots.py did)
            imported.discard("inference.batch_sweep")
        assert not {m for m in imported if m.split(".")[0] in upward}, (f.name, imported)
        if f.stem not in ("render", "charts", "__init__"):
            assert not imported & entry_points, (f.name, imported)


def test_runs_that_differ_in_context_parallelism_zero_or_recomputation_write_files_of_their_own(tmp_path, caplog):
    """Four training runs of one layout differing in cp, ZeRO stage and recomputation wrote one file name, the
    last run kept: each now adds what sets it apart from the defaults (cp2, zero1, rc2), the default run keeps
    the mirrored name."""
    import os
    from llm_analysis.config import get_model_config_by_name
    runs = [(1, 0, 0), (2, 0, 0), (1, 1, 0), (1, 0, 2), (2, 1, 2)]
    for cp, zero, rc in runs:
        a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
                        get_dtype_config_by_name("bf16"), ParallelismConfig(tp_size=8, cp_size=cp, dp_size=2))
        a.training(batch_size_per_gpu=1, seq_len=8192, gradient_accumulation_steps=1, ds_zero=zero,
                   activation_recomputation=rc, output_dir=str(tmp_path))
    names = sorted(n for n in os.listdir(tmp_path) if n.endswith(".json"))
    assert len(names) == len(runs), names
    assert any(n.endswith("-tp8-pp1-dp2-ep1-sp8-fe1-hbme1-training-bs1-seq8192-gbs2.json") for n in names)
    assert any("-sp8-cp2-" in n and n.endswith("-gbs2-zero1-rc2.json") for n in names)


def test_a_calibrated_run_and_a_roofline_one_write_different_files(tmp_path):
    """The same inference under both perf models: each writes its own .json and .txt (the calibrated one named so);
    the second had overwritten the first, and the file names' fe1-hbme1 read as the calibrated run's rates."""
    from llm_analysis.config import get_model_config_by_name
    for perf_model in ("calibrated", "roofline"):
        LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
                    get_dtype_config_by_name("bf16"), perf_model=perf_model).inference(
            batch_size_per_gpu=8, output_dir=str(tmp_path))
    names = sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".json")
    assert len(names) == 2 and sum("-calibrated-" in n for n in names) == 1, names


def test_a_custom_architecture_writes_its_own_files_and_names_its_class(tmp_path):
    # A subclass' describer counts another model than the stock one (examples/custom_architecture.py: an adapter
    # after each MLP): in a base-vs-custom loop the second run must not overwrite the first's files, and the
    # written setup must name the class a script needs to reproduce it.
    from builders import custom_architecture_example  # tests/support/builders.py
    example = custom_architecture_example()
    kw = dict(batch_size_per_gpu=1, seq_len=100, num_tokens_to_generate=4, output_dir=str(tmp_path))
    example.AdapterLLMAnalysis("meta-llama/Llama-3.1-8B", "h100-sxm-80gb").inference(**kw)
    LLMAnalysis("meta-llama/Llama-3.1-8B", "h100-sxm-80gb").inference(**kw)
    written = sorted(tmp_path.glob("*.json"))
    assert len(written) == 2
    setups = {p.name: json.loads(p.read_text())["setup"] for p in written}
    custom = [n for n, s in setups.items() if s.get("analysis_class") == "AdapterLLMAnalysis"]
    assert len(custom) == 1 and "AdapterLLMAnalysis" in custom[0]
    stock = [n for n, s in setups.items() if "analysis_class" not in s]  # the mirrored names, unchanged
    assert stock == ["meta-llama_Llama-3.1-8B-h100-sxm-80gb-w16a16e16-tp1-pp1-dp1-ep1-sp1-fe1-hbme1-inference-bs1-"
                     "seq100-gen4.json"]
