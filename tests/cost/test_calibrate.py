"""calibrate(): recovers known parameters from synthetic measurements; refuses bad input."""

import pytest

from llm_analysis.cost.calibrate import CalibrationError, calibrate
from llm_analysis.cost.profiles import load_profile, profile_from_dict

BASE = load_profile("hopper")
PEAK, HBM = 989e12, 3.35e12


def predict(setup, p):
    # a deliberately simple predictor: one GEMM-bound and one memory-bound term
    return setup["flops"] / (PEAK * p.gemm_plateau_efficiency) + setup["bytes"] / (HBM * p.hbm_efficiency)


def synthetic(eff_flops=0.61, eff_hbm=0.77):
    setups = [{"flops": f, "bytes": b} for f, b in ((1e15, 1e9), (1e12, 5e10), (3e14, 2e10), (5e13, 1e11))]
    return [{"id": f"r{i}", "setup": s, "unit": "ms",
             "value": 1e3 * (s["flops"] / (PEAK * eff_flops) + s["bytes"] / (HBM * eff_hbm))}
            for i, s in enumerate(setups)]


def test_recovers_the_parameters_that_generated_the_data():
    fitted = calibrate(synthetic(), predict, BASE)
    assert fitted.gemm_plateau_efficiency == pytest.approx(0.61, rel=1e-3)
    assert fitted.hbm_efficiency == pytest.approx(0.77, rel=1e-3)
    assert fitted.sources["hbm_efficiency"].startswith("calibrate(): least-squares fit on 4")
    # untouched parameters keep their values and sources; the result round-trips through JSON
    assert fitted.net_efficiency == BASE.net_efficiency
    again = profile_from_dict(fitted.to_dict(), "saved.json")
    assert again.gemm_plateau_efficiency == fitted.gemm_plateau_efficiency


def test_refuses_fewer_points_than_parameters():
    with pytest.raises(CalibrationError, match="1 measurement.* for 2 parameter"):
        calibrate(synthetic()[:1], predict, BASE)


def test_refuses_mixed_units():
    recs = synthetic()
    recs[0] = {"id": "tp", "setup": {"tokens": 100, **recs[0]["setup"]}, "unit": "tokens/s", "value": 5.0}
    with pytest.raises(CalibrationError, match="inconsistent units"):
        calibrate(recs, predict, BASE)


def test_refuses_what_the_model_cannot_express():
    recs = synthetic()
    recs[2]["setup"] = {**recs[2]["setup"], "activation_cpu_offload": True}
    with pytest.raises(CalibrationError, match="r2.*activation_cpu_offload"):
        calibrate(recs, predict, BASE)


def test_refuses_unknown_unit_and_parameter():
    recs = synthetic()
    recs[1]["unit"] = "minutes"
    with pytest.raises(CalibrationError, match="unit 'minutes'"):
        calibrate(recs, predict, BASE)
    with pytest.raises(CalibrationError, match="gemm_tile_shapes"):
        calibrate(synthetic(), predict, BASE, parameters=("gemm_tile_shapes",))


def test_bounds_hold_a_parameter_inside_its_band():
    # data generated at HBM 0.33; a band [0.75, 0.92] stops the fit at 0.75 (its edge), the other
    # parameter still free; without the band the same data gives back 0.33
    data = synthetic(eff_hbm=0.33)
    assert calibrate(data, predict, BASE).hbm_efficiency == pytest.approx(0.33, rel=1e-3)
    held = calibrate(data, predict, BASE, bounds={"hbm_efficiency": (0.75, 0.92)})
    assert held.hbm_efficiency == pytest.approx(0.75, rel=1e-9)
    assert 0 < held.gemm_plateau_efficiency < 2


def test_refuses_bad_bounds():
    with pytest.raises(CalibrationError, match="bounds name 'net_efficiency'"):
        calibrate(synthetic(), predict, BASE, bounds={"net_efficiency": (0.5, 0.9)})
    with pytest.raises(CalibrationError, match=r"bounds\['hbm_efficiency'\].*0 < low <= high"):
        calibrate(synthetic(), predict, BASE, bounds={"hbm_efficiency": (0.9, 0.5)})
