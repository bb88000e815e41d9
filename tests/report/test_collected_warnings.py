"""`collecting_warnings()` (report/collected_warnings.py): each call collecting at the time gets every
warning the package logs meanwhile, once; nothing is collected outside a call, and no handler is left on
the package's logger afterwards (Python's last-resort stderr handler works as before outside calls)."""

import logging

from llm_analysis.report.collected_warnings import PACKAGE_LOGGER, collecting_warnings

LOG = logging.getLogger(PACKAGE_LOGGER + ".test")


def test_nested_calls_each_get_the_warnings_once():
    handlers = list(logging.getLogger(PACKAGE_LOGGER).handlers)
    LOG.warning("before any call")
    with collecting_warnings() as outer:
        LOG.warning("a")
        with collecting_warnings() as inner:
            LOG.warning("b")
            LOG.warning("b")
        LOG.warning("c")
        LOG.warning("a")
    LOG.warning("after every call")
    assert outer == ["a", "b", "c"] and inner == ["b"]
    assert logging.getLogger(PACKAGE_LOGGER).handlers == handlers


def test_two_calls_with_the_same_warnings_are_told_apart():
    """Removal is by identity: an inner list equal to the outer one must not take the outer one's place."""
    with collecting_warnings() as outer:
        LOG.warning("x")
        with collecting_warnings() as inner:
            LOG.warning("x")
        LOG.warning("y")
    assert outer == ["x", "y"] and inner == ["x"]
