"""The KV-cache pool, sized as the engines size it on each GPU of a replica: vLLM's
gpu_memory_utilization x the GPU's memory holds weights, the profiling run's activation peak (a forward of
max_num_batched_tokens), the sampler's logits for max_num_seqs, CUDA graphs and buffers, the KV cache the
rest; SGLang's mem_fraction_static holds the weights and the KV pool; TensorRT-LLM's
free_gpu_memory_fraction is of the memory left after weights, buffers and activations. A request holds
ceil(tokens / block_size) blocks on every GPU (its share of the heads, or MLA's whole latent).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Optional

from llm_analysis.errors import ConfigError
from llm_analysis.inference.memory import memory_terms, released_format_tip
from llm_analysis.units import GB

LOGITS_BYTES = 4  # the sampler's logits are float32 in every engine


@dataclass(frozen=True)
class KVPool:
    memory_bytes: float  # the GPU's
    weight_bytes: float
    workspace_bytes: float  # activations, logits, CUDA graphs, runtime buffers
    pool_bytes: float
    bytes_per_token: float  # per GPU (a windowed pool's: the full-attention layers' groups, sliding_window_terms)
    bytes_per_request: float  # state a request holds whatever its length (mixer layers, window blocks), per GPU
    block_size: int
    # how its sliding-window layers hold tokens (sliding_window_terms): "none" (the model has none beside full
    # attention layers, or the rules do not describe its cache), "full" (as every other layer: the engine's policy),
    # "window_groups" or "window_pool" (the pool's tokens are then those of the full-attention layers)
    sliding_window_cache: str = "none"
    # a windowed pool's real cache per request, which a disaggregated transfer moves (no padded group, no share
    # of the window pool): the full-attention layers' bytes per token and the sliding layers', these for at most
    # `window_tokens` tokens; None: bytes_per_token x tokens + bytes_per_request
    full_layer_bytes_per_token: Optional[float] = None
    window_layer_bytes_per_token: float = 0.0
    window_tokens: int = 0

    def request_cache_bytes(self, tokens: float) -> float:
        """The bytes of a request's cache at `tokens` tokens on one GPU, as a transfer moves them."""
        if self.full_layer_bytes_per_token is None:
            return self.bytes_per_token * tokens + self.bytes_per_request
        return self.full_layer_bytes_per_token * tokens + self.window_layer_bytes_per_token * min(tokens,
                                                                                                  self.window_tokens)

    @property
    def num_blocks(self) -> int:
        return int(self.pool_bytes // (self.bytes_per_token * self.block_size)) if self.bytes_per_token else 10**12

    @property
    def capacity_tokens(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def state_tokens_per_request(self) -> float:
        """A request's length-independent state (bytes_per_request) in tokens of the pool."""
        return self.bytes_per_request / self.bytes_per_token if self.bytes_per_token else 0.0

    def blocks_for(self, tokens: float) -> int:
        return math.ceil(tokens / self.block_size)

    def bytes_for(self, tokens: float) -> float:
        """The pool bytes a request of `tokens` tokens holds: its blocks and its fixed state."""
        return self.blocks_for(tokens) * self.block_size * self.bytes_per_token + self.bytes_per_request

    def requests_that_fit(self, tokens_per_request: float) -> int:
        """How many requests of `tokens_per_request` tokens the pool holds at once (their fixed state too)."""
        per = self.bytes_for(tokens_per_request)
        return int(self.pool_bytes // per) if per > 0 else 10**12


def kv_pool(analysis, d, engine, longest_request_tokens: int, weight_bytes: Optional[float] = None,
            extra_bytes_per_token: float = 0.0, extra_weight_bytes: float = 0.0, layout_text: Optional[str] = None,
            longest_text: str = "input_len + output_len") -> KVPool:
    """The pool of one GPU of a replica under `engine` (EngineSettings); ConfigError when the
    weights leave no pool or the longest request cannot fit it even alone. `weight_bytes`: the
    GPU's weights when they differ from the analysis' (worker layouts, serving/layout.py);
    `extra_weight_bytes` / `extra_bytes_per_token`: a speculative draft's weights and KV cache
    (serving/speculative.py). `layout_text`: the worker's layout as a refusal names it (default: its tp).
    `longest_text`: what `longest_request_tokens` counts, as a refusal names it (a prefill pool's: the prompt)."""
    gpu = analysis.gpu_config
    where = layout_text or f"tp={analysis.parallelism_config.tp_size}"
    mem = gpu.memory_bytes
    weights = (analysis.get_weight_memory_per_gpu() if weight_bytes is None else weight_bytes) + extra_weight_bytes
    kv_bytes = engine.kv_cache_bytes
    windowed = sliding_window_terms(analysis, d, engine, longest_request_tokens)
    if windowed is None:  # every layer holds every token
        one_token = analysis.get_memory_kv_cache_per_gpu(1, 1, kv_bytes)
        per_token = analysis.get_memory_kv_cache_per_gpu(1, 2, kv_bytes) - one_token
        per_request = max(0.0, one_token - per_token)  # state a request holds whatever its length (mixer layers)
    else:
        per_token, per_request = windowed.bytes_per_token, windowed.bytes_per_request
    per_token += extra_bytes_per_token
    activations = memory_terms(analysis, d, 1, engine.token_budget, engine.token_budget, False,
                               kv_bytes)["prefill_activation"]
    logits = engine.max_num_seqs * analysis.model_config.vocab_size * LOGITS_BYTES
    share = engine.memory_share
    if engine.memory_share_of == "total":
        workspace = activations + logits + engine.graph_pool_bytes + engine.runtime_reserved_bytes
        pool = share * mem - weights - workspace
    elif engine.memory_share_of == "static":
        workspace = (1 - share) * mem  # activations and graphs live outside the static share
        pool = share * mem - weights
    else:  # "free": a share of what the weights and the runtime leave
        workspace = activations + logits + engine.graph_pool_bytes + engine.runtime_reserved_bytes
        pool = share * (mem - weights - workspace)
    held_as = engine.sliding_window_cache if windowed is not None else (
        "full" if engine.sliding_window_cache == "full" and _sliding_beside_full(analysis, d) else "none")
    transfer = {} if windowed is None else dict(
        full_layer_bytes_per_token=windowed.full_layer_bytes_per_token + extra_bytes_per_token,
        window_layer_bytes_per_token=windowed.window_layer_bytes_per_token,
        window_tokens=analysis.model_config.sliding_window)
    result = KVPool(mem, weights, workspace, max(pool, 0.0), per_token, per_request, engine.block_size, held_as,
                    **transfer)
    fits = result.requests_that_fit(longest_request_tokens) >= 1
    others = workspace - activations - logits  # CUDA graphs and runtime buffers: no option of the engine's sizes them
    if not fits and least_memory_share(engine.memory_share_of, mem, weights, workspace, 0.0) > 1.0 \
            and weights + others < mem and engine.memory_share_of != "static":
        # the weights and the fixed buffers fit the GPU; the part of the workspace the engine's options size
        # leaves them no room (max_num_seqs = 2^20 kept 640 GB of logits on a 141 GB GPU, and the refusal blamed
        # 17 GB of weights; DeepSeek-R1's 100.7 GB of weights fit an H200 beside max_num_seqs = 4,096's 5.3 GB
        # workspace, not beside 100,000's 55 GB)
        helps = ", or more GPUs (tp_size) or fewer weight bits (dtype_name)" if workspace < mem else ""
        raise ConfigError(
            f"{analysis.model_config.name} does not fit {gpu.name} ({where}) under "
            f"{engine.framework}: the engine's workspace, {workspace / GB:.2f} GB per GPU (the activations of a step "
            f"of max_num_batched_tokens = {engine.token_budget} tokens, {activations / GB:.2f} GB; the sampler's "
            f"logits for max_num_seqs = {engine.max_num_seqs} sequences, {logits / GB:.2f} GB; CUDA graphs and "
            f"runtime buffers, {others / GB:.2f} GB), and its weights, {weights / GB:.2f} GB, exceed the GPU's "
            f"{mem / GB:.2f} GB before any KV cache; valid: a smaller max_num_batched_tokens or max_num_seqs (a "
            f"disaggregated pool's batch_size){helps}")
    if not fits and least_memory_share(engine.memory_share_of, mem, weights, workspace, 0.0) > 1.0:
        # no share of the GPU holds even an empty pool: the weights are the problem, not the KV cache
        raise ConfigError(
            f"{analysis.model_config.name} does not fit {gpu.name} ({where}) under "
            f"{engine.framework}: its weights, {weights / GB:.2f} GB per GPU, and the engine's workspace, "
            f"{workspace / GB:.2f} GB, exceed the GPU's {mem / GB:.2f} GB before any KV cache; valid: more GPUs "
            f"(tp_size{', or the experts over moe_ep_size' if analysis.model_config.is_moe else ''}) or fewer "
            f"weight bits (dtype_name){_released(analysis)}")
    if not fits and per_token > 0 and longest_request_tokens * per_token + per_request <= result.pool_bytes:
        # the request's tokens fit the pool, its blocks do not: block_size = 2^20 rounded 110 tokens up to 137 GB,
        # and the refusal suggested memory shares and KV dtypes that could not help
        blocks = result.blocks_for(longest_request_tokens)
        most = int((result.pool_bytes - per_request) // per_token)  # one block of that many tokens still fits
        raise ConfigError(
            f"block_size = {engine.block_size}: the longest request, {longest_request_tokens} tokens, holds {blocks} "
            f"block(s) of {engine.block_size} tokens, {result.bytes_for(longest_request_tokens) / GB:.2f} GB per GPU, "
            f"more than the {result.pool_bytes / GB:.2f} GB KV pool of {analysis.model_config.name} on {gpu.name} "
            f"(tp={analysis.parallelism_config.tp_size}) under {engine.framework}; valid: block_size <= {most}")
    if not fits:
        least = least_memory_share(engine.memory_share_of, mem, weights, workspace,
                                   result.bytes_for(longest_request_tokens))
        # (rounded up: the share a refusal states as valid must be enough)
        share_hint = (f"gpu_memory_utilization >= {math.ceil(least * 1000) / 1000:.3f}" if least <= 1.0 else
                      "no gpu_memory_utilization does (even 1.0 leaves too little)")
        refuses = (f"; {engine.framework} itself refuses to start here ('Not enough memory', its static share "
                   f"{share * mem / GB:.2f} GB holds less than the weights)" if engine.memory_share_of == "static"
                   and share * mem < weights else "")
        shorter = f"at most {result.capacity_tokens} tokens per request, " if result.capacity_tokens > 0 else ""
        # an 8-bit cache already holds one byte an element: naming kv_cache_dtype='fp8' sent users after a change
        # that could not help (Llama-3.1-70B fp8 on one H100 under vLLM, whose cache is fp8 by default)
        cheaper = ", fewer weight bits or kv_cache_dtype='fp8'" if kv_bytes > 1 else " or fewer weight bits"
        raise ConfigError(
            f"{longest_text} = {longest_request_tokens} tokens cannot fit the KV pool even alone: "
            f"{analysis.model_config.name} on {gpu.name} ({where}) under "
            f"{engine.framework} with gpu_memory_utilization = {share:g} keeps {max(pool, 0) / GB:.2f} GB per GPU for "
            f"the KV cache (weights {weights / GB:.2f} GB, workspace {workspace / GB:.2f} GB, {per_token:.0f} bytes "
            f"per token){refuses}; valid: {shorter}{share_hint}, or more "
            f"GPUs (tp_size){cheaper}")
    return result


def _released(analysis) -> str:
    """`released_format_tip` as a refusal's last clause ('' when the weights are held as released)."""
    tip = released_format_tip(analysis)
    return f"; {tip}" if tip else ""


def _cached_layers(d, groups):
    """(full-attention, sliding-window) layers of a stage that cache keys and values, each as (layers, bytes per
    token of one layer on one GPU)."""
    full, sliding = [], []
    for kind, n in groups.items():
        per_layer = d.kv_cache_elems_per_token_per_gpu(kind) * d.kv_bytes
        if per_layer:
            (sliding if kind.attention == "sliding_attention" else full).append((n, per_layer))
    return full, sliding


def _sliding_beside_full(analysis, d) -> bool:
    """Whether the model caches sliding-window layers beside full-attention ones (what the engines' window
    rules are about)."""
    return bool(analysis.model_config.sliding_window) and any(
        all(_cached_layers(d, groups)) for groups in d.stage_groups)


class WindowTerms(NamedTuple):
    """A windowed pool's terms on one GPU (`sliding_window_terms`)."""

    bytes_per_token: float  # what a token of the pool costs
    bytes_per_request: float  # what a request holds whatever its length (window blocks)
    full_layer_bytes_per_token: float  # the real cache: the full-attention layers' bytes per token
    window_layer_bytes_per_token: float  # and the sliding layers', for at most the window's tokens


def sliding_window_terms(analysis, d, engine, longest_request_tokens: int) -> Optional[WindowTerms]:
    """The terms (`WindowTerms`) of one GPU's pool for a model with both sliding-window and full-attention
    layers, as the engine caches them (`engine.sliding_window_cache`, the profiles' sources):

    - "window_groups" (vLLM's hybrid manager): layers form groups of g of one type, g the fewest layers of a
      type (the most, when below 1.5 x the fewest), each type padded to whole groups of pages as large as the
      largest layer's. A full group holds every token; a sliding group the blocks covering its last window - 1
      tokens and the current one, counted here per request at the longest request's length (a shorter request
      holds fewer: the pool is understated for it, not overstated).
    - "window_pool" (SGLang): the full layers' tokens plus window_pool_ratio x as many in the sliding layers'
      pool, from one budget: a token of the full pool costs full bytes + ratio x sliding bytes. A request of L
      tokens holds L of the full pool and min(L, window) of the sliding one, so n requests fit while n L and
      n min(L, window) / ratio fit the full pool's tokens: the tighter of the two, read at the longest request
      (requests shorter than window / ratio are bound by the sliding pool: under Gemma 4's 1,024-token
      window, requests of 640 tokens fill it first).

    None where every layer holds every token: the engine's policy "full", a model without both kinds, or one
    whose cache holds more than attention (mixer state, cross-attention) or is split over context parallelism,
    which these rules do not describe (the layers are then counted as full: the pool understated, not
    overstated)."""
    policy, model = engine.sliding_window_cache, analysis.model_config
    if policy == "full" or not model.sliding_window or analysis.parallelism_config.cp_size != 1:
        return None
    bs = engine.block_size
    worst = None
    for groups in d.stage_groups:
        if d.mixer_state_bytes_per_seq_per_gpu(groups) or d.cross_kv_cache_bytes_per_gpu(1, sum(groups.values())):
            return None
        full, sliding = _cached_layers(d, groups)
        if not full or not sliding:
            return None
        n_full, n_sliding = sum(n for n, _ in full), sum(n for n, _ in sliding)
        real = (sum(n * b for n, b in full), sum(n * b for n, b in sliding))
        if policy == "window_groups":
            page = max(b for _, b in full + sliding)
            group = min(n_full, n_sliding)
            if max(n_full, n_sliding) < 1.5 * group:
                group = max(n_full, n_sliding)
            window_blocks = math.ceil((model.sliding_window - 1) / bs) + 1
            held = min(window_blocks, math.ceil(longest_request_tokens / bs)) * bs
            terms = WindowTerms(math.ceil(n_full / group) * group * page,
                                math.ceil(n_sliding / group) * group * page * held, *real)
        else:  # "window_pool"
            ratio = engine.window_pool_ratio
            per_full_token = sum(n * b for n, b in full) + ratio * sum(n * b for n, b in sliding)
            # the sliding pool binds when a request's window share exceeds ratio x its length
            tighter = max(1.0, min(longest_request_tokens, model.sliding_window) / (ratio * longest_request_tokens))
            terms = WindowTerms(per_full_token * tighter, 0.0, *real)
        if worst is None or terms[0] * longest_request_tokens + terms[1] > worst[0] * longest_request_tokens + worst[1]:
            worst = terms
    return worst


def least_memory_share(share_of: str, memory_bytes: float, weight_bytes: float, workspace_bytes: float,
                       pool_bytes_needed: float) -> float:
    """The least memory share (gpu_memory_utilization) whose pool holds `pool_bytes_needed` bytes, as each
    engine sizes its pool (inf when no share does): 'total' (vLLM): share x memory - weights - workspace;
    'static' (SGLang): share x memory - weights (the workspace lives outside the share); 'free'
    (TensorRT-LLM): share x (memory - weights - workspace)."""
    if share_of == "total":
        return (weight_bytes + workspace_bytes + pool_bytes_needed) / memory_bytes
    if share_of == "static":
        return (weight_bytes + pool_bytes_needed) / memory_bytes
    free = memory_bytes - weight_bytes - workspace_bytes
    return pool_bytes_needed / free if free > 0 else math.inf


__all__ = ["KVPool", "WindowTerms", "kv_pool", "least_memory_share", "sliding_window_terms"]
