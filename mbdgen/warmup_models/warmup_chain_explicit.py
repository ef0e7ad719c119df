"""Warm-up model: a planar four-link chain, n + m = 20: the sparse
linear algebra (``mbdgen.codegen.abi.SPARSE_LIMIT``); user states: one explicit, an actuator lag.

``mbdgen warmup`` steps it twice with every method that takes it, so that the
integrators for its argument types are in Numba's cache before a user's first run.
"""

from mbdgen.model import Mechanism, forces, planar, states


def build_model() -> Mechanism:
    bodies, elements = planar.chain(4, link_length=1.0, mass=1.0, g=(0.0, -9.81))
    lag = states.symbol("torque")
    phi = bodies[0].coordinates[2]
    declared = [states.state(lag, rate=(-lag - phi) / 0.05, x0=0.0)]
    elements.append(forces.torque("motor", bodies[0], lag))
    return Mechanism(
        name="warmup_chain_explicit",
        description="mbdgen warm-up model",
        bodies=bodies,
        elements=elements,
        states=declared,
    )
