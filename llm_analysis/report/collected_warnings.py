"""The warnings of one analysis call, collected for the report and the JSON summary.

The package logs a warning where it notices something (fp8 timed at the 16-bit peak on a GPU
without fp8 units, a prompt past the trained context, ...). A reader of the report or of the
JSON should not have to watch stderr for them: `collecting_warnings()` gathers every warning the
package logs while a call runs, once each, and the facade files them under the summary's
`warnings` (the report prints them in its Warnings block). They are still logged as before, for
library users who route logging themselves.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterable, Iterator, List

PACKAGE_LOGGER = "llm_analysis"


class _Collector(logging.Handler):
    """Files each warning, once, into the list of every call collecting at that moment (`open`)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.open: List[List[str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        for messages in self.open:
            if message not in messages:  # the same warning from several cost models: once
                messages.append(message)


# one handler for every call: attached to the package's logger only while a call collects, so that
# outside calls a library user's logging (or Python's last-resort stderr handler) is as before
_COLLECTOR = _Collector()


@contextmanager
def collecting_warnings() -> Iterator[List[str]]:
    """Yields the list that receives, once each, the warnings logged under `llm_analysis` meanwhile."""
    logger = logging.getLogger(PACKAGE_LOGGER)
    messages: List[str] = []
    if not _COLLECTOR.open:
        logger.addHandler(_COLLECTOR)
    _COLLECTOR.open.append(messages)
    try:
        yield messages
    finally:
        # (by identity: two lists of the same messages compare equal)
        del _COLLECTOR.open[next(i for i, m in enumerate(_COLLECTOR.open) if m is messages)]
        if not _COLLECTOR.open:
            logger.removeHandler(_COLLECTOR)


def merged(*groups: Iterable[str]) -> List[str]:
    """The messages of all groups in order, each once."""
    out: List[str] = []
    for group in groups:
        out.extend(m for m in group if m not in out)
    return out
