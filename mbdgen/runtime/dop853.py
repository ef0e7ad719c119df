"""Dormand–Prince 8(5,3) with step-size control and dense output of order 7: the
reference method for smooth, non-stiff problems at tight tolerances.

Hairer, Nørsett & Wanner, *Solving ODEs I* (2nd ed., 1993), §II.10 ("DOP853"), and
Hairer's code DOP853 of the same name: an explicit Runge–Kutta method of order 8
with twelve stages (Prince & Dormand 1981's coefficients as Hairer improved them),
two embedded error estimates of orders 5 and 3, and a continuous extension of
order 7 that costs three more evaluations of f.  The tableau is the published one
(:data:`_A_ROWS` … :data:`_D_ROWS`); ``tests/test_dop853.py`` checks it against the
order conditions.

**Step.**  Stages K_1 … K_12 with K_1 = f(x_n) (the previous step's f(x_{n+1}): the
first evaluation of a step is saved, "FSAL"), x_{n+1} = x_n + h Σ b_j K_j
(row 13 of A, c = 1).  **Error** (Hairer's ``ERR``):

    e5 = Σ E5_j K_j,  e3 = Σ (b_j − b̂_j) K_j,
    ‖e5‖², ‖e3‖² with weights s_i = atol_i + rtol_i max(|x_n,i|, |x_{n+1,i}|),
    err = |h| ‖e5‖² / sqrt(dim (‖e5‖² + 0.01 ‖e3‖²)),

the fifth-order estimate, kept from overestimating by the third-order one where the
latter is small.  err ≤ 1 accepts the step, which keeps the order 8 solution (local
extrapolation).  **Control** (:data:`mbdgen.runtime.stepsize.DOP853`, the shared
controller): h_next = h · min(6, max(1/3, 0.9 err^(−1/8))), no growth right after a
rejection; a rejected step is retried with max(1/3, 0.9 err^(−1/8)) (below 0.9), a
NaN with 0.25.  Hairer's code also tests for stiffness; this one does not (a stiff
problem shows as many rejected steps: use radau5 or hht_adaptive).

**Dense output** (Hairer's ``CONTD8``): for an output time t = t_n + θh in the last
accepted step,

    x(t) = x_n + θ(F_1 + θ'(F_2 + θ(F_3 + θ'(F_4 + θ(F_5 + θ'(F_6 + θ F_7)))))),
    θ' = 1 − θ,  F_1 = Δ = x_{n+1} − x_n,  F_2 = h K_1 − Δ,
    F_3 = 2Δ − h (K_1 + K_13),  F_{4…7} = h Σ_j d_{4…7,j} K_j,

where K_13 = f(x_{n+1}) and K_14 … K_16 are three more stages (rows 14-16 of A).
They are evaluated only for a step that holds an output time, so a run whose steps
are longer than its output interval pays three evaluations per output step, and a
run with few outputs almost none.

The loop shares the conventions of :func:`mbdgen.runtime.adaptive.vabm_chunk` and
:func:`mbdgen.runtime.adaptive_rk.rkf45_chunk`: the right side ``rhs(kern, n, m, t,
x, p, ctrl, ws, f, aux, state)`` (which may project ``x``: the accepted state is the
projected one), one evaluation site, the workspace of
:func:`~mbdgen.runtime.adaptive.adaptive_workspace` with ``stages=STAGES`` rows in
``phi`` (the sixteen K_j), ``work`` holding the evaluation point, f, the error
weights, x_n and the dense output's F_2 … F_7, its ``fstate``/``istate`` slots and
counters, the guards (``STEP_SIZE_COLLAPSE``, ``NONFINITE``) and ``REPARTITION`` at
an output time being returned after the output is written.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from mbdgen.runtime.adaptive import (
    C_DT,
    F_ERR,
    F_H,
    F_HMIN,
    F_T,
    F_TPREV,
    I_JOUT,
    I_K,
    I_NEVAL,
    I_NONFINITE,
    I_NSTEP,
    I_NVALID,
    I_RAMP,
    I_STARTED,
    R_DPK,
    R_FE,
    R_SCALE,
    R_STAR,
    R_XE,
    R_XPREV,
    _write_output,
)
from mbdgen.runtime.adaptive_rk import rk_accepted, rk_rejected, rk_start
from mbdgen.runtime.refs import borrow
from mbdgen.runtime.status import NONFINITE, OK, REPARTITION, STEP_SIZE_COLLAPSE
from mbdgen.runtime.stepsize import DOP853, h_floor

#: Rows of ``phi``: the twelve stages, f(x_{n+1}) and the dense output's three.
STAGES = 16
#: Order of the method (of the accepted solution).
ORDER = 8
#: The controller's exponent: 1/(order of the estimate's leading term + 1).
_EXPONENT = 1.0 / 8.0
#: Row of ``phi`` that holds f(x_{n+1}) = K_13, the next step's K_1.
_NEW = 12

# RK-only slots of the shared workspace (the Adams loop's meanings do not apply)
I_FSAL = I_RAMP  # 1: phi[_NEW] holds f at the accepted state, to become K_1
I_DENSE = I_NVALID  # 1: the last step's F_2 … F_7 are formed (work rows R_F)
R_E3 = R_DPK  # scratch of the error estimate: e3 …
R_E5 = R_STAR  # … and e5 (free again once a step is decided)
R_F = R_STAR  # F_2 … F_7 of the dense output in rows R_F … R_F + 5

_PH_INIT = 0  # f(x0, t0)
_PH_NEXT = 1  # nothing pending: write an output or begin an attempt
_PH_STAGE = 2  # a stage 2 … 12 of the current attempt
_PH_ACCEPT = 3  # f at x_{n+1}: accept; K_13, the next step's K_1
_PH_DENSE = 4  # a stage 14 … 16 of the dense output
_PH_OUTPUT = 5  # f and aux at an output point

#: Nodes c_1 … c_16: twelve stages, c_13 = 1 for f(x_{n+1}), three for the dense output.
_C = np.array(
    [
        0.0,
        0.05260015195876773,
        0.0789002279381516,
        0.1183503419072274,
        0.2816496580927726,
        0.3333333333333333,
        0.25,
        0.3076923076923077,
        0.6512820512820513,
        0.6,
        0.8571428571428571,
        1.0,
        1.0,
        0.1,
        0.2,
        0.7777777777777778,
    ]
)

#: Rows of A as (stage, ((column, a), …)), the non-zero entries only (0-based:
#: stage 12 is x_{n+1}, whose row is b; 13-15 are the dense output's extra stages).
_A_ROWS = (
    (1, ((0, 0.05260015195876773),)),
    (2, ((0, 0.0197250569845379), (1, 0.0591751709536137))),
    (3, ((0, 0.02958758547680685), (2, 0.08876275643042054))),
    (4, ((0, 0.2413651341592667), (2, -0.8845494793282861), (3, 0.924834003261792))),
    (5, ((0, 0.037037037037037035), (3, 0.17082860872947386), (4, 0.12546768756682242))),
    (6, ((0, 0.037109375), (3, 0.17025221101954405), (4, 0.06021653898045596), (5, -0.017578125))),
    (
        7,
        (
            (0, 0.03709200011850479),
            (3, 0.17038392571223998),
            (4, 0.10726203044637328),
            (5, -0.015319437748624402),
            (6, 0.008273789163814023),
        ),
    ),
    (
        8,
        (
            (0, 0.6241109587160757),
            (3, -3.3608926294469414),
            (4, -0.868219346841726),
            (5, 27.59209969944671),
            (6, 20.154067550477894),
            (7, -43.48988418106996),
        ),
    ),
    (
        9,
        (
            (0, 0.47766253643826434),
            (3, -2.4881146199716677),
            (4, -0.590290826836843),
            (5, 21.230051448181193),
            (6, 15.279233632882423),
            (7, -33.28821096898486),
            (8, -0.020331201708508627),
        ),
    ),
    (
        10,
        (
            (0, -0.9371424300859873),
            (3, 5.186372428844064),
            (4, 1.0914373489967295),
            (5, -8.149787010746927),
            (6, -18.52006565999696),
            (7, 22.739487099350505),
            (8, 2.4936055526796523),
            (9, -3.0467644718982196),
        ),
    ),
    (
        11,
        (
            (0, 2.273310147516538),
            (3, -10.53449546673725),
            (4, -2.0008720582248625),
            (5, -17.9589318631188),
            (6, 27.94888452941996),
            (7, -2.8589982771350235),
            (8, -8.87285693353063),
            (9, 12.360567175794303),
            (10, 0.6433927460157636),
        ),
    ),
    (
        12,
        (
            (0, 0.054293734116568765),
            (5, 4.450312892752409),
            (6, 1.8915178993145003),
            (7, -5.801203960010585),
            (8, 0.3111643669578199),
            (9, -0.1521609496625161),
            (10, 0.20136540080403034),
            (11, 0.04471061572777259),
        ),
    ),
    (
        13,
        (
            (0, 0.056167502283047954),
            (6, 0.25350021021662483),
            (7, -0.2462390374708025),
            (8, -0.12419142326381637),
            (9, 0.15329179827876568),
            (10, 0.00820105229563469),
            (11, 0.007567897660545699),
            (12, -0.008298),
        ),
    ),
    (
        14,
        (
            (0, 0.03183464816350214),
            (5, 0.028300909672366776),
            (6, 0.053541988307438566),
            (7, -0.05492374857139099),
            (10, -0.00010834732869724932),
            (11, 0.0003825710908356584),
            (12, -0.00034046500868740456),
            (13, 0.1413124436746325),
        ),
    ),
    (
        15,
        (
            (0, -0.42889630158379194),
            (5, -4.697621415361164),
            (6, 7.683421196062599),
            (7, 4.06898981839711),
            (8, 0.3567271874552811),
            (12, -0.0013990241651590145),
            (13, 2.9475147891527724),
            (14, -9.15095847217987),
        ),
    ),
)
#: The third-order weights b̂ whose difference from b gives the 3rd-order estimate.
_BHH = ((0, 0.2440944881889764), (8, 0.7338466882816118), (11, 0.022058823529411766))
#: Weights of the fifth-order error estimate.
_E5_ROWS = (
    (0, 0.01312004499419488),
    (5, -1.2251564463762044),
    (6, -0.4957589496572502),
    (7, 1.6643771824549864),
    (8, -0.35032884874997366),
    (9, 0.3341791187130175),
    (10, 0.08192320648511571),
    (11, -0.022355307863886294),
)
#: The dense output's d_{4…7,j} (Hairer's D4-D7), j over the 16 stages.
_D_ROWS = (
    (
        (0, -8.428938276109013),
        (5, 0.5667149535193777),
        (6, -3.0689499459498917),
        (7, 2.38466765651207),
        (8, 2.117034582445028),
        (9, -0.871391583777973),
        (10, 2.2404374302607883),
        (11, 0.6315787787694688),
        (12, -0.08899033645133331),
        (13, 18.148505520854727),
        (14, -9.194632392478356),
        (15, -4.436036387594894),
    ),
    (
        (0, 10.427508642579134),
        (5, 242.28349177525817),
        (6, 165.20045171727028),
        (7, -374.5467547226902),
        (8, -22.113666853125306),
        (9, 7.733432668472264),
        (10, -30.674084731089398),
        (11, -9.332130526430229),
        (12, 15.697238121770845),
        (13, -31.139403219565178),
        (14, -9.35292435884448),
        (15, 35.81684148639408),
    ),
    (
        (0, 19.985053242002433),
        (5, -387.0373087493518),
        (6, -189.17813819516758),
        (7, 527.8081592054236),
        (8, -11.57390253995963),
        (9, 6.8812326946963),
        (10, -1.0006050966910838),
        (11, 0.7777137798053443),
        (12, -2.778205752353508),
        (13, -60.19669523126412),
        (14, 84.32040550667716),
        (15, 11.99229113618279),
    ),
    (
        (0, -25.69393346270375),
        (5, -154.18974869023643),
        (6, -231.5293791760455),
        (7, 357.6391179106141),
        (8, 93.40532418362432),
        (9, -37.45832313645163),
        (10, 104.0996495089623),
        (11, 29.8402934266605),
        (12, -43.53345659001114),
        (13, 96.32455395918828),
        (14, -39.17726167561544),
        (15, -149.72683625798564),
    ),
)


def _dense_table(rows: tuple, shape: tuple[int, ...]) -> np.ndarray:
    """The sparse rows of the published table as a dense array."""
    out = np.zeros(shape)
    for r, entries in rows:
        for j, v in entries:
            out[r, j] = v
    return out


_A = _dense_table(_A_ROWS, (STAGES, STAGES))
_B = _A[_NEW, :_NEW].copy()
_E5 = np.zeros(_NEW)
for _j, _v in _E5_ROWS:
    _E5[_j] = _v
_E3 = _B.copy()  # b − b̂
for _j, _v in _BHH:
    _E3[_j] -= _v
_D = _dense_table(tuple(enumerate(_D_ROWS)), (4, STAGES))


@njit(cache=True)
def _stage_point(s, h, base, phi, xe):
    """xe ← base + h Σ_{j<s} a_sj K_j (row s of A; j ascending for every component,
    rows outside: vectorised; a_s0 ≠ 0 in every row)."""
    dim = xe.shape[0]
    a0 = _A[s, 0]
    row = phi[0]
    for i in range(dim):
        xe[i] = a0 * row[i]
    for j in range(1, s):
        a = _A[s, j]
        if a != 0.0:
            row = phi[j]
            for i in range(dim):
                xe[i] += a * row[i]
    for i in range(dim):
        xe[i] = base[i] + h * xe[i]


@njit(cache=True)
def _error(h, x, xe, phi, tol, work):
    """err of the attempt x_n → xe (module docstring), and whether xe is finite;
    the error weights are left in R_SCALE."""
    dim = x.shape[0]
    e3 = work[R_E3]
    e5 = work[R_E5]
    for i in range(dim):
        e3[i] = _E3[0] * phi[0, i]
        e5[i] = _E5[0] * phi[0, i]
    for j in range(1, _NEW):
        a3 = _E3[j]
        a5 = _E5[j]
        row = phi[j]
        if a3 != 0.0:
            for i in range(dim):
                e3[i] += a3 * row[i]
        if a5 != 0.0:
            for i in range(dim):
                e5[i] += a5 * row[i]
    scale = work[R_SCALE]
    s3 = 0.0
    s5 = 0.0
    finite = True
    for i in range(dim):
        sk = tol[1, i] + tol[0, i] * max(abs(x[i]), abs(xe[i]))
        scale[i] = sk
        r = e3[i] / sk
        s3 += r * r
        r = e5[i] / sk
        s5 += r * r
        if not math.isfinite(xe[i]):
            finite = False
    deno = s5 + 0.01 * s3
    if not deno > 0.0:  # 0, or NaN (caught by the caller's finiteness test)
        deno = 1.0
    return abs(h) * s5 / math.sqrt(dim * deno), finite


@njit(cache=True)
def _dense_rows(h, x, phi, work):
    """F_2 … F_7 of the last accepted step into rows R_F … R_F + 5 (x = x_{n+1},
    phi[0] = K_1, phi[_NEW] = K_13, phi[13:16] the extra stages)."""
    dim = x.shape[0]
    xprev = work[R_XPREV]
    k1 = phi[0]
    k13 = phi[_NEW]
    f2 = work[R_F]
    f3 = work[R_F + 1]
    for i in range(dim):
        delta = x[i] - xprev[i]
        f2[i] = h * k1[i] - delta
        f3[i] = 2.0 * delta - h * (k1[i] + k13[i])
    for r in range(4):
        out = work[R_F + 2 + r]
        d0 = _D[r, 0]
        for i in range(dim):
            out[i] = d0 * k1[i]
        for j in range(1, STAGES):
            d = _D[r, j]
            if d != 0.0:
                row = phi[j]
                for i in range(dim):
                    out[i] += d * row[i]
        for i in range(dim):
            out[i] *= h


@njit(cache=True)
def _dense(t, fstate, istate, x, coef, work, out):
    """x(t) in the last accepted step from its F rows (module docstring); x0 before
    any step."""
    if istate[I_NSTEP] == 0:
        for i in range(x.shape[0]):
            out[i] = x[i]
        return
    th = (t - fstate[F_TPREV]) / coef[C_DT, 0]
    th1 = 1.0 - th
    xprev = work[R_XPREV]
    f2 = work[R_F]
    f3 = work[R_F + 1]
    f4 = work[R_F + 2]
    f5 = work[R_F + 3]
    f6 = work[R_F + 4]
    f7 = work[R_F + 5]
    for i in range(x.shape[0]):
        delta = x[i] - xprev[i]
        inner = f6[i] + th * f7[i]
        inner = f5[i] + th1 * inner
        inner = f4[i] + th * inner
        inner = f3[i] + th1 * inner
        inner = f2[i] + th * inner
        inner = delta + th1 * inner
        out[i] = xprev[i] + th * inner


@njit(cache=True, inline="always")
def dop853_chunk(
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
    """Integrate with DOP853 and step-size control until ``n_out`` more output times
    are written or ``max_steps`` attempts are made (arguments and return value as
    :func:`mbdgen.runtime.adaptive.vabm_chunk`; ``phi`` has :data:`STAGES` rows and
    ``coef[C_DT, 0]`` keeps the last accepted step size)."""
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
    stage = 0
    repartition = False
    h = fstate[F_H]
    t_eval = fstate[F_T]
    istate[I_K] = ORDER
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
                if istate[I_NSTEP] > 0 and istate[I_DENSE] == 0:
                    # the continuous extension's three stages, once per output step
                    h = coef[C_DT, 0]
                    stage = _NEW + 1
                    _stage_point(stage, h, work[R_XPREV], phi, xe)
                    t_eval = fstate[F_TPREV] + _C[stage] * h
                    phase = _PH_DENSE
                else:
                    _dense(t_out[j], fstate, istate, x, coef, work, xe)
                    if not evaluate_out:
                        _write_output(j, xe, fe, aux, out_x, out_f, out_aux, istate, False)
                        written += 1
                        if repartition:
                            return REPARTITION
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
                if istate[I_FSAL]:  # f(x_{n+1}) becomes K_1; the last step's stages go
                    for i in range(dim):
                        phi[0, i] = phi[_NEW, i]
                    istate[I_FSAL] = 0
                istate[I_DENSE] = 0
                stage = 1
                _stage_point(stage, h, x, phi, xe)
                t_eval = t + _C[stage] * h
                phase = _PH_STAGE
        # E: the one evaluation site
        state = phase != _PH_STAGE and phase != _PH_DENSE
        status = rhs(kern, n, m, t_eval, xe, p, ctrl, ws, fe, aux, state)
        istate[I_NEVAL] += 1
        if status == REPARTITION and phase == _PH_DENSE:
            repartition = True  # valid values: returned once the output is written
        elif status != OK and not (status == REPARTITION and phase == _PH_OUTPUT):
            return status
        if phase == _PH_STAGE:
            for i in range(dim):
                phi[stage, i] = fe[i]
            stage += 1
            if stage < _NEW:
                _stage_point(stage, h, x, phi, xe)
                t_eval = t + _C[stage] * h
            else:
                _stage_point(_NEW, h, x, phi, xe)  # x_{n+1}: row 13 of A is b
                err, finite = _error(h, x, xe, phi, tol, work)
                fstate[F_ERR] = err
                if finite and err <= 1.0:
                    t_eval = t + h
                    phase = _PH_ACCEPT
                else:
                    rk_rejected(h, err, finite, _EXPONENT, DOP853, fstate, istate)
                    phase = _PH_NEXT
        elif phase == _PH_ACCEPT:
            finite = True
            for i in range(dim):
                if not (math.isfinite(fe[i]) and math.isfinite(xe[i])):
                    finite = False
            if finite:
                for i in range(dim):
                    work[R_XPREV, i] = x[i]
                    x[i] = xe[i]  # the right side may have projected it
                    phi[_NEW, i] = fe[i]
                istate[I_FSAL] = 1
                istate[I_DENSE] = 0
                coef[C_DT, 0] = h
                rk_accepted(t, h, _EXPONENT, DOP853, ORDER, fstate, istate)
            else:
                rk_rejected(h, math.inf, False, _EXPONENT, DOP853, fstate, istate)
            phase = _PH_NEXT
        elif phase == _PH_DENSE:
            for i in range(dim):
                phi[stage, i] = fe[i]
            stage += 1
            if stage < STAGES:
                _stage_point(stage, h, work[R_XPREV], phi, xe)
                t_eval = fstate[F_TPREV] + _C[stage] * h
            else:
                _dense_rows(h, x, phi, work)
                istate[I_DENSE] = 1
                phase = _PH_NEXT
        elif phase == _PH_OUTPUT:
            _write_output(istate[I_JOUT], xe, fe, aux, out_x, out_f, out_aux, istate, True)
            written += 1
            phase = _PH_NEXT
            if status == REPARTITION or repartition:
                return REPARTITION
        else:  # _PH_INIT: f(x0, t0) is the first stage; the first step from x0, f0
            istate[I_FSAL] = 0
            if rk_start(t, x, xe, fe, phi, tol, work[R_SCALE], fstate, istate) != OK:
                return NONFINITE
            phase = _PH_NEXT
