"""A particle on a circle in Cartesian coordinates: the classic test of re-partitioning.

q = [x, y], M = diag(m, m), Q = [0, −m g], Φ = x² + y² − l² (one constraint, one
degree of freedom).  Which coordinate is dependent must change every quarter turn
(Φ_x = 2x vanishes at the top and bottom, Φ_y = 2y at the sides), so generalized
coordinate partitioning (Haug 1989 §7.3.2, step 7) has to re-partition.  Started at
(l, 0) moving up at 6 m/s, faster than √(3 g l) = 5.4 m/s, it loops the loop.
"""

import sympy as sp

from mbdgen.model import Model

x, y = sp.symbols("x y")
m, g, l = sp.symbols("m g l")

model = Model(
    name="circle",
    description="Particle on a circle (tests of coordinate partitioning)",
    coordinates=[x, y],
    parameters={m: 1.0, g: 9.81, l: 1.0},
    mass=sp.diag(m, m),
    force=[0, -m * g],
    potential=m * g * y,
    constraints=[x**2 + y**2 - l**2],
    q0=[1.0, 0.0],
    qd0=[0.0, 6.0],
)
