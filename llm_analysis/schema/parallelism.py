"""The parallelism config: a layout of GPUs over tensor, context, pipeline, data and
expert parallelism (with sequence parallelism, HSDP and uneven pipeline stages).

It rejects unknown fields and validates sizes; errors are `llm_analysis.errors.ConfigError`
naming field, value and what is valid."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import model_validator

from llm_analysis.schema.base import StrictModel
from llm_analysis.schema.hsdp import hsdp_sizes

__all__ = ["ParallelismConfig"]


class ParallelismConfig(StrictModel):
    """GPUs = tp * cp * pp * dp (ranks TP, CP, PP, DP); experts over `ep_size` DP ranks (rdp = dp // ep);
    sp_size defaults to tp_size; cp_size / cp_comm: model/context_parallel.py; HSDP dp_shard x
    dp_replicate = dp_size (schema/hsdp.py); ZeRO shards over dp_shard x cp ranks (shard_group_size)."""

    tp_size: int = 1
    pp_size: int = 1
    dp_size: int = 1
    ep_size: int = 1
    sp_size: Optional[int] = None
    rdp_size: Optional[int] = None
    cp_size: int = 1
    cp_comm: Literal["ring", "all_to_all"] = "ring"
    dp_shard: Optional[int] = None
    dp_replicate: Optional[int] = None
    num_layers_in_first_pipeline_stage: Optional[int] = None  # uneven stages: model/pipeline_layout.py
    num_layers_in_last_pipeline_stage: Optional[int] = None

    _hsdp = model_validator(mode="before")(classmethod(lambda cls, d: hsdp_sizes(d) if isinstance(d, dict) else d))

    @model_validator(mode="after")
    def _fill_and_check(self) -> "ParallelismConfig":
        self._positive("tp_size", "pp_size", "dp_size", "ep_size", "sp_size", "rdp_size", "cp_size",
                       "dp_shard", "dp_replicate")
        if self.sp_size is None:
            self.sp_size = self.tp_size
        if self.rdp_size is None:
            self.rdp_size = max(1, self.dp_size // self.ep_size)
        self.dp_shard, self.dp_replicate = self.dp_shard or self.dp_size, self.dp_replicate or 1  # HSDP: schema/hsdp.py
        return self

    num_gpus = property(lambda self: self.tp_size * self.cp_size * self.pp_size * self.dp_size)
    shard_group_size = property(lambda self: self.dp_shard * self.cp_size)  # gradient reduction, ZeRO shards
    expert_shard_group_size = property(lambda s: max(1, s.rdp_size * s.dp_shard // s.dp_size) * s.cp_size)
