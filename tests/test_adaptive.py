"""Variable-step, variable-order ABM PECE (:mod:`mbdgen.runtime.adaptive`).

The jitted core :func:`~mbdgen.runtime.adaptive.vabm_chunk` is driven directly with
small right sides.  One right side serves every problem (chosen by ``p[0]``), so the
integrator is compiled once for the whole file.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import run_python
from numba import njit

from mbdgen.runtime import adaptive as ad
from mbdgen.runtime.status import NONFINITE, OK, SINGULAR, STEP_SIZE_COLLAPSE

EXP, OSCILLATOR, PULSE, BLOW_UP, NAN_AFTER_1, FAILS_AT_2 = range(6)
PULSE_WIDTH = 0.05


@njit(cache=True)
def _rhs(kern, n, m, t, x, p, ctrl, ws, f, aux, state):
    which = int(p[0])
    if which == 0:  # x' = x
        f[0] = x[0]
    elif which == 1:  # x'' = −x
        f[0] = x[1]
        f[1] = -x[0]
    elif which == 2:  # x' = cos t + a smooth unit pulse at t = 5
        w = p[1]
        f[0] = math.cos(t) + math.exp(-(((t - 5.0) / w) ** 2)) / (w * math.sqrt(math.pi))
    elif which == 3:  # x' = x², x(0) = 1: x = 1/(1 − t)
        f[0] = x[0] * x[0]
    elif which == 4:  # x' = x until t = 1, then NaN
        f[0] = x[0] if t < 1.0 else math.nan
    else:  # x' = x, and the right side fails (status SINGULAR) from t = 2 on
        f[0] = x[0]
        if t >= 2.0:
            return SINGULAR
    if aux.shape[0] > 0:
        aux[0] = t
        acc = 0.0
        for i in range(x.shape[0]):
            acc += x[i] * x[i]
        aux[1] = acc
    return 0


@njit(cache=True)
def _no_kernel():
    pass


def integrate(
    problem,
    x0,
    t_out,
    tol,
    *,
    kmax=5,
    with_aux=False,
    one_step=False,
    chunk=(100, 1000),
    **settings,
):
    """Run to the last of ``t_out``; return a dict of the outputs and the state.

    Each call writes at most ``chunk[0]`` outputs and makes at most ``chunk[1]`` step
    attempts, as a Python driver would.  ``one_step``: one attempt per call, recording
    (t, h, k) of every accepted step.
    """
    x = np.array(x0, dtype=float)
    dim = x.size
    t_out = np.asarray(t_out, dtype=float)
    tol_a, fstate, istate, phi, coef, work = ad.adaptive_workspace(
        dim, kmax, rtol=tol, atol=tol, **settings
    )
    naux = 2 if with_aux else 0
    out_x = np.full((t_out.size, dim), np.nan)
    out_f = np.full((t_out.size, dim if with_aux else 0), np.nan)
    out_aux = np.full((t_out.size, naux), np.nan)
    p = np.array([problem, PULSE_WIDTH])
    steps = []

    def call(n_out, max_steps):
        return ad.vabm_chunk(
            _rhs, _no_kernel, dim, 0, p, np.zeros(2), (np.zeros(1),), np.zeros(naux),
            x, tol_a, fstate, istate, phi, coef, work, t_out, n_out, max_steps,
            out_x, out_f, out_aux,
        )  # fmt: skip

    status = call(0, 0)  # start: f(x0, t0) and the first step
    while status == OK and istate[ad.I_JOUT] < t_out.size:
        if one_step:
            before = istate[ad.I_NSTEP]
            status = call(t_out.size, 1)
            if istate[ad.I_NSTEP] > before:
                steps.append((fstate[ad.F_T], coef[ad.C_DT, 0], istate[ad.I_KLAST]))
        else:
            status = call(*chunk)
    return {
        "status": status,
        "x": x,
        "t": fstate[ad.F_T],
        "out_x": out_x,
        "out_f": out_f,
        "out_aux": out_aux,
        "steps": np.array(steps).reshape(-1, 3),
        "counters": ad.counters(istate),
    }


# -- the formulas on a variable grid ----------------------------------------------------


def modified_differences(times, values):
    """Φ_j = Π_{i<j} (t_0 − t_{i+1}) · f[t_0, …, t_j], newest node first (by the
    divided-difference table, independently of the integrator's update)."""
    times = np.asarray(times, dtype=float)
    table = np.asarray(values, dtype=float)
    phi = [table[0]]
    for j in range(1, times.size):
        table = (table[:-1] - table[1:]) / (times[: times.size - j] - times[j:])
        phi.append(table[0] * np.prod(times[0] - times[1 : j + 1]))
    return np.array(phi)


def test_equal_steps_give_haug_coefficients():
    """With equal steps g_j = γ_j (Eq. 7.4.12, Table 7.4.4), g_k − g_{k−1} = γ*_k
    (Table 7.4.10) and β_j = σ_j = 1: the formulas reduce to Eqs. 7.4.11 and 7.4.15."""
    from mbdgen.methods import adams_bashforth_gammas, adams_moulton_gammas

    _, _, _, _, coef, _ = ad.adaptive_workspace(1, 5)  # Haug's orders: k ≤ 5
    coef[ad.C_DT] = 0.1
    ad._step_coefficients(0.1, 5, 7, coef)
    gammas = [float(g) for g in adams_bashforth_gammas(6)]
    np.testing.assert_allclose(coef[ad.C_G, :6], gammas, rtol=1e-14)
    star = [float(g) for g in adams_moulton_gammas(6)]
    np.testing.assert_allclose(np.diff(coef[ad.C_G, :6]), star[1:], rtol=1e-13)
    np.testing.assert_allclose(coef[ad.C_BETA], 1.0, rtol=1e-15)
    np.testing.assert_allclose(coef[ad.C_SIGMA], 1.0, rtol=1e-15)


def test_workspace_gstar_and_tolerance_checks():
    """γ* of the workspace are |Table 7.4.10| as floats; a negative, NaN or infinite
    rtol and an atol ≤ 0 are refused, as scalars (checked in Python) and as arrays."""
    from mbdgen.methods import adams_moulton_gammas

    _, _, _, _, coef, _ = ad.adaptive_workspace(2, 10)
    expected = [abs(float(g)) for g in adams_moulton_gammas(12)]
    assert coef[ad.C_GSTAR].tolist() == expected
    for rtol, atol in ((-1e-6, 1e-6), (np.nan, 1e-6), (np.inf, 1e-6), (1e-6, 0.0),
                       (1e-6, -1.0), (1e-6, np.nan), (0, 1e-6 * np.inf)):  # fmt: skip
        for wrap in (lambda v: v, lambda v: np.full(2, v)):
            with pytest.raises(ValueError, match="tolerances must be finite"):
                ad.adaptive_workspace(2, rtol=wrap(rtol), atol=wrap(atol))
    tol, *_ = ad.adaptive_workspace(2, rtol=0, atol=True)  # ints, bools: numbers too
    assert tol.tolist() == [[0.0, 0.0], [1.0, 1.0]]


@pytest.mark.parametrize("k", range(1, 6))
def test_variable_grid_formulas_are_exact_for_polynomials(k):
    """On a grid of unequal steps (ratios up to 3) and x' = P(t): the predictor
    (Eq. 7.4.10) is exact for deg P < k, the corrector (Eq. 7.4.14) and the dense
    output for deg P ≤ k; the error estimate vanishes for deg P < k; the updated
    differences are those of the new grid."""
    rng = np.random.default_rng(k)
    tol, fstate, istate, phi, coef, work = ad.adaptive_workspace(1)
    rows = phi.shape[0]
    dts = rng.uniform(0.05, 0.15, rows)
    times = 1.0 - np.concatenate([[0.0], np.cumsum(dts[: rows - 1])])
    h = 0.12
    for degree in (k - 1, k):
        c = rng.normal(size=degree + 1)
        f, F = np.polynomial.Polynomial(c), np.polynomial.Polynomial(c).integ()
        phi[:, 0] = modified_differences(times, f(times))
        coef[ad.C_DT] = dts
        x = np.array([0.3])
        ad._step_coefficients(h, k, rows, coef)
        ad._predict(x, h, k, rows, phi, tol, coef, work)
        exact = x[0] + F(1.0 + h) - F(1.0)
        if degree < k:
            assert work[ad.R_XE, 0] == pytest.approx(exact, rel=1e-13, abs=1e-13)
        work[ad.R_FE, 0] = f(1.0 + h)  # f^p: here f does not depend on x
        err, ek, _, _ = ad._estimates(h, k, coef, work)
        if degree < k:
            assert err < 1e-6 and ek < 1e-6  # 1e-6: tol; i.e. zero up to rounding
        ad._correct(x, h, k, coef, work)
        assert work[ad.R_XE, 0] == pytest.approx(exact, rel=1e-13, abs=1e-13)
        istate[ad.I_NVALID] = rows
        istate[ad.I_NSTEP] = 10
        fstate[ad.F_T] = 1.0
        ad._accept(x, h, 1.0 + h, k, k, ek, 0.0, phi, coef, work, istate, fstate)
        new_times = np.concatenate([[1.0 + h], times[:-1]])
        np.testing.assert_allclose(
            phi[:, 0], modified_differences(new_times, f(new_times)), rtol=1e-9, atol=1e-9
        )
        out = np.zeros(1)
        for t in (1.0, 1.0 + 0.3 * h, 1.0 + h):
            ad._dense(t, fstate, istate, x, coef, work, out)
            assert out[0] == pytest.approx(0.3 + F(t) - F(1.0), rel=1e-13, abs=1e-13)


# -- integration ----------------------------------------------------------------------


def test_tolerance_proportionality_on_the_exponential():
    """x' = x to t = 10: the global error follows the tolerance (slope of log error
    against log tol near 1; measured 0.98, errors 2.5-3.1 tol) while the steps grow
    (about 90, 185, 390)."""
    tols = [1e-6, 1e-8, 1e-10]
    errors, steps = [], []
    for tol in tols:
        r = integrate(EXP, [1.0], [10.0], tol)
        assert r["status"] == OK
        errors.append(abs(r["out_x"][0, 0] / math.exp(10.0) - 1.0))
        steps.append(r["counters"]["steps"])
    slope = np.polyfit(np.log(tols), np.log(errors), 1)[0]
    assert 0.7 <= slope <= 1.3, (slope, errors)
    assert all(e < 10 * tol for e, tol in zip(errors, tols, strict=True)), errors
    assert steps[0] < steps[1] < steps[2]


@pytest.mark.parametrize("tol", [1e-6, 1e-9])
def test_oscillator_dense_output_over_twenty_periods(tol):
    """x'' = −x over 20 periods, 1000 random output times (not step points): the
    error at every one stays below 100 tol (measured 59 tol at both tolerances).
    f and aux are those of the right side evaluated at the output times."""
    t_end = 40.0 * math.pi
    t_out = np.sort(np.random.default_rng(0).uniform(0.0, t_end, 1000))
    r = integrate(OSCILLATOR, [1.0, 0.0], t_out, tol, with_aux=True)
    assert r["status"] == OK
    exact = np.stack([np.cos(t_out), -np.sin(t_out)], axis=1)
    error = np.abs(r["out_x"] - exact).max(axis=1)
    assert error.max() < 100 * tol, error.max() / tol
    np.testing.assert_array_equal(r["out_aux"][:, 0], t_out)  # evaluated at t_out
    np.testing.assert_allclose(r["out_aux"][:, 1], 1.0, atol=200 * tol)
    np.testing.assert_array_equal(r["out_f"][:, 0], r["out_x"][:, 1])
    np.testing.assert_array_equal(r["out_f"][:, 1], -r["out_x"][:, 0])
    c = r["counters"]
    assert c["output_evaluations"] == 1000
    # two per step, one per failed error test, two to start, one per output
    assert c["rhs_evaluations"] == 2 * c["steps"] + c["rejected_steps"] + 2 + 1000


def test_order_rises_from_one_and_changes():
    """The start is order 1 (one value of f known); the order then rises to 5 and the
    counter records each change."""
    r = integrate(OSCILLATOR, [1.0, 0.0], [20.0], 1e-8, one_step=True)
    orders = r["steps"][:, 2]
    assert orders[0] == 1 and orders.max() == 5
    changes = np.count_nonzero(np.diff(orders))
    assert r["counters"]["order_changes"] >= changes >= 4
    assert r["counters"]["highest_order"] == 5


def test_step_size_shrinks_at_a_pulse_and_grows_back():
    """x' = cos t + a unit Gaussian pulse of width 0.05 at t = 5: the steps shrink
    some 40-fold through the pulse, grow back after it, and the order drops and
    rises; the error stays below 100 tol everywhere (measured about 20 tol)."""
    tol = 1e-6
    t_out = np.linspace(0.0, 10.0, 1001)
    r = integrate(PULSE, [0.0], t_out, tol, one_step=True)
    assert r["status"] == OK
    w = PULSE_WIDTH
    exact = np.sin(t_out) + 0.5 * (
        np.array([math.erf((t - 5.0) / w) for t in t_out]) + math.erf(5.0 / w)
    )
    assert np.abs(r["out_x"][:, 0] - exact).max() < 100 * tol
    t, h, k = r["steps"].T
    before = np.median(h[(t > 1.0) & (t < 4.0)])
    during = h[(t > 4.8) & (t < 5.2)].min()
    after = np.median(h[t > 7.0])
    assert during < before / 10
    assert after > before / 2
    assert r["counters"]["rejected_steps"] > 0
    assert r["counters"]["order_changes"] > 4  # more than the start-up ramp


def test_chunks_do_not_change_the_result():
    """All state lives in the arrays: stopping every 7 outputs or 3 attempts (also
    between outputs of one step) gives bit for bit the result of larger chunks."""
    t_out = np.linspace(0.0, 30.0, 500)
    a = integrate(OSCILLATOR, [1.0, 0.0], t_out, 1e-7, with_aux=True, chunk=(10**6, 10**6))
    b = integrate(OSCILLATOR, [1.0, 0.0], t_out, 1e-7, with_aux=True, chunk=(7, 3))
    for key in ("out_x", "out_f", "out_aux", "x"):
        np.testing.assert_array_equal(a[key], b[key])
    assert a["counters"] == b["counters"]


def test_order_one_only():
    """kmax = 1 is AB 1 / AM 2 (trapezoidal) PECE with error control: it stays at
    order 1 and still meets the tolerance roughly."""
    r = integrate(EXP, [1.0], [2.0], 1e-5, kmax=1)
    assert r["status"] == OK
    assert r["counters"]["highest_order"] == 1 and r["counters"]["order_changes"] == 0
    assert abs(r["out_x"][0, 0] / math.exp(2.0) - 1.0) < 100 * 1e-5


def test_blow_up_collapses_the_step_size():
    """x' = x², x(0) = 1: x = 1/(1 − t) blows up at t = 1.  The steps shrink with
    1 − t until they reach 16 ulp of t: STEP_SIZE_COLLAPSE, with the last accepted
    state finite.  The numerical solution blows up within the tolerance of t = 1
    (measured t* = t + 1/x = 1 + 8e-9 at tol = 1e-8), so t may pass 1 by that much."""
    r = integrate(BLOW_UP, [1.0], [2.0], 1e-8)
    assert r["status"] == STEP_SIZE_COLLAPSE
    t, x = r["t"], r["x"][0]
    assert math.isfinite(x) and x > 1e10
    assert abs(t + 1.0 / x - 1.0) < 1e-7
    assert np.isnan(r["out_x"][0, 0])  # t = 2 never reached, nothing written
    # a user h_min stops it earlier, before t = 1
    r = integrate(BLOW_UP, [1.0], [2.0], 1e-6, h_min=1e-6)
    assert r["status"] == STEP_SIZE_COLLAPSE
    assert 0.999 < r["t"] < 1.0 and abs(r["t"] + 1.0 / r["x"][0] - 1.0) < 1e-5


def test_nan_ends_with_nonfinite_at_the_last_good_state():
    """f is NaN from t = 1 on: every step across t = 1 fails, h halves down to 16 ulp
    of t, and the chunk reports NONFINITE with x = e^t at the last accepted t < 1."""
    r = integrate(NAN_AFTER_1, [1.0], [2.0], 1e-8)
    assert r["status"] == NONFINITE
    assert 1.0 - 1e-13 < r["t"] < 1.0
    assert r["x"][0] == pytest.approx(math.e, rel=1e-7)
    assert r["counters"]["rejected_steps"] > 40


def test_a_failing_right_side_stops_at_the_last_accepted_step():
    r = integrate(FAILS_AT_2, [1.0], [3.0], 1e-8)
    assert r["status"] == SINGULAR
    assert r["t"] < 2.0 and r["x"][0] == pytest.approx(math.exp(r["t"]), rel=1e-7)


_BOUNDSCHECK_RUN = """
import json, sys
import numpy as np
sys.path.insert(0, "tests")
import test_adaptive as T
from numba import njit


@njit
def outside(a):
    return a[3]


try:
    outside(np.zeros(2))
    out = [False]
except IndexError:
    out = [True]  # the bounds are checked
r = T.integrate(T.OSCILLATOR, [1.0, 0.0], np.linspace(0, 10, 37), 1e-7, with_aux=True, chunk=(5, 4))
out.append([r["status"], r["counters"]["order_changes"]])
r = T.integrate(T.PULSE, [0.0], np.linspace(0, 7, 50), 1e-6)
out.append([r["status"], r["counters"]["rejected_steps"]])
out.append([T.integrate(T.BLOW_UP, [1.0], [2.0], 1e-6)["status"]])
out.append([T.integrate(T.NAN_AFTER_1, [1.0], [2.0], 1e-6)["status"]])
out.append([T.integrate(T.EXP, [1.0], [1.0], 1e-6, kmax=1)["status"]])
print(json.dumps(out))
"""


@pytest.mark.slow
def test_no_out_of_bounds_access(tmp_path):
    """The same integrations compiled with NUMBA_BOUNDSCHECK=1 (a fresh cache, so
    nothing compiled without the checks is reused): no IndexError anywhere, through
    the start, order changes, rejections, chunk ends, dense output and both guards."""
    env = {"NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(tmp_path)}
    checked, *result = json.loads(run_python(_BOUNDSCHECK_RUN, env=env).splitlines()[-1])
    assert checked
    assert result[0][0] == OK and result[0][1] >= 4
    assert result[1][0] == OK and result[1][1] > 0
    assert result[2] == [STEP_SIZE_COLLAPSE]
    assert result[3] == [NONFINITE]
    assert result[4] == [OK]
