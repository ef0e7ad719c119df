"""Runge–Kutta–Fehlberg 4(5) with step-size control: the reference integrator.

Fehlberg's embedded pair (the tableau of :data:`mbdgen.methods.RK_TABLEAUS`
``"rkf45"``) gives two solutions from the same six stages; their difference
estimates the local error of the fourth-order one,

    err = ‖x⁵_{n+1} − x⁴_{n+1}‖,  weights atol_i + rtol_i max(|x_n,i|, |x⁵_{n+1,i}|)

(a weighted RMS norm, as :mod:`mbdgen.runtime.adaptive`).  The step is accepted when
err ≤ 1 and the fifth-order solution is kept (local extrapolation, as Dormand and
Prince advise, Hairer, Nørsett & Wanner, *Solving ODEs I*, §II.4), so the error per
step is well below the tolerance.  The next step is h · min(4, max(0.2, 0.9 err^{−1/5}))
(:data:`mbdgen.runtime.stepsize.RKF45`, the shared controller); a rejected step is
retried with the same factor (at most 0.9), a NaN with 0.25.

**Dense output.**  Outputs at the requested times come from the cubic Hermite
interpolant through (x_n, f_n) and (x_{n+1}, f_{n+1}) of the last accepted step, not
from steps forced onto the output times (Hairer, Nørsett & Wanner §II.6); f_{n+1} is
the first stage of the next step, so the interpolant costs no evaluation.  Its error
is O(h⁴) locally, one order below the steps: for a reference solution ask for tight
tolerances.

The loop shares the conventions of :func:`mbdgen.runtime.adaptive.vabm_chunk`: the
right side ``rhs(kern, n, m, t, x, p, ctrl, ws, f, aux, state)`` (which may project ``x``:
the accepted state is the projected one), one evaluation site, the workspace of
:func:`~mbdgen.runtime.adaptive.adaptive_workspace` (``phi`` holds the six stages,
``work`` the evaluation point, f, the error weights and the last step's x_n, f_n),
its ``fstate``/``istate`` slots and counters, the guards (``STEP_SIZE_COLLAPSE``,
``NONFINITE``) and ``REPARTITION`` at an output time being returned after the output
is written.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from mbdgen.methods import RKF45_B4, rk_arrays
from mbdgen.runtime.adaptive import (
    F_ERR,
    F_H,
    F_HFIRST,
    F_HMAX,
    F_HMIN,
    F_T,
    F_TPREV,
    I_JOUT,
    I_K,
    I_KUSED,
    I_NEVAL,
    I_NFAIL,
    I_NONFINITE,
    I_NREJECT,
    I_NSTEP,
    I_STARTED,
    R_DPK,
    R_FE,
    R_SCALE,
    R_XE,
    R_XPREV,
    _first_step,
    _write_output,
)
from mbdgen.runtime.refs import borrow
from mbdgen.runtime.status import NONFINITE, OK, REPARTITION, STEP_SIZE_COLLAPSE
from mbdgen.runtime.stepsize import RKF45, h_floor, ratio, retry_ratio

_A, _B5, _C = rk_arrays("rkf45")
#: Weights of the error estimate x⁵ − x⁴ (fifth- minus fourth-order solution).
_E = _B5 - np.array([float(v) for v in RKF45_B4])
_STAGES = 6
#: Order of the error estimate's leading term + 1 = 5: the exponent of the controller.
_EXPONENT = 0.2

_PH_INIT = 0  # f(x0, t0)
_PH_NEXT = 1  # nothing pending: write an output or begin an attempt
_PH_STAGE = 2  # a stage 1 … 5 of the current attempt
_PH_ACCEPT = 3  # f at the fifth-order solution: accept, and the next step's k1
_PH_OUTPUT = 4  # f and aux at an output point


@njit(cache=True)
def _hermite(t, fstate, istate, x, phi, work, out):
    """Cubic Hermite interpolant of the last accepted step at t (x0 before any)."""
    if istate[I_NSTEP] == 0:
        for i in range(x.shape[0]):
            out[i] = x[i]
        return
    t0 = fstate[F_TPREV]
    h = fstate[F_T] - t0
    s = (t - t0) / h
    h00 = (1.0 + 2.0 * s) * (1.0 - s) ** 2
    h10 = s * (1.0 - s) ** 2
    h01 = s * s * (3.0 - 2.0 * s)
    h11 = s * s * (s - 1.0)
    for i in range(x.shape[0]):
        out[i] = (
            h00 * work[R_XPREV, i] + h * h10 * work[R_DPK, i] + h01 * x[i] + h * h11 * phi[0, i]
        )


@njit(cache=True)
def rk_start(t, x, xe, fe, phi, tol, scale, fstate, istate):
    """The first evaluation of an embedded RK loop (rkf45, dop853) is done: take x0
    (the right side may have projected it) and f0 as the first stage, and choose the
    first step (``F_HFIRST``, or the starting-step heuristic).  NONFINITE or OK."""
    for i in range(x.shape[0]):
        x[i] = xe[i]
        if not (math.isfinite(x[i]) and math.isfinite(fe[i])):
            return NONFINITE
        phi[0, i] = fe[i]
    h0 = fstate[F_HFIRST]
    if h0 <= 0.0:
        h0, _ = _first_step(x, fe, tol, scale)
    fstate[F_H] = max(min(h0, fstate[F_HMAX]), h_floor(fstate[F_HMIN], t))
    istate[I_STARTED] = 1
    istate[I_NFAIL] = 0
    return OK


@njit(cache=True)
def rk_accepted(t, h, exponent, controller, order, fstate, istate):
    """Book an accepted step t → t + h whose estimate is ``fstate[F_ERR]``, and choose
    the next h with ``controller`` (no growth right after a rejection)."""
    fstate[F_TPREV] = t
    fstate[F_T] = t + h
    grow = ratio(fstate[F_ERR], exponent, controller)
    if istate[I_NFAIL] > 0:
        grow = min(grow, 1.0)
    fstate[F_H] = max(min(h * grow, fstate[F_HMAX]), h_floor(fstate[F_HMIN], t))
    istate[I_NSTEP] += 1
    istate[I_NFAIL] = 0
    istate[I_KUSED] = order


@njit(cache=True)
def rk_rejected(h, err, finite, exponent, controller, fstate, istate):
    """Book a rejected attempt of size h: retry with the controller's ratio, or with
    a quarter of h if it met a NaN or inf."""
    istate[I_NREJECT] += 1
    istate[I_NFAIL] += 1
    istate[I_NONFINITE] = 0 if (finite and math.isfinite(err)) else 1
    cut = 0.25 if istate[I_NONFINITE] else retry_ratio(err, exponent, controller)
    fstate[F_H] = h * cut


@njit(cache=True, inline="always")
def rkf45_chunk(
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
    """Integrate with RKF45 and step-size control until ``n_out`` more output times
    are written or ``max_steps`` attempts are made (arguments and return value as
    :func:`mbdgen.runtime.adaptive.vabm_chunk`; ``coef`` is unused)."""
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
    scale = work[R_SCALE]
    written = 0
    attempts = 0
    stage = 0
    h = fstate[F_H]
    t_eval = fstate[F_T]
    istate[I_K] = 5
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
                _hermite(t_out[j], fstate, istate, x, phi, work, xe)
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
                stage = 1
                phase = _PH_STAGE
        if phase == _PH_STAGE:
            for i in range(dim):
                acc = 0.0
                for s in range(stage):
                    acc += _A[stage, s] * phi[s, i]
                xe[i] = x[i] + h * acc
            t_eval = t + _C[stage] * h
        # E: the one evaluation site
        status = rhs(kern, n, m, t_eval, xe, p, ctrl, ws, fe, aux, phase != _PH_STAGE)
        istate[I_NEVAL] += 1
        if status != OK and not (status == REPARTITION and phase == _PH_OUTPUT):
            return status
        if phase == _PH_STAGE:
            for i in range(dim):
                phi[stage, i] = fe[i]
            stage += 1
            if stage == _STAGES:
                finite = True
                acc_err = 0.0
                for i in range(dim):
                    x5 = 0.0
                    e = 0.0
                    for s in range(_STAGES):
                        x5 += _B5[s] * phi[s, i]
                        e += _E[s] * phi[s, i]
                    x5 = x[i] + h * x5
                    xe[i] = x5
                    scale[i] = tol[1, i] + tol[0, i] * max(abs(x[i]), abs(x5))
                    r = h * e / scale[i]
                    acc_err += r * r
                    if not math.isfinite(x5):
                        finite = False
                err = math.sqrt(acc_err / dim)
                fstate[F_ERR] = err
                if finite and err <= 1.0:
                    t_eval = t + h
                    phase = _PH_ACCEPT
                else:
                    rk_rejected(h, err, finite, _EXPONENT, RKF45, fstate, istate)
                    phase = _PH_NEXT
        elif phase == _PH_ACCEPT:
            finite = True
            for i in range(dim):
                if not (math.isfinite(fe[i]) and math.isfinite(xe[i])):
                    finite = False
            if finite:
                for i in range(dim):
                    work[R_XPREV, i] = x[i]
                    work[R_DPK, i] = phi[0, i]
                    x[i] = xe[i]  # the right side may have projected it
                    phi[0, i] = fe[i]
                rk_accepted(t, h, _EXPONENT, RKF45, 5, fstate, istate)
            else:
                rk_rejected(h, math.inf, False, _EXPONENT, RKF45, fstate, istate)
            phase = _PH_NEXT
        elif phase == _PH_OUTPUT:
            _write_output(istate[I_JOUT], xe, fe, aux, out_x, out_f, out_aux, istate, True)
            written += 1
            phase = _PH_NEXT
            if status == REPARTITION:
                return status
        else:  # _PH_INIT: f(x0, t0) is the first stage; the first step from x0, f0
            if rk_start(t, x, xe, fe, phi, tol, scale, fstate, istate) != OK:
                return NONFINITE
            phase = _PH_NEXT
