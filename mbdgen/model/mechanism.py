"""A mechanism: bodies, joints, drivers and force elements, validated as a whole.

:class:`Mechanism` takes the bodies and the element instances that
:mod:`mbdgen.model.planar`, :mod:`mbdgen.model.spatial` and :mod:`mbdgen.model.forces`
make, adds each body's own inertia element, and checks names, parameters and user
states across all of them.  It sits above those factories (it needs their
``inertia``) and :mod:`mbdgen.model.elements` below them, so that none of the four
imports a module that imports it.  :meth:`Mechanism.flatten` gives the same system as
one generalized-coordinate :class:`~mbdgen.model.core.Model`, the flat path that
cross-checks the element path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import sympy as sp

from mbdgen.errors import ModelError
from mbdgen.model import planar, spatial
from mbdgen.model.core import Model
from mbdgen.model.elements import Body, Element, element_type
from mbdgen.model.names import check_identifier, check_symbol_names, finite_number
from mbdgen.model.states import StateSymbol, check_multipliers, check_states


class Mechanism:
    """A mechanism: bodies, joints, drivers and force elements (validated on construction).

    Parameters
    ----------
    name : str
        Identifier; also the generated module's name.
    bodies : sequence of Body
        The moving bodies (their order fixes the order of q).
    elements : sequence of Element (nested sequences are flattened)
        Joints, drivers and force elements; each body's own inertia element (and, for
        spatial bodies, the Euler-parameter normalization pᵀp − 1 = 0 and the
        quadratic-velocity force) is added automatically.
    parameters : mapping Symbol -> float
        Defaults of the global parameters that elements reference by Symbol.
    description : str
        Where the mechanism comes from.
    states : sequence of :class:`~mbdgen.model.states.State`, optional
        User differential states (Negrut et al. 2007, Eq. 8a), explicit Ẋ = f(q, q̇, X,
        t) or implicit d(Ẋ, X, q, q̇, q̈, λ, t) = 0 (:mod:`mbdgen.model.states`); force
        elements may use their symbols, no other element may.
    """

    def __repr__(self) -> str:
        return f"Mechanism({self.name!r}, {len(self.bodies)} bodies, {len(self.elements)} elements)"

    def __init__(
        self,
        name: str,
        bodies: Sequence[Body],
        elements: Iterable[Element | Iterable[Element]] = (),
        parameters: Mapping[sp.Symbol, float] | None = None,
        description: str = "",
        states: Iterable[object] = (),
    ) -> None:
        self.name = check_identifier(name, "model")
        self.description = description
        if not isinstance(description, str):
            raise ModelError("description must be a string")
        self.bodies = tuple(bodies)
        if not self.bodies:
            raise ModelError(f"mechanism {name!r} has no bodies")
        for b in self.bodies:
            if not isinstance(b, Body):
                raise ModelError(f"mechanism {name!r}: {b!r} is not a Body")
        user: list[Element] = []
        for e in elements:
            if isinstance(e, Element):
                user.append(e)
            else:
                try:
                    items = list(e)
                except TypeError:
                    raise ModelError(f"mechanism {name!r}: {e!r} is not an element") from None
                for item in items:
                    if not isinstance(item, Element):
                        raise ModelError(f"mechanism {name!r}: {item!r} is not an element")
                    user.append(item)
        own = [planar.inertia(b) if b.kind == "planar" else spatial.inertia(b) for b in self.bodies]
        # (each module's inertia() gives a point mass its own mass-only element)
        self.elements: tuple[Element, ...] = tuple(own + user)
        self._validate(parameters or {}, states)

    # -- validation ------------------------------------------------------------
    def _validate(self, declared: Mapping[sp.Symbol, float], states: Iterable[object]) -> None:
        names: dict[str, str] = {}
        for b in self.bodies:
            if b.name in names:
                raise ModelError(f"duplicate name {b.name!r}: two bodies")
            names[b.name] = "body"
        for e in self.elements:
            if e.name in names and e.role != "body":
                raise ModelError(
                    f"duplicate name {e.name!r}: used by a {names[e.name]} and a {e.role}"
                )
            names.setdefault(e.name, e.role)
        known = set(self.bodies)
        for e in self.elements:
            for b in e.bodies:
                if isinstance(b, Body) and b not in known:
                    raise ModelError(
                        f"{e.role} {e.name!r} uses body {b.name!r}, which is not in the "
                        "mechanism's bodies"
                    )
        defaults: dict[sp.Symbol, float] = {}
        for s, v in declared.items():
            if not isinstance(s, sp.Symbol):
                raise ModelError(f"parameter {s!r} must be a sympy Symbol")
            try:
                defaults[s] = float(v)
            except (TypeError, ValueError):
                raise ModelError(f"parameter {s.name!r} has non-numeric default {v!r}") from None
        for b in self.bodies:
            defaults.update({s: v for s, v in b.defaults.items() if s not in declared})
        for e in self.elements:
            defaults.update({s: v for s, v in e.defaults.items() if s not in declared})
        for s, v in defaults.items():
            finite_number(v, f"parameter {s.name!r}: default")
        coords = [c for b in self.bodies for c in b.coordinates]
        vels = [c for b in self.bodies for c in b.velocities]
        self.states = check_states(states, f"mechanism {self.name!r}", coords, vels, list(defaults))
        state_symbols = {s.symbol for s in self.states}
        for e in self.elements:
            for local, s in e.params:
                if s in state_symbols or isinstance(s, StateSymbol):
                    if e.role != "force":
                        raise ModelError(
                            f"{e.role} {e.name!r} uses the state {s.name!r}; only force "
                            "elements may depend on states"
                        )
                    if s not in state_symbols:
                        raise ModelError(
                            f"{e.role} {e.name!r} uses the state {s.name!r}, which is not among "
                            f"the mechanism's states; add it to states=[...]"
                        )
                    continue
                if s not in defaults:
                    raise ModelError(
                        f"{e.role} {e.name!r}: parameter {local!r} is the symbol {s.name!r}, "
                        "which has no default; add it to the mechanism's parameters"
                    )
        check_symbol_names(
            (
                ("coordinate", coords),
                ("velocity", vels),
                ("parameter", defaults),
                ("state", [s.symbol for s in self.states]),
            )
        )
        self.coordinates = tuple(coords)
        self.velocities = tuple(vels)
        self.parameters = defaults
        self.q0 = tuple(v for b in self.bodies for v in b.q0)
        self.qd0 = tuple(v for b in self.bodies for v in b.qd0)
        offsets, k = {}, 0
        for b in self.bodies:
            offsets[b] = k
            k += b.size
        self.body_offset = offsets
        # Build each element once to learn its number of constraint rows.
        self._rows: list[int] = []
        row = 0
        for e in self.elements:
            self._rows.append(row)
            row += len(element_type(e).contribution.phi)
        self.m = row
        check_multipliers(self.states, f"mechanism {self.name!r}", self.constraint_names)

    # -- sizes and names -----------------------------------------------------------
    @property
    def n(self) -> int:
        return len(self.coordinates)

    @property
    def parameter_symbols(self) -> tuple[sp.Symbol, ...]:
        return tuple(self.parameters)

    @property
    def state_symbols(self) -> tuple[sp.Symbol, ...]:
        """Symbols of the user states X, in order (the tail of the kernels' p)."""
        return tuple(s.symbol for s in self.states)

    @property
    def nd(self) -> int:
        """Number of user differential states."""
        return len(self.states)

    def element_rows(self) -> list[tuple[Element, int, int]]:
        """(element, first constraint row, number of rows) for every element."""
        return [
            (e, r, len(element_type(e).contribution.phi))
            for e, r in zip(self.elements, self._rows, strict=True)
        ]

    @property
    def constraint_names(self) -> tuple[str, ...]:
        """A label per constraint row: ``<element>[<row within the element>]``."""
        return tuple(f"{e.name}[{i}]" for e, _, k in self.element_rows() for i in range(k))

    def local_indices(self, e: Element) -> list[int]:
        """Global indices of the local (moving) coordinates of ``e``, slot by slot."""
        out: list[int] = []
        for b in e.bodies:
            if isinstance(b, Body):
                start = self.body_offset[b]
                out.extend(range(start, start + b.size))
        return out

    # -- the flat path -----------------------------------------------------------
    def flatten(self) -> Model:
        """The same mechanism as one generalized-coordinate :class:`Model`."""
        n = self.n
        mass = sp.zeros(n, n)
        force = sp.zeros(n, 1)
        phi: list[sp.Expr] = []
        kinetic = sp.S.Zero
        potential = sp.S.Zero
        for e in self.elements:
            et = element_type(e)
            subs = et.substitution(self, e)
            idx = self.local_indices(e)
            c = et.contribution
            phi.extend(sp.sympify(f).xreplace(subs) for f in c.phi)
            M = et.local_mass.xreplace(subs)
            Q = et.local_force.xreplace(subs)
            for a, ia in enumerate(idx):
                force[ia] += Q[a]
                for b, ib in enumerate(idx):
                    mass[ia, ib] += M[a, b]
            kinetic += sp.sympify(c.kinetic).xreplace(subs)
            potential += sp.sympify(c.potential).xreplace(subs)
        return Model(
            name=self.name,
            coordinates=self.coordinates,
            velocities=self.velocities,
            mass=mass,
            force=force,
            constraints=phi,
            parameters=dict(self.parameters),
            q0=self.q0,
            qd0=self.qd0,
            description=self.description,
            potential=potential,
            kinetic=kinetic,
            constraint_names=self.constraint_names,
            states=self.states,
        )
