"""Variable-step, variable-order Adams–Bashforth–Moulton PECE with error control.

Haug 1989 §7.4.4 outlines the method and names Shampine and Gordon's DE as one of the
best codes that implement it; this module follows DE (Shampine & Gordon 1975,
*Computer Solution of Ordinary Differential Equations*, routines STEP and INTRP).

**Formulas on the actual grid.**  The predictor and corrector are the integrals of
Haug's Eqs. 7.4.10 and 7.4.14,

    x^p_{n+1} = x_n + ∫_{t_n}^{t_{n+1}} P_{k,n}(t) dt,
    x^c_{n+1} = x_n + ∫_{t_n}^{t_{n+1}} P*_{k+1,n}(t) dt,

where P_{k,n} interpolates f_n, …, f_{n−k+1} and P*_{k+1,n} also f^p_{n+1}.  Nothing
in them needs equal steps.  With a constant step they are the backward-difference
formulas Eq. 7.4.11 (AB k) and Eq. 7.4.15 (AM k + 1).  Here the polynomials are kept
in Newton form with *modified divided differences* (Krogh's form, used by DE; Hairer,
Nørsett & Wanner, *Solving ODEs I*, §III.5):

    ψ_i(n) = t_{n+1} − t_{n−i},   Φ_j(n) = Π_{i<j} ψ_i(n−1) · f[t_n, …, t_{n−j}],
    β_j(n) = Π_{i<j} ψ_i(n) / ψ_i(n−1),   Φ*_j(n) = β_j(n) Φ_j(n),
    g_j(n) = (1/h) ∫_{t_n}^{t_{n+1}} Π_{i<j} (t − t_{n−i}) / ψ_i(n) dt,

so that (h = t_{n+1} − t_n)

    x^p = x_n + h Σ_{j<k} g_j Φ*_j(n)                      (Eq. 7.4.10)
    x^c = x^p + h g_k Φ^p_k(n+1),  Φ^p_k(n+1) = f^p − Σ_{j<k} Φ*_j(n)   (Eq. 7.4.14)

and the next differences follow from Φ_0(n+1) = f_{n+1}, Φ_{j+1}(n+1) = Φ_j(n+1) −
Φ*_j(n).  With equal steps β_j = 1, g_j = γ_j (Eq. 7.4.12) and Φ_j = ∇^j f.  The g_j
come from the recursion c_{0,q} = 1/q, c_{j,q} = c_{j−1,q} − (h/ψ_{j−1}) c_{j−1,q+1},
g_j = c_{j,1}.  A step is PECE (§7.4.4): predict, evaluate f^p, correct, evaluate
f_{n+1} = f(x^c), which joins the history.

**Error estimate.**  The error test is Eq. 7.4.16 applied to the corrector of order k
(one below the corrector that is used), in its variable-step form: the difference
between the order k + 1 and order k correctors,

    err = h |g_k − g_{k−1}| ‖Φ^p_k(n+1)‖ ≈ h |γ*_k| ‖∇^k f^p_{n+1}‖,

and the step is accepted if err ≤ 1.  The norm is a weighted RMS norm with the scale
atol_i + rtol_i max(|x_n,i|, |x^p_i|).  The value kept is the order k + 1 corrector
(local extrapolation, as in DE), so its error is smaller than err by a factor O(h).
The margin matters in PECE mode: f^p carries the predictor's error (Eq. 7.4.13) into
the corrector, so the local error of the AB k / AM k + 1 pair is about
−h^{k+2} (γ*_{k+1} x^{(k+2)} + γ_k² f_x x^{(k+1)}), not Eq. 7.4.16's first term alone
(for x' = λx and k = 5, 0.0945 h⁷ x^{(7)} against |γ*_6| = 0.0143).

**Step and order strategy** (§7.4.4, with DE's rules).  The orders k − 2, k − 1, k and,
after k + 1 accepted steps of equal size, k + 1 are compared through the constant-step
estimates E_q = h σ_q |γ*_q| ‖Φ_q(n+1)‖ (σ_q scales Φ_q to ∇^q f; σ = 1 for equal
steps).  The order is lowered when the lower-order estimates are no larger (the
differences no longer decrease: "the road changes direction") and raised when
E_{k+1} < E_k.  A failed step halves h and is repeated ("normally, step size is reduced
by a factor of 2"), at the lower order if the estimates ask for it; after three
consecutive failures the order drops to 1.  After a success the step size for the
estimate at the new order comes from :func:`step_ratio`, which changes h only when the
gain is significant.

**Start.**  Order 1 (AB 1 / AM 2) with a small first step from the starting-step
heuristic of Hairer, Nørsett & Wanner (§II.4), which costs one extra evaluation of f:
h = min(100 h₀, (0.01 / max(d₁, d₂))^{1/2}), h₀ = 0.01 d₀/d₁, d₀ = ‖x₀‖, d₁ = ‖f₀‖,
d₂ = ‖f(x₀ + h₀f₀) − f₀‖/h₀.  Then, as in DE's first phase, the order is raised by one
and h doubled after every step until a step fails, the order test asks for a lower
order, or k reaches kmax (Haug's self-starting ramp with a growing step).

**Dense output.**  The solution at a requested time t in [t_n, t_{n+1}] of the last
step is Eq. 7.4.14 with the upper limit t: x_n + ∫_{t_n}^t P*_{k+1,n}.  It meets x_n
and x^c_{n+1} at the ends and has the local accuracy of the step.  Steps are not
shortened to land on output times.  When the caller asks for f or aux at the output
times (``out_f`` with columns, or a non-empty ``aux``), the right side is evaluated at
the interpolated state through the same single call site (aux is *not* interpolated);
a right side that changes its ``x`` argument (a projection) changes the recorded state
too.

**Guards.**  A failed attempt whose h falls below max(h_min, 16 ulp(t)) ends the chunk
with ``STEP_SIZE_COLLAPSE``, or ``NONFINITE`` if that last failure met a NaN or inf in
f or in the error estimate (such an attempt counts as a failed error test, so a step
that overflows is retried smaller).  Any other status of the right side is returned
at once, except ``REPARTITION`` (GCP's request for new independent coordinates,
whose values are valid) at an output time, which is returned after that output is
written: the driver then re-partitions at the last accepted step and restarts.  In
every case ``x``, ``fstate[F_T]`` and the history are those of the last accepted
step.  A right side that projects its ``x`` (the hybrid algorithm) projects the
accepted state, which :func:`_accept` keeps; the dense output over a step then
ends at the unprojected corrector, within the projection (≈ the constraint error
the projection removed) of the state kept.

The loop is generic in the right side, with the convention of
:func:`mbdgen.runtime.explicit.abm_chunk`: ``rhs(kern, n, m, t, x, p, ctrl, ws, f, aux, state)``
returns a status code, writes f(x, t) into ``f`` and its record into ``aux``.  It is
called from one place in the loop, which cycles through the evaluations (start,
predicted, corrected, output points), so that Numba inlines (and with constant sizes
unrolls) the right side once.  Integration runs forward in time only.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit

from mbdgen.methods import adams_moulton_gammas
from mbdgen.runtime import stepsize
from mbdgen.runtime.refs import borrow
from mbdgen.runtime.status import NONFINITE, OK, REPARTITION, STEP_SIZE_COLLAPSE
from mbdgen.runtime.stepsize import h_floor, wrms

#: Highest order k supported: AB 12 predictor, AM 13 corrector, DE's maximum (Shampine
#: & Gordon 1975; Haug's tables stop at AB 5 / AM 6).  The order selection climbs only
#: while the estimates E_{k+1} < E_k say a higher order pays (module docstring), so a
#: rough or stability-bound problem stays low; a smooth one at a tight tolerance takes
#: about half the steps it needs at k ≤ 5 (design notes, "vabm up to order 12").
KMAX = 12

#: The controller's numbers: target, growth band and clamps
#: (:data:`mbdgen.runtime.stepsize.VABM`; :func:`step_ratio` explains TARGET).
TARGET = stepsize.VABM.target

# ``fstate``: float64 state and settings.
F_T = 0  # t_n: time of the accepted state x
F_H = 1  # step size of the next attempt
F_TPREV = 2  # t_{n−1}: start of the last accepted step (dense output)
F_HMIN = 3  # smallest step allowed by the user (the guard also uses 16 ulp of t)
F_HMAX = 4  # largest step allowed
F_HFIRST = 5  # first step; 0: chosen by the starting-step heuristic
F_ERR = 6  # err of the last attempt (diagnostic; > 1: it failed)
F_SIZE = 7

# ``istate``: int64 state and counters.
I_K = 0  # order k of the next attempt (AB k predictor, AM k + 1 corrector)
I_KMAX = 1  # highest order allowed (1 ≤ kmax ≤ the workspace's kmax)
I_RAMP = 2  # 1 during the start: order + 1 and h doubled after every step
I_NVALID = 3  # rows of ``phi`` that hold differences (f values in the history)
I_NCONST = 4  # consecutive accepted steps of equal size (the latest included)
I_NFAIL = 5  # consecutive failed attempts at the current step
I_KLAST = 6  # order of the last accepted step (dense output)
I_JOUT = 7  # index of the next output time in ``t_out``
I_STARTED = 8  # 1 once f(x0, t0) and the first step are known
I_NONFINITE = 9  # 1 if the last failed attempt met a NaN or inf
I_NSTEP = 10  # accepted steps
I_NREJECT = 11  # failed (rejected) attempts
I_NEVAL = 12  # right-side evaluations, all of them
I_NEVAL_OUT = 13  # of which at output times
I_NORDER = 14  # order changes
I_KUSED = 15  # highest order of an accepted step
I_SIZE = 16

# ``coef``: rows of step coefficients, kmax + 2 columns.
C_DT = 0  # accepted step sizes, newest first: dt[i] = t_{n−i} − t_{n−i−1}
C_PSI = 1  # ψ_i = t_{n+1} − t_{n−i} of the current attempt
C_BETA = 2  # β_j of the current attempt
C_SIGMA = 3  # σ_j = j! h^j / Π_{i<j} ψ_i: scales Φ_j to ∇^j f
C_G = 4  # g_j of the current attempt (or of the dense output)
C_W = 5  # scratch of the g recursion
C_GSTAR = 6  # |γ*_j|, j = 0 … kmax + 1 (Haug 1989 Table 7.4.10), constant
C_ROWS = 7

# ``work``: rows of length dim.
R_XE = 0  # the state at which f is evaluated next (x^p, x^c or an output point)
R_FE = 1  # f evaluated there
R_SCALE = 2  # error weights atol + rtol max(|x_n|, |x^p|) of the current attempt
R_XPREV = 3  # x_n at the start of the last accepted step (dense output)
R_DPK = 4  # Σ_{j<k} Φ*_j(n) after the prediction, then Φ^p_k(n+1)
R_STAR = 5  # Φ*_j(n) in row R_STAR + j, j = 0 … kmax

# What the next evaluation of f is for.
_PH_INIT = 0  # f(x0, t0)
_PH_INIT2 = 1  # f at an Euler step, for the starting-step heuristic
_PH_NEXT = 2  # nothing pending: write an output or begin an attempt
_PH_PRED = 3  # f^p at x^p
_PH_CORR = 4  # f_{n+1} at x^c, then accept
_PH_OUTPUT = 5  # f and aux at an output point


def work_rows(kmax: int) -> int:
    """Rows of ``work`` for orders up to ``kmax``."""
    return R_STAR + kmax + 1


def adaptive_workspace(
    dim: int,
    kmax: int = KMAX,
    *,
    t0: float = 0.0,
    rtol: float | np.ndarray = 1e-6,
    atol: float | np.ndarray = 1e-6,
    h_min: float = 0.0,
    h_max: float = math.inf,
    h_first: float = 0.0,
    stages: int = 0,
) -> tuple[np.ndarray, ...]:
    """Arrays for :func:`vabm_chunk`, set for a start at ``t0``: ``(tol, fstate,
    istate, phi, coef, work)``; the one-step methods that share it ask for at least
    ``stages`` rows of ``phi`` (:mod:`mbdgen.runtime.dop853`: 16).

    tol : (2, dim) float64, rows rtol and atol (scalars are broadcast; atol > 0).
    fstate : (F_SIZE,) float64, the ``F_*`` slots: t, next h, settings.
    istate : (I_SIZE,) int64, the ``I_*`` slots: order, history length, counters.
    phi : (max(kmax + 2, stages), dim) modified divided differences Φ_j(n), row j.
    coef : (C_ROWS, kmax + 2) the past step sizes (row C_DT) and the coefficients
        of the current attempt, ``C_*`` rows.
    work : (work_rows(kmax), dim) the evaluation point, f, the error weights and the
        last step's Φ*_j and Φ^p_k for the dense output, ``R_*`` rows.

    Everything that persists between chunks is in these arrays; ``x`` (the state, the
    caller's) must hold x0.  To restart at the current state (e.g. after the driver
    changed the meaning of x), write every output up to ``fstate[F_T]`` first, then
    set ``istate[I_STARTED] = 0``: the history is rebuilt from order 1.
    """
    if dim < 1:
        raise ValueError("the state needs at least one component")
    if not 1 <= kmax <= KMAX:
        raise ValueError(f"kmax must be between 1 and {KMAX}, got {kmax}")
    tol = np.empty((2, dim))
    tol[0] = rtol
    tol[1] = atol
    if isinstance(rtol, (float, int)) and isinstance(atol, (float, int)):
        valid = 0.0 <= rtol < math.inf and 0.0 < atol < math.inf  # NaN fails both
    else:
        valid = bool(np.all(tol[0] >= 0.0) and np.all(tol[1] > 0.0) and np.all(np.isfinite(tol)))
    if not valid:
        raise ValueError("tolerances must be finite, rtol ≥ 0 and atol > 0")
    if not (0.0 <= h_min < h_max and h_first >= 0.0):
        raise ValueError("need 0 ≤ h_min < h_max and h_first ≥ 0")
    fstate = np.zeros(F_SIZE)
    fstate[F_T] = fstate[F_TPREV] = t0
    fstate[F_HMIN] = h_min
    fstate[F_HMAX] = h_max
    fstate[F_HFIRST] = h_first
    istate = np.zeros(I_SIZE, dtype=np.int64)
    istate[I_K] = 1
    istate[I_KMAX] = kmax
    coef = np.zeros((C_ROWS, kmax + 2))
    coef[C_GSTAR] = _gstar(kmax + 2)
    phi = np.zeros((max(kmax + 2, stages), dim))
    return tol, fstate, istate, phi, coef, np.zeros((work_rows(kmax), dim))


@functools.cache
def _gstar(count: int) -> tuple[float, ...]:
    """|γ*_0| … |γ*_{count−1}| as floats, once per process (from the exact fractions:
    converting them took a fifth of a short run's setup)."""
    return tuple(abs(float(g)) for g in adams_moulton_gammas(count))


def counters(istate: np.ndarray) -> dict[str, int]:
    """The counters of ``istate`` by name."""
    return {
        "steps": int(istate[I_NSTEP]),
        "rejected_steps": int(istate[I_NREJECT]),
        "rhs_evaluations": int(istate[I_NEVAL]),
        "output_evaluations": int(istate[I_NEVAL_OUT]),
        "order_changes": int(istate[I_NORDER]),
        "highest_order": int(istate[I_KUSED]),
        "order": int(istate[I_K]),
    }


@njit(cache=True)
def _integral_weights(s, step, dt, off, count, w, g):
    """g_j = (1/s) ∫_0^s Π_{i<j} (u + a_i) / (step + a_i) du for j < count.

    a_i = Σ_{l<i} dt[off + l] are the distances of the interpolation nodes behind the
    start of the step (off = 0: the step about to be taken, off = 1: the last accepted
    one).  With s = step these are the g_j of Eq. 7.4.10; with s < step they give the
    dense output.  Shampine and Gordon's recursion (INTRP) on
    c_{j,q} = (1/s^q) ∫_0^s (s − u)^{q−1} p_j(u) du, c_{0,q} = 1/q:
    multiplying p_j by (u + a)/b = ((s + a) − (s − u))/b maps c_{·,q} to
    ((s + a)/b) c_{·,q} − (s/b) c_{·,q+1}.
    """
    for q in range(count):
        w[q] = 1.0 / (q + 1)
    g[0] = 1.0
    a = 0.0
    for j in range(1, count):
        b = step + a
        gam = (s + a) / b
        eta = s / b
        for q in range(count - j):
            w[q] = gam * w[q] - eta * w[q + 1]
        g[j] = w[0]
        a += dt[off + j - 1]


@njit(cache=True)
def _step_coefficients(h, k, nvalid, coef):
    """ψ_i, β_j (j < nvalid), σ_j (j ≤ k + 1) and g_j (j ≤ k) of a step of size h."""
    dt = coef[C_DT]
    psi = coef[C_PSI]
    beta = coef[C_BETA]
    sigma = coef[C_SIGMA]
    cols = psi.shape[0]
    back = 0.0
    for i in range(cols):
        psi[i] = h + back
        back += dt[i]
    beta[0] = 1.0
    back = 0.0
    for j in range(1, min(nvalid, cols)):
        back += dt[j - 1]  # ψ_{j−1}(n−1) = t_n − t_{n−j}
        beta[j] = beta[j - 1] * psi[j - 1] / back
    sigma[0] = 1.0
    for j in range(1, min(k + 2, cols)):
        sigma[j] = sigma[j - 1] * j * h / psi[j - 1]
    _integral_weights(h, h, dt, 0, k + 1, coef[C_W], coef[C_G])


@njit(cache=True)
def _predict(x, h, k, nvalid, phi, tol, coef, work):
    """Φ*_j(n) (j < nvalid), their sum over j < k in R_DPK, x^p (Eq. 7.4.10) in R_XE
    and the error weights in R_SCALE."""
    dim = x.shape[0]
    beta = coef[C_BETA]
    g = coef[C_G]
    nstar = min(nvalid, phi.shape[0] - 1)
    for j in range(nstar):
        b = beta[j]
        for i in range(dim):
            work[R_STAR + j, i] = b * phi[j, i]
    # j outside, i inside (contiguous rows, vectorised); each component sums over j in
    # the same order as a loop over j per component would, so the values are the same
    xe = work[R_XE]
    dpk = work[R_DPK]
    for i in range(dim):
        xe[i] = 0.0
        dpk[i] = 0.0
    for j in range(k - 1, -1, -1):
        gj = g[j]
        star = work[R_STAR + j]
        for i in range(dim):
            xe[i] += gj * star[i]
            dpk[i] += star[i]
    for i in range(dim):
        xp = x[i] + h * xe[i]
        xe[i] = xp
        work[R_SCALE, i] = tol[1, i] + tol[0, i] * max(abs(x[i]), abs(xp))


@njit(cache=True)
def _estimates(h, k, coef, work):
    """Φ^p_k(n+1) into R_DPK, and (err, E_k, E_{k−1}, E_{k−2}) (Eq. 7.4.16)."""
    dim = work.shape[1]
    fe = work[R_FE]
    dpk = work[R_DPK]
    scale = work[R_SCALE]
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    for i in range(dim):
        v = fe[i] - dpk[i]
        dpk[i] = v
        r = v / scale[i]
        s0 += r * r
        if k >= 2:
            v += work[R_STAR + k - 1, i]  # Φ^p_{k−1}(n+1)
            r = v / scale[i]
            s1 += r * r
            if k >= 3:
                v += work[R_STAR + k - 2, i]  # Φ^p_{k−2}(n+1)
                r = v / scale[i]
                s2 += r * r
    g = coef[C_G]
    sigma = coef[C_SIGMA]
    gstar = coef[C_GSTAR]
    norm = math.sqrt(s0 / dim)
    err = h * abs(g[k] - g[k - 1]) * norm
    ek = h * sigma[k] * gstar[k] * norm
    ekm1 = h * sigma[k - 1] * gstar[k - 1] * math.sqrt(s1 / dim) if k >= 2 else 0.0
    ekm2 = h * sigma[k - 2] * gstar[k - 2] * math.sqrt(s2 / dim) if k >= 3 else 0.0
    return err, ek, ekm1, ekm2


@njit(cache=True)
def _combine(g, k, work, out):
    """out ← g_k Φ^p_k(n+1) + Σ_{j<k} g_j Φ*_j(n), summed over j = k − 1 … 0 in that
    order for every component (rows of ``work``, j outside: vectorised)."""
    dpk = work[R_DPK]
    gk = g[k]
    for i in range(out.shape[0]):
        out[i] = gk * dpk[i]
    for j in range(k - 1, -1, -1):
        gj = g[j]
        star = work[R_STAR + j]
        for i in range(out.shape[0]):
            out[i] += gj * star[i]


@njit(cache=True)
def _correct(x, h, k, coef, work):
    """x^c = x_n + h (Σ_{j<k} g_j Φ*_j(n) + g_k Φ^p_k(n+1)) into R_XE (Eq. 7.4.14)."""
    g = coef[C_G]
    _combine(g, k, work, work[R_XE])
    xe = work[R_XE]
    for i in range(x.shape[0]):
        xe[i] = x[i] + h * xe[i]


@njit(cache=True)
def _dense(t, fstate, istate, x, coef, work, out):
    """x(t) = x_n + ∫_{t_n}^t P*_{k+1,n} over the last accepted step [t_n, t_{n+1}]
    (Eq. 7.4.14 with upper limit t); before the first step, x0."""
    if istate[I_NSTEP] == 0:
        for i in range(x.shape[0]):
            out[i] = x[i]
        return
    k = istate[I_KLAST]
    s = t - fstate[F_TPREV]
    g = coef[C_G]
    _integral_weights(s, coef[C_DT, 0], coef[C_DT], 1, k + 1, coef[C_W], g)
    _combine(g, k, work, out)
    for i in range(x.shape[0]):
        out[i] = work[R_XPREV, i] + s * out[i]


@njit(cache=True)
def step_ratio(est, order):
    """h_next / h after an accepted step whose error estimate (in units of the
    tolerance) is ``est`` ∝ h^(order+1), with r = (TARGET / est)^(1/(order+1)).

    The shared controller with DE's numbers (:data:`mbdgen.runtime.stepsize.VABM`):
    keep h while TARGET/1.25^(order+1) < est ≤ TARGET — change the step only "if
    significant gains are possible" (Haug 1989 §7.4.4), which also keeps the steps
    equal for stretches, where the order-raising test is reliable; grow by
    min(2, r/1.2) when r ≥ 1.25; shrink by r clamped to [0.5, 0.9] (DE's clamp) when
    est > TARGET.

    Why TARGET = 0.1: the estimate is that of the order k corrector while the result
    is the order k + 1 corrector's, whose error per step is about C h times the
    estimate (C ≈ 5ω for x'' = −ω²x at k = 5, PECE error included).  The phase errors
    of a periodic motion add up, about 2πC/ω = 10π estimates per period, so after
    P periods the global error is near 10πP · TARGET tolerances: 20 periods end at
    about 60 tolerances with TARGET = 0.1 (measured 59) and 300 with DE's 1/2
    (measured 290), for the same work per digit gained.
    """
    return stepsize.ratio(est, 1.0 / (order + 1), stepsize.VABM)


@njit(cache=True)
def _reject(k, knew, ek, nonfinite, istate, fstate):
    """A failed attempt: halve h (Haug §7.4.4), lower the order as the estimates
    suggest, to 1 after three failures; shrink faster after four (DE's rules)."""
    istate[I_NREJECT] += 1
    istate[I_NFAIL] += 1
    istate[I_RAMP] = 0
    istate[I_NONFINITE] = nonfinite
    factor = 0.5
    if istate[I_NFAIL] >= 3:
        knew = 1
    if istate[I_NFAIL] >= 4 and math.isfinite(ek) and 0.5 < 0.25 * ek:
        factor = math.sqrt(0.5 / ek)
    if knew != k:
        istate[I_NORDER] += 1
    istate[I_K] = knew
    fstate[F_H] *= factor


@njit(cache=True)
def _accept(x, h, t_new, k, knew, ek, ekm1, phi, coef, work, istate, fstate):
    """Take x^c (possibly projected by the right side) and f_{n+1}; update the
    differences, then choose the order and step size of the next step."""
    dim = x.shape[0]
    rows = phi.shape[0]
    dt = coef[C_DT]
    # rows 0 … k + 1 are all that this step's order test (E_{k+1}) and the next step
    # (order ≤ k + 1) read, and each row follows from those below it: keeping no more
    # (DE keeps k + 2 too) changes no value and saves the passes over the higher rows
    # while the order is below its highest.
    nv = min(istate[I_NVALID] + 1, rows, k + 2)
    for i in range(dim):
        phi[0, i] = work[R_FE, i]
    for j in range(nv - 1):
        for i in range(dim):
            phi[j + 1, i] = phi[j, i] - work[R_STAR + j, i]
    istate[I_NVALID] = nv
    if istate[I_NSTEP] > 0 and h == dt[0]:
        istate[I_NCONST] = min(istate[I_NCONST] + 1, rows)
    else:
        istate[I_NCONST] = 1
    for i in range(dt.shape[0] - 1, 0, -1):
        dt[i] = dt[i - 1]
    dt[0] = h
    for i in range(dim):
        work[R_XPREV, i] = x[i]
        x[i] = work[R_XE, i]
    fstate[F_TPREV] = fstate[F_T]
    fstate[F_T] = t_new
    istate[I_NSTEP] += 1
    istate[I_NFAIL] = 0
    istate[I_KLAST] = k
    istate[I_KUSED] = max(istate[I_KUSED], k)

    kmax = istate[I_KMAX]
    ramp = istate[I_RAMP]
    if knew == k - 1 or k >= kmax:
        ramp = 0
    kn = k
    erk = ek
    if ramp:
        kn = k + 1
    elif knew == k - 1:
        kn = k - 1
        erk = ekm1
    elif istate[I_NCONST] >= k + 1 and nv >= k + 2:
        # E_{k+1} from Φ_{k+1}(n+1), trusted only after k + 1 equal steps (DE)
        s = 0.0
        for i in range(dim):
            r = phi[k + 1, i] / work[R_SCALE, i]
            s += r * r
        ekp1 = h * coef[C_SIGMA, k + 1] * coef[C_GSTAR, k + 1] * math.sqrt(s / dim)
        if k == 1:
            if ekp1 < 0.5 * ek and kmax > 1:
                kn = 2
                erk = ekp1
        elif ekm1 <= min(ek, ekp1):
            kn = k - 1
            erk = ekm1
        elif ekp1 < ek and k < kmax:
            kn = k + 1
            erk = ekp1
    istate[I_RAMP] = ramp
    if kn != k:
        istate[I_NORDER] += 1
    istate[I_K] = kn

    h_next = 2.0 * h if ramp else h * step_ratio(erk, kn)
    h_next = min(h_next, fstate[F_HMAX])
    fstate[F_H] = max(h_next, h_floor(fstate[F_HMIN], t_new))


@njit(cache=True)
def _first_step(x, f0, tol, scale):
    """h₀ = 0.01 ‖x₀‖/‖f₀‖ (Hairer, Nørsett & Wanner §II.4), error weights in scale."""
    for i in range(x.shape[0]):
        scale[i] = tol[1, i] + tol[0, i] * abs(x[i])
    d0 = wrms(x, scale)
    d1 = wrms(f0, scale)
    if d0 < 1e-5 or d1 < 1e-5:
        return 1e-6, d1
    return 0.01 * d0 / d1, d1


@njit(cache=True)
def _start(h, t, fstate, istate):
    """First step h (within the limits), order 1, start-up ramp on."""
    fstate[F_H] = max(min(h, fstate[F_HMAX]), h_floor(fstate[F_HMIN], t))
    istate[I_K] = 1
    istate[I_RAMP] = 1 if istate[I_KMAX] > 1 else 0
    istate[I_NCONST] = 0
    istate[I_NFAIL] = 0
    istate[I_STARTED] = 1


@njit(cache=True)
def _write_output(j, xe, fe, aux, out_x, out_f, out_aux, istate, evaluated):
    """Row j of the outputs: the state, and f and aux if they were ``evaluated`` there."""
    for i in range(xe.shape[0]):
        out_x[j, i] = xe[i]
    if evaluated:
        for i in range(out_f.shape[1]):
            out_f[j, i] = fe[i]
        for i in range(aux.shape[0]):
            out_aux[j, i] = aux[i]
        istate[I_NEVAL_OUT] += 1
    istate[I_JOUT] += 1


@njit(cache=True, inline="always")
def vabm_chunk(
    rhs,
    kern,
    n,
    m,
    p,
    ctrl,
    ws,
    aux,
    x,
    tol,
    fstate,
    istate,
    phi,
    coef,
    work,
    t_out,
    n_out,
    max_steps,
    out_x,
    out_f,
    out_aux,
):
    """Integrate with variable-step, variable-order ABM PECE (Haug 1989 §7.4.4) until
    ``n_out`` more output times are written or ``max_steps`` attempts are made.

    Parameters
    ----------
    rhs, kern, n, m, p, ctrl, ws : the right side and what it is passed (see
        :func:`mbdgen.runtime.explicit.abm_chunk`).
    aux : (naux,) the right side's record; naux = 0: none.
    x : (dim,) state at ``fstate[F_T]``, updated in place to the last accepted step.
    tol, fstate, istate, phi, coef, work : see :func:`adaptive_workspace`.
    t_out : (n_total,) requested output times, nondecreasing, ≥ t0.
    n_out : write at most this many outputs in this call (rows ``istate[I_JOUT]`` on).
    max_steps : make at most this many step attempts (accepted or rejected).
    out_x : (n_total, dim) the state at ``t_out`` (dense output, Eq. 7.4.14).
    out_f : (n_total, dim) or (n_total, 0): f at ``t_out`` (evaluated there).
    out_aux : (n_total, naux) aux at ``t_out`` (evaluated there).

    A call with ``n_out = 0`` only evaluates f(x0, t0) and chooses the first step.

    Returns
    -------
    status : ``OK`` (the chunk's budget is spent or ``t_out`` is done:
        ``istate[I_JOUT] == n_total``), ``STEP_SIZE_COLLAPSE``, ``NONFINITE`` or the
        right side's failing code; the state is always that of the last accepted step.
    """
    # unowned views: no reference counting inside the loop (mbdgen.runtime.refs)
    p = borrow(p)
    ctrl = borrow(ctrl)
    ws = borrow(ws)
    aux = borrow(aux)
    work = borrow(work)
    dim = x.shape[0]
    n_total = t_out.shape[0]
    evaluate_out = out_f.shape[1] + aux.shape[0] > 0
    xe = work[R_XE]
    fe = work[R_FE]
    written = 0
    attempts = 0
    h = fstate[F_H]
    k = istate[I_K]
    knew = k
    ek = 0.0
    ekm1 = 0.0
    h0 = 0.0
    d1 = 0.0
    t_eval = fstate[F_T]
    phase = _PH_NEXT
    if istate[I_STARTED] == 0:
        phase = _PH_INIT
        for i in range(dim):
            xe[i] = x[i]
    while True:
        t = fstate[F_T]
        if phase == _PH_NEXT:
            j = istate[I_JOUT]
            if written >= n_out or j >= n_total:
                return OK
            if t_out[j] <= t:
                _dense(t_out[j], fstate, istate, x, coef, work, xe)
                if not evaluate_out:
                    _write_output(j, xe, fe, aux, out_x, out_f, out_aux, istate, False)
                    written += 1
                    continue
                t_eval = t_out[j]
                phase = _PH_OUTPUT
            else:
                if attempts >= max_steps:
                    return OK
                h = fstate[F_H]
                if h < h_floor(fstate[F_HMIN], t):
                    return NONFINITE if istate[I_NONFINITE] else STEP_SIZE_COLLAPSE
                attempts += 1
                k = istate[I_K]
                _step_coefficients(h, k, istate[I_NVALID], coef)
                _predict(x, h, k, istate[I_NVALID], phi, tol, coef, work)
                t_eval = t + h
                phase = _PH_PRED
        # E: the one evaluation site
        status = rhs(kern, n, m, t_eval, xe, p, ctrl, ws, fe, aux, True)
        istate[I_NEVAL] += 1
        if status != OK and not (status == REPARTITION and phase == _PH_OUTPUT):
            return status
        if phase == _PH_PRED:
            err, ek, ekm1, ekm2 = _estimates(h, k, coef, work)
            fstate[F_ERR] = err
            knew = k
            if k >= 3 and max(ekm1, ekm2) <= ek:
                knew = k - 1
            elif k == 2 and ekm1 <= 0.5 * ek:
                knew = 1
            if err <= 1.0:
                _correct(x, h, k, coef, work)
                phase = _PH_CORR
            else:
                _reject(k, knew, ek, 0 if math.isfinite(err) else 1, istate, fstate)
                phase = _PH_NEXT
        elif phase == _PH_CORR:
            finite = True
            for i in range(dim):
                if not (math.isfinite(fe[i]) and math.isfinite(xe[i])):
                    finite = False
            if finite:
                _accept(x, h, t_eval, k, knew, ek, ekm1, phi, coef, work, istate, fstate)
            else:
                _reject(k, k, ek, 1, istate, fstate)
            phase = _PH_NEXT
        elif phase == _PH_OUTPUT:
            _write_output(istate[I_JOUT], xe, fe, aux, out_x, out_f, out_aux, istate, True)
            written += 1
            phase = _PH_NEXT
            if status == REPARTITION:  # valid values, written; now the driver re-partitions
                return status
        elif phase == _PH_INIT:
            for i in range(dim):
                x[i] = xe[i]  # the right side may have projected x0
                if not (math.isfinite(x[i]) and math.isfinite(fe[i])):
                    return NONFINITE
                phi[0, i] = fe[i]
            istate[I_NVALID] = 1
            if fstate[F_HFIRST] > 0.0:
                _start(fstate[F_HFIRST], t, fstate, istate)
                phase = _PH_NEXT
            else:
                h0, d1 = _first_step(x, fe, tol, work[R_SCALE])
                h0 = min(h0, fstate[F_HMAX])
                for i in range(dim):
                    xe[i] = x[i] + h0 * fe[i]
                t_eval = t + h0
                phase = _PH_INIT2
        else:  # _PH_INIT2: d₂ ≈ ‖x''‖ from f(x₀ + h₀f₀)
            acc = 0.0
            for i in range(dim):
                r = (fe[i] - phi[0, i]) / work[R_SCALE, i]
                acc += r * r
            d2 = math.sqrt(acc / dim) / h0
            dm = max(d1, d2)
            if not math.isfinite(dm):
                h = 1e-3 * h0
            elif dm <= 1e-15:
                h = max(1e-6, 1e-3 * h0)
            else:
                h = min(100.0 * h0, math.sqrt(0.01 / dm))
            _start(h, t, fstate, istate)
            phase = _PH_NEXT
