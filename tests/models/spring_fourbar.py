"""Test-only model: a free crank-rocker four-bar under gravity with a spring, a
conservative system for the tolerance → error measurements.

The links of ``models/fourbar.py`` (Haug 1989, §5.1-5.2: ground pivots A = (0, 0) and
D = (3, 0), crank 1, coupler 3, rocker 2.5 m, slender bars of 1 kg), without the crank
driver: one degree of freedom.  Gravity 9.81 m/s² along −y, and an undamped spring
(k = 20 N/m, free length 1 m) from the ground point (1.5, 3) to the coupler's centroid.
It starts in the closure at crank angle 0 with the crank turning at 2 rad/s (the
other links' rates from the loop closure); the crank swings up to about 1.03 rad and
back past −0.6 rad in 2 s.
"""

import math

from mbdgen.model import GROUND, Mechanism, forces, planar

r1, r2, r3, r0 = 1.0, 3.0, 2.5, 3.0
W0 = 2.0

B = (r1, 0.0)
cx = (r2**2 - r3**2 - r1**2 + r0**2) / (2 * (r0 - r1))
cy = math.sqrt(r2**2 - (cx - r1) ** 2)
th2 = math.atan2(cy - B[1], cx - B[0])
th3 = math.atan2(cy, cx - r0)
s2, c2, s3, c3 = math.sin(th2), math.cos(th2), math.sin(th3), math.cos(th3)
b1, b2 = 0.0, -r1 * W0
det = (-r2 * s2) * (-r3 * c3) - (r3 * s3) * (r2 * c2)
w2 = (b1 * (-r3 * c3) - (r3 * s3) * b2) / det
w3 = ((-r2 * s2) * b2 - b1 * (r2 * c2)) / det


def _bar(name, length, start, start_velocity, angle, omega):
    c, s = math.cos(angle), math.sin(angle)
    centroid = (start[0] + length / 2 * c, start[1] + length / 2 * s)
    v = (start_velocity[0] - omega * length / 2 * s, start_velocity[1] + omega * length / 2 * c)
    return planar.body(name, 1.0, length**2 / 12, q0=(*centroid, angle), qd0=(*v, omega))


crank = _bar("crank", r1, (0.0, 0.0), (0.0, 0.0), 0.0, W0)
coupler = _bar("coupler", r2, B, (0.0, r1 * W0), th2, w2)
rocker = _bar("rocker", r3, (r0, 0.0), (0.0, 0.0), th3, w3)

model = Mechanism(
    name="spring_fourbar",
    description="free crank-rocker four-bar under gravity with a spring (links of Haug 1989 §5.1)",
    bodies=[crank, coupler, rocker],
    elements=[
        planar.revolute("A", GROUND, (0.0, 0.0), crank, (-r1 / 2, 0.0)),
        planar.revolute("B", crank, (r1 / 2, 0.0), coupler, (-r2 / 2, 0.0)),
        planar.revolute("C", coupler, (r2 / 2, 0.0), rocker, (r3 / 2, 0.0)),
        planar.revolute("D", GROUND, (r0, 0.0), rocker, (-r3 / 2, 0.0)),
        *forces.gravity([crank, coupler, rocker], (0.0, -9.81)),
        forces.tsda("spring", GROUND, (1.5, 3.0), coupler, (0.0, 0.0), k=20.0, l0=1.0),
    ],
)
