"""Crank-driven planar four-bar linkage in planar body coordinates (kinematic analysis).

Source: Haug 1989, §5.1-5.2 (kinematic analysis of a four-bar linkage with a crank
driver), with the link lengths of ``tests/models/fourbar.py``: ground pivots A = (0, 0)
and D = (r0, 0) = (3, 0), crank AB r1 = 1, coupler BC r2 = 3, rocker DC r3 = 2.5 — a
Grashof crank-rocker whose crank turns fully.

Each link is a planar body (q_i = [x_i, y_i, φ_i]) with its centroid at the middle of
the link and its body x axis along it; four revolute joints (Haug 1989, Eq. 3.3.10)
and the absolute angle driver φ_crank = th10 + w t (Haug 1989, §3.5) leave no degree of
freedom: 9 coordinates, 8 + 1 constraints.  Masses (1 kg, slender bars) are
placeholders; no forces act.  The initial state is the exact closure at φ_crank = 0,
C = (2.6875, 2.4804...), with the velocities of the default crank rate w = 2 rad/s.
"""

import math

import sympy as sp

from mbdgen.model import GROUND, Body, Mechanism, planar, t

r1, r2, r3, r0 = 1.0, 3.0, 2.5, 3.0
w, th10 = sp.symbols("w th10")

# Closure at th1 = 0: B = (r1, 0); C on the circles |C − B| = r2, |C − D| = r3.
B = (r1, 0.0)
cx = (r2**2 - r3**2 - r1**2 + r0**2) / (2 * (r0 - r1))
cy = math.sqrt(r2**2 - (cx - r1) ** 2)
th2 = math.atan2(cy - B[1], cx - B[0])
th3 = math.atan2(cy, cx - r0)


W0 = 2.0  # default crank rate w

# Velocities at t = 0 from the loop closure r1 ω1 e⊥(θ1) + r2 ω2 e⊥(θ2) = r3 ω3 e⊥(θ3),
# e⊥(θ) = (−sin θ, cos θ), with ω1 = w (Cramer's rule on the two components).
s2, c2, s3, c3 = math.sin(th2), math.cos(th2), math.sin(th3), math.cos(th3)
b1, b2 = 0.0, -r1 * W0  # right side for θ1 = 0: −r1 ω1 e⊥(0) = (0, −r1 ω1)
det = (-r2 * s2) * (-r3 * c3) - (r3 * s3) * (r2 * c2)
w2 = (b1 * (-r3 * c3) - (r3 * s3) * b2) / det
w3 = ((-r2 * s2) * b2 - b1 * (r2 * c2)) / det


def _bar(
    name: str,
    length: float,
    start: tuple[float, float],
    start_velocity: tuple[float, float],
    angle: float,
    omega: float,
) -> Body:
    """A slender bar from ``start`` at ``angle``, its centroid at the middle; the
    centroid's velocity follows from the velocity of ``start`` and ``omega``."""
    c, s = math.cos(angle), math.sin(angle)
    centroid = (start[0] + length / 2 * c, start[1] + length / 2 * s)
    v = (start_velocity[0] - omega * length / 2 * s, start_velocity[1] + omega * length / 2 * c)
    return planar.body(name, 1.0, length**2 / 12, q0=(*centroid, angle), qd0=(*v, omega))


crank = _bar("crank", r1, (0.0, 0.0), (0.0, 0.0), 0.0, W0)
coupler = _bar("coupler", r2, B, (0.0, r1 * W0), th2, w2)
rocker = _bar("rocker", r3, (r0, 0.0), (0.0, 0.0), th3, w3)

model = Mechanism(
    name="fourbar",
    description="crank-driven four-bar linkage in planar body coordinates (Haug 1989 §5.1)",
    bodies=[crank, coupler, rocker],
    elements=[
        planar.revolute("A", GROUND, (0.0, 0.0), crank, (-r1 / 2, 0.0)),
        planar.revolute("B", crank, (r1 / 2, 0.0), coupler, (-r2 / 2, 0.0)),
        planar.revolute("C", coupler, (r2 / 2, 0.0), rocker, (r3 / 2, 0.0)),
        planar.revolute("D", GROUND, (r0, 0.0), rocker, (-r3 / 2, 0.0)),
        planar.angle_driver("drive", crank, th10 + w * t),
    ],
    parameters={w: W0, th10: 0.0},
)
