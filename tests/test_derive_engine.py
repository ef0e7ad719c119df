"""The Jacobians of the derivation come from SymEngine where the round trip is exact.

:func:`mbdgen.symbolic.derive._engine_jacobian` must give SymPy's Jacobian (the same
function, perhaps written differently), hand back the model's own symbol objects, and
decline (None, so that SymPy differentiates) whatever it cannot carry exactly.
Tolerance of the numeric comparisons: 1e-12 relative at random points.
"""

from __future__ import annotations

import importlib
import importlib.util
import random

import pytest
import sympy as sp
from conftest import MODELS

from mbdgen.model.elements import element_type

derive = importlib.import_module("mbdgen.symbolic.derive")
elements = importlib.import_module("mbdgen.symbolic.elements")

x = sp.Symbol("x", positive=True)
y, z = sp.symbols("y z", real=True)
w = sp.Symbol("w")


def _close(a: sp.Matrix, b: sp.Matrix, trials: int = 3) -> None:
    """a = b at random points of (0.2, 0.9) for every free symbol, to 1e-12 relative."""
    assert a.shape == b.shape
    symbols = sorted(a.free_symbols | b.free_symbols, key=str)
    rng = random.Random(7)
    for _ in range(trials):
        point = {s: rng.uniform(0.2, 0.9) for s in symbols}
        for u, v in zip(a, b, strict=True):
            fu, fv = complex(u.evalf(subs=point)), complex(v.evalf(subs=point))
            assert abs(fu - fv) <= 1e-12 * max(1.0, abs(fv)), (u, v)


@pytest.mark.parametrize("fn", sorted(derive._ENGINE_FUNCTIONS, key=lambda f: f.__name__))
def test_each_function_differentiates_as_sympy_does(fn):
    vec = sp.Matrix([fn(x * y / 3) * sp.sqrt(x**2 + z**2) + w ** sp.Rational(3, 2),
                     sp.pi * fn(z) / (1 + y**2) - 0.25 * x * w])  # fmt: skip
    wrt = sp.Matrix([x, y, z, w])
    fast = derive._engine_jacobian(vec, wrt)
    assert fast is not None
    _close(fast, vec.jacobian(wrt))


def test_symbols_come_back_as_the_models_objects():
    """Assumptions do not cross to SymEngine: the result must hold the very symbols
    (x positive, y real), not new plain ones of the same names."""
    vec = sp.Matrix([sp.sin(x) * y**2, sp.exp(y) * w])
    fast = derive._engine_jacobian(vec, sp.Matrix([x, y, w]))
    assert fast is not None
    assert fast.free_symbols <= {x, y, w}
    assert fast == vec.jacobian(sp.Matrix([x, y, w]))


f_undefined = sp.Function("f")
f_implemented = sp.Function("g")  # a user's function with a numeric implementation
f_implemented._imp_ = staticmethod(lambda v: 2 * v)


@pytest.mark.parametrize(
    "expr",
    [
        sp.Abs(x - y),
        sp.sign(y) * x,
        sp.Piecewise((x, y > 0), (x**2, True)),
        f_undefined(x) * y,
        f_implemented(x),
        sp.Dummy("d") * x,
        sp.Symbol("x") * x,  # two symbols named x (one positive, one not)
    ],
    ids=["abs", "sign", "piecewise", "undefined", "implemented", "dummy", "same-name"],
)
def test_what_does_not_cross_exactly_is_left_to_sympy(expr):
    vec, wrt = sp.Matrix([expr]), sp.Matrix([x, y])
    assert derive._engine_jacobian(vec, wrt) is None
    assert derive._jac(vec, wrt) == vec.jacobian(wrt)


def test_a_variable_that_is_not_a_plain_symbol_is_left_to_sympy():
    vec = sp.Matrix([sp.sin(x) * y])
    assert derive._engine_jacobian(vec, sp.Matrix([sp.Dummy("v")])) is None


@pytest.mark.parametrize("model", ["spatial_slider_crank", "slider_crank_tsda", "andrews"])
def test_element_blocks_equal_sympys(model, monkeypatch):
    """Every block of every element type of these models (spatial joints, a TSDA, the
    planar library) with the engine equals the block SymPy alone derives."""
    spec = importlib.util.spec_from_file_location(f"_{model}", MODELS / f"{model}.py")
    source = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(source)
    types = {}
    for e, _, _ in source.model.element_rows():
        types.setdefault(e.type_key, e)
    for e in types.values():
        et = element_type(e)
        fast = elements._type_blocks(et, ())[4]
        with monkeypatch.context() as patch:
            patch.setattr(derive, "_engine_jacobian", lambda vec, wrt: None)
            slow = elements._type_blocks(et, ())[4]
        assert fast.keys() == slow.keys()
        for name in fast:
            if fast[name] != slow[name]:
                _close(fast[name], slow[name], trials=1)


def test_equal_symbols_that_are_distinct_objects_still_cross():
    """SymPy's cache is an LRU: in a long process an evicted symbol is rebuilt as a
    second object equal to the first.  Whether SymEngine differentiates must not depend
    on that (it did once: the flyball's module then differed in a long test worker; a
    render with SYMPY_CACHE_SIZE=50 reproduced it, but takes 4 minutes)."""
    a = sp.Symbol("x")
    b = sp.Symbol.__xnew__(sp.Symbol, "x")  # uncached: equal, not identical
    assert a == b and a is not b
    vec = sp.Matrix([sp.sin(a) * sp.cos(b) + a**2])
    fast = derive._engine_jacobian(vec, sp.Matrix([a]))
    assert fast is not None
    assert fast == vec.jacobian(sp.Matrix([a]))
