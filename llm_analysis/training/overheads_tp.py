"""Which tensor-parallel collectives of a training step sit on the critical path
(`training(overlap_tp_comm=...)`), per mode:

- False (default): every TP collective is exposed, in forward and again in
  backward (Megatron's conjugate f / g operators, Shoeybi et al. 2019,
  arXiv 1909.08053 §3): Megatron-LM as Narayanan et al. 2021 (arXiv
  2104.04473) ran it.
- "backward": the backward's input-gradient reductions run asynchronously
  under the weight-gradient GEMMs, the rest stays exposed. This is Megatron-LM
  from 2021-09 on (github:NVIDIA/Megatron-LM commits 16c90445e7 / f3e57f6fee,
  `--async-tensor-model-parallel-allreduce`, on by default;
  `LinearWithGradAccumulationAndAsyncCommunication.backward` in
  megatron/mpu/layers.py, the code of Korthikanti et al. 2022, arXiv
  2205.05198): a column-parallel linear launches the all-reduce of its input
  gradient, then computes its weight gradient while it runs. With sequence
  parallelism the same linear reduce-scatters its input gradient under the
  weight-gradient GEMM (and re-gathers its input under the input-gradient GEMM,
  also hidden), while the all-gather that is the backward of the row-parallel
  output's reduce-scatter (`_ReduceScatterToSequenceParallelRegion.backward`)
  is synchronous. So, per forward collective, its backward conjugate is:
  all-reduce (no SP: the conjugate is the column-parallel input-gradient
  all-reduce; a vocab-parallel embedding's all-reduce has an identity backward)
  -> hidden; all-gather (SP, before a column-parallel linear) -> its
  reduce-scatter, hidden; reduce-scatter (SP, after a row-parallel linear) ->
  an all-gather, exposed. What is hidden never exceeds the weight-gradient
  GEMMs it runs under (one forward-GEMM time each, `Stage.bwd_compute` being
  2x the forward: input and weight gradients).
  Korthikanti et al. Table 4 shows it: one 22B layer (tp 8, 4 x 2048 tokens)
  takes 7.7 ms forward with its two all-reduces exposed, 11.9 ms backward,
  about 2x the forward's compute alone.
- True: all TP communication overlapped with compute (userbuffer / TE
  comm-GEMM overlap, `--tp-comm-overlap`); only what exceeds the micro-batch's
  compute is exposed (training/stage.py `_hide_tp_comm`).
"""

from __future__ import annotations

import dataclasses
from typing import Union

from llm_analysis.errors import ConfigError
from llm_analysis.schema.options import boolean

TP_OVERLAP_BACKWARD = "backward"
# forward collectives whose backward conjugate runs under a weight-gradient GEMM -> that conjugate (an
# all-gather's is a reduce-scatter of the same buffer: timed as one, since NCCL's measured all-gather and
# reduce-scatter of one size differ, cost/measured_nccl.py)
_HIDDEN_IN_BACKWARD = {"all_reduce": "all_reduce", "all_gather": "reduce_scatter"}


def tp_overlap_mode(value) -> Union[bool, str]:
    """False, True or "backward" (command-line spellings of the booleans accepted)."""
    if isinstance(value, str) and value.strip().lower() == TP_OVERLAP_BACKWARD:
        return TP_OVERLAP_BACKWARD
    try:
        return boolean(value, "overlap_tp_comm")
    except ConfigError:
        pass
    raise ConfigError(f"overlap_tp_comm = {value!r}; valid: False (every TP collective exposed), "
                      f"'{TP_OVERLAP_BACKWARD}' (backward input-gradient reductions under the weight-gradient "
                      "GEMMs, Megatron-LM's async TP all-reduce) or True (all TP communication overlapped)")


def backward_hidden_tp_s(analysis, ph, stage_index: int, lora=None) -> float:
    """Seconds of one micro-batch's backward TP communication of this pipeline stage that run
    under the weight-gradient GEMMs in mode "backward" (module docstring), at most the stage's
    forward matmul time (the weight-gradient GEMMs). With LoRA the frozen base weights compute
    no weight gradient to hide under: nothing is hidden."""
    if lora is not None:
        return 0.0
    cost = analysis.cost_model
    comm_s = wgrad_s = 0.0
    for _, n, ops in analysis.describer.stage_parts(ph, stage_index):
        for op in ops:
            if op.kind == "collective" and op.comm_group == "tp" and op.collective in _HIDDEN_IN_BACKWARD:
                comm_s += n * cost.op_time_s(dataclasses.replace(op, collective=_HIDDEN_IN_BACKWARD[op.collective]))
            elif op.kind == "matmul" and op.params_per_gpu:  # a weight, so a weight-gradient GEMM
                wgrad_s += n * cost.op_time_s(op)
    return min(comm_s, wgrad_s)


__all__ = ["TP_OVERLAP_BACKWARD", "backward_hidden_tp_s", "tp_overlap_mode"]
