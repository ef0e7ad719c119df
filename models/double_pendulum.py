"""Planar double pendulum of two slender links in Cartesian body coordinates.

Source: Welch, Hong, Trapp & Choi 2007, §V-VI, Eqs. 66-67 and Table 1: links of
length L = 5 and mass m = 1 (uniform bars, J = m L²/12 about the centroid), joined
by revolute joints, the first to ground at the origin; q = [x1, y1, θ1, x2, y2, θ2]
with θ measured so that a link's centroid sits at (L/2)(sin θ, cos θ) from its
proximal joint (Eq. 67).  Both links start horizontal at rest.

The paper prints neither g nor its direction.  Table 1 (x1 = 2.44, y1 = −0.53,
θ1 = 1.78 at t = 10) is reproduced with g = 10 m/s² acting along +x, the links
starting along +y (θ = 0): with Eq. 67 as printed, x is the vertical axis.
"""

import sympy as sp

from mbdgen.model import Model

x1, y1, th1, x2, y2, th2 = sp.symbols("x1 y1 th1 x2 y2 th2")
m, L, g = sp.symbols("m L g")
J = m * L**2 / 12

model = Model(
    name="double_pendulum",
    description="Double pendulum, Welch et al. 2007 Eqs. 66-67 (Table 1)",
    coordinates=[x1, y1, th1, x2, y2, th2],
    parameters={m: 1.0, L: 5.0, g: 10.0},
    mass=sp.diag(m, m, J, m, m, J),
    force=[m * g, 0, 0, m * g, 0, 0],
    potential=-m * g * (x1 + x2),  # g acts along +x
    constraints=[
        x1 - L / 2 * sp.sin(th1),
        y1 - L / 2 * sp.cos(th1),
        x2 - x1 - L / 2 * sp.sin(th1) - L / 2 * sp.sin(th2),
        y2 - y1 - L / 2 * sp.cos(th1) - L / 2 * sp.cos(th2),
    ],
    q0=[0.0, 2.5, 0.0, 0.0, 7.5, 0.0],
    qd0=[0.0] * 6,
)
