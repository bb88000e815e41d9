"""The HTML pieces the report page is made of: escaped text, key-value lists,
figure cards, tables (sortable where each cell can carry its raw number in
`data-value`), and `HtmlSections`, which lays the terminal report's sections out
as HTML (the same wording, from the same section functions)."""

from __future__ import annotations

import html
import math
from typing import Any, Iterable, List, NamedTuple, Optional, Sequence, Tuple


def esc(text: Any) -> str:
    """`text` as HTML text or attribute value (quotes escaped; newlines kept as &#10;)."""
    return html.escape(str(text), quote=True).replace("\n", "&#10;")


def raw_number(value: Any) -> Optional[str]:
    """A number as `data-value` holds it: repr, which reads back as the same float; None for
    anything that is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return repr(value)


def attrs(**values: Any) -> str:
    """ HTML attributes from keywords (`data_tip` -> data-tip, `class_` -> class); None and False
    are left out."""
    parts = []
    for name, value in values.items():
        if value is None or value is False:
            continue
        name = name.rstrip("_").replace("_", "-")
        parts.append(name if value is True else f'{name}="{esc(value)}"')
    return (" " + " ".join(parts)) if parts else ""


class Cell(NamedTuple):
    """One table cell: the text shown, the raw number behind it (data-value, for sorting and
    for reading the page back), a CSS class."""
    text: str
    value: Any = None
    css: Optional[str] = None


def _td(cell: Any, numeric: bool) -> str:
    c = cell if isinstance(cell, Cell) else Cell(str(cell))
    classes = " ".join(x for x in (("num" if numeric else None), c.css) if x)
    return f"<td{attrs(class_=classes or None, data_value=raw_number(c.value))}>{esc(c.text)}</td>"


def table(columns: Sequence[Tuple[str, str]], rows: Iterable[Sequence[Any]], caption: Optional[str] = None,
          footer: Optional[Sequence[Any]] = None, sortable: bool = False, table_id: Optional[str] = None,
          note: Optional[str] = None, header: bool = True) -> str:
    """A table; columns: (header, "left" | "right"); cells: str or Cell. A sortable table's
    headers are focusable and sort its body (the page's script); header=False: a grid."""
    out = [f"<div class=\"table-scroll\"><table{attrs(id=table_id, class_='sortable' if sortable else None)}>"]
    if caption or note:
        out.append(f"<caption>{esc(caption or '')}"
                   + (f" <span class=\"dim\">{esc(note)}</span>" if note else "") + "</caption>")
    heads = "".join(f"<th{attrs(class_='num' if justify == 'right' else None, scope='col', tabindex=0 if sortable else None)}>"
                    f"{esc(header)}</th>" for header, justify in columns)
    out.append((f"<thead><tr>{heads}</tr></thead>" if header else "") + "<tbody>")
    for row in rows:
        out.append("<tr>" + "".join(_td(c, j == "right") for c, (_, j) in zip(row, columns)) + "</tr>")
    out.append("</tbody>")
    if footer:
        out.append("<tfoot><tr>" + "".join(_td(c, j == "right") for c, (_, j) in zip(footer, columns))
                   + "</tr></tfoot>")
    out.append("</table></div>")
    return "".join(out)


def key_values(rows: Sequence[Tuple[str, str]], css: str = "setup") -> str:
    items = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows)
    return f"<dl class=\"{css}\">{items}</dl>"


class Figure(NamedTuple):
    """A headline figure: its label, the summary key and raw value, the text with its unit,
    and a line under it (e.g. the lower bound beside an expected time)."""
    label: str
    key: str
    value: Any
    text: str
    detail: str = ""


def cards(figures: Sequence[Figure]) -> str:
    out = ['<div class="cards">']
    for f in figures:
        out.append(f"<div{attrs(class_='card', data_key=f.key, data_value=raw_number(f.value))}>"
                   f"<div class=\"label\">{esc(f.label)}</div><div class=\"value\">{esc(f.text)}</div>"
                   + (f"<div class=\"detail\">{esc(f.detail)}</div>" if f.detail else "") + "</div>")
    out.append("</div>")
    return "".join(out)


def item_list(css: str, items: Sequence[str]) -> str:
    return f"<ul class=\"{css}\">" + "".join(f"<li>{esc(item)}</li>" for item in items) + "</ul>"


def legend(items: Sequence[Tuple[str, str]]) -> str:
    """A legend of (swatch SVG markup, label)."""
    lis = "".join(f"<li>{swatch}<span>{esc(label)}</span></li>" for swatch, label in items)
    return f"<ul class=\"legend\">{lis}</ul>"


# --------------------------------------------------- the terminal report in HTML
class _BoundText(str):
    """A table cell naming what bounds a part (compute, memory, communication): coloured."""


class _Paragraphs:
    """The part of rich's Console the report sections use: print() of a line (or of nothing)."""

    def __init__(self, out: List[str]):
        self._out = out

    def print(self, *objects: Any, **style: Any) -> None:
        if objects:
            css = "note" if style.get("style") == "dim" else None
            self._out.append(f"<p{attrs(class_=css)}>{esc(' '.join(map(str, objects)))}</p>")


class HtmlSections:
    """The section methods of console.RichReport (heading, key_values, table, grid,
    bound_cell, warnings, console.print), writing HTML: tables.report_sections lays the
    terminal report out on it unchanged, so the page and the terminal say the same."""

    color = False

    def __init__(self) -> None:
        self._out: List[str] = []
        self.console = _Paragraphs(self._out)

    def heading(self, text: str) -> None:
        self._out.append(f"<h3>{esc(text)}</h3>")

    def key_values(self, rows: Sequence[Tuple[str, str]]) -> None:
        self._out.append(key_values(rows))

    def table(self, title: Optional[str], columns: Sequence[Tuple[str, str]], rows: Iterable[Sequence[Any]],
              caption: Optional[str] = None, footer: Optional[Sequence[str]] = None) -> None:
        body = [[Cell(str(c), css=f"bound-{c}") if isinstance(c, _BoundText) else str(c) for c in row]
                for row in rows]
        self._out.append(table(columns, body, caption=title, footer=footer))
        if caption:
            self._out.append(f"<p class=\"note\">{esc(caption)}</p>")

    def grid(self, rows: Sequence[Sequence[str]], justify: Sequence[str]) -> None:
        self._out.append(table([("", j) for j in justify], rows, header=False))

    def bound_cell(self, bound: str) -> str:
        return _BoundText(bound)

    def warnings(self, warnings: Sequence[str]) -> None:
        if warnings:
            self.heading("Warnings")
            self._out.append(item_list("warnings", warnings))

    def notes(self, notes: Sequence[str]) -> None:
        if notes:
            self.heading("Notes")
            self._out.append(item_list("notes", notes))

    def text(self) -> str:
        return "\n".join(self._out)
