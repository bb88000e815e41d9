"""Every training run of the shared validation set that really ran must fit in
the memory estimate (issue 11, item 6), with the framework terms switched on
(training/overheads.py): a 1 GB CUDA context and a 5% allocator-fragmentation
allowance for every run, plus what each framework does (the distributed
optimizer and fp32 main grads for Megatron-Core, fp32 gradient accumulation for
Megatron-DeepSpeed bf16; benchmarks/accuracy_records.py `training_setup`, which
maps each record's model, GPU, layout, batch, recomputation and ZeRO stage onto
the public API). The FasterTransformer rows measured out of memory must not
fit or be flagged as too full for a serving framework (inference).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from llm_analysis.errors import DoesNotFitError
from llm_analysis.facade import LLMAnalysis

ROOT = Path(__file__).resolve().parents[2]
VALIDATION = ROOT / "benchmarks" / "data" / "validation"
FILES = ("measured_dev.json", "published_measurements.json")
pytestmark = pytest.mark.skipif(not all((VALIDATION / f).is_file() for f in FILES),
                                reason="benchmarks/data/validation (the validation records) is absent")

# Llama 3 405B (arXiv 2407.21783 §3.3.2) runs Meta's layout, one layer fewer on the first and
# the last pipeline stage (7, 14 x 8, 7 of 126 over pp 16; accuracy_records._llama3_stage_layers):
# the even split puts 8 layers x 16 micro-batches in flight on stage 0 (81.0-81.4 GB with the
# overheads, inside the H100's 80 GiB = 85.9 GB but above Meta's layout).


def _records(kind: str):
    out = []
    for f in FILES:
        p = VALIDATION / f
        if p.is_file():
            out += [r for r in json.loads(p.read_text()) if r.get("kind") == kind]
    return out


def _setups():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import accuracy_records as ar
    out, skipped = [], []
    for rec in _records("training"):
        try:
            out.append((rec["id"], ar.training_setup(rec)))
        except ar.Skip as e:
            skipped.append((rec["id"], str(e)))
    return out, skipped


SETUPS, SKIPPED = _setups() if all((VALIDATION / f).is_file() for f in FILES) else ([], [])

# Runs that ran but the memory estimate does not fit (strict xfail: a fix makes them fail loudly).
# Nemotron-4 340B on 128 and 256 H100 (dgxc-benchmarking v24.11.1: tp 8, pp 8, vp 12, dp 2 / 4):
# 95-115 GB estimated against 85.9 GB. The recipe's exact memory settings (recomputation,
# gradient buffer dtype, how many micro-batches an interleaved 1-layer chunk keeps in flight) are
# not in the record; the physics issue (27) revisits them. The 512-2048 GPU rows of the same
# table fit.
KNOWN_MISSES = {f"dgxc-v24.11.1-nemotron4-340b-{d}-{n}gpu" for d in ("bf16", "fp8") for n in (128, 256)}


def test_most_training_records_are_mapped():
    # 114 MosaicML rows + Megatron 2021, Korthikanti 2022, Megatron-Core, BLOOM, Llama 3;
    # the rest state no layout (GPU-hour cards, PaLM's MFU table, llm.c without a micro-batch)
    assert len(SETUPS) >= 160, SKIPPED
    assert {rid.split("-")[0] for rid, _ in SETUPS} >= {"mpt", "megatron2021", "korthikanti2022", "mcore",
                                                         "bloom", "llama3"}


@pytest.mark.parametrize("rid,setup", [
    pytest.param(rid, setup, marks=pytest.mark.xfail(raises=DoesNotFitError, strict=True,
                                                     reason="memory estimate above a run that ran (see KNOWN_MISSES)"))
    if rid in KNOWN_MISSES else (rid, setup) for rid, setup in SETUPS], ids=[rid for rid, _ in SETUPS])
def test_run_that_ran_fits(rid, setup):
    analysis = setup.analysis()
    s = analysis.training(**setup.train_kw)
    assert s["estimated_peak_memory_per_gpu"] <= setup.gpu.mem_per_GPU_in_GB * 2**30
    # the framework terms are really in the estimate
    assert s["cuda_context_memory_per_gpu"] == 1e9
    assert s["fragmentation_memory_per_gpu"] > 0


def test_megatron_core_runs_need_the_distributed_optimizer():
    """Without the distributed optimizer (fp32 main grads kept), the 462B weak-scaling
    run (tp 8, pp 16: 462e9 / 128 = 3.6e9 parameters per GPU) needs 12 B/param of
    optimizer state unsharded = 43 GB on top of 7 GB of weights and 14 GB of fp32
    grads: it cannot fit; with the states over 48 ranks it does."""
    setup = dict(SETUPS)["mcore-h100-weak-462b"]
    kw = {**setup.train_kw, "distributed_optimizer": False}
    with pytest.raises(DoesNotFitError):
        setup.analysis().training(**kw)


def test_llama3_405b_metas_stage_layout_lowers_the_first_stage_peak():
    """126 layers over pp 16 as 7, 14 x 8, 7 (arXiv 2407.21783 §3.3.2): one layer fewer on
    the first stage, which holds the most micro-batches in flight (16 under 1F1B), takes
    its activations of 16 micro-batches of one layer off the peak; with the even split (8 on
    each of the first 14 stages) the peak is higher."""
    from llm_analysis.config import ParallelismConfig
    setup = dict(SETUPS)["llama3-405b-t4-row1"]
    metas = setup.analysis()
    assert [sum(g.values()) for g in metas.describer.stage_groups] == [7] + [8] * 14 + [7]
    even = {**setup.par.model_dump(), "num_layers_in_first_pipeline_stage": None,
            "num_layers_in_last_pipeline_stage": None}
    analysis = LLMAnalysis(setup.model, setup.gpu, setup.dtype, ParallelismConfig(**even))
    peak_even = analysis.training(**setup.train_kw)["estimated_peak_memory_per_gpu"]
    assert metas.training(**setup.train_kw)["estimated_peak_memory_per_gpu"] < peak_even


def _ft_oom_rows():
    return [r for r in _records("inference") if r["id"].startswith("ft-") and r["measured"].get("oom")]


@pytest.mark.parametrize("record", _ft_oom_rows(), ids=lambda r: r["id"])
def test_fastertransformer_oom_rows_do_not_fit_or_are_flagged(record):
    """A row FasterTransformer ran out of memory on either does not fit our count or is
    flagged as leaving less than a serving framework's reserve (inference/run.py
    SERVING_MEMORY_SHARE)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import accuracy_records as ar
    from llm_analysis.config import ParallelismConfig
    s = record["setup"]
    model = ar.model_of(s, [])
    a = LLMAnalysis(model, ar.gpu_of(s["gpu"]), ar.dtype_of(s),
                    ParallelismConfig(tp_size=s.get("tp", 1), pp_size=s.get("pp", 1)))
    try:
        summary = a.inference(batch_size_per_gpu=s["batch"], seq_len=s["input_len"],
                              num_tokens_to_generate=s["output_len"])
    except DoesNotFitError:
        return
    assert summary["memory_used_per_gpu"] > 0.9 * summary["gpu_memory_per_gpu"]
    assert any("may not fit in practice" in n for n in summary["notes"]), summary["notes"]
