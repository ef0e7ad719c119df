"""The inputs of a run, validated: the generated module, its parameter vector p and
an initial state.

Shared by :func:`mbdgen.simulate` and the analyses (:mod:`mbdgen.analysis`); it sits
below both, so that neither imports the other for them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from mbdgen.errors import MbdgenError


def resolve_model(model: ModuleType | str | Path) -> ModuleType:
    """A generated module, or a model file compiled on demand."""
    if isinstance(model, ModuleType):
        return model
    from mbdgen.compiler import compile as compile_model

    return compile_model(model)


def parameter_vector(
    module: ModuleType,
    params: Mapping[str, float] | None,
    x0: Sequence[float] | Mapping[str, float] | None = None,
) -> np.ndarray:
    """The kernels' parameter vector p = [parameters; X]: the module's default
    parameters with ``params`` (by name) substituted, then the user states' initial
    values X0 (``x0``, default the model's ``X0``; see :mod:`mbdgen.model.states` and
    :func:`initial_states`).

    The kernels read user state k at p[N_PARAMETERS + k]; a runtime that integrates
    the states writes X_{n+1} there before each evaluation.  Without states p is the
    parameters alone.
    """
    p = np.array(module.P_DEFAULT, dtype=np.float64)
    names = tuple(module.PARAMETER_NAMES)
    _set_by_name(module, p, names, params or {}, ("parameter", "parameters"), "parameter {!r}")
    return np.concatenate([p, initial_states(module, x0)])


def _set_by_name(
    module: ModuleType,
    values: np.ndarray,
    names: tuple[str, ...],
    given: Mapping[str, Any],
    kind: tuple[str, str],
    label: str,
) -> None:
    """``values[names.index(k)] = float(v)`` for each k, v of ``given``, with a one-line
    error naming an unknown name (and the known ones) or a value that is not a finite
    number; ``kind`` is the noun (singular, plural), ``label`` formats a name."""
    check_names(module.MODEL_NAME, given, names, kind)
    for name, value in given.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise MbdgenError(f"{label.format(name)} = {value!r} is not a number") from None
        if not math.isfinite(number):
            raise MbdgenError(f"{label.format(name)} = {value!r} is not a finite number")
        values[names.index(name)] = number


def nearest_names(name: str, names: Sequence[str]) -> list[str]:
    """The names close to ``name``, nearest first: a typo's intended name; empty when
    none is close.  difflib's matches (ratio ≥ 0.6, three at most) within 0.1 of the
    best one, so that sprng_k names spring_k, not its siblings spring_c, spring_l0
    (0.93 against 0.8 and 0.75)."""
    import difflib

    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    ratios = [difflib.SequenceMatcher(None, c, name).ratio() for c in close]
    return [c for c, r in zip(close, ratios, strict=True) if r >= ratios[0] - 0.1]


def check_names(
    model_name: str,
    given: Iterable[str],
    names: Sequence[str],
    kind: tuple[str, str] = ("parameter", "parameters"),
) -> None:
    """Refuse the first of ``given`` that is not one of ``names`` on one line: the
    nearest names if some are close (a typo), else all of them; ``kind`` is the noun
    (singular, plural).  Cheap, so callers run it before compiling anything."""
    for name in given:
        if name not in names:
            close = nearest_names(name, names)
            hint = (
                f"did you mean {' or '.join(close)}?"
                if close
                else f"its {kind[1]} are {', '.join(names) or '(none)'}"
            )
            raise MbdgenError(f"model {model_name!r} has no {kind[0]} {name!r}; {hint}")


def initial_states(
    module: ModuleType, x0: Sequence[float] | Mapping[str, float] | None = None
) -> np.ndarray:
    """The user states' initial values X0, length N_STATES: ``x0`` in the order of
    ``STATE_NAMES``, or a mapping name → value (the others keep the model's), or the
    model's ``X0``."""
    default = np.asarray(getattr(module, "X0", ()), dtype=np.float64)
    if not isinstance(x0, Mapping):
        return state_vector(x0, default, "x0")
    names = tuple(getattr(module, "STATE_NAMES", ()))
    values = np.array(default, dtype=np.float64)
    _set_by_name(module, values, names, x0, ("user state", "states"), "x0 of state {!r}")
    return values


def coordinate_vector(
    module: ModuleType,
    value: Sequence[float] | Mapping[str, float] | np.ndarray | None,
    default: np.ndarray,
    what: str,
) -> np.ndarray:
    """``value`` (q0 or q̇0, named by ``what``) as a float vector: every coordinate in
    the order of ``COORDINATE_NAMES``, or a mapping name → value (the others keep
    ``default``, the model's), or ``default``.  An unknown name is answered with the
    nearest ones, as a parameter's is (the CLI's ``--q0 NAME=VALUE``, a sweep's
    ``q0.NAME``)."""
    if not isinstance(value, Mapping):
        return state_vector(value, default, what)
    names = tuple(module.COORDINATE_NAMES)
    values = np.array(default, dtype=np.float64)
    _set_by_name(module, values, names, value, ("coordinate", "coordinates"), what + " of {!r}")
    return values


def state_vector(
    value: Sequence[float] | np.ndarray | None, default: np.ndarray, what: str
) -> np.ndarray:
    """``value`` (q0 or q̇0) as a float vector of the default's length, or the default."""
    if value is None:
        return np.array(default, dtype=np.float64)
    arr = np.asarray(value, dtype=np.float64).ravel()
    if arr.shape != default.shape:
        raise MbdgenError(f"{what} has {arr.size} entries, expected {default.size}")
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise MbdgenError(f"{what}[{bad}] = {arr[bad]} is not a finite number")
    return arr
