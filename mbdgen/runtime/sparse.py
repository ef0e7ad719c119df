"""Sparse LU of saddle-point (KKT) matrices on a static pattern, inside jitted loops.

Every linear system of the integrators has the form

    K = [[H, B], [A, 0]],   H: n × n,  A: m × n,  B: n × m with the pattern of Aᵀ,

with H = M for the index-1 right side (Haug 1989, Eq. 7.2.1; B = Aᵀ = Φ_qᵀ) and H the
Newton matrix's top-left block for the implicit methods.  The pattern of K is known
when the model is compiled, so the expensive, combinatorial part is done once, in
Python, by :func:`kkt_plan`:

1. **Ordering.**  A minimum-degree ordering of the graph of K, constrained so that a
   multiplier λ_i is eliminated only after every coordinate its row of A touches.
   With that order every leading block of the permuted K is itself a saddle-point
   matrix [[H₁₁, B₁], [A₁, 0]] with A₁ of full row rank, hence non-singular when H
   is positive definite and the constraints independent: the LU needs no pivoting
   (Baraff 1996 orders a tree's KKT graph leaves-first for the same reason), a
   coordinate's pivot is positive and a multiplier's negative.  On a chain or a tree
   the order eliminates body by body and creates no fill beyond the neighbours of a
   joint, so factor and solve cost O(n + m).
2. **Symbolic factorization.**  The elimination itself gives the structure of each
   column of L (the uneliminated neighbours at elimination time); U has the
   transposed structure.  Every update of the right-looking LU is precomputed as a
   position in one value array, so the numeric factorization is a flat loop with no
   search and no allocation.
3. **Body-local rows.**  Where H alone is singular (the 4 × 4 block 4GᵀJ'G of a body
   in Euler parameters has p in its null space), a constraint row whose support lies
   in one connected block of H (the normalization pᵀp − 1 = 0) is added to the
   coordinate rows: row₁ += w B_{:,i} row₂ᵢ.  This is a row operation on K (the
   solution is unchanged) that makes the block positive definite;
   w = max |H_jj| over the row's support / (B_{:,i} · A_{i,:}).

The numeric routines (:func:`kkt_factor`, :func:`kkt_solve`) take only arrays, so
they are compiled once per installation and shared by every model and integrator.

Two additions for the index-1 system (B = Aᵀ, H = M symmetric):

4. **Schur complement** (:func:`schur_plan`, :func:`schur_factor`, :func:`schur_solve`)
   where H is block diagonal with small blocks (absolute coordinates): L D Lᵀ of each
   block, S = A H⁻¹ Aᵀ on a planned pattern, sparse LDLᵀ of S.  Opt-in: not yet faster
   per step than the LU here (design notes).
5. **Iterative refinement** (Li & Demmel 1998, static pivoting + refinement):
   :func:`kkt_refine` / :func:`schur_refine` / :func:`pair_refine` take one step
   x += K⁻¹(b − K x) when the pivots grew (:func:`kkt_pivot_growth` >
   ``REFINE_PIVOT_GROWTH``; a Schur factorization's growth > ``REFINE_GROWTH``).
6. **Schur complement in 2 × 2 blocks** (:func:`pair_plan`, :func:`pair_factor`,
   :func:`pair_solve`) where H is diagonal (planar bodies in centroidal coordinates):
   the rows of A in pairs (a planar joint's two rows), the coordinates in clusters of
   three (a body's x, y, φ), S = A H⁻¹ Aᵀ assembled from 2 × 3 segments and factored
   as a block L D Lᵀ on the group graph, every block operation straight-line code.
   On by default for the index-1 system, before the LU: a link of a planar chain
   costs a few block operations instead of ≈ 70 indirect scalar ones (design notes).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from mbdgen.runtime.linalg import PIVOT_TOL
from mbdgen.runtime.status import OK, SINGULAR


class KktPlan(NamedTuple):
    """Ordering, symbolic factorization and scatter maps of one KKT pattern.

    Indices of K: coordinates 0..n−1, multipliers n..n+m−1 ("old"); ``perm[k]`` is
    the old index eliminated k-th, ``iperm`` its inverse.  Values of the factors live
    in one array ``val`` of length N + 2·nnz: the pivots U_kk at [0, N), the strict
    lower part L (column k: rows ``nbr[ptr[k]:ptr[k+1]]``) at [N, N + nnz), the
    strict upper part U (row k: the same columns) at [N + nnz, N + 2·nnz).
    """

    n: int
    m: int
    perm: np.ndarray
    iperm: np.ndarray
    ptr: np.ndarray
    nbr: np.ndarray
    upd_ptr: np.ndarray  # updates of pivot k: upd[upd_ptr[k]:upd_ptr[k+1]], d_k² positions
    upd: np.ndarray
    h_pos: np.ndarray  # position in val of each entry of the H pattern (input order)
    a_pos: np.ndarray  # position in val of A's entry e: K[n + row_e, col_e]
    b_pos: np.ndarray  # position in val of B's entry e: K[col_e, n + row_e]
    a_rows: np.ndarray
    a_cols: np.ndarray
    aug_rows: np.ndarray  # rows of A added to the coordinate rows (body-local)
    aug_ptr: np.ndarray  # entries of A in row aug_rows[r]: aug_e[aug_ptr[r]:aug_ptr[r+1]]
    aug_e: np.ndarray
    aug_pair_ptr: np.ndarray  # positions of the pairs: aug_pair[aug_pair_ptr[r]:...]
    aug_pair: np.ndarray
    aug_diag: np.ndarray  # positions in val of the diagonal of H over the row's support

    @property
    def size(self) -> int:
        return self.n + self.m

    @property
    def nnz(self) -> int:
        return int(self.ptr[-1])

    @property
    def values_size(self) -> int:
        return self.size + 2 * self.nnz


def _components(n: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Connected components of the graph of an n × n pattern (union-find)."""
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    return np.array([find(i) for i in range(n)], dtype=np.int64)


def _order(n: int, m: int, adj: list[set[int]], a_cols_of: list[list[int]]) -> tuple:
    """Constrained minimum degree: returns (perm, the L structure per eliminated node).

    Ties go to the smaller old index, so the ordering is deterministic.
    """
    N = n + m
    blockers = [len(a_cols_of[i]) for i in range(m)]
    users: list[list[int]] = [[] for _ in range(n)]
    for i in range(m):
        for j in a_cols_of[i]:
            users[j].append(i)
    heap: list[tuple[int, int]] = []
    for v in range(n):
        heap.append((len(adj[v]), v))
    for i in range(m):
        if blockers[i] == 0:
            heap.append((len(adj[n + i]), n + i))
    heapq.heapify(heap)
    done = [False] * N
    perm: list[int] = []
    struct: list[list[int]] = []
    while heap:
        d, v = heapq.heappop(heap)
        if done[v] or d != len(adj[v]):
            continue
        done[v] = True
        nb = adj[v]
        perm.append(v)
        struct.append(sorted(nb))
        for u in nb:
            au = adj[u]
            au.discard(v)
            au |= nb
            au.discard(u)
        for u in nb:
            if u < n or blockers[u - n] == 0:
                heapq.heappush(heap, (len(adj[u]), u))
        adj[v] = set()
        if v < n:
            for i in users[v]:
                blockers[i] -= 1
                if blockers[i] == 0 and not done[n + i]:
                    heapq.heappush(heap, (len(adj[n + i]), n + i))
    if len(perm) != N:  # pragma: no cover - every node becomes eligible
        raise AssertionError("kkt_plan: ordering did not eliminate every node")
    return perm, struct


def _clique_order(n: int, cliques: Iterable[set[int]]) -> tuple:
    """Plain minimum-degree order (:func:`_order`, no constraint) of the graph on ``n``
    nodes in which each of ``cliques`` is complete (the rows or row groups of a Schur
    complement that share a block or cluster of H): (perm, iperm, ptr, cols, where),
    ``where[k][r]`` the position of row r in column k's structure ``cols[k]``."""
    adj: list[set[int]] = [set() for _ in range(n)]
    for clique in cliques:
        for v in clique:
            adj[v] |= clique
    for v in range(n):
        adj[v].discard(v)
    perm, struct = _order(n, 0, adj, [])
    iperm, ptr, cols = _structure(perm, struct)
    where = [{r: t for t, r in enumerate(c)} for c in cols]
    return perm, iperm, ptr, cols, where


def _structure(perm: list[int], struct: list) -> tuple[np.ndarray, np.ndarray, list[list[int]]]:
    """The inverse permutation and the column structure of L in the new order, from an
    elimination order and each pivot's uneliminated neighbours (:func:`_order`):
    column k holds rows ``cols[k]`` (sorted), stored at ``ptr[k]:ptr[k + 1]``."""
    N = len(perm)
    iperm = np.empty(N, dtype=np.int64)
    iperm[np.asarray(perm, dtype=np.int64)] = np.arange(N)
    ptr = np.zeros(N + 1, dtype=np.int64)
    cols: list[list[int]] = []
    for k in range(N):
        c = sorted(int(iperm[u]) for u in struct[k])
        cols.append(c)
        ptr[k + 1] = ptr[k] + len(c)
    return iperm, ptr, cols


def kkt_plan(
    n: int,
    m: int,
    h_rows: np.ndarray,
    h_cols: np.ndarray,
    a_rows: np.ndarray,
    a_cols: np.ndarray,
    b_extra: tuple[np.ndarray, np.ndarray] | None = None,
) -> KktPlan:
    """Plan the sparse LU of K = [[H, B], [A, 0]] for the given patterns.

    ``h_rows, h_cols``: the pattern of H (the diagonal is always included);
    ``a_rows, a_cols``: the pattern of A (B has the transposed pattern, entry for
    entry); ``b_extra``: (rows, columns) of entries of B beyond Aᵀ (coordinate row,
    multiplier column), made part of the factor's structure, their positions in the
    values given by :func:`kkt_position` (the d_λ of implicit user states,
    :mod:`mbdgen.runtime.sparse_newton`).  Deterministic: the same patterns give the
    same plan.
    """
    h_rows = np.asarray(h_rows, dtype=np.int64)
    h_cols = np.asarray(h_cols, dtype=np.int64)
    a_rows = np.asarray(a_rows, dtype=np.int64)
    a_cols = np.asarray(a_cols, dtype=np.int64)
    N = n + m
    # body-local rows of A: support inside one connected block of H
    comp = _components(n, h_rows, h_cols)
    a_cols_of: list[list[int]] = [[] for _ in range(m)]
    a_entries_of: list[list[int]] = [[] for _ in range(m)]
    for e, (i, j) in enumerate(zip(a_rows.tolist(), a_cols.tolist(), strict=True)):
        a_cols_of[i].append(j)
        a_entries_of[i].append(e)
    aug_rows = [
        i for i in range(m) if len(a_cols_of[i]) and len({int(comp[j]) for j in a_cols_of[i]}) == 1
    ]
    adj: list[set[int]] = [set() for _ in range(N)]
    for i, j in zip(h_rows.tolist(), h_cols.tolist(), strict=True):
        if i != j:
            adj[i].add(j)
            adj[j].add(i)
    for i in aug_rows:
        for a in a_cols_of[i]:
            for b in a_cols_of[i]:
                if a != b:
                    adj[a].add(b)
    for i, j in zip(a_rows.tolist(), a_cols.tolist(), strict=True):
        adj[n + i].add(j)
        adj[j].add(n + i)
    if b_extra is not None:
        for r, j in zip(
            np.asarray(b_extra[0]).tolist(), np.asarray(b_extra[1]).tolist(), strict=True
        ):
            adj[int(r)].add(n + int(j))
            adj[n + int(j)].add(int(r))
    perm, struct = _order(n, m, [set(s) for s in adj], a_cols_of)
    iperm, ptr, cols_new = _structure(perm, struct)
    nnz = int(ptr[-1])
    nbr = np.array([j for c in cols_new for j in c], dtype=np.int64)
    where = [{j: t for t, j in enumerate(c)} for c in cols_new]

    def pos(r_old: int, c_old: int) -> int:
        r, c = int(iperm[r_old]), int(iperm[c_old])
        if r == c:
            return r
        if r > c:
            return N + int(ptr[c]) + where[c][r]
        return N + nnz + int(ptr[r]) + where[r][c]

    upd_ptr = np.zeros(N + 1, dtype=np.int64)
    upd: list[int] = []
    for k in range(N):
        c = cols_new[k]
        for s in c:
            for t in c:
                if s == t:
                    upd.append(s)
                elif s > t:
                    upd.append(N + int(ptr[t]) + where[t][s])
                else:
                    upd.append(N + nnz + int(ptr[s]) + where[s][t])
        upd_ptr[k + 1] = len(upd)
    h_pos = np.array(
        [pos(i, j) for i, j in zip(h_rows.tolist(), h_cols.tolist(), strict=True)], dtype=np.int64
    )
    a_pos = np.array(
        [pos(n + i, j) for i, j in zip(a_rows.tolist(), a_cols.tolist(), strict=True)],
        dtype=np.int64,
    )
    b_pos = np.array(
        [pos(j, n + i) for i, j in zip(a_rows.tolist(), a_cols.tolist(), strict=True)],
        dtype=np.int64,
    )
    aug_ptr = [0]
    aug_e: list[int] = []
    aug_pair_ptr = [0]
    aug_pair: list[int] = []
    aug_diag: list[int] = []
    for i in aug_rows:
        es = a_entries_of[i]
        aug_e += es
        aug_ptr.append(len(aug_e))
        for e1 in es:
            for e2 in es:
                aug_pair.append(pos(int(a_cols[e1]), int(a_cols[e2])))
        aug_pair_ptr.append(len(aug_pair))
        aug_diag += [pos(int(a_cols[e]), int(a_cols[e])) for e in es]
    return KktPlan(
        n=n,
        m=m,
        perm=np.asarray(perm, dtype=np.int64),
        iperm=iperm,
        ptr=ptr,
        nbr=nbr,
        upd_ptr=upd_ptr,
        upd=np.asarray(upd, dtype=np.int64),
        h_pos=h_pos,
        a_pos=a_pos,
        b_pos=b_pos,
        a_rows=a_rows,
        a_cols=a_cols,
        aug_rows=np.asarray(aug_rows, dtype=np.int64),
        aug_ptr=np.asarray(aug_ptr, dtype=np.int64),
        aug_e=np.asarray(aug_e, dtype=np.int64),
        aug_pair_ptr=np.asarray(aug_pair_ptr, dtype=np.int64),
        aug_pair=np.asarray(aug_pair, dtype=np.int64),
        aug_diag=np.asarray(aug_diag, dtype=np.int64),
    )


def planned_once(module: Any, attribute: str, planner: Any) -> Any:
    """``planner(n, m, MASS_ROWS, MASS_COLS, PHI_Q_ROWS, PHI_Q_COLS)`` of a generated
    module, computed on its first use and kept on the module object as ``attribute``
    (planning is Python work that every run of the module would repeat)."""
    plan = getattr(module, attribute, None)
    if plan is None:
        plan = planner(
            module.N_COORDINATES, module.N_CONSTRAINTS, module.MASS_ROWS, module.MASS_COLS,
            module.PHI_Q_ROWS, module.PHI_Q_COLS,
        )  # fmt: skip
        setattr(module, attribute, plan)
    return plan


def module_plan(module: Any) -> KktPlan:
    """The :func:`kkt_plan` of a generated module's index-1 matrix [[M, Φ_qᵀ], [Φ_q, 0]]
    on its patterns, planned once per module object: every sparse user of that matrix
    (the index-1 right side, GCP, the rank test at t0, the output projection) shares it."""
    return planned_once(module, "_mbdgen_index1_plan", kkt_plan)


def kkt_position(plan: KktPlan, row: int, col: int) -> int:
    """The position in the values of :func:`kkt_assemble` of K's entry (``row``,
    ``col``) (K's order: coordinates, then multipliers); a ``ValueError`` if the entry
    is outside the factor's structure (give it to :func:`kkt_plan` as ``b_extra``)."""
    N = plan.n + plan.m
    nnz = int(plan.ptr[N])
    r, c = int(plan.iperm[row]), int(plan.iperm[col])
    if r == c:
        return r
    lo, k = (c, r) if r > c else (r, c)
    found = np.flatnonzero(plan.nbr[plan.ptr[lo] : plan.ptr[lo + 1]] == k)
    if found.size == 0:
        raise ValueError(f"K[{row}, {col}] is not in the planned structure")
    return (N if r > c else N + nnz) + int(plan.ptr[lo]) + int(found[0])


@njit(cache=True)
def kkt_assemble(
    plan: KktPlan,
    h_val: np.ndarray,
    a_val: np.ndarray,
    b_val: np.ndarray,
    active: np.ndarray,
    val: np.ndarray,
    wrow: np.ndarray,
) -> None:
    """Scatter H, A and B into ``val``; row i of A and column i of B enter with
    weight ``active[i]`` (0.0: λ_i = 0, an identity row and column of K).

    The body-local rows are added to the coordinate rows (module docstring, 3.);
    ``wrow[r]`` receives the weight w of augmented row r (for :func:`kkt_rhs`).
    """
    n = plan.n
    m = plan.m
    val[:] = 0.0
    for e in range(h_val.shape[0]):
        val[plan.h_pos[e]] += h_val[e]
    for e in range(a_val.shape[0]):
        w = active[plan.a_rows[e]]
        val[plan.a_pos[e]] += w * a_val[e]
        val[plan.b_pos[e]] += w * b_val[e]
    for i in range(m):
        val[plan.iperm[n + i]] += 1.0 - active[i]
    for r in range(plan.aug_rows.shape[0]):
        i = plan.aug_rows[r]
        w = active[i]
        lo = plan.aug_ptr[r]
        hi = plan.aug_ptr[r + 1]
        dot = 0.0
        scale = 0.0
        for t in range(lo, hi):
            e = plan.aug_e[t]
            dot += b_val[e] * a_val[e]
            d = abs(val[plan.aug_diag[t]])
            if d > scale:
                scale = d
        if w == 0.0 or dot == 0.0:
            wrow[r] = 0.0
            continue
        if scale == 0.0:
            scale = abs(dot)
        c = scale / dot
        wrow[r] = c
        u = plan.aug_pair_ptr[r]
        for t1 in range(lo, hi):
            bv = c * w * b_val[plan.aug_e[t1]]
            for t2 in range(lo, hi):
                val[plan.aug_pair[u]] += bv * w * a_val[plan.aug_e[t2]]
                u += 1


@njit(cache=True)
def kkt_rhs(
    plan: KktPlan, b_val: np.ndarray, active: np.ndarray, wrow: np.ndarray, rhs: np.ndarray
) -> None:
    """Apply the row operation of :func:`kkt_assemble` to a right side [r₁; r₂] in place."""
    n = plan.n
    for r in range(plan.aug_rows.shape[0]):
        c = wrow[r]
        if c == 0.0:
            continue
        i = plan.aug_rows[r]
        w = active[i]
        s = c * w * rhs[n + i]
        for t in range(plan.aug_ptr[r], plan.aug_ptr[r + 1]):
            e = plan.aug_e[t]
            rhs[plan.a_cols[e]] += s * b_val[e]


@njit(cache=True)
def kkt_factor(plan: KktPlan, val: np.ndarray) -> int:
    """LU of the assembled K in place in ``val`` (no pivoting: the plan's order).

    Returns ``SINGULAR`` when a pivot is not above ``PIVOT_TOL`` times the largest
    entry of K (redundant constraints, a singular mass block), else ``OK``.
    """
    N = plan.n + plan.m
    nnz = plan.ptr[N]
    scale = 0.0
    for k in range(val.shape[0]):
        v = abs(val[k])
        if v > scale:
            scale = v
    if scale == 0.0:
        return SINGULAR
    tol = PIVOT_TOL * scale
    ptr = plan.ptr
    upd = plan.upd
    for k in range(N):
        piv = val[k]
        if not abs(piv) > tol:
            return SINGULAR
        inv = 1.0 / piv
        lo = ptr[k]
        hi = ptr[k + 1]
        u = plan.upd_ptr[k]
        d = hi - lo
        # pivots with 2-4 neighbours (nearly all, on chains and trees) unrolled: a loop
        # of trip count 2-4 costs more in its set-up than its updates; the same
        # operations in the same order as the general loop below, so the same values
        if d == 2:
            l0 = val[N + lo] * inv
            l1 = val[N + lo + 1] * inv
            val[N + lo] = l0
            val[N + lo + 1] = l1
            u0 = val[N + nnz + lo]
            u1 = val[N + nnz + lo + 1]
            if l0 != 0.0:
                val[upd[u]] -= l0 * u0
                val[upd[u + 1]] -= l0 * u1
            if l1 != 0.0:
                val[upd[u + 2]] -= l1 * u0
                val[upd[u + 3]] -= l1 * u1
            continue
        if d == 3:
            l0 = val[N + lo] * inv
            l1 = val[N + lo + 1] * inv
            l2 = val[N + lo + 2] * inv
            val[N + lo] = l0
            val[N + lo + 1] = l1
            val[N + lo + 2] = l2
            u0 = val[N + nnz + lo]
            u1 = val[N + nnz + lo + 1]
            u2 = val[N + nnz + lo + 2]
            if l0 != 0.0:
                val[upd[u]] -= l0 * u0
                val[upd[u + 1]] -= l0 * u1
                val[upd[u + 2]] -= l0 * u2
            if l1 != 0.0:
                val[upd[u + 3]] -= l1 * u0
                val[upd[u + 4]] -= l1 * u1
                val[upd[u + 5]] -= l1 * u2
            if l2 != 0.0:
                val[upd[u + 6]] -= l2 * u0
                val[upd[u + 7]] -= l2 * u1
                val[upd[u + 8]] -= l2 * u2
            continue
        if d == 4:
            l0 = val[N + lo] * inv
            l1 = val[N + lo + 1] * inv
            l2 = val[N + lo + 2] * inv
            l3 = val[N + lo + 3] * inv
            val[N + lo] = l0
            val[N + lo + 1] = l1
            val[N + lo + 2] = l2
            val[N + lo + 3] = l3
            u0 = val[N + nnz + lo]
            u1 = val[N + nnz + lo + 1]
            u2 = val[N + nnz + lo + 2]
            u3 = val[N + nnz + lo + 3]
            if l0 != 0.0:
                val[upd[u]] -= l0 * u0
                val[upd[u + 1]] -= l0 * u1
                val[upd[u + 2]] -= l0 * u2
                val[upd[u + 3]] -= l0 * u3
            if l1 != 0.0:
                val[upd[u + 4]] -= l1 * u0
                val[upd[u + 5]] -= l1 * u1
                val[upd[u + 6]] -= l1 * u2
                val[upd[u + 7]] -= l1 * u3
            if l2 != 0.0:
                val[upd[u + 8]] -= l2 * u0
                val[upd[u + 9]] -= l2 * u1
                val[upd[u + 10]] -= l2 * u2
                val[upd[u + 11]] -= l2 * u3
            if l3 != 0.0:
                val[upd[u + 12]] -= l3 * u0
                val[upd[u + 13]] -= l3 * u1
                val[upd[u + 14]] -= l3 * u2
                val[upd[u + 15]] -= l3 * u3
            continue
        for t in range(lo, hi):
            val[N + t] *= inv
        for s in range(lo, hi):
            ls = val[N + s]
            if ls == 0.0:
                u += hi - lo
                continue
            for t in range(lo, hi):
                val[upd[u]] -= ls * val[N + nnz + t]
                u += 1
    return OK


@njit(cache=True)
def kkt_multiplier_pivot(plan: KktPlan, h_val: np.ndarray, a_val: np.ndarray) -> float:
    """The smallest |pivot| of a multiplier in the LU of K = [[H, Aᵀ], [A, 0]] (every
    row active, B = A), or −1.0 where the factorization fails or a pivot is not
    finite: the sparse rank test of :func:`mbdgen.analysis.assembly.sparse_rows_independent`
    in one call (assembly, factorization and the scan were three, plus their arrays)."""
    n = plan.n
    m = plan.m
    val = np.zeros(n + m + 2 * plan.ptr[n + m])  # KktPlan.values_size
    wrow = np.zeros(max(plan.aug_rows.shape[0], 1))
    kkt_assemble(plan, h_val, a_val, a_val, np.ones(m), val, wrow)
    if kkt_factor(plan, val) != OK:
        return -1.0
    smallest = np.inf
    for k in range(n + m):
        if plan.perm[k] >= n:
            v = abs(val[k])
            if not np.isfinite(v):
                return -1.0
            smallest = min(smallest, v)
    return smallest


@njit(cache=True)
def kkt_solve(plan: KktPlan, val: np.ndarray, rhs: np.ndarray, work: np.ndarray) -> None:
    """rhs ← K⁻¹ rhs with the factors of :func:`kkt_factor` (``work``: length N)."""
    N = plan.n + plan.m
    nnz = plan.ptr[N]
    ptr = plan.ptr
    nbr = plan.nbr
    for k in range(N):
        work[k] = rhs[plan.perm[k]]
    for k in range(N):
        y = work[k]
        if y != 0.0:
            for t in range(ptr[k], ptr[k + 1]):
                work[nbr[t]] -= val[N + t] * y
    for k in range(N - 1, -1, -1):
        s = work[k]
        for t in range(ptr[k], ptr[k + 1]):
            s -= val[N + nnz + t] * work[nbr[t]]
        work[k] = s / val[k]
    for k in range(N):
        rhs[plan.perm[k]] = work[k]


# ---------------------------------------------------------------------------------------
# Schur complement over a block-diagonal H (the index-1 system of absolute coordinates)
# ---------------------------------------------------------------------------------------

#: Largest block of H the Schur path factors densely; larger blocks keep the KKT LU.
SCHUR_MAX_BLOCK = 16
#: A pivot of S (or of a block of H) below this fraction of its diagonal entry before
#: elimination means cancellation: the evaluation falls back to the LU of K.
SCHUR_PIVOT_RATIO = 1e-10
#: Growth of the Schur factorization (largest ratio of a diagonal entry before
#: elimination to its pivot, over the blocks of H and over S) above which one step of
#: iterative refinement follows the solve (Li & Demmel 1998).
REFINE_GROWTH = 1e3
#: The same for the KKT LU: the largest ratio of a coordinate's diagonal entry of K to
#: its pivot (more than two digits lost to cancellation).  Measured on the examples at
#: random states: 310-333 on A05, at most 17.5 elsewhere.
REFINE_PIVOT_GROWTH = 1e2


class SchurPlan(NamedTuple):
    """Static structure of the Schur-complement solve of K = [[H, Aᵀ], [A, 0]] when
    the pattern of H is block diagonal (every block at most ``SCHUR_MAX_BLOCK``).

    Blocks of H are its connected components (coordinates ``bcoord[bptr[b]:bptr[b+1]]``,
    values dense row-major at ``bval[boff[b]:]``).  A segment s is the part of row
    ``seg_row[s]`` of A inside block ``seg_blk[s]`` (A entries ``seg_e[seg_ptr[s]:...]``
    at local indices ``seg_loc``); with each block H_b = L D Lᵀ, Ã = A L⁻ᵀ is stored
    densely per segment at ``seg_woff[s]``.  S = Ã D⁻¹ Ãᵀ is a flat list of products:
    ``tri_pos[u]`` (lower triangle of S in the elimination order) += Ã[tri_i1[u]] ·
    Ã[tri_i2[u]] · D⁻¹[tri_d[u]], over the pairs of segments of one block and their
    common columns.
    S is factored as LDLᵀ in a minimum-degree order (``perm``, ``ptr``, ``nbr``, ``upd``
    as in :class:`KktPlan`, with values [D | L] of length m + nnz).  ``ok`` is False when
    H is not block diagonal with small blocks (the plan is then empty and unused).
    """

    ok: bool
    n: int
    m: int
    bptr: np.ndarray
    bcoord: np.ndarray
    boff: np.ndarray
    h_rows: np.ndarray
    h_cols: np.ndarray
    h_bpos: np.ndarray
    coord_blk: np.ndarray
    coord_loc: np.ndarray
    aug_rows: np.ndarray
    aug_ptr: np.ndarray
    aug_e: np.ndarray
    aug_pair_ptr: np.ndarray
    aug_bpair: np.ndarray  # block positions of the pairs of each augmented row
    aug_bdiag: np.ndarray  # block positions of the diagonal over the row's support
    a_rows: np.ndarray
    a_cols: np.ndarray
    seg_row: np.ndarray
    seg_blk: np.ndarray
    seg_ptr: np.ndarray
    seg_e: np.ndarray
    seg_loc: np.ndarray
    seg_woff: np.ndarray
    tri_pos: np.ndarray
    tri_i1: np.ndarray
    tri_i2: np.ndarray
    tri_d: np.ndarray
    perm: np.ndarray
    iperm: np.ndarray
    ptr: np.ndarray
    nbr: np.ndarray
    upd_ptr: np.ndarray
    upd: np.ndarray
    upd_s: np.ndarray  # update u of S's column k: L values at m + upd_s[u], m + upd_t[u]
    upd_t: np.ndarray
    e_wpos: np.ndarray  # A entry e → its position in Ã (segment and local column)
    w_coord: np.ndarray  # position in Ã → its coordinate in block order
    w_srow: np.ndarray  # position in Ã → its row of A in S's elimination order
    big_blk: np.ndarray  # blocks larger than 1 × 1 (the others need no L)
    big_seg: np.ndarray  # segments in those blocks
    one_blk: np.ndarray  # 1 × 1 blocks

    @property
    def bval_size(self) -> int:
        return int(self.boff[-1]) + self.n  # the blocks' LDLᵀ, then D⁻¹ in block order

    @property
    def wval_size(self) -> int:
        return int(self.seg_woff[-1])

    @property
    def sval_size(self) -> int:
        return self.m + int(self.ptr[-1])

    @property
    def max_block(self) -> int:
        return int(np.max(np.diff(self.bptr))) if self.bptr.size > 1 else 1


def no_schur_plan(
    n: int, m: int, h_rows: np.ndarray, h_cols: np.ndarray, a_rows: np.ndarray, a_cols: np.ndarray
) -> SchurPlan:
    """A plan with ``ok`` False (no Schur solve); it keeps the patterns (for
    :func:`kkt_refine`)."""
    h_rows = np.asarray(h_rows, dtype=np.int64)
    h_cols = np.asarray(h_cols, dtype=np.int64)
    a_rows = np.asarray(a_rows, dtype=np.int64)
    a_cols = np.asarray(a_cols, dtype=np.int64)
    z = np.zeros(0, dtype=np.int64)
    one = np.zeros(1, dtype=np.int64)
    return SchurPlan(
        False, n, m, one, z, one, h_rows, h_cols, z, z, z, z, one, z, one, z, z, a_rows,
        a_cols, z, z, one, z, z, one, z, z, z, z, z, z, one, z, one, z, z, z, z, z, z, z,
        z, z,
    )  # fmt: skip


def schur_plan(
    n: int,
    m: int,
    h_rows: np.ndarray,
    h_cols: np.ndarray,
    a_rows: np.ndarray,
    a_cols: np.ndarray,
    kkt: KktPlan | None = None,
) -> SchurPlan:
    """Plan the Schur-complement solve (:func:`schur_factor`, :func:`schur_solve`) of
    K = [[H, Aᵀ], [A, 0]]: symmetric H whose pattern splits into small dense blocks
    (absolute coordinates: one block per body), B = Aᵀ.  The body-local rows of A
    (:func:`kkt_plan`, module docstring 3.) are added to their block as there.
    Deterministic; returns a plan with ``ok`` False where the structure does not fit.
    """
    h_rows = np.asarray(h_rows, dtype=np.int64)
    h_cols = np.asarray(h_cols, dtype=np.int64)
    a_rows = np.asarray(a_rows, dtype=np.int64)
    a_cols = np.asarray(a_cols, dtype=np.int64)
    if kkt is None:
        kkt = kkt_plan(n, m, h_rows, h_cols, a_rows, a_cols)
    pairs = set(zip(h_rows.tolist(), h_cols.tolist(), strict=True))
    if n == 0 or m == 0 or any((j, i) not in pairs for i, j in pairs):
        return no_schur_plan(n, m, h_rows, h_cols, a_rows, a_cols)
    comp = _components(n, h_rows, h_cols)
    members: dict[int, list[int]] = {}
    for j, r in enumerate(comp.tolist()):
        members.setdefault(r, []).append(j)
    roots = sorted(members)
    if max(len(v) for v in members.values()) > SCHUR_MAX_BLOCK:
        return no_schur_plan(n, m, h_rows, h_cols, a_rows, a_cols)
    coord_blk = np.empty(n, dtype=np.int64)
    coord_loc = np.empty(n, dtype=np.int64)
    bptr, bcoord, boff = [0], [], [0]
    for b, r in enumerate(roots):
        for t, j in enumerate(members[r]):
            coord_blk[j] = b
            coord_loc[j] = t
        bcoord += members[r]
        bptr.append(len(bcoord))
        boff.append(boff[-1] + len(members[r]) ** 2)

    def bpos(i: int, j: int) -> int:
        b = int(coord_blk[i])
        nb = bptr[b + 1] - bptr[b]
        return boff[b] + int(coord_loc[i]) * nb + int(coord_loc[j])

    h_bpos = [bpos(i, j) for i, j in zip(h_rows.tolist(), h_cols.tolist(), strict=True)]
    aug_bpair: list[int] = []
    aug_bdiag: list[int] = []
    for r in range(kkt.aug_rows.size):
        es = kkt.aug_e[kkt.aug_ptr[r] : kkt.aug_ptr[r + 1]].tolist()
        for e1 in es:
            for e2 in es:
                aug_bpair.append(bpos(int(a_cols[e1]), int(a_cols[e2])))
        aug_bdiag += [bpos(int(a_cols[e]), int(a_cols[e])) for e in es]
    # segments: (row, block) pairs in row-major order of A
    seg_of: dict[tuple[int, int], list[int]] = {}
    for e, (i, j) in enumerate(zip(a_rows.tolist(), a_cols.tolist(), strict=True)):
        seg_of.setdefault((i, int(coord_blk[j])), []).append(e)
    keys = sorted(seg_of)
    seg_row = [k[0] for k in keys]
    seg_blk = [k[1] for k in keys]
    seg_ptr, seg_e, seg_loc, seg_woff = [0], [], [], [0]
    for k in keys:
        es = seg_of[k]
        seg_e += es
        seg_loc += [int(coord_loc[a_cols[e]]) for e in es]
        seg_ptr.append(len(seg_e))
        seg_woff.append(seg_woff[-1] + bptr[k[1] + 1] - bptr[k[1]])
    segs_of_blk: list[list[int]] = [[] for _ in roots]
    for s, b in enumerate(seg_blk):
        segs_of_blk[b].append(s)
    # graph of S = A H⁻¹ Aᵀ: rows sharing a block
    perm, iperm, ptr, cols_new, where = _clique_order(
        m, ({seg_row[s] for s in ss} for ss in segs_of_blk)
    )

    def spos(r_old: int, c_old: int) -> int:
        r, c = sorted((int(iperm[r_old]), int(iperm[c_old])), reverse=True)
        return r if r == c else m + int(ptr[c]) + where[c][r]

    tri_pos, tri_i1, tri_i2, tri_d = [], [], [], []
    for b, ss in enumerate(segs_of_blk):
        for s1 in ss:
            for s2 in ss:
                if iperm[seg_row[s1]] >= iperm[seg_row[s2]]:
                    target = spos(seg_row[s1], seg_row[s2])
                    for k in range(bptr[b + 1] - bptr[b]):
                        tri_pos.append(target)
                        tri_i1.append(seg_woff[s1] + k)
                        tri_i2.append(seg_woff[s2] + k)
                        tri_d.append(bptr[b] + k)
    upd_ptr = np.zeros(m + 1, dtype=np.int64)
    upd: list[int] = []
    upd_s: list[int] = []
    upd_t: list[int] = []
    for k in range(m):
        c = cols_new[k]
        for a, s in enumerate(c):  # lower triangle, row s ≥ column t
            for b, t in enumerate(c[: a + 1]):
                upd.append(s if t == s else m + int(ptr[t]) + where[t][s])
                upd_s.append(int(ptr[k]) + a)
                upd_t.append(int(ptr[k]) + b)
        upd_ptr[k + 1] = len(upd)
    e_wpos = np.empty(a_rows.size, dtype=np.int64)
    w_coord = np.empty(seg_woff[-1], dtype=np.int64)
    w_srow = np.empty(seg_woff[-1], dtype=np.int64)
    for sg, k in enumerate(keys):
        for e, loc in zip(seg_of[k], seg_loc[seg_ptr[sg] : seg_ptr[sg + 1]], strict=True):
            e_wpos[e] = seg_woff[sg] + loc
        for t in range(seg_woff[sg + 1] - seg_woff[sg]):
            w_coord[seg_woff[sg] + t] = bptr[k[1]] + t
            w_srow[seg_woff[sg] + t] = iperm[k[0]]
    sizes = np.diff(np.asarray(bptr))
    i64 = np.int64
    return SchurPlan(
        ok=True,
        n=n,
        m=m,
        bptr=np.asarray(bptr, dtype=i64),
        bcoord=np.asarray(bcoord, dtype=i64),
        boff=np.asarray(boff, dtype=i64),
        h_rows=h_rows,
        h_cols=h_cols,
        h_bpos=np.asarray(h_bpos, dtype=i64),
        coord_blk=coord_blk,
        coord_loc=coord_loc,
        aug_rows=kkt.aug_rows.copy(),
        aug_ptr=kkt.aug_ptr.copy(),
        aug_e=kkt.aug_e.copy(),
        aug_pair_ptr=kkt.aug_pair_ptr.copy(),
        aug_bpair=np.asarray(aug_bpair, dtype=i64),
        aug_bdiag=np.asarray(aug_bdiag, dtype=i64),
        a_rows=a_rows,
        a_cols=a_cols,
        seg_row=np.asarray(seg_row, dtype=i64),
        seg_blk=np.asarray(seg_blk, dtype=i64),
        seg_ptr=np.asarray(seg_ptr, dtype=i64),
        seg_e=np.asarray(seg_e, dtype=i64),
        seg_loc=np.asarray(seg_loc, dtype=i64),
        seg_woff=np.asarray(seg_woff, dtype=i64),
        tri_pos=np.asarray(tri_pos, dtype=i64),
        tri_i1=np.asarray(tri_i1, dtype=i64),
        tri_i2=np.asarray(tri_i2, dtype=i64),
        tri_d=np.asarray(tri_d, dtype=i64),
        perm=np.asarray(perm, dtype=i64),
        iperm=iperm,
        ptr=ptr,
        nbr=np.array([j for c in cols_new for j in c], dtype=i64),
        upd_ptr=upd_ptr,
        upd=np.asarray(upd, dtype=i64),
        upd_s=np.asarray(upd_s, dtype=i64),
        upd_t=np.asarray(upd_t, dtype=i64),
        e_wpos=e_wpos,
        w_coord=w_coord,
        w_srow=w_srow,
        big_blk=np.flatnonzero(sizes > 1).astype(i64),
        big_seg=np.asarray([sg for sg, b in enumerate(seg_blk) if sizes[b] > 1], dtype=i64),
        one_blk=np.flatnonzero(sizes == 1).astype(i64),
    )


@njit(cache=True)
def schur_factor(
    plan: SchurPlan,
    h_val: np.ndarray,
    a_val: np.ndarray,
    active: np.ndarray,
    bval: np.ndarray,
    wval: np.ndarray,
    sval: np.ndarray,
    wrow: np.ndarray,
    sdiag: np.ndarray,
) -> tuple[int, float]:
    """Factor K = [[H, Aᵀ], [A, 0]] by its Schur complement (Haug 1989, Eq. 7.2.1
    solved as S λ = A H⁻¹ Q − γ, S = A H⁻¹ Aᵀ, q̈ = H⁻¹(Q − Aᵀλ)).

    Each block of H (with the body-local rows added, weight ``wrow[r]`` as in
    :func:`kkt_assemble`) is factored as dense L D Lᵀ; Ã = A L⁻ᵀ is formed on A's
    block pattern (``wval``, per segment), so S = Ã D⁻¹ Ãᵀ is a flat list of products
    on S's planned pattern, factored as sparse LDLᵀ.  Row i of A enters with weight
    ``active[i]`` (0.0 or 1.0; 0.0: λ_i = 0).  Returns (status, growth): ``SINGULAR``
    when a pivot falls below ``SCHUR_PIVOT_RATIO`` times its diagonal entry before
    elimination (cancellation or dependent rows: the caller falls back to the LU of K,
    which names a singular system); growth is the largest such ratio.
    """
    # the plan's arrays as locals
    aug_bdiag = plan.aug_bdiag
    aug_bpair = plan.aug_bpair
    aug_e = plan.aug_e
    aug_pair_ptr = plan.aug_pair_ptr
    aug_ptr = plan.aug_ptr
    aug_rows = plan.aug_rows
    boff = plan.boff
    bptr = plan.bptr
    h_bpos = plan.h_bpos
    iperm = plan.iperm
    m = plan.m
    tri_pos = plan.tri_pos
    tri_i1 = plan.tri_i1
    tri_i2 = plan.tri_i2
    tri_d = plan.tri_d
    ptr = plan.ptr
    seg_blk = plan.seg_blk
    seg_woff = plan.seg_woff
    upd = plan.upd
    upd_ptr = plan.upd_ptr
    upd_s = plan.upd_s
    upd_t = plan.upd_t
    a_rows = plan.a_rows
    e_wpos = plan.e_wpos
    big_blk = plan.big_blk
    big_seg = plan.big_seg
    one_blk = plan.one_blk
    growth = 1.0
    nblk = bptr.shape[0] - 1
    dinv = boff[nblk]  # D⁻¹ of the blocks, in block order, at bval[dinv:]
    bval[:] = 0.0
    for e in range(h_val.shape[0]):
        bval[h_bpos[e]] += h_val[e]
    for r in range(aug_rows.shape[0]):
        w = active[aug_rows[r]]
        lo = aug_ptr[r]
        hi = aug_ptr[r + 1]
        dot = 0.0
        scale = 0.0
        for t in range(lo, hi):
            a = a_val[aug_e[t]]
            dot += a * a
            d = abs(bval[aug_bdiag[t]])
            if d > scale:
                scale = d
        if w == 0.0 or dot == 0.0:
            wrow[r] = 0.0
            continue
        if scale == 0.0:
            scale = dot
        c = scale / dot
        wrow[r] = c
        u = aug_pair_ptr[r]
        for t1 in range(lo, hi):
            av = c * w * a_val[aug_e[t1]]
            for t2 in range(lo, hi):
                bval[aug_bpair[u]] += av * w * a_val[aug_e[t2]]
                u += 1
    # dense L D Lᵀ of each block (unit L below the diagonal, D on it)
    for b in one_blk:
        d = bval[boff[b]]
        if not d > 0.0:
            return SINGULAR, growth
        bval[dinv + bptr[b]] = 1.0 / d
    for b in big_blk:
        o = boff[b]
        nb = bptr[b + 1] - bptr[b]
        for k in range(nb):
            d0 = bval[o + k * nb + k]
            d = d0
            for j in range(k):
                d -= bval[o + k * nb + j] * bval[o + k * nb + j] * bval[o + j * nb + j]
            if not d > SCHUR_PIVOT_RATIO * abs(d0):
                return SINGULAR, growth
            if d0 > growth * d:
                growth = d0 / d
            bval[o + k * nb + k] = d
            bval[dinv + bptr[b] + k] = 1.0 / d
            for i in range(k + 1, nb):
                s = bval[o + i * nb + k]
                for j in range(k):
                    s -= bval[o + i * nb + j] * bval[o + k * nb + j] * bval[o + j * nb + j]
                bval[o + i * nb + k] = s / d
    # Ã = (w A) L⁻ᵀ per segment (a forward substitution with the block's unit L)
    wval[:] = 0.0
    for e in range(a_val.shape[0]):
        wval[e_wpos[e]] += active[a_rows[e]] * a_val[e]
    for s in big_seg:
        b = seg_blk[s]
        o = boff[b]
        nb = bptr[b + 1] - bptr[b]
        wo = seg_woff[s]
        for i in range(1, nb):
            x = wval[wo + i]
            for j in range(i):
                x -= bval[o + i * nb + j] * wval[wo + j]
            wval[wo + i] = x
    # S = Ã D⁻¹ Ãᵀ (lower triangle in the elimination order); removed rows: S_ii = 1
    sval[:] = 0.0
    for u in range(tri_pos.shape[0]):
        sval[tri_pos[u]] += wval[tri_i1[u]] * wval[tri_i2[u]] * bval[dinv + tri_d[u]]
    for i in range(m):
        sval[iperm[i]] += 1.0 - active[i]
    for k in range(m):
        sdiag[k] = sval[k]
    # sparse LDLᵀ of S, right-looking, on the planned positions
    for k in range(m):
        d = sval[k]
        if not d > SCHUR_PIVOT_RATIO * sdiag[k]:
            return SINGULAR, growth
        if sdiag[k] > growth * d:
            growth = sdiag[k] / d
        inv = 1.0 / d
        for u in range(upd_ptr[k], upd_ptr[k + 1]):
            sval[upd[u]] -= sval[m + upd_s[u]] * inv * sval[m + upd_t[u]]
        for t in range(ptr[k], ptr[k + 1]):
            sval[m + t] *= inv
    return OK, growth


@njit(cache=True)
def schur_solve(
    plan: SchurPlan,
    a_val: np.ndarray,
    active: np.ndarray,
    bval: np.ndarray,
    wval: np.ndarray,
    sval: np.ndarray,
    wrow: np.ndarray,
    rhs: np.ndarray,
    work: np.ndarray,
) -> None:
    """rhs = [r₁; r₂] ← K⁻¹ rhs with the factors of :func:`schur_factor`
    (``work``: length n + m).  With H = L D Lᵀ and y = D⁻¹ L⁻¹ r₁:
    S λ = Ã y − r₂ and q̈ = L⁻ᵀ (y − D⁻¹ Ãᵀ λ).  The body-local row operation is
    applied to r₁ here."""
    a_cols = plan.a_cols
    aug_e = plan.aug_e
    aug_ptr = plan.aug_ptr
    aug_rows = plan.aug_rows
    bcoord = plan.bcoord
    boff = plan.boff
    bptr = plan.bptr
    iperm = plan.iperm
    m = plan.m
    n = plan.n
    nbr = plan.nbr
    perm = plan.perm
    ptr = plan.ptr
    big_blk = plan.big_blk
    w_coord = plan.w_coord
    w_srow = plan.w_srow
    nblk = bptr.shape[0] - 1
    dinv = boff[nblk]
    for r in range(aug_rows.shape[0]):
        c = wrow[r]
        if c == 0.0:
            continue
        i = aug_rows[r]
        sc = c * active[i] * rhs[n + i]
        for t in range(aug_ptr[r], aug_ptr[r + 1]):
            e = aug_e[t]
            rhs[a_cols[e]] += sc * a_val[e]
    # v = L⁻¹ r₁ block by block, then y = D⁻¹ v, in block order in work[:n]
    for t in range(n):
        work[t] = rhs[bcoord[t]]
    for b in big_blk:
        o = boff[b]
        c0 = bptr[b]
        nb = bptr[b + 1] - c0
        for i in range(1, nb):
            x = work[c0 + i]
            for j in range(i):
                x -= bval[o + i * nb + j] * work[c0 + j]
            work[c0 + i] = x
    for t in range(n):
        work[t] *= bval[dinv + t]
    # S λ = Ã y − r₂, in the elimination order in work[n:]
    for k in range(m):
        i = perm[k]
        # a removed row (weight 0) reads λ_i = r₂ᵢ; S_ii = 1 there
        work[n + k] = -rhs[n + i] if active[i] != 0.0 else rhs[n + i]
    for u in range(w_coord.shape[0]):
        work[n + w_srow[u]] += wval[u] * work[w_coord[u]]
    for k in range(m):
        y = work[n + k]
        if y != 0.0:
            for t in range(ptr[k], ptr[k + 1]):
                work[n + nbr[t]] -= sval[m + t] * y
    for k in range(m):
        work[n + k] /= sval[k]
    for k in range(m - 1, -1, -1):
        y = work[n + k]
        for t in range(ptr[k], ptr[k + 1]):
            y -= sval[m + t] * work[n + nbr[t]]
        work[n + k] = y
    # q̈ = L⁻ᵀ (y − D⁻¹ Ãᵀ λ)
    for u in range(w_coord.shape[0]):
        c = w_coord[u]
        work[c] -= bval[dinv + c] * wval[u] * work[n + w_srow[u]]
    for b in big_blk:
        o = boff[b]
        c0 = bptr[b]
        nb = bptr[b + 1] - c0
        for i in range(nb - 2, -1, -1):
            x = work[c0 + i]
            for j in range(i + 1, nb):
                x -= bval[o + j * nb + i] * work[c0 + j]
            work[c0 + i] = x
    for t in range(n):
        rhs[bcoord[t]] = work[t]
    for i in range(m):
        rhs[n + i] = work[n + iperm[i]]


@njit(cache=True)
def schur_refine(
    plan: SchurPlan,
    h_val: np.ndarray,
    a_val: np.ndarray,
    active: np.ndarray,
    bval: np.ndarray,
    wval: np.ndarray,
    sval: np.ndarray,
    wrow: np.ndarray,
    rhs0: np.ndarray,
    x: np.ndarray,
    res: np.ndarray,
    work: np.ndarray,
) -> None:
    """One step of iterative refinement (Li & Demmel 1998): res = rhs0 − K x with K
    assembled from ``h_val``/``a_val`` (without the body-local row operation, which the
    solve applies), x += K⁻¹ res with the Schur factors."""
    # the plan's arrays as locals: a tuple field read inside a loop costs a
    # reference-count update per read
    n = plan.n
    m = plan.m
    _index1_residual(
        n, m, plan.h_rows, plan.h_cols, h_val, plan.a_rows, plan.a_cols, a_val, active, rhs0,
        x, res,
    )  # fmt: skip
    schur_solve(plan, a_val, active, bval, wval, sval, wrow, res, work)
    for k in range(n + m):
        x[k] += res[k]


@njit(cache=True, inline="always")
def _index1_residual(n, m, h_rows, h_cols, h_val, a_rows, a_cols, a_val, active, rhs0, x, res):
    """res = rhs0 − K x for K = [[H, Aᵀ], [A, 0]] from the values on the patterns
    (row i of A with weight ``active[i]``; S_ii = 1 − active[i] on a removed row)."""
    for k in range(n + m):
        res[k] = rhs0[k]
    for e in range(h_val.shape[0]):
        res[h_rows[e]] -= h_val[e] * x[h_cols[e]]
    for e in range(a_val.shape[0]):
        i = a_rows[e]
        j = a_cols[e]
        w = active[i] * a_val[e]
        res[j] -= w * x[n + i]
        res[n + i] -= w * x[j]
    for i in range(m):
        res[n + i] -= (1.0 - active[i]) * x[n + i]


@njit(cache=True)
def kkt_refine(
    plan: KktPlan,
    h_rows: np.ndarray,
    h_cols: np.ndarray,
    h_val: np.ndarray,
    a_val: np.ndarray,
    b_val: np.ndarray,
    active: np.ndarray,
    val: np.ndarray,
    wrow: np.ndarray,
    rhs0: np.ndarray,
    x: np.ndarray,
    res: np.ndarray,
    work: np.ndarray,
) -> None:
    """One step of iterative refinement of a :func:`kkt_solve` solution x of K x = rhs0
    (Li & Demmel 1998, static pivoting + refinement): res = rhs0 − K x with K from the
    values (H on ``h_rows, h_cols``), x += K⁻¹ res with the factors in ``val``."""
    n = plan.n
    m = plan.m
    for k in range(n + m):
        res[k] = rhs0[k]
    for e in range(h_val.shape[0]):
        res[h_rows[e]] -= h_val[e] * x[h_cols[e]]
    for e in range(a_val.shape[0]):
        i = plan.a_rows[e]
        j = plan.a_cols[e]
        w = active[i]
        res[j] -= w * b_val[e] * x[n + i]
        res[n + i] -= w * a_val[e] * x[j]
    for i in range(m):
        res[n + i] -= (1.0 - active[i]) * x[n + i]
    kkt_rhs(plan, b_val, active, wrow, res)
    kkt_solve(plan, val, res, work)
    for k in range(n + m):
        x[k] += res[k]


@njit(cache=True)
def kkt_pivot_growth(plan: KktPlan, diag0: np.ndarray, val: np.ndarray) -> float:
    """Largest ratio |K_kk| / |U_kk| over the coordinates (``diag0``: the first N
    entries of ``val`` before :func:`kkt_factor`, in elimination order), the growth that
    decides iterative refinement (:data:`REFINE_PIVOT_GROWTH`)."""
    growth = 1.0
    perm = plan.perm
    n = plan.n
    for k in range(n + plan.m):
        if perm[k] < n:
            d = abs(val[k])
            if abs(diag0[k]) > growth * d:
                growth = abs(diag0[k]) / d
    return growth


# ---------------------------------------------------------------------------------------
# Schur complement in 2 × 2 blocks over a diagonal H (planar absolute coordinates)
# ---------------------------------------------------------------------------------------


class PairPlan(NamedTuple):
    """Static structure of the Schur-complement solve of K = [[H, Aᵀ], [A, 0]] when H
    is diagonal (planar bodies in centroidal coordinates, point masses), in small dense
    blocks.

    The rows of A are taken in pairs (2g, 2g + 1), a "group" g (a planar joint's two
    rows are one group; an odd m gets a padding row, S = 1 there).  The coordinates
    that the same groups touch form clusters of at most 3 (a planar body's x, y, φ):
    coordinates ``clu_j[c]`` (−1: padding).  A segment s is the 2 × 3 part of A in the
    rows of group ``seg_g[s]`` and the columns of cluster ``seg_c[s]``: the entries
    ``seg_e[s]`` (−1: none).  S = A H⁻¹ Aᵀ is a block matrix on the group graph
    (groups sharing a coordinate), ordered by minimum degree (``perm``, ``iperm``;
    ``seg_k`` = iperm of the segment's group) and factored as block L D Lᵀ: blocks
    0 … G − 1 are the diagonal (D⁻¹ after the factorization), block G + t the t-th
    stored L block, column k's below-diagonal blocks in rows ``nbr[ptr[k]:ptr[k + 1]]``.
    ``tri_*``: S's assembly, S[tri_t] += a_{tri_s1} H⁻¹_{cluster} a_{tri_s2}ᵀ;
    ``upd_*``: the factor's updates S[upd_t] −= L[upd_a] D S[upd_c]ᵀ.  ``ok`` False: H
    is not diagonal (the plan is empty and unused).
    """

    ok: bool
    n: int
    m: int
    groups: int
    h_coord: np.ndarray  # coordinate of each entry of H's pattern
    clu_j: np.ndarray  # (clusters, 3)
    seg_g: np.ndarray
    seg_k: np.ndarray
    seg_c: np.ndarray
    seg_e: np.ndarray  # (segments, 2, 3)
    perm: np.ndarray
    iperm: np.ndarray
    ptr: np.ndarray
    nbr: np.ndarray
    tri_t: np.ndarray
    tri_s1: np.ndarray
    tri_s2: np.ndarray
    tri_c: np.ndarray
    upd_ptr: np.ndarray
    upd_a: np.ndarray
    upd_c: np.ndarray
    upd_t: np.ndarray

    @property
    def blocks(self) -> int:
        return self.groups + int(self.ptr[-1])


def no_pair_plan(n: int, m: int) -> PairPlan:
    """A plan with ``ok`` False (no block Schur solve)."""
    z = np.zeros(0, dtype=np.int64)
    one = np.zeros(1, dtype=np.int64)
    return PairPlan(
        False, n, m, 0, z, np.zeros((0, 3), dtype=np.int64), z, z, z,
        np.zeros((0, 2, 3), dtype=np.int64), z, z, one, z, z, z, z, z, one, z, z, z,
    )  # fmt: skip


def pair_plan(
    n: int, m: int, h_rows: np.ndarray, h_cols: np.ndarray, a_rows: np.ndarray, a_cols: np.ndarray
) -> PairPlan:
    """Plan :func:`pair_factor` / :func:`pair_solve` for K = [[H, Aᵀ], [A, 0]] with H
    diagonal (every coordinate on it once, nothing off it); ``ok`` False otherwise.
    Deterministic: the same patterns give the same plan."""
    h_rows = np.asarray(h_rows, dtype=np.int64)
    h_cols = np.asarray(h_cols, dtype=np.int64)
    a_rows = np.asarray(a_rows, dtype=np.int64)
    a_cols = np.asarray(a_cols, dtype=np.int64)
    if (
        n == 0
        or m == 0
        or h_rows.size != n
        or np.any(h_rows != h_cols)
        or set(h_rows.tolist()) != set(range(n))
    ):
        return no_pair_plan(n, m)
    G = (m + 1) // 2
    groups_of: list[set[int]] = [set() for _ in range(n)]
    for i, j in zip(a_rows.tolist(), a_cols.tolist(), strict=True):
        groups_of[j].add(i // 2)
    by_set: dict[tuple[int, ...], list[int]] = {}
    for j in range(n):
        if groups_of[j]:
            by_set.setdefault(tuple(sorted(groups_of[j])), []).append(j)
    clusters: list[list[int]] = []
    for js in sorted(by_set.values()):
        clusters += [js[t : t + 3] for t in range(0, len(js), 3)]
    clu_j = np.full((len(clusters), 3), -1, dtype=np.int64)
    clu_of = np.full(n, -1, dtype=np.int64)
    slot_of = np.zeros(n, dtype=np.int64)
    for c, js in enumerate(clusters):
        for t, j in enumerate(js):
            clu_j[c, t] = j
            clu_of[j] = c
            slot_of[j] = t
    seg_at: dict[tuple[int, int], np.ndarray] = {}
    for e, (i, j) in enumerate(zip(a_rows.tolist(), a_cols.tolist(), strict=True)):
        key = (int(clu_of[j]), i // 2)
        seg_at.setdefault(key, np.full((2, 3), -1, dtype=np.int64))[i % 2, slot_of[j]] = e
    keys = sorted(seg_at)  # by cluster, then group
    seg_c = [k[0] for k in keys]
    seg_g = [k[1] for k in keys]
    segs_of: list[list[int]] = [[] for _ in clusters]
    for s, c in enumerate(seg_c):
        segs_of[c].append(s)
    # graph of S's blocks: groups sharing a cluster
    perm, iperm, ptr, cols, where = _clique_order(G, ({seg_g[s] for s in ss} for ss in segs_of))

    def bpos(k1: int, k2: int) -> int:
        r, c = max(k1, k2), min(k1, k2)
        return r if r == c else G + int(ptr[c]) + where[c][r]

    tri_t, tri_s1, tri_s2, tri_c = [], [], [], []
    for c, ss in enumerate(segs_of):
        for s1 in ss:
            for s2 in ss:
                k1, k2 = int(iperm[seg_g[s1]]), int(iperm[seg_g[s2]])
                if k1 >= k2:
                    tri_t.append(bpos(k1, k2))
                    tri_s1.append(s1)
                    tri_s2.append(s2)
                    tri_c.append(c)
    upd_ptr = np.zeros(G + 1, dtype=np.int64)
    upd_a: list[int] = []
    upd_c: list[int] = []
    upd_t: list[int] = []
    for k in range(G):
        for ta, a in enumerate(cols[k]):
            for tc, c in enumerate(cols[k][: ta + 1]):
                upd_a.append(int(ptr[k]) + ta)
                upd_c.append(int(ptr[k]) + tc)
                upd_t.append(bpos(a, c))
        upd_ptr[k + 1] = len(upd_a)
    i64 = np.int64
    return PairPlan(
        ok=True,
        n=n,
        m=m,
        groups=G,
        h_coord=h_rows.copy(),
        clu_j=clu_j,
        seg_g=np.asarray(seg_g, dtype=i64),
        seg_k=np.asarray([iperm[g] for g in seg_g], dtype=i64),
        seg_c=np.asarray(seg_c, dtype=i64),
        seg_e=np.array([seg_at[k] for k in keys], dtype=i64).reshape(-1, 2, 3),
        perm=np.asarray(perm, dtype=i64),
        iperm=iperm,
        ptr=ptr,
        nbr=np.array([r for c in cols for r in c], dtype=i64),
        tri_t=np.asarray(tri_t, dtype=i64),
        tri_s1=np.asarray(tri_s1, dtype=i64),
        tri_s2=np.asarray(tri_s2, dtype=i64),
        tri_c=np.asarray(tri_c, dtype=i64),
        upd_ptr=upd_ptr,
        upd_a=np.asarray(upd_a, dtype=i64),
        upd_c=np.asarray(upd_c, dtype=i64),
        upd_t=np.asarray(upd_t, dtype=i64),
    )


@njit(cache=True)
def pair_factor(
    plan: PairPlan,
    h_val: np.ndarray,
    a_val: np.ndarray,
    active: np.ndarray,
    hinv: np.ndarray,
    hclu: np.ndarray,
    seg: np.ndarray,
    sblk: np.ndarray,
    lsave: np.ndarray,
    sdiag: np.ndarray,
) -> tuple[int, float]:
    """Factor K = [[H, Aᵀ], [A, 0]] (H diagonal) by its Schur complement in 2 × 2
    blocks (Haug 1989, Eq. 7.2.1 solved as S λ = A H⁻¹ Q − γ, S = A H⁻¹ Aᵀ): ``hinv``
    ← H⁻¹, ``hclu`` ← H⁻¹ per cluster (clusters × 3, 0 on padding), ``seg`` ← the weighted 2 × 3
    segments of A, ``sblk`` ← block L D Lᵀ of S with D⁻¹ on its diagonal blocks,
    ``lsave`` ← the L blocks before scaling by D⁻¹, ``sdiag`` ← the diagonal of S
    before the elimination (groups × 2).  Row i of A enters with weight ``active[i]``
    (0.0: λ_i = 0, S_ii = 1).  Returns (status, growth) as :func:`schur_factor`:
    ``SINGULAR`` where H has a pivot ≤ 0 or a pivot of S (a block's first pivot or its
    Schur complement) falls below ``SCHUR_PIVOT_RATIO`` times its diagonal entry before
    elimination, so that the caller falls back to the LU of K.
    """
    G = plan.groups
    m = plan.m
    h_coord = plan.h_coord
    clu_j = plan.clu_j
    seg_e = plan.seg_e
    seg_g = plan.seg_g
    iperm = plan.iperm
    ptr = plan.ptr
    tri_t = plan.tri_t
    tri_s1 = plan.tri_s1
    tri_s2 = plan.tri_s2
    tri_c = plan.tri_c
    upd_ptr = plan.upd_ptr
    upd_a = plan.upd_a
    upd_c = plan.upd_c
    upd_t = plan.upd_t
    growth = 1.0
    for e in range(h_val.shape[0]):
        d = h_val[e]
        if not d > 0.0:
            return SINGULAR, growth
        hinv[h_coord[e]] = 1.0 / d
    for c in range(clu_j.shape[0]):
        for t in range(3):
            j = clu_j[c, t]
            hclu[c, t] = hinv[j] if j >= 0 else 0.0
    for s in range(seg_e.shape[0]):
        g = seg_g[s]
        for r in range(2):
            w = active[2 * g + r] if 2 * g + r < m else 0.0
            for t in range(3):
                e = seg_e[s, r, t]
                seg[s, r, t] = w * a_val[e] if e >= 0 else 0.0
    sblk[:] = 0.0
    for u in range(tri_t.shape[0]):
        t = tri_t[u]
        s1 = tri_s1[u]
        s2 = tri_s2[u]
        c = tri_c[u]
        h0 = hclu[c, 0]
        h1 = hclu[c, 1]
        h2 = hclu[c, 2]
        a00 = seg[s1, 0, 0] * h0
        a01 = seg[s1, 0, 1] * h1
        a02 = seg[s1, 0, 2] * h2
        a10 = seg[s1, 1, 0] * h0
        a11 = seg[s1, 1, 1] * h1
        a12 = seg[s1, 1, 2] * h2
        b00 = seg[s2, 0, 0]
        b01 = seg[s2, 0, 1]
        b02 = seg[s2, 0, 2]
        b10 = seg[s2, 1, 0]
        b11 = seg[s2, 1, 1]
        b12 = seg[s2, 1, 2]
        sblk[t, 0, 0] += a00 * b00 + a01 * b01 + a02 * b02
        sblk[t, 0, 1] += a00 * b10 + a01 * b11 + a02 * b12
        sblk[t, 1, 0] += a10 * b00 + a11 * b01 + a12 * b02
        sblk[t, 1, 1] += a10 * b10 + a11 * b11 + a12 * b12
    for i in range(m):  # a removed row: S_ii = 1
        sblk[iperm[i // 2], i % 2, i % 2] += 1.0 - active[i]
    if m % 2 == 1:  # the padding row
        sblk[iperm[G - 1], 1, 1] += 1.0
    for k in range(G):
        sdiag[k, 0] = sblk[k, 0, 0]
        sdiag[k, 1] = sblk[k, 1, 1]
    for k in range(G):
        d00 = sblk[k, 0, 0]
        d01 = sblk[k, 0, 1]
        d10 = sblk[k, 1, 0]
        d11 = sblk[k, 1, 1]
        if not d00 > SCHUR_PIVOT_RATIO * sdiag[k, 0]:
            return SINGULAR, growth
        c11 = d11 - d10 * d01 / d00  # the block's second pivot
        if not c11 > SCHUR_PIVOT_RATIO * sdiag[k, 1]:
            return SINGULAR, growth
        if sdiag[k, 0] > growth * d00:
            growth = sdiag[k, 0] / d00
        if sdiag[k, 1] > growth * c11:
            growth = sdiag[k, 1] / c11
        inv = 1.0 / (d00 * c11)
        i00 = d11 * inv
        i01 = -d01 * inv
        i10 = -d10 * inv
        i11 = d00 * inv
        sblk[k, 0, 0] = i00
        sblk[k, 0, 1] = i01
        sblk[k, 1, 0] = i10
        sblk[k, 1, 1] = i11
        for t in range(G + ptr[k], G + ptr[k + 1]):
            s00 = sblk[t, 0, 0]
            s01 = sblk[t, 0, 1]
            s10 = sblk[t, 1, 0]
            s11 = sblk[t, 1, 1]
            lsave[t - G, 0, 0] = s00
            lsave[t - G, 0, 1] = s01
            lsave[t - G, 1, 0] = s10
            lsave[t - G, 1, 1] = s11
            sblk[t, 0, 0] = s00 * i00 + s01 * i10
            sblk[t, 0, 1] = s00 * i01 + s01 * i11
            sblk[t, 1, 0] = s10 * i00 + s11 * i10
            sblk[t, 1, 1] = s10 * i01 + s11 * i11
        for u in range(upd_ptr[k], upd_ptr[k + 1]):
            la = G + upd_a[u]
            lc = upd_c[u]
            tg = upd_t[u]
            l00 = sblk[la, 0, 0]
            l01 = sblk[la, 0, 1]
            l10 = sblk[la, 1, 0]
            l11 = sblk[la, 1, 1]
            c00 = lsave[lc, 0, 0]
            c01 = lsave[lc, 0, 1]
            c10 = lsave[lc, 1, 0]
            c11 = lsave[lc, 1, 1]
            sblk[tg, 0, 0] -= l00 * c00 + l01 * c01
            sblk[tg, 0, 1] -= l00 * c10 + l01 * c11
            sblk[tg, 1, 0] -= l10 * c00 + l11 * c01
            sblk[tg, 1, 1] -= l10 * c10 + l11 * c11
    return OK, growth


@njit(cache=True)
def pair_solve(
    plan: PairPlan,
    active: np.ndarray,
    hinv: np.ndarray,
    hclu: np.ndarray,
    seg: np.ndarray,
    sblk: np.ndarray,
    rhs: np.ndarray,
    y: np.ndarray,
    acc: np.ndarray,
) -> None:
    """rhs = [r₁; r₂] ← K⁻¹ rhs with the factors of :func:`pair_factor` (``y``: a
    (groups, 2), ``acc`` a (clusters, 3) work array): S λ = A H⁻¹ r₁ − r₂, then
    q̈ = H⁻¹ (r₁ − Aᵀ λ)."""
    G = plan.groups
    m = plan.m
    n = plan.n
    clu_j = plan.clu_j
    seg_c = plan.seg_c
    seg_k = plan.seg_k
    iperm = plan.iperm
    ptr = plan.ptr
    nbr = plan.nbr
    for k in range(G):
        y[k, 0] = 0.0
        y[k, 1] = 0.0
    for i in range(m):
        # a removed row (weight 0) reads λ_i = r₂ᵢ; S_ii = 1 there
        y[iperm[i // 2], i % 2] = -rhs[n + i] if active[i] != 0.0 else rhs[n + i]
    for c in range(clu_j.shape[0]):
        for t in range(3):
            j = clu_j[c, t]
            acc[c, t] = hclu[c, t] * rhs[j] if j >= 0 else 0.0
    for s in range(seg_k.shape[0]):
        k = seg_k[s]
        c = seg_c[s]
        f0 = acc[c, 0]
        f1 = acc[c, 1]
        f2 = acc[c, 2]
        y[k, 0] += seg[s, 0, 0] * f0 + seg[s, 0, 1] * f1 + seg[s, 0, 2] * f2
        y[k, 1] += seg[s, 1, 0] * f0 + seg[s, 1, 1] * f1 + seg[s, 1, 2] * f2
    for k in range(G):
        y0 = y[k, 0]
        y1 = y[k, 1]
        for t in range(ptr[k], ptr[k + 1]):
            i = nbr[t]
            y[i, 0] -= sblk[G + t, 0, 0] * y0 + sblk[G + t, 0, 1] * y1
            y[i, 1] -= sblk[G + t, 1, 0] * y0 + sblk[G + t, 1, 1] * y1
    for k in range(G - 1, -1, -1):
        z0 = sblk[k, 0, 0] * y[k, 0] + sblk[k, 0, 1] * y[k, 1]
        z1 = sblk[k, 1, 0] * y[k, 0] + sblk[k, 1, 1] * y[k, 1]
        for t in range(ptr[k], ptr[k + 1]):
            i = nbr[t]
            z0 -= sblk[G + t, 0, 0] * y[i, 0] + sblk[G + t, 1, 0] * y[i, 1]
            z1 -= sblk[G + t, 0, 1] * y[i, 0] + sblk[G + t, 1, 1] * y[i, 1]
        y[k, 0] = z0
        y[k, 1] = z1
    for i in range(m):
        rhs[n + i] = y[iperm[i // 2], i % 2]
    for c in range(clu_j.shape[0]):
        acc[c, 0] = 0.0
        acc[c, 1] = 0.0
        acc[c, 2] = 0.0
    for s in range(seg_k.shape[0]):
        k = seg_k[s]
        c = seg_c[s]
        l0 = y[k, 0]
        l1 = y[k, 1]
        acc[c, 0] += seg[s, 0, 0] * l0 + seg[s, 1, 0] * l1
        acc[c, 1] += seg[s, 0, 1] * l0 + seg[s, 1, 1] * l1
        acc[c, 2] += seg[s, 0, 2] * l0 + seg[s, 1, 2] * l1
    for c in range(clu_j.shape[0]):
        for t in range(3):
            j = clu_j[c, t]
            if j >= 0:
                rhs[j] -= acc[c, t]
    for j in range(n):
        rhs[j] *= hinv[j]


@njit(cache=True)
def pair_refine(
    plan: PairPlan,
    h_val: np.ndarray,
    a_val: np.ndarray,
    active: np.ndarray,
    a_rows: np.ndarray,
    a_cols: np.ndarray,
    hinv: np.ndarray,
    hclu: np.ndarray,
    seg: np.ndarray,
    sblk: np.ndarray,
    rhs0: np.ndarray,
    x: np.ndarray,
    res: np.ndarray,
    y: np.ndarray,
    acc: np.ndarray,
) -> None:
    """One step of iterative refinement (Li & Demmel 1998) with the factors of
    :func:`pair_factor`: res = rhs0 − K x, x += K⁻¹ res."""
    n = plan.n
    m = plan.m
    h = plan.h_coord
    _index1_residual(n, m, h, h, h_val, a_rows, a_cols, a_val, active, rhs0, x, res)
    pair_solve(plan, active, hinv, hclu, seg, sblk, res, y, acc)
    for k in range(n + m):
        x[k] += res[k]
