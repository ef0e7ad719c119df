"""Double pendulum stiffened by two rotational spring–damper–actuators (RSDA).

Source: Haug, Negrut & Iancu 1997, §4.1 (Fig. 6, Tables 1-2): two planar bodies in
Cartesian coordinates q_i = [x_i, y_i, θ_i], the first pinned to ground, the second
to the first, with an RSDA at each revolute joint that adds "a large amount of
stiffness".  Only L1 = 1.0 survives in the printed Table 1 and only one row of Table 2
(read here as the velocities: body 2 turning at θ̇2 = 10 rad/s, all else at rest), so
the values below are our choice, documented here:

* two uniform slender bars, L1 = L2 = 1 m, m1 = m2 = 1 kg, J = m L²/12;
* RSDA 1 between ground and body 1, RSDA 2 between bodies 1 and 2 (Haug 1989, ch. 6):
  k1 = k2 = 1000 N·m/rad, c1 = c2 = 5 N·m·s/rad, free relative angles θ0 = 0 —
  k L/(m g) ≈ 100, so the springs dominate gravity and the highest natural frequency
  (≈ 80 rad/s) sets the step size of explicit integrators;
* gravity g = 9.81 m/s² along −y;
* start: both links horizontal along +x (the springs' free position), body 1 at rest,
  body 2 turning at 10 rad/s about the joint (so its centroid moves at 5 m/s along +y).

Set ``rsda1_c`` and ``rsda2_c`` to 0 for a conservative system (energy tests).
"""

from mbdgen.model import GROUND, Mechanism, forces, planar

L, m = 1.0, 1.0
J = m * L**2 / 12
link1 = planar.body("link1", m, J, q0=(L / 2, 0.0, 0.0))
link2 = planar.body("link2", m, J, q0=(3 * L / 2, 0.0, 0.0), qd0=(0.0, 10.0 * L / 2, 10.0))

model = Mechanism(
    name="double_pendulum_rsda",
    description="Double pendulum with two RSDAs, Haug, Negrut & Iancu 1997 §4.1",
    bodies=[link1, link2],
    elements=[
        planar.revolute("hinge1", GROUND, (0.0, 0.0), link1, (-L / 2, 0.0)),
        planar.revolute("hinge2", link1, (L / 2, 0.0), link2, (-L / 2, 0.0)),
        forces.rsda("rsda1", GROUND, link1, k=1000.0, c=5.0, theta0=0.0),
        forces.rsda("rsda2", link1, link2, k=1000.0, c=5.0, theta0=0.0),
        forces.gravity([link1, link2], (0.0, -9.81)),
    ],
)
