"""Welch, Hong, Trapp & Choi 2007: parameter-free constraint enforcement.

Both forms of the scheme run through one loop, written in velocity coordinates v
with q̇ = T(q) v:

* generalized coordinates (Eq. 44a-b): v = q̇, T = I;
* Euler-parameter bodies (Eq. 43a-b): each body's four Euler parameters e are
  replaced in v by its body-frame angular velocity ω, with ė = ½Gᵀ(e) ω = G(ω) e
  (Eqs. 8-11; G(e) is Haug's 3 × 4 body matrix, Welch's H = ½G).  The normalization
  rows eᵀe − 1 of Φ are left out (the paper keeps Ψ out of Φ, §II) and e is
  normalized after each update by Greenwood's step (Eq. 22).

In v the equations of motion are M_v v̇ + B_vᵀ λ = Q_v with M_v = TᵀMT,
B_v = Φ_q T and Q_v = Tᵀ(Q − M Ṫ v), all formed numerically from the model's own
M, Q and Φ_q.  For a body, ¼G M_pp Gᵀ = J' and ½G(Q_p − M_pp Ṫ v) = T' − ω̃J'ω when
M_pp = 4GᵀJ'G (Haug 1989 §11.1), so this is Eqs. 2-3 of the paper.  Each step solves
two symmetric positive-definite systems A λ = …, A = B_v M_v⁻¹ B_vᵀ:

predictor (first order, Hong et al.; Eqs. 14-21, 43a)
    A λ^p = Φ/Δt² + (B_v v_n + Φ_t)/Δt + B_v M_v⁻¹ Q_v
    v^p = v_n + Δt M_v⁻¹(Q_v − B_vᵀ λ^p)
    q^p = q_n + Δt v^p;  e^p = e_n + Δt G(ω^p) e^p (Eq. 17), then normalized

corrector (second order, centred on the half step; Eqs. 23-42, 43b)
    A^h λ = 2Φ(q^p)/Δt² + (2/Δt) B_v^h (v_n − v^p) + B_v^h M_v^{h−1} Q_v^h
    v_{n+1} = v_n + Δt M_v^{h−1}(Q_v^h − B_v^{hT} λ)
    q_{n+1} = q_n + (Δt/2)(v_{n+1} + v_n)
    e_{n+1} = e_n + (Δt/2) G(½[ω_{n+1} + ω_n])(e_{n+1} + e_n) (Eq. 32), normalized

The implicit Euler-parameter updates are solved in closed form: G(ω) is skew with
G(ω)² = −¼|ω|² I, so (I − cG)⁻¹ = (I + cG)/(1 + ¼c²|ω|²).  The half-step state is
the plain average of Eqs. 23-25 (e^h is not normalized, as Eq. 24 writes it).

The paper holds M, Q constant over a step and writes the scheme for scleronomic
constraints; here M^h, Q^h are evaluated at the half step (q^h, v^h, t_{n+1/2}),
which is the same for the paper's examples (and gives its −ω̃^h J ω^h of Eq. 42),
and the predictor's Taylor expansion of Φ gains the Δt Φ_t term that a rheonomic
constraint adds (Eq. 19 with Φ(q, t)).  Order 1 stops after the predictor (the
first-order scheme of the paper).
"""

from __future__ import annotations

import math
from types import ModuleType

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


def euler_parameter_layout(module: ModuleType) -> tuple[np.ndarray, np.ndarray]:
    """Offsets of each spatial body's Euler parameters in q, and the constraint rows
    that are not their normalization rows (both int64 arrays).

    Read from the metadata element modules export (``BODY_SIZES``, ``BODY_OFFSETS``,
    ``ELEMENT_ROWS``); a generalized-coordinate module has no bodies and gets the
    Eq. 44 form (no Euler parameters, every row kept).
    """
    m = int(module.N_CONSTRAINTS)
    quat: list[int] = []
    norm_rows: set[int] = set()
    if hasattr(module, "BODY_SIZES"):
        elements = list(module.ELEMENT_NAMES)
        for b, name in enumerate(module.BODY_NAMES):
            if int(module.BODY_SIZES[b]) != 7:
                continue
            quat.append(int(module.BODY_OFFSETS[b]) + 3)
            row, count = (int(v) for v in module.ELEMENT_ROWS[elements.index(name)])
            if count != 1:
                raise ValueError(f"spatial body {name!r} has {count} rows, expected 1")
            norm_rows.add(row)
    keep = [r for r in range(m) if r not in norm_rows]
    return np.array(quat, dtype=np.int64), np.array(keep, dtype=np.int64)


def workspace(
    n: int, m: int, quat: np.ndarray | None = None, keep: np.ndarray | None = None
) -> tuple[np.ndarray, ...]:
    """Preallocated arrays for :func:`welch_chunk` (the ``ws`` tuple).

    ``quat`` are the q offsets of Euler-parameter blocks, ``keep`` the constraint rows
    the scheme enforces (:func:`euler_parameter_layout`); default: none, all.
    """
    quat = np.zeros(0, dtype=np.int64) if quat is None else np.asarray(quat, dtype=np.int64)
    keep = np.arange(m, dtype=np.int64) if keep is None else np.asarray(keep, dtype=np.int64)
    nb, mk = quat.size, keep.size
    nv = n - nb
    # T as columns: v index a ↦ up to 4 (q index, coefficient) pairs.
    tq = np.zeros((nv, 4), dtype=np.int64)
    tn = np.ones(nv, dtype=np.int64)
    is_quat = np.zeros(n, dtype=np.bool_)
    for o in quat:
        is_quat[o : o + 4] = True
    vb = np.zeros(nb, dtype=np.int64)  # v offset of each body's ω
    a = 0
    b = 0
    i = 0
    while i < n:
        if is_quat[i]:
            vb[b] = a
            for k in range(3):
                tq[a + k, :] = np.arange(i, i + 4)
                tn[a + k] = 4
            a += 3
            b += 1
            i += 4
        else:
            tq[a, 0] = i
            a += 1
            i += 1
    return (
        np.zeros((n, n)), np.zeros(n), np.zeros(m), np.zeros((m, n)), np.zeros(m), np.zeros(m),
        np.zeros((n, n)), np.zeros(n), np.zeros(m), np.zeros((m, n)), np.zeros(m), np.zeros(m),
        np.zeros((nv, nv)),  # M_v, then its Cholesky factor
        np.zeros((mk, nv)),  # B_v = Φ_q T (kept rows)
        np.zeros((mk, nv)),  # Wt = (M_v⁻¹ B_vᵀ)ᵀ
        np.zeros(nv),  # u = M_v⁻¹ Q_v
        np.zeros((mk, mk)),  # A = B_v M_v⁻¹ B_vᵀ, then its factor
        np.zeros(mk),  # right side, then λ
        np.zeros(n),  # q^p, later q_{n+1}
        np.zeros(nv),  # v^p
        np.zeros(m),  # Φ^p
        np.zeros(n),  # q^h
        np.zeros(nv),  # v^h, later v_{n+1}
        np.zeros(nv),  # v_n
        np.zeros(nv),  # v̇
        np.zeros(n),  # q̇ = T v, scratch
        np.zeros(n),  # Ṫ v, then Q − M Ṫ v
        np.zeros(n),  # q̈ for the record
        np.zeros(m),  # λ scattered to all rows, for the record
        np.zeros((nv, 4)),  # T's coefficients
        tq, tn, quat, vb, keep,
    )  # fmt: skip


@njit(cache=True, inline="always")
def _tcoef(nv, nb, quat, vb, q, tc):
    """Coefficients of T(q): 1 for a plain coordinate, ½G(e)ᵀ's columns for ω."""
    for a in range(nv):
        tc[a, 0] = 1.0
    for b in range(nb):
        o = quat[b]
        a = vb[b]
        e0, e1, e2, e3 = q[o], q[o + 1], q[o + 2], q[o + 3]
        # rows of Haug's G(e) = [−e, −ẽ + e0 I], halved
        tc[a, 0], tc[a, 1], tc[a, 2], tc[a, 3] = -0.5 * e1, 0.5 * e0, 0.5 * e3, -0.5 * e2
        tc[a + 1, 0], tc[a + 1, 1], tc[a + 1, 2], tc[a + 1, 3] = (
            -0.5 * e2,
            -0.5 * e3,
            0.5 * e0,
            0.5 * e1,
        )
        tc[a + 2, 0], tc[a + 2, 1], tc[a + 2, 2], tc[a + 2, 3] = (
            -0.5 * e3,
            0.5 * e2,
            -0.5 * e1,
            0.5 * e0,
        )


@njit(cache=True, inline="always")
def _qdot(n, nv, tq, tn, tc, v, out):
    """out = T v."""
    for i in range(n):
        out[i] = 0.0
    for a in range(nv):
        for r in range(tn[a]):
            out[tq[a, r]] += tc[a, r] * v[a]


@njit(cache=True, inline="always")
def _tdot_v(n, nb, quat, vb, qd, v, out):
    """out = Ṫ v: zero for plain coordinates, ½G(ė)ᵀω for Euler parameters."""
    for i in range(n):
        out[i] = 0.0
    for b in range(nb):
        o = quat[b]
        a = vb[b]
        d0, d1, d2, d3 = qd[o], qd[o + 1], qd[o + 2], qd[o + 3]
        w1, w2, w3 = v[a], v[a + 1], v[a + 2]
        out[o] = 0.5 * (-d1 * w1 - d2 * w2 - d3 * w3)
        out[o + 1] = 0.5 * (d0 * w1 - d3 * w2 + d2 * w3)
        out[o + 2] = 0.5 * (d3 * w1 + d0 * w2 - d1 * w3)
        out[o + 3] = 0.5 * (-d2 * w1 + d1 * w2 + d0 * w3)


@njit(cache=True, inline="always")
def _velocity(n, nv, nb, quat, vb, tq, tn, tc, q, qd, v):
    """v from q̇: q̇ for plain coordinates, ω = 2G(e) ė for Euler parameters."""
    for a in range(nv):
        if tn[a] == 1:
            v[a] = qd[tq[a, 0]]
    for b in range(nb):
        o = quat[b]
        a = vb[b]
        for k in range(3):
            s = 0.0
            for r in range(4):
                s += tc[a + k, r] * qd[o + r]
            v[a + k] = 4.0 * s  # tc holds ½G


@njit(cache=True, inline="always")
def _reduce(n, nv, mk, nb, quat, vb, keep, tq, tn, tc, v, M, Q, phi_q, qd, w, L, B, Wt, u, A):
    """With T(q) in ``tc``: q̇ = T v into ``qd``, Ṫ v into ``w``; M_v = TᵀMT factored
    into L; u = M_v⁻¹ Q_v with Q_v = Tᵀ(Q − M Ṫ v); B_v = Φ_q T;
    Wt = (M_v⁻¹ B_vᵀ)ᵀ; A = B_v M_v⁻¹ B_vᵀ factored.  Returns a status."""
    _qdot(n, nv, tq, tn, tc, v, qd)
    _tdot_v(n, nb, quat, vb, qd, v, w)
    for a in range(nv):
        s = 0.0
        for r in range(tn[a]):
            i = tq[a, r]
            f = Q[i]
            if nb > 0:
                for j in range(n):
                    f -= M[i, j] * w[j]
            s += tc[a, r] * f
        u[a] = s
        for b in range(nv):
            s = 0.0
            for r in range(tn[a]):
                i = tq[a, r]
                for c in range(tn[b]):
                    s += tc[a, r] * M[i, tq[b, c]] * tc[b, c]
            L[a, b] = s
    status = cholesky_inplace(L, nv)
    if status != OK:
        return status
    cholesky_solve(L, u, nv)
    for c in range(mk):
        row = keep[c]
        for a in range(nv):
            s = 0.0
            for r in range(tn[a]):
                s += phi_q[row, tq[a, r]] * tc[a, r]
            B[c, a] = s
            Wt[c, a] = s
        cholesky_solve(L, Wt[c], nv)
    for i in range(mk):
        for j in range(mk):
            s = 0.0
            for k in range(nv):
                s += B[i, k] * Wt[j, k]
            A[i, j] = s
    return cholesky_inplace(A, mk)


@njit(cache=True, inline="always")
def _accel(nv, mk, Wt, u, lam, out):
    """out = M_v⁻¹(Q_v − B_vᵀ λ) = u − Wtᵀ λ."""
    for i in range(nv):
        s = u[i]
        for j in range(mk):
            s -= Wt[j, i] * lam[j]
        out[i] = s


@njit(cache=True, inline="always")
def _rotate(e, o, w1, w2, w3, c, twice):
    """e ← (I + cG(ω))^k e / (1 + ¼c²|ω|²), k = 2 if ``twice`` else 1, then
    Greenwood's normalization (Eq. 22).  k = 1 solves e' = e + cG(ω)e' (Eq. 17),
    k = 2 solves e' = e + cG(ω)(e' + e) (Eq. 32, c = Δt/2)."""
    hc = 0.5 * c
    for _ in range(2 if twice else 1):
        e0, e1, e2, e3 = e[o], e[o + 1], e[o + 2], e[o + 3]
        e[o] = e0 + hc * (-w1 * e1 - w2 * e2 - w3 * e3)
        e[o + 1] = e1 + hc * (w1 * e0 + w3 * e2 - w2 * e3)
        e[o + 2] = e2 + hc * (w2 * e0 + w1 * e3 - w3 * e1)
        e[o + 3] = e3 + hc * (w3 * e0 + w2 * e1 - w1 * e2)
    scale = 1.0 / (1.0 + hc * hc * (w1 * w1 + w2 * w2 + w3 * w3))
    norm2 = 0.0
    for r in range(4):
        e[o + r] *= scale
        norm2 += e[o + r] * e[o + r]
    f = 1.0 - 0.5 * (norm2 - 1.0) / math.sqrt(norm2)
    for r in range(4):
        e[o + r] *= f


@njit(cache=True, inline="always")
def _record(n, m, mk, keep, row, t, q, qd, qdd, lam, lam_all, phi, phi_q, phi_t,
            out_t, out_x, out_f, out_aux):  # fmt: skip
    out_t[row] = t
    for i in range(n):
        out_x[row, i] = q[i]
        out_x[row, n + i] = qd[i]
        out_f[row, i] = qd[i]
        out_f[row, n + i] = qdd[i]
    for i in range(m):
        lam_all[i] = 0.0
    for c in range(mk):
        lam_all[keep[c]] = lam[c]
    phi2 = 0.0
    phid2 = 0.0
    for i in range(m):
        out_aux[row, i] = lam_all[i]
        phid = phi_t[i]
        for j in range(n):
            phid += phi_q[i, j] * qd[j]
        phi2 += phi[i] * phi[i]
        phid2 += phid * phid
    out_aux[row, m] = math.sqrt(phi2)
    out_aux[row, m + 1] = math.sqrt(phid2)


@njit(cache=True, inline="always")
def _qddot(n, nv, nb, quat, vb, tq, tn, tc, qd, v, vdot, tmp, out):
    """out = q̈ = T v̇ + Ṫ v (``qd`` = T v)."""
    _qdot(n, nv, tq, tn, tc, vdot, out)
    _tdot_v(n, nb, quat, vb, qd, v, tmp)
    for i in range(n):
        out[i] += tmp[i]


@njit(cache=True, inline="always")
def welch_chunk(
    dyn, phi_kern, n, m, p, ws, t0, h, x, state, n_steps, stride, out_t, out_x, out_f, out_aux
):
    """Advance up to ``n_steps`` steps of the first- or second-order scheme (Eq. 43
    for Euler-parameter bodies, Eq. 44 otherwise).

    ``x = [q; q̇]`` is updated in place; ``ws`` (:func:`workspace`) holds the model
    evaluated at the current state and the velocity v between calls;
    ``state[S_ORDER]`` is 1 or 2.  Returns a status code; on failure ``x`` holds the
    last accepted step.
    """
    (M, Q, phi, phi_q, phi_t, gamma, Mh, Qh, phih, phi_qh, phi_th, gammah,
     L, B, Wt, u, A, lam, qp, vp, phip, qh, vh, v, vdot, qdw, w, qdd, lam_all,
     tc, tq, tn, quat, vb, keep) = ws  # fmt: skip
    nv = v.size
    nb = quat.size
    mk = keep.size
    q = x[:n]
    qd = x[n:]
    if state[S_NHIST] == 0:
        # Evaluate at t0; λ(t0) from B_v v̇ = γ − Φ_q Ṫ v with v̇ = u − Wtᵀλ.
        t = t0 + state[S_STEP] * h
        _tcoef(nv, nb, quat, vb, q, tc)
        _velocity(n, nv, nb, quat, vb, tq, tn, tc, q, qd, v)
        _qdot(n, nv, tq, tn, tc, v, qd)
        dyn(t, q, qd, p, M, Q, phi, phi_q, phi_t, gamma)
        state[S_NEVAL] += 1
        status = _reduce(n, nv, mk, nb, quat, vb, keep, tq, tn, tc, v, M, Q, phi_q,
                         qdw, w, L, B, Wt, u, A)  # fmt: skip
        if status != OK:
            return status
        _tdot_v(n, nb, quat, vb, qd, v, w)
        for c in range(mk):
            i = keep[c]
            s = -gamma[i]
            for k in range(n):
                s += phi_q[i, k] * w[k]
            for k in range(nv):
                s += B[c, k] * u[k]
            lam[c] = s
        cholesky_solve(A, lam, mk)
        _accel(nv, mk, Wt, u, lam, vdot)
        state[S_NHIST] = 1
        if state[S_STEP] % stride == 0:
            _qddot(n, nv, nb, quat, vb, tq, tn, tc, qd, v, vdot, w, qdd)
            _record(n, m, mk, keep, state[S_ROW], t, q, qd, qdd, lam, lam_all, phi, phi_q,
                    phi_t, out_t, out_x, out_f, out_aux)  # fmt: skip
            state[S_ROW] += 1
    second = state[S_ORDER] == 2
    inv_h = 1.0 / h
    for _ in range(n_steps):
        t_n = t0 + state[S_STEP] * h
        t_new = t0 + (state[S_STEP] + 1) * h
        # predictor, Eqs. 43a/44a (the model at the current state is in ws)
        _tcoef(nv, nb, quat, vb, q, tc)
        status = _reduce(n, nv, mk, nb, quat, vb, keep, tq, tn, tc, v, M, Q, phi_q,
                         qdw, w, L, B, Wt, u, A)  # fmt: skip
        if status != OK:
            return status
        for c in range(mk):
            i = keep[c]
            s = phi_t[i]
            su = 0.0
            for k in range(nv):
                s += B[c, k] * v[k]
                su += B[c, k] * u[k]
            lam[c] = phi[i] * inv_h * inv_h + s * inv_h + su
        cholesky_solve(A, lam, mk)
        _accel(nv, mk, Wt, u, lam, vdot)
        for a in range(nv):
            vp[a] = v[a] + h * vdot[a]
        for i in range(n):
            qp[i] = q[i]
        for a in range(nv):
            if tn[a] == 1:
                qp[tq[a, 0]] += h * vp[a]
        for b in range(nb):
            a = vb[b]
            _rotate(qp, quat[b], vp[a], vp[a + 1], vp[a + 2], h, False)
        if second:
            # corrector, Eqs. 43b/44b, with the Jacobian (and M, Q) at the half step
            phi_kern(t_new, qp, p, phip)
            for i in range(n):
                qh[i] = 0.5 * (qp[i] + q[i])
            for a in range(nv):
                vh[a] = 0.5 * (vp[a] + v[a])
            _tcoef(nv, nb, quat, vb, qh, tc)
            _qdot(n, nv, tq, tn, tc, vh, qdw)
            dyn(t_n + 0.5 * h, qh, qdw, p, Mh, Qh, phih, phi_qh, phi_th, gammah)
            state[S_NEVAL] += 1
            status = _reduce(n, nv, mk, nb, quat, vb, keep, tq, tn, tc, vh, Mh, Qh,
                             phi_qh, qdw, w, L, B, Wt, u, A)  # fmt: skip
            if status != OK:
                return status
            for c in range(mk):
                s = 0.0
                su = 0.0
                for k in range(nv):
                    s += B[c, k] * (v[k] - vp[k])
                    su += B[c, k] * u[k]
                lam[c] = 2.0 * phip[keep[c]] * inv_h * inv_h + 2.0 * s * inv_h + su
            cholesky_solve(A, lam, mk)
            _accel(nv, mk, Wt, u, lam, vdot)  # v̇ over the step
            for a in range(nv):
                vh[a] = v[a] + h * vdot[a]  # v_{n+1}
            for i in range(n):
                qp[i] = q[i]
            for a in range(nv):
                if tn[a] == 1:
                    qp[tq[a, 0]] += 0.5 * h * (vh[a] + v[a])
            for b in range(nb):
                a = vb[b]
                _rotate(qp, quat[b], 0.5 * (vh[a] + v[a]), 0.5 * (vh[a + 1] + v[a + 1]),
                        0.5 * (vh[a + 2] + v[a + 2]), 0.5 * h, True)  # fmt: skip
            vn = vh
        else:
            vn = vp
        for i in range(n):
            if not math.isfinite(qp[i]):
                return NONFINITE
        for a in range(nv):
            if not math.isfinite(vn[a]):
                return NONFINITE
        for i in range(n):
            q[i] = qp[i]
        for a in range(nv):
            v[a] = vn[a]
        _tcoef(nv, nb, quat, vb, q, tc)
        _qdot(n, nv, tq, tn, tc, v, qd)
        dyn(t_new, q, qd, p, M, Q, phi, phi_q, phi_t, gamma)
        state[S_NEVAL] += 1
        state[S_STEP] += 1
        if state[S_STEP] % stride == 0:
            _qddot(n, nv, nb, quat, vb, tq, tn, tc, qd, v, vdot, w, qdd)
            _record(n, m, mk, keep, state[S_ROW], t_new, q, qd, qdd, lam, lam_all, phi,
                    phi_q, phi_t, out_t, out_x, out_f, out_aux)  # fmt: skip
            state[S_ROW] += 1
    return OK
