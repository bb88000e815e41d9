"""The readable terminal report of a summary: setup; summary; parameters, FLOPs,
memory and time per layer part with what bounds each part; memory per GPU;
every other value; warnings.

Only formats the summary dicts (and the operator records of `analysis.operators`
for the tables per layer part); no arithmetic of the model lives here. `rich`
is imported when a coloured report is rendered, never at start-up.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Set

from llm_analysis.report.collected_warnings import merged
from llm_analysis.report.console import make_report, stdout_wants_color
from llm_analysis.report.part_tables import other_values


def render_tables(analysis, summary: Dict[str, Any], kind: str, color: Optional[bool] = None) -> str:
    """The readable report of an inference or training summary, as a string
    (ANSI colours only when `color`, by default when stdout is a terminal)."""
    if color is None:
        color = stdout_wants_color()
    rep = make_report(color)
    report_sections(rep, analysis, summary, kind)
    return rep.text()


def report_sections(rep, analysis, summary: Dict[str, Any], kind: str) -> None:
    """Lay every section of the report out on `rep`: a console.RichReport, or any
    object with its section methods (the HTML page lays the same sections out)."""
    used: Set[str] = set()
    if kind == "inference":  # import only the sections of this kind: start-up time of the command
        from llm_analysis.report.inference_tables import inference_sections
        inference_sections(rep, analysis, summary, used)
    else:
        from llm_analysis.report.training_tables import training_sections
        training_sections(rep, analysis, summary, used)
    used.add("warnings")  # printed in the Warnings block below
    other_values(rep, summary, used)
    notes = summary.get("notes") or []
    warnings = merged(summary.get("warnings") or [])
    # the JSON's two lists under two headings: the notes (assumptions) had been printed under "Warnings" while
    # the JSON's `warnings` was empty; a message in both lists prints once, as a warning
    rep.notes([n for n in merged([notes] if isinstance(notes, str) else notes) if n not in warnings])
    rep.warnings(warnings)
