"""Names and numbers a model may use: the time symbol, identifiers, finite values.

Everything a template will see is checked before it gets there (DESIGN rule 9): a
name must be a safe Python identifier that the generated code does not use itself,
and a default or initial value a finite number.  Here, below every other module of
the front end (:mod:`mbdgen.model.core`, :mod:`mbdgen.model.states`, the element
library), so that each imports these without importing another.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Iterable

import sympy as sp

from mbdgen.errors import ModelError

#: The time symbol every model shares.
t = sp.Symbol("t")

_IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
#: Names the generated code uses itself; a model item may not shadow them.
RESERVED = frozenset(
    {"t", "q", "qd", "qdd", "p", "a", "lam", "out", "np", "math", "njit", "rt", "nb"}
)


def check_identifier(name: str, what: str) -> str:
    """Return ``name`` if it is a safe identifier for generated code, else raise.

    Safe means: ASCII letters, digits and underscores, starting with a letter, not a
    Python keyword, not one of the generated code's own names, at most 64 characters.
    """
    if not isinstance(name, str) or not _IDENTIFIER.match(name) or len(name) > 64:
        raise ModelError(
            f"{what} name {name!r} is not a safe identifier: use ASCII letters, digits and "
            "underscores, starting with a letter (at most 64 characters)"
        )
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        raise ModelError(f"{what} name {name!r} is a Python keyword; choose another name")
    if name in RESERVED:
        raise ModelError(
            f"{what} name {name!r} is reserved by the generated code "
            f"(reserved: {', '.join(sorted(RESERVED))})"
        )
    return name


def check_symbol_names(groups: Iterable[tuple[str, Iterable[sp.Symbol]]]) -> None:
    """Every symbol name is a safe identifier and used once across all ``groups``
    of (what, symbols), e.g. coordinates, velocities and parameters."""
    seen: dict[str, str] = {}
    for what, symbols in groups:
        for s in symbols:
            check_identifier(s.name, what)
            if s.name in seen:
                raise ModelError(f"duplicate name {s.name!r}: used as {seen[s.name]} and as {what}")
            seen[s.name] = what


def finite_number(value: object, what: str) -> float:
    """``value`` as a float if it is a finite number, else a :class:`ModelError` naming
    ``what``: NaN and ±inf (also ``1e400``, which reads as inf) are no defaults or
    initial values; the generated module could not even spell them."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ModelError(f"{what} = {value!r} is not a number") from None
    if not math.isfinite(number):
        raise ModelError(f"{what} = {value!r} is not a finite number; give a finite value")
    return number
