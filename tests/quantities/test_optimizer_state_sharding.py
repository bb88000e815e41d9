"""Optimizer states and gradients per GPU under ZeRO with experts over expert-parallel ranks, by hand.

ZeRO-1 shards the optimizer states over the ranks that hold a copy of a parameter, ZeRO-2 the gradients too
(Rajbhandari et al., "ZeRO", SC'20, section 5): a dense parameter has a copy on each of the dp data-parallel
ranks, a routed expert's on dp / ep of them (the ep ranks hold different experts: DeepSpeed's expert +
data parallelism)."""

from __future__ import annotations

import pytest


def test_zero_shards_expert_states_over_the_expert_data_parallel_ranks(analysis_builder):
    # Mixtral-8x7B (config.json): hidden 4096, 32 query and 8 KV heads of 128, experts of 14336, 8 experts,
    # no biases; dp 8, ep 4: 2 experts per GPU, each expert on 8 / 4 = 2 ranks
    a = analysis_builder("mistralai/Mixtral-8x7B-v0.1", dp_size=8, ep_size=4)
    expert = 2 * 3 * 4096 * 14336
    dense = 2 * 4096 * 4096 + 2 * 4096 * 8 * 128 + 4096 * 8 + 2 * 4096  # q, o; k, v; router; two norms
    adam, grad = 4 + 4 + 4, 2  # fp32 master, Adam's two fp32 moments; 16-bit gradients
    assert a.get_memory_optimizer_state_and_gradient_per_layer(ds_zero=0) == pytest.approx(
        (adam * (dense + expert), grad * (dense + expert)), rel=1e-12)
    assert a.get_memory_optimizer_state_and_gradient_per_layer(ds_zero=1) == pytest.approx(
        (adam * (dense / 8 + expert / 2), grad * (dense + expert)), rel=1e-12)
    assert a.get_memory_optimizer_state_and_gradient_per_layer(ds_zero=2) == pytest.approx(
        (adam * (dense / 8 + expert / 2), grad * (dense / 8 + expert / 2)), rel=1e-12)
