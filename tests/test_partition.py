"""Generalized coordinate partitioning (Haug 1989 §7.3.2) and the hybrid algorithm (§7.3.5)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import MODELS, fitted_order
from scipy.integrate import solve_ivp

import mbdgen
from mbdgen.errors import MbdgenError
from mbdgen.runtime.partition import choose_partition


@pytest.fixture(scope="module")
def circle():
    return mbdgen.compile(MODELS / "circle.py")


def test_full_pivoting_picks_the_best_conditioned_dependent_set():
    dep, ind, quality = choose_partition(np.array([[2.0, 0.1]]))
    assert (dep.tolist(), ind.tolist(), quality) == ([0], [1], 1.0)
    dep, ind, _ = choose_partition(np.array([[0.1, -2.0]]))
    assert (dep.tolist(), ind.tolist()) == ([1], [0])
    # pendulum at φ = 0: x and y are dependent, φ independent (Haug Example 7.2.1)
    dep, ind, _ = choose_partition(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, -1.0]]))
    assert (dep.tolist(), ind.tolist()) == ([0, 1], [2])
    with pytest.raises(ValueError, match="redundant"):
        choose_partition(np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]]))


@pytest.fixture(scope="module")
def circle_reference():
    """The angle ψ of the particle: ψ'' = −(g/l) cos ψ, ψ(0) = 0, ψ'(0) = 6/l."""
    sol = solve_ivp(
        lambda t, y: [y[1], -9.81 * np.cos(y[0])], (0, 10), [0.0, 6.0], rtol=1e-12, atol=1e-12
    )
    psi = sol.y[0, -1]
    return np.array([np.cos(psi), np.sin(psi)])


def test_gcp_repartitions_around_the_loop(circle, circle_reference):
    """The dependent coordinate must change every quarter turn: GCP re-partitions
    (35 times in 10 s), keeps ‖Φ‖ at the Newton tolerance and follows the exact
    motion (ABM 4, h = 1e-3: within 1e-6 after 10 s and five loops)."""
    r = mbdgen.simulate(circle, "abm", 4, 1e-3, 10.0, constraints="gcp", newton_tol=1e-10)
    assert r.counters["repartitions"] >= 20
    assert len(r.info["repartitioned_at_steps"]) == r.counters["repartitions"]
    assert r.phi_norm.max() <= 1e-10
    np.testing.assert_allclose(r.q[-1], circle_reference, atol=1e-6)
    assert len(r) == 10001 and np.all(np.diff(r.t) > 0)  # no step recorded twice


def test_without_repartitioning_gcp_goes_wrong(circle, circle_reference):
    """With re-partitioning switched off the fixed partition breaks down at the top
    of the loop: the run stops or leaves the true motion."""
    try:
        r = mbdgen.simulate(circle, "abm", 4, 1e-3, 10.0, constraints="gcp", pivot_ratio=0.0)
    except mbdgen.errors.SimulationError:
        return
    assert np.abs(r.q[-1] - circle_reference).max() > 1e-2


def test_gcp_keeps_the_constraints_at_the_newton_tolerance(slider_crank):
    """Slider-crank, ABM 4, h = 1e-3, 10 s: ‖Φ‖∞ ≤ 1e-10 at every step; the printed
    q0 (‖Φ‖ = 4e-5) is assembled by the first Newton solve, holding θ0."""
    r = mbdgen.simulate(slider_crank, "abm", 4, 1e-3, 10.0, constraints="gcp", newton_tol=1e-10)
    assert r.phi_norm.max() <= np.sqrt(3) * 1e-10
    assert r.phid_norm.max() < 1e-9
    assert r.q[0, 0] == 0.9851


@pytest.mark.parametrize("constraints", ["gcp", "hybrid"])
def test_order_is_kept(pendulum, pendulum_reference, constraints):
    """ABM 3 with GCP or hybrid constraint handling is still fourth order (slope of
    the error in φ(1) over five halvings of h, against the reduced ODE)."""
    gains = {"alpha": 5.0, "beta": 5.0} if constraints == "hybrid" else {}
    slope, errors = fitted_order(
        pendulum, pendulum_reference, "abm", 3, range(3, 8),
        constraints=constraints, newton_tol=1e-13, **gains,
    )  # fmt: skip
    assert abs(slope - 4.0) <= 0.3, (slope, errors)


def test_hybrid_corrects_only_when_needed(slider_crank):
    """Hybrid (Baumgarte α = β = 5 plus GCP correction above ‖Φ‖∞ = 1e-8): the
    printed q0 is corrected at once, and the run stays below the tolerance."""
    r = mbdgen.simulate(
        slider_crank, "abm", 4, 1e-3, 10.0, alpha=5, beta=5, constraints="hybrid", newton_tol=1e-8
    )
    assert r.phi_norm[0] <= np.sqrt(3) * 1e-8
    assert r.phi_norm.max() <= np.sqrt(3) * 1e-8


def test_constraint_handling_errors(slider_crank):
    with pytest.raises(MbdgenError, match="enforces the constraints itself"):
        mbdgen.simulate(slider_crank, "welch2", None, 0.01, 1.0, constraints="gcp")
    with pytest.raises(MbdgenError, match="alpha and beta are Baumgarte parameters"):
        mbdgen.simulate(slider_crank, "abm", 4, 0.01, 1.0, constraints="gcp", alpha=5)
    with pytest.raises(MbdgenError, match="unknown constraint handling 'projection'"):
        mbdgen.simulate(slider_crank, "abm", 4, 0.01, 1.0, constraints="projection")


def test_hybrid_rechooses_the_dependent_coordinates(circle, circle_reference):
    """The hybrid algorithm integrates every coordinate, so each correction picks the
    dependent set afresh (full pivoting at the current state) and the loop goes
    round without restarts: ABM 4, h = 1e-3, within 1e-7 of the exact motion."""
    r = mbdgen.simulate(
        circle, "abm", 4, 1e-3, 10.0, alpha=1, beta=1, constraints="hybrid", newton_tol=1e-10
    )
    np.testing.assert_allclose(r.q[-1], circle_reference, atol=1e-7)
    assert r.phi_norm.max() <= 1e-10


def test_hybrid_reverts_to_pure_gcp_near_singular_configurations(slider_crank):
    """Haug 1989 §7.3.5: "upon occurrence of ill-conditioning ... the algorithm
    reverts to pure generalized coordinate partitioning".  The trigger is the
    quality of the full-pivoting partition falling below ``pivot_ratio`` times its
    value at t0.  The slider-crank's quality varies over a revolution (it is
    largest at t0): with the threshold at 0.99 of its initial value, 188 of 2001
    rows run as pure GCP, the others Baumgarte-stabilized.  With pivot_ratio above 1
    every evaluation is pure GCP, and the run agrees with GCP's to 1.4e-11."""
    common = dict(alpha=5, beta=5, constraints="hybrid", newton_tol=1e-12)
    r = mbdgen.simulate(slider_crank, "abm", 4, 1e-3, 2.0, pivot_ratio=0.99, **common)
    rows = r.counters["pure_gcp_rows"]
    assert 0 < rows < len(r), rows
    always = mbdgen.simulate(slider_crank, "abm", 4, 1e-3, 2.0, pivot_ratio=1e6, **common)
    assert always.counters["pure_gcp_rows"] == len(always)
    assert always.phi_norm.max() <= np.sqrt(3) * 1e-12
    gcp = mbdgen.simulate(slider_crank, "abm", 4, 1e-3, 2.0, constraints="gcp", newton_tol=1e-12)
    assert abs(always.q[-1] - gcp.q[-1]).max() < 1e-9


@pytest.mark.parametrize("constraints", ["gcp", "hybrid"])
@pytest.mark.parametrize("method", ["vabm", "rkf45_adaptive"])
def test_variable_step_methods_with_gcp_and_hybrid(circle, circle_reference, method, constraints):
    """``vabm`` (Haug §7.4.4) with GCP or the hybrid algorithm: Haug's §7.3.5 step 6
    gives the step and order to "independent variable error estimates".

    GCP integrates [v; v̇] alone; when Φ_u degrades (or Newton fails) the driver
    re-partitions at the last accepted step and the method restarts from order 1
    there (a request met at an output time is honoured after the output is
    written).  Circle, 10 s (five loops), rtol = atol = 1e-10, Newton tolerance
    1e-11: measured final errors 4.7e-7 (GCP, 35 re-partitions), 1.4e-8 (hybrid),
    against 5.5e-7 for ``vabm`` on the unconstrained index-1 equations (and 2.9e-5,
    1.7e-6, 5.7e-5 at 1e-8: proportional to the tolerance).  ``rkf45_adaptive``
    restarts the same way: 2.3e-7 (GCP), 1.6e-7 (hybrid; 5.9e-7 while the hybrid
    right side corrected its stages, stop 34), 1.3e-6 unconstrained.
    Bound 2e-6.
    """
    gains = {"alpha": 5.0, "beta": 5.0} if constraints == "hybrid" else {}
    r = mbdgen.simulate(
        circle, method, None, 0.01, 10.0, constraints=constraints, rtol=1e-10, atol=1e-10,
        newton_tol=1e-11, **gains,
    )  # fmt: skip
    np.testing.assert_allclose(r.q[-1], circle_reference, atol=2e-6)
    assert r.phi_norm.max() <= 1e-11
    if constraints == "gcp":
        assert r.counters["repartitions"] >= 20
    else:
        assert r.counters["repartitions"] == 0


@pytest.mark.parametrize("method", ["vabm", "rkf45_adaptive", "dop853"])
def test_error_control_on_a_driven_mechanism_with_gcp_is_refused(method):
    """A kinematically driven mechanism (the four-bar: 9 constraints on 9 coordinates)
    has no independent coordinate under GCP: the error-controlled methods have no state
    to control and refuse it with one line that says why and what to use (it was a raw
    ValueError from the workspace)."""
    from conftest import GENERATED

    from mbdgen.compiler import import_generated

    module = import_generated(GENERATED / "fourbar.py")
    with pytest.raises(MbdgenError, match="no degree of freedom is left") as info:
        mbdgen.simulate(module, method, None, 0.01, 0.1, constraints="gcp")
    assert "\n" not in str(info.value)
