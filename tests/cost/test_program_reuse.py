"""cost/program_reuse.py: repeated values of generated straight-line code computed once,
unread names left out, and nothing else changed. Expected bodies are written out by hand
from the module's rules; the rewritten functions must return the written ones' floats."""

from __future__ import annotations

import math

from llm_analysis.cost.program_reuse import reuse_lines
from llm_analysis.model.table_code import compile_function


def test_twin_values_read_the_first():
    body = ["f0 = b*x*3.0", "u0 = 0.0", "g0 = f0 / 7.0", "f1 = b*x*3.0", "g1 = f1 / 7.0", "acc = 0.0",
            "acc += g0", "acc += f1 / 7.0", "m = b", "return acc + g1 + m"]
    # f1 is f0 (same tree), so g1 is g0; `acc += f1 / 7.0` reads g0; u0 is never read; m is b;
    # the two accumulations are added in one line
    assert reuse_lines(body) == ["f0 = b*x*3.0", "g0 = f0 / 7.0", "acc = 0.0", "acc = acc + g0 + g0",
                                 "return acc + g0 + b"]


def test_runs_of_sums_end_where_the_sum_is_read():
    body = ["s = 0.0", "t = b * 2.0", "s += t", "s += b * 3.0", "k = b * 5.0", "k = k + 1.0", "s += k",
            "s += t", "u = s * 2.0", "s += x", "s += t", "return s, u"]
    # `s += k` reads k (set twice): it stays where it is and ends the run; `u = s * 2.0` reads s
    assert reuse_lines(body) == ["s = 0.0", "t = b * 2.0", "s = s + t + (b * 3.0)", "k = b * 5.0",
                                 "k = k + 1.0", "s += k", "s += t", "u = s * 2.0", "s = s + x + t", "return s, u"]


def test_names_set_twice_and_calls_are_kept():
    body = ["t = b * 2.0", "if t < 1.0: t = 1.0", "u = b * 2.0", "v = t * 3.0", "w = t * 3.0",
            "c0 = f(b)", "c1 = f(b)", "return u + v + w + c0 + c1"]
    # t is set twice, so t * 3.0 may differ between lines: v and w both stay; calls are not reused
    assert reuse_lines(body) == body


def test_blocks_keep_their_lines():
    body = ["c = b * 2.0", "m = b * 3.0", "cb = c >= m", "lat = cmp = mem = 0.0", "if cb:", "    cmp += b * 2.0",
            "else:", "    mem += b * 3.0", "dead = False", "return cmp, mem"]
    assert reuse_lines(body) == ["c = b * 2.0", "m = b * 3.0", "cb = c >= m", "lat = cmp = mem = 0.0", "if cb:",
                                 "    cmp += c", "else:", "    mem += m", "return cmp, mem"]


def test_same_floats():
    """A body with twins, accumulations in order and a clamp: the same floats at many inputs."""
    body = ["f4 = b*x*8388608.0", "b4 = (8388608.0 + b*x*10240.0)", "m4 = (b4 + 1048576.0) / 1400381563509.6885",
            "f8 = b*x*8388608.0", "b8 = (8388608.0 + b*x*10240.0)", "m8 = (b8 + 1048576.0) / 1400381563509.6885",
            "c8 = f8 / (312e12 * 0.61 * x / (x + 512.0))", "t8 = c8 if c8 >= m8 else m8",
            "if t8 < 5.8e-07: t8 = 5.8e-07", "lat = 0.0", "lat += 32 * m4", "lat += 32 * t8", "lat += 32 * m8",
            "rt = 0 + 32 * (b4 / 2039e9) + 32 * (b8 / 2039e9)", "return lat, rt, f4 + f8"]
    written = compile_function("written", "b, x", body)
    rewritten = compile_function("rewritten", "b, x", reuse_lines(body))
    assert len(reuse_lines(body)) < len(body)
    for b in (1, 3, 7, 64):
        for x in (1, 17, 511, 4097, 1e5 + 3):
            got, want = rewritten(b, x), written(b, x)
            assert [v.hex() for v in got] == [float(v).hex() for v in want] and not any(map(math.isnan, got))


def test_runs_of_blocks_on_one_condition():
    body = ["c = b * 2.0", "m = b * 3.0", "cb = c >= m", "cmp = mem = 0.0",
            "if cb:", "    cmp += c", "else:", "    mem += m", "u = c * 4.0",
            "if cb:", "    cmp += u", "else:", "    mem += u", "v = cmp * 1.0",
            "if cb:", "    cmp += c", "else:", "    mem += m", "return cmp, mem, v"]
    # cb is set once: both first blocks take the same branch and add in one line where the second
    # stood; `v = cmp * 1.0` reads cmp, so the third block stays as it is
    want = ["c = b * 2.0", "m = b * 3.0", "cb = c >= m", "cmp = mem = 0.0", "u = c * 4.0",
            "if cb:", "    cmp = cmp + c + u", "else:", "    mem = mem + m + u", "v = cmp * 1.0",
            "if cb:", "    cmp += c", "else:", "    mem += m", "return cmp, mem, v"]
    assert reuse_lines(body) == want
    written, rewritten = compile_function("w", "b", body), compile_function("r", "b", want)
    assert all(written(b) == rewritten(b) for b in (-3.0, 0.5, 7.0))
