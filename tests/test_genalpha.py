"""Generalized-α for the index-3 DAE, fixed step (Chung & Hulbert 1993; Arnold & Brüls
2007): :mod:`mbdgen.runtime.genalpha` and its family :class:`mbdgen.steppers.GeneralizedAlpha`.

Convergence orders on the pendulum for several ρ∞, the coefficient identities, the
spectral radius ρ∞ at hω → ∞, the reduction to HHT-α (α_m = 0, α_f = −α), the
iteration matrix against finite differences, Newton's iteration counts, bad input,
the CLI and the no-JIT mode.  Measured values are quoted next to each tolerance.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import GENERATED, central_jacobian, fitted_slopes, run_python
from oscillator import osc_step

import mbdgen
from mbdgen.cli import main
from mbdgen.compiler import import_generated
from mbdgen.errors import MbdgenError
from mbdgen.runtime import genalpha as ga
from mbdgen.runtime import hht as rt
from mbdgen.runtime import sparse_newton

RHOS = (1.0, 0.9, 0.8, 0.5, 0.0)


def genalpha(module, h, t_end, **options):
    return mbdgen.simulate(module, "genalpha", None, h, t_end, **options)


# fitted orders over h = 0.1/2 … 0.1/64 (5 halvings), max-norm errors at t = 1:
#   ρ∞     q      q̇      λ      q̈
#   1.0    2.000  1.998  2.246  2.035  (λ's local slopes 2.0 … 2.02, then 3.7: the
#                                       undamped (−1)ⁿ mode, as HHT with α = 0)
#   0.9    2.000  2.000  2.009  2.009
#   0.8    2.001  2.001  1.990  1.990
#   0.5    2.010  2.000  2.007  2.007
#   0.0    2.029  1.963  2.012  2.012
# Unlike HHT (q̈ first order for α ≠ 0), the equations of motion hold at t_{n+1} with
# q̈_{n+1} itself, and q̈ and λ measure second order at t = 1 too.  (Not checked: the
# start-up transient of a_0 = q̈_0 that Arnold & Brüls 2007 analyse; at t = 1 it is
# not visible.)  ρ∞ = 1 is the trapezoidal rule: its numbers are HHT's at α = 0.
@pytest.mark.parametrize("rho_inf", RHOS)
def test_order_two_in_q_qd_lambda_and_qdd(pendulum, pendulum_exact, rho_inf):
    hs = 0.1 / 2.0 ** np.arange(1, 7)
    slopes = fitted_slopes(
        lambda h: genalpha(pendulum, h, 1.0, rho_inf=rho_inf), hs, pendulum_exact
    )
    assert slopes["q"] == pytest.approx(2.0, abs=0.05), slopes
    assert slopes["qd"] == pytest.approx(2.0, abs=0.05), slopes
    if rho_inf == 1.0:  # λ carries the undamped (−1)ⁿ mode of the trapezoidal rule
        assert 1.8 < slopes["lam"] < 2.5, slopes
    else:
        assert slopes["lam"] == pytest.approx(2.0, abs=0.1), slopes
    assert slopes["qdd"] == pytest.approx(2.0, abs=0.1), slopes


@pytest.mark.parametrize("rho_inf", np.linspace(0.0, 1.0, 11))
def test_coefficients_of_chung_and_hulbert(rho_inf):
    """α_m = (2ρ∞ − 1)/(ρ∞ + 1), α_f = ρ∞/(ρ∞ + 1), γ = ½ − α_m + α_f,
    β = (1 − α_m + α_f)²/4 = (γ + ½)²/4; α_m ≤ α_f ≤ ½ (unconditional stability), and
    the ``ctrl`` vector carries them with HHT's α = 0."""
    alpha_m, alpha_f, beta, gamma = ga.coefficients(rho_inf)
    assert alpha_m == pytest.approx((2.0 * rho_inf - 1.0) / (rho_inf + 1.0), rel=1e-15)
    assert alpha_f == pytest.approx(rho_inf / (rho_inf + 1.0), rel=1e-15)
    assert gamma == pytest.approx(0.5 - alpha_m + alpha_f, rel=1e-15)
    assert beta == pytest.approx((gamma + 0.5) ** 2 / 4.0, rel=1e-15)
    assert alpha_m <= alpha_f <= 0.5
    ctrl = ga.control(rho_inf, 1e-10, 10)
    assert ctrl[rt.C_ALPHA] == 0.0
    assert (ctrl[rt.C_ALPHA_M], ctrl[rt.C_ALPHA_F]) == (alpha_m, alpha_f)
    assert (ctrl[rt.C_BETA], ctrl[rt.C_GAMMA]) == (beta, gamma)


def test_coefficients_at_the_ends():
    """ρ∞ = 1: α_m = α_f = ½, the trapezoidal β = ¼, γ = ½; ρ∞ = 0: α_m = −1, α_f = 0,
    β = 1, γ = 3/2 (asymptotic annihilation)."""
    assert ga.coefficients(1.0) == (0.5, 0.5, 0.25, 0.5)
    assert ga.coefficients(0.0) == (-1.0, 0.0, 1.0, 1.5)


# --- numerical damping on a linear oscillator --------------------------------------


def amplification_matrix(rho_inf, h_omega):
    """The 4 × 4 matrix mapping (q_n, h q̇_n, h² q̈_n, h² a_n) to step n + 1, built
    numerically column by column from single runtime steps of q̈ + ω² q = 0 (ω = 1,
    h = hω), not from the formulas.  q̈_n is a state of its own here (α_f q̈_n enters
    a_{n+1}); on the oscillator q̈_{n+1} = −ω² q_{n+1}, so the extra eigenvalue is 0
    and the other three are Chung & Hulbert's."""
    p = np.array([1.0])
    G = np.zeros((4, 4))
    for j in range(4):
        unit = np.zeros(4)
        unit[j] = 1.0
        x = unit[:3].copy()
        ws = ga.workspace(1, 0)
        ws.a[0] = unit[3]  # a_n
        ws.hist[0, 0] = x[2]  # the predictor's last q̈
        state = np.zeros(ga.STATE_SIZE, dtype=np.int64)
        state[rt.S_STARTED] = 1
        state[rt.S_NHIST] = 1
        ctrl = ga.control(rho_inf, 1e-14, 10, full_newton=True)
        outs = np.zeros(1), np.zeros((1, 3)), np.zeros((1, 2))
        assert osc_step(p, ctrl, ws, h_omega, x, state, *outs) == 0
        G[:3, j] = x
        G[3, j] = ws.a[0]
    scale = np.diag([1.0, h_omega, h_omega**2, h_omega**2])
    return scale @ G @ np.linalg.inv(scale)


@pytest.mark.parametrize("rho_inf", (1.0, 0.9, 0.8, 0.5, 0.2, 0.0))
def test_spectral_radius_at_infinity_is_rho_inf(rho_inf):
    """ρ(G) at hω = 1e6 against ρ∞.  At hω → ∞ Chung & Hulbert's three roots meet at
    −ρ∞ (the optimal choice of α_m), so the O((hω)⁻²) remainder moves a triple root by
    its cube root, (hω)^(−2/3) = 1e-4: measured |ρ − ρ∞| = 0 (ρ∞ = 1), 6.8e-5 (0.9),
    7.8e-5 (0.8, 0.5), 6.3e-5 (0.2), 1.0e-4 (0); tolerance 2e-4, as HHT's at α = −1/3
    where its roots meet too.  At hω = 1e-2, ρ = 1 within 5e-9 (measured): the low
    frequencies are barely damped."""
    rho = max(abs(np.linalg.eigvals(amplification_matrix(rho_inf, 1e6))))
    assert rho == pytest.approx(rho_inf, abs=2e-4)
    rho_low = max(abs(np.linalg.eigvals(amplification_matrix(rho_inf, 1e-2))))
    assert rho_low == pytest.approx(1.0, abs=1e-6)


def test_spectral_radius_tends_to_rho_inf_like_a_triple_root():
    """|ρ(hω) − ρ∞| falls by 10^(2/3) = 4.64 per decade of hω (ρ∞ = 0.5; measured
    3.7e-2, 7.8e-3, 1.7e-3, 3.6e-4, 7.8e-5 at hω = 1e2 … 1e6): the triple root's
    signature, and the reason for the tolerance above."""
    gaps = [
        abs(max(abs(np.linalg.eigvals(amplification_matrix(0.5, hw)))) - 0.5)
        for hw in (1e3, 1e4, 1e5, 1e6)
    ]
    ratios = np.array(gaps[:-1]) / np.array(gaps[1:])
    assert np.all((ratios > 4.0) & (ratios < 5.3)), (gaps, ratios)


# --- generalized-α with α_m = 0, α_f = −α is HHT-α ------------------------------------


def _steps(module, entry, ctrl, h, steps):
    """``steps`` fixed steps of a runtime entry point from the model's q0, q̇0: x and
    the workspace at the end."""
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    x = np.zeros(rt.state_width(n, m))
    x[:n], x[n : 2 * n] = module.Q0, module.QD0
    sparse = getattr(module, "LINEAR_ALGEBRA", "dense") == "sparse"  # its entry's Newton matrix
    ws = sparse_newton.module_workspace(module) if sparse else rt.workspace(n, m)
    state = np.zeros(rt.STATE_SIZE, dtype=np.int64)
    rows = steps + 1
    outs = np.zeros(rows), np.zeros((rows, x.size)), np.zeros((rows, 2))
    status = entry(module.P_DEFAULT, ctrl, ws, 0.0, h, x, state, steps, 1, *outs)
    assert status == 0
    return outs[1], ws


@pytest.mark.parametrize("alpha", (0.0, -0.05, -0.3))
def test_alpha_m_zero_alpha_f_minus_alpha_is_hht(pendulum, alpha):
    """Chung & Hulbert: α_m = 0, α_f = −α gives HHT's β, γ, and for a constant mass
    matrix the same q, q̇, λ.  HHT's unknown q̈ (Negrut et al. 2007, Eq. 11a, where M q̈
    is not weighted) solves M q̈^HHT_{n+1} = −(1 + α) F_{n+1} + α F_n, F = Φ_qᵀλ − Q;
    generalized-α's q̈_{n+1} solves M q̈_{n+1} = −F_{n+1} and enters Newmark's formulas
    through a_{n+1} = (1 + α) q̈_{n+1} − α q̈_n = M⁻¹(−(1 + α) F_{n+1} + α F_n).  With
    M constant (the pendulum, M = diag(m, m, J)) a_{n+1} = q̈^HHT_{n+1}, so both solve
    the same equations for q_{n+1}, q̇_{n+1}, λ_{n+1}; HHT's q̈ equals generalized-α's
    a, not its q̈.  (With M(q) they differ by design: HHT weights F but not M q̈.)
    Full Newton to 1e-14, 10 steps of h = 0.1: relative difference < 1e-12 (measured
    ≤ 4e-16 in q, 6e-15 in q̇, 3.7e-13 in λ, 1.2e-12 absolute between a and HHT's q̈ of
    size 10).  h is large on purpose: both Newton loops stop at the round-off floor
    10 eps max(1, ‖q‖)/(βh²) of q̈ (a smaller change of q̈ does not change q), which at
    h = 0.01 is 1e-10 — there λ agrees to 9e-11, the floor, not a difference of the
    methods."""
    h, steps = 0.1, 10
    g_ctrl = ga.control(None, 1e-14, 10, alpha_m=0.0, alpha_f=-alpha, full_newton=True)
    h_ctrl = rt.control(alpha, 1e-14, 10, full_newton=True)
    assert (g_ctrl[rt.C_BETA], g_ctrl[rt.C_GAMMA]) == pytest.approx(rt.coefficients(alpha))
    g, g_ws = _steps(pendulum, pendulum.index3_chunk, g_ctrl, h, steps)
    r, _ = _steps(pendulum, pendulum.index3_chunk, h_ctrl, h, steps)
    n = pendulum.N_COORDINATES
    same = np.r_[0 : 2 * n, 3 * n : g.shape[1]]  # q, q̇, λ
    scale = np.maximum(1.0, np.abs(r[:, same]))
    assert (np.abs(g[:, same] - r[:, same]) / scale).max() < 1e-12
    # HHT's q̈ is generalized-α's a (at the last step)
    assert g_ws.a == pytest.approx(r[-1, 2 * n : 3 * n], rel=1e-12, abs=1e-12)
    # and generalized-α's q̈ is the acceleration itself: it differs from a for α ≠ 0
    if alpha != 0.0:
        assert np.abs(g[-1, 2 * n : 3 * n] - r[-1, 2 * n : 3 * n]).max() > 1e-6


def test_with_a_configuration_dependent_mass_hht_and_alpha_m_zero_differ_below_their_errors():
    """spatial_slider_crank (M(q) through the Euler parameters), α = −0.3, t = 0.1:
    here the two are different schemes (HHT weights F = Φ_qᵀλ − Q at t_n and t_{n+1}
    but not M q̈; generalized-α keeps M(q_{n+1}) q̈_{n+1} + F_{n+1} = 0 and weights the
    accelerations), so they do not agree to round-off.  What holds: their difference is
    far below either's error.  Measured, difference / error of HHT / of generalized-α
    against HHT at h = 1e-5: h = 2e-3: 3.9e-8 / 1.9e-6 / 1.8e-6; 1e-3: 2.0e-8 / 4.8e-7 /
    4.6e-7; 5e-4: 1.0e-8 / 1.3e-7 / 1.1e-7; 2.5e-4: 5.2e-9 / 3.4e-8 / 2.8e-8.  Both
    errors fall like h², the difference only like h (a small first-order term that the
    two schemes' acceleration variables, both approximating q̈(t + αh), carry
    differently when M varies; not analysed further).  Asserted at h = 1e-3: difference
    < 1e-7 and < 0.1 × the distance to the h/2 solution."""
    module = import_generated(GENERATED / "spatial_slider_crank.py")
    n, alpha = module.N_COORDINATES, -0.3
    g_ctrl = ga.control(None, 1e-12, 10, alpha_m=0.0, alpha_f=-alpha, full_newton=True)
    h_ctrl = rt.control(alpha, 1e-12, 10, full_newton=True)
    g, _ = _steps(module, module.index3_chunk, g_ctrl, 1e-3, 100)
    r, _ = _steps(module, module.index3_chunk, h_ctrl, 1e-3, 100)
    r2, _ = _steps(module, module.index3_chunk, h_ctrl, 5e-4, 200)
    difference = np.abs(g[-1, :n] - r[-1, :n]).max()
    assert 0.0 < difference < 1e-7, difference
    assert difference < 0.1 * np.abs(r[-1, :n] - r2[-1, :n]).max()


def test_rho_inf_one_is_the_trapezoidal_rule(pendulum):
    """ρ∞ = 1: α_m = α_f = ½, so a_{n+1} = q̈_{n+1} + q̈_n − a_n = q̈_{n+1} from a_0 = q̈_0
    and the scheme is the trapezoidal rule, i.e. HHT at α = 0.  10 steps of h = 0.1,
    full Newton to 1e-14: relative difference < 1e-12 (measured 0: bit-identical here,
    but the rounding of the a-recurrence need not be in general)."""
    h, steps = 0.1, 10
    g, _ = _steps(pendulum, pendulum.index3_chunk,
                  ga.control(1.0, 1e-14, 10, full_newton=True), h, steps)  # fmt: skip
    r, _ = _steps(pendulum, pendulum.index3_chunk, rt.control(0.0, 1e-14, 10, full_newton=True),
                  h, steps)  # fmt: skip
    difference = (np.abs(g - r) / np.maximum(1.0, np.abs(r))).max()
    assert difference < 1e-12, difference


# --- the iteration matrix against finite differences --------------------------------

JACOBIAN_MODELS = ("pendulum", "slider_crank_tsda", "spatial_slider_crank")


@pytest.fixture(scope="module", params=JACOBIAN_MODELS)
def moving(request):
    """A module and a state in motion: 0.2 s of generalized-α from the model's q0."""
    module = import_generated(GENERATED / f"{request.param}.py")
    return module, genalpha(module, 1e-3, 0.2)


def _discretized_residual(module, z, x, a, t1, h, ctrl):
    """e(q̈_{n+1}, λ_{n+1}) through the runtime's update and residual (scaled)."""
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    beta, gamma_nm = ctrl[rt.C_BETA], ctrl[rt.C_GAMMA]
    alpha_m, alpha_f = ctrl[rt.C_ALPHA_M], ctrl[rt.C_ALPHA_F]
    q, qd, qdd = x[:n], x[n : 2 * n], x[2 * n : 3 * n]
    q1, qd1, a1 = np.zeros(n), np.zeros(n), np.zeros(n)
    rt.genalpha_update(
        n, h, beta, gamma_nm, alpha_m, alpha_f, q, qd, qdd, a, z[:n].copy(), a1, q1, qd1
    )  # fmt: skip
    ws = rt.workspace(n, m)
    module.dynamics(t1, q1, qd1, module.P_DEFAULT, *ws[:6])
    c = (1.0 - alpha_f) / (1.0 - alpha_m)
    e = np.zeros(n + m)
    rt.residual(n, m, 0.0, beta * h * h * c, ws[0], ws[1], ws[2], ws[3], z[:n].copy(),
                z[n:].copy(), np.zeros(n), ws.active, e)  # fmt: skip
    return e, q1, qd1, ws


@pytest.mark.parametrize("rho_inf", (0.8, 0.0))
def test_iteration_matrix_equals_finite_differences_of_the_residual(moving, rho_inf):
    """The iteration matrix from the generated blocks with β′ = βc, γ′ = γc against
    central differences of the discretized residual at an unconverged iterate, h = 0.01.
    Relative max difference < 1e-6; measured (step 1e-5): pendulum 1.3e-8 / 1.2e-8,
    slider_crank_tsda 1.5e-9 / 6.2e-10, spatial_slider_crank 2.2e-7 / 6.9e-8
    (ρ∞ = 0.8 / 0; the round-off of Φ/(β′h²) in central differences)."""
    module, result = moving
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    h = 0.01
    ctrl = ga.control(rho_inf, 1e-10, 10)
    x = np.concatenate([result.q[-1], result.qd[-1], result.qdd[-1], result.lam[-1]])
    rng = np.random.default_rng(2)
    a = x[2 * n : 3 * n] * (1.0 + 0.1 * rng.standard_normal(n))  # a_n ≠ q̈_n
    t1 = result.t[-1] + h
    z = np.concatenate([x[2 * n : 3 * n], x[3 * n :]])
    z = z + 0.1 * rng.standard_normal(n + m) * np.maximum(1.0, np.abs(z))
    _, q1, qd1, ws1 = _discretized_residual(module, z, x, a, t1, h, ctrl)
    beta, gamma_nm = ctrl[rt.C_BETA], ctrl[rt.C_GAMMA]
    c = (1.0 - ctrl[rt.C_ALPHA_F]) / (1.0 - ctrl[rt.C_ALPHA_M])
    A = np.zeros((n + m, n + m))
    rt.iteration_matrix(
        module.mass_a_q, module.phi_q_lam_q, module.force_q, module.force_qd, n, m, t1,
        q1, qd1, z[:n].copy(), z[n:].copy(), module.P_DEFAULT, 0.0, beta * h * h * c,
        gamma_nm * h * c, ws1[0], ws1[3], ws1[9], ws1[10], ws1[11], ws1[12], ws1.active, A,
    )  # fmt: skip
    fd = central_jacobian(lambda zz: _discretized_residual(module, zz, x, a, t1, h, ctrl)[0], z)
    difference = np.abs(A - fd).max() / np.abs(A).max()
    assert difference < 1e-6, difference
    assert np.abs(A[:n, :n] - ws1[0]).max() > 0.0  # the blocks beyond M are exercised


def test_newton_converges_in_at_most_three_iterations_at_small_h(moving):
    """Full Newton at h = 1e-4 from the predictor: ≤ 3 iterations per step (measured: 2
    in every step on every model).  Modified Newton (the default) keeps one
    factorization over the 100 steps (measured: 2 / 2 / 3 factorizations, 2.95 / 3.86 /
    4.09 iterations per step, at most 3 / 4 / 5, on pendulum / slider_crank_tsda /
    spatial_slider_crank; final q within 1.6e-12 of full Newton)."""
    module, result = moving
    q0, qd0 = result.q[-1], result.qd[-1]
    full = genalpha(module, 1e-4, 0.01, q0=q0, qd0=qd0, options={"full_newton": True})
    assert full.counters["max_iterations_per_step"] <= 3, full.counters
    assert full.counters["factorizations"] == full.counters["newton_iterations"] + 1
    modified = genalpha(module, 1e-4, 0.01, q0=q0, qd0=qd0)
    assert modified.counters["max_iterations_per_step"] <= 5, modified.counters
    assert modified.counters["factorizations"] < modified.counters["steps"] / 5
    assert np.abs(modified.q[-1] - full.q[-1]).max() < 1e-9


# --- the driver -----------------------------------------------------------------


@pytest.mark.parametrize("rho_inf", (-0.1, 1.01, 2.0, float("nan"), "x"))
def test_bad_rho_inf_is_a_one_line_error(pendulum, rho_inf):
    with pytest.raises(MbdgenError, match=r"rho_inf must be a number in \[0, 1\]") as info:
        genalpha(pendulum, 0.01, 0.1, rho_inf=rho_inf)
    assert "\n" not in str(info.value)


def test_each_damping_keyword_belongs_to_its_method(pendulum):
    for method, keyword in (("hht", "rho_inf"), ("abm", "rho_inf"), ("genalpha", "hht_alpha")):
        with pytest.raises(MbdgenError, match=f"{keyword} is .* applies to method") as info:
            mbdgen.simulate(pendulum, method, None, 0.01, 0.1, **{keyword: 0.5})
        assert "\n" not in str(info.value)
    with pytest.raises(MbdgenError, match="method 'genalpha' takes the options"):
        genalpha(pendulum, 0.01, 0.1, options={"hht_alpha": -0.1})


def test_result_has_counters_info_and_holds_the_constraints(pendulum):
    """Index 3: Φ = 0 to round-off (measured 5e-15); ρ∞ = 0.9 (the default) loses
    little energy at h = 1e-3 (measured 1e-6 of m g l)."""
    result = genalpha(pendulum, 1e-3, 1.0, output_every=10)
    assert len(result) == 101 and result.t[-1] == pytest.approx(1.0)
    assert result.phi_norm.max() < 1e-12
    assert result.counters["steps"] == 1000
    for key in ("newton_iterations", "jacobian_evaluations", "factorizations"):
        assert result.counters[key] > 0
    assert abs(result.total_energy[-1] - result.total_energy[0]) < 1e-4 * 9.81
    info = result.info
    assert info["method"] == "genalpha" and info["rho_inf"] == 0.9
    assert (info["alpha_m"], info["alpha_f"]) == pytest.approx(ga.coefficients(0.9)[:2])


def test_cli_runs_genalpha_with_rho_inf(tmp_path):
    res = CliRunner().invoke(
        main,
        ["simulate", str(GENERATED.parent / "models" / "pendulum.py"), "--method",
         "genalpha", "--rho-inf", "0.5", "--h", "0.01", "--t-end", "0.1", "--out-dir",
         str(GENERATED), "-o", str(tmp_path / "r.npz"), "--no-progress"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(
        main,
        ["simulate", str(GENERATED.parent / "models" / "pendulum.py"), "--method",
         "genalpha", "--rho-inf", "1.5", "--h", "0.01", "--t-end", "0.1", "--out-dir",
         str(GENERATED), "-o", str(tmp_path / "r.npz"), "--no-progress"],
    )  # fmt: skip
    assert res.exit_code != 0 and "rho_inf must be a number in [0, 1]" in res.output


_RUN = """
import json
import mbdgen
from mbdgen.compiler import import_generated
m = import_generated("generated/pendulum.py")
r = mbdgen.simulate(m, "genalpha", None, 0.01, 0.1, rho_inf=0.6)
stats = getattr(m.index3_chunk, "stats", None)  # None: no JIT
print(json.dumps({"q": r.q[-1].tolist(), "lam": r.lam[-1].tolist(),
                  "hits": sum(stats.cache_hits.values()) if stats else None,
                  "misses": sum(stats.cache_misses.values()) if stats else None}))
"""


def test_runs_without_jit_and_is_cached_across_processes():
    """NUMBA_DISABLE_JIT=1 gives the jitted numbers (to 1e-12), and a second process
    loads the entry point from Numba's cache."""
    plain = json.loads(run_python(_RUN, env={"NUMBA_DISABLE_JIT": "1"}).splitlines()[-1])
    # compile the module's own entry point, if this machine has not yet (under the
    # tests' policy "shared" a process only loads it)
    run_python(_RUN, env={"MBDGEN_SPECIALIZE": "now"})
    jitted = json.loads(run_python(_RUN).splitlines()[-1])
    assert (jitted["hits"], jitted["misses"]) == (1, 0)
    assert plain["q"] == pytest.approx(jitted["q"], rel=1e-12, abs=1e-14)
    assert plain["lam"] == pytest.approx(jitted["lam"], rel=1e-12, abs=1e-12)
