"""Heavy top: one spatial body (Euler parameters) on a ground spherical joint, spinning.

A test model of the order tests (tests/test_order_spatial.py): its mass matrix
M = diag(mI, 4GᵀJ′G) depends on the Euler parameters, unlike a planar body's.  The top
(m = 2 kg, J′ = diag(0.3, 0.3, 0.1) kg·m² about its centroid, centroid 0.5 m from the
tip along its body z axis) starts tilted 0.3 rad about x, spinning at 20 rad/s about its
own axis; ṙ = 0 is consistent with the pivot, which lies on the spin axis.
"""

import math

from mbdgen.model import GROUND, Mechanism, spatial

TILT = 0.3
r0 = (0.0, -0.5 * math.sin(TILT), 0.5 * math.cos(TILT))
p0 = (math.cos(TILT / 2), math.sin(TILT / 2), 0.0, 0.0)
top = spatial.body(
    "top", 2.0, (0.3, 0.3, 0.1), q0=r0 + p0, qd0=(0.0, 0.0, 0.0), omega0=(0.0, 0.0, 20.0)
)

model = Mechanism(
    name="heavy_top",
    description="Heavy top on a spherical joint, Euler parameters (order tests)",
    bodies=[top],
    elements=[
        spatial.spherical("tip", GROUND, (0.0, 0.0, 0.0), top, (0.0, 0.0, -0.5)),
        spatial.gravity([top], (0.0, 0.0, -9.81)),
    ],
)
