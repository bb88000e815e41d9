"""The package's modules import only downward (README "Project layout"): a cycle, an
import of `llm_analysis.analysis` from inside the package, or an import from a higher
layer fails here. Imports inside functions count too: a lazy import is still a
dependency."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Set

PACKAGE = Path(__file__).resolve().parents[1] / "llm_analysis"

# layer of each module: a folder (package) or a module; the most specific entry wins. A module may
# import its own layer or lower ones: config -> model description -> cost -> quantities ->
# orchestrators -> presentation -> facade -> planners / exact -> commands (DESIGN.md section 3).
LAYERS = [
    ("errors", "units", "utils", "cli.fire_runner"),
    ("schema",),
    ("catalogue", "hub", "config"),
    ("model",),
    ("cost", "quantities.group_times"),  # group_times: the accumulator cost models fill
    ("quantities",),
    ("inference", "training", "serving"),
    ("report",),
    ("facade", "cost.choice"),
    ("planner", "exact", "cost.calibration", "report.plan_chart"),
    ("cli", "__main__"),
    ("analysis", "__init__"),
]


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module: str) -> int:
    matches = [(len(n), i) for i, names in enumerate(LAYERS) for n in names
               if module == n or module.startswith(n + ".")]
    if not matches:
        raise AssertionError(f"module {module!r} has no layer in tests/test_layers.py LAYERS; add it")
    return max(matches)[1]


def _imports(path: Path, module: str) -> Set[str]:
    tree = ast.parse(path.read_text())
    package_parts = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[:len(package_parts) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                names = [target] if node.module else [".".join(base + [a.name]) for a in node.names]
            elif node.module and node.module.startswith("llm_analysis"):
                names = [node.module[len("llm_analysis."):]] if "." in node.module else [a.name for a in node.names]
            else:
                continue
            found.update(n for n in names if n)
        elif isinstance(node, ast.Import):
            found.update(a.name[len("llm_analysis."):] for a in node.names if a.name.startswith("llm_analysis."))
    return found


def _graph() -> Dict[str, Set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for target in _imports(path, name):
            # `from .views import params` may name a module or an attribute of a package
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                deps.add(target)
        graph[name] = deps
    return graph


def _upward(graph: Dict[str, Set[str]]) -> list:
    return [f"{m} (layer {_layer(m)}) imports {d} (layer {_layer(d)})"
            for m, deps in graph.items() for d in deps if _layer(d) > _layer(m)]


def test_no_module_imports_a_higher_layer():
    wrong = _upward(_graph())
    assert not wrong, "\n".join(wrong)


def test_nothing_inside_the_package_imports_analysis():
    users = [m for m, deps in _graph().items() if "analysis" in deps and m != "analysis"]
    assert not users, users


def test_no_import_cycle():
    graph = _graph()
    state: Dict[str, int] = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append(" -> ".join(stack[stack.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, cycles


def test_the_checker_sees_a_planted_upward_import(tmp_path):
    """The parser resolves a relative import inside a function, and the layer check flags it."""
    planted = tmp_path / "errors.py"
    planted.write_text("def f():\n    from .facade import LLMAnalysis\n    return LLMAnalysis\n")
    assert _imports(planted, "errors") == {"facade"}
    graph = _graph()
    graph["errors"] = graph["errors"] | {"facade"}
    assert _upward(graph) == ["errors (layer 0) imports facade (layer 8)"]
