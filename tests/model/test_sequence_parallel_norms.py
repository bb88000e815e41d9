"""Sequence parallelism shards the layer norms: Megatron's sequence parallelism (Korthikanti et al. 2022,
arXiv 2205.05198 section 4.2.2) runs the norms between the reduce-scatter that closes a block and the all-gather
that opens the next, each GPU on 1/t of the sequence."""

from __future__ import annotations

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig


def _norm_bytes(sp: int):
    a = LLMAnalysis("upstage_Llama-2-70b-instruct-v2", "a100-sxm-40gb", "w16a16e16",
                    ParallelismConfig(tp_size=8, sp_size=sp))
    return {o["name"]: o["bytes_per_gpu"] for o in a.operators("prefill", batch_size=20, seq_len=1024)
            if o["kind"] == "norm"}


def test_norms_read_and_write_a_1_over_tp_slice_under_sequence_parallelism():
    """Llama-2-70B (hidden 8,192, RMSNorm weight of 8,192 bf16 values), 20 x 1,024 tokens, tp 8: a norm reads and
    writes the tokens' hidden states in bf16 and reads its weight; with sequence parallelism on 20 x 1,024 / 8
    tokens."""
    h, tokens, bf16 = 8192, 20 * 1024, 2
    weight = h * bf16
    plain, sharded = _norm_bytes(1), _norm_bytes(8)
    for name in ("norm_1", "norm_2", "final_norm"):
        assert plain[name] == 2 * tokens * h * bf16 + weight
        assert sharded[name] == 2 * tokens // 8 * h * bf16 + weight
