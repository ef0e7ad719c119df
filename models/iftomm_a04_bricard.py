"""IFToMM benchmark A04: Bricard's mechanism, over-constrained, with one degree of freedom.

Source: the IFToMM Library of Computational Benchmark Problems
(library.iftomm-multibody.org), problem A04 "Bricard's mechanism", after González,
Dopico, Lugrís & Cuadrado, "A benchmarking system for MBS simulation software",
Multibody System Dynamics 16 (2006); the linkage is Bricard's (1897).  Data as
published: five rods of length 1 m and mass 1 kg with a square cross-section of
side 0.1 m, closed through the ground by six revolute joints; gravity 9.81 N/kg
along −y; no dissipation.  Grübler's count gives 6·5 − 5·6 = 0 degrees of freedom,
but the orientation of the axes leaves one: one constraint row is redundant at
every configuration.  The benchmark reports the mechanical energy (constant) and
the time history of point P3 over 10 s (reference trajectory not reproduced here).

Geometry (the benchmark's figure, on the edges of the unit cube): the joints sit at
P0 = (0, 0, 0), P1 = (1, 0, 0), P2 = (1, −1, 0), P3 = (1, −1, 1), P4 = (0, −1, 1),
P5 = (0, 0, 1); rod i runs from P(i−1) to Pi and the ground closes P5 → P0.  Each
joint's axis is perpendicular to both links it joins (J1 at P0: y, J2 at P1: z, J3
at P2: x, J4 at P3: y, J5 at P4: z, J6 at P5: x).  The rods are released at rest
(the benchmark's initial velocity), body frames parallel to the global axes.
Inertia of a uniform square prism (Haug 1989, §11.1): m (L² + a²)/12 across the rod,
m a²/6 about it.

The redundant row is found at t0 and left out by the integrators
(:func:`mbdgen.analysis.assembly.removable_rows`); GCP and the hybrid algorithm
refuse the mechanism.  ``tests/models/bricard.py`` is the same linkage mirrored in y
(rods above the x–z plane), kept for the redundancy tests.
"""

from mbdgen.model import GROUND, Mechanism, spatial

L, M, A = 1.0, 1.0, 0.1
J_AXIAL = M * 2 * A * A / 12
J_TRANSVERSE = M * (L * L + A * A) / 12

P = [
    (0.0, 0.0, 0.0),
    (1.0, 0.0, 0.0),
    (1.0, -1.0, 0.0),
    (1.0, -1.0, 1.0),
    (0.0, -1.0, 1.0),
    (0.0, 0.0, 1.0),
]
X, Y, Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)


def _rod(i: int):
    """Rod i (1 … 5) from P(i−1) to Pi: centroid at mid-length, frame = global frame."""
    a, b = P[i - 1], P[i]
    d = tuple(bj - aj for aj, bj in zip(a, b, strict=True))
    J = [J_TRANSVERSE] * 3
    J[max(range(3), key=lambda k: abs(d[k]))] = J_AXIAL
    centroid = tuple((aj + bj) / 2 for aj, bj in zip(a, b, strict=True))
    rod = spatial.body(f"rod{i}", M, tuple(J), q0=(*centroid, 1.0, 0.0, 0.0, 0.0))
    half = tuple(dj / 2 for dj in d)
    return rod, tuple(-h for h in half), half  # body, start and end points (local)


(r1, s1, e1), (r2, s2, e2), (r3, s3, e3), (r4, s4, e4), (r5, s5, e5) = (
    _rod(i) for i in range(1, 6)
)
rods = [r1, r2, r3, r4, r5]

model = Mechanism(
    name="iftomm_a04_bricard",
    description="IFToMM benchmark A04: Bricard's over-constrained 6R mechanism",
    bodies=rods,
    elements=[
        spatial.revolute("J1", GROUND, P[0], r1, s1, Y, Y),
        spatial.revolute("J2", r1, e1, r2, s2, Z, Z),
        spatial.revolute("J3", r2, e2, r3, s3, X, X),
        spatial.revolute("J4", r3, e3, r4, s4, Y, Y),
        spatial.revolute("J5", r4, e4, r5, s5, Z, Z),
        spatial.revolute("J6", r5, e5, GROUND, P[5], X, X),
        spatial.gravity(rods, (0.0, -9.81, 0.0)),
    ],
)
