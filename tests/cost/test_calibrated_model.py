"""The calibrated performance model (perf_model="calibrated") and the roofline bound.

Expected values are published measurements (cited per record in
benchmarks/data/validation: sources in each record) or hand derivations; the records
used here are in the REPORT half of benchmarks/accuracy.py's split (first byte
of sha256(id) odd), never the half the shipped profiles were fitted on.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

import llm_analysis
from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.cost.profiles import load_profile
from llm_analysis.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
VALIDATION = Path(os.environ.get("LLM_ANALYSIS_VALIDATION_DIR", REPO / "benchmarks" / "data" / "validation"))
needs_records = pytest.mark.skipif(not (VALIDATION / "measured_dev.json").exists(),
                                   reason="benchmarks/data/validation (measured records) is absent")
H100, A100 = get_gpu_config_by_name("h100-sxm-80gb"), get_gpu_config_by_name("a100-sxm-80gb")
LLAMA8B = get_model_config_by_name("meta-llama_Llama-3.1-8B")


@pytest.fixture(scope="module")
def accuracy():
    logging.disable(logging.WARNING)
    sys.path.insert(0, str(REPO / "benchmarks"))
    import accuracy as acc
    yield acc
    sys.path.remove(str(REPO / "benchmarks"))
    logging.disable(logging.NOTSET)


@pytest.fixture(scope="module")
def rows(accuracy):
    """(family, split, id, measured_s, roofline_s, calibrated_s) of every expressible record."""
    return accuracy.evaluate(accuracy.load_records(VALIDATION), accuracy.predictor_kwargs("calibrated"))[0]


@needs_records
def test_roofline_at_efficiency_one_is_below_every_measured_time(rows):
    above = [(rid, roof / meas) for _, _, rid, meas, roof, _ in rows if roof > meas]
    assert len(rows) > 300 and not above


def test_the_held_out_tables_are_expressible_and_bounded_below_by_the_roofline(accuracy):
    """benchmarks/holdout_records.json (TensorRT-LLM's v0.5/v0.8/v0.9 published throughput tables,
    never fitted on; rows equal to a validation record left out): every row is expressed, and the
    roofline at efficiency 1 is <= each measured time."""
    recs = json.loads((REPO / "benchmarks" / "holdout_records.json").read_text())
    rows, skipped = accuracy.evaluate(recs, accuracy.predictor_kwargs("roofline"))
    assert not skipped and len(rows) == len(recs) == 74
    assert not [(rid, roof / meas) for _, _, rid, meas, roof, _ in rows if roof > meas]


@needs_records
def test_no_held_out_row_repeats_a_validation_record():
    """A held-out row with the batch, prompt length and measured figure of a validation record is
    that record again (the v0.6.1 page reprints v0.5's L40S table): it would not be held out."""
    def figures(rec):
        return {round(float(v)) for v in rec.get("measured", {}).values() if isinstance(v, (int, float))}
    validation = json.loads((VALIDATION / "measured_dev.json").read_text())
    published = VALIDATION / "published_measurements.json"
    if published.exists():
        validation += json.loads(published.read_text())
    seen = {(str((r.get("setup") or {}).get("batch")), (r.get("setup") or {}).get("input_len"), f)
            for r in validation for f in figures(r)}
    held = json.loads((REPO / "benchmarks" / "holdout_records.json").read_text())
    assert not [r["id"] for r in held for f in figures(r)
                if (str(r["setup"]["batch"]), r["setup"]["input_len"], f) in seen]


# report-half records with their published time (s): Megatron-LM (arXiv 2104.04473 Table 1 via
# benchmarks/accuracy_records), Korthikanti et al. (arXiv 2205.05198 Table 4), gpt-fast README
# (pytorch-labs/gpt-fast, A100 tokens/s, incl. int8/int4 weight-only decode on one GPU, which a 64-row
# tile quantisation once put 49%/105% slow), TensorRT-LLM docs (performance.md first-token latency),
# MosaicML llm-foundry fp8 on H100 at 32k tokens (attention stays bf16; once 45-66% fast)
# Issue 27 (items 3, 5) took the operator efficiencies from measured kernels (TensorRT-LLM's, timed by
# aiconfigurator) instead of end-to-end fits that had absorbed what the model lacks; what no longer meets
# issue 10's in-sample targets is marked as an expected failure (strict: it must be un-marked once it
# passes), each with its figure, instead of loosening the target. See docs/validation.md.
_REFIT = ("issue 27 refit on measured operators (flash backward timed at 2.5x the forward): {}; pre-2023 "
          "engines' GEMMs below the measured plateau are not modelled (docs/validation.md)")
PUBLISHED = ("megatron2021-t1-76.1b", "megatron2021-t1-310.1b", "korthikanti2022-22b-fullrecompute",
             "gptfast-llama-2-7b-bf16-tp1", "gptfast-llama-3-1-8b-bf16-tp8", "gptfast-llama-3-1-70b-8-bit-1gpu",
             "gptfast-llama-2-70b-4-bit-g-32-1gpu",
             # (was an expected failure at 0.75x of measured: a 1B model at 32k tokens is attention-bound, and
             # since the flash backward runs at its measured rate below the forward's (cost/gemm.py
             # flash_backward_rate) and the loss passes are timed (training/loss.py) it is within 30%)
             "mpt-h100-80gb-fp8-1b-s32768-g8",
             "trtllm-v05-ttft-h100-sxm5-80gb-llama-70b-tp4-i2048")


@needs_records
@pytest.mark.parametrize("rid", PUBLISHED)
def test_calibrated_prediction_of_published_records(rows, accuracy, rid):
    row = next((r for r in rows if r[2] == rid), None)
    if row is None:
        pytest.skip(f"{rid} not in the validation files")
    assert accuracy.split_of(rid) == "report"  # never fitted on
    assert abs(row[5] / row[3] - 1) <= 0.30  # p90 target of issue 10
    assert row[4] <= row[3] <= row[5] * 1.3  # the roofline stays below


# (an expected failure at 11% / 25% until the loss passes and the flash backward's rate were timed:
# report half 10% / 25% since, docs/validation.md)
@needs_records
def test_report_half_error_targets(rows):
    errs = sorted(abs(r[5] / r[3] - 1) for r in rows if r[1] == "report")
    assert statistics.median(errs) <= 0.10  # median as accuracy.py prints it (10% target; measured 9%)
    assert errs[int(0.9 * len(errs))] <= 0.30  # p90 (measured 19%)


# report-half families and issue 10's targets (median <= 10%, p90 <= 30%, the median as
# benchmarks/accuracy.py prints it: statistics.median, the mean of the middle two of an even count); measured
# FasterTransformer 10%/20%, Korthikanti 8%/15%, Megatron 6%/16%, MosaicML 8%/17%, TensorRT-LLM 9%/17%
# (12 records: the pre-XQA GQA decodes are skipped), gpt-fast 5%/14%. TensorRT-LLM was 12%/22% while
# Ampere's KV-cache streaming efficiency was an assumed 0.7 (vLLM's paged kernel): two A100 Llama-7B
# long-context decodes (batch 52-60) came out 1.20-1.27x slow. It is 0.92 since (FlashInfer's decode kernels
# stream the KV cache at close to 100% of HBM bandwidth on A100: README "Performance models"); the fit half
# holds no Ampere decode that is mostly KV reads, so that value is an assumption from that source, not a fit.
# The DeepSpeed ZeRO-3 family has two report-half records: test_deepspeed_zero3_report_records.


@needs_records
@pytest.mark.parametrize("fam", (
    pytest.param("FasterTransformer", marks=pytest.mark.xfail(strict=True, reason=_REFIT.format(
        "FasterTransformer 18% / 30%; 11% / 24% since its C++ launches have a floor of their own (collectives "
        "waiting one) and its static batches compute at the sustained share; small models' large-batch "
        "prefills still come out 0.6-0.75x"))),
    # Korthikanti (9% / 17%) and MosaicML (8% / 22%) meet the targets again since the flash backward is
    # timed as executed and MosaicML's H100 runs time llm-foundry's attention kernel
    "Korthikanti",
    "Megatron",
    "MosaicML",
    # TensorRT-LLM (6.4% / 15.0%) meets them since round 18 times the tensor-parallel collectives of fp8 /
    # FP4 models at the 16-bit residual stream's bytes (it was 10.8% / 20.2%: the 405B max-throughput rows fast)
    "TensorRT-LLM",
    "gpt-fast"))
def test_report_half_error_targets_per_family(rows, fam):
    errs = sorted(abs(r[5] / r[3] - 1) for r in rows if r[1] == "report" and r[0] == fam)
    assert len(errs) >= 5
    assert statistics.median(errs) <= 0.10 and errs[int(0.9 * len(errs))] <= 0.30


@needs_records
def test_deepspeed_zero3_report_records(rows):
    """The two report-half DeepSpeed v0.3 ZeRO-3 rows of Narayanan et al. 2021 Table 2 (175B on 1536
    GPUs, 530B on 640), predicted with the framework's terms fitted on the other four
    (benchmarks/framework_terms.json): each within the 10% median target, the roofline below."""
    rep = [r for r in rows if r[0] == "DeepSpeed ZeRO-3" and r[1] == "report"]
    assert len(rep) == 2
    for fam, split, rid, measured, roof, pred in rep:
        assert abs(pred / measured - 1) <= 0.10, rid
        assert roof <= measured, rid


def test_only_the_roofline_calls_its_times_lower_bounds():
    """At efficiency 1 the roofline's notes say its times are lower bounds; the calibrated model's
    times are expected ones (its bounds are the `_lower_bound` entries), so its notes must not."""
    kw = dict(batch_size_per_gpu=4, seq_len=512, num_tokens_to_generate=16)
    for pm, says in (("roofline", True), ("calibrated", False)):
        notes = LLMAnalysis(LLAMA8B, H100, perf_model=pm).inference(**kw)["notes"]
        assert any("lower bound" in n for n in notes) is says, (pm, notes)
        train = LLMAnalysis(LLAMA8B, H100, parallelism_config=ParallelismConfig(dp_size=8), perf_model=pm).training(
            batch_size_per_gpu=1, seq_len=2048, gradient_accumulation_steps=2, ds_zero=1)["notes"]
        assert any("lower bound" in n for n in train) is says, (pm, train)


def test_calibrated_summary_keeps_the_keys_and_adds_lower_bounds():
    roof = LLMAnalysis(LLAMA8B, H100).inference(batch_size_per_gpu=4, seq_len=512, num_tokens_to_generate=16)
    cal = LLMAnalysis(LLAMA8B, H100, perf_model="calibrated").inference(batch_size_per_gpu=4, seq_len=512,
                                                                         num_tokens_to_generate=16)
    assert set(roof) <= set(cal)
    for key in ("prefill_latency", "decode_latency", "total_latency"):
        assert cal[f"{key}_lower_bound"] == pytest.approx(roof[key], rel=1e-12)
        assert cal[key] > cal[f"{key}_lower_bound"]


def test_batch_one_decode_is_not_faster_than_its_kernel_floor():
    """A decode step launches >= 10 kernels per layer: under CUDA graphs each costs at least the
    profile's floor, so a step of a 32-layer model takes >= 32 x 10 x floor."""
    a = LLMAnalysis(LLAMA8B, H100, perf_model="calibrated")
    floor = load_profile("hopper").values["kernel_floor_graph_s"]
    step = a.inference(batch_size_per_gpu=1, seq_len=16, num_tokens_to_generate=8)["decode_latency"]
    assert step >= 32 * 10 * floor


def test_profile_refusals(tmp_path):
    doc = load_profile("hopper").to_dict()
    bad = dict(doc, parameters={**doc["parameters"], "warp_magic": {"value": 1, "source": "x"}})
    (tmp_path / "unknown.json").write_text(json.dumps(bad))
    with pytest.raises(ConfigError, match="warp_magic"):
        LLMAnalysis(LLAMA8B, H100, perf_model=str(tmp_path / "unknown.json"))
    with pytest.raises(ConfigError, match="'gpus'"):  # a Hopper profile for an A100
        LLMAnalysis(LLAMA8B, A100, perf_model=str(REPO / "llm_analysis/cost/profiles/hopper.json"))
    other = dict(load_profile("ampere").to_dict(), gpus={"h100-sxm-80gb": {"num_sms": 132}})
    (tmp_path / "gen.json").write_text(json.dumps(other))
    with pytest.raises(ConfigError, match="'generation'"):
        LLMAnalysis(LLAMA8B, H100, perf_model=str(tmp_path / "gen.json"))
    with pytest.raises(ConfigError, match="perf_model"):
        LLMAnalysis(LLAMA8B, H100, perf_model="fast")


def _point(i, b, s, n, truth):
    from llm_analysis.cost.calibration import predict_s
    setup = {"model_name": "meta-llama_Llama-3.1-8B", "gpu_name": "h100-sxm-80gb",
             "args": {"batch_size_per_gpu": b, "seq_len": s, "num_tokens_to_generate": n}}
    return {"id": f"p{i}", "setup": setup, "value": predict_s(setup, truth) * 1e3, "unit": "ms"}


def test_calibrate_recovers_known_parameters_and_round_trips(tmp_path):
    """Points made with gemm 0.6 / HBM 0.8 (a hand-chosen truth) give those values back; the saved
    profile reused with perf_model=path predicts the measured points."""
    truth = load_profile("hopper").with_values({"gemm_plateau_efficiency": 0.6, "hbm_efficiency": 0.8}, "truth")
    pts = [_point(i, *x, truth) for i, x in enumerate([(1, 128, 1), (8, 2048, 1), (1, 512, 64), (16, 512, 32)])]
    prof = llm_analysis.calibrate(pts)
    assert prof.values["gemm_plateau_efficiency"] == pytest.approx(0.6, rel=1e-3)
    assert prof.values["hbm_efficiency"] == pytest.approx(0.8, rel=1e-3)
    llm_analysis.save_profile(prof, tmp_path / "mine.json")
    got = LLMAnalysis(LLAMA8B, H100, perf_model=str(tmp_path / "mine.json")).inference(
        batch_size_per_gpu=8, seq_len=2048, num_tokens_to_generate=1)["total_latency"]
    assert got * 1e3 == pytest.approx(pts[1]["value"], rel=1e-3)


def test_calibrate_refusals():
    truth = load_profile("hopper")
    p0, p1 = _point(0, 1, 128, 1, truth), _point(1, 8, 512, 1, truth)
    with pytest.raises(ConfigError, match="at least as many points"):
        llm_analysis.calibrate([p0])
    with pytest.raises(ConfigError, match="inconsistent units"):
        llm_analysis.calibrate([p0, dict(p1, unit="tokens/s", setup=dict(p1["setup"], tokens=4096))])
    with pytest.raises(ConfigError, match="not expressible"):
        llm_analysis.calibrate([p0, dict(p1, setup=dict(p1["setup"], cpu_offload=True))])


def test_cli_shows_expected_and_lower_bound():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, "-m", "llm_analysis.analysis", "infer", "--model_name",
                        "meta-llama_Llama-3.1-8B", "--gpu_name", "h100-sxm-80gb", "--perf_model", "calibrated"],
                       cwd=REPO, env=dict(env, COLUMNS="200", NO_COLOR="1"), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    for label in ("time to first token", "time per output token", "end-to-end latency"):
        line = next(ln for ln in p.stdout.splitlines() if ln.strip().startswith(label))
        assert "expected " in line and "(lower bound " in line
    p = subprocess.run([sys.executable, "-m", "llm_analysis.analysis", "infer", "--gpu_name", "h100-sxm-80gb",
                        "--gpu_profile", "missing.json"], cwd=REPO, env=env, capture_output=True, text=True)
    assert p.returncode == 2 and "missing.json" in p.stderr


def test_fit_scopes_add_the_operator_efficiencies_and_restore_the_framework_set(accuracy):
    """benchmarks/fit_profiles.py --scope: 'all' fits the operator efficiencies of every generation with
    them on top of the framework terms, 'ampere-era' only Ampere's, 'framework' the framework terms only."""
    import fit_profiles as fp
    framework = {g: tuple(n) for g, n in fp.PARAMETERS.items()}
    try:
        fp.use_scope("all")
        for gen, names in fp.OPERATOR_PARAMETERS.items():
            assert fp.PARAMETERS[gen] == names + framework[gen]
        fp.use_scope("ampere-era")
        assert fp.PARAMETERS["ampere"] == fp.OPERATOR_PARAMETERS["ampere"] + framework["ampere"]
        assert fp.PARAMETERS["hopper"] == framework["hopper"]
    finally:
        fp.use_scope("framework")
    assert fp.PARAMETERS == framework


@needs_records
def test_mosaicml_h100_runs_time_llm_foundrys_triton_attention_kernel(accuracy, monkeypatch):
    """MosaicML's H100 tables were made by llm-foundry's benchmarking script, whose default attn_impl was
    'triton' (FlashAttention in Triton). FlashAttention-2 is 1.3-2.5x faster than it (arXiv 2307.08691,
    section 4; 1.9 the middle) and reaches 35% of the H100 peak (arXiv 2407.08608): the Triton kernel
    0.35 / 1.9, whatever profile a fit tries. The A100 records keep the Ampere profile's kernel."""
    import accuracy_records as ar
    recs = {r["id"]: r for r in accuracy.load_records(VALIDATION)}
    triton_on_h100 = 0.35 / 1.9  # the two papers' figures, by hand
    h100 = ar.case_of(recs["mpt-h100-80gb-bf16-1b-s32768-g8"])
    stated = ar._triton_flash_attention_on_hopper("calibrated")
    assert stated.values["attn_prefill_efficiency"] == pytest.approx(triton_on_h100, rel=1e-12)
    # a trial profile of a fit gets the statement too: its own attention value is not what the run executed
    trial = load_profile("hopper").with_values({"attn_prefill_efficiency": 0.9}, "trial")
    triton_s = h100.run({"perf_model": "calibrated"})
    assert triton_s == pytest.approx(h100.run({"perf_model": stated}), rel=1e-12)
    assert h100.run({"perf_model": trial}) == pytest.approx(triton_s, rel=1e-12)
    assert h100.run({"perf_model": "roofline"}) < h100.measured_s
    a100 = ar.case_of(recs["mpt-a100-80gb-with-1600-gbps-node--1b-s65536-g8"])
    assert a100.run({"perf_model": "calibrated"}) == pytest.approx(a100.run({"perf_model": load_profile("ampere")}),
                                                                   rel=1e-12)
    # against FlashAttention-2 itself (35% of peak), the 32k-token step is slower
    monkeypatch.setattr(ar, "TRITON_FLASH_SLOWDOWN", 1.0)
    assert triton_s > 1.05 * h100.run({"perf_model": "calibrated"})
