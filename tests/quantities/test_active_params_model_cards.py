"""Active parameters against the figures model cards publish (issue 28 item 6). Cards differ on
the input-embedding table, so both conventions are checked, each against the cards that use it:

- OpenAI, "gpt-oss-120b & gpt-oss-20b Model Card" (arXiv 2508.10925, Table 1): gpt-oss-120b
  116.83 B total, 5.13 B active; gpt-oss-20b 20.91 B total, 3.61 B active. Their active figure
  leaves the embedding out (the table's "Embed + Unembed" row is 1.16 B, and 5.13 B is the
  attention, the 4 routed experts' share of the MLP and the unembedding only).
- Qwen3-30B-A3B model card (Hugging Face, Qwen/Qwen3-30B-A3B): 30.5 B total, 3.3 B activated.
- Mistral AI, "Mixtral of experts" (2023-12-11 announcement; Jiang et al. 2024, arXiv 2401.04088):
  46.7 B total, 12.9 B used per token.
The last two count the embedding table whole (without it Qwen3-30B-A3B would be 3.0 B and
Mixtral 12.8 B, neither rounding to the card)."""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_gpu_config_by_name, get_model_config_by_name


def _analysis(name, tp_size=1):
    return LLMAnalysis(get_model_config_by_name(name), get_gpu_config_by_name("h100-sxm-80gb"),
                       parallelism_config=ParallelismConfig(tp_size=tp_size))


@pytest.mark.parametrize("name, total_b, active_b", [("openai/gpt-oss-120b", 116.83, 5.13),
                                                     ("openai/gpt-oss-20b", 20.91, 3.61)])
def test_gpt_oss_card_counts_active_without_the_input_embedding(name, total_b, active_b):
    a = _analysis(name)
    assert a.get_num_params_total() / 1e9 == pytest.approx(total_b, abs=0.005)
    assert a.get_num_active_params_without_input_embedding() / 1e9 == pytest.approx(active_b, abs=0.005)
    assert a.get_num_active_params_total() / 1e9 > active_b + 0.5  # the other convention: table counted


@pytest.mark.parametrize("name, total_b, active_b", [("Qwen/Qwen3-30B-A3B", 30.5, 3.3),
                                                     ("mistralai/Mixtral-8x7B-v0.1", 46.7, 12.9)])
def test_cards_that_count_the_embedding_table(name, total_b, active_b):
    a = _analysis(name)
    # cards print one decimal, rounded or cut (Qwen3-30B-A3B's 3.35 B is printed 3.3 B): within 0.06 B
    assert a.get_num_params_total() / 1e9 == pytest.approx(total_b, abs=0.06)
    assert a.get_num_active_params_total() / 1e9 == pytest.approx(active_b, abs=0.06)
    assert abs(a.get_num_active_params_without_input_embedding() / 1e9 - active_b) > 0.1


def test_the_summary_and_report_carry_both_figures():
    s = _analysis("openai/gpt-oss-120b", tp_size=4).inference(batch_size_per_gpu=1, seq_len=128, num_tokens_to_generate=2)
    assert s["num_active_params_without_input_embedding"] / 1e9 == pytest.approx(5.13, abs=0.005)
    assert s["num_active_params_total"] - s["num_active_params_without_input_embedding"] == \
        _analysis("openai/gpt-oss-120b").get_num_params_embedding()


def test_a_tied_table_is_the_lm_head_too_and_stays_active():
    a = _analysis("Qwen/Qwen3-0.6B")  # tie_word_embeddings: true in its config.json
    assert a.model_config.tie_word_embeddings
    assert a.get_num_active_params_without_input_embedding() == a.get_num_active_params_total()


def test_an_untied_count_on_a_tied_model_says_what_a_copy_would_add(caplog):
    """get_num_params_embedding(shared_embedding=False) (seed 004: 'whether the output embedding shares weights with
    the input embedding'): on a model whose output projection is its input embedding (OPT-1.3B ties them) the count
    stays the model's, and a warning gives what a separate copy would add, vocab x hidden = 50,272 x 2,048; an
    untied model (Llama-3.1-8B) adds its LM head, 128,256 x 4,096 (its config.json)."""
    import logging
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import get_gpu_config_by_name, get_model_config_by_name
    gpu = get_gpu_config_by_name("a100-sxm-80gb")
    tied = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), gpu)
    with caplog.at_level(logging.WARNING, logger="llm_analysis"):
        assert tied.get_num_params_embedding(False) == tied.get_num_params_embedding(True)
    assert any(str(50272 * 2048) in r.getMessage() for r in caplog.records)
    untied = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), gpu)
    assert untied.get_num_params_embedding(False) - untied.get_num_params_embedding(True) == 128256 * 4096
