"""Symbolic derivation (SymPy, with SymEngine for the Jacobians; no numerics)."""

from mbdgen.symbolic.derive import SymbolicSystem, derive

__all__ = ["SymbolicSystem", "derive"]
