"""The time of one engine step (decode tokens and prefill chunks) on the analysis' cost model, from the
operators of the model description. Its operators split by what their work depends on:
- token operators (matmuls, norms, embeddings, collectives, experts): the step's T tokens as one batch
  (weights read once, GEMMs of M = T rows); where a prefill runs other token operators than a decode (MLA:
  prefill up-projects the latent, decode absorbs it), each chunk adds the difference;
- the LM head: the sequences sampling a token this step, at batch S;
- sequence operators (kinds attention, conv, scan): each sequence over its own context. Decode: at batch D
  and the mean context (work linear in context, so the mean gives the sum). A chunk of q tokens after
  `past`: the prefill at past + q minus that at past (causal: its query rows are the longer one's last q).
Each piece is timed once per shape and kept with the describer per cost model: token counts exact where
GEMM tiles matter (every count to 64, then multiples of 8, 32, 128), 5% apart beyond, linear between;
lengths 5% apart (linear or quadratic work: within 0.1%). A step within the engine's CUDA graphs is timed
with the graph kernel floor, else the eager one (calibrated model). Host overheads: the engine profile's.
"""

from __future__ import annotations

import bisect
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from llm_analysis.errors import LLMAnalysisError
from llm_analysis.model import Phase

SEQUENCE_KINDS = frozenset({"attention", "conv", "scan"})
HEAD_GROUP = "lm_head"
TOKEN_PROBE_CONTEXT = 64  # the decode context at which token operators are built (they do not read it)
_GRID_RATIO = 1.05
_GRID_EXACT_BELOW = 64


def _length_grid(limit: int = 2**31) -> List[int]:
    """Whole lengths up to 64, then 5% apart: sequence operators' work is linear or quadratic in
    the length, so linear interpolation between neighbours is within 0.1%."""
    grid = list(range(1, _GRID_EXACT_BELOW + 1))
    x = float(_GRID_EXACT_BELOW)
    while grid[-1] < limit:
        x *= _GRID_RATIO
        if round(x) > grid[-1]:
            grid.append(round(x))
    return grid


def _token_grid(limit: int = 2**31) -> List[int]:
    """Token counts at which token operators are timed: every count to 64, multiples of 8 to 512,
    of 32 to 2048, of 128 to 16384 (GEMM tiles are multiples of these, so common batch and prompt
    sizes are timed exactly), then 5% apart."""
    grid = list(range(1, 65)) + list(range(72, 513, 8)) + list(range(544, 2049, 32)) + list(range(2176, 16385, 128))
    x = float(grid[-1])
    while grid[-1] < limit:
        x *= _GRID_RATIO
        grid.append(max(grid[-1] + 1, round(x)))
    return grid


LENGTH_GRID = _length_grid()
TOKEN_GRID = _token_grid()


def _bracket(x: float, grid: List[int] = LENGTH_GRID) -> Tuple[int, int, float]:
    """Grid points a <= x <= b and the weight of b in the linear interpolation."""
    if x <= 1:
        return 1, 1, 0.0
    k = bisect.bisect_left(grid, x)
    b = grid[k]
    if b == x:
        return b, b, 0.0
    a = grid[k - 1]
    return a, b, (x - a) / (b - a)


class StepCosts:
    """The cost-model seconds of the pieces of a step on one replica (analysis under serving
    conventions, its describer with the engine's KV dtype), each worked out once and kept."""

    def __init__(self, analysis, describer, token_filter=None, moe_kernels: Optional[str] = None,
                 allreduce_engine: Optional[str] = None):
        self.d = describer
        # which token operators this object times (None: all); a worker layout times the attention side
        # and the routed experts on two layouts (serving/layout.py)
        self._keeps = token_filter or (lambda op: True)
        cost_model = analysis.cost_model
        # routed experts at the grouped GEMM share of the engine's own MoE kernels (the calibrated
        # model's measured shares; the roofline has none)
        with_moe_kernels = getattr(cost_model, "with_moe_kernels", None)
        if with_moe_kernels is not None:
            cost_model = with_moe_kernels(moe_kernels)
        # tensor-parallel all-reduces as the engine runs them (its measured custom all-reduce: the
        # calibrated model's cost/engine_allreduce.py); None keeps the cost model's own
        with_allreduce_engine = getattr(cost_model, "with_allreduce_engine", None)
        if with_allreduce_engine is not None and allreduce_engine is not None:
            cost_model = with_allreduce_engine(allreduce_engine)
        with_launch = getattr(cost_model, "with_launch", None)  # the calibrated model's kernel floors
        forced = getattr(analysis, "kernel_launch", None)
        if with_launch is None:
            self._models = {True: cost_model, False: cost_model}
        elif forced is not None:  # the analysis forces one launch mode for every step
            self._models = {True: with_launch(forced), False: with_launch(forced)}
        else:
            self._models = {True: with_launch("graph"), False: with_launch("eager")}
        # a step's prompts run as one attention kernel per sequence operator (FlashAttention's varlen call,
        # FlashInfer's batch prefill, TensorRT-LLM's context FMHA): each prompt adds its work, the kernel's
        # launch floor is paid once; so the prompts' work is timed without the floor and the floor added per step
        self._work_models = {g: m.without_kernel_floor() for g, m in self._models.items()}
        self._floor_s = {g: m.kernel_floor_s for g, m in self._models.items()}
        self._sequence_repeats: Dict[bool, np.ndarray] = {}  # per launch mode: each sequence operator's count
        self._token: Dict[Tuple[bool, int], Tuple[float, float]] = {}
        self._decode_ops: Dict[int, list] = {}
        self._decode_attention: Dict[Tuple[bool, int, int], float] = {}
        self._prefill_attention: Dict[Tuple[bool, int], float] = {}
        self._prefill_form: Dict[Tuple[bool, int], float] = {}
        self._forms_agree = None  # whether prefill tokens cost what decode tokens do in the token operators
        self.memo: Dict[tuple, object] = {}  # what callers derive from these costs (saturation rates)

    # ---------------------------------------------------------------- pieces
    def _token_and_head(self, graph: bool, n: int) -> Tuple[float, float]:
        """(token operators, LM head) seconds of a decode step of batch n (a TOKEN_GRID count), kept."""
        got = self._token.get((graph, n))
        if got is None:
            self._time_token_counts(graph, n)
            got = self._token[(graph, n)]
        return got

    def _time_token_counts(self, graph: bool, n: int) -> None:
        """Time the token operators (and the head) of a decode step of batch n, built operator by
        operator (the describer keeps them per shape)."""
        cm = self._models[graph]
        token = head = 0.0
        keeps = self._keeps
        for rep, op in self.d.weighted_ops(Phase("decode", n, 1, TOKEN_PROBE_CONTEXT)):
            if op.kind not in SEQUENCE_KINDS and keeps(op):
                s = rep * sum(cm.op_split_s(op))
                if op.group == HEAD_GROUP:
                    head += s
                else:
                    token += s
        self._token[(graph, n)] = (token, head)

    def _on_token_grid(self, graph: bool, count: float, which: int) -> float:
        if count <= 0:
            return 0.0
        a, b, w = _bracket(count, TOKEN_GRID)
        t = self._token_and_head(graph, a)[which]
        return t if w == 0.0 else (1 - w) * t + w * self._token_and_head(graph, b)[which]

    def token_and_head_s(self, graph: bool, count: float) -> Tuple[float, float]:
        """(token operators, LM head) when every one of `count` tokens samples (a decode-only step)."""
        if count <= 0:
            return 0.0, 0.0
        a, b, w = _bracket(count, TOKEN_GRID)
        token, head = self._token_and_head(graph, a)
        if w == 0.0:
            return token, head
        token_b, head_b = self._token_and_head(graph, b)
        return (1 - w) * token + w * token_b, (1 - w) * head + w * head_b

    def token_s(self, graph: bool, tokens: float) -> float:
        """Token operators of a step of `tokens` tokens (linear between TOKEN_GRID counts)."""
        return self._on_token_grid(graph, tokens, 0)

    def head_s(self, graph: bool, sampled: float) -> float:
        """The LM head over `sampled` sequences (linear between TOKEN_GRID counts)."""
        return self._on_token_grid(graph, sampled, 1)

    def _sequence_ops(self, phase: Phase) -> list:
        return [(n, op) for n, op in self.d.weighted_ops(phase) if op.kind in SEQUENCE_KINDS]

    def _decode_attention_at(self, graph: bool, batch: int, context: int, q_len: int = 1) -> float:
        key = (graph, batch, context) if q_len == 1 else (graph, batch, context, q_len)
        got = self._decode_attention.get(key)
        if got is None:
            ops_key = context if q_len == 1 else (context, q_len)
            ops = self._decode_ops.get(ops_key)
            if ops is None:  # one sequence's operators; a batch's work is `batch` times theirs
                ops = self._decode_ops[ops_key] = self._sequence_ops(Phase("decode", 1, q_len, max(context, q_len)))
            cm = self._models[graph]
            got = self._decode_attention[key] = sum(n * sum(cm.op_split_s(op.scaled(batch) if batch != 1 else op))
                                                    for n, op in ops)
        return got

    def decode_attention_s(self, graph: bool, decoders: float, mean_context: float, q_len: int = 1) -> float:
        """Sequence operators of `decoders` decode sequences at a mean context of `mean_context`, each
        with `q_len` new tokens (1; more when a speculative step verifies drafted tokens)."""
        if decoders <= 0:
            return 0.0
        a, b, w = _bracket(mean_context)
        lo = int(decoders)
        frac = decoders - lo

        def at(batch: int) -> float:
            if batch == 0:
                return 0.0
            t = self._decode_attention_at(graph, batch, a, q_len)
            return t if w == 0.0 else (1 - w) * t + w * self._decode_attention_at(graph, batch, b, q_len)

        return at(lo) if frac == 0 else (1 - frac) * at(lo) + frac * at(lo + 1)

    def _prefill_attention_at(self, graph: bool, length: int) -> np.ndarray:
        """[sequence operator] seconds of work (no launch floor) of one prompt of `length` tokens from an
        empty cache, kept; the operators' counts go to `_sequence_repeats`."""
        key = (graph, length)
        got = self._prefill_attention.get(key)
        if got is None:
            weighted = self._sequence_ops(Phase("prefill", 1, length, length))
            cm = self._work_models[graph]
            got = self._prefill_attention[key] = np.array([sum(cm.op_split_s(op)) for _, op in weighted])
            repeats = np.array([n for n, _ in weighted], dtype=float)
            kept = self._sequence_repeats.setdefault(graph, repeats)
            if kept.shape != repeats.shape or (kept != repeats).any():
                raise LLMAnalysisError(f"{self.d.model.name}: the sequence operators of a {length}-token "
                                       "prefill differ from another length's; a step's prompts cannot be summed")
        return got

    def _prefill_work(self, graph: bool, length: float) -> np.ndarray:
        a, b, w = _bracket(length)
        t = self._prefill_attention_at(graph, a)
        return t if w == 0.0 else (1 - w) * t + w * self._prefill_attention_at(graph, b)

    def _launched_s(self, graph: bool, work: np.ndarray) -> float:
        """Sequence operators of summed `work` [operator], each one kernel: its work, never below the launch
        floor, times its count; an operator without work launches nothing."""
        floor = self._floor_s[graph]
        launched = np.where(work > 0, np.maximum(work, floor), 0.0) if floor else work
        return float(launched @ self._sequence_repeats[graph])

    def _prefill_form_at(self, graph: bool, length: int) -> float:
        key = (graph, length)
        got = self._prefill_form.get(key)
        if got is None:
            cm = self._models[graph]
            ops = self.d.weighted_ops(Phase("prefill", 1, length, length))
            keeps = self._keeps
            prefill = sum(n * sum(cm.op_split_s(op)) for n, op in ops
                          if op.kind not in SEQUENCE_KINDS and op.group != HEAD_GROUP and keeps(op))
            got = self._prefill_form[key] = prefill - self._token_and_head(graph, length)[0]
        return got

    def prefill_form_s(self, graph: bool, q: float) -> float:
        """What q prefill tokens cost in the token operators beyond q decode tokens: 0 where the two
        phases run the same operators (multi-head latent attention does not: prefill up-projects the
        cached latent, decode absorbs the up-projection into the query and output)."""
        if self._forms_agree is None:
            probes = [(self._prefill_form_at(True, n), self._token_and_head(True, n)[0]) for n in (64, 1000)]
            self._forms_agree = all(abs(diff) <= 1e-9 * tok for diff, tok in probes)
        if self._forms_agree or q <= 0:
            return 0.0
        a, b, w = _bracket(q)
        t = self._prefill_form_at(graph, a)
        return t if w == 0.0 else (1 - w) * t + w * self._prefill_form_at(graph, b)

    def chunk_attention_work(self, graph: bool, q: float, past: float) -> np.ndarray:
        """[sequence operator] seconds of work of a prefill chunk of q tokens after `past` tokens already in
        the cache (its kernels' floors: `chunks_attention_s`)."""
        work = self._prefill_work(graph, past + q)
        return work - self._prefill_work(graph, past) if past > 0 else work

    def chunks_attention_s(self, graph: bool, chunks) -> float:
        """The sequence operators of a step's prefill `chunks` (entries as `copies` reads them): each
        operator one kernel over every chunk, its work summed, its launch floor once."""
        work, last, per = 0.0, None, None
        for c in chunks:
            # a batch of alike prompts repeats one chunk object ([c] * b, serving/disaggregated.py): looked up once
            if c is not last:
                last, per = c, self.chunk_attention_work(graph, c[0], c[1])
            work = work + per * copies(c)
        return self._launched_s(graph, work) if chunks else 0.0


class StepTimer:
    """Seconds of one engine step: the cost-model pieces (`StepCosts`) of its batch, in CUDA graphs
    or not as the engine runs it, the engine's time per layer beyond those pieces, and its host
    overheads."""

    tokens_per_step = 1.0  # output tokens a decoder gains per engine step (speculative decoding: more)
    budget_tokens_per_decoder = 1.0  # tokens of the step's budget (max_num_batched_tokens) a decoder takes

    def __init__(self, costs: StepCosts, engine, layers: int):
        """`layers`: the transformer layers the step runs (a pipeline stage's, or the whole model's)."""
        self.costs, self.engine, self.layers = costs, engine, layers

    def step_s(self, decoders: float, decode_context_sum: float, chunks: Sequence[Tuple[float, float]] = (),
               sampled: float = None) -> float:
        """One step: `decoders` decode tokens whose contexts sum to `decode_context_sum`, and prefill
        `chunks` of (q tokens, past tokens[, copies]) (chunk_totals); `sampled` sequences run the LM head
        (default: the decoders and one per chunk)."""
        prefill_tokens, sequences = chunk_totals(chunks)
        tokens = decoders + prefill_tokens
        if tokens <= 0:
            return 0.0
        graph = self.engine.uses_graphs(tokens, bool(chunks))
        if sampled is None:
            sampled = decoders + sequences
        costs = self.costs
        if sampled == tokens:  # every token samples: one lookup for both
            token, head = costs.token_and_head_s(graph, tokens)
            t = token + head
        else:
            t = costs.token_s(graph, tokens) + costs.head_s(graph, sampled)
        if decoders > 0:
            t += costs.decode_attention_s(graph, decoders, decode_context_sum / decoders)
        if chunks:
            # (the prefill form's token operators run over every prompt's tokens at once, one GEMM: the step's
            # prefill tokens together, not a sum per prompt; per prompt, a launch-bound difference at one token,
            # -68 us for DeepSeek-V2-Lite, made steps of many one-token prompts negative)
            t += costs.chunks_attention_s(graph, chunks) + costs.prefill_form_s(graph, prefill_tokens)
        t += self.engine.step_overhead_per_layer_s * self.layers
        return self.engine.step_with_host_s(t, decoders + sequences)


def copies(chunk) -> int:
    """How many alike chunks a step's chunk entry stands for: (q tokens, past tokens) is one, (q, past, n) n
    (many prompts of one length packed into a step: one entry, not one each)."""
    return chunk[2] if len(chunk) > 2 else 1


def chunk_totals(chunks) -> Tuple[float, float]:
    """(prefill tokens, sequences) of a step's `chunks` (entries as `copies` reads them)."""
    tokens = sequences = 0.0
    for c in chunks:
        n = copies(c)
        tokens += c[0] * n
        sequences += n
    return tokens, sequences


def step_timer(analysis, describer, engine) -> StepTimer:
    """The replica's StepTimer; its cost pieces are kept with the describer per cost model, so a
    later call (any engine with the same MoE kernels, any workload) reuses every piece already worked out."""
    key = ("serving_step_costs", analysis.kernel_launch, engine.moe_kernels, engine.framework)
    return StepTimer(describer.cost_kept(analysis.cost_model, key,
                                         lambda: StepCosts(analysis, describer, moe_kernels=engine.moe_kernels,
                                                           allreduce_engine=engine.framework)),
                     engine, layers_run(describer))


def layers_run(describer, stage: Optional[int] = None) -> int:
    """The transformer layers one step runs: the model's, or pipeline stage `stage`'s."""
    groups = describer.layer_groups if stage is None else describer.stage_groups[stage]
    return sum(groups.values())


__all__ = ["SEQUENCE_KINDS", "StepCosts", "StepTimer", "chunk_totals", "copies", "layers_run", "step_timer"]
