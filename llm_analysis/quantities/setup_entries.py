"""Summary entries no request changes (names, layout sizes, parameter counts, achieved
rates), computed once per analysis configuration: a sweep over shapes reads them from
one tuple instead of asking the views each call (speed of new shapes, issue 12)."""

from __future__ import annotations

from typing import Callable, Dict, List, Tuple

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


def calibrated_rate_entries(a) -> Dict[str, float]:
    """Under the calibrated model the summary's efficiencies are the profile's plateaus (its
    achieved rates over the peaks), not the roofline's inputs; those, and the rates the lower
    bounds use, go under `lower_bound_*` (a summary never shows efficiency 1 beside 56% of peak).
    They are `a.cost_model`'s: called on the view a call is timed with (training's, at the profile's
    training compute share; inference's own), so that achieved_tflops = flops_efficiency x peak.
    No request changes them: worked out once per analysis configuration and cost model
    (`static_entries`, kept apart per view so that alternating calls do not recompute them)."""
    def compute() -> Dict[str, float]:
        expected, bound = a.cost_model, a.lower_bound_cost_model
        peak_bw = a.gpu_config.hbm_bandwidth_in_GB_per_sec
        return {"flops_efficiency": expected.flops_per_s / expected.peak_flops_per_s,
                "hbm_memory_efficiency": expected.achieved_hbm_GB_per_s / peak_bw,
                "lower_bound_flops_efficiency": a.flops_efficiency,
                "lower_bound_hbm_memory_efficiency": a.hbm_memory_efficiency,
                "lower_bound_tflops": bound.achieved_tflops,
                "lower_bound_memory_bandwidth_GBs": bound.achieved_hbm_GB_per_s}
    cm = a.cost_model
    name = "calibrated_rate_entries" + ("_training" if getattr(cm, "training", False) else "") + \
        ("_sustained" if getattr(cm, "sustained", False) else "")
    return static_entries(a, name, compute)


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
