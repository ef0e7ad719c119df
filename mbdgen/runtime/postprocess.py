"""Quantities derived from a finished run, computed in one jitted call per Result."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _state_parameters(p, states):
    """The kernels' parameter vector: ``p`` itself, or a copy of it whose tail the rows'
    user states X are written into (:func:`_put_states`)."""
    if states.shape[1] > 0:
        return p.copy()
    return p


@njit(cache=True, inline="always")
def _put_states(pk, states, i):
    """X of output row ``i`` into the tail of ``pk`` = [parameters; X]."""
    o = pk.shape[0] - states.shape[1]
    for j in range(states.shape[1]):
        pk[o + j] = states[i, j]


@njit(cache=True, inline="always")
def energy_rows(energy, phi_t, t, q, qd, lam, p, states, energy_out):
    """Fill ``energy_out[i] = [T, V, P]`` for every output row.

    ``energy`` and ``phi_t`` are a generated module's kernels (Haug 1989, Eq. 7.5.13
    for V).  P is the power of everything V does not account for, q̇ᵀ(Q + V_qᵀ) from
    the kernel plus the power λᵀΦ_t of rheonomic constraints (drivers), so that
    d(T + V)/dt = P.  ``states`` (rows × nd) are the user states X of each row: the
    kernels see them at the tail of a copy of ``p`` = [parameters; X] (a force that
    depends on X, a controller's torque, has the power of its row's X).
    """
    m = lam.shape[1]
    phi_t_i = np.zeros(m)
    pk = _state_parameters(p, states)
    for i in range(t.shape[0]):
        _put_states(pk, states, i)
        energy(t[i], q[i], qd[i], pk, energy_out[i])
        if m > 0:
            phi_t(t[i], q[i], pk, phi_t_i)
            for j in range(m):
                energy_out[i, 2] += lam[i, j] * phi_t_i[j]


@njit(cache=True, inline="always")
def derived(energy, reactions, phi_t, t, q, qd, lam, p, states, energy_out, reactions_out):
    """:func:`energy_rows` and ``reactions_out[i]``, the joint reactions of every output
    row from λ (Haug 1989, Eq. 6.6.2; ``reactions`` is a generated module's kernel).
    ``reactions_out`` may have zero rows per output (no joints, or not wanted)."""
    energy_rows(energy, phi_t, t, q, qd, lam, p, states, energy_out)
    if reactions_out.shape[1] == 0:
        return
    pk = _state_parameters(p, states)
    for i in range(t.shape[0]):
        _put_states(pk, states, i)
        reactions(t[i], q[i], lam[i], pk, reactions_out[i])
