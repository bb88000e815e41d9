"""The launch command runs the weights the row was timed with, as the named checkpoint stores them.

Independent sources: the checkpoint formats are read from the releases' own files (tests/data/
hf_configs_aiconfigurator/, copied from ai-dynamo/aiconfigurator, Apache-2.0: DeepSeek-V3's config.json states
quantization_config quant_method fp8 with 128 x 128 blocks; nvidia/Qwen3-235B-A22B-NVFP4's hf_quant_config.json
quant_algo NVFP4); the engines' behaviour from their documentation: vLLM and SGLang load a quantised
checkpoint by its own method (a ModelOpt one from hf_quant_config.json, docs.vllm.ai features/quantization/
modelopt) and quantise to fp8 at load only from a 16-bit checkpoint (`--quantization fp8`); vLLM runs its
all-to-all kernels only with data parallelism (FusedMoEParallelConfig.use_all2all_kernels = dp_size > 1 and
use_ep, docs.vllm.ai api/vllm/model_executor/layers/fused_moe/config), and serve() times the experts' all-to-all
only across attention replicas (serving/layout.py: with attention_dp 1 the tensor-parallel all-reduce already
holds every token).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_analysis.planner.inference import plan_inference
from llm_analysis.planner.launch import pools_launch, row_launch

SERVED = Path(__file__).resolve().parents[1] / "data" / "hf_configs_aiconfigurator"
SLO = {"max_ttft_s": 2.0, "max_tpot_s": 0.08, "request_rate_per_s": 5.0}


def _plan(model, gpu, dtype, engine):
    return plan_inference(model, [gpu], SLO, dtypes=[dtype], seq_len=1024, num_tokens_to_generate=128,
                          framework=engine, emit_launch=engine, perf_model="calibrated")


def test_deepseek_v3_s_fp8_checkpoint_is_not_launched_for_a_16_bit_row():
    assert json.loads((SERVED / "deepseek-ai_DeepSeek-V3.json").read_text())["quantization_config"]["quant_method"] \
        == "fp8"
    bf16 = _plan("deepseek-ai/DeepSeek-V3", "h200-sxm-141gb", "bf16", "vllm").best["launch"]
    assert not bf16["expressible"] and "stores fp8 weights" in bf16["reason"] and "--dtype_names fp8" in bf16["reason"]
    # timed as stored: the checkpoint's own FP8 weights, no online quantisation asked for
    fp8 = _plan("deepseek-ai/DeepSeek-V3", "h200-sxm-141gb", "fp8", "sglang").best["launch"]
    assert fp8["expressible"] and fp8["argv"][:5] == ["python", "-m", "sglang.launch_server", "--model-path",
                                                       "deepseek-ai/DeepSeek-V3"]
    assert "--quantization" not in fp8["argv"]


def test_nvidia_s_nvfp4_deepseek_r1_runs_as_nvfp4_not_as_r1_s_fp8():
    nvfp4 = _plan("nvidia/DeepSeek-R1-FP4", "gb200", "nvfp4", "trtllm").best["launch"]
    assert nvfp4["expressible"] and nvfp4["argv"][:2] == ["trtllm-serve", "nvidia/DeepSeek-R1-FP4"]
    fp8 = _plan("nvidia/DeepSeek-R1-FP4", "gb200", "fp8", "trtllm").best["launch"]
    assert not fp8["expressible"] and "stores nvfp4 weights" in fp8["reason"]


def test_an_nvfp4_release_with_its_format_in_hf_quant_config_runs_as_nvfp4():
    stated = json.loads((SERVED / "hf_quant_config" / "nvidia_Qwen3-235B-A22B-NVFP4.json").read_text())
    assert stated["quantization"]["quant_algo"] == "NVFP4"
    trt = _plan("nvidia/Qwen3-235B-A22B-NVFP4", "b200", "nvfp4", "trtllm").best["launch"]
    assert trt["expressible"] and trt["argv"][:2] == ["trtllm-serve", "nvidia/Qwen3-235B-A22B-NVFP4"]
    vllm_nvfp4 = _plan("nvidia/Qwen3-235B-A22B-NVFP4", "b200", "nvfp4", "vllm").best["launch"]
    assert vllm_nvfp4["expressible"] and "--quantization" not in vllm_nvfp4["argv"]  # vLLM reads ModelOpt's method
    bf16 = _plan("nvidia/Qwen3-235B-A22B-NVFP4", "b200", "bf16", "vllm").best["launch"]
    assert not bf16["expressible"] and "stores nvfp4 weights" in bf16["reason"]


def test_a_modelopt_fp8_release_gets_no_quantization_flag():
    # nvidia/Llama-3.3-70B-Instruct-FP8 (a variant of the 16-bit Llama 3.3 entry): vLLM reads ModelOpt FP8 from
    # its hf_quant_config.json; a --quantization fp8 beside it would name another method than the checkpoint's
    launch = _plan("nvidia/Llama-3.3-70B-Instruct-FP8", "h100-sxm-80gb", "fp8", "vllm").best["launch"]
    assert launch["expressible"] and launch["argv"][2] == "nvidia/Llama-3.3-70B-Instruct-FP8"
    assert "--quantization" not in launch["argv"]


_SETTINGS = {"max_num_batched_tokens": 8192, "max_num_seqs": 256, "gpu_memory_utilization": 0.9,
             "block_size": 16, "kv_cache_dtype": "auto"}


def _pools(adp):
    layout = {"tp": 8 // adp, "attention_dp": adp, "moe_tp": 1, "moe_ep": 8}
    return {role: {"layout": dict(layout), "workers": 1, "engine_settings": dict(_SETTINGS)}
            for role in ("prefill", "decode")}


@pytest.mark.parametrize("engine, flag", [("vllm", "--all2all-backend"), ("sglang", "--moe-a2a-backend")])
def test_an_all_to_all_backend_is_named_only_across_attention_replicas(engine, flag):
    # tp8 x moe_ep8, one attention replica: vLLM's data-parallel size is 1, its all-to-all kernels unused, and
    # serve() times no all-to-all; the decode pool's command names no backend
    one = pools_launch(engine, "deepseek-ai/DeepSeek-V3", _pools(1), gpus_per_node=8, is_moe=True,
                       dtype_name="fp8", checkpoint_weights="fp8")
    for role in ("prefill", "decode"):
        assert one["pools"][role]["expressible"] and flag not in one["pools"][role]["argv"], role
    # tp1 x 8 attention replicas, the experts spread over them: the all-to-all is timed and named
    eight = pools_launch(engine, "deepseek-ai/DeepSeek-V3", _pools(8), gpus_per_node=8, is_moe=True,
                         dtype_name="fp8", checkpoint_weights="fp8")
    decode = eight["pools"]["decode"]["argv"]
    assert decode[decode.index(flag) + 1] == ("deepep_low_latency" if engine == "vllm" else "deepep")


def test_an_aggregated_row_with_one_attention_replica_names_no_all_to_all():
    row = {"layout": {"tp": 8, "attention_dp": 1, "moe_tp": 1, "moe_ep": 8, "framework": "vllm"},
           "figures": {"replicas": 1, "engine_settings": dict(_SETTINGS)}}
    launch = row_launch("vllm", "m", row, gpus_per_node=8, is_moe=True)
    assert launch["expressible"] and "--enable-expert-parallel" in launch["argv"]
    assert "--all2all-backend" not in launch["argv"]
