"""A number where the library takes a name (`get_gpu_config_by_name(4090)`, `LLMAnalysis(model, 4090)`): names
are text, so a number is refused in one line that names the field, the value, and the names closest to its
digits (the RTX 4090's catalogue entry, llm_analysis/gpu_configs/rtx-4090-24gb.json, for 4090; the
16-bit entry w16a16e16 for 16). The text "4090" is looked up as any name is (an unknown name, the same
suggestions)."""

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_dtype_config_by_name, get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.errors import ConfigError, UnknownNameError


@pytest.mark.parametrize("lookup, value, field, near", [
    (get_gpu_config_by_name, 4090, "gpu_name", "rtx-4090-24gb"),
    (get_gpu_config_by_name, 4090.0, "gpu_name", "rtx-4090-24gb"),
    (get_dtype_config_by_name, 16, "dtype_name", "w16a16e16"),
    (get_model_config_by_name, 4090, "model_name", "list_model_configs"),
])
def test_a_number_is_refused_with_the_names_near_it(lookup, value, field, near):
    with pytest.raises(ConfigError) as err:
        lookup(value)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{field} = {value!r} is a number, not a name") and near in message, message


@pytest.mark.parametrize("args, field, near", [
    (("facebook_opt-1.3b", 4090), "gpu_config = 4090", "rtx-4090-24gb"),
    (("facebook_opt-1.3b", "a100-sxm-40gb", 16), "dtype_config = 16", "w16a16e16"),
    ((4090, "a100-sxm-40gb"), "model_config = 4090", "list_model_configs"),
])
def test_the_constructor_refuses_a_number_as_a_name(args, field, near):
    with pytest.raises(ConfigError) as err:
        LLMAnalysis(*args)
    assert str(err.value).startswith(f"{field} is a number, not a name") and near in str(err.value)


def test_the_text_of_digits_is_an_unknown_name_with_the_same_suggestions():
    with pytest.raises(UnknownNameError) as err:
        get_gpu_config_by_name("4090")
    assert "Unknown gpu name '4090'" in str(err.value) and "rtx-4090-24gb" in str(err.value)


def test_a_bool_is_still_refused_as_no_name():
    with pytest.raises(ConfigError, match="gpu_name = True must be a non-empty string"):
        get_gpu_config_by_name(True)
