"""Test-only kernels of the generated-module ABI for q̈ + k q = 0 (one coordinate, no
constraints, k = p[0]): the linear oscillator on which the implicit methods' numerical
damping (spectral radius at hω → ∞) is measured from single runtime steps."""

from functools import cache

from numba import njit

from mbdgen.runtime import shared


@njit
def osc_dynamics(t, q, qd, p, mass, force, phi, phi_q, phi_t, gamma):
    mass[0, 0] = 1.0
    force[0] = -p[0] * q[0]


@njit
def zero(t, q, a, p, out):
    out[:] = 0.0


@njit
def osc_force_q(t, q, qd, p, out):
    out[0, 0] = -p[0]


@cache
def _pointers():
    sig = shared.KERNEL_SIGNATURES
    return (
        shared.KernelPointer(osc_dynamics, sig["dynamics"]),
        shared.KernelPointer(zero, sig["mass_a_q"]),
        shared.KernelPointer(osc_force_q, sig["force_q"]),
    )


def osc_step(p, ctrl, ws, h, x, state, out_t, out_x, out_aux) -> int:
    """One step of h of the index-3 loop (HHT-α or generalized-α, as ``ctrl`` says) on
    the oscillator, through the routine shared by all models
    (:func:`mbdgen.runtime.shared.index3_chunk`, the kernels by pointer): the loop a run
    takes first, compiled once for the suite.  A test-local ``@njit`` wrapper around
    :func:`mbdgen.runtime.hht.index3_chunk` compiled that loop again, for 25 s, in each
    test file that asks for the spectral radius."""
    dynamics, zero_block, force_q = _pointers()
    return shared.index3_chunk(
        dynamics, zero_block, zero_block, force_q, zero_block, p, ctrl, ws, 0.0, h, x, state,
        1, 1, out_t, out_x, out_aux,
    )  # fmt: skip
