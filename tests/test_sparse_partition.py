"""Sparse GCP and the sparse redundancy check at t0 (issue 11, item 1).

GCP on a sparse module (:func:`mbdgen.runtime.partition.gcp_rhs_sparse`) factors Φ_u
on its static pattern in the order full pivoting chose at the last partition, and
solves Eq. 7.2.1 on the sparse KKT plan; the dense reference is the same run with
:func:`mbdgen.runtime.shared.sparse_gcp` switched off (dense Φ_u LU with row pivoting,
dense augmented LU).

The redundancy check: the sparse LU of [[I, Φ_qᵀ], [Φ_q, 0]] on the module's index-1
plan proves the rows of Φ_q independent in O(n + m); whenever it cannot (a redundant
row, a pivot near the threshold) the dense QR of
:func:`mbdgen.analysis.assembly.redundant_rows` decides and names the rows as before.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import TEST_GENERATED, TEST_MODELS, run_python

import mbdgen
from mbdgen.analysis.assembly import (
    _kernel,
    assemble,
    redundant_rows,
    removable_rows,
    sparse_rows_independent,
)
from mbdgen.compiler import import_generated
from mbdgen.runtime import partition, shared, sparse
from mbdgen.simulation import parameter_vector

GENERATED = Path(__file__).resolve().parent.parent / "generated"
SPARSE_EXAMPLES = [
    "andrews",
    "iftomm_a05_flyball_governor",
    "planar_chain",
    "spatial_slider_crank",
]


@pytest.mark.parametrize("name", SPARSE_EXAMPLES)
def test_sparse_independence_proof_agrees_with_the_dense_qr(name):
    """Every sparse example model's rows are independent at q0 and at a random
    perturbation of it (Φ_q's rank does not need a consistent q): the sparse proof
    says so, and so does the dense QR it replaces."""
    module = import_generated(GENERATED / f"{name}.py")
    assert module.LINEAR_ALGEBRA == "sparse"
    p = parameter_vector(module, None)
    rng = np.random.default_rng(3)
    q0 = np.asarray(module.Q0, dtype=float)
    for q in (q0, q0 + 0.05 * rng.standard_normal(q0.size)):
        assert sparse_rows_independent(module, 0.0, q, p)
        rank, redundant = redundant_rows(_kernel(module, "phi_q", 0.0, q, p))
        assert (rank, redundant) == (module.N_CONSTRAINTS, [])


@pytest.mark.parametrize("name", SPARSE_EXAMPLES)
def test_multiplier_pivot_in_one_call_equals_the_steps_it_replaced(name):
    """:func:`mbdgen.runtime.sparse.kkt_multiplier_pivot` (the proof's one jitted call)
    returns the smallest |pivot| of a multiplier that assembling, factoring and
    scanning K = [[I, Φ_qᵀ], [Φ_q, 0]] one by one give, to the bit; −1 on a failed
    factorization (K with Φ_q = 0 is singular)."""
    from mbdgen.runtime.status import OK

    module = import_generated(GENERATED / f"{name}.py")
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    plan = sparse.module_plan(module)
    p = parameter_vector(module, None)
    q = np.asarray(module.Q0, dtype=float)
    a_val = np.zeros(len(module.PHI_Q_ROWS))
    module.dynamics_values(
        0.0, q, np.zeros(n), p, np.zeros(len(module.MASS_ROWS)), np.zeros(n), np.zeros(m),
        a_val, np.zeros(m), np.zeros(m),
    )  # fmt: skip
    h_val = (np.asarray(module.MASS_ROWS) == np.asarray(module.MASS_COLS)).astype(float)
    val = np.zeros(plan.values_size)
    wrow = np.zeros(max(plan.aug_rows.shape[0], 1))
    sparse.kkt_assemble(plan, h_val, a_val, a_val, np.ones(m), val, wrow)
    assert sparse.kkt_factor(plan, val) == OK
    steps = np.abs(val[: n + m][plan.perm[: n + m] >= n]).min()
    assert sparse.kkt_multiplier_pivot(plan, h_val, a_val) == steps > 0.0
    assert sparse.kkt_multiplier_pivot(plan, h_val, np.zeros_like(a_val)) == -1.0


def test_redundant_rows_fall_back_to_the_dense_test():
    """Bricard's mechanism (sparse, one redundant row J6[4]): the sparse proof fails,
    on a multiplier pivot at rounding level, and the dense QR names the row."""
    bricard = mbdgen.compile(TEST_MODELS / "bricard.py", TEST_GENERATED)
    assert bricard.LINEAR_ALGEBRA == "sparse"
    a = assemble(bricard)
    p = parameter_vector(bricard, None)
    assert not sparse_rows_independent(bricard, 0.0, a.q, p)
    removed = removable_rows(bricard, 0.0, a.q, p)
    assert removed.names == ("J6[4]",) and removed.rank == 34


def _gcp_both(monkeypatch, name, h, t_end):
    module = import_generated(GENERATED / f"{name}.py")
    runs = []
    for use_sparse in (True, False):
        monkeypatch.setattr(shared, "sparse_gcp", lambda m, s=use_sparse: s)
        runs.append(mbdgen.simulate(module, method="abm", constraints="gcp", h=h, t_end=t_end))
    return module, runs


def _rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


# (model, h, t_end): fixed-step ABM, no re-partition within t_end.  Measured relative
# differences sparse vs dense (q, q̇, λ): chain ≤ 4e-16 / 9e-16 / 5e-15, Andrews
# ≤ 9e-16 / 7e-16 / 7e-15, spatial slider-crank ≤ 2e-15 up to its re-partition.
GCP_CASES = [
    ("planar_chain", 1e-3, 0.2),
    ("andrews", 1e-5, 0.002),
    ("spatial_slider_crank", 1e-3, 0.3),
]


@pytest.mark.parametrize(("name", "h", "t_end"), GCP_CASES, ids=[c[0] for c in GCP_CASES])
def test_sparse_gcp_matches_dense(monkeypatch, name, h, t_end):
    """Same partition, same Newton iterations: the two differ only by rounding in the
    LU of Φ_u and of the KKT matrix, so 1e-12 relative (the sparse index-1 tolerance
    of test_sparse.py) holds over every output row."""
    module, (rs, rd) = _gcp_both(monkeypatch, name, h, t_end)
    assert rs.info["message"] == rd.info["message"] == "finished"
    assert rs.info["repartitioned_at_steps"] == rd.info["repartitioned_at_steps"] == []
    for key in ("q", "qd", "lam"):
        assert _rel(getattr(rs, key), getattr(rd, key)) <= 1e-12, key


def test_sparse_gcp_repartitions_when_the_static_order_degrades(monkeypatch):
    """The spatial slider-crank needs a new partition before 0.5 s.  The static
    order's pivot ratio degrades sooner than that of a row-pivoted LU of Φ_u, so the
    sparse run re-partitions a few steps earlier (measured: step 445 against 473).
    Until then the runs agree to rounding; afterwards both are GCP solutions of the
    same h restarted at different steps, and agree to the method's error (measured
    5e-8 relative in q), so 1e-6; ‖Φ‖ stays at the Newton tolerance on both."""
    module, (rs, rd) = _gcp_both(monkeypatch, "spatial_slider_crank", 1e-3, 0.5)
    (ks,), (kd,) = rs.info["repartitioned_at_steps"], rd.info["repartitioned_at_steps"]
    assert 0 < ks <= kd
    assert _rel(rs.q[:ks], rd.q[:ks]) <= 1e-12
    assert _rel(rs.q, rd.q) <= 1e-6
    assert float(rs.phi_norm.max()) <= 1e-9


def test_phi_u_plan_on_a_chain_is_linear_and_solves_phi_u():
    """The static-order LU of Φ_u solves Φ_u z = r to rounding against a dense solve,
    and on a chain its factor stays O(m): no fill beyond a joint's neighbours."""
    module = import_generated(GENERATED / "planar_chain.py")
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    p = parameter_vector(module, None)
    q = np.asarray(module.Q0, dtype=float) + 0.1
    phi_q = _kernel(module, "phi_q", 0.0, q, p)
    dep, _, quality, row_of, col_of = partition.pivot_order(phi_q)
    plan = partition.phi_u_plan(m, module.PHI_Q_ROWS, module.PHI_Q_COLS, row_of, col_of)
    values = phi_q[module.PHI_Q_ROWS, module.PHI_Q_COLS]
    lu = np.zeros(plan.size)
    lo = partition.phi_u_factor(plan, values, lu)
    assert lo / np.abs(phi_q).max() == pytest.approx(quality, rel=1e-12)
    rhs = np.random.default_rng(0).standard_normal(m)
    z = np.zeros(m)
    partition.phi_u_solve(plan, lu, rhs.copy(), z)
    x = np.zeros(n)
    x[col_of] = z
    exact = np.linalg.solve(phi_q[:, dep], rhs)
    assert np.abs(x[dep] - exact).max() <= 1e-12 * np.abs(exact).max()
    assert plan.size <= 3 * np.count_nonzero(phi_q[:, dep])


def test_sparse_gcp_allocates_nothing_per_step():
    """DESIGN rule 1 on the sparse GCP path (Numba's NRT allocation counter)."""
    code = """
import json, mbdgen
from numba.core.runtime import _nrt_python, rtsys
_nrt_python.memsys_enable_stats()
from mbdgen.compiler import import_generated
m = import_generated("generated/planar_chain.py")
counts = []
for t_end in (0.01, 0.01, 1.0):
    before = rtsys.get_allocation_stats().alloc
    r = mbdgen.simulate(m, method="abm", constraints="gcp", h=1e-3, t_end=t_end)
    counts.append([rtsys.get_allocation_stats().alloc - before, r.counters["steps"]])
print(json.dumps(counts))
"""
    counts = json.loads(run_python(code, env={"NUMBA_NRT_STATS": "1"}).splitlines()[-1])
    assert counts[2][0] == counts[1][0] and counts[2][1] > 50 * counts[1][1], counts


def test_a_singular_sparse_gcp_workspace_is_explained_by_name(monkeypatch):
    """The failure message reads M and Φ_q from a sparse workspace (values on the
    module's patterns) as it reads the dense arrays (before, the 1-D values reached the
    rank test and raised): a Φ_q whose last joint's rows are zero is reported as a
    rank loss naming that joint's rows."""
    from mbdgen.diagnose import explain_failure
    from mbdgen.runtime.status import SINGULAR

    module, (rs, _) = _gcp_both(monkeypatch, "planar_chain", 1e-3, 0.002)
    ws = partition.gcp_sparse_workspace(
        module, sparse.module_plan(module), np.arange(16), np.arange(16, 24),
        np.arange(16), np.arange(16), rs.q[-1], rs.qd[-1],
    )  # fmt: skip
    p = parameter_vector(module, None)
    module.dynamics_values(0.0, ws.q, ws.qd, p, ws.mass, ws.force, ws.phi, ws.phi_q,
                           ws.phi_t, ws.gamma)  # fmt: skip
    last = module.CONSTRAINT_NAMES[-1].split("[", 1)[0]
    rows = np.array([module.CONSTRAINT_NAMES[i].startswith(last) for i in module.PHI_Q_ROWS])
    ws.phi_q[rows] = 0.0
    message = explain_failure(module, SINGULAR, ws, rs, family="fixed")
    assert f"rank Φ_q fell to 14 of 16 rows, row(s) {last}[0], {last}[1]" in message, message


def _pivot_dense(m, n, rows, cols, values):
    dense = np.zeros((m, n))
    np.add.at(dense, (rows, cols), values)
    return dense


def _pivot_both(m, n, rows, cols, values):
    dense = _pivot_dense(m, n, rows, cols, values)
    sparse = partition.pivot_order_sparse(m, n, rows, cols, values)
    return dense, partition.pivot_order(dense), sparse


def _check_close_to_full_pivoting(m, n, rows, cols, values):
    """The bound of the threshold rule against full pivoting: quality (smallest pivot
    over max|Φ_q|) ≥ PIVOT_THRESHOLD / 2 × full pivoting's and cond(Φ_u) ≤ 10 × full
    pivoting's (measured over 312 random trees and loops: ≥ 0.50× and ≤ 5.4×); the
    same order twice; Φ_u's static-order factor ≤ 2 × nnz(Φ_u) (measured ≤ 1.3×)."""
    dense, (dep_d, _, q_d, _, _), (dep, ind, q_s, row_of, col_of) = _pivot_both(
        m, n, rows, cols, values
    )
    assert q_s >= partition.PIVOT_THRESHOLD / 2 * q_d
    assert np.linalg.cond(dense[:, dep]) <= 10 * np.linalg.cond(dense[:, dep_d])
    assert sorted(dep.tolist() + ind.tolist()) == list(range(n)) and len(dep) == m
    again = partition.pivot_order_sparse(m, n, rows, cols, values)
    for a, b in zip(again, (dep, ind, q_s, row_of, col_of), strict=True):
        assert np.array_equal(a, b)
    plan = partition.phi_u_plan(m, rows, cols, row_of, col_of)
    assert plan.size <= 2 * np.count_nonzero(np.isin(cols, dep))
    return q_s / q_d


@pytest.mark.parametrize("spatial", [False, True], ids=["planar", "spatial"])
@pytest.mark.parametrize("loops", [0, 3], ids=["tree", "loops"])
@pytest.mark.parametrize("seed", range(6))
def test_sparse_pivot_order_is_close_to_full_pivoting_on_random_mechanisms(spatial, loops, seed):
    from test_sparse import _random_mechanism

    rng = np.random.default_rng(100 + seed)
    n, m, *_, ar, ac, av = _random_mechanism(rng, int(rng.integers(6, 40)), spatial, loops)
    if m < n:
        _check_close_to_full_pivoting(m, n, ar, ac, av)


@pytest.mark.parametrize("name", SPARSE_EXAMPLES + ["iftomm_a02_four_bar_n10", "welch_pendulum3d"])
def test_sparse_pivot_order_is_close_to_full_pivoting_on_the_examples(name):
    """Every sparse example model at q0 and at a perturbed q; on Andrews and the
    spatial slider-crank (q0) the dependent set is full pivoting's."""
    module = import_generated(GENERATED / f"{name}.py")
    p = parameter_vector(module, None)
    q0 = np.asarray(module.Q0, dtype=float)
    rows, cols = module.PHI_Q_ROWS, module.PHI_Q_COLS
    m, n = module.N_CONSTRAINTS, module.N_COORDINATES
    for q in (q0, q0 + 0.05 * np.random.default_rng(5).standard_normal(n)):
        phi_q = _kernel(module, "phi_q", 0.0, q, p)
        _check_close_to_full_pivoting(m, n, rows, cols, phi_q[rows, cols])
    if name in ("andrews", "spatial_slider_crank"):
        phi_q = _kernel(module, "phi_q", 0.0, q0, p)
        _, (dep_d, *_), (dep, *_) = _pivot_both(m, n, rows, cols, phi_q[rows, cols])
        assert np.array_equal(dep, dep_d)


def test_sparse_pivot_order_names_redundant_constraints_as_full_pivoting_does():
    """Bricard's mechanism (one redundant row) and a repeated row: the same
    ValueError, with the same rank, as the dense elimination."""
    bricard = mbdgen.compile(TEST_MODELS / "bricard.py", TEST_GENERATED)
    p = parameter_vector(bricard, None)
    q = assemble(bricard).q
    rows, cols = bricard.PHI_Q_ROWS, bricard.PHI_Q_COLS
    phi_q = _kernel(bricard, "phi_q", 0.0, q, p)
    m, n = phi_q.shape
    cases = [(m, n, rows, cols, phi_q[rows, cols])]
    rows2 = np.array([0, 0, 1, 1, 2, 2])
    cols2 = np.array([0, 1, 1, 2, 0, 1])
    cases.append((3, 4, rows2, cols2, np.array([1.0, 2.0, 3.0, 1.0, 2.0, 4.0])))  # row 2 = 2·row 0
    for case in cases:
        with pytest.raises(ValueError) as dense:
            partition.pivot_order(_pivot_dense(*case))
        with pytest.raises(ValueError) as sparse:
            partition.pivot_order_sparse(*case)
        assert str(sparse.value) == str(dense.value)
        assert "the constraints are redundant" in str(sparse.value)


def test_sparse_pivot_order_on_a_chain_is_linear_and_matches_its_lu():
    """On the planar chain the order eliminates from the free end with no fill (factor
    = nnz(Φ_u)), and the static-order LU's pivot ratio equals the partition's quality."""
    module = import_generated(GENERATED / "planar_chain.py")
    m, n = module.N_CONSTRAINTS, module.N_COORDINATES
    p = parameter_vector(module, None)
    q = np.asarray(module.Q0, dtype=float) + 0.1
    phi_q = _kernel(module, "phi_q", 0.0, q, p)
    values = phi_q[module.PHI_Q_ROWS, module.PHI_Q_COLS]
    dep, _, quality, row_of, col_of = partition.pivot_order_sparse(
        m, n, module.PHI_Q_ROWS, module.PHI_Q_COLS, values
    )
    plan = partition.phi_u_plan(m, module.PHI_Q_ROWS, module.PHI_Q_COLS, row_of, col_of)
    assert plan.size == np.count_nonzero(np.isin(module.PHI_Q_COLS, dep))
    lu = np.zeros(plan.size)
    lo = partition.phi_u_factor(plan, values, lu)
    assert lo / np.abs(phi_q).max() == pytest.approx(quality, rel=1e-12)
