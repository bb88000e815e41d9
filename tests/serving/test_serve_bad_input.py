"""Every bad input of issue 25's list is one ConfigError naming the field, the value and what is valid."""

from __future__ import annotations

import math

import pytest

from answers import serve_refused


@pytest.fixture(scope="module")
def llama():
    from builders import build_analysis
    return build_analysis("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb")


def _refused(a, *words, **kw):
    kw.setdefault("num_requests", 0)
    return serve_refused(a, *words, **kw)


@pytest.mark.parametrize("value", [0, -3, 2.5, "many"])
def test_concurrency_not_a_positive_integer(llama, value):
    _refused(llama, "concurrency", repr(value), "integer in [1,", concurrency=value)


@pytest.mark.parametrize("value", [0, -1.0, float("inf"), float("nan")])
def test_request_rate_not_positive(llama, value):
    _refused(llama, "request_rate", "requests per second", request_rate=value, num_requests=10)


def test_both_or_neither(llama):
    _refused(llama, "concurrency = 8", "request_rate = 2.0", "both", "exactly one", concurrency=8, request_rate=2.0)
    _refused(llama, "concurrency = None", "request_rate = None", "neither", "exactly one")


def test_lengths_beyond_the_context(llama):
    _refused(llama, "input_len + output_len = 131073", "max_seq_len = 131072", "valid: at most 131072",
             concurrency=4, input_len=131000, output_len=73)
    _refused(llama, "output_len", "-5", "integer in [1,", concurrency=4, output_len=-5)
    _refused(llama, "input_len", "'mean'", concurrency=4, input_len={"avg": 100})
    _refused(llama, "input_len['spread']", "integer in [0, 99]", concurrency=4, input_len={"mean": 100, "spread": 100})


def test_a_default_length_that_overflows_the_context_is_named_as_the_default(analysis_builder):
    """serve()'s output_len defaults to 128 tokens; with input_len = 2000 on OPT-1.3B (2048 positions) the sum,
    2128, is over: the error says the 128 was the default, not a value the caller gave."""
    a = analysis_builder("facebook_opt-1.3b", gpu="h100-sxm-80gb")
    _refused(a, "input_len + output_len (default 128) = 2128 tokens", "max_seq_len = 2048", concurrency=4,
             input_len=2000)
    _refused(a, "input_len (default 1024) + output_len = 2049 tokens", "at most 2048", concurrency=4, output_len=1025)


def test_a_lengths_file_that_does_not_parse(llama, tmp_path):
    bad = tmp_path / "pairs.json"
    bad.write_text("[[1024, 128], [oops]]")
    _refused(llama, "lengths", str(bad), "does not parse", "input_len", concurrency=4, lengths=str(bad))
    _refused(llama, "lengths", "cannot be read", concurrency=4, lengths=str(tmp_path / "missing.csv"))
    _refused(llama, "lengths[1]", "pair", concurrency=4, lengths=[(10, 10), (5,)])
    # an integer array (what the planner passes) is checked whole, and a bad row is still named
    import numpy as np
    _refused(llama, "lengths[1] input_len = 0", "integer in [1,", concurrency=4, lengths=np.array([[10, 10], [0, 5]]))
    _refused(llama, "lengths[0] output_len", concurrency=4, lengths=np.array([[10, 10 ** 10]]))
    assert llama.serve(concurrency=4, lengths=np.array([[100, 20], [300, 40]]), num_requests=0)["input_len_mean"] \
        == 200
    good = tmp_path / "pairs.csv"
    good.write_text("input_len,output_len\n100,20\n300,40\n")
    s = llama.serve(concurrency=4, lengths=str(good), num_requests=0)
    assert s["input_len_mean"] == 200 and s["output_len_mean"] == 30
    # objects with input_len and output_len, as a .json file may hold them, are read the same inline
    inline = llama.serve(concurrency=4, lengths=[{"input_len": 100, "output_len": 20},
                                                 {"input_len": 300, "output_len": 40}], num_requests=0)
    assert inline["input_len_mean"] == 200 and inline["output_len_mean"] == 30 and inline["tpot_s"] == s["tpot_s"]
    _refused(llama, "lengths[0]", "input_len and output_len", concurrency=4, lengths=[{"input_len": 100}])


def test_a_request_that_cannot_fit_the_pool_alone(analysis_builder):
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="a10-pcie-28gb")  # 16 GB of weights on a 24 GB card
    _refused(a, "input_len + output_len = 120000", "cannot fit the KV pool even alone", "valid: at most",
             concurrency=1, input_len=100000, output_len=20000)


def test_an_unknown_framework_or_option(llama):
    _refused(llama, "framework", "'tgi'", "'vllm', 'sglang', 'trtllm'", concurrency=4, framework="tgi")
    # values the command line parses into a dict or a list (--framework '{}') reached a cached lookup that
    # hashed them first: a TypeError traceback (round 31's CLI sweep)
    for value in ({}, ["vllm"], {"vllm": 1}):
        _refused(llama, "framework", repr(value), "'vllm', 'sglang', 'trtllm'", concurrency=4, framework=value)
    _refused(llama, "max_num_batch_tokens", "did you mean max_num_batched_tokens", "valid:", concurrency=4,
             max_num_batch_tokens=4096)
    # the command line's spellings of the lengths are pointed at the library's
    _refused(llama, "'input_len_spread'", "input_len={'mean': m, 'spread': s}", concurrency=4, input_len_spread=10)
    _refused(llama, "'seq_len'", "as input_len", concurrency=4, seq_len=512)


@pytest.mark.parametrize("option,value,valid", [
    ("gpu_memory_utilization", 1.5, "(0, 1]"), ("gpu_memory_utilization", 0, "(0, 1]"),
    ("max_num_seqs", 0, "integer in [1,"), ("max_num_batched_tokens", 0.5, "integer in [1,"),
    ("block_size", 0, "integer in [1,"), ("prefix_cache_share", 1.0, "[0, 1)"), ("prefix_cache_share", -0.1, "[0, 1)"),
    ("kv_cache_dtype", "fp7", "valid:"), ("seed", -1, "integer in [0,"), ("num_requests", -5, "integer in [0,"),
    ("api_latency_s", -0.1, "non-negative"),
])
def test_an_option_out_of_range(llama, option, value, valid):
    _refused(llama, option, repr(value), valid, concurrency=4, **{option: value})


def test_a_layout_serve_does_not_model(analysis_builder):
    # (pipeline stages are served since issue 26: tests/serving/test_serve_pipeline.py; context parallelism is not)
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", cp_size=2)
    _refused(a, "cp_size = 2", "valid: cp_size = 1", concurrency=4)


def test_the_open_loop_needs_its_simulation(llama):
    _refused(llama, "num_requests = 0", "request_rate", request_rate=1.0, num_requests=0)


def test_benchmark_rounds_belongs_to_the_closed_loop(llama):
    # the closed loop's requests per client (its clients start together); with a rate it changed nothing, silently
    _refused(llama, "benchmark_rounds = 3", "request_rate", "concurrency=", request_rate=1.0, num_requests=10,
             benchmark_rounds=3)
    for rounds in (0, 3):  # the closed loop takes it (0: the steady state alone)
        assert llama.serve(concurrency=4, benchmark_rounds=rounds, num_requests=0)["ttft_s"] > 0


def test_above_saturation_is_not_an_error(llama):
    s = llama.serve(request_rate=1e6, input_len=1024, output_len=128)
    assert s["saturated"] and s["ttft_s"] is None and s["saturation_request_rate_per_s"] > 0


def test_a_token_budget_that_leaves_sglang_no_static_share_names_the_budget(analysis_builder):
    """SGLang's default mem_fraction_static keeps back 1.5 MiB per chunked-prefill token (v0.5.x
    _handle_gpu_memory_settings): at max_num_batched_tokens = 100,000 that alone is 150,000 MiB, more than an
    H200's 141 GiB = 144,384 MiB, so the share comes out negative. The refusal names the budget the caller gave,
    not a gpu_memory_utilization they never gave; with a share given, the same budget answers."""
    a = analysis_builder("facebook_opt-1.3b", gpu="h200-sxm-141gb")
    kw = dict(concurrency=4, input_len=100, output_len=10, framework="sglang", max_num_batched_tokens=100_000)
    message = _refused(a, "max_num_batched_tokens = 100000", "141 GiB", "set gpu_memory_utilization", **kw)
    assert "gpu_memory_utilization = -" not in message
    assert a.serve(gpu_memory_utilization=0.8, num_requests=0, **kw)["gpu_memory_utilization"] == 0.8


def test_vllm_refuses_a_token_budget_below_its_running_sequences(llama):
    """vLLM's SchedulerConfig._verify_args refuses max_num_batched_tokens < max_num_seqs (every running sequence
    needs a token of the step). On an H100 (80 GiB, not an A100) its default max_num_seqs is 1024
    (EngineArgs.get_batch_defaults), so a budget of 512 alone is refused, naming the default; with 256 sequences
    it answers."""
    message = _refused(llama, "max_num_batched_tokens = 512 < max_num_seqs = 1024", "max_num_seqs the engine's default",
                       concurrency=4, framework="vllm", max_num_batched_tokens=512)
    assert "vllm refuses to start" in message
    assert llama.serve(concurrency=4, framework="vllm", max_num_batched_tokens=512, max_num_seqs=256,
                       num_requests=0)["max_num_seqs"] == 256
    # SGLang has no such rule: its decode batches are not bounded by the chunked-prefill size
    assert llama.serve(concurrency=4, framework="sglang", max_num_batched_tokens=512, num_requests=0)["ttft_s"] > 0


def test_trtllm_refuses_a_prompt_longer_than_one_step(llama):
    """TensorRT-LLM prefills a prompt whole (enable_chunked_prefill defaults to False) and its frontend rejects a
    prompt longer than max_num_tokens, less what block reuse holds (tensorrt_llm/llmapi/llm.py _check_arguments).
    2000 tokens against a budget of 1024: refused. With half of each prompt in the prefix cache, whole 32-token
    blocks: floor(1000 / 32) x 32 = 992 cached, 1008 <= 1024 to prefill: answered."""
    _refused(llama, "the longest prompt, 2000 tokens", "max_num_batched_tokens = 1024", "valid: max_num_batched_tokens "
             ">= 2000", concurrency=4, framework="trtllm", input_len=2000, max_num_batched_tokens=1024)
    s = llama.serve(concurrency=4, framework="trtllm", input_len=2000, max_num_batched_tokens=1024,
                    prefix_cache_share=0.5, num_requests=0)
    assert s["block_size"] == 32 and s["ttft_s"] > 0
    _refused(llama, "(992 of them in the prefix cache)", ">= 1008", concurrency=4, framework="trtllm", input_len=2000,
             max_num_batched_tokens=1007, prefix_cache_share=0.5)


@pytest.mark.parametrize("framework", ["vllm", "sglang", "trtllm"])
def test_weights_beyond_the_gpu_are_named_as_the_weights(analysis_builder, framework):
    """Mixtral-8x7B holds 46,702,792,704 parameters: 93.41 GB in 16 bits, beyond an L40S whatever share of its
    memory an engine takes. The refusal names the weights and suggests more GPUs or fewer weight bits, not a KV
    dtype or a memory share that could not help."""
    a = analysis_builder("mistralai/Mixtral-8x7B-v0.1", gpu="l40s-48gb")
    assert a.get_num_params_total() == 46_702_792_704
    message = _refused(a, "does not fit l40s-48gb", f"its weights, {46_702_792_704 * 2 / 1e9:.2f} GB per GPU",
                       "before any KV cache", "more GPUs (tp_size, or the experts over moe_ep_size)",
                       concurrency=1, input_len=1, output_len=1, framework=framework)
    assert "kv_cache_dtype" not in message and "gpu_memory_utilization" not in message


def test_sglang_refuses_when_its_static_share_cannot_hold_the_weights(analysis_builder):
    """DeepSeek-V3 in FP8 on 4 B200s under SGLang's default sizing (v0.5.x _handle_gpu_memory_settings, by hand):
    180 GiB = 184,320 MiB; reserved = 512 + 1.5 x 16,384 (chunked_prefill_size above 160 GiB) + 2 x 512
    (cuda_graph_max_bs) + 4 / 8 x 1024 (tp) = 26,624 MiB; mem_fraction_static = round(157,696 / 184,320, 3)
    = 0.856, which holds less than the ~169 GB of weights per GPU: SGLang itself stops with 'Not enough
    memory'. The refusal names the least share that holds the weights and one request: (weights + 9,216
    tokens x 61 layers x (512 + 64) latent elements x 2 bytes) / the GPU's bytes."""
    a = analysis_builder("deepseek-ai/DeepSeek-V3", gpu="b200-180gb", dtype="fp8", tp_size=4, perf_model="calibrated")
    kw = dict(concurrency=4, input_len=8192, output_len=1024, framework="sglang")
    message = _refused(a, "gpu_memory_utilization = 0.856", "sglang itself refuses to start", **kw)
    weights = a.get_weight_memory_per_gpu()
    least = (weights + 9216 * 61 * (512 + 64) * 2) / a.gpu_config.memory_bytes
    assert f"gpu_memory_utilization >= {math.ceil(least * 1000) / 1000:.3f}" in message  # rounded up
    _refused(a, "cannot fit the KV pool even alone", gpu_memory_utilization=least - 0.002, **kw)
    s = a.serve(gpu_memory_utilization=least + 0.002, num_requests=0, **kw)
    assert s["max_running_requests_per_replica"] >= 1


@pytest.mark.parametrize("framework", ["vllm", "trtllm"])
def test_the_least_share_a_refusal_names_is_the_least_that_answers(analysis_builder, framework):
    """vLLM's pool is share x memory - weights - workspace, TensorRT-LLM's share x (memory - weights -
    workspace): the share a refusal names is the least that holds the request (a little less refuses, a
    little more answers)."""
    import re
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="a10-pcie-28gb")  # 16 GB of weights on a 24 GB card
    kw = dict(concurrency=1, input_len=20000, output_len=4000, framework=framework, gpu_memory_utilization=0.5)
    if framework == "trtllm":  # the same 24,000 tokens, with a prompt its default budget (8192) prefills whole
        kw.update(input_len=8000, output_len=16000)
    message = _refused(a, "cannot fit the KV pool even alone", **kw)
    least = float(re.search(r"gpu_memory_utilization >= ([0-9.]+)", message).group(1))
    assert 0.5 < least < 1.0
    _refused(a, "cannot fit the KV pool even alone", **{**kw, "gpu_memory_utilization": least - 0.002})
    assert a.serve(num_requests=0, **{**kw, "gpu_memory_utilization": min(1.0, least + 0.002)})["ttft_s"] > 0


def test_the_share_a_refusal_states_as_valid_answers(analysis_builder):
    """The share is stated rounded up, never to nearest: Llama-3.1-8B on one H100 under vLLM, 2,048 + 512
    tokens: (16.06 GB of weights + 3.30 GB of workspace + 2,560 tokens x 131,072 bytes) / 85.90 GB = 0.22926,
    which to nearest reads 0.229, a share that still refuses. The share the refusal names answers as given."""
    import re
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb")
    kw = dict(concurrency=4, input_len=2048, output_len=512, num_requests=0)
    message = _refused(a, "cannot fit the KV pool even alone", gpu_memory_utilization=0.22, **kw)
    stated = re.search(r"gpu_memory_utilization >= ([0-9.]+)", message).group(1)
    assert stated == "0.230"
    assert a.serve(gpu_memory_utilization=float(stated), **kw)["ttft_s"] > 0


# ---- found by round 31's sweep of the command line (serve with large, valid layouts and loads)

def test_more_clients_than_the_simulation_can_warm_up(llama):
    """The simulation warms up with every client's first request, so a replica's clients count against the
    simulated requests' limit (10^6, serving/engine.py MAX_NUM_REQUESTS); 2^30 clients ran the machine out of
    memory. The closed form alone (num_requests=0) still answers."""
    limit = 10 ** 6
    _refused(llama, f"concurrency = {limit + 1}", "clients", f"{limit}", "num_requests=0",
             concurrency=limit + 1, input_len=128, output_len=16, num_requests=10)
    s = llama.serve(concurrency=2 ** 30, input_len=128, output_len=16, num_requests=0)
    assert s["ttft_s"] > 0 and s["ttft_p90_s"] is None  # means only


def test_many_replicas_weigh_their_samples_without_repeating_them():
    """An open loop over a million attention replicas asked np.repeat for 4 x 10^9 samples (30 GiB). The
    percentiles of replicas' samples, each weighed by its count of replicas, equal those of the samples
    repeated that many times (numpy's linear interpolation), here checked on small counts."""
    import numpy as np

    from llm_analysis.serving.answer import percentiles
    rng = np.random.default_rng(3)
    groups = [(rng.exponential(1.0, 57), 3), (rng.exponential(2.0, 40), 1), (rng.exponential(0.5, 11), 6)]
    repeated = np.concatenate([np.repeat(v, n) for v, n in groups])
    got = percentiles({"ttft": groups, "e2e": groups})
    for q in (50, 90, 99):
        assert got[f"ttft_p{q}_s"] == pytest.approx(float(np.percentile(repeated, q)), rel=1e-12)
    assert got["tpot_p50_s"] is None


def test_a_million_attention_replicas_answer_an_open_loop(analysis_builder):
    from llm_analysis.config import ParallelismConfig
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb",
                         parallelism=ParallelismConfig(attention_dp_size=10 ** 6))
    import tracemalloc
    tracemalloc.start()
    try:
        s = a.serve(request_rate=10.0, input_len=512, output_len=64, num_requests=200)
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert s["num_gpus"] == 10 ** 6 and 0 < s["ttft_p50_s"] <= s["ttft_p99_s"]
    # 200 samples repeated for 10^6 replicas would be 1.6 GB per latency; weighed, the answer takes a few MB
    assert peak_bytes < 200e6, peak_bytes


def test_a_worker_whose_weights_do_not_fit_is_named_by_its_whole_layout():
    """DeepSeek-V3.2 in fp8 (671 B parameters) on H200 as tp 1 x 4 attention replicas with its experts 2 x 2:
    183 GB of weights per GPU. The refusal named only tp=1, which with a plain layout would mean the whole
    model on one GPU (674 GB): it names the attention replicas and the experts' split that set the figure."""
    from builders import build_analysis
    from llm_analysis.config import ParallelismConfig
    a = build_analysis("deepseek-ai/DeepSeek-V3.2", gpu="h200-sxm-141gb", dtype="fp8", perf_model="calibrated",
                       parallelism=ParallelismConfig(tp_size=1, attention_dp_size=4, moe_tp_size=2, moe_ep_size=2))
    _refused(a, "does not fit h200-sxm-141gb (tp=1, attention_dp=4, moe_tp=2 x moe_ep=2) under sglang",
             concurrency=8, input_len=1024, output_len=128, framework="sglang")


@pytest.mark.parametrize("gpu, vendor", [("mi300x-192gb", "amd"), ("tpu-v5p-95gb", "google")])
def test_an_engine_is_not_run_on_hardware_it_does_not_run_on(gpu, vendor):
    """TensorRT-LLM runs on NVIDIA GPUs only (its README; CUDA and TensorRT kernels): on an AMD Instinct or a TPU
    it had been timed, planned and given a launch command. vLLM and SGLang run on both (their install guides)."""
    import subprocess
    import sys
    from builders import build_analysis
    a = build_analysis("meta-llama/Llama-3.1-8B", gpu=gpu, perf_model="calibrated")
    _refused(a, "framework = 'trtllm'", gpu, vendor, "valid frameworks there: vllm, sglang",
             concurrency=4, input_len=512, output_len=64, framework="trtllm")
    assert a.serve(concurrency=4, input_len=512, output_len=64, framework="vllm", num_requests=0)["tpot_s"] > 0
    plan = subprocess.run([sys.executable, "-m", "llm_analysis", "plan", "infer", "meta-llama/Llama-3.1-8B",
                           f"{gpu},h100-sxm-80gb", "--dtype_names", "bf16", "--request_rate", "2", "--framework",
                           "trtllm", "--output_format", "json"], capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr
    import json
    answer = json.loads(plan.stdout)
    assert {row["layout"]["gpu"] for row in answer["rows"]} == {"h100-sxm-80gb"}
    assert "runs on nvidia hardware" in answer["assumptions"]["refused_gpus"][gpu]


def test_experts_split_by_columns_across_attention_dp_ranks_say_what_is_not_timed(analysis_builder):
    """DeepSeek-R1 fp8 on 8 H200s with 8 attention replicas and the experts split by columns over all 8 GPUs
    (moe_ep_size = 1: SGLang's DP attention over a tensor-parallel MoE): every MoE layer all-gathers the 8
    replicas' tokens and reduce-scatters the partial outputs, which no operator times, and it read faster (TPOT
    38.9 ms at 64 clients) than the same worker with expert parallelism (47.9 ms), silently. The answer says
    what is left out and which layout is timed whole; the EP layout carries no such note."""
    kw = dict(concurrency=64, input_len=1024, output_len=1024, framework="sglang", num_requests=0)
    for moe_tp, moe_ep in ((8, 1), (2, 4)):
        a = analysis_builder("deepseek-ai/DeepSeek-R1", gpu="h200-sxm-141gb", dtype="fp8", tp_size=1,
                             attention_dp_size=8, moe_tp_size=moe_tp, moe_ep_size=moe_ep, perf_model="calibrated")
        notes = [n for n in a.serve(**kw)["notes"] if "all-gather" in n]
        assert len(notes) == 1 and f"moe_tp_size = {moe_tp}" in notes[0] and "optimistic" in notes[0] \
            and "moe_ep_size = 8 is timed whole" in notes[0], notes
    ep = analysis_builder("deepseek-ai/DeepSeek-R1", gpu="h200-sxm-141gb", dtype="fp8", tp_size=1,
                          attention_dp_size=8, moe_ep_size=8, perf_model="calibrated")
    assert not [n for n in ep.serve(**kw)["notes"] if "all-gather" in n]


def test_an_expert_load_imbalance_that_cannot_apply_is_refused(analysis_builder):
    """The busiest of G expert groups holds at most all the tokens: G times the mean, so the factor is at most
    moe_ep_size (50 over 8 groups had timed 1.2 s steps); with the experts on every GPU (moe_ep_size = 1) no group
    is busier than another and the value changed nothing, silently."""
    kw = dict(concurrency=64, input_len=1024, output_len=1024, framework="sglang")
    tp = analysis_builder("deepseek-ai/DeepSeek-R1", gpu="h200-sxm-141gb", dtype="fp8", tp_size=8,
                          perf_model="calibrated")
    _refused(tp, "expert_load_imbalance = 5", "moe_ep_size = 1", expert_load_imbalance=5, **kw)
    ep = analysis_builder("deepseek-ai/DeepSeek-R1", gpu="h200-sxm-141gb", dtype="fp8", tp_size=1,
                          attention_dp_size=8, moe_ep_size=8, perf_model="calibrated")
    _refused(ep, "expert_load_imbalance = 50", "moe_ep_size = 8", "<= 8", expert_load_imbalance=50, **kw)
    assert ep.serve(num_requests=0, expert_load_imbalance=8, **kw)["tpot_s"] > 0


def test_a_workspace_sized_by_max_num_seqs_is_named_even_beside_large_weights(analysis_builder):
    """DeepSeek-R1 fp8 over 8 H200s with expert parallelism holds 100.7 GB of weights a GPU, which fit its 151.4 GB
    beside the few GB of buffers no option sizes; max_num_seqs = 100,000 adds the sampler's logits of 100,000
    sequences (100,000 x 129,280 vocabulary x 4 bytes = 51.7 GB) and leaves no room. The refusal names
    max_num_seqs, not the weights (it had said 'more GPUs or fewer weight bits'); 4,096 answers."""
    a = analysis_builder("deepseek-ai/DeepSeek-R1", gpu="h200-sxm-141gb", dtype="fp8", tp_size=1,
                         attention_dp_size=8, moe_ep_size=8)
    kw = dict(concurrency=64, input_len=1024, output_len=1024, framework="trtllm")
    message = _refused(a, "max_num_seqs = 100000", f"{100_000 * 129_280 * 4 / 1e9:.2f} GB", "valid: a smaller",
                       max_num_seqs=100_000, **kw)
    assert message.index("max_num_seqs") < message.index("weights")
    assert a.serve(max_num_seqs=4096, num_requests=0, **kw)["tpot_s"] > 0


# ---- found by the serve review (a first hour with serve and plan infer)

def test_a_pool_refusal_names_an_fp8_cache_only_where_the_cache_is_wider(analysis_builder):
    """Llama-3.1-70B in fp8 on one H100 under vLLM, 120,000 + 1,000 tokens: the cache is already fp8 (80 layers x
    8 KV heads x 128 x 2 (K and V) x 1 byte = 163,840 bytes a token), so kv_cache_dtype='fp8' cannot shrink it and
    the refusal must not offer it. Llama-3.1-8B in bf16 on an A10 keeps a 2-byte cache (32 x 8 x 128 x 2 x 2 =
    131,072 bytes a token): there fp8 halves it, and the refusal offers it."""
    fp8_cache = analysis_builder("meta-llama/Llama-3.1-70B", gpu="h100-sxm-80gb", dtype="fp8")
    message = _refused(fp8_cache, "cannot fit the KV pool even alone", f"{80 * 8 * 128 * 2 * 1} bytes per token",
                       concurrency=4, input_len=120000, output_len=1000)
    assert "kv_cache_dtype" not in message, message
    assert message.endswith("more GPUs (tp_size) or fewer weight bits"), message
    bf16_cache = analysis_builder("meta-llama/Llama-3.1-8B", gpu="a10-pcie-28gb")
    _refused(bf16_cache, "cannot fit the KV pool even alone", f"{32 * 8 * 128 * 2 * 2} bytes per token",
             "kv_cache_dtype='fp8'", concurrency=1, input_len=100000, output_len=20000)


def test_a_prefill_pool_refusal_names_the_prompt_and_the_whole_layout(analysis_builder):
    """A disaggregated prefill rank holds a prompt's cache until it is sent, not the output: DeepSeek-V3 in fp8 on
    B200, a prefill worker of tp 1 x 4 attention replicas (its experts over 4 groups), 8,192-token prompts and
    1,024-token outputs under vLLM. The refusal said 'input_len + output_len = 8192' (the sum is 9,216), 'tp=1'
    (the whole model on one GPU) and offered an fp8 cache the model already has (61 layers x (512 + 64) latent
    elements x 1 byte = 35,136 bytes a token)."""
    a = analysis_builder("deepseek-ai/DeepSeek-V3", gpu="b200-180gb", dtype="fp8", perf_model="calibrated")
    pools = {"prefill": {"workers": 2, "parallelism": {"tp_size": 1, "attention_dp_size": 4}, "batch_size": 1},
             "decode": {"workers": 4, "parallelism": {"tp_size": 8, "moe_ep_size": 8}, "batch_size": 48}}
    message = _refused(a, "disaggregated['prefill']", "input_len (the prompt a prefill rank holds) = 8192 tokens",
                       "(tp=1, attention_dp=4, moe_tp=1 x moe_ep=4)", f"{61 * (512 + 64) * 1} bytes per token",
                       concurrency=192, input_len=8192, output_len=1024, framework="vllm", disaggregated=pools)
    assert "input_len + output_len" not in message and "kv_cache_dtype" not in message, message


@pytest.mark.parametrize("gpu, dtypes", [("h100-sxm-80gb", ["w4a16e16-mxfp4", "w4a8e16-mxfp4"]),
                                         ("b200-180gb", ["mxfp4", "w4a16e16-mxfp4", "w4a4e16-mxfp4", "w4a8e16-mxfp4"])])
def test_weights_too_wide_point_to_the_checkpoints_own_format(gpu, dtypes):
    """gpt-oss-120b at the default 16-bit weights (234 GB) fits no single GPU; its checkpoint stores the experts in
    MXFP4. The refusal names the catalogue's dtypes that store MXFP4 weights (dtype_configs/*mxfp4*.json) and that
    the GPU runs: those with MXFP4 activations need FP4 tensor cores, which an H100 lacks. Each named dtype serves."""
    from builders import build_analysis
    wide = build_analysis("openai/gpt-oss-120b", gpu=gpu)
    text = serve_refused(wide, "does not fit", "dtype_name", concurrency=8, num_requests=0)
    assert f"stores its weights as mxfp4: hold them so (dtype {' or '.join(dtypes)})" in text
    for dtype in dtypes:
        s = build_analysis("openai/gpt-oss-120b", gpu=gpu, dtype=dtype).serve(concurrency=8, num_requests=0)
        assert s["tpot_s"] > 0


def test_no_checkpoint_format_no_pointer():
    from builders import build_analysis
    a = build_analysis("meta-llama/Llama-3.1-405B", gpu="h100-sxm-80gb")
    assert "stores its weights as" not in serve_refused(a, "does not fit", concurrency=8, num_requests=0)


def test_an_fp8_checkpoint_is_pointed_to_its_fp8_dtypes():
    from builders import build_analysis
    wide = build_analysis("Qwen/Qwen3-235B-A22B-FP8", gpu="h100-sxm-80gb")
    text = serve_refused(wide, "does not fit", concurrency=8, num_requests=0)
    assert "stores its weights as fp8: hold them so (dtype " in text
    named = text.split("hold them so (dtype ")[1].split(")")[0].split(" or ")
    assert {"fp8", "w8a16e16-fp8"} <= set(named)  # FP8 weights with FP8 and with 16-bit activations
