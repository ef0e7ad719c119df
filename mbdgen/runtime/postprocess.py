"""Quantities derived from a finished run, computed in one jitted call per Result."""

from __future__ import annotations

import math

import numpy as np
from numba import njit


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
    slider-crank, a tenth of its HHT run).
    """
    m = lam[2]
    phi_t_i = np.zeros(m)
    tvp = np.empty(3)
    pk = _state_parameters(p, states)
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
    for i in range(t.shape[0]):
        _put_states(pk, states, i)
        reactions(t[i], _row(q, i), _row(lam, i), pk, reactions_out[i])


@njit(cache=True)
def _nan_max(m, v):
    """max as ``np.max`` takes it: a NaN anywhere makes the result NaN."""
    if m != m or v != v:
        return math.nan
    return max(m, v)


@njit(cache=True)
def energy_balance(t, energy, power, balance):
    """The energy balance of a run, as :func:`mbdgen.simulation.energy_balance` states
    it: ``balance[i]`` = T_i + V_i − (T_0 + V_0) − W_i, W the trapezoidal rule of ∫P dt
    over the rows (``energy`` rows × [T, V], ``power`` P); returns (scale, quadrature):
    the energy the run exchanges (the largest of max T, max |V − V_0|, max |W|, as
    Python's ``max`` picks it) and |W − W₂|/3 at the even rows, W₂ the rule on every
    second row (Richardson), 0 with fewer than 5 rows or P ≡ 0.  The operations of
    NumPy's ``diff``, ``cumsum`` and ``max`` in their order: the same numbers."""
    k = t.shape[0]
    e0 = energy[0, 0] + energy[0, 1]
    v0 = energy[0, 1]
    work = 0.0  # W of row i, the fine rule's running sum
    coarse = 0.0  # W₂ of the even row i
    worst = 0.0
    top_t = energy[0, 0]
    top_v = abs(energy[0, 1] - v0)
    top_w = 0.0
    nonzero = False
    for i in range(k):
        if i > 0:
            work += 0.5 * (t[i] - t[i - 1]) * (power[i] + power[i - 1])
            top_t = _nan_max(top_t, energy[i, 0])
            top_v = _nan_max(top_v, abs(energy[i, 1] - v0))
            top_w = _nan_max(top_w, abs(work))
            if i % 2 == 0:
                coarse += 0.5 * (t[i] - t[i - 2]) * (power[i] + power[i - 2])
                worst = _nan_max(worst, abs(work - coarse))
        balance[i] = energy[i, 0] + energy[i, 1] - e0 - work
        nonzero = nonzero or power[i] != 0.0
    scale = top_t
    if top_v > scale:
        scale = top_v
    if top_w > scale:
        scale = top_w
    quadrature = worst / 3.0 if k >= 5 and nonzero else 0.0
    return scale, quadrature
