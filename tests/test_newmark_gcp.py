"""Implicit Newmark on the state-space ODE of coordinate partitioning, IMPL and FV
(Haug, Negrut & Iancu 1997): :mod:`mbdgen.runtime.newmark_gcp`.

Convergence orders on the pendulum, the iteration matrix of Eq. 29 against central
differences of an independent NumPy residual (Eq. 20) on a planar and a spatial
model, Newton's iteration counts, the driver (API, CLI, bad options), no-JIT mode and
the cheap end of the §4 experiments.  Measured values are quoted next to each
tolerance.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import GENERATED, MODELS, central_jacobian, fitted_slopes, run_python

import mbdgen
from mbdgen.cli import main
from mbdgen.compiler import import_generated
from mbdgen.errors import MbdgenError
from mbdgen.experiments import largest_stable_step
from mbdgen.runtime import linalg, partition
from mbdgen.runtime import newmark_gcp as rt

METHODS = ("newmark_gcp", "newmark_gcp_fv")


# Fitted orders over h = 0.1/2 … 0.1/64 (5 halvings), max-norm errors at t = 1,
# IMPL and FV alike (same discretization; only Newton's matrix differs):
#   q 2.000, q̇ 2.000, q̈ 2.000, λ 2.000; local slopes 1.999-2.001.
# λ and q̈ are second order: they are the index-1 values at the accepted (q, q̇),
# which are second-order accurate, with no (−1)ⁿ mode (unlike HHT's λ at α = 0).
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.filterwarnings("ignore:the energy balance")  # h = 0.05: a coarse energy
def test_order_two_in_q_qd_lambda_and_qdd(pendulum, pendulum_exact, method):
    hs = 0.1 / 2.0 ** np.arange(1, 7)
    slopes = fitted_slopes(
        lambda h: mbdgen.simulate(pendulum, method, h=h, t_end=1.0), hs, pendulum_exact
    )
    for key in ("q", "qd", "lam", "qdd"):
        assert slopes[key] == pytest.approx(2.0, abs=0.02), slopes


# --- the iteration matrix against finite differences --------------------------------


def _moving_state(module, seed):
    """q0 of the model and random velocities and accelerations that satisfy the
    velocity and acceleration constraints (a consistent state in motion, no run)."""
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    p = module.P_DEFAULT
    q = np.array(module.Q0, dtype=float)
    phi_q = np.zeros((m, n))
    module.phi_q(0.0, q, p, phi_q)
    null = np.linalg.svd(phi_q)[2][m:].T
    rng = np.random.default_rng(seed)
    qd = null @ rng.standard_normal(n - m)
    gamma = np.zeros(m)
    module.gamma(0.0, q, qd, p, gamma)
    qdd = np.linalg.lstsq(phi_q, gamma, rcond=None)[0] + null @ rng.standard_normal(n - m)
    return q, qd, qdd


def _residual(module, dep, ind, qt, qdt, bh2, gh, t, vdd):
    """Ψ(v̈) of Eq. 20 in NumPy, independently of the runtime: v, v̇ from Eqs. 16-17,
    u from Eq. 11 by Newton's method to round-off, u̇, ü, λ from Eqs. 12, 13, 10.
    Returns Ψ and the state (q, q̇, q̈, λ)."""
    n, m, p = module.N_COORDINATES, module.N_CONSTRAINTS, module.P_DEFAULT
    q, qd, qdd = qt.copy(), qdt.copy(), np.zeros(n)
    q[ind] += bh2 * vdd
    qd[ind] += gh * vdd
    qdd[ind] = vdd
    phi, phi_q, phi_t = np.zeros(m), np.zeros((m, n)), np.zeros(m)
    for _ in range(50):
        module.phi(t, q, p, phi)
        module.phi_q(t, q, p, phi_q)
        du = np.linalg.solve(phi_q[:, dep], -phi)
        q[dep] += du
        if np.abs(du).max() < 1e-15:
            break
    module.phi_q(t, q, p, phi_q)
    module.phi_t(t, q, p, phi_t)
    qd[dep] = np.linalg.solve(phi_q[:, dep], -phi_t - phi_q[:, ind] @ qd[ind])
    mass, force, gamma = np.zeros((n, n)), np.zeros(n), np.zeros(m)
    module.mass(t, q, p, mass)
    module.force(t, q, qd, p, force)
    module.gamma(t, q, qd, p, gamma)
    qdd[dep] = np.linalg.solve(phi_q[:, dep], gamma - phi_q[:, ind] @ vdd)
    e = mass @ qdd - force
    lam = np.linalg.solve(phi_q[:, dep].T, -e[dep])
    return e[ind] + phi_q[:, ind].T @ lam, (q, qd, qdd, lam, mass, phi_q)


def _runtime_matrix(module, dep, ind, state, t, bh2, gh, fv):
    """The runtime's Ψ_v̈ (Eq. 29) or Π_v̈ (Eq. 40) at a state, from the generated
    blocks through :func:`mbdgen.runtime.newmark_gcp.assemble_iteration_matrix`."""
    n, m, p = module.N_COORDINATES, module.N_CONSTRAINTS, module.P_DEFAULT
    q, qd, qdd, lam, mass, phi_q = state
    ws = rt.workspace(n, m, dep, ind)
    ws.mass[:] = mass
    ws.phi_q[:] = phi_q
    ws.Ju[:] = phi_q[:, dep]
    assert linalg.lu_factor_inplace(ws.Ju, ws.pivu, m) == 0
    module.mass_a_q(t, q, qdd, p, ws.maq)
    module.phi_q_lam_q(t, q, lam, p, ws.plq)
    module.force_q(t, q, qd, p, ws.fq)
    module.force_qd(t, q, qd, p, ws.fqd)
    module.phi_q_a_q(t, q, qdd, p, ws.paq)
    module.gamma_q(t, q, qd, p, ws.gq)
    module.gamma_qd(t, q, qd, p, ws.gqd)
    rt.assemble_iteration_matrix(n, m, bh2, gh, fv, ws)
    return ws.A.copy()


# Relative max difference from central differences (step 1e-5 max(1, |v̈|)), at a
# random consistent state in motion, h = 0.05, v̈ off the solution.  Measured:
#   model                 IMPL     FV (how far Eq. 40's dropped terms are)
#   double_pendulum_rsda  9.1e-10  1.5e-2   (2 independent coordinates)
#   welch_pendulum3d      1.0e-10  1.1e-1   (7, Euler parameters)
@pytest.mark.parametrize("name", ("double_pendulum_rsda", "welch_pendulum3d"))
def test_eq29_jacobian_equals_finite_differences_and_fv_drops_terms(name):
    module = import_generated(GENERATED / f"{name}.py")
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    q, qd, qdd = _moving_state(module, seed=3)
    phi_q = np.zeros((m, n))
    module.phi_q(0.0, q, module.P_DEFAULT, phi_q)
    dep, ind, _ = partition.choose_partition(phi_q)
    h, beta, gamma_nm = 0.05, 0.25, 0.5
    qt, qdt = np.zeros(n), np.zeros(n)
    rt.predictor(n, h, beta, gamma_nm, q, qd, qdd, qt, qdt)
    bh2, gh = beta * h * h, gamma_nm * h
    vdd = qdd[ind] + np.random.default_rng(4).standard_normal(n - m)
    _, state = _residual(module, dep, ind, qt, qdt, bh2, gh, h, vdd)
    fd = central_jacobian(lambda z: _residual(module, dep, ind, qt, qdt, bh2, gh, h, z)[0], vdd)
    impl = _runtime_matrix(module, dep, ind, state, h, bh2, gh, False)
    fv = _runtime_matrix(module, dep, ind, state, h, bh2, gh, True)
    scale = np.abs(fd).max()
    assert np.abs(impl - fd).max() / scale < 1e-7
    assert np.abs(fv - fd).max() / scale > 1e-3


def test_transposed_lu_solve():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 5))
    b = rng.standard_normal(5)
    lu, piv, x = a.copy(), np.zeros(5, dtype=np.int64), b.copy()
    linalg.lu_factor_inplace(lu, piv, 5)
    linalg.lu_solve_transposed(lu, piv, x, 5)
    assert np.allclose(a.T @ x, b, rtol=0, atol=1e-13)


def test_newton_converges_in_at_most_three_iterations_at_small_h(pendulum):
    """Full Newton at h = 1e-3 from the §3.3 predictor: ≤ 3 iterations per step, IMPL
    and FV (measured: 1.87 per step, at most 2).  Modified Newton keeps one
    factorization over the 100 steps (measured: 1, 1.87 iterations per step); its q
    within 1e-12 of full Newton's (measured: equal)."""
    for method in METHODS:
        full = mbdgen.simulate(pendulum, method, h=1e-3, t_end=0.1, options={"full_newton": True})
        c = full.counters
        assert c["max_iterations_per_step"] <= 3, c
        assert c["factorizations"] == c["newton_iterations"], c
        modified = mbdgen.simulate(pendulum, method, h=1e-3, t_end=0.1)
        assert modified.counters["factorizations"] <= 2, modified.counters
        assert np.abs(modified.q[-1] - full.q[-1]).max() < 1e-12


def test_result_holds_the_constraints_and_the_energy(pendulum):
    """Φ = 0 to the Newton tolerance at every step, the velocity constraint too
    (measured: 0 for both: the pendulum's u is linear in x, y given φ); the
    trapezoidal rule's energy error at h = 1e-3 on the conservative pendulum
    (measured 1.4e-7 of m g l)."""
    result = mbdgen.simulate(pendulum, "newmark_gcp", h=1e-3, t_end=1.0, output_every=10)
    assert len(result) == 101 and result.t[-1] == pytest.approx(1.0)
    assert result.phi_norm.max() < 1e-10 and result.phid_norm.max() < 1e-10
    c = result.counters
    assert c["steps"] == 1000 and c["newton_iterations"] >= 1000
    for key in ("jacobian_evaluations", "factorizations", "partition_changes"):
        assert key in c
    energy = result.total_energy
    assert abs(energy[-1] - energy[0]) < 1e-4 * 9.81
    assert result.info["variant"] == "impl" and result.info["method"] == "newmark_gcp"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"options": {"max_iterations": 0}}, "max_iterations must be"),
        ({"options": {"hht_alpha": -0.1}}, "take the options"),
        ({"hht_alpha": -0.1}, "applies to methods hht and hht_adaptive only"),
        ({"constraints": "gcp"}, "enforces the constraints itself"),
        ({"newton_tol": 0.0}, "newton_tol must be"),
    ],
)
def test_bad_options_are_one_line_errors(pendulum, kwargs, message):
    with pytest.raises(MbdgenError, match=message) as info:
        mbdgen.simulate(pendulum, "newmark_gcp", h=0.01, t_end=0.1, **kwargs)
    assert "\n" not in str(info.value)


def test_newton_failure_is_a_message_with_the_partial_result(pendulum):
    """A step far too large for the motion: Newton fails, the run stops with the
    family's message and keeps the steps it took."""
    with pytest.raises(mbdgen.SimulationError, match="independent accelerations") as info:
        mbdgen.simulate(pendulum, "newmark_gcp", h=0.5, t_end=5.0, options={"max_iterations": 2})
    assert info.value.reason == "failed" and info.value.result is not None


def test_cli_runs_both_variants_and_lists_them(tmp_path):
    runner = CliRunner()
    listing = runner.invoke(main, ["methods"])
    assert "newmark_gcp " in listing.output and "newmark_gcp_fv" in listing.output
    for method in METHODS:
        out = tmp_path / f"{method}.npz"
        args = ["simulate", str(MODELS / "pendulum.py"), "--method", method, "--h", "0.01"]
        args += ["--t-end", "0.1", "--out-dir", str(GENERATED), "-o", str(out)]
        result = runner.invoke(main, args)
        assert result.exit_code == 0, result.output
        assert "10 steps of " + method in result.output
        assert out.exists()


_RUN = """
import json
from mbdgen.compiler import import_generated
import mbdgen
m = import_generated("generated/pendulum.py")
r = mbdgen.simulate(m, "newmark_gcp", h=0.01, t_end=0.05)
print(json.dumps({"q": r.q[-1].tolist(), "lam": r.lam[-1].tolist()}))
"""


def test_runs_without_jit(pendulum):
    """NUMBA_DISABLE_JIT=1 gives the jitted numbers (to 1e-12)."""
    plain = json.loads(run_python(_RUN, env={"NUMBA_DISABLE_JIT": "1"}).splitlines()[-1])
    jitted = mbdgen.simulate(pendulum, "newmark_gcp", h=0.01, t_end=0.05)
    assert plain["q"] == pytest.approx(jitted.q[-1].tolist(), rel=1e-12, abs=1e-14)
    assert plain["lam"] == pytest.approx(jitted.lam[-1].tolist(), rel=1e-12, abs=1e-12)


def test_impl_takes_larger_steps_than_fv_on_the_stiff_slider_crank():
    """§4.4: IMPL's largest stable step exceeds FV's (paper, Table 5: 0.0649 against
    0.0086 on its slider-crank).  Here, with the model's own k, c (the paper's are
    lost), 10 full-Newton iterations and the §3.3 predictor, measured 0.0755 against
    0.0283 (bisection to 5 %; :func:`mbdgen.experiments.haug1997` has the table)."""
    module = import_generated(GENERATED / "slider_crank_tsda.py")
    impl = largest_stable_step(module, "newmark_gcp", 0.1, h_min=0.005, h_max=0.1, rel=0.05)
    fv = largest_stable_step(module, "newmark_gcp_fv", 0.1, h_min=0.005, h_max=0.1, rel=0.05)
    assert impl > 1.5 * fv, (impl, fv)
