"""Crank and connecting rod held by a translational spring–damper–actuator (TSDA).

Source: Haug, Negrut & Iancu 1997, §4.2 (Fig. 7, Tables 3-4): "a two body, two degree
of freedom planar mechanical system" in Cartesian coordinates with a TSDA attached at
the tip of body 2.  Table 3 keeps L1 = 0.3, m1 = 3.0, L2 = 0.6, m2 = 9.0 (SI); k and c
are lost, and Table 4's positions do not fit one reading of the figure, except that the
rod's tip starts at x = 0.5196152 = L2 cos 30° with the crank vertical.  Our choices:

* crank (body 1): uniform bar of length L1 = 0.3 m, m1 = 3 kg, J1 = m1 L1²/12, pinned
  to ground at its end (the origin), starting vertical (θ1 = π/2);
* rod (body 2): uniform bar of length L2 = 0.6 m, m2 = 9 kg, J2 = m2 L2²/12, pinned to
  the crank's tip (0, 0.3) and starting at θ2 = −π/6, so its tip is at (0.5196152, 0)
  — where the slider of a slider-crank would be; there is no slider (two degrees of
  freedom, as the paper says);
* TSDA from the rod's tip to the ground point (1.2, 0) (Haug 1989, ch. 6):
  k = 10⁴ N/m, c = 50 N·s/m, free length ℓ0 = 0.6 m (the initial length is 0.6804 m,
  so the spring starts stretched);
* gravity g = 9.81 m/s² along −y; start at rest; the paper integrates over T = 0.1 s.
"""

import math

from mbdgen.model import GROUND, Mechanism, forces, planar

L1, m1, L2, m2 = 0.3, 3.0, 0.6, 9.0
th2 = -math.pi / 6
pin = (0.0, L1)
crank = planar.body("crank", m1, m1 * L1**2 / 12, q0=(0.0, L1 / 2, math.pi / 2))
rod = planar.body(
    "rod",
    m2,
    m2 * L2**2 / 12,
    q0=(pin[0] + L2 / 2 * math.cos(th2), pin[1] + L2 / 2 * math.sin(th2), th2),
)

model = Mechanism(
    name="slider_crank_tsda",
    description="Crank and rod with a TSDA, Haug, Negrut & Iancu 1997 §4.2",
    bodies=[crank, rod],
    elements=[
        planar.revolute("pivot", GROUND, (0.0, 0.0), crank, (-L1 / 2, 0.0)),
        planar.revolute("pin", crank, (L1 / 2, 0.0), rod, (-L2 / 2, 0.0)),
        forces.tsda("spring", rod, (L2 / 2, 0.0), GROUND, (1.2, 0.0), k=1.0e4, c=50.0, l0=0.6),
        forces.gravity([crank, rod], (0.0, -9.81)),
    ],
)
