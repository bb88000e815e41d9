"""ZeRO over one data-parallel rank shards nothing, and DeepSpeed still allocates its stage's buffers: training()
keeps them (the run as asked) and says so in a note naming the bytes, and the planner skips the candidate for the
same reason (ZeRO 0 fits the same layout with less memory), not as "the same candidate".

Hand derivation of Llama-3-8B's ZeRO-3 buffers (DeepSpeed's gather of the module running and the one prefetched,
plus ZeRO-2's reduce bucket of the largest module's gradients; training/memory.py): the largest matrix is the
LM head, vocab 128256 x hidden 4096 in bf16 = 1.0507 GB; a layer's largest is the MLP's 4096 x 14336 x 2 B =
0.1174 GB; the gradient bucket of the LM head at 2 B per parameter = 1.0507 GB: 2.2188 GB in all. Law: with one
rank every other part of the memory is that of ZeRO 0, so the peaks differ by exactly the buffers."""

import pytest

from llm_analysis.units import GB

LM_HEAD_BYTES = 128256 * 4096 * 2
MLP_MATRIX_BYTES = 4096 * 14336 * 2
ZERO3_BUFFER_BYTES = LM_HEAD_BYTES + MLP_MATRIX_BYTES + LM_HEAD_BYTES


def _train(a, zero):
    return a.training(global_batch_size=4, seq_len=4096, activation_recomputation=4, ds_zero=zero)


def test_zero3_on_one_rank_keeps_the_buffers_and_says_zero0_needs_less(analysis_builder, quiet_package_warnings):
    a = analysis_builder("meta-llama/Meta-Llama-3-8B", gpu="b200-180gb", perf_model="calibrated")
    z0, z3 = _train(a, 0), _train(a, 3)
    assert z3["zero_buffer_memory_per_gpu"] == pytest.approx(ZERO3_BUFFER_BYTES, rel=1e-9)
    assert z3["estimated_peak_memory_per_gpu"] - z0["estimated_peak_memory_per_gpu"] == \
        pytest.approx(ZERO3_BUFFER_BYTES, rel=1e-6)
    notes = [n for n in z3["notes"] if "shards nothing" in n]
    assert len(notes) == 1, z3["notes"]
    assert f"{ZERO3_BUFFER_BYTES / GB:.2f} GB" in notes[0] and "ds_zero 0" in notes[0] and "less memory" in notes[0]
    assert not any("shards nothing" in n for n in z0["notes"])


def test_zero_with_two_ranks_has_no_such_note(analysis_builder, quiet_package_warnings):
    a = analysis_builder("meta-llama/Meta-Llama-3-8B", gpu="b200-180gb", dp_size=2, perf_model="calibrated")
    s = a.training(global_batch_size=4, seq_len=4096, activation_recomputation=4, ds_zero=3)
    assert not any("shards nothing" in n for n in s["notes"])
