"""The model front end: a validated description of a generalized-coordinate model.

A model gives coordinates q, named parameters with defaults, a mass matrix M(q),
a generalized force Q(q, q̇, t), holonomic constraints Φ(q, t) = 0 and initial
values q0, q̇0 (Haug 1989, Eqs. 7.2.1-7.2.3).  Everything a template will later
see is checked here, so later stages can trust their input (DESIGN rule 9).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import sympy as sp

from mbdgen.errors import ModelError
from mbdgen.model.names import check_identifier, check_symbol_names, finite_number, t
from mbdgen.model.states import StateSymbol, check_multipliers, check_states


def speeds(coordinates: Iterable[sp.Symbol]) -> list[sp.Symbol]:
    """The velocity symbols q̇ that belong to ``coordinates`` (``theta`` → ``theta_d``).

    Use them to write velocity-dependent forces; :class:`Model` creates the same
    symbols when ``velocities`` is not given.
    """
    return [sp.Symbol(f"{c.name}_d") for c in coordinates]


def _as_matrix(value: object, what: str) -> sp.Matrix:
    try:
        mat = sp.Matrix(value)
    except Exception as exc:  # sympy raises a zoo of types for bad shapes
        raise ModelError(f"{what} cannot be read as a matrix: {exc}") from None
    return mat


def _as_column(value: object, what: str) -> sp.Matrix:
    if value is None:
        return sp.zeros(0, 1)
    if isinstance(value, sp.MatrixBase):
        mat = sp.Matrix(value)
    else:
        try:
            items = list(value)  # type: ignore[call-overload]
        except TypeError:
            raise ModelError(f"{what} must be a list of expressions, got {value!r}") from None
        mat = sp.Matrix(len(items), 1, [sp.sympify(v) for v in items])
    if mat.cols != 1 and mat.rows == 1:
        mat = mat.T
    if mat.cols != 1:
        raise ModelError(f"{what} must be a vector, got shape {mat.shape}")
    return mat


@dataclass(frozen=True)
class Model:
    """A generalized-coordinate multibody model (validated on construction).

    Parameters
    ----------
    name : str
        Identifier of the model; also the name of the generated module.
    coordinates : sequence of sympy.Symbol
        Generalized coordinates q (length n).
    mass : matrix-like, (n, n)
        Symmetric mass matrix M(q); may depend on q and parameters, not on q̇ or t.
    force : sequence, (n,)
        Generalized applied force Q(q, q̇, t).
    constraints : sequence, (m,)
        Holonomic constraints Φ(q, t) = 0 (scleronomic or rheonomic).
    parameters : mapping Symbol -> float
        Named parameters and their default values; they stay runtime values.
    q0, qd0 : sequence of float, (n,)
        Initial coordinates and velocities.
    velocities : sequence of sympy.Symbol, optional
        Symbols for q̇ used in ``force``; default :func:`speeds` of the coordinates.
    description : str
        Free text: where the model comes from (paper, equation, table).
    potential : expression, optional
        Potential energy V(q) (gravity, springs) for the ``energy`` kernel.  Without
        it the model has no V: results leave the potential out rather than show 0.
    kinetic : expression, optional
        Kinetic energy T(q, q̇); default ½ q̇ᵀ M q̇.
    constraint_names : sequence of str, optional
        A label per constraint row (default ``phi[i]``), used in reports.
    states : sequence of :class:`~mbdgen.model.states.State`, optional
        User differential states (Negrut et al. 2007, Eq. 8a), explicit Ẋ = f(q, q̇, X,
        t) or implicit d(Ẋ, X, q, q̇, q̈, λ, t) = 0 (:mod:`mbdgen.model.states`);
        ``force`` may use their symbols, nothing else may.
    """

    name: str
    coordinates: Sequence[sp.Symbol]
    mass: object
    force: object
    constraints: object = None
    parameters: Mapping[sp.Symbol, float] = field(default_factory=dict)
    q0: Sequence[float] = ()
    qd0: Sequence[float] | None = None
    velocities: Sequence[sp.Symbol] | None = None
    description: str = ""
    potential: object = None
    kinetic: object = None
    constraint_names: Sequence[str] | None = None
    states: Sequence[object] = ()
    has_potential: bool = field(init=False, default=True)

    def __post_init__(self) -> None:
        check_identifier(self.name, "model")
        coords = list(self.coordinates)
        if not coords:
            raise ModelError(f"model {self.name!r} has no coordinates")
        for c in coords:
            if not isinstance(c, sp.Symbol):
                raise ModelError(f"coordinate {c!r} must be a sympy Symbol, not {type(c).__name__}")
        vel = list(self.velocities) if self.velocities is not None else speeds(coords)
        params = dict(self.parameters)
        for s in params:
            if not isinstance(s, sp.Symbol):
                raise ModelError(f"parameter {s!r} must be a sympy Symbol")
        object.__setattr__(self, "coordinates", tuple(coords))
        object.__setattr__(self, "velocities", tuple(vel))
        object.__setattr__(self, "parameters", params)
        states = check_states(self.states, f"model {self.name!r}", coords, vel, params)
        object.__setattr__(self, "states", states)
        self._check_names()
        n = len(coords)
        if len(vel) != n:
            raise ModelError(f"velocities has {len(vel)} entries but there are {n} coordinates")

        mass = _as_matrix(self.mass, "mass matrix")
        if mass.shape != (n, n):
            raise ModelError(
                f"mass matrix has shape {mass.shape[0]}x{mass.shape[1]} but there are {n} "
                f"coordinates; it must be {n}x{n}"
            )
        for i in range(n):
            for j in range(i + 1, n):
                d = mass[i, j] - mass[j, i]
                if d != 0 and sp.expand(d) != 0 and sp.simplify(d) != 0:
                    raise ModelError(
                        f"mass matrix is not symmetric: M[{i},{j}] = {mass[i, j]} but "
                        f"M[{j},{i}] = {mass[j, i]}"
                    )
        force = _as_column(self.force, "force")
        if force.rows != n:
            raise ModelError(f"force has {force.rows} entries but there are {n} coordinates")
        # As many constraints as coordinates is legitimate (a kinematically driven
        # mechanism), and so are redundant ones: rank is a numerical question that
        # assembly analysis answers (mbdgen.analysis.assembly), not the front end.
        phi = _as_column(self.constraints, "constraints")
        # Any symbol spelled "t" is the model's time, whatever its assumptions.
        alias = {
            s: t for e in (mass, force, phi) for s in e.free_symbols if s.name == "t" and s != t
        }
        if alias:
            mass, force, phi = (e.xreplace(alias) for e in (mass, force, phi))
        object.__setattr__(self, "mass", mass)
        object.__setattr__(self, "force", force)
        object.__setattr__(self, "constraints", phi)
        qd_vec = sp.Matrix(vel)
        kinetic = (
            (qd_vec.T * mass * qd_vec)[0, 0] / 2
            if self.kinetic is None
            else sp.sympify(self.kinetic).xreplace(alias)
        )
        object.__setattr__(self, "has_potential", self.potential is not None)
        potential = sp.sympify(0 if self.potential is None else self.potential).xreplace(alias)
        object.__setattr__(self, "kinetic", kinetic)
        object.__setattr__(self, "potential", potential)
        names = (
            tuple(f"phi[{i}]" for i in range(phi.rows))
            if self.constraint_names is None
            else tuple(self.constraint_names)
        )
        if len(names) != phi.rows or not all(isinstance(s, str) for s in names):
            raise ModelError(f"constraint_names must be {phi.rows} strings, one per constraint")
        object.__setattr__(self, "constraint_names", names)
        check_multipliers(states, f"model {self.name!r}", names)

        coord_set, vel_set, par_set = set(coords), set(vel), set(params)
        state_set = {s.symbol for s in states}
        self._check_free(mass, coord_set | par_set, "mass matrix", "M[{i},{j}]", state_set)
        self._check_free(
            force, coord_set | vel_set | par_set | state_set | {t}, "force", "Q[{i}]", state_set
        )
        self._check_free(phi, coord_set | par_set | {t}, "constraints", "constraint {i}", state_set)
        self._check_free(
            sp.Matrix([kinetic]),
            coord_set | vel_set | par_set | {t},
            "kinetic energy",
            "T",
            state_set,
        )
        self._check_free(
            sp.Matrix([potential]), coord_set | par_set | {t}, "potential energy", "V", state_set
        )

        object.__setattr__(self, "q0", self._numbers(self.q0, coords, "q0"))
        qd0 = self.qd0 if self.qd0 is not None else [0.0] * n
        object.__setattr__(self, "qd0", self._numbers(qd0, coords, "qd0"))
        for s, v in params.items():
            try:
                params[s] = float(v)
            except (TypeError, ValueError):
                raise ModelError(f"parameter {s.name!r} has non-numeric default {v!r}") from None
            finite_number(v, f"parameter {s.name!r}: default")
        if not isinstance(self.description, str):
            raise ModelError("description must be a string")

    # -- checks -------------------------------------------------------------
    def _check_names(self) -> None:
        check_symbol_names(
            (
                ("coordinate", self.coordinates),
                ("velocity", self.velocities),
                ("parameter", self.parameters),
                ("state", [s.symbol for s in self.states]),  # type: ignore[attr-defined]
            )
        )

    @staticmethod
    def _check_free(
        expr: sp.Matrix, allowed: set, what: str, where: str, states: set | None = None
    ) -> None:
        states = states or set()
        allowed_names = {s.name: s for s in allowed}
        for i in range(expr.rows):
            for j in range(expr.cols):
                e = expr[i, j]
                label = where.format(i=i, j=j)
                funcs = list(e.atoms(sp.core.function.AppliedUndef))
                if funcs:
                    raise ModelError(
                        f"{what}: {label} contains the undefined function {funcs[0]}; "
                        "write coordinates and parameters as plain sympy Symbols"
                    )
                for s in sorted(e.free_symbols, key=lambda s: s.name):
                    if s in allowed:
                        continue
                    if s in states:
                        raise ModelError(
                            f"{what}: {label} uses the state {s.name!r}; only the applied "
                            "force Q and the states' rates may depend on states"
                        )
                    if isinstance(s, StateSymbol):
                        raise ModelError(
                            f"{what}: {label} uses the state {s.name!r}, which is not among "
                            "the model's states; declare it in states=[...]"
                        )
                    if s.name in allowed_names:
                        raise ModelError(
                            f"{what}: {label} uses symbol {s.name!r} with different assumptions "
                            f"({s.assumptions0}) from the declared one; create it once and reuse it"
                        )
                    raise ModelError(
                        f"{what}: {label} = {e} uses {s.name!r}, which is neither a coordinate, "
                        f"{'a velocity, ' if 'force' in what else ''}a parameter nor t"
                    )

    @staticmethod
    def _numbers(
        values: Iterable[float], coordinates: Sequence[sp.Symbol], what: str
    ) -> tuple[float, ...]:
        n = len(coordinates)
        try:
            out = tuple(float(v) for v in values)
        except (TypeError, ValueError):
            raise ModelError(f"{what} must be a list of {n} numbers") from None
        if len(out) != n:
            raise ModelError(f"{what} has {len(out)} entries but there are {n} coordinates")
        for i, (c, v) in enumerate(zip(coordinates, out, strict=True)):
            finite_number(v, f"{what}[{i}] ({c.name})")
        return out

    # -- convenience -----------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of generalized coordinates."""
        return len(self.coordinates)

    @property
    def m(self) -> int:
        """Number of constraint equations."""
        return self.constraints.rows  # type: ignore[union-attr]

    @property
    def parameter_symbols(self) -> tuple[sp.Symbol, ...]:
        return tuple(self.parameters)

    @property
    def state_symbols(self) -> tuple[sp.Symbol, ...]:
        """Symbols of the user states X, in order (the tail of the kernels' p)."""
        return tuple(s.symbol for s in self.states)  # type: ignore[attr-defined]

    @property
    def nd(self) -> int:
        """Number of user differential states."""
        return len(self.states)
