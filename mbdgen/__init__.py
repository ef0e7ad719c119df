"""mbdgen: a symbolic-to-numeric compiler for constrained multibody dynamics.

``mbdgen.compile(path)`` turns a SymPy model file into a module of Numba kernels;
``mbdgen.simulate(module, method=..., h=..., t_end=...)`` integrates it and returns a
:class:`~mbdgen.results.Result`; ``mbdgen.prepare(module, method=..., ...)`` decides a
run once for many parameter sets or initial states; ``mbdgen.load(path)`` reads a saved
result; ``mbdgen.animate(result, "motion.gif")`` draws it.
``mbdgen.sweep(module, params, ...)`` runs one model over many parameter sets and
``mbdgen.load_sweep(path)`` reads a sweep back.

Heavy dependencies (SymPy, Numba) are imported lazily so that a warm start, which
only imports an up-to-date generated module, stays fast.
"""

from __future__ import annotations

from typing import Any

from mbdgen.errors import (
    CompileError,
    MbdgenError,
    ModelError,
    OutputError,
    ResultFileError,
    SimulationError,
    StaleModuleError,
)

__version__ = "0.1.0"

_LAZY = {
    "compile": ("mbdgen.compiler", "compile"),
    "simulate": ("mbdgen.simulation", "simulate"),
    "prepare": ("mbdgen.simulation", "prepare"),
    "load": ("mbdgen.results", "load"),
    "animate": ("mbdgen.animation", "animate"),
    "Result": ("mbdgen.results", "Result"),
    "Model": ("mbdgen.model.core", "Model"),
    "sweep": ("mbdgen.sweeps", "sweep"),
    "load_sweep": ("mbdgen.sweeps", "load_sweep"),
    "linearize": ("mbdgen.analysis.linearize", "linearize"),
}

__all__ = [
    "__version__",
    "CompileError",
    "MbdgenError",
    "ModelError",
    "OutputError",
    "ResultFileError",
    "SimulationError",
    "StaleModuleError",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mbdgen' has no attribute {name!r}")
