"""Model front end: build and validate a :class:`Model` (see :mod:`mbdgen.model.core`).

Mechanisms of bodies, joints and forces are built with :mod:`mbdgen.model.planar`,
:mod:`mbdgen.model.spatial` and :mod:`mbdgen.model.forces` into a
:class:`~mbdgen.model.mechanism.Mechanism`; user differential states (controllers)
are declared with :mod:`mbdgen.model.states`.
"""

from mbdgen.model.core import Model, check_identifier, speeds, t
from mbdgen.model.elements import GROUND, Body, Element
from mbdgen.model.loader import load_model, source_hash
from mbdgen.model.mechanism import Mechanism
from mbdgen.model.states import State, implicit, state

__all__ = [
    "GROUND",
    "Body",
    "Element",
    "Mechanism",
    "Model",
    "State",
    "check_identifier",
    "implicit",
    "load_model",
    "source_hash",
    "speeds",
    "state",
    "t",
]
