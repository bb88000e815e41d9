"""Planner tests with optima that can be checked by hand (weights, KV cache and
memory-bound decode times derived below from the public model shapes)."""

import json

import pytest

from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.facade import LLMAnalysis
from llm_analysis.planner import NoFeasiblePlanError, plan_inference, plan_training
from llm_analysis.planner.capacity import plan_serving_capacity
from llm_analysis.cli.plan import plan_infer_command, plan_train_command
from llm_analysis.planner.space import weight_bytes_lower_bound
from plan_support import run_reproduction

# Llama-3.1-70B (meta-llama/Llama-3.1-70B config.json): hidden 8192, 80 layers, 64 query heads,
# 8 KV heads of 128, gated MLP 28672, vocabulary 128256, untied embeddings.
H, L, KV, HD, FFN, V = 8192, 80, 8, 128, 28672, 128256
LLAMA70_PARAMS = (L * (H * H + 2 * H * KV * HD + H * H + 3 * H * FFN + 2 * H)  # attention, MLP, 2 norms
                  + 2 * V * H + H)  # embedding, output head, final norm
LLAMA70_BF16_BYTES = 2 * LLAMA70_PARAMS  # 141.1 GB


def test_hand_derived_parameter_count_matches_the_catalogue():
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-70B"), get_gpu_config_by_name("h100-sxm-80gb"))
    assert a.get_num_params_total() == LLAMA70_PARAMS


def test_fits_only_with_tp_4_or_more():
    # 141.1 GB of bf16 weights: tp 2 leaves 70.6 GB per GPU > 40 GiB (42.9 GB), tp 4 35.3 GB < 40 GiB
    assert LLAMA70_BF16_BYTES / 2 > 40 * 2**30 > LLAMA70_BF16_BYTES / 4
    r = plan_inference("meta-llama/Llama-3.1-70B", ["a100-sxm-40gb"], seq_len=512, num_tokens_to_generate=32,
                       max_pp=1)
    tps = {row["layout"]["tp"] for row in r.rows}
    assert tps == {4, 8}
    assert r.stats.ruled_out_by_bound > 0  # tp 1 and 2 never reach the full analysis


def test_latency_target_only_tp8_meets():
    # batch-1 decode reads every weight once: TPOT >= weights / (tp x HBM bandwidth).
    # H100 SXM: 3350 GB/s. tp 4: 141.1e9 / 4 / 3350e9 = 10.5 ms > 8 ms; tp 8: 5.3 ms (+ all-reduces)
    bw = 3350e9
    assert LLAMA70_BF16_BYTES / 4 / bw > 8e-3 > LLAMA70_BF16_BYTES / 8 / bw
    r = plan_inference("meta-llama/Llama-3.1-70B", ["h100-sxm-80gb"], {"max_tpot_s": 8e-3}, seq_len=512,
                       num_tokens_to_generate=32, max_pp=1)
    assert {row["layout"]["tp"] for row in r.rows} == {8}
    assert all(row["figures"]["time_per_output_token"] <= 8e-3 for row in r.rows)
    assert r.best["binding"] in (["tpot"], ["memory"], ["max_batch_size"])


_run_reproduction = run_reproduction


def test_top_inference_row_reproduces_through_the_public_api():
    r = plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb", "a100-sxm-80gb"],
                       {"max_ttft_s": 0.5, "max_tpot_s": 0.02}, seq_len=1024, num_tokens_to_generate=128,
                       dtypes=["w16a16e16", "w8a16e16"], kv_cache_dtype_bytes=[None, 1], objective="cost",
                       gpu_prices={"h100-sxm-80gb": 2.5, "a100-sxm-80gb": 1.5}, flops_efficiency=0.6,
                       hbm_memory_efficiency=0.8)
    top, s = r.best, _run_reproduction(r.best)
    assert s["time_to_first_token"] == top["figures"]["time_to_first_token"] <= 0.5
    assert s["time_per_output_token"] == top["figures"]["time_per_output_token"] <= 0.02
    assert s["total_cost_per_1k_tokens"] * 1000 == top["figures"]["cost_per_million_tokens"]
    assert r.assumptions["flops_efficiency"] == 0.6 and r.assumptions["conventions"]["logits"] == "last"
    # ranked: no row is cheaper than the top one
    assert all(row["figures"]["cost_per_million_tokens"] >= top["figures"]["cost_per_million_tokens"]
               for row in r.rows)
    # the largest batch is maximal: one more sequence breaks the binding target (or memory)
    b = top["figures"]["batch_size_per_gpu"]
    rep = dict(top["reproduce"]["inference_kwargs"], batch_size_per_gpu=b + 1)
    try:
        nxt = _run_reproduction({"reproduce": {**top["reproduce"], "inference_kwargs": rep}})
        assert nxt["time_to_first_token"] > 0.5 or nxt["time_per_output_token"] > 0.02
    except Exception as e:  # DoesNotFitError: memory binds
        assert "memory" in top["binding"], e
    # Pareto front: sorted by latency, throughput strictly increasing
    lat = [p["time_per_output_token"] for p in r.pareto]
    thr = [p["tokens_per_sec_per_gpu"] for p in r.pareto]
    assert lat == sorted(lat) and all(x < y for x, y in zip(thr, thr[1:]))
    st = r.stats
    assert st.considered == st.evaluated_full + st.ruled_out_by_bound + st.decided_by_monotonicity + st.invalid


def test_weight_lower_bound_never_exceeds_the_analysis():
    m = get_model_config_by_name("mistralai/Mixtral-8x7B-v0.1")
    for dtype in ("w16a16e16", "w4a16e16-g128", "w8a16e16"):
        d = get_dtype_config_by_name(dtype)
        for tp, pp, ep in ((1, 1, 1), (2, 2, 1), (4, 1, 2), (8, 2, 8)):
            a = LLMAnalysis(m, get_gpu_config_by_name("h100-sxm-80gb"), d,
                            ParallelismConfig(tp_size=tp, pp_size=pp, dp_size=ep, ep_size=ep))
            assert weight_bytes_lower_bound(a.get_num_params_total(), d, tp, pp, ep) <= a.get_weight_memory_per_gpu()


def test_training_only_zero3_fits():
    # Qwen2.5-32B, 32.8e9 parameters, 8 GPUs of 80 GB, tp = pp = 1 (dp 8). Bytes per parameter:
    # ZeRO-2: 2 (weights) + (2 grads + 12 Adam) / 8 = 3.75 -> 123 GB > 80 GiB (85.9 GB); ZeRO-3: 16 / 8 = 2
    # -> 65.6 GB
    params = 32.8e9
    assert params * (2 + 14 / 8) > 80 * 2**30 > params * 16 / 8
    r = plan_training("Qwen/Qwen2.5-32B", ["a100-sxm-80gb"], tokens=1e9, max_gpus=8, global_batch_size=64,
                      seq_len=1024, max_tp=1, max_pp=1, min_gpus=8)
    assert {row["layout"]["ds_zero"] for row in r.rows} == {3}
    assert r.extra["max_bound_ratio"] <= 1.0  # the time bound never exceeds a computed time


def test_training_only_full_recomputation_fits():
    # Llama-3.1-8B, dp 8, ZeRO-3: states 16 B x 8.03e9 / 8 = 16 GB. At seq 32768, micro-batch 1, one
    # layer's stored activations are at least s h x 34 bytes (Korthikanti et al. 2022 Eq. 2 with flash
    # attention): 32768 x 4096 x 34 = 4.6 GB, x 32 layers = 146 GB > 80 GiB; full recomputation keeps only
    # each layer's 16-bit input: 32768 x 4096 x 2 x 32 = 8.6 GB
    s, h = 32768, 4096
    assert s * h * 34 * 32 > 80 * 2**30 > 16e9 + s * h * 2 * 32
    r = plan_training("meta-llama/Llama-3.1-8B", ["a100-sxm-80gb"], tokens=1e9, max_gpus=8, global_batch_size=8,
                      seq_len=s, max_tp=1, max_pp=1, min_gpus=8, zero_stages=[3], recomputation=[0, 1, 4])
    assert {row["layout"]["activation_recomputation"] for row in r.rows if "cp" not in row["layout"]} == {4}
    # context parallelism (cp 4, dp 2: 8192 tokens per rank) stores 1/4 of the activations, 146 / 4 = 37 GB,
    # next to 16 GB of states sharded over dp x cp = 8: the planner finds layouts without recomputation too
    assert any(row["layout"].get("cp", 1) > 1 and row["layout"]["activation_recomputation"] == 0 for row in r.rows)


def test_top_training_row_reproduces():
    r = plan_training("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], tokens=1e10, max_gpus=16, global_batch_size=32,
                      seq_len=4096, flops_efficiency=0.5, objective="cost", gpu_prices={"h100-sxm-80gb": 3.0})
    s = _run_reproduction(r.best)
    assert s["total_training_latency"] == r.best["figures"]["total_training_latency"]
    assert s["total_training_cost"] == r.best["figures"]["total_training_cost"]
    assert r.extra["max_bound_ratio"] <= 1.0


def test_infeasible_targets_name_the_closest_constraint():
    with pytest.raises(NoFeasiblePlanError) as e:
        plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], {"max_tpot_s": 1e-4}, seq_len=512,
                       num_tokens_to_generate=16, max_pp=1)
    assert e.value.constraint == "tpot" and e.value.value > e.value.limit
    assert "tpot" in str(e.value) and "% over the limit" in str(e.value)
    assert isinstance(e.value, ConfigError)


@pytest.mark.parametrize("kwargs, flag", [
    ({"gpus": []}, "gpus"),
    ({"max_gpus": 0}, "max_gpus"),
    ({"max_gpus": -4}, "max_gpus"),
    ({"slo": {"max_tpot_s": 0.01}, "num_tokens_to_generate": 1}, "max_tpot_s"),
    ({"objective": "cost"}, "gpu_prices"),
    ({"objective": "speed"}, "objective"),
    ({"slo": {"max_ttft_s": -1}}, "max_ttft_s"),
])
def test_bad_inference_input_is_one_line_naming_the_argument(kwargs, flag):
    args = {"gpus": ["h100-sxm-80gb"], **kwargs}
    with pytest.raises(ConfigError) as e:
        plan_inference("meta-llama/Llama-3.1-8B", **args)
    assert flag in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("kwargs, flag", [
    ({"max_gpus": 0}, "max_gpus"),
    ({"min_gpus": 16, "max_gpus": 8}, "min_gpus"),
    ({"tokens": 1000}, "tokens"),
    ({"gpus": []}, "gpus"),
])
def test_bad_training_input_is_one_line_naming_the_argument(kwargs, flag):
    args = {"gpus": ["h100-sxm-80gb"], "tokens": 1e9, "max_gpus": 8, "global_batch_size": 8, "seq_len": 2048,
            **kwargs}
    with pytest.raises(ConfigError) as e:
        plan_training("meta-llama/Llama-3.1-8B", **args)
    assert flag in str(e.value) and "\n" not in str(e.value)


def test_commands_exit_codes_and_json():
    code, text = plan_infer_command("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", seq_len=512,
                                    num_tokens_to_generate=32, max_tpot=0.02, output_format="json")
    out = json.loads(text)
    assert code == 0 and out["rows"] and out["search"]["considered"] > 0 and "assumptions" in out
    code, text = plan_infer_command("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", max_tpot=1e-5)
    assert code == 2 and text.startswith("error:") and "\n" not in text
    code, text = plan_train_command("meta-llama/Llama-3.1-8B", "", total_num_tokens=1e9, max_gpus=8,
                                    global_batch_size=8)
    assert code == 2 and "--gpu_names" in text


def test_serving_capacity_and_disaggregation():
    c = plan_serving_capacity("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], prompt_len=[(512, 1.0)],
                              output_len={"mean": 64, "p90": 128}, slo={"max_tpot_s": 0.03}, users=200,
                              requests_per_user_per_s=0.1, max_pp=1)
    # a replica holds batch requests for the request time T: >= rate x T x load_scale requests in flight
    lay, b = c["layout"], c["batch_size_per_gpu"]
    assert c["num_gpus"] == c["replicas"] * lay["tp"] * lay["pp"] * lay["ep"]
    assert c["num_nodes"] == -(-c["num_gpus"] // 8)
    t = c["plan"].best["figures"]["total_latency"]
    assert c["replicas"] * b >= 20 * c["sized_for"]["load_scale"] * t
    r = plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], {"max_ttft_s": 0.3, "max_tpot_s": 0.02,
                       "request_rate_per_s": 20}, seq_len=1024, num_tokens_to_generate=64, disaggregate=True,
                       max_pp=1, batching="static")  # the static pools (with a load and continuous batching the
    # pools are sized on serve(disaggregated=...): tests/planner/test_plan_layouts.py)
    d = r.extra["disaggregated"]
    assert d["pools"]["prefill"]["time_to_first_token"] <= 0.3
    assert d["pools"]["decode"]["time_per_output_token"] <= 0.02
    for pool in d["pools"].values():
        assert pool["replicas"] * pool["requests_per_s_per_replica"] >= 20


def test_context_parallel_training_rows_reproduce():
    """Rows with cp > 1 (searched for long sequences) carry cp_size in their reproduction,
    so the layout fed back to LLMAnalysis is the planned one (tp*cp*pp*dp GPUs)."""
    r = plan_training("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], tokens=1e10, max_gpus=8, global_batch_size=8,
                      seq_len=32768, flops_efficiency=0.5)
    cp_rows = [row for row in r.rows if row["layout"].get("cp", 1) > 1]
    assert cp_rows
    row = cp_rows[0]
    par = row["reproduce"]["parallelism"]
    assert par["cp_size"] == row["layout"]["cp"]
    assert par["tp_size"] * par["cp_size"] * par["pp_size"] * par["dp_size"] == row["figures"]["num_gpus"]
    s = _run_reproduction(row)
    assert s["total_training_latency"] == row["figures"]["total_training_latency"]


def test_training_plan_refuses_a_sequence_beyond_learned_positions_once_by_name():
    """GPT-2 has 1024 learned positions (n_positions in its published config.json): training at 4096 tokens is
    refused by every layout; the plan says so by name instead of 'no candidate was generated: widen the search'."""
    with pytest.raises(ConfigError) as err:
        plan_training("gpt2", ["b200-180gb"], 1e11, 512, 1024, seq_len=4096)
    # an input error, known before any search: not a plan that found no candidate
    assert not isinstance(err.value, NoFeasiblePlanError)
    assert str(err.value).startswith("seq_len = 4096") and "max_seq_len = 1024" in str(err.value)


def test_training_plan_says_why_a_zero_stage_has_nothing_to_shard():
    """On one GPU dp = 1: ZeRO shards optimizer state, gradients and weights over data-parallel ranks, so stage 3
    alone leaves no candidate; the error names the stage, dp = 1 and what would work (stage 0, or dp >= 2)."""
    with pytest.raises(NoFeasiblePlanError) as err:
        plan_training("gpt2", ["a100-sxm-40gb"], 1e9, 1, 64, seq_len=512, zero_stages=[3])
    message = str(err.value)
    assert "ds_zero 3 over one data-parallel rank" in message and "zero_stages with 0" in message \
        and "widen the search" not in message
    # the reason training() states too: DeepSpeed's ZeRO-3 buffers remain, so ZeRO 0 needs less (not "the same")
    assert "ZeRO-3 buffers" in message and "less memory" in message and "same candidate" not in message
    assert plan_training("gpt2", ["a100-sxm-40gb"], 1e9, 1, 64, seq_len=512, zero_stages=[0, 3]).rows


def test_static_batches_under_a_load_are_batches_the_load_can_form():
    """With --batching static a load bounds the batch: 4 closed-loop clients hold at most 4 requests
    (the largest batch that met the TPOT target was 141), and at 0.5 requests/s a batch of b fills
    within one request time T only when b <= 0.5 x T (Little's law: requests in flight = rate x time;
    the rows had batch 40 against an 80 s wait to gather it). Per replica: each of R replicas receives
    0.5 / R requests/s, and gathers its batch within one request time and one arrival (b x ep <
    (0.5 / R) x T + ep; test_plan_static_load.py). Checked on each row's own inference()."""
    closed = plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], {"max_tpot_s": 0.05, "concurrency": 4},
                            max_pp=1, batching="static", perf_model="calibrated")
    assert closed.rows and all(r["figures"]["batch_size_per_gpu"] * r["layout"]["ep"] <= 4 for r in closed.rows)
    assert closed.best["binding"] == ["concurrency"]  # the clients, not a latency target, stop a larger batch
    rate = 0.5
    opened = plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"],
                            {"max_ttft_s": 1.0, "request_rate_per_s": rate}, max_pp=1, batching="static",
                            perf_model="calibrated")
    assert opened.rows
    for row in opened.rows:
        s = run_reproduction(row)
        b, ep = row["figures"]["batch_size_per_gpu"] * row["layout"]["ep"], row["layout"]["ep"]
        assert b < rate / row["figures"]["replicas"] * s["total_latency"] + ep, (b, s["total_latency"])


@pytest.mark.parametrize("gbs", [2, 4])
def test_training_plan_offers_no_interleaved_layout_with_fewer_micro_batches_than_stages(gbs):
    """Megatron-Core's interleaved schedule needs at least pp micro-batches per iteration (training() refuses
    fewer): a row may interleave only where m = gbs / (dp x micro_batch) >= pp, checked on every row; with a
    global batch of 4 interleaved rows remain (the search offers them where they can run)."""
    r = plan_training("facebook/opt-1.3b", ["a100-sxm-80gb"], tokens=1e9, max_gpus=8, global_batch_size=gbs,
                      seq_len=2048, flops_efficiency=0.5)
    assert r.rows
    for row in r.rows:
        lay = row["layout"]
        m = gbs // (lay["dp"] * lay["micro_batch"])
        if lay["pipeline_interleave"] > 1:
            assert m >= lay["pp"], lay
    if gbs == 4:
        assert any(row["layout"]["pipeline_interleave"] > 1 for row in r.rows)


def test_memory_binds_only_where_memory_forced_the_choice():
    """The legend: binding is the constraint that stops a larger batch, fewer GPUs or a faster layout. A row
    that shards (ZeRO) or recomputes names memory only where the same layout and micro-batch without either
    does not fit (or its peak leaves under 10% free): OPT-1.3b on 80 GB fits everywhere without them, so ZeRO
    rows chosen for their faster sharded optimizer step do not name memory."""
    from llm_analysis.errors import DoesNotFitError
    r = plan_training("facebook/opt-1.3b", ["a100-sxm-80gb"], tokens=1e9, max_gpus=8, global_batch_size=16,
                      seq_len=2048, flops_efficiency=0.5)
    sharded = [row for row in r.rows if row["layout"]["ds_zero"] > 0 or row["layout"]["activation_recomputation"] > 0]
    assert sharded
    for row in sharded:
        repro = dict(row["reproduce"])
        lay = row["layout"]
        a = LLMAnalysis(repro["model_name"], lay["gpu"], lay["dtype"], ParallelismConfig(
            tp_size=lay["tp"], pp_size=lay["pp"], dp_size=lay["dp"], ep_size=lay["ep"]), flops_efficiency=0.5)
        try:
            a.training(batch_size_per_gpu=lay["micro_batch"], global_batch_size=16, seq_len=2048,
                       total_num_tokens=1e9, pipeline_interleave=lay["pipeline_interleave"])
            fits = True
        except DoesNotFitError:
            fits = False
        assert ("memory" in row["binding"]) == (not fits or row["figures"]["estimated_peak_memory_per_gpu"]
                                                > 0.9 * a.gpu_config.memory_bytes), row
