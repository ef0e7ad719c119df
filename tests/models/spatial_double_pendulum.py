"""A spatial double pendulum: two links on spherical joints, released from a tilted
line with the second link spinning about its own axis under the gravity of Welch et
al. 2007, Eq. 79, so that the motion is spatial.

A test model of the order tests (tests/test_order_spatial.py).
"""

import math

from mbdgen.model import Mechanism, spatial

bodies, elements = spatial.chain(
    2,
    length=(1.0, 0.8),
    direction=(0.0, 0.6, -0.8),
    g=(-5.0, -5.0 * math.sqrt(2.0), -5.0),
)
model = Mechanism(
    name="spatial_double_pendulum",
    description="Spatial double pendulum on spherical joints (order tests)",
    bodies=bodies,
    elements=elements,
)
