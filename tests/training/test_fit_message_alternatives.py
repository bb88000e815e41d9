"""The out-of-memory message's alternatives are compared with the GPU's memory.

`fit_message` lists what would help with the peak each alternative reaches (ZeRO-3, full recomputation); it listed
full recomputation at 133.46 GB as help for an 85.90 GB GPU (Llama-3-8B, one H100, ZeRO-3). Law checked on every
"peak X GB" the message offers: it says "still above the GPU's Y GB" exactly when X > Y, Y being the GPU's memory
(the error's available_bytes, and the "the GPU has Y GB" of the message's head); the alternatives that fit keep
their plain peak."""

import re

import pytest

from llm_analysis.errors import DoesNotFitError
from llm_analysis.units import GB

CASES = [  # (parallelism, training arguments): between them each alternative both fits and does not
    (dict(), dict(global_batch_size=4, seq_len=4096, ds_zero=3)),
    (dict(dp_size=8), dict(batch_size_per_gpu=1, global_batch_size=8, seq_len=4096, ds_zero=0)),
    (dict(dp_size=8), dict(batch_size_per_gpu=2, global_batch_size=16, seq_len=8192, ds_zero=1)),
]


@pytest.mark.parametrize("par,kw", CASES)
def test_an_alternative_above_the_memory_says_so(analysis_builder, par, kw, quiet_package_warnings):
    a = analysis_builder("meta-llama/Meta-Llama-3-8B", gpu="h100-sxm-80gb", **par)
    with pytest.raises(DoesNotFitError) as err:
        a.training(**kw)
    message = str(err.value)
    gpu_gb = err.value.available_bytes / GB
    assert f"the GPU has {gpu_gb:.2f} GB" in message
    help_part = message.split("What would help:")[1]
    offers = re.findall(r"peak ([\d.]+) GB(, still above the GPU's ([\d.]+) GB)?", help_part)
    assert offers, help_part
    for peak_gb, above, stated_gb in offers:
        assert bool(above) == (float(peak_gb) > gpu_gb), help_part
        if above:
            assert float(stated_gb) == pytest.approx(gpu_gb, abs=0.005)


def test_the_reviewers_case_no_longer_offers_a_non_fitting_fix_as_help(analysis_builder, quiet_package_warnings):
    a = analysis_builder("meta-llama/Meta-Llama-3-8B", gpu="h100-sxm-80gb")
    with pytest.raises(DoesNotFitError) as err:
        a.training(global_batch_size=4, seq_len=4096, ds_zero=3)
    m = re.search(r"activation_recomputation=4, peak ([\d.]+) GB([^)]*)\)", str(err.value))
    assert m and float(m.group(1)) > err.value.available_bytes / GB and "still above" in m.group(2)
