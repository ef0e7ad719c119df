"""Bricard's mechanism (IFToMM benchmark A04): five unit rods, six revolutes, one DOF.

Source: the IFToMM Library of Computational Benchmark Problems, problem A04 (González,
Dopico, Lugrís & Cuadrado, "A benchmarking system for MBS simulation software", 2006;
Bricard 1897): five rods of length 1 m and mass 1 kg (square cross section 0.1 m)
closed by the ground into a loop of six revolute joints.  Grübler's count gives
6·5 − 5·6 = 0 degrees of freedom, yet the orientation of the axes leaves one: one
constraint row is redundant at every configuration.  Gravity 9.81 m/s² along −y (as
the benchmark states); no dissipation, so the total energy is conserved.

Geometry: the orthogonal Bricard linkage on the edges of the unit cube.  The joints
sit at V0 = (0, 0, 0), V1 = (1, 0, 0), V2 = (1, 1, 0), V3 = (1, 1, 1),
V4 = (0, 1, 1), V5 = (0, 0, 1); rod i runs from V(i−1) to Vi and the ground closes
V5 → V0.  Each joint's axis is perpendicular to the two links it connects (J1 at V0:
y, J2 at V1: z, J3 at V2: x, J4 at V3: y, J5 at V4: z, J6 at V5: x).  (The published
benchmark's own initial coordinates were not at hand; the tests check invariants, the
energy and ‖Φ‖, not its trajectory of point P3.)  Released at rest, body frames
aligned with the global axes at t0.
"""

from mbdgen.model import GROUND, Mechanism, spatial

L, M, A = 1.0, 1.0, 0.1
J_AXIAL = M * 2 * A * A / 12  # about the rod's own axis
J_TRANSVERSE = M * (L * L + A * A) / 12

V = [
    (0.0, 0.0, 0.0),
    (1.0, 0.0, 0.0),
    (1.0, 1.0, 0.0),
    (1.0, 1.0, 1.0),
    (0.0, 1.0, 1.0),
    (0.0, 0.0, 1.0),
]
X, Y, Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)


def _rod(i: int):
    """Rod i (1..5) from V[i-1] to V[i]: centroid at the middle, frame = global frame."""
    a, b = V[i - 1], V[i]
    d = tuple(bj - aj for aj, bj in zip(a, b, strict=True))
    axis = max(range(3), key=lambda k: abs(d[k]))
    J = [J_TRANSVERSE] * 3
    J[axis] = J_AXIAL
    centroid = tuple((aj + bj) / 2 for aj, bj in zip(a, b, strict=True))
    body = spatial.body(f"rod{i}", M, tuple(J), q0=(*centroid, 1.0, 0.0, 0.0, 0.0))
    half = tuple(dj / 2 for dj in d)
    return body, tuple(-h for h in half), half  # body, start point, end point (local)


rods = [_rod(i) for i in range(1, 6)]
(r1, s1, e1), (r2, s2, e2), (r3, s3, e3), (r4, s4, e4), (r5, s5, e5) = rods

model = Mechanism(
    name="bricard",
    description="Bricard's over-constrained 6R mechanism, IFToMM benchmark A04 (tests only)",
    bodies=[r1, r2, r3, r4, r5],
    elements=[
        spatial.revolute("J1", GROUND, V[0], r1, s1, Y, Y),
        spatial.revolute("J2", r1, e1, r2, s2, Z, Z),
        spatial.revolute("J3", r2, e2, r3, s3, X, X),
        spatial.revolute("J4", r3, e3, r4, s4, Y, Y),
        spatial.revolute("J5", r4, e4, r5, s5, Z, Z),
        spatial.revolute("J6", r5, e5, GROUND, V[5], X, X),
        *spatial.gravity([r1, r2, r3, r4, r5], (0.0, -9.81, 0.0)),
    ],
)
