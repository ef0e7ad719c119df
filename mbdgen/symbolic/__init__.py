"""Symbolic derivation (SymPy only, no numerics)."""

from mbdgen.symbolic.derive import SymbolicSystem, derive

__all__ = ["SymbolicSystem", "derive"]
