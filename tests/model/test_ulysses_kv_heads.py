"""DeepSpeed-Ulysses (cp_comm='all_to_all') gives each CP rank whole heads, K/V heads included. Llama-3-8B has
8 KV heads: a TP rank holds 8 / tp of them, and cp_size must divide that (the all-to-all here moves the rank's
KV heads split cp ways; replicating heads over the CP ranks is not modelled), so the layout is refused by name."""

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig
from llm_analysis.errors import ConfigError


def _train(tp, cp):
    a = LLMAnalysis("meta-llama_Meta-Llama-3-8B", "h100-sxm-80gb", "w16a16e16",
                    parallelism_config=ParallelismConfig(tp_size=tp, cp_size=cp, cp_comm="all_to_all"),
                    perf_model="roofline")
    return a.training(batch_size_per_gpu=1, seq_len=65536, gradient_accumulation_steps=1, ds_zero=3)


@pytest.mark.parametrize("tp, cp, kv_per_rank, valid", [
    (1, 16, 8, [1, 2, 4, 8]),   # 32 query heads would split 16 ways; 8 KV heads would not
    (2, 8, 4, [1, 2, 4]),       # 16 query heads per TP rank split 8 ways; 8 / 2 = 4 KV heads do not
])
def test_cp_above_the_kv_heads_of_a_tp_rank_is_refused(tp, cp, kv_per_rank, valid):
    with pytest.raises(ConfigError) as e:
        _train(tp, cp)
    msg = str(e.value)
    assert "\n" not in msg
    assert f"cp_size = {cp}" in msg and f"the {kv_per_rank} KV heads of a TP rank" in msg
    assert f"valid cp_size: {valid}" in msg


def test_cp_dividing_the_kv_heads_runs():
    s = _train(1, 8)  # 8 KV heads, one per CP rank
    assert s["latency_per_iter"] > 0
