"""The index-3 Newton matrix on the sparse patterns (mbdgen.runtime.sparse_newton)
against a dense one built here from the dense kernels.

The dense reference is Negrut et al. 2007, Eq. 12 with M̂ of Eq. 14 and the states'
rows and columns of Eq. 12 (d = Ẋ − f), assembled in NumPy from the generated dense
blocks: independent of both runtime paths.  Solves agree to 1e-12 relative (max-norm
of the solution): the factorizations are exact up to rounding and these matrices are
well conditioned at the small h used (condition numbers below 1e5), so 1e-12 leaves
room for rounding growth.  Only the sparse routines (compiled once per installation)
and the models' kernels are called: no new entry point is compiled here.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import GENERATED, run_python

from mbdgen.compiler import import_generated
from mbdgen.runtime import hht, sparse_newton
from mbdgen.runtime.status import OK, SINGULAR

RTOL = 1e-12


def _state(module, rng):
    n, m, nd = module.N_COORDINATES, module.N_CONSTRAINTS, module.N_STATES
    q = module.Q0 + 0.01 * rng.standard_normal(n)
    qd = 0.1 * rng.standard_normal(n)
    qdd = rng.standard_normal(n)
    lam = rng.standard_normal(m)
    p = module.P_DEFAULT.copy()
    if p.size < module.N_PARAMETERS + nd:
        p = np.concatenate([p, module.X0])
    return n, m, nd, q, qd, qdd, lam, p


def _dense_matrix(module, t, q, qd, qdd, lam, p, alpha, bh2, gh, gx, active, start=False):
    """[[M̂, Φ_qᵀ, −Q_X gx], [w Φ_q, diag(1 − w), 0], [−(f_q bh2 + f_q̇ gh), 0, I − f_X gx]]
    (the start-up: [[M, Φ_qᵀ, 0], [w Φ_q, diag(1 − w), 0], [0, 0, I]])."""
    n, m, nd = module.N_COORDINATES, module.N_CONSTRAINTS, module.N_STATES
    ws = hht.workspace(n, m, nd=nd)
    module.dynamics(t, q, qd, p, *ws[:6])
    mass, phi_q = ws.mass, ws.phi_q
    K = np.zeros((n + m + nd, n + m + nd))
    if start:
        K[:n, :n] = mass
        K[n + m :, n + m :] = np.eye(nd)
    else:
        module.mass_a_q(t, q, qdd, p, ws.maq)
        module.phi_q_lam_q(t, q, lam, p, ws.plq)
        module.force_q(t, q, qd, p, ws.fq)
        module.force_qd(t, q, qd, p, ws.fqd)
        c = 1.0 / (1.0 + alpha)
        K[:n, :n] = c * mass + (c * ws.maq + ws.plq - ws.fq) * bh2 - ws.fqd * gh
        if nd:
            module.force_x(t, q, qd, p, ws.qx)
            module.state_rate_q(t, q, qd, p, ws.fxq)
            module.state_rate_qd(t, q, qd, p, ws.fxqd)
            module.state_rate_x(t, q, qd, p, ws.fxx)
            K[:n, n + m :] = -gx * ws.qx
            K[n + m :, :n] = -(bh2 * ws.fxq + gh * ws.fxqd)
            K[n + m :, n + m :] = np.eye(nd) - gx * ws.fxx
    K[n : n + m, :n] = active[:, None] * phi_q
    K[:n, n : n + m] = phi_q.T
    K[n + np.arange(m), n + np.arange(m)] = 1.0 - active
    return K, ws


def _sparse(module, t, q, qd, qdd, lam, p, alpha, bh2, gh, gx, active, start=False):
    """The sparse path: the ``*_values`` kernels into a sparse workspace, the matrix
    assembled and factored (returns the status and the workspace)."""
    n, m, nd = module.N_COORDINATES, module.N_CONSTRAINTS, module.N_STATES
    ws = sparse_newton.module_workspace(module, n_params=p.size - nd, active=active)
    module.dynamics_values(t, q, qd, p, ws.mass, ws.force, ws.phi, ws.phi_q, ws.phi_t, ws.gam)
    if start:
        sparse_newton.sparse_start(n, m, nd, ws)
    else:
        module.mass_a_q_values(t, q, qdd, p, ws.maq)
        module.phi_q_lam_q_values(t, q, lam, p, ws.plq)
        module.force_q_values(t, q, qd, p, ws.fq)
        module.force_qd_values(t, q, qd, p, ws.fqd)
        if nd:
            module.force_x_values(t, q, qd, p, ws.qx)
            module.state_rate_q_values(t, q, qd, p, ws.fxq)
            module.state_rate_qd_values(t, q, qd, p, ws.fxqd)
            module.state_rate_x_values(t, q, qd, p, ws.fxx)
        sparse_newton.sparse_newton(n, m, nd, False, alpha, bh2, gh, gx, ws)
    return sparse_newton.sparse_factor(ws, 0), ws


def _active(module):
    """Bricard's redundant row J6[4] left out (weight 0), as its assembly does."""
    return np.array([0.0 if c == "J6[4]" else 1.0 for c in module.CONSTRAINT_NAMES])


#: Sparse example models (n + m ≥ SPARSE_LIMIT: the sparse path is theirs), and the PI
#: pendulum (user states; small, so its entry point is dense: the sparse path forced
#: on its patterns here).
MODELS = ("andrews", "spatial_slider_crank", "iftomm_a04_bricard", "planar_chain", "pi_pendulum")


@pytest.mark.parametrize("name", MODELS)
def test_newton_matrix_solve_equals_dense(name):
    """A solve with the Newton matrix (α = −0.2, h = 1e-3, at a random iterate) and
    with the start-up matrix equals the dense solve to 1e-12 relative; the residual
    (Eq. 13) and (Φ_qᵀλ − Q) agree to 1e-13 relative (summation order only)."""
    module = import_generated(GENERATED / f"{name}.py")
    if name != "pi_pendulum":
        assert module.LINEAR_ALGEBRA == "sparse"
    rng = np.random.default_rng(3)
    n, m, nd, q, qd, qdd, lam, p = _state(module, rng)
    active = _active(module)
    alpha, h = -0.2, 1e-3
    beta, gamma_nm = hht.coefficients(alpha)
    bh2, gh, gx = beta * h * h, gamma_nm * h, gamma_nm * h
    for start in (False, True):
        K, wsd = _dense_matrix(module, 0.1, q, qd, qdd, lam, p, alpha, bh2, gh, gx, active, start)
        status, ws = _sparse(module, 0.1, q, qd, qdd, lam, p, alpha, bh2, gh, gx, active, start)
        assert status == OK
        rhs = rng.standard_normal(n + m + nd)
        # a removed row's λ_i is 0 from the start and its e2_i = λ_i stays 0, so its
        # Δλ_i is 0: the sparse K leaves out the column Φ_q,iᵀ it multiplies
        rhs[n : n + m] *= active
        ws.b[:] = rhs
        sparse_newton.sparse_solve(ws, 0)
        expected = np.linalg.solve(K, rhs)
        assert np.abs(ws.b - expected).max() <= RTOL * np.abs(expected).max()
    # the start-up's right side [Q; w γ] and the residual, r_prev against the dense ones
    sparse_newton.sparse_start(n, m, nd, ws)
    assert np.array_equal(ws.b[:n], wsd.force)
    assert np.array_equal(ws.b[n : n + m], active * wsd.gam)
    wsd.r_prev[:] = rng.standard_normal(n)
    ws.r_prev[:] = wsd.r_prev
    e_dense, e_sparse = np.zeros(n + m), np.zeros(n + m)
    hht.residual(n, m, alpha, bh2, wsd.mass, wsd.force, wsd.phi, wsd.phi_q, qdd, lam,
                 wsd.r_prev, active, e_dense)  # fmt: skip
    sparse_newton.sparse_residual(n, m, alpha, bh2, ws, qdd, lam, e_sparse)
    assert np.abs(e_sparse - e_dense).max() <= 1e-13 * np.abs(e_dense).max()
    sparse_newton.sparse_r_prev(n, m, ws, lam)
    expected = wsd.phi_q.T @ lam - wsd.force
    assert np.abs(ws.r_prev - expected).max() <= 1e-13 * np.abs(expected).max()
    assert sparse_newton.sparse_mass_scale(n, ws) == np.abs(np.diag(wsd.mass)).max()


def test_redundant_rows_make_the_newton_matrix_singular():
    """Bricard with every row enforced (J6[4] redundant): the sparse factorization
    names the matrix SINGULAR, as the dense LU does (the loop returns that status)."""
    module = import_generated(GENERATED / "iftomm_a04_bricard.py")
    n, m, nd, q, qd, qdd, lam, p = _state(module, np.random.default_rng(4))
    q = module.Q0  # on the constraint manifold, where the row is exactly redundant
    status, _ = _sparse(module, 0.0, q, qd, qdd, lam, p, -0.1, 1e-7, 1e-3, 1e-3, np.ones(m))
    assert status == SINGULAR
    status, _ = _sparse(module, 0.0, q, qd, qdd, lam, p, -0.1, 1e-7, 1e-3, 1e-3, _active(module))
    assert status == OK


def test_sparse_workspace_has_no_square_array():
    """No array of the sparse workspace has (n + m)² entries or more: on the planar
    chain the largest is the predictor's history, 4 (n + m + nd)."""
    module = import_generated(GENERATED / "planar_chain.py")
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    ws = sparse_newton.module_workspace(module)
    sizes = [a.size for a in ws if isinstance(a, np.ndarray)]
    sizes += [a.size for a in ws.plan if isinstance(a, np.ndarray)]
    sizes += [a.size for a in ws.plan.kkt if isinstance(a, np.ndarray)]
    assert max(sizes) < (n + m) ** 2 / 4, (max(sizes), n + m)


def test_plan_is_cached_and_deterministic():
    module = import_generated(GENERATED / "andrews.py")
    plan = sparse_newton.plan_for(module)
    assert sparse_newton.plan_for(module) is plan
    patterns = {
        b: (getattr(module, f"{b}_ROWS"), getattr(module, f"{b}_COLS"))
        for b in sparse_newton.BLOCKS
    }
    again = sparse_newton.newton_plan(module.N_COORDINATES, module.N_CONSTRAINTS, 0, patterns)
    assert np.array_equal(again.kkt.perm, plan.kkt.perm)
    assert np.array_equal(again.h_rows, plan.h_rows)


def test_sparse_index3_loop_allocates_nothing_per_step():
    """DESIGN rule 1 on the sparse Newton path: Andrews' mechanism (sparse entry point)
    with HHT at a fixed step, 10 and 400 steps, and hht_adaptive at two tolerances:
    Numba's allocation counter does not grow with the number of steps.  And rule 7:
    a second process loads the entry point (the shared index-3 routine) from Numba's
    cache (the linear algebra is resolved by the workspace's type when it is compiled,
    not at run time)."""
    code = """
import json, mbdgen
from numba.core.runtime import _nrt_python, rtsys
_nrt_python.memsys_enable_stats()
from mbdgen.compiler import import_generated
m = import_generated("generated/andrews.py")
assert m.LINEAR_ALGEBRA == "sparse"
counts = []
for method, keywords in (
    ("hht", dict(h=1e-4, t_end=1e-3)),
    ("hht", dict(h=1e-4, t_end=1e-3)),
    ("hht", dict(h=1e-4, t_end=4e-2)),
    ("hht_adaptive", dict(h=5e-3, t_end=0.01, rtol=1e-4, atol=1e-4)),
    ("hht_adaptive", dict(h=5e-3, t_end=0.01, rtol=1e-4, atol=1e-4)),
    ("hht_adaptive", dict(h=5e-3, t_end=0.01, rtol=1e-6, atol=1e-6)),  # 1221 steps
):
    before = rtsys.get_allocation_stats().alloc
    r = mbdgen.simulate(m, method=method, **keywords)
    counts.append([rtsys.get_allocation_stats().alloc - before, r.counters["steps"]])
from mbdgen.runtime import shared
stats = shared.index3_chunk.stats  # the entry point of every sparse model without states
print(json.dumps([counts, sum(stats.cache_hits.values()), sum(stats.cache_misses.values())]))
"""
    run_python(code, env={"NUMBA_NRT_STATS": "1"})  # fills the cache if it is cold
    counts, hits, misses = json.loads(
        run_python(code, env={"NUMBA_NRT_STATS": "1"}).splitlines()[-1]
    )
    assert (hits, misses) == (1, 0)
    assert counts[2][0] == counts[1][0] and counts[5][0] == counts[4][0], counts
    assert counts[2][1] > 10 * counts[1][1] and counts[5][1] > 3 * counts[4][1], counts


def test_a_singular_sparse_newton_matrix_is_named():
    """The failure message of a SINGULAR status from the sparse workspace (M and Φ_q
    as values) names the redundant rows, as it does from the dense one."""
    from mbdgen.diagnose import explain_failure

    module = import_generated(GENERATED / "iftomm_a04_bricard.py")
    n, m, nd, q, qd, qdd, lam, p = _state(module, np.random.default_rng(4))
    status, ws = _sparse(module, 0.0, module.Q0, qd, qdd, lam, p, -0.1, 1e-7, 1e-3, 1e-3,
                         np.ones(m))  # fmt: skip
    assert status == SINGULAR
    result = type("Partial", (), {"t": np.zeros(1), "q": module.Q0[None], "qd": qd[None]})()
    message = explain_failure(module, status, ws, result, family="hht")
    assert "redundant at t0" in message and "J6" in message, message
