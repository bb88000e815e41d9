"""Kernel efficiency as real GPUs deliver it: matrix multiplies, attention, HBM
streaming and a per-kernel floor. Pure functions; every parameter comes from a
`Profile` (cost/profiles/<generation>.json) with its source.

Matrix multiply C[M,N] += A[M,K] B[K,N] (CUTLASS/cuBLAS execution model,
NVIDIA "Matrix Multiplication Background User's Guide"):
- the output is cut into tiles (tm x tn); a tile only partly covered by the
  matrix costs a full tile (tile quantisation: small M wastes most of a tile);
- tiles run in waves of `num_sms` (one tile per SM at a time): the last wave
  may be partly empty (wave quantisation, steps at multiples of num_sms tiles);
- with fewer tiles than SMs, K is split over the idle SMs (split-K, slices of
  at least gemm_splitk_min_k), as cuBLAS does for short-wide shapes;
- short K amortises prologue/epilogue badly: K / (K + gemm_k_half);
- even a perfect shape stays below peak (gemm_plateau_efficiency: clocks
  under power limits, instruction issue);
smaller tiles reuse operands less (a relative efficiency per tile, in the
profile); the heuristics pick the best tile, so the best candidate is taken. The kernel
time is max(compute, HBM streaming) and never less than the launch floor:
`kernel_floor_graph_s` when serving runs under CUDA graphs (TensorRT-LLM,
vLLM, gpt-fast), `kernel_floor_eager_s` for eager training steps (PyTorch: every
kernel dispatched from Python), `kernel_floor_native_s` for a C++ engine that
launches every kernel from the host without CUDA graphs (FasterTransformer,
TensorRT-LLM's GptSession without --enable_cuda_graph): `launch_floor_s`.
"""

from __future__ import annotations

from typing import Optional, Tuple

from llm_analysis.errors import ConfigError
from llm_analysis.cost.gemm_buckets import bucket_levels, tile_winner, wave_fill
from llm_analysis.cost.profiles import Profile

LAUNCH_MODES = ("graph", "eager", "native")
# the profile key of each launch mode's per-kernel floor
LAUNCH_FLOOR_KEYS = {"graph": "kernel_floor_graph_s", "eager": "kernel_floor_eager_s", "native": "kernel_floor_native_s"}


def launch_floor_s(values, launch: str) -> float:
    """The least time of one kernel launched in mode `launch` from a profile's values: "graph"
    (replayed from a CUDA graph), "eager" (dispatched from Python, PyTorch) or "native" (launched
    from C++ without graphs). A profile without a native floor (one saved before the key existed)
    takes its eager one: the model before the key existed."""
    if launch not in LAUNCH_MODES:
        raise ConfigError(f"launch = {launch!r}; valid: {', '.join(LAUNCH_MODES)}")
    if launch == "native" and values.get("kernel_floor_native_s") is None:
        return values["kernel_floor_eager_s"]
    return values[LAUNCH_FLOOR_KEYS[launch]]


def gemm_wave_tail_for(values, precision: str) -> float:
    """The idle-tail share of a GEMM's last wave (`wave_fill`) on tensor cores of `precision` ("16-bit",
    "fp8", "fp4"): the profile's gemm_wave_tail for 16-bit GEMMs; fp8 and FP4 GEMMs run whole waves
    (measured: aiconfigurator's fp8 GEMM tables on H100, H200 and B200 keep the wave steps that the
    16-bit tables do not show)."""
    return values.get("gemm_wave_tail", 1.0) if precision == "16-bit" else 1.0


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class GemmShape:
    """The efficiency of GEMMs with one weight shape (N, K), as a function of M.

    Everything that does not depend on M (each tile's column count, split-K cap, the
    plateau and the short-K factor's denominator) is worked out once here; `__call__`
    is the per-M part, memoised. `gemm_efficiency` is this for one shape.
    """

    __slots__ = ("n", "k", "num_sms", "plateau", "k_total", "tiles", "memo", "rows_m", "winners", "coarse_tiles",
                 "left_out_rel", "fine_m", "fine_winners", "wave_tail")

    def __init__(self, n: int, k: int, profile: Profile, num_sms: int, *, fp8: bool = False,
                 fp4: bool = False, plateau: Optional[float] = None, wave_tail: Optional[float] = None):
        """`plateau`, `wave_tail`: the GEMM plateau and wave tail to use (the caller's precision's:
        `gemm_wave_tail_for`); else FP4's, fp8's or 16-bit's."""
        if min(n, k) < 1 or num_sms < 1:
            raise ConfigError(f"GEMM shape (N, K) = ({n}, {k}) and num_sms = {num_sms} must be >= 1")
        self.n, self.k, self.num_sms = n, k, num_sms
        if plateau is None:
            key = "gemm_fp4_plateau_efficiency" if fp4 else "gemm_fp8_plateau_efficiency" if fp8 else ""
            plateau = profile.values.get(key, profile.gemm_plateau_efficiency)
        self.plateau = plateau
        # the idle tail of the last wave: 16-bit GEMMs at the profile's gemm_wave_tail (stream-K schedules
        # pay none); fp8 and FP4 GEMMs run whole waves (their measured times keep the steps: profile source)
        self.wave_tail = gemm_wave_tail_for(profile.values, "fp4" if fp4 else "fp8" if fp8 else "16-bit") \
            if wave_tail is None else wave_tail
        self.k_total = k + profile.gemm_k_half
        splitk = profile.gemm_splitk_min_k
        # per tile: (tm, tm x padded N (padded N = tiles_n * tn), tiles_n, split-K cap, relative
        # efficiency), the most efficient first: a tile's fill never exceeds its relative efficiency
        # (every other factor is <= 1, also once rounded), so the search stops at a tile that cannot win
        self.tiles = tuple(sorted(((tm, tm * (_ceil_div(n, tn) * tn), _ceil_div(n, tn), int(k // splitk), rel)
                                   for tm, tn, rel in profile.gemm_tile_shapes), key=lambda t: -t[4]))
        self.memo = {}
        # per bucket of M (ceil(M / rows_m), else ceil(M / fine_m)) the tile that wins at every M
        # in it, found on the bucket's first M (gemm_buckets.py)
        self.rows_m, self.coarse_tiles, self.left_out_rel, self.fine_m = bucket_levels(self.tiles)
        self.winners, self.fine_winners = {}, {}

    def __call__(self, m: int) -> float:
        """Fraction of the dense tensor peak a GEMM of (m, N, K) reaches (0 < e < 1)."""
        e = self.memo.get(m)
        return self.miss(m) if e is None else e

    def miss(self, m: int) -> float:
        """`self(m)` for an M the memo does not hold, computed and memoised."""
        if m < 1:
            raise ConfigError(f"GEMM shape (M, N, K) = ({m}, {self.n}, {self.k}) must be >= 1")
        if len(self.memo) >= _MEMO_LIMIT:  # a long sweep over M: keep the memo bounded
            self.memo.clear()
        e = self.memo[m] = self.bucket_efficiency(m)
        return e

    def bucket_efficiency(self, m: int) -> float:
        """`self(m)` (M >= 1) from the winning tile of M's bucket (`gemm_buckets.tile_winner`, kept
        in `winners` / `fine_winners`), or the tile search where no tile wins a whole bucket."""
        w = _winner(self.winners, self.coarse_tiles, self, self.rows_m, m, self.left_out_rel)
        if not w:
            w = _winner(self.fine_winners, self.tiles, self, self.fine_m, m, -1.0)
        # the winner's fill is _best_tile's float: the same operations on the same numbers
        best = w[0] * (m * self.n / w[1] * w[2]) if w else self._best_tile(m)
        return self.plateau * best * self.k / self.k_total

    def _best_tile(self, m: int) -> float:
        """The best candidate tile's relative efficiency x tile fill x wave fill at this M."""
        sms, mn, best = self.num_sms, m * self.n, -1.0
        for tm, tile_area, tiles_n, splitk_cap, rel in self.tiles:
            if best >= rel:  # (the max is the same float whichever order the tiles are tried in)
                break
            tiles_m = -(-m // tm)
            # tile quantisation (a partly covered tile costs a whole one) x wave quantisation
            # (tiles_m x tm x padded N, an integer product: exact in any order)
            fill = rel * (mn / (tiles_m * tile_area) * wave_fill(tiles_m * tiles_n, splitk_cap, sms, self.wave_tail))
            if fill > best:
                best = fill
        return best


class FusedGemmShape:
    """The efficiency of one GEMM that fuses sibling projections (`Operator.fused_widths`: q, k, v or
    gate, up reading the same input) as a function of M: the better of the whole (N = the widths'
    sum) and its parts run one after another. A GEMM library picks tiles for the whole GEMM from a
    far finer set than the profile's tile shapes, so the fused GEMM is never slower than its parts;
    the coarse set's wave quantisation alone could otherwise make the wider GEMM look slower (M = 128
    on an A100's 108 SMs: N = 7168 fills one wave of 128 x 128 tiles at 52%, N = 3584 with split-K
    at 78%)."""

    __slots__ = ("whole", "parts", "n")

    def __init__(self, whole: GemmShape, parts: Tuple[GemmShape, ...]):
        self.whole, self.parts, self.n = whole, parts, whole.n

    def __call__(self, m: int) -> float:
        # the parts one after another: their FLOPs (each N) over the sum of their times (N / efficiency)
        parts = self.n / sum(g.n / g(m) for g in self.parts)
        return max(self.whole(m), parts)


_MEMO_LIMIT = 1 << 16


def _winner(kept: dict, tiles: tuple, shape: GemmShape, g: int, m: int, left_out_rel: float):
    """The winner of M's bucket of width g (kept per bucket, bounded)."""
    q = -(-m // g)
    w = kept.get(q)
    if w is None:
        if len(kept) >= _MEMO_LIMIT:
            kept.clear()
        w = kept[q] = tile_winner(tiles, shape.n, shape.num_sms, g, q, left_out_rel, shape.wave_tail)
    return w


def gemm_efficiency(m: int, n: int, k: int, profile: Profile, num_sms: int, *, fp8: bool = False,
                    fp4: bool = False) -> float:
    """Fraction of the dense tensor peak a GEMM of this shape reaches (0 < e < 1)."""
    if min(m, n, k) < 1 or num_sms < 1:
        raise ConfigError(f"GEMM shape (M, N, K) = ({m}, {n}, {k}) and num_sms = {num_sms} must be >= 1")
    return GemmShape(n, k, profile, num_sms, fp8=fp8, fp4=fp4)(m)


def hbm_efficiency(num_bytes: float, profile: Profile) -> float:
    """Streaming bandwidth / HBM spec for a kernel moving `num_bytes` (rises to the plateau)."""
    return profile.hbm_efficiency * num_bytes / (num_bytes + profile.hbm_half_saturation_bytes)


def kernel_floor_s(profile: Profile, launch: str = "graph") -> float:
    return launch_floor_s(profile.values, launch)


def memory_time_s(num_bytes: float, hbm_bytes_per_s: float, profile: Profile) -> float:
    if num_bytes <= 0:
        return 0.0
    return num_bytes / (hbm_bytes_per_s * hbm_efficiency(num_bytes, profile))


def gemm_time_s(m: int, n: int, k: int, bytes_moved: float, peak_flops: float, hbm_bytes_per_s: float,
                profile: Profile, num_sms: int, *, fp8: bool = False, fp4: bool = False,
                launch: str = "graph") -> float:
    """Seconds for one GEMM kernel: max(compute at shape efficiency, HBM streaming), floored."""
    compute_s = 2.0 * m * n * k / (peak_flops * gemm_efficiency(m, n, k, profile, num_sms, fp8=fp8, fp4=fp4))
    return max(compute_s, memory_time_s(bytes_moved, hbm_bytes_per_s, profile), kernel_floor_s(profile, launch))


def flash_prefill_efficiency(seq_len: int, profile: Profile) -> float:
    """Flash-attention forward throughput / dense peak at this (query) sequence length."""
    return profile.attn_prefill_efficiency * seq_len / (seq_len + profile.attn_prefill_half_seq)


# The flash-attention backward computes below its forward's FLOP rate: it recomputes the scores, keeps
# dQ, dK and dV accumulators and writes dQ with atomics or a second pass. Shah et al. 2024
# (FlashAttention-3, arXiv 2407.08608) plot forward and backward TFLOP/s of FlashAttention-2, cuDNN
# and FlashAttention-3 on H100 SXM5 (head dim 128, no causal mask, sequence 512 to 16k); backward /
# forward rate, mean of the three kernels: 0.66, 0.74, 0.79, 0.84, 0.86, 0.87 at 512, 1k, 2k, 4k, 8k,
# 16k (each kernel within 0.05 of the mean from 1k on). Least squares of R x s / (s + H) on them:
FLASH_BACKWARD_RATE_PLATEAU = 0.872
FLASH_BACKWARD_RATE_HALF_SEQ = 175.0
# Below the shortest length measured the rate is held at its value there (0.65 at 512): the fit's own
# extrapolation fell to 0.23 at 64 tokens, a backward 4.3x slower per FLOP than nothing measured shows.
FLASH_BACKWARD_RATE_SHORTEST_SEQ = 512.0


def flash_backward_rate(seq_len: float) -> float:
    """The flash-attention backward's FLOP rate over its forward's at this query length (per GPU; held
    at the shortest measured length's below it)."""
    seq_len = max(seq_len, FLASH_BACKWARD_RATE_SHORTEST_SEQ)
    return FLASH_BACKWARD_RATE_PLATEAU * seq_len / (seq_len + FLASH_BACKWARD_RATE_HALF_SEQ)


def attention_decode_time_s(kv_bytes: float, flops: float, peak_flops: float, hbm_bytes_per_s: float,
                            profile: Profile, *, launch: str = "graph") -> float:
    """Paged-attention decode: streams the KV cache at attn_decode_hbm_efficiency."""
    eff = profile.attn_decode_hbm_efficiency * kv_bytes / (kv_bytes + profile.hbm_half_saturation_bytes) \
        if kv_bytes > 0 else 1.0
    memory_s = kv_bytes / (hbm_bytes_per_s * eff) if kv_bytes > 0 else 0.0
    compute_s = flops / (peak_flops * profile.attn_prefill_efficiency)
    return max(memory_s, compute_s, kernel_floor_s(profile, launch))


def streaming_time_s(num_bytes: float, hbm_bytes_per_s: float, profile: Profile, *, launch: str = "graph") -> float:
    """Element-wise / norm / activation kernels: HBM-bound, floored."""
    return max(memory_time_s(num_bytes, hbm_bytes_per_s, profile), kernel_floor_s(profile, launch))
