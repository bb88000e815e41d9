"""NCCL's collectives inside one node from measurements (cost/measured_nccl.py): the calibrated model's
all-reduce, all-gather and reduce-scatter on an NVLink island are NCCL's measured figures, derived here from
the shipped file by hand; outside the measurements the ring model of cost/nccl.py; bad input named."""

import json
from pathlib import Path

import pytest

from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name
from llm_analysis.cost.calibrated import CalibratedCostModel
from llm_analysis.cost.measured_nccl import nccl_tables, parse_nccl_tables
from llm_analysis.cost.nccl import collective_time_s, fabric_from_gpu_config
from llm_analysis.cost.profiles import profile_for_gpu
from llm_analysis.cost.model import RooflineCostModel
from llm_analysis.errors import ConfigError

MEASURED = Path(__file__).resolve().parents[2] / "llm_analysis" / "cost" / "profiles" / "measured"


def _file(gpu_name: str) -> dict:
    return json.loads((MEASURED / f"{gpu_name}.json").read_text())["nccl"]


def _by_hand_s(gpu_name: str, kind: str, n: int, nbytes: float, line_gpu: str = None) -> float:
    """nccl-tests' convention: the bus bytes (2 (n - 1) / n of the buffer for an all-reduce, (n - 1) / n
    for the others) over the bus bandwidth the file states (a share of the NVLink rate per direction)."""
    curve = _file(gpu_name)[kind][str(n)]
    rate = get_gpu_config_by_name(line_gpu or gpu_name).intra_node_bandwidth_in_GB_per_sec * 1e9
    busbw = curve["busbw_over_line_rate"][curve["bytes"].index(nbytes)] * rate
    return (2 if kind == "all_reduce" else 1) * (n - 1) / n * nbytes / busbw


def _calibrated(gpu_name: str, tp: int, launch: str = "graph", **par) -> CalibratedCostModel:
    gpu = get_gpu_config_by_name(gpu_name)
    return CalibratedCostModel(gpu, get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=tp, **par),
                               profile_for_gpu(gpu), launch)


def _ring_s(gpu_name: str, kind: str, nbytes: float, n: int, **kw) -> float:
    gpu = get_gpu_config_by_name(gpu_name)
    return collective_time_s(kind, nbytes, n, fabric_from_gpu_config(gpu), profile_for_gpu(gpu), **kw)


@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "reduce_scatter"])
@pytest.mark.parametrize("n", [2, 4, 8])
def test_inside_one_node_each_collective_is_the_measured_figure(kind, n):
    cm = _calibrated("a100-sxm-80gb", n)
    for nbytes in (16384, 1 << 20, 8 << 20, 64 << 20):
        assert cm.collective_s(kind, nbytes, n, "tp") == pytest.approx(_by_hand_s("a100-sxm-80gb", kind, n, nbytes),
                                                                       rel=1e-12)


def test_mid_sized_messages_take_longer_than_the_ring_model_says():
    """What the table corrects: at 1-8 MiB NCCL's protocols and channels leave the ring model 1.3-2.7x fast
    (A100, 2 GPUs: 15 us modelled, 41 us measured at 1 MiB)."""
    for n in (2, 4, 8):
        cm = _calibrated("a100-sxm-80gb", n)
        for nbytes in (1 << 20, 2 << 20, 8 << 20):
            measured = cm.collective_s("all_reduce", nbytes, n, "tp")
            assert measured > 1.25 * _ring_s("a100-sxm-80gb", "all_reduce", nbytes, n)


def test_between_measured_sizes_linear_in_bytes_and_below_the_smallest_its_time():
    cm = _calibrated("h100-sxm-80gb", 8)
    lo, hi = 1 << 20, 2 << 20  # measured sizes, 2x apart
    mid = (lo + hi) / 2
    expected = (_by_hand_s("h100-sxm-80gb", "all_reduce", 8, lo) + _by_hand_s("h100-sxm-80gb", "all_reduce", 8, hi)) / 2
    assert cm.collective_s("all_reduce", mid, 8, "tp") == pytest.approx(expected, rel=1e-12)
    smallest = _file("h100-sxm-80gb")["all_reduce"]["8"]["bytes"][0]
    assert cm.collective_s("all_reduce", smallest / 4, 8, "tp") == pytest.approx(
        _by_hand_s("h100-sxm-80gb", "all_reduce", 8, smallest), rel=1e-12)
    # a group size between two measured ones: linear in the group size at the same bytes
    six = _calibrated("h100-sxm-80gb", 6).collective_s("all_reduce", lo, 6, "tp")
    assert six == pytest.approx((_by_hand_s("h100-sxm-80gb", "all_reduce", 4, lo)
                                 + _by_hand_s("h100-sxm-80gb", "all_reduce", 8, lo)) / 2, rel=1e-12)


def test_outside_the_measurements_the_ring_model():
    # larger than the largest measured message: the ring model, carried on from the table's last figure (its
    # ratio to the model there, by hand from the file), so a larger message is never faster than the largest
    largest = _file("a100-sxm-80gb")["all_reduce"]["8"]["bytes"][-1]
    cm = _calibrated("a100-sxm-80gb", 8)
    edge = _by_hand_s("a100-sxm-80gb", "all_reduce", 8, largest) / _ring_s("a100-sxm-80gb", "all_reduce", largest, 8)
    assert cm.collective_s("all_reduce", 2 * largest, 8, "tp") == pytest.approx(
        edge * _ring_s("a100-sxm-80gb", "all_reduce", 2 * largest, 8), rel=1e-9)
    assert cm.collective_s("all_reduce", largest * (1 + 1e-9), 8, "tp") == pytest.approx(
        cm.collective_s("all_reduce", largest, 8, "tp"), rel=1e-6)
    # a data-parallel group of 16 over two nodes (one rank per island each side: not one node)
    dp = _calibrated("a100-sxm-80gb", 8, dp_size=16)
    assert dp.collective_s("all_reduce", 8 << 20, 16, "dp") == pytest.approx(
        _ring_s("a100-sxm-80gb", "all_reduce", 8 << 20, 16, ranks_per_island=1), rel=1e-12)
    # the all-to-all is not measured here
    assert cm.collective_s("all_to_all", 8 << 20, 8, "tp") == pytest.approx(
        _ring_s("a100-sxm-80gb", "all_to_all", 8 << 20, 8), rel=1e-12)
    # a PCIe machine (the measured L40S node is not on one switch): the ring model
    pcie = _calibrated("l40s-48gb", 8)
    assert pcie.collective_s("all_reduce", 8 << 20, 8, "tp") == pytest.approx(
        _ring_s("l40s-48gb", "all_reduce", 8 << 20, 8), rel=1e-12)


def test_a_gpu_without_its_own_table_takes_its_profiles_nvlink_gpu():
    tables, note = nccl_tables(get_gpu_config_by_name("a100-sxm-40gb"))
    assert "a100-sxm-80gb" in note
    cm = _calibrated("a100-sxm-40gb", 8)  # the same NVLink rate: the 80 GB card's figures as they are
    assert cm.collective_s("all_reduce", 8 << 20, 8, "tp") == pytest.approx(
        _by_hand_s("a100-sxm-80gb", "all_reduce", 8, 8 << 20), rel=1e-12)


def test_native_launch_adds_its_floor_and_the_roofline_ignores_the_table():
    graph = _calibrated("a100-sxm-80gb", 8)
    native = graph.with_launch("native")
    floor_s = graph.profile.values["kernel_floor_native_s"]
    assert native.collective_s("all_reduce", 8 << 20, 8, "tp") == pytest.approx(
        _by_hand_s("a100-sxm-80gb", "all_reduce", 8, 8 << 20) + floor_s, rel=1e-12)
    gpu = get_gpu_config_by_name("a100-sxm-80gb")
    roof = RooflineCostModel(gpu, get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=8))
    assert roof.collective_s("all_reduce", 8 << 20, 8, "tp") < _by_hand_s("a100-sxm-80gb", "all_reduce", 8, 8 << 20)


@pytest.mark.parametrize("doc, key", [
    ({"nccl": {"all_reduce": {"8": {"bytes": [1, 2], "busbw_over_line_rate": [0.1]}}}}, "nccl.all_reduce.8"),
    ({"nccl": {"all_reduce": {"8": {"bytes": [2, 1], "busbw_over_line_rate": [0.1, 0.2]}}}}, "nccl.all_reduce.8.bytes"),
    ({"nccl": {"all_reduce": {"8": {"bytes": [1, 2], "busbw_over_line_rate": [0.1, -0.2]}}}},
     "nccl.all_reduce.8.busbw_over_line_rate"),
    ({"nccl": {"all_reduce": {"one": {"bytes": [1], "busbw_over_line_rate": [0.1]}}}}, "nccl.all_reduce group size"),
    ({"nccl": {"all_gather": []}}, "nccl.all_gather"),
])
def test_a_malformed_table_names_the_file_the_key_and_the_value(doc, key):
    with pytest.raises(ConfigError) as err:
        parse_nccl_tables(doc, Path("bad.json"), 300e9)
    assert "bad.json" in str(err.value) and key in str(err.value)


@pytest.mark.parametrize("gpu_name,kind,n", [("b200-180gb", "all_gather", 4), ("h100-sxm-80gb", "all_reduce", 4)])
def test_a_larger_message_never_takes_less_time(gpu_name, kind, n):
    """NCCL's protocol and channel switches make the measured figures dip (B200, 4 GPUs, all-gather: 19.4 us at
    128 KiB, 13.5 us at 256 KiB; H100, 4 GPUs, all-reduce: 12.5 us at 16 KiB, 11.2 us at 32 KiB), and a decode
    step of twice the batch came out 9% faster. A message can be sent as a larger one (padded), so each size takes
    the least of the by-hand figures at it and at every larger measured size; the case has such a dip."""
    cm = _calibrated(gpu_name, n)
    sizes = _file(gpu_name)[kind][str(n)]["bytes"]
    by_hand = [_by_hand_s(gpu_name, kind, n, x) for x in sizes]
    assert any(a > b for a, b in zip(by_hand, by_hand[1:]))
    for i, x in enumerate(sizes):
        assert cm.collective_s(kind, x, n, "tp") == pytest.approx(min(by_hand[i:]), rel=1e-9), x


def test_decode_steps_grow_with_the_batch():
    """Llama-3.1-8B on four B200s (calibrated): a decode step of a larger batch does strictly more work (every
    kernel's FLOPs and bytes grow), so it never takes less time."""
    from llm_analysis.analysis import LLMAnalysis
    a = LLMAnalysis("meta-llama/Llama-3.1-8B", "b200-180gb", "bf16", ParallelismConfig(tp_size=4),
                    perf_model="calibrated")
    steps = [a.inference(batch_size_per_gpu=b, seq_len=1024, num_tokens_to_generate=64)["time_per_output_token"]
             for b in (8, 12, 16, 24, 32, 48, 64)]
    assert steps == sorted(steps), steps
