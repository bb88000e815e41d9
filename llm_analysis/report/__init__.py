"""Presentation: summary dicts and operator records turned into text, files and charts.

Modules import only downward: `labels` and `units` (leaves: names and units of
summary keys) <- `files`, `console`, `setup_lines` <- `part_tables` <-
`inference_tables`, `training_tables` <- `tables`; the charts: `chart_common` <-
`roofline_chart`, `breakdown_charts`, `sweep_chart`. `report.py` and `plots.py`
at the package root are the public entry points. Nothing here computes a figure
of the model: the orchestrators return them.
"""
