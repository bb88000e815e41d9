"""The serving engines' all-reduce (cost/engine_allreduce.py): interpolation of the measured tables,
which path each engine and launch takes, and bad input in a measured file."""

import json
from pathlib import Path

import pytest

from llm_analysis.config import ParallelismConfig, get_gpu_config_by_name
from llm_analysis.cost.calibrated import CalibratedCostModel
from llm_analysis.cost.engine_allreduce import engine_allreduce_timer, engine_table, fallback_note, parse_tables
from llm_analysis.cost.profiles import profile_for_gpu
from llm_analysis.errors import ConfigError
from llm_analysis.config import get_dtype_config_by_name
from llm_analysis.serving.step_time import StepCosts

MEASURED = Path(__file__).resolve().parents[2] / "llm_analysis" / "cost" / "profiles" / "measured"
SOURCE = {"repository": "github:example/measurements", "path": "x.parquet", "framework": "vllm 0", "device": "X"}
# a table written by hand: 2 and 4 GPUs, messages of 1000, 2000, 4000 bytes
HAND = {"custom_allreduce": {"vllm": {
    "graph": {"2": {"bytes": [1000, 2000, 4000], "latency_us": [10, 12, 20]},
              "4": {"bytes": [1000, 2000, 4000], "latency_us": [14, 18, 30]}},
    "source": SOURCE}}}


def _hand_table():
    return parse_tables(HAND, Path("hand.json"))[("vllm", "graph")]


def test_interpolation_by_bytes_and_group_size_derived_by_hand():
    t = _hand_table()
    assert t.time_s(2000, 2) == pytest.approx(12e-6)  # a measured point
    assert t.time_s(1500, 2) == pytest.approx(11e-6)  # halfway between 10 and 12 us
    assert t.time_s(3000, 4) == pytest.approx(24e-6)  # halfway between 18 and 30 us
    # 3 GPUs at 3000 bytes: 16 us on 2 GPUs (12 + (20 - 12) / 2), 24 us on 4, halfway
    assert t.time_s(3000, 3) == pytest.approx(20e-6)
    assert t.time_s(500, 2) == pytest.approx(10e-6)  # below the smallest message: its latency
    assert t.time_s(4001, 2) is None  # beyond the largest message: not the table's
    assert t.time_s(2000, 8) is None  # beyond the largest group: not the table's


def test_outside_the_table_or_the_node_the_nccl_timer_answers():
    table_gpu = get_gpu_config_by_name("h100-sxm-80gb")
    timer = engine_allreduce_timer(table_gpu, "vllm", "graph", 8, True, lambda b: 1.0)
    # 2 GB: beyond the largest measured message (1 GiB) the NCCL timer answers, carried on from the table's last
    # figure (its ratio to the timer there), so a larger message is never faster than the largest measured one
    top_s = _measured_us("h100-sxm-80gb", "vllm", "graph", 8, 2**30) * 1e-6
    assert timer(2e9) == pytest.approx(top_s, rel=1e-12)  # the constant timer, times top_s / 1.0
    linear = engine_allreduce_timer(table_gpu, "vllm", "graph", 8, True, lambda b: b * 1e-11)
    assert linear(2**30 * (1 + 1e-9)) == pytest.approx(linear(2**30), rel=1e-6)  # continuous at the edge
    assert linear(2 * 2**30) == pytest.approx(2 * top_s, rel=1e-9)  # the timer's growth beyond it
    assert timer(16384) < 1e-4  # inside: the measured figure
    assert engine_allreduce_timer(table_gpu, "vllm", "graph", 8, False, lambda b: 1.0)(16384) == 1.0  # leaves the node
    assert engine_allreduce_timer(table_gpu, "vllm", "graph", 16, True, lambda b: 1.0)(16384) == 1.0  # 16 GPUs


def _measured_us(gpu: str, engine: str, launch: str, n: int, nbytes: int) -> float:
    """The figure of the shipped measured file itself (read independently of the package)."""
    curve = json.loads((MEASURED / f"{gpu}.json").read_text())["custom_allreduce"][engine][launch][str(n)]
    return curve["latency_us"][curve["bytes"].index(nbytes)]


def _calibrated(gpu_name: str, tp: int, launch: str = "graph", engine=None) -> CalibratedCostModel:
    gpu = get_gpu_config_by_name(gpu_name)
    return CalibratedCostModel(gpu, get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=tp),
                               profile_for_gpu(gpu), launch, allreduce_engine=engine)


def test_each_engine_takes_its_own_table_and_launch():
    cm = _calibrated("h100-sxm-80gb", 8)
    for engine in ("vllm", "sglang", "trtllm"):
        got = cm.with_allreduce_engine(engine).collective_s("all_reduce", 16384, 8, "tp")
        assert got == pytest.approx(_measured_us("h100-sxm-80gb", engine, "graph", 8, 16384) * 1e-6)
    eager = cm.with_launch("eager")
    assert eager.with_allreduce_engine("vllm").collective_s("all_reduce", 16384, 8, "tp") == pytest.approx(
        _measured_us("h100-sxm-80gb", "vllm", "eager", 8, 16384) * 1e-6)
    # TensorRT-LLM was measured under CUDA graphs only: an eager step takes those figures
    assert eager.with_allreduce_engine("trtllm").collective_s("all_reduce", 16384, 8, "tp") == pytest.approx(
        _measured_us("h100-sxm-80gb", "trtllm", "graph", 8, 16384) * 1e-6)


def _measured_nccl_s(gpu_name: str, kind: str, n: int, nbytes: int) -> float:
    """NCCL's measured collective in the shipped file, read independently of the package: its bus bytes
    (2 (n - 1) / n of the buffer for an all-reduce, (n - 1) / n otherwise) over its bus bandwidth; a larger
    message never takes less time, so the least of that at this size and every larger one measured."""
    doc = json.loads((MEASURED / f"{gpu_name}.json").read_text())["nccl"][kind][str(n)]
    line = get_gpu_config_by_name(gpu_name).intra_node_bandwidth_in_GB_per_sec * 1e9
    factor = (2 if kind == "all_reduce" else 1) * (n - 1) / n
    return min(factor * x / (f * line) for x, f in zip(doc["bytes"], doc["busbw_over_line_rate"]) if x >= nbytes)


def test_engines_run_all_reduce_not_the_sequence_parallel_pair_and_training_keeps_nccl():
    cm = _calibrated("h100-sxm-80gb", 8)  # ParallelismConfig(tp_size=8): sp_size defaults to 8
    # NCCL inside one node: its measured collective (cost/measured_nccl.py)
    nccl = lambda kind: _measured_nccl_s("h100-sxm-80gb", kind, 8, 16384)  # noqa: E731
    vllm = cm.with_allreduce_engine("vllm")
    assert vllm.collective_s("reduce_scatter", 16384, 8, "tp") == pytest.approx(
        _measured_us("h100-sxm-80gb", "vllm", "graph", 8, 16384) * 1e-6)
    assert vllm.collective_s("all_gather", 16384, 8, "tp") == 0.0
    plain = cm.with_allreduce_engine("nccl")  # a C++ engine's static batches (native launch): NCCL's all-reduce
    assert plain.collective_s("reduce_scatter", 16384, 8, "tp") == pytest.approx(nccl("all_reduce"))
    assert plain.collective_s("all_gather", 16384, 8, "tp") == 0.0
    training = vllm.for_training()
    assert training.allreduce_engine is None
    assert training.collective_s("reduce_scatter", 16384, 8, "tp") == pytest.approx(nccl("reduce_scatter"))
    assert training.collective_s("all_reduce", 16384, 8, "tp") == pytest.approx(nccl("all_reduce"))
    # other groups are never the engine's
    assert vllm.collective_s("all_reduce", 16384, 8, "dp") == cm.with_allreduce_engine(None).collective_s(
        "all_reduce", 16384, 8, "dp")


def test_inference_takes_nccl_all_reduces_under_native_launch_only(analysis_builder):
    """inference() names no engine: FasterTransformer / GptSession (kernel_launch="native") run NCCL
    all-reduces per block; other launches keep the collectives the layout states, as training does."""
    kw = dict(gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=8)
    assert analysis_builder("meta-llama/Llama-3.1-8B", **kw).cost_model.allreduce_engine is None
    native = analysis_builder("meta-llama/Llama-3.1-8B", kernel_launch="native", **kw).cost_model
    assert native.allreduce_engine == "nccl" and native.for_training().allreduce_engine is None


def test_a_serving_step_times_its_engines_all_reduce(analysis_builder):
    """Llama-3.1-8B on tp 2, one decode token: 32 layers x 2 all-reduces + the embedding's = 65 messages
    of 4096 x 2 bytes; the step's token operators differ between engines by 65 x the tables' difference."""
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2)
    d = a.describer
    vllm, sglang = (StepCosts(a, d, allreduce_engine=e).token_s(True, 1) for e in ("vllm", "sglang"))
    per_message_us = _measured_us("h100-sxm-80gb", "sglang", "graph", 2, 8192) - \
        _measured_us("h100-sxm-80gb", "vllm", "graph", 2, 8192)
    assert sglang - vllm == pytest.approx(65 * per_message_us * 1e-6, rel=1e-6)


def test_fallback_by_profile_and_fabric():
    a100_40 = get_gpu_config_by_name("a100-sxm-40gb")  # no table: A100 SXM 80GB's (same NVSwitch, same rate)
    assert "a100-sxm-80gb" in fallback_note(a100_40)
    assert engine_table(a100_40, "vllm", "graph").time_s(16384, 8) == pytest.approx(
        _measured_us("a100-sxm-80gb", "vllm", "graph", 8, 16384) * 1e-6)
    pcie = get_gpu_config_by_name("h100-pcie-80gb")  # NVLink-bridged pairs: no custom all-reduce table
    assert engine_table(pcie, "vllm", "graph") is None and "NCCL" in fallback_note(pcie)
    cm = _calibrated("h100-pcie-80gb", 2, engine="vllm")
    assert cm.collective_s("all_reduce", 16384, 2, "tp") == pytest.approx(cm.with_allreduce_engine(None).collective_s(
        "all_reduce", 16384, 2, "tp"))


@pytest.mark.parametrize("edit, key, value", [
    (lambda e: e["graph"]["2"].pop("latency_us"), "custom_allreduce.vllm.graph.2", "bytes"),
    (lambda e: e["graph"]["2"]["latency_us"].__setitem__(1, -3.0), "custom_allreduce.vllm.graph.2.latency_us[1]",
     "-3.0"),
    (lambda e: e["graph"]["4"]["bytes"].__setitem__(2, 1500), "custom_allreduce.vllm.graph.4.bytes[2]", "1500"),
    (lambda e: e.pop("source"), "custom_allreduce.vllm.source", "None"),
    (lambda e: e["graph"].__setitem__("one", e["graph"]["2"]), "custom_allreduce.vllm.graph group size", "'one'"),
])
def test_bad_measured_file_names_file_key_and_value(edit, key, value):
    doc = json.loads(json.dumps(HAND))
    edit(doc["custom_allreduce"]["vllm"])
    with pytest.raises(ConfigError) as err:
        parse_tables(doc, Path("bad_gpu.json"))
    msg = str(err.value)
    assert "bad_gpu.json" in msg and key in msg and value in msg


def test_unknown_engine_in_the_file_is_refused():
    doc = {"custom_allreduce": {"vllm2": HAND["custom_allreduce"]["vllm"]}}
    with pytest.raises(ConfigError, match=r"bad\.json: custom_allreduce engine = 'vllm2'; valid: vllm, sglang, trtllm"):
        parse_tables(doc, Path("bad.json"))


def test_a_larger_prefill_batch_is_never_faster_across_the_measured_edge(analysis_builder):
    """Llama-3.1-8B on two H100s: the batch-64 prefill of 1,024 tokens sends 512 MiB all-reduces, the end of the
    measured table; batch 65 went past it to the ring model and came out faster (0.808 s -> 0.787 s)."""
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", tp_size=2, perf_model="calibrated")
    times = [a.inference(batch_size_per_gpu=b, seq_len=1024, num_tokens_to_generate=1)["prefill_latency"]
             for b in range(60, 72)]
    assert all(b >= x for x, b in zip(times, times[1:])), times
