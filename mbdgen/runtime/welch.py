"""Welch, Hong, Trapp & Choi 2007: parameter-free constraint enforcement.

The generalized-coordinate form of the scheme (Eqs. 44a-b).  Each step solves two
symmetric positive-definite systems for Lagrange multipliers, with A = Φ_q M⁻¹ Φ_qᵀ:

predictor (first order, Hong et al.; Eqs. 14-21)
    A λ^p = Φ/Δt² + (Φ_q q̇_n + Φ_t)/Δt + Φ_q M⁻¹ Q
    q̇^p = q̇_n + Δt M⁻¹(Q − Φ_qᵀ λ^p),   q^p = q_n + Δt q̇^p

corrector (second order, centred on the half step; Eqs. 23-42)
    A^h λ = 2Φ(q^p, t_{n+1})/Δt² + (2/Δt) Φ_q^h (q̇_n − q̇^p) + Φ_q^h M⁻¹ Q
    q̇_{n+1} = q̇_n + Δt M⁻¹(Q − Φ_q^hᵀ λ),   q_{n+1} = q_n + (Δt/2)(q̇_{n+1} + q̇_n)

The paper holds M, Q constant over a step and writes the scheme for scleronomic
constraints; here M^h, Q^h are evaluated at the half step (q^h, q̇^h, t_{n+1/2}),
which is the same for the paper's examples and keeps the corrector centred when
they vary, and the predictor's Taylor expansion of Φ gains the Δt Φ_t term that a
rheonomic constraint adds (Eq. 19 with Φ(q, t)).  Order 1 stops after the
predictor (the first-order scheme of the paper).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from mbdgen.runtime.linalg import cholesky_inplace, cholesky_solve
from mbdgen.runtime.status import NONFINITE, OK

# ``state`` layout shared with the driver (the explicit loop's fields it uses).
S_ORDER = 0
S_NHIST = 2  # 0 until the state at t0 has been evaluated
S_STEP = 4
S_ROW = 5
S_NEVAL = 6
STATE_SIZE = 8


def workspace(n: int, m: int) -> tuple[np.ndarray, ...]:
    """Preallocated arrays for :func:`welch_chunk` (the ``ws`` tuple)."""
    return (
        np.zeros((n, n)), np.zeros(n), np.zeros(m), np.zeros((m, n)), np.zeros(m), np.zeros(m),
        np.zeros((n, n)), np.zeros(n), np.zeros(m), np.zeros((m, n)), np.zeros(m), np.zeros(m),
        np.zeros((n, n)),  # Cholesky factor of M
        np.zeros((m, n)),  # Wt = (M⁻¹ Φ_qᵀ)ᵀ, row c = M⁻¹ (row c of Φ_q)
        np.zeros(n),  # u = M⁻¹ Q
        np.zeros((m, m)),  # A = Φ_q M⁻¹ Φ_qᵀ, then its factor
        np.zeros(m),  # right side, then λ
        np.zeros(n),  # q^p
        np.zeros(n),  # q̇^p, later q̈
        np.zeros(m),  # Φ^p
        np.zeros(n),  # q^h
        np.zeros(n),  # q̇^h
    )  # fmt: skip


@njit(cache=True, inline="always")
def _reduce(n, m, M, Q, phi_q, L, Wt, u, A):
    """L Lᵀ = M, u = M⁻¹Q, Wt = (M⁻¹Φ_qᵀ)ᵀ, A = Φ_q M⁻¹ Φ_qᵀ factored; a status."""
    for i in range(n):
        for j in range(n):
            L[i, j] = M[i, j]
    status = cholesky_inplace(L, n)
    if status != OK:
        return status
    for i in range(n):
        u[i] = Q[i]
    cholesky_solve(L, u, n)
    for c in range(m):
        row = Wt[c]
        for i in range(n):
            row[i] = phi_q[c, i]
        cholesky_solve(L, row, n)
    for i in range(m):
        for j in range(m):
            s = 0.0
            for k in range(n):
                s += phi_q[i, k] * Wt[j, k]
            A[i, j] = s
    return cholesky_inplace(A, m)


@njit(cache=True, inline="always")
def _accel(n, m, Wt, u, lam, out):
    """out = M⁻¹(Q − Φ_qᵀ λ) = u − Wtᵀ λ."""
    for i in range(n):
        s = u[i]
        for j in range(m):
            s -= Wt[j, i] * lam[j]
        out[i] = s


@njit(cache=True, inline="always")
def _record(n, m, row, t, x, qdd, lam, phi, phi_q, phi_t, out_t, out_x, out_f, out_aux):
    out_t[row] = t
    for i in range(2 * n):
        out_x[row, i] = x[i]
    for i in range(n):
        out_f[row, i] = x[n + i]
        out_f[row, n + i] = qdd[i]
    phi2 = 0.0
    phid2 = 0.0
    for i in range(m):
        out_aux[row, i] = lam[i]
        phid = phi_t[i]
        for j in range(n):
            phid += phi_q[i, j] * x[n + j]
        phi2 += phi[i] * phi[i]
        phid2 += phid * phid
    out_aux[row, m] = math.sqrt(phi2)
    out_aux[row, m + 1] = math.sqrt(phid2)


@njit(cache=True, inline="always")
def welch_chunk(
    dyn, phi_kern, n, m, p, ws, t0, h, x, state, n_steps, stride, out_t, out_x, out_f, out_aux
):
    """Advance up to ``n_steps`` steps of the first- or second-order scheme (Eq. 44).

    ``x = [q; q̇]`` is updated in place; ``ws`` (:func:`workspace`) holds the model
    evaluated at the current state between calls; ``state[S_ORDER]`` is 1 or 2.
    Returns a status code; on failure ``x`` holds the last accepted step.
    """
    (M, Q, phi, phi_q, phi_t, gamma, Mh, Qh, phih, phi_qh, phi_th, gammah,
     L, Wt, u, A, lam, qp, qdp, phip, qh, qdh) = ws  # fmt: skip
    q = x[:n]
    qd = x[n:]
    if state[S_NHIST] == 0:
        # Evaluate at t0; λ(t0) from Φ_q q̈ = γ with q̈ = u − Wλ: A λ = Φ_q u − γ.
        t = t0 + state[S_STEP] * h
        dyn(t, q, qd, p, M, Q, phi, phi_q, phi_t, gamma)
        state[S_NEVAL] += 1
        status = _reduce(n, m, M, Q, phi_q, L, Wt, u, A)
        if status != OK:
            return status
        for i in range(m):
            s = -gamma[i]
            for k in range(n):
                s += phi_q[i, k] * u[k]
            lam[i] = s
        cholesky_solve(A, lam, m)
        _accel(n, m, Wt, u, lam, qdp)
        state[S_NHIST] = 1
        if state[S_STEP] % stride == 0:
            _record(n, m, state[S_ROW], t, x, qdp, lam, phi, phi_q, phi_t,
                    out_t, out_x, out_f, out_aux)  # fmt: skip
            state[S_ROW] += 1
    second = state[S_ORDER] == 2
    inv_h = 1.0 / h
    for _ in range(n_steps):
        t_n = t0 + state[S_STEP] * h
        t_new = t0 + (state[S_STEP] + 1) * h
        # predictor, Eq. 44a (M, Q, Φ, Φ_q, Φ_t of the current state are in ws)
        status = _reduce(n, m, M, Q, phi_q, L, Wt, u, A)
        if status != OK:
            return status
        for i in range(m):
            s = phi_t[i]
            su = 0.0
            for k in range(n):
                s += phi_q[i, k] * qd[k]
                su += phi_q[i, k] * u[k]
            lam[i] = phi[i] * inv_h * inv_h + s * inv_h + su
        cholesky_solve(A, lam, m)
        _accel(n, m, Wt, u, lam, qdp)
        for i in range(n):
            qdp[i] = qd[i] + h * qdp[i]
            qp[i] = q[i] + h * qdp[i]
        if second:
            # corrector, Eq. 44b, with the Jacobian (and M, Q) at the half step
            phi_kern(t_new, qp, p, phip)
            for i in range(n):
                qh[i] = 0.5 * (qp[i] + q[i])
                qdh[i] = 0.5 * (qdp[i] + qd[i])
            dyn(t_n + 0.5 * h, qh, qdh, p, Mh, Qh, phih, phi_qh, phi_th, gammah)
            state[S_NEVAL] += 1
            status = _reduce(n, m, Mh, Qh, phi_qh, L, Wt, u, A)
            if status != OK:
                return status
            for i in range(m):
                s = 0.0
                su = 0.0
                for k in range(n):
                    s += phi_qh[i, k] * (qd[k] - qdp[k])
                    su += phi_qh[i, k] * u[k]
                lam[i] = 2.0 * phip[i] * inv_h * inv_h + 2.0 * s * inv_h + su
            cholesky_solve(A, lam, m)
            _accel(n, m, Wt, u, lam, qdp)  # q̈ over the step
            for i in range(n):
                qh[i] = qd[i] + h * qdp[i]  # q̇_{n+1}
                qp[i] = q[i] + 0.5 * h * (qh[i] + qd[i])  # q_{n+1}
            qn, qdn, acc = qp, qh, qdp
        else:
            _accel(n, m, Wt, u, lam, qh)  # q̈ of the first-order step
            qn, qdn, acc = qp, qdp, qh
        for i in range(n):
            if not (math.isfinite(qn[i]) and math.isfinite(qdn[i])):
                return NONFINITE
        for i in range(n):
            q[i] = qn[i]
            qd[i] = qdn[i]
        dyn(t_new, q, qd, p, M, Q, phi, phi_q, phi_t, gamma)
        state[S_NEVAL] += 1
        state[S_STEP] += 1
        if state[S_STEP] % stride == 0:
            _record(n, m, state[S_ROW], t_new, x, acc, lam, phi, phi_q, phi_t,
                    out_t, out_x, out_f, out_aux)  # fmt: skip
            state[S_ROW] += 1
    return OK
