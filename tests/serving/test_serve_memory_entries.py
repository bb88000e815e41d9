"""serve() states each GPU's memory as the engine sizes it: weights, the KV pool, the engine's workspace and
the GPU's memory (serving/kv_pool.py). Expected values are derived by hand from the model's shapes and each
engine's rule for its memory share."""

from __future__ import annotations

import subprocess
import sys

import pytest

LLAMA = "meta-llama/Llama-3.1-8B"  # 32 layers, hidden 4096, 8 KV heads of 128, MLP 14336, vocab 128256, untied
H100_BYTES = 80 * 1024**3  # the catalogue's 80 GB, read in GiB as the mirrored system reads it
LOAD = dict(concurrency=16, input_len=512, output_len=64, num_requests=0)


def _llama_weights_per_gpu_tp2() -> float:
    """bf16 on 2 GPUs: attention (q, o 4096 x 4096; k, v 4096 x 1024), the gated MLP (3 x 4096 x 14336), the
    embedding and the head (128256 x 4096 each, split by vocabulary) halved; the norms (2 a layer and the
    final one, 4096 each) whole on each GPU."""
    h, layers, ffn, vocab, kv = 4096, 32, 14336, 128256, 1024
    split = (layers * (2 * h * h + 2 * h * kv + 3 * h * ffn) + 2 * vocab * h) / 2
    return (split + layers * 2 * h + h) * 2


@pytest.mark.parametrize("framework", ["vllm", "sglang", "trtllm"])
def test_memory_per_gpu_by_hand(analysis_builder, framework):
    s = analysis_builder(LLAMA, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2).serve(
        framework=framework, **LOAD)
    weights, workspace, pool = s["weight_memory_per_gpu"], s["workspace_memory_per_gpu"], s["kv_pool_bytes_per_gpu"]
    share = s["gpu_memory_utilization"]
    assert s["gpu_memory_per_gpu"] == H100_BYTES
    assert weights == pytest.approx(_llama_weights_per_gpu_tp2(), rel=1e-12)
    if framework == "vllm":  # gpu_memory_utilization of the whole GPU holds weights, workspace and the pool
        assert weights + workspace + pool == pytest.approx(share * H100_BYTES, rel=1e-12)
    elif framework == "sglang":  # mem_fraction_static holds weights and the pool; the workspace is the rest
        assert weights + pool == pytest.approx(share * H100_BYTES, rel=1e-12)
        assert workspace == pytest.approx((1 - share) * H100_BYTES, rel=1e-12)
    else:  # free_gpu_memory_fraction of what weights and workspace leave
        assert pool == pytest.approx(share * (H100_BYTES - weights - workspace), rel=1e-12)


def test_disaggregated_answer_states_the_decode_pool_s_memory_and_the_prefill_weights(analysis_builder):
    from llm_analysis.config import ParallelismConfig
    a = analysis_builder(LLAMA, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2)
    s = a.serve(concurrency=16, input_len=512, output_len=64, disaggregated={
        "prefill": {"workers": 1, "parallelism": ParallelismConfig(tp_size=1)},
        "decode": {"workers": 1, "parallelism": ParallelismConfig(tp_size=2)}})
    assert s["weight_memory_per_gpu"] == pytest.approx(_llama_weights_per_gpu_tp2(), rel=1e-12)
    # one GPU holds everything: the tp-2 figure with the split half counted twice
    assert s["prefill_weight_memory_per_gpu"] == pytest.approx(
        2 * _llama_weights_per_gpu_tp2() - (32 * 2 * 4096 + 4096) * 2, rel=1e-12)


def test_the_report_prints_the_memory_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "llm_analysis", "serve", "--model_name", LLAMA, "--gpu_name",
                          "h100-sxm-80gb", "--tp_size", "2", "--concurrency", "16", "--num_requests", "0"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    line = [x for x in out.stdout.splitlines() if x.startswith("memory per GPU")]
    assert line and f"weights {_llama_weights_per_gpu_tp2() / 1e9:.2f} GB" in line[0] and "of 85.90 GB" in line[0]


def test_the_html_page_shows_the_weights_per_gpu_card(tmp_path):
    page = tmp_path / "serve.html"
    out = subprocess.run([sys.executable, "-m", "llm_analysis", "serve", "--model_name", LLAMA, "--gpu_name",
                          "h100-sxm-80gb", "--tp_size", "2", "--concurrency", "16", "--num_requests", "0", "--quiet",
                          "--html", str(page)], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    html = page.read_text()
    assert f'weights per GPU</div><div class="value">{_llama_weights_per_gpu_tp2() / 1e9:.2f} GB</div>' in html
    assert "of 85.90 GB" in html
