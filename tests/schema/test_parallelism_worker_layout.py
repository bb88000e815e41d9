"""ParallelismConfig's serving worker layout: attention_dp_size, moe_tp_size, moe_ep_size (issue 26).

The defaults keep every existing config's meaning (moe_tp = tp, moe_ep = 1 without attention-DP);
tp x attention_dp must equal moe_tp x moe_ep (the experts live on the worker's own GPUs)."""

from __future__ import annotations

import pytest

from llm_analysis.config import ParallelismConfig
from llm_analysis.errors import ConfigError


def test_defaults_mean_what_they_meant():
    for tp in (1, 2, 8):
        p = ParallelismConfig(tp_size=tp)
        assert (p.attention_dp_size, p.moe_tp_size, p.moe_ep_size) == (1, tp, 1)
        assert p.worker_gpus == tp
        assert p.num_gpus == tp  # the training/inference GPU count is unchanged
    assert ParallelismConfig(tp_size=2, dp_size=4, ep_size=4).moe_ep_size == 1  # ep_size keeps its own meaning


def test_attention_dp_spreads_experts_over_its_replicas():
    p = ParallelismConfig(tp_size=1, attention_dp_size=8)
    assert (p.moe_tp_size, p.moe_ep_size, p.worker_gpus) == (1, 8, 8)
    p = ParallelismConfig(tp_size=2, attention_dp_size=4)
    assert (p.moe_tp_size, p.moe_ep_size) == (2, 4)


def test_one_moe_size_gives_the_other():
    assert ParallelismConfig(tp_size=8, moe_ep_size=8).moe_tp_size == 1  # "TEP": attention TP 8, experts EP 8
    assert ParallelismConfig(tp_size=8, moe_tp_size=2).moe_ep_size == 4
    assert ParallelismConfig(tp_size=2, attention_dp_size=2, moe_ep_size=4).moe_tp_size == 1


@pytest.mark.parametrize("fields,named", [
    (dict(tp_size=2, attention_dp_size=2, moe_tp_size=3, moe_ep_size=2), ("tp_size x attention_dp_size", "moe_tp_size x moe_ep_size")),
    (dict(tp_size=4, moe_tp_size=1, moe_ep_size=2), ("= 4", "= 2")),
    (dict(tp_size=2, moe_ep_size=3), ("moe_ep_size = 3", "must divide")),
    (dict(tp_size=8, moe_tp_size=3), ("moe_tp_size = 3",)),
    (dict(attention_dp_size=0), ("attention_dp_size",)),
    (dict(moe_ep_size=-1), ("moe_ep_size",)),
])
def test_bad_layouts_name_the_fields(fields, named):
    with pytest.raises(ConfigError) as err:
        ParallelismConfig(**fields)
    for text in named:
        assert text in str(err.value)
