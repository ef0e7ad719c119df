"""A spatial double pendulum, spherical then revolute: the convergence test of Welch
et al. 2007's Euler-parameter scheme (Eq. 43) on two bodies of general inertia."""

from mbdgen.model import GROUND, Mechanism, spatial

upper = spatial.body("upper", 1.0, (1.0, 2.0, 3.0), q0=(0.0, 0.0, -1.0, 1.0, 0.0, 0.0, 0.0))
lower = spatial.body("lower", 2.0, (2.0, 2.0, 0.04), q0=(0.0, 0.0, -3.0, 1.0, 0.0, 0.0, 0.0))

model = Mechanism(
    name="spatial_double_pendulum",
    description="spherical-revolute spatial double pendulum (Welch et al. 2007, Eq. 43 test)",
    bodies=[upper, lower],
    elements=[
        spatial.spherical("pivot", GROUND, (0.0, 0.0, 0.0), upper, (0.0, 0.0, 1.0)),
        spatial.revolute(
            "hinge",
            upper,
            (0.0, 0.0, -1.0),
            lower,
            (0.0, 0.0, 1.0),
            h_i=(1.0, 0.0, 0.0),
            h_j=(1.0, 0.0, 0.0),
        ),  # fmt: skip
        spatial.gravity([upper, lower], (1.0, 2.0, -10.0)),
    ],
)
