"""A pendulum held at a set angle by a PI(D) controller whose integral is a user state.

Source: the controller example of Negrut, Rampalli, Ottarsson & Sajdak 2007 (user
differential states X, Eq. 8a, "controls are active in the system"), on the pendulum
of Haug 1989, Example 7.2.1 (as models/pendulum.py): a slender bar of length 2l pinned
at one end to the ground at the origin, planar Cartesian coordinates q = [x, y, φ] of
its centroid, J = m l²/3, m = 1 kg, l = 1 m, gravity g = 9.81 m/s² along −y.

A motor at the pivot applies the torque

    u = −kp (φ − φ_ref) − kd φ̇ − ki X,      Ẋ = φ − φ_ref,   X(0) = 0,

so X is the integral of the angle error, the one user state.  The reduced closed loop
is (J + m l²) φ̈ = −m g l cos φ + u.  Gravity's torque at the set point, −m g l cos φ_ref,
is what the integral term must learn (a P(D) controller alone would sag below φ_ref):
at rest, φ = φ_ref and X = −m g l cos φ_ref / ki.

Our choices: φ_ref = −π/4 (45° below the horizontal); the bar starts horizontal at rest
(φ = 0, as models/pendulum.py).  Linearized about φ_ref, the loop's characteristic
polynomial is I s³ + kd s² + (kp − m g l sin φ_ref) s + ki with I = J + m l² = 4/3; the
gains put its three roots near s = −3 rad/s (I (s + 3)³ = 4/3 s³ + 12 s² + 36 s + 36):
kd = 12, kp = 36 + m g l sin φ_ref ≈ 29.06 → 30, ki = 36 (N·m, N·m·s, N·m/s per rad).
The loop settles in a few seconds (|φ − φ_ref| < 1e-3 rad after about 5 s), with no
overshoot to speak of.
"""

import math

import sympy as sp

from mbdgen.model import GROUND, Mechanism, forces, planar, states

l, m = 1.0, 1.0
J = m * l**2 / 3  # slender bar of length 2l about its centroid
kp, kd, ki, phi_ref = sp.symbols("kp kd ki phi_ref")

bar = planar.body("bar", m, J, q0=(l, 0.0, 0.0))
phi, phi_d = bar.coordinates[2], bar.velocities[2]
e_int = states.state("e_int", rate=phi - phi_ref, x0=0.0)

model = Mechanism(
    name="pi_pendulum",
    description="Pendulum held at phi_ref by a PID torque with the integral as a user state "
    "(Negrut et al. 2007, Eq. 8a; pendulum of Haug 1989, Example 7.2.1)",
    bodies=[bar],
    elements=[
        planar.revolute("pivot", GROUND, (0.0, 0.0), bar, (-l, 0.0)),
        forces.gravity([bar], (0.0, -9.81)),
        forces.torque("motor", bar, -kp * (phi - phi_ref) - kd * phi_d - ki * e_int),
    ],
    parameters={kp: 30.0, kd: 12.0, ki: 36.0, phi_ref: -math.pi / 4},
    states=[e_int],
)
