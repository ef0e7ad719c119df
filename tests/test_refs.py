"""Borrowed array views (:mod:`mbdgen.runtime.refs`): same memory, no owner, and no
reference counting left in a loop that copies a workspace."""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np
import pytest
from numba import errors, njit, types
from numba.extending import intrinsic

from mbdgen.runtime.refs import borrow


class _Inner(NamedTuple):
    a: np.ndarray
    k: int


class _Work(NamedTuple):
    x: np.ndarray
    m: np.ndarray  # 2-D
    s: np.ndarray  # a strided view
    inner: _Inner
    scale: float


def _work() -> _Work:
    base = np.arange(12.0)
    return _Work(np.zeros(4), np.ones((2, 3)), base[::3], _Inner(np.arange(3.0), 7), 2.0)


def test_borrow_is_the_identity_in_python() -> None:
    w = _work()
    assert borrow(w) is w


@njit(cache=False)
def _write_through(w):  # noqa: ANN001, ANN202
    b = borrow(w)
    for i in range(b.x.shape[0]):
        b.x[i] = b.scale * (i + 1)
    b.m[1, 2] = -1.0
    b.s[1] = 100.0
    b.inner.a[0] = b.inner.k
    return b.m.strides[0], b.s.strides[0], b.s.shape[0], b.inner.k


def test_borrowed_views_share_memory_shape_and_strides() -> None:
    w = _work()
    m_stride, s_stride, s_len, k = _write_through(w)
    np.testing.assert_array_equal(w.x, [2.0, 4.0, 6.0, 8.0])
    assert w.m[1, 2] == -1.0
    assert w.s[1] == 100.0 and w.s.base[3] == 100.0  # the strided view writes its base
    assert w.inner.a[0] == 7.0
    assert (m_stride, s_stride, s_len, k) == (w.m.strides[0], w.s.strides[0], 4, 7)


@njit(cache=False)
def _fill(w, y):  # noqa: ANN001, ANN202
    b = borrow(w)
    z = borrow(y)
    for i in range(b.x.shape[0]):
        b.x[i] = 1.0
    z[0] = 3.0


def test_writes_through_borrowed_views_survive_dead_code_elimination() -> None:
    """Nothing reads ``b.x`` or ``z`` after the writes; Numba keeps such writes only
    for arrays that may alias an argument, which ``refs`` declares for ``borrow``."""
    w, y = _work(), np.zeros(2)
    _fill(w, y)
    np.testing.assert_array_equal(w.x, 1.0)
    assert y[0] == 3.0


@njit(inline="always")
def _branchy(w, i):  # noqa: ANN001, ANN202 - an inlined routine: its argument is a copy
    s = 0.0
    if i & 1:
        v = w.x[1:]  # a view, released in this branch: a decref between the copy's pair
        s += v[0]
    for k in range(i & 3):
        s += w.inner.a[k % 3]
    if s > 5.0:
        return s + w.m[0, 0]
    w.x[1] = s
    return s + w.s[0] + w.scale


@njit(cache=False)
def _loop_owned(w, reps):  # noqa: ANN001, ANN202
    s = 0.0
    for r in range(reps):
        s += _branchy(w, r)
    return s


@njit(cache=False)
def _loop_borrowed(w, reps):  # noqa: ANN001, ANN202
    w = borrow(w)
    s = 0.0
    for r in range(reps):
        s += _branchy(w, r)
    return s


def _refcount_calls(dispatcher) -> int:  # noqa: ANN001
    """Reference-count calls in the compiled function itself (the module's first
    definition; the Python wrapper after it unboxes the arguments and counts)."""
    (ir,) = dispatcher.inspect_llvm().values()
    body = ir[ir.index("\ndefine") : ir.index("\ndefine", ir.index("\ndefine") + 1)]
    return len(re.findall(r"call void @NRT_(?:incref|decref)", body))


def test_borrow_leaves_no_reference_counting_in_the_loop() -> None:
    """With every meminfo a constant null, LLVM folds the inlined copies' counts
    away (the owned loop keeps them whenever the pruning pass cannot pair them, as
    in an integrator's loop: see the design notes); both compute the same."""
    w1, w2 = _work(), _work()
    assert _loop_owned(w1, 1000) == _loop_borrowed(w2, 1000)
    np.testing.assert_array_equal(w1.x, w2.x)
    assert _refcount_calls(_loop_borrowed) == 0


@intrinsic
def _meminfo(typingctx, a):  # noqa: ANN001, ANN202 - test only: an array's owner address
    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
        ary = context.make_array(signature.args[0])(context, builder, value=args[0])
        return builder.ptrtoint(ary.meminfo, context.get_value_type(types.intp))

    return types.intp(a), codegen


@njit(cache=False)
def _owners(w):  # noqa: ANN001, ANN202
    b = borrow(w)
    return _meminfo(w.x), _meminfo(b.x), _meminfo(b.inner.a), _meminfo(b.s), b.inner.k


def test_borrowed_arrays_have_no_owner() -> None:
    owned, x, a, s, k = _owners(_work())
    assert owned != 0
    assert (x, a, s) == (0, 0, 0)
    assert k == 7


@njit(cache=False)
def _borrow_with_a_string(a):  # noqa: ANN001, ANN202
    b = borrow((a, "link"))
    return len(b[1])


def test_a_counted_member_that_is_not_an_array_is_refused_by_name() -> None:
    """borrow's result carries no reference of its own, so a counted member other
    than an array (here a string) would be released twice; typing refuses it."""
    with pytest.raises(errors.TypingError, match=r"borrow\(\) takes arrays, scalars"):
        _borrow_with_a_string(np.zeros(3))
