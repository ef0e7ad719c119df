"""Spatial slider-crank: crank, connecting rod and slider (Haug 1989, ch. 9-11).

Topology of Haug's spatial slider-crank (Haug 1989, §9.4 joints): the crank turns on
a revolute joint to the ground, the connecting rod is joined to the crank by a
spherical joint and to the slider by a universal joint (which stops the rod's spin
about its own axis), and the slider moves on a translational joint along the global
x axis.  3 bodies × 7 coordinates = 21; constraints 5 + 3 + 4 + 5 + 3 normalizations
= 20; one degree of freedom.

The geometry is that of the textbook spatial slider-crank as we recall it (crank
pivot at (0, 0.1, 0.12) m with its axis along x, crank radius 0.08 m, rod length
0.3 m, slider on the x axis), not checked against the book; the inertia data are our
choice: steel (7800 kg/m³) prisms — crank 0.08 × 0.01 × 0.01 m, rod 0.3 × 0.01 ×
0.01 m, slider a 0.05 m cube.  The crank pin stays within 0.236 m of the x axis, so
the crank can turn fully.

Initial state: crank along +y (pin B = (0, 0.18, 0.12)), slider at
x = √(0.3² − 0.18² − 0.12²), every body at rest, gravity −9.81 m/s² along z.  The rod's
body x axis points from B to the slider, its y axis is the universal joint's cross
axis z × (rod axis); the slider's cross axis is z.
"""

import math

from mbdgen.model import GROUND, Mechanism, spatial

RHO = 7800.0
PIVOT = (0.0, 0.1, 0.12)
R_CRANK, L_ROD = 0.08, 0.3

pin = (0.0, PIVOT[1] + R_CRANK, PIVOT[2])
x_slider = math.sqrt(L_ROD**2 - pin[1] ** 2 - pin[2] ** 2)
u = [(x_slider - pin[0]) / L_ROD, -pin[1] / L_ROD, -pin[2] / L_ROD]  # rod axis, B → D
y_rod = [-u[1], u[0], 0.0]  # z × u
ny = math.hypot(y_rod[0], y_rod[1])
y_rod = [c / ny for c in y_rod]
z_rod = [
    u[1] * y_rod[2] - u[2] * y_rod[1],
    u[2] * y_rod[0] - u[0] * y_rod[2],
    u[0] * y_rod[1] - u[1] * y_rod[0],
]
R_rod = [[u[i], y_rod[i], z_rod[i]] for i in range(3)]

m_c, J_c = spatial.prism_inertia(R_CRANK, 0.01, RHO, (0.0, 1.0, 0.0))
m_r, J_r = spatial.prism_inertia(L_ROD, 0.01, RHO, (1.0, 0.0, 0.0))
m_s, J_s = spatial.prism_inertia(0.05, 0.05, RHO)

crank = spatial.body(
    "crank", m_c, J_c, q0=(0.0, PIVOT[1] + R_CRANK / 2, PIVOT[2], 1.0, 0.0, 0.0, 0.0)
)
rod = spatial.body(
    "rod",
    m_r,
    J_r,
    q0=(x_slider / 2, pin[1] / 2, pin[2] / 2, *spatial.euler_parameters(R_rod)),
)
slider = spatial.body("slider", m_s, J_s, q0=(x_slider, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0))
X = (1.0, 0.0, 0.0)

model = Mechanism(
    name="spatial_slider_crank",
    description="Spatial slider-crank (topology of Haug 1989's example; data documented)",
    bodies=[crank, rod, slider],
    elements=[
        spatial.revolute("crank_rev", GROUND, PIVOT, crank, (0.0, -R_CRANK / 2, 0.0), X, X),
        spatial.spherical("crank_rod", crank, (0.0, R_CRANK / 2, 0.0), rod, (-L_ROD / 2, 0.0, 0.0)),
        spatial.universal(
            "rod_slider",
            rod,
            (L_ROD / 2, 0.0, 0.0),
            slider,
            (0.0, 0.0, 0.0),
            h_i=(0.0, 1.0, 0.0),
            h_j=(0.0, 0.0, 1.0),
        ),
        spatial.translational(
            "slider_trans", GROUND, (0.0, 0.0, 0.0), slider, (0.0, 0.0, 0.0), X, X
        ),
        spatial.gravity([crank, rod, slider], (0.0, 0.0, -9.81)),
    ],
)
