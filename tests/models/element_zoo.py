"""Test-only mechanism with one instance or more of many element types (element path).

Independent subsystems in one model, so that one compile covers them all:

* a planar bar hanging at rest below a ground revolute (reaction = weight);
* a planar double pendulum with a TSDA to the ground, an RSDA between the links, a
  torque with a user expression in t and a parameter, and a point load in the body frame;
* a spatial body hanging at rest below a ground spherical joint (reaction = weight);
* a spatial pendulum on a revolute joint whose axis is tilted, with a spatial TSDA.

Gravity g = (0, −9.81, 0) acts on every body.
"""

import math

import sympy as sp

from mbdgen.model import GROUND, Mechanism, forces, planar, spatial
from mbdgen.model.core import t

amp = sp.Symbol("amp")
L = 1.0
hang = planar.body("hang", m=2.0, J=2.0 / 12, q0=(0.0, -L / 2, 0.0))
a = 0.4
link1 = planar.body("link1", m=1.0, J=1 / 12, q0=(5 + 0.5 * math.cos(a), 0.5 * math.sin(a), a))
link2 = planar.body(
    "link2", m=1.5, J=1.5 / 12, q0=(5 + math.cos(a) + 0.5, 0.0, 0.0), qd0=(0.0, 1.0, 2.0)
)
sbody = spatial.body("sbody", m=3.0, J=(0.3, 0.2, 0.1), q0=(10.0, -0.5, 0.0, 1.0, 0.0, 0.0, 0.0))
c, s = math.cos(0.3), math.sin(0.3)
arm = spatial.body("arm", m=1.0, J=(0.1, 0.1, 0.02), q0=(15.0, -0.5, 0.0, 1.0, 0.0, 0.0, 0.0))

model = Mechanism(
    name="element_zoo",
    description="test zoo of element types (tests/test_elements.py)",
    bodies=[hang, link1, link2, sbody, arm],
    parameters={amp: 0.5},
    elements=[
        planar.revolute("hang_pin", GROUND, (0.0, 0.0), hang, (0.0, L / 2)),
        planar.revolute("pin1", GROUND, (5.0, 0.0), link1, (-0.5, 0.0)),
        planar.revolute("pin2", link1, (0.5, 0.0), link2, (-0.5, 0.0)),
        forces.tsda("spring", GROUND, (6.0, 1.0), link2, (0.5, 0.0), k=20.0, l0=0.8),
        forces.rsda("twist", link1, link2, k=3.0, theta0=0.1),
        forces.torque("motor", link1, amp * sp.sin(2 * t)),
        forces.point_force("push", link2, (0.2, 0.0), (0.0, 0.3), frame="body"),
        spatial.spherical("ball", GROUND, (10.0, 0.0, 0.0), sbody, (0.0, 0.5, 0.0)),
        spatial.revolute(
            "hinge", GROUND, (15.0, 0.0, 0.0), arm, (0.0, 0.5, 0.0), (c, 0.0, s), (c, 0.0, s)
        ),
        forces.tsda("sspring", GROUND, (15.5, 0.0, 0.3), arm, (0.0, -0.5, 0.0), k=5.0, l0=0.5),
        forces.gravity([hang, link1, link2, sbody, arm], (0.0, -9.81, 0.0)),
    ],
)
