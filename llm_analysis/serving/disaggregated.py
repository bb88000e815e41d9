"""Disaggregated serving: a prefill pool and a decode pool of workers, the KV cache moved between them.

`serve(..., disaggregated={"prefill": {"workers": Wp, "parallelism": ParallelismConfig(...), "batch_size":
Bp}, "decode": {...}})`: each pool's workers have their own layout (serving/layout.py) and engine.
`batch_size` is per attention rank: prefill, the prompts one batch takes when that many wait (at least the
whole prompts the token budget holds: _prefill_batch); decode, the requests a rank decodes at once (default
max_num_seqs); both bounded by the rank's KV pool. "kv_transfer_GB_per_s" sets the transfer's per-GPU
bandwidth (default: the link the pools share).

In steady state with X requests per second:
- prefill pool (Rp ranks): a batch of b prompts takes s_b; served at batches of b, the ranks are an M/D/1
  queue of service s_b / b at rho_b = X s_b / (b Rp): wait w_b = rho_b s_b / (2 (1 - rho_b)) (unbounded at
  rho_b >= 1); in a closed loop at least prefill_contention (fitted on the disaggregated rows) of the other
  clients' batches, at most all of them, (C / Rp - 1) s_b / b. Assumption: the engine takes every waiting
  prompt within its token budget each step, so its batch grows with its queue, and it serves in effect at the
  batch size of least mean wait + service, b* = argmin over b = 1 .. B of w_b + s_b (B: _prefill_batch, in a
  closed loop at most C / Rp; ties to the smaller). Each w_b + s_b grows with X and w_b diverges before batch
  b stops carrying the load, so their least is non-decreasing and continuous in X: more load never shortens
  TTFT, and the batch moves up without a jump. (Before, the batch was the least b whose rate carried
  the load, X < Rp b / s_b, at its own rho_b: just below each threshold rho_b -> 1 and the wait blew up, then
  fell as the load rose past it: DeepSeek-R1 on an H200 tp-8 prefill worker, 2,048-token prompts: 15.4 s TTFT
  at 10.2 requests/s, 0.53 s at 10.3.) It is an approximation of a bulk-service queue (Bailey 1954's
  M/D^(1..B)/1 with a batch-dependent service time has no closed form): it takes the best fixed batch,
  where a real scheduler mixes batch sizes as its queue moves;
- KV transfer: each prefill GPU sends its share of the prompt's cache point to point over the link both
  pools share (NVLink within one NVLink domain, else InfiniBand: cost/links.py);
- TTFT = API latency + queue wait + s_b + transfer (the prefill emits the first token);
- decode pool (Rd ranks): D = X (O - 1) TPOT / Rd decoders a rank (Little's law) at the mean context: TPOT;
- closed loop: C = X (TTFT + (O - 1) TPOT), solved for X below the pools' capacity (Rp b / s_b; Rd full
  decode ranks); extra clients wait before their prefill. Open loop: at or above capacity, no latency.
Tails: the prefill wait spread exponentially around its mean; TPOT the same for every request.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from llm_analysis.config import ParallelismConfig
from llm_analysis.cost.links import collective_time_s, link_for_group
from llm_analysis.errors import ConfigError
from llm_analysis.inference.memory import widened_checkpoint_note
from llm_analysis.schema.options import MAX_BANDWIDTH_GB_PER_S, MAX_BATCH_SIZE, MAX_PARALLEL_SIZE, integer, number
from llm_analysis.serving.answer import LATENCIES, PERCENTILES, accuracy_note, unbounded_latencies
from llm_analysis.serving.layout import check_imbalance_applies, column_split_note, expert_spread_note
from llm_analysis.serving.rank import Replica, build_rank
from llm_analysis.serving.steady_state import capacity, prefill_chunks
from llm_analysis.units import GB

POOLS = ("prefill", "decode")
POOL_KEYS = ("workers", "parallelism", "batch_size")
_TOP_KEYS = POOLS + ("kv_transfer_GB_per_s", "prefill_contention")
_BISECTIONS = 100
_FIXED_POINT_STEPS = 60


@dataclass(frozen=True)
class Pool:
    """One pool: its workers, one rank's model, the rank count and the batch bound."""

    name: str
    workers: int
    rank: Replica
    layout: Any
    batch_size: Optional[int]

    @property
    def ranks(self) -> int:
        return self.workers * self.layout.attention_dp

    @property
    def gpus(self) -> int:
        return self.workers * self.layout.gpus_per_worker


def _positive_int(value, field: str, hi: int = MAX_BATCH_SIZE, why: str = "") -> int:
    """A whole number in [1, hi] (numpy's integers too), the message in the pools' words."""
    try:
        return integer(value, field, 1, hi)
    except ConfigError:
        raise ConfigError(f"{field} = {value!r} must be a whole number in [1, {hi}]{why}") from None


def _pool_spec(disaggregated: Dict[str, Any], name: str) -> Tuple[int, ParallelismConfig, Optional[int]]:
    where = f"disaggregated['{name}']"
    spec = disaggregated.get(name)
    if not isinstance(spec, dict):
        raise ConfigError(f"{where} = {spec!r} must be a dict: {{'workers': n >= 1, 'parallelism': "
                          "ParallelismConfig(...), 'batch_size': n (optional)}")
    unknown = [k for k in spec if k not in POOL_KEYS]
    if unknown:
        raise ConfigError(f"{where}[{unknown[0]!r}] is not known; valid: {', '.join(POOL_KEYS)}")
    if "workers" not in spec:
        raise ConfigError(f"{where}['workers'] is missing: the pool's worker count, >= 1")
    # (at most the sanity limit of GPUs, MAX_PARALLEL_SIZE: 10^400 workers overflowed the GPU count's float)
    workers = _positive_int(spec["workers"], f"{where}['workers']", MAX_PARALLEL_SIZE,
                            " (a pool with no workers serves nothing)")
    par = spec.get("parallelism", ParallelismConfig())
    if isinstance(par, dict):
        # the schema's error names the field, this the pool it is in ({1: 2} was a TypeError of ** before)
        if not all(isinstance(k, str) for k in par):
            raise ConfigError(f"{where}['parallelism'] = {par!r} must be a ParallelismConfig or a dict of its fields "
                              f"by name; valid fields: {', '.join(ParallelismConfig.model_fields)}")
        try:
            par = ParallelismConfig(**par)
        except ConfigError as err:
            raise ConfigError(f"{where}['parallelism']: {err}") from None
    if not isinstance(par, ParallelismConfig):
        raise ConfigError(f"{where}['parallelism'] = {par!r} must be a ParallelismConfig (or a dict of its fields)")
    if par.dp_size != 1:
        raise ConfigError(f"{where}['parallelism'].dp_size = {par.dp_size}: a pool's worker count is "
                          f"{where}['workers']; valid: dp_size = 1")
    batch = spec.get("batch_size")
    if batch is not None:
        batch = _positive_int(batch, f"{where}['batch_size']")
    return workers, par, batch


def _pools(a, framework: str, disaggregated, options, lengths, imbalance, speculative) -> Tuple[Pool, Pool]:
    if not isinstance(disaggregated, dict):
        raise ConfigError(f"disaggregated = {disaggregated!r} must be a dict with 'prefill' and 'decode' pools")
    unknown = [k for k in disaggregated if k not in _TOP_KEYS]
    if unknown:
        raise ConfigError(f"disaggregated[{unknown[0]!r}] is not known; valid: {', '.join(_TOP_KEYS)}")
    out = []
    for name in POOLS:
        workers, par, batch = _pool_spec(disaggregated, name)
        opts = dict(options)
        if name == "decode" and batch is not None:
            opts["max_num_seqs"] = batch
        # a prefill rank holds a prompt's cache until it is sent; a decode rank the whole request's
        longest = lengths.max_input if name == "prefill" else lengths.max_total
        longest_text = "input_len (the prompt a prefill rank holds)" if name == "prefill" else None
        # a decode pool sized for a stated batch captures its CUDA graphs up to it (TensorRT-LLM's disaggregated
        # configs set cuda_graph_config.max_batch_size = max_batch_size; SGLang --cuda-graph-max-bs likewise)
        graphs = batch if name == "decode" else None
        where = f"disaggregated['{name}']"
        try:
            rank, layout = build_rank(a, par, framework, opts, lengths, imbalance,
                                      speculative if name == "decode" else None, where=f"{where} ",
                                      longest_tokens=longest, graph_batch=graphs, longest_text=longest_text)
        except ConfigError as err:
            text = str(err)
            if name == "decode" and batch is not None:
                # the pool's batch_size is its engine's max_num_seqs (whatever max_num_seqs says): name it
                text = text.replace(f"max_num_seqs = {batch}", f"max_num_seqs = {batch} ({where}['batch_size'])")
            if text == str(err) and text.startswith(where):
                raise
            # a pool's layout (default: one GPU) is not the analysis' own: an error of its analysis or KV pool
            # ("tp_size = 3 must divide n_head", "does not fit (tp=1)") says which pool it is about
            raise ConfigError(text if text.startswith(where) else f"{where}: {text}") from None
        out.append(Pool(name, workers, rank, layout, batch))
    return out[0], out[1]


def _prefill_batch(pool: Pool) -> int:
    """Prompts one prefill batch takes when that many wait: the whole prompts the token budget holds (at least
    one), or batch_size when larger, within max_num_seqs. batch_size does not cap the batch below the budget:
    the engines take every waiting prompt within max_num_batched_tokens, and the measured runs need it
    (serving_dev.csv's prefill batch_size 1 for Kimi-K2.5 on GB200, one 4-GPU vLLM prefill worker, 1,024
    clients: 44 requests/s of 1,024-token prompts, 23 ms a prompt, about one step's read of the FP4 weights)."""
    r = pool.rank
    by_budget = max(1, int(r.engine.token_budget // max(r.shape.prefill, 1.0)))
    wanted = by_budget if pool.batch_size is None else max(pool.batch_size, by_budget)
    return max(1, min(r.engine.max_num_seqs, wanted))


def _prefill_batch_s(pool: Pool, batch: int) -> float:
    """The prefill-only steps of `batch` prompts taken together."""
    r = pool.rank
    return sum(r.timer.step_s(0.0, 0.0, [c] * batch) for c in prefill_chunks(r.engine, r.shape, 0.0))


# prompt-steps the prefill batches' timing may take: batches of b = 1 .. B prompts, P x B (B + 1) / 2 for P steps
# a prompt (~0.2 us apiece): max_num_seqs = 65,536 took minutes; the engines' defaults stay at B <= 4096
MAX_PREFILL_BATCH_TIMINGS = 5 * 10**7


def _default(option: str, options: Dict[str, Any]) -> str:
    """", the engine's default" for an option the caller did not give."""
    return "" if options.get(option) is not None else ", the engine's default"


def _check_batch_timings(pool: Pool, largest: int, concurrency: Optional[int], options: Dict[str, Any]) -> None:
    """A ConfigError when timing the prefill batches up to `largest` prompts passes MAX_PREFILL_BATCH_TIMINGS."""
    r = pool.rank
    steps = len(prefill_chunks(r.engine, r.shape, 0.0))
    work = steps * largest * (largest + 1) // 2
    if work <= MAX_PREFILL_BATCH_TIMINGS:
        return
    most = int(((8 * MAX_PREFILL_BATCH_TIMINGS / steps + 1) ** 0.5 - 1) / 2)  # B (B + 1) / 2 <= limit / P
    while steps * most * (most + 1) // 2 > MAX_PREFILL_BATCH_TIMINGS:  # (the square root's rounding)
        most -= 1
    # what sets the batch (_prefill_batch, and a closed loop's clients per rank): name that, not an option not given
    if concurrency is not None and concurrency // pool.ranks == largest:
        why = f"concurrency = {concurrency} clients over {pool.ranks} prefill rank(s)"
    elif largest == r.engine.max_num_seqs:
        why = f"max_num_seqs = {r.engine.max_num_seqs}{_default('max_num_seqs', options)}"
    elif pool.batch_size == largest:
        why = f"disaggregated['prefill']['batch_size'] = {pool.batch_size}"
    else:
        why = (f"as many prompts as max_num_batched_tokens = {r.engine.token_budget}"
               f"{_default('max_num_batched_tokens', options)} holds")
    raise ConfigError(
        f"disaggregated['prefill']: batches of up to {largest} prompts ({why}) of {steps} prefill step(s) each take "
        f"{work} prompt-steps to time, beyond the {MAX_PREFILL_BATCH_TIMINGS} serve() works out in seconds; valid: "
        f"batches of at most {most} prompts (a smaller max_num_seqs or disaggregated['prefill']['batch_size'], "
        f"fewer clients) or fewer prefill steps a prompt (a larger max_num_batched_tokens)")


@dataclass(frozen=True)
class KVTransfer:
    """One prompt's KV cache on its way to the decode pool: the most one GPU sends or receives, over what, how
    long."""

    bytes_per_gpu: float
    link: str  # cost/links.py's link name (nvlink, pcie, inter_node, ...), or "stated": kv_transfer_GB_per_s
    seconds: float


def kv_transfer(a, prefill: Pool, decode: Pool, bytes_per_s: Optional[float]) -> KVTransfer:
    """One prompt's KV cache from its prefill rank to the decode pool: each prefill GPU sends its share and each
    decode GPU receives its own, point to point over the link both pools share (or at the stated bandwidth),
    each GPU through its own link: the GPU with the most bytes sets the time (a tp-8 prefill rank sends an eighth
    per GPU, but a tp-1 decode rank receives all of the request's KV heads through one link)."""
    tokens = prefill.rank.shape.input
    nbytes = max(p.rank.pool.request_cache_bytes(tokens) for p in (prefill, decode))
    if bytes_per_s is not None:
        return KVTransfer(nbytes, "stated", 0.0 if math.isinf(bytes_per_s) else nbytes / bytes_per_s)
    gpus = prefill.gpus + decode.gpus
    link = link_for_group(a.gpu_config, 2, max(1, gpus - 1), a.intra_node_memory_efficiency,
                          a.inter_node_memory_efficiency, a.num_gpus_per_node)
    return KVTransfer(nbytes, link.name, collective_time_s("p2p", nbytes, 2, link))


@dataclass(frozen=True)
class _Decode:
    """The decode pool at a throughput: requests per rank, the step they see, its capacity."""

    decoders: float
    tpot_s: float


def _decode_at(pool: Pool, x: float, decode_steps: float) -> _Decode:
    """Decoders per rank and TPOT at X requests per second (the fixed point of Little's law)."""
    r = pool.rank
    ctx = r.shape.resident_context  # (the decoders of a step, each weighted by how long it decodes: steady_state)
    d = 1.0
    tpot = r.timer.step_s(1.0, ctx)
    for _ in range(_FIXED_POINT_STEPS):
        new = x * decode_steps * tpot / pool.ranks
        seen = max(new, 1.0)
        tpot = r.timer.step_s(seen, seen * ctx)
        if abs(new - d) <= 1e-12 * max(d, 1.0):
            d = new
            break
        d = new
    return _Decode(d, tpot)


def _decode_capacity_rps(pool: Pool, decode_steps: float) -> float:
    """Requests per second the decode pool completes with every rank full."""
    r = pool.rank
    n = capacity(r.engine, r.pool, r.shape)
    if decode_steps <= 0:
        return math.inf
    return pool.ranks * n / (decode_steps * r.timer.step_s(float(n), n * r.shape.resident_context))


def _closed_loop_rate(latencies, clients: float, decode_steps: float, highest_rps: float) -> float:
    """The X with clients = X (TTFT + (O - 1) TPOT), by bisection below `highest_rps` (itself when even there the
    deployment holds fewer clients)."""
    def excess(x: float) -> float:
        ttft, dec, _ = latencies(x)
        return x * (ttft + decode_steps * dec.tpot_s) - clients

    hi = highest_rps
    if excess(hi) <= 0:
        return hi
    lo = 0.0
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if excess(mid) > 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


# the slowest KV transfer taken, GB/s per GPU (1 MB/s): below it a prompt's transfer time leaves the float
# range (5e-324 GB/s made TTFT inf), and no link between GPUs is that slow
MIN_KV_TRANSFER_GB_PER_S = 1e-3


def _link_GB_per_s(value) -> Optional[float]:
    """disaggregated['kv_transfer_GB_per_s']: None (the shared link), inf (instantaneous), or a bandwidth in
    [MIN_KV_TRANSFER_GB_PER_S, MAX_BANDWIDTH_GB_PER_S] (numpy's numbers too)."""
    if value is None:
        return None
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and value == math.inf:
        return math.inf
    try:
        return number(value, "disaggregated['kv_transfer_GB_per_s']", MIN_KV_TRANSFER_GB_PER_S,
                      MAX_BANDWIDTH_GB_PER_S, lo_open=False)
    except ConfigError:
        raise ConfigError(f"disaggregated['kv_transfer_GB_per_s'] = {value!r} must be a bandwidth in "
                          f"[{MIN_KV_TRANSFER_GB_PER_S:g}, {MAX_BANDWIDTH_GB_PER_S:g}] GB/s per GPU (inf: "
                          "instantaneous)") from None


def _md1_wait_s(rho: float, service_s: float) -> float:
    return rho * service_s / (2.0 * (1.0 - rho)) if rho < 1 else math.inf


def serve_disaggregated(a, workload, framework: str, disaggregated, options: Dict[str, Any], imbalance,
                        speculative) -> Dict[str, Any]:
    """serve() on a prefill pool and a decode pool (module docstring); the keys of aggregated serve()."""
    prefill, decode = _pools(a, framework, disaggregated, options, workload.lengths, imbalance, speculative)
    check_imbalance_applies(imbalance, [prefill.layout, decode.layout])
    link = _link_GB_per_s(disaggregated.get("kv_transfer_GB_per_s"))
    shape, engine = decode.rank.shape, decode.rank.engine
    # default: the engine profile's prefill_contention (its JSON says how it was fitted)
    contention = disaggregated.get("prefill_contention", engine.prefill_contention)
    try:  # (numpy's numbers too: np.float32(0.5) was refused as no share)
        contention = number(contention, "disaggregated['prefill_contention']", 0.0, 1.0, lo_open=False)
    except ConfigError:
        raise ConfigError(f"disaggregated['prefill_contention'] = {contention!r} must be a share in [0, 1]") from None
    api = prefill.rank.engine.api_latency_s
    largest = _prefill_batch(prefill)
    full_batch_s = _prefill_batch_s(prefill, largest)
    # the engine takes what waits, within the largest batch; a closed loop's rank never sees more than its clients
    if workload.closed_loop:
        largest_here = max(1, min(largest, int(workload.concurrency // prefill.ranks)))
    else:
        largest_here = largest
    _check_batch_timings(prefill, largest_here, workload.concurrency, options)
    batch_times_s = [0.0] + [_prefill_batch_s(prefill, b) for b in range(1, largest_here + 1)]

    transfer = kv_transfer(a, prefill, decode, None if link is None else link * GB)
    transfer_s = transfer.seconds
    decode_steps = shape.output - 1
    prefill_cap = prefill.ranks * largest / full_batch_s
    cap = min(prefill_cap, _decode_capacity_rps(decode, decode_steps))

    def wait_s(x: float, clients: Optional[float], batch: int) -> float:
        batch_s = batch_times_s[batch]
        rho = x * batch_s / (batch * prefill.ranks)
        w = _md1_wait_s(rho, batch_s)
        if clients is not None:  # a closed loop: at most the other clients of a rank ahead
            others_batches = max(clients / prefill.ranks - 1.0, 0.0) * batch_s / batch
            w = min(max(w, contention * others_batches), others_batches)
        return w

    def batch_at(x: float, clients: Optional[float]) -> Tuple[int, float]:
        """The batch the engine serves at X requests per second, and its wait: of the batches it may take
        (1 .. largest_here), the one of least mean wait + service (module docstring). Each batch's wait + s_b
        grows with X, so their least does: TTFT never falls as the load rises, and it moves continuously
        from one batch to the next (a batch's wait grows without bound before it stops carrying the load).
        Ties go to the smaller batch; with none stable (an open loop at capacity) the largest, wait inf."""
        best_b, best_w, best_t = largest_here, math.inf, math.inf
        for b in range(1, largest_here + 1):
            w = wait_s(x, clients, b)
            t = w + batch_times_s[b]
            if t < best_t:
                best_b, best_w, best_t = b, w, t
        return best_b, best_w

    def latencies(x: float, clients: Optional[float]):
        dec = _decode_at(decode, x, decode_steps) if decode_steps > 0 else _Decode(0.0, 0.0)
        batch, w = batch_at(x, clients)
        ttft = api + w + batch_times_s[batch] + transfer_s  # a request's own prefill: its batch's steps
        return ttft, dec, w

    saturated = False
    if workload.closed_loop:
        c = float(workload.concurrency)
        x = _closed_loop_rate(lambda x: latencies(x, c), c, decode_steps,
                              min(cap, prefill.ranks * largest_here / batch_times_s[largest_here]) * (1 - 1e-9))
        ttft, dec, w = latencies(x, c)
        prefill_s = batch_times_s[batch_at(x, c)[0]]  # a request's own prefill: its batch's steps
        ttft = max(ttft, c / x - decode_steps * dec.tpot_s)  # the wait for room, when the deployment is full
        w = max(0.0, ttft - api - prefill_s - transfer_s)  # (no wait: a difference of equal sums, not -1e-17)
    else:
        x = workload.request_rate
        saturated = x >= cap
        if not saturated:
            ttft, dec, w = latencies(x, None)
    clients = float(workload.concurrency) if workload.closed_loop else None
    batch = largest_here if saturated else batch_at(x, clients)[0]
    batch_s = batch_times_s[batch]
    out: Dict[str, Any] = {
        "framework": engine.framework, "mode": "closed_loop" if workload.closed_loop else "open_loop",
        "concurrency": workload.concurrency, "request_rate": workload.request_rate,
        "input_len_mean": shape.input, "output_len_mean": shape.output,
        "num_replicas": prefill.workers + decode.workers, "gpus_per_replica": None,
        "num_gpus": prefill.gpus + decode.gpus,
    }
    if saturated:
        out.update(unbounded_latencies())
        rps, resident = cap, float(capacity(engine, decode.rank.pool, shape))
    else:
        tpot = dec.tpot_s if decode_steps > 0 else None
        out.update(ttft_s=ttft, tpot_s=tpot, e2e_s=ttft + decode_steps * (tpot or 0.0))
        out.update(_tails(ttft, w, tpot, decode_steps))
        rps, resident = x, dec.decoders
    out.update({
        "requests_per_s": rps,
        "output_tokens_per_s": rps * shape.output,
        "output_tokens_per_s_per_gpu": rps * shape.output / out["num_gpus"],
        "input_tokens_per_s": rps * shape.input,
        "saturation_request_rate_per_s": cap,
        "saturated": saturated,
        "near_saturation": False,  # (its queue is in closed form, the steady state: no run length)
        "max_running_requests_per_replica": capacity(engine, decode.rank.pool, shape) * decode.layout.attention_dp,
        "mean_running_requests_per_replica": resident * decode.layout.attention_dp,
        "kv_pool_tokens_per_replica": decode.rank.pool.capacity_tokens * decode.layout.attention_dp,
        "kv_pool_bytes_per_gpu": decode.rank.pool.pool_bytes,
        # the decode pool's GPUs, as the KV pool above; the prefill pool's weights beside them
        "weight_memory_per_gpu": decode.rank.pool.weight_bytes,
        "workspace_memory_per_gpu": decode.rank.pool.workspace_bytes,
        "gpu_memory_per_gpu": decode.rank.pool.memory_bytes,
        "prefill_weight_memory_per_gpu": prefill.rank.pool.weight_bytes,
        "kv_occupancy": decode.rank.occupancy(resident),  # (as an aggregated replica's: Replica.occupancy)
        "preemptions": 0,
        "max_num_batched_tokens": prefill.rank.engine.token_budget, "max_num_seqs": engine.max_num_seqs,
        "gpu_memory_utilization": engine.memory_share, "block_size": engine.block_size,
        "kv_cache_dtype": engine.kv_cache_dtype, "prefix_cache_share": engine.prefix_cache_share,
        "seed": engine.seed, "num_requests_simulated": 0,
        "perf_model": a.perf_model if isinstance(a.perf_model, str) else "profile",
        # one-token outputs leave the decode pool nothing to decode: it bounds no rate, and the answer says so
        # with None (as it does an unbounded queue's latencies), not inf
        **_pool_entries(prefill, decode, batch, batch_s, transfer, None if saturated else w, prefill_cap,
                        _decode_capacity_rps(decode, decode_steps) if decode_steps > 0 else None),
        "prefill_largest_batch_size": largest_here,
        "notes": _notes(prefill, decode, batch, saturated, cap, workload, imbalance, a.model_config.moe_top_k),
    })
    if decode_steps <= 0:
        out["notes"].append("every request yields one token, which its prefill emits: the decode pool decodes "
                            "nothing and bounds no rate (decode_capacity_request_rate_per_s None)")
    accuracy = accuracy_note(engine, "disaggregated") if out["perf_model"] == "calibrated" else None
    if accuracy:  # the roofline's times are lower bounds: no error band applies
        out["notes"].append(accuracy)
    if speculative is not None:
        out.update(speculative.entries())
        out["notes"].append(speculative.note())
    widened = widened_checkpoint_note(a)
    if widened:
        out["notes"].append(widened)
    return out


def _limiting_pool(prefill_cap: float, decode_cap: Optional[float]) -> str:
    """The pool whose capacity is the deployment's (the lower; "both" when equal)."""
    if decode_cap is None or prefill_cap < decode_cap:  # (None: nothing to decode, the decode pool bounds nothing)
        return "prefill"
    return "decode" if decode_cap < prefill_cap else "both"


def _pool_entries(prefill: Pool, decode: Pool, batch: int, batch_s: float, transfer: KVTransfer,
                  wait_s: Optional[float], prefill_cap: float, decode_cap: Optional[float]) -> Dict[str, Any]:
    """The pools' own figures in the answer."""
    return {"disaggregated": True,
            "prefill_workers": prefill.workers, "prefill_gpus_per_worker": prefill.layout.gpus_per_worker,
            "prefill_layout": prefill.layout.text(),
            "decode_workers": decode.workers, "decode_gpus_per_worker": decode.layout.gpus_per_worker,
            "decode_layout": decode.layout.text(),
            "prefill_batch_size": batch, "prefill_batch_s": batch_s, "kv_transfer_s": transfer.seconds,
            "kv_transfer_bytes_per_gpu": transfer.bytes_per_gpu, "kv_transfer_link": transfer.link,
            "prefill_queue_wait_s": wait_s, "prefill_capacity_request_rate_per_s": prefill_cap,
            "decode_capacity_request_rate_per_s": decode_cap,
            "limiting_pool": _limiting_pool(prefill_cap, decode_cap)}


def _tails(ttft: float, wait: float, tpot: Optional[float], decode_steps: float) -> Dict[str, Optional[float]]:
    """Percentiles: the prefill queue's wait spread exponentially around its mean; TPOT alike for all."""
    out: Dict[str, Optional[float]] = {}
    fixed = ttft - wait
    for q in PERCENTILES:
        t = fixed + wait * math.log(1.0 / (1.0 - q / 100.0))
        values = {"ttft": t, "tpot": tpot, "e2e": t + decode_steps * (tpot or 0.0)}
        for name in LATENCIES:
            out[f"{name}_p{q}_s"] = values[name]
    return out


def _notes(prefill: Pool, decode: Pool, batch: int, saturated: bool, cap: float, workload, imbalance,
           top_k: int) -> list:
    n = []
    if saturated:
        n.append(f"request_rate = {workload.request_rate:g}/s is at or above the deployment's capacity {cap:.4g}/s: "
                 "the queue grows without bound, so no latency is a number")
    for pool in (prefill, decode):
        lay = pool.layout
        n.append(f"{pool.name} pool: {pool.workers} worker(s) of tp={lay.tp} x attention_dp={lay.attention_dp} "
                 f"(experts moe_tp={lay.moe_tp} x moe_ep={lay.moe_ep}), {pool.gpus} GPUs")
        spread = expert_spread_note(lay, pool.rank.engine, imbalance, top_k, where=f"{pool.name} pool: ")
        if spread:
            n.append(spread)
        split = column_split_note(lay, where=f"{pool.name} pool: ")
        if split:
            n.append(split)
    n.append(f"disaggregated: prefill in batches of {batch} prompt(s) per rank (the batch size of least M/D/1 wait "
             "+ service at the load, the wait capped in a closed loop by the other clients of a rank), the KV cache "
             "sent point to point to the decode pool, decode steps of "
             "the mean number of decoding requests per rank (Little's law); tails spread the prefill queue's wait "
             "exponentially; no simulation")
    return n


__all__ = ["POOLS", "KVTransfer", "kv_transfer", "serve_disaggregated"]
