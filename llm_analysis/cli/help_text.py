"""What `--help` shows for each command: every flag's whole description, plain types.

fire builds a command's help from its docstring's `Args:` section, but a description that runs
over several lines is cut wherever a continuation line reads like another `name: text` entry
("default: from --conventions." became a flag named `default`), and types print as the strings
`from __future__ import annotations` leaves (`Optional['Optional[float]']`). So each command is
bound through `for_fire`: its docstring with every `Args:` entry joined onto one line, and a
signature whose annotations are real, unwrapped types."""

from __future__ import annotations

import functools
import inspect
import re
import typing
from typing import Callable, Dict

_ENTRY = re.compile(r"^(\s*)(\w+): (.*)$")


def args_section(doc: str) -> Dict[str, str]:
    """{flag: its whole description} of a Google-style docstring's `Args:` section."""
    out: Dict[str, str] = {}
    lines = (doc or "").splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Args:") + 1
    except StopIteration:
        return out
    indent, name = None, None
    for line in lines[start:]:
        if not line.strip():
            continue
        m = _ENTRY.match(line)
        if m and (indent is None or len(m.group(1)) == indent):
            indent, name = len(m.group(1)), m.group(2)
            out[name] = m.group(3).strip()
        elif indent is not None and len(line) - len(line.lstrip()) > indent and name:
            out[name] += " " + line.strip()
        else:  # the next section (Returns:, ...)
            break
    return out


def _one_line_args(doc: str) -> str:
    """The docstring with its `Args:` section rewritten one entry per line."""
    lines = (doc or "").splitlines()
    if not any(line.strip() == "Args:" for line in lines):
        return doc
    start = next(i for i, line in enumerate(lines) if line.strip() == "Args:")
    entries = args_section(doc)
    indent = " " * (len(lines[start]) - len(lines[start].lstrip()) + 4)
    rest = start + 1
    while rest < len(lines) and (not lines[rest].strip() or len(lines[rest]) - len(lines[rest].lstrip()) >= len(indent)):
        rest += 1
    return "\n".join(lines[:start + 1] + [f"{indent}{k}: {v}" for k, v in entries.items()] + lines[rest:])


def _plain(annotation):
    """Optional[int] -> int (fire prints Optional[...] itself around a flag whose default is None);
    a union that takes a string (Union[str, dict]: JSON given on the command line) -> str, since the
    command line passes text (fire would print `Optional[Union]`)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Union and len(args) == 1:
        return args[0]
    if typing.get_origin(annotation) is typing.Union and str in args:
        return str
    return annotation


def for_fire(fn: Callable, call: Callable = None) -> Callable:
    """`fn` as fire should see it: whole flag descriptions, plain types. `call` (default: `fn`) is what
    runs; its return value is dropped (the commands print their own output)."""
    run = call or fn

    @functools.wraps(fn)
    def command(*args, **kwargs):
        run(*args, **kwargs)
        return None

    hints = typing.get_type_hints(fn)
    sig = inspect.signature(fn)
    command.__signature__ = sig.replace(
        parameters=[p.replace(annotation=_plain(hints.get(p.name, p.annotation))) for p in sig.parameters.values()],
        return_annotation=inspect.Signature.empty)
    command.__doc__ = _one_line_args(fn.__doc__)
    return command
