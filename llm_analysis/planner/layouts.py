"""The serving worker layouts the continuous-batching planner searches (DESIGN.md section 5).

A worker is tp x attention_dp GPUs; the routed experts are split over the same GPUs moe_tp x
moe_ep ways (ParallelismConfig, serving/layout.py); workers (dp_size) share the load.

- Dense models: one tensor-parallel group per worker (tp = powers of two up to a node or max_tp),
  as before.
- MoE models, the layouts the engines run:
  * attention_dp = 1: tp GPUs (up to a node), the experts split moe_tp x moe_ep = tp ways for every
    moe_ep that divides the experts and leaves a moe_tp that divides each expert's columns;
  * attention_dp > 1 ("wide EP"): tp x attention_dp GPUs, attention_dp a power of two, every expert
    whole on one GPU (moe_tp = 1, moe_ep = the worker's GPUs, dividing the experts), up to
    max_worker_gpus GPUs (default DEFAULT_MAX_WORKER_GPUS, and at most max_gpus).
  * on a rack whose NVLink domain spans more than a node (GB200 / GB300 NVL72), also the worker of the
    whole domain (RACK_WORKER_LIMIT: 72 GPUs, TensorRT-LLM's and SGLang's wide EP on NVL72): attention
    replicas of one GPU, every expert whole, and the redundant expert copies that split the experts
    evenly over its GPUs (256 over 72: 32 copies; ParallelismConfig.moe_redundant_experts), when
    max_worker_gpus (if given) and max_gpus allow it.
  Left out, as an assumption stated in the plan: attention_dp > 1 with experts split by columns
  (moe_tp > 1). There the attention replicas hold different tokens, and an expert tensor-parallel
  group must gather every replica's tokens and scatter the results back; serve() does not time that
  gather (serving/layout.py times the expert-parallel all-to-all only), so such layouts would look
  faster than they run.
- Only layouts the chosen engine can be launched with (planner/launch.py `engine_refusal`): vLLM
  splits the experts either tensor-parallel over all the worker's GPUs or expert-parallel over all
  of them; TensorRT-LLM's attention data parallelism runs attention on one GPU per replica (tp = 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, Optional

from llm_analysis.config import DtypeConfig, GPUConfig, ParallelismConfig
from llm_analysis.planner.launch import engine_refusal
from llm_analysis.planner.space import divisors, tp_options

# the largest worker the MoE search builds by default: 64 GPUs (8 nodes of 8), the width of the widest
# expert-parallel deployments published for DeepSeek-V3-class models (EP 32-72: SGLang's 96-GPU
# prefill/decode deployment, TensorRT-LLM's wide EP on GB200 NVL72)
DEFAULT_MAX_WORKER_GPUS = 64
# the widest NVLink domain whose whole-domain worker the MoE search adds: a GB200 / GB300 NVL72 rack (a
# TPU pod's interconnect domain, thousands of chips, is no serving worker)
RACK_WORKER_LIMIT = 72


@dataclass
class Worker:
    """One serving worker's GPU, data type and layout."""

    gpu: GPUConfig
    dtype: DtypeConfig
    tp: int
    attention_dp: int
    moe_tp: int
    moe_ep: int
    is_moe: bool
    redundant_experts: int = 0  # copies of routed experts spread with them over moe_ep (the rack worker's)
    expert_slots: int = 0  # experts + copies (0: no copies)

    @property
    def gpus(self) -> int:
        return self.tp * self.attention_dp

    def parallelism_fields(self, workers: int) -> Dict[str, int]:
        """ParallelismConfig fields of `workers` of these workers (dense models: tp and dp only)."""
        if not self.is_moe:
            return {"tp_size": self.tp, "dp_size": workers}
        copies = {"moe_redundant_experts": self.redundant_experts} if self.redundant_experts else {}
        return {"tp_size": self.tp, "attention_dp_size": self.attention_dp, "moe_tp_size": self.moe_tp,
                "moe_ep_size": self.moe_ep, **copies, "dp_size": workers}

    def parallelism(self, workers: int) -> ParallelismConfig:
        return ParallelismConfig(**self.parallelism_fields(workers))

    def parallelism_text(self, workers: int) -> str:
        return "ParallelismConfig(" + ", ".join(f"{k}={v}" for k, v in self.parallelism_fields(workers).items()) + ")"

    def describe(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"gpu": self.gpu.name, "dtype": self.dtype.name, "tp": self.tp}
        if self.is_moe:
            out.update(attention_dp=self.attention_dp, moe_tp=self.moe_tp, moe_ep=self.moe_ep)
            if self.redundant_experts:
                out.update(moe_redundant_experts=self.redundant_experts, moe_expert_slots=self.expert_slots)
        return out


def _moe_splits(model, worker_gpus: int, max_ep: Optional[int], whole_experts_only: bool):
    """(moe_tp, moe_ep) with moe_tp x moe_ep = worker_gpus that divide the experts and their columns."""
    for ep in divisors(worker_gpus):
        moe_tp = worker_gpus // ep
        if model.moe_num_experts % ep or model.expert_ffn_dim % moe_tp:
            continue
        if max_ep is not None and ep > max_ep:
            continue
        if whole_experts_only and moe_tp != 1:
            continue
        yield moe_tp, ep


def _rack_worker(search, gpu: GPUConfig, dtype: DtypeConfig, max_worker_gpus: Optional[int],
                 widths: set) -> Optional[Worker]:
    """The worker of a rack's whole NVLink domain (module docstring), or None: no domain beyond a node, one
    wider than RACK_WORKER_LIMIT, a width the sweep already has, or one the limits exclude. Its copies are
    fewer than its GPUs, so no GPU holds an expert twice (serving/layout.py redundant_experts)."""
    domain = gpu.nvlink_domain_size
    if not gpu.num_gpus_per_node < domain <= RACK_WORKER_LIMIT or domain in widths:
        return None
    if any(limit is not None and domain > limit for limit in (max_worker_gpus, search.max_gpus, search.max_ep)):
        return None
    experts = search.model.moe_num_experts
    copies = -experts % domain
    return Worker(gpu, dtype, 1, domain, 1, domain, True, redundant_experts=copies,
                  expert_slots=experts + copies if copies else 0)


def workers_of(search, framework: str, max_worker_gpus: Optional[int]) -> Iterator[Worker]:
    """Every worker layout of the search's GPUs and data types that `framework` runs (see the module
    docstring), fewest GPUs first within each GPU type and data type."""
    model = search.model
    for gpu in search.gpus:
        per_node = gpu.num_gpus_per_node
        tps = tp_options(model, search.max_tp or per_node)
        for dtype in search.dtypes.of(gpu):
            found = []
            if not model.is_moe:
                found = [Worker(gpu, dtype, tp, 1, tp, 1, False) for tp in tps]
            else:
                cap = max_worker_gpus or DEFAULT_MAX_WORKER_GPUS
                if search.max_gpus is not None:
                    cap = min(cap, search.max_gpus)
                for tp in tps:
                    adp = 1
                    while tp * adp <= cap:
                        for moe_tp, ep in _moe_splits(model, tp * adp, search.max_ep, whole_experts_only=adp > 1):
                            found.append(Worker(gpu, dtype, tp, adp, moe_tp, ep, True))
                        adp *= 2
                rack = _rack_worker(search, gpu, dtype, max_worker_gpus, {w.gpus for w in found})
                if rack is not None:
                    found.append(rack)
            for w in sorted(found, key=lambda w: (w.gpus, w.attention_dp, w.moe_ep)):
                if search.max_gpus is not None and w.gpus > search.max_gpus:
                    continue
                if engine_refusal(framework, w) is None:
                    yield w


__all__ = ["DEFAULT_MAX_WORKER_GPUS", "RACK_WORKER_LIMIT", "Worker", "workers_of"]
