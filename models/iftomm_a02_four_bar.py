"""IFToMM benchmark A02: the N four-bar mechanism, here with N = 2 (the double four-bar).

Source: the IFToMM Library of Computational Benchmark Problems
(library.iftomm-multibody.org), problem A02 "N four-bar mechanism", after González,
Dopico, Lugrís & Cuadrado, "A benchmarking system for MBS simulation software",
Multibody System Dynamics 16 (2006); the two-window case is Bayo & Avello's (1994)
double four-bar.  Data as published: N four-bar windows made of 2N + 1 links of
length 1 m with a uniformly distributed mass of 1 kg, gravity 9.81 N/kg along −y;
the benchmark's own case is N = 40 over 20 s, with the time history of the position
and velocity of point B0 (the tip of the first crank) as reference solution.  Start:
the cranks vertical, the couplers horizontal on top of them, and ẋ of B0 = 1 m/s.

Layout: ground pivots A_k = (k L, 0), k = 0 … N; crank k turns about A_k, its tip
B_k = (k L, L) at t = 0; coupler k (k = 1 … N) joins B_(k−1) and B_k.  Every link is a
planar body with its centroid at mid-length and its local x axis along the link
(J = m L²/12); the cranks start at φ = π/2 turning at φ̇ = −1 rad/s (B0 moves at
+1 m/s along x), the couplers at φ = 0 translating at (1, 0) m/s.  3(2N + 1)
coordinates and 2(N + 1) + 4N revolute rows leave one degree of freedom.

What makes it a benchmark: each time the cranks pass the horizontal, every link
lies on the line y = 0 and Φ_q loses rank — the mechanism has N + 1 degrees of
freedom at that instant (a singular position) and must be carried through on the
parallelogram branch, where all cranks stay parallel.  It has no dissipation, so
the energy stays at its initial value.
"""

import math

from mbdgen.model import GROUND, Mechanism, planar

L, M, G = 1.0, 1.0, 9.81
V0 = 1.0  # ẋ of B0 at t = 0


def four_bars(n: int, name: str) -> Mechanism:
    """The N four-bar mechanism of IFToMM benchmark A02 with ``n`` windows."""
    J = M * L * L / 12
    w = -V0 / L
    cranks = [
        planar.body(f"crank{k}", M, J, q0=(k * L, L / 2, math.pi / 2), qd0=(-w * L / 2, 0.0, w))
        for k in range(n + 1)
    ]
    couplers = [
        planar.body(f"coupler{k}", M, J, q0=((k - 0.5) * L, L, 0.0), qd0=(V0, 0.0, 0.0))
        for k in range(1, n + 1)
    ]
    tail, head = (-L / 2, 0.0), (L / 2, 0.0)
    joints = [planar.revolute(f"A{k}", GROUND, (k * L, 0.0), c, tail) for k, c in enumerate(cranks)]
    for k, c in enumerate(couplers, start=1):
        joints.append(planar.revolute(f"B{k - 1}_{k}", cranks[k - 1], head, c, tail))
        joints.append(planar.revolute(f"B{k}_{k}", cranks[k], head, c, head))
    bodies = cranks + couplers
    return Mechanism(
        name=name,
        description=f"IFToMM benchmark A02: N four-bar mechanism, N = {n}",
        bodies=bodies,
        elements=[*joints, planar.gravity(bodies, (0.0, -G))],
    )


model = four_bars(2, "iftomm_a02_four_bar")
