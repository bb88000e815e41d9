"""Short convolutions at other sites than a layer's mixer (Inkling, Inkling2:
architectures/inkling.py), block attention residuals over depth (Inkling2:
architectures/inkling.py) and xLSTM's mLSTM cell (architectures/xlstm.py) on
the exact path.

Expected values come from the transformers models of small configs built here:
parameters, FlopCounterMode counts (prefill at lengths the derivation does not probe,
decode steps with the model's own cache) and the bytes of the cache objects transformers
allocates. Inkling's meta-device forward reads a tensor's value (`Tensor.item()`) in the
reference truth run, so its figures come from a real forward on CPU (tiny config,
eager attention: the implementation the derivation probes).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_analysis.config import ParallelismConfig, get_gpu_config_by_name  # noqa: E402
from llm_analysis.errors import ConfigError, UnsupportedArchitectureError  # noqa: E402
from llm_analysis.exact import analysis_from_hf  # noqa: E402
from llm_analysis.exact.compare import engine_matmul_flops  # noqa: E402
from exact_pairs import exact_and_truth  # noqa: E402

GPU = get_gpu_config_by_name("a100-sxm-80gb")
# hidden 128: the layer's q/k width 64 equals the config's (rounded up to 64), so
# transformers' xLSTMCache fits the layer; chunk 16 and max_inference_chunksize 48 make
# prompts of a few dozen tokens use every path (chunks, recurrent steps, the model's split)
XLSTM = {"model_type": "xlstm", "hidden_size": 128, "embedding_dim": 128, "num_blocks": 2, "num_hidden_layers": 2,
         "num_heads": 4, "vocab_size": 128, "chunk_size": 16, "max_inference_chunksize": 48}
INKLING = {"model_type": "inkling_text", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 16, "swa_num_attention_heads": 4, "swa_num_key_value_heads": 2,
           "swa_head_dim": 16, "sliding_window_size": 8, "d_rel": 4, "rel_extent": 32, "vocab_size": 128,
           "intermediate_size": 96, "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2,
           "n_shared_experts": 1, "layer_types": ["hybrid_sliding", "hybrid"], "mlp_layer_types": ["dense", "sparse"],
           "max_position_embeddings": 256}


pytestmark = pytest.mark.usefixtures("exact_cache")  # tests/conftest.py


def _lm(cfg, device="meta", dtype=torch.float32):
    from transformers import AutoConfig, AutoModelForCausalLM
    config = AutoConfig.for_model(**cfg)
    torch.manual_seed(0)
    with torch.device(device):
        lm = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="eager")
    return lm.eval(), config


def _counted(lm, **kwargs):
    from torch.utils.flop_counter import FlopCounterMode
    from llm_analysis.exact.flops import _custom_formulas
    from torch.nn.attention import SDPBackend, sdpa_kernel
    counter = FlopCounterMode(display=False, custom_mapping=_custom_formulas())
    # xLSTM's split of a long prompt allocates its cache on the default device; on CPU,
    # scaled_dot_product_attention's fused kernel has no FLOP formula, its math form does
    # (the form meta tensors take)
    with torch.no_grad(), torch.device(next(lm.parameters()).device), sdpa_kernel(SDPBackend.MATH), counter:
        out = lm(**kwargs)
    return counter.get_total_flops(), out


def _state_bytes(a, batch):
    d = a.describer_for(2)
    return batch * d.mixer_state_bytes_per_seq_per_gpu(d.layer_groups)


# ------------------------------------------------------------------ xLSTM
def test_xlstm_prefill_is_exact_at_every_kernel_path():
    derived, truth, a = exact_and_truth(XLSTM, GPU)
    assert derived == truth
    lm, _ = _lm(XLSTM)  # float32: the chunkwise kernel mixes its float32 state into bf16 chunks
    # 1: a single step; 20: one chunk and 4 steps; 48: three chunks (the split's piece);
    # 100 and 130: split into 48 + 48 + the rest (4 steps; 2 chunks and 2 steps)
    for seq_len in (1, 20, 48, 100, 130):
        ids = torch.zeros(1, seq_len, dtype=torch.long, device="meta")
        flops, _ = _counted(lm, input_ids=ids, use_cache=False)
        assert engine_matmul_flops(a, 1, seq_len) == flops, seq_len


def test_xlstm_cell_flops_by_hand():
    # per head d_qk = 64 / 4 = 16, d_v = 128 / 4 = 32; chunk L = 16 (architectures/xlstm.py):
    # a chunk costs 2 L dqk dv + L^2 (dqk + dv) + L dqk MACs, a step 2 dqk dv + dqk
    from llm_analysis.exact.architectures.xlstm import MlstmCell
    from llm_analysis.model import Phase
    cell = MlstmCell(heads=4, d_qk=16, d_v=32, chunk=16, max_chunk=48)
    mlstm_flops = lambda phase: cell.flops(phase, serving=False)  # noqa: E731
    chunk = 2 * 16 * 16 * 32 + 16 * 16 * (16 + 32) + 16 * 16
    step = 2 * 16 * 32 + 16
    assert (chunk, step) == (28928, 1040)
    assert mlstm_flops(Phase("prefill", 1, 20, 20)) == 2 * 4 * (chunk + 4 * step)
    assert mlstm_flops(Phase("prefill", 1, 100, 100)) == 2 * 4 * (6 * chunk + 4 * step)
    # training runs unsplit (the split is eval-mode only): 6 chunks and 4 steps as well
    assert mlstm_flops(Phase("train", 1, 100, 100)) == 2 * 4 * (6 * chunk + 4 * step)
    assert mlstm_flops(Phase("train", 1, 130, 130)) == 2 * 4 * (8 * chunk + 2 * step)
    assert mlstm_flops(Phase("prefill", 1, 130, 130)) == 2 * 4 * (2 * 3 * chunk + 2 * chunk + 2 * step)
    assert mlstm_flops(Phase("decode", 3, 1, 50)) == 2 * 3 * 4 * step


def test_xlstm_decode_step_and_state_are_transformers_own():
    from transformers.models.xlstm.modeling_xlstm import xLSTMCache
    a = analysis_from_hf(XLSTM, GPU)
    lm, config = _lm(XLSTM)
    batch = 3
    cache = xLSTMCache(config, batch, device="meta", dtype=torch.bfloat16)
    flops, _ = _counted(lm, input_ids=torch.zeros(batch, 1, dtype=torch.long, device="meta"), cache_params=cache,
                        use_cache=True)
    assert a.get_num_flops_decode_step(batch, 40) == flops
    cached = sum(t.numel() * t.element_size() for state in cache.rnn_state.values() for t in state)
    # hand derivation: 2 layers x 4 heads x (16 x 32 + 16 + 1) elements at 2 bytes
    assert cached == batch * 2 * 4 * (16 * 32 + 16 + 1) * 2
    assert _state_bytes(a, batch) == cached
    # the state replaces a KV cache: constant in the context
    assert a.get_memory_kv_cache_total(batch, 16) == a.get_memory_kv_cache_total(batch, 4096) == cached
    with pytest.raises(ConfigError, match="recurrent state"):
        analysis_from_hf(XLSTM, GPU, parallelism_config=ParallelismConfig(tp_size=2))


def test_xlstm_whose_cache_does_not_fit_its_layer_refuses_decode():
    # hidden 64: the layer computes q/k width 32, transformers' xLSTMCache allocates 64
    # (rounded up): its own decode and its split of long prompts fail, so ours refuse
    cfg = dict(XLSTM, hidden_size=64, embedding_dim=64, max_inference_chunksize=2048)
    a = analysis_from_hf(cfg, GPU)
    assert a.get_num_flops_fwd_total(1, 64) > 0  # a prefill within one piece is described
    with pytest.raises(UnsupportedArchitectureError, match="xLSTMCache"):
        a.get_num_flops_decode_step(1, 40)
    with pytest.raises(UnsupportedArchitectureError, match="max_inference_chunksize"):
        a.get_num_flops_fwd_total(1, 4096)


def test_xlstm_train_mode_is_refused():
    with pytest.raises(UnsupportedArchitectureError):
        analysis_from_hf(dict(XLSTM, mode="train"), GPU)


# ------------------------------------------------------------------ Inkling
def _prefill_decode_and_cache(cfg, vocab: int, batch: int, prompt: int):
    """The analysis of `cfg` with its parameters, prefill FLOPs and one decode step's FLOPs
    checked against the transformers model run on the CPU (a real cache after a real
    prefill); returns (analysis, that cache's conv-state bytes, its key/value bytes)."""
    a = analysis_from_hf(cfg, GPU)
    lm, config = _lm(cfg, device="cpu", dtype=torch.float32)
    assert a.get_num_params_total() == sum(p.numel() for p in lm.parameters())
    ids = torch.randint(0, vocab, (batch, prompt))
    flops, _ = _counted(lm, input_ids=ids, use_cache=False)
    assert engine_matmul_flops(a, batch, prompt) == flops
    from transformers import DynamicCache
    _, out = _counted(lm, input_ids=ids, past_key_values=DynamicCache(config=config), use_cache=True)
    flops, out = _counted(lm, input_ids=ids[:, :1], past_key_values=out.past_key_values, use_cache=True)
    assert a.get_num_flops_decode_step(batch, prompt + 1) == flops
    cache = out.past_key_values
    conv = sum(t.numel() * t.element_size() for layer in cache.layers for t in layer.conv_states.values())
    kv = sum(layer.keys.numel() * layer.keys.element_size() + layer.values.numel() * layer.values.element_size()
             for layer in cache.layers)
    return a, conv, kv


def test_inkling_short_convolutions_prefill_decode_and_state():
    batch, prompt = 2, 20
    a, conv, kv = _prefill_decode_and_cache(INKLING, 128, batch, prompt)
    # hand derivation, per layer and sequence: k and v convs (2 KV heads x 16 = 32 channels),
    # post-attention and post-MLP convs (64 channels), each 4 float32 inputs per channel
    assert conv == batch * 2 * (2 * 32 + 2 * 64) * 4 * 4
    assert _state_bytes(a, batch) == conv
    # keys and values: the full layer keeps 21 tokens, the sliding one its window - 1 = 7
    assert kv == batch * (21 + 7) * 2 * 2 * 16 * 4
    assert a.get_memory_kv_cache_total(batch, prompt + 1, kv_cache_dtype_bytes=4) == conv + kv


def test_inkling_site_states_are_filed_under_their_block():
    a = analysis_from_hf(INKLING, GPU)
    states = {s["name"]: s["group"] for k in a.describer.description["kinds"] for s in k if s["op"] == "state"}
    assert states == {"self_attn.k_sconv.state": "attention", "self_attn.v_sconv.state": "attention",
                      "attn_sconv.state": "attention", "mlp_sconv.state": "mlp"}


INKLING2 = {"model_type": "inkling2_text", "hidden_size": 64, "num_hidden_layers": 5, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 16, "swa_num_attention_heads": 4, "swa_num_key_value_heads": 2,
            "swa_head_dim": 16, "sliding_window_size": 8, "d_rel": 4, "rel_extent": 32, "vocab_size": 128,
            "unpadded_vocab_size": 120, "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2,
            "n_layers_per_attn_res_block": 2, "log_scaling_n_floor": 16, "max_position_embeddings": 256,
            "layer_types": ["hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid", "hybrid_sliding"]}


def test_inkling2_depth_attention_dynamic_convs_prefill_decode_and_state():
    batch, prompt = 2, 20
    a, conv, kv = _prefill_decode_and_cache(INKLING2, 120, batch, prompt)
    # per layer: k and v convs (static or per-token taps: 32 channels), post-attention and
    # post-MLP convs (64), 4 float32 inputs per channel each
    assert conv == batch * 5 * (2 * 32 + 2 * 64) * 4 * 4
    assert _state_bytes(a, batch) == conv
    assert a.get_memory_kv_cache_total(batch, prompt + 1, kv_cache_dtype_bytes=4) == conv + kv


def test_inkling2_depth_attention_by_hand():
    # blocks of 2 layers: boundaries at layers 0, 2, 4. Per token, q (n_q x 64) against
    # n_b block states: 2 x 2 n_q n_b 64 FLOPs. Layer 3 (full attention, not a boundary):
    # ceil(3/2) = 2 states + the partial sum, 3 queries before attention, 1 before the MLP;
    # layer 4 (a boundary) adds its input before the MLP; the final input sees ceil(5/2) + 1
    a = analysis_from_hf(INKLING2, GPU)
    desc = a.describer.description
    per_row = {}
    for i, (k, _) in enumerate(desc["layers"]):
        for s in desc["kinds"][k]:
            if s["name"].endswith("depth_attention"):
                per_row[(i, s["name"])] = s["flops_per_row"]
    assert per_row[(3, "attention_input.depth_attention")] == 4 * 3 * 3 * 64
    assert per_row[(3, "mlp_input.depth_attention")] == 4 * 1 * 3 * 64
    assert per_row[(4, "mlp_input.depth_attention")] == 4 * 1 * (2 + 1 + 1) * 64
    assert (0, "attention_input.depth_attention") not in per_row  # layer 0 has none
    final = next(s for s in desc["head"] if s["name"].endswith("depth_attention"))
    assert final["flops_per_row"] == 4 * 1 * (3 + 1) * 64
