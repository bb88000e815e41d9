"""Mixer layers (operators/mixers.py) and the state-space / hybrid family rows
(hub_families_hybrid.py), against the real transformers classes.

Each small config is built by transformers on the CPU (tiny real tensors, so the eager
selective scans run) and its parameters, prefill FLOPs (FlopCounterMode) and cache
state are compared with ours. The Mamba-2 state bytes are also derived by hand for a
published model shape, and bad mixer input must get the package's own errors.
"""

from __future__ import annotations

import math

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, ParallelismConfig, get_gpu_config_by_name
from llm_analysis.errors import ConfigError, UnsupportedArchitectureError

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import llm_analysis.hub.entry as hf_import  # noqa: E402

GPU = get_gpu_config_by_name("a100-sxm-80gb")
SMALL = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
             intermediate_size=128, vocab_size=256, max_position_embeddings=128)
_MAMBA2_MIXER = dict(mamba_n_heads=8, mamba_d_head=16, mamba_d_state=16, mamba_chunk_size=8)

_NEMOTRON_H = dict(SMALL, head_dim=16, mamba_num_heads=8, mamba_head_dim=16, ssm_state_size=16, n_groups=2,
                   chunk_size=8, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                   moe_shared_expert_intermediate_size=48)

CASES = {
    "mamba": dict(hidden_size=64, num_hidden_layers=2, vocab_size=256, state_size=8, intermediate_size=128,
                  time_step_rank=4),
    "falcon_mamba": dict(hidden_size=64, num_hidden_layers=2, vocab_size=256, state_size=8,
                         intermediate_size=96, time_step_rank=6, use_conv_bias=False, use_bias=True),
    # two groups, chunks of 8: a 13-token prompt is padded to 16 by the eager scan
    "mamba2": dict(hidden_size=64, num_hidden_layers=2, vocab_size=256, state_size=16, num_heads=8,
                   head_dim=16, n_groups=2, chunk_size=8, expand=2),
    "bamba": dict(SMALL, **_MAMBA2_MIXER, mamba_n_groups=2, attn_layer_indices=[1]),
    "jamba": dict(SMALL, num_hidden_layers=4, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2,
                  expert_layer_offset=1, num_experts=4, num_experts_per_tok=2, mamba_d_state=8, mamba_dt_rank=8),
    "lfm2": dict(SMALL, num_hidden_layers=3, layer_types=["conv", "full_attention", "conv"], conv_L_cache=3,
                 conv_bias=True, intermediate_size=192),
    # gated DeltaNet and gated attention, experts with a gated shared expert; 70 tokens: two chunks of 64
    "qwen3_next": dict(SMALL, num_hidden_layers=4, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                       linear_key_head_dim=8, linear_value_head_dim=16, num_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=32, shared_expert_intermediate_size=48),
    "qwen3_5_text": dict(SMALL, num_hidden_layers=4, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=2,
                         linear_key_head_dim=16, linear_value_head_dim=8),
    # attention and Mamba-2 side by side in every layer, inner width mamba_d_ssm, gated norm
    "falcon_h1": dict(SMALL, mamba_n_heads=8, mamba_d_head=8, mamba_d_ssm=64, mamba_n_groups=2, mamba_d_state=16,
                      mamba_chunk_size=8, mamba_rms_norm=True),
    # one block per layer: Mamba-2, experts, attention, a dense ReLU^2 MLP (biased)
    "nemotron_h": dict(_NEMOTRON_H, layers_block_type=["linear_attention", "moe", "full_attention", "mlp",
                                                       "linear_attention", "moe"], mlp_bias=True),
    # MoE layers at irregular places among blocks without an MLP (Nemotron-3-Nano-like)
    "nemotron_h/nano": dict(_NEMOTRON_H, layers_block_type=["linear_attention", "moe", "linear_attention", "moe",
                                                            "full_attention", "moe", "linear_attention"]),
    "olmo_hybrid": dict(SMALL, num_hidden_layers=4, linear_num_key_heads=2, linear_num_value_heads=4,
                        linear_key_head_dim=8, linear_value_head_dim=16, pad_token_id=0),
    # KDA mixers and MLA attention, a dense first layer then experts with a shared one
    "kimi_linear": dict(SMALL, num_hidden_layers=4, num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=None,
                        qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8, linear_num_heads=4, linear_head_dim=16,
                        num_experts=4, num_experts_per_token=2, moe_intermediate_size=32, num_shared_experts=1,
                        pad_token_id=0, bos_token_id=1, eos_token_id=2,
                        layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention"]),
    "granitemoehybrid": dict(SMALL, **_MAMBA2_MIXER, layer_types=["mamba", "attention"], mamba_n_groups=1,
                             num_local_experts=4, num_experts_per_tok=2, shared_intermediate_size=96),
}


def _grouped_mm_flops(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """torch 2.13's FlopCounterMode has no formula for aten._grouped_mm (transformers 5's
    fused experts): 2 x output elements x the reduction length, as for any matmul."""
    return 2 * math.prod(out_shape) * a_shape[-1]


def _flop_counter() -> FlopCounterMode:
    ops = [getattr(torch.ops.aten, n) for n in ("_grouped_mm", "grouped_mm") if hasattr(torch.ops.aten, n)]
    return FlopCounterMode(display=False, custom_mapping={op: _grouped_mm_flops for op in ops})


def _real_model(case: str, kwargs: dict):
    cfg = transformers.CONFIG_MAPPING[case.split("/")[0]](**kwargs)
    torch.manual_seed(0)
    return cfg, transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()


def _ours(cfg, name: str) -> LLMAnalysis:
    model = hf_import.model_config_from_hf_dict(cfg.to_dict(), name=name)
    return LLMAnalysis(model, GPU)


@pytest.mark.parametrize("model_type", sorted(CASES))
@pytest.mark.parametrize("seq_len", [13, 16, 70])
def test_params_and_prefill_flops_equal_transformers(model_type, seq_len):
    cfg, real = _real_model(model_type, CASES[model_type])
    ours = _ours(cfg, f"test/{model_type}")
    # parameters() yields a tied weight once
    assert ours.get_num_params_total() == sum(p.numel() for p in real.parameters())
    with torch.no_grad(), _flop_counter() as counter:
        real(input_ids=torch.randint(0, cfg.vocab_size, (1, seq_len)))
    assert ours.get_num_flops_fwd_total(1, seq_len) == counter.get_total_flops()


@pytest.mark.parametrize("model_type", ["mamba", "mamba2", "lfm2", "bamba", "qwen3_next", "falcon_h1"])
def test_state_bytes_equal_the_cache_objects(model_type):
    """Conv and SSM states transformers' cache holds after a prompt, element for element
    (float32 model: 4 bytes each), against our per-sequence state (plus the attention
    layers' KV cache of the prompt, for the hybrids)."""
    cfg, real = _real_model(model_type, CASES[model_type])
    with torch.no_grad():
        out = real(input_ids=torch.randint(0, cfg.vocab_size, (2, 11)), use_cache=True)
    cache = out.cache_params if "cache_params" in out else out.past_key_values
    held = 0
    for layer in cache.layers:
        for name in ("conv_states", "recurrent_states"):
            held += sum(t.numel() for t in (getattr(layer, name, None) or {}).values() if t is not None)
        for name in ("keys", "values"):
            t = getattr(layer, name, None)
            held += t.numel() if t is not None else 0
    ours = _ours(cfg, f"test/{model_type}")
    assert ours.get_memory_kv_cache_total(2, 11, kv_cache_dtype_bytes=4) == held * 4


def _mamba2_2_7b(**kw) -> ModelConfig:
    """state-spaces/mamba2-2.7b (config.json): d_model 2560, 64 layers, expand 2,
    headdim 64, d_state 128, ngroups 1, d_conv 4, vocab 50288."""
    return ModelConfig(name="mamba2-2.7b", num_layers=64, n_head=1, hidden_dim=2560, vocab_size=50288,
                       layer_types=["mamba2"] * 64, ssm_inner_dim=5120, ssm_state_size=128, ssm_num_heads=80,
                       ssm_num_groups=1, mixer_conv_kernel=4, layer_mlp=False, num_norms_per_layer=1,
                       norm_type="rmsnorm", norm_bias=False, position_embedding_type="none", **kw)


def test_mamba2_state_bytes_by_hand():
    """Per layer: conv state (d_inner + 2 G N) x d_conv = (5120 + 2*1*128) * 4 = 21,504 and
    SSM state heads x headdim x N = 80 * 64 * 128 = 655,360 elements: 676,864 x 64 layers
    x 2 bytes (bf16) = 86,638,592 bytes per sequence, whatever the context length.
    TP=2 splits the heads and the inner width; the single B/C group stays on both ranks:
    ((2560 + 256) * 4 + 40 * 64 * 128) * 64 * 2 = 43,384,832 bytes."""
    a = LLMAnalysis(_mamba2_2_7b(), GPU)
    for context in (1, 1000, 100_000):
        assert a.get_memory_kv_cache_per_gpu(1, context) == 86_638_592
    assert a.get_memory_kv_cache_per_gpu(3, 500) == 3 * 86_638_592
    tp2 = LLMAnalysis(_mamba2_2_7b(), GPU, parallelism_config=ParallelismConfig(tp_size=2))
    assert tp2.get_memory_kv_cache_per_gpu(1, 4096) == 43_384_832


def test_inference_uses_state_not_kv_cache():
    """A pure SSM: the cache does not grow with the context, and each decode step reads
    the weights and the state (its bytes moved grow with the batch, not the context)."""
    a = LLMAnalysis(_mamba2_2_7b(), GPU)
    short = a.inference(batch_size_per_gpu=4, seq_len=128, num_tokens_to_generate=32)
    long = a.inference(batch_size_per_gpu=4, seq_len=32_000, num_tokens_to_generate=32)
    assert short["kv_cache_memory_per_gpu"] == long["kv_cache_memory_per_gpu"] == 4 * 86_638_592
    assert a.get_num_flops_decode_step(4, 129) == a.get_num_flops_decode_step(4, 32_001)
    step = lambda b: sum(r["bytes_per_gpu"] for r in a.operators("decode", b, 1000, per_layer=False))  # noqa: E731
    state_rw = 2 * 86_638_592  # read and written once per step
    assert step(2) - step(1) >= state_rw


@pytest.mark.parametrize("fields, message", [
    (dict(layer_types=["mamba"] * 2), "ssm_state_size"),
    (dict(layer_types=["mamba2"] * 2, ssm_state_size=16, ssm_num_heads=5), "ssm_num_heads"),
    (dict(layer_types=["mamba2"] * 2, ssm_state_size=16, ssm_num_heads=8, ssm_num_groups=3), "ssm_num_groups"),
    (dict(layer_types=["rwkv"] * 2), "layer_types"),
    (dict(layer_types=["mamba"] * 2, ssm_state_size=16, ssm_chunk_size=0), "ssm_chunk_size"),
    (dict(layer_mlp=False, moe_num_experts=4, moe_top_k=2), "layer_mlp"),
])
def test_bad_mixer_fields_are_refused(fields, message):
    with pytest.raises(ConfigError, match=message):
        ModelConfig(name="bad", num_layers=2, n_head=4, hidden_dim=64, vocab_size=256, **fields)


def test_bad_parallel_layouts_are_refused():
    model = _mamba2_2_7b()
    with pytest.raises(ConfigError, match="tp_size = 3 must divide ssm_num_heads = 80"):
        LLMAnalysis(model, GPU, parallelism_config=ParallelismConfig(tp_size=3))
    with pytest.raises(ConfigError, match="cp_size = 2"):
        LLMAnalysis(model, GPU, parallelism_config=ParallelismConfig(cp_size=2))
    grouped = _mamba2_2_7b().model_copy(update={"ssm_num_groups": 5})
    with pytest.raises(ConfigError, match="ssm_num_groups = 5"):
        LLMAnalysis(grouped, GPU, parallelism_config=ParallelismConfig(tp_size=2))


def test_nemotron_h_moe_layout_it_cannot_describe_is_refused():
    """Experts on layers 1 and 2 with a dense MLP on layer 3: no 'first k dense, then every
    n-th' layout hits 1 and 2 but not 3."""
    cfg = transformers.CONFIG_MAPPING["nemotron_h"](**dict(
        _NEMOTRON_H, layers_block_type=["linear_attention", "moe", "moe", "mlp"]))
    with pytest.raises(UnsupportedArchitectureError, match="MoE layers"):
        hf_import.model_config_from_hf_dict(cfg.to_dict(), name="test/nemotron_h")


def test_decode_state_traffic_is_timed_as_cache_reads():
    """A pure SSM's decode reads no KV cache, but its mixers read their state each step:
    `kv_cache_latency` reports that time (group mixer_state), and it does not grow with
    the context."""
    a = LLMAnalysis(_mamba2_2_7b(), GPU)
    short = a.inference(batch_size_per_gpu=8, seq_len=128, num_tokens_to_generate=16)
    long = a.inference(batch_size_per_gpu=8, seq_len=16_000, num_tokens_to_generate=16)
    assert short["kv_cache_latency"] > 0
    assert short["kv_cache_latency"] == pytest.approx(long["kv_cache_latency"], rel=1e-9)


def test_training_activations_of_a_pure_ssm_by_hand():
    """Mamba-1 layer, no recomputation, micro-batch b x s tokens, 16-bit: the inputs its
    operators keep for backward, per token: in_proj x (h), conv1d x (d), x_proj x (d),
    dt_proj dt (r), the scan x, dt, z (3d) and B, C (2N), out_proj y (d), i.e.
    h + 6d + r + 2N elements; no MLP. With ATTN recomputation only the block input (h)."""
    h, d, n, r, layers, b, s = 768, 1536, 16, 48, 4, 2, 512
    model = ModelConfig(name="mamba-small", num_layers=layers, n_head=1, hidden_dim=h, vocab_size=1024,
                        layer_types=["mamba"] * layers, ssm_inner_dim=d, ssm_state_size=n, ssm_dt_rank=r,
                        layer_mlp=False, num_norms_per_layer=1, norm_type="rmsnorm", norm_bias=False,
                        position_embedding_type="none")
    a = LLMAnalysis(model, GPU)
    mixer = a.get_activation_memory_per_layer_attn(b, s, is_inference=False)
    assert mixer == b * s * (h + 6 * d + r + 2 * n) * 2
    assert a.get_activation_memory_per_layer_mlp(b, s, is_inference=False) == 0
    assert a.get_activation_memory_per_layer_attn(b, s, is_inference=False, activation_recomputation=2) == b * s * h * 2
