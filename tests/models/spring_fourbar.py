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

import sys
from pathlib import Path

from mbdgen.model import GROUND, Mechanism, forces, planar

# the links, their closure and their velocities at t0: those of the driven four-bar
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models"))
from fourbar import coupler, crank, r0, r1, r2, r3, rocker  # noqa: E402

sys.path.pop(0)

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
