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
# memory, output, names, errors, dtype and layout helpers); hf_import, which the module-tree
# path uses only for the verified-table fallback (its verdict has the MAPPED_SOURCES key);
# hub_source, from which it takes only the transformers log silencer. Any other import of a
# listed module must be listed itself
NOT_COUNTING = {"config", "constant", "context_limit", "cost", "cost.calibrated", "cost.profiles", "cost.roofline",
                "errors", "facade_output", "facade_perf", "facade_updates", "model_lookup", "precision",
                "training", "views", "catalogue", "cli_support", "formats", "hsdp", "utils", "hf_import", "hub_source"}


def _package_imports(path: Path):
    """Package modules a source file imports (relative imports, lazy ones included)."""
    import ast
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    base_parts = parts if path.name == "__init__.py" else parts[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = base_parts[:len(base_parts) - node.level + 1]
            names = [node.module] if node.module else [a.name for a in node.names]
            for name in names:
                yield ".".join(base[1:] + name.split("."))


@pytest.mark.parametrize("sources", [cache.DERIVED_SOURCES, cache.MAPPED_SOURCES])
def test_every_module_the_counting_path_imports_is_in_the_key(sources):
    # a module a listed one imports, left out of the key, could change a count behind a stale cache hit
    listed = {p.resolve() for p in cache.source_files(sources)}
    missing = set()
    for path in listed:
        for mod in _package_imports(path):
            stem = PACKAGE.joinpath(*mod.split("."))
            target = next((f.resolve() for f in (stem.with_suffix(".py"), stem / "__init__.py") if f.exists()), None)
            if target is not None and target not in listed and mod not in NOT_COUNTING:
                missing.add(mod)
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

    _touch(package_copy, "cli.py")  # the CLI does not count anything
    _touch(package_copy, "presentation/tables.py")
    assert _fingerprints(package_copy) == (derived, mapped)

    _touch(package_copy, "hub_generic.py")  # the table path's mapping: only its verdicts
    derived2, mapped2 = _fingerprints(package_copy)
    assert derived2 == derived and mapped2 != mapped

    _touch(package_copy, "exact/probe.py")  # the module-tree path itself
    derived3, mapped3 = _fingerprints(package_copy)
    assert derived3 != derived and mapped3 != mapped2

    _touch(package_copy, "operators/records.py")  # the records that are counted
    assert _fingerprints(package_copy)[0] != derived3


def test_cache_key_depends_on_the_sources_given():
    cfg = {"model_type": "llama"}
    assert cache.cache_key(None, None, cfg, None, cache.DERIVED_SOURCES) != \
        cache.cache_key(None, None, cfg, None, cache.MAPPED_SOURCES)
    assert cache.cache_key(None, None, cfg, None, cache.DERIVED_SOURCES) == \
        cache.cache_key(None, None, cfg, None, cache.DERIVED_SOURCES)
