"""ProphetNet's decoder through the exact path (llm_analysis/exact/architectures/prophetnet.py).

The decoder runs a main stream and `ngram` predicting streams (Qi et al. 2020, arXiv
2001.04063). Expected values come from the transformers model of the same small config,
built here on the meta device and counted with FlopCounterMode at lengths the derivation
does not probe (it probes batch 2 x 16 tokens and 1 x the longest input); the longest
input is the one transformers itself can run.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_analysis.config import get_gpu_config_by_name  # noqa: E402
from llm_analysis.errors import UnsupportedArchitectureError  # noqa: E402
from llm_analysis.exact import analysis_from_hf  # noqa: E402
from llm_analysis.exact.compare import engine_matmul_flops  # noqa: E402

GPU = get_gpu_config_by_name("h100-sxm-80gb")
PROPHETNET = {"model_type": "prophetnet", "hidden_size": 64, "num_encoder_layers": 2, "num_decoder_layers": 2,
              "num_encoder_attention_heads": 4, "num_decoder_attention_heads": 4, "encoder_ffn_dim": 128,
              "decoder_ffn_dim": 128, "vocab_size": 512, "max_position_embeddings": 64, "ngram": 2,
              "num_buckets": 8, "relative_max_distance": 32}
LIMIT = 62  # max_position_embeddings - 2, found by running the model below


@pytest.fixture(scope="module")
def real_lm():
    from transformers import ProphetNetConfig, ProphetNetForCausalLM
    cfg = {k: v for k, v in PROPHETNET.items() if k != "model_type"}
    with torch.device("meta"):
        return ProphetNetForCausalLM(ProphetNetConfig(**cfg)).eval()


def _counted(lm, seq_len):
    from torch.utils.flop_counter import FlopCounterMode
    counter = FlopCounterMode(display=False)
    ids = torch.zeros(1, seq_len, dtype=torch.long, device="meta")
    with torch.no_grad(), counter:
        lm(input_ids=ids, use_cache=False)
    return int(counter.get_total_flops())


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("LLM_ANALYSIS_CACHE", str(tmp_path_factory.mktemp("exact-cache")))
    yield analysis_from_hf(PROPHETNET, GPU)
    mp.undo()


def test_transformers_runs_at_most_max_positions_minus_two_tokens(real_lm):
    _counted(real_lm, LIMIT)
    with pytest.raises(RuntimeError):
        _counted(real_lm, LIMIT + 1)


def test_params_and_prefill_flops_equal_the_model(analysis, real_lm):
    assert int(analysis.get_num_params_total()) == sum(int(p.numel()) for p in real_lm.parameters())
    for n in (3, 16, 17, 40, LIMIT):
        assert engine_matmul_flops(analysis, 1, n) == _counted(real_lm, n), n


def test_longer_inputs_and_decode_steps_are_refused(analysis):
    with pytest.raises(UnsupportedArchitectureError, match=f"more than {LIMIT} tokens"):
        engine_matmul_flops(analysis, 1, LIMIT + 1)
    with pytest.raises(UnsupportedArchitectureError, match="predicting streams"):
        analysis.inference(batch_size_per_gpu=1, seq_len=16, num_tokens_to_generate=4)
