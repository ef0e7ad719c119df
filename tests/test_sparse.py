"""The sparse KKT factorization (mbdgen.runtime.sparse) against dense solves.

Every solve is compared with a dense one to 1e-12 relative (max-norm of the solution):
the factorization is exact up to rounding, and these systems are well conditioned
(condition numbers below 1e4 here), so 1e-12 leaves three digits for rounding growth.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_python

from mbdgen.compiler import import_generated
from mbdgen.runtime import index1, sparse
from mbdgen.runtime.status import OK, SINGULAR

RTOL = 1e-12
GENERATED = Path(__file__).resolve().parent.parent / "generated"


def _dense_k(n, m, h_rows, h_cols, h_val, a_rows, a_cols, a_val, b_val, active):
    K = np.zeros((n + m, n + m))
    np.add.at(K, (h_rows, h_cols), h_val)
    w = active[a_rows]
    np.add.at(K, (n + a_rows, a_cols), w * a_val)
    np.add.at(K, (a_cols, n + a_rows), w * b_val)
    K[n + np.arange(m), n + np.arange(m)] += 1.0 - active
    return K


def _sparse_solve(plan, h_val, a_val, b_val, active, rhs):
    val = np.zeros(plan.values_size)
    wrow = np.zeros(max(plan.aug_rows.size, 1))
    sparse.kkt_assemble(plan, h_val, a_val, b_val, active, val, wrow)
    status = sparse.kkt_factor(plan, val)
    x = rhs.copy()
    if status == OK:
        sparse.kkt_rhs(plan, b_val, active, wrow, x)
        sparse.kkt_solve(plan, val, x, np.zeros(plan.size))
    return status, x


def _schur_solve(plan, h_val, a_val, active, rhs, refine=False):
    """The Schur-complement solve of K x = rhs (B = Aᵀ), with one refinement step."""
    n, m = plan.n, plan.m
    bval, wval = np.zeros(plan.bval_size), np.zeros(plan.wval_size)
    sval, sdiag = np.zeros(plan.sval_size), np.zeros(m)
    wrow = np.zeros(max(plan.aug_rows.size, 1))
    status, growth = sparse.schur_factor(plan, h_val, a_val, active, bval, wval, sval, wrow, sdiag)
    x = rhs.copy()
    if status == OK:
        work = np.zeros(n + m)
        sparse.schur_solve(plan, a_val, active, bval, wval, sval, wrow, x, work)
        if refine:
            res = np.zeros(n + m)
            sparse.schur_refine(
                plan, h_val, a_val, active, bval, wval, sval, wrow, rhs, x, res, work
            )
    return status, growth, x


def _random_mechanism(rng, n_bodies: int, spatial: bool, loops: int):
    """Patterns and values of a random tree of bodies (each joined to a random earlier
    body or the ground) plus ``loops`` extra joints closing loops.

    Planar bodies: M = diag(m, m, J), a revolute joint is 2 rows on both bodies' 3
    coordinates (Haug 1989, Eq. 3.3.10: ±I on the positions, random moment arms on θ).
    Spatial bodies in Euler parameters: M = diag(mI, 4GᵀJ'G) (singular on p), one
    normalization row 2pᵀ per body, a spherical joint is 3 rows on both bodies' 7
    (±I on r, random arms on p).  Values at a random state, not a consistent one:
    the linear algebra does not care.
    """
    size = 7 if spatial else 3
    n = size * n_bodies
    h_r, h_c, h_v = [], [], []
    a_r, a_c, a_v = [], [], []
    m = 0

    def add_block(rows, cols, vals):
        for i, r in enumerate(rows):
            for j, c in enumerate(cols):
                h_r.append(r)
                h_c.append(c)
                h_v.append(vals[i, j])

    for k in range(n_bodies):
        o = size * k
        mass = rng.uniform(0.5, 2.0)
        if spatial:
            add_block(range(o, o + 3), range(o, o + 3), mass * np.eye(3))
            p = rng.standard_normal(4)
            p /= np.linalg.norm(p)
            e0, e = p[0], p[1:]
            ex = np.array([[0, -e[2], e[1]], [e[2], 0, -e[0]], [-e[1], e[0], 0]])
            G = np.hstack([-e[:, None], -ex + e0 * np.eye(3)])
            Jp = np.diag(rng.uniform(0.1, 1.0, 3))
            add_block(range(o + 3, o + 7), range(o + 3, o + 7), 4 * G.T @ Jp @ G)
            for j in range(4):
                a_r.append(m)
                a_c.append(o + 3 + j)
                a_v.append(2 * p[j])
            m += 1
        else:
            add_block(range(o, o + 3), range(o, o + 3), np.diag([mass, mass, mass / 12]))
    pairs = [(k, int(rng.integers(-1, k))) for k in range(n_bodies)]
    free = n_bodies * (n_bodies - 1) // 2 - sum(j >= 0 for _, j in pairs)
    if loops > free:  # else the loop below could never end
        raise ValueError(f"{n_bodies} bodies leave {free} new pairs for {loops} loops")
    while len(pairs) < n_bodies + loops:  # loop-closing joints between new pairs
        k, j = (int(x) for x in rng.choice(n_bodies, 2, replace=False))
        if (k, j) not in pairs and (j, k) not in pairs:
            pairs.append((k, j))
    rows_per = 3 if spatial else 2
    for k, j in pairs:
        for r in range(rows_per):
            for body, sign in ((k, 1.0), (j, -1.0)):
                if body < 0:
                    continue
                for c in range(size):
                    a_r.append(m)
                    a_c.append(size * body + c)
                    # the joint point's position r_i + A_i s'_i: ±1 on the translation
                    # coordinate r, moment arms on the rotation coordinates
                    a_v.append(sign * (c == r) if c < rows_per else rng.uniform(-0.5, 0.5))
            m += 1
    arr = np.asarray
    return (n, m, arr(h_r), arr(h_c), arr(h_v), arr(a_r), arr(a_c), arr(a_v))


@pytest.mark.parametrize("spatial", [False, True], ids=["planar", "spatial"])
@pytest.mark.parametrize("loops", [0, 2], ids=["tree", "loops"])
@pytest.mark.parametrize("seed", range(4))
def test_random_trees_and_loops_match_dense(spatial, loops, seed):
    rng = np.random.default_rng(seed)
    n, m, hr, hc, hv, ar, ac, av = _random_mechanism(rng, 12, spatial, loops)
    plan = sparse.kkt_plan(n, m, hr, hc, ar, ac)
    active = np.ones(m)
    rhs = rng.standard_normal(n + m)
    # symmetric (index-1, B = Aᵀ) and non-symmetric (B ≠ Aᵀ on the same pattern) cases
    for bv in (av, av * rng.uniform(0.5, 2.0, av.size)):
        K = _dense_k(n, m, hr, hc, hv, ar, ac, av, bv, active)
        status, x = _sparse_solve(plan, hv, av, bv, active, rhs)
        assert status == OK
        ref = np.linalg.solve(K, rhs)
        cond = np.linalg.cond(K)
        assert cond < 1e4
        assert np.max(np.abs(x - ref)) <= RTOL * np.max(np.abs(ref)), cond
    # the Schur complement over the block-diagonal H (symmetric case), with and
    # without a refinement step
    splan = sparse.schur_plan(n, m, hr, hc, ar, ac)
    assert splan.ok and splan.max_block == (4 if spatial else 3)  # mI, 4GᵀJ′G; diag(m, m, J)
    ref = np.linalg.solve(_dense_k(n, m, hr, hc, hv, ar, ac, av, av, active), rhs)
    for refine in (False, True):
        status, _, x = _schur_solve(splan, hv, av, active, rhs, refine)
        assert status == OK
        assert np.max(np.abs(x - ref)) <= RTOL * np.max(np.abs(ref))


def test_removed_rows_and_a_redundant_row():
    """A duplicated joint row makes K singular (named SINGULAR, as the dense LU does);
    with the duplicate's weight 0 (λ_i = 0) the solve agrees with the dense one."""
    rng = np.random.default_rng(5)
    n, m, hr, hc, hv, ar, ac, av = _random_mechanism(rng, 6, False, 1)
    last = ar == m - 1
    ar2 = np.concatenate([ar, np.full(last.sum(), m)])
    ac2 = np.concatenate([ac, ac[last]])
    av2 = np.concatenate([av, av[last]])
    plan = sparse.kkt_plan(n, m + 1, hr, hc, ar2, ac2)
    rhs = rng.standard_normal(n + m + 1)
    status, _ = _sparse_solve(plan, hv, av2, av2, np.ones(m + 1), rhs)
    assert status == SINGULAR
    active = np.ones(m + 1)
    active[m] = 0.0
    rhs[n + m] = 0.0
    status, x = _sparse_solve(plan, hv, av2, av2, active, rhs)
    assert status == OK
    K = _dense_k(n, m + 1, hr, hc, hv, ar2, ac2, av2, av2, active)
    ref = np.linalg.solve(K, rhs)
    assert np.max(np.abs(x - ref)) <= RTOL * np.max(np.abs(ref))
    assert x[n + m] == 0.0
    # the Schur path: the duplicate row is a vanishing pivot of S (the index-1 solve
    # then falls back to the LU above, which names it); removed, the same solution
    splan = sparse.schur_plan(n, m + 1, hr, hc, ar2, ac2)
    status, _, _ = _schur_solve(splan, hv, av2, np.ones(m + 1), rhs)
    assert status == SINGULAR
    status, _, xs = _schur_solve(splan, hv, av2, active, rhs, refine=True)
    assert status == OK
    assert np.max(np.abs(xs - ref)) <= RTOL * np.max(np.abs(ref))
    assert xs[n + m] == 0.0


def _pair_solve(plan, h_val, a_val, a_rows, a_cols, active, rhs, refine=False):
    """The 2 × 2 block Schur solve of K x = rhs (H diagonal), with one refinement step."""
    n, m = plan.n, plan.m
    ws = index1.pair_arrays(plan)
    hinv, hclu, seg, sblk, lsave, sdiag, y, acc = ws
    status, growth = sparse.pair_factor(
        plan, h_val, a_val, active, hinv, hclu, seg, sblk, lsave, sdiag
    )
    x = rhs.copy()
    if status == OK:
        sparse.pair_solve(plan, active, hinv, hclu, seg, sblk, x, y, acc)
        if refine:
            sparse.pair_refine(
                plan, h_val, a_val, active, a_rows, a_cols, hinv, hclu, seg, sblk, rhs, x,
                np.zeros(n + m), y, acc,
            )  # fmt: skip
    return status, growth, x


@pytest.mark.parametrize("loops", [0, 2], ids=["tree", "loops"])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("drop", [0, 1], ids=["even-m", "odd-m"])
def test_pair_schur_over_a_diagonal_mass_matches_dense(loops, seed, drop):
    """The 2 × 2 block Schur solve (``sparse.pair_plan``): planar random trees and
    loops with M = diag(m, m, J) on a diagonal pattern, m even and odd (the last row
    dropped: a padding row), with and without a refinement step, agree with the dense
    solve to 1e-12 (relative); a spatial pattern (4 × 4 blocks) gets no plan."""
    rng = np.random.default_rng(seed)
    n, m, hr, hc, hv, ar, ac, av = _random_mechanism(rng, 12, False, loops)
    on = hr == hc
    hr, hc, hv = hr[on], hc[on], hv[on]
    if drop:
        keep = ar < m - 1
        ar, ac, av, m = ar[keep], ac[keep], av[keep], m - 1
    plan = sparse.pair_plan(n, m, hr, hc, ar, ac)
    assert plan.ok and plan.groups == (m + 1) // 2
    assert all(
        np.array_equal(a, b)
        for a, b in zip(plan[4:], sparse.pair_plan(n, m, hr, hc, ar, ac)[4:], strict=True)
    )
    active = np.ones(m)
    rhs = rng.standard_normal(n + m)
    ref = np.linalg.solve(_dense_k(n, m, hr, hc, hv, ar, ac, av, av, active), rhs)
    for refine in (False, True):
        status, growth, x = _pair_solve(plan, hv, av, ar, ac, active, rhs, refine)
        assert status == OK and growth >= 1.0
        assert np.max(np.abs(x - ref)) <= RTOL * np.max(np.abs(ref))
    n3, m3, hr3, hc3, _, ar3, ac3, _ = _random_mechanism(rng, 4, True, 0)
    assert not sparse.pair_plan(n3, m3, hr3, hc3, ar3, ac3).ok


def test_pair_schur_removed_and_redundant_rows():
    """A duplicated joint row is a vanishing pivot of the block Schur factor (SINGULAR:
    the index-1 solve falls back to the LU, which names it); with the duplicate's
    weight 0 the solve agrees with the dense one and reads λ = 0 there."""
    rng = np.random.default_rng(5)
    n, m, hr, hc, hv, ar, ac, av = _random_mechanism(rng, 6, False, 1)
    on = hr == hc
    hr, hc, hv = hr[on], hc[on], hv[on]
    last = ar == m - 1
    ar2 = np.concatenate([ar, np.full(last.sum(), m)])
    ac2 = np.concatenate([ac, ac[last]])
    av2 = np.concatenate([av, av[last]])
    plan = sparse.pair_plan(n, m + 1, hr, hc, ar2, ac2)
    rhs = rng.standard_normal(n + m + 1)
    status, _, _ = _pair_solve(plan, hv, av2, ar2, ac2, np.ones(m + 1), rhs)
    assert status == SINGULAR
    active = np.ones(m + 1)
    active[m] = 0.0
    rhs[n + m] = 0.0
    status, _, x = _pair_solve(plan, hv, av2, ar2, ac2, active, rhs, refine=True)
    assert status == OK
    ref = np.linalg.solve(_dense_k(n, m + 1, hr, hc, hv, ar2, ac2, av2, av2, active), rhs)
    assert np.max(np.abs(x - ref)) <= RTOL * np.max(np.abs(ref))
    assert x[n + m] == 0.0


def test_plan_is_deterministic_and_linear_in_a_chain():
    """Same patterns, same plan (array for array); on a planar chain the factor's
    non-zeros and the update count grow linearly with the number of links."""

    def pattern(nb):
        n, m = 3 * nb, 2 * nb
        hr = hc = np.arange(n)
        ar, ac = [], []
        for k in range(nb):
            for r in range(2):
                for body in (k - 1, k):
                    if body >= 0:
                        ar += [2 * k + r] * 3
                        ac += [3 * body, 3 * body + 1, 3 * body + 2]
        return n, m, hr, hc, np.asarray(ar), np.asarray(ac)

    a = sparse.kkt_plan(*pattern(40))
    b = sparse.kkt_plan(*pattern(40))
    for name, x, y in zip(a._fields, a, b, strict=True):
        assert np.array_equal(np.asarray(x), np.asarray(y)), name
    small, large = sparse.kkt_plan(*pattern(100)), sparse.kkt_plan(*pattern(400))
    assert large.nnz <= 4.1 * small.nnz
    assert large.upd.size <= 4.1 * small.upd.size
    a = sparse.schur_plan(*pattern(40))
    b = sparse.schur_plan(*pattern(40))
    for name, x, y in zip(a._fields, a, b, strict=True):
        assert np.array_equal(np.asarray(x), np.asarray(y)), name
    small, large = sparse.schur_plan(*pattern(100)), sparse.schur_plan(*pattern(400))
    assert small.ok and small.max_block == 1  # M = diag(m, m, J): 1 × 1 blocks
    for key in ("nbr", "upd", "tri_pos", "seg_e"):
        assert getattr(large, key).size <= 4.1 * getattr(small, key).size, key


EXAMPLES = sorted(p.stem for p in GENERATED.glob("*.py"))


def _index1_both(module, rng, active, schur=True):
    """Dense and sparse index-1 solutions at a random state near q0 (``schur``: the
    Schur-complement path where it applies, else the KKT LU)."""
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    q = module.Q0 + 0.01 * rng.standard_normal(n)
    qd = 0.1 * rng.standard_normal(n)
    p = module.P_DEFAULT.copy()
    if p.size < module.N_PARAMETERS + module.N_STATES:
        p = np.concatenate([p, module.X0])
    mass, force, phi, phi_q, phi_t, gamma, A, b, act = index1.workspace(n, m, active)
    module.dynamics(0.3, q, qd, p, mass, force, phi, phi_q, phi_t, gamma)
    dense = index1.solve_index1(
        n, m, qd, 1.0, 4.0, mass, force, phi, phi_q, phi_t, gamma, act, A, b
    )
    ws = index1.sparse_workspace(
        n, m, module.MASS_ROWS, module.MASS_COLS, module.PHI_Q_ROWS, module.PHI_Q_COLS, active,
        schur=schur,
    )  # fmt: skip
    assert ws.schur.ok == schur  # every example's M is block diagonal with small blocks
    module.dynamics_values(0.3, q, qd, p, ws.mass, ws.force, ws.phi, ws.phi_q, ws.phi_t, ws.gamma)
    return dense, b, index1.solve_index1_sparse(n, m, qd, 1.0, 4.0, ws), ws.b


@pytest.mark.parametrize("schur", [True, False], ids=["schur", "kkt_lu"])
@pytest.mark.parametrize("name", EXAMPLES + ["element_zoo"])
def test_models_index1_sparse_equals_dense(name, schur, request):
    """The sparse index-1 solve (dynamics_values + Schur complement or KKT LU) equals
    the dense LU of Haug 1989 Eq. 7.2.1 with γ̂ of Eq. 7.3.8 at random states near q0,
    for every example model (whichever solver its entry points use) and the element
    zoo.  Rows the model's own assembly removes as redundant (Bricard's J6[4]) get
    weight 0 on all paths: with them the dense LU itself is at the mercy of rounding.

    A05's slender rods make the pivots grow (the KKT LU's static pivots and the Schur
    factorization alike: growth ~1e5, the others below 200); without a refinement step
    the solutions differ by up to 4e-12 relative, with one step of iterative refinement
    (Li & Demmel 1998) by ~3e-16.  The Schur path refines when its growth exceeds
    REFINE_GROWTH, the KKT LU (the default) when a coordinate's pivot fell below its
    diagonal entry by more than REFINE_PIVOT_GROWTH: on A05 only (310-333; the other
    examples at most 17.5), so every other model's solve is bit for bit as before."""
    if name == "element_zoo":
        module = request.getfixturevalue("element_zoo")
    else:
        module = import_generated(GENERATED / f"{name}.py")
    m = module.N_CONSTRAINTS
    active = np.array([0.0 if c == "J6[4]" else 1.0 for c in module.CONSTRAINT_NAMES])
    assert m == active.size
    rng = np.random.default_rng(1)
    for _ in range(2):
        (st, pn, pdn), b, (st2, pn2, pdn2), b2 = _index1_both(module, rng, active)
        assert st == st2 == OK
        assert (pn2, pdn2) == pytest.approx((pn, pdn), rel=1e-14)
        assert np.max(np.abs(b2 - b)) <= RTOL * np.max(np.abs(b))
    if not schur:  # when the LU refines: A05 only
        ws = index1.sparse_workspace(
            module.N_COORDINATES, m, module.MASS_ROWS, module.MASS_COLS, module.PHI_Q_ROWS,
            module.PHI_Q_COLS, active,
        )  # fmt: skip
        x = module.Q0 + 0.01 * rng.standard_normal(module.N_COORDINATES)
        p = np.concatenate([module.P_DEFAULT, module.X0])[: module.N_PARAMETERS + module.N_STATES]
        module.dynamics_values(
            0.3, x, 0 * x, p, ws.mass, ws.force, ws.phi, ws.phi_q, ws.phi_t, ws.gamma
        )
        sparse.kkt_assemble(ws.plan, ws.mass, ws.phi_q, ws.phi_q, ws.active, ws.val, ws.wrow)
        diag0 = ws.val[: ws.plan.size].copy()
        assert sparse.kkt_factor(ws.plan, ws.val) == OK
        growth = sparse.kkt_pivot_growth(ws.plan, diag0, ws.val)
        refines = growth > sparse.REFINE_PIVOT_GROWTH
        assert refines == (name == "iftomm_a05_flyball_governor"), growth


def test_sparse_time_loop_allocates_nothing_per_step():
    """DESIGN rule 1 on the sparse path: the planar chain's entry points use the sparse
    index-1 right side, and Numba's allocation counter does not grow with the number
    of steps: fixed-step ABM over 10 and 2000 steps (one chunk), variable-step ABM
    with the same 6 outputs at two tolerances (29 and ~270 steps; orders up to 5,
    since up to 12 the tight tolerance takes only 128 steps against 28, too few for
    the test's 5×); DOP853 at 1e-8 and 1e-13 (15 and 52 steps: its step count grows as
    tol^(−1/8); both in four chunks, since each chunk's call allocates its argument
    wrappers).  The allocations there are come from wrapping the arguments once per
    call."""
    code = """
import json, mbdgen
from numba.core.runtime import _nrt_python, rtsys
_nrt_python.memsys_enable_stats()
from mbdgen.compiler import import_generated
m = import_generated("generated/planar_chain.py")
assert m.LINEAR_ALGEBRA == "sparse"
counts = []
for method, keywords in (
    ("abm", dict(h=1e-3, t_end=0.01)),
    ("abm", dict(h=1e-3, t_end=0.01)),
    ("abm", dict(h=1e-3, t_end=2.0)),
    ("vabm", dict(h=0.1, t_end=0.5, rtol=1e-4, atol=1e-4, order=5)),
    ("vabm", dict(h=0.1, t_end=0.5, rtol=1e-4, atol=1e-4, order=5)),
    ("vabm", dict(h=0.1, t_end=0.5, rtol=1e-10, atol=1e-10, order=5)),
    ("dop853", dict(h=0.1, t_end=0.5, rtol=1e-8, atol=1e-8)),
    ("dop853", dict(h=0.1, t_end=0.5, rtol=1e-8, atol=1e-8)),
    ("dop853", dict(h=0.1, t_end=0.5, rtol=1e-13, atol=1e-13)),
):
    before = rtsys.get_allocation_stats().alloc
    r = mbdgen.simulate(m, method=method, **keywords)
    counts.append([rtsys.get_allocation_stats().alloc - before, r.counters["steps"]])
print(json.dumps(counts))
"""
    counts = json.loads(run_python(code, env={"NUMBA_NRT_STATS": "1"}).splitlines()[-1])
    assert counts[2][0] == counts[1][0] and counts[5][0] == counts[4][0], counts
    assert counts[2][1] > 100 * counts[1][1] and counts[5][1] > 5 * counts[4][1], counts
    assert counts[8][0] == counts[7][0] and counts[8][1] > 3 * counts[7][1], counts
