"""HHT-α for the index-3 DAE, fixed step (Negrut et al. 2007): :mod:`mbdgen.runtime.hht`
and its driver :func:`mbdgen.implicit.hht`.

Convergence orders on the pendulum, the identities of Eq. 6 and α = 0 = trapezoidal
Newmark, numerical damping at hω → ∞, the iteration matrix of Eqs. 12-14 against
finite differences, Newton's iteration counts, bad input, no-JIT mode and Numba's
cache.  Measured values are quoted next to each tolerance.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import GENERATED, central_jacobian, fitted_slopes, run_python
from oscillator import osc_step
from scipy.optimize import root

from mbdgen.compiler import import_generated
from mbdgen.errors import MbdgenError
from mbdgen.implicit import hht
from mbdgen.runtime import hht as rt

ALPHAS = (0.0, -0.05, -0.3)


# fitted orders over h = 0.1/2 … 0.1/64 (5 halvings), max-norm errors at t = 1:
#   α        q      q̇      λ      q̈
#   0        2.000  1.998  2.246  2.035  (λ's local slopes wander: the undamped (−1)ⁿ
#                                         mode of the trapezoidal rule in λ)
#   −0.05    2.004  2.000  1.998  1.298  (q̈'s local slopes 1.6 → 1.04: order 1)
#   −0.3     2.010  1.999  2.007  1.124  (q̈'s local slopes 1.3 → 1.01: order 1)
# HHT's q̈_{n+1} approximates q̈(t_{n+1} + αh) (the forces are weighted at t_n and
# t_{n+1}), hence first order for α ≠ 0; λ stays second order on the pendulum.
@pytest.mark.parametrize("alpha", ALPHAS)
def test_order_two_in_q_qd_and_lambda(pendulum, pendulum_exact, alpha):
    hs = 0.1 / 2.0 ** np.arange(1, 7)
    slopes = fitted_slopes(lambda h: hht(pendulum, h, 1.0, hht_alpha=alpha), hs, pendulum_exact)
    assert slopes["q"] == pytest.approx(2.0, abs=0.05), slopes
    assert slopes["qd"] == pytest.approx(2.0, abs=0.05), slopes
    if alpha == 0.0:  # λ carries the undamped (−1)ⁿ mode of the trapezoidal rule
        assert 1.8 < slopes["lam"] < 2.5, slopes
    else:
        assert slopes["lam"] == pytest.approx(2.0, abs=0.1), slopes
    if alpha == 0.0:
        assert slopes["qdd"] == pytest.approx(2.0, abs=0.1), slopes
    else:
        assert 0.95 < slopes["qdd"] < 1.4, slopes


@pytest.mark.parametrize("alpha", np.linspace(-1.0 / 3.0, 0.0, 7))
def test_coefficients_satisfy_eq6_and_a_stability(alpha):
    """Eq. 6: β = (1 − α)²/4, γ = (1 − 2α)/2 = ½ − α; they satisfy Eq. 3 (γ ≥ ½,
    β ≥ (γ + ½)²/4) with equality in β, and the ``ctrl`` vector carries them."""
    beta, gamma = rt.coefficients(alpha)
    assert beta == pytest.approx((1.0 - alpha) ** 2 / 4.0, rel=1e-15)
    assert gamma == pytest.approx(0.5 - alpha, rel=1e-15)
    assert gamma >= 0.5
    assert beta == pytest.approx((gamma + 0.5) ** 2 / 4.0, rel=1e-15)
    ctrl = rt.control(alpha, 1e-10, 10)
    assert (ctrl[rt.C_ALPHA], ctrl[rt.C_BETA], ctrl[rt.C_GAMMA]) == (alpha, beta, gamma)


def test_alpha_zero_is_the_trapezoidal_rule_coefficients():
    assert rt.coefficients(0.0) == (0.25, 0.5)


def _trapezoidal_steps(p, q, qd, h, steps):
    """An independent trapezoidal Newmark step (β = ¼, γ = ½) of the index-3 pendulum,
    written in NumPy with q_{n+1}, λ_{n+1} as unknowns (not q̈, λ as the runtime)."""
    m, J, l, g = p
    mass = np.diag([m, m, J])
    force = np.array([0.0, -m * g, 0.0])

    def phi_q(x):
        return np.array([[1.0, 0.0, l * np.sin(x[2])], [0.0, 1.0, -l * np.cos(x[2])]])

    # consistent start: q̈_0, λ_0 from the index-1 equations, γ = −(Φ_q q̇)_q q̇
    gamma = np.array([-l * np.cos(q[2]), -l * np.sin(q[2])]) * qd[2] ** 2
    A = np.block([[mass, phi_q(q).T], [phi_q(q), np.zeros((2, 2))]])
    qdd = np.linalg.solve(A, np.concatenate([force, gamma]))[:3]
    out = []
    for _ in range(steps):

        def equations(z, q=q, qd=qd, qdd=qdd):
            q1, lam1 = z[:3], z[3:]
            qdd1 = 4.0 / h**2 * (q1 - q - h * qd) - qdd
            constraints = [q1[0] - l * np.cos(q1[2]), q1[1] - l * np.sin(q1[2])]
            motion = mass @ qdd1 + phi_q(q1).T @ lam1 - force
            return np.concatenate([motion, constraints])

        z = root(equations, np.concatenate([q + h * qd, np.zeros(2)]), tol=1e-15).x
        q1, lam1 = z[:3], z[3:]
        qdd1 = 4.0 / h**2 * (q1 - q - h * qd) - qdd
        qd = qd + 0.5 * h * (qdd + qdd1)
        q, qdd = q1, qdd1
        out.append(np.concatenate([q, qd, qdd, lam1]))
    return np.array(out)


def test_alpha_zero_equals_an_independent_trapezoidal_step(pendulum):
    """Three steps of h = 0.05 agree to 1e-12 relative (measured: 1e-16 in q, 1e-15 in
    q̇, 5.6e-13 in q̈ and λ)."""
    h, steps = 0.05, 3
    result = hht(pendulum, h, steps * h, hht_alpha=0.0, newton_tol=1e-14, full_newton=True)
    reference = _trapezoidal_steps(pendulum.P_DEFAULT, pendulum.Q0, pendulum.QD0, h, steps)
    ours = np.hstack([result.q, result.qd, result.qdd, result.lam])[1:]
    difference = np.abs(ours - reference) / np.maximum(1.0, np.abs(reference))
    assert difference.max() < 1e-12, difference.max(axis=0)


# --- numerical damping on a linear oscillator --------------------------------------
# q̈ + k q = 0, one coordinate, no constraints: test-only kernels (tests/oscillator.py)


def amplification_matrix(alpha, h_omega):
    """The 3 × 3 matrix mapping (q_n, h q̇_n, h² q̈_n) to step n + 1, built numerically
    column by column from single runtime steps of q̈ + ω² q = 0 (ω = 1, h = hω; the
    scheme is linear there, and the α-term's (Φ_qᵀλ − Q)_n = ω² q_n is set for each
    column), not from the formulas."""
    p = np.array([1.0])
    G = np.zeros((3, 3))
    for j in range(3):
        x = np.zeros(3)
        x[j] = 1.0
        ws = rt.workspace(1, 0)
        ws.r_prev[0] = p[0] * x[0]  # (Φ_qᵀλ − Q)_n
        ws.hist[0, 0] = x[2]  # the predictor's last q̈
        state = np.zeros(rt.STATE_SIZE, dtype=np.int64)
        state[rt.S_STARTED] = 1
        state[rt.S_NHIST] = 1
        ctrl = rt.control(alpha, 1e-14, 10, full_newton=True)
        outs = np.zeros(1), np.zeros((1, 3)), np.zeros((1, 2))
        assert osc_step(p, ctrl, ws, h_omega, x, state, *outs) == 0
        G[:, j] = x
    scale = np.diag([1.0, h_omega, h_omega**2])  # (q, h q̇, h² q̈): entries of order 1
    return scale @ G @ np.linalg.inv(scale)


@pytest.mark.parametrize("alpha", (0.0, -0.05, -0.1, -0.2, -0.3, -1.0 / 3.0))
def test_spectral_radius_at_infinity_is_one_plus_alpha_over_one_minus_alpha(alpha):
    """ρ(G) at hω = 1e6 against (1 + α)/(1 − α) (Hilber et al. 1977): measured
    differences 0 (α = 0), 9e-13 (−0.05), 2e-12 (−0.1), 9e-12 (−0.2), 1.5e-10 (−0.3),
    7.8e-5 (−1/3, where all three roots meet at ½ and the O((hω)⁻²) remainder moves a
    triple root by its cube root, (hω)^(−2/3) = 1e-4).  At hω = 1e-2, ρ = 1 within
    2e-10: HHT damps the low frequencies very little."""
    rho = max(abs(np.linalg.eigvals(amplification_matrix(alpha, 1e6))))
    tol = 2e-4 if alpha == -1.0 / 3.0 else 1e-9
    assert rho == pytest.approx((1.0 + alpha) / (1.0 - alpha), abs=tol)
    rho_low = max(abs(np.linalg.eigvals(amplification_matrix(alpha, 1e-2))))
    assert rho_low == pytest.approx(1.0, abs=1e-8)


# --- the iteration matrix against finite differences --------------------------------

JACOBIAN_MODELS = ("pendulum", "slider_crank_tsda", "spatial_slider_crank")


@pytest.fixture(scope="module", params=JACOBIAN_MODELS)
def moving(request):
    """A module and a state in motion: 0.2 s of HHT from the model's q0."""
    module = import_generated(GENERATED / f"{request.param}.py")
    result = hht(module, 1e-3, 0.2)
    return module, result


def _discretized_residual(module, z, x, r_prev, t1, h, alpha, lag=None):
    """e(q̈_{n+1}, λ_{n+1}) of Eq. 13 through the runtime's Newmark and residual, and
    with ``lag`` = (ã_n, M_n ã_n) the term of a configuration-dependent M
    (:func:`mbdgen.runtime.hht.mass_lag`) that the loop adds."""
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    beta, gamma_nm = rt.coefficients(alpha)
    q, qd, qdd = x[:n], x[n : 2 * n], x[2 * n : 3 * n]
    q1, qd1 = np.zeros(n), np.zeros(n)
    rt.newmark(n, h, beta, gamma_nm, q, qd, qdd, z[:n].copy(), q1, qd1)
    ws = rt.workspace(n, m)
    module.dynamics(t1, q1, qd1, module.P_DEFAULT, *ws[:6])
    e = np.zeros(n + m)
    rt.residual(n, m, alpha, beta * h * h, ws[0], ws[1], ws[2], ws[3], z[:n].copy(),
                z[n:].copy(), r_prev, ws.active, e)  # fmt: skip
    if lag is not None:
        ws.a[:], ws.ma_prev[:] = lag
        rt.mass_lag(n, alpha, ws, e)
    return e, q1, qd1, ws


@pytest.mark.parametrize("with_lag", (False, True), ids=("eq10", "mass_lag"))
def test_iteration_matrix_equals_finite_differences_of_the_residual(moving, with_lag):
    """Eq. 12 with M̂ of Eq. 14 from the generated blocks, against central differences
    of the discretized residual, at an unconverged iterate (q̈, λ off the solution),
    h = 0.01, α = −0.2.  Relative max difference < 1e-6; measured (step 1e-5):
    pendulum 3.7e-8, slider_crank_tsda 4.8e-10, spatial_slider_crank 1.2e-7 (the
    round-off of Φ/(βh²) in central differences).  ``mass_lag``: the residual the loop
    solves, Eq. 10 plus α/(1 + α) (M_{n+1} − M_n) ã_n, whose Jacobian is the same
    matrix with (M v)_q evaluated at v = q̈_{n+1} + α ã_n.  The M̂ − M/(1 + α) block on
    its own scale: < 1e-5, measured 9e-8 / 3e-9 / 3.2e-7; with (M v)_q at v = q̈_{n+1}
    the spatial slider-crank's (Euler parameters: M depends on q) is 5.4e-3."""
    module, result = moving
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    h, alpha = 0.01, -0.2
    x = np.concatenate([result.q[-1], result.qd[-1], result.qdd[-1], result.lam[-1]])
    t1 = result.t[-1] + h
    # (Φ_qᵀλ − Q)_n at the state, as the runtime keeps it
    ws = rt.workspace(n, m)
    module.dynamics(result.t[-1], x[:n], x[n : 2 * n], module.P_DEFAULT, *ws[:6])
    r_prev = ws[3].T @ x[3 * n :] - ws[1]
    rng = np.random.default_rng(1)
    z = np.concatenate([x[2 * n : 3 * n], x[3 * n :]])
    z = z + 0.1 * rng.standard_normal(n + m) * np.maximum(1.0, np.abs(z))
    lag = None
    v = z[:n].copy()  # where (M v)_q is evaluated
    if with_lag:
        a_n = x[2 * n : 3 * n] + 0.5  # ã_n: any vector; M_n ã_n with M_n at t_n
        lag = (a_n, ws[0] @ a_n)
        v = v + alpha * a_n
    _, q1, qd1, ws1 = _discretized_residual(module, z, x, r_prev, t1, h, alpha, lag)
    beta, gamma_nm = rt.coefficients(alpha)
    A = np.zeros((n + m, n + m))
    rt.iteration_matrix(
        module.mass_a_q, module.phi_q_lam_q, module.force_q, module.force_qd, n, m, t1,
        q1, qd1, v, z[n:].copy(), module.P_DEFAULT, alpha, beta * h * h,
        gamma_nm * h, ws1[0], ws1[3], ws1[9], ws1[10], ws1[11], ws1[12], ws1.active, A,
    )  # fmt: skip
    fd = central_jacobian(
        lambda zz: _discretized_residual(module, zz, x, r_prev, t1, h, alpha, lag)[0], z
    )
    difference = np.abs(A - fd).max() / np.abs(A).max()
    assert difference < 1e-6, difference
    # the blocks that make M̂ differ from M/(1+α) are exercised where the model has them
    blocks = A[:n, :n] - ws1[0] / (1.0 + alpha)
    assert np.abs(blocks).max() > 0.0
    # ... and are right on their own scale, which (M v)_q at the wrong v misses
    block_difference = np.abs(A[:n, :n] - fd[:n, :n]).max() / np.abs(blocks).max()
    assert block_difference < 1e-5, block_difference


def test_newton_converges_in_at_most_three_iterations_at_small_h(moving):
    """Full Newton at h = 1e-4 from the predictor: ≤ 3 iterations per step (measured:
    2 in every step on every model).  Modified Newton (the default) keeps one
    factorization over the 100 steps (measured: 2 factorizations, 2.9 / 3.8 / 3.8
    iterations per step, at most 3 / 4 / 4, on pendulum / slider_crank_tsda /
    spatial_slider_crank; final q within 1.3e-12 of full Newton)."""
    module, result = moving
    q0, qd0 = result.q[-1], result.qd[-1]
    full = hht(module, 1e-4, 0.01, q0=q0, qd0=qd0, t0=0.0, full_newton=True)
    assert full.counters["max_iterations_per_step"] <= 3, full.counters
    assert full.counters["factorizations"] == full.counters["newton_iterations"] + 1
    modified = hht(module, 1e-4, 0.01, q0=q0, qd0=qd0)
    assert modified.counters["max_iterations_per_step"] <= 5, modified.counters
    assert modified.counters["factorizations"] < modified.counters["steps"] / 5
    assert np.abs(modified.q[-1] - full.q[-1]).max() < 1e-9


# --- the driver -----------------------------------------------------------------


@pytest.mark.parametrize("alpha", (0.1, -0.34, -1.0, float("nan"), "x"))
def test_bad_alpha_is_a_one_line_error(pendulum, alpha):
    with pytest.raises(MbdgenError, match=r"hht_alpha must be a number in \[-1/3, 0\]") as info:
        hht(pendulum, 0.01, 0.1, hht_alpha=alpha)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"h": 0.0}, "step size h must be"),
        ({"newton_tol": -1.0}, "newton_tol must be"),
        ({"max_iterations": 0}, "max_iterations must be"),
        ({"predictor_degree": 4}, "predictor_degree must be"),
        ({"h": 0.03}, "not a whole number of steps"),
    ],
)
def test_bad_options_are_one_line_errors(pendulum, options, message):
    kwargs = {"h": 0.01, "t_end": 0.1, **options}
    with pytest.raises(MbdgenError, match=message) as info:
        hht(pendulum, **kwargs)
    assert "\n" not in str(info.value)


def test_result_has_counters_energy_and_holds_the_constraints(pendulum):
    """Index 3: Φ = 0 to round-off at every step (measured 2e-15); the energy of the
    undamped trapezoidal rule drifts little at h = 1e-3 (measured 4e-6 of m g l)."""
    result = hht(pendulum, 1e-3, 1.0, hht_alpha=0.0, output_every=10)
    assert len(result) == 101 and result.t[-1] == pytest.approx(1.0)
    assert result.phi_norm.max() < 1e-12
    counters = result.counters
    assert counters["steps"] == 1000
    for key in ("newton_iterations", "jacobian_evaluations", "factorizations"):
        assert counters[key] > 0
    energy = result.total_energy
    assert abs(energy[-1] - energy[0]) < 1e-4 * 9.81
    assert result.info["hht_alpha"] == 0.0 and result.info["method"] == "hht"


_RUN = """
import json
from mbdgen.compiler import import_generated
from mbdgen.implicit import hht
m = import_generated("generated/pendulum.py")
r = hht(m, 0.01, 0.1, hht_alpha=-0.1)
stats = getattr(m.index3_chunk, "stats", None)  # None: no JIT
print(json.dumps({"q": r.q[-1].tolist(), "lam": r.lam[-1].tolist(),
                  "hits": sum(stats.cache_hits.values()) if stats else None,
                  "misses": sum(stats.cache_misses.values()) if stats else None}))
"""


def test_runs_without_jit_and_is_cached_across_processes():
    """NUMBA_DISABLE_JIT=1 gives the jitted numbers (to 1e-12), and a second process
    loads the entry point from Numba's cache (no "dynamic globals": the kernels are
    bound inside the generated module)."""
    plain = json.loads(run_python(_RUN, env={"NUMBA_DISABLE_JIT": "1"}).splitlines()[-1])
    # compile the module's own entry point, if this machine has not yet (under the
    # tests' policy "shared" a process only loads it, and the test depended on another
    # test file having compiled it first)
    run_python(_RUN, env={"MBDGEN_SPECIALIZE": "now"})
    jitted = json.loads(run_python(_RUN).splitlines()[-1])
    assert (jitted["hits"], jitted["misses"]) == (1, 0)
    assert plain["q"] == pytest.approx(jitted["q"], rel=1e-12, abs=1e-14)
    assert plain["lam"] == pytest.approx(jitted["lam"], rel=1e-12, abs=1e-12)
