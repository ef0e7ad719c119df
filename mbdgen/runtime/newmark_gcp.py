"""Implicit Newmark on the state-space ODE of generalized coordinate partitioning, fixed
step: IMPL and its quasi-Newton variant FV (Haug, Negrut & Iancu 1997, §3).

The coordinates are split into dependent u and independent v by LU factorization of
Φ_q with full pivoting (Eqs. 7-8; :func:`mbdgen.runtime.partition.choose_partition`).
Only v is integrated, with Newmark's formulas (Eqs. 16-19)

    v̇_{n+1} = ṽ̇_{n+1} + γh v̈_{n+1},     ṽ̇_{n+1} = v̇_n + (1 − γ)h v̈_n
    v_{n+1}  = ṽ_{n+1} + βh² v̈_{n+1},    ṽ_{n+1}  = v_n + h v̇_n + ½h²(1 − 2β) v̈_n

and the unknowns of a step are the independent accelerations v̈_{n+1}.  For a given v̈
every other variable follows from the kinematic and kinetic equations (§3.2.3): u
from Φ(u, v, t) = 0 by Newton's method (Eq. 11), u̇ from Φ_u u̇ = −Φ_v v̇ − Φ_t
(Eq. 12), ü from Φ_u ü = γ − Φ_v v̈ (Eq. 13) and λ from Φ_uᵀλ = Q^u − (M q̈)^u
(Eq. 10), all with one LU factorization of Φ_u.  What is left is the residual of the
independent equations of motion (Eq. 20)

    Ψ(v̈) = (M q̈ + Φ_qᵀλ − Q)^v = 0,

solved by Newton's method (Eq. 30) with the exact Jacobian of Eq. 29.  Written with
P = [I; H] (the rows of v and of u; Φ_u H = −Φ_v, Eq. 31) it is

    Ψ_v̈ = Pᵀ G,    G = M (P + βh² L̂ + γh N̂) + βh² [(M q̈)_q + (Φ_qᵀλ)_q − Q_q] P
                       − Q_q̇ (γh P + βh² Ĵ),

where a hat puts an m-row matrix on the rows of u (zero on v).  Pᵀ G collects the
terms of Eq. 29 (Pᵀ M P = M^vv + M^vu H + Hᵀ(M^uv + M^uu H); Hᵀ G^u carries R and
S of Eqs. 35-36, i.e. λ_v̈ of Eq. 27).  J, L, N solve Eqs. 32-34 with the LU of Φ_u:

    Φ_u J = ½ γ_q̇ P                         (Eq. 32: (Φ_q q̇)_q + Φ_qt = −½ γ_q̇)
    Φ_u N = γ_q̇ P,  so N = 2J               (Eq. 34, τ = γ)
    Φ_u L = [γ_q − (Φ_q q̈)_q] P + γ_q̇ Ĵ     (Eq. 33)

every block from a generated kernel (DESIGN rule 2): (M a)_q, (Φ_qᵀλ)_q, Q_q, Q_q̇,
(Φ_q a)_q, γ_q, γ_q̇.  Writing (Φ_q q̇)_q through γ_q̇ also covers rheonomic
constraints, which the paper (scleronomic) does not treat.

FV (Fisette & Vaneghem 1996, as §3.2.2 and Eq. 40 describe it) uses the same
discretization and residual but drops from the iteration matrix the derivative of
the acceleration right side (N and L) and the constraint-force Hessian (Φ_qᵀλ)_q:
Ψ_v̈ − Π_v̈ of Eq. 40.  Its solution is the same; only Newton's convergence differs.

Steps (§3.3).  Predictor (``ctrl[C_PREDICTOR]`` 0, "ode"): v, v̇ from Eqs. 16-17
with β = γ = 0, u and u̇ from Eqs. 11-12, and v̈ from the state-space equations
(Eq. 39) there; if the predicted v admits no u the step starts from v̈_n instead
(counted in ``S_PRED_FALLBACK``).  That predictor is an explicit Euler step of the
velocities: on a stiff damper (h c/J ≫ 1) it overshoots, and Newton's method may
diverge from it where it converges from v̈_n (the double pendulum with c = 500 at
h = 0.003: from the predictor's v̈, ten times the solution, Newton diverges; from
v̈_n it converges in three iterations).  ``ctrl[C_PREDICTOR]`` 1 ("constant") starts
from v̈_{n+1} = v̈_n.  Corrector: for each iterate v̈, u is solved from
Eq. 11 starting from ũ + βh²ü (Eq. 17 applied to u, a good start), then u̇, ü, λ, Ψ;
a Newton update of v̈; repeat.  The accepted step is the last iterate evaluated, so Φ,
the velocity equation and the index-1 equations (Haug 1989, Eq. 7.2.1) hold there:
λ and q̈ are the index-1 values at the accepted (q, q̇) to the Newton tolerance.

Newton's method is modified Newton as in :mod:`mbdgen.runtime.hht` (Negrut et al.
2007, §3): the factorized iteration matrix is kept over iterations and steps while
the convergence rate ξ (Eq. 43 there) is good, re-evaluated when it slows; the
stopping test is the same (the estimated distance ξ/(1 − ξ)‖Δv̈‖ to the solution,
Eq. 42 there, relative to ``ctrl[C_TOL]`` max(1, ‖v̈‖∞), not below the round-off floor
10 eps max(1, ‖q‖∞)/(βh²)).  ``ctrl[C_FULL_NEWTON]`` re-evaluates the matrix at
every iterate, as the paper does (§3.2.3).  A step that exhausts ``ctrl[C_MAXIT]``
iterations, or whose iterate admits no u, is restarted once from the predictor with
a fresh matrix; if that fails too the coordinates are re-partitioned at the last
accepted step and the step tried once more, then ``NEWTON_FAILED``.

Re-partitioning (Haug 1989 §7.3.2, step 7) uses the criterion of the explicit GCP
(:mod:`mbdgen.runtime.partition`): when the smallest pivot of Φ_u's LU factors over
the largest entry of Φ_q falls below ``ctrl[C_PIVOT_RATIO]`` at an accepted step, a
new partition is chosen there by full pivoting and the threshold becomes
``ctrl[C_PIVOT_FRACTION]`` times its quality.  A one-step method needs no restart:
the full q, q̇, q̈ of the accepted step are known, only the split changes.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from mbdgen.runtime.linalg import (
    lu_factor_inplace,
    lu_solve_factored,
    lu_solve_inplace,
    lu_solve_transposed,
)
from mbdgen.runtime.partition import _choose_dependent
from mbdgen.runtime.refs import borrow
from mbdgen.runtime.status import NEWTON_FAILED, NONFINITE, OK, SINGULAR

# Layout of the float ``ctrl`` vector.
C_BETA = 0  # Newmark β (paper: ¼)
C_GAMMA = 1  # Newmark γ (paper: ½)
C_TOL = 2  # Newton tolerance on v̈ (relative, see the module docstring)
C_MAXIT = 3  # Newton iterations allowed per step
C_RATE_SLOW = 4  # ξ above this re-evaluates an old iteration matrix
C_FULL_NEWTON = 5  # 1: re-evaluate the iteration matrix at every iterate
C_FV = 6  # 1: Fisette–Vaneghem's iteration matrix (Eq. 40), 0: the exact Eq. 29
C_PHI_TOL = 7  # ‖Φ‖∞ that Newton on u (Eq. 11) must reach
C_PHI_ITERS = 8  # most Newton iterations on u per evaluation
C_PIVOT_RATIO = 9  # re-partition when min|pivot of Φ_u| / max|Φ_q| falls below this
C_PIVOT_FRACTION = 10  # after a re-partition: C_PIVOT_RATIO = this × its quality
C_PREDICTOR = 11  # start of Newton: 0 the §3.3 predictor stage, 1 v̈_{n+1} = v̈_n
CTRL_SIZE = 12

#: Values of ``ctrl[C_PREDICTOR]`` by name.
PREDICTORS = {"ode": 0.0, "constant": 1.0}

# Layout of the int64 ``state`` array shared between chunks.
S_STEP = 0  # steps taken since t0
S_ROW = 1  # next output row
S_STARTED = 2  # 1 once q̈_0, λ_0 are known
S_NEWTON = 3  # Newton iterations on v̈ (linear solves with the iteration matrix)
S_JAC = 4  # iteration-matrix evaluations
S_FACT = 5  # LU factorizations of the iteration matrix
S_JAC_VALID = 6  # 1: ``A``, ``piv`` hold the factorized iteration matrix
S_MAX_ITERS = 7  # most Newton iterations any step took
S_RESTARTS = 8  # steps restarted from the predictor with a fresh matrix
S_NEVAL = 9  # evaluations of the ``dynamics`` kernel
S_REPART = 10  # re-partitions
S_POSITION_ITERS = 11  # Newton iterations on u (Eq. 11)
S_PRED_FALLBACK = 12  # predictor stages that found no u and started from v̈_n
S_RESIDUALS = 13  # evaluations of Ψ (Eq. 20)
STATE_SIZE = 14

#: Round-off floor of the Newton corrections, in units of eps max(1, ‖q‖∞)/(βh²).
_NOISE = 10.0 * np.finfo(np.float64).eps


def control(
    tol: float,
    max_iterations: int,
    *,
    fv: bool = False,
    full_newton: bool = False,
    rate_slow: float = 0.05,
    beta: float = 0.25,
    gamma: float = 0.5,
    phi_tol: float = 1e-10,
    phi_iterations: int = 25,
    pivot_ratio: float = 0.0,
    pivot_fraction: float = 0.1,
    predictor: str = "ode",
) -> np.ndarray:
    """The ``ctrl`` vector; β = ¼, γ = ½ (the trapezoidal rule) as in the paper's §4."""
    ctrl = np.zeros(CTRL_SIZE)
    ctrl[C_BETA] = beta
    ctrl[C_GAMMA] = gamma
    ctrl[C_TOL] = tol
    ctrl[C_MAXIT] = max_iterations
    ctrl[C_RATE_SLOW] = rate_slow
    ctrl[C_FULL_NEWTON] = 1.0 if full_newton else 0.0
    ctrl[C_FV] = 1.0 if fv else 0.0
    ctrl[C_PHI_TOL] = phi_tol
    ctrl[C_PHI_ITERS] = phi_iterations
    ctrl[C_PIVOT_RATIO] = pivot_ratio
    ctrl[C_PIVOT_FRACTION] = pivot_fraction
    ctrl[C_PREDICTOR] = PREDICTORS[predictor]
    return ctrl


def state_width(n: int, m: int) -> int:
    """Length of the state x = [q; q̇; q̈; λ]."""
    return 3 * n + m


class Workspace(NamedTuple):
    """Preallocated arrays of :func:`newmark_gcp_chunk`; M, Q, Φ, Φ_q, Φ_t, γ of the
    latest evaluation first (the stepper contract, :mod:`mbdgen.diagnose`)."""

    mass: np.ndarray  # M
    force: np.ndarray  # Q
    phi: np.ndarray  # Φ
    phi_q: np.ndarray  # Φ_q
    phi_t: np.ndarray  # Φ_t
    gam: np.ndarray  # γ
    dep: np.ndarray  # u's indices
    ind: np.ndarray  # v's indices
    Ju: np.ndarray  # LU of Φ_u
    pivu: np.ndarray  # its pivots
    H: np.ndarray  # H (Eq. 31)
    J: np.ndarray  # J (Eq. 32)
    L: np.ndarray  # L (Eq. 33)
    maq: np.ndarray  # (M q̈)_q
    plq: np.ndarray  # (Φ_qᵀλ)_q
    fq: np.ndarray  # Q_q
    fqd: np.ndarray  # Q_q̇
    paq: np.ndarray  # (Φ_q q̈)_q
    gq: np.ndarray  # γ_q
    gqd: np.ndarray  # γ_q̇
    P: np.ndarray  # P = [I; H] on the rows of v and u
    G: np.ndarray  # G (n × nv scratch)
    A: np.ndarray  # iteration matrix Ψ_v̈, factorized
    piv: np.ndarray  # its pivots
    B: np.ndarray  # Eq. 39's matrix (scratch)
    q1: np.ndarray  # q_{n+1} (iterate)
    qd1: np.ndarray  # q̇_{n+1}
    qdd1: np.ndarray  # q̈_{n+1}
    lam1: np.ndarray  # λ_{n+1}
    v_pred: np.ndarray  # predictor ṽ (Eq. 19, all coordinates)
    vd_pred: np.ndarray  # predictor ṽ̇ (Eq. 18, all coordinates)
    qdd_pred: np.ndarray  # q̈ of the predictor stage (restart point)
    res_n: np.ndarray  # scratch n: M q̈ − Q
    res_m: np.ndarray  # scratch m
    psi: np.ndarray  # Ψ, then the Newton update
    part_scratch: np.ndarray  # scratch of the full-pivoting partition
    part_perm: np.ndarray  # its column permutation


def workspace(n: int, m: int, dep: np.ndarray, ind: np.ndarray) -> Workspace:
    """Preallocated arrays of :func:`newmark_gcp_chunk` for the partition ``dep``,
    ``ind`` (sorted indices of u and v)."""
    nv = n - m
    return Workspace(
        mass=np.zeros((n, n)),
        force=np.zeros(n),
        phi=np.zeros(m),
        phi_q=np.zeros((m, n)),
        phi_t=np.zeros(m),
        gam=np.zeros(m),
        dep=np.array(dep, dtype=np.int64),
        ind=np.array(ind, dtype=np.int64),
        Ju=np.zeros((m, m)),
        pivu=np.zeros(m, dtype=np.int64),
        H=np.zeros((m, nv)),
        J=np.zeros((m, nv)),
        L=np.zeros((m, nv)),
        maq=np.zeros((n, n)),
        plq=np.zeros((n, n)),
        fq=np.zeros((n, n)),
        fqd=np.zeros((n, n)),
        paq=np.zeros((m, n)),
        gq=np.zeros((m, n)),
        gqd=np.zeros((m, n)),
        P=np.zeros((n, nv)),
        G=np.zeros((n, nv)),
        A=np.zeros((nv, nv)),
        piv=np.zeros(nv, dtype=np.int64),
        B=np.zeros((nv, nv)),
        q1=np.zeros(n),
        qd1=np.zeros(n),
        qdd1=np.zeros(n),
        lam1=np.zeros(m),
        v_pred=np.zeros(n),
        vd_pred=np.zeros(n),
        qdd_pred=np.zeros(n),
        res_n=np.zeros(n),
        res_m=np.zeros(m),
        psi=np.zeros(nv),
        part_scratch=np.zeros((m, n)),
        part_perm=np.zeros(n, dtype=np.int64),
    )


# Only the routines that call kernels are inlined into the generated entry point (they
# must be: see mbdgen.runtime's docstring); the array routines are ordinary cached
# functions, compiled once for every model, which keeps the entry point's compile
# time down.


@njit(cache=True)
def predictor(n, h, beta, gamma_nm, q, qd, qdd, qt, qdt):
    """ṽ, ṽ̇ of Eqs. 19 and 18, for every coordinate."""
    hh = 0.5 * h * h * (1.0 - 2.0 * beta)
    for i in range(n):
        qt[i] = q[i] + h * qd[i] + hh * qdd[i]
        qdt[i] = qd[i] + (1.0 - gamma_nm) * h * qdd[i]


@njit(cache=True)
def newmark(n, bh2, gh, qt, qdt, qdd1, q1, qd1):
    """v_{n+1} = ṽ + βh² v̈, v̇_{n+1} = ṽ̇ + γh v̈ (Eqs. 16-17) for every coordinate:
    exact on v, the starting values of the Newton iteration on u."""
    for i in range(n):
        q1[i] = qt[i] + bh2 * qdd1[i]
        qd1[i] = qdt[i] + gh * qdd1[i]


@njit(cache=True)
def _position_update(m, ws):
    """One Newton update of u for Φ(u, v) = 0 (Eq. 11) from Φ, Φ_q in ``ws``."""
    phi, phi_q, dep, Ju, q1, r = ws.phi, ws.phi_q, ws.dep, ws.Ju, ws.q1, ws.res_m
    for i in range(m):
        for j in range(m):
            Ju[i, j] = phi_q[i, dep[j]]
        r[i] = -phi[i]
    if lu_solve_inplace(Ju, r, m) != OK:
        return SINGULAR
    for j in range(m):
        q1[dep[j]] += r[j]
    return OK


@njit(cache=True)
def _velocities(n, m, ws):
    """Φ_u factorized at the evaluated q1 and u̇ from Φ_u u̇ = −Φ_v v̇ − Φ_t (Eq. 12).
    Returns (status, min|pivot of Φ_u| / max|Φ_q|)."""
    phi_q, phi_t, dep, ind, Ju, pivu = ws.phi_q, ws.phi_t, ws.dep, ws.ind, ws.Ju, ws.pivu
    qd1, r = ws.qd1, ws.res_m
    if m == 0:
        return OK, 1.0
    scale = 0.0
    for i in range(m):
        for j in range(n):
            scale = max(scale, abs(phi_q[i, j]))
        for j in range(m):
            Ju[i, j] = phi_q[i, dep[j]]
    if lu_factor_inplace(Ju, pivu, m) != OK:
        return SINGULAR, 0.0
    lo = math.inf
    for k in range(m):
        lo = min(lo, abs(Ju[k, k]))
    for i in range(m):
        s = -phi_t[i]
        for j in range(n - m):
            s -= phi_q[i, ind[j]] * qd1[ind[j]]
        r[i] = s
    lu_solve_factored(Ju, pivu, r, m)
    for j in range(m):
        qd1[dep[j]] = r[j]
    return OK, lo / scale


@njit(cache=True, inline="always")
def consistent(dynamics, phi_k, phi_q_k, force_k, gamma_k, n, m, t, p, ctrl, ws, state):
    """u from Φ(u, v, t) = 0 (Eq. 11) by Newton's method, Φ_u factorized at the
    solution, u̇ from Φ_u u̇ = −Φ_v v̇ − Φ_t (Eq. 12), for the iterate (q1, q̇1) in
    ``ws``; M, Q, Φ, Φ_q, Φ_t, γ are left evaluated there.

    Returns (status, pivot ratio min|pivot of Φ_u| / max|Φ_q|).
    """
    mass, force, phi, phi_q, phi_t, gam = ws[:6]
    q1, qd1 = ws.q1, ws.qd1
    tol = ctrl[C_PHI_TOL]
    max_iterations = ctrl[C_PHI_ITERS]
    iters = 0
    while True:
        phi_k(t, q1, p, phi)
        worst = 0.0
        for i in range(m):
            worst = max(worst, abs(phi[i]))
        if not math.isfinite(worst) or (worst > tol and iters >= max_iterations):
            state[S_POSITION_ITERS] += iters
            return NEWTON_FAILED, 0.0
        if worst <= tol:
            break
        phi_q_k(t, q1, p, phi_q)
        if _position_update(m, ws) != OK:
            return NEWTON_FAILED, 0.0
        iters += 1
    state[S_POSITION_ITERS] += iters
    dynamics(t, q1, qd1, p, mass, force, phi, phi_q, phi_t, gam)
    state[S_NEVAL] += 1
    status, ratio = _velocities(n, m, ws)
    if status != OK:
        return NEWTON_FAILED, 0.0
    # Q and γ depend on q̇, whose u part just changed
    force_k(t, q1, qd1, p, force)
    gamma_k(t, q1, qd1, p, gam)
    return OK, ratio


@njit(cache=True)
def accelerations(n, m, ws, state):
    """ü from Eq. 13, λ from Eq. 10 and Ψ of Eq. 20 into ``ws.psi``, for the v̈ in
    q̈1[v] and the evaluation left by :func:`consistent`.  Returns a status."""
    mass, force, phi_q, gam, dep, ind, Ju, pivu = (
        ws.mass, ws.force, ws.phi_q, ws.gam, ws.dep, ws.ind, ws.Ju, ws.pivu
    )  # fmt: skip
    qdd1, lam1, e, r, psi = ws.qdd1, ws.lam1, ws.res_n, ws.res_m, ws.psi
    nv = n - m
    for i in range(m):
        s = gam[i]
        for j in range(nv):
            s -= phi_q[i, ind[j]] * qdd1[ind[j]]
        r[i] = s
    lu_solve_factored(Ju, pivu, r, m)
    for j in range(m):
        qdd1[dep[j]] = r[j]
    for i in range(n):
        s = -force[i]
        for j in range(n):
            s += mass[i, j] * qdd1[j]
        e[i] = s
    for i in range(m):
        lam1[i] = -e[dep[i]]
    lu_solve_transposed(Ju, pivu, lam1, m)
    ok = True
    for a in range(nv):
        s = e[ind[a]]
        for i in range(m):
            s += phi_q[i, ind[a]] * lam1[i]
        psi[a] = s
        ok = ok and math.isfinite(s)
    state[S_RESIDUALS] += 1
    return OK if ok else NONFINITE


@njit(cache=True)
def _h_matrix(n, m, ws):
    """H of Eq. 31 (Φ_u H = −Φ_v) and P = [I; H] on the rows of v and u."""
    phi_q, dep, ind, Ju, pivu, H = ws.phi_q, ws.dep, ws.ind, ws.Ju, ws.pivu, ws.H
    P, r = ws.P, ws.res_m
    nv = n - m
    for j in range(nv):
        for i in range(m):
            r[i] = -phi_q[i, ind[j]]
        lu_solve_factored(Ju, pivu, r, m)
        for i in range(m):
            H[i, j] = r[i]
    for k in range(n):
        for j in range(nv):
            P[k, j] = 0.0
    for j in range(nv):
        P[ind[j], j] = 1.0
        for i in range(m):
            P[dep[i], j] = H[i, j]


@njit(cache=True)
def ode_acceleration(n, m, ws, state):
    """v̈ of the state-space equations (Eq. 39) at the evaluated state, then ü, λ
    (Eqs. 37-38) by :func:`accelerations`.  Returns a status."""
    mass, force, gam, dep, ind, Ju, pivu = ws.mass, ws.force, ws.gam, ws.dep, ws.ind, ws.Ju, ws.pivu
    P, G, Ar, qdd1, c, r, rhs = ws.P, ws.G, ws.B, ws.qdd1, ws.res_n, ws.res_m, ws.psi
    nv = n - m
    _h_matrix(n, m, ws)
    for i in range(m):
        r[i] = gam[i]
    lu_solve_factored(Ju, pivu, r, m)  # α of Eq. 37: Φ_u α = τ
    for i in range(n):
        s = force[i]
        for k in range(m):
            s -= mass[i, dep[k]] * r[k]
        c[i] = s
        for j in range(nv):
            s = 0.0
            for k in range(n):
                s += mass[i, k] * P[k, j]
            G[i, j] = s
    for a in range(nv):
        s = 0.0
        for i in range(n):
            s += P[i, a] * c[i]
        rhs[a] = s
        for b in range(nv):
            s = 0.0
            for i in range(n):
                s += P[i, a] * G[i, b]
            Ar[a, b] = s
    if lu_solve_inplace(Ar, rhs, nv) != OK:
        return SINGULAR
    for a in range(nv):
        qdd1[ind[a]] = rhs[a]
    return accelerations(n, m, ws, state)


@njit(cache=True)
def assemble_iteration_matrix(n, m, bh2, gh, fv, ws):
    """Ψ_v̈ of Eq. 29 (IMPL) or Π_v̈ of Eq. 40 (FV: without N, L, (Φ_qᵀλ)_q) as Pᵀ G
    (module docstring) into ``ws.A``, from the Jacobian blocks in ``ws.maq`` … ``ws.gqd``, M,
    Φ_q and the LU of Φ_u at the iterate.  ``bh2`` = βh², ``gh`` = γh."""
    mass, dep, ind, Ju, pivu, H, J, L = ws.mass, ws.dep, ws.ind, ws.Ju, ws.pivu, ws.H, ws.J, ws.L
    maq, plq, fq, fqd, paq, gq, gqd = ws.maq, ws.plq, ws.fq, ws.fqd, ws.paq, ws.gq, ws.gqd
    P, G, A, r = ws.P, ws.G, ws.A, ws.res_m
    nv = n - m
    _h_matrix(n, m, ws)
    for j in range(nv):  # Eq. 32, with (Φ_q q̇)_q + Φ_qt = −½ γ_q̇
        for i in range(m):
            s = 0.0
            for k in range(n):
                s += gqd[i, k] * P[k, j]
            r[i] = 0.5 * s
        lu_solve_factored(Ju, pivu, r, m)
        for i in range(m):
            J[i, j] = r[i]
    if not fv:
        for j in range(nv):  # Eq. 33
            for i in range(m):
                s = 0.0
                for k in range(n):
                    s += (gq[i, k] - paq[i, k]) * P[k, j]
                for k in range(m):
                    s += gqd[i, dep[k]] * J[k, j]
                r[i] = s
            lu_solve_factored(Ju, pivu, r, m)
            for i in range(m):
                L[i, j] = r[i]
    lam_hessian = 0.0 if fv else 1.0
    for i in range(n):
        for j in range(nv):
            s = 0.0
            for k in range(n):
                stiff = maq[i, k] + lam_hessian * plq[i, k] - fq[i, k]
                s += (mass[i, k] + bh2 * stiff - gh * fqd[i, k]) * P[k, j]
            for k in range(m):
                d = dep[k]
                s -= bh2 * fqd[i, d] * J[k, j]
                if not fv:  # M (βh² L̂ + γh N̂), N = 2J (Eq. 34)
                    s += mass[i, d] * (bh2 * L[k, j] + 2.0 * gh * J[k, j])
            G[i, j] = s
    for a in range(nv):
        for b in range(nv):
            s = G[ind[a], b]
            for i in range(m):
                s += H[i, a] * G[dep[i], b]
            A[a, b] = s


@njit(cache=True, inline="always")
def iteration_matrix(
    mass_a_q,
    phi_q_lam_q,
    force_q,
    force_qd,
    phi_q_a_q,
    gamma_q,
    gamma_qd,
    n,
    m,
    t,
    p,
    bh2,
    gh,
    fv,
    ws,
):
    """The Jacobian blocks at the iterate (q1, q̇1, q̈1, λ1) in ``ws`` from the generated
    kernels (FV needs fewer), then :func:`assemble_iteration_matrix`.  Needs the
    evaluation of :func:`consistent` and :func:`accelerations` at the iterate."""
    maq, plq, fq, fqd, paq, gq, gqd = ws.maq, ws.plq, ws.fq, ws.fqd, ws.paq, ws.gq, ws.gqd
    q1, qd1, qdd1, lam1 = ws.q1, ws.qd1, ws.qdd1, ws.lam1
    mass_a_q(t, q1, qdd1, p, maq)
    force_q(t, q1, qd1, p, fq)
    force_qd(t, q1, qd1, p, fqd)
    gamma_qd(t, q1, qd1, p, gqd)
    if not fv:
        phi_q_lam_q(t, q1, lam1, p, plq)
        phi_q_a_q(t, q1, qdd1, p, paq)
        gamma_q(t, q1, qd1, p, gq)
    assemble_iteration_matrix(n, m, bh2, gh, fv, ws)


@njit(cache=True)
def _record(n, m, row, t, x, ws, out_t, out_x, out_aux):
    """Output row: t, x = [q; q̇; q̈; λ], and [‖Φ‖₂, ‖Φ_q q̇ + Φ_t‖₂]."""
    phi, phi_q, phi_t = ws.phi, ws.phi_q, ws.phi_t
    out_t[row] = t
    for i in range(x.shape[0]):
        out_x[row, i] = x[i]
    phi2 = 0.0
    phid2 = 0.0
    for i in range(m):
        v = phi_t[i]
        for j in range(n):
            v += phi_q[i, j] * x[n + j]
        phi2 += phi[i] * phi[i]
        phid2 += v * v
    out_aux[row, 0] = math.sqrt(phi2)
    out_aux[row, 1] = math.sqrt(phid2)


@njit(cache=True)
def _accept(n, m, x, ws):
    """x ← [q1; q̇1; q̈1; λ1]; False if a value is not finite."""
    q1, qd1, qdd1, lam1 = ws.q1, ws.qd1, ws.qdd1, ws.lam1
    for i in range(n):
        x[i] = q1[i]
        x[n + i] = qd1[i]
        x[2 * n + i] = qdd1[i]
    for i in range(m):
        x[3 * n + i] = lam1[i]
    for i in range(x.shape[0]):
        if not math.isfinite(x[i]):
            return False
    return True


@njit(cache=True)
def _newton_update(n, m, tol, bh2, ws):
    """v̈ += Δv̈ (the solved update in ``ws.psi``); the weighted norm of Δv̈
    (module docstring)."""
    ind, q1, qdd1, dv = ws.ind, ws.q1, ws.qdd1, ws.psi
    dq = 0.0
    sq = 1.0
    sx = 1.0
    for a in range(n - m):
        qdd1[ind[a]] += dv[a]
        dq = max(dq, abs(dv[a]))
        sq = max(sq, abs(qdd1[ind[a]]))
    for i in range(n):
        sx = max(sx, abs(q1[i]))
    return dq / max(tol * sq, _NOISE * sx / bh2)


@njit(cache=True)
def _choose(n, m, ws, ctrl, state):
    """New u, v from Φ_q in ``ws`` by full pivoting (Eqs. 7-8); the re-partition
    threshold becomes ``ctrl[C_PIVOT_FRACTION]`` times its quality.  A status."""
    quality = _choose_dependent(n, m, ws.phi_q, ws.part_scratch, ws.part_perm, ws.dep, ws.ind)
    if quality == 0.0:
        return SINGULAR
    ctrl[C_PIVOT_RATIO] = ctrl[C_PIVOT_FRACTION] * quality
    state[S_REPART] += 1
    state[S_JAC_VALID] = 0
    return OK


@njit(cache=True, nogil=True, error_model="numpy")
def _factor_iteration_matrix(A, piv, nv):
    """LU of the iteration matrix in place; a status.  Not inlined into the entry
    point (the LU is kernel-free: compiled once per installation)."""
    return lu_factor_inplace(A, piv, nv)


@njit(cache=True, nogil=True, error_model="numpy")
def _solve_iteration_matrix(A, piv, b, nv):
    """b ← A⁻¹ b with the LU of :func:`_factor_iteration_matrix`."""
    lu_solve_factored(A, piv, b, nv)


# Phases of the loop.
_PH_START = 0  # make q0, q̇0 consistent; q̈_0, λ_0 from Eq. 39
_PH_NEXT = 1  # a new step begins
_PH_PREDICT = 2  # the predictor stage of §3.3
_PH_CORRECT = 3  # the corrector stage: Newton on v̈


@njit(cache=True, inline="always")
def newmark_gcp_chunk(
    dynamics,
    phi_k,
    phi_q_k,
    force_k,
    gamma_k,
    mass_a_q,
    phi_q_lam_q,
    force_q,
    force_qd,
    phi_q_a_q,
    gamma_q,
    gamma_qd,
    n,
    m,
    p,
    ctrl,
    ws,
    t0,
    h,
    x,
    state,
    n_steps,
    stride,
    out_t,
    out_x,
    out_aux,
):
    """Advance up to ``n_steps`` fixed steps of IMPL or FV (module docstring).

    Parameters
    ----------
    dynamics, phi_k, phi_q_k, force_k, gamma_k : the model's kernels ``dynamics``,
        ``phi``, ``phi_q``, ``force``, ``gamma``.
    mass_a_q, phi_q_lam_q, force_q, force_qd, phi_q_a_q, gamma_q, gamma_qd : its
        Jacobian blocks.
    n, m : numbers of coordinates and constraints.
    ctrl : (CTRL_SIZE,) from :func:`control`; ``ctrl[C_PIVOT_RATIO]`` is updated on
        re-partitioning.
    ws : :func:`workspace` (n, m, u, v); the partition in ws.dep, ws.ind is updated.
    x : (3n + m,) [q; q̇; q̈; λ] at t0 + state[S_STEP] h, updated in place.  Before the
        first call (``state[S_STARTED] == 0``) only q, q̇ are read: u and u̇ are made
        consistent with v, v̇ (Eqs. 11-12), q̈ and λ computed (Eqs. 37-39).
    state : int64 (STATE_SIZE,) counters, see the ``S_*`` constants.
    stride : record every ``stride``-th step in ``out_*`` (row ``state[S_ROW]`` on).
    out_t, out_x, out_aux : output rows: t, x, and [‖Φ‖₂, ‖Φ_q q̇ + Φ_t‖₂].

    Returns
    -------
    status : ``OK``, or ``NEWTON_FAILED``, ``SINGULAR``, ``NONFINITE``; on failure ``x``
    holds the last accepted step.
    """
    # unowned views: no reference counting inside the loop (mbdgen.runtime.refs)
    p = borrow(p)
    ctrl = borrow(ctrl)
    ws = borrow(ws)
    q1, qd1, qdd1, qt, qdt, qddp, dv = (
        ws.q1,
        ws.qd1,
        ws.qdd1,
        ws.v_pred,
        ws.vd_pred,
        ws.qdd_pred,
        ws.psi,
    )
    A, pivA = ws.A, ws.piv
    nv = n - m
    q = x[:n]
    qd = x[n : 2 * n]
    qdd = x[2 * n : 3 * n]
    beta = ctrl[C_BETA]
    gamma_nm = ctrl[C_GAMMA]
    tol = ctrl[C_TOL]
    max_iterations = int(ctrl[C_MAXIT])
    rate_slow = ctrl[C_RATE_SLOW]
    full_newton = ctrl[C_FULL_NEWTON] != 0.0
    fv = ctrl[C_FV] != 0.0
    bh2 = beta * h * h
    gh = gamma_nm * h
    done = 0
    k = 0
    uses = 1 << 30  # solves with the current factorization (unknown: count it as old)
    nrm_prev = 0.0
    converged = False
    restarted = False
    repartitioned = False
    t1 = t0
    phase = _PH_NEXT
    if state[S_STARTED] == 0:
        phase = _PH_START
        t1 = t0 + state[S_STEP] * h
        for i in range(n):
            q1[i] = q[i]
            qd1[i] = qd[i]
    while True:
        if phase == _PH_NEXT:
            if done == n_steps:
                return OK
            t1 = t0 + (state[S_STEP] + 1) * h
            predictor(n, h, beta, gamma_nm, q, qd, qdd, qt, qdt)
            for i in range(n):
                q1[i] = qt[i]
                qd1[i] = qdt[i]
            restarted = False
            repartitioned = False
            phase = _PH_PREDICT
            if ctrl[C_PREDICTOR] != 0.0:  # v̈_{n+1} = v̈_n
                for i in range(n):
                    qdd1[i] = qdd[i]
                    qddp[i] = qdd[i]
                k = 0
                nrm_prev = 0.0
                converged = False
                phase = _PH_CORRECT
        if phase == _PH_CORRECT:
            newmark(n, bh2, gh, qt, qdt, qdd1, q1, qd1)
        # the one evaluation site of the kinematic and kinetic equations
        status, ratio = consistent(
            dynamics, phi_k, phi_q_k, force_k, gamma_k, n, m, t1, p, ctrl, ws, state
        )  # fmt: skip
        if phase != _PH_CORRECT:
            if status == OK:
                status = ode_acceleration(n, m, ws, state)
            if phase == _PH_START:
                if status != OK:
                    return status
                if not _accept(n, m, x, ws):
                    return NONFINITE
                state[S_STARTED] = 1
                if state[S_STEP] % stride == 0 and state[S_ROW] * stride == state[S_STEP]:
                    _record(n, m, state[S_ROW], t1, x, ws, out_t, out_x, out_aux)
                    state[S_ROW] += 1
                phase = _PH_NEXT
                continue
            if status != OK:  # the predicted v admits no u: start from v̈_n
                state[S_PRED_FALLBACK] += 1
                for i in range(n):
                    qdd1[i] = qdd[i]
            for i in range(n):
                qddp[i] = qdd1[i]
            k = 0
            nrm_prev = 0.0
            converged = False
            phase = _PH_CORRECT
            continue
        if status == OK:
            status = accelerations(n, m, ws, state)
        if status == OK and converged:
            if not _accept(n, m, x, ws):
                return NONFINITE
            if k > state[S_MAX_ITERS]:
                state[S_MAX_ITERS] = k
            state[S_STEP] += 1
            done += 1
            if state[S_STEP] % stride == 0:
                _record(n, m, state[S_ROW], t1, x, ws, out_t, out_x, out_aux)
                state[S_ROW] += 1
            if ratio < ctrl[C_PIVOT_RATIO]:  # Φ_u degrades: a new partition here
                status = _choose(n, m, ws, ctrl, state)
                if status != OK:
                    return status
            phase = _PH_NEXT
            continue
        if status != OK or k >= max_iterations:
            if not (restarted or full_newton):
                # once more from the predictor, with a matrix evaluated there
                restarted = True
                state[S_RESTARTS] += 1
                state[S_JAC_VALID] = 0
                for i in range(n):
                    qdd1[i] = qddp[i]
                k = 0
                nrm_prev = 0.0
                converged = False
                continue
            if repartitioned:
                return NEWTON_FAILED
            # Haug 1989 §7.3.2, step 7: a new partition when the integrator struggles,
            # chosen at the last accepted step; the step starts over from its predictor
            repartitioned = True
            phi_q_k(t1 - h, q, p, ws.phi_q)
            status = _choose(n, m, ws, ctrl, state)
            if status != OK:
                return status
            restarted = False
            for i in range(n):
                q1[i] = qt[i]
                qd1[i] = qdt[i]
                qdd1[i] = qdd[i]
                qddp[i] = qdd[i]
            k = 0
            nrm_prev = 0.0
            converged = False
            phase = _PH_PREDICT if ctrl[C_PREDICTOR] == 0.0 else _PH_CORRECT
            continue
        for a in range(nv):
            dv[a] = -dv[a]  # −Ψ: accelerations leaves Ψ in ws.psi
        if full_newton or state[S_JAC_VALID] == 0:
            iteration_matrix(
                mass_a_q, phi_q_lam_q, force_q, force_qd, phi_q_a_q, gamma_q, gamma_qd,
                n, m, t1, p, bh2, gh, fv, ws,
            )  # fmt: skip
            state[S_JAC] += 1
            state[S_FACT] += 1
            if _factor_iteration_matrix(A, pivA, nv) != OK:
                state[S_JAC_VALID] = 0
                return SINGULAR
            state[S_JAC_VALID] = 1
            uses = 0
        _solve_iteration_matrix(A, pivA, dv, nv)
        uses += 1
        nrm = _newton_update(n, m, tol, bh2, ws)
        k += 1
        state[S_NEWTON] += 1
        if not math.isfinite(nrm):
            converged = False
            k = max_iterations  # a failed iteration: restart, re-partition or give up
            continue
        if nrm_prev == 0.0:
            converged = nrm <= 1.0
        else:
            xi = nrm / nrm_prev  # convergence rate (Negrut et al. 2007, Eq. 43)
            if xi < 1.0:
                converged = nrm * xi / (1.0 - xi) <= 1.0  # Eq. 42 there
            else:
                converged = nrm <= 1.0  # stagnating below the tolerance: round-off
            slow = xi > rate_slow or nrm * xi ** (max_iterations - k) / (1.0 - xi) > 1.0
            if not converged and slow and uses > 1:
                state[S_JAC_VALID] = 0
        nrm_prev = nrm
