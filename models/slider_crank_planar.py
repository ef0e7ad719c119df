"""Slider-crank of Wu, Chiou & Lin 2000 and Welch et al. 2007 as two planar bodies.

Source: the same mechanism as ``models/slider_crank.py`` (Wu, Chiou & Lin 2000,
Eqs. 35-37; Welch, Hong, Trapp & Choi 2007, Eqs. 71-76, Table 2): crank radius
r = 0.3 m with polar moment J1 = 0.045 kg·m² about its pivot, connecting rod of length
L = 0.5 m whose mass m = 1 kg is lumped at L1 = 0.3 m from the crank pin, rod inertia
J2 = 33/4800 kg·m², g = 10 m/s²; the rod's far end slides on the line y = 0.

Mapping onto planar bodies (q_i = [x_i, y_i, φ_i], Haug 1989 ch. 3-6):

* ``crank``: reference point at the ground pivot, pinned there by a revolute joint at
  its own origin, so its x, y stay 0 and its angle is Wu's θ.  Its J is J1 (about the
  pivot); its mass m_c = 1 kg is arbitrary — the pinned origin never moves, so m_c
  only changes the pivot reaction, not the motion.
* ``rod``: reference point at the lumped mass (Wu's x, y), angle φ, inertia J2.  The
  crank pin is the rod point (−L1, 0) and the crank point (r, 0); the slider end is the
  rod point (L − L1, 0) = (0.2, 0), held on y = 0 by an absolute y constraint (Wu's
  third constraint (L − L1) sin φ + y = 0).

So Φ = [r cos θ − x + L1 cos φ, r sin θ − y + L1 sin φ, y + (L − L1) sin φ] plus the
two pivot rows; the motion equals the generalized-coordinate model's.  The initial
values are Eq. 75 of Welch et al. (four digits; assemble holding ``crank_phi``).
"""

from mbdgen.model import GROUND, Mechanism, planar

r, L, L1 = 0.3, 0.5, 0.3
crank = planar.body("crank", m=1.0, J=0.045, q0=(0.0, 0.0, 0.9851))
rod = planar.body("rod", m=1.0, J=33 / 4800, q0=(0.4256, 0.1000, -0.5236))

model = Mechanism(
    name="slider_crank_planar",
    description="Slider-crank of Wu et al. 2000 / Welch et al. 2007 as planar bodies",
    bodies=[crank, rod],
    elements=[
        planar.revolute("pivot", GROUND, (0.0, 0.0), crank, (0.0, 0.0)),
        planar.revolute("pin", crank, (r, 0.0), rod, (-L1, 0.0)),
        planar.absolute_y("slider", rod, (L - L1, 0.0), 0.0),
        planar.gravity([crank, rod], (0.0, -10.0)),
    ],
)
