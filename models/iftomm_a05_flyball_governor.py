"""IFToMM benchmark A05: the stiff flyball governor.

Source: the IFToMM Library of Computational Benchmark Problems
(library.iftomm-multibody.org), problem A05 "Stiff flyball governor", after González,
Dopico, Lugrís & Cuadrado, "A benchmarking system for MBS simulation software",
Multibody System Dynamics 16 (2006).  Watt's governor with its coupler rods replaced
by stiff, heavily damped spring–dampers, which makes it the library's stiff problem.
Data as published: shaft and rods are prisms 1.0 × 0.01 × 0.01 m, the slider a cube of
side 0.1 m, all of density 3000 kg/m³ (shaft and rods 0.3 kg, slider 3 kg); a point
mass of 5 kg at the free end of each rod; spring–dampers K = 8e5 N/m, C = 4e4 N s/m,
rest length 0.5 m; the rods' pivots A and B 0.1 m apart at the top of the shaft;
initially the slider at height s = 0.5 m, the rods at α = 30° below the horizontal
(the springs at their rest length) and the whole governor turning rigidly at
2π rad/s about the vertical shaft, which is free to turn (no driving torque);
gravity 9.81 N/kg along −z.  The benchmark's reference solution is a time history
(not reproduced here).

Layout (global z up, the mechanism in the x–z plane at t = 0): the shaft turns on a
revolute joint about z at the origin (its centroid at z = 0.5); the slider slides on
it (translational joint along z, turning with it); rod AC is pinned to the shaft at
A = (0.05, 0, 1) and rod BD at B = (−0.05, 0, 1), both on revolute joints about the
shaft's y axis; the balls C and D are spatial point masses on spherical joints at the
rods' free ends; each spring–damper joins a rod's midpoint to the slider's side
point E = (0.05, 0, 0) or F = (−0.05, 0, 0) (slider frame).  Rod AC's body x axis
points from A to C (rotation of 30° about y), rod BD's from D to B (−30°).

34 coordinates (4 bodies × 7, 2 point masses × 3), 26 joint rows and 4
normalizations: four degrees of freedom — the shaft's rotation (cyclic: the axial
angular momentum is conserved), the slider's height and the two rod angles.  The
dampers acting on the 3 kg slider put a real eigenvalue of order −1e4 1/s (the
stiffness), while the governor's opening mode (rods and slider moving with the
couplers' lengths nearly fixed, period ≈ 1 s) is almost undamped: released at 30°
the rods swing up to ≈ 15° and back about the relative equilibrium (≈ 22.9°, slider
at ≈ 0.61 m).  ``tests/test_iftomm.py`` checks the axial angular momentum, the energy
balance with the dampers' work, the top of the swing and that relative equilibrium,
each derived independently of the model.
"""

import math

from mbdgen.model import GROUND, Mechanism, spatial

RHO, G = 3000.0, 9.81
L_SHAFT = L_ROD = 1.0
W_ROD = 0.01  # side of the shaft's and the rods' square cross-section
A_SLIDER = 0.1  # side of the slider cube
M_BALL = 5.0
K, C, L0 = 8e5, 4e4, 0.5
X_PIVOT = 0.05  # A = (X_PIVOT, 0, L_SHAFT), B = (−X_PIVOT, 0, L_SHAFT)
S0 = 0.5  # slider height
ALPHA0 = math.radians(30.0)  # rods below the horizontal
OMEGA0 = 2 * math.pi  # rad/s about z

Z = (0.0, 0.0, 1.0)
Y = (0.0, 1.0, 0.0)
X = (1.0, 0.0, 0.0)
W = (0.0, 0.0, OMEGA0)


def _spin(r: tuple[float, float, float]) -> tuple[float, float, float]:
    """ṙ = ω × r of a point at r turning with the governor."""
    return (-OMEGA0 * r[1], OMEGA0 * r[0], 0.0)


def _rod_q0(side: int) -> tuple[tuple, tuple, tuple]:
    """Rod centroid, Euler parameters and ball position of rod AC (side = +1) or BD (−1)."""
    c, s = math.cos(ALPHA0), math.sin(ALPHA0)
    u = (side * c, 0.0, -s)  # from the pivot toward the ball
    pivot = (side * X_PIVOT, 0.0, L_SHAFT)
    centre = tuple(pivot[i] + L_ROD / 2 * u[i] for i in range(3))
    ball = tuple(pivot[i] + L_ROD * u[i] for i in range(3))
    b = side * ALPHA0  # rotation about y: body x = (cos b, 0, −sin b)
    R = [[math.cos(b), 0.0, math.sin(b)], [0.0, 1.0, 0.0], [-math.sin(b), 0.0, math.cos(b)]]
    return centre, spatial.euler_parameters(R), ball


m_shaft, J_shaft = spatial.prism_inertia(L_SHAFT, W_ROD, RHO, Z)
m_slider, J_slider = spatial.prism_inertia(A_SLIDER, A_SLIDER, RHO, Z)
m_rod, J_rod = spatial.prism_inertia(L_ROD, W_ROD, RHO, X)

shaft = spatial.body(
    "shaft",
    m_shaft,
    J_shaft,
    q0=(0.0, 0.0, L_SHAFT / 2, 1.0, 0.0, 0.0, 0.0),
    omega0=W,
    omega0_frame="global",
)
slider = spatial.body(
    "slider",
    m_slider,
    J_slider,
    q0=(0.0, 0.0, S0, 1.0, 0.0, 0.0, 0.0),
    omega0=W,
    omega0_frame="global",
)
rods, balls = [], []
for side, tag in ((1, "ac"), (-1, "bd")):
    centre, p, ball = _rod_q0(side)
    rods.append(
        spatial.body(
            f"rod_{tag}",
            m_rod,
            J_rod,
            q0=(*centre, *p),
            qd0=_spin(centre),
            omega0=W,
            omega0_frame="global",
        )
    )
    balls.append(spatial.point_mass(f"ball_{tag[1]}", M_BALL, q0=ball, qd0=_spin(ball)))
rod_ac, rod_bd = rods
ball_c, ball_d = balls
HALF = L_ROD / 2
ORIGIN = (0.0, 0.0, 0.0)
bodies = [shaft, slider, rod_ac, rod_bd, ball_c, ball_d]

model = Mechanism(
    name="iftomm_a05_flyball_governor",
    description="IFToMM benchmark A05: stiff flyball governor",
    bodies=bodies,
    elements=[
        spatial.revolute("shaft_pivot", GROUND, ORIGIN, shaft, (0.0, 0.0, -L_SHAFT / 2), Z, Z),
        spatial.translational("slider_guide", shaft, ORIGIN, slider, ORIGIN, Z, Z, X, X),
        spatial.revolute("A", shaft, (X_PIVOT, 0.0, L_SHAFT / 2), rod_ac, (-HALF, 0.0, 0.0), Y, Y),
        spatial.revolute("B", shaft, (-X_PIVOT, 0.0, L_SHAFT / 2), rod_bd, (HALF, 0.0, 0.0), Y, Y),
        spatial.spherical("C", rod_ac, (HALF, 0.0, 0.0), ball_c, ORIGIN),
        spatial.spherical("D", rod_bd, (-HALF, 0.0, 0.0), ball_d, ORIGIN),
        spatial.tsda("spring_e", slider, (A_SLIDER / 2, 0.0, 0.0), rod_ac, ORIGIN, K, C, L0),
        spatial.tsda("spring_f", slider, (-A_SLIDER / 2, 0.0, 0.0), rod_bd, ORIGIN, K, C, L0),
        *spatial.gravity(bodies, (0.0, 0.0, -G)),
    ],
)
