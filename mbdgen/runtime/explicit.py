"""Explicit multistep integrators: Adams–Bashforth and ABM PECE, and RK steps.

Haug 1989 §7.4: the Adams–Bashforth predictor of order k (Eq. 7.4.11) and the
Adams–Moulton corrector of order k + 1 (Eq. 7.4.15), used in PECE mode (§7.4.4).
The backward-difference formulas are applied in their equivalent ordinate form
x_{n+1} = x_n + h Σ_j β_j f_{n−j}, with weights computed exactly from the γ
coefficients in :mod:`mbdgen.methods`.

Two start-up procedures fill the history of f values:

* ``START_RAMP``: self-starting, raising the order by one each step from 1 up to
  k (§7.4.4, Examples 7.4.4 and 7.4.5).  The low-order first steps leave an error
  that later steps cannot remove (end of §7.4.2): AB k then converges only with
  order 2, whatever k.
* ``START_RK``: the first k − 1 steps are taken by an explicit Runge–Kutta method
  (Fehlberg's fifth-order formula by default, the "RKF" starter of Wu, Chiou & Lin
  2000, §V), accurate enough that AB k and ABM k keep their orders k and k + 1.

The loop is generic in the right side: ``rhs(kern, t, x, p, ctrl, ws, f, aux)``
returns a status code and writes f(x, t) into ``f`` (and any per-evaluation record
into ``aux``).  One call advances ``n_steps`` steps; nothing is allocated.
"""

from __future__ import annotations

import math

from numba import njit

from mbdgen.runtime.status import NONFINITE, OK

# Layout of the integer ``state`` array shared between chunks.
S_ORDER = 0  # target order k
S_CORRECT = 1  # 1: PECE (AB k + AM k+1), 0: AB k only
S_NHIST = 2  # number of valid f values in the history ring
S_HEAD = 3  # ring index of f_n
S_STEP = 4  # steps taken since t0
S_ROW = 5  # next output row
S_NEVAL = 6  # right-side evaluations
S_START = 7  # START_RAMP or START_RK
STATE_SIZE = 8

START_RAMP = 0
START_RK = 1

# Rows of the ``scratch`` work array.
R_X = 0  # candidate state x_{n+1}
R_FP = 1  # predicted f^p
R_XS = 2  # Runge–Kutta stage state
R_K = 3  # first Runge–Kutta stage; stage i is row R_K + i


def scratch_rows(stages: int) -> int:
    """Rows ``scratch`` needs for a Runge–Kutta starter with ``stages`` stages."""
    return R_K + stages


@njit(cache=True, inline="always")
def rk_step(rhs, kern, p, ctrl, ws, aux, t, h, x, f0, scratch, rk_a, rk_b, rk_c, x_out):
    """One explicit Runge–Kutta step x_out = x + h Σ_i b_i k_i (tableau ``rk_a/b/c``).

    ``f0`` = f(x, t) is given (the FSAL value the multistep history already has);
    stages go into ``scratch[R_K:]``.  Returns the first failing status or ``OK``.
    """
    dim = x.shape[0]
    s = rk_b.shape[0]
    xs = scratch[R_XS]
    for i in range(dim):
        scratch[R_K, i] = f0[i]
    for st in range(1, s):
        for i in range(dim):
            acc = 0.0
            for j in range(st):
                acc += rk_a[st, j] * scratch[R_K + j, i]
            xs[i] = x[i] + h * acc
        status = rhs(kern, t + rk_c[st] * h, xs, p, ctrl, ws, scratch[R_K + st], aux)
        if status != OK:
            return status
    for i in range(dim):
        acc = 0.0
        for j in range(s):
            acc += rk_b[j] * scratch[R_K + j, i]
        x_out[i] = x[i] + h * acc
    return OK


@njit(cache=True)
def _record(row, t, x, f, aux, out_t, out_x, out_f, out_aux):
    out_t[row] = t
    for i in range(x.shape[0]):
        out_x[row, i] = x[i]
        out_f[row, i] = f[i]
    for i in range(aux.shape[0]):
        out_aux[row, i] = aux[i]


@njit(cache=True, inline="always")
def abm_chunk(
    rhs,
    kern,
    p,
    ctrl,
    ws,
    aux,
    t0,
    h,
    x,
    hist,
    scratch,
    state,
    ab_coef,
    am_coef,
    rk_a,
    rk_b,
    rk_c,
    n_steps,
    stride,
    out_t,
    out_x,
    out_f,
    out_aux,
):
    """Advance up to ``n_steps`` fixed steps of AB k or ABM k PECE (Haug 1989 §7.4).

    Parameters
    ----------
    x : (dim,) state, updated in place.
    hist : (K, dim) ring of past f values, K ≥ k + 1; ``hist[(head − j) % K] = f_{n−j}``.
    scratch : (scratch_rows(stages), dim) work rows, see the ``R_*`` constants.
    state : int64 (STATE_SIZE,) counters, see the ``S_*`` constants; updated in place.
    ab_coef : (kmax + 1, kmax) AB weights, row k = order k (Eq. 7.4.11 in ordinate form).
    am_coef : (kmax + 2, kmax + 1) AM weights, row k + 1 = order k + 1 (Eq. 7.4.15).
    rk_a, rk_b, rk_c : Butcher tableau of the starter (``state[S_START] == START_RK``).
    stride : record every ``stride``-th step in ``out_*`` (row ``state[S_ROW]`` onwards).

    Returns
    -------
    status : ``OK`` or the failing code; on failure ``x`` and the history hold the
    last accepted step.
    """
    dim = x.shape[0]
    K = hist.shape[0]
    k = state[S_ORDER]
    xc = scratch[R_X]
    fp = scratch[R_FP]
    if state[S_NHIST] == 0:
        t = t0 + state[S_STEP] * h
        status = rhs(kern, t, x, p, ctrl, ws, hist[state[S_HEAD]], aux)
        state[S_NEVAL] += 1
        if status != OK:
            return status
        state[S_NHIST] = 1
        if state[S_STEP] % stride == 0:
            _record(state[S_ROW], t, x, hist[state[S_HEAD]], aux, out_t, out_x, out_f, out_aux)
            state[S_ROW] += 1
    for _ in range(n_steps):
        head = state[S_HEAD]
        kk = min(k, state[S_NHIST])
        t_new = t0 + (state[S_STEP] + 1) * h
        if state[S_START] == START_RK and kk < k:
            t_old = t0 + state[S_STEP] * h
            status = rk_step(
                rhs, kern, p, ctrl, ws, aux, t_old, h, x, hist[head], scratch,
                rk_a, rk_b, rk_c, xc,
            )  # fmt: skip
            state[S_NEVAL] += rk_b.shape[0] - 1
            if status != OK:
                return status
        else:
            status = _pece(rhs, kern, p, ctrl, ws, aux, t_new, h, x, hist, head, kk,
                           state[S_CORRECT], ab_coef, am_coef, xc, fp)  # fmt: skip
            state[S_NEVAL] += state[S_CORRECT]
            if status != OK:
                return status
        # E: f_{n+1} = f(x_{n+1}) into the oldest ring slot (never needed again).
        new = (head + 1) % K
        status = rhs(kern, t_new, xc, p, ctrl, ws, hist[new], aux)
        state[S_NEVAL] += 1
        if status != OK:
            return status
        for i in range(dim):
            if not math.isfinite(xc[i]):
                return NONFINITE
        for i in range(dim):
            x[i] = xc[i]
        state[S_HEAD] = new
        if state[S_NHIST] < K:
            state[S_NHIST] += 1
        state[S_STEP] += 1
        if state[S_STEP] % stride == 0:
            _record(state[S_ROW], t_new, x, hist[new], aux, out_t, out_x, out_f, out_aux)
            state[S_ROW] += 1
    return OK


@njit(cache=True, inline="always")
def _pece(rhs, kern, p, ctrl, ws, aux, t_new, h, x, hist, head, kk, correct, ab_coef, am_coef,
          xc, fp):  # fmt: skip
    """P(EC) with order kk: AB kk prediction into ``xc`` (Eq. 7.4.11), then, if
    ``correct``, f^p = f(x^p) and the AM kk+1 correction (Eq. 7.4.15) into ``xc``."""
    dim = x.shape[0]
    K = hist.shape[0]
    # P: x^p = x_n + h Σ_j β^AB_{kk,j} f_{n−j}
    for i in range(dim):
        s = 0.0
        for j in range(kk):
            s += ab_coef[kk, j] * hist[(head - j) % K, i]
        xc[i] = x[i] + h * s
    if correct == 0:
        return OK
    # E: f^p = f(x^p);  C: x_{n+1} = x_n + h (β*_0 f^p + Σ_{j≥1} β*_j f_{n+1−j})
    status = rhs(kern, t_new, xc, p, ctrl, ws, fp, aux)
    if status != OK:
        return status
    for i in range(dim):
        s = am_coef[kk + 1, 0] * fp[i]
        for j in range(1, kk + 1):
            s += am_coef[kk + 1, j] * hist[(head - j + 1) % K, i]
        xc[i] = x[i] + h * s
    return OK
