"""The index-3 Newton matrix on the compile-time sparse patterns (Negrut et al. 2007,
Eq. 12), for HHT-α and generalized-α (:func:`mbdgen.runtime.hht.index3_chunk`).

The dense loop assembles the (n + m + nd)² iteration matrix and factors it by LU with
partial pivoting.  Here it is the saddle-point matrix of :mod:`mbdgen.runtime.sparse`,

    K = [[H, B], [A, 0]],   unknowns [q̈; Ẋ | λ]   (coordinates first, then multipliers)

    H = [[M̂,                       −Q_X ρ′h   ],    M̂ = M/(1 + α) + [(M q̈)_q/(1 + α)
         [−(f_q βh² + f_q̇ γh),    I − f_X ρ′h]]          + (Φ_qᵀλ)_q − Q_q] βh² − Q_q̇ γh
    A = [Φ_q, 0],   B = Aᵀ

(Eq. 14 for M̂, the states' rows and columns of :func:`mbdgen.runtime.hht.state_matrix`
folded into H).  With implicit user states (the module's ``IMPLICIT_STATES``) the
states' rows of H are [d_q̈ + d_q βh² + d_q̇ γh, d_Ẋ + d_X ρ′h] and B gains d_λ in
them, B = [Φ_qᵀ; D], D = d_λ (:func:`mbdgen.runtime.hht.implicit_state_blocks`):
entries of B beyond Aᵀ, planned into the factor's structure (``b_extra`` of
:func:`mbdgen.runtime.sparse.kkt_plan`) and added after the assembly.

A and B carry no βh²: the position constraints are scaled by 1/(βh²) in the residual
(Eq. 13), so ∂e2/∂q̈ = Φ_q βh² / (βh²) = Φ_q, as in the dense matrix.
A removed redundant row (``active[i]`` = 0) is λ_i = 0, as in the dense path.

- **Plan once per module, in Python** (:func:`newton_plan`, cached on the module by
  :func:`plan_for`): H's pattern is the union of the patterns of M, (M q̈)_q,
  (Φ_qᵀλ)_q, Q_q, Q_q̇ and of the states' blocks Q_X, f_q, f_q̇, f_X (and their
  diagonal); each block gets a scatter map into H's values; the ordering and symbolic
  factorization are :func:`mbdgen.runtime.sparse.kkt_plan`'s on that pattern.
- **Per matrix evaluation** (:func:`sparse_newton`): the ``*_values`` kernels (bound in
  the module's entry point in place of the dense ones) write the blocks, the maps
  scatter them into H, and ``kkt_assemble`` builds K; ``kkt_factor`` factors it; the
  modified-Newton logic of the loop decides when (unchanged).  The loop finds these
  ``sparse_*`` operations by the workspace's type
  (:func:`mbdgen.runtime.hht.register_linear_algebra`).  Φ_q's
  values at assembly are kept (``ws.bval``): the row operation that makes an Euler
  parameter block definite (``kkt_rhs``) must use the same B as the factorization,
  while Φ_q itself is re-evaluated at every iterate.
- **Everything else** of the loop that read a dense M or Φ_q (start-up, residual e1 of
  Eq. 13, (Φ_qᵀλ − Q)_n, the output's Φ̇, the scale of λ's round-off floor) works on the
  values: no (n + m)² array is allocated, nothing is allocated per step.

The start-up (Haug 1989, Eq. 7.2.1) factors the same pattern with H = M and the
states' diagonal 1 (their rows then give Ẋ = 0, which the loop does not read).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import njit

from mbdgen.runtime import hht
from mbdgen.runtime.linalg import row_weights
from mbdgen.runtime.sparse import (
    KktPlan,
    kkt_assemble,
    kkt_factor,
    kkt_plan,
    kkt_position,
    kkt_rhs,
    kkt_solve,
)


class NewtonPlan(NamedTuple):
    """H's pattern (coordinates [q̈; Ẋ], n + nd of them), the maps of each generated
    block's values into H's values, and the KKT plan of [[H, Aᵀ], [A, 0]], A = Φ_q."""

    kkt: KktPlan
    nh: int  # n + nd
    h_rows: np.ndarray
    h_cols: np.ndarray
    mass_map: np.ndarray  # entry e of M's values → position in H's values
    maq_map: np.ndarray
    plq_map: np.ndarray
    fq_map: np.ndarray
    fqd_map: np.ndarray
    qx_map: np.ndarray  # Q_X (n × nd): columns n + j
    fxq_map: np.ndarray  # f_q (nd × n): rows n + i
    fxqd_map: np.ndarray
    fxx_map: np.ndarray  # f_X (nd × nd)
    # implicit states (empty otherwise): the residual's partials into H's values ...
    dqdd_map: np.ndarray  # d_q̈ (nd × n): rows n + i
    dq_map: np.ndarray  # d_q
    dqd_map: np.ndarray  # d_q̇
    dxd_map: np.ndarray  # d_Ẋ (nd × nd)
    dx_map: np.ndarray  # d_X
    # ... and d_λ (nd × m) into K's values: positions and the multiplier of each entry
    dlam_pos: np.ndarray
    dlam_cols: np.ndarray
    dxd_rows: np.ndarray  # d_Ẋ's pattern (for the start's dense d_Ẋ)
    dxd_cols: np.ndarray
    sdiag: np.ndarray  # positions of the states' diagonal in H's values
    mass_rows: np.ndarray
    mass_cols: np.ndarray
    mass_diag: np.ndarray  # entries of M's values on its diagonal
    a_rows: np.ndarray  # Φ_q's pattern
    a_cols: np.ndarray


def _ints(a: Any) -> np.ndarray:
    return np.asarray(a, dtype=np.int64).reshape(-1)


def newton_plan(
    n: int, m: int, nd: int, patterns: dict[str, tuple[Any, Any]], implicit: bool = False
) -> NewtonPlan:
    """Plan the sparse Newton matrix for the static patterns of a module.

    ``patterns`` maps each block ("MASS", "MASS_A_Q", "PHI_Q_LAM_Q", "FORCE_Q",
    "FORCE_QD", "PHI_Q", "FORCE_X", "STATE_RATE_Q", "STATE_RATE_QD", "STATE_RATE_X";
    with ``implicit`` the "STATE_RESIDUAL_*" blocks in place of "STATE_RATE_*") to its
    (rows, cols), as the generated module exports them (``<BLOCK>_ROWS/COLS``).
    Deterministic: the same patterns give the same plan.
    """
    nh = n + nd
    where: dict[tuple[int, int], int] = {}

    def index_of(i: int, j: int) -> int:
        return where.setdefault((i, j), len(where))

    for i in range(nh):
        index_of(i, i)  # the diagonal is always in the pattern

    def block(name: str, r0: int, c0: int) -> np.ndarray:
        rows, cols = patterns[name]
        return np.array(
            [
                index_of(r0 + int(i), c0 + int(j))
                for i, j in zip(_ints(rows), _ints(cols), strict=True)
            ],
            dtype=np.int64,
        )

    mass_map = block("MASS", 0, 0)
    maq_map = block("MASS_A_Q", 0, 0)
    plq_map = block("PHI_Q_LAM_Q", 0, 0)
    fq_map = block("FORCE_Q", 0, 0)
    fqd_map = block("FORCE_QD", 0, 0)
    empty = np.zeros(0, dtype=np.int64)
    qx_map = fxq_map = fxqd_map = fxx_map = empty
    dqdd_map = dq_map = dqd_map = dxd_map = dx_map = dlam_cols = dxd_rows = dxd_cols = empty
    d_rows = empty
    if nd > 0:
        qx_map = block("FORCE_X", 0, n)
        if implicit:
            dqdd_map = block("STATE_RESIDUAL_QDD", n, 0)
            dq_map = block("STATE_RESIDUAL_Q", n, 0)
            dqd_map = block("STATE_RESIDUAL_QD", n, 0)
            dxd_map = block("STATE_RESIDUAL_XD", n, n)
            dxd_rows, dxd_cols = (_ints(v) for v in patterns["STATE_RESIDUAL_XD"])
            dx_map = block("STATE_RESIDUAL_X", n, n)
            d_rows, dlam_cols = (_ints(v) for v in patterns["STATE_RESIDUAL_LAM"])
            d_rows = d_rows + n  # the states' rows of K
        else:
            fxq_map = block("STATE_RATE_Q", n, 0)
            fxqd_map = block("STATE_RATE_QD", n, 0)
            fxx_map = block("STATE_RATE_X", n, n)
    sdiag = np.array([where[(n + i, n + i)] for i in range(nd)], dtype=np.int64)
    keys = sorted(where, key=where.__getitem__)
    h_rows = np.array([k[0] for k in keys], dtype=np.int64)
    h_cols = np.array([k[1] for k in keys], dtype=np.int64)
    a_rows, a_cols = (_ints(v) for v in patterns["PHI_Q"])
    mass_rows, mass_cols = (_ints(v) for v in patterns["MASS"])
    kkt = kkt_plan(
        nh, m, h_rows, h_cols, a_rows, a_cols, (d_rows, dlam_cols) if d_rows.size else None
    )
    dlam_pos = np.array(
        [kkt_position(kkt, int(r), nh + int(j)) for r, j in zip(d_rows, dlam_cols, strict=True)],
        dtype=np.int64,
    )
    return NewtonPlan(
        kkt=kkt,
        nh=nh,
        h_rows=h_rows,
        h_cols=h_cols,
        mass_map=mass_map,
        maq_map=maq_map,
        plq_map=plq_map,
        fq_map=fq_map,
        fqd_map=fqd_map,
        qx_map=qx_map,
        fxq_map=fxq_map,
        fxqd_map=fxqd_map,
        fxx_map=fxx_map,
        dqdd_map=dqdd_map,
        dq_map=dq_map,
        dqd_map=dqd_map,
        dxd_map=dxd_map,
        dx_map=dx_map,
        dlam_pos=dlam_pos,
        dlam_cols=dlam_cols,
        dxd_rows=dxd_rows,
        dxd_cols=dxd_cols,
        sdiag=sdiag,
        mass_rows=mass_rows,
        mass_cols=mass_cols,
        mass_diag=np.flatnonzero(mass_rows == mass_cols).astype(np.int64),
        a_rows=a_rows,
        a_cols=a_cols,
    )


#: The blocks of the Newton matrix, by the names of the module's pattern constants.
BLOCKS = (
    "MASS", "MASS_A_Q", "PHI_Q_LAM_Q", "FORCE_Q", "FORCE_QD", "PHI_Q", "FORCE_X",
    "STATE_RATE_Q", "STATE_RATE_QD", "STATE_RATE_X",
)  # fmt: skip
#: The blocks of implicit user states (in place of the STATE_RATE ones).
RESIDUAL_BLOCKS = (
    "STATE_RESIDUAL_QDD", "STATE_RESIDUAL_Q", "STATE_RESIDUAL_QD", "STATE_RESIDUAL_LAM",
    "STATE_RESIDUAL_XD", "STATE_RESIDUAL_X",
)  # fmt: skip


def plan_for(module: Any) -> NewtonPlan:
    """The module's sparse Newton plan, computed once per module object."""
    plan = getattr(module, "_mbdgen_newton_plan", None)
    if plan is None:
        nd = int(getattr(module, "N_STATES", 0))
        implicit = bool(getattr(module, "IMPLICIT_STATES", False))
        patterns = {
            b: (getattr(module, f"{b}_ROWS"), getattr(module, f"{b}_COLS"))
            for b in BLOCKS + (RESIDUAL_BLOCKS if implicit else ())
            if nd > 0 or not b.startswith(("STATE_RATE", "FORCE_X"))
        }
        plan = newton_plan(module.N_COORDINATES, module.N_CONSTRAINTS, nd, patterns, implicit)
        module._mbdgen_newton_plan = plan
    return plan


class Workspace(NamedTuple):
    """Preallocated arrays of :func:`mbdgen.runtime.hht.index3_chunk` on the sparse path: those of
    :class:`mbdgen.runtime.hht.Workspace` that the loop reads (M, Φ_q and the Jacobian
    blocks as values on their patterns, M, Q, Φ, Φ_q, Φ_t, γ first), then the plan and
    the factor's arrays in place of the dense ``A``, ``piv``."""

    mass: np.ndarray  # M's values (MASS_ROWS/COLS)
    force: np.ndarray
    phi: np.ndarray
    phi_q: np.ndarray  # Φ_q's values (PHI_Q_ROWS/COLS)
    phi_t: np.ndarray
    gam: np.ndarray
    b: np.ndarray  # right side, then the Newton correction, in the loop's order [q̈; λ; Ẋ]
    maq: np.ndarray
    plq: np.ndarray
    fq: np.ndarray
    fqd: np.ndarray
    r_prev: np.ndarray
    ma_prev: np.ndarray
    va: np.ndarray
    q1: np.ndarray
    qd1: np.ndarray
    qdd1: np.ndarray
    lam1: np.ndarray
    hist: np.ndarray
    hist_t: np.ndarray
    a: np.ndarray
    a1: np.ndarray
    x_prev: np.ndarray
    y_max: np.ndarray
    weight: np.ndarray
    pw: np.ndarray
    fstate: np.ndarray
    t_out: np.ndarray
    p_work: np.ndarray
    x1: np.ndarray
    xd1: np.ndarray
    xb: np.ndarray
    xb1: np.ndarray
    rate: np.ndarray
    fxq: np.ndarray
    fxqd: np.ndarray
    fxx: np.ndarray
    qx: np.ndarray
    dqdd: np.ndarray  # implicit states: the residual's partials' values
    dq: np.ndarray
    dqd: np.ndarray
    dlam: np.ndarray
    dxd: np.ndarray
    dx: np.ndarray
    xjac: np.ndarray  # d_Ẋ at the start (dense, nd × nd), then its LU factors
    xpiv: np.ndarray
    active: np.ndarray
    plan: NewtonPlan
    hval: np.ndarray  # H's values
    bval: np.ndarray  # Φ_q's values at the latest assembly (B and A of K)
    val: np.ndarray  # K, then its factors
    wrow: np.ndarray  # weights of the body-local rows (kkt_assemble)
    rk: np.ndarray  # right side in K's order [q̈; Ẋ; λ]
    work: np.ndarray
    phid: np.ndarray  # Φ_q q̇ + Φ_t of an output row


def workspace(
    plan: NewtonPlan,
    n: int,
    m: int,
    t_out: np.ndarray | None = None,
    nd: int = 0,
    n_params: int = 0,
    active: np.ndarray | None = None,
    implicit: bool = False,
) -> Workspace:
    """The sparse workspace of :func:`mbdgen.runtime.hht.index3_chunk`, arguments as
    :func:`mbdgen.runtime.hht.workspace` (no array of n² or more entries)."""
    ni = nd if implicit else 0
    weights = row_weights(m, active)
    kkt = plan.kkt
    N = kkt.size

    def values(mapping: np.ndarray) -> np.ndarray:
        return np.zeros(mapping.shape[0])

    return Workspace(
        mass=values(plan.mass_map),
        force=np.zeros(n),
        phi=np.zeros(m),
        phi_q=np.zeros(plan.a_rows.shape[0]),
        phi_t=np.zeros(m),
        gam=np.zeros(m),
        b=np.zeros(N),
        maq=values(plan.maq_map),
        plq=values(plan.plq_map),
        fq=values(plan.fq_map),
        fqd=values(plan.fqd_map),
        r_prev=np.zeros(n),
        ma_prev=np.zeros(n),
        va=np.zeros(n),
        q1=np.zeros(n),
        qd1=np.zeros(n),
        qdd1=np.zeros(n),
        lam1=np.zeros(m),
        hist=np.zeros((hht.HISTORY, N)),
        hist_t=np.zeros(hht.HISTORY),
        a=np.zeros(n),
        a1=np.zeros(n),
        x_prev=np.zeros(hht.state_width(n, m, nd)),
        y_max=np.zeros(n + nd),
        weight=np.ones(n + nd),
        pw=np.zeros(hht.HISTORY),
        fstate=np.zeros(hht.F_SIZE),
        t_out=np.zeros(0) if t_out is None else np.asarray(t_out, dtype=np.float64),
        p_work=np.zeros(n_params + nd if nd else 0),
        x1=np.zeros(nd),
        xd1=np.zeros(nd),
        xb=np.zeros(nd),
        xb1=np.zeros(nd),
        rate=np.zeros(nd),
        fxq=values(plan.fxq_map),
        fxqd=values(plan.fxqd_map),
        fxx=values(plan.fxx_map),
        qx=values(plan.qx_map),
        dqdd=values(plan.dqdd_map),
        dq=values(plan.dq_map),
        dqd=values(plan.dqd_map),
        dlam=values(plan.dlam_pos),
        dxd=values(plan.dxd_map),
        dx=values(plan.dx_map),
        xjac=np.zeros((ni, ni)),
        xpiv=np.zeros(ni, dtype=np.int64),
        active=weights,
        plan=plan,
        hval=np.zeros(plan.h_rows.shape[0]),
        bval=np.zeros(plan.a_rows.shape[0]),
        val=np.zeros(kkt.values_size),
        wrow=np.zeros(max(kkt.aug_rows.shape[0], 1)),
        rk=np.zeros(N),
        work=np.zeros(N),
        phid=np.zeros(m),
    )


def module_workspace(
    module: Any,
    t_out: np.ndarray | None = None,
    n_params: int = 0,
    active: np.ndarray | None = None,
) -> Workspace:
    """:func:`workspace` for a generated module (its plan from :func:`plan_for`)."""
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    nd = int(getattr(module, "N_STATES", 0))
    implicit = bool(getattr(module, "IMPLICIT_STATES", False))
    return workspace(
        plan_for(module), n, m, t_out, nd=nd, n_params=n_params, active=active, implicit=implicit
    )


# --- the linear algebra of the index-3 loop on the sparse patterns --------------------


@njit(cache=True)
def sparse_start(n, m, nd, ws):
    """K with H = M (states' diagonal 1) and the right side [Q; γ] (Haug 1989, Eq.
    7.2.1) into ``ws.val``, ``ws.b``."""
    plan = ws.plan
    h = ws.hval
    h[:] = 0.0
    for e in range(plan.mass_map.shape[0]):
        h[plan.mass_map[e]] += ws.mass[e]
    for i in range(nd):
        h[plan.sdiag[i]] += 1.0
    _assemble(ws)
    for i in range(n):
        ws.b[i] = ws.force[i]
    for i in range(m):
        ws.b[n + i] = ws.active[i] * ws.gam[i]
    for i in range(nd):
        ws.b[n + m + i] = 0.0


@njit(cache=True)
def _assemble(ws):
    """K from ``ws.hval`` and Φ_q (kept in ``ws.bval`` for the right sides)."""
    for e in range(ws.bval.shape[0]):
        ws.bval[e] = ws.phi_q[e]
    kkt_assemble(ws.plan.kkt, ws.hval, ws.bval, ws.bval, ws.active, ws.val, ws.wrow)


@njit(cache=True)
def _scatter_h(n, m, nd, implicit, alpha, bh2, gh, gx, ws):
    """H's values from M and the blocks (Eq. 14; the states' blocks of
    :func:`mbdgen.runtime.hht.state_matrix` or, ``implicit``, of
    :func:`mbdgen.runtime.hht.implicit_state_blocks`)."""
    plan = ws.plan
    h = ws.hval
    c = 1.0 / (1.0 + alpha)
    h[:] = 0.0
    for e in range(plan.mass_map.shape[0]):
        h[plan.mass_map[e]] += c * ws.mass[e]
    for e in range(plan.maq_map.shape[0]):
        h[plan.maq_map[e]] += c * ws.maq[e] * bh2
    for e in range(plan.plq_map.shape[0]):
        h[plan.plq_map[e]] += ws.plq[e] * bh2
    for e in range(plan.fq_map.shape[0]):
        h[plan.fq_map[e]] -= ws.fq[e] * bh2
    for e in range(plan.fqd_map.shape[0]):
        h[plan.fqd_map[e]] -= ws.fqd[e] * gh
    if nd > 0 and implicit:
        for e in range(plan.qx_map.shape[0]):
            h[plan.qx_map[e]] -= gx * ws.qx[e]
        for e in range(plan.dqdd_map.shape[0]):
            h[plan.dqdd_map[e]] += c * ws.dqdd[e]  # d reads HHT's ã: ∂ã/∂q̈ = 1/(1 + α)
        for e in range(plan.dq_map.shape[0]):
            h[plan.dq_map[e]] += bh2 * ws.dq[e]
        for e in range(plan.dqd_map.shape[0]):
            h[plan.dqd_map[e]] += gh * ws.dqd[e]
        for e in range(plan.dxd_map.shape[0]):
            h[plan.dxd_map[e]] += ws.dxd[e]
        for e in range(plan.dx_map.shape[0]):
            h[plan.dx_map[e]] += gx * ws.dx[e]
    elif nd > 0:
        for e in range(plan.qx_map.shape[0]):
            h[plan.qx_map[e]] -= gx * ws.qx[e]
        for e in range(plan.fxq_map.shape[0]):
            h[plan.fxq_map[e]] -= bh2 * ws.fxq[e]
        for e in range(plan.fxqd_map.shape[0]):
            h[plan.fxqd_map[e]] -= gh * ws.fxqd[e]
        for e in range(plan.fxx_map.shape[0]):
            h[plan.fxx_map[e]] -= gx * ws.fxx[e]
        for i in range(nd):
            h[plan.sdiag[i]] += 1.0


@njit(cache=True)
def sparse_newton(n, m, nd, implicit, alpha, bh2, gh, gx, ws):
    """The Newton matrix of Negrut et al. 2007, Eq. 12 (module docstring) into
    ``ws.val``, from the blocks' values the ``*_values`` kernels wrote into ``ws``
    (``implicit``: the residual's, with d_λ in B; a removed redundant row's λ_j, whose
    equation is λ_j = 0, does not enter it, as in the dense matrix)."""
    _scatter_h(n, m, nd, implicit, alpha, bh2, gh, gx, ws)
    _assemble(ws)
    if nd > 0 and implicit:
        plan = ws.plan
        for e in range(plan.dlam_pos.shape[0]):
            ws.val[plan.dlam_pos[e]] += ws.active[plan.dlam_cols[e]] * ws.dlam[e]


@njit(cache=True)
def sparse_implicit_noise(ws):
    """:func:`mbdgen.runtime.hht.dense_implicit_noise` from the blocks' values."""
    plan = ws.plan
    diag = np.zeros(ws.xjac.shape[0])
    for e in range(plan.dxd_rows.shape[0]):
        if plan.dxd_rows[e] == plan.dxd_cols[e]:
            diag[plan.dxd_rows[e]] += ws.dxd[e]
    return hht._noise_ratio(ws.dqdd, ws.dlam, diag)


@njit(cache=True)
def sparse_state_jacobian(ws):
    """``ws.xjac`` ← d_Ẋ of the implicit states (dense, from its values), for Ẋ_0."""
    ws.xjac[:] = 0.0
    plan = ws.plan
    for e in range(plan.dxd_rows.shape[0]):
        ws.xjac[plan.dxd_rows[e], plan.dxd_cols[e]] += ws.dxd[e]


@njit(cache=True)
def sparse_factor(ws, size):
    """LU of K on the plan's order (``size`` is the dense path's; not needed here)."""
    return kkt_factor(ws.plan.kkt, ws.val)


@njit(cache=True)
def sparse_solve(ws, size):
    """``ws.b`` ← K⁻¹ ``ws.b``: from the loop's order [q̈; λ; Ẋ] to K's [q̈; Ẋ; λ] and back."""
    plan = ws.plan
    n = ws.qdd1.shape[0]
    m = ws.lam1.shape[0]
    nd = ws.x1.shape[0]
    nh = n + nd
    b = ws.b
    rk = ws.rk
    for i in range(n):
        rk[i] = b[i]
    for i in range(nd):
        rk[n + i] = b[n + m + i]
    for i in range(m):
        rk[nh + i] = b[n + i]
    kkt_rhs(plan.kkt, ws.bval, ws.active, ws.wrow, rk)
    kkt_solve(plan.kkt, ws.val, rk, ws.work)
    for i in range(n):
        b[i] = rk[i]
    for i in range(nd):
        b[n + m + i] = rk[n + i]
    for i in range(m):
        b[n + i] = rk[nh + i]


@njit(cache=True)
def sparse_residual(n, m, alpha, bh2, ws, qdd1, lam1, e):
    """e = [e1; e2] of Negrut et al. 2007, Eq. 13 (:func:`mbdgen.runtime.hht.residual`)
    from M's and Φ_q's values."""
    plan = ws.plan
    c = 1.0 / (1.0 + alpha)
    for i in range(n):
        e[i] = -ws.force[i] - alpha * c * ws.r_prev[i]
    for k in range(plan.mass_rows.shape[0]):
        e[plan.mass_rows[k]] += c * ws.mass[k] * qdd1[plan.mass_cols[k]]
    for k in range(plan.a_rows.shape[0]):
        e[plan.a_cols[k]] += ws.phi_q[k] * lam1[plan.a_rows[k]]
    for i in range(m):
        w = ws.active[i]
        e[n + i] = w * ws.phi[i] / bh2 + (1.0 - w) * lam1[i]


@njit(cache=True)
def sparse_r_prev(n, m, ws, lam):
    """``ws.r_prev`` ← (Φ_qᵀλ − Q) of the latest evaluation (the next step's e1)."""
    plan = ws.plan
    for i in range(n):
        ws.r_prev[i] = -ws.force[i]
    for k in range(plan.a_rows.shape[0]):
        ws.r_prev[plan.a_cols[k]] += ws.phi_q[k] * lam[plan.a_rows[k]]


@njit(cache=True)
def sparse_mass_vector(ws, v, out):
    """``out`` ← M v from M's values of the latest evaluation."""
    plan = ws.plan
    for i in range(out.shape[0]):
        out[i] = 0.0
    for k in range(plan.mass_rows.shape[0]):
        out[plan.mass_rows[k]] += ws.mass[k] * v[plan.mass_cols[k]]


@njit(cache=True)
def sparse_mass_scale(n, ws):
    """max |M_ii| (the round-off floor of λ's correction)."""
    sm = 0.0
    for k in range(ws.plan.mass_diag.shape[0]):
        sm = max(sm, abs(ws.mass[ws.plan.mass_diag[k]]))
    return sm


@njit(cache=True)
def sparse_record(row, t, x, ws, qd, out_t, out_x, out_aux):
    """An output row: t, x and [‖Φ‖₂, ‖Φ_q q̇ + Φ_t‖₂]."""
    plan = ws.plan
    out_t[row] = t
    for i in range(x.shape[0]):
        out_x[row, i] = x[i]
    phid = ws.phid
    for i in range(phid.shape[0]):
        phid[i] = ws.phi_t[i]
    for k in range(plan.a_rows.shape[0]):
        phid[plan.a_rows[k]] += ws.phi_q[k] * qd[plan.a_cols[k]]
    phi2 = 0.0
    phid2 = 0.0
    for i in range(phid.shape[0]):
        phi2 += ws.phi[i] * ws.phi[i]
        phid2 += phid[i] * phid[i]
    out_aux[row, 0] = np.sqrt(phi2)
    out_aux[row, 1] = np.sqrt(phid2)


hht.register_linear_algebra(
    Workspace,
    {
        "start": sparse_start,
        "newton": sparse_newton,
        "factor": sparse_factor,
        "solve": sparse_solve,
        "residual": sparse_residual,
        "r_prev": sparse_r_prev,
        "mass_vector": sparse_mass_vector,
        "mass_scale": sparse_mass_scale,
        "record": sparse_record,
        "state_jacobian": sparse_state_jacobian,
        "implicit_noise": sparse_implicit_noise,
    },
)
