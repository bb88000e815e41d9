"""FP8 training's cast kernels (llm_analysis/training/fp8_casts.py), hand-derived for the small
GPT of test_training.py on an H100 under the calibrated model: per linear and micro-batch a
cast-transpose of its input X (M x K), of its weight W (K x N) and, in backward, of its output
gradient dY (M x N), each reading 2 bytes and writing 1 + 1 per element (TransformerEngine's
Linear under fp8_autocast), each one memory-bound kernel of the profile's HBM rate and eager floor."""

from __future__ import annotations

import pytest

from llm_analysis.analysis import ActivationRecomputation as R
from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name
from llm_analysis.cost.profiles import load_profile
from test_training import A_, H_, L_, S_, V_, gpt

H100 = get_gpu_config_by_name("h100-sxm-80gb")
FP8 = get_dtype_config_by_name("fp8")
B, M_STEPS = 2, 3
KW = dict(batch_size_per_gpu=B, gradient_accumulation_steps=M_STEPS, seq_len=S_)


def _pass_s(nbytes: float) -> float:
    """One memory-only kernel under the Hopper profile: (bytes + half-saturation) / (HBM x
    efficiency), never below the eager kernel floor (training launches eagerly); none for 0 bytes."""
    v = load_profile("hopper").values
    if nbytes == 0:
        return 0.0
    return max((nbytes + v["hbm_half_saturation_bytes"]) / (H100.hbm_bandwidth_in_GB_per_sec * 1e9
                                                            * v["hbm_efficiency"]), v["kernel_floor_eager_s"])


def _layer_linears(h: int = H_):
    """(K, N, input cast here, recomputed under ATTN) of a GPT layer's linears: q, k, v read one
    input (cast once, with q), o; the MLP's 4h up and down projections."""
    return [(h, h, True, True), (h, h, False, True), (h, h, False, True), (h, h, True, True),
            (h, 4 * h, True, False), (4 * h, h, True, False)]


def _casts_per_micro_batch_s(recompute_attn: bool = False, recompute_all: bool = False, layers: int = L_,
                             h: int = H_, seq_len: int = S_) -> float:
    tokens = B * seq_len
    total = 0.0
    for k, n, input_cast, attn in _layer_linears(h):
        forward = _pass_s(4 * tokens * k if input_cast else 0) + _pass_s(4 * k * n)
        again = recompute_all or (recompute_attn and attn)
        total += forward * (2 if again else 1) + _pass_s(4 * tokens * n)
    return layers * total


def _analysis(perf_model: str = "calibrated", dtype=FP8) -> LLMAnalysis:
    return LLMAnalysis(gpt(L_, H_, A_, V_, S_), H100, dtype, perf_model=perf_model)


def test_each_linear_casts_its_input_weight_and_output_gradient():
    r = _analysis().training(**KW)  # (every pass at the kernel floor: 256-wide layers, 256 tokens)
    assert r["latency_per_iter_fp8_casts"] == pytest.approx(M_STEPS * _casts_per_micro_batch_s(), rel=1e-12)


def test_wide_layers_cast_at_the_hbm_rate():
    L, h, s = 2, 4096, 2048  # X of a 4096-wide linear: 4096 tokens x 4096 x 4 bytes = 67 MB, ~27 us > floor
    assert 4 * B * s * h / (H100.hbm_bandwidth_in_GB_per_sec * 1e9) > load_profile("hopper").values["kernel_floor_eager_s"]
    a = LLMAnalysis(gpt(L, h, 32, V_, s), H100, FP8, perf_model="calibrated")
    r = a.training(batch_size_per_gpu=B, gradient_accumulation_steps=M_STEPS, seq_len=s)
    expected = M_STEPS * _casts_per_micro_batch_s(layers=L, h=h, seq_len=s)
    assert r["latency_per_iter_fp8_casts"] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("mode, attn, everything", [(R.ATTN, True, False), (R.FULL, False, True)])
def test_a_recomputed_forward_casts_its_inputs_and_weights_again(mode, attn, everything):
    r = _analysis().training(**KW, activation_recomputation=mode)
    expected = M_STEPS * _casts_per_micro_batch_s(recompute_attn=attn, recompute_all=everything)
    assert r["latency_per_iter_fp8_casts"] == pytest.approx(expected, rel=1e-12)


def test_the_casts_are_part_of_the_iteration_and_nowhere_else():
    cal = _analysis().training(**KW)
    informative = ("latency_per_iter_dp_comm_total", "latency_per_iter_dp_comm_hidden", "latency_per_iter_using_flops",
                   "latency_per_iter_lower_bound")  # (beside the breakdown: not parts of the iteration)
    parts = sum(v for key, v in cal.items() if key.startswith("latency_per_iter_") and key not in informative)
    assert cal["latency_per_iter"] == pytest.approx(parts, rel=1e-12)
    # the roofline (a lower bound) and 16-bit training run no cast kernels: no entry
    assert "latency_per_iter_fp8_casts" not in _analysis("roofline").training(**KW)
    bf16 = get_dtype_config_by_name("w16a16e16")
    assert "latency_per_iter_fp8_casts" not in _analysis(dtype=bf16).training(**KW)


def _rows_s(rows, layers: int) -> float:
    """layers x sum over linears (X, dY, W elements) of one cast-transpose pass each (none for 0)."""
    return layers * sum(_pass_s(4 * x) + _pass_s(4 * w) + _pass_s(4 * dy) for x, dy, w in rows)


@pytest.mark.parametrize("experts", [8, 16])
def test_routed_experts_cast_each_token_expert_pair_once_and_every_local_expert_weight(experts):
    """Mixtral-style layer, top-2, ep 4 (experts / 4 per GPU): the routed GEMMs' M is every
    token-expert pair on the GPU (operators/mlp.py), T x 2; the weights are the local experts';
    gate and up read one input; the router stays in 16 bits (with 16 experts its 16 outputs would
    let it run in FP8); q, k, v read one input (GQA 8 KV heads)."""
    h, f, kv, L, T = 4096, 14336, 1024, 2, 4096  # (T x h x 4 bytes = 67 MB: above the kernel floor)
    moe = ModelConfig(name="moe", num_layers=L, n_head=32, num_key_value_heads=8, hidden_dim=h, vocab_size=32000,
                      ffn_embed_dim=f, mlp_gated_linear_units=True, norm_type="rmsnorm", norm_bias=False,
                      tie_word_embeddings=False, moe_num_experts=experts, moe_top_k=2, position_embedding_type="rotary")
    a = LLMAnalysis(moe, H100, FP8, ParallelismConfig(dp_size=4, ep_size=4), perf_model="calibrated")
    r = a.training(batch_size_per_gpu=1, gradient_accumulation_steps=1, seq_len=T)
    P, E = 2 * T, experts // 4
    rows = [(T * h, T * h, h * h), (0, T * kv, h * kv), (0, T * kv, h * kv), (T * h, T * h, h * h),  # q k v o
            (P * h, P * f, E * h * f), (0, P * f, E * h * f), (P * f, P * h, E * f * h)]  # gate up down
    assert r["latency_per_iter_fp8_casts"] == pytest.approx(_rows_s(rows, L), rel=1e-12)


def test_sequence_parallel_ranks_cast_their_own_sequence_shard():
    """tp 2 with sequence parallelism (sp_size defaults to tp_size): a column-parallel linear casts
    its input's sequence shard (T/2 x K) before the all-gather, a row-parallel one its output
    gradient's (T/2 x N); weights and the other operand are the rank's tensor-parallel shard."""
    L, h, s, b = 2, 4096, 2048, 4  # (a half shard, T/2 x h x 4 bytes = 67 MB: above the kernel floor)
    a = LLMAnalysis(gpt(L, h, 32, V_, s), H100, FP8, ParallelismConfig(tp_size=2), perf_model="calibrated")
    r = a.training(batch_size_per_gpu=b, gradient_accumulation_steps=1, seq_len=s)
    T, c = b * s, h // 2
    rows = [(T / 2 * h, T * c, h * c), (0, T * c, h * c), (0, T * c, h * c),  # q k v: column-parallel
            (T * c, T / 2 * h, c * h),  # o: row-parallel
            (T / 2 * h, T * 2 * h, h * 2 * h), (T * 2 * h, T / 2 * h, 2 * h * h)]  # 4h MLP: column, row
    assert r["latency_per_iter_fp8_casts"] == pytest.approx(_rows_s(rows, L), rel=1e-12)


def test_the_casts_join_each_micro_batch():
    """One stage, no TP: a micro-batch is its forward, backward and cast passes (and the loss's
    cross-entropy passes over the logits, training/loss.py)."""
    r = _analysis().training(**KW)
    parts = (r["latency_per_iter_fwd_compute"] + r["latency_per_iter_bwd_compute"]
             + r["latency_per_iter_fp8_casts"] + r["latency_per_iter_loss"]) / M_STEPS
    assert r["latency_per_iter_fp8_casts"] > 0
    assert r["latency_per_micro_batch"] == pytest.approx(parts, rel=1e-12)


def _split_casts_s(recompute_all: bool = False, layers: int = L_, h: int = H_, seq_len: int = S_):
    """(per micro-batch: inputs (again when recomputed) and output gradients; per iteration: each
    weight once) when the framework keeps the weights' casts across micro-batches."""
    tokens = B * seq_len
    micro_batch = iteration = 0.0
    for k, n, input_cast, _ in _layer_linears(h):
        micro_batch += _pass_s(4 * tokens * k if input_cast else 0) * (2 if recompute_all else 1) \
            + _pass_s(4 * tokens * n)
        iteration += _pass_s(4 * k * n)
    return layers * micro_batch, layers * iteration


@pytest.mark.parametrize("mode, everything", [(R.NONE, False), (R.FULL, True)])
def test_weights_cast_once_per_iteration_when_the_framework_keeps_them(mode, everything):
    """Megatron-Core's TransformerEngine layers pass is_first_microbatch: a weight's FP8 cast is
    made by the iteration's first micro-batch and reused by the others (and by recomputation)."""
    r = _analysis().training(**KW, activation_recomputation=mode, fp8_weight_cast_per_iteration=True)
    per_micro_batch, per_iteration = _split_casts_s(recompute_all=everything)
    assert r["latency_per_iter_fp8_casts"] == pytest.approx(M_STEPS * per_micro_batch + per_iteration, rel=1e-12)
    # the iteration is still the sum of its parts; the once-per-iteration casts are not in a micro-batch
    informative = ("latency_per_iter_dp_comm_total", "latency_per_iter_dp_comm_hidden", "latency_per_iter_using_flops",
                   "latency_per_iter_lower_bound")
    assert r["latency_per_iter"] == pytest.approx(
        sum(v for key, v in r.items() if key.startswith("latency_per_iter_") and key not in informative), rel=1e-12)
    every = _analysis().training(**KW, activation_recomputation=mode)
    assert r["latency_per_micro_batch"] < every["latency_per_micro_batch"]


def test_the_weight_cast_statement_must_be_a_boolean():
    from llm_analysis.errors import ConfigError
    with pytest.raises(ConfigError, match="fp8_weight_cast_per_iteration"):
        _analysis().training(**KW, fp8_weight_cast_per_iteration="sometimes")


def test_fp8_training_says_how_its_weights_are_held():
    """An fp8 training run holds its weights in 8 bits (Megatron-Core's --fp8-param-gather), half a bf16 run's
    (the embedding stays 16-bit): the notes say so and what TransformerEngine without it holds instead."""
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import ParallelismConfig
    run = dict(batch_size_per_gpu=1, seq_len=8192, global_batch_size=64, total_num_tokens=1e11)
    fp8 = LLMAnalysis("meta-llama/Llama-3.1-8B", "b200-180gb", "fp8", ParallelismConfig(dp_size=8)).training(**run)
    bf16 = LLMAnalysis("meta-llama/Llama-3.1-8B", "b200-180gb", "bf16", ParallelismConfig(dp_size=8)).training(**run)
    assert fp8["weight_memory_per_gpu"] < 0.6 * bf16["weight_memory_per_gpu"]
    assert any("--fp8-param-gather" in n and "2 bytes per parameter" in n for n in fp8["notes"])
    assert not any("--fp8-param-gather" in n for n in bf16["notes"])
