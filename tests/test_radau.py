"""Radau IIA of order 5 on the index-3 DAE (``radau5``; Hairer & Wanner 1996, §IV.8 and
§VII.4; :mod:`mbdgen.runtime.radau`): the tableau and its transformation, the orders of
q, q̇ and λ at a fixed step, tolerance proportionality, outputs on the grid, Andrews'
mechanism against an independent reference, stiff Andrews, and bad input."""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import pytest
from numba import types

import mbdgen
from mbdgen.errors import MbdgenError
from mbdgen.runtime import radau
from mbdgen.simulation import ConstraintWarning


def _run(module, tol, t_end=1.0, h=0.05, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstraintWarning)
        return mbdgen.simulate(
            module, "radau5", None, h, t_end, rtol=tol, atol=tol, assemble=True,
            options=options or None,
        )  # fmt: skip


def test_tableau_and_its_transformation():
    """The three-stage Radau IIA tableau: A 1 = c, the simplifying conditions B(5) of
    its weights b = A's last row (Σ b_i c_i^(k−1) = 1/k, k ≤ 5) and C(3) (Σ_j a_ij c_j^(k−1)
    = c_i^k / k, k ≤ 3); T⁻¹ A⁻¹ T has the real-Jordan form the solves rely on, with
    RADAU5's eigenvalues γ̂ = 3.6378…, α̂ ± iβ̂ = 2.6811… ± 3.0504… i (to 1e-12)."""
    c, A = radau.C, radau.A_RADAU
    b = A[-1]
    assert A.sum(axis=1) == pytest.approx(c, abs=1e-15)
    for k in range(1, 6):
        assert np.dot(b, c ** (k - 1)) == pytest.approx(1.0 / k, abs=1e-14)
    for k in range(1, 4):
        assert A @ c ** (k - 1) == pytest.approx(c**k / k, abs=1e-14)
    lam = radau.TI_RADAU @ radau.W_RADAU @ radau.T_RADAU
    expected = np.array(
        [
            [radau.GAMMA_HAT, 0.0, 0.0],
            [0.0, radau.ALPHA_HAT, radau.BETA_HAT],
            [0.0, -radau.BETA_HAT, radau.ALPHA_HAT],
        ]
    )
    assert lam == pytest.approx(expected, abs=1e-12)
    cbrt81, cbrt9 = 81.0 ** (1 / 3), 9.0 ** (1 / 3)
    u1 = 30.0 / (6.0 + cbrt81 - cbrt9)
    alph = (12.0 - cbrt81 + cbrt9) / 60.0
    beta = (cbrt81 + cbrt9) * math.sqrt(3.0) / 60.0
    cno = alph * alph + beta * beta
    assert radau.GAMMA_HAT == pytest.approx(u1, rel=1e-12)
    assert radau.ALPHA_HAT == pytest.approx(alph / cno, rel=1e-12)
    assert radau.BETA_HAT == pytest.approx(beta / cno, rel=1e-12)


def test_orders_of_q_qd_and_lambda_at_a_fixed_step(pendulum, pendulum_exact):
    """Fixed steps (``fixed_step``: every step h, accepted) from h = 1/8 over four
    halvings to t = 1, against the pendulum's independent solution (conftest).  On an
    index-3 DAE, Radau IIA with s = 3 stages converges with order 2s − 1 = 5 in q, s = 3
    in q̇ and s − 1 = 2 in λ (Hairer, Lubich & Roche 1989; Hairer & Wanner §VII.4,
    Table 4.1).  Fitted slopes must reach 4.6, 2.7 and 1.8 (measured 4.9, 3.0 and 2.3;
    q's errors 6.2e-5 … 7.3e-11).

    A fifth halving (h = 1/256) is below the Newton iteration's floor and is checked
    only for that: its q error is 5.2e-10 (bound 2e-9), not the 2e-12 of order 5,
    because the iteration stops at κ times the weights, and λ's weights are
    rtol (1 + |λ|)/h² (RADAU5's index-3 scaling) with κ rtol ≥ 100 eps
    (:data:`mbdgen.runtime.radau.NOISE`): λ is left 1e-8 from its stage value, which
    moves q by about h² · 1e-8 per step.  max_iterations = 40: at h = 1/8 (hω ≈ 0.4)
    the frozen Jacobian converges slower than RADAU5's default 7 iterations allow, and
    a fixed-step study must not cut steps."""
    hs = 0.125 / 2.0 ** np.arange(6)
    errors = []
    for h in hs:
        r = _run(pendulum, 1e-10, h=float(h), fixed_step=True, max_iterations=40)
        assert r.counters["steps"] == round(1.0 / h)
        assert r.t[-1] == 1.0
        errors.append(
            [
                np.abs(r.q[-1] - pendulum_exact["q"]).max(),
                np.abs(r.qd[-1] - pendulum_exact["qd"]).max(),
                np.abs(r.lam[-1] - pendulum_exact["lam"]).max(),
            ]
        )
    errors = np.array(errors)
    slopes = np.polyfit(np.log(hs[:5]), np.log(errors[:5]), 1)[0]
    assert slopes[0] >= 4.6, (slopes, errors)
    assert slopes[1] >= 2.7, (slopes, errors)
    assert slopes[2] >= 1.8, (slopes, errors)
    assert errors[5, 0] < 2e-9, errors


def test_global_error_falls_with_the_tolerance(pendulum, pendulum_exact):
    """Tolerance proportionality over six decades on the pendulum at t = 1: every decade
    gains, and the error stays within 20 rtol (measured 1.4e-4, 1.2e-6, 8.2e-9, 1.1e-10
    for rtol 1e-4 … 1e-10; fitted slope in [0.7, 1.1], measured 1.02).  Every run ends with a step
    at t = 1 exactly, where ‖Φ‖ is within the Newton tolerance (κ rtol ≤ 0.01 rtol)."""
    tolerances = np.array([1e-4, 1e-6, 1e-8, 1e-10])
    errors = []
    for tol in tolerances:
        r = _run(pendulum, tol)
        assert r.t[-1] == 1.0
        assert r.phi_norm[-1] < 0.01 * tol
        errors.append(np.abs(r.q[-1] - pendulum_exact["q"]).max())
    errors = np.array(errors)
    assert np.all(np.diff(errors) < 0), errors
    assert np.all(errors < 20.0 * tolerances), errors
    slope = np.polyfit(np.log(tolerances), np.log(errors), 1)[0]
    assert 0.7 <= slope <= 1.1, (slope, errors)


def test_outputs_land_on_the_requested_grid(slider_crank):
    """Outputs at t0 + k h on the collocation polynomial, whatever the steps (here
    fewer steps than outputs); a coarser grid takes the same steps and its rows equal
    the fine grid's shared rows (bound 1e-12)."""
    fine = _run(slider_crank, 1e-6, h=0.005)
    coarse = _run(slider_crank, 1e-6, h=0.05)
    assert fine.t == pytest.approx(np.arange(201) * 0.005, abs=1e-15)
    assert fine.counters["steps"] < 200
    assert fine.counters["steps"] == coarse.counters["steps"]
    assert coarse.q == pytest.approx(fine.q[::10], abs=1e-12)
    assert coarse.lam == pytest.approx(fine.lam[::10], abs=1e-12)


@pytest.fixture(scope="module")
def andrews():
    """Andrews' mechanism and its seven angles at t_end of both problems, computed
    independently of mbdgen (:func:`mbdgen.bench.andrews_reference`)."""
    from mbdgen import bench

    return bench.andrews_module(), {c: bench.andrews_reference(c) for c in bench.ANDREWS_CASES}


def test_andrews_error_falls_with_the_tolerance(andrews):
    """Andrews' squeezing mechanism to t = 0.03 (21 coordinates, 20 constraints) at
    rtol = atol = 1e-5, 1e-7, 1e-9: the max error of the seven angles against DOP853 at
    1e-13 on Hairer & Wanner's equations falls at every step, and 1e-9 reaches the
    bench's target 1e-6 (measured 9.2e-4, 3.5e-6, 1.5e-8).  Looser than the tolerance:
    the crank turns at up to 1.4e3 rad/s, the angles' weights atol + rtol |q| of the
    absolute coordinates are those of 21 unknowns, not 7, and the estimate weighs v by
    s/h and λ by s/h² (RADAU5's index-2 and index-3 scaling)."""
    from mbdgen import bench

    module, reference = andrews
    errors = []
    for tol in (1e-5, 1e-7, 1e-9):
        r = bench.andrews_mbdgen(module, "standard", "radau5", rtol=tol, atol=tol)
        assert r.ok and r.t[-1] == pytest.approx(0.03, abs=1e-15)
        errors.append(np.abs(bench.andrews_angles(r.q[-1]) - reference["standard"]).max())
    assert np.all(np.diff(errors) < 0), errors
    assert errors[-1] < 1e-6, errors


def test_andrews_error_follows_tight_tolerances(andrews):
    """At rtol = atol = 1e-8, 1e-9, 1e-10 the angles' error falls with the tolerance, to
    below 1e-8 (measured 2.4e-7, 1.5e-8, 4.2e-9; vabm 1.5e-7, 4.4e-8, 4.2e-9).  With
    RADAU5's own iteration (``extra_iteration=False``) it stays near 1e-7 (measured
    1.2e-6, 2.1e-7, 1.25e-7): the stopping test weighs a velocity's correction by
    (atol + rtol |v|)/h, and on this mechanism (|v| up to 1.4e3 rad/s) the velocity
    errors it leaves add up in q over the run; the iteration past the test divides them
    by the contraction Θ (design notes, stops 33 and 35).  The second half keeps that
    floor in view, so that a change which removes the extra iteration's effect shows."""
    from mbdgen import bench

    module, reference = andrews

    def errors(**options):
        out = []
        for tol in (1e-8, 1e-9, 1e-10):
            r = bench.andrews_mbdgen(
                module, "standard", "radau5", rtol=tol, atol=tol, options=options or None
            )
            out.append(np.abs(bench.andrews_angles(r.q[-1]) - reference["standard"]).max())
        return out

    extra = errors()
    assert np.all(np.diff(extra) < 0), extra
    assert extra[-1] < 1e-8, extra
    radau5 = errors(extra_iteration=False)
    assert min(radau5) > 5e-8, radau5  # the floor of RADAU5's iteration


def test_stiff_andrews_takes_few_steps(andrews):
    """Andrews with k = 30 000, c = 100 000 (Haug, Negrut & Iancu 1997, §4) at rtol =
    atol = 1e-6: the error of the angles at t = 0.035 against SciPy's Radau at 1e-12 is
    below 1e-6 in under 60 steps (measured 1.2e-8 in 27), where the explicit vabm needs
    over 800 steps for any accuracy (its stability limit; measured 890)."""
    from mbdgen import bench

    module, reference = andrews
    r = bench.andrews_mbdgen(module, "stiff", "radau5", rtol=1e-6, atol=1e-6)
    error = np.abs(bench.andrews_angles(r.q[-1]) - reference["stiff"]).max()
    assert error < 1e-6
    assert r.counters["steps"] < 60
    explicit = bench.andrews_mbdgen(module, "stiff", "vabm", rtol=1e-6, atol=1e-6)
    assert explicit.counters["steps"] > 10 * r.counters["steps"]


def test_counters_and_info(slider_crank):
    """Every result carries steps, rejections (error test, Newton), Newton iterations,
    Jacobian evaluations and factorizations (two per matrix update: real and complex)."""
    r = _run(slider_crank, 1e-6)
    c = r.counters
    for key in (
        "steps", "rejected_steps", "newton_failures", "newton_iterations",
        "jacobian_evaluations", "factorizations", "rhs_evaluations",
    ):  # fmt: skip
        assert key in c
    assert c["newton_iterations"] >= c["steps"] > 0
    assert c["factorizations"] % 2 == 0
    assert r.info["method"] == "radau5"
    assert r.info["newton_stop"] == pytest.approx(radau.control(1e-6)[radau.C_KAPPA])


@pytest.mark.parametrize(
    ("options", "text"),
    [
        ({"max_iterations": 1}, "max_iterations must be a whole number ≥ 2"),
        ({"hht_alpha": -0.1}, "takes the options"),
        ({"h_max": -1.0}, "h_max must be a number > 0"),
    ],
)
def test_bad_options_get_one_line(pendulum, options, text):
    with pytest.raises(MbdgenError, match=text):
        mbdgen.simulate(pendulum, "radau5", None, 0.01, 0.1, options=options)


def test_a_model_with_user_states_is_refused(pi_pendulum):
    """Radau integrates no user differential states: a stateful model is refused with
    the methods that integrate them, not run with X held at X0."""
    with pytest.raises(MbdgenError, match="hht"):
        mbdgen.simulate(pi_pendulum, "radau5", None, 0.01, 0.1)


def test_sparse_path_equals_the_dense_one(andrews):
    """A sparse module (Andrews: n + m = 41) steps on its patterns: M, Φ_q and the
    Jacobian's blocks as values, the real and the complex matrix factored by the plan
    of HHT's sparse Newton matrix, no (n + m)² array.  The same run on the dense path
    (the module's dense kernels, LU with partial pivoting) takes the same steps and
    ends within rounding (bound 1e-10; measured 3e-13)."""
    from mbdgen import bench

    module = andrews[0]
    assert module.LINEAR_ALGEBRA == "sparse"
    ws = radau.sparse_workspace(module, np.zeros(1))
    n = module.N_COORDINATES
    assert all(a.size < n * n for a in ws if isinstance(a, np.ndarray))
    runs = {}
    try:
        for la in ("sparse", "dense"):
            module.LINEAR_ALGEBRA = la
            runs[la] = bench.andrews_mbdgen(module, "standard", "radau5", rtol=1e-7, atol=1e-7)
    finally:
        module.LINEAR_ALGEBRA = "sparse"
    assert runs["sparse"].counters["steps"] == runs["dense"].counters["steps"]
    assert runs["sparse"].q[-1] == pytest.approx(runs["dense"].q[-1], abs=1e-10)


def test_bound_routine_calls_the_compiled_entry_for_the_same_types():
    """:class:`mbdgen.runtime.shared._Bound` calls the compiled entry point directly
    once the routine ran for those argument types (also from a new binding: a new
    run), and goes back through the dispatcher for arguments of other types (here an
    integer array after a float one)."""
    from numba import njit

    from mbdgen.runtime import shared

    @njit
    def total(k, a):
        return k(a.sum())

    @njit
    def twice(x):
        return 2 * x

    kern = shared.KernelPointer(twice, types.float64(types.float64))
    bound = shared._Bound(total, (kern,), "total")
    assert bound(np.array([1.0, 2.0])) == 6.0
    again = shared._Bound(total, (kern,), "total")
    assert again(np.array([1.5, 2.0])) == 7.0
    assert len(total.overloads) == 1
    assert sum(k[0] is total for k in shared._ENTRY_POINTS) == 1
    assert again(np.array([1, 2], dtype=np.int64)) == 6.0  # a new type: compiled
    assert len(total.overloads) == 2
    assert sum(k[0] is total for k in shared._ENTRY_POINTS) == 2


def test_kernels_and_workspaces_cross_into_the_routine_cheaply():
    """A :class:`~mbdgen.runtime.shared.KernelPointer` is typed ``KernelType`` and
    unboxed from its ``_address`` (Numba's generic first-class-function unboxing cost
    ~5 µs per kernel per call); a missing address is a Python error, not a crash.  A
    call with the last call's arrays and workspace, and scalars of the same types,
    reuses the last entry point without recomputing the type key; a new array does."""
    from numba import njit, typeof

    from mbdgen.runtime import shared

    @njit
    def scaled(k, ws, a, s):
        return k(a.sum() + ws.b[0]) * s

    @njit
    def triple(x):
        return 3 * x

    class Ws(NamedTuple):
        b: np.ndarray

    kern = shared.KernelPointer(triple, types.float64(types.float64))
    assert isinstance(typeof(kern), shared.KernelType)
    bound = shared._Bound(scaled, (kern,), "scaled")
    ws, a = Ws(np.array([1.0])), np.array([1.0, 2.0])
    assert bound(ws, a, 2.0) == 24.0  # compiles, through the dispatcher
    assert bound._last is None
    assert bound(ws, a, 1.0) == 12.0  # the type key, then remembered
    last = bound._last
    assert last is not None
    a[0] = 2.0
    assert bound(ws, a, 3.0) == 45.0 and bound._last is last  # same objects: no key
    assert bound(ws, a.copy(), 1.0) == 15.0 and bound._last is not last  # new array
    assert bound(ws, a, 1) == 15.0  # an int where a float was: the dispatcher's
    assert len(scaled.overloads) == 2

    broken = object.__new__(shared.KernelPointer)
    broken._signature = kern.signature()
    with pytest.raises(AttributeError, match="_address"):
        scaled(broken, ws, a, 1.0)


def test_fixed_steps_that_do_not_add_up_exactly_land_on_t_end(pendulum):
    """Ten steps of 0.05 end at 0.49999999999999994: the last one must reach t_end =
    0.5 (RADAU5's landing, within h/10⁴), not leave a step of 6e-17 that fails as a
    step-size collapse."""
    r = _run(pendulum, 1e-10, t_end=0.5, h=0.05, fixed_step=True, max_iterations=40)
    assert r.ok and r.counters["steps"] == 10 and r.t[-1] == 0.5 and len(r) == 11
