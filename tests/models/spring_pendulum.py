"""Test-only model: a damped bar on a revolute joint with a preloaded torsional spring.

The bar's centroid (x, y) lies at distance l from the pivot at the origin, at angle φ
from the downward vertical: (x, y) = (l sin φ, −l cos φ); gravity acts along −y.
A torsional spring k (φ_s − φ) with free angle φ_s and a viscous damper −c φ̇ act on
φ.  Equilibrium (q̇ = 0): k (φ_s − φ) = m g l sin φ.
"""

import sympy as sp

from mbdgen.model import Model, speeds

x, y, phi = sp.symbols("x y phi")
xd, yd, phid = speeds([x, y, phi])
m, J, l, g, k, phis, c = sp.symbols("m J l g k phis c")

model = Model(
    name="spring_pendulum",
    description="bar with a preloaded torsional spring and damper under gravity (tests only)",
    coordinates=[x, y, phi],
    parameters={m: 1.0, J: 0.08, l: 0.5, g: 9.81, k: 5.0, phis: 1.2, c: 0.3},
    mass=sp.diag(m, m, J),
    force=[0, -m * g, k * (phis - phi) - c * phid],
    constraints=[x - l * sp.sin(phi), y + l * sp.cos(phi)],
    q0=[0.0, -0.5, 0.0],
    qd0=[0.0, 0.0, 0.0],
)
