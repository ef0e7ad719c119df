"""Warm-up model: a slender bar pinned to the ground (Haug 1989, Example 7.2.1):
dense linear algebra; user states: none.

``mbdgen warmup`` steps it twice with every method that takes it, so that the
integrators for its argument types are in Numba's cache before a user's first run.
"""

from mbdgen.model import GROUND, Mechanism, forces, planar


def build_model() -> Mechanism:
    bar = planar.body("bar", 1.0, 1.0 / 3.0, q0=(1.0, 0.0, 0.0))
    bodies = [bar]
    elements = [
        planar.revolute("pivot", GROUND, (0.0, 0.0), bar, (-1.0, 0.0)),
        forces.gravity(bodies, (0.0, -9.81)),
    ]
    return Mechanism(
        name="warmup_pendulum",
        description="mbdgen warm-up model",
        bodies=bodies,
        elements=elements,
        states=[],
    )
