"""Quantities derived from a finished run, computed in one jitted call per Result."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from numba import njit
from numba.extending import overload

from mbdgen.runtime import sparse
from mbdgen.runtime.linalg import lu_factor_inplace, lu_solve_factored
from mbdgen.runtime.refs import borrow
from mbdgen.runtime.status import OK


@njit(cache=True, inline="always")
def _state_parameters(p, states):
    """The kernels' parameter vector: ``p`` itself, or a copy of it whose tail the rows'
    user states X (the column block ``states``) are written into (:func:`_put_states`)."""
    if states[2] > 0:
        return p.copy()
    return p


@njit(cache=True, inline="always")
def _put_states(pk, states, i):
    """X of output row ``i`` into the tail of ``pk`` = [parameters; X]."""
    rows, col, nd = states
    o = pk.shape[0] - nd
    for j in range(nd):
        pk[o + j] = rows[i, col + j]


@njit(cache=True, inline="always")
def _row(block, i):
    """Row ``i`` of a column block ``(rows, col, width)`` (:func:`energy_rows`): a
    contiguous view, as the kernels take it (no copy)."""
    rows, col, width = block
    return rows[i, col : col + width]


@njit(cache=True, inline="always")
def energy_rows(energy, phi_t, t, q, qd, lam, p, states, energy_out, power_out):
    """Fill ``energy_out[i] = [T, V]`` and ``power_out[i] = P`` for every output row.

    ``energy`` and ``phi_t`` are a generated module's kernels (Haug 1989, Eq. 7.5.13
    for V).  P is the power of everything V does not account for, q̇ᵀ(Q + V_qᵀ) from
    the kernel plus the power λᵀΦ_t of rheonomic constraints (drivers), so that
    d(T + V)/dt = P.  ``states`` are the user states X of each row: the kernels see
    them at the tail of a copy of ``p`` = [parameters; X] (a force that depends on X, a
    controller's torque, has the power of its row's X).

    q, q̇, λ and X are column blocks ``(rows, col, width)``: columns ``col`` to
    ``col + width`` of the C-contiguous 2-D array ``rows``, the integrator's output
    record itself (:func:`mbdgen.simulation.column_block`), so that no strided copy
    of them is made (with the split of [T, V, P]: 1.3 ms per 20 001 rows of the
    slider-crank, a tenth of its HHT run), and borrowed (:func:`~mbdgen.runtime.refs.borrow`),
    so that a row's views of them cost no reference counts (0.48 → 0.08 ms).
    """
    m = lam[2]
    phi_t_i = np.zeros(m)
    tvp = np.empty(3)
    pk = _state_parameters(p, states)
    # the caller's arrays, unowned: it holds them for the whole call (see the docstring)
    t, q, qd, lam, states = borrow(t), borrow(q), borrow(qd), borrow(lam), borrow(states)
    for i in range(t.shape[0]):
        _put_states(pk, states, i)
        qi = _row(q, i)
        energy(t[i], qi, _row(qd, i), pk, tvp)
        energy_out[i, 0] = tvp[0]
        energy_out[i, 1] = tvp[1]
        power = tvp[2]
        if m > 0:
            lami = _row(lam, i)
            phi_t(t[i], qi, pk, phi_t_i)
            for j in range(m):
                power += lami[j] * phi_t_i[j]
        power_out[i] = power


@njit(cache=True, inline="always")
def derived(energy, reactions, phi_t, t, q, qd, lam, p, states, energy_out, power_out,
            reactions_out):  # fmt: skip
    """:func:`energy_rows` and ``reactions_out[i]``, the joint reactions of every output
    row from λ (Haug 1989, Eq. 6.6.2; ``reactions`` is a generated module's kernel).
    ``reactions_out`` may have zero rows per output (no joints, or not wanted)."""
    energy_rows(energy, phi_t, t, q, qd, lam, p, states, energy_out, power_out)
    if reactions_out.shape[1] == 0:
        return
    pk = _state_parameters(p, states)
    t, q, lam, states, reactions_out = (
        borrow(t), borrow(q), borrow(lam), borrow(states), borrow(reactions_out)
    )  # fmt: skip
    for i in range(t.shape[0]):
        _put_states(pk, states, i)
        reactions(t[i], _row(q, i), _row(lam, i), pk, reactions_out[i])


@njit(cache=True)
def _nan_max(m, v):
    """max as ``np.max`` takes it: a NaN anywhere makes the result NaN."""
    if m != m or v != v:
        return math.nan
    return max(m, v)


#: ``carry`` of :func:`energy_balance_rows`: W, W₂, max |W − W₂|, max T, max |V − V₀|,
#: max |W|, whether some P ≠ 0, E₀ = T₀ + V₀ and V₀.
CARRY_SIZE = 9


@njit(cache=True)
def energy_balance_start(energy):
    """The ``carry`` of :func:`energy_balance_rows` before row 0, from row 0's [T, V]."""
    carry = np.zeros(CARRY_SIZE)
    carry[3] = energy[0, 0]
    carry[4] = abs(energy[0, 1] - energy[0, 1])
    carry[7] = energy[0, 0] + energy[0, 1]
    carry[8] = energy[0, 1]
    return carry


@njit(cache=True)
def energy_balance(t, energy, power, balance):
    """The energy balance of a run, as :func:`mbdgen.simulation.energy_balance` states
    it: ``balance[i]`` = T_i + V_i − (T_0 + V_0) − W_i, W the trapezoidal rule of ∫P dt
    over the rows (``energy`` rows × [T, V], ``power`` P); returns (scale, quadrature):
    the energy the run exchanges (the largest of max T, max |V − V_0|, max |W|, as
    Python's ``max`` picks it) and |W − W₂|/3 at the even rows, W₂ the rule on every
    second row (Richardson), 0 with fewer than 5 rows or P ≡ 0.  The operations of
    NumPy's ``diff``, ``cumsum`` and ``max`` in their order: the same numbers."""
    carry = energy_balance_start(energy)
    energy_balance_rows(t, energy, power, balance, 0, 0, carry)
    return energy_balance_result(carry, t.shape[0])


@njit(cache=True)
def energy_balance_rows(t, energy, power, balance, first, i0, carry):
    """Rows ``first`` … of :func:`energy_balance`, of a block whose local row 0 is the
    run's row ``i0``; ``carry`` (:data:`CARRY_SIZE`) holds the sums and maxima over the
    rows before and is updated.  A block after the first starts two rows early
    (``first`` = 2, those rows already done), so that the rules find rows i − 1 and
    i − 2: a run in blocks gives the numbers of one call over all its rows."""
    work, coarse, worst = carry[0], carry[1], carry[2]
    top_t, top_v, top_w = carry[3], carry[4], carry[5]
    nonzero = carry[6] != 0.0
    e0, v0 = carry[7], carry[8]
    for li in range(first, t.shape[0]):
        i = i0 + li
        if i > 0:
            work += 0.5 * (t[li] - t[li - 1]) * (power[li] + power[li - 1])
            top_t = _nan_max(top_t, energy[li, 0])
            top_v = _nan_max(top_v, abs(energy[li, 1] - v0))
            top_w = _nan_max(top_w, abs(work))
            if i % 2 == 0:
                coarse += 0.5 * (t[li] - t[li - 2]) * (power[li] + power[li - 2])
                worst = _nan_max(worst, abs(work - coarse))
        balance[li] = energy[li, 0] + energy[li, 1] - e0 - work
        nonzero = nonzero or power[li] != 0.0
    carry[0], carry[1], carry[2] = work, coarse, worst
    carry[3], carry[4], carry[5] = top_t, top_v, top_w
    carry[6] = 1.0 if nonzero else 0.0


@njit(cache=True)
def energy_balance_result(carry, k):
    """(scale, quadrature) of :func:`energy_balance` from the ``carry`` after all ``k`` rows."""
    scale = carry[3]
    if carry[4] > scale:
        scale = carry[4]
    if carry[5] > scale:
        scale = carry[5]
    quadrature = carry[2] / 3.0 if k >= 5 and carry[6] != 0.0 else 0.0
    return scale, quadrature


# -- The output rows of the index-3 methods projected onto the constraints ---------------

#: Chord-Newton iterations at most of one output row's projection (each evaluates the
#: constraints anew; a row in reach of the Newton tolerance needs two or three).
PROJECT_ITERATIONS = 10
#: A held matrix is evaluated anew where an iteration reduces the residual by less than
#: this factor (from 1e-4, the rtol-sized error of a row, to 1e-10 in six iterations at
#: most, where a new LU of the spatial slider-crank's 41 × 41 matrix costs about ten).
PROJECT_RATE = 0.1


class DenseProjection(NamedTuple):
    """The projection's linear algebra for a dense ``dynamics`` kernel: M (n × n) and
    Φ_q (m × n) as it fills them, K = [[M, Φ_qᵀ], [Φ_q, 0]] factored in place."""

    mass: np.ndarray
    phi_q: np.ndarray
    K: np.ndarray
    piv: np.ndarray


class SparseProjection(NamedTuple):
    """The same on the static patterns of ``dynamics_values`` (M's and Φ_q's values)
    with the sparse LU of K (:mod:`mbdgen.runtime.sparse`, the index-1 plan): a
    correction costs O(nnz), not O((n + m)²)."""

    plan: sparse.KktPlan
    mass: np.ndarray
    phi_q: np.ndarray
    held: np.ndarray  # Φ_q's values at the factorization (the row operation of kkt_rhs)
    val: np.ndarray
    wrow: np.ndarray
    work: np.ndarray


def dense_projection(n: int, m: int) -> DenseProjection:
    N = n + m
    return DenseProjection(
        np.zeros((n, n)), np.zeros((m, n)), np.zeros((N, N)), np.zeros(N, dtype=np.int64)
    )


def sparse_projection(plan: sparse.KktPlan) -> SparseProjection:
    nnz_a = plan.a_rows.shape[0]
    h = int(plan.h_pos.shape[0])
    return SparseProjection(
        plan, np.zeros(h), np.zeros(nnz_a), np.zeros(nnz_a), np.zeros(plan.values_size),
        np.zeros(plan.aug_rows.shape[0]), np.zeros(plan.size),
    )  # fmt: skip


@njit(cache=True, inline="always")
def _dense_residual(la, v, phi_t, weight, r):
    """r ← weight ∘ (Φ_q v + Φ_t); returns max |r_i|."""
    worst = 0.0
    for i in range(phi_t.shape[0]):
        s = phi_t[i]
        for j in range(v.shape[0]):
            s += la.phi_q[i, j] * v[j]
        r[i] = weight[i] * s
        worst = max(worst, abs(r[i]))
    return worst


@njit(cache=True, inline="always")
def _sparse_residual(la, v, phi_t, weight, r):
    for i in range(phi_t.shape[0]):
        r[i] = phi_t[i]
    rows = la.plan.a_rows
    cols = la.plan.a_cols
    for e in range(rows.shape[0]):
        r[rows[e]] += la.phi_q[e] * v[cols[e]]
    worst = 0.0
    for i in range(phi_t.shape[0]):
        r[i] *= weight[i]
        worst = max(worst, abs(r[i]))
    return worst


@njit(cache=True, inline="always")
def _dense_factor(la, n, m, active):
    """K ← [[M, Φ_qᵀ], [Φ_q, 0]] with a redundant row's equation replaced by μ_i = 0
    (``active[i]`` = 0, :func:`mbdgen.runtime.linalg.row_weights`), factored."""
    K = la.K
    K[:, :] = 0.0
    for i in range(n):
        for j in range(n):
            K[i, j] = la.mass[i, j]
    for r in range(m):
        if active[r] != 0.0:
            for j in range(n):
                K[n + r, j] = la.phi_q[r, j]
                K[j, n + r] = la.phi_q[r, j]
        else:
            K[n + r, n + r] = 1.0
    return lu_factor_inplace(K, la.piv, n + m)


@njit(cache=True, inline="always")
def _sparse_factor(la, n, m, active):
    la.held[:] = la.phi_q
    sparse.kkt_assemble(la.plan, la.mass, la.held, la.held, active, la.val, la.wrow)
    return sparse.kkt_factor(la.plan, la.val)


@njit(cache=True, inline="always")
def _dense_solve(la, n, m, active, b):
    lu_solve_factored(la.K, la.piv, b, n + m)


@njit(cache=True, inline="always")
def _sparse_solve(la, n, m, active, b):
    sparse.kkt_rhs(la.plan, la.held, active, la.wrow, b)
    sparse.kkt_solve(la.plan, la.val, b, la.work)


_PROJECTION_OPS: dict[type, tuple[Any, Any, Any]] = {
    DenseProjection: (_dense_residual, _dense_factor, _dense_solve),
    SparseProjection: (_sparse_residual, _sparse_factor, _sparse_solve),
}


# Python (NUMBA_DISABLE_JIT) looks the operation up by the record's class; compiled code
# resolves it when the loop is typed (the overloads), as mbdgen.runtime.hht's la_*.
def _residual(la, v, phi_t, weight, r):
    return _PROJECTION_OPS[type(la)][0](la, v, phi_t, weight, r)


def _factor(la, n, m, active):
    return _PROJECTION_OPS[type(la)][1](la, n, m, active)


def _solve(la, n, m, active, b):
    return _PROJECTION_OPS[type(la)][2](la, n, m, active, b)


def _typed(la: Any, k: int) -> Any:
    return _PROJECTION_OPS[la.instance_class][k]


@overload(_residual, inline="always")
def _ol_residual(la, v, phi_t, weight, r):
    f = _typed(la, 0)
    return lambda la, v, phi_t, weight, r: f(la, v, phi_t, weight, r)


@overload(_factor, inline="always")
def _ol_factor(la, n, m, active):
    f = _typed(la, 1)
    return lambda la, n, m, active: f(la, n, m, active)


@overload(_solve, inline="always")
def _ol_solve(la, n, m, active, b):
    f = _typed(la, 2)
    return lambda la, n, m, active, b: f(la, n, m, active, b)


@njit(cache=True, inline="always")
def _chord_step(la, n, m, active, b, y, factored):
    """y += Δ of [[M, Φ_qᵀ], [Φ_q, 0]] [Δ; μ] = [0; b[n:]], the matrix factored first
    where ``factored`` is False.  Returns (succeeded, the matrix is from this point)."""
    fresh = False
    if not factored:
        if _factor(la, n, m, active) != OK:
            return False, False
        fresh = True
    b[:n] = 0.0
    _solve(la, n, m, active, b)
    for k in range(n):
        y[k] += b[k]
    return True, fresh


@njit(cache=True, inline="always")
def _judge(now, before, fresh):
    """After a chord step from residual ``before`` to ``now``: (go on, keep the matrix).
    A step that does not cut it tenfold (:data:`PROJECT_RATE`) is retried with the
    matrix evaluated anew, unless that matrix was new; then it has to cut at all."""
    if not now == now:
        return False, False
    if now < PROJECT_RATE * before:
        return True, True
    if not fresh:
        return True, False
    return now < before, True


@njit(cache=True, inline="always")
def _phi_worst(phi, active):
    """max |Φ_i| over the enforced rows."""
    worst = 0.0
    for k in range(phi.shape[0]):
        worst = max(worst, abs(active[k] * phi[k]))
    return worst


@njit(cache=True, inline="always")
def _dot(r):
    s = 0.0
    for i in range(r.shape[0]):
        s += r[i] * r[i]
    return s


@njit(cache=True, inline="always")
def project_rows(dynamics, la, t, x, aux, n, m, nd, p, active, tol):
    """Project the output rows of an index-3 run onto the position and velocity
    constraints: q onto Φ(q, t) = 0, then q̇ onto Φ_q q̇ + Φ_t = 0, by corrections of
    least M-norm, [[M, Φ_qᵀ], [Φ_q, 0]] [Δ; μ] = [0; −r] (Haug 1989, Eq. 7.2.1's
    matrix), evaluated at the row's own point and held over the row's iterations while
    each reduces the residual tenfold (a chord iteration; evaluated anew where it does
    not).  A matrix held from row to row would save most factorizations, but a row's
    result would then depend on the rows before it: the pendulum's rows on a grid of
    0.1 differed from the same rows on a grid of 0.005 by 8e-8.

    An error-controlled index-3 method satisfies Φ = 0 at its steps, but its rows on
    the user's grid are interpolants between steps (HHT's cubic Hermite, Radau's
    collocation polynomial), whose constraint error is of the order of the step's own
    local error (the four-bar under ``hht_adaptive`` at rtol 1e-2: ‖Φ‖ 3e-3 on the
    rows, 3e-10 at the steps).  The projection of least M-norm onto Φ = 0, which holds
    the exact q, does not move q away from it (to first order); the velocity set is
    taken at the computed q and misses the exact q̇ by O(|q − q*|), so q̇'s error can
    grow to that size where it was smaller (docs/design-notes.md, stop 44).  q̈, λ and
    the user states are left as the method interpolated them.

    ``dynamics`` is the module's kernel, dense with ``la`` a :class:`DenseProjection`,
    or ``dynamics_values`` with a :class:`SparseProjection`; ``x`` the rows [q, q̇, q̈,
    λ, X, Ẋ], ``aux`` their [‖Φ‖₂, ‖Φ_q q̇ + Φ_t‖₂], updated; ``p`` = [parameters; X0].
    A row is left as it is where max |Φ_i| ≤ ``tol`` and max |Φ_q q̇ + Φ_t| ≤ ``tol``
    max(1, max |q̇|), and restored where the iteration fails (a singular matrix, a NaN,
    no contraction).  Returns (rows changed, rows that could not be projected).
    """
    la, t, x, aux = borrow(la), borrow(t), borrow(x), borrow(aux)  # the caller's (no counts)
    N = n + m
    force = np.zeros(n)
    phi = np.zeros(m)
    phi_t = np.zeros(m)
    gamma = np.zeros(m)
    b = np.zeros(N)
    r = np.zeros(m)
    ones = np.ones(m)
    q0 = np.zeros(n)
    v0 = np.zeros(n)
    states = (x, 3 * n + m, nd)  # the rows' X, a column block
    pk = _state_parameters(p, states)
    changed = 0
    failed = 0
    for i in range(t.shape[0]):
        _put_states(pk, states, i)
        q = x[i, :n]
        v = x[i, n : 2 * n]
        dynamics(t[i], q, v, pk, la.mass, force, phi, la.phi_q, phi_t, gamma)
        worst = _phi_worst(phi, active)
        v_tol = 1.0
        for k in range(n):
            v_tol = max(v_tol, abs(v[k]))
        v_tol *= tol
        v_worst = _residual(la, v, phi_t, active, r)
        if worst <= tol and v_worst <= v_tol:
            continue
        q0[:] = q
        v0[:] = v
        ok = worst == worst and v_worst == v_worst
        factored = False  # K at this row's own point: a row's result is its own alone
        it = 0
        while ok and worst > tol:
            if it == PROJECT_ITERATIONS:
                ok = False
                break
            for k in range(m):
                b[n + k] = -active[k] * phi[k]
            ok, fresh = _chord_step(la, n, m, active, b, q, factored)
            if not ok:
                break
            dynamics(t[i], q, v, pk, la.mass, force, phi, la.phi_q, phi_t, gamma)
            before = worst
            worst = _phi_worst(phi, active)
            ok, factored = _judge(worst, before, fresh)
            it += 1
        # q̇ with Φ_q at the projected q and the matrix held (the correction differs
        # from the one of least M-norm by O(|Δq| |Δq̇|), Δq the row's own correction)
        v_worst = _residual(la, v, phi_t, active, r)
        it = 0
        while ok and v_worst > v_tol:
            if it == PROJECT_ITERATIONS:
                ok = False
                break
            for k in range(m):
                b[n + k] = -r[k]
            ok, fresh = _chord_step(la, n, m, active, b, v, factored)
            if not ok:
                break
            before = v_worst
            v_worst = _residual(la, v, phi_t, active, r)
            ok, factored = _judge(v_worst, before, fresh)
            it += 1
        if ok:
            phi2 = 0.0
            for k in range(m):
                phi2 += phi[k] * phi[k]
            _residual(la, v, phi_t, ones, r)
            aux[i, 0] = math.sqrt(phi2)
            aux[i, 1] = math.sqrt(_dot(r))
            changed += 1
        else:
            q[:] = q0
            v[:] = v0
            failed += 1
    return changed, failed
