"""Explicit multistep integrators: self-starting Adams–Bashforth and ABM PECE.

Haug 1989 §7.4: the Adams–Bashforth predictor of order k (Eq. 7.4.11) and the
Adams–Moulton corrector of order k + 1 (Eq. 7.4.15), used in PECE mode (§7.4.4),
self-started by raising the order by one each step from 1 up to k (Examples 7.4.4
and 7.4.5).  The backward-difference formulas are applied in their equivalent
ordinate form x_{n+1} = x_n + h Σ_j β_j f_{n−j}, with weights computed exactly
from the γ coefficients in :mod:`mbdgen.methods`.

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
STATE_SIZE = 7


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
    scratch : (2, dim) work rows (candidate state, predicted f).
    state : int64 (STATE_SIZE,) counters, see the ``S_*`` constants; updated in place.
    ab_coef : (kmax + 1, kmax) AB weights, row k = order k (Eq. 7.4.11 in ordinate form).
    am_coef : (kmax + 2, kmax + 1) AM weights, row k + 1 = order k + 1 (Eq. 7.4.15).
    stride : record every ``stride``-th step in ``out_*`` (row ``state[S_ROW]`` onwards).

    Returns
    -------
    status : ``OK`` or the failing code; on failure ``x`` and the history hold the
    last accepted step.
    """
    dim = x.shape[0]
    K = hist.shape[0]
    k = state[S_ORDER]
    xc = scratch[0]
    fp = scratch[1]
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
        # P: x^p = x_n + h Σ_j β^AB_{kk,j} f_{n−j}
        for i in range(dim):
            s = 0.0
            for j in range(kk):
                s += ab_coef[kk, j] * hist[(head - j) % K, i]
            xc[i] = x[i] + h * s
        if state[S_CORRECT] != 0:
            # E: f^p = f(x^p);  C: x_{n+1} = x_n + h (β*_0 f^p + Σ_{j≥1} β*_j f_{n+1−j})
            status = rhs(kern, t_new, xc, p, ctrl, ws, fp, aux)
            state[S_NEVAL] += 1
            if status != OK:
                return status
            for i in range(dim):
                s = am_coef[kk + 1, 0] * fp[i]
                for j in range(1, kk + 1):
                    s += am_coef[kk + 1, j] * hist[(head - j + 1) % K, i]
                xc[i] = x[i] + h * s
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
