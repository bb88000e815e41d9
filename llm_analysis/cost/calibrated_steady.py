"""The steady part of a calibrated decode program (cost/calibrated_programs.py `decode_program`):
what depends on the batch and the step count only, computed once per (b, n) by a function of its
own and kept (speed of new shapes under perf_model="calibrated", issue 10).

`steady_call` compiles that part and gives the lines that fetch its results; `group_lines` gives
the lines that finish the groups (`phase_programs._group_return`'s: each group's bound and
arithmetic intensity, the groups dict, the total) with those of a group made only of steady
operators computed in the steady part (the same expressions of the same sums: the same values).
"""

from __future__ import annotations

import ast
import re
from typing import Dict, List, Sequence, Set, Tuple

from llm_analysis.model.table_code import compile_function
from llm_analysis.cost.phase_programs import SUMS
from llm_analysis.cost.program_reuse import NAME, rename, reuse_lines, stored_names

# (b, n) -> the steady part of a decode program (`steady_call`); cleared when this full
STEADY_MEMO_LIMIT = 1024  # (an entry holds ~2 kB: a few tens of floats)


def _read_before_set(main: List[str]) -> Set[str]:
    """The names `main` reads before a line of its own sets them (what it needs from elsewhere)."""
    needed: Set[str] = set()
    done: Set[str] = set()
    for line in main:
        text = line.strip()
        stmt = None if line.startswith(" ") or text.endswith(":") else ast.parse(text).body[0]
        if isinstance(stmt, ast.Assign):
            needed |= {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)} - done
            done |= {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        else:
            needed |= set(NAME.findall(line)) - done
    return needed


def steady_call(pre: List[str], main: List[str], ns: Dict) -> Tuple[List[str], List[str]]:
    """`pre` as its own function of (b, x0, n) (x0 appears only times 0.0), its results kept per
    (b, n): (lines that fetch them and unpack what `main` reads before setting, the names unpacked)."""
    names = sorted(stored_names(pre) & _read_before_set(main))
    if not names:
        return [], []
    body = reuse_lines(pre + [f"return ({', '.join(names)},)"])
    # a name the steady part found equal to another (program_reuse: twins) is read as that one in
    # `main` too, and returned once; one equal to an argument (b, x0, n) is not returned at all
    same = dict(zip(names, (n.id for n in ast.parse(body[-1].strip()).body[0].value.elts)))
    main[:] = [rename(line, same) for line in main]
    names = sorted(set(same.values()) - {"b", "x0", "n"})
    ns["steady_fn"] = compile_function("calibrated_decode_steady", "b, x0, n",
                                       body[:-1] + [f"return ({', '.join(names)},)"],
                                       {k: v for k, v in ns.items() if not k.startswith("_")})
    ns["steady_memo"] = {}
    return ["st = steady_memo.get((b, n))", "if st is None:",
            f"    if len(steady_memo) >= {STEADY_MEMO_LIMIT}: steady_memo.clear()",
            "    st = steady_memo[b, n] = steady_fn(b, x0, n)", f"{', '.join(names)}, = st"], names


def group_lines(order: Sequence[str], steady_groups: Sequence[int]) -> Tuple[List[str], List[str]]:
    """(lines for the steady part, lines for the program) finishing the groups as `GroupTimes.finish()`
    leaves them: group g's bound (`bound{g}`) and arithmetic intensity (`ai{g}`) where its sums are
    complete, then the groups dict and their total latency. A steady group's dict is built once in
    the steady part (`grp{g}`, kept with it: never handed out) and each call returns a copy of it
    (the same keys in the same order, the same values: a dict of its own)."""
    pre: List[str] = []
    main: List[str] = []
    entries = {}
    for g in range(len(order)):
        lines = pre if g in steady_groups else main
        lines += [f"bound{g}, top = ('memory', mem{g}) if mem{g} > cmp{g} else ('compute', cmp{g})",
                  f"if cmm{g} > top: bound{g} = 'communication'", f"ai{g} = flo{g} / byt{g} if byt{g} else 0.0"]
        entries[g] = "{" + ", ".join(f"{s!r}: {v}{g}" for s, v in SUMS) + \
            f", 'bound': bound{g}, 'arithmetic_intensity': ai{g}}}"
        if g in steady_groups:
            pre.append(f"grp{g} = {entries[g]}")
            entries[g] = f"grp{g}.copy()"
    groups = ", ".join(f"{k!r}: {entries[g]}" for g, k in enumerate(order))
    return pre, main + [f"groups = {{{groups}}}", "total_s = 0" + "".join(f" + lat{g}" for g in range(len(order)))]
