"""The baselines of ``mbdgen bench`` compute what mbdgen computes.

Both baselines implement the same algorithm as ``mbdgen.simulate(method="abm",
order=4, start="ramp")``: AB 4 predictor / AM 5 corrector in PECE mode (Haug 1989
§7.4, Eqs. 7.4.11 and 7.4.15), self-started by the order ramp, with Baumgarte's
stabilisation (Eq. 7.3.8).  Timing ratios are the benchmark's business, not
asserted here.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mbdgen import bench


@pytest.fixture(scope="module", autouse=True)
def own_entry_points():
    """The policy the benchmark runs under (mbdgen.bench): the model's own entry points,
    compiled at the first call (the suite's default is "shared", tests/conftest.py)."""
    from mbdgen import specialize

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(specialize.POLICY_ENV, "now")
        yield


@pytest.fixture(scope="module")
def module():
    return bench.mbdgen_module()


@pytest.fixture(scope="module")
def weights():
    return bench.adams_weights()


def _compare(result, base: dict[str, np.ndarray], rows: int, tol: float) -> None:
    n = result.q.shape[1]
    m = result.lam.shape[1]
    assert result.q.shape[0] == base["x"].shape[0] == rows
    np.testing.assert_allclose(result.t, base["t"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(result.q, base["x"][:, :n], rtol=0, atol=tol)
    np.testing.assert_allclose(result.qd, base["x"][:, n:], rtol=0, atol=tol)
    np.testing.assert_allclose(result.qdd, base["f"][:, n:], rtol=0, atol=100 * tol)
    np.testing.assert_allclose(result.lam, base["aux"][:, :m], rtol=0, atol=100 * tol)
    np.testing.assert_allclose(result.phi_norm, base["aux"][:, m], rtol=0, atol=tol)


def test_handwritten_matches_mbdgen(module, weights):
    steps = 2000
    result = bench.mbdgen_simulate(module, steps)
    hand = bench.handwritten_simulate(steps, weights=weights)
    assert np.max(np.abs(result.q[-1] - hand["x"][-1, :4])) < 1e-9
    _compare(result, hand, steps + 1, 1e-9)
    # The mechanism moved, and Baumgarte kept it on the constraint manifold.
    assert abs(result.q[-1, 0] - bench.Q0[0]) > 0.1
    assert result.phi_norm[-1] < 1e-4


def test_lambdify_matches_mbdgen(module, weights):
    steps = 100
    result = bench.mbdgen_simulate(module, steps)
    lam = bench.lambdify_simulate(steps, weights=weights)
    assert np.max(np.abs(result.q[-1] - lam["x"][-1, :4])) < 1e-9
    _compare(result, lam, steps + 1, 1e-9)


def test_handwritten_stops_on_nan(weights):
    # A NaN step gives a NaN predictor: the baseline stops with a status code, as
    # mbdgen does, instead of filling its outputs with NaN.
    with pytest.raises(RuntimeError, match="status"):
        bench.handwritten_simulate(5, h=math.nan, weights=weights)


def test_handwritten_hht_matches_mbdgen(module):
    """The hand-written HHT step and ``method="hht"`` compute the same trajectory.

    Both stop Newton when the estimated error of q̈ is below 1e-10 max(1, |q̈|) (|q̈|
    up to 3e3 here), so they may stop at iterates 3e-7 apart in q̈, which moves q̇ by
    γh 3e-7 ≈ 2e-10 a step; over 2000 steps 1e-7 in q, q̇ and 1e-7 of max |q̈|, |λ| bound
    that (measured: 3e-9, 8e-9, 3e-9 relative).  Rounding decides a few matrix
    refreshes differently, so the Newton counts agree to 2 % (measured 0.3 %).
    """
    steps = 2000
    result = bench.mbdgen_hht(module, steps)
    hand = bench.handwritten_hht(steps)
    x = hand["x"]
    np.testing.assert_allclose(result.t, hand["t"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(result.q, x[:, :4], rtol=0, atol=1e-7)
    np.testing.assert_allclose(result.qd, x[:, 4:8], rtol=0, atol=1e-7)
    np.testing.assert_allclose(result.qdd, x[:, 8:12], rtol=0, atol=1e-7 * np.abs(x[:, 8:12]).max())
    np.testing.assert_allclose(result.lam, x[:, 12:], rtol=0, atol=1e-7 * np.abs(x[:, 12:]).max())
    np.testing.assert_allclose(result.phi_norm, hand["aux"][:, 0], rtol=0, atol=1e-12)
    assert abs(result.q[-1, 0] - bench.Q0[0]) > 0.1  # the crank turned
    assert result.phi_norm[-1] < 1e-12  # index 3: on the constraint manifold
    mb, hw = result.counters["newton_iterations"], hand["counters"]["newton_iterations"]
    assert 2 * steps <= hw <= 3 * steps
    assert abs(mb - hw) <= 0.02 * hw


def test_andrews_equations_match_the_model():
    """The reference's 7-angle equations (written from the problem) and the planar model
    give the same accelerations, at rest and in motion with the stiff spring–damper.

    The model's state in motion: q0 and a velocity in the null space of Φ_q (one degree
    of freedom); the angles' rates and accelerations are the same linear maps of the
    absolute angles' (:func:`bench.andrews_angles`).  Tolerance 1e-9 relative to the
    largest acceleration: two formulations in double precision (measured: 1e-12).
    """
    from conftest import augmented

    module = bench.andrews_module()
    n = module.N_COORDINATES
    q0 = np.array(module.Q0)
    np.testing.assert_allclose(bench.andrews_angles(q0), bench.ANDREWS_ANGLES0, atol=1e-15)
    phi_q = np.zeros((module.N_CONSTRAINTS, n))
    module.phi_q(0.0, q0, module.P_DEFAULT, phi_q)
    null = np.linalg.svd(phi_q)[2][-1]
    qd = 50.0 * null / np.abs(bench.andrews_angles(null)).max()  # |angle rates| ≤ 50 rad/s
    for case, velocity in (("standard", np.zeros(n)), ("stiff", qd)):
        spec = bench.ANDREWS_CASES[case]
        p = np.array(module.P_DEFAULT, dtype=float)
        p[module.PARAMETER_NAMES.index("spring_k")] = spec["k"]
        p[module.PARAMETER_NAMES.index("spring_c")] = spec["c"]
        qdd, _ = augmented(module, 0.0, q0, velocity, p)
        y = np.concatenate([bench.ANDREWS_ANGLES0, bench.andrews_angles(velocity)])
        ref = bench.andrews_right_side(spec["k"], spec["c"])(0.0, y)[7:]
        np.testing.assert_allclose(
            bench.andrews_angles(qdd), ref, rtol=0, atol=1e-9 * np.abs(ref).max(), err_msg=case
        )


def test_at_error_takes_the_loosest_tolerance_that_reaches_the_target():
    reference = np.zeros(7)

    def run(tol):
        if tol > 1e-4:
            raise RuntimeError("step size too small")  # a failure is a miss
        return np.full(7, 0.5 * tol)

    found = bench.at_error(run, reference, target=1e-6)
    assert found["tol"] == max(t for t in bench.ANDREWS_TOLERANCES if 0.5 * t <= 1e-6)
    assert found["error"] == 0.5 * found["tol"]
    assert bench.at_error(run, reference, target=1e-30) is None


def test_work_precision_table_starts_each_search_where_the_last_stopped(monkeypatch):
    """The stiff work-precision table: per target error, the loosest tolerance of the
    grid reaching it (a tighter target never takes a looser tolerance), its steps,
    and vabm / HHT per row; an unreachable target is a dash, not a failure.  The runs
    are stubbed: error = tol (vabm) or 10 tol (HHT), so each row is known exactly."""
    grids = []

    def fake_at_error(run, reference, target, tolerances):
        grids.append((target, tolerances[0]))
        scale = 1.0 if run.__defaults__[0] == "vabm" else 10.0
        hits = [t for t in tolerances if scale * t <= target and t >= 1e-9]
        return {"tol": hits[0], "error": scale * hits[0], "tried": []} if hits else None

    class Fake:
        counters = {"steps": 7, "newton_iterations": 3, "wall_time_s": 5e-4}

    monkeypatch.setattr(bench, "at_error", fake_at_error)
    monkeypatch.setattr(bench, "andrews_reference", lambda case: np.zeros(7))
    monkeypatch.setattr(bench, "andrews_module", lambda: None)
    monkeypatch.setattr(bench, "andrews_mbdgen", lambda *a, **k: Fake())
    monkeypatch.setattr(bench, "_best", lambda fn, repeats: 1e-3)
    wp = bench.andrews_work_precision(
        "stiff", targets=(1e-2, 1e-4, 1e-12), methods=("vabm", "hht_adaptive"), repeats=1
    )
    vabm, hht = wp["rows"]["vabm"], wp["rows"]["hht_adaptive"]
    assert [r["tol"] for r in vabm[:2]] == [1e-2, 1e-4] and not vabm[2]["reached"]
    assert [r["tol"] for r in hht[:2]] == [1e-3, 1e-5] and hht[0]["steps"] == 7
    # the 1e-4 search of vabm starts at the tolerance 1e-2 found before, not at 1e-1
    assert (1e-4, 1e-2) in grids
    lines = bench.work_precision_report(wp)
    assert lines[2].split()[-2:] == ["1.0", "1.0"] and lines[-1].split()[-1] == "-"
    assert hht[0]["loop_s"] == 5e-4  # the time loop alone, from the run's counters


def test_error_control_probe_and_not_yet_available_goals(module):
    """The hook's probe tells an error-controlled run from one that ignores ``rtol``
    (a fixed-step method takes one step of the probe), and a goal whose method has no
    error control is reported "n/a", not failed."""
    tol = {"rtol": 1e-6, "atol": 1e-6}
    assert bench.error_control_available("vabm", tol)
    assert not bench.error_control_available("abm", tol)
    assert not bench.error_control_available("hht", {"no_such_option": 1.0})
    assert bench.error_control_available("hht_adaptive", tol)
    for name, options in bench.IMPLICIT_TOLERANCE_OPTIONS.items():
        assert isinstance(bench.error_control_available(name, options(1e-6)), bool)
    unavailable = {"available": False}
    reached = {"available": True, "reached": True, "wall_s": 0.1}
    cases = {
        case: {"methods": {"hht_adaptive": unavailable, "genalpha_adaptive": unavailable,
                           "radau": reached,
                           "vabm": reached}}
        for case in bench.ANDREWS_CASES
    }  # fmt: skip
    goals = bench.andrews_goals(cases)
    assert goals["pass_andrews_radau"] is None and goals["pass_andrews_stiff"] is None
    assert goals["andrews_vabm_over_radau"] == 1.0
    assert bench._goal(None) == "n/a (not yet available)"


@pytest.mark.slow
def test_run_quick():
    results = bench.run(quick=True)
    json.dumps(results)  # serialisable
    for key in (
        "mbdgen_us_per_step",
        "mbdgen_loop_us_per_step",
        "handwritten_us_per_step",
        "lambdify_us_per_step",
        "ratio_mbdgen_over_handwritten",
        "ratio_lambdify_over_mbdgen",
        "cold_total_s",
        "cold_generate_s",
        "cold_jit_s",
        "warm_total_s",
        "warm_first_step_s",
        "warm_cli_s",
        "warm_cli_numba_floor_s",
    ):
        assert isinstance(results[key], float), key
        assert results[key] > 0.0, key
    for key in ("steps", "lambdify_steps", "repeats", "warm_cache_hits"):
        assert isinstance(results[key], int) and results[key] > 0, key
    assert results["warm_cache_misses"] == 0
    assert results["cold_cache_misses"] > 0
    assert results["max_abs_q_difference_mbdgen_handwritten"] < 1e-9
    from mbdgen.methods import METHODS

    assert [row["method"] for row in results["methods"]] == list(METHODS)
    assert all(row["us_per_step"] > 0 for row in results["methods"])
    for key in (
        "pass_handwritten_ratio",
        "pass_lambdify_speedup",
        "pass_warm_start",
        "pass_warm_cache",
        "pass_warm_cli",
    ):
        assert isinstance(results[key], bool), key
    # the everyday `mbdgen simulate` imports no SymPy, matplotlib, pandas, h5py, Jinja
    assert results["warm_cli_heavy_imports"] == []
    text = bench.report(results)
    assert "hand-written" in text and "lambdify" in text and "warm start" in text
    assert "warm CLI" in text and "Numba's floor" in text
    hht = results["hht"]
    assert hht["max_abs_q_difference"] < 1e-7
    assert hht["mbdgen_us_per_step"] > 0 and hht["handwritten_us_per_step"] > 0
    for case in bench.ANDREWS_CASES:
        rows = results["andrews"][case]["methods"]
        for name in ("radau", "vabm"):
            assert rows[name]["reached"] and rows[name]["error"] <= bench.ANDREWS_TARGET_ERROR
    assert results["hht_cold"] is None  # measured by the full run only (~20 s)
    assert "Andrews" in text and "cold compile, hht" in text


def test_scale_table_reports_compile_time_and_module_size():
    """`mbdgen bench` runs this for N = 8, 64, 512 (measured: cold 14-16 s each, code
    34 kB for every N); here N = 8 only, in a fresh process with an empty cache."""
    (row,) = bench.scale([8])
    assert (row["links"], row["n"], row["m"]) == (8, 24, 16)
    assert row["code_bytes"] + row["data_bytes"] == row["bytes"]
    assert 0 < row["generate_s"] and 0 < row["jit_s"] and row["pass_cold"] in (True, False)
    assert "planar N-link chains" in bench.scale_report([row])


def test_new_model_table_times_a_copy_in_a_fresh_process():
    """`mbdgen bench --new-models` runs this for every example model (numbers in the
    design notes); here the pendulum only.  The copy is new to Numba's cache, so its
    kernels compile (compilations > 0) while the element types are not derived again."""
    (row,) = bench.new_model_latency(["pendulum"])
    assert row["model"] == "pendulum" and "error" not in row, row
    assert row["start_to_first_step_s"] >= row["generate_s"] + row["first_step_s"] > 0
    assert row["numba_compilations"] > 0 and row["pass"] in (True, False)
    assert "a new model file" in bench.new_model_report([row])
