"""The exact cache key: which engine sources it hashes (llm_analysis/exact/cache.py).

Torch-free and fast: the fingerprints are computed on a copy of the package's
sources, edited one file at a time.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import llm_analysis.exact.cache as cache

PACKAGE = Path(cache.__file__).resolve().parents[1]


@pytest.mark.parametrize("sources", [cache.DERIVED_SOURCES, cache.MAPPED_SOURCES])
def test_every_listed_source_exists(sources):
    # a renamed module would silently drop out of the key: every entry must match files
    for pattern in sources:
        assert cache.source_files((pattern,)), f"{pattern!r} matches no file of the package"


# package modules the counting path imports that hold no parameter or FLOP rule (times,
# memory, serving under load, output, names, errors, dtype and layout helpers; the catalogue
# lookups and the CLI entry the `config` namespace re-exports); hub.entry, which the
# module-tree path uses only for the verified-table fallback (its verdict has the
# MAPPED_SOURCES key); hub.source, from which it takes only the transformers log silencer.
# Any other import of a listed module must be listed itself
NOT_COUNTING = {"config", "units", "errors", "utils", "training", "report.render", "catalogue.model_lookup",
                "catalogue.lookup", "cli.fire_runner",
                "cost", "cost.calibrated", "cost.choice", "cost.precision", "cost.profiles", "cost.roofline",
                "quantities.activations", "quantities.group_times", "quantities.hardware", "quantities.memory",
                "quantities.state", "serving",
                "hub.entry", "hub.source",
                "report.collected_warnings",  # the facade's warnings list: no count reads it
                "quantities.arguments",  # the views' argument checks: they refuse a value or read a numpy
                                         # scalar as its Python number, never change a valid call's count
                "hub.errors",  # exception classes of the Hub import: a refusal's type, not a count
                "quantities.mirror_parts",  # the names 0.2.2 gave the latency parts: no count reads them
                "cost.model"}  # the timing view quantities/latency.py picks (forward_view): times, never counts


def _package_imports(source: str, module: str):
    """Package modules the source of `module` (dotted, relative to the package) imports,
    relative or absolute, lazy ones included (`from llm_analysis.x import y` names x, and
    x.y in case y is a module)."""
    import ast
    package_parts = module.split(".") if module.endswith("__init__") else module.split(".")[:-1]
    package_parts = [p for p in package_parts if p != "__init__"]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[:len(package_parts) - node.level + 1]
                found = ".".join(base + (node.module.split(".") if node.module else []))
            elif node.module and node.module.startswith(PACKAGE.name):
                found = node.module[len(PACKAGE.name):].lstrip(".")
            else:
                continue
            yield found
            yield from (f"{found}.{a.name}" if found else a.name for a in node.names)
        elif isinstance(node, ast.Import):
            yield from (a.name[len(PACKAGE.name) + 1:] for a in node.names if a.name.startswith(PACKAGE.name + "."))


def _module_file(module: str):
    stem = PACKAGE.joinpath(*module.split(".")) if module else PACKAGE
    return next((f.resolve() for f in (stem.with_suffix(".py"), stem / "__init__.py") if f.exists()), None)


def test_imports_are_read_both_ways():
    # the check below must see absolute imports (the package's style), lazy ones and relative ones
    source = ("import llm_analysis.exact.architectures as families\n"
              "from llm_analysis.model import Operator\n"
              "from .derive_roles import block_group\n"
              "def f():\n    from llm_analysis.exact.architectures.family import ClassRule\n")
    found = set(_package_imports(source, "exact.derive"))
    assert {"exact.architectures", "model", "exact.derive_roles", "exact.architectures.family"} <= found


@pytest.mark.parametrize("sources", [cache.DERIVED_SOURCES, cache.MAPPED_SOURCES])
def test_every_module_the_counting_path_imports_is_in_the_key(sources):
    # a module a listed one imports, left out of the key, could change a count behind a stale cache hit
    listed = {p.resolve() for p in cache.source_files(sources)}
    missing = set()
    for path in listed:
        name = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for module in _package_imports(path.read_text(), name):
            target = _module_file(module)
            if target is not None and target not in listed and module not in NOT_COUNTING:
                missing.add(module)
    assert not missing, f"add to exact/cache.py's sources (or to NOT_COUNTING with a reason): {sorted(missing)}"


@pytest.fixture
def package_copy(tmp_path):
    root = tmp_path / "llm_analysis"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__", "*.json"))
    yield root
    cache._fingerprints.clear()


def _fingerprints(root):
    cache._fingerprints.clear()
    return (cache.engine_fingerprint(cache.DERIVED_SOURCES, root),
            cache.engine_fingerprint(cache.MAPPED_SOURCES, root))


def _touch(root, rel):
    path = root / rel
    path.write_text(path.read_text() + "\n# edited\n")


def test_key_follows_the_modules_the_verdict_depends_on(package_copy):
    derived, mapped = _fingerprints(package_copy)
    assert derived != mapped

    _touch(package_copy, "cli/commands.py")  # the CLI does not count anything
    _touch(package_copy, "report/tables.py")
    assert _fingerprints(package_copy) == (derived, mapped)

    _touch(package_copy, "hub/mapping.py")  # the table path's mapping: only its verdicts
    derived2, mapped2 = _fingerprints(package_copy)
    assert derived2 == derived and mapped2 != mapped

    _touch(package_copy, "exact/probe.py")  # the module-tree path itself
    derived3, mapped3 = _fingerprints(package_copy)
    assert derived3 != derived and mapped3 != mapped2

    _touch(package_copy, "exact/architectures/funnel.py")  # a family's rule
    derived4, _ = _fingerprints(package_copy)
    assert derived4 != derived3

    _touch(package_copy, "model/records.py")  # the records that are counted
    assert _fingerprints(package_copy)[0] != derived4


def test_cache_key_depends_on_the_sources_given():
    cfg = {"model_type": "llama"}
    assert cache.cache_key(None, None, cfg, None, cache.DERIVED_SOURCES) != \
        cache.cache_key(None, None, cfg, None, cache.MAPPED_SOURCES)
    assert cache.cache_key(None, None, cfg, None, cache.DERIVED_SOURCES) == \
        cache.cache_key(None, None, cfg, None, cache.DERIVED_SOURCES)
