"""`collecting_warnings()` (report/collected_warnings.py): each call collecting at the time gets every
warning the package gives meanwhile (`errors.warn`), once; nothing is collected outside a call, no handler is
left on the package's logger afterwards (Python's last-resort stderr handler works as before outside calls),
and what a summary's `warnings` holds does not depend on the caller's logging setup."""

import logging

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig
from llm_analysis.errors import warn
from llm_analysis.report.collected_warnings import collecting_warnings

PACKAGE_LOGGER = "llm_analysis"
_LOG = logging.getLogger(PACKAGE_LOGGER + ".test")


class LOG:  # (the tests' warnings, given the package's way)
    @staticmethod
    def warning(msg):
        warn(_LOG, msg)


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


@pytest.fixture
def restored_logging():
    logger = logging.getLogger(PACKAGE_LOGGER)
    level = logger.level
    yield logger
    logger.setLevel(level)
    logging.disable(logging.NOTSET)


def _attention_dp_warnings():
    # attention_dp_size > 1 is read by serve() only: inference() warns of it (schema/parallelism.py)
    a = LLMAnalysis("meta-llama/Llama-3.1-8B", "h100-sxm-80gb",
                    parallelism_config=ParallelismConfig(tp_size=2, attention_dp_size=2))
    return a.inference(batch_size_per_gpu=1, seq_len=100)["warnings"]


def test_the_summary_warnings_do_not_depend_on_the_callers_logging(restored_logging):
    shown = _attention_dp_warnings()
    assert len(shown) == 1 and "attention_dp_size = 2" in shown[0]
    restored_logging.setLevel(logging.ERROR)  # an application silencing the package's console lines
    assert _attention_dp_warnings() == shown
    logging.disable(logging.WARNING)
    assert _attention_dp_warnings() == shown


def test_a_dense_models_layout_warning_names_no_experts():
    # a dense model has no experts: moe_ep_size (filled in to match the worker) is not the user's, and the
    # warning must not describe experts split tp_size ways
    (message,) = _attention_dp_warnings()
    assert "moe_ep_size" not in message and "expert" not in message


def test_serve_files_its_warnings_as_inference_does():
    # README: warnings appear "in the JSON under the same names" for every call. fp8 on a GPU without fp8
    # tensor cores (V100) is timed at the fp16 peak and said so (cost/precision.py): serve() files it too.
    a = LLMAnalysis("facebook_opt-1.3b", "v100-sxm-32gb", "fp8")
    warned = a.inference(batch_size_per_gpu=1, seq_len=100)["warnings"]
    assert any("no fp8 tensor cores" in w for w in warned)
    assert a.serve(concurrency=2, input_len=100, output_len=10)["warnings"] == warned
    # and a later call of the same analysis still says it (not only the call that first built the cost model)
    assert a.inference(batch_size_per_gpu=2, seq_len=300)["warnings"] == warned
    assert LLMAnalysis("facebook_opt-1.3b", "a100-sxm-80gb").serve(concurrency=2, input_len=100,
                                                                     output_len=10)["warnings"] == []
