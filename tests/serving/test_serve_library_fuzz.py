"""serve() as library code calls it: Python values the command line never produces (numpy's numbers, bools, None,
huge ints, nan / inf, nested dicts with missing, extra and mistyped keys, odd layouts) must each end in an answer
whose numbers are finite (None where a figure is stated to be unbounded or absent) or in one LLMAnalysisError
naming the field, the value and what is valid: never another exception, a hang or an inf. The command line's
fuzz is tests/cli/test_cli_fuzz.py.

A seeded sweep of 36,000 such calls (and 9,600 valid calls at the edges of every range) found the bugs pinned
below, one test each; `test_library_sweep` keeps a sample of 100 seeded calls of a generator of the same kind.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from llm_analysis.config import ParallelismConfig
from llm_analysis.errors import ConfigError, LLMAnalysisError
from answers import leaves, serve_refused

LLAMA = "meta-llama/Llama-3.1-8B"
MOE = "Qwen/Qwen3-30B-A3B"  # 128 experts: attention_dp_size 2 x moe_ep_size 2 runs them over 2 GPUs
POOLS = {"prefill": {"workers": 1}, "decode": {"workers": 1}}


@pytest.fixture(scope="module")
def llama():
    from builders import build_analysis
    return build_analysis(LLAMA, gpu="h100-sxm-80gb", perf_model="calibrated")


@pytest.fixture(scope="module")
def moe():
    from builders import build_analysis
    return build_analysis(MOE, gpu="h100-sxm-80gb", perf_model="calibrated", attention_dp_size=2, moe_ep_size=2)


def _numbers(value):
    """(path, number) of every number in an answer, nested dicts and lists included."""
    return [(p, v) for p, v in leaves(value)
            if isinstance(v, (int, float, np.number)) and not isinstance(v, bool)]


def _contract(a, kw):
    """serve(**kw) answers with finite numbers or raises one one-line LLMAnalysisError; the answer or the error."""
    try:
        s = a.serve(**kw)
    except LLMAnalysisError as err:
        assert "\n" not in str(err) and str(err).strip(), (kw, str(err))
        return err
    bad = [(p, v) for p, v in _numbers(s) if not math.isfinite(v)]
    assert not bad, (kw, bad)
    return s


_refused = serve_refused


# ---- the sweep: a reproducible sample of the generator that found the bugs below

WEIRD = [None, True, False, 0, -1, -0.0, 2.5, float("nan"), float("inf"), -math.inf, 2 ** 64, 10 ** 400, 1e300,
         1e-300, 5e-324, "8", "abc", "", [8], (8,), {"a": 1}, {}, np.int64(8), np.int32(2), np.uint64(2 ** 63),
         np.float32(0.5), np.float64("nan"), np.bool_(True), np.array([8])]
VALUES = {
    "concurrency": [1, 4, 32, np.int64(16)], "request_rate": [0.5, 5.0, 1e6, np.float32(3.0), 1e-12],
    "input_len": [1, 512, {"mean": 512, "spread": 100}, {"mean": np.int64(256)}, {"spread": 1}, {1: 2}],
    "output_len": [1, 2, 64, {"mean": 64, "spread": 10}],
    "framework": ["vllm", "sglang", "trtllm", np.str_("sglang"), "VLLM"],
    "max_num_batched_tokens": [1, 16, 8192, np.int64(4096)], "max_num_seqs": [1, 256, 2 ** 20],
    "gpu_memory_utilization": [0.5, 0.9, 1e-9], "block_size": [1, 16, 2 ** 20], "prefix_cache_share": [0.0, 0.5],
    "kv_cache_dtype": ["auto", "fp8", "fp4"], "seed": [0, 2 ** 63 - 1], "api_latency_s": [0, 0.05],
    "scheduling_lookahead": [0, 1, np.int64(1)], "benchmark_rounds": [0, 3],
    "expert_load_imbalance": [1.5, np.float32(2.0), 1e300], "attention_dp_balance_iters": [0, 60, np.int64(2)],
}


def _pool(rng):
    pool = {"workers": rng.choice([1, 2, np.int64(2), 10 ** 400])}
    if rng.random() < 0.4:
        pool["parallelism"] = rng.choice([ParallelismConfig(tp_size=2), {"tp_size": 2}, {"tp_size": True},
                                          {"tp_size": 3}, {1: 2}, {"attention_dp_size": 2, "moe_ep_size": 2}])
    if rng.random() < 0.3:
        pool["batch_size"] = rng.choice([1, 16, np.int64(8)])
    return pool


def _case(rng):
    weird = rng.choice([0.0, 0.1, 0.3])

    def pick(name):
        return rng.choice(WEIRD) if rng.random() < weird else rng.choice(VALUES[name])

    kw = {"concurrency": pick("concurrency")} if rng.random() < 0.55 else {"request_rate": pick("request_rate")}
    kw.update(input_len=pick("input_len"), output_len=pick("output_len"), num_requests=rng.choice([0, 50, 200]))
    if "request_rate" in kw:
        kw["num_requests"] = 200
    for name in rng.sample(sorted(set(VALUES) - set(kw) - {"concurrency", "request_rate"}), rng.randint(0, 3)):
        kw[name] = pick(name)
    if rng.random() < 0.25:
        kw["disaggregated"] = {"prefill": _pool(rng), "decode": _pool(rng)}
        if rng.random() < 0.3:
            kw["disaggregated"]["kv_transfer_GB_per_s"] = rng.choice([50, np.float32(25.0), 5e-324, math.inf])
    if rng.random() < 0.15:
        spec = {"method": "mtp", "draft_length": rng.choice([3, np.int64(3), 65])}
        spec["mean_accepted_length" if rng.random() < 0.5 else "acceptance_rate"] = rng.choice(
            [0.5, 1, 2.0, np.float32(0.5), 10 ** 400])
        kw["speculative"] = spec
    return rng.choice(["llama", "llama", "moe"]), kw


SWEEP = [_case(random.Random(32_000 + seed)) for seed in range(100)]


def test_library_sweep(llama, moe):
    """100 seeded calls (seeds 32000..32099), each answered with finite numbers or refused by name."""
    failures = []
    for seed, (which, kw) in enumerate(SWEEP):
        try:
            _contract(llama if which == "llama" else moe, kw)
        except Exception as exc:  # noqa: BLE001 (every failure is collected, then reported with its seed)
            failures.append(f"seed {32_000 + seed}: {kw!r:.300} -> {type(exc).__name__}: {str(exc)[:300]}")
    assert not failures, "\n".join(failures)


# ---- one test per bug the sweep found

def test_a_request_rate_below_the_simulated_clock(llama):
    """At 10^-12 requests/s the open loop's 220 simulated arrivals lie ~10^14 s apart, where float seconds no
    longer hold an engine step's milliseconds: TTFT came out 0 (and 10^-308 overflowed the clock: a hang).
    The least rate the refusal names answers."""
    _refused(llama, "request_rate = 1e-12/s", "220 requests", "valid: request_rate >= 2.2e-07",
             request_rate=1e-12, num_requests=200)
    assert llama.serve(request_rate=2.2e-07, num_requests=200)["ttft_s"] > 0.01


def test_a_speculative_length_beyond_floats(llama):
    """math.isfinite(10^400) raised OverflowError in the check of mean_accepted_length."""
    _refused(llama, "speculative['mean_accepted_length'] = 1000", "must be in [1, draft_length = 3]", concurrency=4,
             num_requests=0, speculative={"method": "mtp", "draft_length": 3, "mean_accepted_length": 10 ** 400})


@pytest.mark.parametrize("option, value, plain", [
    ("framework", np.str_("sglang"), "sglang"),
    ("scheduling_lookahead", np.int64(0), 0),
    ("speculative", {"method": "mtp", "draft_length": np.int64(3), "mean_accepted_length": np.float32(2.0)},
     {"method": "mtp", "draft_length": 3, "mean_accepted_length": 2.0}),
    ("speculative", {"method": "mtp", "draft_length": 3, "acceptance_rate": np.float32(0.5)},
     {"method": "mtp", "draft_length": 3, "acceptance_rate": 0.5}),
    ("disaggregated", {"prefill": {"workers": np.int64(2), "batch_size": np.int32(8)},
                       "decode": {"workers": np.int64(3)}, "kv_transfer_GB_per_s": np.float32(25.0),
                       "prefill_contention": np.float32(0.5)},
     {"prefill": {"workers": 2, "batch_size": 8}, "decode": {"workers": 3}, "kv_transfer_GB_per_s": 25.0,
      "prefill_contention": 0.5}),
])
def test_numpy_numbers_are_numbers(llama, option, value, plain):
    """numpy's integers and floats (what array code hands over) were refused as 'not a whole number' / 'not a
    share' by checks of isinstance(int / float): they answer as the plain numbers do."""
    kw = dict(concurrency=8, input_len=512, output_len=64, num_requests=50)
    assert llama.serve(**kw, **{option: value}) == llama.serve(**kw, **{option: plain})


@pytest.mark.parametrize("option, value, plain", [
    ("expert_load_imbalance", np.float32(1.5), 1.5), ("expert_load_imbalance", np.int64(2), 2),
    ("attention_dp_balance_iters", np.int64(60), 60),
])
def test_numpy_numbers_of_a_layout(moe, option, value, plain):
    kw = dict(concurrency=8, input_len=512, output_len=64, num_requests=50, framework="trtllm")
    assert moe.serve(**kw, **{option: value}) == moe.serve(**kw, **{option: plain})


def test_one_token_outputs_leave_the_decode_pool_without_a_capacity(llama):
    """With every output one token (the prefill emits it) the decode pool decodes nothing: its capacity was inf
    in the answer; it is None, and a note says why."""
    s = _contract(llama, dict(concurrency=4, input_len=512, output_len=1, disaggregated=POOLS))
    assert s["decode_capacity_request_rate_per_s"] is None
    assert any("decodes nothing" in n for n in s["notes"])
    assert s["saturation_request_rate_per_s"] == s["prefill_capacity_request_rate_per_s"]


@pytest.mark.parametrize("kw, words", [
    (dict(expert_load_imbalance=1e300), ["expert_load_imbalance = 1e+300", "[1, 16777216]"]),  # ZeroDivisionError
    (dict(expert_load_imbalance=10 ** 400), ["expert_load_imbalance", "[1, 16777216]"]),  # OverflowError
    (dict(attention_dp_balance_iters=10 ** 400, framework="trtllm"), ["attention_dp_balance_iters", "[0, 1073741824]"]),
    (dict(disaggregated={**POOLS, "kv_transfer_GB_per_s": 5e-324}),  # TTFT inf
     ["kv_transfer_GB_per_s'] = 5e-324", "[0.001, 1e+06] GB/s"]),
    (dict(disaggregated={**POOLS, "kv_transfer_GB_per_s": 10 ** 400}), ["kv_transfer_GB_per_s"]),  # OverflowError
    (dict(disaggregated={"prefill": {"workers": 10 ** 400}, "decode": {"workers": 1}}),  # OverflowError
     ["disaggregated['prefill']['workers']", "[1, 16777216]"]),
    (dict(disaggregated={"prefill": {"workers": 1, "parallelism": {1: 2}}, "decode": {"workers": 1}}),  # TypeError
     ["disaggregated['prefill']['parallelism'] = {1: 2}", "valid fields: tp_size"]),
    (dict(disaggregated={"prefill": {"workers": 1, "parallelism": {"tp_size": True}}, "decode": {"workers": 1}}),
     ["disaggregated['prefill']['parallelism']", "'tp_size' = True", "not a bool"]),  # served as tp_size = 1
])
def test_numbers_out_of_range_are_refused_by_name(moe, kw, words):
    _refused(moe, *words, concurrency=8, input_len=512, output_len=64, num_requests=0, **kw)


def test_a_bool_is_no_layout_size():
    with pytest.raises(ConfigError, match="'tp_size' = True must be a whole number, not a bool"):
        ParallelismConfig(tp_size=True)
    with pytest.raises(ConfigError, match="'attention_dp_size' = np.False_"):
        ParallelismConfig(attention_dp_size=np.bool_(False))


def test_a_pool_layout_error_names_the_pool(llama):
    """A pool's layout is not the analysis' own: 'tp_size = 3 must divide n_head' did not say which pool's."""
    message = _refused(llama, "tp_size = 3 must divide n_head = 32", concurrency=8, disaggregated={
        "prefill": {"workers": 1}, "decode": {"workers": 1, "parallelism": {"tp_size": 3}}})
    assert message.startswith("disaggregated['decode']: "), message
    _refused(llama, "disaggregated['prefill']['parallelism']: Invalid ParallelismConfig: field 'tp_size' = 1.5",
             concurrency=8, disaggregated={"prefill": {"workers": 1, "parallelism": {"tp_size": 1.5}},
                                           "decode": {"workers": 1}})


def test_a_decode_batch_is_named_as_the_caller_gave_it(llama):
    """The decode pool's batch_size becomes its engine's max_num_seqs: vLLM's refusal named max_num_seqs =
    10000, an option the caller never gave."""
    _refused(llama, "max_num_seqs = 10000 (disaggregated['decode']['batch_size'])", "vllm refuses to start",
             concurrency=8, disaggregated={"prefill": {"workers": 1}, "decode": {"workers": 1, "batch_size": 10000}})


def test_a_workspace_the_options_size_is_named(moe):
    """max_num_seqs = 2^20 keeps 2^20 x 151,936 x 4 bytes = 637 GB of logits: the refusal blamed the 32 GB of
    weights and suggested more GPUs or fewer weight bits, neither of which helps."""
    message = _refused(moe, "the sampler's logits for max_num_seqs = 1048576 sequences, 637.27 GB",
                       "valid: a smaller max_num_batched_tokens or max_num_seqs",
                       concurrency=4, framework="trtllm", max_num_seqs=2 ** 20, num_requests=0)
    assert "weight bits" not in message


def test_a_block_larger_than_the_pool_is_named(llama):
    """block_size = 2^20 rounds a 1152-token request up to one 137 GB block: the refusal named memory shares and
    KV dtypes that could not help; it names the block, and the largest block it states answers."""
    message = _refused(llama, "block_size = 1048576", "valid: block_size <= ", concurrency=4, block_size=2 ** 20,
                       num_requests=0)
    most = int(message.rsplit("<= ", 1)[1])
    assert llama.serve(concurrency=4, block_size=most, num_requests=0)["block_size"] == most


def test_a_token_budget_that_splits_a_prompt_into_too_many_steps(llama):
    """A prompt's prefill walks its chunks one by one: 1-token chunks of a 131,071-token prompt took minutes a
    call. The least budget the refusal names answers."""
    kw = dict(concurrency=4, framework="sglang", input_len=20000, num_requests=0)
    _refused(llama, "max_num_batched_tokens = 1", "20000 prefill steps", "valid: max_num_batched_tokens >= 3",
             max_num_batched_tokens=1, **kw)
    assert llama.serve(max_num_batched_tokens=3, **kw)["ttft_s"] > 0


def test_a_simulation_of_too_many_prefill_steps(llama):
    """550 simulated requests of 4000 prefill steps each (8000 tokens in 2-token chunks) took seconds a million
    steps; the refusal names how many requests would do."""
    _refused(llama, "max_num_batched_tokens = 2", "2200000 prefill steps", "num_requests <= 455",
             "num_requests=0", concurrency=4, framework="sglang", input_len=8000, max_num_batched_tokens=2,
             num_requests=500)


def test_prefill_batches_too_many_to_time(llama):
    """A prefill pool times every batch of 1 .. 65,536 one-token prompts (max_num_seqs = 65,536): 2 x 10^9
    prompt-steps, minutes of work; refused, naming the batch it allows."""
    _refused(llama, "batches of up to 65536 prompts (max_num_seqs = 65536)", "valid: batches of at most 9999",
             concurrency=10 ** 5, input_len=1, output_len=2, framework="trtllm", max_num_seqs=65536,
             max_num_batched_tokens=65536, disaggregated=POOLS)


def test_a_thrashing_simulation_stops_with_a_refusal(llama, monkeypatch):
    """Requests that evict each other from a small KV pool are preempted hundreds of times each (DeepSeek-R1,
    131,072 clients a replica: 10^8 preemptions, many minutes). The simulation stops at MAX_SIMULATED_EVENTS
    (here lowered, to reach it at once) with a refusal naming what shortens it."""
    import llm_analysis.serving.simulation as simulation
    monkeypatch.setattr(simulation, "MAX_SIMULATED_EVENTS", 20_000)
    _refused(llama, "num_requests = 200", "engine steps and preemptions", "preemptions", "fewer clients",
             "num_requests=0", concurrency=4000, input_len=2000, output_len=2000, num_requests=200)


class _NoWalk(dict):
    def values(self):
        raise AssertionError("SGLang's admission walked every running request")


@pytest.mark.parametrize("output_len", [64, 6000])  # within SGLang's clip of 4096 output tokens, and beyond it
def test_sglang_admission_keeps_its_sums(llama, monkeypatch, output_len):
    """SGLang admits against the running requests' remaining outputs (each up to the clip): summed afresh at each
    admitted request, thousands of admissions a step over thousands of running requests took minutes at a
    million clients. The sums are kept as requests come and go; at every admission they equal the walk."""
    from llm_analysis.serving.simulation import _Replica
    kept = _Replica._remaining_sum
    calls = []

    def checked(self, clip):
        walk = sum(min(q.finish_tick - self.ticks if q.finish_tick >= 0 else q.output - q.generated, clip)
                   for q in self.running.values())
        running, prefilling = self.running, self.prefilling
        self.running, self.prefilling = _NoWalk(running), _NoWalk(prefilling)
        try:
            got = kept(self, clip)
        finally:
            self.running, self.prefilling = running, prefilling
        assert got == walk
        calls.append(got)
        return got

    monkeypatch.setattr(_Replica, "_remaining_sum", checked)
    s = llama.serve(concurrency=64, input_len=2000, output_len=output_len, framework="sglang", num_requests=200,
                    gpu_memory_utilization=0.5)
    assert len(calls) > 100 and s["ttft_p99_s"] > 0
