"""The fused MoE's own passes (model/mlp.py `routing_ops`): every fused MoE implementation (vLLM's and
SGLang's fused_moe, FlashInfer's and TensorRT-LLM's MoE) runs a top-k selection over the router's
logits, a sort of the token-expert pairs by expert and a combine of each token's k outputs beside
the expert GEMMs. Expected bytes are derived by hand from the config: logits t x E fp32 read, ids and
weights t x k (int32 + fp32) written; t x k int32 ids sorted; t x k outputs of the hidden width (and
their fp32 weights) read, t outputs written. They hold no parameters and count no FLOPs."""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.model import Phase

GPU = get_gpu_config_by_name("h100-sxm-80gb")
MODEL = "Qwen/Qwen3-30B-A3B"  # 128 experts top-8, hidden 2048


def _moe_layer_ops(tp: int, batch: int):
    a = LLMAnalysis(get_model_config_by_name(MODEL), GPU, get_dtype_config_by_name("w16a16e16"),
                    ParallelismConfig(tp_size=tp))
    d = a.describer
    kind = next(k for k in d.layer_groups if k.moe)
    return a.model_config, [o for o in d.layer_ops(Phase("decode", batch, 1, 100), kind)]


@pytest.mark.parametrize("tp,batch", [(1, 1), (2, 4), (4, 32)])
def test_routing_pass_bytes_by_hand(tp, batch):
    m, ops = _moe_layer_ops(tp, batch)
    by_name = {o.name: o for o in ops}
    e, k, h = 128, 8, 2048
    assert (m.moe_num_experts, m.moe_top_k, m.hidden_dim) == (e, k, h)
    t = batch  # one token per sequence; every GPU of the TP group routes all of them
    topk, sort, combine = by_name["expert_topk"], by_name["expert_sort"], by_name["expert_combine"]
    assert topk.bytes_read_per_gpu == t * e * 4 and topk.bytes_written_per_gpu == t * k * (4 + 4)
    assert sort.bytes_read_per_gpu == t * k * 4 and sort.bytes_written_per_gpu == t * k * 4
    assert combine.bytes_read_per_gpu == t * k * (h * 2 + 4)  # bf16 outputs and fp32 weights
    assert combine.bytes_written_per_gpu == t * h * 2
    for op in (topk, sort, combine):
        assert op.kind == "elementwise" and op.params == 0 and op.flops == 0 and op.expert_role is None


def test_passes_sit_around_the_routed_experts():
    """Top-k and sort after the router, before the experts' GEMMs; the combine after the down projection."""
    _, ops = _moe_layer_ops(1, 4)
    names = [o.name for o in ops]
    assert names.index("router") < names.index("expert_topk") < names.index("expert_sort") \
        < names.index("expert_gate_proj")
    assert names.index("expert_down_proj") < names.index("expert_combine")


def test_dense_layers_run_no_routing_pass():
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), GPU)
    kind = next(iter(a.describer.layer_groups))
    names = {o.name for o in a.describer.layer_ops(Phase("decode", 4, 1, 100), kind)}
    assert not names & {"expert_topk", "expert_sort", "expert_combine"}
