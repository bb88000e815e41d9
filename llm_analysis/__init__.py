"""llm-analysis: parameters, FLOPs, memory and time of transformer LLMs for
training and inference, from their shapes alone."""

__version__ = "0.1.0"


def calibrate(measurements, parameters=("gemm_plateau_efficiency", "hbm_efficiency")):
    """Fit the calibrated performance model to measured points (llm_analysis/calibration.py);
    returns a Profile to save with `save_profile(profile, path)` and reuse as perf_model=path."""
    from llm_analysis.cost.calibration import calibrate as _calibrate
    return _calibrate(measurements, parameters)


def save_profile(profile, path):
    """Write a calibration Profile as JSON (load it back with LLMAnalysis(..., perf_model=path))."""
    from llm_analysis.cost.profiles import save_profile as _save
    _save(profile, path)
