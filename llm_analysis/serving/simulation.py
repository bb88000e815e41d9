"""A seeded discrete-event simulation of one replica on the steady state's step model
(serving/step_time.py), request by request, for tails (p50 / p90 / p99) and open-loop queueing.

The engine loop:
- arrivals (the API latency after the send, uniform over +-50% of the profile's) join the queue at the
  next step boundary, or the one after when the scheduler plans a step ahead (`scheduling_lookahead`:
  vLLM's async scheduling, SGLang's and TensorRT-LLM's overlap schedulers);
- waiting requests are admitted first come, first served while fewer than max_num_seqs run and the KV
  pool holds their prompt and 16 tokens of growth per decoder (reserving engines: prompt and output;
  SGLang: prompt and clipped output beside a share of the running requests' clipped remaining output);
- a step decodes a token per decoder and, within the budget left, prefills chunks of admitted prompts
  (mixed engines), or runs prompts in a prefill-only step whenever any wait (SGLang); the step of a
  prompt's last chunk produces its first token;
- when the caches fill the pool, the most recently admitted request is preempted and later prefilled
  again, prompt and produced tokens (vLLM's recompute; SGLang retracts alike).
Between events a stretch of decode-only steps is taken at once: step time grows linearly with context, so
the stretch is a trapezoid and an arrival's step the root of a quadratic. KV blocks count as tokens plus
half a block per request. Closed loop: clients start spread over `spread_s` (serve(): E2E less the slot
wait, so the queue reaches its steady length within the warm-up: docs/serving.md), each sending its next
request when the last completes; open loop: Poisson. The first tenth (at least every client's first) warms
up and is not measured.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

from llm_analysis.errors import ConfigError

API_JITTER = 0.5  # the API latency of a request is uniform over (1 +- API_JITTER) x the mean
# tokens of growth per decoding request an admission leaves room for: a block of vLLM's default size
# (SGLang, with one-token pages, reserves a share of each running request's remaining output instead)
GROWTH_HEADROOM_TOKENS = 16


class _Request:
    __slots__ = ("index", "input", "output", "cached", "sent_s", "arrive_s", "first_s", "done_s", "prefill_left",
                 "past", "generated", "finish_tick", "join_tick", "client", "reserved", "far")

    def __init__(self, index, input_len, output_len, cached, sent_s, arrive_s, client):
        self.index, self.input, self.output, self.cached = index, input_len, output_len, cached
        self.sent_s, self.arrive_s, self.client = sent_s, arrive_s, client
        self.first_s = self.done_s = None
        self.generated = 0  # output tokens produced so far
        self.prefill_left = input_len - cached  # tokens still to prefill
        self.past = cached  # tokens in the KV cache before the next prefill chunk (or at joining the decoders)
        self.finish_tick = self.join_tick = -1  # -1: not decoding
        self.reserved = 0  # KV tokens reserved on admission (engines that reserve whole requests)
        self.far = False  # a decoder with more than the clip still to produce (_Replica._remaining_sum)


@dataclass
class SimulationResult:
    ttft_s: np.ndarray
    tpot_s: np.ndarray  # of requests with more than one output token
    e2e_s: np.ndarray
    output_tokens: np.ndarray
    duration_s: float  # from the first measured send to the last measured completion
    kv_occupancy: float  # time-averaged share of the pool's tokens in use (over the measured window)
    preemptions: int
    # time-averaged requests admitted and not finished (idle time counts as 0), over the measured window: from
    # the first measured request's send to the last request's send (_Replica._account)
    mean_running: float


class _Replica:
    """The engine's state and loop (one replica)."""

    def __init__(self, timer, engine, pool, rng, api_latency_s: float):
        self.timer, self.engine = timer, engine
        self.rng, self.api = rng, api_latency_s
        self.block = engine.block_size
        self.reserves = engine.admission == "full_request"
        self.estimates = engine.admission == "output_estimate"
        self.capacity_tokens = pool.capacity_tokens
        # the state a request holds whatever its length (mixer layers; sliding-window layers' blocks), in tokens of
        # the pool: charged on admission, released with the request
        self.state_tokens = pool.state_tokens_per_request
        self.now = 0.0
        self.arrivals: list = []  # heap of (arrive_s, index, request)
        self.waiting: deque = deque()
        # by request index, in admission order (the last is preempted first): dicts, so that a request
        # leaves in O(1) wherever it stands (an overloaded replica runs thousands and preempts often)
        self.running: Dict[int, _Request] = {}
        self.prefilling: Dict[int, _Request] = {}
        # SGLang's admission asks at every admitted request for the running requests' remaining outputs, each
        # up to the clip (_remaining_sum): summed afresh over thousands of running requests each time, a million
        # clients took minutes. They are kept as requests come and go instead, in whole tokens (the same sums):
        # the prefilling requests' (whole, and clipped); the decoders' as those still beyond the clip (`far`,
        # each counting the clip, in a heap by the tick at which they come within it) and those within it (their
        # finish ticks summed: remaining = finish tick - ticks)
        self.clip = engine.output_reserve_clip_tokens
        self.prefilling_output_left = self.prefilling_clipped_left = 0
        self.far_decoders = self.near_decoders = self.near_finish_sum = 0
        self.far_heap: list = []  # (tick at which it comes within the clip, index, request)
        self.finishing: list = []  # heap of (finish_tick, index, request) of the decoders
        self.decoders = 0
        self.ctx_sum = 0.0  # the decoders' contexts at their next step
        self.finish_sum = 0  # the decoders' finish ticks, summed (their remaining outputs in O(1))
        self.outputs_unclipped = False  # set when no output exceeds the engine's clip (SGLang's estimate)
        self.ticks = 0  # steps in which the decoders advanced
        self.kv_tokens = 0.0
        self.preemptions = 0
        self.completed: List[_Request] = []
        # the time averages (KV in use, running requests) over the window the latencies are measured on:
        # from the first measured request's send to the last request's send (`window_s`; the end is set when
        # the closed loop's last request is sent). The warm-up's ramp and the drain after the last send lie
        # outside it: over the whole run they put the open loop's mean running requests 5-11% below Little's
        # law on the measured latencies (rate x (E2E - API latency)). The whole run's averages stay beside
        # them for a window of no length (a single measured request).
        self.window_s = [math.inf, math.inf]
        self.kv_area = self.running_area = self.area_time = 0.0
        self.whole_kv_area = self.whole_running_area = self.whole_time = 0.0
        self.last_step_s = 0.0  # the step just run (0 after idling): the next one was planned as it began

    # ----------------------------------------------------------- requests
    def api_s(self) -> float:
        if self.api <= 0:
            return 0.0
        return self.api * (1.0 + API_JITTER * (2.0 * self.rng.random() - 1.0))

    def send(self, index: int, input_len: int, output_len: int, sent_s: float, client: int) -> None:
        cached = (int(self.engine.prefix_cache_share * input_len) // self.block) * self.block
        r = _Request(index, input_len, output_len, min(cached, input_len - 1), sent_s, sent_s + self.api_s(), client)
        heapq.heappush(self.arrivals, (r.arrive_s, index, r))

    def _in_use(self, extra_requests: int = 0) -> float:
        """KV tokens in use as blocks hold them: tokens plus half a block per request (its last block's mean fill)."""
        return self.kv_tokens + 0.5 * self.block * (len(self.running) + extra_requests)

    def _fits(self, r: _Request) -> bool:
        if len(self.running) >= self.engine.max_num_seqs:
            return False
        if self.reserves:
            return self.kv_tokens + self._reservation(r) + self.state_tokens <= self.capacity_tokens
        if self.estimates:  # SGLang: a share of the running requests' remaining output stays free
            e = self.engine
            clip = e.output_reserve_clip_tokens
            kept = e.output_reserve_share * self._remaining_sum(clip)
            return self._in_use(1) + self.state_tokens + r.prefill_left + r.past + min(r.output - r.generated, clip) \
                + kept <= self.capacity_tokens
        # room for the prompt, and for the growth of every decoder over the next steps (else they would
        # preempt at once what was just admitted)
        headroom = self.decoders * max(self.block, GROWTH_HEADROOM_TOKENS)
        return self._in_use(1) + self.state_tokens + r.prefill_left + r.past + headroom <= self.capacity_tokens

    def _remaining_sum(self, clip: int) -> int:
        """The running requests' remaining outputs, each counted up to `clip` (the engine's: self.clip), from the
        sums kept as requests come and go (__init__): a decoder's remaining output is its finish tick less the
        ticks; one beyond the clip counts the clip until it comes within it."""
        if not self.outputs_unclipped:
            heap = self.far_heap
            while heap and heap[0][0] <= self.ticks:  # decoders come within the clip
                _, _, r = heapq.heappop(heap)
                if r.far and r.finish_tick - self.clip <= self.ticks:  # (else a stale entry)
                    r.far = False
                    self.far_decoders -= 1
                    self.near_decoders += 1
                    self.near_finish_sum += r.finish_tick
            return (self.far_decoders * clip + self.near_finish_sum - self.near_decoders * self.ticks
                    + self.prefilling_clipped_left)
        return self.finish_sum - self.decoders * self.ticks + self.prefilling_output_left

    def _reservation(self, r: _Request) -> int:
        return math.ceil((r.input + r.output) / self.block) * self.block

    def admit(self) -> None:
        arrivals, waiting = self.arrivals, self.waiting
        # a scheduler one step ahead planned the next step when the last one began: later arrivals wait
        planned_s = self.now - self.last_step_s if self.engine.scheduling_lookahead and self.running else self.now
        while arrivals and arrivals[0][0] <= planned_s:
            waiting.append(heapq.heappop(arrivals)[2])
        while waiting and self._fits(waiting[0]):
            r = waiting.popleft()
            if self.reserves:
                r.reserved = self._reservation(r)
                self.kv_tokens += r.reserved + self.state_tokens
            else:
                self.kv_tokens += r.past + self.state_tokens  # its cached prefix
            self.running[r.index] = r
            self._enter_prefill(r)

    def _held(self, r: _Request) -> float:
        """KV tokens `r` holds now (its state's included)."""
        if self.reserves:
            return r.reserved + self.state_tokens
        return r.past + (self.ticks - r.join_tick if r.finish_tick >= 0 else 0) + self.state_tokens

    def _enter_prefill(self, r: _Request) -> None:
        self.prefilling[r.index] = r
        left = r.output - r.generated  # (constant while it prefills)
        self.prefilling_output_left += left
        self.prefilling_clipped_left += min(left, self.clip)

    def _leave_prefill(self, r: _Request) -> None:
        del self.prefilling[r.index]
        left = r.output - r.generated
        self.prefilling_output_left -= left
        self.prefilling_clipped_left -= min(left, self.clip)

    def _join_decoders(self, r: _Request) -> None:
        r.join_tick = self.ticks
        r.finish_tick = self.ticks + (r.output - r.generated)
        self.finish_sum += r.finish_tick
        self.decoders += 1
        self.ctx_sum += r.past + 1  # its next step attends to the cache and the token it feeds back
        heapq.heappush(self.finishing, (r.finish_tick, r.index, r))
        if self.estimates:
            if r.finish_tick - self.ticks > self.clip:
                r.far = True
                self.far_decoders += 1
                heapq.heappush(self.far_heap, (r.finish_tick - self.clip, r.index, r))
            else:
                self.near_decoders += 1
                self.near_finish_sum += r.finish_tick

    def _leave_decoders(self, r: _Request) -> None:
        self.finish_sum -= r.finish_tick
        self.decoders -= 1
        self.ctx_sum -= r.past + 1 + (self.ticks - r.join_tick)
        if self.estimates:
            if r.far:
                r.far = False  # (its heap entry goes stale)
                self.far_decoders -= 1
            else:
                self.near_decoders -= 1
                self.near_finish_sum -= r.finish_tick

    def _release(self, r: _Request) -> None:
        self.kv_tokens -= self._held(r)
        del self.running[r.index]

    def _finish(self, r: _Request, on_done) -> None:
        r.done_s = self.now
        self._release(r)
        r.finish_tick = -1
        self.completed.append(r)
        on_done(r)

    def preempt(self) -> None:
        """Free the most recently admitted request; it is prefilled again (prompt and the tokens it
        produced) when there is room: vLLM's recompute."""
        r = next(reversed(self.running.values()))
        if r.finish_tick >= 0:  # a decoder (its heap entry goes stale: finish_tick no longer matches)
            r.generated += self.ticks - r.join_tick
            self._leave_decoders(r)
        else:
            self._leave_prefill(r)
        self._release(r)
        r.finish_tick = -1
        r.past = r.cached
        r.prefill_left = r.input + r.generated - r.cached
        self.waiting.appendleft(r)
        self.preemptions += 1

    def over_full(self) -> bool:
        return (not self.reserves and self.decoders > 0 and len(self.running) > 1
                and self._in_use() + self.decoders > self.capacity_tokens)

    def _complete_finished(self, on_done) -> None:
        fin = self.finishing
        while fin and fin[0][0] <= self.ticks:
            tick, _, r = heapq.heappop(fin)
            if r.finish_tick != tick:  # preempted since: a stale entry
                continue
            self._leave_decoders(r)
            r.generated = r.output
            self._finish(r, on_done)

    # -------------------------------------------------------------- steps
    def chunks(self, free_budget: int):
        """[(request, tokens)] of this step's prefill chunks within `free_budget` tokens (at least
        one chunk when any prompt waits and the budget is not spent by decoders alone)."""
        chunks = []
        chunked = self.engine.chunked_prefill
        for r in self.prefilling.values():
            if free_budget <= 0:
                break
            q = r.prefill_left
            if q > free_budget:
                if chunked:
                    q = free_budget
                elif chunks:  # a whole prompt that does not fit waits for the next step
                    break
            chunks.append((r, q))
            free_budget -= q
        return chunks

    def _account(self, start_s: float, end_s: float, kv_mean: float, running: int) -> None:
        """Time averages' areas of the stretch [start_s, end_s], in which `running` requests ran and `kv_mean`
        KV tokens were in use on average: its part within the measured window, and the whole of it."""
        duration = end_s - start_s
        self.whole_kv_area += kv_mean * duration
        self.whole_running_area += running * duration
        self.whole_time += duration
        inside = min(end_s, self.window_s[1]) - max(start_s, self.window_s[0])
        if inside > 0:
            self.kv_area += kv_mean * inside
            self.running_area += running * inside
            self.area_time += inside

    def averages(self):
        """(mean KV tokens in use, mean running requests) over the measured window, or the whole run where the
        window has no length."""
        if self.area_time > 0:
            return self.kv_area / self.area_time, self.running_area / self.area_time
        time = self.whole_time or 1.0
        return self.whole_kv_area / time, self.whole_running_area / time

    def prefill_step(self, chunks, on_done) -> None:
        """One step with prefill chunks and, in a mixed engine, every decoder's next token."""
        d = self.decoders if self.engine.mixed_batches else 0
        last_chunks = sum(1 for r, q in chunks if q == r.prefill_left)
        t = self.timer.step_s(d, self.ctx_sum if d else 0.0, [(q, r.past) for r, q in chunks], sampled=d + last_chunks)
        kv_before, running = self.kv_tokens, len(self.running)  # (a one-token request finishes in its step)
        self.now += t
        self.last_step_s = t
        if d:
            self.ticks += 1
            self.ctx_sum += d
            if not self.reserves:
                self.kv_tokens += d
        for r, q in chunks:
            r.prefill_left -= q
            r.past += q
            if not self.reserves:
                self.kv_tokens += q
            if r.prefill_left == 0:
                self._leave_prefill(r)
                if r.first_s is None:
                    r.first_s = self.now
                r.generated += 1  # the prompt's last position samples a token
                if r.generated >= r.output:
                    r.generated = r.output
                    self._finish(r, on_done)
                else:
                    self._join_decoders(r)
        self._account(self.now - t, self.now, 0.5 * (kv_before + self.kv_tokens), running)
        if d:
            self._complete_finished(on_done)

    def decode_stretch(self, on_done, arrival_interrupts: bool) -> None:
        """Decode-only steps up to the next event: a completion, an arrival that can be admitted, a
        full pool."""
        fin, d = self.finishing, self.decoders
        while fin and fin[0][2].finish_tick != fin[0][0]:
            heapq.heappop(fin)  # stale entries of preempted requests
        k = max(1, fin[0][0] - self.ticks) if fin else 1
        if not self.reserves:
            room = self.capacity_tokens - self._in_use()
            k = max(1, min(k, int(room // d)))
        t0 = self.timer.step_s(d, self.ctx_sum)
        interrupts = arrival_interrupts and self.arrivals  # (a scheduler one step ahead admits it a step later)
        if interrupts and self.arrivals[0][0] - self.now <= t0:
            k = 1  # the arrival lands in the first step (steps only lengthen): no slope to work out
        slope = (self.timer.step_s(d, self.ctx_sum + (k - 1) * d) - t0) / (k - 1) if k > 1 else 0.0
        if interrupts and k > 1:
            k = min(k, _steps_to_cover(self.arrivals[0][0] - self.now, t0, slope))
        duration = k * t0 + slope * k * (k - 1) / 2
        kv_before = self.kv_tokens
        self.now += duration
        self.last_step_s = t0 + slope * (k - 1)
        self.ticks += k
        self.ctx_sum += d * k
        if not self.reserves:
            self.kv_tokens += d * k
        self._account(self.now - duration, self.now, 0.5 * (kv_before + self.kv_tokens), len(self.running))
        self._complete_finished(on_done)


def _steps_to_cover(gap: float, t0: float, slope: float) -> int:
    """The least k with k t0 + slope k (k - 1) / 2 >= gap (steps until the one in which `gap` ends)."""
    if gap <= 0:
        return 1
    if abs(slope) < 1e-15 * max(t0, 1e-30):
        return max(1, math.ceil(gap / t0))
    a, b = slope / 2, t0 - slope / 2
    disc = b * b + 4 * a * gap
    k = (-b + math.sqrt(max(disc, 0.0))) / (2 * a) if disc >= 0 else gap / t0
    return max(1, math.ceil(k - 1e-9))


# engine steps (a decode stretch counts one) and preemptions one simulation may take, ~2-10 us apiece: a million
# requests of an open loop take ~4 x 10^6 (~40 s). Requests whose KV pool holds few of them at once can evict each
# other hundreds of times each (DeepSeek-R1, 131,072 clients a replica, 60,000-token requests: 10^8 preemptions,
# many minutes), which no check of the arguments foresees: the simulation stops here instead
MAX_SIMULATED_EVENTS = 5 * 10**6


def _too_long(rep: "_Replica", total: int, num_requests: int, warmup: int, concurrency: Optional[int]) -> None:
    """The ConfigError of a simulation past MAX_SIMULATED_EVENTS, naming what makes it shorter."""
    # (a ConfigError of the arguments: what they ask for takes too long, as MAX_NUM_REQUESTS bounds it)
    remedies = [] if warmup >= num_requests else ["fewer num_requests"]  # (a warm-up of the clients: fewer clients)
    if concurrency is not None:
        remedies += [f"fewer clients (concurrency; {concurrency} on this replica, each warmed up)",
                     "num_requests=0 for the closed form's means alone"]
    raise ConfigError(
        f"num_requests = {num_requests}: the simulation of a replica's {total} requests ({warmup} of them warm-up) "
        f"took {MAX_SIMULATED_EVENTS} engine steps and preemptions without finishing ({len(rep.completed)} done, "
        f"{rep.preemptions} preemptions: a KV pool of {rep.capacity_tokens} tokens holds few of these requests at "
        f"once), beyond what serve() simulates in seconds; valid: {', or '.join(remedies)}")


def simulate(timer, engine, pool, lengths, *, concurrency: Optional[int] = None, request_rate: Optional[float] = None,
             num_requests: int, seed: int, api_latency_s: float, spread_s: float = 0.0,
             warmup: Optional[int] = None) -> SimulationResult:
    """Simulate one replica under `concurrency` closed-loop clients or Poisson arrivals at
    `request_rate` per second; `num_requests` measured after the warm-up."""
    rng = np.random.default_rng(seed)
    if warmup is None:  # a tenth of the run, and every closed-loop client's first request
        warmup = max(num_requests // 10, concurrency or 0)
    total = num_requests + warmup
    inputs, outputs = lengths.draw(rng, total)
    inputs, outputs = inputs.tolist(), outputs.tolist()
    rep = _Replica(timer, engine, pool, rng, api_latency_s)
    rep.outputs_unclipped = max(outputs, default=0) <= engine.output_reserve_clip_tokens
    sent = [0]

    def window_at(index: int, sent_s: float) -> None:
        # the measured window: from the first measured request's send to the last request's
        if index == warmup:
            rep.window_s[0] = sent_s
        if index == total - 1:
            rep.window_s[1] = sent_s

    if concurrency is not None:
        starts = np.sort(rng.uniform(0.0, spread_s, concurrency)) if spread_s > 0 else np.zeros(concurrency)
        for c in range(min(concurrency, total)):
            rep.send(sent[0], inputs[sent[0]], outputs[sent[0]], float(starts[c]), c)
            window_at(sent[0], float(starts[c]))
            sent[0] += 1

        def on_done(r):
            if sent[0] < total:
                rep.send(sent[0], inputs[sent[0]], outputs[sent[0]], rep.now, r.client)
                window_at(sent[0], rep.now)
                sent[0] += 1
    else:
        gaps = rng.exponential(1.0 / request_rate, total)
        times = np.cumsum(gaps) - gaps[0]
        for i in range(total):
            rep.send(i, inputs[i], outputs[i], float(times[i]), -1)
            window_at(i, float(times[i]))
        sent[0] = total

        def on_done(r):
            return None

    mixed, budget, max_seqs = engine.mixed_batches, engine.token_budget, engine.max_num_seqs
    loops = 0
    while len(rep.completed) < total:
        loops += 1
        if loops + rep.preemptions > MAX_SIMULATED_EVENTS:
            _too_long(rep, total, num_requests, warmup, concurrency)
        rep.admit()
        if not rep.running:
            if not rep.arrivals:
                break
            # idle until the next arrival: nothing runs and no KV is held, and the time counts in the
            # averages (mean running requests and KV occupancy are averages over time, as Little's law
            # takes them, not over the steps alone)
            idle_s = max(0.0, rep.arrivals[0][0] - rep.now)
            rep._account(rep.now, rep.now + idle_s, rep._in_use(), 0)
            rep.now += idle_s
            rep.last_step_s = 0.0
            continue
        while rep.over_full():
            rep.preempt()
        if mixed:
            free = budget - rep.decoders
            chunks = rep.chunks(free) if rep.prefilling and free > 0 else []
            if not chunks and not rep.decoders:  # prompts alone, the budget not yet spent
                chunks = rep.chunks(budget)
        else:  # prefill-only steps whenever a prompt waits
            chunks = rep.chunks(budget) if rep.prefilling else []
        if chunks:
            rep.prefill_step(chunks, on_done)
        else:
            rep.decode_stretch(on_done, len(rep.running) < max_seqs)
    measured = [r for r in rep.completed if r.index >= warmup]
    ttft = np.array([r.first_s - r.sent_s for r in measured])
    e2e = np.array([r.done_s - r.sent_s for r in measured])
    tpot = np.array([(r.done_s - r.first_s) / (r.output - 1) for r in measured if r.output > 1])
    out = np.array([r.output for r in measured])
    first_sent = min((r.sent_s for r in measured), default=0.0)
    last_done = max((r.done_s for r in measured), default=0.0)
    kv_mean, running_mean = rep.averages()
    return SimulationResult(ttft, tpot, e2e, out, last_done - first_sent,
                            kv_mean / max(rep.capacity_tokens, 1), rep.preemptions, running_mean)


__all__ = ["SimulationResult", "simulate"]
