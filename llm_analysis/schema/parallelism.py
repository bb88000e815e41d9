"""The parallelism config: a layout of GPUs over tensor, context, pipeline, data and
expert parallelism (with sequence parallelism, HSDP and uneven pipeline stages), and the
serving worker layout (attention data parallelism, the experts' own tensor x expert split).

It rejects unknown fields and validates sizes; errors are `llm_analysis.errors.ConfigError`
naming field, value and what is valid."""

from __future__ import annotations

import logging
from typing import Literal, Optional

import numpy as np
from pydantic import model_validator

from llm_analysis.errors import ConfigError, warn
from llm_analysis.schema.base import StrictModel
from llm_analysis.schema.hsdp import hsdp_sizes

__all__ = ["ParallelismConfig"]


# the fields that are not sizes (a bool there is meant)
_FLAGS = ("cp_comm", "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")


class ParallelismConfig(StrictModel):
    """GPUs = tp * cp * pp * dp (ranks TP, CP, PP, DP); experts over `ep_size` DP ranks (rdp = dp // ep);
    sp_size defaults to tp_size; cp_size / cp_comm: model/context_parallel.py; HSDP dp_shard x
    dp_replicate = dp_size (schema/hsdp.py); ZeRO shards over dp_shard x cp ranks (shard_group_size).

    Serving worker layout (read by `serve()`, serving/layout.py; the convention of aiconfigurator,
    SGLang and TensorRT-LLM): one worker spans tp_size x attention_dp_size GPUs: attention_dp_size
    attention replicas, each tensor-parallel over tp_size GPUs with its own share of the requests;
    the routed experts are split over the same GPUs as moe_tp_size (each expert's columns) x
    moe_ep_size (whole experts), so tp_size x attention_dp_size = moe_tp_size x moe_ep_size (both given
    as 1 is also taken here, as layout tables write "no experts": check_expert_split refuses it for a
    model with experts).
    dp_size counts workers. Defaults, so that a config without these fields means what it meant:
    attention_dp_size = 1; with neither moe field given, moe_tp_size = tp_size and moe_ep_size =
    attention_dp_size (experts spread over the attention replicas, SGLang's --enable-dp-attention
    with --ep-size; with attention_dp_size 1 this is today's tensor-parallel experts); with one
    given, the other is the worker's GPUs divided by it. `ep_size` keeps its own (training) meaning:
    experts over data-parallel replicas."""

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
    # Megatron-Core's pipeline split that counts the embedding (on the first stage) and the loss (LM head, on the
    # last) as one transformer layer each: model/pipeline_layout.py
    account_for_embedding_in_pipeline_split: bool = False
    account_for_loss_in_pipeline_split: bool = False
    attention_dp_size: int = 1  # attention replicas inside one serving worker
    moe_tp_size: Optional[int] = None  # each routed expert's split inside a worker (default above)
    moe_ep_size: Optional[int] = None  # routed experts spread over this many of the worker's GPU groups
    # redundant copies of routed experts beside the model's own, spread with them over the expert-parallel
    # ranks (load balancing: SGLang's --ep-num-redundant-experts, TensorRT-LLM's load-balancer num_slots -
    # experts, vLLM's EPLB num_redundant_experts); experts + copies must split evenly over the ranks, which
    # lets serve() run a moe_ep_size that does not divide the experts (serving/layout.py); None: no copies
    moe_redundant_experts: Optional[int] = None

    _hsdp = model_validator(mode="before")(classmethod(lambda cls, d: hsdp_sizes(d) if isinstance(d, dict) else d))

    @model_validator(mode="before")
    @classmethod
    def _no_bools(cls, data):
        # pydantic reads True / False as the sizes 1 / 0 (tp_size=True was served as one GPU): a flag where a
        # size goes is a slip, refused like the package's other whole-number options refuse it
        if isinstance(data, dict):
            for key, value in data.items():
                if key not in _FLAGS and isinstance(value, (bool, np.bool_)):
                    raise ValueError(f"field {key!r} = {value!r} must be a whole number, not a bool")
        return data

    @model_validator(mode="after")
    def _fill_and_check(self) -> "ParallelismConfig":
        # the HSDP sizes first: dp_size is derived from them when they are given (schema/hsdp.py), and an
        # error should name the field the user wrote
        self._positive("dp_shard", "dp_replicate", "tp_size", "pp_size", "dp_size", "ep_size", "sp_size", "rdp_size",
                       "cp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
        self._positive("moe_redundant_experts", lo_open=False)
        # the sizes filled in below stay out of model_fields_set, as the worker layout's (an analysis that follows
        # an assignment to tp_size derives them again: schema/edits.py)
        filled = {f for f in ("sp_size", "rdp_size") if getattr(self, f) is None} | \
            {f for f in ("dp_shard", "dp_replicate") if not getattr(self, f)}
        self._fill_worker_layout()
        if self.sp_size is None:
            self.sp_size = self.tp_size
        elif self.sp_size not in (1, self.tp_size):  # (read as on or off: another size would be silently ignored)
            valid = f"sp_size = {self.tp_size} (on) or 1 (off)" if self.tp_size > 1 else \
                "sp_size = 1 (tp_size = 1 has no tensor-parallel group to split over)"
            raise ValueError(f"sp_size = {self.sp_size} with tp_size = {self.tp_size}: sequence parallelism (Megatron) "
                             f"splits the activations over the tensor-parallel group; valid: {valid}")
        if self.rdp_size is None:
            self.rdp_size = max(1, self.dp_size // self.ep_size)
        self.dp_shard, self.dp_replicate = self.dp_shard or self.dp_size, self.dp_replicate or 1  # HSDP: schema/hsdp.py
        self.__pydantic_fields_set__.difference_update(filled)
        return self

    def _fill_worker_layout(self) -> None:
        """moe_tp_size / moe_ep_size from the rule in the class docstring; tp_size x attention_dp_size
        = moe_tp_size x moe_ep_size checked (ValueError, re-raised as ConfigError naming the fields)."""
        gpus = self.tp_size * self.attention_dp_size
        derived = {f for f in ("moe_tp_size", "moe_ep_size") if getattr(self, f) is None}
        for given, other in (("moe_tp_size", "moe_ep_size"), ("moe_ep_size", "moe_tp_size")):
            value = getattr(self, given)
            if value is not None and getattr(self, other) is None:
                if gpus % value:
                    raise ValueError(
                        f"{given} = {value} must divide tp_size x attention_dp_size = {self.tp_size} x "
                        f"{self.attention_dp_size} = {gpus} (the worker's GPUs, which the experts are split over); "
                        f"valid {given}: {[d for d in range(1, gpus + 1) if gpus % d == 0]}")
                setattr(self, other, gpus // value)
        if self.moe_tp_size is None:
            self.moe_tp_size, self.moe_ep_size = self.tp_size, self.attention_dp_size
        # the derived sizes stay out of model_fields_set (assignment adds them): serve() tells a given
        # moe_ep_size from a derived one (a dense model may not be given one)
        self.__pydantic_fields_set__.difference_update(derived)
        # moe_tp_size = moe_ep_size = 1 given on a larger worker is how layout tables (aiconfigurator's
        # silicon sample: "dense models carry 1s in the moe columns") write "no experts": whether it is
        # that or a wrong split depends on the model, so check_expert_split decides once the model is known
        if self.moe_tp_size * self.moe_ep_size != gpus and not self.experts_unsplit_given:
            raise ValueError(expert_split_mismatch(self))

    @property
    def experts_unsplit_given(self) -> bool:
        """moe_tp_size = moe_ep_size = 1 both given on a worker of more GPUs (see _fill_worker_layout)."""
        return ((self.moe_tp_size, self.moe_ep_size) == (1, 1) and self.tp_size * self.attention_dp_size > 1
                and {"moe_tp_size", "moe_ep_size"} <= self.model_fields_set)

    worker_gpus = property(lambda self: self.tp_size * self.attention_dp_size * self.pp_size)  # one serving worker
    num_gpus = property(lambda self: self.tp_size * self.cp_size * self.pp_size * self.dp_size)
    shard_group_size = property(lambda self: self.dp_shard * self.cp_size)  # gradient reduction, ZeRO shards
    expert_shard_group_size = property(lambda s: max(1, s.rdp_size * s.dp_shard // s.dp_size) * s.cp_size)


def expert_split_mismatch(p: "ParallelismConfig") -> str:
    """The message for experts split over other than the worker's GPUs (tp x attention_dp)."""
    gpus = p.tp_size * p.attention_dp_size
    return (f"tp_size x attention_dp_size = {p.tp_size} x {p.attention_dp_size} = {gpus} but moe_tp_size x "
            f"moe_ep_size = {p.moe_tp_size} x {p.moe_ep_size} = {p.moe_tp_size * p.moe_ep_size}: the "
            f"experts are split over the worker's own GPUs, so the two products must be equal; valid: pairs "
            f"(moe_tp_size, moe_ep_size) in {[(gpus // e, e) for e in range(1, gpus + 1) if gpus % e == 0]}")


def warn_worker_layout_unread(p: "ParallelismConfig", call: str, is_moe: bool) -> None:
    """Log (a warning the call's summary collects) the serving worker fields `call` (inference() or training())
    does not read: it times tp_size x pp_size GPUs per replica with every expert split tp_size ways (or over
    ep_size data-parallel replicas), so with attention replicas, experts over moe_ep_size groups or expert
    copies its figures are not that worker's; serve() models the worker. A dense model has no experts: its
    moe_ep_size (filled in to match the worker) and the experts' wording are left out."""
    if p.attention_dp_size == 1 and (p.moe_ep_size or 1) == 1 and not p.moe_redundant_experts:
        return  # (the common case, on every call: nothing built)
    fields = [f"{f} = {getattr(p, f)}" for f, unread in (("attention_dp_size", p.attention_dp_size > 1),
                                                         ("moe_ep_size", is_moe and (p.moe_ep_size or 1) > 1),
                                                         ("moe_redundant_experts", bool(p.moe_redundant_experts)
                                                          and p.ep_size == 1)) if unread]
    if fields:
        how = ("with every expert split tp_size ways (ep_size spreads experts over data-parallel replicas)"
               if is_moe else "as one tensor-parallel group")
        warn(logging.getLogger("llm_analysis"),
             "%s: the serving worker layout %s is read by serve() only; %s times tp_size = %d x pp_size = %d GPUs "
             "per replica %s, so its figures are not that worker's", call, ", ".join(fields), call, p.tp_size,
             p.pp_size, how)


def check_expert_split(p: "ParallelismConfig", is_moe: bool, where: str = "") -> None:
    """A model with experts given moe_tp_size = moe_ep_size = 1 on a worker of more GPUs: the same
    ConfigError the schema gives any other unequal split (for a dense model the 1s mean "no experts")."""
    if is_moe and p.experts_unsplit_given:
        raise ConfigError(f"{where}Invalid ParallelismConfig: {expert_split_mismatch(p)}")


# The default of the `parallelism_config` arguments (LLMAnalysis, analysis_from_hf): one object, which each
# analysis replaces by its own copy (schema/options.py owned_instance).
SIGNATURE_DEFAULT_PARALLELISM = ParallelismConfig()
