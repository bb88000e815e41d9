"""FP4 data types, peak selection per dtype, int8-less GPUs and the KV-cache type
(issue 11, items 3 and 7).

Expected values come from the format specifications and vendor spec sheets
(cited at each figure), never from our own output.
"""

from __future__ import annotations

import pytest

from llm_analysis.config import (DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig, get_dtype_config_by_name,
                                 get_gpu_config_by_name, get_model_config_by_name)
from llm_analysis.errors import ConfigError
from llm_analysis.facade import LLMAnalysis
from llm_analysis.schema.formats import FP4_FORMATS
from llm_analysis.catalogue.lookup import fp4_gpu_names
from llm_analysis.cost.precision import (check_dtype_supported, kv_cache_bytes_per_element,
                                    matmul_peak_tflops)

# The mirrored system's current V100 file, verbatim (github.com/cli99/llm-analysis
# llm_analysis/gpu_configs/v100-sxm-32gb.json): 0 = no integer tensor units.
MIRRORED_V100 = {"name": "v100-sxm-32gb", "mem_per_GPU_in_GB": 32, "hbm_bandwidth_in_GB_per_sec": 900,
                 "intra_node_bandwidth_in_GB_per_sec": 150, "intra_node_min_message_latency": 8e-06,
                 "peak_fp16_TFLOPS": 125, "peak_i8_TFLOPS": 0, "peak_i4_TFLOPS": 0,
                 "inter_node_bandwidth_in_GB_per_sec": 200}

# Catalogue GPUs with FP4 tensor cores: Blackwell (B200, B300, GB200, GB300) and CDNA 4 (MI355X).
FP4_GPUS = {"b200-180gb", "b300-270gb", "gb200-nvl72-186gb", "gb300-nvl72-279gb", "mi355x-288gb"}


def _gpu(name):
    return get_gpu_config_by_name(name)


def _dtype(name):
    return get_dtype_config_by_name(name)


# --- formats --------------------------------------------------------------------

def test_block_formats_bits_per_value():
    # NVFP4: 4-bit E2M1 + one 8-bit E4M3 scale per 16 values = 4 + 8/16 (NVIDIA NVFP4 blog);
    # MXFP4: 4-bit E2M1 + one 8-bit E8M0 scale per 32 values = 4 + 8/32 (OCP MX v1.0, Table 1).
    assert FP4_FORMATS["nvfp4"].bits_per_value == 4.5
    assert FP4_FORMATS["mxfp4"].bits_per_value == 4.25


@pytest.mark.parametrize("name,weight_bits_per_value,act_bits_per_value", [
    ("nvfp4", 4.5, 4.5), ("w4a4e16-nvfp4", 4.5, 4.5), ("w4a16e16-nvfp4", 4.5, 16),
    ("mxfp4", 4.25, 4.25), ("w4a4e16-mxfp4", 4.25, 4.25), ("w4a16e16-mxfp4", 4.25, 16),
    ("w4a8e16-mxfp4", 4.25, 8),
])
def test_fp4_dtype_files_count_block_scales(name, weight_bits_per_value, act_bits_per_value):
    d = _dtype(name)
    assert d.weight_bytes_per_param * 8 == pytest.approx(weight_bits_per_value)
    assert d.activation_bytes_per_element * 8 == pytest.approx(act_bits_per_value)


def test_fp4_format_needs_4_bits():
    with pytest.raises(ConfigError, match="weight_format.*nvfp4.*4"):
        DtypeConfig(name="bad", weight_bits=8, activation_bits=16, weight_format="nvfp4")
    with pytest.raises(ConfigError, match="quant_group_size"):
        DtypeConfig(name="bad", weight_bits=4, weight_format="mxfp4", quant_group_size=16)


# --- peaks ------------------------------------------------------------------------

@pytest.mark.parametrize("gpu,dtype,expected", [
    # HGX B200: FP4 144 PF* | 72 PF dense per 8 GPUs -> 9000 per GPU (NVIDIA HGX spec table)
    ("b200-180gb", "nvfp4", 9000),
    # GB200 NVL72: FP4 1,440 PF* per 72 GPUs -> 10000 dense per GPU (NVIDIA GB200 NVL72 page)
    ("gb200-nvl72-186gb", "nvfp4", 10000),
    # GB300 NVL72: FP4 1,080 PF dense per 72 GPUs -> 15000
    ("gb300-nvl72-279gb", "w4a4e16-nvfp4", 15000),
    # MI355X: MXFP4 10 PF dense (AMD) = 256 CU x 16384 FLOP/clk x 2.4 GHz
    ("mi355x-288gb", "mxfp4", 256 * 16384 * 2.4e9 / 1e12),
    # weight-only FP4 dequantizes to 16 bits: A100 bf16 312 (A100 datasheet)
    ("a100-sxm-80gb", "w4a16e16-mxfp4", 312),
    # MXFP4 weights + FP8 activations run at the FP8 peak: H100 SXM 1979 dense
    ("h100-sxm-80gb", "w4a8e16-mxfp4", 1979),
])
def test_matmul_peak(gpu, dtype, expected):
    assert matmul_peak_tflops(_gpu(gpu), _dtype(dtype)) == pytest.approx(expected, rel=1e-4)


def test_facade_uses_the_fp4_peak():
    m = ModelConfig(name="t", num_layers=2, n_head=8, hidden_dim=1024, vocab_size=1000, max_seq_len=256)
    a = LLMAnalysis(m, _gpu("b200-180gb"), _dtype("nvfp4"), flops_efficiency=1.0)
    assert a.get_TFLOPS_per_gpu() == pytest.approx(9000)


def test_catalogue_fp4_gpus():
    assert set(fp4_gpu_names()) == FP4_GPUS


@pytest.mark.parametrize("gpu", ["h100-sxm-80gb", "a100-sxm-80gb", "tpu-v5p-95gb", "mi300x-192gb"])
def test_fp4_refused_without_fp4_units(gpu):
    with pytest.raises(ConfigError) as e:
        check_dtype_supported(_gpu(gpu), _dtype("nvfp4"))
    msg = str(e.value)
    assert "\n" not in msg and gpu in msg
    for name in FP4_GPUS:  # the answer: which GPUs have them
        assert name in msg


def test_facade_refuses_fp4_on_hopper():
    m = ModelConfig(name="t", num_layers=2, n_head=8, hidden_dim=1024, vocab_size=1000, max_seq_len=256)
    with pytest.raises(ConfigError, match="FP4"):
        LLMAnalysis(m, _gpu("h100-sxm-80gb"), _dtype("w4a4e16-mxfp4")).inference(
            batch_size_per_gpu=1, seq_len=16, num_tokens_to_generate=4)


# --- GPUs without integer tensor units --------------------------------------------

def test_mirrored_v100_loads_and_refuses_int8():
    v100 = GPUConfig(**MIRRORED_V100)
    assert v100.peak_i8_TFLOPS == 0 and v100.peak_i4_TFLOPS == 0
    for name in ("w8a8e16", "w4a8e16", "w4a4e16"):
        with pytest.raises(ConfigError, match="no.*int|has none"):
            check_dtype_supported(v100, _dtype(name))
    # weight-only int8/int4 dequantizes to fp16 tensor cores: allowed, at the fp16 peak
    assert matmul_peak_tflops(v100, _dtype("w8a16e16")) == 125
    assert matmul_peak_tflops(v100, _dtype("w4a16e16")) == 125


@pytest.mark.parametrize("name", ["v100-sxm-16gb", "v100-sxm-32gb", "v100-pcie-16gb", "v100-pcie-32gb"])
def test_catalogue_v100_has_no_int8_units(name):
    # Volta tensor cores are FP16 only (NVIDIA V100 datasheet: no INT8/INT4 tensor ops)
    assert _gpu(name).peak_i8_TFLOPS == 0
    with pytest.raises(ConfigError):
        check_dtype_supported(_gpu(name), _dtype("w8a8e16"))


def test_negative_int8_peak_rejected():
    with pytest.raises(ConfigError, match="peak_i8_TFLOPS"):
        GPUConfig(**dict(MIRRORED_V100, peak_i8_TFLOPS=-1))


# --- KV-cache type ------------------------------------------------------------------

def test_kv_cache_dtype_names():
    h100 = _gpu("h100-sxm-80gb")
    assert kv_cache_bytes_per_element("fp8", h100) == 1
    assert kv_cache_bytes_per_element("FP8_E4M3", h100) == 1
    assert kv_cache_bytes_per_element("bf16", h100) == 2
    assert kv_cache_bytes_per_element(None, h100) is None
    with pytest.raises(ConfigError, match="kv_cache_dtype = 'fp6'; valid: fp32, fp16, bf16, fp8"):
        kv_cache_bytes_per_element("fp6", h100)


@pytest.mark.parametrize("gpu,kv", [("a100-sxm-80gb", "fp8"), ("v100-sxm-32gb", "bf16"),
                                    ("v100-sxm-32gb", "int8"), ("t4-16gb", "fp8")])
def test_kv_cache_dtype_refused(gpu, kv):
    with pytest.raises(ConfigError) as e:
        kv_cache_bytes_per_element(kv, _gpu(gpu))
    assert "\n" not in str(e.value) and "valid here: fp32, fp16" in str(e.value)


def test_fp8_kv_cache_halves_the_cache():
    # Llama-3.1-8B: 32 layers, 8 KV heads x 128 = 1024 per K and per V.
    # bytes = 2 (K,V) x 32 x 1024 x tokens x bytes_per_element; batch 4 x (1000 + 24) tokens
    m = ModelConfig(name="l8", num_layers=32, n_head=32, num_key_value_heads=8, hidden_dim=4096,
                    vocab_size=128256, max_seq_len=8192, ffn_embed_dim=14336,
                    mlp_gated_linear_units=True, norm_type="rmsnorm", norm_bias=False,
                    position_embedding_type="rotary", tie_word_embeddings=False)
    tokens = 4 * (1000 + 24)
    expected_fp16 = 2 * 32 * 1024 * tokens * 2
    a = LLMAnalysis(m, _gpu("h100-sxm-80gb"))
    s16 = a.inference(batch_size_per_gpu=4, seq_len=1000, num_tokens_to_generate=24)
    s8 = a.inference(batch_size_per_gpu=4, seq_len=1000, num_tokens_to_generate=24, kv_cache_dtype="fp8")
    assert s16["kv_cache_memory_per_gpu"] == pytest.approx(expected_fp16, rel=1e-3)
    assert s8["kv_cache_memory_per_gpu"] == pytest.approx(expected_fp16 / 2, rel=1e-3)
    with pytest.raises(ConfigError, match="kv_cache_dtype"):
        LLMAnalysis(m, _gpu("a100-sxm-80gb")).inference(
            batch_size_per_gpu=4, seq_len=1000, num_tokens_to_generate=24, kv_cache_dtype="fp8")


def test_roofline_rates_beside_a_calibrated_model_are_flagged_in_every_summary():
    """flops_efficiency = 0.5 under perf_model="calibrated" sets only the roofline reported beside the
    calibrated times: at half the peak that roofline is slower than the calibrated prefill (a "lower bound"
    above the expected time, as the QA run found: 499 ms against 338 ms). The summary's warnings say so,
    naming the value; at efficiency 1, and under the roofline, they do not."""
    args = (get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
            get_dtype_config_by_name("w16a16e16"))
    call = dict(batch_size_per_gpu=8, seq_len=2048, num_tokens_to_generate=16)
    slowed = LLMAnalysis(*args, perf_model="calibrated", flops_efficiency=0.5).inference(**call)
    assert slowed["prefill_latency_lower_bound"] > slowed["prefill_latency"]  # the contradiction flagged
    assert any("flops_efficiency = 0.5" in w and "no lower bound" in w for w in slowed["warnings"])
    for quiet in (LLMAnalysis(*args, perf_model="calibrated"), LLMAnalysis(*args, flops_efficiency=0.5)):
        assert not any("no lower bound" in w for w in quiet.inference(**call)["warnings"])
    trained = LLMAnalysis(*args, ParallelismConfig(tp_size=8), perf_model="calibrated", achieved_tflops=140)
    assert any("achieved_tflops = 140" in w for w in trained.training(batch_size_per_gpu=1, seq_len=2048,
                                                                       gradient_accumulation_steps=1)["warnings"])


# --- fp32 and TF32 ------------------------------------------------------------------
# NVIDIA A100 datasheet (dense): FP32 19.5 TFLOPS (CUDA cores), TF32 tensor cores 156 TFLOPS.
# PyTorch runs fp32 matmuls in fp32 unless asked (torch.backends.cuda.matmul.allow_tf32 = False
# by default since 1.12), so "fp32" is timed at 19.5 and "tf32" at 156.

def test_fp32_matmuls_run_at_the_fp32_rate_and_tf32_at_the_tensor_core_rate():
    a100 = _gpu("a100-sxm-80gb")
    assert matmul_peak_tflops(a100, _dtype("fp32")) == 19.5
    assert matmul_peak_tflops(a100, _dtype("tf32")) == 156


def test_a_compute_bound_fp32_matmul_takes_its_flops_over_19_5_tflops():
    a = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), _gpu("a100-sxm-80gb"), _dtype("fp32"))
    ops = {op["name"]: op for op in a.operators("prefill", batch_size=8, seq_len=2048)}
    fc1 = ops["up_proj"] if "up_proj" in ops else ops["fc1"]
    assert fc1["bound"] == "compute"
    assert fc1["latency_s"] == pytest.approx(fc1["flops_per_gpu"] / 19.5e12, rel=1e-9)


def test_tf32_is_refused_where_there_are_no_tf32_tensor_cores():
    # V100 (Volta): FP32 15.7 TFLOPS, no TF32 (introduced with Ampere)
    with pytest.raises(ConfigError, match="needs TF32 tensor cores.*use fp32"):
        LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), _gpu("v100-sxm-32gb"), _dtype("tf32"))


def test_tf32_needs_32_bit_values():
    with pytest.raises(ConfigError, match="activation_format' = 'tf32'.*activation_bits = 32"):
        DtypeConfig(name="bad", weight_bits=16, activation_bits=16, embedding_bits=16, activation_format="tf32")
