"""The data-type word "checkpoint": a model's weights as its release stores them, run as the engines run that
format on the GPU (catalogue/lookup.py dtype_for_setup), the default of `plan infer`.

Independent facts, written out here rather than taken from the package:
- the releases' config.json: DeepSeek-R1 states `quantization_config.quant_method = "fp8"` (block FP8 weights),
  gpt-oss-120b `"mxfp4"`, nvidia/DeepSeek-V3.1-NVFP4 is a ModelOpt NVFP4 export; Llama-3.1-8B states no
  quantisation (bf16 weights);
- the GPUs' datasheets: A100 has no FP8 or FP4 tensor cores (its narrowest float format is bf16/fp16), H100
  has FP8 but no FP4, B200 has both;
- how the engines load such a release where the GPU lacks the tensor cores: vLLM's FP8 and NVFP4 Marlin
  kernels keep the weights in their format in memory and widen them inside the GEMM (16-bit activations:
  weight-only), gpt-oss's MXFP4 experts run weight-only on Hopper and as W4A8 (MXFP8 activations) on
  Blackwell.
So the expected data type is the catalogue entry with the release's weight format and bits and the
activation width the GPU runs, checked here on the entry's own fields.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.catalogue.lookup import dtype_for_setup
from llm_analysis.config import get_gpu_config_by_name, get_model_config_by_name

A100, H100, B200 = "a100-sxm-80gb", "h100-sxm-80gb", "b200-180gb"

# (model, GPU): (weight format, weight bits, activation bits) of the release as that GPU runs it
EXPECTED = {
    ("deepseek-ai/DeepSeek-R1", A100): ("float", 8, 16),  # FP8 Marlin: weight-only
    ("deepseek-ai/DeepSeek-R1", H100): ("float", 8, 8),
    ("deepseek-ai/DeepSeek-R1", B200): ("float", 8, 8),
    ("nvidia/DeepSeek-V3.1-NVFP4", H100): ("nvfp4", 4, 16),  # NVFP4 Marlin: weight-only
    ("nvidia/DeepSeek-V3.1-NVFP4", B200): ("nvfp4", 4, 4),
    ("openai/gpt-oss-120b", H100): ("mxfp4", 4, 16),
    ("openai/gpt-oss-120b", B200): ("mxfp4", 4, 8),
    ("meta-llama/Llama-3.1-8B", A100): ("float", 16, 16),
    ("meta-llama/Llama-3.1-8B", B200): ("float", 16, 16),
}


@pytest.mark.parametrize("model,gpu", sorted(EXPECTED))
def test_the_release_as_the_gpu_runs_it(model, gpu):
    d = dtype_for_setup(" Checkpoint", get_model_config_by_name(model), get_gpu_config_by_name(gpu))
    assert (d.weight_format, d.weight_bits, d.activation_bits) == EXPECTED[(model, gpu)]


def test_the_constructor_takes_the_word_and_holds_the_release():
    """DeepSeek-R1's 671e9 parameters stored in FP8 are ~671 GB over 8 GPUs: ~84 GB per GPU, half of bf16's."""
    a = LLMAnalysis("deepseek-ai/DeepSeek-R1", A100, "checkpoint")
    assert a.dtype_config.weight_bits == 8 and a.dtype_config.activation_bits == 16
    from llm_analysis.config import ParallelismConfig
    widened = LLMAnalysis("deepseek-ai/DeepSeek-R1", H100, "w16a16e16", ParallelismConfig(tp_size=8))
    stored = LLMAnalysis("deepseek-ai/DeepSeek-R1", H100, "checkpoint", ParallelismConfig(tp_size=8))
    ratio = stored.get_weight_memory_per_gpu() / widened.get_weight_memory_per_gpu()
    assert 0.5 <= ratio < 0.56  # (the fp8 release keeps its norms, router and embeddings at 16 bits)


def test_infer_takes_the_word_on_the_command_line():
    r = subprocess.run([sys.executable, "-m", "llm_analysis", "infer", "--model_name", "openai/gpt-oss-20b",
                        "--gpu_name", H100, "--dtype_name", "checkpoint", "--output_format", "json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert '"w4a16e16-mxfp4"' in r.stdout


def test_serve_serves_the_release_unless_told_otherwise():
    """An engine loads DeepSeek-R1's FP8 weights as stored; `serve` without --dtype_name does too (H200 has
    FP8 tensor cores), and the header names the data type it timed."""
    r = subprocess.run([sys.executable, "-m", "llm_analysis", "serve", "--model_name", "deepseek-ai/DeepSeek-R1",
                        "--gpu_name", "h200-sxm-141gb", "--tp_size", "8", "--concurrency", "4", "--input_len", "512",
                        "--output_len", "64"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].split(", ")[1] == "fp8"


def test_a_widened_release_is_said_by_infer_and_serve():
    """Qwen3-30B-A3B-FP8's config.json states FP8 weights: held as w16a16e16 (the mirrored default of infer),
    the answer says what an engine loads instead; held as released it says nothing, nor for a 16-bit model."""
    from llm_analysis.config import ParallelismConfig
    said = "checkpoint stores its weights as fp8; this run holds them as w16a16e16"
    widened = LLMAnalysis("Qwen/Qwen3-30B-A3B-FP8", H100, "w16a16e16")
    assert any(said in n and "'checkpoint' (fp8 on h100-sxm-80gb)" in n
               for n in widened.inference(batch_size_per_gpu=1, seq_len=256, num_tokens_to_generate=8)["notes"])
    served = widened.serve(concurrency=2, input_len=256, output_len=8)
    assert any(said in n for n in served["notes"])
    pools = {"prefill": {"workers": 1, "parallelism": ParallelismConfig()},
             "decode": {"workers": 1, "parallelism": ParallelismConfig()}}
    disaggregated = widened.serve(concurrency=2, input_len=256, output_len=8, disaggregated=pools)
    assert any(said in n for n in disaggregated["notes"])
    released = LLMAnalysis("Qwen/Qwen3-30B-A3B-FP8", H100, "checkpoint")
    assert not any("checkpoint stores" in n for n in
                   released.inference(batch_size_per_gpu=1, seq_len=256, num_tokens_to_generate=8)["notes"])
    plain = LLMAnalysis("meta-llama/Llama-3.1-8B", H100, "w16a16e16")
    assert not any("checkpoint stores" in n for n in plain.serve(concurrency=2, input_len=256, output_len=8)["notes"])
