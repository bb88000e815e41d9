"""training()'s keys of llm-analysis 0.2.2: the echoed activation options, the weight and activation
memory per GPU by part, the (weight+op_state+grad[+act]) sums and the forward's six latency parts.
Expected values are hand derivations or sums of other keys, never the program's own figures."""

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name

SIX = ("attn", "mlp", "layernorm", "tp_comm", "input_embedding", "output_embedding_loss")
H, LAYERS, VOCAB, MAX_POS = 2048, 24, 50272, 2048  # OPT-1.3B (config.json: hidden 2048, 24 layers, ffn 8192)


def _train(tp=1, pp=1, dp=2, **kw):
    a = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), get_gpu_config_by_name("a100-sxm-80gb"),
                    get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=tp, pp_size=pp, dp_size=dp))
    args = dict(batch_size_per_gpu=4, seq_len=2048, ds_zero=1)
    args.update(kw)
    return a.training(**args)


def test_echoed_options():
    s = _train(layernorm_dtype_bytes=2, mlp_activation_quant_bits=8, mlp_recompute_gelu=True)
    assert (s["layernorm_dtype_bytes"], s["mlp_activation_quant_bits"], s["mlp_recompute_gelu"]) == (2, 8, True)
    s = _train()  # 0.2.2's defaults: fp32 norms, no quantised storage, gelu kept
    assert (s["layernorm_dtype_bytes"], s["mlp_activation_quant_bits"], s["mlp_recompute_gelu"]) == (4, None, False)


@pytest.mark.parametrize("tp", [1, 2])
def test_weight_parts_by_hand(tp):
    s = _train(tp=tp)
    # per layer Q, K, V, O: 4 (h x h weights + h biases), 2 bytes each, split over tp, but for the output
    # projection's bias: a row-parallel linear adds it after the all-reduce, so every rank holds it whole
    assert s["weight_memory_attn_per_gpu"] == pytest.approx(
        LAYERS * ((4 * H * H + 3 * H) * 2 / tp + H * 2), rel=1e-12)
    # fc1 h x 4h + 4h bias, fc2 4h x h + h bias (biases of the row-parallel fc2 replicated: within 1e-4)
    assert s["weight_memory_mlp_per_gpu"] == pytest.approx(LAYERS * (8 * H * H + 5 * H) * 2 / tp, rel=1e-4)
    # tied token embedding (vocab-parallel) plus the learned positions (max_pos + 2 rows, OPT's offset)
    assert s["weight_memory_embedding_per_gpu"] == pytest.approx(
        (VOCAB * H / tp + (MAX_POS + 2) * H) * 2, rel=1e-2)
    parts = sum(s[f"weight_memory_{k}_per_gpu"] for k in ("embedding", "attn", "mlp", "layernorm"))
    assert parts == pytest.approx(s["weight_memory_per_gpu"], rel=1e-12)


def test_static_and_total_sums():
    s = _train()
    static = s["weight_memory_per_gpu"] + s["optimizer_state_memory_per_gpu"] + s["gradient_memory_per_gpu"]
    assert s["(weight+op_state+grad)_memory_per_gpu"] == pytest.approx(static, rel=1e-12)
    assert s["(weight+op_state+grad+act)_memory_per_gpu"] == pytest.approx(
        static + s["activation_memory_per_gpu"], rel=1e-12)


def test_activation_parts():
    s = _train()
    # the stored activations are linear in the micro-batch (Korthikanti et al. 2022, Table 2)
    assert s["activation_memory_batch_size_1"] == pytest.approx(s["activation_memory_per_gpu"] / 4, rel=1e-12)
    # the logits, b x s x vocab in 16 bits (0.2.2's embedding_output)
    assert s["activation_memory_embedding_output_per_gpu"] == pytest.approx(4 * 2048 * VOCAB * 2, rel=1e-12)
    # the two fp32 norm inputs of each layer: 2 x sbh x 4 bytes
    assert s["activation_memory_layernorm_per_gpu"] == pytest.approx(LAYERS * 2 * 4 * 2048 * H * 4, rel=1e-12)
    # with the input embedding's output (b s h, 16 bits), the parts are the whole
    parts = sum(s[f"activation_memory_{k}_per_gpu"] for k in ("attn", "mlp", "layernorm", "embedding_output"))
    assert parts + 4 * 2048 * H * 2 == pytest.approx(s["activation_memory_per_gpu"], rel=1e-12)


def _forward_parts(tp=1, pp=1, dp=2):
    """0.2.2's latency_fwd_<part> of the training micro-batch: `get_latency_fwd(b, seq_len)`'s (the summary
    leaves them to it), beside the summary of the same setup."""
    a = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), get_gpu_config_by_name("a100-sxm-80gb"),
                    get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=tp, pp_size=pp, dp_size=dp))
    return a.get_latency_fwd(4, 2048, is_inference=False)[1]


@pytest.mark.parametrize("tp", [1, 2])
def test_forward_parts_sum_to_latency_fwd(tp):
    s, parts = _train(tp=tp), _forward_parts(tp=tp)
    assert sum(parts[f"latency_fwd_{k}"] for k in SIX) == pytest.approx(s["latency_fwd"], rel=1e-12)
    assert (parts["latency_fwd_tp_comm"] > 0) == (tp > 1)
    assert min(parts[f"latency_fwd_{k}"] for k in ("attn", "mlp", "layernorm", "input_embedding",
                                                     "output_embedding_loss")) > 0


def test_pipeline_parts_leave_out_only_the_handoff():
    s = _train(pp=2, dp=1, gradient_accumulation_steps=4)
    parts = sum(_forward_parts(pp=2, dp=1)[f"latency_fwd_{k}"] for k in SIX)
    assert parts < s["latency_fwd"]  # the stage-to-stage sends are in no 0.2.2 part (an extra pp_comm part)
    assert parts == pytest.approx(_train(dp=1)["latency_fwd"], rel=1e-9)  # every layer once, as at pp 1


def test_achieved_flops_in_tflops_as_0_2_2():
    s = _train()
    assert s["achieved_flops"] == 312  # A100 datasheet: 312 TFLOP/s dense bf16, efficiency 1
    # the rate the GPUs run at, in FLOP/s under its own unit-named key
    assert s["achieved_flops_per_s"] == pytest.approx(
        s["num_executed_flops_per_iter"] / s["total_num_gpus"] / s["latency_per_iter"], rel=1e-12)
