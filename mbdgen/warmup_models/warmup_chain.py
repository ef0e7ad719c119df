"""Warm-up model: a planar four-link chain, n + m = 20: the sparse
linear algebra (``mbdgen.codegen.abi.SPARSE_LIMIT``); user states: none.

``mbdgen warmup`` steps it twice with every method that takes it, so that the
integrators for its argument types are in Numba's cache before a user's first run.
"""

from mbdgen.model import Mechanism, planar


def build_model() -> Mechanism:
    bodies, elements = planar.chain(4, link_length=1.0, mass=1.0, g=(0.0, -9.81))
    return Mechanism(
        name="warmup_chain",
        description="mbdgen warm-up model",
        bodies=bodies,
        elements=elements,
        states=[],
    )
