"""A model that does not fit at the default 16-bit dtype, whose release stores its weights in a low-bit format,
is told which dtypes hold the weights as released (a user's first `infer` of gpt-oss at the default)."""

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_dtype_config_by_name, get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.errors import LLMAnalysisError


def _refusal(model, dtype="w16a16e16"):
    a = LLMAnalysis(get_model_config_by_name(model), get_gpu_config_by_name("h100-sxm-80gb"),
                    get_dtype_config_by_name(dtype))
    with pytest.raises(LLMAnalysisError) as refused:
        a.inference(batch_size_per_gpu=1, seq_len=512, num_tokens_to_generate=32)
    return str(refused.value)


def test_gpt_oss_at_16_bits_names_its_released_mxfp4():
    # openai/gpt-oss-120b's config.json: quantization_config {"quant_method": "mxfp4", ...} (the model card:
    # "MXFP4 quantization of the MoE weights"); at bf16 its ~117 B parameters (~234 GB) exceed an 80 GB H100
    message = _refusal("openai/gpt-oss-120b")
    assert "released checkpoint stores its weights as mxfp4" in message, message
    assert "w4a16e16-mxfp4" in message, message  # the weight-only MXFP4 dtype an H100 (no FP4 units) can run


def test_a_sixteen_bit_release_gets_no_such_tip():
    # meta-llama/Llama-3.1-70B is released in bf16: nothing to say about its release's format
    message = _refusal("meta-llama/Llama-3.1-70B")
    assert "released checkpoint" not in message, message
    assert "fewer weight bits" in message, message
