"""Numba's inliner with one copy of a callee's scope per copy of its IR, not one per block.

``InlineWorker.inline_ir`` (``numba.core.inline_closurecall``; Numba 0.59-0.68) copies
the callee's IR twice before it splices it into the caller, each time block by block
with ``copy.deepcopy`` and a fresh memo per block.  Every ``ir.Var`` deep-copies its
``ir.Scope``, and the scope holds every variable of the function, so one copy costs
O(blocks × variables): quadratic in the callee's size.  mbdgen's integrators are
``inline="always"`` (:mod:`mbdgen.runtime`), and the index-3 loop, with its own
callees inlined, is inlined whole into each module's entry point: 10.5 s of the
31 s a slider-crank's ``index3_chunk`` took to compile went into those copies (Numba's
pipeline timings, empty cache), 1.4 s with this module.  The problem is known upstream
(numba/numba#8989 and #9204, NVIDIA/numba-cuda#688); Numba 0.68.1 still has it.

What changes: while ``inline_ir`` runs, a scope is deep-copied once per copy of the IR
(``FunctionIR.copy``, which ``inline_ir`` calls at the start of each copy, begins a new
one) and every block of that copy shares it.  The per-block copies were equal to one
another (``inline_ir`` asserts that a callee has one scope by comparing them), and the
caller replaces the blocks' scope with its own after renaming the variables, so the
IR that reaches type inference is the same: the machine code of the slider-crank's
``index3_chunk`` is identical instruction for instruction with and without this
module, and so are its results.  Outside ``inline_ir`` a scope is deep-copied as
Python would.  ``MBDGEN_NUMBA_INLINE=0`` leaves Numba as it is (to compare).
"""

from __future__ import annotations

import copy
import os
import threading
from typing import Any

import numba
from numba.core import ir
from numba.core.inline_closurecall import InlineWorker

#: The Numba versions whose ``inline_ir`` this was written against and tested with.
TESTED = ((0, 59), (0, 68))

_session = threading.local()


def _copy_scope(scope: ir.Scope, memo: dict[int, Any]) -> ir.Scope:
    """A deep copy of ``scope``, as ``copy.deepcopy`` makes one of a plain object."""
    new = object.__new__(type(scope))
    memo[id(scope)] = new
    new.__dict__.update(copy.deepcopy(scope.__dict__, memo))
    return new


def _scope_deepcopy(self: ir.Scope, memo: dict[int, Any]) -> ir.Scope:
    scopes = getattr(_session, "scopes", None)
    if scopes is None:
        return _copy_scope(self, memo)
    hit = scopes.get(id(self))
    if hit is not None and hit[0] is self:
        memo[id(self)] = hit[1]
        return hit[1]
    new = _copy_scope(self, memo)
    scopes[id(self)] = (self, new)
    return new


_function_ir_copy = ir.FunctionIR.copy
_inline_ir = InlineWorker.inline_ir


def _copy(self: ir.FunctionIR) -> ir.FunctionIR:
    if getattr(_session, "scopes", None) is not None:
        _session.scopes = {}  # a new copy of the IR: its own scope
    return _function_ir_copy(self)


def _inline_ir_sharing(self: InlineWorker, *args: Any, **kwargs: Any) -> Any:
    outer = getattr(_session, "scopes", None)
    _session.scopes = {}
    try:
        return _inline_ir(self, *args, **kwargs)
    finally:
        _session.scopes = outer


def _version() -> tuple[int, int]:
    major, minor = numba.__version__.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def _install() -> bool:
    if os.environ.get("MBDGEN_NUMBA_INLINE", "1") == "0":
        return False
    if not (TESTED[0] <= _version() <= TESTED[1]) or "__deepcopy__" in vars(ir.Scope):
        return False
    ir.Scope.__deepcopy__ = _scope_deepcopy  # type: ignore[attr-defined]
    ir.FunctionIR.copy = _copy  # type: ignore[method-assign]
    InlineWorker.inline_ir = _inline_ir_sharing  # type: ignore[method-assign]
    return True


#: Whether the shared scope copy is in effect in this process.
ACTIVE = _install()
