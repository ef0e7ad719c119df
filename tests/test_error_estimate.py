"""The global error estimate of ``simulate(..., error_estimate=True)``.

The estimate is the difference from a second solution on the same output times (a
tenth of rtol and atol with error control, half the step without).  For a method of
order p at a fixed step the true error is 2^p/(2^p − 1) times it (1.03 for abm, whose
PECE pair has order 5; 1.07 for RK4; 4/3 for the second-order implicit methods); with
error control the ratio depends on how the error falls with the tolerance.  Measured
here on the pendulum against a RADAU5 reference at 1e-12, every family (0.99 … 1.35);
over the seven problems of docs/measure_tolerances.py in docs/methods.md.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import GENERATED, MODELS, cli

import mbdgen
from mbdgen.methods import METHODS
from mbdgen.simulation import ConstraintWarning

FAMILIES = ("abm", "rk4", "welch2", "hht", "genalpha", "newmark_gcp", "vabm",
            "rkf45_adaptive", "dop853", "hht_adaptive", "genalpha_adaptive", "radau5")  # fmt: skip


@pytest.fixture(scope="module")
def reference(pendulum):
    return mbdgen.simulate(pendulum, "radau5", h=0.2, t_end=2.0, rtol=1e-12, atol=1e-12)


def _run(pendulum, method, **options):
    if METHODS[method].error_controlled:
        grid = {"h": 0.2}
    else:
        grid = {"h": 1e-2, "output_every": 20}  # rows every 0.2 s, as the reference's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstraintWarning)  # the coarse fixed-step runs'
        return mbdgen.simulate(
            pendulum, method, t_end=2.0, rtol=1e-6, atol=1e-6, error_estimate=True,
            **grid, **options,
        )  # fmt: skip


@pytest.mark.parametrize("method", FAMILIES)
def test_the_estimate_is_within_the_factor_its_method_implies(pendulum, reference, method):
    result = _run(pendulum, method)
    assert result.error_q.shape == result.q.shape == result.error_qd.shape
    true = np.abs(result.q - reference.q).max(axis=1)[1:]
    estimate = result.error_q.max(axis=1)[1:]
    ratio = true[-1] / estimate[-1]
    assert 0.9 <= ratio <= 1.5, (true[-1], estimate[-1])
    # over every row (t = 0.2 … 2), not only the last: never below half the true error,
    # and not above twice it except where the true error passes through zero
    # (hht_adaptive at t = 1.4: 1.0e-8 against 2.8e-8, the rows beside it 2.7e-7, 3.2e-7)
    assert np.all(true <= 2.0 * estimate), true / estimate
    crossing = true < 0.1 * np.maximum(np.roll(true, 1), np.roll(true, -1))
    assert np.all((true >= 0.5 * estimate) | crossing), true / estimate
    info = result.info["error_estimate"]
    assert info["max_q"] == result.error_q.max() and info["steps"] > result.counters["steps"]
    assert info["by"] == (
        "a second solution at rtol/10, atol/10"
        if METHODS[method].error_controlled
        else "a second solution at h/2"
    )


def test_the_estimate_is_saved_and_loaded_with_its_units(pendulum, tmp_path):
    result = _run(pendulum, "hht")
    for name in ("r.npz", "r.h5"):
        result.save(tmp_path / name)
        back = mbdgen.load(tmp_path / name)
        assert np.array_equal(back.error_q, result.error_q)
        assert np.array_equal(back.error_qd, result.error_qd)
        assert back.info["error_estimate"] == result.info["error_estimate"]
    import h5py

    with h5py.File(tmp_path / "r.h5") as f:  # a model in generalized coordinates: no units
        assert list(f["error_qd"].attrs["columns"]) == ["x1_d", "y1_d", "phi1_d"]
    module = mbdgen.compile(MODELS / "iftomm_a01_pendulum.py", GENERATED)  # a mechanism
    mbdgen.simulate(module, "hht", h=1e-2, t_end=0.1, error_estimate=True).save(tmp_path / "m.h5")
    with h5py.File(tmp_path / "m.h5") as f:
        assert list(f["error_q"].attrs["units"]) == list(f["q"].attrs["units"])
        assert list(f["error_qd"].attrs["units"]) == list(f["qd"].attrs["units"])
        assert "m/s" in list(f["error_qd"].attrs["units"])
    without = mbdgen.simulate(pendulum, "hht", h=1e-2, t_end=0.2)
    without.save(tmp_path / "w.npz")
    assert mbdgen.load(tmp_path / "w.npz").error_q.size == 0


def test_a_second_solution_below_the_arithmetics_floor_is_a_warning(pendulum):
    with pytest.warns(ConstraintWarning, match="no error estimate: a second solution at rtol/10"):
        result = mbdgen.simulate(pendulum, "dop853", h=0.1, t_end=0.5, rtol=1e-13, atol=1e-13,
                                 error_estimate=True)  # fmt: skip
    assert result.error_q.size == 0 and "failed" in result.info["error_estimate"]
    assert result.info["status"] == "finished"


def test_the_cli_reports_the_estimate():
    code, output = cli("simulate", MODELS / "pendulum.py", "--out-dir", GENERATED,
                       "--method", "hht_adaptive", "--h", "0.2", "--t-end", "2",
                       "--estimate-error", "--no-progress")  # fmt: skip
    assert code == 0, output
    line = next(s for s in output.splitlines() if s.startswith("estimated global error"))
    assert line.startswith("estimated global error (a second solution at rtol/10, atol/10, ")
    assert "max |δq| = " in line and "at t_end " in line and "max |δq̇| = " in line
