"""serve() on worker layouts: attention data parallelism and expert parallelism (issue 26;
serving/layout.py). Expected values are derived by hand from the model's shapes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from answers import serve_refused

import llm_analysis
from llm_analysis.config import ParallelismConfig
from llm_analysis.errors import ConfigError
from llm_analysis.serving.engine import engine_settings
from llm_analysis.serving.layout import (WorkerLayout, all_to_all_bytes_per_token, busiest_group_factor,
                                         layout_step_costs, weight_bytes_per_gpu, worker_layout)
from llm_analysis.serving.step_time import StepTimer, step_timer

MOE = "Qwen/Qwen3-30B-A3B"  # 48 MoE layers, 128 experts top-8, hidden 2048, expert width 768, 32 heads / 4 KV
DENSE = "meta-llama/Llama-3.1-8B"
LOAD = dict(concurrency=16, input_len=512, output_len=64, num_requests=0)


def _serving(a):
    return a.with_conventions(a.conventions_named(None))


def test_no_attention_dp_no_ep_is_the_tensor_parallel_answer(analysis_builder):
    """attention_dp = 1 and moe_ep = 1 (given or left out) is today's tensor-parallel worker."""
    plain = analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2).serve(**LOAD)
    given = analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2, attention_dp_size=1,
                             moe_tp_size=2, moe_ep_size=1).serve(**LOAD)
    for key in ("ttft_s", "tpot_s", "e2e_s", "requests_per_s", "kv_pool_tokens_per_replica", "num_gpus"):
        assert given[key] == plain[key]


@pytest.mark.parametrize("perf_model", ["roofline", "calibrated"])
def test_layout_step_model_reduces_to_the_plain_one(analysis_builder, perf_model):
    """The layout's two-part step (attention side + routed experts on their own layout), forced on a worker
    with attention_dp = 1 and moe_ep = 1, gives the plain step's times (the same operators, split in two)."""
    a = _serving(analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model=perf_model, tp_size=2))
    engine = engine_settings(a, "vllm", {})
    plain = step_timer(a, a.describer_for(engine.kv_cache_bytes), engine)
    forced = StepTimer(layout_step_costs(a, WorkerLayout(2, 1, 2, 1, 1), engine.kv_cache_bytes, None,
                                         allreduce_engine=engine.framework), engine,
                       plain.layers)
    for decoders, ctx, chunks in ((1, 300.0, ()), (12, 700.0, ()), (40, 1500.0, ((512, 0),)), (3, 90.0, ((100, 64),))):
        assert forced.step_s(decoders, decoders * ctx, chunks) == pytest.approx(
            plain.step_s(decoders, decoders * ctx, chunks), rel=1e-9)


def test_all_to_all_bytes_per_token_by_hand(analysis_builder):
    """Top-8 routing, hidden 2048, bf16 activations, 8 expert-parallel GPUs: each token's hidden state goes to 8
    experts, 7/8 of them on other GPUs: 8 x 2048 x 2 x 7/8 = 28672 bytes per MoE layer each way."""
    a = analysis_builder(MOE, gpu="h100-sxm-80gb")
    m = a.model_config
    assert all_to_all_bytes_per_token(m, 2, 8) == 8 * 2048 * 2 * 7 / 8 == 28672
    assert all_to_all_bytes_per_token(m, 2, 1) == 0
    # the operators serve() times carry the same bytes: t tokens per expert rank, 8 x 2048 elements each
    from llm_analysis.model import Phase
    e = _serving(analysis_builder(MOE, gpu="h100-sxm-80gb", tp_size=1, dp_size=8, ep_size=8))
    t = 32
    ops = [op for _, op in e.describer.weighted_ops(Phase("decode", t, 1, 64)) if op.comm_group == "ep"]
    assert len(ops) == 2  # dispatch and combine
    for op in ops:
        assert op.collective == "all_to_all" and op.comm_group_size == 8
        # the (n - 1) / n that leaves the GPU is the collective's own factor
        assert op.comm_bytes_per_gpu * 7 / 8 / t == pytest.approx(all_to_all_bytes_per_token(m, 2, 8), rel=1e-12)


def test_attention_dp_adds_the_dispatch(analysis_builder):
    """With attention replicas the MoE layers dispatch and combine tokens: a rank's step costs its attention
    side, the experts' share and two all-to-alls per MoE layer; without them (tp = 8, moe_ep = 8) no
    all-to-all (every GPU holds every token after the attention all-reduce)."""
    a = _serving(analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="roofline", tp_size=1, attention_dp_size=8))
    engine = engine_settings(a, "vllm", {})
    lay = worker_layout(a)
    assert (lay.tp, lay.attention_dp, lay.moe_tp, lay.moe_ep, lay.ranks, lay.gpus_per_worker) == (1, 8, 1, 8, 8, 8)
    with_dispatch = layout_step_costs(a, lay, engine.kv_cache_bytes, None)
    e = with_dispatch.experts
    no_dispatch = layout_step_costs(a, WorkerLayout(8, 1, 1, 8, 1), engine.kv_cache_bytes, None).experts
    tokens = 64
    assert e.token_s(True, tokens) > no_dispatch.token_s(True, tokens)
    # the difference is the two all-to-alls of all 48 layers, timed on NVLink by the analysis' cost model
    from llm_analysis.model import Phase
    ed = _serving(analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="roofline", tp_size=1, dp_size=8, ep_size=8))
    a2a = sum(n * ed.cost_model.op_time_s(op) for n, op in ed.describer.weighted_ops(Phase("decode", tokens, 1, 64))
              if op.comm_group == "ep")
    assert e.token_s(True, tokens) - no_dispatch.token_s(True, tokens) == pytest.approx(a2a, rel=1e-9)


def test_weights_per_gpu_follow_the_layout(analysis_builder):
    """tp 1 x attention_dp 8, experts over 8: every GPU holds the attention side whole (replicated) and 1/8 of
    the routed experts: 48 layers x 128 experts x 3 x 2048 x 768 parameters, 2 bytes each."""
    a = _serving(analysis_builder(MOE, gpu="h100-sxm-80gb", tp_size=1, attention_dp_size=8))
    total = a.get_num_params_total()
    routed = 48 * 128 * 3 * 2048 * 768
    expected = (total - routed) * 2 + routed * 2 / 8
    assert weight_bytes_per_gpu(a, worker_layout(a)) == pytest.approx(expected, rel=1e-9)
    # tp 8 with experts over 8 ("TEP"): attention split 8 ways, experts 8 ways
    b = _serving(analysis_builder(MOE, gpu="h100-sxm-80gb", tp_size=8, moe_ep_size=8))
    tp8 = _serving(analysis_builder(MOE, gpu="h100-sxm-80gb", tp_size=8))
    assert weight_bytes_per_gpu(b, worker_layout(b)) == pytest.approx(tp8.get_weight_memory_per_gpu(), rel=1e-9)


def test_kv_pool_per_attention_replica(analysis_builder):
    """Each attention replica keeps its own requests' cache: a worker of 8 replicas holds 8 ranks' pools."""
    s = analysis_builder(MOE, gpu="h100-sxm-80gb", tp_size=1, attention_dp_size=8, perf_model="calibrated").serve(**LOAD)
    assert s["num_gpus"] == 8 and s["gpus_per_replica"] == 8 and s["num_replicas"] == 1
    assert s["kv_pool_tokens_per_replica"] == 8 * (s["kv_pool_tokens_per_replica"] // 8)
    assert s["max_running_requests_per_replica"] == 8 * s["max_running_requests_per_rank"]
    # Little's law holds over the ranks
    assert s["requests_per_s"] * s["e2e_s"] == pytest.approx(16, rel=1e-9)
    # the notes count the same pool: each attention replica's, and the worker's (the answer's figure); they
    # had called the attention replica's pool "per replica" beside the answer's worker-wide figure
    note = next(n for n in s["notes"] if n.startswith("KV pool:"))
    per_rank = s["kv_pool_tokens_per_replica"] // 8
    assert note.startswith(f"KV pool: {per_rank} tokens per attention replica "
                           f"({s['kv_pool_tokens_per_replica']} per worker of 8)"), note
    plain = analysis_builder(MOE, gpu="h100-sxm-80gb", tp_size=1, perf_model="calibrated").serve(**LOAD)
    note = next(n for n in plain["notes"] if n.startswith("KV pool:"))
    assert note.startswith(f"KV pool: {plain['kv_pool_tokens_per_replica']} tokens per replica in blocks"), note


def test_attention_dp_serves_more_than_one_replica_of_eight(analysis_builder):
    """Eight attention replicas with experts spread over them run 2 clients each: faster per token than one
    tensor-parallel group of 8 running all 16 at once would be at attention_dp = 1 with tp = 1 (that does
    not fit); checked against dp_size = 8 replicas of the whole model on one GPU each where it fits: the
    layout's memory per GPU is lower (experts split 8 ways)."""
    lay = analysis_builder(MOE, gpu="h100-sxm-80gb", tp_size=1, attention_dp_size=8, perf_model="calibrated")
    rep = analysis_builder(MOE, gpu="h100-sxm-80gb", tp_size=1, dp_size=8, perf_model="calibrated")
    s_lay, s_rep = lay.serve(**LOAD), rep.serve(**LOAD)
    assert s_lay["kv_pool_bytes_per_gpu"] > s_rep["kv_pool_bytes_per_gpu"]
    assert s_lay["num_gpus"] == s_rep["num_gpus"] == 8


@pytest.mark.parametrize("model,fields,named", [
    (DENSE, dict(tp_size=2, moe_ep_size=2), ("moe_ep_size = 2", "has no experts")),
    (MOE, dict(tp_size=1, attention_dp_size=3), ("moe_ep_size = 3", "moe_num_experts = 128")),
    # pipeline stages are served (test_serve_pipeline.py); one stage per layer at most
    (MOE, dict(tp_size=2, pp_size=2, cp_size=2), ("cp_size = 2",)),
    # a training-style ep_size is read as the layout it describes, not beside a serving layout
    (MOE, dict(tp_size=2, dp_size=2, ep_size=2, attention_dp_size=2), ("ep_size = 2", "attention_dp_size")),
])
def test_bad_layouts_are_refused_by_name(analysis_builder, model, fields, named):
    serve_refused(analysis_builder(model, gpu="h100-sxm-80gb", **fields), *named, **LOAD)


def test_training_style_ep_is_the_layout_it_describes(analysis_builder):
    """ParallelismConfig(tp_size=2, dp_size=4, ep_size=2): 4 data-parallel replicas of 2 GPUs, experts spread over
    pairs of them = workers of 2 attention replicas (tp 2 each) with the experts split 2 ways and spread 2 ways, 2
    workers; the same answer as that layout stated (routed experts on the engine's wide-EP kernels, as every
    layout with moe_ep > 1)."""
    ep = analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2, dp_size=4, ep_size=2)
    lay = worker_layout(ep)
    assert (lay.tp, lay.attention_dp, lay.moe_tp, lay.moe_ep, lay.workers, lay.gpus_per_worker) == (2, 2, 2, 2, 2, 4)
    stated = analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2, attention_dp_size=2,
                              moe_tp_size=2, moe_ep_size=2, dp_size=2)
    for framework in ("sglang", "trtllm"):
        s_ep, s_stated = ep.serve(framework=framework, **LOAD), stated.serve(framework=framework, **LOAD)
        for key in ("ttft_s", "tpot_s", "num_gpus", "kv_pool_tokens_per_replica", "moe_ep_size"):
            assert s_ep[key] == s_stated[key]
    assert s_ep["num_gpus"] == 8


def test_attention_dp_with_split_experts_by_hand(analysis_builder):
    """tp 2 x attention_dp 2 = moe_tp 2 x moe_ep 2 (4 GPUs). Weights per GPU: the attention side split 2 ways, the
    routed experts 4 ways (48 x 128 x 3 x 2048 x 768 parameters). A step of x tokens on each rank: the worker's
    2x tokens reach 2 expert groups, x each, and each group's two GPUs run their half of every expert's columns:
    per GPU 2 x x x 8 x 3 x 2048 x 768 / 2 FLOPs per MoE layer; the dispatch sends those x tokens' 8 copies
    (x x 8 x 2048 elements) over the 2 expert groups."""
    a = _serving(analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="roofline", tp_size=2, attention_dp_size=2,
                                  moe_tp_size=2, moe_ep_size=2))
    lay = worker_layout(a)
    assert (lay.tp, lay.attention_dp, lay.moe_tp, lay.moe_ep, lay.gpus_per_worker) == (2, 2, 2, 2, 4)
    total = a.get_num_params_total()
    routed = 48 * 128 * 3 * 2048 * 768
    assert weight_bytes_per_gpu(a, lay) == pytest.approx((total - routed) * 2 / 2 + routed * 2 / 4, rel=1e-3)
    engine = engine_settings(a, "sglang", {})
    costs = layout_step_costs(a, lay, engine.kv_cache_bytes, 1.0)
    assert costs.scale == 1.0  # an expert group's tokens per rank's token: 2 ranks' over 2 groups
    from llm_analysis.model import Phase
    x = 32
    e = costs.experts
    ops = [(n, op) for n, op in e.d.weighted_ops(Phase("decode", x, 1, 64)) if op.expert_role == "routed"
           and op.kind == "matmul"]
    assert sum(n * op.flops_per_gpu for n, op in ops) == pytest.approx(48 * 2 * x * 8 * 3 * 2048 * 768 / 2, rel=1e-9)
    a2a = [op for n, op in e.d.weighted_ops(Phase("decode", x, 1, 64)) if op.comm_group == "ep"]
    assert len(a2a) == 2 and all(op.comm_group_size == 2 for op in a2a)
    assert all(op.comm_bytes_per_gpu == x * 8 * 2048 * 2 for op in a2a)
    # the KV cache of a rank's requests over its own 2 tensor-parallel GPUs: 4 KV heads / 2 per GPU
    s = analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2, attention_dp_size=2,
                         moe_tp_size=2, moe_ep_size=2).serve(**LOAD)
    per_token = 48 * 2 * 128 * 2 * 2  # layers x KV heads per GPU x head dim x (K, V) x bf16
    rank_tokens = s["kv_pool_tokens_per_replica"] / 2
    assert rank_tokens == pytest.approx(s["kv_pool_bytes_per_gpu"] / per_token, abs=s["block_size"])


def test_training_style_ep_in_a_pool_points_at_the_layout_fields(analysis_builder):
    a = analysis_builder(MOE, gpu="h100-sxm-80gb")
    with pytest.raises(ConfigError) as err:
        a.serve(concurrency=4, input_len=256, output_len=16, disaggregated={
            "prefill": {"workers": 1, "parallelism": ParallelismConfig(tp_size=2)},
            "decode": {"workers": 1, "parallelism": ParallelismConfig(tp_size=2, ep_size=2)}})
    text = str(err.value)
    assert "disaggregated['decode'] ep_size = 2 must divide dp_size = 1" in text and "attention_dp_size = 2" in text


def test_dense_model_with_attention_dp_runs_replicas(analysis_builder):
    """A dense model's MLP follows the attention layout: attention_dp replicas are plain replicas."""
    a = analysis_builder(DENSE, gpu="h100-sxm-80gb", tp_size=1, attention_dp_size=2, perf_model="calibrated")
    b = analysis_builder(DENSE, gpu="h100-sxm-80gb", tp_size=1, dp_size=2, perf_model="calibrated")
    sa, sb = a.serve(**LOAD), b.serve(**LOAD)
    assert sa["tpot_s"] == pytest.approx(sb["tpot_s"], rel=1e-9)
    assert sa["ttft_s"] == pytest.approx(sb["ttft_s"], rel=1e-9)


def test_cli_layout_flags_and_bad_layout_exit_2():
    base = [sys.executable, "-m", "llm_analysis", "serve", "--model_name", MOE, "--gpu_name", "h100-sxm-80gb",
            "--concurrency", "8", "--input_len", "256", "--output_len", "16", "--num_requests", "0",
            "--output_format", "json"]
    ok = subprocess.run(base + ["--tp_size", "1", "--attention_dp_size", "8"], capture_output=True, text=True,
                        timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert '"moe_ep_size": 8' in ok.stdout
    bad = subprocess.run(base + ["--tp_size", "2", "--moe_tp_size", "3", "--moe_ep_size", "2"], capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode == 2
    assert "moe_tp_size" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_attention_dp_hold_by_hand():
    """TensorRT-LLM's attention-DP balance holds prompts up to 60 iterations until every rank has one. 8 ranks,
    a 12 ms decode step: T = 0.72 s. At 4 requests/s over the worker (0.5 a rank) the other 7 ranks all receive
    a prompt after (1 + 1/2 + ... + 1/7) / 0.5 = 5.19 s on average, later than T: the hold is 0.72 s; 4 x 0.72
    = 2.88 prompts arrive during it; mean wait 0.72 x (1 + 1.44) / 3.88. At 400 requests/s (50 a rank) the
    ranks fill in 2.593 / 50 = 0.0519 s: the hold is that."""
    from llm_analysis.serving.layout import attention_dp_hold_s
    h7 = 1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5 + 1 / 6 + 1 / 7
    assert attention_dp_hold_s(60, 8, 0.012, 4.0) == pytest.approx(0.72 * (1 + 0.5 * 2.88) / 3.88, rel=1e-12)
    hold = h7 / 50
    n = 400 * hold
    assert attention_dp_hold_s(60, 8, 0.012, 400.0) == pytest.approx(hold * (1 + 0.5 * n) / (1 + n), rel=1e-12)
    assert attention_dp_hold_s(0, 8, 0.012, 4.0) == 0 and attention_dp_hold_s(60, 1, 0.012, 4.0) == 0


def test_attention_dp_hold_in_serve(analysis_builder):
    """The hold waits outside the running batch: TTFT grows by about the mean hold at the answer's TPOT and
    throughput (Little's law still closes); off by default and with one attention rank; bad values name it."""
    from llm_analysis.serving.layout import attention_dp_hold_s
    a = analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=1, attention_dp_size=8)
    plain = a.serve(framework="trtllm", **LOAD)
    held = a.serve(framework="trtllm", attention_dp_balance_iters=60, **LOAD)
    expected = attention_dp_hold_s(60, 8, held["tpot_s"], held["requests_per_s"])
    assert held["ttft_s"] - plain["ttft_s"] == pytest.approx(expected, rel=0.05)
    assert held["requests_per_s"] * held["e2e_s"] == pytest.approx(16, rel=1e-9)
    one = analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=8, moe_ep_size=8)
    assert one.serve(framework="trtllm", attention_dp_balance_iters=60, **LOAD)["ttft_s"] == \
        one.serve(framework="trtllm", **LOAD)["ttft_s"]
    for value in (-1, 2.5, True):
        with pytest.raises(ConfigError) as err:
            a.serve(framework="trtllm", attention_dp_balance_iters=value, **LOAD)
        assert "attention_dp_balance_iters" in str(err.value)
    with pytest.raises(ConfigError) as err:
        a.serve(framework="trtllm", attention_dp_balance_iters=60, request_rate=1.0, input_len=512, output_len=64)
    assert "closed loop" in str(err.value)


def _expected_max_of_normals(g: int) -> float:
    """E[max of g independent standard normals] by numerical integration of g x phi(x) Phi(x)^(g-1) x dx
    (independent of the package's closed-form approximation)."""
    from statistics import NormalDist
    nd, h = NormalDist(), 0.001
    return sum(x * g * nd.pdf(x) * nd.cdf(x) ** (g - 1) * h for x in (i * h for i in range(-8000, 8001)))


def test_busiest_group_factor_by_hand():
    """T = 64 routed assignments over G = 8 groups (8 tokens, top-8): each group's count is binomial(64, 1/8),
    mean 8, standard deviation sqrt(64 x 1/8 x 7/8) = 2.6458; the busiest of 8 is E[max of 8 normals] = 1.4236
    standard deviations above the mean, so 1 + 1.4236 x 2.6458 / 8 = 1.4708 of the mean. The scale multiplies
    it; the factor is never below 1; one group, or the 1,024 assignments of many tokens, spread little."""
    z8 = _expected_max_of_normals(8)
    assert z8 == pytest.approx(1.4236, abs=2e-4)  # tables of expected normal order statistics
    by_hand = 1 + z8 * (64 * (1 / 8) * (7 / 8)) ** 0.5 / 8
    assert busiest_group_factor(64, 8) == pytest.approx(by_hand, rel=5e-3)  # Blom's approximation of z8
    assert busiest_group_factor(64, 8, 1.2) == pytest.approx(1.2 * by_hand, rel=5e-3)
    assert busiest_group_factor(64, 8, 0.5) == 1.0  # 0.5 x 1.47 < 1: balanced
    assert busiest_group_factor(64, 1) == 1.0
    many = 1 + z8 * (1024 * (1 / 8) * (7 / 8)) ** 0.5 / 128
    assert busiest_group_factor(1024, 8) == pytest.approx(many, rel=5e-3) and many < 1.15
    for g in (2, 4, 16, 32, 72):  # the approximation holds where the engines run
        z = _expected_max_of_normals(g)
        assert busiest_group_factor(10_000, g) == pytest.approx(1 + z * ((g - 1) / 10_000) ** 0.5, abs=3e-3)


def test_expert_spread_defaults_to_the_engine_profiles_scale(analysis_builder):
    """With moe_ep > 1 the routed experts' time is multiplied by the busiest expert group's factor at the
    engine profile's fitted `expert_spread_scale` (read here from the profile file itself): the default answer
    equals the one with that scale given; SGLang's fitted scale (> 1) makes a step slower than a balanced one
    (a constant expert_load_imbalance of 1), and a scale of 0 is balanced; with moe_ep = 1 nothing is
    multiplied."""
    path = Path(llm_analysis.__file__).parent / "catalogue" / "engine_profiles" / "sglang.json"
    stated = json.loads(path.read_text())["expert_spread_scale"]["value"]
    assert stated > 1.0
    ep = dict(gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2, attention_dp_size=2, moe_tp_size=1,
              moe_ep_size=4)
    load = dict(LOAD, framework="sglang")
    answer = analysis_builder(MOE, **ep).serve(**load)
    default = answer["tpot_s"]
    # the answer states the assumption, with the factor of a step of its mean running requests (top-8)
    factor = busiest_group_factor(answer["mean_running_requests_per_replica"] * 8, 4, stated)
    assert any("moe_ep=4" in n and "expert_spread_scale" in n and f"{factor:.3g} for a decode step" in n
               for n in answer["notes"])
    given = analysis_builder(MOE, **ep).serve(**load, expert_spread_scale=stated)["tpot_s"]
    balanced = analysis_builder(MOE, **ep).serve(**load, expert_load_imbalance=1.0)["tpot_s"]
    assert default == pytest.approx(given, rel=1e-12) and default > balanced * (1 + 1e-6)
    assert analysis_builder(MOE, **ep).serve(**load, expert_spread_scale=0.0)["tpot_s"] == pytest.approx(
        balanced, rel=1e-12)
    no_ep = dict(gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2, attention_dp_size=1, moe_tp_size=2,
                 moe_ep_size=1)
    assert analysis_builder(MOE, **no_ep).serve(**load)["tpot_s"] == pytest.approx(
        analysis_builder(MOE, **no_ep).serve(**load, expert_load_imbalance=1.0)["tpot_s"], rel=1e-12)


def test_experts_time_carries_the_step_factor_by_hand(analysis_builder):
    """A rank of tp 2 x attention_dp 2 over moe_ep 4 (Qwen3-30B-A3B, top-8): a step of 6 tokens per rank is
    12 tokens on the worker, 96 routed assignments over 4 groups; its experts' time is the balanced one times
    busiest_group_factor(96, 4, scale)."""
    a = _serving(analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="calibrated", tp_size=2,
                                  attention_dp_size=2, moe_tp_size=1, moe_ep_size=4))
    engine = engine_settings(a, "sglang", {})
    lay = worker_layout(a)
    plain = layout_step_costs(a, lay, engine.kv_cache_bytes, None)
    spread = layout_step_costs(a, lay, engine.kv_cache_bytes, None, spread_scale=1.3)
    factor = busiest_group_factor(96, 4, 1.3)
    assert factor > 1.3
    for graph in (True, False):
        assert spread.experts_s(graph, 6) == pytest.approx(plain.experts_s(graph, 6) * factor, rel=1e-12)


def test_inference_and_training_say_they_do_not_read_a_serving_worker_layout(analysis_builder):
    """inference() and training() time one tensor-parallel group (experts split tp ways, or over ep_size
    data-parallel replicas): given attention replicas or experts over moe_ep_size groups, their summaries
    say so, naming the fields and serve(); a plain layout's say nothing of it."""
    worker = analysis_builder(MOE, gpu="h200-sxm-141gb", tp_size=1, attention_dp_size=4, moe_ep_size=4)
    said = [w for w in worker.inference(batch_size_per_gpu=2, seq_len=256, num_tokens_to_generate=8)["warnings"]
            if "serving worker layout" in w]
    assert len(said) == 1 and "attention_dp_size = 4, moe_ep_size = 4" in said[0] and "serve()" in said[0]
    # experts over 8 groups of a tensor-parallel group of 8 (SGLang's --ep-size without DP attention)
    ep_inside_tp = analysis_builder(MOE, gpu="h200-sxm-141gb", tp_size=8, moe_tp_size=1, moe_ep_size=8)
    said = [w for w in ep_inside_tp.training(batch_size_per_gpu=1, seq_len=256)["warnings"]
            if "serving worker layout" in w]
    assert len(said) == 1 and "moe_ep_size = 8" in said[0] and said[0].startswith("training()")
    plain = analysis_builder(MOE, gpu="h200-sxm-141gb", tp_size=2, moe_tp_size=2, moe_ep_size=1)
    assert not [w for w in plain.inference(batch_size_per_gpu=2, seq_len=256, num_tokens_to_generate=8)["warnings"]
                if "serving worker layout" in w]


def test_the_combine_goes_back_in_16_bits_under_quantised_activations(analysis_builder):
    """fp8 activations (1 byte): the dispatch carries 1 byte per element (DeepEP / TensorRT-LLM quantise
    it), the combine the experts' 16-bit outputs (2 bytes: DeepEP's combine and TensorRT-LLM's MoE
    all-to-all combine in BF16). By hand for Qwen3-30B-A3B, t = 32 tokens per rank, top-8, hidden 2048:
    dispatch 32 x 8 x 2048 x 1 bytes, combine 32 x 8 x 2048 x 2 bytes per GPU."""
    from llm_analysis.model import Phase
    e = _serving(analysis_builder(MOE, gpu="h100-sxm-80gb", dtype="w8a8e16-fp8", tp_size=1, dp_size=8, ep_size=8))
    ops = {op.name: op for _, op in e.describer.weighted_ops(Phase("decode", 32, 1, 64)) if op.comm_group == "ep"}
    assert ops["ep_all_to_all_dispatch"].comm_bytes_per_gpu == 32 * 8 * 2048 * 1
    assert ops["ep_all_to_all_combine"].comm_bytes_per_gpu == 32 * 8 * 2048 * 2
