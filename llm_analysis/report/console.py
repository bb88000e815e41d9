"""Where the report is laid out: a rich Console writing into a string (terminals,
with colours), or the same sections laid out without rich (files and pipes,
where importing rich would be most of the command's start-up time)."""

from __future__ import annotations

import io
import os
import shutil
import sys
from typing import Any, Iterable, Optional, Sequence, Tuple

WIDTH = 110  # columns of the report when not writing to a terminal
_BOUND_STYLE = {"compute": "green", "memory": "yellow", "communication": "magenta"}


def stdout_wants_color() -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


class RichReport:
    """A rich Console writing into a string, and helpers for the sections
    (used for terminals, where it draws colours)."""

    def __init__(self, color: bool):
        from rich.console import Console

        width = WIDTH
        if color:
            width = max(80, min(shutil.get_terminal_size((WIDTH, 24)).columns, 140))
        self.color = color
        self.console = Console(file=io.StringIO(), width=width, color_system="standard" if color else None,
                               force_terminal=color, no_color=not color, highlight=False, emoji=False,
                               markup=False, soft_wrap=False, legacy_windows=False)

    # -------------------------------------------------------------- sections
    def heading(self, text: str) -> None:
        from rich.text import Text

        self.console.print()
        self.console.rule(Text(text, style="bold cyan"), align="left", characters="─")

    def key_values(self, rows: Sequence[Tuple[str, str]]) -> None:
        from rich.table import Table

        t = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 1))
        t.add_column(style="bold", no_wrap=True)
        t.add_column(overflow="fold")
        for k, v in rows:
            t.add_row(k, v)
        self.console.print(t)

    def table(self, title: Optional[str], columns: Sequence[Tuple[str, str]], rows: Iterable[Sequence[Any]],
              caption: Optional[str] = None, footer: Optional[Sequence[str]] = None) -> None:
        """columns: (header, justify); rows: cells (str or rich Text); footer: a
        closing row (totals) set off by a rule."""
        from rich import box
        from rich.table import Table

        t = Table(title=title, title_justify="left", title_style="bold", caption=caption, caption_justify="left",
                  caption_style="dim", box=box.SIMPLE if footer else box.SIMPLE_HEAD, pad_edge=False,
                  show_edge=False, header_style="bold", show_footer=bool(footer), footer_style="bold")
        for i, (header, justify) in enumerate(columns):
            t.add_column(header, justify=justify, no_wrap=justify == "right",
                         footer=footer[i] if footer else "")
        for row in rows:
            t.add_row(*row)
        self.console.print(t)

    def grid(self, rows: Sequence[Sequence[str]], justify: Sequence[str]) -> None:
        from rich.table import Table

        t = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 1))
        for j in justify:
            t.add_column(justify=j, no_wrap=True)
        for row in rows:
            t.add_row(*row)
        self.console.print(t)

    def bound_cell(self, bound: str):
        from rich.text import Text

        return Text(bound, style=_BOUND_STYLE.get(bound, "")) if self.color else bound

    def warnings(self, warnings: Sequence[str]) -> None:
        """What the call logged (the JSON's `warnings`), marked `!`."""
        self._marked("Warnings", "!", "yellow", warnings)

    def notes(self, notes: Sequence[str]) -> None:
        """The assumptions that matter for the figures (the JSON's `notes`): under their own heading, so that
        the report's Warnings block holds what the JSON's `warnings` holds (the notes had been printed there)."""
        self._marked("Notes", "-", "", notes)

    def _marked(self, heading: str, mark: str, color_style: str, items: Sequence[str]) -> None:
        from rich.table import Table
        from rich.text import Text

        if not items:
            return
        self.heading(heading)
        t = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1, 0, 1))
        t.add_column(no_wrap=True)
        t.add_column(overflow="fold")
        style = color_style if self.color else ""
        for item in items:
            t.add_row(Text(mark, style=style), Text(str(item), style=style))
        self.console.print(t)

    def text(self) -> str:
        lines = self.console.file.getvalue().strip("\n").split("\n")
        return "\n".join(line.rstrip() for line in lines)


class _PlainConsole:
    """The part of rich's Console the report uses: print() into a string."""

    def __init__(self):
        self.file = io.StringIO()

    def print(self, *objects: Any, **_style: Any) -> None:  # rich's style keywords are ignored
        self.file.write(" ".join(str(o) for o in objects) + "\n")


class PlainReport(RichReport):
    """The same report laid out without rich: used when the output is not a
    terminal (no colours to draw), where importing and running rich would be
    most of the command's start-up time."""

    def __init__(self, color: bool = False):
        self.color = False
        self.width = WIDTH
        self.console = _PlainConsole()

    def _out(self, line: str = "") -> None:
        self.console.file.write(line.rstrip() + "\n")

    def heading(self, text: str) -> None:
        self._out()
        self._out(f"{text} " + "─" * max(self.width - len(text) - 1, 3))

    def key_values(self, rows: Sequence[Tuple[str, str]], lead: str = " ", gap: int = 2) -> None:
        import textwrap
        key_w = max((len(str(k)) for k, _ in rows), default=0)
        text_w = max(self.width - key_w - len(lead) - gap, 20)
        for k, v in rows:
            lines = textwrap.wrap(str(v), text_w) or [""]
            self._out(f"{lead}{str(k).ljust(key_w)}{' ' * gap}{lines[0]}")
            for more in lines[1:]:
                self._out(f"{' ' * (len(lead) + key_w + gap)}{more}")

    @staticmethod
    def _cells(cells: Sequence[Any], widths: Sequence[int], justify: Sequence[str], sep: str) -> str:
        return sep.join(str(c).rjust(w) if j == "right" else str(c).ljust(w)
                        for c, w, j in zip(cells, widths, justify))

    def table(self, title: Optional[str], columns: Sequence[Tuple[str, str]], rows: Iterable[Sequence[Any]],
              caption: Optional[str] = None, footer: Optional[Sequence[str]] = None) -> None:
        rows = [list(map(str, r)) for r in rows]
        headers = [h for h, _ in columns]
        justify = [j for _, j in columns]
        body = rows + ([list(map(str, footer))] if footer else [])
        widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(headers)]
        total = sum(widths) + 3 * (len(widths) - 1)
        if title:
            self._out(title)
        self._out(self._cells(headers, widths, justify, "   "))
        self._out("─" * total)
        for r in rows:
            self._out(self._cells(r, widths, justify, "   "))
        if footer:
            self._out("─" * total)
            self._out(self._cells(footer, widths, justify, "   "))
        if caption:
            self._out(caption)

    def grid(self, rows: Sequence[Sequence[str]], justify: Sequence[str]) -> None:
        rows = [list(map(str, r)) for r in rows]
        widths = [max(len(r[i]) for r in rows) for i in range(len(justify))] if rows else []
        for r in rows:
            self._out(" " + self._cells(r, widths, justify, "  "))

    def bound_cell(self, bound: str):
        return bound

    def _marked(self, heading: str, mark: str, color_style: str, items: Sequence[str]) -> None:
        if items:
            self.heading(heading)
            self.key_values([(mark, item) for item in items])


def make_report(color: bool) -> RichReport:
    return RichReport(color) if color else PlainReport()
