"""User differential states X: controllers and actuators (Negrut et al. 2007, Eq. 8a).

The paper allows the implicit form d(Ẋ, X, q, q̇, q̈, λ, t) = 0 (Eq. 8a).  mbdgen takes
the explicit form

    Ẋ = f(q, q̇, X, t; p),   i.e.   d = Ẋ − f,

so that d_Ẋ = I, d_X = −f_X, d_q = −f_q, d_q̇ = −f_q̇, and d depends on neither q̈ nor
λ (d_q̈ = 0, d_λ = 0 in the third block row of Eq. 12).  A rate that uses q̈ or λ is
refused.  Each state has an initial value x0 (a runtime value, like a parameter's
default).

A state is declared with :func:`state` and used in force expressions as if it were a
SymPy symbol, e.g. a PI torque::

    e_int = states.state("e_int", rate=phi - phi_ref, x0=0.0)
    forces.torque("motor", bar, -kp * (phi - phi_ref) - ki * e_int)
    Mechanism(..., states=[e_int])

A rate that uses the state itself (a first-order lag Ẋ = (u − X)/τ) or another state
names their symbols first::

    v = states.symbol("v")
    lag = states.state(v, rate=(u - v) / tau, x0=0.0)

Only applied forces Q and the rates may depend on states: the mass matrix, the
constraints and the energies may not.  In the generated kernels X is the tail of the
parameter vector, p = [parameters; X] (see :mod:`mbdgen.codegen.abi`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import sympy as sp

from mbdgen.errors import ModelError
from mbdgen.model.core import check_identifier, finite_number, t

__all__ = ["State", "StateSymbol", "state", "symbol"]


class StateSymbol(sp.Symbol):
    """The symbol of a user state: a plain SymPy Symbol that validation can recognise
    (so that a force using a state the model does not declare gets a clear error)."""


def symbol(name: str) -> StateSymbol:
    """The symbol of a state named ``name``, for rates that use the state itself or
    other states (pass it to :func:`state` as its name)."""
    return StateSymbol(check_identifier(name, "state"))


def _sym(value: Any) -> Any:
    return value.symbol if isinstance(value, State) else value


@dataclass(frozen=True, eq=False)
class State:
    """A user differential state Ẋ = rate(q, q̇, X, t; p), X(t0) = x0.

    Usable wherever a SymPy expression is (``-ki * e_int``, ``sp.cos(e_int)``): it
    stands for its :attr:`symbol`.  Create it with :func:`state`.
    """

    name: str
    symbol: sp.Symbol
    rate: sp.Expr
    x0: float

    def __repr__(self) -> str:
        return f"State({self.name!r}, rate={self.rate}, x0={self.x0!r})"

    def _sympy_(self) -> sp.Symbol:
        return self.symbol

    # Arithmetic with numbers on either side (SymPy handles Symbol ∘ State itself).
    def __add__(self, other: Any) -> sp.Expr:
        return self.symbol + _sym(other)

    def __radd__(self, other: Any) -> sp.Expr:
        return _sym(other) + self.symbol

    def __sub__(self, other: Any) -> sp.Expr:
        return self.symbol - _sym(other)

    def __rsub__(self, other: Any) -> sp.Expr:
        return _sym(other) - self.symbol

    def __mul__(self, other: Any) -> sp.Expr:
        return self.symbol * _sym(other)

    def __rmul__(self, other: Any) -> sp.Expr:
        return _sym(other) * self.symbol

    def __truediv__(self, other: Any) -> sp.Expr:
        return self.symbol / _sym(other)

    def __rtruediv__(self, other: Any) -> sp.Expr:
        return _sym(other) / self.symbol

    def __pow__(self, other: Any) -> sp.Expr:
        return self.symbol ** _sym(other)

    def __rpow__(self, other: Any) -> sp.Expr:
        return _sym(other) ** self.symbol

    def __neg__(self) -> sp.Expr:
        return -self.symbol

    def __pos__(self) -> sp.Expr:
        return self.symbol


def state(name: str | sp.Symbol, rate: object, x0: float = 0.0) -> State:
    """Declare a user differential state Ẋ = ``rate``, X(t0) = ``x0`` (Negrut et al.
    2007, Eq. 8a in explicit form).

    ``name`` is the state's name (a new :class:`StateSymbol` is made) or a symbol made
    with :func:`symbol` (needed when ``rate`` uses the state itself).  ``rate`` may use
    coordinates, velocities, parameters, states and t — not q̈ or λ.  The rate is
    checked against the model when the state is passed to :class:`~mbdgen.model.Model`
    or :class:`~mbdgen.model.Mechanism` (``states=[...]``).
    """
    if isinstance(name, sp.Symbol):
        sym = name
        check_identifier(sym.name, "state")
    elif isinstance(name, str):
        sym = symbol(name)
    else:
        raise ModelError(f"state name {name!r} must be a string or a symbol from states.symbol")
    try:
        expr = sp.sympify(_sym(rate))
    except (sp.SympifyError, TypeError) as exc:
        raise ModelError(f"state {sym.name!r}: rate {rate!r} is not an expression: {exc}") from None
    if not isinstance(expr, sp.Expr):
        raise ModelError(f"state {sym.name!r}: rate must be a scalar expression, got {expr!r}")
    value = finite_number(x0, f"state {sym.name!r}: x0")
    return State(sym.name, sym, expr, value)


_MULTIPLIER = re.compile(r"^_?(lam|lambda)(_?\d+)?$")


def check_states(
    states: Iterable[object],
    owner: str,
    coordinates: Iterable[sp.Symbol],
    velocities: Iterable[sp.Symbol],
    parameters: Iterable[sp.Symbol],
) -> tuple[State, ...]:
    """Validate ``states`` of model ``owner``; returns them with ``t`` aliases resolved.

    Every rate may use only the model's coordinates, velocities, parameters, states
    and t; a q̈ (``<coordinate>_dd``, ``<velocity>_d``) or a multiplier (``lam``,
    ``lam_0``) gets its own message, since the explicit form cannot take them.
    """
    if isinstance(states, State | str) or not isinstance(states, Iterable):
        raise ModelError(f"{owner}: states must be a list of states, e.g. states=[e_int]")
    out: list[State] = []
    for s in states:
        if not isinstance(s, State):
            raise ModelError(
                f"{owner}: states: {s!r} is not a state (declare it with mbdgen.model.states.state)"
            )
        out.append(s)
    coords, vels = list(coordinates), list(velocities)
    symbols = {s.symbol for s in out}
    allowed = set(coords) | set(vels) | set(parameters) | symbols | {t}
    accelerations = {f"{c.name}_dd" for c in coords} | {f"{v.name}_d" for v in vels}
    by_name = {s.name: s for s in allowed}
    checked: list[State] = []
    for s in out:
        rate = s.rate
        alias = {a: t for a in rate.free_symbols if a.name == "t" and a != t}
        rate = rate.xreplace(alias) if alias else rate
        where = f"state {s.name!r}: rate {rate}"
        if rate.atoms(sp.Derivative):
            raise ModelError(
                f"{where} contains a derivative; rates are explicit, Ẋ = f(q, q̇, X, t), and "
                "take velocities as the symbols of mbdgen.model.speeds"
            )
        funcs = rate.atoms(sp.core.function.AppliedUndef)
        if funcs:
            raise ModelError(
                f"{where} contains the undefined function {next(iter(funcs))}; use plain Symbols"
            )
        for a in sorted(rate.free_symbols, key=lambda a: a.name):
            if a in allowed:
                continue
            if a.name in accelerations:
                raise ModelError(
                    f"{where} uses the acceleration {a.name!r}: rates may depend on q, q̇, X, t "
                    "and parameters only, not on q̈ or λ (explicit Ẋ = f, Negrut et al. Eq. 8a)"
                )
            if _MULTIPLIER.match(a.name):
                raise ModelError(
                    f"{where} uses {a.name!r}, a Lagrange multiplier: rates may depend on q, "
                    "q̇, X, t and parameters only, not on q̈ or λ"
                )
            if isinstance(a, StateSymbol):
                raise ModelError(
                    f"{where} uses the state {a.name!r}, which is not among {owner}'s states; "
                    "add it to states=[...]"
                )
            if a.name in by_name:
                raise ModelError(
                    f"{where} uses symbol {a.name!r} with other assumptions than the "
                    "declared one; create it once and reuse it"
                )
            raise ModelError(
                f"{where} uses {a.name!r}, which is neither a coordinate, a velocity, a "
                "parameter, a state nor t"
            )
        checked.append(State(s.name, s.symbol, rate, s.x0))
    return tuple(checked)


def state_misuse(
    what: str, symbols: Iterable[sp.Symbol], declared: Mapping[sp.Symbol, object] | set
) -> None:
    """Refuse a state symbol in an expression that may not depend on states (``what``:
    the mass matrix, a constraint, an energy) — declared or not."""
    for a in sorted(symbols, key=lambda a: a.name):
        if a in declared or isinstance(a, StateSymbol):
            raise ModelError(
                f"{what} uses the state {a.name!r}; only applied forces and the states' rates "
                "may depend on states"
            )
