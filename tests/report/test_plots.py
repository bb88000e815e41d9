"""Charts: produced, non-trivial PNGs of sensible size; the batch sweep's
markers; a clear error without matplotlib."""

import struct
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

import llm_analysis.report.charts as plots  # noqa: E402
from llm_analysis.analysis import LLMAnalysis  # noqa: E402
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name  # noqa: E402
from llm_analysis.errors import ConfigError  # noqa: E402


def png_size(path: Path):
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    return struct.unpack(">II", head[16:24])


def check_png(path: str, min_bytes: int = 25_000):
    p = Path(path)
    assert p.is_file() and p.stat().st_size >= min_bytes, (p.name, p.stat().st_size)
    w, h = png_size(p)
    assert 1200 <= w <= 2400 and 450 <= h <= 1800, (p.name, w, h)


def analysis(model, gpu, dtype="w16a16e16", **par):
    return LLMAnalysis(get_model_config_by_name(model), get_gpu_config_by_name(gpu), get_dtype_config_by_name(dtype),
                       ParallelismConfig(**par))


@pytest.fixture(scope="module")
def llama70b():
    a = analysis("upstage_Llama-2-70b-instruct-v2", "a100-sxm-40gb", tp_size=8)
    return a, a.inference(batch_size_per_gpu=20, seq_len=1024, num_tokens_to_generate=1024)


def test_inference_charts(llama70b, tmp_path):
    a, s = llama70b
    paths = plots.write_charts(a, s, str(tmp_path), kind="inference", suffix="t")
    names = sorted(Path(p).name.rsplit("-", 1)[1] for p in paths)
    assert names == ["batch_sweep.png", "latency.png", "memory.png", "roofline.png"]
    for p in paths:
        check_png(p)
        assert Path(p).name.startswith("upstage_Llama-2-70b-instruct-v2-a100-sxm-40gb-w16a16e16-tp8")
    assert not [x for x in tmp_path.iterdir() if x.name.endswith(".tmp")]


def test_moe_pipeline_and_single_token_charts(tmp_path):
    a = analysis("mistralai_Mixtral-8x7B-v0.1", "h200-sxm-141gb", "w8a16e16", tp_size=2, pp_size=2)
    s = a.inference(batch_size_per_gpu=16, seq_len=2048, num_tokens_to_generate=256)
    for p in plots.write_charts(a, s, str(tmp_path / "moe"), kind="inference"):
        check_png(p)
    b = analysis("gpt2", "a10g-pcie-24gb")
    s1 = b.inference(batch_size_per_gpu=1, seq_len=128, num_tokens_to_generate=1)  # no decode step at all
    for p in plots.write_charts(b, s1, str(tmp_path / "one"), kind="inference"):
        check_png(p, min_bytes=15_000)


def test_batch_sweep_marks_compute_bound_and_memory_limit(llama70b):
    a, s = llama70b
    sw = plots.batch_sweep(a, s)
    max_b = min(s["decode_max_batch_size_per_gpu"], s["prefill_max_batch_size_per_gpu"])
    assert sw["batch"][0] == 1 and sw["batch"][-1] == max_b == sw["max_batch"]
    assert all(x < y for x, y in zip(sw["batch"], sw["batch"][1:]))
    assert all(x <= y * (1 + 1e-9) for x, y in zip(sw["tpot_s"], sw["tpot_s"][1:]))  # more batch, never faster
    assert all(x < y for x, y in zip(sw["decode_tokens_per_sec"], sw["decode_tokens_per_sec"][1:]))
    cb = sw["compute_bound_batch"]
    ridge = a.get_ridge_point()

    def mlp_intensity(b):
        rows = [r for r in a.operators("decode", b, 1024, 1024 + 512, per_layer=False)
                if r["group"] == "mlp" and r["kind"] == "matmul"]
        return sum(r["flops_per_gpu"] for r in rows) / sum(r["bytes_per_gpu"] for r in rows)

    assert mlp_intensity(cb) >= ridge > mlp_intensity(cb - 1)


def test_training_charts(tmp_path):
    from llm_analysis.analysis import train
    s = train(model_name="megatron-lm-175b", gpu_name="a100-sxm-80gb", tp_size=8, pp_size=16, total_num_gpus=1024,
              global_batch_size=1536, batch_size_per_gpu=1, seq_len=2048, total_num_tokens=300e9,
              activation_recomputation=4, achieved_tflops=140, quiet=True)
    a = LLMAnalysis(get_model_config_by_name("megatron-lm-175b"), get_gpu_config_by_name("a100-sxm-80gb"),
                    parallelism_config=ParallelismConfig(tp_size=8, pp_size=16, dp_size=8), achieved_tflops=140)
    paths = plots.write_charts(a, s, str(tmp_path), kind="training")
    assert sorted(Path(p).name.rsplit("-", 1)[1] for p in paths) == ["memory.png", "roofline.png", "time.png"]
    for p in paths:
        check_png(p)


def test_cli_plot_writes_the_charts_next_to_the_summary(tmp_path):
    import subprocess
    import os
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-m", "llm_analysis.analysis", "infer", "--model_name", "gpt2",
                        "--output_dir", str(tmp_path), "--plot", "--output_format", "none"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    suffixes = sorted(x.name.rsplit("-", 1)[1] if x.suffix == ".png" else x.suffix for x in tmp_path.iterdir())
    assert suffixes == [".json", ".txt", "batch_sweep.png", "latency.png", "memory.png", "roofline.png"]


def test_missing_matplotlib_is_a_clear_config_error(monkeypatch, llama70b, tmp_path):
    a, s = llama70b
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'llm-analysis\[plot\]'"):
        plots.write_charts(a, s, str(tmp_path), kind="inference")
    assert not list(tmp_path.iterdir())
