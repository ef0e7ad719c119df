"""Test-only model: a bar pinned to ground and driven along φ(t) = φ0 + w t + α t²/2.

The bar's centroid (x, y) lies at distance l from the pivot at the origin at angle φ
from the horizontal x axis; gravity acts along −y; J is the centroidal inertia.
Φ = [x − l cos φ, y − l sin φ, φ − φ0 − w t − α t²/2]: two revolute-joint rows and
one rheonomic driver, so the bar is kinematically determined and inverse dynamics
gives the driving torque (hand-derived in tests/test_inverse.py).
"""

import sympy as sp

from mbdgen.model import Model, t

x, y, phi = sp.symbols("x y phi")
m, J, l, g, phi0, w, alpha = sp.symbols("m J l g phi0 w alpha")

model = Model(
    name="driven_pendulum",
    description="bar on a revolute joint with a quadratic angle driver (tests only)",
    coordinates=[x, y, phi],
    parameters={m: 2.0, J: 0.3, l: 0.7, g: 9.81, phi0: -0.4, w: 1.3, alpha: 0.8},
    mass=sp.diag(m, m, J),
    force=[0, -m * g, 0],
    constraints=[
        x - l * sp.cos(phi),
        y - l * sp.sin(phi),
        phi - phi0 - w * t - alpha * t**2 / 2,
    ],
    q0=[0.7 * 0.921, -0.7 * 0.389, -0.4],
    qd0=[0.0, 0.0, 0.0],
)
