"""serve() with pipeline stages in a worker (pp_size > 1; issue 26; serving/pipeline.py). The rounds of
micro-batches are derived by hand from each stage's own operators, timed one by one on the cost model."""

from __future__ import annotations

import math

import pytest

from llm_analysis.config import ParallelismConfig
from llm_analysis.errors import ConfigError
from llm_analysis.model import Phase
from llm_analysis.serving.engine import engine_settings
from llm_analysis.serving.layout import WorkerLayout, rank_step_timer, worker_layout
from llm_analysis.serving.pipeline import PipelineStepTimer, gpu_only
from llm_analysis.serving.step_time import step_timer

DENSE = "meta-llama/Llama-3.1-8B"  # 32 layers, hidden 4096, 8 KV heads of 128
MOE = "Qwen/Qwen3-30B-A3B"  # 48 layers, 128 experts top-8
NO_HOST = dict(step_overhead_s=0.0, step_overhead_per_seq_s=0.0, step_overhead_per_layer_s=0.0)


def _serving(a):
    return a.with_conventions(a.conventions_named(None))


def _stage_s(a, kv_bytes, stage, batch, context):
    """One stage's decode step of `batch` sequences at `context`, operator by operator (no host time)."""
    d = a.describer_for(kv_bytes)
    return sum(n * sum(a.cost_model.op_split_s(op)) for n, op in d.weighted_ops(Phase("decode", batch, 1, context),
                                                                                 stage))


def _timer(a, framework="vllm", **options):
    engine = engine_settings(a, framework, options)
    lay = worker_layout(a)
    return rank_step_timer(a, a, a.describer_for(engine.kv_cache_bytes), lay, engine), engine


@pytest.mark.parametrize("framework", ["vllm", "trtllm"])  # the host's work added, or overlapped (host_overlap)
def test_one_stage_round_is_the_plain_step(analysis_builder, framework):
    """pp = 1 in the round's rule: one micro-batch, one stage, latency = the step with the host's work."""
    a = _serving(analysis_builder(DENSE, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2))
    engine = engine_settings(a, framework, {"step_overhead_per_seq_s": 2e-4})  # the host's step binds from ~40 seqs
    d = a.describer_for(engine.kv_cache_bytes)
    plain = step_timer(a, d, engine)
    one = PipelineStepTimer({0: step_timer(a, d, gpu_only(engine))}, [0], engine, lambda tokens: 0.0)
    for decoders, ctx, chunks in ((1, 300.0, ()), (12, 700.0, ()), (40, 1500.0, ((512, 0),)), (3, 90.0, ((100, 64),)),
                                 (200, 500.0, ())):
        assert one.step_s(decoders, decoders * ctx, chunks) == pytest.approx(plain.step_s(decoders, decoders * ctx,
                                                                                          chunks), rel=1e-12)


@pytest.mark.parametrize("decoders", [1, 8])
def test_decode_round_by_hand(analysis_builder, decoders):
    """Two stages of 16 layers (the first with the embedding, the second with the LM head), no host time,
    roofline. With 8 decoders: two micro-batches of 4, each stage serves both in turn (2 x its time),
    one micro-batch's pass is both stages plus the hand-off of its 4 hidden states (4 x 4096 x 2 bytes, point
    to point); the round is the longer. With one decoder: one micro-batch (the bubble: each stage idles
    while the other runs), the round is the pass."""
    a = _serving(analysis_builder(DENSE, gpu="h100-sxm-80gb", perf_model="roofline", tp_size=1, pp_size=2))
    timer, engine = _timer(a, **NO_HOST)
    ctx = 1000
    m = min(2, decoders)
    s0, s1 = (_stage_s(a, engine.kv_cache_bytes, k, decoders // m, ctx) for k in (0, 1))
    nbytes = decoders // m * 4096 * 2
    handoff = a.cost_model.collective_s("p2p", nbytes, 2, "pp")
    expected = max(m * max(s0, s1), s0 + s1 + handoff)
    assert timer.step_s(decoders, decoders * ctx) == pytest.approx(expected, rel=1e-6)
    if decoders == 1:
        assert expected == pytest.approx(s0 + s1 + handoff, rel=1e-12)


def test_per_layer_time_stays_with_each_stage_by_hand(analysis_builder):
    """step_overhead_per_layer_s c is GPU-side: each of the two stages of 16 layers takes 16 c more per
    micro-batch. With one decoder the round is the pass through both stages: 32 c more than without."""
    a = _serving(analysis_builder(DENSE, gpu="h100-sxm-80gb", perf_model="roofline", tp_size=1, pp_size=2))
    c = 50e-6
    without, _ = _timer(a, **NO_HOST)
    timer, _ = _timer(a, **{**NO_HOST, "step_overhead_per_layer_s": c})
    assert timer.step_s(1, 1000.0) == pytest.approx(without.step_s(1, 1000.0) + 32 * c, rel=1e-9)


def test_host_bound_round_is_one_overhead_per_micro_batch(analysis_builder):
    """A host overhead far above the GPU time: the host schedules the two micro-batches one after the other."""
    a = _serving(analysis_builder(DENSE, gpu="h100-sxm-80gb", perf_model="roofline", tp_size=1, pp_size=2))
    timer, _ = _timer(a, step_overhead_s=1.0, step_overhead_per_seq_s=0.0)
    assert timer.step_s(8, 8 * 100.0) == pytest.approx(2.0, rel=1e-3)


def test_kv_and_weights_per_stage(analysis_builder):
    """Each of the two stages' GPUs holds 16 of the 32 layers' KV cache: 16 x 8 x 128 x 2 x 2 = 65536 bytes per token
    in bf16, half the whole model's; the pool's tokens are its bytes over that (whole blocks)."""
    s = analysis_builder(DENSE, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=1, pp_size=2).serve(
        concurrency=4, input_len=512, output_len=64, num_requests=0)
    per_token = 16 * 8 * 128 * 2 * 2
    assert s["num_gpus"] == 2 and s["gpus_per_replica"] == 2
    assert s["kv_pool_tokens_per_replica"] == pytest.approx(s["kv_pool_bytes_per_gpu"] / per_token, abs=s["block_size"])


def test_gpus_of_a_pipelined_layout_worker(analysis_builder):
    """tp 2 x attention_dp 2 x pp 2 = 8 GPUs a worker; two workers, 16."""
    a = analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2, attention_dp_size=2, pp_size=2,
                         dp_size=2)
    lay = worker_layout(a)
    assert (lay.tp, lay.attention_dp, lay.moe_tp, lay.moe_ep, lay.pp, lay.gpus_per_worker) == (2, 2, 2, 2, 2, 8)
    s = a.serve(concurrency=16, input_len=512, output_len=64, num_requests=0)
    assert s["num_gpus"] == 16 and s["gpus_per_replica"] == 8
    assert all(math.isfinite(s[k]) and s[k] > 0 for k in ("ttft_s", "tpot_s", "requests_per_s"))


def test_more_stages_hold_more_kv(analysis_builder):
    """Splitting the layers over more stages leaves each GPU fewer layers' weights: a larger pool per GPU."""
    one = analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2).serve(
        concurrency=8, input_len=512, output_len=64, num_requests=0)
    two = analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2, pp_size=2).serve(
        concurrency=8, input_len=512, output_len=64, num_requests=0)
    assert two["kv_pool_bytes_per_gpu"] > one["kv_pool_bytes_per_gpu"]


def test_pipelined_decode_pool(analysis_builder):
    """A decode pool of pipelined workers counts their stages' GPUs."""
    a = analysis_builder(DENSE, gpu="h100-sxm-80gb", perf_model="calibrated")
    s = a.serve(concurrency=8, input_len=1024, output_len=64, framework="trtllm", disaggregated={
        "prefill": {"workers": 1, "parallelism": ParallelismConfig(tp_size=1)},
        "decode": {"workers": 2, "parallelism": ParallelismConfig(tp_size=1, pp_size=2)}})
    assert s["num_gpus"] == 1 + 2 * 2 and s["decode_gpus_per_worker"] == 2
    assert s["tpot_s"] > 0


@pytest.mark.parametrize("fields,options,named", [
    (dict(tp_size=1, pp_size=33), {}, ("pp_size = 33", "num_layers = 32")),
    (dict(tp_size=1, pp_size=2), dict(speculative={"method": "mtp", "draft_length": 2, "mean_accepted_length": 1.5}),
     ("pp_size = 2", "speculative")),
])
def test_bad_pipelines_name_the_field(analysis_builder, fields, options, named):
    with pytest.raises(ConfigError) as err:
        analysis_builder(DENSE, gpu="h100-sxm-80gb", **fields).serve(concurrency=4, input_len=256, output_len=16, num_requests=0, **options)
    for text in named:
        assert text in str(err.value)


def test_bad_pipeline_in_a_pool_names_the_pool(analysis_builder):
    a = analysis_builder(DENSE, gpu="h100-sxm-80gb")
    with pytest.raises(ConfigError) as err:
        a.serve(concurrency=4, input_len=256, output_len=16, disaggregated={
            "prefill": {"workers": 1, "parallelism": ParallelismConfig(tp_size=1)},
            "decode": {"workers": 1, "parallelism": ParallelismConfig(tp_size=1, pp_size=40)}})
    assert "disaggregated['decode'] pp_size = 40" in str(err.value) and "num_layers = 32" in str(err.value)


def test_worker_layout_carries_uneven_stages(analysis_builder):
    a = analysis_builder(DENSE, gpu="h100-sxm-80gb", tp_size=1, pp_size=2, num_layers_in_first_pipeline_stage=12)
    lay = worker_layout(a)
    assert lay == WorkerLayout(1, 1, 1, 1, 1, pp=2, first_stage_layers=12)
    assert lay.stage_fields() == {"pp_size": 2, "num_layers_in_first_pipeline_stage": 12}


def test_cli_pp_flag_and_bad_pipeline_exit_2():
    import subprocess
    import sys
    base = [sys.executable, "-m", "llm_analysis", "serve", "--model_name", DENSE, "--gpu_name", "h100-sxm-80gb",
            "--concurrency", "4", "--input_len", "256", "--output_len", "16", "--num_requests", "0",
            "--output_format", "json"]
    ok = subprocess.run(base + ["--pp_size", "2"], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert '"num_gpus": 2' in ok.stdout
    bad = subprocess.run(base + ["--pp_size", "40"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2
    assert "pp_size = 40" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_a_chunk_with_copies_is_that_many_alike_chunks(analysis_builder):
    """(q, past, n) in a step's chunks stands for n alike chunks (prompts of one length packed into a step):
    the plain, pipelined and speculative timers give the step of the n chunks written out, to 1e-12."""
    from llm_analysis.serving.speculative import speculative_decoding
    a = _serving(analysis_builder(DENSE, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2, pp_size=4))
    engine = engine_settings(a, "vllm", {})
    d = a.describer_for(engine.kv_cache_bytes)
    plain = step_timer(a, d, engine)
    piped, _ = _timer(a)
    spec = speculative_decoding(a, {"method": "mtp", "draft_length": 3, "mean_accepted_length": 2.2})
    drafted = spec.timer(plain, a, engine)
    for timer in (plain, piped, drafted):
        for decoders, ctx, q, past, n in ((0, 0.0, 64, 0, 7), (12, 700.0, 100, 32, 5), (1, 90.0, 256, 0, 3)):
            written_out = [(q, past)] * n + [(10, 0)]
            assert timer.step_s(decoders, decoders * ctx, [(q, past, n), (10, 0)]) == pytest.approx(
                timer.step_s(decoders, decoders * ctx, written_out), rel=1e-12), (type(timer).__name__, n)
