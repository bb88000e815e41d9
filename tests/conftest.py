"""Shared test fixtures: the exact path's cache directory, an analysis builder and the loopback Hub.

Test modules mirror the package's folders (tests/hub for llm_analysis/hub, ...); the helpers
every folder uses (the loopback Hub server, the exact-path pairs, the planner's reproduction
check) live in tests/support/, put on sys.path here so a test imports them by name."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

SUPPORT = Path(__file__).resolve().parent / "support"
if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))

from builders import build_analysis  # noqa: E402  (tests/support/builders.py)


@pytest.fixture(autouse=True)
def package_logger_restored():
    """An in-process CLI run sets the package logger's level and adds its stderr handler
    (cli/fire_runner.configure_logging), and some helpers silence warnings (logging.disable): all
    undone after each test, so that whether a later test's analysis logs its warnings does not depend
    on which test ran before it."""
    logger = logging.getLogger("llm_analysis")
    level, handlers, disabled = logger.level, list(logger.handlers), logging.root.manager.disable
    yield
    logging.disable(disabled)  # a helper that silenced warnings and did not restore them
    logger.setLevel(level)
    for handler in list(logger.handlers):
        if handler not in handlers:
            logger.removeHandler(handler)


@pytest.fixture
def exact_cache(tmp_path, monkeypatch):
    """A fresh, private cache for the exact path (derived descriptions), one per test."""
    path = tmp_path / "exact-cache"
    monkeypatch.setenv("LLM_ANALYSIS_CACHE", str(path))
    return path


@pytest.fixture
def shared_exact_cache(tmp_path_factory, monkeypatch):
    """One exact-path cache for the whole session (tests that derive the same models)."""
    path = tmp_path_factory.getbasetemp() / "exact-cache"
    monkeypatch.setenv("LLM_ANALYSIS_CACHE", str(path))
    return path


@pytest.fixture
def analysis_builder():
    """`build_analysis(model, gpu=..., dtype=..., **parallelism_and_options)` (tests/support/builders.py)."""
    return build_analysis


@pytest.fixture
def loopback_hub():
    """Start a Hugging Face Hub server on 127.0.0.1 (tests/support/hub_server.py):
    `hub = loopback_hub({repo_id: {revision: {filename: bytes}}}, **FakeHub options)`; every hub a
    test starts is stopped after it."""
    from hub_server import FakeHub
    started = []

    def start(repos, **kw):
        hub = FakeHub(repos, **kw)
        hub.start()
        started.append(hub)
        return hub

    yield start
    for hub in started:
        hub.stop()


@pytest.fixture(scope="module")
def quiet_package_warnings():
    """Warnings silenced while one module runs (`pytestmark = pytest.mark.usefixtures(...)`), for modules
    whose analyses warn of nothing their tests check: not at import, where a disable silenced every
    module collected after it too."""
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)
