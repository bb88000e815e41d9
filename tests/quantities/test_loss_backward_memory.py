"""`get_loss_bwd_memory(batch_size, seq_len)`: the temporary memory of the loss' backward
pass, as the mirrored system defines it (cli99/llm-analysis, analysis.py: "the temporary
memory (in bytes) required for the backward pass of the loss function", the size of the
logits). Derived by hand here: the cross-entropy backward writes the gradient of the logits,
one tensor of the logits' shape and dtype,

    batch x positions per rank x vocabulary columns per rank x bytes per activation,

where tensor parallelism splits the vocabulary (Megatron's vocab-parallel head and loss:
ceil(V / t) columns on a rank), context parallelism splits the positions (s / cp each) and a
model without an LM head (an encoder) has no logits and no such loss."""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import DtypeConfig, ModelConfig, ParallelismConfig, get_gpu_config_by_name, \
    get_model_config_by_name

GPU = get_gpu_config_by_name("a100-sxm-80gb")
V = 50257  # GPT-2's vocabulary: not a multiple of 4, so a rank's share is rounded up
B, S = 3, 1000


def _gpt(**par) -> LLMAnalysis:
    model = ModelConfig(name="gpt2-like", num_layers=2, n_head=16, hidden_dim=1024, vocab_size=V, max_seq_len=4096)
    return LLMAnalysis(model, GPU, DtypeConfig(), ParallelismConfig(**par))


def test_one_gpu_holds_the_whole_logits_gradient():
    # 3 sequences x 1000 positions x 50257 vocabulary columns x 2 bytes (16-bit activations)
    assert _gpt().get_loss_bwd_memory(B, S) == 3 * 1000 * 50257 * 2


def test_tensor_parallelism_splits_the_vocabulary_rounding_up():
    # ceil(50257 / 4) = 12565 columns on each of the 4 ranks
    assert _gpt(tp_size=4).get_loss_bwd_memory(B, S) == 3 * 1000 * 12565 * 2


def test_context_parallelism_splits_the_positions():
    # each of 2 context-parallel ranks computes the loss of its 1000 / 2 = 500 positions
    assert _gpt(tp_size=4, cp_size=2).get_loss_bwd_memory(B, S) == pytest.approx(3 * 500 * 12565 * 2, rel=1e-12)


def test_the_activation_dtype_sets_the_element_size():
    # 16-bit weights and embeddings, 32-bit activations: the logits and their gradient take 4 bytes
    model = ModelConfig(name="gpt2-like", num_layers=2, n_head=16, hidden_dim=1024, vocab_size=V, max_seq_len=4096)
    a = LLMAnalysis(model, GPU, DtypeConfig(name="w16a32e16", weight_bits=16, activation_bits=32, embedding_bits=16))
    assert a.get_loss_bwd_memory(B, S) == 3 * 1000 * 50257 * 4


def test_an_encoder_without_lm_head_has_no_loss_over_the_vocabulary():
    bert = LLMAnalysis(get_model_config_by_name("bert-base-uncased"), GPU)
    assert bert.get_loss_bwd_memory(B, 128) == 0.0


def test_it_is_the_size_of_the_logits_as_the_mirrored_system_defines_it():
    a = _gpt(tp_size=4)
    assert a.get_loss_bwd_memory(B, S) == a.get_activation_memory_output_embedding(B, S)
