"""Longformer through the exact path (llm_analysis/exact/architectures/longformer.py, cpu_verify.py).

Longformer's forward reads a value (`is_global_attn = ....any().item()`), so it cannot run
on meta tensors; the exact path runs a small model on the CPU instead. Expected values
come from the transformers model of the same config built here on the CPU and counted
with FlopCounterMode (independent of the derivation: it probes batch 2 x 16 tokens and
1 x the longest input), and from the sliding-chunk formula worked out by hand below.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from llm_analysis.config import get_gpu_config_by_name  # noqa: E402
from llm_analysis.errors import ConfigError, UnsupportedArchitectureError  # noqa: E402
from llm_analysis.exact import analysis_from_hf  # noqa: E402
import llm_analysis.exact.cpu_verify as cpu_verify  # noqa: E402
from llm_analysis.exact.compare import engine_matmul_flops  # noqa: E402
from llm_analysis.model import Phase  # noqa: E402

GPU = get_gpu_config_by_name("h100-sxm-80gb")
# per-layer windows 8 and 16: every input is padded to a multiple of 16 tokens; the
# position table has 100 rows, positions start at padding_idx + 1 = 2: inputs of <= 98 tokens
LONGFORMER = {"model_type": "longformer", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "intermediate_size": 128, "vocab_size": 512, "attention_window": [8, 16],
              "max_position_embeddings": 100, "pad_token_id": 1}
LIMIT = 98
LENGTHS = (5, 16, 17, 40, LIMIT)  # padded to 16, 16, 32, 48, 112


pytestmark = pytest.mark.usefixtures("exact_cache")  # tests/conftest.py


def _real_model():
    from transformers import LongformerConfig, LongformerForMaskedLM
    cfg = {k: v for k, v in LONGFORMER.items() if k != "model_type"}
    torch.manual_seed(0)
    return LongformerForMaskedLM(LongformerConfig(**cfg)).eval()


def _counted(model, seq_len):
    from torch.utils.flop_counter import FlopCounterMode
    counter = FlopCounterMode(display=False)
    ids = torch.zeros(1, seq_len, dtype=torch.long)
    with torch.no_grad(), counter:
        model(input_ids=ids, attention_mask=torch.ones_like(ids))
    return int(counter.get_total_flops())


@pytest.fixture(scope="module")
def analysis():
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        old = os.environ.get("LLM_ANALYSIS_CACHE")
        os.environ["LLM_ANALYSIS_CACHE"] = tmp
        try:
            yield analysis_from_hf(LONGFORMER, GPU)
        finally:
            os.environ.pop("LLM_ANALYSIS_CACHE") if old is None else os.environ.update(LLM_ANALYSIS_CACHE=old)


def test_params_and_prefill_flops_equal_the_cpu_model(analysis):
    model = _real_model()
    assert int(analysis.get_num_params_total()) == sum(int(p.numel()) for p in model.parameters())
    for n in LENGTHS:
        assert engine_matmul_flops(analysis, 1, n) == _counted(model, n), n
    assert analysis.describer.description["pad_to_multiple"] == 16


def test_attention_core_is_the_sliding_chunk_formula(analysis):
    # by hand, 40 tokens padded to L = 48, heads H = 4, head width d = 16:
    # layer 0 (w = 4): scores (L/w - 1) x (2w)^2 = 11 x 64, values L/w x w x 3w = 12 x 48
    # layer 1 (w = 8): scores 5 x 256, values 6 x 192; each x 2 x H x d FLOPs
    per_unit = 2 * 4 * 16
    expected = per_unit * (11 * 64 + 12 * 48 + 5 * 256 + 6 * 192)
    phase = Phase("prefill", 1, 40, 40)
    d = analysis.describer
    cores = [op for k in d.kinds_in_order for op in d.layer_ops(phase, k) if op.kind == "attention"]
    assert sum(op.flops for op in cores) == expected


def test_input_longer_than_the_position_table_is_refused(analysis):
    with pytest.raises(UnsupportedArchitectureError, match=f"at most {LIMIT} tokens"):
        engine_matmul_flops(analysis, 1, LIMIT + 1)
    with pytest.raises(UnsupportedArchitectureError, match=f"seq_len <= {LIMIT}"):
        analysis.training(batch_size_per_gpu=1, seq_len=LIMIT + 2, total_num_tokens=LIMIT + 2,
                          gradient_accumulation_steps=1)


def test_training_is_three_forwards_of_the_padded_input(analysis):
    t = analysis.training(batch_size_per_gpu=1, seq_len=40, total_num_tokens=40, gradient_accumulation_steps=1)
    assert t["num_flops_total_per_micro_batch"] == pytest.approx(3 * engine_matmul_flops(analysis, 1, 40), rel=0.02)


def test_inference_is_one_forward_of_the_padded_input(analysis):
    # an encoder generates nothing (inference/run.py): the prefill is the whole request
    r = analysis.inference(batch_size_per_gpu=2, seq_len=40, num_tokens_to_generate=1)
    assert r["decode_latency"] == 0 and r["prefill_latency"] > 0
    # the prefill of a request computes the vocabulary logits of the last position only (the
    # engine's convention): the full forward less 2 x 64 x 512 FLOPs for each of the other 78 rows
    full = engine_matmul_flops(analysis, 2, 40)
    assert r["prefill_num_flops_fwd_total"] == full - 2 * 64 * 512 * (2 * 40 - 2)
    with pytest.raises(ConfigError, match="encoder-only"):
        analysis.inference(batch_size_per_gpu=1, seq_len=40, num_tokens_to_generate=2)


def test_a_model_over_the_cpu_bound_is_refused_with_the_bound(monkeypatch):
    monkeypatch.setattr(cpu_verify, "CPU_MAX_WEIGHT_BYTES", 1024)
    with pytest.raises(UnsupportedArchitectureError, match="too large to run on the CPU"):
        analysis_from_hf(LONGFORMER, GPU)


def test_only_failures_of_meta_tensors_fall_back_to_the_cpu():
    assert cpu_verify.needs_values("RuntimeError: Tensor.item() cannot be called on meta tensors")
    assert not cpu_verify.needs_values("TypeError: topk(): argument 'k' must be int, not NoneType")
    assert not cpu_verify.needs_values(None)


def test_the_truth_of_a_model_that_needs_values_is_counted_on_the_cpu():
    # scripts/generate_architecture_truth.py records Longformer's prefill FLOPs this way
    from llm_analysis.exact.truth import architecture_truth
    truth = architecture_truth(LONGFORMER)
    assert truth["flops_error"] is None
    assert truth["flops"]["total"] == _counted(_real_model(), 16)
