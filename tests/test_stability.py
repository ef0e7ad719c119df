"""Linear stability analyses: Wu, Chiou & Lin (2000) and Welch et al. (2007) §V.

Part 1 reproduces the coefficient identities of Wu et al. (Table 1, Propositions 2
and 3, Theorem 1, Eqs. 21 and 27a-c, the appendix formulas A1-A7) and their Table
2 of real stability limits from the characteristic polynomials of
:mod:`mbdgen.analysis.stability`, whose derivation is checked independently
(literal P-E-C-E recurrence, exact order conditions, boundary locus).

Part 2 builds the amplification matrices X (Eq. 61) and Λ (Eq. 64) of the
linearised double pendulum (Eqs. 66-69), checks them against the schemes they
come from, and tests the paper's two stability claims.
"""

from __future__ import annotations

import math
from fractions import Fraction
from math import comb, factorial

import numpy as np
import pytest

from mbdgen.analysis.stability import (
    adams_bashforth_table,
    baumgarte_amplification,
    baumgarte_gain_limit,
    baumgarte_modal_amplification,
    baumgarte_spectral_radius,
    characteristic_table,
    constraint_projector,
    double_pendulum,
    evaluate_table,
    largest_stable_step,
    max_root_modulus,
    modal_basis,
    projector_modes,
    real_stability_limit,
    unit_root_condition,
    welch_amplification,
    welch_modal_amplification,
    welch_spectral_radius,
)
from mbdgen.methods import (
    CORRECTORS,
    METHODS,
    adams_bashforth_gammas,
    adams_bashforth_weights,
    adams_moulton_gammas,
    adams_moulton_weights,
    mampc_weights,
)

# -- Part 1: Wu, Chiou & Lin (2000) ---------------------------------------------------


def _poly_mul(a: list[Fraction], b: list[Fraction]) -> list[Fraction]:
    out = [Fraction(0)] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            out[i + j] += x * y
    return out


def _integral_01(p: list[Fraction]) -> Fraction:
    return sum((c / (i + 1) for i, c in enumerate(p)), Fraction(0))


def _table_1(k: int, shift: int) -> Fraction:
    """(−1)^k ∫_0^1 C_k^{−s+shift} ds (Eqs. 3 and 7), by exact polynomial integration.

    (−1)^k C_k^{−s+shift} = Π_{i<k} (s − shift + i) / k!.
    """
    p = [Fraction(1)]
    for i in range(k):
        p = _poly_mul(p, [Fraction(i - shift), Fraction(1)])
    return _integral_01(p) / factorial(k)


def _gamma(k: int) -> Fraction:
    return _table_1(k, 0)


def _gamma_star(k: int) -> Fraction:
    return _table_1(k, 1)


def _backward_differences_to_ordinates(coefficients: list[Fraction]) -> list[Fraction]:
    """Σ_k c_k ∇^k f_i as weights of f_i, f_{i−1}, … (Eqs. 4-5)."""
    n = len(coefficients)
    return [
        sum(((-1) ** j * comb(k, j) * coefficients[k] for k in range(j, n)), Fraction(0))
        for j in range(n)
    ]


def test_table_1_integrals():
    """Table 1 of Wu et al., from the integrals themselves and from mbdgen.methods."""
    printed_ab = [1, Fraction(1, 2), Fraction(5, 12), Fraction(3, 8), Fraction(251, 720)]
    printed_am = [1, Fraction(-1, 2), Fraction(-1, 12), Fraction(-1, 24), Fraction(-19, 720)]
    assert [_gamma(k) for k in range(6)] == [*printed_ab, Fraction(95, 288)]
    assert [_gamma_star(k) for k in range(6)] == [*printed_am, Fraction(-3, 160)]
    assert [_gamma(k) for k in range(8)] == adams_bashforth_gammas(8)
    assert [_gamma_star(k) for k in range(8)] == adams_moulton_gammas(8)


@pytest.mark.parametrize("k", range(1, 8))
def test_propositions_2_and_3(k):
    """Eq. 12: γ_k − γ*_k = γ_{k−1};  Eq. 15: Σ_{r≤k} γ*_r = γ_k."""
    assert _gamma(k) - _gamma_star(k) == _gamma(k - 1)
    assert sum((_gamma_star(r) for r in range(k + 1)), Fraction(0)) == _gamma(k)


def test_appendix_formulas():
    """A1-A4 are AB 2-5 and A5-A7 AM of orders 3-5 (the appendix's "first-order",
    "second-order", … labels count one less than the order of the formulas)."""

    def scaled(d, *c):
        return [Fraction(x, d) for x in c]

    assert adams_bashforth_weights(2) == scaled(2, 3, -1)  # A1
    assert adams_bashforth_weights(3) == scaled(12, 23, -16, 5)  # A2
    assert adams_bashforth_weights(4) == scaled(24, 55, -59, 37, -9)  # A3
    assert adams_bashforth_weights(5) == scaled(720, 1901, -2774, 2616, -1274, 251)  # A4
    assert adams_moulton_weights(3) == scaled(12, 5, 8, -1)  # A5
    assert adams_moulton_weights(4) == scaled(24, 9, 19, -5, 1)  # A6
    assert adams_moulton_weights(5) == scaled(720, 251, 646, -264, 106, -19)  # A7


@pytest.mark.parametrize("m", range(1, 7))
def test_theorem_1_mampc_is_adams_moulton_of_next_order(m):
    """Theorem 1 (Eq. 20): MAMPC_m weights are exactly those of AM_m (order m + 1)."""
    assert mampc_weights(m) == adams_moulton_weights(m + 1)


@pytest.mark.parametrize("m", range(1, 7))
def test_mampc_built_from_eqs_27_and_21(m):
    """Eqs. 27a-c with W1, W2 of Eq. 21, from the Table 1 integrals alone.

    Weights are over [f^p_{i+1}, f_i, …, f_{i−m+1}].  Also: Eq. 27b is the AM_(m−1)
    corrector (Eq. 19, = ``adams_moulton_weights(m)``), W1 + W2 = γ_{m−1} (Eq. 21),
    and the combination equals both ``mampc_weights(m)`` and AM of order m + 1.
    """
    g = [_gamma(k) for k in range(m + 1)]
    w1, w2 = -_gamma_star(m), _gamma(m)
    assert w1 + w2 == g[m - 1]
    y_ab = [Fraction(0), *_backward_differences_to_ordinates(g[:m])]  # Eq. 27a
    y_am = [g[m - 1], *_backward_differences_to_ordinates([g[k] - g[m - 1] for k in range(m)])]
    assert y_am[m] == 0 and y_am[:m] == adams_moulton_weights(m)  # Eq. 27b = Eq. 19
    mampc = [(w1 * a + w2 * c) / (w1 + w2) for a, c in zip(y_ab, y_am, strict=True)]  # Eq. 27c
    assert mampc == mampc_weights(m) == adams_moulton_weights(m + 1)


def _literal_pece_map(k: int, corrector: list[Fraction], hbar: float) -> np.ndarray:
    """One P-E-C-E step of z' = λz as a matrix on (z_n, …, z_{n−p+1}), executed literally."""
    b = [float(x) for x in adams_bashforth_weights(k)]
    w = [float(x) for x in corrector]
    p = max(k, len(w) - 1)
    out = np.zeros((p, p))
    for col in range(p):
        z = np.zeros(p)
        z[col] = 1.0
        f = hbar * z  # E: f = λz of the corrected values (h folded into hbar)
        zp = z[0] + sum(b[j] * f[j] for j in range(k))  # P
        fp = hbar * zp  # E
        zc = z[0] + w[0] * fp + sum(w[j] * f[j - 1] for j in range(1, len(w)))  # C
        out[:, col] = [zc, *z[:-1]]  # the final E stores hbar·zc, used next step
    return out


@pytest.mark.parametrize("rule", sorted(CORRECTORS))
@pytest.mark.parametrize("k", range(1, 6))
def test_pece_polynomial_is_the_literal_recurrence(rule, k):
    """The roots of the PECE polynomial are the eigenvalues of the literal P-E-C-E map."""
    corrector = CORRECTORS[rule](k)
    table = characteristic_table({"am+1": "abm", "am": "ampc", "mampc": "mampc"}[rule], k)
    for hbar in (-0.37, -1.3, 0.2):
        roots = np.sort_complex(np.roots(evaluate_table(table, hbar)))
        eig = np.linalg.eigvals(_literal_pece_map(k, corrector, hbar))
        assert len(roots) == len(eig)
        np.testing.assert_allclose(roots, np.sort_complex(eig), atol=1e-8)


#: Every registered method with a test-equation polynomial, with each of its orders.
ANALYSABLE = [
    pytest.param(name, k, id=f"{name}{k}")
    for name, method in sorted(METHODS.items())
    if method.family in ("adams", "rk")
    for k in method.orders
]


@pytest.mark.parametrize("name, k", ANALYSABLE)
def test_characteristic_polynomial_has_the_method_order(name, k):
    """p(e^h̄; h̄) = O(h̄^(order+1)) exactly, order = ``METHODS[name].order(k)``.

    The Taylor coefficients of p(e^h̄; h̄) = Σ_{i,d} C_{i,d} h̄^d e^{(N−i)h̄} are
    computed with Fractions; those of h̄^0 … h̄^order vanish, that of h̄^(order+1)
    does not (the error constant of the method on z' = λz).
    """
    table = characteristic_table(name, k)
    order = METHODS[name].order(k)
    degree, width = len(table) - 1, len(table[0])

    def taylor(r: int) -> Fraction:
        return sum(
            (
                table[i][d] * Fraction((degree - i) ** (r - d), factorial(r - d))
                for i in range(degree + 1)
                for d in range(min(r, width - 1) + 1)
            ),
            Fraction(0),
        )

    assert all(taylor(r) == 0 for r in range(order + 1))
    assert taylor(order + 1) != 0


#: Wu et al., Table 2: stability limits of order k = 3, 4, 5.
TABLE_2 = {
    "ab": (0.545, 0.300, 0.164),
    "ampc": (1.729, 1.285, 0.947),
    "mampc": (1.935, 1.412, 1.040),
}

_ROUNDED_UP = (
    "printed one unit high in the third decimal: the limit computed is {value}, which "
    "rounds to {nearest}; the printed value is the limit rounded up (see "
    "test_table_2_discrepancies)"
)


def _table_2_cases():
    """AB 5: 0.163339 (exactly 90/551) vs 0.164; MAMPC_4: 1.411461 vs 1.412;
    MAMPC_5: 1.039349 vs 1.040 (values computed by real_stability_limit)."""
    off = {("ab", 5): "0.163339", ("mampc", 4): "1.411461", ("mampc", 5): "1.039349"}
    for name, row in TABLE_2.items():
        for k, printed in zip((3, 4, 5), row, strict=True):
            marks = ()
            if (name, k) in off:
                value = off[(name, k)]
                reason = _ROUNDED_UP.format(value=value, nearest=f"{float(value):.3f}")
                marks = (pytest.mark.xfail(strict=True, reason=reason),)
            yield pytest.param(name, k, printed, marks=marks, id=f"{name}{k}")


@pytest.mark.regression
@pytest.mark.parametrize("name, k, printed", list(_table_2_cases()))
def test_wu_table_2(name, k, printed):
    """Table 2 of Wu et al. (PECE, Eq. 31 on the negative real axis), to the printed
    three decimals.  Six entries reproduce; three (AB 5, MAMPC_4, MAMPC_5) are
    printed one unit high and are strict xfails: see test_table_2_discrepancies."""
    limit = real_stability_limit(name, k)
    assert abs(round(limit, 3) - printed) < 5e-4


def test_table_2_discrepancies():
    """Why AB 5, MAMPC_4 and MAMPC_5 of Table 2 are 0.001 high.

    * AB 5 has no variant: its limit is where ζ = −1 is a root, h̄ = −ρ(−1)/σ(−1),
      exactly −90/551 = −0.1633394, which rounds to 0.163, not 0.164.
    * MAMPC_m is by Theorem 1 the AB m / AM_m (order m + 1) PECE pair, Haug's
      "abm": the two registered methods have identical polynomials, and the limits
      1.411461 and 1.039349 (computed here) round to 1.411 and 1.039.
    * The PEC mode (f stored at predicted values) gives quite different limits
      (e.g. AMPC_3 0.2857 instead of 1.729), so Table 2 is PECE, and its other six
      entries reproduce.
    * Each of the three printed values is the computed limit rounded *up* to three
      decimals (as a scan reporting its first unstable point of a 0.001 grid would
      print it); AB 3 = 6/11 = 0.54545 is printed rounded to nearest (0.545), so the
      table is not rounded consistently, and no definition of the methods makes all
      nine entries agree.
    """
    ab5 = unit_root_condition(adams_bashforth_table(5), -1)
    assert ab5[2] == 0 and -ab5[0] / ab5[1] == Fraction(-90, 551)
    assert real_stability_limit("ab", 5) == pytest.approx(90 / 551, abs=1e-9)
    assert characteristic_table("mampc", 4) == characteristic_table("abm", 4)
    for name, k in (("ab", 5), ("mampc", 4), ("mampc", 5)):
        limit = real_stability_limit(name, k)
        printed = TABLE_2[name][k - 3]
        assert round(limit, 3) == pytest.approx(printed - 0.001, abs=1e-12)
        assert math.ceil(limit * 1000) / 1000 == pytest.approx(printed, abs=1e-12)
    assert real_stability_limit("ampc", 3, "PEC") < 0.3
    assert real_stability_limit("mampc", 3, "PEC") < 0.31


@pytest.mark.parametrize("k", (3, 4, 5))
def test_adams_bashforth_limits_are_exact_rationals(k):
    """The AB boundary is at ζ = −1, linear in h̄: 6/11, 3/10, 90/551."""
    c = unit_root_condition(adams_bashforth_table(k), -1)
    exact = -c[0] / c[1]
    assert exact == {3: Fraction(-6, 11), 4: Fraction(-3, 10), 5: Fraction(-90, 551)}[k]
    assert real_stability_limit("ab", k) == pytest.approx(-float(exact), abs=1e-9)


def _boundary_locus_limit(table, samples: int = 4001) -> float:
    """Smallest |h̄| < 0 where a root crosses |ζ| = 1, by the boundary locus.

    For ζ = e^{iθ}, p(ζ; h̄) = P0 + h̄ P1 + h̄² P2 = 0 is solved for h̄ (both
    branches); real crossings are sign changes of Im h̄ in θ, refined by bisection.
    Independent of the root-modulus scan of real_stability_limit.
    """
    c = np.array([[float(x) for x in row] for row in table])
    degree = c.shape[0] - 1

    def branches(theta: float) -> np.ndarray:
        z = np.exp(1j * theta) ** (degree - np.arange(degree + 1))
        p0, p1, p2 = z @ c
        if p2 == 0:
            return np.array([-p0 / p1, -p0 / p1])
        s = np.sqrt(p1 * p1 - 4 * p0 * p2)
        return np.array([(-p1 + s) / (2 * p2), (-p1 - s) / (2 * p2)])

    thetas = np.linspace(1e-6, np.pi, samples)
    values = np.array([branches(t) for t in thetas])
    crossings = []
    for b in range(2):
        im = values[:, b].imag
        for i in np.nonzero(np.sign(im[:-1]) != np.sign(im[1:]))[0]:
            if abs(values[i + 1, b] - values[i, b]) > 0.1:  # a branch cut, not a crossing
                continue
            lo, hi = thetas[i], thetas[i + 1]
            for _ in range(60):
                mid = 0.5 * (lo + hi)
                if np.sign(branches(mid)[b].imag) == np.sign(im[i]):
                    lo = mid
                else:
                    hi = mid
            crossings.append(branches(0.5 * (lo + hi))[b].real)
    for b in range(2):  # θ = π exactly (ζ = −1)
        h = branches(np.pi)[b]
        if abs(h.imag) < 1e-12:
            crossings.append(h.real)
    negative = [-h for h in crossings if h < -1e-9]
    return min(negative)


@pytest.mark.parametrize("name", sorted(TABLE_2))
@pytest.mark.parametrize("k", (3, 4, 5))
def test_limit_agrees_with_the_boundary_locus(name, k):
    table = characteristic_table(name, k)
    limit = real_stability_limit(name, k)
    assert _boundary_locus_limit(table) == pytest.approx(limit, abs=1e-8)
    # just inside stable, just outside not
    assert max_root_modulus(evaluate_table(table, -limit * (1 - 1e-6))) <= 1.0
    assert max_root_modulus(evaluate_table(table, -limit * (1 + 1e-6))) > 1.0


@pytest.mark.parametrize("name, k", ANALYSABLE)
def test_every_registered_method_has_a_finite_interval(name, k):
    limit = real_stability_limit(name, k)
    assert 0.0 < limit < 10.0
    if METHODS[name].family == "adams" and k >= 3:  # shrinks with the order from k = 3
        assert limit < real_stability_limit(name, k - 1)


def test_runge_kutta_polynomials():
    """R(h̄) = Σ h̄^j/j! up to the order for RK4; its real interval is 2.7853 (Hairer &
    Wanner II, Fig. IV.2.1); the two-stage second-order methods all have 2."""
    rk4 = characteristic_table("rk4", 4)
    assert rk4[1] == [-Fraction(1, factorial(j)) for j in range(5)]
    assert real_stability_limit("rk4", 4) == pytest.approx(2.785293563, abs=1e-6)
    for name in ("euler", "heun", "midpoint", "ralston"):
        assert real_stability_limit(name, METHODS[name].orders[0]) == pytest.approx(2.0, abs=1e-9)


def test_schemes_without_a_test_equation_polynomial_are_refused():
    for name, method in METHODS.items():
        if method.family not in ("adams", "rk"):
            with pytest.raises(ValueError, match="no characteristic polynomial"):
                characteristic_table(name, method.orders[0])


# -- Part 2: Welch, Hong, Trapp & Choi (2007) §V ---------------------------------------

#: Mass matrices tried: slender links (J = mL²/12, the default), links pivoted at
#: an end (mL²/3), unit inertia, and M = I; both the printed and the derived B.
SYSTEMS = [
    pytest.param(dict(), id="slender-eq69"),
    pytest.param(dict(jacobian="eq68"), id="slender-eq68"),
    pytest.param(dict(inertia=25.0 / 3.0), id="end-inertia"),
    pytest.param(dict(inertia=1.0), id="unit-inertia"),
    pytest.param(dict(inertia=1.0, mass=1.0, jacobian="eq68"), id="identity-eq68"),
]
DTS = np.geomspace(1e-4, 1e3, 141)


def test_double_pendulum_matrices():
    m, b = double_pendulum()
    assert np.allclose(np.diag(m), [1, 1, 25 / 12, 1, 1, 25 / 12])
    assert b.shape == (4, 6) and np.linalg.matrix_rank(b) == 4
    assert b[2, 3] == -1.0  # Eq. 69 as printed; Eq. 68 implies +1
    assert double_pendulum(jacobian="eq68")[1][2, 3] == 1.0


@pytest.mark.parametrize("system", SYSTEMS)
def test_gamma_is_an_m_orthogonal_projector(system):
    m, b = double_pendulum(**system)
    g = constraint_projector(m, b)
    assert np.allclose(g @ g, g, atol=1e-13)
    assert np.allclose(m @ g, (m @ g).T, atol=1e-13)
    assert np.allclose(b @ g, b, atol=1e-13)
    assert sorted(projector_modes(m, b)) == [0, 0, 1, 1, 1, 1]


def _welch_scheme(dt, m, b, q, v):
    """Eqs. 54-59 executed step by step (linear constraints Φ = Bq, no forces)."""
    a = b @ np.linalg.solve(m, b.T)
    lam_p = np.linalg.solve(a, b @ q / dt**2 + b @ v / dt)  # Eq. 54
    v_p = v - dt * np.linalg.solve(m, b.T @ lam_p)  # Eq. 55
    q_p = q + dt * v_p  # Eq. 56 (with the predicted velocity, Eq. 44a)
    lam = np.linalg.solve(a, 2 * b @ q_p / dt**2 + 2 * b @ (v - v_p) / dt)  # Eq. 57
    v_new = v - dt * np.linalg.solve(m, b.T @ lam)  # Eq. 58
    return q + dt / 2 * (v_new + v), v_new  # Eq. 59


@pytest.mark.parametrize("system", SYSTEMS[:3])
@pytest.mark.parametrize("dt", (1e-3, 0.0664, 2.0))
def test_x_is_the_scheme_of_eqs_54_to_59(system, dt):
    m, b = double_pendulum(**system)
    x = welch_amplification(dt, m, b)
    for col in range(12):
        e = np.eye(12)[col]
        q, v = _welch_scheme(dt, m, b, e[:6], e[6:])
        np.testing.assert_allclose(x[:, col], np.concatenate([q, v]), atol=1e-10)


def _baumgarte_scheme(dt, alpha, beta, m, b, q, v, scheme):
    """One two-stage RK2 (Heun) step of q̇ = v, v̇ = −M⁻¹Bᵀλ, λ from Eq. 47."""
    a = b @ np.linalg.solve(m, b.T)

    def accel(q, v):
        lam = np.linalg.solve(a, beta**2 * b @ q + 2 * alpha * b @ v)
        return -np.linalg.solve(m, b.T @ lam)

    k1q, k1v = v, accel(q, v)
    k2q, k2v = v + dt * k1v, accel(q + dt * k1q, v + dt * k1v)
    v_new = v + dt / 2 * (k1v + k2v)
    if scheme == "eq64":
        return q + dt / 2 * (v + v_new), v_new  # trapezoidal with the new velocity
    return q + dt / 2 * (k1q + k2q), v_new


@pytest.mark.parametrize("scheme", ("eq64", "rk2"))
@pytest.mark.parametrize("dt, alpha, beta", [(0.01, 100.0, 100.0), (0.05, 3.0, 7.0), (1.0, 0.5, 2)])
def test_lambda_is_rk2_velocity_with_trapezoidal_position(scheme, dt, alpha, beta):
    """Eq. 64 as printed is an RK2 step of the velocity with the position advanced by
    the trapezoidal rule from v_n and v_{n+1}; ``scheme="rk2"`` is plain RK2 (Heun)."""
    m, b = double_pendulum()
    lam = baumgarte_amplification(dt, alpha, beta, m, b, scheme)
    for col in range(12):
        e = np.eye(12)[col]
        q, v = _baumgarte_scheme(dt, alpha, beta, m, b, e[:6], e[6:], scheme)
        np.testing.assert_allclose(lam[:, col], np.concatenate([q, v]), atol=1e-9)


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("dt", (1e-4, 0.0664, 1e3))
def test_modal_blocks_are_the_dense_matrices_in_the_eigenbasis_of_gamma(system, dt):
    """With Γ = V diag(γ) V⁻¹, diag(V, V)⁻¹ X diag(V, V) holds the 2×2 modal blocks:
    the spectral radii of the blocks are those of the dense matrices."""
    m, b = double_pendulum(**system)
    gammas, v = modal_basis(m, b)
    t = np.block([[v, np.zeros((6, 6))], [np.zeros((6, 6)), v]])
    modes = projector_modes(m, b)
    for dense, block in (
        (welch_amplification(dt, m, b), lambda g: welch_modal_amplification(dt, g)),
        (
            baumgarte_amplification(dt, 1 / dt, 1 / dt, m, b),
            lambda g: baumgarte_modal_amplification(dt, 1 / dt, 1 / dt, g),
        ),
    ):
        reduced = np.linalg.solve(t, dense @ t)
        expected = np.zeros((12, 12))
        for i, g in enumerate(modes):
            expected[np.ix_([i, 6 + i], [i, 6 + i])] = block(g)
        # the (2,1) blocks are O(1/Δt) terms that cancel to O(1) for α = β = 1/Δt
        np.testing.assert_allclose(reduced, expected, atol=1e-12 * max(dt, 1.0 / dt))


@pytest.mark.parametrize("system", SYSTEMS)
def test_welch_scheme_is_unconditionally_stable(system):
    """Eqs. 61-62: ρ(X) ≤ 1 for every Δt (1e-4 … 1e3); in fact ρ(X) = 1 exactly.

    The modes of Γ are 0 (free motion: [[1, Δt], [0, 1]], a Jordan block with
    eigenvalue 1) and 1 (constraint violation: [[0, 0], [−2/Δt, −1]], eigenvalues 0
    and −1).  A dense eigensolver returns the Jordan block's eigenvalue as
    1 + O(√ε) ≈ 1 + 1e-8, hence the modal computation.
    """
    modes = projector_modes(*double_pendulum(**system))
    radii = np.array([welch_spectral_radius(dt, modes=modes) for dt in DTS])
    assert radii.max() <= 1.0 + 1e-12
    assert radii.min() >= 1.0 - 1e-12
    assert math.isinf(largest_stable_step(lambda dt: welch_spectral_radius(dt, modes=modes)))


@pytest.mark.xfail(
    strict=True,
    reason="Eq. 64 with α = β = 1/Δt is stable (ρ(Λ) = 1) for every Δt and every mass "
    "matrix: no limit at 0.0664 s (see test_baumgarte_limit_is_on_the_gain_not_the_step)",
)
def test_welch_baumgarte_stability_limit_0_0664():
    """§V: with α = β = 1/Δt the Baumgarte scheme is stable for Δt ≤ 0.0664 s."""
    limit = largest_stable_step(lambda dt: baumgarte_spectral_radius(dt, 1 / dt, 1 / dt))
    assert float(f"{limit:.3g}") == 0.0664


def test_baumgarte_limit_is_on_the_gain_not_the_step():
    """Why 0.0664 s does not reproduce.

    1. Scale invariance: with α = s_α/Δt, β = s_β/Δt every (1,2) entry of Eq. 64 is
       Δt times, and every (2,1) entry 1/Δt times, a function of s_α, s_β and Γ, so
       Λ(Δt) = D Λ(1) D⁻¹ with D = diag(I, I/Δt): ρ(Λ) cannot depend on Δt, for any
       Δt-independent Γ, i.e. for any mass matrix and Jacobian.  A Δt limit needs a
       time scale that Eqs. 52-65 do not contain.
    2. On a constraint mode (γ = 1), det(I − Λ_γ) = −(βΔt)²(αΔt − 1): ζ = 1 is an
       eigenvalue exactly when αΔt = 1, and one eigenvalue exceeds 1 beyond.  The
       paper's choice α = β = 1/Δt lies exactly on this boundary: Λ_γ=1 =
       [[1, 3Δt/4], [0, 1/2]], a position violation with zero velocity is neither
       damped nor amplified, and ρ(Λ) = 1 for every Δt.  The stable gains are
       s = αΔt = βΔt ≤ 1 for Eq. 64 and s ≤ 2 for plain RK2 (the real interval of
       RK2 at the double root h̄ = −s).
    3. Tried and not reproducing 0.0664 (see docs/design-notes.md): the five mass
       matrix / Jacobian variants of SYSTEMS, plain RK2 instead of Eq. 64, and a
       dense eigensolver (whose rounding at the marginal eigenvalues gives
       ρ − 1 between 0 and about 1e-8, scattered over Δt, with no threshold).
    """
    for dt in (1e-3, 0.0664, 10.0):
        d = np.diag(np.r_[np.ones(6), np.full(6, 1 / dt)])
        scaled = d @ baumgarte_amplification(1.0, 1.0, 1.0) @ np.linalg.inv(d)
        np.testing.assert_allclose(baumgarte_amplification(dt, 1 / dt, 1 / dt), scaled, atol=1e-9)
    for a, bb in ((0.5, 1.0), (1.0, 1.0), (1.3, 0.7), (2.0, 3.0)):
        block = baumgarte_modal_amplification(1.0, a, bb, 1.0)
        assert np.linalg.det(np.eye(2) - block) == pytest.approx(-(bb**2) * (a - 1), abs=1e-12)
    np.testing.assert_allclose(
        baumgarte_modal_amplification(0.1, 10.0, 10.0, 1.0), [[1, 0.075], [0, 0.5]], atol=1e-14
    )
    assert baumgarte_gain_limit() == pytest.approx(1.0, abs=1e-6)
    assert baumgarte_gain_limit(scheme="rk2") == pytest.approx(2.0, abs=1e-6)
    # the 3-D example's α = 0.5/Δt, β = 1/Δt is inside: the limit is then s = 2
    assert baumgarte_gain_limit(ratio=0.5) == pytest.approx(2.0, abs=1e-6)


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("scheme", ("eq64", "rk2"))
def test_baumgarte_with_alpha_beta_one_over_dt_is_neutrally_stable(system, scheme):
    """ρ(Λ) = 1 to 1e-12 over Δt = 1e-4 … 1e3 with α = β = 1/Δt: no stability limit."""
    modes = projector_modes(*double_pendulum(**system))

    def radius(dt):
        return baumgarte_spectral_radius(dt, 1 / dt, 1 / dt, scheme=scheme, modes=modes)

    radii = np.array([radius(dt) for dt in DTS])
    assert np.all(np.abs(radii - 1.0) <= 1e-12)
    assert math.isinf(largest_stable_step(radius))


def test_baumgarte_step_limit_for_fixed_gains():
    """With α, β fixed the limit is on Δt: Δt ≤ 1/α for Eq. 64 with α = β."""
    alpha, modes = 15.0, projector_modes()
    limit = largest_stable_step(lambda dt: baumgarte_spectral_radius(dt, alpha, alpha, modes=modes))
    assert limit == pytest.approx(1 / alpha, rel=1e-8)
