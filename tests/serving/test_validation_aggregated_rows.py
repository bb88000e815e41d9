"""Which rows of serving_dev.csv benchmarks/serving_accuracy.py scores as one tensor-parallel group, and
how it reads their concurrency and precision. The csv's README (benchmarks/data/validation/README.md) says
`batch_size` is C per attention-DP rank and dense models carry 1s in the moe columns; some sources leave
attention_dp_size, moe_ep_size or precision empty (or write 0) where nothing is split or quantised. A row
the script skips is a row nobody scores, so these rules are checked by hand-made rows."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from serving_accuracy import Refused, Row, _concurrency, dtype_name, eligible, load_rows  # noqa: E402
from serving_layout_accuracy import eligible as is_layout_row  # noqa: E402


def _raw(adp="1", moe_ep="1", moe_tp="2", tp="2", pp="1", mode="agg", model="meta-llama/Llama-3.1-8B-Instruct"):
    return {"mode": mode, "attention_dp_size": adp, "moe_ep_size": moe_ep, "moe_tp_size": moe_tp, "tp_size": tp,
            "pp_size": pp, "model_path": model}


@pytest.mark.parametrize("adp,moe_ep", [("1", "1"), ("", "1"), ("0", "0"), ("", ""), ("0", "")])
def test_empty_or_zero_layout_columns_are_one_group(adp, moe_ep):
    raw = _raw(adp=adp, moe_ep=moe_ep)
    assert eligible(raw)
    assert not is_layout_row(raw)  # and the layout script does not take it either


@pytest.mark.parametrize("change", [{"adp": "2"}, {"moe_ep": "4"}, {"pp": "2"}, {"mode": "disagg"},
                                    # experts split 2 ways on a 1-GPU attention group: not one TP group
                                    {"tp": "1", "moe_tp": "2"}])
def test_split_rows_are_not_one_group(change):
    assert not eligible(_raw(**change))


def test_concurrency_from_batch_size_when_the_id_has_none():
    # "_c_tp4_": no number after _c; batch_size 32 per attention-DP rank, no attention DP
    raw = {"id": "qwen3_32b_h100_sxm_trtllm_agg_4000x1000_c_tp4_epnone_3", "silicon_data_source": "source_file=x.csv",
           "batch_size": "32", "attention_dp_size": ""}
    assert _concurrency(raw) == 32
    raw["attention_dp_size"] = "4"
    assert _concurrency(raw) == 128
    raw["silicon_data_source"] = "source_file=x.csv; silicon_concurrency=48"
    assert _concurrency(raw) == 48


def _row(model, precision):
    return Row("id", "trtllm", model, "h100_sxm", precision, 1024, 128, 1, 8, 0.1, 0.01, "fit", "cfg")


def test_empty_precision_of_a_16_bit_checkpoint_is_bf16():
    assert dtype_name(_row("meta-llama/Llama-3.1-8B-Instruct", "")) == "w16a16e16"
    # a quantised checkpoint with no precision stated is not guessed
    with pytest.raises(Refused):
        dtype_name(_row("Qwen/Qwen3-235B-A22B-FP8", ""))


def test_the_dense_gap_analysis_rows_are_scored():
    # serving_dev.csv holds 60 TensorRT-LLM rows of Llama-3.1-8B-Instruct on H100 with attention_dp_size
    # empty (source aic-auto-gap-analysis, 1.0.0rc3): every one is scored
    rows = [r for r in load_rows() if r.model_path == "meta-llama/Llama-3.1-8B-Instruct" and r.backend == "trtllm"]
    assert len(rows) == 60
