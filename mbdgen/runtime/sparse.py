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
"""

from __future__ import annotations

import heapq
from typing import NamedTuple

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


def kkt_plan(
    n: int,
    m: int,
    h_rows: np.ndarray,
    h_cols: np.ndarray,
    a_rows: np.ndarray,
    a_cols: np.ndarray,
) -> KktPlan:
    """Plan the sparse LU of K = [[H, B], [A, 0]] for the given patterns.

    ``h_rows, h_cols``: the pattern of H (the diagonal is always included);
    ``a_rows, a_cols``: the pattern of A (B has the transposed pattern, entry for
    entry).  Deterministic: the same patterns give the same plan.
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
    perm, struct = _order(n, m, [set(s) for s in adj], a_cols_of)
    iperm = np.empty(N, dtype=np.int64)
    iperm[np.asarray(perm, dtype=np.int64)] = np.arange(N)
    ptr = np.zeros(N + 1, dtype=np.int64)
    cols_new: list[list[int]] = []
    for k in range(N):
        c = sorted(int(iperm[u]) for u in struct[k])
        cols_new.append(c)
        ptr[k + 1] = ptr[k] + len(c)
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
        for t in range(lo, hi):
            val[N + t] *= inv
        u = plan.upd_ptr[k]
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
