"""The training loss over the vocabulary: the cross-entropy kernels after the LM head.

Every training step turns the head's logits (one row of V numbers per token) into a loss and
the logits' gradient. No GEMM does this: it is a chain of element-wise passes over the whole
tokens x V logits tensor, memory-bound, and it is not among the layers' operators. Its bytes,
per logit element, as PyTorch runs `F.cross_entropy` under autocast (log_softmax and nll_loss
run in float32: the "CUDA Ops that can autocast to float32" list of the torch.amp docs), the
llm-foundry / Composer loss of the MosaicML runs:

- forward: the bf16 logits cast to float32 (read 2, write 4), log-softmax (read 4, write 4):
  14 bytes (the gather of the target's log-probability reads one element per token: left out);
- backward: nll_loss's gradient written dense (4), log-softmax's backward (read the gradient and
  the saved output, write the input gradient: 4 + 4 + 4), the cast back to bf16 (read 4, write
  2): 22 bytes.

36 bytes per logit element in all. Megatron's vocab-parallel
cross-entropy (max, subtract, exp, sum and divide as separate float32 passes) moves more, a fused
cross-entropy kernel (Megatron-Core's `cross_entropy_loss_fusion`, Liger) less; one figure is
taken for all (the PyTorch one). With tensor parallelism the logits are split over the vocabulary
(Megatron's vocab-parallel head: each rank V / tp for every token of the micro-batch); with
context parallelism each rank holds its 1/cp of the sequence. Only the last pipeline stage runs
it, once per micro-batch, never recomputed.

Why it matters: per token it moves 36 V bytes whatever the model size, while the layers' work
grows with the model: for a 125M-parameter model with a 50k vocabulary it is ~20% of the step on
an A100, for a 13B model 0.2%. Without it the calibrated training share
(`training_compute_efficiency`) absorbed it, making small models' steps too fast and large
ones' too slow (docs/validation.md).

Like the FP8 casts (training/fp8_casts.py), a framework's cost: only calibrated models charge it
(`times_training_loss`); the roofline, a lower bound, is unchanged. It joins the last stage's
micro-batch time (training/stage.py `loss`; `latency_per_iter_loss`).
"""

from __future__ import annotations

# float32 cross-entropy under autocast: forward 2 + 4 + 4 + 4, backward 4 + 12 + 6 (module docstring)
CROSS_ENTROPY_FORWARD_BYTES_PER_LOGIT = 14
CROSS_ENTROPY_BACKWARD_BYTES_PER_LOGIT = 22


def loss_s(analysis, stage: int, batch: int, seq_len: int) -> float:
    """Seconds of one micro-batch's cross-entropy passes (forward and backward) on pipeline stage
    `stage`: 0.0 but on the last stage of a model with an LM head, or where the cost model does not
    time them."""
    cost, par, model = analysis.cost_model, analysis.parallelism_config, analysis.model_config
    if not cost.times_training_loss or stage != par.pp_size - 1 or not model.lm_head:
        return 0.0
    # logits per GPU: the micro-batch's tokens on this CP rank, the vocabulary shard of this TP rank
    logits = batch * seq_len / par.cp_size * model.vocab_size / par.tp_size
    return (cost.memory_pass_s(CROSS_ENTROPY_FORWARD_BYTES_PER_LOGIT * logits)
            + cost.memory_pass_s(CROSS_ENTROPY_BACKWARD_BYTES_PER_LOGIT * logits))
