"""The expert-parallel all-to-all of training (ParallelismConfig.ep_size): how many bytes each GPU dispatches.

Hand derivation (Mixtral-8x7B: hidden 4096, top-2 routing; bf16 hidden states; micro-batch 1 x 4096 tokens):
each token's hidden state goes to its 2 experts, so a GPU holding all 4096 tokens dispatches
4096 x 2 x 4096 = 33,554,432 elements = 67,108,864 bytes per MoE layer. Under sequence parallelism a
tensor-parallel rank holds 1/tp of the sequence and dispatches only those tokens (Megatron-Core's token
dispatcher: num_local_tokens = S/TP x B; the gather across tp runs on NVLink beside the all-to-all), so
tp = sp = 2 halves the bytes and tp = sp = 4 quarters them; tp 2 without sequence parallelism keeps every
token on every rank."""

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig

HIDDEN, TOP_K, TOKENS, BYTES_BF16 = 4096, 2, 4096, 2
WHOLE_SEQUENCE_BYTES = TOKENS * TOP_K * HIDDEN * BYTES_BF16  # 67,108,864


@pytest.mark.parametrize("tp, sp, share", [(1, 1, 1.0), (2, 2, 1 / 2), (4, 4, 1 / 4), (2, 1, 1.0)])
def test_a_tensor_parallel_rank_dispatches_its_own_sequence_slice(tp, sp, share):
    a = LLMAnalysis("mistralai_Mixtral-8x7B-v0.1", "h100-sxm-80gb",
                    parallelism_config=ParallelismConfig(tp_size=tp, sp_size=sp, ep_size=4, dp_size=4))
    ops = [o for o in a.operators("train", 1, TOKENS) if o["name"] in ("ep_all_to_all_dispatch",
                                                                      "ep_all_to_all_combine")]
    dispatch = next(o for o in ops if o["name"] == "ep_all_to_all_dispatch")
    assert dispatch["comm_bytes_per_gpu"] == WHOLE_SEQUENCE_BYTES * share
