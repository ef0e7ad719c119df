"""The index-1 right side of the equations of motion, for explicit integrators.

At each evaluation the augmented system (Haug 1989, Eq. 7.2.1)

    [[M, Φ_qᵀ], [Φ_q, 0]] [q̈; λ] = [Q; γ̂]

is solved, with Baumgarte's stabilised right side (Haug 1989, Eq. 7.3.8)

    γ̂ = γ − 2α(Φ_q q̇ + Φ_t) − β²Φ,

α = ``ctrl[0]``, β = ``ctrl[1]``; α = β = 0 is direct integration (§7.3.3).

Redundant constraints (rows of Φ_q that depend on others) make the augmented matrix
singular.  The workspace's ``active`` row weights remove them: a row with weight 0
is replaced by λ_i = 0 (an identity row and column of the augmented matrix), so the
remaining rows determine q̈ and a particular λ; ‖Φ‖ and ‖Φ̇‖ are still measured over
every row.  Weights are 1.0 (all rows kept) unless the driver removed rows, and a
weight of exactly 1.0 leaves the arithmetic bit for bit unchanged.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from mbdgen.runtime.linalg import lu_solve_inplace, row_weights
from mbdgen.runtime.sparse import (
    REFINE_GROWTH,
    REFINE_PIVOT_GROWTH,
    KktPlan,
    PairPlan,
    SchurPlan,
    kkt_assemble,
    kkt_factor,
    kkt_pivot_growth,
    kkt_plan,
    kkt_refine,
    kkt_rhs,
    kkt_solve,
    no_pair_plan,
    no_schur_plan,
    pair_factor,
    pair_plan,
    pair_refine,
    pair_solve,
    planned_once,
    schur_factor,
    schur_plan,
    schur_refine,
    schur_solve,
)
from mbdgen.runtime.status import OK


def n_aux(m: int) -> int:
    """Length of the ``aux`` record: λ (m), ‖Φ‖₂, ‖Φ̇‖₂."""
    return m + 2


class Workspace(NamedTuple):
    """Preallocated arrays of :func:`index1_rhs` (dense): M, Q, Φ, Φ_q, Φ_t, γ of the
    latest evaluation first, as in every workspace (:mod:`mbdgen.diagnose`), and under
    the names :class:`SparseWorkspace` gives them, so that the shared entry points
    read n and m from ``force`` and ``phi`` of either."""

    mass: np.ndarray  # M
    force: np.ndarray  # Q
    phi: np.ndarray  # Φ
    phi_q: np.ndarray  # Φ_q
    phi_t: np.ndarray  # Φ_t
    gamma: np.ndarray  # γ
    matrix: np.ndarray  # the augmented matrix of Eq. 7.2.1, then its LU factors
    b: np.ndarray  # right side, then [q̈; λ]
    active: np.ndarray  # row weights (1.0 enforced, 0.0 a redundant row removed)


def workspace(n: int, m: int, active: np.ndarray | None = None) -> Workspace:
    """Preallocated arrays for :func:`index1_rhs`.

    ``active`` : (m,) 1.0 for the constraint rows to enforce, 0.0 for redundant rows
    removed (default: all enforced).
    """
    N = n + m
    return Workspace(
        np.zeros((n, n)), np.zeros(n), np.zeros(m), np.zeros((m, n)), np.zeros(m),
        np.zeros(m), np.zeros((N, N)), np.zeros(N), row_weights(m, active),
    )  # fmt: skip


@njit(cache=True, inline="always")
def solve_index1(n, m, qd, alpha, beta2, mass, force, phi, phi_q, phi_t, gamma, active, A, b):
    """Assemble and solve Haug 1989 Eq. 7.2.1 with γ̂ of Eq. 7.3.8 into ``b = [q̈; λ]``.

    Row i of Φ_q enters with weight ``active[i]``: 1.0 as usual, 0.0 replaces it by
    λ_i = 0 (a removed redundant row).  Returns (status, ‖Φ‖₂, ‖Φ_q q̇ + Φ_t‖₂), the
    norms over all rows.
    """
    for i in range(n):
        for j in range(n):
            A[i, j] = mass[i, j]
        b[i] = force[i]
    phi2 = 0.0
    phid2 = 0.0
    for i in range(m):
        w = active[i]
        phid = phi_t[i]
        for j in range(n):
            v = phi_q[i, j]
            A[n + i, j] = w * v
            A[j, n + i] = w * v
            phid += v * qd[j]
        for j in range(m):
            A[n + i, n + j] = 0.0
        A[n + i, n + i] = 1.0 - w
        b[n + i] = w * (gamma[i] - 2.0 * alpha * phid - beta2 * phi[i])
        phi2 += phi[i] * phi[i]
        phid2 += phid * phid
    status = lu_solve_inplace(A, b, n + m)
    return status, math.sqrt(phi2), math.sqrt(phid2)


@njit(cache=True, inline="always")
def index1_rhs(kern, n, m, t, x, p, ctrl, ws, f, aux, state):
    """f(x, t) = [q̇; q̈] for x = [q; q̇]; writes λ, ‖Φ‖₂, ‖Φ̇‖₂ into ``aux``.

    ``state``: x is a state of the method (a step's result, a predicted or output
    point), not a Runge–Kutta stage; only :func:`mbdgen.runtime.partition.hybrid_rhs`
    reads it.

    ``kern`` is a generated ``dynamics`` kernel of a model with n coordinates and m
    constraints (``ws`` is :func:`workspace` of those sizes).  Returns a status code.
    """
    mass, force, phi, phi_q, phi_t, gamma, A, b, active = ws
    q = x[:n]
    qd = x[n:]
    kern(t, q, qd, p, mass, force, phi, phi_q, phi_t, gamma)
    status, phi_norm, phid_norm = solve_index1(
        n, m, qd, ctrl[0], ctrl[1] * ctrl[1], mass, force, phi, phi_q, phi_t, gamma, active, A, b
    )
    _pack(n, m, qd, b, phi_norm, phid_norm, f, aux)
    return status


@njit(cache=True, inline="always")
def _pack(n, m, qd, b, phi_norm, phid_norm, f, aux):
    """f = [q̇; q̈] and aux = [λ; ‖Φ‖₂; ‖Φ̇‖₂] from the solution b = [q̈; λ]."""
    for i in range(n):
        f[i] = qd[i]
        f[n + i] = b[i]
    for i in range(m):
        aux[i] = b[n + i]
    aux[m] = phi_norm
    aux[m + 1] = phid_norm


class SparseWorkspace(NamedTuple):
    """Preallocated arrays of :func:`index1_rhs_sparse`: the ``dynamics_values`` outputs
    (M and Φ_q as values on the module's MASS and PHI_Q patterns), the KKT plan and
    the factor's values; the fields M … γ, ``b`` and ``active`` named as in :class:`Workspace`.

    Where M is block diagonal (absolute coordinates) and the workspace asks for it,
    ``schur`` plans the Schur-complement solve (:func:`~mbdgen.runtime.sparse.schur_factor`),
    used first; the KKT LU is the default and the fallback (``schur.ok`` False, or a pivot
    the Schur path will not trust).  Either is refined once where its pivots grew."""

    mass: np.ndarray
    force: np.ndarray
    phi: np.ndarray
    phi_q: np.ndarray
    phi_t: np.ndarray
    gamma: np.ndarray
    active: np.ndarray
    plan: KktPlan
    val: np.ndarray
    b: np.ndarray
    work: np.ndarray
    wrow: np.ndarray
    schur: SchurPlan
    bval: np.ndarray  # Schur: factored blocks of M, then D⁻¹
    wval: np.ndarray  # Schur: Ã = Φ_q L⁻ᵀ per segment (M's blocks = L D Lᵀ)
    sval: np.ndarray  # Schur: LDLᵀ of S
    sdiag: np.ndarray
    rhs0: np.ndarray  # the right side, kept for iterative refinement
    res: np.ndarray
    pair: PairPlan  # the block Schur solve over a diagonal M (used first)
    hinv: np.ndarray
    hclu: np.ndarray
    pseg: np.ndarray
    pblk: np.ndarray
    plsave: np.ndarray
    pdiag: np.ndarray
    py: np.ndarray
    pacc: np.ndarray


def module_pair_plan(module: Any) -> PairPlan:
    """The generated ``module``'s :func:`~mbdgen.runtime.sparse.pair_plan`, computed once
    per module object (planning costs 0.7 ms at n + m = 40, 25 ms at 5000: too much
    for every run)."""
    return planned_once(module, "_mbdgen_pair_plan", pair_plan)


def pair_arrays(pp: PairPlan) -> tuple[np.ndarray, ...]:
    """The value arrays of :func:`~mbdgen.runtime.sparse.pair_factor` for a plan:
    (H⁻¹, H⁻¹ per cluster, segments, blocks, L blocks before scaling, S's diagonal,
    the solve's work arrays)."""
    G = max(pp.groups, 1)
    nc = pp.clu_j.shape[0]
    return (
        np.zeros(pp.n if pp.ok else 0),
        np.zeros((nc, 3)),
        np.zeros((pp.seg_g.shape[0], 2, 3)),
        np.zeros((pp.blocks if pp.ok else 0, 2, 2)),
        np.zeros((int(pp.ptr[-1]), 2, 2)),
        np.zeros((G, 2)),
        np.zeros((G, 2)),
        np.zeros((nc, 3)),
    )


def sparse_workspace(
    n: int,
    m: int,
    mass_rows: np.ndarray,
    mass_cols: np.ndarray,
    phi_q_rows: np.ndarray,
    phi_q_cols: np.ndarray,
    active: np.ndarray | None = None,
    plan: KktPlan | None = None,
    schur: bool | SchurPlan = False,
    pair: bool | PairPlan = True,
) -> SparseWorkspace:
    """The workspace of :func:`index1_rhs_sparse` for the given static patterns
    (``plan``: a :func:`~mbdgen.runtime.sparse.kkt_plan` of them, to reuse one;
    ``schur``: True (or a :func:`~mbdgen.runtime.sparse.schur_plan` of them) to solve
    by the Schur complement where it applies; off by default, since it is not yet
    faster per step than the KKT LU — see the design notes; ``pair``: the 2 × 2 block
    Schur solve of :func:`~mbdgen.runtime.sparse.pair_plan`, on by default where M is
    diagonal, and tried before either)."""
    weights = row_weights(m, active)
    if plan is None:
        plan = kkt_plan(n, m, mass_rows, mass_cols, phi_q_rows, phi_q_cols)
    if isinstance(schur, SchurPlan):
        sp = schur
    elif schur:
        sp = schur_plan(n, m, mass_rows, mass_cols, phi_q_rows, phi_q_cols, plan)
    else:  # no Schur solve; the plan keeps the patterns for kkt_refine
        sp = no_schur_plan(n, m, mass_rows, mass_cols, phi_q_rows, phi_q_cols)
    if isinstance(pair, PairPlan):
        pp = pair
    elif pair:
        pp = pair_plan(n, m, mass_rows, mass_cols, phi_q_rows, phi_q_cols)
    else:
        pp = no_pair_plan(n, m)
    return SparseWorkspace(
        np.zeros(len(mass_rows)),
        np.zeros(n),
        np.zeros(m),
        np.zeros(len(phi_q_rows)),
        np.zeros(m),
        np.zeros(m),
        weights,
        plan,
        np.zeros(plan.values_size),
        np.zeros(n + m),
        np.zeros(n + m),
        np.zeros(max(plan.aug_rows.shape[0], 1)),
        sp,
        np.zeros(sp.bval_size),
        np.zeros(sp.wval_size),
        np.zeros(sp.sval_size),
        np.zeros(m),
        np.zeros(n + m),
        np.zeros(n + m),
        pp,
        *pair_arrays(pp),
    )


@njit(cache=True, inline="always")
def solve_index1_sparse(n, m, qd, alpha, beta2, ws):
    """Haug 1989 Eq. 7.2.1 with γ̂ of Eq. 7.3.8 on the sparse pattern (same contract
    as :func:`solve_index1`): ``ws.b`` ← [q̈; λ]; returns (status, ‖Φ‖₂, ‖Φ̇‖₂)."""
    # a plan (a tuple of arrays) is bound to a name only in the branch that uses it:
    # on an owned workspace each binding costs a reference-count update per array
    # (0.4 µs per evaluation for the three plans, 8-link chain); the chunk routines
    # pass a borrowed one (mbdgen.runtime.refs), where the counts fold away
    a_rows = ws.plan.a_rows
    a_cols = ws.plan.a_cols
    b = ws.b
    phid = ws.work  # Φ_q q̇ + Φ_t, before the solve uses work
    for i in range(m):
        phid[i] = ws.phi_t[i]
    for e in range(a_rows.shape[0]):
        phid[a_rows[e]] += ws.phi_q[e] * qd[a_cols[e]]
    phi2 = 0.0
    phid2 = 0.0
    for i in range(n):
        b[i] = ws.force[i]
    for i in range(m):
        w = ws.active[i]
        b[n + i] = w * (ws.gamma[i] - 2.0 * alpha * phid[i] - beta2 * ws.phi[i])
        phi2 += ws.phi[i] * ws.phi[i]
        phid2 += phid[i] * phid[i]
    if ws.pair.ok:
        pp = ws.pair
        status, growth = pair_factor(
            pp, ws.mass, ws.phi_q, ws.active, ws.hinv, ws.hclu, ws.pseg, ws.pblk, ws.plsave,
            ws.pdiag,
        )  # fmt: skip
        if status == OK:
            refine = growth > REFINE_GROWTH
            if refine:
                ws.rhs0[:] = b
            pair_solve(pp, ws.active, ws.hinv, ws.hclu, ws.pseg, ws.pblk, b, ws.py, ws.pacc)
            if refine:
                pair_refine(
                    pp, ws.mass, ws.phi_q, ws.active, a_rows, a_cols, ws.hinv,
                    ws.hclu, ws.pseg, ws.pblk, ws.rhs0, b, ws.res, ws.py, ws.pacc,
                )  # fmt: skip
            return status, math.sqrt(phi2), math.sqrt(phid2)
    if ws.schur.ok:
        sp = ws.schur
        status, growth = schur_factor(
            sp, ws.mass, ws.phi_q, ws.active, ws.bval, ws.wval, ws.sval, ws.wrow, ws.sdiag
        )
        if status == OK:
            refine = growth > REFINE_GROWTH
            if refine:
                ws.rhs0[:] = b
            schur_solve(sp, ws.phi_q, ws.active, ws.bval, ws.wval, ws.sval, ws.wrow, b, ws.work)
            if refine:
                schur_refine(
                    sp, ws.mass, ws.phi_q, ws.active, ws.bval, ws.wval, ws.sval, ws.wrow,
                    ws.rhs0, b, ws.res, ws.work,
                )  # fmt: skip
            return status, math.sqrt(phi2), math.sqrt(phid2)
    # the general LU of K, refined once where its pivots grew (Li & Demmel 1998)
    plan = ws.plan
    kkt_assemble(plan, ws.mass, ws.phi_q, ws.phi_q, ws.active, ws.val, ws.wrow)
    N = n + m
    diag0 = ws.res  # free until a refinement step needs it
    for k in range(N):
        diag0[k] = ws.val[k]
    status = kkt_factor(plan, ws.val)
    if status == OK:
        refine = kkt_pivot_growth(plan, diag0, ws.val) > REFINE_PIVOT_GROWTH
        if refine:
            ws.rhs0[:] = b
        kkt_rhs(plan, ws.phi_q, ws.active, ws.wrow, b)
        kkt_solve(plan, ws.val, b, ws.work)
        if refine:
            kkt_refine(
                plan, ws.schur.h_rows, ws.schur.h_cols, ws.mass, ws.phi_q, ws.phi_q,
                ws.active, ws.val, ws.wrow, ws.rhs0, b, ws.res, ws.work,
            )  # fmt: skip
    return status, math.sqrt(phi2), math.sqrt(phid2)


@njit(cache=True, inline="always")
def index1_rhs_sparse(kern, n, m, t, x, p, ctrl, ws, f, aux, state):
    """:func:`index1_rhs` on the static sparse patterns (:mod:`mbdgen.runtime.sparse`):
    ``kern`` is a generated ``dynamics_values`` kernel, ``ws`` a :class:`SparseWorkspace`.
    """
    q = x[:n]
    qd = x[n:]
    kern(t, q, qd, p, ws.mass, ws.force, ws.phi, ws.phi_q, ws.phi_t, ws.gamma)
    status, phi_norm, phid_norm = solve_index1_sparse(n, m, qd, ctrl[0], ctrl[1] * ctrl[1], ws)
    _pack(n, m, qd, ws.b, phi_norm, phid_norm, f, aux)
    return status
