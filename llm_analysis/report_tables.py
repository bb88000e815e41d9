"""Former home of the terminal report's tables, kept so that old imports work:
the tables now live in `llm_analysis/presentation/` (tables.py and the modules
it imports), the labels in `presentation/labels.py`, units in
`presentation/units.py`."""

from .presentation.labels import part_label
from .presentation.tables import render_tables
from .presentation.units import unit_of

__all__ = ["render_tables", "part_label", "unit_of"]
