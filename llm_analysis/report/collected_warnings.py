"""The warnings of one analysis call, collected for the report and the JSON summary.

The package warns where it notices something (fp8 timed at the 16-bit peak on a GPU without fp8
units, a prompt past the trained context, ...), always through `errors.warn`. A reader of the report
or of the JSON should not have to watch stderr for them: `collecting_warnings()` gathers every warning
the package gives while a call runs, once each, and the facade files them under the summary's
`warnings` (the report prints them in its Warnings block). They are still logged as before, for library
users who route logging themselves; what the summary holds does not depend on that logging setup.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable, Iterator, List

from llm_analysis.errors import OPEN_WARNING_LISTS


@contextmanager
def collecting_warnings() -> Iterator[List[str]]:
    """Yields the list that receives, once each, the warnings the package gives meanwhile (`errors.warn`)."""
    messages: List[str] = []
    OPEN_WARNING_LISTS.append(messages)
    try:
        yield messages
    finally:
        # (by identity: two lists of the same messages compare equal)
        del OPEN_WARNING_LISTS[next(i for i, m in enumerate(OPEN_WARNING_LISTS) if m is messages)]


def merged(*groups: Iterable[str]) -> List[str]:
    """The messages of all groups in order, each once."""
    out: List[str] = []
    for group in groups:
        out.extend(m for m in group if m not in out)
    return out
