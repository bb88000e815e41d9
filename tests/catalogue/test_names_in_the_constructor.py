"""`LLMAnalysis` takes the names the CLI takes (model, GPU, data type), and the generic word "fp4" is read
for the model's checkpoint and the GPU (catalogue/lookup.py `dtype_for_setup`).

Independent sources: the checkpoint formats come from the real `config.json` files of the releases
(tests/data/hf_configs_aiconfigurator, copied from ai-dynamo/aiconfigurator, Apache-2.0): gpt-oss states
`quantization_config.quant_method = "mxfp4"` (OpenAI gpt-oss model card: MoE weights in MXFP4), NVIDIA's
ModelOpt releases `quant_algo = "NVFP4"`, DeepSeek-R1 `quant_method = "fp8"` with 128 x 128 blocks. How
gpt-oss runs: on Hopper (no FP4 tensor cores: NVIDIA H100 / H200 datasheets list FP8 as the narrowest
tensor-core format) the MXFP4 weights are widened in weight-only kernels, so activations stay 16-bit; on
Blackwell (FP4 tensor cores) TensorRT-LLM's and vLLM's MoE kernels take MXFP8 activations (W4A8).
"""

import json
from pathlib import Path

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.errors import ConfigError
from llm_analysis.hub.entry import model_config_from_hf_dict

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf_configs_aiconfigurator"


def test_names_give_the_same_analysis_as_the_configs():
    by_name = LLMAnalysis("Qwen/Qwen3-32B", "h100_sxm", "fp8", ParallelismConfig(tp_size=2))
    by_config = LLMAnalysis(get_model_config_by_name("Qwen/Qwen3-32B"), get_gpu_config_by_name("h100-sxm-80gb"),
                            get_dtype_config_by_name("fp8"), ParallelismConfig(tp_size=2))
    assert by_name.model_config == by_config.model_config
    assert by_name.gpu_config == by_config.gpu_config and by_name.dtype_config == by_config.dtype_config
    a = by_name.inference(batch_size_per_gpu=2, seq_len=512, num_tokens_to_generate=32)
    b = by_config.inference(batch_size_per_gpu=2, seq_len=512, num_tokens_to_generate=32)
    assert a["total_latency"] == b["total_latency"] and a["num_params_total"] == b["num_params_total"]


@pytest.mark.parametrize("args, named", [
    (("no/such-model-xyz", "h100-sxm-80gb", "fp8"), "no/such-model-xyz"),
    (("Qwen/Qwen3-32B", "h1000", "fp8"), "h1000"),
    (("Qwen/Qwen3-32B", "h100-sxm-80gb", "fp7"), "fp7"),
    # a number is no name: refused with the names closest to its digits (tests/catalogue/test_numbers_given_as_names.py)
    ((42, "h100-sxm-80gb", "fp8"), "model_config = 42 is a number, not a name"),
    (([42], "h100-sxm-80gb", "fp8"), "model_config must be a ModelConfig, got list"),
])
def test_unknown_names_are_refused_naming_them(args, named, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # an unknown model name is not fetched here
    with pytest.raises(ConfigError) as err:
        LLMAnalysis(*args)
    assert named in str(err.value)


def _stated_format(file: str) -> str:
    q = json.loads((CONFIGS / file).read_text())["quantization_config"]
    return {"mxfp4": "mxfp4", "fp8": "fp8"}.get(q.get("quant_method")) or q["quant_algo"].lower()


@pytest.mark.parametrize("file", ["openai_gpt-oss-120b.json", "openai_gpt-oss-20b.json", "nvidia_Kimi-K2.5-NVFP4.json",
                                  "deepseek-ai_DeepSeek-R1.json", "Qwen_Qwen3-32B-FP8.json"])
def test_the_hub_import_keeps_the_checkpoint_format_its_config_states(file):
    d = json.loads((CONFIGS / file).read_text())
    assert model_config_from_hf_dict(d, file).checkpoint_weight_format == _stated_format(file)


@pytest.mark.parametrize("file", ["Qwen_Qwen3-32B.json", "nvidia_Qwen3.6-35B-A3B-NVFP4.json", "moonshotai_Kimi-K2.5.json"])
def test_no_format_is_guessed_where_none_or_a_mixture_is_stated(file):
    d = json.loads((CONFIGS / file).read_text())
    assert model_config_from_hf_dict(d, file).checkpoint_weight_format is None


def test_the_catalogue_gpt_oss_entries_state_the_format_of_their_release():
    for size in ("120b", "20b"):
        assert get_model_config_by_name(f"openai/gpt-oss-{size}").checkpoint_weight_format == \
            _stated_format(f"openai_gpt-oss-{size}.json")


@pytest.mark.parametrize("model, gpu, expected", [
    # (weight bits, activation bits, weight format)
    ("openai/gpt-oss-120b", "h100_sxm", (4, 16, "mxfp4")),   # Hopper: weight-only MXFP4
    ("openai/gpt-oss-120b", "h200_sxm", (4, 16, "mxfp4")),
    ("openai/gpt-oss-120b", "b200", (4, 8, "mxfp4")),        # Blackwell: MXFP4 x MXFP8
    ("openai/gpt-oss-20b", "gb200", (4, 8, "mxfp4")),
    ("deepseek-ai/DeepSeek-R1", "b200", (4, 4, "nvfp4")),    # any other model: NVFP4
    ("nvidia/Kimi-K2.5-NVFP4", "b300", (4, 4, "nvfp4")),
    ("Qwen/Qwen3-32B", "gb200", (4, 4, "nvfp4")),
])
def test_fp4_means_the_checkpoint_format_as_the_gpu_runs_it(model, gpu, expected):
    d = LLMAnalysis(model, gpu, "fp4").dtype_config
    assert (d.weight_bits, d.activation_bits, d.weight_format) == expected
    assert LLMAnalysis(model, gpu, "FP4").dtype_config == d


def test_fp4_without_fp4_tensor_cores_is_refused_for_an_nvfp4_model():
    with pytest.raises(ConfigError) as err:
        LLMAnalysis("Qwen/Qwen3-32B", "h100_sxm", "fp4")
    message = str(err.value)
    assert "'fp4'" in message and "NVFP4" in message and "FP4 tensor cores" in message and "b200-180gb" in message


def test_fp4_alone_stays_ambiguous_without_a_model():
    with pytest.raises(ConfigError, match="nvfp4.*mxfp4"):
        get_dtype_config_by_name("fp4")


def test_the_cli_reads_fp4_the_same_way(capsys):
    """`serve`, `infer` and `train` resolve the word as the constructor does; the refusal is one line, exit 2."""
    from llm_analysis.cli.commands import main
    assert main(["serve", "--model_name", "openai/gpt-oss-120b", "--gpu_name", "h100_sxm", "--dtype_name", "fp4",
                 "--tp_size", "2", "--concurrency", "4", "--input_len", "512", "--output_len", "64",
                 "--output_format", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["setup"]["dtype_name"] == "w4a16e16-mxfp4"
    assert main(["infer", "--model_name", "Qwen/Qwen3-32B", "--gpu_name", "h100_sxm", "--dtype_name", "fp4"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'fp4'" in err and "w4a16e16-nvfp4" in err
