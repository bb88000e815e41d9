"""Serving worker layouts: attention data parallelism and the experts' own split (DESIGN.md section 5).

A worker spans tp x attention_dp GPUs (ParallelismConfig, schema/parallelism.py). Each of its
attention_dp attention replicas ("ranks") runs its own scheduler, KV pool and share of the
requests (SGLang's --enable-dp-attention, TensorRT-LLM's enable_attention_dp, vLLM's data-parallel
attention); the routed experts are split over the same GPUs moe_tp ways (each expert's columns)
and moe_ep ways (whole experts). serve() models one rank and runs workers x attention_dp of them
(the clients round robin over the ranks, the request rate evenly).

The time of a rank's step of x tokens, its ranks in lockstep with equal loads (they meet at every
MoE layer):
- the attention side: every operator but the routed experts on the rank's own layout (tensor
  parallel over tp, x tokens): attention, dense MLPs and shared experts (replicated across the
  replicas), norms, the router, embeddings, the LM head and the tensor-parallel all-reduces;
- the routed experts: the worker's x * attention_dp tokens, k expert passes each, spread over
  moe_ep GPU groups of moe_tp GPUs: per GPU the work of x * attention_dp / moe_ep tokens' top-k
  passes through experts split moe_tp ways, and only the local experts' weights that the worker's
  tokens reach are read (the describer's expert-parallel operators with tp = moe_tp and
  ep = dp = moe_ep, timed on the analysis' cost model);
- dispatch and combine: with attention_dp > 1 the replicas hold different tokens, so each MoE
  layer sends every token's hidden state to its k experts and back: two all-to-alls over the
  moe_ep group (`all_to_all_bytes_per_token`), on the link that group spans (NVLink inside a
  node, the NVLink switch domain of NVL72 racks, InfiniBand beyond; cost/links.py, cost/nccl.py).
  With attention_dp = 1 every GPU already holds every token after the attention all-reduce, and
  the MoE output is summed by the tensor-parallel all-reduce that closes the layer;
- load imbalance: the experts' side is multiplied by `expert_load_imbalance` (the busiest expert
  group's tokens over the mean; assumption, default DEFAULT_EXPERT_LOAD_IMBALANCE with
  moe_ep > 1, 1 without), since the slowest GPU sets the step.

Memory per GPU follows the layout: the attention side's weights replicated on every replica
(split tp ways), the routed experts' split moe_tp x moe_ep ways, and the KV cache of the rank's
own requests over its tp GPUs (MLA's latent, kept whole on each tensor-parallel GPU, is no
longer copied across the replicas). The engine's settings (token budget, max_num_seqs) are per
rank, as the engines apply them per attention-DP rank.

Pipeline stages (pp_size > 1), context parallelism and training-style expert parallelism
(ep_size) in a serving worker are refused by name.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Optional

from llm_analysis.config import ParallelismConfig
from llm_analysis.errors import ConfigError
from llm_analysis.model import Phase
from llm_analysis.serving.step_time import StepCosts, StepTimer

# the busiest expert group's share of the tokens over the mean, with moe_ep > 1 (an assumption:
# engines balance experts with redundant copies, EPLB; with uniform routing of many tokens the
# spread is small, with few tokens large): benchmarks/serving_layout_accuracy.py --fit scans 1.0 .. 1.5 on
# the fit half's aggregated layouts; 1.0 gives the least TPOT error there (median 23.7%, against 22.1% at 1.1
# with a worse p90), so the default states no imbalance beyond what the step model holds
DEFAULT_EXPERT_LOAD_IMBALANCE = 1.0
ROUTED = "routed"
_WEIGHT_PROBE = Phase("decode", 1, 1, 64)  # any phase: weights do not depend on it


@dataclass(frozen=True)
class WorkerLayout:
    """One serving worker's layout and how many workers share the load."""

    tp: int
    attention_dp: int
    moe_tp: int
    moe_ep: int
    workers: int

    @property
    def gpus_per_worker(self) -> int:
        return self.tp * self.attention_dp

    @property
    def ranks(self) -> int:
        """Attention replicas over all workers, each with its own scheduler and requests."""
        return self.workers * self.attention_dp

    @property
    def plain(self) -> bool:
        """One tensor-parallel group per worker (experts split like the rest): serve()'s own path."""
        return self.attention_dp == 1 and self.moe_ep == 1


def worker_layout(analysis, parallelism: Optional[ParallelismConfig] = None, where: str = "") -> WorkerLayout:
    """The worker layout of `parallelism` (default: the analysis'), checked against the model: one
    ConfigError naming the field for what serve() cannot run. `where` prefixes field names (pools)."""
    p = parallelism or analysis.parallelism_config
    m = analysis.model_config
    for field, value, why in (("pp_size", p.pp_size, "pipeline stages in a serving worker"),
                              ("cp_size", p.cp_size, "context parallelism in serving"),
                              ("ep_size", p.ep_size, "training-style expert parallelism across data-parallel "
                                                     "replicas (for serving use attention_dp_size and moe_ep_size)")):
        if value != 1:
            raise ConfigError(f"{where}{field} = {value}: {why} is not modelled by serve(); valid: {field} = 1 (a "
                              f"worker is tp_size x attention_dp_size GPUs, experts over moe_tp_size x moe_ep_size "
                              f"of them; dp_size workers share the load)")
    if not m.is_moe:
        if "moe_ep_size" in p.model_fields_set and p.moe_ep_size > 1:
            raise ConfigError(f"{where}moe_ep_size = {p.moe_ep_size} but {m.name} has no experts; valid: moe_ep_size = 1 "
                              f"(or leave it out: the MLP of a dense model follows the attention layout)")
        return WorkerLayout(p.tp_size, p.attention_dp_size, p.tp_size, 1, p.dp_size)
    if m.moe_num_experts % p.moe_ep_size:
        raise ConfigError(f"{where}moe_ep_size = {p.moe_ep_size} must divide moe_num_experts = {m.moe_num_experts} of "
                          f"{m.name}; valid: {[d for d in range(1, m.moe_num_experts + 1) if m.moe_num_experts % d == 0]}")
    if m.expert_ffn_dim % p.moe_tp_size:
        raise ConfigError(f"{where}moe_tp_size = {p.moe_tp_size} must divide moe_ffn_embed_dim = {m.expert_ffn_dim} of "
                          f"{m.name} (each expert is split by columns); valid: "
                          f"{[d for d in range(1, 65) if m.expert_ffn_dim % d == 0]}")
    return WorkerLayout(p.tp_size, p.attention_dp_size, p.moe_tp_size, p.moe_ep_size, p.dp_size)


def all_to_all_bytes_per_token(model, activation_bytes: float, moe_ep: int) -> float:
    """Bytes one token sends to other GPUs in one MoE layer's dispatch (its hidden state, a latent
    MoE's latent, to each of its top-k experts; uniform routing: a share (moe_ep - 1) / moe_ep of
    them live elsewhere); the combine sends as many back."""
    if moe_ep <= 1:
        return 0.0
    return model.moe_top_k * model.expert_io_dim * activation_bytes * (moe_ep - 1) / moe_ep


def with_parallelism(analysis, parallelism: ParallelismConfig):
    """A copy of `analysis` on another layout (its own describer and cost model), kept with the
    analysis' describer so later calls reuse its step costs."""
    def build():
        other = copy.copy(analysis)
        other.update_parallelism_config(parallelism)
        return other

    return analysis.describer.memoized(("serving_layout_variant", parallelism.model_dump_json()), build)


def attention_analysis(analysis, layout: WorkerLayout):
    """The analysis of one attention replica: tensor parallel over tp, one replica."""
    return with_parallelism(analysis, ParallelismConfig(tp_size=layout.tp))


def expert_analysis(analysis, layout: WorkerLayout, where: str = ""):
    """The analysis whose expert operators are one GPU's share of the worker's routed experts:
    tp = moe_tp, experts over ep = moe_ep ranks each with its own batch (model/mlp.py)."""
    try:
        return with_parallelism(analysis, ParallelismConfig(tp_size=layout.moe_tp, dp_size=layout.moe_ep,
                                                            ep_size=layout.moe_ep))
    except ConfigError as err:
        raise ConfigError(f"{where}moe_tp_size = {layout.moe_tp}: the experts cannot be split so ({err})") from None


def _is_routed(op) -> bool:
    return op.expert_role == ROUTED


def _routed_weight_bytes(analysis) -> float:
    return sum(n * op.weight_bytes_per_gpu for n, op in analysis.describer.weighted_ops(_WEIGHT_PROBE)
               if _is_routed(op))


def weight_bytes_per_gpu(analysis, layout: WorkerLayout) -> float:
    """Weights on one GPU of the worker: the attention side's split tp ways (replicated on every
    replica), the routed experts' moe_tp x moe_ep ways."""
    attention = attention_analysis(analysis, layout)
    if not analysis.model_config.is_moe:
        return attention.get_weight_memory_per_gpu()
    experts = expert_analysis(analysis, layout)
    return attention.get_weight_memory_per_gpu() - _routed_weight_bytes(attention) + _routed_weight_bytes(experts)


class LayoutStepCosts:
    """The cost pieces of a rank's step (the `StepCosts` interface StepTimer reads): the attention
    side's on the rank's layout, plus the routed experts' (and their all-to-alls) at the worker's
    tokens on the experts' layout, times the load imbalance."""

    def __init__(self, attention: StepCosts, experts: Optional[StepCosts], layout: WorkerLayout, imbalance: float):
        self.attention, self.experts = attention, experts
        self.scale = layout.attention_dp / layout.moe_ep  # an expert rank's tokens per attention rank's token
        self.imbalance = imbalance
        # what callers derive from these costs (saturation rates): apart from the attention side's own,
        # which every layout with the same tensor-parallel replica shares
        self.memo = attention.memo.setdefault(("layout", layout, imbalance), {})

    def experts_s(self, graph: bool, tokens: float) -> float:
        """The routed experts of a step in which every rank runs `tokens` tokens (below one token per
        expert rank, a share of one token's time: the work is that of the tokens' expert passes)."""
        if self.experts is None or tokens <= 0:
            return 0.0
        n = tokens * self.scale
        t = self.experts.token_s(graph, n) if n >= 1 else n * self.experts.token_s(graph, 1)
        return self.imbalance * t

    def token_and_head_s(self, graph: bool, count: float):
        token, head = self.attention.token_and_head_s(graph, count)
        return token + self.experts_s(graph, count), head

    def token_s(self, graph: bool, tokens: float) -> float:
        return self.attention.token_s(graph, tokens) + self.experts_s(graph, tokens)

    def head_s(self, graph: bool, sampled: float) -> float:
        return self.attention.head_s(graph, sampled)

    def decode_attention_s(self, graph: bool, decoders: float, mean_context: float, q_len: int = 1) -> float:
        return self.attention.decode_attention_s(graph, decoders, mean_context, q_len)

    def chunk_attention_s(self, graph: bool, q: float, past: float) -> float:
        return self.attention.chunk_attention_s(graph, q, past)

    def prefill_form_s(self, graph: bool, q: float) -> float:
        return self.attention.prefill_form_s(graph, q)


def layout_step_costs(analysis, layout: WorkerLayout, kv_cache_bytes: float, imbalance: Optional[float],
                      where: str = "", moe_kernels: Optional[str] = None) -> LayoutStepCosts:
    """The step costs of one rank of `layout` (kept with the replica analysis' describer per cost model),
    the routed experts at the grouped GEMM share of the engine's `moe_kernels`."""
    attention = attention_analysis(analysis, layout)
    if imbalance is None:
        imbalance = DEFAULT_EXPERT_LOAD_IMBALANCE if layout.moe_ep > 1 else 1.0
    d = attention.describer_for(kv_cache_bytes)
    key = ("serving_layout_attention", attention.kernel_launch)
    att = d.cost_memo(attention.cost_model, key,
                      lambda: StepCosts(attention, d, token_filter=lambda op: not _is_routed(op)))
    experts = None
    if analysis.model_config.is_moe:
        e = expert_analysis(analysis, layout, where)
        dispatch = layout.attention_dp > 1  # else every GPU holds every token already

        def routed_or_dispatch(op) -> bool:
            return _is_routed(op) or (dispatch and op.comm_group == "ep")

        de = e.describer
        experts = de.cost_memo(e.cost_model, ("serving_layout_experts", e.kernel_launch, dispatch, moe_kernels),
                               lambda: StepCosts(e, de, token_filter=routed_or_dispatch, moe_kernels=moe_kernels))
    return LayoutStepCosts(att, experts, layout, imbalance)


def layout_step_timer(analysis, layout: WorkerLayout, engine, imbalance: Optional[float] = None,
                      where: str = "") -> StepTimer:
    """The StepTimer of one rank of `layout` under `engine` (its host overheads per rank)."""
    # experts split over expert-parallel ranks run the engine's wide-EP MoE kernels
    moe_kernels = engine.moe_kernels_wide_ep if layout.moe_ep > 1 else engine.moe_kernels
    return StepTimer(layout_step_costs(analysis, layout, engine.kv_cache_bytes, imbalance, where, moe_kernels),
                     engine)


def check_imbalance(value) -> Optional[float]:
    """`expert_load_imbalance`: None (the default) or a number >= 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 1 or value == float("inf"):
        raise ConfigError(f"expert_load_imbalance = {value!r} must be a finite number >= 1 (the busiest expert "
                          f"group's tokens over the mean; 1: perfectly balanced)")
    return float(value)


__all__ = ["DEFAULT_EXPERT_LOAD_IMBALANCE", "LayoutStepCosts", "WorkerLayout", "all_to_all_bytes_per_token",
           "attention_analysis", "check_imbalance", "expert_analysis", "layout_step_timer", "weight_bytes_per_gpu",
           "worker_layout"]
