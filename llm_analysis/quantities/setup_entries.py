"""Summary entries no request changes (names, layout sizes, parameter counts, achieved
rates), computed once per analysis configuration: a sweep over shapes reads them from
one tuple instead of asking the views each call (speed of new shapes, issue 12)."""

from __future__ import annotations

from typing import Callable, List, Tuple

from llm_analysis.cost.profile_notes import profile_notes


def static_entries(analysis, name: str, compute: Callable[[], Tuple]) -> Tuple:
    """`compute()` kept on the analysis' describer together with the cost model and configs
    it was computed from (compared by identity): a view of the analysis that shares the
    describer but times with another cost model, or reads other configs, computes its own."""
    cached = analysis.describer.memoized((name,), lambda: [None])
    entry = cached[0]
    if entry is not None:  # (the identities compared written out: a hot path)
        cm, model, gpu, dtype, par = entry[0]
        if (cm is analysis.cost_model and model is analysis.model_config and gpu is analysis.gpu_config
                and dtype is analysis.dtype_config and par is analysis.parallelism_config):
            return entry[1]
    values = compute()
    cached[0] = ((analysis.cost_model, analysis.model_config, analysis.gpu_config, analysis.dtype_config,
                  analysis.parallelism_config), values)
    return values


def calibrated_notes(analysis) -> List[str]:
    """The notes of a calibrated analysis' profile (cost/profile_notes.py) and of what its tensor-parallel
    times rest on (`_tp_payload_note`), kept as `static_entries` (the caller's copy: a list of its own)."""
    return list(static_entries(analysis, "profile_notes", lambda: tuple(
        profile_notes(analysis.profile, analysis.gpu_config, analysis.dtype_config) + _tp_payload_note(analysis))))


def _tp_payload_note(analysis) -> List[str]:
    """With quantised activations and tensor parallelism, the calibrated model times the TP collectives at
    the 16-bit residual stream's bytes, not the dtype's activation width (cost/calibrated.py): said once."""
    dtype = analysis.dtype_config
    if analysis.parallelism_config.tp_size <= 1 or dtype.activation_bytes_per_element >= 2:
        return []
    return [f"tensor-parallel collectives are timed at 16 bits per element: {dtype.name}'s "
            f"{dtype.activation_bits}-bit activations are what its GEMMs read, the residual stream the engines "
            "reduce between them stays bf16 (the lower bounds keep the activation width)"]
