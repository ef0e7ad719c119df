"""Radau IIA of order 5 for the index-3 DAE of multibody dynamics, with error control
and dense output (Hairer & Wanner 1996, §IV.8 and §VII.4; their code RADAU5).

The equations of motion and the position constraints in first-order form, the state
y = [q; v; λ] (v = q̇):

    q̇ = v,    M(q) v̇ = Q(q, v, t) − Φ_qᵀ(q, t) λ,    0 = Φ(q, t)

— q of index 1, v of index 2, λ of index 3 — are collocated at the three Radau
points c = ((4 − √6)/10, (4 + √6)/10, 1) of each step [t_n, t_n + h].  With the
stage increments Z_i = Y_i − y_n and the stage derivatives D_i = (1/h) Σ_j W_ij Z_j
(W = A⁻¹ of the Radau IIA tableau), the residual of stage i is

    G_q = D_q,i − V_i
    G_v = M(Q_i) D_v,i − Q(Q_i, V_i, t_i) + Φ_q(Q_i)ᵀ Λ_i
    G_λ = Φ(Q_i, t_i)          (λ_i = 0 for a removed redundant row)

and Newton's method solves G(Z) = 0 simplified as RADAU5 does: the Jacobian frozen
at y_n, transformed by W = T Λ T⁻¹ into one real system of size N = 2n + m with
σ = γ̂/h and one complex one with σ = (α̂ − iβ̂)/h (γ̂, α̂ ± iβ̂ the eigenvalues of W;
Hairer & Wanner §IV.8, Eqs. 8.12-8.16).  Each of them,

    [[σI, −I, 0], [K, σM − C, Φ_qᵀ], [Φ_q, 0, 0]],
    K = (M a)_q + (Φ_qᵀλ)_q − Q_q,    C = Q_q̇,

is solved through its (n + m)-block by eliminating Δv = σΔq − r_q:

    [[M + K/σ² − C/σ, Φ_qᵀ], [Φ_q, 0]] [Δq; Δλ/σ²] = [(r_v + (σM − C) r_q)/σ²; r_λ]

— HHT's iteration matrix (Negrut et al. 2007, Eqs. 12, 14) with βh² → 1/σ² and
γh → 1/σ, assembled from the same generated blocks (DESIGN rule 2), complex for the
pair.  The iteration (RADAU5's ``RADCOR``): starting values extrapolated from the
last step's collocation polynomial, the convergence rate Θ measured from the second
iteration, stop when Θ/(1 − Θ) ‖ΔW‖ ≤ κ = max(100 eps/rtol, min(0.03, √rtol)), a step
cut when the iteration will not converge within ``max_iterations`` (7; κ not below
100 eps/rtol, :data:`NOISE`), the Jacobian
kept while Θ ≤ 0.001 and the factors kept while h changes by less than 20 %.

One iteration more than RADAU5 takes (``ctrl[C_EXTRA]``, :func:`control`'s
``extra_iteration``): after the stopping test passes, one more correction with the same
factors (three evaluations and two solves, no Jacobian), applied if it contracts
(Θ < 0.99).  The test weighs a velocity's correction by (atol + rtol |v_i|)/h, the
index-2 scaling of the error estimate, so it passes with a velocity error of up to κ
times that; the velocity is carried to the next step, and on a fast mechanism (standard
Andrews, |v| up to 1.4e3 rad/s) the errors it leaves add up in q over the run (the
error stayed at 1.3e-7 for rtol = 1e-10).  The extra correction divides them by Θ.
Measured on Andrews at the loosest tolerance reaching a final error (design notes,
stop 35): standard to 1e-6 6.14 ms against 7.47, to 1e-8 14.3 ms where RADAU5's
iteration never gets there; stiff to 1e-6 0.91 against 1.03 ms, to 1e-8 1.20 against
1.51; to 1e-4 7-21 % slower.

Error control (§IV.8, Eqs. 8.19-8.20, with a mass matrix): the embedded estimate

    err = (γ̂/h E − J)⁻¹ [f(y_n) + E (e₁Z₁ + e₂Z₂ + e₃Z₃)/h],
    e = (−13 − 7√6, −13 + 7√6, −1)/3,   E = diag(I, M, 0),

computed a second time from f(y_n + err) after a rejection or on the first step (it
filters the stiff components); its norm ‖err/s‖_rms with s_i = atol + rtol |y_i|,
divided by h for v and by h² for λ — RADAU5's scaling of index-2 and index-3
components (§VII.4), without which the estimate of a higher-index variable does not
go to zero with h.  The next step h/quot follows err^(1/4) with RADAU5's safety factor
0.9 (2·7 + 1)/(newt + 2·7), within [1/8, 5] of h, and Gustafsson's predictive
controller after two accepted steps; a first rejected step is cut by 10.

Order (Hairer, Lubich & Roche 1989; Hairer & Wanner §VII.4, Table 4.1): the global
error of q is O(h⁵), of v O(h³), of λ O(h²) on an index-3 problem.

Dense output: the collocation polynomial of the last step (degree 3, through y_n and
the three stages), as RADAU5's ``CONTR5``; q̈ of an output row is the derivative of
v's polynomial (second order), λ the polynomial's (second order).

The state x the driver sees is HHT's [q; q̇; q̈; λ] (q̈ = D_v,3 of the last step, the
acceleration that the next Jacobian's (M a)_q reads); user states are not integrated.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from numba import njit
from numba.extending import overload

from mbdgen.runtime import hht
from mbdgen.runtime.linalg import lu_factor_inplace, lu_solve_factored, row_weights
from mbdgen.runtime.refs import borrow
from mbdgen.runtime.sparse import kkt_assemble, kkt_factor, kkt_rhs, kkt_solve
from mbdgen.runtime.status import NEWTON_FAILED, NONFINITE, OK, SINGULAR, STEP_SIZE_COLLAPSE


def tableau() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(c, A, W = A⁻¹, T, T⁻¹) of the three-stage Radau IIA method, with
    T⁻¹ W T = [[γ̂, 0, 0], [0, α̂, β̂], [0, −β̂, α̂]] (β̂ > 0): on W₂ + iW₃ the pair's block
    multiplies by α̂ − iβ̂."""
    s6 = math.sqrt(6.0)
    c = np.array([(4.0 - s6) / 10.0, (4.0 + s6) / 10.0, 1.0])
    A = np.array(
        [
            [(88.0 - 7.0 * s6) / 360.0, (296.0 - 169.0 * s6) / 1800.0, (-2.0 + 3.0 * s6) / 225.0],
            [(296.0 + 169.0 * s6) / 1800.0, (88.0 + 7.0 * s6) / 360.0, (-2.0 - 3.0 * s6) / 225.0],
            [(16.0 - s6) / 36.0, (16.0 + s6) / 36.0, 1.0 / 9.0],
        ]
    )
    W = np.linalg.inv(A)
    values, vectors = np.linalg.eig(W)
    real = int(np.argmin(np.abs(values.imag)))
    pair = int(np.argmax(values.imag))  # α̂ + iβ̂, β̂ > 0, and its vector u:
    u = vectors[:, pair]  # W Re u = α̂ Re u − β̂ Im u, W Im u = β̂ Re u + α̂ Im u
    T = np.column_stack([vectors[:, real].real, u.real, u.imag])
    return c, A, W, T, np.linalg.inv(T)


C, A_RADAU, W_RADAU, T_RADAU, TI_RADAU = tableau()
_LAM = TI_RADAU @ W_RADAU @ T_RADAU
#: The real eigenvalue γ̂ of W = A⁻¹ (≈ 3.6378) and the pair α̂ ± iβ̂ (≈ 2.6811 ± 3.0504i),
#: read off T⁻¹ W T.
GAMMA_HAT = float(_LAM[0, 0])
ALPHA_HAT = float(_LAM[1, 1])
BETA_HAT = float(_LAM[1, 2])
#: e of the error estimate (Hairer & Wanner Eq. 8.20, times γ̂ γ₀ = 1: RADAU5's DD).
DD = np.array(
    [-(13.0 + 7.0 * math.sqrt(6.0)) / 3.0, (-13.0 + 7.0 * math.sqrt(6.0)) / 3.0, -1.0 / 3.0]
)
_C1, _C2 = float(C[0]), float(C[1])
_C1M1, _C2M1, _C1MC2 = _C1 - 1.0, _C2 - 1.0, _C1 - _C2
_W, _T, _TI, _DD, _CC = W_RADAU, T_RADAU, TI_RADAU, DD, C  # the loop's short names

# ctrl entries
C_RTOL = 0
C_ATOL = 1
C_MAXIT = 2  # Newton iterations per step (RADAU5's NIT, 7)
C_ATTEMPTS = 3  # step attempts per call
C_SAFE = 4  # safety factor of the step-size selection (0.9)
C_THET = 5  # Θ below which the Jacobian is kept (0.001)
C_KAPPA = 6  # the Newton stopping bound κ (FNEWT)
C_FACL = 7  # h shrinks at most by this factor (5)
C_FACR = 8  # h grows at most by 1/this (1/8)
C_QUOT1 = 9  # the factors are kept while h_new/h lies in [QUOT1, QUOT2] ...
C_QUOT2 = 10  # ... (1, 1.2) and Θ ≤ C_THET
C_GUSTAFSSON = 11  # 1: Gustafsson's predictive controller
C_FIXED = 12  # 1: every step of size F_HMAX is accepted (order studies)
C_EXTRA = 13  # 1: one more Newton iteration after RADAU5's stopping test passes
CTRL_SIZE = 14

# state (int64); the first ones are HHT's, so that the driver reads both alike
S_STEP = hht.S_STEP  # steps accepted
S_ROW = hht.S_ROW  # next output row
S_STARTED = hht.S_STARTED
S_NEWTON = hht.S_NEWTON  # Newton iterations
S_JAC = hht.S_JAC  # Jacobian evaluations
S_FACT = hht.S_FACT  # LU factorizations (real and complex each count)
S_NEVAL = hht.S_NEVAL  # dynamics-kernel evaluations
S_REJECTS = hht.S_REJECTS  # steps rejected by the error test
S_CUTS = hht.S_CUTS  # steps cut because Newton's iteration failed
S_LASTFAIL = hht.S_LASTFAIL  # why the last attempt failed (hht's _FAIL_* codes)
S_CALJAC = 16  # 1: the Jacobian was evaluated at the current y_n
S_LU = 17  # 1: the factors in ``ws.ar``, ``ws.ac`` are of the current h and Jacobian
S_FIRST = 18  # 1: no step accepted yet (a rejection cuts h by 10)
S_REJECT = 19  # 1: the last attempt was rejected
S_NSING = 20  # singular matrices met in a row
S_MAX_ITERS = 21  # most Newton iterations a step took
S_NEEDJAC = 22  # 1: evaluate the Jacobian at y_n before the next attempt
STATE_SIZE = 23

# fstate (float64)
F_T = hht.F_T  # t_n
F_TPREV = hht.F_TPREV  # start of the last accepted step
F_H = hht.F_H  # the next attempt's h
F_HMIN = hht.F_HMIN
F_HMAX = hht.F_HMAX
F_HLU = 5  # h of the factors
F_ERR = 6  # error norm of the last attempt
F_TEND = hht.F_TEND
F_HOLD = 8  # h of the last accepted step (dense output, extrapolation)
F_HACC = 9  # Gustafsson: h of the last accepted step ...
F_ERRACC = 10  # ... and its error
F_THETA = 11  # Θ of the last Newton iteration
F_FACCON = 12  # Θ/(1 − Θ) carried between steps
F_SIZE = 13

_EPS = np.finfo(np.float64).eps
#: The floor of κ rtol: a Newton correction below 100 eps of the weights is round-off
#: of the residual (RADAU5's and SciPy's 10 eps made tight tolerances fail Newton on
#: the slider-crank at rtol = 1e-10: their corrections stall there).
NOISE = 100.0 * _EPS


def control(
    rtol: float,
    atol: float | None = None,
    *,
    max_iterations: int = 7,
    attempts: int = 4096,
    safety: float = 0.9,
    gustafsson: bool = True,
    fixed_step: bool = False,
    extra_iteration: bool = True,
) -> np.ndarray:
    """The ``ctrl`` vector (RADAU5's defaults; κ as RADAU5's FNEWT and SciPy's Radau).
    ``fixed_step``: every step has the size ``fstate[F_HMAX]`` and is accepted (the
    Newton iteration and its stopping test as with error control): for order studies.
    ``extra_iteration``: one more simplified-Newton iteration after the stopping test
    passes (the module docstring); False is RADAU5's iteration."""
    ctrl = np.zeros(CTRL_SIZE)
    ctrl[C_RTOL] = rtol
    ctrl[C_ATOL] = rtol if atol is None else atol
    ctrl[C_MAXIT] = max_iterations
    ctrl[C_ATTEMPTS] = attempts
    ctrl[C_SAFE] = safety
    ctrl[C_THET] = 0.001
    ctrl[C_KAPPA] = max(NOISE / rtol, min(0.03, math.sqrt(rtol)))
    ctrl[C_FACL] = 5.0
    ctrl[C_FACR] = 1.0 / 8.0
    ctrl[C_QUOT1] = 1.0
    ctrl[C_QUOT2] = 1.2
    ctrl[C_GUSTAFSSON] = 1.0 if gustafsson else 0.0
    ctrl[C_FIXED] = 1.0 if fixed_step else 0.0
    ctrl[C_EXTRA] = 1.0 if extra_iteration else 0.0
    return ctrl


class Workspace(NamedTuple):
    """Preallocated arrays of :func:`radau_chunk`, dense: (n + m)² matrices and LU with
    partial pivoting (M, Q, Φ, Φ_q, Φ_t, γ first, as in every workspace:
    :mod:`mbdgen.diagnose` reads them)."""

    mass: np.ndarray  # M of the latest evaluation
    force: np.ndarray  # Q
    phi: np.ndarray  # Φ
    phi_q: np.ndarray  # Φ_q
    phi_t: np.ndarray  # Φ_t
    gam: np.ndarray  # γ (the start's q̈_0, λ_0)
    mass_n: np.ndarray  # M at y_n
    phi_q_n: np.ndarray  # Φ_q at y_n
    mass0: np.ndarray  # M of the factored matrices (E of the solves and the estimate)
    phi_q0: np.ndarray  # Φ_q of the factored matrices
    maq: np.ndarray  # the Jacobian's blocks (M a)_q, (Φ_qᵀλ)_q, Q_q, Q_q̇
    plq: np.ndarray
    fq: np.ndarray
    fqd: np.ndarray  # C = Q_q̇
    ar: np.ndarray  # the real (n + m)² matrix, then its LU factors
    pr: np.ndarray
    ac: np.ndarray  # the complex one
    pc: np.ndarray
    y: np.ndarray  # y_n = [q; v; λ]
    f0: np.ndarray  # f(y_n) = [v; Q − Φ_qᵀλ; −Φ]
    z: np.ndarray  # (3, N) stage increments Z_i
    w: np.ndarray  # (3, N) T⁻¹ Z
    g: np.ndarray  # (3, N) residuals, then the Newton corrections
    cont: np.ndarray  # (4, N) the collocation polynomial of the last step
    scal: np.ndarray  # (N) weights of the norms
    err: np.ndarray  # (N) error estimate
    e1: np.ndarray  # (N) its right side
    br: np.ndarray  # (n + m) right sides of the reduced systems
    bc: np.ndarray
    qs: np.ndarray  # a stage's q, v, λ, D_v
    vs: np.ndarray
    ls: np.ndarray
    dv: np.ndarray
    t1: np.ndarray  # (n) products M x, C x
    t2: np.ndarray
    t3: np.ndarray
    t4: np.ndarray
    tm: np.ndarray  # (m) Φ_q q̇ + Φ_t of an output row
    xo: np.ndarray  # an output row [q; q̇; q̈; λ]
    fstate: np.ndarray
    t_out: np.ndarray
    active: np.ndarray  # (m,) 1.0 enforced, 0.0 a removed redundant row (λ_i = 0)


class SparseWorkspace(NamedTuple):
    """:class:`Workspace` on the compile-time patterns of a sparse module: M, Φ_q and the
    Jacobian's blocks as values (the ``*_values`` kernels), the two matrices of
    [[H, Φ_qᵀ], [Φ_q, 0]] assembled and factored by the plan of HHT's sparse Newton
    matrix (:func:`mbdgen.runtime.sparse_newton.plan_for`: H = M + K/σ² − C/σ has the
    pattern of HHT's M̂), no (n + m)² array."""

    mass: np.ndarray
    force: np.ndarray
    phi: np.ndarray
    phi_q: np.ndarray
    phi_t: np.ndarray
    gam: np.ndarray
    mass_n: np.ndarray
    phi_q_n: np.ndarray
    mass0: np.ndarray
    phi_q0: np.ndarray  # also B = A of the factored K (kkt_rhs needs the same values)
    maq: np.ndarray
    plq: np.ndarray
    fq: np.ndarray
    fqd: np.ndarray
    plan: Any  # sparse_newton.NewtonPlan
    m_rows: np.ndarray  # the patterns of M, Φ_q and Q_q̇ (products with their values)
    m_cols: np.ndarray
    p_rows: np.ndarray
    p_cols: np.ndarray
    d_rows: np.ndarray
    d_cols: np.ndarray
    hr: np.ndarray  # H's values, real and complex
    hc: np.ndarray
    valr: np.ndarray  # K's values, then its factors
    valc: np.ndarray
    wrow_r: np.ndarray
    wrow_c: np.ndarray
    work_r: np.ndarray
    work_c: np.ndarray
    y: np.ndarray
    f0: np.ndarray
    z: np.ndarray
    w: np.ndarray
    g: np.ndarray
    cont: np.ndarray
    scal: np.ndarray
    err: np.ndarray
    e1: np.ndarray
    br: np.ndarray
    bc: np.ndarray
    qs: np.ndarray
    vs: np.ndarray
    ls: np.ndarray
    dv: np.ndarray
    t1: np.ndarray
    t2: np.ndarray
    t3: np.ndarray
    t4: np.ndarray
    tm: np.ndarray
    xo: np.ndarray
    fstate: np.ndarray
    t_out: np.ndarray
    active: np.ndarray


def _common(n: int, m: int, t_out: np.ndarray, active: np.ndarray | None) -> dict[str, Any]:
    N, K = 2 * n + m, n + m
    return {
        "force": np.zeros(n),
        "phi": np.zeros(m),
        "phi_t": np.zeros(m),
        "gam": np.zeros(m),
        "y": np.zeros(N),
        "f0": np.zeros(N),
        "z": np.zeros((3, N)),
        "w": np.zeros((3, N)),
        "g": np.zeros((3, N)),
        "cont": np.zeros((4, N)),
        "scal": np.ones(N),
        "err": np.zeros(N),
        "e1": np.zeros(N),
        "br": np.zeros(K),
        "bc": np.zeros(K, dtype=np.complex128),
        "qs": np.zeros(n),
        "vs": np.zeros(n),
        "ls": np.zeros(m),
        "dv": np.zeros(n),
        "t1": np.zeros(n),
        "t2": np.zeros(n),
        "t3": np.zeros(n),
        "t4": np.zeros(n),
        "tm": np.zeros(m),
        "xo": np.zeros(3 * n + m),
        "fstate": np.zeros(F_SIZE),
        "t_out": np.asarray(t_out, dtype=np.float64),
        "active": row_weights(m, active),
    }


def workspace(n: int, m: int, t_out: np.ndarray, active: np.ndarray | None = None) -> Workspace:
    """Preallocated arrays for :func:`radau_chunk`; ``t_out`` the output times."""
    K = n + m

    def square() -> np.ndarray:
        return np.zeros((n, n))

    return Workspace(
        mass=square(),
        phi_q=np.zeros((m, n)),
        mass_n=square(),
        phi_q_n=np.zeros((m, n)),
        mass0=square(),
        phi_q0=np.zeros((m, n)),
        maq=square(),
        plq=square(),
        fq=square(),
        fqd=square(),
        ar=np.zeros((K, K)),
        pr=np.zeros(K, dtype=np.int64),
        ac=np.zeros((K, K), dtype=np.complex128),
        pc=np.zeros(K, dtype=np.int64),
        **_common(n, m, t_out, active),
    )


def sparse_workspace(
    module: Any, t_out: np.ndarray, active: np.ndarray | None = None
) -> SparseWorkspace:
    """:class:`SparseWorkspace` for a sparse generated module (its plan cached on it)."""
    from mbdgen.runtime import sparse_newton

    plan = sparse_newton.plan_for(module)
    n, m = int(module.N_COORDINATES), int(module.N_CONSTRAINTS)
    kkt = plan.kkt

    def ints(a: Any) -> np.ndarray:
        return np.ascontiguousarray(a, dtype=np.int64)

    nm, npq = len(module.MASS_ROWS), len(module.PHI_Q_ROWS)
    return SparseWorkspace(
        mass=np.zeros(nm),
        phi_q=np.zeros(npq),
        mass_n=np.zeros(nm),
        phi_q_n=np.zeros(npq),
        mass0=np.zeros(nm),
        phi_q0=np.zeros(npq),
        maq=np.zeros(plan.maq_map.shape[0]),
        plq=np.zeros(plan.plq_map.shape[0]),
        fq=np.zeros(plan.fq_map.shape[0]),
        fqd=np.zeros(plan.fqd_map.shape[0]),
        plan=plan,
        m_rows=ints(module.MASS_ROWS),
        m_cols=ints(module.MASS_COLS),
        p_rows=ints(module.PHI_Q_ROWS),
        p_cols=ints(module.PHI_Q_COLS),
        d_rows=ints(module.FORCE_QD_ROWS),
        d_cols=ints(module.FORCE_QD_COLS),
        hr=np.zeros(plan.h_rows.shape[0]),
        hc=np.zeros(plan.h_rows.shape[0], dtype=np.complex128),
        valr=np.zeros(kkt.values_size),
        valc=np.zeros(kkt.values_size, dtype=np.complex128),
        wrow_r=np.zeros(max(kkt.aug_rows.shape[0], 1)),
        wrow_c=np.zeros(max(kkt.aug_rows.shape[0], 1)),
        work_r=np.zeros(kkt.size),
        work_c=np.zeros(kkt.size, dtype=np.complex128),
        **_common(n, m, t_out, active),
    )


# -- products with M, Φ_q and C: dense arrays, or values on the module's patterns -----


@njit(cache=True, inline="always")
def _dense_times(A, x, out):
    for i in range(A.shape[0]):
        s = 0.0
        for j in range(A.shape[1]):
            s += A[i, j] * x[j]
        out[i] = s


@njit(cache=True, inline="always")
def _dense_t_times(A, x, out):
    for j in range(A.shape[1]):
        out[j] = 0.0
    for i in range(A.shape[0]):
        xi = x[i]
        for j in range(A.shape[1]):
            out[j] += A[i, j] * xi


@njit(cache=True, inline="always")
def _values_times(rows, cols, vals, x, out):
    out[:] = 0.0
    for e in range(vals.shape[0]):
        out[rows[e]] += vals[e] * x[cols[e]]


@njit(cache=True, inline="always")
def _values_t_times(rows, cols, vals, x, out):
    out[:] = 0.0
    for e in range(vals.shape[0]):
        out[cols[e]] += vals[e] * x[rows[e]]


def _mass_times(ws, M, x, out):
    """out ← M x (M: ``ws.mass``, ``ws.mass0``, dense or values on M's pattern)."""
    if M.ndim == 2:
        _dense_times(M, x, out)
    else:
        _values_times(ws.m_rows, ws.m_cols, M, x, out)


def _phiq_times(ws, P, x, out):
    """out ← Φ_q x."""
    if P.ndim == 2:
        _dense_times(P, x, out)
    else:
        _values_times(ws.p_rows, ws.p_cols, P, x, out)


def _phiq_t_times(ws, P, x, out):
    """out ← Φ_qᵀ x."""
    if P.ndim == 2:
        _dense_t_times(P, x, out)
    else:
        _values_t_times(ws.p_rows, ws.p_cols, P, x, out)


def _fqd_times(ws, x, out):
    """out ← C x, C = Q_q̇ of the Jacobian."""
    if ws.fqd.ndim == 2:
        _dense_times(ws.fqd, x, out)
    else:
        _values_times(ws.d_rows, ws.d_cols, ws.fqd, x, out)


def _copy(src, dst):
    if src.ndim == 2:
        for i in range(src.shape[0]):
            for j in range(src.shape[1]):
                dst[i, j] = src[i, j]
    else:
        for i in range(src.shape[0]):
            dst[i] = src[i]


@overload(_mass_times, inline="always")
def _ol_mass_times(ws, M, x, out):
    if M.ndim == 2:
        return lambda ws, M, x, out: _dense_times(M, x, out)
    return lambda ws, M, x, out: _values_times(ws.m_rows, ws.m_cols, M, x, out)


@overload(_phiq_times, inline="always")
def _ol_phiq_times(ws, P, x, out):
    if P.ndim == 2:
        return lambda ws, P, x, out: _dense_times(P, x, out)
    return lambda ws, P, x, out: _values_times(ws.p_rows, ws.p_cols, P, x, out)


@overload(_phiq_t_times, inline="always")
def _ol_phiq_t_times(ws, P, x, out):
    if P.ndim == 2:
        return lambda ws, P, x, out: _dense_t_times(P, x, out)
    return lambda ws, P, x, out: _values_t_times(ws.p_rows, ws.p_cols, P, x, out)


@overload(_fqd_times, inline="always")
def _ol_fqd_times(ws, x, out):
    if _is_sparse(ws):
        return lambda ws, x, out: _values_times(ws.d_rows, ws.d_cols, ws.fqd, x, out)
    return lambda ws, x, out: _dense_times(ws.fqd, x, out)


@overload(_copy, inline="always")
def _ol_copy(src, dst):
    if src.ndim == 2:

        def copy2(src, dst):
            for i in range(src.shape[0]):
                for j in range(src.shape[1]):
                    dst[i, j] = src[i, j]

        return copy2

    def copy1(src, dst):
        for i in range(src.shape[0]):
            dst[i] = src[i]

    return copy1


def _is_sparse(ws_type: Any) -> bool:
    return getattr(ws_type, "instance_class", None) is SparseWorkspace


# -- the factorizations: dense LU, or the sparse plan's -----------------------------


# The dense LU and its solves are compiled once each, as functions of their arrays
# (real and complex), not inlined where radau_chunk calls them: their inlined copies
# made a third of its first compile (72 → 47 s on 2 cores; design notes, stop 40).  A
# call costs tens of nanoseconds against the microseconds of the work it does.


@njit(cache=True, error_model="numpy")
def _lu(A, piv, size):
    return lu_factor_inplace(A, piv, size)


@njit(cache=True, error_model="numpy")
def _lu_solve(A, piv, b):
    lu_solve_factored(A, piv, b, b.shape[0])


@njit(cache=True, error_model="numpy")
def _newton_lu(n, m, ih, mass, phi_q, maq, plq, fq, fqd, active, A, piv):
    """LU of [[M + K ih² − C ih, Φ_qᵀ], [Φ_q, 0]] (ih = 1/σ, real or complex)."""
    hht._newton_block(n, m, 0.0, ih * ih, ih, mass, phi_q, maq, plq, fq, fqd, active, A)
    return lu_factor_inplace(A, piv, n + m)


@njit(cache=True, inline="always")
def _dense_start_factor(n, m, ws):
    A = ws.ar
    for i in range(n):
        for j in range(n):
            A[i, j] = ws.mass[i, j]
    hht.constraint_block(n, m, ws.phi_q, ws.active, A)
    return _lu(A, ws.pr, n + m)


@njit(cache=True)
def _sparse_start_factor(n, m, ws):
    plan = ws.plan
    ws.hr[:] = 0.0
    for e in range(plan.mass_map.shape[0]):
        ws.hr[plan.mass_map[e]] += ws.mass[e]
    for e in range(ws.phi_q.shape[0]):
        ws.phi_q0[e] = ws.phi_q[e]
    kkt_assemble(plan.kkt, ws.hr, ws.phi_q0, ws.phi_q0, ws.active, ws.valr, ws.wrow_r)
    return kkt_factor(plan.kkt, ws.valr)


def _start_factor(n, m, ws):
    """Factor [[M, Φ_qᵀ], [Φ_q, 0]] of the latest evaluation (the start's solves)."""
    if isinstance(ws, SparseWorkspace):
        return _sparse_start_factor(n, m, ws)
    return _dense_start_factor(n, m, ws)


@overload(_start_factor, inline="always")
def _ol_start_factor(n, m, ws):
    if _is_sparse(ws):
        return lambda n, m, ws: _sparse_start_factor(n, m, ws)
    return lambda n, m, ws: _dense_start_factor(n, m, ws)


@njit(cache=True, inline="always")
def _dense_solve(ws, b):
    _lu_solve(ws.ar, ws.pr, b)


@njit(cache=True)
def _sparse_solve(ws, b):
    kkt_rhs(ws.plan.kkt, ws.phi_q0, ws.active, ws.wrow_r, b)
    kkt_solve(ws.plan.kkt, ws.valr, b, ws.work_r)


def _solve(ws, b):
    """b ← A⁻¹ b with the real factors (the start's matrix, or that of γ̂/h)."""
    if isinstance(ws, SparseWorkspace):
        _sparse_solve(ws, b)
    else:
        _dense_solve(ws, b)


@overload(_solve, inline="always")
def _ol_solve(ws, b):
    if _is_sparse(ws):
        return lambda ws, b: _sparse_solve(ws, b)
    return lambda ws, b: _dense_solve(ws, b)


@njit(cache=True, inline="always")
def _dense_solve_c(ws, b):
    _lu_solve(ws.ac, ws.pc, b)


@njit(cache=True)
def _sparse_solve_c(ws, b):
    kkt_rhs(ws.plan.kkt, ws.phi_q0, ws.active, ws.wrow_c, b)
    kkt_solve(ws.plan.kkt, ws.valc, b, ws.work_c)


def _solve_c(ws, b):
    """b ← A⁻¹ b with the complex factors (the matrix of (α̂ − iβ̂)/h)."""
    if isinstance(ws, SparseWorkspace):
        _sparse_solve_c(ws, b)
    else:
        _dense_solve_c(ws, b)


@overload(_solve_c, inline="always")
def _ol_solve_c(ws, b):
    if _is_sparse(ws):
        return lambda ws, b: _sparse_solve_c(ws, b)
    return lambda ws, b: _dense_solve_c(ws, b)


@njit(cache=True, inline="always")
def _dense_factor(n, m, sig_r, sig_c, ws):
    """[[M + K/σ² − C/σ, Φ_qᵀ], [Φ_q, 0]] for both σ — HHT's Newton block (Negrut et al.
    2007, Eq. 14) with α = 0, βh² = 1/σ², γh = 1/σ — and their LU factors."""
    maq, plq, fq, fqd, active = ws.maq, ws.plq, ws.fq, ws.fqd, ws.active
    if (
        _newton_lu(n, m, 1.0 / sig_r, ws.mass0, ws.phi_q0, maq, plq, fq, fqd, active, ws.ar, ws.pr)
        != OK
    ):
        return SINGULAR
    return _newton_lu(
        n, m, 1.0 / sig_c, ws.mass0, ws.phi_q0, maq, plq, fq, fqd, active, ws.ac, ws.pc
    )


@njit(cache=True)
def _sparse_factor(n, m, sig_r, sig_c, ws):
    plan = ws.plan
    hr, hc = ws.hr, ws.hc
    hr[:] = 0.0
    hc[:] = 0.0
    ir = 1.0 / sig_r
    ir2 = ir * ir
    ic = 1.0 / sig_c
    ic2 = ic * ic
    for e in range(plan.mass_map.shape[0]):
        k = plan.mass_map[e]
        hr[k] += ws.mass0[e]
        hc[k] += ws.mass0[e]
    for e in range(plan.maq_map.shape[0]):
        k = plan.maq_map[e]
        hr[k] += ws.maq[e] * ir2
        hc[k] += ws.maq[e] * ic2
    for e in range(plan.plq_map.shape[0]):
        k = plan.plq_map[e]
        hr[k] += ws.plq[e] * ir2
        hc[k] += ws.plq[e] * ic2
    for e in range(plan.fq_map.shape[0]):
        k = plan.fq_map[e]
        hr[k] -= ws.fq[e] * ir2
        hc[k] -= ws.fq[e] * ic2
    for e in range(plan.fqd_map.shape[0]):
        k = plan.fqd_map[e]
        hr[k] -= ws.fqd[e] * ir
        hc[k] -= ws.fqd[e] * ic
    kkt_assemble(plan.kkt, hr, ws.phi_q0, ws.phi_q0, ws.active, ws.valr, ws.wrow_r)
    kkt_assemble(plan.kkt, hc, ws.phi_q0, ws.phi_q0, ws.active, ws.valc, ws.wrow_c)
    if kkt_factor(plan.kkt, ws.valr) != OK:
        return SINGULAR
    return kkt_factor(plan.kkt, ws.valc)


def _factor(n, m, sig_r, sig_c, ws):
    """Assemble and factor the real and the complex reduced matrices."""
    if isinstance(ws, SparseWorkspace):
        return _sparse_factor(n, m, sig_r, sig_c, ws)
    return _dense_factor(n, m, sig_r, sig_c, ws)


@overload(_factor, inline="always")
def _ol_factor(n, m, sig_r, sig_c, ws):
    if _is_sparse(ws):
        return lambda n, m, sig_r, sig_c, ws: _sparse_factor(n, m, sig_r, sig_c, ws)
    return lambda n, m, sig_r, sig_c, ws: _dense_factor(n, m, sig_r, sig_c, ws)


# -- the solves and the right sides -------------------------------------------------


@njit(cache=True, inline="always")
def _rhs(n, m, ws, v, lam, out):
    """out ← f = [v; Q − Φ_qᵀλ; −Φ] from the latest evaluation (a removed row: −λ_i)."""
    _phiq_t_times(ws, ws.phi_q, lam, ws.t1)
    for i in range(n):
        out[i] = v[i]
        out[n + i] = ws.force[i] - ws.t1[i]
    for i in range(m):
        w = ws.active[i]
        out[2 * n + i] = -(w * ws.phi[i] + (1.0 - w) * lam[i])


@njit(cache=True, inline="always")
def _solve_real(n, m, sigma, ws, r, x):
    """x ← (σE − J)⁻¹ r through the factored real (n + m)-block (``r``, ``x`` of size N):
    [(r_v + (σM − C) r_q)/σ²; r_λ], then Δv = σΔq − r_q, Δλ = σ² μ."""
    b = ws.br
    for i in range(n):
        ws.t3[i] = r[i]
    _mass_times(ws, ws.mass0, ws.t3, ws.t1)
    _fqd_times(ws, ws.t3, ws.t2)
    inv2 = 1.0 / (sigma * sigma)
    for i in range(n):
        b[i] = (r[n + i] + sigma * ws.t1[i] - ws.t2[i]) * inv2
    for i in range(m):
        b[n + i] = ws.active[i] * r[2 * n + i]
    _solve(ws, b)
    s2 = sigma * sigma
    for i in range(n):
        x[i] = b[i]
        x[n + i] = sigma * b[i] - r[i]
    for i in range(m):
        x[2 * n + i] = s2 * b[n + i]


@njit(cache=True, inline="always")
def _solve_complex(n, m, sigma, ws, r2, r3):
    """(r2 + i r3) ← (σE − J)⁻¹ (r2 + i r3) through the factored complex block."""
    b = ws.bc
    for i in range(n):
        ws.dv[i] = r3[i]
    _mass_times(ws, ws.mass0, r2, ws.t1)
    _mass_times(ws, ws.mass0, ws.dv, ws.t2)
    _fqd_times(ws, r2, ws.t3)
    _fqd_times(ws, ws.dv, ws.t4)
    inv2 = 1.0 / (sigma * sigma)
    for i in range(n):
        mr = ws.t1[i] + 1j * ws.t2[i]
        cr = ws.t3[i] + 1j * ws.t4[i]
        b[i] = (r2[n + i] + 1j * r3[n + i] + sigma * mr - cr) * inv2
    for i in range(m):
        b[n + i] = ws.active[i] * (r2[2 * n + i] + 1j * r3[2 * n + i])
    _solve_c(ws, b)
    s2 = sigma * sigma
    for i in range(n):
        xv = sigma * b[i] - (r2[i] + 1j * r3[i])
        r2[i] = b[i].real
        r3[i] = b[i].imag
        r2[n + i] = xv.real
        r3[n + i] = xv.imag
    for i in range(m):
        xl = s2 * b[n + i]
        r2[2 * n + i] = xl.real
        r3[2 * n + i] = xl.imag


@njit(cache=True, inline="always")
def _record(row, t, x, ws, v, out_t, out_x, out_aux):
    """An output row: t, x and [‖Φ‖₂, ‖Φ_q q̇ + Φ_t‖₂] of the latest evaluation."""
    out_t[row] = t
    for i in range(x.shape[0]):
        out_x[row, i] = x[i]
    _phiq_times(ws, ws.phi_q, v, ws.tm)
    phi2 = 0.0
    phid2 = 0.0
    for i in range(ws.phi.shape[0]):
        d = ws.tm[i] + ws.phi_t[i]
        phi2 += ws.phi[i] * ws.phi[i]
        phid2 += d * d
    out_aux[row, 0] = math.sqrt(phi2)
    out_aux[row, 1] = math.sqrt(phid2)


#: Gauss-Newton corrections of q0 and q̇0 at the start.
_PROJECTIONS = 2


@njit(cache=True, inline="always")
def _project(n, m, ws, q, v):
    """One correction of q (Φ = 0) and v (Φ_q v + Φ_t = 0) with the smallest M-norm:
    [[M, Φ_qᵀ], [Φ_q, 0]] [Δ; μ] = [0; −r], from the latest evaluation at (q, v)."""
    if _start_factor(n, m, ws) != OK:
        return SINGULAR
    b = ws.br
    for i in range(n):
        b[i] = 0.0
    for i in range(m):
        b[n + i] = -ws.active[i] * ws.phi[i]
    _solve(ws, b)
    for i in range(n):
        q[i] += b[i]
    _phiq_times(ws, ws.phi_q, v, ws.tm)
    for i in range(n):
        b[i] = 0.0
    for i in range(m):
        b[n + i] = -ws.active[i] * (ws.tm[i] + ws.phi_t[i])
    _solve(ws, b)
    for i in range(n):
        v[i] += b[i]
    return OK


@njit(cache=True, inline="always")
def _keep_point(n, m, ws):
    """M and Φ_q of the latest evaluation, at y_n, kept for the next factorization."""
    _copy(ws.mass, ws.mass_n)
    _copy(ws.phi_q, ws.phi_q_n)


@njit(cache=True, inline="always")
def _newton_update(N, w, z, g):
    """W += ΔW (the transformed correction in ``g``) and Z = T W."""
    for k in range(3):
        for i in range(N):
            w[k, i] += g[k, i]
    for k in range(3):
        for i in range(N):
            z[k, i] = _T[k, 0] * w[0, i] + _T[k, 1] * w[1, i] + _T[k, 2] * w[2, i]


@njit(cache=True, inline="always")
def _norm(v, scal):
    s = 0.0
    for i in range(v.shape[0]):
        e = v[i] / scal[i]
        s += e * e
    return math.sqrt(s / v.shape[0])


@njit(cache=True, inline="always")
def _output(n, m, ws, t, out):
    """out ← [q; q̇; q̈; λ] at ``t`` on the last step's collocation polynomial."""
    cont = ws.cont
    h = ws.fstate[F_HOLD]
    s = (t - ws.fstate[F_T]) / h
    for i in range(2 * n + m):
        c1, c2, c3 = cont[1, i], cont[2, i], cont[3, i]
        q = c2 + (s - _C1M1) * c3
        r = c1 + (s - _C2M1) * q
        val = cont[0, i] + s * r
        k = i if i < 2 * n else n + i  # λ after q̈
        out[k] = val
        if n <= i < 2 * n:  # q̈ = d v/dt
            out[n + i] = (r + s * (q + (s - _C2M1) * c3)) / h


@njit(cache=True, nogil=True, error_model="numpy")
def radau_chunk(dynamics, mass_a_q, phi_q_lam_q, force_q, force_qd, p, ctrl, ws, t0, h, x, state,
                n_out, stride, out_t, out_x, out_aux):  # fmt: skip
    """Radau IIA (order 5) with error control on the index-3 DAE (module docstring):
    steps from ``ws.fstate[F_T]`` with ``ws.fstate[F_H]`` until ``n_out`` more rows at
    the times ``ws.t_out`` are written or ``ctrl[C_ATTEMPTS]`` steps were attempted.

    ``x`` = [q; q̇; q̈; λ] (q, q̇ consistent at the start); ``state``, ``ws.fstate``
    the ``S_*``, ``F_*`` entries.  ``t0``, ``h`` and ``stride`` are not used (the
    index-3 entry points' signature).  Returns a status code; a failure leaves the
    rows written so far and ``state[S_LASTFAIL]`` says why the last attempt failed.
    """
    # unowned views: no reference counting inside the loop (mbdgen.runtime.refs)
    p = borrow(p)
    ctrl = borrow(ctrl)
    ws = borrow(ws)
    n = ws.force.shape[0]
    m = ws.phi.shape[0]
    N = 2 * n + m
    f = ws.fstate
    y, z, w, g, cont, scal = ws.y, ws.z, ws.w, ws.g, ws.cont, ws.scal
    qs, vs, ls, dv = ws.qs, ws.vs, ws.ls, ws.dv
    rtol, atol = ctrl[C_RTOL], ctrl[C_ATOL]
    nit = int(ctrl[C_MAXIT])
    safe, thet, kappa = ctrl[C_SAFE], ctrl[C_THET], ctrl[C_KAPPA]
    facl, facr = ctrl[C_FACL], ctrl[C_FACR]
    cfac = safe * (1 + 2 * nit)
    n_rows = ws.t_out.shape[0]

    if state[S_STARTED] == 0:
        t = f[F_T]
        for i in range(n):
            qs[i] = x[i]
            vs[i] = x[n + i]
        # q0, q̇0 consistent to round-off: an offset δ of Φ(q0) would be corrected by the
        # first step's stages at a velocity δ/h, which no error test passes
        for _ in range(_PROJECTIONS):
            dynamics(t, qs, vs, p, ws.mass, ws.force, ws.phi, ws.phi_q, ws.phi_t, ws.gam)
            state[S_NEVAL] += 1
            if _project(n, m, ws, qs, vs) != OK:
                return SINGULAR
        dynamics(t, qs, vs, p, ws.mass, ws.force, ws.phi, ws.phi_q, ws.phi_t, ws.gam)
        state[S_NEVAL] += 1
        for i in range(n):
            x[i] = qs[i]
            x[n + i] = vs[i]
        # q̈_0, λ_0 from [[M, Φ_qᵀ], [Φ_q, 0]] [q̈; λ] = [Q; γ] (Haug 1989, Eq. 7.2.1)
        if _start_factor(n, m, ws) != OK:
            return SINGULAR
        b = ws.br
        for i in range(n):
            b[i] = ws.force[i]
        for i in range(m):
            b[n + i] = ws.active[i] * ws.gam[i]
        _solve(ws, b)
        for i in range(n):
            x[2 * n + i] = b[i]
            y[i] = x[i]
            y[n + i] = x[n + i]
        for i in range(m):
            x[3 * n + i] = b[n + i]
            y[2 * n + i] = b[n + i]
        _rhs(n, m, ws, vs, y[2 * n :], ws.f0)
        _keep_point(n, m, ws)
        state[S_STARTED] = 1
        state[S_CALJAC] = 0
        state[S_NEEDJAC] = 1
        state[S_LU] = 0
        state[S_FIRST] = 1
        state[S_REJECT] = 0
        f[F_FACCON] = 1.0
        f[F_THETA] = 1.0
        if state[S_ROW] == 0 and n_rows > 0 and ws.t_out[0] <= t:
            _record(0, t, x, ws, vs, out_t, out_x, out_aux)
            state[S_ROW] = 1

    written = 0
    attempts = 0
    max_attempts = int(ctrl[C_ATTEMPTS])
    while True:
        t = f[F_T]
        # the rows due inside the last accepted step, from its polynomial
        while state[S_ROW] < n_rows and ws.t_out[state[S_ROW]] <= t and written < n_out:
            row = state[S_ROW]
            tr = ws.t_out[row]
            if tr == t:
                for i in range(3 * n + m):
                    ws.xo[i] = x[i]
            else:
                _output(n, m, ws, tr, ws.xo)
            for i in range(n):
                qs[i] = ws.xo[i]
                vs[i] = ws.xo[n + i]
            dynamics(tr, qs, vs, p, ws.mass, ws.force, ws.phi, ws.phi_q, ws.phi_t, ws.gam)
            state[S_NEVAL] += 1
            _record(row, tr, ws.xo, ws, vs, out_t, out_x, out_aux)
            state[S_ROW] = row + 1
            written += 1
        if written >= n_out or state[S_ROW] >= n_rows or attempts >= max_attempts:
            return OK
        attempts += 1

        # -- one step attempt from t with h
        hh = f[F_H]
        last = False
        # RADAU5's landing: a step that would end within h/10⁴ of t_end goes to t_end
        # (fixed steps of 0.05 reach 0.49999999999999994 after ten, not 0.5)
        if t + 1.0001 * hh >= f[F_TEND]:
            hh = f[F_TEND] - t
            last = True
        if hh < f[F_HMIN] or hh <= 16.0 * _EPS * max(abs(t), abs(f[F_TEND])):
            code = state[S_LASTFAIL]
            if code == hht._FAIL_NEWTON:
                return NEWTON_FAILED
            if code == hht._FAIL_NONFINITE:
                return NONFINITE
            if code == hht._FAIL_SINGULAR:
                return SINGULAR
            return STEP_SIZE_COLLAPSE
        f[F_H] = hh
        if state[S_NEEDJAC] == 1:
            # the Jacobian at y_n: K = (M a)_q + (Φ_qᵀλ)_q − Q_q and C = Q_q̇
            for i in range(n):
                qs[i] = y[i]
                vs[i] = y[n + i]
                dv[i] = x[2 * n + i]
            for i in range(m):
                ls[i] = y[2 * n + i]
            mass_a_q(t, qs, dv, p, ws.maq)
            phi_q_lam_q(t, qs, ls, p, ws.plq)
            force_q(t, qs, vs, p, ws.fq)
            force_qd(t, qs, vs, p, ws.fqd)
            state[S_JAC] += 1
            state[S_CALJAC] = 1
            state[S_NEEDJAC] = 0
            state[S_LU] = 0
        sig_r = GAMMA_HAT / hh
        sig_c = (ALPHA_HAT - 1j * BETA_HAT) / hh
        if state[S_LU] == 0 or f[F_HLU] != hh:
            _copy(ws.mass_n, ws.mass0)
            _copy(ws.phi_q_n, ws.phi_q0)
            ok = _factor(n, m, sig_r, sig_c, ws) == OK
            state[S_FACT] += 2
            if not ok:
                state[S_LU] = 0
                state[S_NSING] += 1
                state[S_LASTFAIL] = hht._FAIL_SINGULAR
                if state[S_NSING] >= 5:
                    return SINGULAR
                f[F_H] = 0.5 * hh
                state[S_REJECT] = 1
                state[S_NEEDJAC] = 1 - state[S_CALJAC]
                continue
            state[S_NSING] = 0
            state[S_LU] = 1
            f[F_HLU] = hh

        # weights: s_i = atol + rtol |y_i|, over h for v (index 2), over h² for λ (index 3)
        for i in range(N):
            s = atol + rtol * abs(y[i])
            if i >= 2 * n:
                s /= hh * hh
            elif i >= n:
                s /= hh
            scal[i] = s
        # starting values: the last step's polynomial, or zero
        if state[S_STEP] > 0:
            c3q = hh / f[F_HOLD]
            for k in range(3):
                cq = _CC[k] * c3q
                for i in range(N):
                    z[k, i] = cq * (
                        cont[1, i] + (cq - _C2M1) * (cont[2, i] + (cq - _C1M1) * cont[3, i])
                    )
        else:
            for k in range(3):
                for i in range(N):
                    z[k, i] = 0.0
        for k in range(3):
            for i in range(N):
                w[k, i] = _TI[k, 0] * z[0, i] + _TI[k, 1] * z[1, i] + _TI[k, 2] * z[2, i]

        # -- simplified Newton (RADAU5's RADCOR)
        faccon = max(f[F_FACCON], _EPS) ** 0.8
        theta = thet
        newt = 0
        dynold = 0.0
        thqold = 0.0
        fail = 0
        hnew_newton = 0.0
        extra = False  # the iteration past the stopping test (C_EXTRA)
        while True:
            if newt >= nit:
                fail = hht._FAIL_NEWTON
                break
            finite = True
            for k in range(3):
                tk = t + _CC[k] * hh
                for i in range(n):
                    qs[i] = y[i] + z[k, i]
                    vs[i] = y[n + i] + z[k, n + i]
                for i in range(m):
                    ls[i] = y[2 * n + i] + z[k, 2 * n + i]
                dynamics(tk, qs, vs, p, ws.mass, ws.force, ws.phi, ws.phi_q, ws.phi_t, ws.gam)
                for i in range(n):
                    dq = (_W[k, 0] * z[0, i] + _W[k, 1] * z[1, i] + _W[k, 2] * z[2, i]) / hh
                    g[k, i] = dq - vs[i]
                    dv[i] = (
                        _W[k, 0] * z[0, n + i] + _W[k, 1] * z[1, n + i] + _W[k, 2] * z[2, n + i]
                    ) / hh
                _mass_times(ws, ws.mass, dv, ws.t1)
                _phiq_t_times(ws, ws.phi_q, ls, ws.t2)
                for i in range(n):
                    g[k, n + i] = ws.t1[i] + ws.t2[i] - ws.force[i]
                for i in range(m):
                    a = ws.active[i]
                    g[k, 2 * n + i] = a * ws.phi[i] + (1.0 - a) * ls[i]
            state[S_NEVAL] += 3
            # r = −T⁻¹ G, into the rows of ``err``/``e1``-sized scratch: reuse g in place
            for i in range(N):
                g0, g1, g2 = g[0, i], g[1, i], g[2, i]
                g[0, i] = -(_TI[0, 0] * g0 + _TI[0, 1] * g1 + _TI[0, 2] * g2)
                g[1, i] = -(_TI[1, 0] * g0 + _TI[1, 1] * g1 + _TI[1, 2] * g2)
                g[2, i] = -(_TI[2, 0] * g0 + _TI[2, 1] * g1 + _TI[2, 2] * g2)
                if not (math.isfinite(g0) and math.isfinite(g1) and math.isfinite(g2)):
                    finite = False
            if not finite:
                fail = hht._FAIL_NONFINITE
                break
            _solve_real(n, m, sig_r, ws, g[0], ws.err)
            for i in range(N):
                g[0, i] = ws.err[i]
            _solve_complex(n, m, sig_c, ws, g[1], g[2])
            newt += 1
            state[S_NEWTON] += 1
            dyno = math.sqrt(
                (_norm(g[0], scal) ** 2 + _norm(g[1], scal) ** 2 + _norm(g[2], scal) ** 2) / 3.0
            )
            if not math.isfinite(dyno):
                fail = hht._FAIL_NONFINITE
                break
            if 1 < newt < nit:
                thq = dyno / dynold
                theta = thq if newt == 2 else math.sqrt(thq * thqold)
                thqold = thq
                if extra:
                    if theta < 0.99:  # else keep the iterate that passed the test
                        faccon = theta / (1.0 - theta)
                        _newton_update(N, w, z, g)
                    break
                if theta < 0.99:
                    faccon = theta / (1.0 - theta)
                    dyth = faccon * dyno * theta ** (nit - 1 - newt) / kappa
                    if dyth >= 1.0:  # will not converge in time: a smaller step
                        qnewt = max(1.0e-4, min(20.0, dyth))
                        hnew_newton = hh * 0.8 * qnewt ** (-1.0 / (4.0 + nit - 1 - newt))
                        fail = hht._FAIL_NEWTON
                        break
                else:
                    fail = hht._FAIL_NEWTON
                    break
            elif extra:
                _newton_update(N, w, z, g)
                break
            dynold = max(dyno, _EPS)
            _newton_update(N, w, z, g)
            if faccon * dyno <= kappa:
                if ctrl[C_EXTRA] == 0.0 or newt >= nit:
                    break
                extra = True
        state[S_MAX_ITERS] = max(state[S_MAX_ITERS], newt)
        if fail:
            state[S_CUTS] += 1
            state[S_LASTFAIL] = fail
            state[S_REJECT] = 1
            f[F_H] = hnew_newton if hnew_newton > 0.0 else 0.5 * hh
            state[S_NEEDJAC] = 1 - state[S_CALJAC]  # a fresh Jacobian unless it is of y_n
            state[S_LU] = 0
            continue
        f[F_THETA] = theta
        f[F_FACCON] = faccon

        # -- the error estimate (Hairer & Wanner Eqs. 8.19-8.20, mass matrix E)
        e1 = ws.e1
        for i in range(N):
            ez = (_DD[0] * z[0, i] + _DD[1] * z[1, i] + _DD[2] * z[2, i]) / hh
            e1[i] = ez
        for i in range(n):  # E: M on the v rows, 0 on the λ rows
            ws.t3[i] = e1[n + i]
        _mass_times(ws, ws.mass0, ws.t3, dv)
        for i in range(n):
            e1[n + i] = dv[i]
        for i in range(m):
            e1[2 * n + i] = 0.0
        for i in range(2 * n):
            g[0, i] = ws.f0[i] + e1[i]
        for i in range(m):  # y_n counts as consistent: its Φ is no truncation error
            g[0, 2 * n + i] = 0.0
        _solve_real(n, m, sig_r, ws, g[0], ws.err)
        err = max(_norm(ws.err, scal), 1e-10)
        if err >= 1.0 and (state[S_FIRST] == 1 or state[S_REJECT] == 1):
            for i in range(n):
                qs[i] = y[i] + ws.err[i]
                vs[i] = y[n + i] + ws.err[n + i]
            for i in range(m):
                ls[i] = y[2 * n + i] + ws.err[2 * n + i]
            dynamics(t, qs, vs, p, ws.mass, ws.force, ws.phi, ws.phi_q, ws.phi_t, ws.gam)
            state[S_NEVAL] += 1
            _rhs(n, m, ws, vs, ls, g[1])
            for i in range(2 * n):
                g[0, i] = g[1, i] + e1[i]
            for i in range(m):
                g[0, 2 * n + i] = g[1, 2 * n + i] - ws.f0[2 * n + i]
            _solve_real(n, m, sig_r, ws, g[0], ws.err)
            err = max(_norm(ws.err, scal), 1e-10)
        f[F_ERR] = err
        if not math.isfinite(err):
            err = 1e10
        fac = min(safe, cfac / (newt + 2 * nit))
        quot = max(facr, min(facl, err**0.25 / fac))
        hnew = hh / quot
        fixed = ctrl[C_FIXED] != 0.0
        if fixed:
            hnew = f[F_HMAX]
        if err < 1.0 or fixed:
            # -- accepted
            if ctrl[C_GUSTAFSSON] != 0.0 and state[S_STEP] > 0 and not fixed:
                facgus = (f[F_HACC] / hh) * (err * err / f[F_ERRACC]) ** 0.25 / safe
                facgus = max(facr, min(facl, facgus))
                quot = max(quot, facgus)
                hnew = hh / quot
            f[F_HACC] = hh
            f[F_ERRACC] = max(1.0e-2, err)
            t_new = f[F_TEND] if last else t + hh
            for i in range(N):
                z1, z2, z3 = z[0, i], z[1, i], z[2, i]
                ynew = y[i] + z3
                ak = (z1 - z2) / _C1MC2
                acont3 = (ak - z1 / _C1) / _C2
                cont[1, i] = (z2 - z3) / _C2M1
                cont[2, i] = (ak - cont[1, i]) / _C1M1
                cont[3, i] = cont[2, i] - acont3
                cont[0, i] = ynew
                y[i] = ynew
            for i in range(n):  # q̈_{n+1} = D_v,3
                x[2 * n + i] = (
                    _W[2, 0] * z[0, n + i] + _W[2, 1] * z[1, n + i] + _W[2, 2] * z[2, n + i]
                ) / hh
                x[i] = y[i]
                x[n + i] = y[n + i]
            for i in range(m):
                x[3 * n + i] = y[2 * n + i]
            f[F_TPREV] = t
            f[F_T] = t_new
            f[F_HOLD] = hh
            state[S_STEP] += 1
            state[S_FIRST] = 0
            state[S_LASTFAIL] = 0
            # f(y_{n+1}), and M, Φ_q there for the next matrices
            for i in range(n):
                qs[i] = y[i]
                vs[i] = y[n + i]
            for i in range(m):
                ls[i] = y[2 * n + i]
            dynamics(t_new, qs, vs, p, ws.mass, ws.force, ws.phi, ws.phi_q, ws.phi_t, ws.gam)
            state[S_NEVAL] += 1
            _rhs(n, m, ws, vs, ls, ws.f0)
            _keep_point(n, m, ws)
            hnew = min(hnew, f[F_HMAX])
            if state[S_REJECT] == 1 and not fixed:
                hnew = min(hnew, hh)
            state[S_REJECT] = 0
            state[S_CALJAC] = 0
            qt = hnew / hh
            if theta <= thet and ctrl[C_QUOT1] <= qt <= ctrl[C_QUOT2]:
                f[F_H] = hh  # keep the Jacobian and the factors
            else:
                f[F_H] = hnew
                state[S_LU] = 0
                state[S_NEEDJAC] = 1 if theta > thet else 0
        else:
            # -- rejected
            state[S_REJECT] = 1
            state[S_LASTFAIL] = hht._FAIL_ERROR
            if state[S_FIRST] == 1:
                f[F_H] = 0.1 * hh
            else:
                f[F_H] = hnew
            if state[S_STEP] >= 1:
                state[S_REJECTS] += 1
            state[S_LU] = 0
            state[S_NEEDJAC] = 1 - state[S_CALJAC]
