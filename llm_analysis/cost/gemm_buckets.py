"""Which candidate tile wins a GEMM over a whole range ("bucket") of M, so that the GEMM
efficiency of a new M (gemm.GemmShape) is one formula instead of the search over tiles.

A tile of height tm covers M in ceil(M / tm) row tiles. For g dividing tm,
ceil(ceil(M / g) / (tm / g)) = ceil(M / tm), so every M with the same q = ceil(M / g) has
the same row tiles, split-K and waves under that tile: its fill (tile x wave quantisation) is
M x a constant of the tile, and the tiles keep their order at every M of the bucket. The best
one at the bucket's last M is then `_best_tile`'s choice at all of them, unless another comes
within `_WIN_MARGIN` (rounding could order the two either way: such buckets are left to the
search). Its float at M is computed by the search's own operations (the same float).

Two widths: the coarse one is the gcd of the heights of every tile but the least efficient ones
(rel 0.5 16-row tiles in the shipped profiles), which are then left out; that holds where the
winner's fill over the whole bucket stays above their relative efficiency (no fill exceeds it).
Elsewhere (small M) the fine width, the gcd of all the heights, decides."""

from __future__ import annotations

import math
from typing import Tuple

# two candidate tiles whose fills differ by less than this share are left to the search (each
# fill is three roundings, ~1e-16 relative, from its exact value: far below this margin)
_WIN_MARGIN = 1e-9
_KEEP = 1 - _WIN_MARGIN


def wave_fill(tiles: int, splitk_cap: int, sms: int, tail: float = 1.0) -> float:
    """Share of the SM slots of its waves that `tiles` output tiles keep busy. Split-K
    (CUTLASS/cuBLAS): a GEMM with fewer tiles than SMs cuts K into slices of at least
    gemm_splitk_min_k (splitk_cap = K // that) so idle SMs share the tiles' main loops:
    max(1, min(sms // tiles, splitk_cap)) splits, written without the calls.
    `tail` (the profile's gemm_wave_tail): the share of the idle slots the GEMM pays, 1 for kernels
    that run whole waves of tiles (the last one partly empty) and whole splits; 0 for a stream-K
    schedule, which spreads the main-loop iterations evenly over the SMs (Osama et al. 2023, arXiv
    2301.03598): no idle tail, and K split as finely as its slices allow."""
    work = tiles
    if tiles < sms:
        splits = sms // tiles
        if splits > splitk_cap:
            splits = splitk_cap
        if splits > 1:
            work = tiles * splits
        if tail == 1.0:
            return work / (-(-work // sms) * sms)
        spread = max(tiles, min(tiles * splitk_cap, sms))  # stream-K's busy slots
        return (work + (1.0 - tail) * (spread - work)) / sms
    if tail == 1.0:
        return work / (-(-work // sms) * sms)
    slots = -(-work // sms) * sms
    return work / (work + tail * (slots - work))


def bucket_levels(tiles: tuple) -> Tuple[int, tuple, float, int]:
    """(coarse width, the tiles whose heights it divides, the largest relative efficiency of the
    others (-1.0: none), fine width) of `GemmShape.tiles`."""
    fine = math.gcd(*(t[0] for t in tiles))
    least = min(t[4] for t in tiles)
    kept = [t[0] for t in tiles if t[4] > least]
    coarse = math.gcd(*kept) if kept else fine
    left_out = [t[4] for t in tiles if t[0] % coarse]
    return coarse, tuple(t for t in tiles if t[0] % coarse == 0), max(left_out, default=-1.0), fine


def tile_winner(tiles: tuple, n: int, sms: int, g: int, q: int, left_out_rel: float, tail: float = 1.0):
    """(relative efficiency, tiles_m x tm x padded N, wave fill) of the tile the search picks at
    every M with ceil(M / g) = q among `tiles` (heights multiples of g; those left out fill at
    most `left_out_rel`), or () when no tile wins the whole bucket for sure."""
    m_last = q * g
    mn, best, second, winner = m_last * n, -1.0, -1.0, ()
    for tm, tile_area, tiles_n, splitk_cap, rel in tiles:
        if rel < best * _KEEP:  # (most efficient first: no later tile comes close)
            break
        tiles_m = -(-q // (tm // g))  # = ceil(M / tm) at every M of the bucket
        wave = wave_fill(tiles_m * tiles_n, splitk_cap, sms, tail)
        fill = rel * (mn / (tiles_m * tile_area) * wave)
        if fill > best:
            second, best, winner = best, fill, (rel, tiles_m * tile_area, wave)
        elif fill > second:
            second = fill
    if second >= best * _KEEP:
        return ()
    # the winner's fill at the bucket's first M (it grows with M), against the tiles left out
    if best * ((m_last - g + 1) / m_last) * _KEEP <= left_out_rel:
        return ()
    return winner
