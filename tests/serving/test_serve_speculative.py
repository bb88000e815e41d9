"""serve(speculative=...): draft tokens verified k at a time (issue 26; serving/speculative.py)."""

from __future__ import annotations

import pytest

from llm_analysis.config import ParallelismConfig
from llm_analysis.errors import ConfigError
from llm_analysis.serving.speculative import speculative_decoding

MODEL = "meta-llama/Llama-3.1-8B"
ONE = dict(concurrency=1, input_len=1024, output_len=256, num_requests=0)


def test_acceptance_rate_gives_the_mean_accepted_length(analysis_builder):
    """Each drafted token accepted with probability a if the one before was: a step of k = 3 verified tokens
    emits 1 + a + a^2 on average; a = 0.5: 1.75."""
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb")
    spec = speculative_decoding(a, {"method": "mtp", "draft_length": 3, "acceptance_rate": 0.5})
    assert spec.mean_accepted_length == 1 + 0.5 + 0.25
    assert speculative_decoding(a, {"method": "mtp", "draft_length": 3, "acceptance_rate": 1.0}).mean_accepted_length == 3
    assert speculative_decoding(a, {"method": "mtp", "draft_length": 3, "acceptance_rate": 0.0}).mean_accepted_length == 1


@pytest.mark.parametrize("method,extra", [("mtp", {}), ("draft_model", {"draft_model": "meta-llama/Llama-3.2-1B"})])
def test_tpot_is_the_step_over_the_accepted_length(analysis_builder, method, extra):
    """One client: every decode step is the same verify step (k tokens and the draft's passes); it emits L
    tokens, so TPOT x L does not depend on L."""
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated")
    one = a.serve(**ONE, speculative=dict(method=method, draft_length=4, mean_accepted_length=1.0, **extra))
    three = a.serve(**ONE, speculative=dict(method=method, draft_length=4, mean_accepted_length=3.0, **extra))
    assert three["tpot_s"] * 3.0 == pytest.approx(one["tpot_s"] * 1.0, rel=1e-9)
    assert three["speculative_mean_accepted_length"] == 3.0
    # verifying 4 tokens and drafting 3 costs more than a plain decode step; accepting 3 of them pays back
    plain = a.serve(**ONE)
    assert one["tpot_s"] > plain["tpot_s"] > three["tpot_s"]
    # the prefill is not sped up: the TTFT of one client is the same
    assert three["ttft_s"] == pytest.approx(plain["ttft_s"], rel=1e-9)
    # throughput follows TPOT (Little's law: one client)
    assert three["requests_per_s"] * three["e2e_s"] == pytest.approx(1.0, rel=1e-9)


def test_memory_includes_the_draft(analysis_builder):
    """vLLM's pool = share x memory - weights - workspace: an MTP layer's weights (the target's over its 32 layers)
    come out of the pool, and each token holds one more layer's KV (131072 / 32 bytes more per token)."""
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated")
    plain = a.serve(**ONE)
    mtp = a.serve(**ONE, speculative={"method": "mtp", "draft_length": 2, "mean_accepted_length": 1.5})
    weights = a.get_weight_memory_per_gpu()
    assert plain["kv_pool_bytes_per_gpu"] - mtp["kv_pool_bytes_per_gpu"] == pytest.approx(weights / 32, rel=1e-9)
    per_token = 32 * 8 * 128 * 2 * 2
    blocks = mtp["kv_pool_bytes_per_gpu"] // ((per_token + per_token / 32) * 16)
    assert mtp["kv_pool_tokens_per_replica"] == blocks * 16
    draft = a.serve(**ONE, speculative={"method": "draft_model", "draft_model": "meta-llama/Llama-3.2-1B",
                                        "draft_length": 2, "mean_accepted_length": 1.5})
    small = analysis_builder("meta-llama/Llama-3.2-1B", gpu="h100-sxm-80gb")
    assert plain["kv_pool_bytes_per_gpu"] - draft["kv_pool_bytes_per_gpu"] == pytest.approx(
        small.get_weight_memory_per_gpu(), rel=1e-9)


@pytest.mark.parametrize("spec,named", [
    ({"method": "mtp", "draft_length": 3, "mean_accepted_length": 0.5}, "mean_accepted_length"),
    ({"method": "mtp", "draft_length": 3, "mean_accepted_length": 3.5}, "draft_length = 3"),
    ({"method": "mtp", "draft_length": 1, "mean_accepted_length": 1}, "draft_length"),
    ({"method": "eagle9", "draft_length": 3, "mean_accepted_length": 2}, "method"),
    ({"method": "mtp", "draft_length": 3}, "mean_accepted_length"),
    ({"method": "mtp", "draft_length": 3, "acceptance_rate": 1.5}, "acceptance_rate"),
    ({"method": "draft_model", "draft_length": 3, "mean_accepted_length": 2}, "draft_model"),
    ({"method": "mtp", "draft_length": 3, "mean_accepted_length": 2, "depth": 2}, "depth"),
])
def test_bad_speculation_is_refused_by_name(analysis_builder, spec, named):
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb")
    with pytest.raises(ConfigError) as err:
        a.serve(**ONE, speculative=spec)
    assert named in str(err.value)


def test_a_verify_step_runs_k_tokens_per_request(analysis_builder):
    """Each decoding request feeds k tokens through the target in a verify step, so with D requests decoding
    a step does at least the matmul FLOPs of k x D tokens: 2 x (the non-embedding parameters) x k x D, at
    the roofline's peak (Llama-3.1-8B: 8.03 B parameters, 0.53 B of them the input embedding). With
    16-token prompts, 1,024-token outputs and 256 clients nearly all requests decode; D is the decode
    phase's residence by Little's law, requests/s x (e2e - TTFT). A step emits L tokens per request."""
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb")  # roofline, efficiency 1
    k, length = 4, 2.0
    s = a.serve(concurrency=256, input_len=16, output_len=1024, num_requests=0,
                speculative={"method": "mtp", "draft_length": k, "mean_accepted_length": length})
    decoding = s["requests_per_s"] * (s["e2e_s"] - s["ttft_s"])
    assert decoding > 200
    least_step_s = 2 * (8.03e9 - 128256 * 4096) * k * decoding / (a.get_TFLOPS_per_gpu() * 1e12)
    assert s["tpot_s"] * length >= least_step_s


def test_the_draft_runs_k_minus_1_times_a_step(analysis_builder):
    """A step verifies k tokens: the last accepted one and k - 1 drafted, so the draft model runs k - 1
    times. Two draft models beside the same target differ only in those passes (the verify step is the
    target's), so their step times differ by (k - 1) x (the difference of one pass): 1, 2, 3 such
    differences at k = 2, 3, 4 (one client, L = 1: TPOT is the step)."""
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated")

    def tpot(draft, k):
        return a.serve(**ONE, speculative=dict(method="draft_model", draft_model=draft, draft_length=k,
                                                mean_accepted_length=1.0))["tpot_s"]
    gap = {k: tpot("meta-llama/Llama-3.2-3B", k) - tpot("meta-llama/Llama-3.2-1B", k) for k in (2, 3, 4)}
    assert gap[2] > 0
    assert gap[3] == pytest.approx(2 * gap[2], rel=1e-9)
    assert gap[4] == pytest.approx(3 * gap[2], rel=1e-9)


def test_the_answer_says_what_speculation_it_assumed(analysis_builder):
    """The notes name the speculation, aggregated and disaggregated: k = 3 verified tokens (2 drafted) at
    acceptance 0.8 emit 1 + 0.8 + 0.64 = 2.44 tokens a step (by hand); none without speculation."""
    from llm_analysis.config import ParallelismConfig
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb")
    spec = {"method": "mtp", "draft_length": 3, "acceptance_rate": 0.8}
    pools = {"prefill": {"workers": 1, "parallelism": ParallelismConfig()},
             "decode": {"workers": 1, "parallelism": ParallelismConfig()}}
    for s in (a.serve(**ONE, speculative=spec), a.serve(**ONE, speculative=spec, disaggregated=pools)):
        notes = [n for n in s["notes"] if n.startswith("speculative decoding (mtp)")]
        assert len(notes) == 1, s["notes"]
        assert "drafts 2 token(s) per request" in notes[0] and "verifies 3" in notes[0]
        assert "emits 2.44 tokens per request on average" in notes[0]
    assert not any("speculative" in n for n in a.serve(**ONE)["notes"])


def test_verify_steps_take_k_budget_tokens_per_decoder_by_hand(analysis_builder):
    """A verify step scores k tokens of each decoding request, k of the step's token budget B (vLLM on an
    H100: 8,192), and gives it L tokens. The prompts that keep D requests decoding need D q L / (O - 1) budget
    tokens a step (X = D L / ((O - 1) t)), so at most D = B / (k + q L / (O - 1)) decode: 8,192 / (4 + 2,048 x 2
    / 15) = 29.57 for 2,048-token prompts of 16 output tokens, k = 4, L = 2 (counting one budget token a
    decoder would allow 29.89). 512 clients keep the engine at the bound; decoders are requests/s x the
    decode phase's time, (e2e - TTFT)."""
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", perf_model="calibrated")
    k, length, q, out = 4, 2.0, 2048, 16
    s = a.serve(concurrency=512, input_len=q, output_len=out, num_requests=0, benchmark_rounds=0,
                speculative={"method": "mtp", "draft_length": k, "mean_accepted_length": length})
    assert s["max_num_batched_tokens"] == 8192
    decoding = s["requests_per_s"] * (s["e2e_s"] - s["ttft_s"])
    assert decoding == pytest.approx(8192 / (k + q * length / (out - 1)), rel=1e-6)


def test_the_mtp_layer_is_split_as_the_worker_layout_splits_the_target(analysis_builder):
    """DeepSeek-R1 fp8 over attention-DP 8 x EP 8 on H200s: the MTP layer's 256 routed experts are spread over the
    8 expert-parallel ranks as the target's are. By hand (its config.json: 256 experts of 3 x 7,168 x 2,048, one
    byte each): 1.41 GB of experts a GPU, plus its attention, shared expert and projection (under 0.5 GB): 1.41 to
    1.91 GB beside the target's weights. It had been 11.0 GB, the experts unsplit, and the KV pool 30% smaller."""
    a = analysis_builder("deepseek-ai/DeepSeek-R1", gpu="h200-sxm-141gb", dtype="fp8", perf_model="calibrated",
                         tp_size=1, attention_dp_size=8, moe_ep_size=8)
    load = dict(concurrency=256, input_len=1024, output_len=1024, framework="sglang", num_requests=0)
    plain = a.serve(**load)
    mtp = a.serve(speculative={"method": "mtp", "draft_length": 2, "mean_accepted_length": 1.0}, **load)
    experts = 256 * 3 * 7168 * 2048 / 8
    charge = mtp["weight_memory_per_gpu"] - plain["weight_memory_per_gpu"]
    assert experts <= charge <= experts + 0.5e9, charge
    assert plain["kv_pool_bytes_per_gpu"] - mtp["kv_pool_bytes_per_gpu"] == pytest.approx(charge, rel=0.05)


def test_a_draft_model_is_described_stock_under_a_custom_target():
    # A subclass' describer (here the example's bottleneck adapter after each MLP) describes the target alone:
    # the named draft is a catalogue model. Llama-3.2-1B has 1,235,814,400 parameters (its safetensors
    # checkpoint; tied embeddings), so a bf16 draft adds 2 x that many bytes to each GPU of a tp-1 worker.
    from builders import custom_architecture_example  # tests/support/builders.py
    example = custom_architecture_example()
    draft = {"method": "draft_model", "draft_model": "meta-llama/Llama-3.2-1B", "draft_length": 3,
             "acceptance_rate": 0.7}
    kw = dict(concurrency=4, input_len=500, output_len=100)
    target = example.AdapterLLMAnalysis("meta-llama/Llama-3.1-8B", "h100-sxm-80gb")
    with_draft = target.serve(**kw, speculative=draft)["weight_memory_per_gpu"]
    alone = target.serve(**kw)["weight_memory_per_gpu"]
    assert with_draft - alone == 2 * 1_235_814_400


def test_a_draft_of_another_vocabulary_is_refused():
    # The draft proposes token ids the target verifies, so both share one vocabulary; vLLM refuses a draft of
    # another vocab_size (vllm-project/vllm#5203). Llama-3.2-1B (128,256 ids, Llama 3 tokenizer) cannot draft for
    # DeepSeek-V3 (129,280), but can for Llama-3.1-8B (the same 128,256).
    from llm_analysis.analysis import LLMAnalysis
    draft = {"method": "draft_model", "draft_model": "meta-llama/Llama-3.2-1B", "draft_length": 4,
             "acceptance_rate": 0.6}
    kw = dict(concurrency=4, input_len=500, output_len=100, speculative=draft)
    with pytest.raises(ConfigError, match=r"vocab_size = 128256.*129280.*valid: a draft model with vocab_size = 129280"):
        LLMAnalysis("deepseek-ai/DeepSeek-V3", "h200-sxm-141gb", "fp8",
                    parallelism_config=ParallelismConfig(tp_size=8)).serve(**kw)
    assert LLMAnalysis("meta-llama/Llama-3.1-8B", "h100-sxm-80gb").serve(**kw)["tpot_s"] > 0
