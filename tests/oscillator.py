"""Test-only kernels of the generated-module ABI for q̈ + k q = 0 (one coordinate, no
constraints, k = p[0]): the linear oscillator on which the implicit methods' numerical
damping (spectral radius at hω → ∞) is measured from single runtime steps."""

from numba import njit


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


@njit
def zero_residual(t, q, qd, qdd, lam, xd, p, out):
    """The states' residual d (none here: nd = 0)."""
    out[:] = 0.0


@njit
def zero_residual_blocks(t, q, qd, qdd, lam, xd, p, d_qdd, d_q, d_qd, d_lam, d_xd, d_x):
    """The residual's six partials (none here: nd = 0)."""
    d_qdd[:] = 0.0
