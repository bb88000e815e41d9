"""Serving worker layouts: attention data parallelism and the experts' own split (DESIGN.md section 5).

A worker spans tp x attention_dp (x pp) GPUs. Each of its attention_dp attention replicas ("ranks") runs
its own scheduler, KV pool and share of the requests (SGLang's --enable-dp-attention, TensorRT-LLM's
enable_attention_dp, vLLM's data-parallel attention); the routed experts are split over the same GPUs
moe_tp ways (each expert's columns) and moe_ep ways (whole experts). serve() models one rank.

A rank's step of x tokens, the ranks in lockstep with equal loads (they meet at every MoE layer; an idle
rank is timed as running the same batch, as TensorRT-LLM pads it with a dummy request,
PyExecutor._pad_attention_dp_dummy_request; SGLang's idle ranks run an empty batch: an assumption there):
- the attention side: every operator but the routed experts, tensor parallel over tp, on x tokens;
- the routed experts: the worker's x * attention_dp tokens' top-k passes over moe_ep groups of moe_tp GPUs,
  reading only the local experts' weights the tokens reach (the describer's expert-parallel operators with
  tp = moe_tp, ep = dp = moe_ep);
- dispatch and combine: with attention_dp > 1 each MoE layer sends every token to its k experts and back,
  two all-to-alls over the moe_ep group (`all_to_all_bytes_per_token`) on the link it spans (cost/links.py);
  with attention_dp = 1 the tensor-parallel all-reduce already holds every token;
- load imbalance: the busiest expert group sets the step (`busiest_group_factor`: T routed assignments over
  G groups, binomial counts, the busiest about z_G standard deviations above the mean,
  1 + z_G sqrt((G - 1) / T), times the profile's fitted `expert_spread_scale`, at least 1); a caller's
  `expert_load_imbalance` replaces it with a constant.

Memory per GPU: the attention side's weights split tp ways on every replica, the routed experts' moe_tp x
moe_ep ways, the KV cache of the rank's own requests over its tp GPUs. The engine's settings are per rank.
Pipeline stages: serving/pipeline.py. A training-style ep_size (ParallelismConfig(tp_size=t, dp_size=D,
ep_size=E)) is read as workers of E attention replicas of t GPUs, moe_tp = t, moe_ep = E, D / E workers.
Context parallelism in serving is refused by name.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Optional

from llm_analysis.config import ParallelismConfig
from llm_analysis.model.pipeline_layout import end_slots, stage_layer_counts
from llm_analysis.schema.parallelism import check_expert_split
from llm_analysis.errors import ConfigError
from llm_analysis.schema.options import MAX_BATCH_SIZE, MAX_PARALLEL_SIZE, integer, number
from llm_analysis.model import Phase
from llm_analysis.serving.pipeline import PipelineStepTimer, StageView, gpu_only, stage_representatives
from llm_analysis.serving.step_time import StepCosts, StepTimer, layers_run, step_timer

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
    pp: int = 1  # pipeline stages, each of tp x attention_dp GPUs
    first_stage_layers: Optional[int] = None  # uneven stages (ParallelismConfig's num_layers_in_*_pipeline_stage)
    last_stage_layers: Optional[int] = None
    redundant_experts: int = 0  # copies of routed experts beside the model's own, spread with them over moe_ep

    @property
    def gpus_per_worker(self) -> int:
        return self.tp * self.attention_dp * self.pp

    def stage_fields(self) -> dict:
        """The ParallelismConfig fields of the pipeline."""
        out = {"pp_size": self.pp}
        if self.first_stage_layers is not None:
            out["num_layers_in_first_pipeline_stage"] = self.first_stage_layers
        if self.last_stage_layers is not None:
            out["num_layers_in_last_pipeline_stage"] = self.last_stage_layers
        return out

    def text(self) -> str:
        """The worker as an error names it: tp=2, and the attention replicas, experts and stages beside it."""
        parts = [f"tp={self.tp}"]
        if self.attention_dp > 1:
            parts.append(f"attention_dp={self.attention_dp}")
        if self.moe_ep > 1 or self.moe_tp != self.tp * self.attention_dp:
            parts.append(f"moe_tp={self.moe_tp} x moe_ep={self.moe_ep}"
                         + (f" + {self.redundant_experts} expert copies" if self.redundant_experts else ""))
        if self.pp > 1:
            parts.append(f"pp={self.pp}")
        return ", ".join(parts)

    @property
    def ranks(self) -> int:
        """Attention replicas over all workers, each with its own scheduler and requests."""
        return self.workers * self.attention_dp

    @property
    def plain(self) -> bool:
        """One tensor-parallel group per worker (experts split like the rest): serve()'s own path."""
        return self.attention_dp == 1 and self.moe_ep == 1


def _from_training_ep(p: ParallelismConfig, model, where: str) -> ParallelismConfig:
    """A training-style `ep_size` as the serving layout it describes (module docstring), or a ConfigError."""
    given = sorted(f for f in ("attention_dp_size", "moe_tp_size", "moe_ep_size") if f in p.model_fields_set
                   and not (f == "attention_dp_size" and p.attention_dp_size == 1))
    if given:
        raise ConfigError(f"{where}ep_size = {p.ep_size} together with {', '.join(given)}: give the serving layout "
                          f"either as ep_size (experts over ep_size data-parallel replicas) or as attention_dp_size / "
                          f"moe_tp_size / moe_ep_size; valid: ep_size = 1 with the latter")
    if not model.is_moe:
        raise ConfigError(f"{where}ep_size = {p.ep_size} but {model.name} has no experts; valid: ep_size = 1")
    if p.dp_size % p.ep_size:
        raise ConfigError(f"{where}ep_size = {p.ep_size} must divide dp_size = {p.dp_size} (the data-parallel replicas "
                          f"the experts are spread over); valid: "
                          f"{[e for e in range(1, p.dp_size + 1) if p.dp_size % e == 0]}, or the worker's layout as "
                          f"attention_dp_size = {p.ep_size}, moe_ep_size = {p.ep_size}")
    fields = p.model_dump(exclude={"ep_size", "rdp_size", "dp_shard", "dp_replicate", "sp_size", "moe_tp_size",
                                   "moe_ep_size"})
    fields.update(dp_size=p.dp_size // p.ep_size, attention_dp_size=p.ep_size, moe_tp_size=p.tp_size,
                  moe_ep_size=p.ep_size)
    return ParallelismConfig(**fields)


def worker_layout(analysis, parallelism: Optional[ParallelismConfig] = None, where: str = "") -> WorkerLayout:
    """The worker layout of `parallelism` (default: the analysis'), checked against the model (a ConfigError
    naming the field); `where` prefixes field names (pools)."""
    p = parallelism or analysis.parallelism_config
    m = analysis.model_config
    if p.cp_size != 1:
        raise ConfigError(f"{where}cp_size = {p.cp_size}: context parallelism in serving is not modelled by serve(); "
                          f"valid: cp_size = 1 (a worker is tp_size x attention_dp_size x pp_size GPUs, experts over "
                          f"moe_tp_size x moe_ep_size of each stage's; dp_size workers share the load)")
    if p.ep_size != 1:
        p = _from_training_ep(p, m, where)
    check_expert_split(p, m.is_moe, where)
    if p.pp_size > m.num_layers:
        raise ConfigError(f"{where}pp_size = {p.pp_size} exceeds num_layers = {m.num_layers} of {m.name} (each "
                          f"pipeline stage holds at least one layer); valid pp_size: 1..{m.num_layers}")
    stages = dict(pp=p.pp_size, first_stage_layers=p.num_layers_in_first_pipeline_stage,
                  last_stage_layers=p.num_layers_in_last_pipeline_stage)
    if p.pp_size > 1 and any(end_slots(p)):  # Megatron-Core's accounted split, as the end stages' layer counts
        counts = stage_layer_counts(m, p)
        stages.update(first_stage_layers=counts[0], last_stage_layers=counts[-1])
    if not m.is_moe:
        if "moe_ep_size" in p.model_fields_set and p.moe_ep_size > 1:
            raise ConfigError(f"{where}moe_ep_size = {p.moe_ep_size} but {m.name} has no experts; valid: moe_ep_size = 1 "
                              f"(or leave it out: the MLP of a dense model follows the attention layout)")
        if p.moe_redundant_experts:
            raise ConfigError(f"{where}moe_redundant_experts = {p.moe_redundant_experts} but {m.name} has no experts; "
                              f"valid: 0 (or leave it out)")
        return WorkerLayout(p.tp_size, p.attention_dp_size, p.tp_size, 1, p.dp_size, **stages)
    redundant = redundant_experts(p, m, where)
    if m.expert_ffn_dim % p.moe_tp_size:
        raise ConfigError(f"{where}moe_tp_size = {p.moe_tp_size} must divide moe_ffn_embed_dim = {m.expert_ffn_dim} of "
                          f"{m.name} (each expert is split by columns); valid: "
                          f"{[d for d in range(1, 65) if m.expert_ffn_dim % d == 0]}")
    return WorkerLayout(p.tp_size, p.attention_dp_size, p.moe_tp_size, p.moe_ep_size, p.dp_size, **stages,
                        redundant_experts=redundant)


def redundant_experts(p: ParallelismConfig, model, where: str = "") -> int:
    """The redundant expert copies of a worker (moe_redundant_experts), checked: experts and copies split evenly
    over the moe_ep_size ranks (as SGLang and TensorRT-LLM require of their expert slots), no rank holding an
    expert twice. A moe_ep_size that does not divide the experts needs copies that make it even (256 experts
    over 72 ranks: 32 copies, 4 slots a GPU)."""
    e, ep, given = model.moe_num_experts, p.moe_ep_size, p.moe_redundant_experts or 0
    least = -e % ep
    if given and ep == 1:
        raise ConfigError(f"{where}moe_redundant_experts = {given} needs the experts spread over expert-parallel ranks "
                          f"(moe_ep_size > 1; it is 1); valid: moe_redundant_experts = 0, or moe_ep_size > 1")
    if (e + given) % ep == 0:  # (no rank holding an expert twice: the expert describer checks it, model/describer.py)
        return given
    if not given:
        raise ConfigError(f"{where}moe_ep_size = {ep} must divide moe_num_experts = {e} of {model.name}; valid: "
                          f"{[d for d in range(1, e + 1) if e % d == 0]}, or redundant expert copies that make the "
                          f"split even: moe_redundant_experts = {least} (+ a multiple of {ep}; expert-parallel load "
                          f"balancing, as SGLang's --ep-num-redundant-experts)")
    most = e * (ep - 1)  # each of the ep ranks holding every expert once
    raise ConfigError(f"{where}moe_redundant_experts = {given}: {e} experts of {model.name} and their copies must "
                      f"split evenly over moe_ep_size = {ep} ranks, a rank holding no expert twice; valid: {least} + "
                      f"a multiple of {ep}, at most {most}")


def all_to_all_bytes_per_token(model, activation_bytes: float, moe_ep: int) -> float:
    """Bytes one token sends to other GPUs in one MoE layer's dispatch (its hidden state, or latent, to each of
    its top-k experts, (moe_ep - 1) / moe_ep of them elsewhere under uniform routing); the combine's: pass
    `model.mlp.combine_bytes_per_element` as `activation_bytes`."""
    if moe_ep <= 1:
        return 0.0
    return model.moe_top_k * model.expert_io_dim * activation_bytes * (moe_ep - 1) / moe_ep


def with_parallelism(analysis, parallelism: ParallelismConfig):
    """A copy of `analysis` on another layout, kept with the analysis' describer so later calls reuse its costs."""
    def build():
        other = copy.copy(analysis)
        other.update_parallelism_config(parallelism)
        return other

    return analysis.describer.memoized(("serving_layout_variant", parallelism.model_dump_json()), build)


def attention_analysis(analysis, layout: WorkerLayout):
    """The analysis of one attention replica: tensor parallel over tp, one replica (its pipeline stages)."""
    return with_parallelism(analysis, ParallelismConfig(tp_size=layout.tp, **layout.stage_fields()))


def expert_analysis(analysis, layout: WorkerLayout, where: str = ""):
    """The analysis whose expert operators are one GPU's share of the routed experts: tp = moe_tp, ep = moe_ep;
    no sequence parallelism (the engines dispatch each attention replica's tokens whole, not a 1/tp slice)."""
    try:
        return with_parallelism(analysis, ParallelismConfig(tp_size=layout.moe_tp, sp_size=1, dp_size=layout.moe_ep,
                                                            ep_size=layout.moe_ep,
                                                            moe_redundant_experts=layout.redundant_experts,
                                                            **layout.stage_fields()))
    except ConfigError as err:
        raise ConfigError(f"{where}moe_tp_size = {layout.moe_tp}: the experts cannot be split so ({err})") from None


def _is_routed(op) -> bool:
    return op.expert_role == ROUTED


def _routed_weight_bytes(analysis, stage: Optional[int] = None) -> float:
    return sum(n * op.weight_bytes_per_gpu for n, op in analysis.describer.weighted_ops(_WEIGHT_PROBE, stage)
               if _is_routed(op))


def weight_bytes_per_gpu(analysis, layout: WorkerLayout) -> float:
    """Weights on one GPU of the worker: the attention side's split tp ways, the routed experts' moe_tp x moe_ep
    ways; with pipeline stages, the heaviest stage's."""
    attention = attention_analysis(analysis, layout)
    if not analysis.model_config.is_moe:
        return attention.get_weight_memory_per_gpu()
    experts = expert_analysis(analysis, layout)
    if layout.pp == 1:
        return attention.get_weight_memory_per_gpu() - _routed_weight_bytes(attention) + _routed_weight_bytes(experts)
    stage_weights = [sum(n * op.weight_bytes_per_gpu for n, op in attention.describer.weighted_ops(_WEIGHT_PROBE, k))
                     for k in range(layout.pp)]
    # what the per-GPU weights hold beyond the heaviest stage's operators (a tied head's copy, say)
    beyond = attention.get_weight_memory_per_gpu() - max(stage_weights)
    return beyond + max(w - _routed_weight_bytes(attention, k) + _routed_weight_bytes(experts, k)
                        for k, w in enumerate(stage_weights))


class LayoutStepCosts:
    """The `StepCosts` interface of a rank's step: the attention side's on the rank's layout, plus the routed
    experts' (and their all-to-alls) at the worker's tokens, times the load imbalance."""

    def __init__(self, attention: StepCosts, experts: Optional[StepCosts], layout: WorkerLayout, imbalance: float,
                 spread_scale: Optional[float] = None, top_k: int = 1):
        self.attention, self.experts = attention, experts
        self.scale = layout.attention_dp / layout.moe_ep  # an expert rank's tokens per attention rank's token
        self.imbalance, self.spread_scale = imbalance, spread_scale
        self.groups, self.worker_tokens_per_rank_token, self.top_k = layout.moe_ep, layout.attention_dp, top_k
        self.z = expected_largest_normal(layout.moe_ep)  # worked out once: experts_s runs in every step
        # what callers derive from these costs (saturation rates): apart from the attention side's own,
        # which every layout with the same tensor-parallel replica shares
        self.memo = attention.memo.setdefault(("layout", layout, imbalance, spread_scale), {})

    def experts_s(self, graph: bool, tokens: float) -> float:
        """The routed experts of a step of `tokens` tokens on every rank (below one token per expert rank, a share of
        one token's time)."""
        if self.experts is None or tokens <= 0:
            return 0.0
        n = tokens * self.scale
        t = self.experts.token_s(graph, n) if n >= 1 else n * self.experts.token_s(graph, 1)
        if self.spread_scale is None:
            return self.imbalance * t
        assignments = tokens * self.worker_tokens_per_rank_token * self.top_k
        return busiest_group_factor(assignments, self.groups, self.spread_scale, self.z) * t

    def token_and_head_s(self, graph: bool, count: float):
        token, head = self.attention.token_and_head_s(graph, count)
        return token + self.experts_s(graph, count), head

    def token_s(self, graph: bool, tokens: float) -> float:
        return self.attention.token_s(graph, tokens) + self.experts_s(graph, tokens)

    def head_s(self, graph: bool, sampled: float) -> float:
        return self.attention.head_s(graph, sampled)

    def decode_attention_s(self, graph: bool, decoders: float, mean_context: float, q_len: int = 1) -> float:
        return self.attention.decode_attention_s(graph, decoders, mean_context, q_len)

    def chunks_attention_s(self, graph: bool, chunks) -> float:
        return self.attention.chunks_attention_s(graph, chunks)

    def prefill_form_s(self, graph: bool, q: float) -> float:
        return self.attention.prefill_form_s(graph, q)


def expected_largest_normal(groups: int) -> float:
    """z_G, the expected largest of G standard normals, by Blom's approximation inv_cdf((G - 0.375) / (G + 0.25))
    (within 0.03 of the exact value for G = 2 .. 72); 0 for one group."""
    return NormalDist().inv_cdf((groups - 0.375) / (groups + 0.25)) if groups > 1 else 0.0


def busiest_group_factor(assignments: float, groups: int, scale: float = 1.0, z: Optional[float] = None) -> float:
    """The busiest of `groups` expert groups' load over the mean for `assignments` uniformly routed assignments:
    binomial counts (mean a / G, deviation sqrt(a (G - 1)) / G), the largest about z_G deviations above the
    mean: 1 + z_G sqrt((G - 1) / a), times `scale` (the engine's fitted departure from uniform), at least 1."""
    if groups <= 1 or assignments <= 0:
        return 1.0
    if z is None:
        z = expected_largest_normal(groups)
    return max(1.0, scale * (1.0 + z * math.sqrt((groups - 1) / assignments)))


def expert_spread_note(layout: WorkerLayout, engine, imbalance: Optional[float], top_k: int,
                       running_per_rank: Optional[float] = None, where: str = "") -> Optional[str]:
    """The note on the routed experts' spread over expert-parallel groups (None: moe_ep = 1); with
    `running_per_rank`, the factor of a decode step of that many requests per rank."""
    if layout.moe_ep <= 1:
        return None
    copies = ""
    if layout.redundant_experts:
        copies = (f" ({layout.redundant_experts} redundant copies beside the experts, each group holding the same "
                  f"number of expert slots, a copied expert's tokens split evenly over its copies: what expert "
                  f"load balancing aims at: assumption)")
    if imbalance is not None:
        return (f"{where}routed experts over moe_ep={layout.moe_ep} groups{copies}: their time x {imbalance:g} "
                "(expert_load_imbalance given)")
    scale = engine.expert_spread_scale
    at = ""
    if running_per_rank:
        assignments = running_per_rank * layout.attention_dp * top_k
        at = (f"; {busiest_group_factor(assignments, layout.moe_ep, scale):.3g} for a decode step of the mean running "
              f"requests ({assignments:.4g} assignments)")
    return (f"{where}routed experts over moe_ep={layout.moe_ep} groups{copies}: each step's experts take the busiest "
            f"group's time, max(1, {scale:g} x (1 + z_G sqrt((G - 1) / T))) of the balanced one for T routed assignments "
            f"(uniform routing's spread, scale fitted per engine: expert_spread_scale; assumption){at}")


def column_split_note(layout: WorkerLayout, where: str = "") -> Optional[str]:
    """The note when the experts' column split spans attention-DP ranks (moe_tp_size > tp_size, attention_dp_size
    > 1: SGLang's DP attention over a tensor-parallel MoE): the per-layer all-gather and reduce-scatter it needs
    are not timed, so the figures are optimistic (None: the split stays within a replica)."""
    if layout.attention_dp <= 1 or layout.moe_tp <= layout.tp:
        return None
    return (f"{where}moe_tp_size = {layout.moe_tp} over attention_dp_size = {layout.attention_dp} replicas of tp_size = "
            f"{layout.tp}: the all-gather of the replicas' tokens before each MoE layer and the reduce-scatter of its "
            f"partial outputs are not timed, so TTFT and TPOT here are optimistic by them; moe_tp_size = {layout.tp} "
            f"with moe_ep_size = {layout.moe_tp * layout.moe_ep // layout.tp} is timed whole")


def _describer_of(describer, stage: Optional[int]):
    return describer if stage is None else StageView(describer, stage)


def layout_step_costs(analysis, layout: WorkerLayout, kv_cache_bytes: float, imbalance: Optional[float],
                      where: str = "", moe_kernels: Optional[str] = None,
                      stage: Optional[int] = None, allreduce_engine: Optional[str] = None,
                      spread_scale: Optional[float] = None) -> LayoutStepCosts:
    """The step costs of one rank of `layout`: the routed experts at the grouped GEMM share of `moe_kernels`,
    times `imbalance` (None: 1) or, `spread_scale` given, the busiest group's factor of each step; `stage`: one
    pipeline stage's operators (None: all); `allreduce_engine`: whose measured all-reduce times the TP ones."""
    attention = attention_analysis(analysis, layout)
    if imbalance is None:
        imbalance = 1.0
    d = attention.describer_for(kv_cache_bytes)
    key = ("serving_layout_attention", attention.kernel_launch, stage, allreduce_engine)
    att = d.cost_kept(attention.cost_model, key,
                      lambda: StepCosts(attention, _describer_of(d, stage), token_filter=lambda op: not _is_routed(op),
                                        allreduce_engine=allreduce_engine))
    experts = None
    if analysis.model_config.is_moe:
        e = expert_analysis(analysis, layout, where)
        dispatch = layout.attention_dp > 1  # else every GPU holds every token already

        def routed_or_dispatch(op) -> bool:
            return _is_routed(op) or (dispatch and op.comm_group == "ep")

        de = e.describer
        experts = de.cost_kept(e.cost_model, ("serving_layout_experts", e.kernel_launch, dispatch, moe_kernels, stage,
                                              allreduce_engine),
                               lambda: StepCosts(e, _describer_of(de, stage), token_filter=routed_or_dispatch,
                                                 moe_kernels=moe_kernels, allreduce_engine=allreduce_engine))
    return LayoutStepCosts(att, experts, layout, imbalance, spread_scale, analysis.model_config.moe_top_k)


def layout_step_timer(analysis, layout: WorkerLayout, engine, imbalance: Optional[float] = None,
                      where: str = "", stage: Optional[int] = None) -> StepTimer:
    """The StepTimer of one rank of `layout` under `engine`; `imbalance` None: with moe_ep > 1 the busiest
    expert group's factor at the profile's `expert_spread_scale`; a number: that constant."""
    spread_scale = engine.expert_spread_scale if imbalance is None and layout.moe_ep > 1 else None
    if imbalance is None:
        imbalance = 1.0
    # experts split over expert-parallel ranks run the engine's wide-EP MoE kernels
    moe_kernels = engine.moe_kernels_wide_ep if layout.moe_ep > 1 else engine.moe_kernels
    return StepTimer(layout_step_costs(analysis, layout, engine.kv_cache_bytes, imbalance, where, moe_kernels, stage,
                                       allreduce_engine=engine.framework, spread_scale=spread_scale), engine,
                     # (the layout's stages, not the analysis': a disaggregated pool may have pipeline stages
                     # the analysis it is built from has not)
                     layers_run(attention_analysis(analysis, layout).describer, stage))


def _stage_timer(analysis, rank, describer, layout: WorkerLayout, engine, imbalance, where: str,
                 stage: Optional[int]) -> StepTimer:
    """One stage's (or, stage None, the whole model's) StepTimer of a rank."""
    if not layout.plain:
        return layout_step_timer(analysis, layout, engine, imbalance, where, stage)
    if stage is None:
        return step_timer(rank, describer, engine)
    key = ("serving_step_costs", rank.kernel_launch, engine.moe_kernels, "stage", stage, engine.framework)
    return StepTimer(describer.cost_kept(rank.cost_model, key, lambda: StepCosts(
        rank, StageView(describer, stage), moe_kernels=engine.moe_kernels, allreduce_engine=engine.framework)), engine,
        layers_run(describer, stage))


def rank_step_timer(analysis, rank, describer, layout: WorkerLayout, engine, imbalance: Optional[float] = None,
                    where: str = ""):
    """The step timer of one rank of `layout` (`rank` its analysis, `describer` that analysis' with the engine's KV
    dtype): a plain worker on the whole model, attention-DP / expert-parallel layouts in two parts
    (LayoutStepCosts), pipeline stages in rounds of micro-batches (serving/pipeline.py)."""
    if layout.pp == 1:
        return _stage_timer(analysis, rank, describer, layout, engine, imbalance, where, None)
    reps = stage_representatives(describer, layout.pp)
    stage_engine = gpu_only(engine)
    timers = {k: _stage_timer(analysis, rank, describer, layout, stage_engine, imbalance, where, k) for k in set(reps)}
    return PipelineStepTimer(timers, reps, engine, lambda tokens: rank.pipeline_handoff_time_s(1, tokens))


def check_balance_iters(value) -> int:
    """`attention_dp_balance_iters`: 0 (no hold) or the iterations a prompt may be held, at most MAX_BATCH_SIZE."""
    try:
        return integer(value, "attention_dp_balance_iters", 0, MAX_BATCH_SIZE)
    except ConfigError:
        raise ConfigError(f"attention_dp_balance_iters = {value!r} must be a whole number in [0, {MAX_BATCH_SIZE}] "
                          f"(TensorRT-LLM's attention_dp_config.timeout_iters with enable_balance: true; 0: no "
                          f"hold)") from None


def attention_dp_hold_s(hold_iters: int, ranks: int, step_s: float, worker_rps: float) -> float:
    """The mean hold of a prompt before its prefill under TensorRT-LLM's attention-DP balance (enable_balance:
    prompts are scheduled when every one of `ranks` ranks has one waiting, or after `hold_iters` decode
    steps): prompts reach each rank at worker_rps / ranks (Poisson), the others' last arrives after
    H(ranks - 1) ranks / worker_rps (H harmonic), so h = min(hold_iters step_s, that). The first waits h, the
    n = worker_rps h arriving meanwhile h / 2: mean wait h (1 + n / 2) / (1 + n)."""
    if hold_iters <= 0 or ranks <= 1 or worker_rps <= 0:
        return 0.0
    per_rank = worker_rps / ranks
    all_ranks_s = sum(1.0 / k for k in range(1, ranks)) / per_rank
    hold = min(hold_iters * step_s, all_ranks_s)
    n = worker_rps * hold
    return hold * (1.0 + 0.5 * n) / (1.0 + n)


def check_imbalance(value) -> Optional[float]:
    """`expert_load_imbalance`: None or a number in [1, MAX_PARALLEL_SIZE] (the busiest of G groups holds at most
    G times the mean; 10^300 overflowed every step time)."""
    if value is None:
        return None
    try:
        return number(value, "expert_load_imbalance", 1.0, MAX_PARALLEL_SIZE, lo_open=False)
    except ConfigError:
        raise ConfigError(f"expert_load_imbalance = {value!r} must be a number in [1, {MAX_PARALLEL_SIZE}] (the "
                          f"busiest expert group's tokens over the mean; 1: perfectly balanced; at most the number "
                          f"of groups, moe_ep_size)") from None


def check_imbalance_applies(imbalance: Optional[float], layouts) -> None:
    """A stated `expert_load_imbalance` without experts spread over moe_ep_size > 1 ranks would change nothing:
    refused rather than ignored."""
    if imbalance is not None and imbalance != 1.0 and all(lay.moe_ep <= 1 for lay in layouts):  # (1: balanced, as is)
        raise ConfigError(f"expert_load_imbalance = {imbalance:g}, but no GPUs of this layout hold different experts "
                          f"(moe_ep_size = 1): the busiest expert group's load applies to expert parallelism only; "
                          f"valid: leave expert_load_imbalance out, or spread the experts (moe_ep_size > 1)")


__all__ = ["LayoutStepCosts", "WorkerLayout", "all_to_all_bytes_per_token", "busiest_group_factor",
           "check_imbalance_applies", "column_split_note",
           "expected_largest_normal", "expert_spread_note",
           "attention_analysis", "attention_dp_hold_s", "check_balance_iters", "check_imbalance", "expert_analysis",
           "layout_step_timer", "rank_step_timer", "weight_bytes_per_gpu", "worker_layout"]
