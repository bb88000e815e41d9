"""Recurrent sequence mixers on the exact path (llm_analysis/exact/architectures/: rwkv.py,
recurrent_gemma.py, recurrent_state.py, ...): RWKV (arXiv 2305.13048) and RecurrentGemma / Griffin (arXiv 2402.19427).

Expected values come from the transformers model of the same (small) config built here
on the meta device: its parameters and FlopCounterMode's count of one prefill (batch 1,
16 tokens, a phase the derivation does not probe), and the decode state its own cache
code allocates (RWKV's `state` output, RecurrentGemma's `conv1d_state` and
`recurrent_states`), in bytes per sequence.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_analysis.config import DtypeConfig, ParallelismConfig, get_gpu_config_by_name  # noqa: E402
from llm_analysis.errors import ConfigError  # noqa: E402
from llm_analysis.exact import analysis_from_hf  # noqa: E402
from exact_pairs import exact_and_truth  # noqa: E402

GPU = get_gpu_config_by_name("h100-sxm-80gb")
RWKV = {"model_type": "rwkv", "hidden_size": 64, "num_hidden_layers": 3, "vocab_size": 128, "context_length": 64,
        "attention_hidden_size": 96, "intermediate_size": 160}
GRIFFIN = {"model_type": "recurrent_gemma", "hidden_size": 64, "num_hidden_layers": 5, "vocab_size": 128,
           "lru_width": 64, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16,
           "intermediate_size": 96, "attention_window_size": 32, "conv1d_width": 4}


pytestmark = pytest.mark.usefixtures("exact_cache")  # tests/conftest.py


def _exact_and_truth(cfg):
    return exact_and_truth(cfg, GPU)


def _meta_lm(cfg):
    from transformers import AutoConfig, AutoModelForCausalLM
    config = AutoConfig.for_model(**cfg)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)


def _state_bytes(a, batch):
    """Mixer state bytes of `batch` sequences at a bf16 KV cache (context-independent)."""
    d = a.describer_for(2)
    return batch * d.mixer_state_bytes_per_seq_per_gpu(d.layer_groups)


@pytest.mark.parametrize("cfg", [RWKV, GRIFFIN], ids=["rwkv", "recurrent_gemma"])
def test_recurrent_mixers_are_derived_exactly(cfg):
    derived, truth, a = _exact_and_truth(cfg)
    assert derived == truth
    specs = [s for k in a.describer.description["kinds"] for s in k]
    assert any(s["op"] == "state" for s in specs)  # the new spec is what made it exact
    with pytest.raises(ConfigError, match="recurrent state"):
        analysis_from_hf(cfg, GPU, parallelism_config=ParallelismConfig(tp_size=2))


def test_rwkv_decode_state_is_the_state_transformers_returns():
    # transformers allocates the state with hidden_size channels (its decode runs only
    # when the attention width equals it); the description keeps the recurrence's width
    cfg = dict(RWKV, attention_hidden_size=64)
    lm = _meta_lm(cfg)
    batch = 3
    out = lm(input_ids=torch.zeros(batch, 5, dtype=torch.long, device="meta"), use_cache=True)
    # five tensors [batch, hidden or attention width, layers]: two token shifts (model dtype),
    # the WKV numerator, denominator and running maximum (float32)
    expected = sum(t.numel() * t.element_size() for t in out.state)
    a = analysis_from_hf(cfg, GPU, dtype_config=DtypeConfig(weight_bits=16, activation_bits=16, embedding_bits=16))
    assert _state_bytes(a, batch) == expected
    # hand derivation: per layer 2 x 64 shift elements at 2 bytes + 3 x 64 float32
    assert expected == batch * 3 * (2 * 64 * 2 + 3 * 64 * 4)
    # the state replaces a KV cache: constant in the context
    assert a.get_memory_kv_cache_total(batch, 16) == a.get_memory_kv_cache_total(batch, 4096)


def test_rwkv_decode_reads_and_writes_the_state_and_counts_only_projections():
    a = analysis_from_hf(RWKV, GPU)
    d = a.describer_for(2)
    from llm_analysis.model import Phase
    step = Phase("decode", 2, 1, 40)
    ops = [o for k in d.layer_groups for o in d.layer_ops(step, k) if o.kind == "scan"]
    assert ops and all(o.flops == 0 for o in ops)  # the WKV recurrence is element-wise
    assert sum(o.kv_cache_bytes_read_per_gpu for o in ops) * len(d.kinds_in_order) / len(d.layer_groups) \
        == pytest.approx(_state_bytes(a, 2))
    # a decode step's FLOPs: every projection once per sequence (2 x in x out), LM head included
    h, att, ffn, vocab = 64, 96, 160, 128
    per_layer = 2 * (3 * h * att + att * h) + 2 * (h * ffn + h * h + ffn * h)
    assert a.get_num_flops_decode_step(2, 40) == 2 * (3 * per_layer + 2 * h * vocab)


def test_recurrent_gemma_state_is_the_cache_it_allocates():
    lm = _meta_lm(GRIFFIN)
    batch = 2
    lm(input_ids=torch.zeros(batch, 5, dtype=torch.long, device="meta"), use_cache=True)
    blocks = [layer.temporal_block for layer in lm.model.layers if hasattr(layer.temporal_block, "rg_lru")]
    expected = sum(b.conv1d_state.numel() * b.conv1d_state.element_size()
                   + b.rg_lru.recurrent_states.numel() * b.rg_lru.recurrent_states.element_size() for b in blocks)
    a = analysis_from_hf(GRIFFIN, GPU)
    assert _state_bytes(a, batch) == expected
    # hand derivation: per recurrent layer 64 channels x (4 - 1) conv columns at 2 bytes
    # and 64 float32 LRU channels; layers alternate recurrent, recurrent, attention
    assert expected == batch * len(blocks) * (64 * 3 * 2 + 64 * 4) and len(blocks) == 4


MINIMAX = {"model_type": "minimax", "hidden_size": 64, "num_hidden_layers": 4, "vocab_size": 128,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
           "num_local_experts": 4, "num_experts_per_tok": 2, "block_size": 8, "max_position_embeddings": 256}


def test_lightning_attention_counts_its_blocks_and_keeps_a_state_per_head():
    # block_size 8 below the 16-token truth prefill: two blocks with a carried state
    derived, truth, a = _exact_and_truth(MINIMAX)
    assert derived == truth
    lm = _meta_lm(MINIMAX)
    batch = 2
    out = lm(input_ids=torch.zeros(batch, 5, dtype=torch.long, device="meta"), use_cache=True)
    linear = [t for t in out.past_key_values.linear_cache if isinstance(t, torch.Tensor)]
    expected = sum(t.numel() * t.element_size() for t in linear)
    # hand derivation: 4 heads x 16 x 16 at 2 bytes per lightning layer
    assert expected == batch * len(linear) * 4 * 16 * 16 * 2 and linear
    assert _state_bytes(a, batch) == expected
    # a decode step, per lightning layer and sequence: k^T v and q times the state per head
    from llm_analysis.model import Phase
    d = a.describer
    step = Phase("decode", 1, 1, 100)
    scans = [o for k, n in d.layer_groups.items() for o in d.layer_ops(step, k) for _ in range(n) if o.kind == "scan"]
    assert sum(o.flops for o in scans) == len(linear) * 4 * 2 * (2 * 16 * 16)


ZAMBA = {"model_type": "zamba", "hidden_size": 64, "num_hidden_layers": 7, "vocab_size": 128,
         "num_attention_heads": 4, "num_key_value_heads": 4, "attention_head_dim": 32, "attention_hidden_size": 128,
         "intermediate_size": 96, "n_mamba_heads": 2, "mamba_d_state": 8, "mamba_dt_rank": 8,
         "attn_layer_period": 3, "attn_layer_offset": 1, "max_position_embeddings": 256}


def test_zamba_mamba_layers_and_shared_attention_with_their_cache():
    derived, truth, a = _exact_and_truth(ZAMBA)
    assert derived == truth
    lm = _meta_lm(ZAMBA)
    batch, context = 2, 5
    cache = lm(input_ids=torch.zeros(batch, context, dtype=torch.long, device="meta"), use_cache=True).past_key_values
    nbytes = lambda t: t.numel() * t.element_size()  # noqa: E731
    states = sum(nbytes(t) for layer in cache.layers for d in (layer.conv_states, layer.recurrent_states)
                 for t in d.values())
    kv = sum(nbytes(layer.keys) + nbytes(layer.values) for layer in cache.layers if getattr(layer, "keys", None)
             is not None)
    # hand derivation: 7 Mamba mixers, each a conv state of 2 x 64 channels x 4 columns
    # (bf16) and an SSM state of 128 channels x 8 (float32); 2 shared-attention layers
    # caching 4 heads x 32 keys and values per token (bf16)
    assert states == batch * 7 * (128 * 4 * 2 + 128 * 8 * 4)
    assert kv == batch * context * 2 * (2 * 4 * 32 * 2)
    assert _state_bytes(a, batch) == states
    assert a.get_memory_kv_cache_total(batch, context, kv_cache_dtype_bytes=2) == states + kv


ZAMBA2 = {"model_type": "zamba2", "hidden_size": 64, "num_hidden_layers": 6, "vocab_size": 128,
          "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 96, "n_mamba_heads": 4,
          "mamba_headdim": 32, "mamba_d_state": 8, "chunk_size": 6, "max_position_embeddings": 256,
          "layer_types": ["linear_attention", "linear_attention", "hybrid"] * 2, "hybrid_layer_ids": [2, 5]}


def test_zamba2_mamba2_chunks_are_padded_and_its_state_is_the_cache():
    # chunk_size 6 does not divide the 16-token prefill: the eager SSD pads to 18
    derived, truth, a = _exact_and_truth(ZAMBA2)
    assert derived == truth
    lm = _meta_lm(ZAMBA2)
    batch = 2
    cache = lm(input_ids=torch.zeros(batch, 5, dtype=torch.long, device="meta"), use_cache=True).past_key_values
    states = sum(t.numel() * t.element_size() for layer in cache.layers
                 for d in (layer.conv_states, layer.recurrent_states) for t in d.values())
    # hand derivation: 6 Mamba-2 mixers (the hybrid layers hold one too), each a conv state
    # of (128 + 2 x 8) channels x 4 columns (bf16) and an SSM state of 4 heads x 32 x 8
    # (float32: the eager SSD computes the states in float32)
    assert states == batch * 6 * (144 * 4 * 2 + 4 * 32 * 8 * 4)
    assert _state_bytes(a, batch) == states


LFM3 = {"model_type": "lfm3", "hidden_size": 64, "num_hidden_layers": 5, "vocab_size": 128, "pad_token_id": 0,
        "bos_token_id": 1, "eos_token_id": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "intermediate_size": 96, "sliding_window": 8, "max_position_embeddings": 256,
        "layer_types": ["conv", "full_attention", "conv", "sliding_attention", "conv"]}


def test_lfm3_short_convolution_and_its_conv_state():
    derived, truth, a = _exact_and_truth(LFM3)
    assert derived == truth
    lm = _meta_lm(LFM3)
    batch = 2
    cache = lm(input_ids=torch.zeros(batch, 5, dtype=torch.long, device="meta"), use_cache=True).past_key_values
    states = sum(t.numel() * t.element_size() for layer in cache.layers
                 for t in getattr(layer, "conv_states", {}).values())
    # hand derivation: 3 conv layers, each 64 channels x conv_L_cache (7) columns in bf16
    assert states == batch * 3 * 64 * 7 * 2
    assert _state_bytes(a, batch) == states
    # a decode step's conv, eager: the 7 cached columns and the new one convolved (2 outputs)
    from llm_analysis.model import Phase
    d = a.describer
    step = Phase("decode", 1, 1, 100)
    scans = [o for k, n in d.layer_groups.items() for o in d.layer_ops(step, k) for _ in range(n) if o.kind == "scan"]
    assert sum(o.flops for o in scans) == 3 * 2 * 64 * 7 * 2


BAILING = {"model_type": "bailing_hybrid", "hidden_size": 64, "num_hidden_layers": 4, "vocab_size": 128,
           "pad_token_id": 0, "eos_token_id": 1, "num_attention_heads": 4, "num_key_value_heads": 4,
           "intermediate_size": 96, "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_token": 2,
           "num_shared_experts": 1, "num_expert_group": 2, "topk_group": 1, "first_k_dense_replace": 1,
           "kv_lora_rank": 32, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32, "v_head_dim": 32, "head_dim": 16,
           "qk_head_dim": 48, "linear_head_dim": 16, "linear_num_heads": 4, "layer_group_size": 2,
           "max_position_embeddings": 256, "num_nextn_predict_layers": 0}


def test_bailing_hybrid_kimi_delta_attention_and_its_state():
    # the chunked delta rule pads the 16-token prefill to one chunk of 64
    derived, truth, a = _exact_and_truth(BAILING)
    assert derived == truth
    lm = _meta_lm(BAILING)
    batch = 2
    cache = lm(input_ids=torch.zeros(batch, 5, dtype=torch.long, device="meta"), use_cache=True).past_key_values
    states = sum(t.numel() * t.element_size() for layer in cache.layers
                 for d in (getattr(layer, "conv_states", {}), getattr(layer, "recurrent_states", {}))
                 for t in d.values())
    kda_layers = sum(1 for k, _ in a.describer.description["layers"]
                     if any(s["op"] == "state" for s in a.describer.description["kinds"][k]))
    # hand derivation: per KDA layer a conv state of 3 x 4 heads x 16 channels x 4 columns
    # (bf16) and a 4 x 16 x 16 delta-rule state (float32)
    assert kda_layers == 2 and states == batch * kda_layers * (192 * 4 * 2 + 4 * 16 * 16 * 4)
    assert _state_bytes(a, batch) == states
