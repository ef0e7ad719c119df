"""Dense in-place linear algebra for small systems inside jitted loops (no allocation)."""

from __future__ import annotations

import numpy as np
from numba import njit

from mbdgen.runtime.status import OK, SINGULAR


def row_weights(m: int, active: np.ndarray | None) -> np.ndarray:
    """The (m,) weights of the constraint rows, a workspace's own copy: 1.0 for a row to
    enforce, 0.0 for a redundant row left out (its equation becomes λ_i = 0); all 1.0
    when ``active`` is None."""
    weights = np.ones(m) if active is None else np.array(active, dtype=np.float64)
    if weights.shape != (m,):
        raise ValueError(f"active has shape {weights.shape}, expected ({m},)")
    return weights


#: A pivot below this fraction of the largest matrix entry counts as zero.
PIVOT_TOL = 1e-13


@njit(cache=True, inline="always")
def lu_solve_inplace(A: np.ndarray, b: np.ndarray, N: int) -> int:
    """Solve ``A x = b`` (both N × N / N) by Gaussian elimination, partial pivoting.

    ``A`` is destroyed; ``b`` is overwritten by ``x``.  ``N`` is passed (not read
    from ``A.shape``) so that a caller with constant sizes gets unrolled loops.
    Returns ``SINGULAR`` when a pivot is below ``PIVOT_TOL`` times the largest entry
    of ``A``, else ``OK``.
    Works on the indefinite augmented matrix of Haug 1989, Eq. 7.2.1, whose zero
    block partial pivoting handles by row exchange.
    """
    scale = 0.0
    for i in range(N):
        for j in range(N):
            v = abs(A[i, j])
            if v > scale:
                scale = v
    if scale == 0.0:
        return SINGULAR
    tol = PIVOT_TOL * scale
    for k in range(N):
        piv = k
        best = abs(A[k, k])
        for i in range(k + 1, N):
            v = abs(A[i, k])
            if v > best:
                best = v
                piv = i
        if not best > tol:
            return SINGULAR
        if piv != k:
            for j in range(k, N):
                tmp = A[k, j]
                A[k, j] = A[piv, j]
                A[piv, j] = tmp
            tmp = b[k]
            b[k] = b[piv]
            b[piv] = tmp
        inv = 1.0 / A[k, k]
        for i in range(k + 1, N):
            f = A[i, k] * inv
            if f != 0.0:
                for j in range(k + 1, N):
                    A[i, j] -= f * A[k, j]
                b[i] -= f * b[k]
    for i in range(N - 1, -1, -1):
        s = b[i]
        for j in range(i + 1, N):
            s -= A[i, j] * b[j]
        b[i] = s / A[i, i]
    return OK


@njit(cache=True, inline="always")
def cholesky_inplace(A: np.ndarray, N: int) -> int:
    """Factor the symmetric positive-definite ``A`` = L Lᵀ; L overwrites A's lower triangle.

    Returns ``SINGULAR`` when a pivot is not above ``PIVOT_TOL`` times the largest
    diagonal entry (A not positive definite, e.g. redundant constraints).
    """
    scale = 0.0
    for i in range(N):
        if A[i, i] > scale:
            scale = A[i, i]
    tol = PIVOT_TOL * scale
    for j in range(N):
        s = A[j, j]
        for k in range(j):
            s -= A[j, k] * A[j, k]
        if not s > tol:
            return SINGULAR
        d = np.sqrt(s)
        A[j, j] = d
        for i in range(j + 1, N):
            s = A[i, j]
            for k in range(j):
                s -= A[i, k] * A[j, k]
            A[i, j] = s / d
    return OK


@njit(cache=True, inline="always")
def cholesky_solve(L: np.ndarray, b: np.ndarray, N: int) -> None:
    """b ← (L Lᵀ)⁻¹ b with L from :func:`cholesky_inplace`."""
    for i in range(N):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * b[k]
        b[i] = s / L[i, i]
    for i in range(N - 1, -1, -1):
        s = b[i]
        for k in range(i + 1, N):
            s -= L[k, i] * b[k]
        b[i] = s / L[i, i]


@njit(cache=True, inline="always")
def lu_factor_inplace(A: np.ndarray, piv: np.ndarray, N: int) -> int:
    """Factor ``A`` = P L U in place (partial pivoting), for :func:`lu_solve_factored`.

    L (unit diagonal, below) and U (on and above the diagonal) overwrite ``A``;
    ``piv[k]`` is the row exchanged with row k at elimination step k.  The same
    pivoting and tolerance as :func:`lu_solve_inplace` (``SINGULAR`` when a pivot is
    below ``PIVOT_TOL`` times the largest entry), so that one factorization can serve
    several right sides: a modified Newton method keeps it over iterations and steps.
    """
    scale = 0.0
    for i in range(N):
        for j in range(N):
            v = abs(A[i, j])
            if v > scale:
                scale = v
    if scale == 0.0:
        return SINGULAR
    tol = PIVOT_TOL * scale
    for k in range(N):
        p = k
        best = abs(A[k, k])
        for i in range(k + 1, N):
            v = abs(A[i, k])
            if v > best:
                best = v
                p = i
        piv[k] = p
        if not best > tol:
            return SINGULAR
        if p != k:
            for j in range(N):
                tmp = A[k, j]
                A[k, j] = A[p, j]
                A[p, j] = tmp
        inv = 1.0 / A[k, k]
        for i in range(k + 1, N):
            f = A[i, k] * inv
            A[i, k] = f
            if f != 0.0:
                for j in range(k + 1, N):
                    A[i, j] -= f * A[k, j]
    return OK


@njit(cache=True, inline="always")
def lu_solve_factored(LU: np.ndarray, piv: np.ndarray, b: np.ndarray, N: int) -> None:
    """b ← A⁻¹ b with ``LU``, ``piv`` from :func:`lu_factor_inplace` (both left intact)."""
    for k in range(N):
        p = piv[k]
        if p != k:
            tmp = b[k]
            b[k] = b[p]
            b[p] = tmp
    for i in range(1, N):
        s = b[i]
        for j in range(i):
            s -= LU[i, j] * b[j]
        b[i] = s
    for i in range(N - 1, -1, -1):
        s = b[i]
        for j in range(i + 1, N):
            s -= LU[i, j] * b[j]
        b[i] = s / LU[i, i]


@njit(cache=True, inline="always")
def lu_solve_transposed(LU: np.ndarray, piv: np.ndarray, b: np.ndarray, N: int) -> None:
    """b ← A⁻ᵀ b with ``LU``, ``piv`` from :func:`lu_factor_inplace` (both left intact).

    With P A = L U, Aᵀ = Uᵀ Lᵀ P: solve Uᵀ y = b forward, Lᵀ z = y backward, then
    undo the row exchanges in reverse order.
    """
    for i in range(N):
        s = b[i]
        for j in range(i):
            s -= LU[j, i] * b[j]
        b[i] = s / LU[i, i]
    for i in range(N - 2, -1, -1):
        s = b[i]
        for j in range(i + 1, N):
            s -= LU[j, i] * b[j]
        b[i] = s
    for k in range(N - 1, -1, -1):
        p = piv[k]
        if p != k:
            tmp = b[k]
            b[k] = b[p]
            b[p] = tmp
