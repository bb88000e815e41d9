"""One rank of a serving worker (an attention replica; the worker itself when it has one): its
engine, KV pool, step timer and requests' mean shape, built from a worker layout (serving/layout.py),
for aggregated serve() (serving/run.py) and each pool of a disaggregated one
(serving/disaggregated.py)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, Optional, Tuple

import numpy as np

from llm_analysis.serving.engine import engine_settings
from llm_analysis.serving.kv_pool import kv_pool
from llm_analysis.errors import ConfigError
from llm_analysis.serving.layout import (WorkerLayout, attention_analysis, rank_step_timer, weight_bytes_per_gpu,
                                         worker_layout)
from llm_analysis.serving.simulation import simulate
from llm_analysis.serving.steady_state import RequestShape, capacity, saturation_rate


def request_shape(engine, lengths) -> RequestShape:
    """The requests' mean lengths, and the prompt tokens the prefix cache holds (whole blocks)."""
    if lengths.pairs is not None:
        inputs = lengths.pairs[:, 0].astype(float)
    else:
        inputs = np.array([lengths.input_mean])
    block = engine.block_size
    cached = np.minimum((np.floor(engine.prefix_cache_share * inputs) // block) * block, inputs - 1)
    return RequestShape(lengths.input_mean, lengths.output_mean, float(cached.mean()), *_resident_means(lengths))


def _resident_means(lengths):
    """(E[(I + O/2) O] / E[O], E[(I + O) O] / E[O]), the KV tokens a running request holds weighted by how long it
    runs; (None, None) for fixed lengths. A uniform spread: E[I] + (E[O]^2 + Var O) / (2 E[O]) and
    E[I] + E[O] + Var O / E[O], Var O = s (s + 1) / 3 for integers over mean +- s."""
    if lengths.fixed:
        return None, None
    if lengths.pairs is not None:
        i, o = lengths.pairs[:, 0].astype(float), lengths.pairs[:, 1].astype(float)
        return float(((i + o / 2) * o).mean() / o.mean()), float(((i + o) * o).mean() / o.mean())
    o, var = lengths.output_mean, lengths.output_spread * (lengths.output_spread + 1) / 3
    return lengths.input_mean + (o * o + var) / (2 * o), lengths.input_mean + o + var / o


def _longest_prompt_cached(engine, lengths) -> int:
    """The longest prompt's tokens in the prefix cache: whole blocks, at least its last token left to prefill."""
    longest = lengths.max_input
    return min((math.floor(engine.prefix_cache_share * longest) // engine.block_size) * engine.block_size,
               longest - 1)


def check_whole_prompts_fit(engine, lengths, where: str = "") -> None:
    """An engine that prefills prompts whole (TensorRT-LLM's default) rejects a prompt, less its cached blocks,
    longer than the token budget (tensorrt_llm/llmapi/llm.py _check_arguments): a ConfigError."""
    if engine.chunked_prefill:
        return
    longest, cached = lengths.max_input, _longest_prompt_cached(engine, lengths)
    if longest - cached > engine.token_budget:
        held = f" ({int(cached)} of them in the prefix cache)" if cached else ""
        raise ConfigError(f"{where}the longest prompt, {longest} tokens{held}, exceeds max_num_batched_tokens = "
                          f"{engine.token_budget}: {engine.framework} prefills a prompt whole in one step (chunked "
                          f"prefill off, its default) and rejects a longer one; valid: max_num_batched_tokens >= "
                          f"{int(longest - cached)}, or shorter prompts")


# prefill steps one prompt may take (its tokens over max_num_batched_tokens): the closed form and the simulation
# walk a prompt's chunks one by one, so a budget of 1 token against a 131,072-token prompt took minutes per call.
# A sanity limit, like those of schema/options.py: 2^13 steps still chunk the longest contexts (2^17 tokens) in
# steps of 16 tokens
MAX_PREFILL_STEPS_PER_PROMPT = 2**13


def prefill_steps_per_prompt(engine, lengths) -> int:
    """The steps the longest prompt takes to prefill, less the whole blocks its prefix cache holds: one for an
    engine that prefills a prompt whole, else one per max_num_batched_tokens tokens."""
    if not engine.chunked_prefill:
        return 1
    return max(1, math.ceil((lengths.max_input - _longest_prompt_cached(engine, lengths)) / engine.token_budget))


def check_prefill_steps(engine, lengths, where: str = "") -> None:
    """A ConfigError when the longest prompt takes more than MAX_PREFILL_STEPS_PER_PROMPT steps to prefill,
    naming the budget and the prompt."""
    steps = prefill_steps_per_prompt(engine, lengths)
    if steps > MAX_PREFILL_STEPS_PER_PROMPT:
        least = math.ceil(lengths.max_input / MAX_PREFILL_STEPS_PER_PROMPT)
        raise ConfigError(f"{where}max_num_batched_tokens = {engine.token_budget} splits the longest prompt, "
                          f"{lengths.max_input} tokens, into {steps} prefill steps, more than the "
                          f"{MAX_PREFILL_STEPS_PER_PROMPT} serve() walks through (sanity limit: each step is "
                          f"timed on its own); valid: max_num_batched_tokens >= {least}, or shorter prompts")


@dataclasses.dataclass(frozen=True)
class Replica:
    """What one replica is made of: its engine, KV pool, step model and requests' mean shape."""

    engine: Any
    pool: Any
    timer: Any
    shape: RequestShape
    lengths: Any

    @property
    def capacity(self) -> int:
        return capacity(self.engine, self.pool, self.shape)

    def saturation_rps(self, scan: bool = False) -> float:
        """Requests per second one replica completes flat out (kept: the planner asks at every load); `scan`:
        over the running counts below the slots too (`saturation_rate`: an open loop's verdict)."""
        key = ("saturation", scan, getattr(self.timer, "memo_key", None),
               dataclasses.replace(self.engine, seed=0, num_requests=0), self.shape, self.pool)
        memo = self.timer.costs.memo
        if key not in memo:
            memo[key] = saturation_rate(self.timer, self.engine, self.pool, self.shape, scan)
        return memo[key]

    def occupancy(self, resident: float) -> float:
        """The KV pool's share `resident` requests hold: their mean length as they grow (whole when reserved)."""
        held = self.shape.resident_total if self.engine.admission == "full_request" else \
            self.shape.resident_context
        return min(1.0, resident * (held + self.pool.state_tokens_per_request) / max(self.pool.capacity_tokens, 1))

    def simulate(self, **kw):
        e = self.engine
        return simulate(self.timer, e, self.pool, self.lengths, num_requests=e.num_requests,
                        api_latency_s=e.api_latency_s, **kw)


def build_rank(a, parallelism, framework: str, options: Dict[str, Any], lengths, imbalance=None, speculative=None,
               where: str = "", longest_tokens: Optional[int] = None,
               graph_batch: Optional[int] = None, longest_text: Optional[str] = None) -> Tuple[Replica, WorkerLayout]:
    """One rank of the worker layout `parallelism`: its engine, KV pool, step timer and requests' mean shape.
    `graph_batch`: decode steps up to this many sequences replay CUDA graphs (a disaggregated decode pool's batch).
    `longest_tokens` / `longest_text`: the tokens the pool must hold for one request, and what a refusal calls
    them (default: the longest prompt and output, "input_len + output_len")."""
    layout = worker_layout(a, parallelism, where)
    if imbalance is not None and layout.moe_ep > 1 and imbalance > layout.moe_ep:
        raise ConfigError(f"expert_load_imbalance = {imbalance:g} exceeds {where}moe_ep_size = {layout.moe_ep}: the "
                          f"busiest of {layout.moe_ep} expert groups holds at most all the tokens, {layout.moe_ep} "
                          f"times the mean; valid: 1 <= expert_load_imbalance <= {layout.moe_ep}")
    if layout.plain and parallelism is a.parallelism_config:
        rank = a  # the analysis' own layout: its own describer and caches
    else:  # a pool's layout, or one attention replica of the worker
        rank = attention_analysis(a, layout)
    engine = engine_settings(rank, framework, options)
    check_whole_prompts_fit(engine, lengths, where)
    check_prefill_steps(engine, lengths, where)
    if graph_batch is not None and graph_batch > engine.graph_decode_max_batch:  # graphs captured up to the batch
        engine = dataclasses.replace(engine, graph_decode_max_batch=graph_batch)
    d = rank.describer_for(engine.kv_cache_bytes)
    timer = rank_step_timer(a, rank, d, layout, engine, imbalance, where)
    extra = dict(weight_bytes=None if layout.plain else weight_bytes_per_gpu(a, layout))
    if speculative is not None:
        if layout.pp > 1:
            raise ConfigError(f"{where}pp_size = {layout.pp} with speculative decoding: a draft over pipeline stages "
                              f"is not modelled by serve(); valid: pp_size = 1 with speculative=, or no speculative=")
        timer = speculative.timer(timer, rank, engine)
        extra.update(extra_weight_bytes=speculative.draft_weight_bytes_per_gpu(rank, extra["weight_bytes"]),
                     extra_bytes_per_token=speculative.draft_kv_bytes_per_token_per_gpu(rank, engine.kv_cache_bytes))
    longest = lengths.max_total if longest_tokens is None else longest_tokens
    if longest_text is not None:
        extra.update(longest_text=longest_text)
    pool = kv_pool(rank, d, engine, longest, layout_text=layout.text(), **extra)
    shape = request_shape(engine, lengths)
    return Replica(engine, pool, timer, shape, lengths), layout




__all__ = ["MAX_PREFILL_STEPS_PER_PROMPT", "Replica", "build_rank", "check_prefill_steps",
           "prefill_steps_per_prompt", "request_shape"]
