"""Numba's inliner with one scope copy per IR copy (mbdgen._numba_inline).

The compile-time gain is measured in the bench (``mbdgen bench``: cold HHT compile)
and in the design notes, not here; these tests check that the change is in effect,
that it removes the per-block copies, and that inlined code computes what it did.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from numba import njit
from numba.core.inline_closurecall import InlineWorker

import mbdgen.runtime  # noqa: F401  (installs the change, as every generated module does)
from mbdgen import _numba_inline


def _functions():
    """A caller that inlines, at two sites, a callee of many blocks (loops, branches),
    which itself inlines a small function: fresh objects, so nothing is cached."""

    @njit(inline="always")
    def clip(x, lo, hi):
        if x < lo:
            return lo
        if x > hi:
            return hi
        return x

    @njit(inline="always")
    def callee(a, k):
        s = 0.0
        for i in range(a.shape[0]):
            v = a[i] * k
            if v > 1.0:
                s += clip(v, 0.0, 2.0)
            elif v < -1.0:
                s -= v * v
            else:
                for j in range(i):
                    if (i + j) % 3 == 0:
                        s += 0.5 * v
                    else:
                        s -= 0.25 * v
        while s > 10.0:
            s -= 3.0
        return s

    @njit
    def caller(a):
        return callee(a, 1.5) + 2.0 * callee(a, -0.5)

    def plain(a):
        return callee.py_func(a, 1.5) + 2.0 * callee.py_func(a, -0.5)

    return caller, plain


def _scope_copies(monkeypatch: pytest.MonkeyPatch, shared: bool) -> tuple[int, int, float]:
    """Scope deep copies and inlined call sites while compiling a fresh caller, and
    the caller's result."""
    counted = [0, 0]
    copy_scope = _numba_inline._copy_scope
    # Numba's own inline_ir, under which every scope copy takes the plain path
    inline_ir = InlineWorker.inline_ir if shared else _numba_inline._inline_ir

    def counting(scope, memo):
        counted[0] += 1
        return copy_scope(scope, memo)

    def inlining(self, *args, **kwargs):
        counted[1] += 1
        return inline_ir(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(_numba_inline, "_copy_scope", counting)
        patch.setattr(InlineWorker, "inline_ir", inlining)
        caller, _ = _functions()
        value = caller(np.linspace(-2.0, 2.0, 17))
    return counted[0], counted[1], value


needs_change = pytest.mark.skipif(
    not _numba_inline.ACTIVE, reason="Numba outside the tested versions, or MBDGEN_NUMBA_INLINE=0"
)


@needs_change
def test_the_change_is_in_effect_for_the_tested_numba():
    assert _numba_inline.TESTED[0] <= _numba_inline._version() <= _numba_inline.TESTED[1]
    assert InlineWorker.inline_ir is _numba_inline._inline_ir_sharing


@needs_change
def test_a_callee_scope_is_copied_once_per_ir_copy_not_per_block(monkeypatch):
    shared, sites, value_shared = _scope_copies(monkeypatch, shared=True)
    plain, sites_plain, value_plain = _scope_copies(monkeypatch, shared=False)
    # the callee at two sites, and clip inside each of them
    assert sites == sites_plain == 4
    # Numba copies a callee's IR twice per site; each copy now copies the callee's
    # scope and its parent once, where it copied them once per block (callee: >10)
    assert shared <= 2 * 2 * sites, (shared, plain)
    assert plain >= 5 * shared, (shared, plain)
    assert value_shared == value_plain


def test_inlined_code_computes_what_python_does():
    caller, plain = _functions()
    for a in (np.linspace(-2.0, 2.0, 17), np.array([0.3, -1.7, 2.5, 0.9]), np.zeros(0)):
        assert caller(a) == pytest.approx(plain(a), rel=1e-15, abs=0.0)


def test_outside_inlining_a_scope_copies_as_python_copies():
    scope = _numba_inline.ir.Scope(None, _numba_inline.ir.Loc("f", 1))
    var = scope.define("x", _numba_inline.ir.Loc("f", 2))
    new_var = copy.deepcopy(var)
    assert new_var is not var and new_var.scope is not scope
    assert new_var.scope.get("x").name == "x" and new_var.scope == scope
