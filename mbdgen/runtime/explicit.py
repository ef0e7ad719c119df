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
  With a target order k that the history never reaches, every step is a Runge–Kutta
  step: that is how the explicit Runge–Kutta methods run.

The loop is generic in the right side: ``rhs(kern, n, m, t, x, p, ctrl, ws, f, aux, state)``
returns a status code and writes f(x, t) into ``f`` (and any per-evaluation record
into ``aux``); ``kern`` is the model's kernel and n, m its sizes, passed through
untouched (constants in a generated entry point); ``state`` is False at a
Runge–Kutta stage, whose point the hybrid right side must not correct
(:func:`mbdgen.runtime.partition.hybrid_rhs`).  One call advances ``n_steps``
steps; nothing is allocated.

The right side is called from a single place in the loop, which cycles through
the evaluations of a step (Runge–Kutta stages, or predicted and corrected values).
Numba inlines the right side, the model kernel and the linear solver at every call
site, and with the sizes n, m constant LLVM unrolls them: one call site keeps the
machine code (and the cold compile time) to a single copy.
"""

from __future__ import annotations

import math

from numba import njit

from mbdgen.runtime.refs import borrow
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
R_X = 0  # the state at which f is evaluated next
R_F = 1  # f evaluated there
R_K = 2  # Runge–Kutta stage k_i (i ≥ 1) is row R_K + i − 1; k_0 = f_n is in the history

# Phases of a step: what the next evaluation of f is for.
_PH_INIT = 0  # f(x_0, t_0), to start the history
_PH_NEXT = 1  # a new step begins (no evaluation pending)
_PH_STAGE = 2  # a Runge–Kutta stage
_PH_PRED = 3  # f^p at the predicted x^p (PECE)
_PH_ACCEPT = 4  # f_{n+1} at the new x_{n+1}, then accept the step


def scratch_rows(stages: int) -> int:
    """Rows ``scratch`` needs for a Runge–Kutta starter with ``stages`` stages."""
    return R_K + stages - 1


@njit(cache=True)
def _record(row, t, x, f, aux, out_t, out_x, out_f, out_aux):
    out_t[row] = t
    for i in range(x.shape[0]):
        out_x[row, i] = x[i]
        out_f[row, i] = f[i]
    for i in range(aux.shape[0]):
        out_aux[row, i] = aux[i]


@njit(cache=True)
def _rk_combine(x, h, weights, f0, scratch, count, out):
    """out = x + h (w_0 f0 + Σ_{1≤j<count} w_j k_j), the stages k_j in ``scratch``."""
    for i in range(x.shape[0]):
        acc = weights[0] * f0[i]
        for j in range(1, count):
            acc += weights[j] * scratch[R_K + j - 1, i]
        out[i] = x[i] + h * acc
    return 0


@njit(cache=True)
def _adams_combine(x, h, weights, first, f_first, hist, head, count, out):
    """out = x + h (w_0 f_first + Σ_{first≤j<count} w_j f_{n+1−j+first−1} …).

    With ``first = 0``: the AB sum x_n + h Σ_{j<count} w_j f_{n−j} (Eq. 7.4.11);
    with ``first = 1``: the AM sum x_n + h (w_0 f^p + Σ_{1≤j<count} w_j f_{n+1−j})
    (Eq. 7.4.15), ``f_first`` = f^p.  History rows are visited in the outer loop so
    the ring index is computed once per row; per entry the accumulation order is
    that of the formula.
    """
    dim = x.shape[0]
    K = hist.shape[0]
    acc = out  # accumulate in place, then add x_n
    if first == 1:
        for i in range(dim):
            acc[i] = weights[0] * f_first[i]
    else:
        for i in range(dim):
            acc[i] = 0.0
    row = head
    for j in range(first, count):
        c = weights[j]
        for i in range(dim):
            acc[i] += c * hist[row, i]
        row = row - 1 if row > 0 else K - 1
    for i in range(dim):
        out[i] = x[i] + h * acc[i]
    return 0


@njit(cache=True, inline="always")
def abm_chunk(
    rhs,
    kern,
    n,
    m,
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
    # unowned views: no reference counting inside the loop (mbdgen.runtime.refs)
    p = borrow(p)
    ctrl = borrow(ctrl)
    ws = borrow(ws)
    aux = borrow(aux)
    hist = borrow(hist)
    scratch = borrow(scratch)
    dim = x.shape[0]
    K = hist.shape[0]
    k = state[S_ORDER]
    stages = rk_b.shape[0]
    xe = scratch[R_X]
    fe = scratch[R_F]
    done = 0
    stage = 0
    kk = 0
    t_eval = t0 + state[S_STEP] * h
    phase = _PH_NEXT
    if state[S_NHIST] == 0:
        phase = _PH_INIT
        for i in range(dim):
            xe[i] = x[i]
    while True:
        head = state[S_HEAD]
        t_n = t0 + state[S_STEP] * h
        if phase == _PH_NEXT:
            if done == n_steps:
                return OK
            if state[S_START] == START_RK and state[S_NHIST] < k:
                # Runge–Kutta: stage 1 at x_n + h a_10 k_0 (k_0 = f_n), or, for a
                # one-stage method, straight to x_{n+1} = x_n + h b_0 k_0.
                stage = 1
                if stages > 1:
                    _rk_combine(x, h, rk_a[1], hist[head], scratch, 1, xe)
                    t_eval = t_n + rk_c[1] * h
                    phase = _PH_STAGE
                else:
                    _rk_combine(x, h, rk_b, hist[head], scratch, 1, xe)
                    t_eval = t_n + h
                    phase = _PH_ACCEPT
            else:
                # P: x^p = x_n + h Σ_j β^AB_{kk,j} f_{n−j}
                kk = min(k, state[S_NHIST])
                _adams_combine(x, h, ab_coef[kk], 0, fe, hist, head, kk, xe)
                t_eval = t_n + h
                phase = _PH_PRED if state[S_CORRECT] != 0 else _PH_ACCEPT
        # E: the one evaluation site
        status = rhs(kern, n, m, t_eval, xe, p, ctrl, ws, fe, aux, phase != _PH_STAGE)
        state[S_NEVAL] += 1
        if status != OK:
            return status
        if phase == _PH_INIT:
            # the right side may have projected xe onto the constraints (hybrid)
            for i in range(dim):
                x[i] = xe[i]
                hist[head, i] = fe[i]
            state[S_NHIST] = 1
            # a restart (e.g. after re-partitioning) must not record a step twice
            if state[S_STEP] % stride == 0 and state[S_ROW] * stride == state[S_STEP]:
                _record(state[S_ROW], t_eval, x, fe, aux, out_t, out_x, out_f, out_aux)
                state[S_ROW] += 1
            phase = _PH_NEXT
        elif phase == _PH_STAGE:
            for i in range(dim):
                scratch[R_K + stage - 1, i] = fe[i]
            stage += 1
            if stage < stages:
                _rk_combine(x, h, rk_a[stage], hist[head], scratch, stage, xe)
                t_eval = t_n + rk_c[stage] * h
            else:
                _rk_combine(x, h, rk_b, hist[head], scratch, stages, xe)
                t_eval = t_n + h
                phase = _PH_ACCEPT
        elif phase == _PH_PRED:
            # C: x_{n+1} = x_n + h (β*_0 f^p + Σ_{j≥1} β*_j f_{n+1−j})
            _adams_combine(x, h, am_coef[kk + 1], 1, fe, hist, head, kk + 1, xe)
            phase = _PH_ACCEPT
        else:
            # accept x_{n+1}; f_{n+1} replaces the oldest history row
            for i in range(dim):
                if not math.isfinite(xe[i]):
                    return NONFINITE
            new = head + 1 if head + 1 < K else 0
            for i in range(dim):
                x[i] = xe[i]
                hist[new, i] = fe[i]
            state[S_HEAD] = new
            if state[S_NHIST] < K:
                state[S_NHIST] += 1
            state[S_STEP] += 1
            done += 1
            if state[S_STEP] % stride == 0:
                _record(state[S_ROW], t_eval, x, fe, aux, out_t, out_x, out_f, out_aux)
                state[S_ROW] += 1
            phase = _PH_NEXT
