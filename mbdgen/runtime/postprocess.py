"""Quantities derived from a finished run, computed in one jitted call per Result."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def derived(energy, reactions, phi_t, t, q, qd, lam, p, states, energy_out, reactions_out):
    """Fill ``energy_out[i] = [T, V, P]`` and ``reactions_out[i]`` for every output row.

    ``energy``, ``reactions`` and ``phi_t`` are a generated module's kernels (Haug
    1989, Eq. 7.5.13 for V; Eq. 6.6.2 for the reactions from λ).  P is the power of
    everything V does not account for, q̇ᵀ(Q + V_qᵀ) from the kernel plus the power
    λᵀΦ_t of rheonomic constraints (drivers), so that d(T + V)/dt = P.
    ``reactions_out`` may have zero rows per output (no joints, or not wanted).
    ``states`` (rows × nd) are the user states X of each row: the kernels see them at
    the tail of a copy of ``p`` = [parameters; X] (a force that depends on X, a
    controller's torque, has the power of its row's X).
    """
    m = lam.shape[1]
    nd = states.shape[1]
    phi_t_i = np.zeros(m)
    pk = p
    if nd > 0:
        pk = p.copy()
    o = p.shape[0] - nd
    for i in range(t.shape[0]):
        for j in range(nd):
            pk[o + j] = states[i, j]
        energy(t[i], q[i], qd[i], pk, energy_out[i])
        if m > 0:
            phi_t(t[i], q[i], pk, phi_t_i)
            for j in range(m):
                energy_out[i, 2] += lam[i, j] * phi_t_i[j]
        if reactions_out.shape[1] > 0:
            reactions(t[i], q[i], lam[i], pk, reactions_out[i])
