"""Cross-attention decoders (encoder-decoder models' decoder side): parameters and
prefill FLOPs against the real transformers `*ForCausalLM` model on the meta device,
counted by FlopCounterMode WITH encoder states of a chosen length (so the
cross-attention's own FLOPs are checked, not only its weights); the cross KV cache
by hand; and the errors of bad input."""

from __future__ import annotations

import copy
import logging

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, ParallelismConfig, get_gpu_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.hub.errors import UnsupportedArchitecture
from llm_analysis.hub.mapping import map_hf_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

GPU = get_gpu_config_by_name("a100-sxm-80gb")
_BART_LIKE = dict(d_model=64, decoder_layers=2, encoder_layers=2, decoder_attention_heads=4,
                  encoder_attention_heads=4, decoder_ffn_dim=96, encoder_ffn_dim=96, vocab_size=101,
                  max_position_embeddings=40)
# model_type -> (causal-LM class, small config); each exercises a different decoder shape
CASES = {
    "bart": ("BartForCausalLM", _BART_LIKE),
    "bart-untied": ("BartForCausalLM", {**_BART_LIKE, "tie_word_embeddings": False}),
    "mbart": ("MBartForCausalLM", _BART_LIKE),
    "plbart": ("PLBartForCausalLM", {**_BART_LIKE, "scale_embedding": True}),
    "mvp": ("MvpForCausalLM", _BART_LIKE),
    "marian": ("MarianForCausalLM", {**_BART_LIKE, "decoder_vocab_size": 77, "pad_token_id": 1}),
    "pegasus": ("PegasusForCausalLM", _BART_LIKE),
    "blenderbot": ("BlenderbotForCausalLM", _BART_LIKE),
    "blenderbot-small": ("BlenderbotSmallForCausalLM", _BART_LIKE),
    "bigbird_pegasus": ("BigBirdPegasusForCausalLM", {**_BART_LIKE, "use_bias": False}),
    # the image encoder is narrower than the decoder: k/v project from 48
    "trocr": ("TrOCRForCausalLM", {**_BART_LIKE, "cross_attention_hidden_size": 48}),
    "trocr-sinusoidal": ("TrOCRForCausalLM", {**_BART_LIKE, "use_learned_position_embeddings": False,
                                              "layernorm_embedding": False}),
    "whisper": ("WhisperForCausalLM", {**_BART_LIKE, "max_target_positions": 24, "max_source_positions": 30,
                                       "num_mel_bins": 8, "pad_token_id": 1}),
}
BATCH, SEQ, ENC = 2, 8, 13


def _hf_config(case: str):
    model_type = case.split("-untied")[0].split("-sinusoidal")[0]
    d = {"model_type": model_type, **CASES[case][1]}
    return model_type, d


def _ours(case: str) -> ModelConfig:
    _, d = _hf_config(case)
    return map_hf_config(d, name=case, source="test", what=case, trust_remote_code=False, revision=None)


def _real(case: str):
    """(parameters, prefill FLOPs with encoder states of ENC positions) of the real model."""
    from torch.utils.flop_counter import FlopCounterMode
    model_type, d = _hf_config(case)
    logging.disable(logging.WARNING)
    cfg = transformers.CONFIG_MAPPING[model_type](**{k: v for k, v in d.items() if k != "model_type"})
    cfg._attn_implementation = "eager"  # attention as matmuls FlopCounterMode sees
    with torch.device("meta"):
        model = getattr(transformers, CASES[case][0])(copy.deepcopy(cfg)).eval()
    params = sum(p.numel() for p in model.parameters())  # tied weights are one parameter
    enc_dim = d.get("cross_attention_hidden_size") or d["d_model"]
    ids = torch.zeros(BATCH, SEQ, dtype=torch.long, device="meta")
    enc = torch.zeros(BATCH, ENC, enc_dim, device="meta")
    # an explicit all-ones mask keeps transformers from inspecting values (meta tensors have none)
    mask = torch.ones(BATCH, SEQ, dtype=torch.long, device="meta")
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        if model_type == "whisper":  # WhisperForCausalLM takes the encoder's output under this name
            model(input_ids=ids, attention_mask=mask, encoder_outputs=(enc,), use_cache=False)
        else:
            model(input_ids=ids, attention_mask=mask, encoder_hidden_states=enc, use_cache=False)
    return params, counter.get_total_flops()


def _engine_prefill_flops(a: LLMAnalysis, encoder_seq_len: int) -> int:
    rows = a.operators("prefill", BATCH, SEQ, per_layer=False, encoder_seq_len=encoder_seq_len)
    return int(sum(r["flops"] for r in rows if r["kind"] in ("matmul", "attention")))


@pytest.mark.parametrize("case", sorted(CASES))
def test_params_and_flops_match_transformers_with_encoder_states(case):
    cfg = _ours(case)
    assert cfg.cross_attention
    params, flops = _real(case)
    a = LLMAnalysis(cfg, GPU)  # views count the eager forward ("transformers" conventions)
    assert a.get_num_params_total() == params  # no encoder_seq_len needed for parameters
    assert _engine_prefill_flops(a, ENC) == flops


def test_without_encoder_states_the_block_does_no_work():
    """encoder_seq_len=0: transformers skips the block; ours keeps its weights only."""
    a = LLMAnalysis(_ours("bart"), GPU)
    with_enc = _engine_prefill_flops(a, ENC)
    without = _engine_prefill_flops(a, 0)
    # by hand, per layer: q and o projections 2*(2*b*s*h*h), k and v 2*(2*b*ENC*h*h) with h=64,
    # the core 2*b*heads*s*ENC*(2*head_dim) (scores and weighted values), all over 2 layers
    b, s, h, heads = BATCH, SEQ, 64, 4
    per_layer = 2 * (2 * b * s * h * h) + 2 * (2 * b * ENC * h * h) + 2 * b * heads * s * ENC * 2 * (h // heads)
    assert with_enc - without == 2 * per_layer
    rows = a.operators("prefill", BATCH, SEQ, encoder_seq_len=0)
    cross = [r for r in rows if r["name"].startswith("cross_")]
    assert cross and all(r["flops"] == 0 for r in cross)


def test_decode_step_reads_the_cross_cache_and_projects_nothing():
    a = LLMAnalysis(_ours("bart"), GPU).with_encoder_seq_len(ENC)
    rows = {r["name"]: r for r in a.operators("decode", BATCH, SEQ, context_len=SEQ + 1)}
    assert rows["cross_k_proj"]["flops"] == rows["cross_v_proj"]["flops"] == 0
    # one new token per sequence over all ENC positions: 2*b*heads*1*ENC*(2*head_dim)
    assert rows["cross_attention_core"]["flops"] == 2 * BATCH * 4 * ENC * 2 * 16
    assert rows["cross_q_proj"]["flops"] == 2 * BATCH * 64 * 64


def test_cross_kv_cache_bytes_by_hand():
    """layers x batch x encoder_seq_len x 2 (k and v) x kv width x bytes, beside the
    self-attention cache (layers x batch x tokens x 2 x kv width x bytes)."""
    cfg = _ours("bart")
    layers, kv_width, b, s, n_enc, nbytes = 2, 64, 3, 10, 50, 2
    self_kv = layers * b * s * 2 * kv_width * nbytes
    cross_kv = layers * b * n_enc * 2 * kv_width * nbytes
    a = LLMAnalysis(cfg, GPU).with_encoder_seq_len(n_enc)
    assert a.get_memory_kv_cache_per_gpu(b, s) == self_kv + cross_kv
    assert a.get_memory_kv_cache_per_gpu(b, s, kv_cache_dtype_bytes=1) == (self_kv + cross_kv) / 2  # 1-byte cache
    tp2 = LLMAnalysis(cfg, GPU, parallelism_config=ParallelismConfig(tp_size=2)).with_encoder_seq_len(n_enc)
    assert tp2.get_memory_kv_cache_per_gpu(b, s) == (self_kv + cross_kv) / 2  # heads split over TP
    summary = a.inference(batch_size_per_gpu=b, seq_len=s - 2, num_tokens_to_generate=2, encoder_seq_len=n_enc)
    assert summary["kv_cache_memory_per_gpu"] == self_kv + cross_kv


def test_missing_encoder_seq_len_is_refused_naming_it():
    a = LLMAnalysis(_ours("whisper"), GPU)
    assert a.get_num_params_total() > 0 and a.get_weight_memory_per_gpu() > 0  # shapes only: fine
    for call in (lambda: a.inference(seq_len=8, num_tokens_to_generate=2),
                 lambda: a.training(batch_size_per_gpu=1, seq_len=8),
                 lambda: a.get_num_flops_fwd_total(1, 8),
                 lambda: a.get_memory_kv_cache_per_gpu(1, 8),
                 lambda: a.operators("prefill", 1, 8)):
        with pytest.raises(ConfigError, match="encoder_seq_len"):
            call()


@pytest.mark.parametrize("bad", [-1, 2.5, "64", True])
def test_bad_encoder_seq_len(bad):
    a = LLMAnalysis(_ours("bart"), GPU)
    with pytest.raises(ConfigError, match="encoder_seq_len"):
        a.inference(seq_len=8, num_tokens_to_generate=2, encoder_seq_len=bad)


def test_encoder_seq_len_on_a_model_without_cross_attention():
    m = ModelConfig(name="dec", num_layers=2, n_head=4, hidden_dim=64, vocab_size=100, max_seq_len=64)
    a = LLMAnalysis(m, GPU)
    with pytest.raises(ConfigError, match="no cross-attention") as e:
        a.inference(seq_len=8, num_tokens_to_generate=2, encoder_seq_len=16)
    assert "\n" not in str(e.value)
    assert a.with_encoder_seq_len(0) is a  # 0 changes nothing there


def test_config_validation_and_layouts():
    with pytest.raises(ConfigError, match="cross_attention_dim"):
        ModelConfig(name="x", num_layers=2, n_head=4, hidden_dim=64, vocab_size=100, cross_attention_dim=32)
    with pytest.raises(ConfigError, match="encoder_only"):
        ModelConfig(name="x", num_layers=2, n_head=4, hidden_dim=64, vocab_size=100, cross_attention=True,
                    encoder_only=True)
    with pytest.raises(ConfigError, match="cp_size"):
        LLMAnalysis(_ours("bart"), GPU, parallelism_config=ParallelismConfig(cp_size=2))


def test_prophetnet_is_refused_naming_its_ngram_streams():
    d = {"model_type": "prophetnet", "hidden_size": 64, "num_decoder_layers": 2, "num_encoder_layers": 2,
         "num_decoder_attention_heads": 4, "num_encoder_attention_heads": 4, "decoder_ffn_dim": 96,
         "encoder_ffn_dim": 96, "vocab_size": 101}
    with pytest.raises(UnsupportedArchitecture, match="n-gram"):
        map_hf_config(d, name="p", source="test", what="p", trust_remote_code=False, revision=None)


def test_training_counts_cross_attention_activations():
    a = LLMAnalysis(_ours("bart"), GPU)
    base = a.training(batch_size_per_gpu=2, seq_len=16, encoder_seq_len=0)["activation_memory_per_gpu"]
    more = a.training(batch_size_per_gpu=2, seq_len=16, encoder_seq_len=64)["activation_memory_per_gpu"]
    # per layer with flash attention (Korthikanti terms, 2-byte activations, 2-byte norm input with
    # dropout masks of 1 byte): norm input 4*sbh... computed term by term below
    sb, h, n_enc, b = 2 * 16, 64, 64, 2
    per_layer = (sb * h * 4  # the block's norm input (layernorm_dtype_bytes 4 by default)
                 + sb * h * 2  # q projection input
                 + sb * h * 2  # Q
                 + b * n_enc * 2 * h * 2  # K and V over the encoder positions
                 + sb * h * 2  # output projection input
                 + sb * h)  # output dropout mask
    assert more - base == 2 * per_layer


def test_cli_flag(tmp_path):
    import json
    from llm_analysis.cli.commands import infer
    _, d = _hf_config("bart")
    (tmp_path / "config.json").write_text(json.dumps(d))
    s = infer(model_name=str(tmp_path), gpu_name="a100-sxm-80gb", seq_len=8, num_tokens_to_generate=2,
              encoder_seq_len=20, quiet=True)
    # 2 layers x batch 1 x (8 + 2 tokens of self cache + 20 encoder positions) x k,v x 64 x 2 bytes
    assert s["kv_cache_memory_per_gpu"] == 2 * 1 * (8 + 2 + 20) * 2 * 64 * 2


def test_encoder_view_keeps_the_callers_conventions():
    """inference() counts under the serving conventions even after a view over the same
    encoder length was made under the transformers ones (the views are cached apart)."""
    a = LLMAnalysis(_ours("bart"), GPU)
    eager = a.with_encoder_seq_len(ENC)
    serving = a.with_conventions(a.inference_conventions).with_encoder_seq_len(ENC)
    assert serving is not eager and serving.conventions == a.inference_conventions
    assert eager.conventions == a.conventions
