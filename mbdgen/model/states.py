"""User differential states X: controllers and actuators (Negrut et al. 2007, Eq. 8a).

The paper's states obey d(Ẋ, X, q, q̇, q̈, λ, t) = 0 (Eq. 8a).  A state is declared in
one of two forms:

* **explicit**, :func:`state`: Ẋ = f(q, q̇, X, t; p), i.e. d = Ẋ − f, so that d_Ẋ = I,
  d_X = −f_X, d_q = −f_q, d_q̇ = −f_q̇ and d_q̈ = d_λ = 0 in the third block row of
  Eq. 12.  A rate that uses q̈, λ or a state's Ẋ is refused (declare it implicit);
* **implicit**, :func:`implicit`: the residual d itself, any expression in the states'
  rates Ẋ (:func:`derivative`), the states X, q, q̇, the accelerations q̈
  (:func:`acceleration`), the multipliers λ of constraint rows (:func:`multiplier`),
  parameters and t.  It must depend on its own state's Ẋ (so that d_Ẋ can be
  regular); the compiler derives d_Ẋ, d_X, d_q, d_q̇, d_q̈ and d_λ
  (:func:`mbdgen.symbolic.derive.derive_residual_blocks`).

Each state has an initial value x0 (a runtime value, like a parameter's default); an
implicit state's Ẋ_0 is solved from d = 0 at t0.

A state is used in force expressions as if it were a SymPy symbol, e.g. a PI torque::

    e_int = states.state("e_int", rate=phi - phi_ref, x0=0.0)
    forces.torque("motor", bar, -kp * (phi - phi_ref) - ki * e_int)
    Mechanism(..., states=[e_int])

A rate that uses the state itself (a first-order lag Ẋ = (u − X)/τ) or another state
names their symbols first::

    v = states.symbol("v")
    lag = states.state(v, rate=(u - v) / tau, x0=0.0)

The same lag in implicit form, and a filtered accelerometer τẎ + Y − φ̈ = 0 and a
low-pass of the multiplier of row 1 of joint "pivot" (λ's row names are the model's
``CONSTRAINT_NAMES``: ``<joint>[<row>]`` for a mechanism, ``phi[i]`` or the given
``constraint_names`` for a generalized-coordinate model)::

    lag = states.implicit(v, residual=tau * states.derivative(v) + v - u, x0=0.0)
    y = states.symbol("y")
    acc = states.implicit(y, residual=tau * states.derivative(y) + y - states.acceleration(phi))
    z = states.symbol("z")
    lam_1 = states.multiplier("pivot", 1)
    low = states.implicit(z, residual=tau * states.derivative(z) + z - lam_1)

Only applied forces Q and the states' rates or residuals may depend on states: the
mass matrix, the constraints and the energies may not.  In the generated kernels X is
the tail of the parameter vector, p = [parameters; X]; Ẋ, q̈ and λ are the residual
kernels' arguments ``xd``, ``qdd``, ``lam`` (see :mod:`mbdgen.codegen.abi`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import sympy as sp

from mbdgen.errors import ModelError
from mbdgen.model.names import check_identifier, finite_number, t

__all__ = [
    "AccelerationSymbol",
    "MultiplierSymbol",
    "RateSymbol",
    "State",
    "StateSymbol",
    "acceleration",
    "derivative",
    "implicit",
    "multiplier",
    "state",
    "symbol",
]


class StateSymbol(sp.Symbol):
    """The symbol of a user state: a plain SymPy Symbol that validation can recognise
    (so that a force using a state the model does not declare gets a clear error)."""


def symbol(name: str) -> StateSymbol:
    """The symbol of a state named ``name``, for rates that use the state itself or
    other states (pass it to :func:`state` as its name)."""
    return StateSymbol(check_identifier(name, "state"))


class RateSymbol(sp.Symbol):
    """The symbol of a state's rate Ẋ (named ``<state>_d``), for implicit residuals."""


class AccelerationSymbol(sp.Symbol):
    """The symbol of a coordinate's acceleration q̈ (named ``<coordinate>_dd``)."""


class MultiplierSymbol(sp.Symbol):
    """The symbol of the Lagrange multiplier λ of one constraint row (named
    ``lam(<row>)``, ``<row>`` as in the model's ``CONSTRAINT_NAMES``)."""

    @property
    def row(self) -> str:
        """The constraint row's name, e.g. ``pivot[1]``."""
        return self.name[4:-1]


def derivative(state: str | sp.Symbol | State) -> RateSymbol:
    """The symbol of Ẋ of the state ``state`` (its name, its symbol or the
    :class:`State`), for the residual of :func:`implicit`."""
    if isinstance(state, State):
        name = state.name
    elif isinstance(state, sp.Symbol):
        name = state.name
    elif isinstance(state, str):
        name = state
    else:
        raise ModelError(f"derivative: {state!r} is not a state, a state symbol or a name")
    return RateSymbol(f"{check_identifier(name, 'state')}_d")


def acceleration(coordinate: str | sp.Symbol) -> AccelerationSymbol:
    """The symbol of q̈ of ``coordinate`` (its symbol, e.g. ``bar.coordinates[2]``, or
    its name), for the residual of :func:`implicit`."""
    name = coordinate.name if isinstance(coordinate, sp.Symbol) else coordinate
    if not isinstance(name, str):
        raise ModelError(f"acceleration: {coordinate!r} is not a coordinate")
    return AccelerationSymbol(f"{check_identifier(name, 'coordinate')}_dd")


def multiplier(constraint: str, row: int | None = None) -> MultiplierSymbol:
    """The symbol of λ of one constraint row, for the residual of :func:`implicit`:
    ``multiplier("pivot", 1)`` is the row ``pivot[1]`` (row 1 of joint "pivot"),
    ``multiplier("phi[0]")`` a row given by its full name (``CONSTRAINT_NAMES``).  The
    sign is the equations' (M q̈ + Φ_qᵀλ = Q): a joint's reaction force is −Φ_qᵀλ."""
    if not isinstance(constraint, str) or not constraint:
        raise ModelError(f"multiplier: constraint {constraint!r} must be a name")
    if row is not None:
        if isinstance(row, bool) or not isinstance(row, int) or row < 0:
            raise ModelError(
                f"multiplier {constraint!r}: row must be a whole number ≥ 0, got {row!r}"
            )
        constraint = f"{constraint}[{row}]"
    return MultiplierSymbol(f"lam({constraint})")


def _sym(value: Any) -> Any:
    return value.symbol if isinstance(value, State) else value


@dataclass(frozen=True, eq=False)
class State:
    """A user differential state, X(t0) = x0: explicit, Ẋ = rate(q, q̇, X, t; p), or
    implicit, residual(Ẋ, X, q, q̇, q̈, λ, t; p) = 0 (``rate`` None; Negrut et al.
    2007, Eq. 8a).

    Usable wherever a SymPy expression is (``-ki * e_int``, ``sp.cos(e_int)``): it
    stands for its :attr:`symbol`.  Create it with :func:`state` or :func:`implicit`.
    """

    name: str
    symbol: sp.Symbol
    rate: sp.Expr | None
    x0: float
    residual: sp.Expr | None = None

    @property
    def implicit(self) -> bool:
        """True for a state declared by its residual d (:func:`implicit`)."""
        return self.residual is not None

    @property
    def rate_symbol(self) -> RateSymbol:
        """The symbol of Ẋ (:func:`derivative`)."""
        return derivative(self.name)

    def d(self) -> sp.Expr:
        """The residual d of Eq. 8a: ``residual``, or Ẋ − rate for an explicit state."""
        return self.residual if self.residual is not None else self.rate_symbol - self.rate

    def __repr__(self) -> str:
        if self.residual is not None:
            return f"State({self.name!r}, residual={self.residual}, x0={self.x0!r})"
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


def _state_symbol(name: str | sp.Symbol) -> sp.Symbol:
    if isinstance(name, sp.Symbol):
        check_identifier(name.name, "state")
        return name
    if isinstance(name, str):
        return symbol(name)
    raise ModelError(f"state name {name!r} must be a string or a symbol from states.symbol")


def _expression(sym: sp.Symbol, what: str, value: object) -> sp.Expr:
    try:
        expr = sp.sympify(_sym(value))
    except (sp.SympifyError, TypeError) as exc:
        raise ModelError(
            f"state {sym.name!r}: {what} {value!r} is not an expression: {exc}"
        ) from None
    if not isinstance(expr, sp.Expr) or getattr(expr, "is_Matrix", False):
        shown = " ".join(repr(expr).split())
        raise ModelError(f"state {sym.name!r}: {what} must be a scalar expression, got {shown}")
    return expr


def implicit(name: str | sp.Symbol, residual: object, x0: float = 0.0) -> State:
    """Declare a user differential state by its residual, d(Ẋ, X, q, q̇, q̈, λ, t) = 0,
    X(t0) = ``x0`` (Negrut et al. 2007, Eq. 8a).

    ``name`` as in :func:`state` (a symbol from :func:`symbol` when ``residual`` uses
    X itself).  ``residual`` may use the states' rates (:func:`derivative`), states,
    coordinates, velocities, accelerations (:func:`acceleration`), the multipliers of
    constraint rows (:func:`multiplier`), parameters and t, and must use this state's
    own Ẋ.  It is checked against the model when the state is passed to
    :class:`~mbdgen.model.Model` or :class:`~mbdgen.model.Mechanism`; Ẋ(t0) is solved
    from d = 0 at the start of a run (Newton's method on d_Ẋ).
    """
    sym = _state_symbol(name)
    expr = _expression(sym, "residual", residual)
    value = finite_number(x0, f"state {sym.name!r}: x0")
    return State(sym.name, sym, None, value, expr)


def state(name: str | sp.Symbol, rate: object, x0: float = 0.0) -> State:
    """Declare a user differential state Ẋ = ``rate``, X(t0) = ``x0`` (Negrut et al.
    2007, Eq. 8a in explicit form).

    ``name`` is the state's name (a new :class:`StateSymbol` is made) or a symbol made
    with :func:`symbol` (needed when ``rate`` uses the state itself).  ``rate`` may use
    coordinates, velocities, parameters, states and t — not q̈ or λ.  The rate is
    checked against the model when the state is passed to :class:`~mbdgen.model.Model`
    or :class:`~mbdgen.model.Mechanism` (``states=[...]``).
    """
    sym = _state_symbol(name)
    expr = _expression(sym, "rate", rate)
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
    and t; a q̈ (``<coordinate>_dd``, ``<velocity>_d``), a multiplier (``lam``,
    ``lam_0``, :func:`multiplier`) or a state's Ẋ gets its own message, since the
    explicit form cannot take them.  An implicit residual may use those too (the
    states' Ẋ, q̈ of the coordinates, λ of rows that :func:`check_multipliers` checks
    once the constraint rows are known) and must use its own state's Ẋ.
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
    implicit_allowed = {derivative(s.name) for s in out} | {acceleration(c.name) for c in coords}
    checked: list[State] = []
    for s in out:
        expr = s.residual if s.implicit else s.rate
        assert expr is not None
        alias = {a: t for a in expr.free_symbols if a.name == "t" and a != t}
        expr = expr.xreplace(alias) if alias else expr
        what = "residual" if s.implicit else "rate"
        where = f"state {s.name!r}: {what} {expr}"
        if expr.atoms(sp.Derivative):
            raise ModelError(
                f"{where} contains a derivative; rates are explicit, Ẋ = f(q, q̇, X, t), and "
                "take velocities as the symbols of mbdgen.model.speeds"
                if not s.implicit
                else f"{where} contains a derivative; write Ẋ as states.derivative(name), "
                "q̈ as states.acceleration(coordinate) and q̇ as the symbols of "
                "mbdgen.model.speeds"
            )
        funcs = expr.atoms(sp.core.function.AppliedUndef)
        if funcs:
            raise ModelError(
                f"{where} contains the undefined function {next(iter(funcs))}; use plain Symbols"
            )
        for a in sorted(expr.free_symbols, key=lambda a: a.name):
            if a in allowed:
                continue
            if s.implicit and (a in implicit_allowed or isinstance(a, MultiplierSymbol)):
                continue
            _refuse(a, where, owner, s, by_name, accelerations)
        if s.implicit and s.rate_symbol not in expr.free_symbols:
            raise ModelError(
                f"{where} does not depend on {s.rate_symbol.name!r}, the state's own Ẋ "
                f"(states.derivative({s.name!r})): d(Ẋ, X, q, q̇, q̈, λ, t) = 0 must determine "
                "Ẋ (Negrut et al. 2007, Eq. 8a)"
            )
        if s.implicit:
            checked.append(State(s.name, s.symbol, None, s.x0, expr))
        else:
            checked.append(State(s.name, s.symbol, expr, s.x0))
    return tuple(checked)


def _refuse(
    a: sp.Symbol,
    where: str,
    owner: str,
    s: State,
    by_name: Mapping[str, sp.Symbol],
    accelerations: set[str],
) -> None:
    """The one-line error for a symbol ``a`` that the rate or residual of ``s`` may not use."""
    hint = "; declare the state with states.implicit(...)" if not s.implicit else ""
    if isinstance(a, RateSymbol):
        if not s.implicit:
            raise ModelError(
                f"{where} uses {a.name!r}, the rate Ẋ of a state: rates may depend on q, q̇, "
                f"X, t and parameters only{hint}"
            )
        raise ModelError(
            f"{where} uses {a.name!r}, the rate of a state that is not among {owner}'s "
            "states; add it to states=[...]"
        )
    if isinstance(a, AccelerationSymbol) and s.implicit:
        raise ModelError(
            f"{where} uses the acceleration {a.name!r}, but {a.name[:-3]!r} is not a "
            f"coordinate of {owner}"
        )
    if a.name in accelerations or isinstance(a, AccelerationSymbol):
        if s.implicit:
            raise ModelError(
                f"{where} uses {a.name!r}: write the acceleration q̈ of a coordinate as "
                "states.acceleration(coordinate)"
            )
        raise ModelError(
            f"{where} uses the acceleration {a.name!r}: rates may depend on q, q̇, X, t "
            f"and parameters only, not on q̈ or λ (explicit Ẋ = f, Negrut et al. Eq. 8a){hint}"
        )
    if _MULTIPLIER.match(a.name) or isinstance(a, MultiplierSymbol):
        if s.implicit:
            raise ModelError(
                f"{where} uses {a.name!r}: write the multiplier of a constraint row as "
                "states.multiplier(joint, row)"
            )
        raise ModelError(
            f"{where} uses {a.name!r}, a Lagrange multiplier: rates may depend on q, "
            f"q̇, X, t and parameters only, not on q̈ or λ{hint}"
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
    if s.implicit:
        raise ModelError(
            f"{where} uses {a.name!r}, which is neither a coordinate, a velocity, a "
            "parameter, a state, a state's rate (states.derivative), an acceleration "
            "(states.acceleration), a multiplier (states.multiplier) nor t"
        )
    raise ModelError(
        f"{where} uses {a.name!r}, which is neither a coordinate, a velocity, a "
        "parameter, a state nor t"
    )


def check_multipliers(states: Iterable[State], owner: str, rows: Iterable[str]) -> None:
    """Every multiplier an implicit residual uses names one of ``owner``'s constraint
    rows ``rows`` (its ``CONSTRAINT_NAMES``), else a one-line error naming the state."""
    names = list(rows)
    known = set(names)
    for s in states:
        if s.residual is None:
            continue
        for a in sorted(s.residual.free_symbols, key=lambda a: a.name):
            if isinstance(a, MultiplierSymbol) and a.row not in known:
                shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
                raise ModelError(
                    f"state {s.name!r}: residual {s.residual} uses the multiplier of "
                    f"{a.row!r}, which is not a constraint row of {owner} "
                    f"({shown or 'it has none'})"
                )


def has_implicit(states: Iterable[State]) -> bool:
    """True when some state is declared by its residual (:func:`implicit`): the model's
    states then go through the residual kernels (d, d_Ẋ, d_X, d_q, d_q̇, d_q̈, d_λ)."""
    return any(s.implicit for s in states)


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
