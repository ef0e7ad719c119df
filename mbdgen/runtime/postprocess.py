"""Quantities derived from a finished run, computed in one jitted call per Result."""

from __future__ import annotations

from numba import njit


@njit(cache=True, inline="always")
def derived(energy, reactions, t, q, qd, lam, p, energy_out, reactions_out):
    """Fill ``energy_out[i] = [T, V]`` and ``reactions_out[i]`` for every output row.

    ``energy`` and ``reactions`` are a generated module's kernels (Haug 1989,
    Eq. 7.5.13 for V; Eq. 6.6.2 for the reactions from λ); ``reactions_out`` may have
    zero rows per output (no joints).
    """
    for i in range(t.shape[0]):
        energy(t[i], q[i], qd[i], p, energy_out[i])
        if reactions_out.shape[1] > 0:
            reactions(t[i], q[i], lam[i], p, reactions_out[i])
