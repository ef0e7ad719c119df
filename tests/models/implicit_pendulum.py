"""A pendulum with implicit user states: an actuator lag, a filtered accelerometer and a
filtered load cell (Negrut et al. 2007, Eq. 8a in its implicit form d(Ẋ, X, q, q̇, q̈, λ,
t) = 0).

Source: the user states of Negrut, Rampalli, Ottarsson & Sajdak 2007 (Eq. 8a: "the
differential equations ... may depend on the accelerations and the Lagrange
multipliers"), on the pendulum of Haug 1989, Example 7.2.1 (as models/pendulum.py and
models/pi_pendulum.py): a slender bar of length 2l pinned at one end to the ground at
the origin, q = [x, y, φ] of its centroid, J = m l²/3, m = 1 kg, l = 1 m, g = 9.81 m/s²
along −y.  The bar starts horizontal at rest.

States (our choices, time constants in s):

* ``torque`` T, the motor torque at the pivot, lags a PD command u = −kp (φ − φ_ref) −
  kd φ̇:  τ_m Ṫ + T − u = 0 (an actuator lag; feeds back through the torque);
* ``acc`` Y, a first-order filter of the angular acceleration:  τ_a Ẏ + Y − φ̈ = 0
  (uses q̈);
* ``load`` Z, a first-order filter of the multiplier of row ``pivot[1]``, the vertical
  force of the ground on the bar (Φ = r_ground − r_bar − A s' for this joint, so
  λ_1 = m (g + ÿ)):  τ_l Ż + Z − λ_1 = 0 (uses λ).

:func:`mechanism` builds the variants the tests compare: the lag alone, explicit
(Ṫ = (u − T)/τ_m) or implicit, and the full model with the two sensors.
"""

from __future__ import annotations

import math

import sympy as sp

from mbdgen.model import GROUND, Mechanism, forces, planar, states

L, M = 1.0, 1.0
J = M * L**2 / 3  # slender bar of length 2l about its centroid
kp, kd, phi_ref = sp.symbols("kp kd phi_ref")
tau_m, tau_a, tau_l = sp.symbols("tau_m tau_a tau_l")


def mechanism(
    lag: str = "implicit", sensors: bool = True, name: str = "implicit_pendulum"
) -> Mechanism:
    """The pendulum with the actuator lag ``lag`` ("explicit" or "implicit") and, with
    ``sensors``, the implicit accelerometer and load-cell states."""
    bar = planar.body("bar", M, J, q0=(L, 0.0, 0.0))
    phi, phi_d = bar.coordinates[2], bar.velocities[2]
    u = -kp * (phi - phi_ref) - kd * phi_d
    T = states.symbol("torque")
    if lag == "explicit":
        torque = states.state(T, rate=(u - T) / tau_m, x0=0.0)
    else:
        torque = states.implicit(T, residual=tau_m * states.derivative(T) + T - u, x0=0.0)
    declared = [torque]
    parameters = {kp: 30.0, kd: 12.0, phi_ref: -math.pi / 4, tau_m: 0.05}
    if sensors:
        y, z = states.symbol("acc"), states.symbol("load")
        declared += [
            states.implicit(
                y, residual=tau_a * states.derivative(y) + y - states.acceleration(phi), x0=0.0
            ),
            states.implicit(
                z, residual=tau_l * states.derivative(z) + z - states.multiplier("pivot", 1), x0=0.0
            ),
        ]
        parameters.update({tau_a: 0.1, tau_l: 0.1})
    return Mechanism(
        name=name,
        description="Pendulum with an actuator lag, a filtered accelerometer and a filtered "
        "load cell as implicit user states (Negrut et al. 2007, Eq. 8a; pendulum of Haug "
        "1989, Example 7.2.1)",
        bodies=[bar],
        elements=[
            planar.revolute("pivot", GROUND, (0.0, 0.0), bar, (-L, 0.0)),
            forces.gravity([bar], (0.0, -9.81)),
            forces.torque("motor", bar, torque),
        ],
        parameters=parameters,
        states=declared,
    )


model = mechanism()
