"""Values computed once in generated straight-line code (speed of new shapes under
perf_model="calibrated", issue 10).

The calibrated programs (cost/calibrated_programs.py) write each operator out from its own
figures, so operators whose figures coincide (the o projection's FLOPs and bytes are the q
projection's, the two reduce collectives of a layer take the same time) repeat the same
expressions under new names, and some lines set names nothing reads (`f0 = 0.0` of an
operator with no FLOPs, `cb0 = False` of a kernel always filed under memory). `reuse_lines`
rewrites such a body:

- a line `name = expr` whose expression an earlier line already computed (the same syntax
  tree, once earlier aliases are substituted) is dropped and later reads of `name` read the
  earlier name; `name = other` (a bare name) likewise;
- an accumulation `acc += expr` (or `v = expr` of a name set more than once) whose
  expression an earlier line computed reads that line's name;
- a line `name = expr` whose name is never read is dropped;
- a run of accumulations `acc += term` of qualifying terms, with no other line reading or
  setting `acc` in between, becomes one line where the last stood, `acc = acc + t1 + t2 ...`:
  Python adds left to right, so it is the same additions in the same order (each term has
  the value it had on its own line), with `acc` loaded and stored once; likewise a run of
  blocks `if c:` / `    a += t` / `else:` / `    m += u` on one condition `c` set once (each
  block takes the same branch) becomes one block adding the run's terms.

Only expressions without calls whose names are all set once, by a statement of the body's
top level (or never: arguments and constants), qualify: such an expression has one value
wherever it stands, so the rewritten body computes the same floats, in the same operations,
as the written one (Python evaluates the same expression tree the same way every time).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from typing import Dict, List, Optional, Set, Tuple

# a name in a line: not part of a number (1e-06), an attribute (.get) or a string ('memory')
NAME = re.compile(r"(?<![\w.'])[A-Za-z_]\w*")


def rename(line: str, names: Dict[str, str]) -> str:
    """The line with each name read as `names` maps it (others as they are)."""
    return NAME.sub(lambda m: names.get(m.group(0), m.group(0)), line)


def _function(body: List[str]) -> ast.FunctionDef:
    return ast.parse("def _f():\n" + "".join(f"    {line}\n" for line in body)).body[0]


def stored_names(body: List[str]) -> Set[str]:
    """The names the body's lines set (assignment targets, tuples' included)."""
    return {n.id for n in ast.walk(_function(body)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _stable_names(body: List[str]) -> Tuple[Set[str], Set[str]]:
    """(names set exactly once, by a top-level statement; names set anywhere)."""
    fn = _function(body)
    stores = Counter(n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    top = Counter(n.id for stmt in fn.body if isinstance(stmt, ast.Assign) for t in stmt.targets
                  for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return {k for k, c in stores.items() if c == 1 and top[k] == 1}, set(stores)


def _pure(value: ast.expr, stable: Set[str], stored: Set[str]) -> bool:
    """An expression with one value wherever it stands: no call, every name set once (or never)."""
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            return False
        if isinstance(node, ast.Name) and node.id in stored and node.id not in stable:
            return False
    return True


def _statement(line: str) -> Optional[ast.stmt]:
    """The statement of a line (None for a block's `if ...:` / `else:` header)."""
    text = line.strip()
    return None if text.endswith(":") else ast.parse(text).body[0]


def _simple_target(stmt: Optional[ast.stmt]) -> Optional[str]:
    """The name of a `name = expr` statement, else None."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id
    return None


def _rewrite(line: str, stmt: ast.stmt, name: str) -> str:
    """The line with its expression replaced by `name` (an assignment or an accumulation)."""
    indent = line[:len(line) - len(line.lstrip())]
    if isinstance(stmt, ast.AugAssign):
        return f"{indent}{stmt.target.id} {line.strip().split(' ', 2)[1]} {name}"
    return f"{indent}{_simple_target(stmt)} = {name}"


def _reuse(body: List[str], stable: Set[str], stored: Set[str]) -> List[str]:
    """The first two rules of the module docstring, line by line."""
    alias: Dict[str, str] = {}
    seen: Dict[str, str] = {}  # ast.dump of a qualifying expression -> the name holding it
    out = []
    for line in body:
        line = rename(line, alias)
        stmt = _statement(line)
        value = getattr(stmt, "value", None)
        if (value is None or isinstance(value, ast.Constant) or not isinstance(stmt, (ast.Assign, ast.AugAssign))
                or not _pure(value, stable, stored)):  # (a constant is loaded as fast as a name)
            out.append(line)
            continue
        target, key = _simple_target(stmt), ast.dump(value)
        top = not line.startswith(" ")
        if top and target in stable and isinstance(value, ast.Name):
            alias[target] = value.id
        elif top and target in stable and key in seen:
            alias[target] = seen[key]
        elif key in seen and (isinstance(stmt, ast.AugAssign) or target is not None):
            out.append(_rewrite(line, stmt, seen[key]))
        else:
            if top and target in stable:
                seen[key] = target
            out.append(line)
    return out


def _drop_unread(body: List[str], stable: Set[str], stored: Set[str]) -> List[str]:
    """The last rule: lines setting a name nothing reads, until none is left."""
    while True:
        targets = [_simple_target(_statement(line)) if not line.startswith(" ") else None for line in body]
        reads = Counter()
        for line, target in zip(body, targets):
            reads.update(NAME.findall(line.split("=", 1)[1] if target else line))
        dead = {i for i, (line, t) in enumerate(zip(body, targets))
                if t in stable and not reads[t] and _pure(_statement(line).value, stable, stored)}
        if not dead:
            return body
        body = [line for i, line in enumerate(body) if i not in dead]


def _term(value: ast.expr, text: str) -> str:
    """A term of a sum as written after `acc + `: bracketed unless a name or a number."""
    return text if isinstance(value, (ast.Name, ast.Constant)) else f"({text})"


def _fuse_sums(body: List[str], stable: Set[str], stored: Set[str]) -> List[str]:
    """The accumulation rule of the module docstring."""
    runs: Dict[str, List[Tuple[int, str]]] = {}  # acc -> its open run: (line index, term)
    fused: Dict[int, str] = {}  # line index -> its new text ("" : dropped)

    def close(acc: str) -> None:
        run = runs.pop(acc, [])
        if len(run) > 1:
            fused.update({i: "" for i, _ in run})
            fused[run[-1][0]] = f"{acc} = {acc}" + "".join(f" + {term}" for _, term in run)

    for i, line in enumerate(body):
        stmt = None if line.startswith(" ") else _statement(line)
        acc = stmt.target.id if (isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add)
                                 and isinstance(stmt.target, ast.Name)
                                 and _pure(stmt.value, stable, stored)) else None
        for name in set(NAME.findall(line)) - {acc}:
            if name in runs:  # read or set otherwise: the run ends before this line
                close(name)
        if acc is not None:
            runs.setdefault(acc, []).append((i, _term(stmt.value, line.split("+=", 1)[1].strip())))
    for acc in list(runs):
        close(acc)
    return [fused.get(i, line) for i, line in enumerate(body) if fused.get(i, line)]


def _branch(body: List[str], i: int, stable: Set[str], stored: Set[str]) -> Optional[Tuple[str, str, str, str, str]]:
    """(c, a, t, m, u) of a block `if c:` / `    a += t` / `else:` / `    m += u` at line i whose
    condition is a name set once and whose terms qualify; else None."""
    if i + 3 >= len(body) or not body[i].startswith("if ") or body[i + 2] != "else:":
        return None
    cond = body[i][3:-1] if body[i].endswith(":") else ""
    adds = [_statement(body[k]) for k in (i + 1, i + 3) if body[k].startswith("    ") and not body[k].startswith("     ")]
    if cond not in stable or len(adds) != 2 or not all(
            isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add) and isinstance(st.target, ast.Name)
            and _pure(st.value, stable, stored) for st in adds):
        return None
    (a, t), (m, u) = [(st.target.id, _term(st.value, body[k].split("+=", 1)[1].strip()))
                      for st, k in zip(adds, (i + 1, i + 3))]
    return cond, a, t, m, u


def _fuse_branches(body: List[str], stable: Set[str], stored: Set[str]) -> List[str]:
    """The block rule of the module docstring (after `_fuse_sums`)."""
    out: List[str] = []
    runs: Dict[Tuple[str, str, str], List[Tuple[int, str, str]]] = {}  # (c, a, m) -> [(out index, t, u)]
    i = 0
    while i < len(body):
        found = _branch(body, i, stable, stored)
        names = set(NAME.findall("\n".join(body[i:i + 4] if found else body[i:i + 1])))
        for key in [k for k in runs if k[1] in names or k[2] in names]:
            if found is None or key != (found[0], found[1], found[3]):
                runs.pop(key)  # (read or set otherwise: a later block starts a run of its own)
        if found is None:
            out.append(body[i])
            i += 1
            continue
        cond, a, t, m, u = found
        run = runs.setdefault((cond, a, m), [])
        for k, _, _ in run:
            out[k] = ""  # (the run's blocks so far: added by this one)
        run.append((len(out), t, u))
        out.append("\n".join(body[i:i + 4]) if len(run) == 1 else
                   f"if {cond}:\n    {a} = {a}" + "".join(f" + {x}" for _, x, _ in run) +
                   f"\nelse:\n    {m} = {m}" + "".join(f" + {y}" for _, _, y in run))
        i += 4
    return [line for block in out if block for line in block.split("\n")]


def reuse_lines(body: List[str]) -> List[str]:
    """The body (lines of one function, blocks indented by four spaces) with repeated values
    computed once, unread names left out and runs of accumulations added in one line (the
    module docstring's rules)."""
    stable, stored = _stable_names(body)
    body = _fuse_sums(_drop_unread(_reuse(body, stable, stored), stable, stored), stable, stored)
    return _fuse_branches(body, stable, stored)
