"""Warm-up model: a spatial slider-crank (crank on a revolute joint, rod joined by a
spherical and a universal joint, slider on a translational joint, a spring-damper to the
ground, gravity): the spatial element types' library kernels.

Its integrators are the sparse ones, which ``warmup_chain`` compiles; what this model
adds is the long element kernels of the spatial bodies and joints
(:mod:`mbdgen.runtime.library`), compiled once per installation and shared by every
model that uses the same types, which a new spatial model's first run would otherwise
compile (9-19 s each for the dynamics, the Newton blocks and Welch's constraints).
The geometry is that of ``models/spatial_slider_crank.py``, assembled at t0.
"""

import math

from mbdgen.model import GROUND, Mechanism, spatial

PIVOT = (0.0, 0.1, 0.12)
R_CRANK, L_ROD = 0.08, 0.3
X = (1.0, 0.0, 0.0)


def build_model() -> Mechanism:
    pin = (0.0, PIVOT[1] + R_CRANK, PIVOT[2])
    x_slider = math.sqrt(L_ROD**2 - pin[1] ** 2 - pin[2] ** 2)
    u = [(x_slider - pin[0]) / L_ROD, -pin[1] / L_ROD, -pin[2] / L_ROD]
    ny = math.hypot(u[0], u[1])
    y = [-u[1] / ny, u[0] / ny, 0.0]
    z = [u[1] * y[2] - u[2] * y[1], u[2] * y[0] - u[0] * y[2], u[0] * y[1] - u[1] * y[0]]
    rotation = [[u[i], y[i], z[i]] for i in range(3)]
    m_c, J_c = spatial.prism_inertia(R_CRANK, 0.01, 7800.0, (0.0, 1.0, 0.0))
    m_r, J_r = spatial.prism_inertia(L_ROD, 0.01, 7800.0, (1.0, 0.0, 0.0))
    m_s, J_s = spatial.prism_inertia(0.05, 0.05, 7800.0)
    crank = spatial.body(
        "crank", m_c, J_c, q0=(0.0, PIVOT[1] + R_CRANK / 2, PIVOT[2], 1.0, 0.0, 0.0, 0.0)
    )
    rod = spatial.body(
        "rod",
        m_r,
        J_r,
        q0=(x_slider / 2, pin[1] / 2, pin[2] / 2, *spatial.euler_parameters(rotation)),
    )
    slider = spatial.body("slider", m_s, J_s, q0=(x_slider, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0))
    return Mechanism(
        name="warmup_spatial",
        description="mbdgen warm-up model",
        bodies=[crank, rod, slider],
        elements=[
            spatial.revolute("crank_rev", GROUND, PIVOT, crank, (0.0, -R_CRANK / 2, 0.0), X, X),
            spatial.spherical(
                "crank_rod", crank, (0.0, R_CRANK / 2, 0.0), rod, (-L_ROD / 2, 0.0, 0.0)
            ),
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
            spatial.tsda(
                "spring", GROUND, (0.0, 0.0, 0.0), slider, (0.0, 0.0, 0.0), k=100.0, c=1.0, l0=0.2
            ),
            spatial.gravity([crank, rod, slider], (0.0, 0.0, -9.81)),
        ],
    )
