"""How benchmarks/serving_layout_accuracy.py reads an aggregated row's layout from serving_dev.csv's
columns: rows that state the worker's sizes squared (tp_size x attention_dp_size = moe_tp_size x
moe_ep_size = N x N, as the id-bearing "_tpN_epN_" rows show) are N GPUs; other layouts as stated."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from serving_layout_accuracy import _agg_layout  # noqa: E402


def _raw(row_id, tp, adp, moe_tp, moe_ep, backend=None):
    raw = {"id": row_id, "tp_size": str(tp), "attention_dp_size": str(adp), "moe_tp_size": str(moe_tp),
           "moe_ep_size": str(moe_ep), "pp_size": "1"}
    if backend is not None:
        raw["backend"] = backend
    return raw


@pytest.mark.parametrize("row_id,stated,read", [
    # id "_tp8_ep8_" with tp_size 64 = moe 8 x 8: 8 GPUs, attention tensor-parallel over 8, experts over 8
    ("x_agg_8192x1024_c4_tp8_ep8_947", (64, 1, 8, 8), (8, 1, 1, 8)),
    # the same with the attention split in attention_dp_size (TensorRT-LLM attention DP): 8 replicas of 1 GPU
    ("x_agg_8192x1024_c64_tp8_ep8_941", (1, 64, 8, 8), (1, 8, 1, 8)),
    # no layout in the id, 64 GPUs stated on 8-GPU nodes: the square root, 8
    ("dsr1_b200_sglang_fp4_agg_8192x1024_c4_cfg201", (64, 1, 8, 8), (8, 1, 1, 8)),
    # tp 4 x attention_dp 4 with moe_ep 16: 4 GPUs, the attention split kept in tp_size
    ("minimax_vllm_fp8_agg_1024x1024_c64_cfg691", (4, 4, 1, 16), (4, 1, 1, 4)),
    # a plain layout within a node is as stated
    ("x_agg_1024x1024_c4_tp4_0_ep4_0_32", (4, 1, 1, 4), (4, 1, 1, 4)),
    ("dsr1_agg_1024x1024_c4_cfg1", (2, 2, 1, 4), (2, 2, 1, 4)),
    ("dsr1_agg_1024x1024_c4_cfg2", (1, 8, 1, 8), (1, 8, 1, 8)),
])
def test_squared_layouts_are_read_as_their_root(row_id, stated, read):
    layout = _agg_layout(_raw(row_id, *stated))
    assert (layout["tp"], layout["adp"], layout["moe_tp"], layout["moe_ep"]) == read


@pytest.mark.parametrize("backend,read", [
    # vLLM: tp 2 = attention_dp 2 with moe 1 x 4 measures what the "_tp2_ep2_" rows do: 2 GPUs
    ("vllm", (2, 1, 1, 2)),
    # other engines' tp x attention-DP layouts within a node stay as stated
    ("trtllm", (2, 2, 1, 4)),
    ("sglang", (2, 2, 1, 4)),
])
def test_vllm_squared_layout_within_a_node(backend, read):
    layout = _agg_layout(_raw("minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c4_cfg690", 2, 2, 1, 4, backend))
    assert (layout["tp"], layout["adp"], layout["moe_tp"], layout["moe_ep"]) == read
