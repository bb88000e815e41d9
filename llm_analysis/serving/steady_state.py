"""The closed loop's steady state, in closed form over the step model (serving/step_time.py).

One replica, C clients, requests of mean input I (I' not in the prefix cache) and output O; X requests
per second complete:
- D = X (O - 1) t_d requests decode at any step (Little's law on the decode phase, t_d a decoder's TPOT);
- a decode-only step takes f0 = step(D decoders at the mean context I + O / 2) as a decoder sees it
  (with D (n - 1) / n others among the n requests in the engine);
- each prefill adds Delta of engine time: its I' tokens chunked within the budget the decoders leave
  (max_num_batched_tokens - D), each chunk costing what it adds to a step (vLLM, TensorRT-LLM) or its own
  prefill-only step (SGLang); the others' prefills stretch a decode step: t_d = f0 / (1 - X Delta (n - 1) / n),
  so X = D / ((O - 1) f0 + D Delta (n - 1) / n);
- TTFT = API latency + the mean residual of the step in progress (length-biased: _in_progress) + the
  steps the scheduler had planned (engine.scheduling_lookahead TPOTs) + its own prefill steps (+ the wait
  for a slot when C exceeds N = min(max_num_seqs, requests the KV pool holds at I + O / 2, or I + O when
  the engine reserves whole requests));
- the starting burst: closed-loop benchmarks (vllm bench serve --max-concurrency, genai-perf --concurrency,
  aiconfigurator) start their C clients together, so the first round queues behind each other's prefills;
  over R requests per client (benchmark_rounds, fitted per engine; 0: none) it adds
  (burst TTFT - steady TTFT) / R to the mean TTFT;
- prompts share steps when they arrive faster than a step with a prompt runs (X x its wall > 1): each
  adds (step of b - decode step) / b, b = X x the step (_Balance._shared), the step of b a mean over
  Poisson-varying prompt counts (prompts_spread); SGLang's prefill-first steps: a Markov chain of step
  types (_Balance._prefill_first);
- a mixed engine's token budget bounds its decoders: D <= B / (k + q L / (O - 1))
  (decoders_the_budget_holds); with more clients the prompts queue for room in the steps;
- the loop closes with Little's law, C = X (TTFT + (O - 1) t_d), solved for D (the left side grows with D).

One-token requests (a prefill-only workload) have no decode phase: _prefill_only. The saturation rate
(open loop) is X with the engine full and no API latency.
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
    """The x in [lo, hi] where the increasing f crosses 0 (f(lo) < 0 <= f(hi)), to `rel_tol` of x: regula falsi
    with the Illinois step, bisecting where f is infinite. `f_lo`, `f_hi`: f at the ends, where known."""
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
    # KV tokens a running request holds on average, weighted by its output: E[(I + O/2) O] / E[O] while it grows,
    # E[(I + O) O] / E[O] reserved whole; None: fixed lengths. Long requests hold more for longer: pairs of 512 + 128
    # and 2,048 + 1,024 tokens hold 1.5x the mean shape's, whose saturation rate was 1.6-2x the simulation's
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
    """(tokens, past tokens) of each chunk of a request's prefill beside `decoders` decode tokens (mixed engines)."""
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
    """E over a decoder's progress u (uniform) of min(O (1 - u), clip): O / 2 when O <= c, else c - c^2 / (2 O)."""
    if output <= clip:
        return output / 2
    return clip - clip * clip / (2 * output)


def capacity(engine, pool, shape: RequestShape) -> int:
    """Requests the engine runs at once: max_num_seqs, and what the KV pool holds (at their mean length while
    they grow, their whole length when reserved on admission, or SGLang's estimate: _estimate_admits)."""
    if engine.admission == "output_estimate":
        fits = _estimate_admits(engine, pool, shape)
    else:
        held = shape.resident_total if engine.admission == "full_request" else shape.resident_context
        fits = pool.requests_that_fit(held)
    return max(1, min(engine.max_num_seqs, fits))


def _estimate_admits(engine, pool, shape: RequestShape) -> int:
    """SGLang-style admission: a request is admitted when the pool, less `output_reserve_share` of each running
    request's remaining output (clipped at `output_reserve_clip_tokens`), holds its prompt and clipped output.
    n running at evenly spread progress each hold I + O / 2 and keep s E[min(remaining, c)] free, so the n-th
    is admitted while (n - 1) (I + O / 2 + s E) + I + min(O, c) fits the pool."""
    clip = engine.output_reserve_clip_tokens
    running = shape.resident_context + engine.output_reserve_share * clipped_remaining_output(shape.output, clip)
    newcomer = shape.input + min(shape.output, clip)
    per_running, per_new = pool.bytes_for(running), pool.bytes_for(newcomer)
    if per_new > pool.pool_bytes:
        return 0
    return 1 + int((pool.pool_bytes - per_new) // per_running) if per_running > 0 else 10**12


class _Balance:
    """The steady state's quantities at D mean decoders among `resident` requests. A request sees the others,
    not itself: its decode step holds itself and D (n - 1) / n other decoders; its prefill, only those others."""

    def __init__(self, timer, engine, shape: RequestShape, resident: float):
        self.timer, self.engine, self.shape, self.resident = timer, engine, shape, resident
        self.prefill_step_of = _steps_of(timer, shape)  # prefill-only steps: the same at every load
        self.sharing_root = None  # the prompts a step shares at the closed loop's last trial (_sharing_bracket)
        self.sharing_slope = None  # and carried_less's slope near it, from the probes that bracketed it

    def at(self, decoders: float):
        """(f0, Delta, the request's own prefill time, X, TPOT, the mean wait of an arrival while others run: the step
        in progress and the steps already planned) at `decoders` mean decoders."""
        t, e, s = self.timer, self.engine, self.shape
        others = decoders * (self.resident - 1) / self.resident if self.resident > 0 else 0.0
        ctx = s.resident_context  # (the decoders of a step: each weighted by how long it decodes)
        f0 = t.step_s(1.0 + others, (1.0 + others) * ctx)  # the decode step a decoder sees, per token
        # a step gives each decoder L tokens (speculative decoding) and the timer's times are per token: a chunk's
        # step lasts L - 1 more of the decode part (what a request waits for: its prefill, another's step)
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
        """Prompts sharing a step (mixed engines): a step carries the prompts that arrived during the last,
        b = X x its wall, at most k (the budget the decoders leave, and the requests not decoding). Each prompt
        adds (step of b - decode step) / b to the engine's time and waits for the whole step; b solves
        b = X(b) wall(b) on [1, k]. (b, Delta, [the wall])."""
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
        """(lo, hi, carried_less(lo), carried_less(hi)) bracketing the sharing root on [1, k] (None: not evaluated).
        carried_less rises by at most 1 per prompt, so the root lies at least |carried_less| from a trial b: from
        the last trial's root (the closed loop's trials close in on theirs) the probes go out twice as far each
        time; the first trial takes [1, k] (probes far from the root would time steps never needed again)."""
        start = self.sharing_root
        if start is None or not 1.0 < start < k:
            return 1.0, k, None, None
        f_start = carried_less(start)
        up = f_start < 0  # the root lies above the start
        end = k if up else 1.0
        if f_start == 0 or start == end:
            return start, start, f_start, f_start
        # the first probe: a quarter beyond where the last slope puts the root (twice |carried_less| without one)
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
            # still short: a quarter beyond where the secant crosses 0, at least doubling the gap
            slope = self.sharing_slope
            reach = abs(probe - start) + abs(f_probe) / slope if slope else 0.0
            gap = max(2.0 * gap, 1.25 * reach)
            near, f_near = probe, f_probe
        return (near, probe, f_near, f_probe) if up else (probe, near, f_probe, f_near)

    def _prefill_first(self, decoders: float, f0: float, wall: float, share: float):
        """SGLang's default: when prompts wait at a step boundary, a prefill-only step of all of them (within the
        budget) runs before the decodes. Others' prompts arrive at A = X (n - 1) / n (Poisson), so a step of length
        tau is followed by a prefill step with p = 1 - exp(-A tau): p_d after a decode step (f0), p_p after a
        prefill step (S). This Markov chain has p_d / (1 - p_p) prefill steps per decode step: t_d = f0 + S p_d /
        (1 - p_p); a prefill step carries b = A (S + f0 (1 - p_p) / p_d) prompts, S = S(b), at most k. Little's law,
        D = X (O - 1) t_d, gives X for each b (Newton); b solves b = that mean on [1, k]. (X, b, S / b, [S], t_d)."""
        s = self.shape
        k = max(1.0, prompts_per_step(self.engine, s, self.resident - decoders))
        decode_steps = s.output - 1

        def token_s(x: float, step: float):
            a = x * share
            p_d, stay = -math.expm1(-a * f0), math.exp(-min(a * step, 700.0))  # stay: 1 - p_p
            return f0 + step * p_d / stay, a, p_d, stay

        def rate(step: float, x: float) -> float:
            """X of D = X (O - 1) t_d(X): Newton on its log from x, bisecting where it would leave the bracket."""
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
            # the root lies above 1 - carried_less(1), mostly close to it (a light load): bracket there, then to k
            near = min(k, 2.0 * (1.0 - carried_less(1.0)))
            hi = near if carried_less(near) >= 0 else k
            b = _increasing_root(carried_less, 1.0, hi, _SHARING_TOL)
        step, x, t_d, _, _, _ = at(b)
        return x, b, step / b, [step], t_d


def _in_progress(f0: float, prefill_steps: List[float], others_prefills_per_s: float, resident: float) -> float:
    """The mean residual of the step in progress for an arrival while others run: E[S^2] / (2 E[S]) over the
    engine's time (renewal theory's length bias). A share r = rate x sum(S_i) of the time runs steps carrying
    another's prefill, the rest decode steps f0: (1 - r) f0 / 2 + rate x sum(S_i^2) / 2."""
    if resident <= 1:
        return 0.0
    r = min(1.0, others_prefills_per_s * sum(prefill_steps))
    return 0.5 * (1.0 - r) * f0 + 0.5 * others_prefills_per_s * sum(w * w for w in prefill_steps)


def burst_prefill_s(timer, engine, shape: RequestShape, clients: float) -> float:
    """The mean time from `clients` requests reaching the engine together to each one's first token: passes
    of the token budget in arrival order, the j-th finishing with the pass that holds its last token. With
    a = q / B passes per prompt, a chunking engine's j-th finishes after ceil(j a) passes (mean a (C + 1) / 2
    + (1 - a) / 2 when a <= 1, a (C + 1) / 2 else); a whole-prompt engine (TensorRT-LLM) packs
    k = floor(B / q) >= 1 a pass, the j-th finishing after ceil(j / k). Passes are prefill-only steps."""
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
    """The most decoders a mixed engine's steady state holds: a step's budget B holds k tokens per decoder (1,
    or a speculative step's) and the prompt tokens that keep them coming, D q L / (O - 1) (Little's law), so
    D <= B / (k + q L / (O - 1)). inf where decodes do not share the budget (SGLang, pipelined rounds)."""
    per = timer.budget_tokens_per_decoder
    if not engine.mixed_batches or per is None or shape.output <= 1:
        return math.inf
    return engine.token_budget / (per + shape.prefill * timer.tokens_per_step / (shape.output - 1))


def solve_closed_loop(timer, engine, pool, shape: RequestShape, clients: float, api_latency_s: float) -> SteadyState:
    """The steady state of `clients` closed-loop clients on one replica, with the starting burst's share."""
    n_max = capacity(engine, pool, shape)
    resident = min(clients, n_max)
    balance = _Balance(timer, engine, shape, resident)
    decode_steps = shape.output - 1
    rounds = engine.benchmark_rounds
    burst_s = burst_prefill_s(timer, engine, shape, resident) if rounds > 0 and resident > 1 else 0.0

    def latency(decoders: float):
        f0, delta, prefill_s, x, tpot, in_progress = balance.at(decoders)
        # the first round's requests wait for each other's prefills: 1 / R of the mean over R rounds
        burst = max(0.0, burst_s - in_progress - prefill_s) / rounds if burst_s > 0 else 0.0
        engine_s = in_progress + burst + prefill_s + decode_steps * tpot
        return f0, prefill_s, x, tpot, in_progress, burst, engine_s

    if decode_steps <= 0:
        return _prefill_only(timer, engine, shape, resident, clients, api_latency_s, n_max)
    # X (API latency + engine time) = resident when C <= N; else the rest queue: X x engine time = N
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
    """The most requests per second the prefills allow: at most k = prompts_per_step prompts a step. k <= 1:
    one prompt after another, 1 / `prefill_s`; else the better of 1 / S(1) and k / S(k), S the prefill-only
    step. Little's law on the decoders knows no such bound: 8,000 + 2 tokens on one H100 (Llama-3.1-8B,
    k = 1.02) gave 17.2 requests/s under SGLang where the simulation of the same steps completes 5.2."""
    k = prompts_per_step(engine, shape, resident)
    if k <= 1.0:
        return 1.0 / prefill_s
    one_s = sum(timer.step_s(0.0, 0.0, [c]) for c in prefill_chunks(engine, shape, 0.0))
    return max(1.0 / one_s, k / _prompts_step_s(timer, shape, k))


def within_saturation(state: SteadyState, clients: float, saturation_rps: float,
                      waiting_decode_steps: float = 0) -> SteadyState:
    """`state` with its throughput at most `saturation_rps`: the closed form overlaps prefills the engine runs
    one after another (8,192 + 2 tokens, Llama-3.1-8B on an H100 under vLLM: 6.7 requests/s at 4 clients,
    the simulation 5.0). The time beyond (E2E = clients / throughput) is a wait before the prefill (TTFT);
    for an engine that runs waiting prompts before its decodes (SGLang: `waiting_decode_steps` > 0) half of
    it goes before the decode steps instead, as the simulation splits it (Llama-3.1-70B fp8 on four H100s,
    16 clients: TTFT 3.75 s, TPOT 2.91 s; all in TTFT gave 6.0 s and 0.55 s, halved 3.84 s and 2.72 s)."""
    if state.throughput_rps <= saturation_rps * (1 + _REL_TOL):
        return state
    extra = clients / saturation_rps - state.e2e_s
    before_prefill = 0.5 * extra if waiting_decode_steps > 0 else extra  # the rest before the decode steps
    decoding = (extra - before_prefill) / waiting_decode_steps if waiting_decode_steps > 0 else 0.0
    return dataclasses.replace(state, throughput_rps=saturation_rps, ttft_s=state.ttft_s + before_prefill,
                               tpot_s=state.tpot_s + decoding, e2e_s=state.e2e_s + extra,
                               queue_wait_s=state.queue_wait_s + before_prefill)


def prompts_per_step(engine, shape: RequestShape, resident: float, budget: float = None) -> float:
    """The most prompts one step carries: the budget (or the `budget` the decoders leave) over a prompt's tokens
    (whole prompts where the engine does not chunk), at most `resident`. Below one, a prompt spans steps."""
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
    """The mean step of steps carrying a mean `prompts` (1 <= prompts <= most), prompts varying as arrivals do
    (`prompts_spread`), not the step of the mean number: where step time jumps with its prompts (CUDA-graph
    sizes, GEMM tiles) that jumped with the clients (-19% throughput from 60 to 76 clients, Llama-3.1-8B,
    128 + 16 tokens, vLLM, H100, where the simulation rises)."""
    if prompts <= 1.0 or prompts >= most:
        return _mean_step_s(step_of, prompts, most)
    # (a bin's mean, a weighted sum, may round a hair past the cap)
    return sum(w * _mean_step_s(step_of, min(max(n, 1.0), most), most)
               for n, w in _in_bins(prompts_spread(prompts, most)))


def _in_bins(spread: List[Tuple[float, float]], bins: int = 5) -> List[Tuple[float, float]]:
    """`spread` as `bins` equal shares of probability, each at its mean prompts (the mean kept exactly): steps are
    timed at 2 x bins whole numbers of prompts, not at every number the spread reaches."""
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
    """(mean, [(n, probability)]) of n = min(1 + Poisson(lam), most); `terms=False`: (mean, d mean / d lam). With
    J terms kept and the rest at `last`: d mean / d lam = P(n <= J - 1) + (last - J) P(n = J)."""
    p, mass, mean, out, j, below = math.exp(-lam), 0.0, 0.0, [], 0, 0.0
    while 1.0 + j < most and (j <= lam or p > _SPREAD_TAIL):
        if terms:
            out.append((1.0 + j, p))
        below = mass  # P(n <= j), the terms before this one
        mass, mean = mass + p, mean + p * (1.0 + j)
        j += 1
        p_last = p
        p *= lam / j
    # the rest: at the cap, or (the Poisson's negligible tail) at the next number of prompts
    last, tail = min(most, 1.0 + j), max(0.0, 1.0 - mass)
    if terms:
        out.append((last, tail))
        return mean + tail * last, out
    return mean + tail * last, (below + (last - j) * p_last if j > 0 else 0.0)


def prompts_spread(prompts: float, most: float) -> List[Tuple[float, float]]:
    """[(prompts n, probability)] of steps of a mean `prompts` per step (1 < prompts < most): Poisson arrivals
    give min(1 + Poisson(lam), most), lam = prompts - 1 unless the cap moves the mean by more than
    _SPREAD_MEAN_TOL, else solved for mean = `prompts`. The capped mean is increasing and concave in lam, so
    Newton's method from prompts - 1 (below the root) climbs to it without passing it."""
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
    """The mean step of a mean `prompts` per step (1 <= prompts <= most), interpolated between `step_of` the whole
    numbers around it (the top one `most`)."""
    lo = float(math.floor(prompts))
    s_lo = step_of(lo)
    if prompts == lo:
        return s_lo
    hi = min(lo + 1.0, most)
    return s_lo + (prompts - lo) / (hi - lo) * (step_of(hi) - s_lo)


def _steps_of(timer, shape: RequestShape, decoders: float = 0.0, decode_context_sum: float = 0.0):
    """step_of(n): the step of n prompts beside `decoders`, each n timed once."""
    known = {}

    def step_of(n: float) -> float:
        if n not in known:
            known[n] = _prompts_step_s(timer, shape, n, decoders, decode_context_sum)
        return known[n]
    return step_of


def _prefill_only(timer, engine, shape: RequestShape, resident: float, clients: float, api_latency_s: float,
                  n_max: int) -> SteadyState:
    """One output token: the engine runs prefill-only steps back to back while prompts wait, each carrying what
    waits, up to k = prompts_per_step. A step of b prompts takes S(b); busy, it serves X = b / S(b); below
    X = 1 / S(1) it runs one prompt a step, idle a share 1 - X S(1). An arrival while the engine runs a step
    it is not in waits half of it and the planned steps: T = S(b) + p (1/2 + lookahead) S(b), p the busy
    share times (N - b) / N (clients served together come back together). Little's law N = X (API + T)
    closes the loop, first on X at one prompt a step, then on b up to k. Against the simulation
    (benchmarks/closed_form_vs_simulation.py --setups prefill_only, 270 setups) the mean TTFT is off by a median
    0.4%, p90 8%, worst 28%, where an M/D/1 queue of one prompt a step was off by 19%, 191% and 1,180%."""
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
    """Requests per second one replica completes at most. Mostly with every slot busy, but a decode step of more
    sequences than the CUDA graphs hold runs eagerly, so fewer running may complete more (Qwen3-32B, two H200s,
    SGLang, 256 + 4,096 tokens: 1.61/s at 256 clients, 1.37 with all 317 busy): the better of the two. `scan`:
    also a grid below the slots and a climb from the best, since mixed steps past the largest graph make
    completions a sawtooth in the running count (vLLM, Llama-3.1-8B, H100, 128 + 1,024 tokens: 16.48/s at 380,
    15.37 at 400, 16.15 at all 690); about twenty closed-loop solutions (an open loop's verdict)."""
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
