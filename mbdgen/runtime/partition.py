"""Generalized coordinate partitioning (Haug 1989 §7.3.2) and the hybrid algorithm (§7.3.5).

GCP integrates only the independent coordinates v and velocities v̇.  Each
evaluation of the right side (:func:`gcp_rhs`)

1. solves Φ(u, v, t) = 0 for the dependent coordinates u by Newton's method,
   starting from the u of the previous evaluation (step 5 of §7.3.2);
2. solves Φ_u u̇ = ν − Φ_v v̇ for the dependent velocities (Eq. 7.2.11);
3. solves Eq. 7.2.1 for q̈ and λ and returns f = [v̇; v̈];
4. monitors the conditioning of Φ_u: when the smallest pivot of its LU factors,
   over the largest entry of Φ_q, falls below ``ctrl[2]`` (set by the driver to a
   fraction of that ratio when the partition was chosen) it returns
   ``REPARTITION``, and the driver chooses new independent coordinates at the last
   accepted step (step 7) and restarts the multistep method there.  (Scaling by
   Φ_q rather than by Φ_u's own largest pivot matters: a 1 × 1 Φ_u would otherwise
   always look perfectly conditioned.)

The dependent/independent split is chosen by Gaussian elimination of Φ_q with full
pivoting (Haug 1989 §4.4, Eq. 4.4.8; :func:`choose_partition`); for a sparse module's
GCP by a threshold Markowitz elimination on Φ_q's pattern (:func:`pivot_order_sparse`),
which costs O(m) on chains and trees instead of O(m²n).

The hybrid algorithm integrates all coordinates with Baumgarte stabilization
(Eq. 7.3.8) and, whenever an evaluated state violates ‖Φ‖∞ > ``ctrl[3]``, corrects
u and u̇ as GCP does (:func:`hybrid_rhs`); near a singular configuration it
reverts to pure GCP (correction at every evaluation, no stabilization terms).
Since it integrates all coordinates, a new partition costs it no restart: every
evaluation chooses u by full pivoting at the current state
(:func:`_choose_dependent`), which also measures the conditioning.  Haug applies
the correction to the accepted state of a step; here it is applied to every state the integrator
evaluates, which includes the accepted one (the accept evaluation works in place on
the state the loop then keeps), and leaves the low-order predicted states of a
PECE step slightly better.
"""

from __future__ import annotations

import heapq
import math
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from mbdgen.runtime.index1 import (
    module_pair_plan,
    solve_index1,
    solve_index1_sparse,
    sparse_workspace,
)
from mbdgen.runtime.linalg import lu_solve_inplace
from mbdgen.runtime.sparse import KktPlan, PairPlan, SchurPlan
from mbdgen.runtime.status import NEWTON_FAILED, OK, REPARTITION, SINGULAR

# ``ctrl`` slots (after Baumgarte's α = ctrl[0], β = ctrl[1]).
C_PIVOT_RATIO = 2  # re-partition when min|pivot of Φ_u| / max|Φ_q| falls below this
C_NEWTON_TOL = 3  # ‖Φ‖∞ that Newton's method must reach (also the hybrid trigger)
C_NEWTON_ITERS = 4  # most Newton iterations per evaluation
CTRL_SIZE = 5

# pivot_order_sparse: a pivot must be at least this fraction of the largest entry left
PIVOT_THRESHOLD = 0.5


def choose_partition(
    phi_q: np.ndarray, rank_tol: float = 1e-10
) -> tuple[np.ndarray, np.ndarray, float]:
    """Dependent (u) and independent (v) coordinate indices from Φ_q (m × n).

    Gaussian elimination with full pivoting (Haug 1989 Eq. 4.4.8): the pivot columns
    are the dependent coordinates, whose Jacobian block Φ_u is then as well
    conditioned as the elimination can make it.  Also returns the quality of the
    choice, the smallest pivot over the largest entry of Φ_q, against which later
    conditioning is judged.  Raises ``ValueError`` if Φ_q has lower rank than its
    number of rows (redundant constraints).
    """
    dep, ind, quality, _, _ = pivot_order(phi_q, rank_tol)
    return dep, ind, quality


def pivot_order(
    phi_q: np.ndarray, rank_tol: float = 1e-10
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray, np.ndarray]:
    """:func:`choose_partition` and the elimination order it found: the pivot rows
    and pivot columns (coordinates), step by step, for the static-order LU of Φ_u
    (:func:`phi_u_plan`)."""
    a = np.array(phi_q, dtype=float)
    m, n = a.shape
    cols = np.arange(n)
    rows = np.arange(m)
    scale = float(np.abs(a).max()) if a.size else 1.0
    smallest = np.inf
    for k in range(m):
        sub = np.abs(a[k:, k:])
        i, j = np.unravel_index(int(np.argmax(sub)), sub.shape)
        if sub[i, j] <= rank_tol * max(scale, 1.0):
            raise ValueError(f"Φ_q has rank {k} < {m}: the constraints are redundant")
        smallest = min(smallest, float(sub[i, j]))
        a[[k, k + i]] = a[[k + i, k]]
        rows[[k, k + i]] = rows[[k + i, k]]
        a[:, [k, k + j]] = a[:, [k + j, k]]
        cols[[k, k + j]] = cols[[k + j, k]]
        a[k + 1 :, k:] -= np.outer(a[k + 1 :, k] / a[k, k], a[k, k:])
    quality = smallest / scale if m else 1.0
    return np.sort(cols[:m]), np.sort(cols[m:]), quality, rows.copy(), cols[:m].copy()


def pivot_order_sparse(
    m: int,
    n: int,
    rows: np.ndarray,
    cols: np.ndarray,
    values: np.ndarray,
    rank_tol: float = 1e-10,
    threshold: float = PIVOT_THRESHOLD,
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray, np.ndarray]:
    """:func:`pivot_order` on Φ_q's pattern (``rows``, ``cols``, ``values``; repeated
    entries add up), in O(m) on chains and trees instead of O(m²n).

    Threshold Markowitz pivoting (Duff, Erisman & Reid, *Direct Methods for Sparse
    Matrices*, §7.8; Zlatev 1980): at each step the admissible pivots are the entries
    of at least ``threshold`` × the largest entry of the remaining matrix (full
    pivoting admits only the largest), and among them the one of least Markowitz cost
    (r − 1)(c − 1) is taken, r and c the counts of its row and column in the remaining
    pattern (ties among the entries visited: larger magnitude, lower row, lower column).  The search
    visits rows and columns by increasing count and stops as soon as no unvisited
    entry can cost less (Markowitz's bound (c − 1)²); rows and columns whose largest
    entry is below the threshold wait in a heap until the threshold falls to them.
    Every pivot is thus within a factor ``threshold`` of the largest entry left, as
    full pivoting's is of the largest of its own remaining matrix, and on a chain
    the order eliminates from the leaves with no fill (so :func:`phi_u_plan`'s factor
    stays O(m)).  Deterministic; raises ``ValueError`` as :func:`choose_partition`.
    """
    R: list[dict[int, float]] = [{} for _ in range(m)]  # remaining rows: {column: value}
    C: list[set[int]] = [set() for _ in range(n)]  # remaining columns: {rows}
    for i, j, v in zip(
        np.asarray(rows).tolist(),
        np.asarray(cols).tolist(),
        np.asarray(values, dtype=float).tolist(),
        strict=True,
    ):
        R[i][j] = R[i].get(j, 0.0) + v
        C[j].add(i)
    scale = max((abs(v) for r in R for v in r.values()), default=0.0)
    # max-heap of |entries| (stale ones skipped), and lines by count: (count, kind,
    # index), kind 0 a column, 1 a row (stale keys skipped)
    entries = [(-abs(v), i, j) for i in range(m) for j, v in R[i].items()]
    heapq.heapify(entries)
    lines = [(len(C[j]), 0, j) for j in range(n) if C[j]] + [(len(R[i]), 1, i) for i in range(m)]
    heapq.heapify(lines)
    low: list[tuple[float, int, int, int]] = []  # lines below the threshold: (−max, key)
    row_done = [False] * m
    col_done = [False] * n
    row_of: list[int] = []
    col_of: list[int] = []
    smallest = math.inf
    floor = rank_tol * max(scale, 1.0)
    for k in range(m):
        while entries:
            a, i, j = entries[0]
            if not row_done[i] and j in R[i] and abs(R[i][j]) == -a:
                break
            heapq.heappop(entries)
        largest = -entries[0][0] if entries else 0.0
        if largest <= floor:
            raise ValueError(f"Φ_q has rank {k} < {m}: the constraints are redundant")
        admit = threshold * largest
        while low and -low[0][0] >= admit:
            heapq.heappush(lines, heapq.heappop(low)[1:])
        best: tuple[int, float, int, int] | None = None  # (cost, −|a|, row, column)
        visited = []
        while lines:
            c, kind, x = lines[0]
            if best is not None and best[0] <= (c - 1) * (c - 1):
                break  # every unvisited admissible entry costs at least (c − 1)²
            heapq.heappop(lines)
            if kind == 0:
                if col_done[x] or len(C[x]) != c:
                    continue
                cand = [(R[i][x], i, x) for i in C[x]]
            else:
                if row_done[x] or len(R[x]) != c:
                    continue
                cand = [(v, x, j) for j, v in R[x].items()]
            top = max((abs(v) for v, _, _ in cand), default=0.0)
            if top < admit:
                heapq.heappush(low, (-top, c, kind, x))
                continue
            visited.append((c, kind, x))
            for v, i, j in cand:
                if abs(v) >= admit:
                    key = ((len(R[i]) - 1) * (len(C[j]) - 1), -abs(v), i, j)
                    if best is None or key < best:
                        best = key
        for line in visited:
            heapq.heappush(lines, line)
        assert best is not None  # the largest entry is admissible
        _, _, pr, pc = best
        prow = R[pr]
        piv = prow[pc]
        smallest = min(smallest, abs(piv))
        row_of.append(pr)
        col_of.append(pc)
        row_done[pr] = col_done[pc] = True
        for j in prow:
            C[j].discard(pr)
        for i in sorted(C[pc]):
            ri = R[i]
            f = ri.pop(pc) / piv
            for j, v in prow.items():
                if j == pc:
                    continue
                if j in ri:
                    ri[j] -= f * v
                else:
                    ri[j] = -f * v
                    C[j].add(i)
                heapq.heappush(entries, (-abs(ri[j]), i, j))
            heapq.heappush(lines, (len(ri), 1, i))
        C[pc].clear()
        for j in prow:
            if j != pc and C[j]:
                heapq.heappush(lines, (len(C[j]), 0, j))
    dep = np.sort(np.asarray(col_of, dtype=np.int64))
    free = np.ones(n, dtype=bool)
    free[dep] = False
    quality = smallest / scale if m else 1.0
    return (
        dep,
        np.flatnonzero(free).astype(np.int64),
        quality,
        np.asarray(row_of, dtype=np.int64),
        np.asarray(col_of, dtype=np.int64),
    )


def module_pivot_order(
    module: Any, phi_q: np.ndarray, rank_tol: float = 1e-10
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray, np.ndarray]:
    """GCP's partition of ``module`` from its dense Φ_q (m × n): threshold Markowitz
    on Φ_q's pattern for a sparse module (:func:`pivot_order_sparse`), full pivoting
    (:func:`pivot_order`) for a dense one."""
    if getattr(module, "LINEAR_ALGEBRA", "dense") != "sparse":
        return pivot_order(phi_q, rank_tol)
    rows, cols = module.PHI_Q_ROWS, module.PHI_Q_COLS
    m, n = phi_q.shape
    return pivot_order_sparse(m, n, rows, cols, phi_q[rows, cols], rank_tol)


class GcpWorkspace(NamedTuple):
    """The ``ws`` of :func:`gcp_rhs` and :func:`hybrid_rhs` (dense): the index-1 arrays
    (:class:`~mbdgen.runtime.index1.Workspace`'s names), the full q and q̇ (Newton
    starts from them, so they are seeded with the initial state), the partition and
    scratch for Φ_u; ``q``, ``qd``, ``dep``, ``ind`` as in :class:`GcpSparseWorkspace`
    (the driver re-partitions through them)."""

    mass: np.ndarray  # M
    force: np.ndarray  # Q
    phi: np.ndarray  # Φ
    phi_q: np.ndarray  # Φ_q
    phi_t: np.ndarray  # Φ_t
    gamma: np.ndarray  # γ
    matrix: np.ndarray  # the augmented matrix of Eq. 7.2.1, then its LU factors
    b: np.ndarray  # right side, then [q̈; λ]
    q: np.ndarray  # the full q (u solved by Newton, v from the state)
    qd: np.ndarray  # the full q̇
    dep: np.ndarray  # u's indices (int64)
    ind: np.ndarray  # v's indices (int64)
    phi_u: np.ndarray  # Φ_u (m × m), then its LU factors
    r: np.ndarray  # Newton's right side (m)
    wq: np.ndarray  # the hybrid method's copy of Φ_q for full pivoting (m × n)
    perm: np.ndarray  # its column order (int64)
    active: np.ndarray  # row weights of solve_index1: GCP enforces every row (all 1)


def gcp_workspace(n: int, m: int, dep: np.ndarray, ind: np.ndarray, q0, qd0) -> GcpWorkspace:
    """The workspace of :func:`gcp_rhs` and :func:`hybrid_rhs` for the partition
    ``dep``/``ind`` at the state ``q0``, ``qd0``.  GCP solves for m dependent
    coordinates, so it cannot run with redundant rows removed (the driver refuses such
    mechanisms); its row weights are all 1.
    """
    N = n + m
    return GcpWorkspace(
        np.zeros((n, n)), np.zeros(n), np.zeros(m), np.zeros((m, n)), np.zeros(m), np.zeros(m),
        np.zeros((N, N)), np.zeros(N),
        np.array(q0, dtype=np.float64), np.array(qd0, dtype=np.float64),
        np.array(dep, dtype=np.int64), np.array(ind, dtype=np.int64),
        np.zeros((m, m)), np.zeros(m), np.zeros((m, n)), np.zeros(n, dtype=np.int64),
        np.ones(m),
    )  # fmt: skip


def n_aux(n: int, m: int) -> int:
    """``aux`` record: λ (m), ‖Φ‖₂, ‖Φ̇‖₂, q (n), q̇ (n), q̈ (n), pivot ratio, Newton
    iterations, and (hybrid) 1.0 where the evaluation ran as pure GCP.

    The pivot ratio is min|pivot of Φ_u| / max|Φ_q| for GCP (1 where no correction
    ran); for the hybrid algorithm the quality of the full-pivoting partition, the
    smallest pivot over max|Φ_q|, which it computes at every evaluation.
    """
    return m + 2 + 3 * n + 3


@njit(cache=True, inline="always")
def _choose_dependent(n, m, phi_q, Wq, perm, dep, ind):
    """:func:`choose_partition` in jitted code, into ``dep`` and ``ind`` (sorted).

    Returns the quality of the choice, the smallest pivot over the largest entry of
    Φ_q (0.0 if Φ_q is rank deficient).
    """
    scale = 0.0
    for i in range(m):
        for j in range(n):
            Wq[i, j] = phi_q[i, j]
            scale = max(scale, abs(phi_q[i, j]))
    lo = math.inf
    for j in range(n):
        perm[j] = j
    for k in range(m):
        bi, bj, best = k, k, 0.0
        for i in range(k, m):
            for j in range(k, n):
                if abs(Wq[i, j]) > best:
                    bi, bj, best = i, j, abs(Wq[i, j])
        if best == 0.0:
            return 0.0
        lo = min(lo, best)
        for j in range(n):
            Wq[k, j], Wq[bi, j] = Wq[bi, j], Wq[k, j]
        for i in range(m):
            Wq[i, k], Wq[i, bj] = Wq[i, bj], Wq[i, k]
        perm[k], perm[bj] = perm[bj], perm[k]
        for i in range(k + 1, m):
            c = Wq[i, k] / Wq[k, k]
            for j in range(k, n):
                Wq[i, j] -= c * Wq[k, j]
    # sorted index lists: dependent = the first m columns of the permutation
    ku = 0
    kv = 0
    for j in range(n):
        chosen = False
        for k in range(m):
            if perm[k] == j:
                chosen = True
        if chosen:
            dep[ku] = j
            ku += 1
        else:
            ind[kv] = j
            kv += 1
    if m == 0:
        return 1.0
    return lo / scale


@njit(cache=True, inline="always")
def _factor_ratio(Ju, m, scale):
    """min|pivot| of the row-pivoted LU of Φ_u over ``scale`` (a conditioning monitor)."""
    lo = math.inf
    for k in range(m):
        piv = k
        best = abs(Ju[k, k])
        for i in range(k + 1, m):
            if abs(Ju[i, k]) > best:
                best = abs(Ju[i, k])
                piv = i
        if piv != k:
            for j in range(m):
                tmp = Ju[k, j]
                Ju[k, j] = Ju[piv, j]
                Ju[piv, j] = tmp
        lo = min(lo, best)
        if best == 0.0:
            return 0.0
        for i in range(k + 1, m):
            c = Ju[i, k] / Ju[k, k]
            for j in range(k, m):
                Ju[i, j] -= c * Ju[k, j]
    return lo / scale if scale > 0.0 else 1.0


@njit(cache=True, inline="always")
def _correct(kern, n, m, t, p, ctrl, ws):
    """Newton on Φ(u, v, t) = 0 for u, then u̇ from Φ_u u̇ = −Φ_t − Φ_v v̇; leaves
    the model evaluated at the corrected (q, q̇).

    Returns (status, Newton iterations, pivot ratio of Φ_u).
    """
    mass, force, phi, phi_q, phi_t, gamma, A, b, q, qd, dep, ind, Ju, r, _, _, _ = ws
    tol = ctrl[C_NEWTON_TOL]
    iters = 0
    while True:
        kern(t, q, qd, p, mass, force, phi, phi_q, phi_t, gamma)
        worst = 0.0
        for i in range(m):
            worst = max(worst, abs(phi[i]))
        if worst <= tol:
            break
        if iters >= ctrl[C_NEWTON_ITERS] or not math.isfinite(worst):
            return NEWTON_FAILED, iters, 0.0
        for i in range(m):
            for j in range(m):
                Ju[i, j] = phi_q[i, dep[j]]
            r[i] = -phi[i]
        status = lu_solve_inplace(Ju, r, m)
        if status != OK:
            return status, iters, 0.0
        for j in range(m):
            q[dep[j]] += r[j]
        iters += 1
    for i in range(m):
        s = -phi_t[i]
        for j in range(n - m):
            s -= phi_q[i, ind[j]] * qd[ind[j]]
        r[i] = s
        for j in range(m):
            Ju[i, j] = phi_q[i, dep[j]]
    status = lu_solve_inplace(Ju, r, m)
    if status != OK:
        return status, iters, 0.0
    for j in range(m):
        qd[dep[j]] = r[j]
    scale = 0.0
    for i in range(m):
        for j in range(n):
            scale = max(scale, abs(phi_q[i, j]))
        for j in range(m):
            Ju[i, j] = phi_q[i, dep[j]]
    ratio = _factor_ratio(Ju, m, scale)
    # γ depends on q̇, which just changed: evaluate once more at the corrected state
    kern(t, q, qd, p, mass, force, phi, phi_q, phi_t, gamma)
    return OK, iters, ratio


@njit(cache=True, inline="always")
def _pack_aux(n, m, b, phi_norm, phid_norm, q, qd, ratio, iters, aux):
    """``aux`` of an evaluation, as :func:`n_aux` lays it out: λ, ‖Φ‖, ‖Φ̇‖, the
    corrected q and q̇, q̈ (``b`` = [q̈; λ]), the pivot ratio and Newton iterations."""
    for i in range(m):
        aux[i] = b[n + i]
    aux[m] = phi_norm
    aux[m + 1] = phid_norm
    o = m + 2
    for i in range(n):
        aux[o + i] = q[i]
        aux[o + n + i] = qd[i]
        aux[o + 2 * n + i] = b[i]
    aux[o + 3 * n] = ratio
    aux[o + 3 * n + 1] = iters


@njit(cache=True, inline="always")
def _finish(n, m, alpha, beta2, ws, aux, iters, ratio):
    """Solve Eq. 7.2.1 at the state in ``ws`` and fill ``aux``; a status."""
    mass, force, phi, phi_q, phi_t, gamma, A, b, q, qd, dep, ind, Ju, r, _, _, active = ws
    status, phi_norm, phid_norm = solve_index1(
        n, m, qd, alpha, beta2, mass, force, phi, phi_q, phi_t, gamma, active, A, b
    )
    _pack_aux(n, m, b, phi_norm, phid_norm, q, qd, ratio, iters, aux)
    return status


@njit(cache=True, inline="always")
def gcp_rhs(kern, n, m, t, x, p, ctrl, ws, f, aux, state):
    """f = [v̇; v̈] for the independent state x = [v; v̇] (Haug 1989 §7.3.2)."""
    q, qd, ind = ws.q, ws.qd, ws.ind
    nv = n - m
    for i in range(nv):
        q[ind[i]] = x[i]
        qd[ind[i]] = x[nv + i]
    status, iters, ratio = _correct(kern, n, m, t, p, ctrl, ws)
    if status != OK:
        return status
    status = _finish(n, m, 0.0, 0.0, ws, aux, iters, ratio)
    if status != OK:
        return status
    b = ws.b
    for i in range(nv):
        f[i] = x[nv + i]
        f[nv + i] = b[ind[i]]
    if ratio < ctrl[C_PIVOT_RATIO]:
        return REPARTITION
    return OK


@njit(cache=True, inline="always")
def hybrid_rhs(kern, n, m, t, x, p, ctrl, ws, f, aux, state):
    """Baumgarte-stabilized f = [q̇; q̈] for x = [q; q̇], with a GCP correction of x
    in place when ‖Φ‖∞ exceeds ``ctrl[C_NEWTON_TOL]`` (Haug 1989 §7.3.5, step 5)
    and x is a ``state`` of the method.

    Haug corrects the state after a step.  The Adams methods evaluate only states
    (predicted, corrected, output points); a Runge–Kutta stage (``state`` False) lies
    off the constraints by far more than the tolerance, and f at a corrected stage is
    not the f the tableau combines: circle, 10 s, tol 1e-10, DOP853 2.0e-6 with stages
    corrected against 1.3e-7 with Baumgarte alone (design notes, stop 34).

    Near a kinematically singular configuration "the algorithm reverts to pure
    generalized coordinate partitioning" (§7.3.5): when the quality of the
    full-pivoting partition (smallest pivot over max|Φ_q|) falls below
    ``ctrl[C_PIVOT_RATIO]`` the state is corrected whatever ‖Φ‖ is and Eq. 7.2.1 is
    solved without the stabilization terms of Eq. 7.3.8, whose "additional terms
    ... often lead to divergence" there (§7.3.4).  It returns to Baumgarte as soon as
    the quality recovers.
    """
    mass, force, phi, phi_q, phi_t, gamma, A, b, q, qd, dep, ind, Ju, r, Wq, perm, _ = ws
    for i in range(n):
        q[i] = x[i]
        qd[i] = x[n + i]
    kern(t, q, qd, p, mass, force, phi, phi_q, phi_t, gamma)
    worst = 0.0
    for i in range(m):
        worst = max(worst, abs(phi[i]))
    quality = _choose_dependent(n, m, phi_q, Wq, perm, dep, ind)
    if quality == 0.0:
        return SINGULAR
    pure_gcp = quality < ctrl[C_PIVOT_RATIO]
    iters = 0
    if (state and worst > ctrl[C_NEWTON_TOL]) or pure_gcp:
        status, iters, _ = _correct(kern, n, m, t, p, ctrl, ws)
        if status != OK:
            return status
        for i in range(n):
            x[i] = q[i]
            x[n + i] = qd[i]
    alpha = 0.0 if pure_gcp else ctrl[0]
    beta = 0.0 if pure_gcp else ctrl[1]
    status = _finish(n, m, alpha, beta * beta, ws, aux, iters, quality)
    aux[m + 2 + 3 * n + 2] = 1.0 if pure_gcp else 0.0
    for i in range(n):
        f[i] = qd[i]
        f[n + i] = b[i]
    return status


# ---------------------------------------------------------------------------------------
# Sparse GCP (issue 11, item 1): Φ_u's LU on its static pattern, in the order that full
# pivoting chose, and the index-1 solve on the sparse KKT plan.


class PhiUPlan(NamedTuple):
    """Static-order LU of Φ_u (:func:`phi_u_plan`); values live in one array ``lu``.

    Step k pivots on row ``row_of[k]`` of Φ_q and coordinate ``col_of[k]``; its pivot is
    ``lu[piv[k]]``, its column of L the entries ``lu[l_pos[l_ptr[k]:l_ptr[k+1]]]`` of
    rows ``l_row`` (rows of Φ_q), its row of U ``lu[u_pos[u_ptr[k]:u_ptr[k+1]]]`` at the
    steps ``u_step``; ``upd[upd_ptr[k]:...]`` the targets of the L × U updates.
    ``e_pos[e]``: where Φ_q's entry e goes (−1: an independent coordinate).
    """

    row_of: np.ndarray
    col_of: np.ndarray
    piv: np.ndarray
    l_ptr: np.ndarray
    l_pos: np.ndarray
    l_row: np.ndarray
    u_ptr: np.ndarray
    u_pos: np.ndarray
    u_step: np.ndarray
    upd_ptr: np.ndarray
    upd: np.ndarray
    e_pos: np.ndarray
    size: int


def phi_u_plan(
    m: int, rows: np.ndarray, cols: np.ndarray, row_of: np.ndarray, col_of: np.ndarray
) -> PhiUPlan:
    """Symbolic LU of Φ_u on Φ_q's pattern (``rows``, ``cols``) restricted to the
    dependent coordinates, eliminating in the order the partition chose (:func:`pivot_order`,
    :func:`pivot_order_sparse`).

    The order is kept until the driver re-partitions: the pivot-ratio test of
    :func:`gcp_rhs_sparse` is exactly the check that it still works.  Fill follows
    the order; on a chain each step keeps its neighbours, so the factor stays O(m).
    """
    step_of_col = {int(c): k for k, c in enumerate(col_of.tolist())}
    row_cols: list[set[int]] = [set() for _ in range(m)]  # in steps (columns)
    col_rows: list[set[int]] = [set() for _ in range(m)]  # in rows of Φ_q
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        k = step_of_col.get(j)
        if k is not None:
            row_cols[i].add(k)
            col_rows[k].add(i)
    pos: dict[tuple[int, int], int] = {}

    def at(i: int, k: int) -> int:
        p = pos.get((i, k))
        if p is None:
            p = pos[(i, k)] = len(pos)
        return p

    for i in range(m):
        for k in sorted(row_cols[i]):
            at(i, k)
    done = np.zeros(m, dtype=bool)
    piv, l_ptr, l_pos, l_row = [], [0], [], []
    u_ptr, u_pos, u_step, upd_ptr, upd = [0], [], [], [0], []
    for k in range(m):
        r = int(row_of[k])
        done[r] = True
        piv.append(at(r, k))
        lower = sorted(i for i in col_rows[k] if not done[i])
        upper = sorted(c for c in row_cols[r] if c > k)
        for i in lower:
            l_pos.append(at(i, k))
            l_row.append(i)
            for c in upper:
                if c not in row_cols[i]:
                    row_cols[i].add(c)
                    col_rows[c].add(i)
                upd.append(at(i, c))
        for c in upper:
            u_pos.append(at(r, c))
            u_step.append(c)
        l_ptr.append(len(l_pos))
        u_ptr.append(len(u_pos))
        upd_ptr.append(len(upd))
    e_pos = np.array(
        [
            pos[(i, step_of_col[j])] if j in step_of_col else -1
            for i, j in zip(rows.tolist(), cols.tolist(), strict=True)
        ],
        dtype=np.int64,
    )

    def ints(x: list[int]) -> np.ndarray:
        return np.asarray(x, dtype=np.int64)

    return PhiUPlan(
        ints(list(row_of)), ints(list(col_of)), ints(piv), ints(l_ptr), ints(l_pos),
        ints(l_row), ints(u_ptr), ints(u_pos), ints(u_step), ints(upd_ptr), ints(upd), e_pos,
        len(pos),
    )  # fmt: skip


@njit(cache=True)
def phi_u_factor(plan, phi_q, lu):
    """LU of Φ_u (values ``phi_q`` on Φ_q's pattern) in the plan's order, in ``lu``.

    Returns min|pivot| (0.0 on a zero pivot), the numerator of the pivot ratio.
    """
    for k in range(plan.size):
        lu[k] = 0.0
    for e in range(phi_q.shape[0]):
        if plan.e_pos[e] >= 0:
            lu[plan.e_pos[e]] += phi_q[e]
    lo = math.inf
    u = 0
    for k in range(plan.piv.shape[0]):
        piv = lu[plan.piv[k]]
        if piv == 0.0 or not math.isfinite(piv):
            return 0.0
        lo = min(lo, abs(piv))
        inv = 1.0 / piv
        u0, u1 = plan.u_ptr[k], plan.u_ptr[k + 1]
        for s in range(plan.l_ptr[k], plan.l_ptr[k + 1]):
            ls = lu[plan.l_pos[s]] * inv
            lu[plan.l_pos[s]] = ls
            for t in range(u0, u1):
                lu[plan.upd[u]] -= ls * lu[plan.u_pos[t]]
                u += 1
    return lo


@njit(cache=True)
def phi_u_solve(plan, lu, r, z):
    """z ← Φ_u⁻¹ r with the factors of :func:`phi_u_factor`; ``r`` (by row of Φ_q) is
    overwritten, ``z[k]`` is the unknown of coordinate ``plan.col_of[k]``."""
    m = plan.piv.shape[0]
    for k in range(m):
        y = r[plan.row_of[k]]
        if y != 0.0:
            for s in range(plan.l_ptr[k], plan.l_ptr[k + 1]):
                r[plan.l_row[s]] -= lu[plan.l_pos[s]] * y
    for k in range(m - 1, -1, -1):
        s = r[plan.row_of[k]]
        for t in range(plan.u_ptr[k], plan.u_ptr[k + 1]):
            s -= lu[plan.u_pos[t]] * z[plan.u_step[t]]
        z[k] = s / lu[plan.piv[k]]


class GcpSparseWorkspace(NamedTuple):
    """The ``ws`` of :func:`gcp_rhs_sparse`: the fields of
    :class:`~mbdgen.runtime.index1.SparseWorkspace` (so :func:`solve_index1_sparse`
    takes it as is), with ``q``, ``qd``, ``dep``, ``ind`` as in :class:`GcpWorkspace`
    (the driver re-partitions through them), and Φ_u's plan and values."""

    mass: np.ndarray
    force: np.ndarray
    phi: np.ndarray
    phi_q: np.ndarray
    phi_t: np.ndarray
    gamma: np.ndarray
    active: np.ndarray
    plan: KktPlan
    q: np.ndarray
    qd: np.ndarray
    dep: np.ndarray
    ind: np.ndarray
    val: np.ndarray
    b: np.ndarray
    work: np.ndarray
    wrow: np.ndarray
    lu_plan: PhiUPlan
    lu: np.ndarray
    r: np.ndarray
    z: np.ndarray
    # the rest of SparseWorkspace's fields (Schur solve, iterative refinement)
    schur: SchurPlan
    bval: np.ndarray
    wval: np.ndarray
    sval: np.ndarray
    sdiag: np.ndarray
    rhs0: np.ndarray
    res: np.ndarray
    pair: PairPlan
    hinv: np.ndarray
    hclu: np.ndarray
    pseg: np.ndarray
    pblk: np.ndarray
    plsave: np.ndarray
    pdiag: np.ndarray
    py: np.ndarray
    pacc: np.ndarray


def gcp_sparse_workspace(
    module: Any, kkt: KktPlan, dep: np.ndarray, ind: np.ndarray, row_of: np.ndarray,
    col_of: np.ndarray, q0: np.ndarray, qd0: np.ndarray,
) -> GcpSparseWorkspace:  # fmt: skip
    """The workspace of :func:`gcp_rhs_sparse` for a module with ``LINEAR_ALGEBRA`` =
    "sparse", its index-1 plan ``kkt`` and a partition from :func:`pivot_order`."""
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    lu_plan = phi_u_plan(m, module.PHI_Q_ROWS, module.PHI_Q_COLS, row_of, col_of)
    base = sparse_workspace(
        n, m, module.MASS_ROWS, module.MASS_COLS, module.PHI_Q_ROWS, module.PHI_Q_COLS, plan=kkt,
        pair=module_pair_plan(module),
    )  # fmt: skip
    return GcpSparseWorkspace(
        base.mass, base.force, base.phi, base.phi_q, base.phi_t, base.gamma, base.active,
        kkt, np.array(q0, dtype=np.float64), np.array(qd0, dtype=np.float64),
        np.array(dep, dtype=np.int64), np.array(ind, dtype=np.int64),
        base.val, base.b, base.work, base.wrow,
        lu_plan, np.zeros(max(lu_plan.size, 1)), np.zeros(m), np.zeros(m),
        base.schur, base.bval, base.wval, base.sval, base.sdiag, base.rhs0, base.res,
        base.pair, base.hinv, base.hclu, base.pseg, base.pblk, base.plsave, base.pdiag,
        base.py, base.pacc,
    )  # fmt: skip


def dense_phi_q(ws: GcpSparseWorkspace) -> np.ndarray:
    """Φ_q (m × n) from the values in ``ws``."""
    kkt = ws.plan
    out = np.zeros((kkt.m, kkt.n))
    np.add.at(out, (kkt.a_rows, kkt.a_cols), ws.phi_q)
    return out


def repartitioned(ws: GcpSparseWorkspace, phi_q_pattern: tuple) -> tuple:
    """A new partition at the state in ``ws`` (its last evaluation): (workspace with the
    new Φ_u plan, dep, ind, quality), chosen on Φ_q's pattern by
    :func:`pivot_order_sparse`.  Raises ``ValueError`` as :func:`choose_partition`."""
    kkt = ws.plan
    dep, ind, quality, row_of, col_of = pivot_order_sparse(
        kkt.m, kkt.n, kkt.a_rows, kkt.a_cols, ws.phi_q
    )
    lu_plan = phi_u_plan(ws.plan.m, *phi_q_pattern, row_of, col_of)
    new = ws._replace(lu_plan=lu_plan, lu=np.zeros(max(lu_plan.size, 1)))
    new.dep[:] = dep
    new.ind[:] = ind
    return new, dep, ind, quality


@njit(cache=True, inline="always")
def _correct_sparse(kern, n, m, t, p, ctrl, ws):
    """:func:`_correct` on the sparse patterns: Newton on Φ(u, v, t) = 0 for u with
    Φ_u factored in the static order, then Φ_u u̇ = −Φ_t − Φ_v v̇ with the same factors
    (Φ_q does not depend on q̇); returns (status, Newton iterations, pivot ratio)."""
    q, qd, lp, lu, r, z = ws.q, ws.qd, ws.lu_plan, ws.lu, ws.r, ws.z
    kkt = ws.plan
    tol = ctrl[C_NEWTON_TOL]
    iters = 0
    while True:
        kern(t, q, qd, p, ws.mass, ws.force, ws.phi, ws.phi_q, ws.phi_t, ws.gamma)
        worst = 0.0
        for i in range(m):
            worst = max(worst, abs(ws.phi[i]))
        if worst <= tol:
            break
        if iters >= ctrl[C_NEWTON_ITERS] or not math.isfinite(worst):
            return NEWTON_FAILED, iters, 0.0
        if phi_u_factor(lp, ws.phi_q, lu) == 0.0:
            return SINGULAR, iters, 0.0
        for i in range(m):
            r[i] = -ws.phi[i]
        phi_u_solve(lp, lu, r, z)
        for k in range(m):
            q[lp.col_of[k]] += z[k]
        iters += 1
    lo = phi_u_factor(lp, ws.phi_q, lu)
    if lo == 0.0:
        return SINGULAR, iters, 0.0
    scale = 0.0
    for i in range(m):
        r[i] = -ws.phi_t[i]
    for e in range(kkt.a_rows.shape[0]):
        scale = max(scale, abs(ws.phi_q[e]))
        if lp.e_pos[e] < 0:
            r[kkt.a_rows[e]] -= ws.phi_q[e] * qd[kkt.a_cols[e]]
    phi_u_solve(lp, lu, r, z)
    for k in range(m):
        qd[lp.col_of[k]] = z[k]
    ratio = lo / scale if scale > 0.0 else 1.0
    # γ depends on q̇, which just changed: evaluate once more at the corrected state
    kern(t, q, qd, p, ws.mass, ws.force, ws.phi, ws.phi_q, ws.phi_t, ws.gamma)
    return OK, iters, ratio


@njit(cache=True, inline="always")
def gcp_rhs_sparse(kern, n, m, t, x, p, ctrl, ws, f, aux, state):
    """:func:`gcp_rhs` on the static sparse patterns (Haug 1989 §7.3.2): ``kern`` is
    a ``dynamics_values`` kernel, ``ws`` a :class:`GcpSparseWorkspace`.  The pivot
    ratio is that of the static-order LU of Φ_u; it falls below ``ctrl[2]`` when the
    order chosen at the last partition no longer works, and the driver re-partitions."""
    q, qd, ind = ws.q, ws.qd, ws.ind
    nv = n - m
    for i in range(nv):
        q[ind[i]] = x[i]
        qd[ind[i]] = x[nv + i]
    status, iters, ratio = _correct_sparse(kern, n, m, t, p, ctrl, ws)
    if status != OK:
        return status
    status, phi_norm, phid_norm = solve_index1_sparse(n, m, qd, 0.0, 0.0, ws)
    if status != OK:
        return status
    b = ws.b
    _pack_aux(n, m, b, phi_norm, phid_norm, q, qd, ratio, iters, aux)
    for i in range(nv):
        f[i] = x[nv + i]
        f[nv + i] = b[ind[i]]
    if ratio < ctrl[C_PIVOT_RATIO]:
        return REPARTITION
    return OK
