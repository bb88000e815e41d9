"""Following assignments to the fields of the configurations an analysis was built on
(`analysis.model_config.num_layers = 48`), as the mirrored system does: it reads its configurations at
every call, while an analysis here derives an operator description and cost models from them once.

An assignment drops what the analysis derived (at once: facade.py `_configs_assigned`); the next read of
the describer or a cost model re-validates the four configurations whole and rebuilds as the matching
`update_*_config` would. Several assignments in a row may pass through invalid states (a head count
before the width that goes with it): only the state at the next use is checked.
In-place changes to a list or dict field are not assignments and are not seen (schema/base.py)."""

from __future__ import annotations

import copy
from typing import Callable, Iterable

from llm_analysis.schema.base import StrictModel, on_field_assigned, refresh_fields


class ConfigEdits:
    """Whether a configuration of one analysis was assigned to since the analysis last derived from them."""

    def __init__(self, configs: Iterable[StrictModel], on_assigned: Callable[[], None]) -> None:
        self.pending = False
        self._configs = tuple(configs)
        self._on_assigned = on_assigned
        for config in self._configs:
            on_field_assigned(config, self.assigned)

    def __deepcopy__(self, memo) -> "ConfigEdits":
        """A deep copy of an analysis follows its own copies of the configurations (`memo` gives the
        copies its other attributes hold, and the copy's own `on_assigned`)."""
        other = ConfigEdits(copy.deepcopy(self._configs, memo), copy.deepcopy(self._on_assigned, memo))
        other.pending = self.pending
        return other

    def assigned(self) -> None:
        self.pending = True
        self._on_assigned()

    def follow(self, analysis) -> None:
        """After assignments: the configurations re-validated from their given fields, what their validators
        derive filled again (ConfigError naming a bad field and value: schema/base.py `refresh_fields`), and the
        analysis rebuilt from them by `update_gpu_config` (which re-reads the GPU's node size too, then drops
        and rebuilds everything derived)."""
        if not self.pending:
            return
        self.pending = False
        for config in (analysis.model_config, analysis.gpu_config, analysis.dtype_config,
                       analysis.parallelism_config):
            refresh_fields(config)
        analysis.update_gpu_config(analysis.gpu_config)


def derived(analysis, name: str, build: Callable[[], object]):
    """The analysis' cached property `name` being computed: `build()`, or, after assignments to its
    configurations, the value the rebuild (`ConfigEdits.follow`) made."""
    edits = analysis.config_edits
    if edits.pending:
        edits.follow(analysis)
        return getattr(analysis, name)
    return build()
