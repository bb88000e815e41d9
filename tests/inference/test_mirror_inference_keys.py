"""inference()'s keys of llm-analysis 0.2.2: layernorm_dtype_bytes echoed and the six
`{prefill,decode}_latency_fwd_*` parts, which with the KV-cache read sum to the phase's time
(0.2.2: decode_latency = sum of the parts + kv_cache_latency)."""

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name

SIX = ("attn", "mlp", "layernorm", "tp_comm", "input_embedding", "output_embedding_loss")


@pytest.mark.parametrize("tp", [1, 2])
def test_inference_parts_sum_to_the_phase_times(tp):
    a = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), get_gpu_config_by_name("a100-sxm-40gb"),
                    get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=tp))
    s = a.inference(batch_size_per_gpu=4, seq_len=1024, num_tokens_to_generate=64, layernorm_dtype_bytes=4)
    assert s["layernorm_dtype_bytes"] == 4
    prefill = sum(s[f"prefill_latency_fwd_{k}"] for k in SIX)
    decode = sum(s[f"decode_latency_fwd_{k}"] for k in SIX)
    assert prefill == pytest.approx(s["prefill_latency"], rel=1e-12)
    assert decode + s["kv_cache_latency"] == pytest.approx(s["decode_latency"], rel=1e-12)
    assert (s["prefill_latency_fwd_tp_comm"] > 0) == (tp > 1)


@pytest.mark.parametrize("model, par", [("facebook_opt-1.3b", dict(tp_size=2, pp_size=2)),
                                        ("facebook_opt-1.3b", dict(tp_size=2, pp_size=4)),
                                        ("mistralai_Mixtral-8x7B-v0.1", dict(tp_size=2, ep_size=4, dp_size=4))])
def test_the_parts_restate_one_unpipelined_pass_whole(model, par):
    # the parts (six, then extra ones such as ep_comm) restate the breakdown: one pass, unpipelined, every
    # group in it; so they sum to prefill_latency_unpipelined, and a decode step's with kv_cache_latency to
    # the step's breakdown (with pipeline stages prefill_latency itself is shorter: the stages overlap)
    a = LLMAnalysis(get_model_config_by_name(model), get_gpu_config_by_name("h100-sxm-80gb"),
                    get_dtype_config_by_name("w16a16e16"), ParallelismConfig(**par))
    s = a.inference(batch_size_per_gpu=4, seq_len=1024, num_tokens_to_generate=64)
    prefill = sum(v for k, v in s.items() if k.startswith("prefill_latency_fwd_"))
    decode = sum(v for k, v in s.items() if k.startswith("decode_latency_fwd_"))
    assert prefill == pytest.approx(s["prefill_latency_unpipelined"], rel=1e-12)
    step = sum(g["latency_s"] for g in s["decode_latency_breakdown"].values())
    assert decode + s["kv_cache_latency"] == pytest.approx(step, rel=1e-12)
