"""Borrowed array views: the time loop's workspaces without reference counting.

Numba counts references to every array a variable holds.  A workspace is a named
tuple of some 100 arrays (the index-1 sparse one: 25 arrays and three plans of 17,
40 and 18 index arrays), and every copy of it costs an atomic increment and, later,
an atomic decrement per array: passing it into an inlined routine is such a copy,
and so is binding it in a routine that is not inlined.  Numba's pruning pass
(llvmlite's ``RefPrune``) removes a pair only where nothing else is released
between them on any path; in an integrator's loop that almost never holds.  On the
8-link chain with ``vabm`` the counts were 488 atomic operations per evaluation of
the right side and about 30 % of the run (``perf``; see the design notes).

:func:`borrow` returns the same arrays with no owner: the data pointer, shape and
strides are those of the argument, the meminfo (Numba's reference-counted owner)
and the parent object are null.  Numba's ``NRT_incref``/``NRT_decref`` return at
once on a null meminfo, and where the null is visible to LLVM the pruning pass
removes the call.  This is a borrowed reference in the C API's sense, and it has
the same rule: a borrowed array must not outlive the reference it was borrowed
from.  Each chunk routine borrows its own arguments, which the caller holds for
the whole call, and returns only scalars; nothing borrowed is stored or returned.
"""

from __future__ import annotations

from typing import TypeVar

from numba import errors, types
from numba.core import cgutils, ir_utils
from numba.extending import lower_builtin, type_callable

T = TypeVar("T")


def _holds_array(ty: types.Type) -> bool:
    if isinstance(ty, types.Array):
        return True
    if isinstance(ty, types.BaseTuple):
        return any(_holds_array(t) for t in ty.types)
    return False


def _borrowed(context, builder, ty, value):  # noqa: ANN001, ANN202 - Numba codegen
    if isinstance(ty, types.Array):
        ary = context.make_array(ty)(context, builder, value=value)
        ary.meminfo = cgutils.get_null_value(ary.meminfo.type)
        ary.parent = cgutils.get_null_value(ary.parent.type)
        return ary._getvalue()
    if isinstance(ty, types.BaseTuple):
        for i, member in enumerate(ty.types):
            if _holds_array(member):
                view = _borrowed(context, builder, member, builder.extract_value(value, i))
                value = builder.insert_value(value, view, i)
    return value


def borrow(x: T) -> T:
    """``x`` (an array, or a tuple or named tuple holding arrays at any depth) with
    every array replaced by an unowned view of the same memory (see the module
    docstring); scalars pass through, and any other member is refused at typing
    (:func:`_plain`).  In Python (``NUMBA_DISABLE_JIT``) ``x``.

    Assign the result to a plain name (``ws = borrow(ws)``), one per argument:
    Numba's alias analysis follows a call's result only through the extension
    below, and a first version that borrowed a packed tuple of arguments and
    unpacked it (``a, b = borrow((a, b))``) made HHT and Radau take other steps than
    under ``NUMBA_DISABLE_JIT`` (writes through the unpacked names deleted as dead,
    it appears; the explicit families were unaffected)."""
    return x


def _plain(ty: types.Type) -> bool:
    """Arrays, scalars and tuples of them: the only members :func:`borrow` accepts.

    The borrowed result is handed back without a reference of its own (counting the
    views would be a no-op, but emitting the counts for a hundred arrays costs compile
    time), so a counted member that is not an array (a string, a list, a jitclass)
    would be released once too often when the result dies.  Refused at typing
    instead, by name."""
    if isinstance(ty, types.BaseTuple):
        return all(_plain(t) for t in ty.types)
    return isinstance(ty, types.Array | types.Number | types.Boolean | types.NoneType)


@type_callable(borrow)
def _type_borrow(context):  # noqa: ANN001, ANN202 - Numba typing
    def typer(x):  # noqa: ANN001, ANN202
        if not _plain(x):
            raise errors.NumbaTypeError(
                f"borrow() takes arrays, scalars and tuples of them, not {x}: a counted "
                "member that is not an array would be released twice"
            )
        return x

    return typer


@lower_builtin(borrow, types.Any)
def _lower_borrow(context, builder, sig, args):  # noqa: ANN001, ANN202 - Numba lowering
    """Lowered in place, not compiled as a function of its own: an ``@overload``
    would compile one function per argument type (for the index-1 workspace, one
    taking some 700 flattened arguments), and one inlined at the IR level puts the
    call in a block that Numba's alias analysis visits after the writes it must
    keep (see :func:`_alias_arguments`)."""
    return _borrowed(context, builder, sig.args[0], args[0])


def _alias_arguments(lhs, args, alias_map, arg_aliases):  # noqa: ANN001, ANN202
    """Numba's dead-code elimination keeps a write only to an array that may alias
    an argument (``ir_utils.find_potential_aliases``), and a call's result aliases
    nothing unless an extension says so: without this, ``b.x[i] = v`` on a borrowed
    ``b`` that is not read afterwards is deleted.  The borrowed views alias every
    argument they come from."""
    names = {a.name for a in args}
    if names & arg_aliases:
        arg_aliases.add(lhs)
    for name in names:
        alias_map.setdefault(name, set()).add(lhs)
        alias_map.setdefault(lhs, set()).add(name)


ir_utils.alias_func_extensions[("borrow", __name__)] = _alias_arguments
