"""The closed loop's steady state, in closed form over the step model (serving/step_time.py).

One replica, C clients, requests of mean input I (I' of it not in the prefix cache) and mean
output O. In steady state, with X requests per second completing:

- D = X (O - 1) t_d requests are decoding at any step (Little's law on the decode phase,
  t_d the mean step time a decoder sees: its time per output token);
- a decode-only step takes f0 = step(D decoders at the mean context I + O / 2), as the decoders
  see it (each with D (n - 1) / n others among the n requests in the engine);
- each request's prefill adds Delta seconds of engine time: the chunks of its I' tokens
  within the budget left by the decoders (max_num_batched_tokens - D), each costing what
  it adds to a step (mixed engines: vLLM, TensorRT-LLM) or its own prefill-only step
  (SGLang); the others' prefills (X (n - 1) / n per second) stretch a request's decode steps:
  t_d = f0 / (1 - X Delta (n - 1) / n);
- eliminating X: X = D / ((O - 1) f0 + D Delta (n - 1) / n) for a given D;
- time to first token = API latency + the wait for the step in progress (when other requests
  are running: its mean residual, half a decode step plus what the others' longer prefill-carrying
  steps add by being more often the one in progress; _in_progress) + the steps the scheduler had
  planned when it arrived (engine.scheduling_lookahead mean steps, the TPOT each: an engine that plans
  step n + 1 as step n begins) + the steps that prefill it (+ the wait for a free slot
  when C exceeds what the engine runs at once, N = min(max_num_seqs, requests the KV pool
  holds at their mean length I + O / 2, or I + O when the engine reserves whole requests));
- the starting burst: a closed-loop benchmark (vllm bench serve --max-concurrency, genai-perf
  --concurrency, aiconfigurator's sweeps) starts its C clients together, so its first round of
  requests queues behind each other's prefills: the j-th of the burst gets its first token
  after the passes that prefill the j before it (full token budgets of prompts, or one prompt
  per pass where a prompt fills the budget). Its mean over a run of R requests per client
  (benchmark_rounds, fitted per engine: the run length of the measurements, and the bunching
  that outlives the first round, since clients with equal lengths keep returning together)
  adds (burst TTFT - steady TTFT) / R to the mean TTFT; benchmark_rounds = 0 leaves the
  steady state alone (a long run, or clients that never start together);
- prompts share steps: when they arrive faster than a step with a prompt runs (X x its wall > 1: short
  requests, many clients), the engine packs the ones that wait into each step (within the budget the
  decoders leave), so each adds (step of b - decode step) / b, b = X x the step (_Balance._shared), the step
  of b being the mean over steps whose prompts vary as Poisson arrivals do, b on average (prompts_spread);
  a prompt longer than the budget is prefilled over its own steps, one at a time; an engine that runs
  prompts in prefill-only steps before the decodes (SGLang) gives its decoders what a Markov chain of
  step types leaves them (_Balance._prefill_first);
- the token budget bounds the decoders of an engine that mixes them with prompts: each step holds k budget
  tokens per decoder and the prompt tokens that keep them coming, so D <= B / (k + q L / (O - 1)) (k and L,
  the budget tokens and output tokens a decoder takes a step: 1 and 1 but for speculative decoding); with more
  clients the prompts queue for room in the steps (decoders_the_budget_holds);
- the loop closes with Little's law: C = X x (time to first token + (O - 1) t_d), solved for
  D by bisection (the left side grows with D).

Requests of one output token (embeddings, scoring: a prefill-only workload) have no decode phase: the
engine runs prefill-only steps of as many waiting prompts as its token budget holds (_prefill_only).

The saturation rate (open loop) is X with the engine full: D found for N requests resident
and no API latency outside the engine.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

_BISECTIONS = 48
_SHARING_TOL = 1e-10  # prompts a step shares, and the rate that goes with them (the closed loop solves to 1e-12)
_SPREAD_TAIL = 1e-9  # the Poisson terms of a step's prompts left out beyond the mean (their mass goes to the cap)
_SPREAD_MEAN_TOL = 1e-9  # a step's mean prompts kept to this share (far below the sharing root's tolerance)
_REL_TOL = 1e-12


def _increasing_root(f, lo: float, hi: float, rel_tol: float = _REL_TOL, f_lo: float = None,
                     f_hi: float = None) -> float:
    """The x in [lo, hi] where the increasing f crosses 0 (f(lo) < 0 <= f(hi)): regula falsi with
    the Illinois step (a dozen evaluations), bisecting where f is infinite; to `rel_tol` of x. `f_lo`
    and `f_hi`: f at the ends where the caller has it already."""
    f_lo = f(lo) if f_lo is None else f_lo
    f_hi = f(hi) if f_hi is None else f_hi
    if f_hi <= 0:
        return hi
    side = 0
    for _ in range(_BISECTIONS):
        if math.isinf(f_hi) or math.isinf(f_lo) or f_hi == f_lo:  # (no secant to take: bisect)
            x = 0.5 * (lo + hi)
        else:
            x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        fx = f(x)
        if fx == 0 or hi - lo <= rel_tol * max(hi, 1.0):
            return x
        if fx > 0:
            hi, f_hi = x, fx
            if side == 1 and not math.isinf(f_lo):
                f_lo *= 0.5
            side = 1
        else:
            lo, f_lo = x, fx
            if side == -1 and not math.isinf(f_hi):
                f_hi *= 0.5
            side = -1
        if abs(fx) <= rel_tol * max(abs(f_lo), abs(f_hi), 1.0) * 1e-3:
            return x
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class RequestShape:
    """Mean lengths of a replica's requests, in tokens."""

    input: float
    output: float
    cached: float  # prompt tokens found in the prefix cache
    # the KV tokens a request resident in the engine holds on average: mean over the running requests, each
    # weighted by how long it runs (its output): E[(I + O/2) O] / E[O] while it grows, E[(I + O) O] / E[O] when the
    # engine reserves its whole length (`capacity`); None: fixed lengths, the mean shape's. Long requests hold more
    # for longer, so a spread of lengths fits fewer in the pool than its mean shape does: pairs of 512 + 128 and
    # 2,048 + 1,024 tokens hold 1.5x the mean shape's, and the saturation rate from the mean shape had been 1.6-2x
    # what the simulation of the same requests completes (an open loop at 0.6 of it grew its queue without bound)
    resident_context_mean: Optional[float] = None
    resident_total_mean: Optional[float] = None

    @property
    def prefill(self) -> float:
        return max(1.0, self.input - self.cached)

    @property
    def mean_context(self) -> float:
        """A decoder's mean context over its decode steps (I + 1 .. I + O - 1)."""
        return self.input + self.output / 2

    @property
    def resident_context(self) -> float:
        """The KV tokens a running request holds on average while it grows (see resident_context_mean)."""
        return self.mean_context if self.resident_context_mean is None else self.resident_context_mean

    @property
    def resident_total(self) -> float:
        """The KV tokens a running request reserves on average when reserved whole (see resident_total_mean)."""
        return self.input + self.output if self.resident_total_mean is None else self.resident_total_mean


@dataclass(frozen=True)
class SteadyState:
    throughput_rps: float  # requests per second of the replica
    decoders: float  # mean decode tokens per step
    decode_step_s: float  # f0
    tpot_s: float
    ttft_s: float
    e2e_s: float
    queue_wait_s: float  # waiting for a free slot (C > N)
    burst_s: float  # the starting burst's share of the mean TTFT (closed-loop benchmarks: benchmark_rounds)
    prefill_s: float  # the engine's prefill of one request (its steps)
    resident: float  # requests in the engine


def prefill_chunks(engine, shape: RequestShape, decoders: float) -> List[Tuple[float, float]]:
    """(tokens, past tokens) of each chunk of a request's prefill with `decoders` decode tokens in
    its steps (mixed engines) or none (prefill-only steps)."""
    budget = engine.token_budget - (decoders if engine.mixed_batches else 0.0)
    budget = max(budget, 1.0)
    left, past = shape.prefill, shape.cached
    if not engine.chunked_prefill or left <= budget:
        return [(left, past)]
    chunks = []
    while left > 0:
        q = min(left, budget)
        chunks.append((q, past))
        left -= q
        past += q
    return chunks


def clipped_remaining_output(output: float, clip: float) -> float:
    """The mean over a decoder's progress of min(its remaining output, clip): with u the share already
    produced (uniform over the decode), E[min(O (1 - u), c)] = O / 2 when O <= c, else c - c^2 / (2 O)."""
    if output <= clip:
        return output / 2
    return clip - clip * clip / (2 * output)


def capacity(engine, pool, shape: RequestShape) -> int:
    """Requests the engine runs at once: max_num_seqs, and what the KV pool holds (at their mean
    length while they grow, or their whole length when the engine reserves it on admission, or, for
    an engine that admits against an estimate of the output still to come, SGLang, see
    _estimate_admits)."""
    if engine.admission == "output_estimate":
        fits = _estimate_admits(engine, pool, shape)
    else:
        held = shape.resident_total if engine.admission == "full_request" else shape.resident_context
        fits = pool.requests_that_fit(held)
    return max(1, min(engine.max_num_seqs, fits))


def _estimate_admits(engine, pool, shape: RequestShape) -> int:
    """Requests an SGLang-style admission keeps running: a waiting request is admitted when the pool,
    less `output_reserve_share` of each running request's remaining output (clipped at
    `output_reserve_clip_tokens`), holds its prompt and its clipped output. With n requests running at
    evenly spread progress, each holds its mean context I + O / 2 and keeps s x E[min(remaining, c)]
    free, so the n-th is admitted while (n - 1) x (I + O / 2 + s E) + I + min(O, c) fits the pool."""
    clip = engine.output_reserve_clip_tokens
    running = shape.resident_context + engine.output_reserve_share * clipped_remaining_output(shape.output, clip)
    newcomer = shape.input + min(shape.output, clip)
    per_running, per_new = pool.bytes_for(running), pool.bytes_for(newcomer)
    if per_new > pool.pool_bytes:
        return 0
    return 1 + int((pool.pool_bytes - per_new) // per_running) if per_running > 0 else 10**12


class _Balance:
    """The quantities of the steady state at D mean decoders among `resident` requests in the engine.

    A request sees the others, not itself: while it decodes, its step holds itself and D (n - 1) / n
    other decoders on average (each of the n - 1 others decodes a share D / n of the time); while it
    prefills, only those others."""

    def __init__(self, timer, engine, shape: RequestShape, resident: float):
        self.timer, self.engine, self.shape, self.resident = timer, engine, shape, resident
        self.prefill_step_of = _steps_of(timer, shape)  # prefill-only steps: the same at every load
        self.sharing_root = None  # the prompts a step shares at the closed loop's last trial (_sharing_bracket)
        self.sharing_slope = None  # and carried_less's slope near it, from the probes that bracketed it

    def at(self, decoders: float):
        """(f0, Delta, the request's own prefill time, X, TPOT, the mean wait of a request arriving while
        others run: the step in progress and the steps already planned) at `decoders` mean decoders."""
        t, e, s = self.timer, self.engine, self.shape
        others = decoders * (self.resident - 1) / self.resident if self.resident > 0 else 0.0
        ctx = s.resident_context  # (the decoders of a step: each weighted by how long it decodes)
        f0 = t.step_s(1.0 + others, (1.0 + others) * ctx)  # the decode step a decoder sees, per token
        # a step gives each decoder L tokens (speculative decoding: L > 1) and the timer's times are per
        # token: a step lasts L of them, so a chunk's step, as long as it lasts, adds L - 1 more of the
        # decode part (what the request waits for: its own prefill's steps, another's step in progress)
        L = t.tokens_per_step
        alone = t.step_s(others, others * ctx) if e.mixed_batches and others > 0 else 0.0
        chunks = prefill_chunks(e, s, others)
        if e.mixed_batches:
            with_chunk = [t.step_s(others, others * ctx, [c]) for c in chunks]
            delta = sum(w - alone for w in with_chunk)  # what the prefill adds to the engine's time
            walls = [w + alone * (L - 1.0) for w in with_chunk]
        else:  # prefill-only steps: the decoders wait
            walls = [t.step_s(0.0, 0.0, [c]) for c in chunks]
            delta = sum(walls)
        decode_steps = s.output - 1
        # the others' prefills (a share (n - 1) / n of all) take 1 - busy of the engine's time
        share = (self.resident - 1) / self.resident if self.resident > 0 else 0.0

        def rate(delta: float) -> float:
            return decoders / (decode_steps * f0 + decoders * delta * share) if decoders > 0 else 0.0

        x, per_step = rate(delta), 1.0
        if not e.mixed_batches and len(chunks) == 1 and decoders > 0:
            x, per_step, delta, walls, tpot = self._prefill_first(decoders, f0, walls[0], share)
        else:
            if len(chunks) == 1 and x * walls[0] > 1.0:  # prompts arrive faster than their steps run: they share
                per_step, delta, walls = self._shared(decoders, others, ctx, alone, L, x, rate, delta, walls[0])
                x = rate(delta)
            busy = 1.0 - x * delta * share
            tpot = f0 / busy if busy > 0 else math.inf
        wait = _in_progress(f0 * L, walls, x * share / per_step, self.resident)
        if self.resident > 1:  # and the steps the scheduler had planned when it arrived: a mean step each
            wait += e.scheduling_lookahead * tpot * L
        return f0, delta, sum(walls), x, tpot, wait

    def _shared(self, decoders: float, others: float, ctx: float, alone: float, L: float, x: float, rate,
                delta: float, wall: float):
        """Prompts sharing a step (engines that mix chunks into the decodes' steps): a step carries the prompts
        that arrived during the last (the engine packs every waiting prompt its free budget holds, whole ones
        where it does not chunk), b = X x the step's wall, at most k = the budget the decoders leave over the
        prompt and the requests not decoding. Each prompt then adds (step of b - decode step) / b to the
        engine's time and waits for the whole step; X grows as the shared cost falls. b solves
        b = X(b) x wall(b) on [1, k] (k when more arrive than a full step holds). (b, Delta, [the wall])."""
        k = prompts_per_step(self.engine, self.shape, max(1.0, self.resident - decoders),
                             self.engine.token_budget - others)
        if k <= 1.0:
            return 1.0, delta, [wall]
        step_of = _steps_of(self.timer, self.shape, others, others * ctx)
        seen = {}  # (the root returns the b it tried last, asked again below)

        def at(b: float):
            if b not in seen:
                step = _mean_shared_step_s(step_of, b, k)
                shared = (step - alone) / b
                seen[b] = shared, step + alone * (L - 1.0), rate(shared)
            return seen[b]

        def carried_less(b: float) -> float:  # b less the prompts arriving during a step of b: < 0 below the root
            _, w, x_b = at(b)
            return b - min(k, x_b * w)

        lo, hi, f_lo, f_hi = self._sharing_bracket(carried_less, k)
        b = lo if lo == hi else _increasing_root(carried_less, lo, hi, _SHARING_TOL, f_lo, f_hi)
        self.sharing_root = b
        delta, wall, _ = at(b)
        return b, delta, [wall]

    def _sharing_bracket(self, carried_less, k: float):
        """(lo, hi, carried_less(lo), carried_less(hi)) bracketing the sharing root on [1, k] (None for an end not
        evaluated), found from the root the closed loop's last trial found (its trials close in on their root,
        and the sharing root with them), or from one prompt a step at the first trial. carried_less(b) = b -
        min(k, X(b) wall(b)) rises by at most 1 per prompt (X wall does not fall as b grows: a step of more
        prompts lasts longer and shares its cost among more), so the root lies at least |carried_less| from a
        trial b: the probes go twice that far, then four times, eight, ... (a bracket of [1, k] took ten
        evaluations of the spread's step at every trial of the closed loop, this one a few where the last root
        is near). At the first trial, [1, k]: probes out from one prompt a step would time steps of prompt
        counts far from the root (the step of each new count is worked out once: the dearest part of a call)."""
        start = self.sharing_root
        if start is None or not 1.0 < start < k:
            return 1.0, k, None, None
        f_start = carried_less(start)
        up = f_start < 0  # the root lies above the start
        end = k if up else 1.0
        if f_start == 0 or start == end:
            return start, start, f_start, f_start
        # the first probe: where the slope the last trial's probes found puts the root, a quarter beyond (twice
        # |carried_less| before there is one); a root nearer than the tolerance is the start itself
        slope = self.sharing_slope
        reach = abs(f_start) / slope if slope else 0.0
        if slope and reach <= 0.5 * _SHARING_TOL * start:
            return start, start, f_start, f_start
        gap, near, f_near = max(2.0 * abs(f_start), 1.25 * reach), start, f_start
        while True:
            probe = min(start + gap, k) if up else max(start - gap, 1.0)
            if probe == end:  # the whole way out: the root's own first evaluation there
                f_probe = None
                break
            f_probe = carried_less(probe)
            if probe != near and f_probe != f_near:
                self.sharing_slope = max(0.0, (f_probe - f_near) / (probe - near))
            if (f_probe < 0) != up:
                break
            # still short of the root: out to where the secant through the last two trials crosses 0, and a
            # quarter beyond (carried_less is close to linear over the step; at least doubling the gap)
            slope = self.sharing_slope
            reach = abs(probe - start) + abs(f_probe) / slope if slope else 0.0
            gap = max(2.0 * gap, 1.25 * reach)
            near, f_near = probe, f_probe
        return (near, probe, f_near, f_probe) if up else (probe, near, f_probe, f_near)

    def _prefill_first(self, decoders: float, f0: float, wall: float, share: float):
        """SGLang's default: whenever prompts wait at a step boundary, a prefill-only step of every waiting
        prompt (within the budget) runs before the decodes. With the others' prompts arriving at A = X (n - 1)
        / n per second (Poisson: many clients, jittered), a step of length tau is followed by a prefill step
        with probability p = 1 - exp(-A tau): after a decode step p_d (tau = f0), after a prefill step p_p
        (tau = S, the prefill step). The step types form a Markov chain with prefill steps per decode step
        p_d / (1 - p_p), so a decoder's token takes t_d = f0 + S p_d / (1 - p_p), and a prefill step carries
        the prompts that arrived during the step before it: a mean b = A (S + f0 (1 - p_p) / p_d) (1 at a
        light load, A S at a heavy one), S = S(b), up to k (the budget over the prompt, the requests not
        decoding). Little's law on the decoders, D = X (O - 1) t_d, gives X for each b (Newton's method: t_d
        grows with X); b solves b = that mean on [1, k]. (X, b, Delta = S / b, [S], t_d)."""
        s = self.shape
        k = max(1.0, prompts_per_step(self.engine, s, self.resident - decoders))
        decode_steps = s.output - 1

        def token_s(x: float, step: float):
            a = x * share
            p_d, stay = -math.expm1(-a * f0), math.exp(-min(a * step, 700.0))  # stay: 1 - p_p
            return f0 + step * p_d / stay, a, p_d, stay

        def rate(step: float, x: float) -> float:
            """X of Little's law on the decoders, D = X (O - 1) t_d(X): Newton's method on its log from x,
            kept inside the bracket where it would leave it."""
            lo, hi = 0.0, decoders / (decode_steps * f0)  # (t_d >= f0)
            for _ in range(_BISECTIONS):
                a = x * share
                grow, p_d = math.exp(min(a * step, 700.0)), -math.expm1(-a * f0)
                t_d = f0 + step * p_d * grow
                g = math.log(x * decode_steps * t_d / decoders)
                lo, hi = (x, hi) if g < 0 else (lo, x)
                slope = 1.0 / x + share * step * (f0 * (1.0 - p_d) * grow + step * p_d * grow) / t_d
                nxt = x - g / slope
                if abs(nxt - x) <= _SHARING_TOL * x:
                    return nxt
                x = nxt if lo < nxt < hi else 0.5 * (lo + hi)
            return x

        seen = {}
        light = decoders / (decode_steps * f0 + decoders * wall * share)  # X at a light load: f0 / (1 - X S share)

        def at(b: float):
            if b not in seen:  # (the root's last b is asked again; each X starts from the last one found)
                step = _mean_step_s(self.prefill_step_of, b, k) if b > 1.0 else wall
                x = rate(step, seen[next(reversed(seen))][1] if seen else light)
                seen[b] = (step, x) + token_s(x, step)
            return seen[b]

        def carried_less(b: float) -> float:  # b less the mean prompts a prefill step of b carries
            step, _, _, a, p_d, stay = at(b)
            return b - (min(k, max(1.0, a * (step + f0 * stay / p_d))) if p_d > 0 else 1.0)

        b = 1.0
        if k > 1.0 and carried_less(1.0) < 0:
            # the root lies above what one-prompt steps carry, g(1) = 1 - carried_less(1), and mostly close to it
            # (a light load): bracket it there first, then up to k
            near = min(k, 2.0 * (1.0 - carried_less(1.0)))
            hi = near if carried_less(near) >= 0 else k
            b = _increasing_root(carried_less, 1.0, hi, _SHARING_TOL)
        step, x, t_d, _, _, _ = at(b)
        return x, b, step / b, [step], t_d


def _in_progress(f0: float, prefill_steps: List[float], others_prefills_per_s: float, resident: float) -> float:
    """The mean wait for the step in progress of a request arriving while others run: the mean residual
    of the step it lands in, E[S^2] / (2 E[S]) over the engine's time (a long step is more likely to be
    the one in progress: renewal theory's length-biased residual). The engine spends a share
    r = (others' prefills per second) x (their steps' seconds) in steps that carry another request's
    prefill (each step S_i: its share S_i / the time, residual S_i / 2), the rest in decode steps f0
    (residual f0 / 2): (1 - r) f0 / 2 + rate x sum(S_i^2) / 2. Without prefills (r = 0): half a decode step."""
    if resident <= 1:
        return 0.0
    r = min(1.0, others_prefills_per_s * sum(prefill_steps))
    return 0.5 * (1.0 - r) * f0 + 0.5 * others_prefills_per_s * sum(w * w for w in prefill_steps)


def burst_prefill_s(timer, engine, shape: RequestShape, clients: float) -> float:
    """The mean time from `clients` requests reaching the engine together (a benchmark's first round)
    to each one's first token: the engine prefills them in passes of its token budget, in arrival
    order, so the j-th finishes with the pass that holds its last token.

    With q prompt tokens to prefill and a budget of B tokens per pass, a chunking engine packs B / q
    prompts into a pass (a = q / B passes per prompt; the j-th finishes after ceil(j a) passes: a mean
    of a (C + 1) / 2 + (1 - a) / 2 passes when a <= 1, a (C + 1) / 2 when a prompt fills passes); an
    engine that prefills whole prompts (TensorRT-LLM's default) packs k = floor(B / q) of them (at
    least one), and the j-th finishes after ceil(j / k) passes. A pass is a prefill-only step of
    its prompts (nobody decodes yet)."""
    n = max(1, int(round(clients)))
    q, budget = shape.prefill, float(engine.token_budget)
    if engine.chunked_prefill:
        a = q / budget
        if a <= 1.0:  # B / q prompts a pass (the last one chunked across passes)
            fill = min(n * q, budget)
            whole = int(fill // q)
            chunks = [(q, shape.cached)] * whole + ([(fill - whole * q, shape.cached)] if fill > whole * q else [])
            pass_s = timer.step_s(0.0, 0.0, chunks)
            mean_passes = a * (n + 1) / 2 + (1.0 - a) / 2 if n * q > budget else 1.0
        else:  # a prompt fills ceil(a) passes: its own prefill, one after another
            own_s = sum(timer.step_s(0.0, 0.0, [c]) for c in prefill_chunks(engine, shape, 0.0))
            pass_s, mean_passes = own_s / a, a * (n + 1) / 2
        return pass_s * mean_passes
    k = max(1, int(budget // q))  # whole prompts a pass
    pass_s = timer.step_s(0.0, 0.0, [(q, shape.cached)] * min(k, n))
    m, r = divmod(n, k)
    return pass_s * (k * m * (m + 1) / 2 + r * (m + 1)) / n


def decoders_the_budget_holds(timer, engine, shape: RequestShape) -> float:
    """The most decoders a mixed engine's steady state holds. Each step's token budget B holds its decoders'
    tokens (k each: 1, or the k a speculative step verifies) and the prompt tokens that keep them coming:
    X q tokens a second, X = D L / ((O - 1) t) (Little's law on the decode phase, L tokens a step), so
    D q L / (O - 1) a step, and D <= D* = B / (k + q L / (O - 1)). With more clients the prompts wait for
    room in the steps, not the decoders for their tokens (inf: an engine whose decodes do not share the
    budget, SGLang's, or a pipelined round, whose budget binds each micro-batch: not modelled). For an engine
    that prefills whole prompts this is the bound on the mean; how its steps fit a whole prompt beside the
    decoders is not modelled."""
    per = timer.budget_tokens_per_decoder
    if not engine.mixed_batches or per is None or shape.output <= 1:
        return math.inf
    return engine.token_budget / (per + shape.prefill * timer.tokens_per_step / (shape.output - 1))


def solve_closed_loop(timer, engine, pool, shape: RequestShape, clients: float, api_latency_s: float) -> SteadyState:
    """The steady state of `clients` closed-loop clients on one replica, with the starting burst's share
    of the mean (engine.benchmark_rounds; 0: none)."""
    n_max = capacity(engine, pool, shape)
    resident = min(clients, n_max)
    balance = _Balance(timer, engine, shape, resident)
    decode_steps = shape.output - 1
    rounds = engine.benchmark_rounds
    burst_s = burst_prefill_s(timer, engine, shape, resident) if rounds > 0 and resident > 1 else 0.0

    def latency(decoders: float):
        f0, delta, prefill_s, x, tpot, in_progress = balance.at(decoders)
        # arriving while others run, a request waits for the step in progress (its mean residual) and the
        # steps already planned (`_Balance.at`)
        # the first round's requests wait for each other's prefills: 1 / R of the mean over R rounds
        burst = max(0.0, burst_s - in_progress - prefill_s) / rounds if burst_s > 0 else 0.0
        engine_s = in_progress + burst + prefill_s + decode_steps * tpot
        return f0, prefill_s, x, tpot, in_progress, burst, engine_s

    if decode_steps <= 0:
        return _prefill_only(timer, engine, shape, resident, clients, api_latency_s, n_max)
    # X (API latency + engine time) = resident when every client is in the engine (C <= N);
    # else the engine holds N and the rest queue: X x engine time = N
    outside = api_latency_s if clients <= n_max else 0.0

    def excess(decoders: float) -> float:  # grows with D: more decoders, more throughput and latency
        _, _, x, tpot, _, _, engine_s = latency(decoders)
        return math.inf if math.isinf(tpot) else x * (outside + engine_s) - resident

    # the budget bounds the decoders (decoders_the_budget_holds): there, prompts queue for room in the steps
    top = min(float(resident), decoders_the_budget_holds(timer, engine, shape))
    decoders = _increasing_root(excess, 0.0, top)
    f0, prefill_s, x, tpot, in_progress, burst, engine_s = latency(decoders)
    full = clients > n_max or (top < resident and decoders >= top and excess(top) < 0)
    queue_wait = max(0.0, clients / x - api_latency_s - engine_s) if full else 0.0
    ttft = api_latency_s + queue_wait + in_progress + burst + prefill_s
    e2e = ttft + decode_steps * tpot
    # Little's law closes exactly: the throughput is the clients over the mean latency
    state = SteadyState(clients / e2e, decoders, f0, tpot, ttft, e2e, queue_wait, burst, prefill_s, resident)
    # (an engine that runs waiting prompts before its decodes: the decoders wait, over their steps)
    return within_saturation(state, clients, prefill_ceiling_rps(timer, engine, shape, resident, prefill_s),
                             decode_steps if not engine.mixed_batches else 0)


def prefill_ceiling_rps(timer, engine, shape: RequestShape, resident: float, prefill_s: float) -> float:
    """The most requests per second the replica's prefills let it complete: no step carries more than
    k = prompts_per_step prompts. A prompt that fills the token budget (k <= 1) is prefilled in steps of its
    own, one prompt after another: one request per `prefill_s`, its prefill in the steady state. Else every
    step full of prompts and nothing else: the better of one prompt a step and k a step, 1 / S(1) and k / S(k)
    with S the prefill-only step (b / S(b) is monotone between the whole numbers of prompts a step, and the
    step's time grows with its prompts: the ends bound it, up to the GEMMs' tile steps). The closed form's
    Little's law on the decoders knows no such bound: with 8,000 + 2 tokens on one H100 (Llama-3.1-8B, a
    budget of 8,192: k = 1.02) it gave 17.2 requests/s under SGLang and 6.9 under vLLM, 2.2 PFLOP/s of
    prefill on a GPU of 0.99 peak, where one prefill takes 0.19 s and the simulation of the same steps
    completes 5.2."""
    k = prompts_per_step(engine, shape, resident)
    if k <= 1.0:
        return 1.0 / prefill_s
    one_s = sum(timer.step_s(0.0, 0.0, [c]) for c in prefill_chunks(engine, shape, 0.0))
    return max(1.0 / one_s, k / _prompts_step_s(timer, shape, k))


def within_saturation(state: SteadyState, clients: float, saturation_rps: float,
                      waiting_decode_steps: float = 0) -> SteadyState:
    """`state` with its throughput at most `saturation_rps`, what the replica can complete. The closed form's
    prefills overlap where the engine runs them one after another (prompts that fill the token budget:
    Llama-3.1-8B on an H100 under vLLM, 8,192 + 2 tokens, 6.7 requests/s at 4 clients where one prefill
    takes 0.19 s and the simulation of the same steps completes 5.0); the time beyond (Little's law: E2E =
    clients / throughput) is the wait for the engine before the prefill, in TTFT; or, for an engine that runs
    waiting prompts before its decodes (SGLang: its `waiting_decode_steps` > 0, the requests' decode steps), half
    of it: the prompts queued ahead of a request wait it before its prefill, and those that queue meanwhile before
    its decode steps, which wait for every waiting prompt (the simulation of the same steps splits it so:
    Llama-3.1-70B fp8 on four H100s, 8,192 + 2 tokens, 16 clients: TTFT 3.75 s and TPOT 2.91 s; the whole wait in
    TTFT had given 6.0 s and 0.55 s, now 3.84 s and 2.72 s; 64 clients: 13.6 s and 12.7 s, now 14.9 s and 11.4 s)."""
    if state.throughput_rps <= saturation_rps * (1 + _REL_TOL):
        return state
    extra = clients / saturation_rps - state.e2e_s
    if waiting_decode_steps > 0:  # half before the prompt's prefill, half before its decode steps
        return dataclasses.replace(state, throughput_rps=saturation_rps, ttft_s=state.ttft_s + 0.5 * extra,
                                   tpot_s=state.tpot_s + 0.5 * extra / waiting_decode_steps,
                                   e2e_s=state.e2e_s + extra, queue_wait_s=state.queue_wait_s + 0.5 * extra)
    return dataclasses.replace(state, throughput_rps=saturation_rps, ttft_s=state.ttft_s + extra,
                               e2e_s=state.e2e_s + extra, queue_wait_s=state.queue_wait_s + extra)


def prompts_per_step(engine, shape: RequestShape, resident: float, budget: float = None) -> float:
    """The most prompts one step carries: the token budget (or the `budget` the decoders leave) over the
    tokens a prompt prefills (whole prompts where the engine does not chunk them: TensorRT-LLM's default),
    at most the requests in the engine (`capacity`: max_num_seqs and the KV pool), or `resident` as the
    caller bounds them. Below one, a prompt spans several steps."""
    q, budget = shape.prefill, engine.token_budget if budget is None else budget
    per_budget = budget / q if engine.chunked_prefill else float(max(1, budget // q))
    return min(per_budget, resident)


def _prompts_step_s(timer, shape: RequestShape, prompts: float, decoders: float = 0.0,
                    decode_context_sum: float = 0.0) -> float:
    """A step of `prompts` prompts (whole ones and, for a fraction, a chunk of one more) beside `decoders`."""
    whole = int(prompts)
    part = (prompts - whole) * shape.prefill
    chunks = [(shape.prefill, shape.cached, whole)] + ([(part, shape.cached)] if part > 0 else [])
    return timer.step_s(decoders, decode_context_sum, chunks)


def _mean_shared_step_s(step_of, prompts: float, most: float) -> float:
    """The mean step of steps that carry a mean `prompts` prompts (1 <= prompts <= most), the prompts of a step
    varying as arrivals do (`prompts_spread`): the mean of `_mean_step_s` over that spread, not the step of the
    mean number. Where a step's time jumps with its prompts (its tokens past the engine's CUDA-graph sizes, a
    GEMM's tile rows), the step of the mean number jumps with the clients, and the throughput it gave fell 19%
    between 60 and 76 clients where the simulation of the same steps rises (Llama-3.1-8B, 128 + 16 tokens,
    vLLM on an H100)."""
    if prompts <= 1.0 or prompts >= most:
        return _mean_step_s(step_of, prompts, most)
    # (a bin's mean, a weighted sum, may round a hair past the cap)
    return sum(w * _mean_step_s(step_of, min(max(n, 1.0), most), most)
               for n, w in _in_bins(prompts_spread(prompts, most)))


def _in_bins(spread: List[Tuple[float, float]], bins: int = 5) -> List[Tuple[float, float]]:
    """`spread` as `bins` equal shares of its probability, each at its own mean number of prompts (the mean kept
    exactly): a step is timed at 2 x bins whole numbers of prompts (`_mean_step_s` interpolates), not at every
    number the spread reaches (a dozen at 3 prompts a step, each a step to time, at every trial of the roots)."""
    out, share, mass, weighted = [], 1.0 / bins, 0.0, 0.0
    for n, w in spread:
        while w > 0:
            take = min(w, share - mass)
            mass, weighted, w = mass + take, weighted + take * n, w - take
            if mass >= share * (1 - 1e-12):
                out.append((weighted / mass, mass))
                mass, weighted = 0.0, 0.0
    if mass > 0:
        out.append((weighted / mass, mass))
    return out


def _capped_poisson(lam: float, most: float, terms: bool = True):
    """(mean, [(n, probability)]) of n = min(1 + Poisson(lam), most): the step's first prompt and the others that
    arrived meanwhile, as many as its budget holds (the rest wait for the next step); with `terms=False`, (mean,
    its slope in lam) instead (what the root for lam asks). With J terms kept (n = 1 .. J) and the rest at `last`,
    d mean / d lam = P(n <= J - 1) + (last - J) P(n = J) (each kept term's weight moves to the next number)."""
    p, mass, mean, out, j, below = math.exp(-lam), 0.0, 0.0, [], 0, 0.0
    while 1.0 + j < most and (j <= lam or p > _SPREAD_TAIL):
        if terms:
            out.append((1.0 + j, p))
        below = mass  # P(n <= j), the terms before this one
        mass, mean = mass + p, mean + p * (1.0 + j)
        j += 1
        p_last = p
        p *= lam / j
    # the rest: at the cap where the budget ends the spread, else (the Poisson's own negligible tail) at the next
    # number of prompts
    last, tail = min(most, 1.0 + j), max(0.0, 1.0 - mass)
    if terms:
        out.append((last, tail))
        return mean + tail * last, out
    return mean + tail * last, (below + (last - j) * p_last if j > 0 else 0.0)


def prompts_spread(prompts: float, most: float) -> List[Tuple[float, float]]:
    """[(prompts n, probability)] of the steps of a mean `prompts` per step (1 < prompts < most): many clients
    send their prompts as a Poisson stream, so a step holds its first prompt and a Poisson number of the others
    that arrived meanwhile, capped at `most` (its budget): min(1 + Poisson(lam), most), lam = prompts - 1 where
    the cap moves the mean by less than _SPREAD_MEAN_TOL, else solved so that the mean is `prompts` (the closed
    form's mean number of prompts a step carries). Called at every trial of the sharing root: the common case is
    one evaluation. The capped mean is increasing and concave in lam (the mean of a concave function of a Poisson
    count), so Newton's method from lam = prompts - 1 (below the root: the cap only lowers the mean) climbs to the
    root without passing it, in a few steps where a bracketing root took a dozen passes over the terms."""
    mean, spread = _capped_poisson(prompts - 1.0, most)
    if abs(mean - prompts) <= prompts * _SPREAD_MEAN_TOL:
        return spread
    lam = prompts - 1.0
    for _ in range(_BISECTIONS):
        mean, slope = _capped_poisson(lam, most, terms=False)
        if slope <= 0:  # (no slope to follow: every term past the cap)
            break
        step = (prompts - mean) / slope
        lam += step
        if abs(step) <= _REL_TOL * max(lam, 1.0):
            break
    return _capped_poisson(lam, most)[1]


def _mean_step_s(step_of, prompts: float, most: float) -> float:
    """The mean step of a mean `prompts` per step (1 <= prompts <= most), `step_of(n)` the step of n prompts:
    between the steps of the whole numbers around it (the top one `most`, a chunk of a prompt where the
    budget ends)."""
    lo = float(math.floor(prompts))
    s_lo = step_of(lo)
    if prompts == lo:
        return s_lo
    hi = min(lo + 1.0, most)
    return s_lo + (prompts - lo) / (hi - lo) * (step_of(hi) - s_lo)


def _steps_of(timer, shape: RequestShape, decoders: float = 0.0, decode_context_sum: float = 0.0):
    """step_of(n): the step of n prompts beside `decoders`, each n timed once (a root asks the whole numbers
    around its b again and again)."""
    known = {}

    def step_of(n: float) -> float:
        if n not in known:
            known[n] = _prompts_step_s(timer, shape, n, decoders, decode_context_sum)
        return known[n]
    return step_of


def _prefill_only(timer, engine, shape: RequestShape, resident: float, clients: float, api_latency_s: float,
                  n_max: int) -> SteadyState:
    """One output token: each request is its prefill, and the engine runs prefill-only steps back to back
    while prompts wait, each carrying what waits, up to k = prompts_per_step (vLLM and SGLang fill the
    token budget; TensorRT-LLM takes whole prompts).

    A step of b prompts (a mean over steps) takes S(b). While the engine is busy it serves in each step
    what arrived during the last, X = b / S(b); below X = 1 / S(1) it runs one prompt a step and idles a
    share 1 - X S(1). A request arriving while the engine runs a step it is not in waits half of it and
    the steps already planned (scheduling_lookahead), then its own: T = S(b) + p (1/2 + lookahead) S(b),
    with p the engine's busy share times the share of the other clients not in the arrival's own batch,
    (N - b) / N: clients served together come back together (C <= k with a short API latency: they keep
    meeting an idle engine), while clients spread over many steps meet a busy one (the limit of Poisson
    arrivals). The loop closes with Little's law, N = X (API latency + T): first on X with one prompt a
    step, then on b up to k; with the engine full (b = k) the clients beyond what its steps carry queue.
    One client: T = S(1), inference()'s prefill. Against the simulation of the same steps (request by
    request; benchmarks/closed_form_vs_simulation.py --setups prefill_only: 270 setups, Llama-3.1-8B and 70B,
    32- to 8,192-token prompts, 1 to 256 clients, three engines, H100 and A100) the mean TTFT is off by a
    median 0.4%, p90 8%, worst 28% (two to four clients, which the simulation often serves in one step), where
    the closed form of one prompt a step (an M/D/1 queue) was off by 19%, 191% and 1,180%."""
    chunks = prefill_chunks(engine, shape, 0.0)
    one_s = sum(timer.step_s(0.0, 0.0, [c]) for c in chunks)  # one prompt alone: its steps
    pass_s = one_s / len(chunks)  # the step planned ahead of an arrival: one of them
    k = prompts_per_step(engine, shape, resident)
    lookahead = engine.scheduling_lookahead
    step_of = _steps_of(timer, shape)
    outside = api_latency_s if clients <= n_max else 0.0

    def waits(b: float, step_s: float, busy: float) -> float:
        return busy * max(0.0, resident - b) / resident * (0.5 * step_s + lookahead * (step_s if b > 1 else pass_s))

    def one_a_step(x: float) -> float:  # Little's law's excess at X = x, one prompt a step
        return x * (outside + waits(1.0, one_s, x * one_s) + one_s) - resident

    if k <= 1.0 or one_a_step(1.0 / one_s) >= 0:
        x = _increasing_root(one_a_step, 0.0, 1.0 / one_s)
        b, step_s, busy = 1.0, one_s, x * one_s
    else:
        def batched(b: float) -> float:  # the excess with the engine busy at b prompts a step
            step_s = _mean_step_s(step_of, b, k)
            return b / step_s * (outside + waits(b, step_s, 1.0) + step_s) - resident

        b = _increasing_root(batched, 1.0, k)
        step_s = _mean_step_s(step_of, b, k)
        x, busy = b / step_s, 1.0
    engine_s = waits(b, step_s, busy) + step_s
    # with the engine full, Little's law gives the time the clients beyond its steps queue
    queue_wait = max(0.0, clients / x - api_latency_s - engine_s)
    ttft = api_latency_s + queue_wait + engine_s
    return SteadyState(clients / ttft, 0.0, 0.0, 0.0, ttft, ttft, queue_wait, 0.0, step_s, resident)


def saturation_rate(timer, engine, pool, shape: RequestShape, scan: bool = False) -> float:
    """Requests per second one replica completes at most: above it an open-loop queue grows without bound.
    Mostly with every slot it can hold busy; but a decode step of more sequences than the engine's CUDA graphs
    hold runs eagerly, slower, so the replica may complete more with no more running than the graphs hold
    (Qwen3-32B on two H200s under SGLang, 256 + 4,096 tokens: 1.61 requests/s at 256 clients, 1.37 with all
    317 slots busy; an open loop at 1.5 requests/s settles at the smaller batch). The better of the two.

    With `scan`, also a grid of running counts below the slots and a climb from the best: a mixed step whose
    tokens pass the largest CUDA graph runs eagerly, so the completions per second are a sawtooth in the
    running count (vLLM, Llama-3.1-8B on an H100, 128 + 1,024 tokens: 16.48 requests/s at 380 running, 15.37
    at 400, 16.15 with all 690 slots). About twenty closed-loop solutions: what an open loop's verdict takes
    (its simulation costs far more); the closed loop reports the two-point value (serving/run.py)."""
    n_max = capacity(engine, pool, shape)

    def completed(n: int) -> float:
        return solve_closed_loop(timer, engine, pool, shape, float(n), 0.0).throughput_rps

    graphs = engine.graph_decode_max_batch
    counts = {n_max, *((graphs,) if 1 <= graphs < n_max else ())}  # (no graphs captured: 0)
    if scan:
        counts.update(max(1, round(n_max * (1 - k * SATURATION_GRID_STEP))) for k in range(1, SATURATION_GRID_POINTS))
    tried = {n: completed(n) for n in sorted(counts)}
    if not scan:
        return max(tried.values())
    # climb from the best by halving steps: the running count at the top of its tooth
    best, step = max(tried, key=tried.get), max(1, round(n_max * SATURATION_GRID_STEP / 2))
    while True:
        for n in (best - step, best + step):
            if 1 <= n <= n_max and n not in tried:
                tried[n] = completed(n)
        top = max(tried, key=tried.get)
        if top != best:
            best = top
        elif step == 1:
            return tried[best]
        else:
            step = max(1, step // 2)


# `saturation_rate(scan=True)`'s grid: the slots' shares 1 - k x step, k = 1 .. points - 1 (0.95 .. 0.3)
SATURATION_GRID_STEP, SATURATION_GRID_POINTS = 0.05, 15


__all__ = ["RequestShape", "SteadyState", "burst_prefill_s", "capacity", "clipped_remaining_output",
           "decoders_the_budget_holds", "prefill_ceiling_rps", "prefill_chunks", "prompts_spread", "within_saturation",
           "prompts_per_step", "saturation_rate", "solve_closed_loop"]
