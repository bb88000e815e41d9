"""Issue 25 item 6: `plan infer` with a load sizes replicas with serve() (continuous batching), says
which target binds and carries the serve() call that reproduces each row; static batches stay
available."""

from __future__ import annotations

import pytest

from llm_analysis.cli.plan import plan_infer_command
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.errors import ConfigError
from llm_analysis.facade import LLMAnalysis
from llm_analysis.planner import NoFeasiblePlanError, plan_inference

TARGETS = {"max_ttft_s": 0.5, "max_tpot_s": 0.05, "request_rate_per_s": 20}


def _fleet(row, replicas=None):
    rep = row["reproduce"]
    par = dict(rep["parallelism"])
    if replicas is not None:
        par["dp_size"] = replicas
    return LLMAnalysis(get_model_config_by_name(rep["model_name"]), get_gpu_config_by_name(rep["gpu_name"]),
                       get_dtype_config_by_name(rep["dtype_name"]), ParallelismConfig(**par),
                       **rep["analysis_kwargs"])


@pytest.fixture(scope="module")
def issue_plan():
    """The issue's example: Llama-3.1-70B on H100s, TTFT <= 0.5 s, TPOT <= 50 ms at 20 requests/s."""
    return plan_inference("meta-llama/Llama-3.1-70B", ["h100-sxm-80gb"], TARGETS)


def test_the_issue_example_answers_with_8_to_48_gpus_meeting_the_targets(issue_plan):
    r = issue_plan
    assert r.assumptions["batching"] == "continuous"
    best = r.best
    assert 8 <= best["figures"]["num_gpus"] <= 48
    # the row's serve() call, run again, gives its figures; they meet every target at the offered rate
    s = _fleet(best).serve(**best["reproduce"]["serve_kwargs"])
    assert s["num_gpus"] == best["figures"]["num_gpus"]
    assert s["ttft_s"] == best["figures"]["ttft_s"] and s["tpot_s"] == best["figures"]["tpot_s"]
    assert s["ttft_s"] <= 0.5 and s["tpot_s"] <= 0.05 and not s["saturated"]
    assert s["requests_per_s"] == pytest.approx(20)
    assert "serve(request_rate=20" in best["reproduce"]["serve_call"]


def test_a_fleet_takes_whole_nodes():
    """A node holds 8 H100s (DGX H100 / HGX H100 8-GPU): a fleet of G GPUs takes ceil(G / 8) nodes, so a
    fleet that does not fill its last node still rents it (Llama-3.1-8B at 3 requests/s: fleets of 1-16)."""
    plan = plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"],
                          {"max_ttft_s": 0.5, "max_tpot_s": 0.05, "request_rate_per_s": 3})
    partial = 0
    for row in plan.rows:
        gpus = row["figures"]["num_gpus"]
        assert row["figures"]["num_nodes"] == -(-gpus // 8), gpus
        partial += gpus % 8 != 0
    assert partial, "no fleet with a partly filled node among the rows: the rule is not exercised"


@pytest.fixture(scope="module")
def issue_plan_calibrated():
    """The same under the calibrated model (the command line's default)."""
    return plan_inference("meta-llama/Llama-3.1-70B", ["h100-sxm-80gb"], TARGETS, perf_model="calibrated")


@pytest.fixture(scope="module")
def plan_binding_below_the_first_count():
    """16 requests/s, calibrated: the best row's replicas are the fewest that keep up (one fewer is below the
    first count the search tries), and that fleet misses TPOT as well as saturating."""
    return plan_inference("meta-llama/Llama-3.1-70B", ["h100-sxm-80gb"], dict(TARGETS, request_rate_per_s=16),
                          perf_model="calibrated")


@pytest.mark.parametrize("plan", ["issue_plan", "issue_plan_calibrated", "plan_binding_below_the_first_count"])
def test_one_replica_fewer_misses_what_the_row_says_binds(plan, request):
    row = request.getfixturevalue(plan).best
    replicas = row["figures"]["replicas"]
    assert replicas > 1 and row["binding"] != ["none"]
    s = _fleet(row, replicas - 1).serve(**row["reproduce"]["serve_kwargs"])
    # (saturation: above, or within 10% of, what the fleet completes; serving/answer.py NEAR_SATURATION)
    missed = {"saturation": s["saturated"] or s["request_rate"] >= 0.9 * s["saturation_request_rate_per_s"],
              "ttft": not s["saturated"] and s["ttft_s"] > TARGETS["max_ttft_s"],
              "tpot": not s["saturated"] and s["tpot_s"] > TARGETS["max_tpot_s"]}
    for name in row["binding"]:
        assert missed[name], (name, s["ttft_s"], s["tpot_s"])
    # and every target it misses is named: below the first count tried as well (the row said "saturation"
    # alone where 4 replicas also miss TPOT, 72 ms against 50)
    assert set(row["binding"]) == {name for name, miss in missed.items() if miss}, (row["binding"], missed)


def test_no_fleet_runs_within_ten_percent_of_its_saturation_rate():
    """Latency targets too loose to bind (TTFT 30 s, TPOT 1 s) and a rate of 1.95 replicas' saturation:
    two replicas would each run at 97.5% of theirs, where a simulated queue depends on how long the run
    lasts (at 98%, one measured 16,000-request run waited 40 times longer than a 4,000-request one). By hand,
    the fewest replicas each below 90% of saturation are floor(1.95 / 0.9) + 1 = 3, and the row says
    saturation binds."""
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
                    get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=1))
    alone = a.serve(concurrency=1, input_len=1024, output_len=128, num_requests=0)
    rate = 1.95 * alone["saturation_request_rate_per_s"]
    plan = plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"],
                          {"max_ttft_s": 30.0, "max_tpot_s": 1.0, "request_rate_per_s": rate},
                          seq_len=1024, num_tokens_to_generate=128, max_pp=1, dtypes=["w16a16e16"],
                          kv_cache_dtype_bytes=[None])
    tp1 = [row for row in plan.rows if row["layout"]["tp"] == 1]
    assert tp1, [row["layout"] for row in plan.rows]
    row = tp1[0]
    assert row["figures"]["replicas"] == 3 and row["binding"] == ["saturation"]
    s = _fleet(row).serve(**row["reproduce"]["serve_kwargs"])
    assert s["requests_per_s"] / s["saturation_request_rate_per_s"] == pytest.approx(1.95 / 3, rel=1e-9)


def test_no_row_is_a_layout_whose_least_possible_fleet_is_above_the_best(issue_plan):
    """Layouts are searched least bound first and one whose bound is above the best fleet found is
    not searched: every row's bound, its GPUs per replica x the fewest replicas that keep up with the
    rate (one past rate / the saturation rate of one replica alone), is at most the best fleet's GPUs
    (a wider tp=2 fleet of ~80 GPUs, bound 2 x 23, once came up beside a 20-GPU best)."""
    best_gpus = issue_plan.best["figures"]["num_gpus"]
    for row in issue_plan.rows:
        kw = {k: v for k, v in row["reproduce"]["serve_kwargs"].items() if k != "request_rate"}
        alone = _fleet(row, 1).serve(**{**kw, "concurrency": 1, "num_requests": 0})
        fewest = int(TARGETS["request_rate_per_s"] // alone["saturation_request_rate_per_s"]) + 1
        assert row["figures"]["gpus_per_replica"] * fewest <= best_gpus, row["layout"]


def test_the_static_search_stays_available():
    r = plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], {**TARGETS, "max_ttft_s": 1.0},
                       seq_len=1024, num_tokens_to_generate=64, max_pp=1, batching="static")
    assert r.assumptions["batching"].startswith("static")
    row = r.best
    assert "inference_kwargs" in row["reproduce"] and row["figures"]["batch_size_per_gpu"] >= 1
    # Little's law: the fleet holds rate x request time requests in its batches
    assert row["figures"]["replicas"] * row["figures"]["batch_size_per_gpu"] >= 20 * row["figures"]["total_latency"]


def test_closed_loop_clients_and_percentile_targets():
    r = plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"],
                       {"max_ttft_s": 0.6, "max_tpot_s": 0.03, "concurrency": 96, "percentile": 90},
                       seq_len=1024, num_tokens_to_generate=128, framework="sglang")
    row = r.best
    assert row["figures"]["latency_statistic"] == "p90"
    kw = row["reproduce"]["serve_kwargs"]
    assert kw["concurrency"] == 96 and kw["framework"] == "sglang"
    s = _fleet(row).serve(**kw)
    assert s["ttft_p90_s"] == row["figures"]["time_to_first_token"] <= 0.6
    assert s["tpot_p90_s"] == row["figures"]["time_per_output_token"] <= 0.03
    # Little's law in the closed loop: clients = requests/s x mean end-to-end latency
    assert s["requests_per_s"] * s["e2e_s"] == pytest.approx(96, rel=1e-9)


def test_a_token_rate_is_served_as_requests_per_second():
    r = plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], {"max_tpot_s": 0.05, "min_tokens_per_s": 6400},
                       seq_len=512, num_tokens_to_generate=128)
    kw = r.best["reproduce"]["serve_kwargs"]
    assert kw["request_rate"] == pytest.approx(6400 / 128)
    assert r.best["figures"]["output_tokens_per_s"] >= 6400 * (1 - 1e-9)


@pytest.mark.parametrize("slo, kwargs, field", [
    ({"concurrency": 8, "percentile": 95}, {}, "slo.percentile"),
    ({"concurrency": 8, "request_rate_per_s": 2.0}, {}, "slo.concurrency"),
    ({"concurrency": 0}, {}, "slo.concurrency"),
    # each row carries serve()'s simulated percentiles, whose warm-up runs every client's first request: more
    # clients than serve() simulates (10^6) had run out of memory, then hit serve()'s own refusal mid-search
    ({"concurrency": 10 ** 6 + 1}, {}, "slo.concurrency = 1000001 exceeds 1000000"),
    ({"concurrency": 10 ** 6 + 1}, {}, "request_rate_per_s"),
    ({"max_tpot_s": 0.05}, {"batching": "continuous"}, "batching"),
    ({"concurrency": 8}, {"batching": "dynamic"}, "batching"),
    ({"concurrency": 8}, {"framework": "tgi"}, "framework"),
    ({"concurrency": 8}, {"engine_options": {"max_num_seq": 8}}, "max_num_seq"),
    # static batches run no engine: an engine option there would change nothing
    ({"max_tpot_s": 0.05}, {"engine_options": {"benchmark_rounds": 0}}, "benchmark_rounds"),
    # checked before the batching is known: not a dict, or not an option, is one error either way
    ({"max_tpot_s": 0.05}, {"engine_options": [1, 2]}, "engine_options"),
    ({"max_tpot_s": 0.05}, {"engine_options": {"max_num_seq": 8}}, "max_num_seq"),
    ({"concurrency": 8}, {"kv_cache_dtype_bytes": 0.5}, "kv_cache_dtype_bytes"),
    # the planner's own names for the lengths (serve() calls them input_len / output_len)
    ({"concurrency": 8}, {"seq_len": 200000}, "seq_len + num_tokens_to_generate"),
    ({"concurrency": 8}, {"seq_len": {"mean": 100, "spread": 100}}, "seq_len['spread']"),
    ({"concurrency": 8}, {"lengths": [(10, 10)], "seq_len": 100}, "not both"),
    ({"concurrency": 8}, {"lengths": [(10, 10, 10)]}, "lengths[0]"),
    ({"concurrency": 8}, {"lengths": "no/such/file.csv"}, "cannot be read"),
    # a workload of mixed lengths is continuous batching's: static batches have one length
    ({"max_tpot_s": 0.05}, {"seq_len": {"mean": 100, "spread": 10}}, "static batch has one"),
    ({"concurrency": 8}, {"lengths": [(10, 10)], "batching": "static"}, "static batch has one"),
])
def test_bad_input_names_the_field(slo, kwargs, field):
    with pytest.raises(ConfigError) as e:
        plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], slo, **kwargs)
    assert field in str(e.value)


@pytest.mark.parametrize("slo, options", [
    ({"concurrency": 8}, {"prefix_cache_share": 1.5}),
    ({"request_rate_per_s": 2.0}, {"api_latency_s": -1}),
    ({"request_rate_per_s": 2.0}, {"max_num_batched_tokens": 0}),
])
def test_a_bad_engine_option_value_is_the_error_not_a_layout_refusal(slo, options):
    """Checked once, by name: before, every layout's serve() refused it and the plan said no layout fits
    (a memory miss), with the option's message buried in the refusals."""
    key, value = next(iter(options.items()))
    with pytest.raises(ConfigError) as e:
        plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], slo, engine_options=options)
    assert str(e.value).startswith(f"{key} = {value!r}"), str(e.value)


def test_cli_plan_infer_with_a_load_and_its_bad_input():
    code, text = plan_infer_command("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", seq_len=512,
                                    num_tokens_to_generate=64, max_tpot="50ms", concurrency=32, percentile=90)
    assert code == 0 and "replicas" in text and "legend:" in text and "p90" in text
    code, line = plan_infer_command("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", concurrency=32, percentile=95)
    assert code == 2 and line.startswith("error: --percentile = 95") and "\n" not in line
    code, line = plan_infer_command("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", request_rate=2, batching="dynamic")
    assert code == 2 and "--batching" in line


def test_calibrated_plans_state_the_engines_measured_error():
    # the table's times line carries what the engine profile states of its calibrated error on published runs
    import json
    from llm_analysis.serving.engine import PROFILE_DIR
    stated = json.loads((PROFILE_DIR / "vllm.json").read_text())["measured_accuracy"]
    r = plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], TARGETS, perf_model="calibrated")
    assert r.assumptions["batching"] == "continuous"
    line = [ln for ln in r.table().splitlines() if ln.startswith("measured error of the calibrated model")]
    assert len(line) == 1
    assert (f"{stated['rows']} runs: TTFT median {stated['ttft_median']:.0%} (p90 {stated['ttft_p90']:.0%}), "
            f"TPOT median {stated['tpot_median']:.0%} (p90 {stated['tpot_p90']:.0%})") in line[0]


def test_roofline_plans_state_no_error_margin(issue_plan):
    # the library's default perf_model is the roofline: its times are lower bounds, no error band applies
    assert issue_plan.assumptions["perf_model"].startswith("llm_analysis roofline")
    assert "measured error of the calibrated model" not in issue_plan.table()


def test_cli_plan_infer_passes_the_engine_timing_flags_to_every_serve_call():
    """--benchmark_rounds / --scheduling_lookahead / --api_latency_s reach serve() for every fleet: the best
    row's serve() call carries them and, run again, gives the row's TTFT; without a load they are refused
    (one line naming the flag)."""
    import json
    args = dict(seq_len=512, num_tokens_to_generate=64, max_tpot="50ms", max_ttft="0.3", concurrency=64,
                output_format="json")
    code, text = plan_infer_command("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", benchmark_rounds=0,
                                    scheduling_lookahead=0, api_latency_s=0.02, **args)
    assert code == 0, text
    best = json.loads(text)["rows"][0]
    kw = best["reproduce"]["serve_kwargs"]
    assert (kw["benchmark_rounds"], kw["scheduling_lookahead"], kw["api_latency_s"]) == (0, 0, 0.02)
    assert _fleet(best).serve(**kw)["ttft_s"] == pytest.approx(best["figures"]["ttft_s"], rel=1e-9)
    code, text = plan_infer_command("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", **args)
    assert "benchmark_rounds" not in json.loads(text)["rows"][0]["reproduce"]["serve_kwargs"]
    code, text = plan_infer_command("meta-llama/Llama-3.1-8B", "h100-sxm-80gb", seq_len=512,
                                    num_tokens_to_generate=64, max_tpot="50ms", benchmark_rounds=0)
    assert code == 2 and text.startswith("error: --benchmark_rounds = 0") and "load" in text


def test_a_gpu_type_the_engine_refuses_is_named_and_the_rest_planned_in_any_order():
    """vLLM's default max_num_seqs is 1024 on an 80 GB GPU that is not an A100 and 256 on an A100
    (EngineArgs.get_batch_defaults), and it refuses max_num_batched_tokens < max_num_seqs. A budget of 512 runs
    on the A100 only: the plan is the same whichever GPU is listed first, names the H100 as not searched and
    why, and is refused outright when no GPU type can run it."""
    slo = {"concurrency": 8, "max_tpot_s": 0.05}
    kw = dict(engine_options={"max_num_batched_tokens": 512}, perf_model="calibrated")
    plans = [plan_inference("meta-llama/Llama-3.1-8B", gpus, slo, **kw)
             for gpus in (["h100-sxm-80gb", "a100-sxm-80gb"], ["a100-sxm-80gb", "h100-sxm-80gb"])]
    for plan in plans:
        assert {row["layout"]["gpu"] for row in plan.rows} == {"a100-sxm-80gb"}
        assert "max_num_seqs = 1024" in plan.assumptions["refused_gpus"]["h100-sxm-80gb"]
        assert "not searched: h100-sxm-80gb" in plan.table()
    assert plans[0].rows[0]["figures"]["tpot_s"] == plans[1].rows[0]["figures"]["tpot_s"]
    with pytest.raises(ConfigError, match="max_num_batched_tokens = 512 < max_num_seqs = 1024"):
        plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb", "b200-180gb"], slo, **kw)


def test_a_max_gpus_miss_names_the_fewest_replicas_that_keep_up_with_the_rate():
    """20,000 tokens/s of 256-token outputs is 78.1 requests/s. Every layout within 16 GPUs falls short, and
    the error used to name the cap plus one worker (18 GPUs against 16, "12.5% over"), whatever the load.
    Now it names the fewest replicas of the closest layout that run below 90% of their saturation rate
    (the search's own start), taken here from that layout's serve() on one replica: a lower bound on the
    fleet."""
    with pytest.raises(NoFeasiblePlanError) as err:
        plan_inference("meta-llama/Llama-3.1-70B", ["h100-sxm-80gb"], {"max_tpot_s": 0.05, "min_tokens_per_s": 20000},
                       max_gpus=16, perf_model="calibrated")
    e = err.value
    assert e.constraint == "max_gpus" and e.limit == 16
    lay = e.layout
    replicas = int(str(lay["replicas"]).split()[0])
    worker = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-70B"), get_gpu_config_by_name("h100-sxm-80gb"),
                         get_dtype_config_by_name(lay["dtype"]), ParallelismConfig(tp_size=lay["tp"]),
                         perf_model="calibrated")
    saturation = worker.serve(request_rate=1.0, input_len=2048, output_len=256)["saturation_request_rate_per_s"]
    rate = 20000 / 256
    fewest = int(rate // (0.9 * saturation)) + 1  # the fewest replicas each below 90% of saturation
    assert replicas == fewest and e.value == fewest * lay["tp"] > 18


def test_a_load_beyond_the_searchs_replica_bound_is_not_blamed_on_max_gpus():
    """No max_gpus given: at 1e6 requests/s every layout needs more replicas than the search tries (4,096). The
    refusal named a 'max_gpus limit' the user never set (the bound times the worker's GPUs); it names the
    planner's own replica bound. The fewest replicas, from the named layout's serve() on one replica (each below
    90% of its saturation rate), are beyond it."""
    from llm_analysis.planner.continuous import MAX_REPLICAS
    with pytest.raises(NoFeasiblePlanError) as err:
        plan_inference("meta-llama/Llama-3.1-8B", ["h100-sxm-80gb"], {"max_ttft_s": 1.0, "request_rate_per_s": 1e6},
                       perf_model="calibrated")
    e = err.value
    assert e.constraint == "max_replicas" and e.limit == MAX_REPLICAS
    assert "max_gpus" not in str(e) and "not a setting" in str(e)
    lay = e.layout
    worker = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
                         get_dtype_config_by_name(lay["dtype"]), ParallelismConfig(tp_size=lay["tp"]),
                         perf_model="calibrated")
    saturation = worker.serve(request_rate=1.0, input_len=2048, output_len=256)["saturation_request_rate_per_s"]
    assert e.value == int(1e6 // (0.9 * saturation)) + 1 > MAX_REPLICAS


def test_separate_pools_are_answered_where_no_colocated_fleet_fits_the_gpu_cap():
    """Llama-3.1-70B fp8 at 10 requests/s, TTFT <= 0.5 s, TPOT <= 40 ms, at most 7 H100s: no co-located fleet
    meets both (tp 2 x 3 misses TPOT, tp 4 x 2 needs 8 GPUs), but 5 prefill + 1 decode workers do; `--disaggregate`
    had answered 'No candidate' because the co-located search found nothing. The pools' own serve() call, run
    again, meets both targets within the cap; the co-located miss is still named."""
    from llm_analysis.analysis import LLMAnalysis as Analysis
    plan = plan_inference("meta-llama/Llama-3.1-70B", ["h100-sxm-80gb"],
                          {"max_ttft_s": 0.5, "max_tpot_s": 0.04, "request_rate_per_s": 10}, dtypes=["fp8"],
                          max_gpus=7, disaggregate=True, perf_model="calibrated")
    assert plan.rows == [] and "No candidate" in plan.extra["no_colocated_plan"]
    best = plan.extra["disaggregated"]["rows"][0]
    assert best["figures"]["num_gpus"] <= 7
    call = best["reproduce"]["serve_call"]
    s = eval(call, {"LLMAnalysis": Analysis, "ParallelismConfig": ParallelismConfig,  # noqa: S307 (our own call)
                    "get_model_config_by_name": get_model_config_by_name,
                    "get_gpu_config_by_name": get_gpu_config_by_name,
                    "get_dtype_config_by_name": get_dtype_config_by_name})
    assert s["num_gpus"] <= 7 and s["ttft_s"] <= 0.5 and s["tpot_s"] <= 0.04


def test_a_gpu_cap_that_rules_out_the_layouts_meeting_the_target_is_named():
    """TPOT <= 30 ms at 10 requests/s within 6 H100s: tp 1 misses TPOT by 0.4%, while tp 4 meets it (serve(), run
    here: two replicas of tp 4) but needs 8 GPUs. The error had said 'every candidate that fits in memory misses the
    TPOT target', sending the user to loosen the wrong target; it names the GPU cap too."""
    fleet = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-70B"), get_gpu_config_by_name("h100-sxm-80gb"),
                        get_dtype_config_by_name("fp8"), ParallelismConfig(tp_size=4, dp_size=2),
                        perf_model="calibrated", attention_flops="causal", logits="last", mla_attention="absorb")
    s = fleet.serve(request_rate=10, input_len=2048, output_len=256, framework="vllm", num_requests=2000)
    assert s["tpot_s"] <= 0.03 and s["num_gpus"] == 8
    with pytest.raises(NoFeasiblePlanError) as err:
        plan_inference("meta-llama/Llama-3.1-70B", ["h100-sxm-80gb"], {"max_tpot_s": 0.03, "request_rate_per_s": 10},
                       dtypes=["fp8"], max_gpus=6, perf_model="calibrated")
    message = str(err.value)
    assert "every candidate that fits in memory misses" not in message
    assert "max_gpus" in message and "tp 4" in message


def test_separate_pools_alone_are_printed_with_their_launch_and_page(tmp_path):
    """The command line of the case above prints the pools and their launch commands, and writes the HTML page
    (it had raised IndexError reading a best co-located row that does not exist)."""
    import subprocess
    import sys
    page = tmp_path / "plan.html"
    run = subprocess.run([sys.executable, "-m", "llm_analysis", "plan", "infer", "meta-llama/Llama-3.1-70B",
                          "h100-sxm-80gb", "--dtype_names", "fp8", "--max_ttft", "0.5", "--max_tpot", "0.04",
                          "--request_rate", "10", "--disaggregate", "--max_gpus", "7", "--emit_launch", "vllm",
                          "--html", str(page)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("no co-located fleet: No candidate")
    assert "best disaggregated launch (vllm)" in run.stdout and "prefill pool, 5 worker(s)" in run.stdout
    assert page.exists() and "Disaggregated prefill and decode pools" in page.read_text()
