"""Simple pendulum in planar Cartesian coordinates q = [x1, y1, φ1].

Source: Haug 1989, Example 7.2.1 (the pendulum of Example 6.3.1): a body whose
centroid (x1, y1) lies at distance l from a ground pivot at the origin,

    Φ = [x1 − l cos φ1,  y1 − l sin φ1],   M = diag(m, m, J),   Q = [0, −m g, 0].

Parameters: a slender bar of length 2l pinned at one end (J = m l²/3 about the
centroid), m = 1 kg, l = 1 m, g = 9.81 m/s².  The reduced equation of motion is
(J + m l²) φ̈ = −m g l cos φ (Haug 1989, Example 7.2.1 with l = 1).  It starts at
rest with the bar horizontal (φ1 = 0).
"""

import sympy as sp

from mbdgen.model import Model

x1, y1, phi1 = sp.symbols("x1 y1 phi1")
m, J, l, g = sp.symbols("m J l g")

model = Model(
    name="pendulum",
    description="Simple pendulum, Haug 1989 Example 7.2.1",
    coordinates=[x1, y1, phi1],
    parameters={m: 1.0, J: 1.0 / 3.0, l: 1.0, g: 9.81},
    mass=sp.diag(m, m, J),
    force=[0, -m * g, 0],
    potential=m * g * y1,
    constraints=[x1 - l * sp.cos(phi1), y1 - l * sp.sin(phi1)],
    q0=[1.0, 0.0, 0.0],
    qd0=[0.0, 0.0, 0.0],
)
