"""Four links on spherical joints (:func:`mbdgen.model.spatial.chain`), released from a
tilted line under a gravity with horizontal components, so that the motion is spatial.

A test model of the order tests (tests/test_order_spatial.py): every body's mass matrix
depends on its Euler parameters.
"""

from mbdgen.model import Mechanism, spatial

bodies, elements = spatial.chain(
    4, length=(0.5, 0.4, 0.3, 0.3), direction=(0.6, 0.0, -0.8), g=(1.0, 2.0, -9.81)
)
model = Mechanism(
    name="spherical_chain",
    description="Four-link spherical chain, spatial motion (order tests)",
    bodies=bodies,
    elements=elements,
)
