"""FP8 training's cast kernels: what Transformer Engine runs beside each FP8 GEMM.

TransformerEngine's `Linear` under `fp8_autocast` (github:NVIDIA/TransformerEngine
transformer_engine/pytorch/module/linear.py; its "Using FP8 with Transformer Engine" guide)
keeps activations and gradients in 16 bits between layers and casts the operands of each GEMM
to FP8 in kernels of their own. Hopper's FP8 tensor cores take only the "TN" layout, so every
operand a backward GEMM reads transposed is also written transposed, in the same fused
cast-transpose pass: it reads 2 bytes and writes 1 + 1 per element. Per linear layer and
micro-batch (M tokens, K inputs, N outputs, one GPU's shard):

- forward: the input X (M x K) and the weight W (K x N), cast and transposed: 4 (MK + KN) bytes;
- backward: the output gradient dY (M x N), cast and transposed: 4 MN bytes;
- a recomputed forward casts X and W again: 4 (MK + KN) bytes.

Each is one memory-bound pass at the calibrated model's HBM rate and kernel floor
(`cost_model.memory_pass_s`). Only the transformer layers' linears count: the attention core
stays in 16 bits (TE's DotProductAttention), as do the embedding and the output head
(llm-foundry and Megatron keep them out of FP8). Only calibrated models charge these passes
(`times_fp8_training_casts`): the roofline, a lower bound, times the GEMMs alone. Assumed, not
modelled: amax reductions ride inside the
cast kernels (they are fused there). The passes join each stage's micro-batch time (training/stage.py
`fp8_cast`; `latency_per_iter_fp8_casts`, `latency_per_micro_batch`, pipeline bubbles), not
`latency_fwd`. Weights are recast every micro-batch (and by a recomputed forward) unless
`fp8_weight_cast_per_iteration=True` states that the framework keeps their casts across the
iteration (TE does when the caller passes `is_first_microbatch`, as Megatron-Core / NeMo do): then
once per iteration (`Stage.fp8_weight_cast`, in `latency_per_iter_fp8_casts`, not in the micro-batch).
"""

from __future__ import annotations

from typing import List, Tuple

from llm_analysis.model import Phase

# bytes moved per element by a fused cast-transpose: read 2 (16-bit), write 1 + 1 (FP8, FP8 transposed)
CAST_TRANSPOSE_BYTES_PER_ELEMENT = 4


# TransformerEngine runs a GEMM in FP8 only when its dims are multiples of 16
# (transformer_engine/pytorch/utils.py `assert_dim_for_fp8_exec`); others stay in 16 bits
FP8_GEMM_DIM_MULTIPLE = 16


def _cast_row(op, tp: int, sp: int) -> Tuple[float, float, float]:
    """(X elements, dY elements, W elements) one linear casts per sequence of its phase. A
    routed-experts operator's M already counts every token-expert pair on the GPU (operators/mlp.py),
    so only its weights are per local expert; other operators' `copies` each read the input.
    Under sequence parallelism TE casts the local sequence shard before gathering it: the input of a
    column-parallel linear, the output gradient of a row-parallel one, are 1/sp of the tokens."""
    m, n_out, k = op.kernel_dims[:3]
    copies = max(1, int(op.params_per_gpu // (n_out * k)))  # local experts or copies (biases aside)
    act = 1 if op.expert_role == "routed" else copies
    x, dy = act * m * k, act * m * n_out
    if sp > 1 and tp > 1:
        if n_out < op.out_features:  # column-parallel: its output dim is split over tp
            x /= sp
        elif k < op.in_features:  # row-parallel: its input dim is split
            dy /= sp
    return x, dy, copies * k * n_out


def _casts_per_sequence(analysis, stage: int, seq_len: int, rc) -> List[Tuple[int, float, float, float, bool]]:
    """(repeat count, X elements, dY elements, W elements, recomputed) per FP8 linear of a stage's
    layers, activations per sequence of `seq_len` tokens (they scale with the batch). Routers stay in
    16 bits (Megatron-LM keeps them outside TE). Linears that follow each other in the describer's
    order within one group and recomputation class, with the same input shape, read one input (q, k
    and v projections; gate and up): it is cast once (TE fuses them into one layer), by the first."""
    par = analysis.parallelism_config
    rows = []
    for is_layer, n, ops in analysis.describer.stage_parts(Phase("train", 1, seq_len, seq_len), stage):
        shared_input = None  # what identifies the input of the linear just before, if the previous operator was one
        for op in ops:
            if (not is_layer or op.kind != "matmul" or not op.kernel_dims or op.params_per_gpu <= 0
                    or op.group == "router" or op.kernel_dims[1] % FP8_GEMM_DIM_MULTIPLE
                    or op.kernel_dims[2] % FP8_GEMM_DIM_MULTIPLE):
                shared_input = None
                continue
            x, dy, w = _cast_row(op, par.tp_size, par.sp_size)
            this_input = (op.group, op.recompute_class, op.kernel_dims[0], op.kernel_dims[2], x)
            rows.append((n, 0.0 if shared_input == this_input else x, dy, w, op.recomputed_under(rc)))
            shared_input = this_input
    return rows


def fp8_cast_s(analysis, stage: int, batch: int, seq_len: int, rc, weights_per_iteration: bool = False
               ) -> Tuple[float, float]:
    """(seconds of one micro-batch's FP8 cast passes, seconds of the weight casts made once per
    iteration) on pipeline stage `stage` ((0.0, 0.0) unless the cost model times them).
    `weights_per_iteration`: the framework keeps each weight's FP8 cast across the iteration's
    micro-batches (TransformerEngine's `is_first_microbatch`, which Megatron-Core's TE layers pass:
    megatron/core/extensions/transformer_engine.py), so a weight is cast once per iteration, also when
    its layer is recomputed; otherwise every forward casts it again (the micro-batch's share)."""
    cost = analysis.cost_model
    if not cost.times_fp8_training_casts:
        return 0.0, 0.0
    rows = analysis.describer.phase_memo(("fp8_cast_rows", stage, seq_len, rc),  # (the bounded per-shape cache)
                                         lambda: _casts_per_sequence(analysis, stage, seq_len, rc))
    pass_s, per = cost.memory_pass_s, CAST_TRANSPOSE_BYTES_PER_ELEMENT
    micro_batch_s = iteration_s = 0.0
    for n, x, dy, w, recomputed in rows:
        again = 2 if recomputed else 1
        # (memory_pass_s(0) is 0: no kernel)
        micro_batch_s += n * (pass_s(per * batch * x) * again + pass_s(per * batch * dy))
        if weights_per_iteration:
            iteration_s += n * pass_s(per * w)
        else:
            micro_batch_s += n * pass_s(per * w) * again
    return micro_batch_s, iteration_s
