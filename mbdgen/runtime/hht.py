"""HHT-α for the index-3 DAE of multibody dynamics, fixed step (Negrut et al. 2007).

The equations of motion and the position constraints

    M(q) q̈ + Φ_qᵀ(q, t) λ = Q(q, q̇, t),    Φ(q, t) = 0

are discretized at t_{n+1} with the Newmark formulas (Eq. 2)

    q_{n+1} = q_n + h q̇_n + ½h² [(1 − 2β) q̈_n + 2β q̈_{n+1}]
    q̇_{n+1} = q̇_n + h [(1 − γ) q̈_n + γ q̈_{n+1}]

and HHT's weighting of the forces at two consecutive steps, scaled by 1/(1 + α)
(Eqs. 11a-b, residuals of Eq. 13, with the position constraints scaled by 1/(βh²)):

    e1 = (M q̈)_{n+1} / (1 + α) + (Φ_qᵀλ − Q)_{n+1} − α/(1 + α) (Φ_qᵀλ − Q)_n = 0
    e2 = Φ(q_{n+1}, t_{n+1}) / (βh²) = 0

α ∈ [−1/3, 0], β = (1 − α)²/4, γ = (1 − 2α)/2 (Eq. 6; :func:`coefficients`);
α = 0 is the trapezoidal rule.  Newton's method on the unknowns (q̈_{n+1}, λ_{n+1})
uses the iteration matrix of Eqs. 12 and 14, assembled from the generated blocks
only (DESIGN rule 2):

    [[M̂, Φ_qᵀ], [Φ_q, 0]],
    M̂ = M/(1 + α) + [(M q̈)_q/(1 + α) + (Φ_qᵀλ)_q − Q_q] βh² − Q_q̇ γh

(Eq. 14 with Q_q for the paper's Π_q F, and the Q_q̇ γh term that velocity-dependent
forces add when Q is not a separate unknown F).  The method is modified Newton, as
§3 of the paper describes: the factorized matrix is kept over iterations and steps
(h is fixed here), re-evaluated and refactored when the convergence rate ξ (Eq. 43)
is slow or divergent, or too slow to converge in the iterations left; a step that
exhausts its iterations is restarted once from the predictor with a matrix evaluated
there (then ``NEWTON_FAILED``: a fixed step cannot be cut).  The iteration stops when the
estimated distance to the solution, ξ/(1 − ξ) ‖Δ‖ (Eq. 42) or ‖Δ‖ on the first
iteration, is at most 1, ‖·‖ the larger of the max-norms of Δq̈ and Δλ over their
tolerances: ``ctrl[C_TOL]`` times max(1, ‖q̈‖∞) and max(1, ‖λ‖∞), but not below
the round-off floor 10 eps max(1, ‖q‖∞)/(βh²) of q̈ (a smaller change of q̈ does not
change q; times max Mᵢᵢ for λ), which a small h reaches first.

Start: q̈_0, λ_0 solve the index-1 equations at t0 (Haug 1989, Eq. 7.2.1).
Prediction (§3.5): q̈_{n+1}, λ_{n+1} extrapolated by the polynomial of degree
``ctrl[C_DEGREE]`` (≤ 3) through the last accepted values; with a fixed step the
Newton divided-difference form reduces to binomial weights, degree 0 is
q̈_{n+1} = q̈_n, λ_{n+1} = λ_n.

The loop itself is :func:`index3_chunk`, shared with generalized-α
(:mod:`mbdgen.runtime.genalpha`), which differs only in the positions' update and in
the scalars passed to :func:`residual` and :func:`iteration_matrix`.

Not yet here: the error estimate and step-size control (Eqs. 25, 34-39), the corrector
stopping criterion tied to the error tolerance (Eq. 45), user differential states.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from mbdgen.runtime.linalg import lu_factor_inplace, lu_solve_factored
from mbdgen.runtime.status import NEWTON_FAILED, NONFINITE, OK

# Layout of the float ``ctrl`` vector.
C_ALPHA = 0  # HHT α ∈ [−1/3, 0]
C_BETA = 1  # Newmark β
C_GAMMA = 2  # Newmark γ
C_TOL = 3  # Newton tolerance (relative, see the module docstring)
C_MAXIT = 4  # Newton iterations allowed per step
C_RATE_SLOW = 5  # ξ above this re-evaluates an old iteration matrix
C_FULL_NEWTON = 6  # 1: re-evaluate the iteration matrix at every iterate
C_DEGREE = 7  # degree of the predictor polynomial (0-3)
C_ALPHA_M = 8  # generalized-α's α_m (0 for HHT; :mod:`mbdgen.runtime.genalpha`)
C_ALPHA_F = 9  # generalized-α's α_f (0 for HHT)
CTRL_SIZE = 10

# Layout of the int64 ``state`` array shared between chunks.
S_STEP = 0  # steps taken since t0
S_ROW = 1  # next output row
S_STARTED = 2  # 1 once q̈_0, λ_0 are known
S_NEWTON = 3  # Newton iterations (linear solves)
S_JAC = 4  # iteration-matrix evaluations
S_FACT = 5  # LU factorizations
S_JAC_VALID = 6  # 1: ``A``, ``piv`` hold the factorized iteration matrix for this h
S_NHIST = 7  # valid rows in the prediction history
S_HEAD = 8  # history row of the last accepted step
S_MAX_ITERS = 9  # most Newton iterations any step took
S_RESTARTS = 10  # steps restarted from the predictor with a fresh matrix
S_NEVAL = 11  # evaluations of the ``dynamics`` kernel
STATE_SIZE = 12

#: Round-off floor of the Newton corrections, in units of eps max(1, ‖q‖∞)/(βh²).
_NOISE = 10.0 * np.finfo(np.float64).eps

#: Rows of the prediction history: a cubic needs four points (§3.5: degree ≤ 3).
HISTORY = 4
MAX_DEGREE = HISTORY - 1

# Phases of the loop.
_PH_START = 0  # q̈_0, λ_0 from the index-1 equations
_PH_NEXT = 1  # a new step begins
_PH_ITER = 2  # Newton iterations of a step


def coefficients(alpha: float) -> tuple[float, float]:
    """Newmark's β, γ of the HHT method: ((1 − α)²/4, (1 − 2α)/2) (Negrut et al. 2007,
    Eq. 6).  α = 0 gives the trapezoidal rule (1/4, 1/2)."""
    return (1.0 - alpha) ** 2 / 4.0, (1.0 - 2.0 * alpha) / 2.0


def control(
    alpha: float,
    tol: float,
    max_iterations: int,
    *,
    degree: int = 2,
    full_newton: bool = False,
    rate_slow: float = 0.05,
    beta: float | None = None,
    gamma: float | None = None,
) -> np.ndarray:
    """The ``ctrl`` vector; β, γ default to :func:`coefficients` of α."""
    b, g = coefficients(alpha)
    ctrl = np.zeros(CTRL_SIZE)
    ctrl[C_ALPHA] = alpha
    ctrl[C_BETA] = b if beta is None else beta
    ctrl[C_GAMMA] = g if gamma is None else gamma
    ctrl[C_TOL] = tol
    ctrl[C_MAXIT] = max_iterations
    ctrl[C_RATE_SLOW] = rate_slow
    ctrl[C_FULL_NEWTON] = 1.0 if full_newton else 0.0
    ctrl[C_DEGREE] = degree
    return ctrl


def state_width(n: int, m: int) -> int:
    """Length of the state x = [q; q̇; q̈; λ]."""
    return 3 * n + m


def workspace(n: int, m: int) -> tuple[np.ndarray, ...]:
    """Preallocated arrays for :func:`hht_chunk` (the ``ws`` tuple).

    Q is at index 1 and Φ at 2, as in every workspace (sizes of large models are read
    from them, :data:`mbdgen.codegen.abi.RUNTIME_SIZES`).
    """
    N = n + m
    return (
        np.zeros((n, n)),  # 0 M
        np.zeros(n),  # 1 Q
        np.zeros(m),  # 2 Φ
        np.zeros((m, n)),  # 3 Φ_q
        np.zeros(m),  # 4 Φ_t
        np.zeros(m),  # 5 γ (acceleration right side, used at the start)
        np.zeros((N, N)),  # 6 iteration matrix, then its LU factors
        np.zeros(N, dtype=np.int64),  # 7 pivots
        np.zeros(N),  # 8 right side, then the Newton correction
        np.zeros((n, n)),  # 9 (M q̈)_q
        np.zeros((n, n)),  # 10 (Φ_qᵀλ)_q
        np.zeros((n, n)),  # 11 Q_q
        np.zeros((n, n)),  # 12 Q_q̇
        np.zeros(n),  # 13 (Φ_qᵀλ − Q)_n of the last accepted step
        np.zeros(n),  # 14 q_{n+1}
        np.zeros(n),  # 15 q̇_{n+1}
        np.zeros(n),  # 16 q̈_{n+1} (Newton iterate)
        np.zeros(m),  # 17 λ_{n+1} (Newton iterate)
        np.zeros((HISTORY, N)),  # 18 accepted [q̈; λ] for the predictor
        np.zeros(n),  # 19 generalized-α: a_n of the last accepted step (HHT: unused)
        np.zeros(n),  # 20 generalized-α: a_{n+1} of the iterate (HHT: unused)
    )


@njit(cache=True, inline="always")
def newmark(n, h, beta, gamma_nm, q, qd, qdd, qdd1, q1, qd1):
    """q_{n+1}, q̇_{n+1} from q̈_{n+1} by the Newmark formulas (Negrut et al. 2007, Eq. 2)."""
    hh = 0.5 * h * h
    for i in range(n):
        q1[i] = q[i] + h * qd[i] + hh * ((1.0 - 2.0 * beta) * qdd[i] + 2.0 * beta * qdd1[i])
        qd1[i] = qd[i] + h * ((1.0 - gamma_nm) * qdd[i] + gamma_nm * qdd1[i])


@njit(cache=True, inline="always")
def residual(n, m, alpha, bh2, mass, force, phi, phi_q, qdd1, lam1, r_prev, e):
    """e = [e1; e2] of Negrut et al. 2007, Eq. 13, from M, Q, Φ, Φ_q at (q_{n+1}, t_{n+1}).

    ``r_prev`` = (Φ_qᵀλ − Q)_n; ``bh2`` = βh².
    """
    c = 1.0 / (1.0 + alpha)
    for i in range(n):
        s = -force[i] - alpha * c * r_prev[i]
        for j in range(n):
            s += c * mass[i, j] * qdd1[j]
        for j in range(m):
            s += phi_q[j, i] * lam1[j]
        e[i] = s
    for i in range(m):
        e[n + i] = phi[i] / bh2


@njit(cache=True, inline="always")
def genalpha_update(
    n, h, beta, gamma_nm, alpha_m, alpha_f, q, qd, qdd, a, qdd1, a1, q1, qd1
):  # fmt: skip
    """a_{n+1}, q_{n+1}, q̇_{n+1} from q̈_{n+1} by generalized-α's recurrences (Arnold &
    Brüls 2007, §2; Chung & Hulbert 1993):

        (1 − α_m) a_{n+1} + α_m a_n = (1 − α_f) q̈_{n+1} + α_f q̈_n
        q_{n+1} = q_n + h q̇_n + h² (½ − β) a_n + h² β a_{n+1}
        q̇_{n+1} = q̇_n + h (1 − γ) a_n + h γ a_{n+1}
    """
    cm = 1.0 / (1.0 - alpha_m)
    hh = h * h
    for i in range(n):
        a1[i] = ((1.0 - alpha_f) * qdd1[i] + alpha_f * qdd[i] - alpha_m * a[i]) * cm
        q1[i] = q[i] + h * qd[i] + hh * ((0.5 - beta) * a[i] + beta * a1[i])
        qd1[i] = qd[i] + h * ((1.0 - gamma_nm) * a[i] + gamma_nm * a1[i])


@njit(cache=True, inline="always")
def iteration_matrix(
    mass_a_q,
    phi_q_lam_q,
    force_q,
    force_qd,
    n,
    m,
    t,
    q1,
    qd1,
    qdd1,
    lam1,
    p,
    alpha,
    bh2,
    gh,
    mass,
    phi_q,
    maq,
    plq,
    fq,
    fqd,
    A,
):
    """The Newton matrix of Negrut et al. 2007, Eq. 12 (M̂ of Eq. 14), into ``A``.

    ``mass``, ``phi_q`` are M and Φ_q at (q_{n+1}, t); the four Jacobian blocks are
    evaluated here from the generated kernels (``maq``, ``plq``, ``fq``, ``fqd`` are
    their work arrays).  ``bh2`` = βh², ``gh`` = γh.
    """
    mass_a_q(t, q1, qdd1, p, maq)
    phi_q_lam_q(t, q1, lam1, p, plq)
    force_q(t, q1, qd1, p, fq)
    force_qd(t, q1, qd1, p, fqd)
    c = 1.0 / (1.0 + alpha)
    for i in range(n):
        for j in range(n):
            A[i, j] = c * mass[i, j] + (c * maq[i, j] + plq[i, j] - fq[i, j]) * bh2 - fqd[i, j] * gh
    for i in range(m):
        for j in range(n):
            A[n + i, j] = phi_q[i, j]
            A[j, n + i] = phi_q[i, j]
        for j in range(m):
            A[n + i, n + j] = 0.0


@njit(cache=True, inline="always")
def _predict(n, m, degree, hist, head, count, qdd1, lam1):
    """q̈_{n+1}, λ_{n+1} extrapolated through the last ``degree`` + 1 accepted values.

    Equally spaced points: the weights are (−1)^j C(d + 1, j + 1), j = 0..d.
    """
    K = hist.shape[0]
    d = min(degree, count - 1)
    for i in range(n + m):
        s = 0.0
        row = head
        w = float(d + 1)  # C(d + 1, 1)
        for j in range(d + 1):
            s += w * hist[row, i]
            w = -w * (d - j) / (j + 2)  # C(d + 1, j + 2) from C(d + 1, j + 1), sign flipped
            row = row - 1 if row > 0 else K - 1
        if i < n:
            qdd1[i] = s
        else:
            lam1[i - n] = s


@njit(cache=True, inline="always")
def _record(row, t, x, phi, phi_q, phi_t, qd, out_t, out_x, out_aux):
    out_t[row] = t
    for i in range(x.shape[0]):
        out_x[row, i] = x[i]
    phi2 = 0.0
    phid2 = 0.0
    for i in range(phi.shape[0]):
        v = phi_t[i]
        for j in range(qd.shape[0]):
            v += phi_q[i, j] * qd[j]
        phi2 += phi[i] * phi[i]
        phid2 += v * v
    out_aux[row, 0] = math.sqrt(phi2)
    out_aux[row, 1] = math.sqrt(phid2)


@njit(cache=True, inline="always")
def hht_chunk(
    dynamics,
    mass_a_q,
    phi_q_lam_q,
    force_q,
    force_qd,
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
    """Advance up to ``n_steps`` fixed HHT-α steps (Negrut et al. 2007, Eqs. 2, 11-14).

    Parameters
    ----------
    dynamics, mass_a_q, phi_q_lam_q, force_q, force_qd : the model's kernels.
    n, m : numbers of coordinates and constraints.
    ctrl : (CTRL_SIZE,) α, β, γ and the Newton options, see the ``C_*`` constants.
    ws : :func:`workspace` (n, m).
    x : (3n + m,) [q; q̇; q̈; λ] at t0 + state[S_STEP] h, updated in place.  Before the
        first call (``state[S_STARTED] == 0``) only q, q̇ are read; q̈, λ are computed.
    state : int64 (STATE_SIZE,) counters, see the ``S_*`` constants.
    stride : record every ``stride``-th step in ``out_*`` (row ``state[S_ROW]`` on).
    out_t, out_x, out_aux : output rows: t, x, and [‖Φ‖₂, ‖Φ_q q̇ + Φ_t‖₂].

    Returns
    -------
    status : ``OK``, or ``SINGULAR``, ``NONFINITE``, ``NEWTON_FAILED``; on failure ``x``
    holds the last accepted step.
    """
    return index3_chunk(
        dynamics, mass_a_q, phi_q_lam_q, force_q, force_qd, n, m, p, ctrl, ws, t0, h, x,
        state, n_steps, stride, out_t, out_x, out_aux, False,
    )  # fmt: skip


@njit(cache=True, inline="always")
def index3_chunk(
    dynamics,
    mass_a_q,
    phi_q_lam_q,
    force_q,
    force_qd,
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
    generalized,
):
    """The fixed-step index-3 Newton loop shared by HHT-α and generalized-α.

    ``generalized`` False: HHT-α, as :func:`hht_chunk` documents.  True: generalized-α
    in Arnold & Brüls' form (:mod:`mbdgen.runtime.genalpha`): the unknowns q̈_{n+1},
    λ_{n+1} satisfy the equations of motion at t_{n+1} exactly (no weighting, α = 0 in
    :func:`residual`), q_{n+1}, q̇_{n+1} follow from :func:`genalpha_update`, so that
    ∂q_{n+1}/∂q̈_{n+1} = β′h², ∂q̇_{n+1}/∂q̈_{n+1} = γ′h with β′ = β c, γ′ = γ c,
    c = (1 − α_f)/(1 − α_m): the residual, the constraint scaling 1/(β′h²), the
    iteration matrix and the round-off floor take βh², γh → β′h², γ′h (Arnold &
    Brüls 2007, §2, with the constraint rows scaled by 1/(β′h²)).  ``ws[19]`` keeps a_n.
    Arguments and return value as :func:`hht_chunk`; ``ctrl`` also carries
    ``C_ALPHA_M``, ``C_ALPHA_F``.
    """
    (
        mass, force, phi, phi_q, phi_t, gam, A, piv, b, maq, plq, fq, fqd,
        r_prev, q1, qd1, qdd1, lam1, hist, a, a1,
    ) = ws  # fmt: skip
    N = n + m
    alpha = ctrl[C_ALPHA]
    beta = ctrl[C_BETA]
    gamma_nm = ctrl[C_GAMMA]
    tol = ctrl[C_TOL]
    max_iterations = int(ctrl[C_MAXIT])
    rate_slow = ctrl[C_RATE_SLOW]
    full_newton = ctrl[C_FULL_NEWTON] != 0.0
    degree = int(ctrl[C_DEGREE])
    bh2 = beta * h * h
    gh = gamma_nm * h
    alpha_m = ctrl[C_ALPHA_M]
    alpha_f = ctrl[C_ALPHA_F]
    if generalized:
        alpha = 0.0  # the equations of motion hold at t_{n+1} (Arnold & Brüls)
        c = (1.0 - alpha_f) / (1.0 - alpha_m)  # ∂a_{n+1}/∂q̈_{n+1}
        bh2 = bh2 * c
        gh = gh * c
    K = hist.shape[0]
    q = x[:n]
    qd = x[n : 2 * n]
    qdd = x[2 * n : 3 * n]
    lam = x[3 * n :]
    done = 0
    k = 0  # Newton iterations of this step
    uses = 1 << 30  # solves with the current factorization (unknown: count it as old)
    restarted = False
    converged = False
    nrm_prev = 0.0
    t1 = t0
    phase = _PH_NEXT if state[S_STARTED] != 0 else _PH_START
    while True:
        if phase == _PH_NEXT:
            if done == n_steps:
                return OK
            t1 = t0 + (state[S_STEP] + 1) * h
            _predict(n, m, degree, hist, state[S_HEAD], state[S_NHIST], qdd1, lam1)
            k = 0
            nrm_prev = 0.0
            converged = False
            restarted = False
            phase = _PH_ITER
        if phase == _PH_START:
            t1 = t0 + state[S_STEP] * h
            for i in range(n):
                q1[i] = q[i]
                qd1[i] = qd[i]
        elif generalized:
            genalpha_update(
                n, h, beta, gamma_nm, alpha_m, alpha_f, q, qd, qdd, a, qdd1, a1, q1, qd1
            )  # fmt: skip
        else:
            newmark(n, h, beta, gamma_nm, q, qd, qdd, qdd1, q1, qd1)
        # the one evaluation site of the equations
        dynamics(t1, q1, qd1, p, mass, force, phi, phi_q, phi_t, gam)
        state[S_NEVAL] += 1
        factor = False
        if phase == _PH_START:
            # [[M, Φ_qᵀ], [Φ_q, 0]] [q̈_0; λ_0] = [Q; γ] (Haug 1989, Eq. 7.2.1)
            for i in range(n):
                for j in range(n):
                    A[i, j] = mass[i, j]
                b[i] = force[i]
            for i in range(m):
                for j in range(n):
                    A[n + i, j] = phi_q[i, j]
                    A[j, n + i] = phi_q[i, j]
                for j in range(m):
                    A[n + i, n + j] = 0.0
                b[n + i] = gam[i]
            state[S_JAC_VALID] = 0
            factor = True
        else:
            if converged:
                # accept: x ← the new step; keep (Φ_qᵀλ − Q)_{n+1} for the next e1
                for i in range(n):
                    s = -force[i]
                    for j in range(m):
                        s += phi_q[j, i] * lam1[j]
                    r_prev[i] = s
                    q[i] = q1[i]
                    qd[i] = qd1[i]
                    qdd[i] = qdd1[i]
                for i in range(m):
                    lam[i] = lam1[i]
                if generalized:
                    for i in range(n):
                        a[i] = a1[i]
                for i in range(x.shape[0]):
                    if not math.isfinite(x[i]):
                        return NONFINITE
                head = state[S_HEAD] + 1 if state[S_HEAD] + 1 < K else 0
                for i in range(n):
                    hist[head, i] = qdd1[i]
                for i in range(m):
                    hist[head, n + i] = lam1[i]
                state[S_HEAD] = head
                if state[S_NHIST] < K:
                    state[S_NHIST] += 1
                if k > state[S_MAX_ITERS]:
                    state[S_MAX_ITERS] = k
                state[S_STEP] += 1
                done += 1
                if state[S_STEP] % stride == 0:
                    _record(state[S_ROW], t1, x, phi, phi_q, phi_t, qd, out_t, out_x, out_aux)
                    state[S_ROW] += 1
                phase = _PH_NEXT
                continue
            if k >= max_iterations:
                if restarted or full_newton:
                    return NEWTON_FAILED
                # once more from the predictor, with a matrix evaluated there
                restarted = True
                state[S_RESTARTS] += 1
                state[S_JAC_VALID] = 0
                _predict(n, m, degree, hist, state[S_HEAD], state[S_NHIST], qdd1, lam1)
                k = 0
                nrm_prev = 0.0
                continue
            residual(n, m, alpha, bh2, mass, force, phi, phi_q, qdd1, lam1, r_prev, b)
            for i in range(N):
                b[i] = -b[i]
            if full_newton or state[S_JAC_VALID] == 0:
                iteration_matrix(
                    mass_a_q, phi_q_lam_q, force_q, force_qd, n, m, t1, q1, qd1, qdd1, lam1,
                    p, alpha, bh2, gh, mass, phi_q, maq, plq, fq, fqd, A,
                )  # fmt: skip
                state[S_JAC] += 1
                factor = True
        if factor:
            status = lu_factor_inplace(A, piv, N)
            state[S_FACT] += 1
            if status != OK:
                state[S_JAC_VALID] = 0
                return status
            uses = 0
            if phase == _PH_ITER:
                state[S_JAC_VALID] = 1
        lu_solve_factored(A, piv, b, N)
        uses += 1
        if phase == _PH_START:
            for i in range(n):
                qdd[i] = b[i]
                s = -force[i]
                for j in range(m):
                    s += phi_q[j, i] * b[n + j]
                r_prev[i] = s
                hist[0, i] = b[i]
                a[i] = b[i]  # a_0 = q̈_0 (Arnold & Brüls 2007, §2)
            for i in range(m):
                lam[i] = b[n + i]
                hist[0, n + i] = b[n + i]
            for i in range(x.shape[0]):
                if not math.isfinite(x[i]):
                    return NONFINITE
            state[S_HEAD] = 0
            state[S_NHIST] = 1
            state[S_STARTED] = 1
            if state[S_STEP] % stride == 0 and state[S_ROW] * stride == state[S_STEP]:
                _record(state[S_ROW], t1, x, phi, phi_q, phi_t, qd, out_t, out_x, out_aux)
                state[S_ROW] += 1
            phase = _PH_NEXT
            continue
        # Newton update, weighted by the tolerance or the round-off floor: below
        # eps max(1, ‖q‖)/(βh²) a change of q̈ no longer changes q (Eq. 2a)
        dq = 0.0
        sq = 1.0
        sx = 1.0
        for i in range(n):
            qdd1[i] += b[i]
            dq = max(dq, abs(b[i]))
            sq = max(sq, abs(qdd1[i]))
            sx = max(sx, abs(q1[i]))
        dl = 0.0
        sl = 1.0
        for i in range(m):
            lam1[i] += b[n + i]
            dl = max(dl, abs(b[n + i]))
            sl = max(sl, abs(lam1[i]))
        floor = _NOISE * sx / bh2
        sm = 0.0
        for i in range(n):
            sm = max(sm, abs(mass[i, i]))
        nrm = max(dq / max(tol * sq, floor), dl / max(tol * sl, floor * sm))
        k += 1
        state[S_NEWTON] += 1
        if not math.isfinite(nrm):
            return NONFINITE
        if nrm_prev == 0.0:
            converged = nrm <= 1.0
        else:
            xi = nrm / nrm_prev  # convergence rate (Eq. 43)
            if xi < 1.0:
                converged = nrm * xi / (1.0 - xi) <= 1.0  # Eq. 42
            else:
                converged = nrm <= 1.0  # stagnating below the tolerance: round-off
            # an old matrix is re-evaluated when the rate is slow, or too slow to meet
            # the tolerance within the iterations left (Eq. 42 extrapolated)
            slow = xi > rate_slow or nrm * xi ** (max_iterations - k) / (1.0 - xi) > 1.0
            if not converged and slow and uses > 1:
                state[S_JAC_VALID] = 0
        nrm_prev = nrm
