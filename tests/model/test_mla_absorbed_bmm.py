"""The absorbed projections of multi-head latent attention in decode, as the engines run them.

With kv_b_proj absorbed (DeepSeek-V2, arXiv 2405.04434, §2.1.2), a decode step takes each head's
no-position query into the latent space and each head's attention output back out of it:
q_nope [heads, tokens, qk_nope_head_dim] x W_UK [heads, qk_nope_head_dim, kv_lora_rank], and
o_latent [heads, tokens, kv_lora_rank] x W_UV [heads, kv_lora_rank, v_head_dim]. vLLM, SGLang and
TensorRT-LLM run each as one batched GEMM over the heads a GPU holds (torch.bmm, or a batched FP8
GEMM), tensor parallelism splitting the heads. The kernel is then `heads / tp` whole matrices of
(qk_nope_head_dim x kv_lora_rank) or (kv_lora_rank x v_head_dim), not one matrix of a tp-th of the
output width: timed as one GEMM of M = tokens x heads / tp rows (its FLOPs, its tiles). Expected
shapes by hand from DeepSeek-V3's config.json (61 layers, 128 heads, qk_nope_head_dim 128,
kv_lora_rank 512, v_head_dim 128).
"""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig
from llm_analysis.model import Phase
from llm_analysis.model.records import Conventions

HEADS, NOPE, RANK, V = 128, 128, 512, 128


def _absorbed_ops(tp: int, batch: int, gpu: str = "b200-180gb", perf_model: str = "roofline"):
    a = LLMAnalysis("deepseek-ai/DeepSeek-V3", gpu, "fp8", ParallelismConfig(tp_size=tp, moe_tp_size=tp),
                    perf_model=perf_model)
    a = a.with_conventions(Conventions.named("serving"))
    ops = {o.name: o for _, o in a.describer.weighted_ops(Phase("decode", batch, 1, 1024))}
    return a, ops["kv_b_proj_q_absorb"], ops["kv_b_proj_v_up"]


@pytest.mark.parametrize("tp,batch", [(8, 4), (4, 32), (1, 1)])
def test_one_batched_gemm_over_the_heads_of_a_gpu(tp, batch):
    _, q_absorb, v_up = _absorbed_ops(tp, batch)
    heads_per_gpu = HEADS // tp
    assert q_absorb.kernel_dims == (batch * heads_per_gpu, RANK, NOPE)
    assert v_up.kernel_dims == (batch * heads_per_gpu, V, RANK)
    # the kernel's shape holds exactly the FLOPs counted for the GPU (2 M N K)
    for op in (q_absorb, v_up):
        m, n, k = op.kernel_dims
        assert op.flops_per_gpu == 2 * m * n * k


@pytest.mark.parametrize("tp,batch", [(8, 256), (1, 64)])
def test_a_gpu_reads_and_writes_its_own_heads_rows_only(tp, batch):
    """Per GPU: the weights of its heads, the input rows of its heads (q_nope of 128, or the latent
    output of 512, per head and token) and the output rows of its heads; the "fp8" data type is W8A8
    (1-byte weights and activations). Counted over all 128 heads, the input of v_up at 256 tokens on
    eight GPUs was 8x its 2 MiB."""
    _, q_absorb, v_up = _absorbed_ops(tp, batch)
    heads_per_gpu, act, w = HEADS // tp, 1, 1
    assert q_absorb.bytes_read_per_gpu == heads_per_gpu * NOPE * RANK * w + batch * heads_per_gpu * NOPE * act
    assert q_absorb.bytes_written_per_gpu == batch * heads_per_gpu * RANK * act
    assert v_up.bytes_read_per_gpu == heads_per_gpu * RANK * V * w + batch * heads_per_gpu * RANK * act
    assert v_up.bytes_written_per_gpu == batch * heads_per_gpu * V * act


def test_a_small_decode_batch_streams_the_weights():
    """Four sequences on eight B200s: each GPU's 16 heads read 16 x 128 x 512 FP8 weights (1 MiB)
    for 2 x 4 x 16 x 128 x 512 = 8.4 MFLOPs: 8 FLOPs per byte, far below the ridge of a B200
    (~560 FLOPs per byte at FP8), so the kernel is bounded by memory or by the launch floor, never by
    compute. Timed as sixteen separate one-tile GEMMs (a tp-th of the output width each), it ran
    on one SM's share of the GPU and came out compute-bound."""
    a, q_absorb, v_up = _absorbed_ops(8, 4, perf_model="calibrated")
    for op in (q_absorb, v_up):
        assert op.flops_per_gpu / op.bytes_per_gpu < 10
        compute_s, memory_s, comm_s = a.cost_model.op_split_s(op)
        assert compute_s == 0.0 and memory_s > 0.0 and comm_s == 0.0
