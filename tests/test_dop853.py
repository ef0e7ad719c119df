"""DOP853 (Hairer, Nørsett & Wanner 1993, §II.10): the published tableau satisfies the
order conditions, and the error-controlled integrator follows its tolerance."""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np
import pytest
from conftest import MODELS

import mbdgen
from mbdgen.methods import get_method
from mbdgen.runtime import dop853

# -- the tableau against the order conditions ------------------------------------------

Tree = tuple  # a rooted tree: the sorted tuple of its subtrees; () is the single node


@cache
def trees(order: int) -> tuple[Tree, ...]:
    """All rooted trees with ``order`` nodes (1, 1, 2, 4, 9, 20, 48, 115 for 1 … 8)."""
    if order == 1:
        return ((),)
    found: set[Tree] = set()
    for parts in _partitions(order - 1):
        for children in itertools.product(*(trees(p) for p in parts)):
            found.add(tuple(sorted(children)))
    return tuple(sorted(found))


def _partitions(n: int, largest: int | None = None) -> list[tuple[int, ...]]:
    largest = n if largest is None else largest
    if n == 0:
        return [()]
    return [(k, *rest) for k in range(min(n, largest), 0, -1) for rest in _partitions(n - k, k)]


def _size(t: Tree) -> int:
    return 1 + sum(_size(c) for c in t)


def _density(t: Tree) -> int:
    """γ(t) = |t| Π γ(children) (Butcher; Hairer, Nørsett & Wanner §II.2)."""
    return _size(t) * int(np.prod([_density(c) for c in t]))


def _stage_weights(t: Tree, A: np.ndarray) -> np.ndarray:
    """Φ_i(t) for every stage i: Π over the children of Σ_j a_ij Φ_j(child)."""
    out = np.ones(A.shape[0])
    for child in t:
        out *= A @ _stage_weights(child, A)
    return out


def _residuals(weights: np.ndarray, A: np.ndarray, order: int, theta: float = 1.0) -> float:
    """max |Σ b_i Φ_i(t) − θ^|t| / γ(t)| over the trees of up to ``order`` nodes."""
    worst = 0.0
    for p in range(1, order + 1):
        for t in trees(p):
            value = weights @ _stage_weights(t, A)
            worst = max(worst, abs(value - theta**p / _density(t)))
    return worst


def test_tree_counts():
    """The generator of rooted trees gives Cayley's counts (OEIS A000081)."""
    assert [len(trees(p)) for p in range(1, 9)] == [1, 1, 2, 4, 9, 20, 48, 115]


def test_tableau_has_order_eight():
    """b satisfies the 200 order conditions up to order 8 (to 2e-14, the rounding of
    coefficients up to 43 in size), the c_i are the row sums of A, and b alone does
    not have order 9."""
    A = dop853._A[: dop853._NEW, : dop853._NEW]
    assert np.allclose(A.sum(axis=1), dop853._C[: dop853._NEW], rtol=0, atol=1e-15)
    assert _residuals(dop853._B, A, 8) < 2e-14
    worst9 = max(abs(dop853._B @ _stage_weights(t, A) - 1.0 / _density(t)) for t in trees(9))
    assert worst9 > 1e-6


def test_embedded_estimates_have_orders_five_and_three():
    """The two error estimates are differences to embedded solutions of orders 5 and 3
    (Hairer's ``ER`` and ``BHH``): b − e5 has order 5 and not 6, b − e3 = b̂ order 3."""
    A = dop853._A[: dop853._NEW, : dop853._NEW]
    fifth = dop853._B - dop853._E5
    third = dop853._B - dop853._E3
    assert _residuals(fifth, A, 5) < 1e-13
    assert _residuals(fifth, A, 6) > 1e-6
    assert _residuals(third, A, 3) < 1e-14


@pytest.mark.parametrize("theta", [0.1, 0.37, 0.5, 0.81, 1.0])
def test_dense_output_has_order_seven(theta):
    """The continuous extension x(t_n + θh) = x_n + h Σ_j b_j(θ) K_j over the sixteen
    stages, with b_j(θ) from the F_1 … F_7 form of :mod:`mbdgen.runtime.dop853`,
    satisfies the conditions b(θ)·Φ(t) = θ^|t|/γ(t) up to order 7 (Hairer, Nørsett &
    Wanner §II.6, Eq. 6.7); to 1e-12 (the D rows reach 5e2 in size)."""
    s = dop853.STAGES
    A = dop853._A
    e1 = np.zeros(s)
    e1[0] = 1.0
    e13 = np.zeros(s)
    e13[dop853._NEW] = 1.0
    b = np.zeros(s)
    b[: dop853._NEW] = dop853._B
    D = dop853._D
    th, th1 = theta, 1.0 - theta
    inner = D[2] + th * D[3]
    inner = D[1] + th1 * inner
    inner = D[0] + th * inner
    inner = (2.0 * b - e1 - e13) + th1 * inner
    inner = (e1 - b) + th * inner
    weights = th * (b + th1 * inner)
    assert _residuals(weights, A, 7, theta) < 1e-12


# -- the integrator ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def circle():
    return mbdgen.compile(MODELS / "circle.py")


def test_error_follows_the_tolerance(pendulum, pendulum_solution):
    """On the pendulum over 10 s, 1001 outputs against the reduced ODE: the error is
    1.39, 0.86, 0.55 × tol at tol = 1e-6, 1e-8, 1e-10 (bound: within [0.1, 3] × tol),
    in 53, 91, 159 steps (RKF45 needs 125, 308, 773): an eighth-order method's step
    count grows as tol^(−1/8) (bound: each hundredfold tighter tolerance costs less
    than twice the steps).  The outputs land on the requested grid."""
    assert get_method("dop853").order(8) == 8
    steps = []
    for tol in (1e-6, 1e-8, 1e-10):
        r = mbdgen.simulate(pendulum, "dop853", None, 0.01, 10.0, rtol=tol, atol=tol)
        assert len(r) == 1001
        assert np.allclose(r.t, np.linspace(0.0, 10.0, 1001), rtol=0.0, atol=1e-12)
        error = np.abs(r.q[:, 2] - pendulum_solution(r.t)[0]).max()
        assert 0.1 * tol < error < 3 * tol, (tol, error)
        steps.append(r.counters["steps"])
    assert steps[0] < steps[1] < 2 * steps[0] and steps[1] < steps[2] < 2 * steps[1]


def test_dense_output_is_as_accurate_as_the_steps(pendulum, pendulum_solution):
    """Outputs every 0.01 s lie inside steps of about 0.06-0.2 s; their error (from the
    order 7 continuous extension) is no larger than at outputs every 0.5 s (measured
    0.86 and 0.84 × tol at 1e-8; bound 1.5×), and the steps taken are the same: the
    dense output's three extra stages do not touch the step."""
    runs = [
        mbdgen.simulate(pendulum, "dop853", None, h, 10.0, rtol=1e-8, atol=1e-8)
        for h in (0.01, 0.5)
    ]
    fine, coarse = (np.abs(r.q[:, 2] - pendulum_solution(r.t)[0]).max() for r in runs)
    assert fine < 1.5 * coarse
    assert runs[0].counters["steps"] == runs[1].counters["steps"]
    assert np.array_equal(runs[0].q[::50], runs[1].q)


def test_every_constraint_handling(pendulum, pendulum_solution):
    """direct, Baumgarte, GCP and hybrid all reach the tolerance's accuracy (5e-8 at
    tol = 1e-8, measured on the angle against the reduced ODE)."""
    for options in ({}, {"alpha": 5.0, "beta": 5.0}, {"constraints": "gcp"},
                    {"constraints": "hybrid"}):  # fmt: skip
        r = mbdgen.simulate(pendulum, "dop853", None, 0.1, 5.0, rtol=1e-8, atol=1e-8, **options)
        assert np.abs(r.q[:, 2] - pendulum_solution(r.t)[0]).max() < 5e-8, options


@pytest.mark.parametrize("constraints", ["gcp", "hybrid"])
def test_gcp_repartitions_and_hybrid_on_the_circle(circle, constraints):
    """The particle on a circle, 10 s (about nine loops), tol = 1e-10, as
    ``test_partition.py`` runs vabm and rkf45_adaptive: GCP re-partitions 35 times,
    each a restart of the method after the dense output of the last step has been
    used.  Final errors against the reduced ODE (SciPy, 1e-12): GCP 1.1e-7, hybrid
    2.5e-8 — 2.0e-6 while the hybrid right side also corrected the RK stages (stop 34;
    Baumgarte alone 1.3e-7).  Bound 2e-6, ‖Φ‖ at the Newton tolerance.

    Under GCP most attempts near a partition's end are rejected (313 of 830): the
    independent coordinate's equation grows stiff as Φ_u degrades and the error of a
    fixed h grows about tenfold per step, which an elementary controller follows only
    after a rejection; the evaluations (12 336) are still fewer than RKF45's (21 874)."""
    from scipy.integrate import solve_ivp

    sol = solve_ivp(
        lambda t, y: [y[1], -9.81 * np.cos(y[0])], (0, 10), [0.0, 6.0], rtol=1e-12, atol=1e-12
    )
    psi = sol.y[0, -1]
    reference = np.array([np.cos(psi), np.sin(psi)])
    gains = {"alpha": 5.0, "beta": 5.0} if constraints == "hybrid" else {}
    r = mbdgen.simulate(
        circle, "dop853", None, 0.01, 10.0, constraints=constraints, rtol=1e-10, atol=1e-10,
        newton_tol=1e-11, **gains,
    )  # fmt: skip
    np.testing.assert_allclose(r.q[-1], reference, atol=2e-6)
    assert r.phi_norm.max() <= 1e-11
    assert (r.counters["repartitions"] >= 20) == (constraints == "gcp")


def test_cli_runs_dop853(tmp_path):
    """``mbdgen run --method dop853`` on an example model writes its result; the
    method is listed by ``mbdgen methods``."""
    from click.testing import CliRunner

    from mbdgen.cli import main

    runner = CliRunner()
    listing = runner.invoke(main, ["methods"])
    assert listing.exit_code == 0 and "dop853" in listing.output
    out = tmp_path / "pendulum.npz"
    res = runner.invoke(
        main,
        ["simulate", "models/pendulum.py", "--method", "dop853", "--h", "0.1", "--t-end", "1",
         "--rtol", "1e-8", "--atol", "1e-8", "-o", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert mbdgen.load(out).counters["steps"] > 0
