"""Test-only: a planar parallelogram four-bar with a third, parallel crank (over-constrained).

The classic redundant planar linkage: three equal cranks of length 1 hang from ground
pivots at (0, 0), (1, 0) and (2, 0) and carry a coupler of length 2 pinned to their
tips at its ends and middle.  Four planar bodies (12 coordinates) and six revolute
joints (12 rows): Grübler's count gives 0 degrees of freedom, but the equal, parallel
cranks keep one (the coupler translates on a circle), so one row of Φ_q depends on
the others at every configuration.  Gravity 9.81 along −y, no dissipation; released
at rest with the cranks 0.6 rad from hanging straight down.
"""

import math

from mbdgen.model import GROUND, Mechanism, planar

TH0 = -math.pi / 2 + 0.6  # crank angle from the x axis
U = (math.cos(TH0), math.sin(TH0))


def _crank(name: str, x0: float):
    centroid = (x0 + 0.5 * U[0], 0.5 * U[1])
    return planar.body(name, 1.0, 1.0 / 12.0, q0=(*centroid, TH0))


crank_a = _crank("crank_a", 0.0)
crank_b = _crank("crank_b", 1.0)
crank_c = _crank("crank_c", 2.0)
coupler = planar.body("coupler", 2.0, 2.0 * 4.0 / 12.0, q0=(1.0 + U[0], U[1], 0.0))

model = Mechanism(
    name="double_parallelogram",
    description="parallelogram four-bar with a third parallel crank (redundant; tests only)",
    bodies=[crank_a, crank_b, crank_c, coupler],
    elements=[
        planar.revolute("A0", GROUND, (0.0, 0.0), crank_a, (-0.5, 0.0)),
        planar.revolute("B0", GROUND, (1.0, 0.0), crank_b, (-0.5, 0.0)),
        planar.revolute("C0", GROUND, (2.0, 0.0), crank_c, (-0.5, 0.0)),
        planar.revolute("A1", crank_a, (0.5, 0.0), coupler, (-1.0, 0.0)),
        planar.revolute("B1", crank_b, (0.5, 0.0), coupler, (0.0, 0.0)),
        planar.revolute("C1", crank_c, (0.5, 0.0), coupler, (1.0, 0.0)),
        *planar.gravity([crank_a, crank_b, crank_c, coupler]),
    ],
)
