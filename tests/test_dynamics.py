"""Integrating the example models: orders of convergence, constraint behaviour,
energy, and failures that keep what was computed."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import fitted_order

import mbdgen
from mbdgen.errors import MbdgenError, SimulationError
from mbdgen.methods import METHODS, get_method
from mbdgen.simulation import CHUNK_STEPS

# -- order of convergence on the pendulum (Haug 1989, Example 7.2.1) ------------------


# Halvings of h = 0.1 fitted, by expected order: each window lies in the asymptotic
# range and above the 1e-13 floor of round-off and of the reference solution.
WINDOWS = {1: range(3, 9), 2: range(3, 9), 3: range(3, 9), 4: range(2, 8), 5: range(2, 7),
           6: range(1, 6)}  # fmt: skip
# Every registered method at every order it offers (a new method is tested by adding it).
ORDER_CASES = [
    (method.name, k, WINDOWS[method.order(k)])
    for method in METHODS.values()
    # an error-controlled method's error is set by tolerances: see
    # test_variable_step_* and tests/test_hht_adaptive.py
    if not method.error_controlled
    for k in method.orders
]


@pytest.mark.parametrize(("method", "k", "levels"), ORDER_CASES)
def test_order_of_convergence(pendulum, pendulum_reference, method, k, levels):
    """AB k and AMPC_k converge with order k, ABM k PECE and MAMPC_k with order k + 1
    (Haug 1989 §7.4, Eqs. 7.4.13 and 7.4.16; Wu et al. 2000, Eq. 30), fitted over 5-6
    halvings of h; tolerance ±0.3."""
    expected = get_method(method).order(k)
    slope, errors = fitted_order(pendulum, pendulum_reference, method, k, levels)
    assert abs(slope - expected) <= 0.3, (slope, errors)


@pytest.mark.parametrize("k", [3, 4, 5])
def test_order_ramp_start_limits_adams_bashforth_to_order_two(pendulum, pendulum_reference, k):
    """Haug's self-start (§7.4.4) begins with an Euler step, whose O(h²) local error
    no later step removes (Haug 1989, end of §7.4.2): AB k is then second order.
    This is why the default start is the RKF starter."""
    slope, errors = fitted_order(pendulum, pendulum_reference, "ab", k, range(3, 9), start="ramp")
    assert abs(slope - 2.0) <= 0.2, (slope, errors)


@pytest.mark.parametrize("method", ["vabm", "rkf45_adaptive"])
def test_variable_step_method_meets_its_tolerance(pendulum, pendulum_solution, method):
    """vabm (Haug 1989 §7.4.4) with orders up to 5 (AB 5 / AM 6, Haug's tables): the
    error at 1001 output times, against the reduced ODE, is proportional to the
    tolerance (measured 1.6, 1.2, 1.3 × tol for 1e-6, 1e-8, 1e-10) and the step count
    grows (501, 1059, 2305 steps).  Orders up to 12 (the default): next test.

    RKF45 with step-size control controls the error per step (of the fourth-order
    solution, while it keeps the fifth): its global error is 45, 41, 62 × tol, in
    125, 308, 773 steps; bound 100 × tol.  The cubic Hermite dense output is not what
    limits it (outputs every 0.5 s instead of 0.01 s: 45, 35, 53 × tol).
    """
    order = 5 if method == "vabm" else None
    steps = []
    for tol in (1e-6, 1e-8, 1e-10):
        r = mbdgen.simulate(pendulum, method, order, 0.01, 10.0, rtol=tol, atol=tol)
        assert len(r) == 1001 and r.t[-1] == pytest.approx(10.0)
        error = np.abs(r.q[:, 2] - pendulum_solution(r.t)[0]).max()
        assert 0.1 * tol < error < (10 if method == "vabm" else 100) * tol
        steps.append(r.counters["steps"])
    assert steps == sorted(steps) and steps[0] < steps[-1] / 3


def test_vabm_up_to_order_12_takes_fewer_steps(pendulum, pendulum_solution):
    """vabm with DE's orders up to 12 (the default) on the same pendulum: the order
    climbs to 12, the error stays below the tolerance and falls with it (measured
    0.30, 0.15, 0.08 × tol for 1e-6, 1e-8, 1e-10: a high order's estimate is more
    cautious than k ≤ 5's, so the error falls faster than the tolerance), in 268, 395,
    551 steps against 501, 1059, 2305 at k ≤ 5 (1.9, 2.7, 4.2 times fewer).  Bounds:
    error < tol and > 0.01 tol, at least 1.5, 2 and 3 times fewer steps, no rejection."""
    assert get_method("vabm").default_order == 12
    errors = []
    for tol, fewer in ((1e-6, 1.5), (1e-8, 2.0), (1e-10, 3.0)):
        runs = [
            mbdgen.simulate(pendulum, "vabm", k, 0.01, 10.0, rtol=tol, atol=tol) for k in (5, None)
        ]
        low, high = (r.counters for r in runs)
        assert high["highest_order"] == 12 and high["rejected_steps"] == 0
        assert low["steps"] >= fewer * high["steps"], (low["steps"], high["steps"])
        error = np.abs(runs[1].q[:, 2] - pendulum_solution(runs[1].t)[0]).max()
        assert 0.01 * tol < error < tol
        errors.append(error)
    assert errors == sorted(errors, reverse=True)


# -- the slider-crank (Wu et al. 2000 Eqs. 35-37, Welch et al. 2007 Eqs. 71-76) -------


def _first_last_second(result):
    per_second = int(round(1.0 / result.info["h"]))
    return result.phi_norm[1 : per_second + 1].mean(), result.phi_norm[-per_second:].mean()


@pytest.mark.slow
def test_slider_crank_baumgarte_bounds_the_constraint_residual(slider_crank, slider_crank_q0):
    """ABM4, h = 1e-3, 10 s, α = β = 5: ‖Φ‖ stays below 1e-10 (measured max 2.8e-11)
    and does not grow: the last second's mean is within 2× the first second's."""
    r = mbdgen.simulate(slider_crank, "abm", 4, 1e-3, 10.0, q0=slider_crank_q0, alpha=5, beta=5)
    first, last = _first_last_second(r)
    assert r.phi_norm.max() < 1e-10
    assert last < 2.0 * first


@pytest.mark.slow
def test_slider_crank_without_stabilization_drifts(slider_crank, slider_crank_q0):
    """Same run with α = β = 0 (direct integration, Haug 1989 §7.3.3): the mean ‖Φ‖
    over the last second is more than 3× that of the first (measured 6×)."""
    r = mbdgen.simulate(slider_crank, "abm", 4, 1e-3, 10.0, q0=slider_crank_q0)
    first, last = _first_last_second(r)
    assert last > 3.0 * first


def test_slider_crank_baumgarte_removes_the_initial_violation(slider_crank):
    """Eq. 75 is printed to four digits, so ‖Φ(q0)‖ = 4.1e-5.  Baumgarte (α = β = 5)
    damps it below 1e-10 by t = 5 s; direct integration never corrects it."""
    stab = mbdgen.simulate(slider_crank, "abm", 4, 1e-3, 5.0, alpha=5, beta=5)
    plain = mbdgen.simulate(slider_crank, "abm", 4, 1e-3, 5.0)
    assert stab.phi_norm[0] == pytest.approx(4.14e-5, rel=1e-2)
    assert stab.phi_norm[-1] < 1e-10
    assert plain.phi_norm.min() > 4.0e-5


def test_slider_crank_conserves_energy(slider_crank, slider_crank_q0):
    """The slider-crank is conservative (Welch et al. 2007 §VI): with ABM4 and
    h = 1e-3 the total energy changes by less than 1e-8 J over 10 s (measured 3e-10)."""
    r = mbdgen.simulate(slider_crank, "abm", 4, 1e-3, 10.0, q0=slider_crank_q0, output_every=10)
    J1, J2, m, _, _, _, g = slider_crank.P_DEFAULT
    qd = r.qd
    energy = 0.5 * (J1 * qd[:, 0] ** 2 + J2 * qd[:, 1] ** 2 + m * (qd[:, 2] ** 2 + qd[:, 3] ** 2))
    energy += m * g * r.q[:, 3]
    assert np.abs(energy - energy[0]).max() < 1e-8
    assert len(r) == 1001 and r.t[-1] == pytest.approx(10.0)


# -- failures keep what was computed ----------------------------------------------------


def test_blow_up_is_reported_with_the_partial_result(slider_crank):
    """α h = 5 is far beyond AB5's stability limit (Wu et al. 2000, Eq. 34)."""
    message = r"stopped in the step from t = .*the solution blew up.*smaller step"
    with pytest.raises(SimulationError, match=message) as info:
        mbdgen.simulate(slider_crank, "ab", 5, 0.01, 10.0, alpha=500, beta=500)
    partial = info.value.result
    assert 0 < len(partial) < 1001
    assert np.isfinite(partial.q).all()
    assert partial.info["status"] == "failed"


def test_interrupt_keeps_the_steps_done(pendulum):
    calls = []

    def progress(t, t_end):
        calls.append(t)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with pytest.raises(SimulationError, match="interrupted") as info:
        mbdgen.simulate(pendulum, "abm", 4, 1e-4, 10.0, progress=progress)
    assert len(info.value.result) == 2 * CHUNK_STEPS + 1


def test_a_singular_augmented_matrix_is_an_error(tmp_path):
    """M = diag(1, 1, 0) and a constraint that does not involve θ at θ = 0: the
    augmented matrix of Eq. 7.2.1 is singular.  (Redundant rows found at t0 no longer
    stop a run: they are removed, see test_faults_redundant.py.)"""
    model = tmp_path / "singular.py"
    model.write_text(
        "import sympy as sp\n"
        "from mbdgen.model import Model\n"
        "x, y, th = sp.symbols('x y th')\n"
        "model = Model(name='singular', coordinates=[x, y, th], mass=sp.diag(1, 1, 0),\n"
        "    force=[0, -9.81, 0], constraints=[x - sp.cos(th)], q0=[1, 0, 0])\n"
    )
    message = r"mass matrix is singular on the motions the constraints allow: coordinate\(s\) th "
    with pytest.raises(SimulationError, match=message) as info:
        mbdgen.simulate(mbdgen.compile(model, tmp_path / "gen"), h=0.01, t_end=1.0)
    assert len(info.value.result) == 0


def test_parameters_are_runtime_values(pendulum):
    """Changing g changes the motion without recompiling (DESIGN rule 3)."""
    base = mbdgen.simulate(pendulum, h=1e-3, t_end=0.5)
    heavy = mbdgen.simulate(pendulum, h=1e-3, t_end=0.5, params={"g": 2 * 9.81})
    assert heavy.q[-1, 2] < base.q[-1, 2] < 0
    assert heavy.info["parameters"]["g"] == 2 * 9.81
    with pytest.raises(MbdgenError, match="no parameter 'G'; its parameters"):
        mbdgen.simulate(pendulum, params={"G": 1.0})


@pytest.mark.slow
def test_every_method_stays_in_bounds(tmp_path):
    """Every registered method, and GCP (with re-partitioning) and the hybrid
    algorithm, run with Numba's bounds checking on (a write past an array's end in
    jitted code would corrupt memory silently otherwise).  Welch's Euler-parameter
    path is checked without JIT (test_welch).

    Compiled without LLVM's optimizations (``NUMBA_OPT=0``): Numba inserts the checks
    when it lowers to LLVM IR, before any optimization, and an optimizer may only drop
    a check it proves cannot fail, so the same accesses are checked; this test times
    nothing, and its compile of every method (a fresh cache) took 25 % less (112 → 84 s
    for four methods)."""
    from conftest import run_python

    code = (
        "import mbdgen\n"
        "from mbdgen.methods import METHODS\n"
        "for name, method in METHODS.items():\n"
        "    for k in method.orders:\n"
        "        for start in ('rkf45', 'ramp'):\n"
        "            gains = {} if method.enforces_constraints else {'alpha': 1.0, 'beta': 1.0}\n"
        "            mbdgen.simulate('models/pendulum.py', name, k, 0.01, 0.2, start=start,\n"
        "                            output_every=3, **gains)\n"
        "for name in ('abm', 'rk4'):\n"
        "    mbdgen.simulate('models/circle.py', name, None, 0.01, 2.0, constraints='gcp')\n"
        "    mbdgen.simulate('models/circle.py', name, None, 0.01, 2.0, constraints='hybrid',\n"
        "                    alpha=1.0, beta=1.0)\n"
        "print('ok')\n"
    )
    env = {
        "NUMBA_BOUNDSCHECK": "1",
        "NUMBA_OPT": "0",
        "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
        "MBDGEN_SPECIALIZE": "now",  # the model's own loops, which users step through
    }
    assert run_python(code, env=env).strip().endswith("ok")


@pytest.mark.parametrize("method", ["vabm", "rkf45_adaptive", "dop853"])
def test_variable_step_collapse_keeps_the_partial_result(tmp_path, method):
    """ẍ = x³ from x = 1 at rest escapes to infinity at t ≈ 1.85: the variable-step
    method stops with a step-size collapse (or a NaN) naming the time, and the
    outputs before it are kept."""
    model = tmp_path / "escape.py"
    model.write_text(
        "import sympy as sp\n"
        "from mbdgen.model import Model\n"
        "x = sp.Symbol('x')\n"
        "model = Model(name='escape', coordinates=[x], mass=[[1]], force=[x**3], q0=[1.0])\n"
    )
    module = mbdgen.compile(model, tmp_path / "gen")
    pattern = r"stopped at t = 1\.8\d*: the (step size|solution)"
    with pytest.raises(SimulationError, match=pattern) as info:
        mbdgen.simulate(module, method, None, 0.01, 5.0, rtol=1e-8, atol=1e-8)
    partial = info.value.result
    assert 150 < len(partial) < 200 and np.isfinite(partial.q).all()
