"""Model front end: build and validate a :class:`Model` (see :mod:`mbdgen.model.core`)."""

from mbdgen.model.core import Model, check_identifier, speeds, t
from mbdgen.model.loader import load_model, source_hash

__all__ = ["Model", "check_identifier", "load_model", "source_hash", "speeds", "t"]
