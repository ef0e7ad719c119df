"""IFToMM benchmark A01: the simple pendulum (a point mass on a massless rigid link).

Source: the IFToMM Library of Computational Benchmark Problems
(library.iftomm-multibody.org), problem A01 "Simple pendulum", after González,
Dopico, Lugrís & Cuadrado, "A benchmarking system for MBS simulation software",
Multibody System Dynamics 16 (2006).  Data as published: a lumped mass of 1 kg on a
massless link of length 1 m pinned to the ground at the origin, gravity 9.81 N/kg
along −y; initially at rest and horizontal with the mass at x = +1 m, y = 0.  The
benchmark's analysis runs 2000 s and reports the time history of the mass's (x, y)
(errors allowed 1e-1 / 1e-3, low / high precision) and, being conservative, the
mechanical energy stays constant.

The mass is a planar point mass (coordinates x, y only) and the link a distance
constraint x² + y² − L² = 0 to the ground (Haug 1989, §3.3 composite joints): two
coordinates, one constraint, one degree of freedom.  Its period for a release at
90° is T = 4 √(L/g) K(sin 45°) (complete elliptic integral of the first kind), the
quantity ``tests/test_iftomm.py`` checks with the energy.
"""

from mbdgen.model import GROUND, Mechanism, planar

L, M, G = 1.0, 1.0, 9.81

mass = planar.point_mass("mass", M, q0=(L, 0.0))

model = Mechanism(
    name="iftomm_a01_pendulum",
    description="IFToMM benchmark A01: simple pendulum, point mass on a massless link",
    bodies=[mass],
    elements=[
        planar.distance("link", GROUND, (0.0, 0.0), mass, (0.0, 0.0), L),
        planar.gravity([mass], (0.0, -G)),
    ],
)
