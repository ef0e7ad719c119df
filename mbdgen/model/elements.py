"""Element front end: the bodies, element instances and element types of a mechanism.

A :class:`~mbdgen.model.mechanism.Mechanism` is a list of :class:`Body` objects and
:class:`Element` instances.  An element is an *instance* of an element *type*: the type is a pure
SymPy function (``build``) of local symbols — the coordinates and velocities of the
bodies it connects (its *slots*) and its own local parameters — and the instance says
which bodies fill the slots and which global parameters fill the local ones.  The
compiler derives each distinct type once (DESIGN "Scale: element kernels"), so
compile cost grows with the number of element types, not with the number of bodies.

:meth:`Mechanism.flatten <mbdgen.model.mechanism.Mechanism.flatten>` substitutes every
instance into one generalized-coordinate :class:`~mbdgen.model.core.Model`: the flat
path, which serves as the independent cross-check of the element path and is used for
small models' introspection.

Bodies carry their coordinates:

* planar (Haug 1989, ch. 3-6):  q_i = [x_i, y_i, φ_i];
* spatial (Haug 1989, ch. 9-11): q_i = [x_i, y_i, z_i, e0_i, e1_i, e2_i, e3_i]
  (position of the centroid and Euler parameters);
* point masses (``point=True``): the position only, [x_i, y_i] or [x_i, y_i, z_i].
  In an element's slot a point mass looks like a body whose orientation is the
  ground's (φ = 0, p = [1, 0, 0, 0], constants, as for the ground): the library's
  joints and forces work on it unchanged, and the generalized forces they put on
  the missing rotational coordinates are dropped (see :func:`element_type`).

The ground is :data:`GROUND`; in a slot it contributes constant coordinates
(planar [0, 0, 0], spatial [0, 0, 0, 1, 0, 0, 0]) and no unknowns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import sympy as sp

from mbdgen.errors import ModelError
from mbdgen.model.names import check_identifier, finite_number, t

if TYPE_CHECKING:
    from mbdgen.model.mechanism import Mechanism

#: Coordinates per body slot kind and the ground's constant coordinates in that kind.
SLOT_SIZES = {"planar": 3, "spatial": 7}
GROUND_COORDINATES = {"planar": (0, 0, 0), "spatial": (0, 0, 0, 1, 0, 0, 0)}
#: Coordinate-name suffixes of a body's coordinates.
SLOT_COORDINATE_NAMES = {
    "planar": ("x", "y", "phi"),
    "spatial": ("x", "y", "z", "e0", "e1", "e2", "e3"),
}
ROLES = ("body", "joint", "driver", "force")
#: Coordinates of a point-mass body per kind: its position only (no orientation).
POINT_SIZES = {"planar": 2, "spatial": 3}
#: Element families that act on a body's orientation only: meaningless on a point mass.
ORIENTATION_FAMILIES = ("torque", "rsda", "spatial_torque_global", "spatial_torque_body")


class Ground:
    """The fixed frame; fills any slot with constant coordinates."""

    name = "ground"
    kind = None

    def __repr__(self) -> str:
        return "GROUND"


GROUND = Ground()


@dataclass(frozen=True, eq=False)
class Body:
    """A rigid body with its own coordinates and inertia parameters.

    ``inertia`` maps local names ("m", "J" for planar; "m", "Jxx", "Jyy", "Jzz",
    "Jxy", "Jxz", "Jyz" for spatial) to global parameter symbols; ``defaults``
    gives their default values.  Create bodies with :func:`mbdgen.model.planar.body`
    or :func:`mbdgen.model.spatial.body`.
    """

    name: str
    kind: str
    coordinates: tuple[sp.Symbol, ...]
    velocities: tuple[sp.Symbol, ...]
    q0: tuple[float, ...]
    qd0: tuple[float, ...]
    inertia: Mapping[str, sp.Symbol]
    defaults: Mapping[sp.Symbol, float]
    point: bool = False

    def __post_init__(self) -> None:
        check_identifier(self.name, "body")
        if self.kind not in SLOT_SIZES:
            raise ModelError(f"body {self.name!r}: kind must be 'planar' or 'spatial'")
        size = self.size
        what_body = f"{self.kind} point mass" if self.point else f"{self.kind} body"
        for what, vec in (("q0", self.q0), ("qd0", self.qd0)):
            if len(vec) != size:
                raise ModelError(
                    f"body {self.name!r}: {what} has {len(vec)} entries, a {what_body} "
                    f"has {size} coordinates ({', '.join(coordinate_names(self.kind, self.point))})"
                )
            for i, (c, v) in enumerate(zip(self.coordinates, vec, strict=False)):
                finite_number(v, f"body {self.name!r}: {what}[{i}] ({c.name})")

    @property
    def size(self) -> int:
        """Number of coordinates: 3 / 7 (planar / spatial body), 2 / 3 (point mass)."""
        return body_size(self.kind, self.point)

    def __repr__(self) -> str:
        return f"Body({self.name!r}, {self.kind}{' point' if self.point else ''})"


def body_size(kind: str, point: bool = False) -> int:
    """Coordinates of a body of ``kind`` (a point mass: its position only)."""
    return POINT_SIZES[kind] if point else SLOT_SIZES[kind]


def coordinate_names(kind: str, point: bool = False) -> tuple[str, ...]:
    """Coordinate-name suffixes of a body of ``kind`` (``x``, ``y``, ``phi`` ...)."""
    return SLOT_COORDINATE_NAMES[kind][: body_size(kind, point)]


def make_coordinates(
    name: str, kind: str, point: bool = False
) -> tuple[tuple[sp.Symbol, ...], tuple[sp.Symbol, ...]]:
    """The coordinate and velocity symbols of body ``name`` (``crank_x``, ``crank_x_d``)."""
    check_identifier(name, "body")
    q = tuple(sp.Symbol(f"{name}_{s}") for s in coordinate_names(kind, point))
    qd = tuple(sp.Symbol(f"{c.name}_d") for c in q)
    return q, qd


@dataclass(frozen=True)
class Local:
    """What an element type's ``build`` sees: local symbols only.

    ``q[s]`` and ``qd[s]`` are column matrices of the coordinates and velocities in
    slot ``s`` (constants for the ground); ``p`` maps local parameter names to symbols;
    ``ground[s]`` tells whether slot ``s`` is the ground.
    """

    t: sp.Symbol
    q: tuple[sp.Matrix, ...]
    qd: tuple[sp.Matrix, ...]
    p: Mapping[str, sp.Symbol]
    ground: tuple[bool, ...]
    slots: tuple[str, ...]


@dataclass
class Contribution:
    """An element's share of the equations, in its local symbols.

    ``phi``: constraint rows (joints and drivers).  ``mass`` / ``force``: per slot,
    a block of the mass matrix and of the generalized force on that slot's coordinates
    (None where there is none; ignored for the ground).  ``kinetic`` and ``potential``:
    energy terms.  ``points``: per slot, the body-fixed point (column, body frame) at
    which joint reactions are reported (None: the body's origin).
    """

    phi: Sequence[sp.Expr] = ()
    mass: Sequence[sp.Matrix | None] | None = None
    force: Sequence[sp.Matrix | None] | None = None
    kinetic: sp.Expr = sp.S.Zero
    potential: sp.Expr = sp.S.Zero
    points: Sequence[sp.Matrix | None] | None = None


Builder = Callable[[Local], Contribution]


@dataclass(frozen=True, eq=False)
class Element:
    """One instance of an element type.

    ``family`` names the type family (an identifier such as ``revolute``); the full
    type also depends on the slot kinds, which slots are the ground, the names of the
    local parameters in order and ``key`` (the structure of any user expression).  ``params``
    maps local parameter names, in order, to global parameter symbols; ``defaults``
    holds default values of the global symbols this element created itself.
    """

    name: str
    family: str
    role: str
    slots: tuple[str, ...]
    bodies: tuple[Body | Ground, ...]
    params: tuple[tuple[str, sp.Symbol], ...]
    build: Builder
    key: str = ""
    defaults: Mapping[sp.Symbol, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_identifier(self.name, "element")
        check_identifier(self.family, "element type")
        if self.role not in ROLES:
            raise ModelError(f"element {self.name!r}: role must be one of {ROLES}")
        if len(self.slots) != len(self.bodies):
            raise ModelError(f"element {self.name!r}: {len(self.bodies)} bodies for {self.slots}")
        for slot, body in zip(self.slots, self.bodies, strict=True):
            if isinstance(body, Ground):
                continue
            if not isinstance(body, Body):
                raise ModelError(
                    f"element {self.name!r}: {body!r} is not a body (use a Body or GROUND)"
                )
            if body.kind != slot:
                raise ModelError(
                    f"element {self.name!r} connects {slot} bodies, but {body.name!r} is "
                    f"a {body.kind} body"
                )
            if body.point and self.family in ORIENTATION_FAMILIES:
                raise ModelError(
                    f"{self.role} {self.name!r} acts on the orientation of {body.name!r}, "
                    "a point mass, which has none"
                )
        moving = [b for b in self.bodies if isinstance(b, Body)]
        if len({id(b) for b in moving}) != len(moving):
            raise ModelError(f"element {self.name!r} connects body {moving[0].name!r} to itself")

    @property
    def ground_mask(self) -> tuple[bool, ...]:
        return tuple(isinstance(b, Ground) for b in self.bodies)

    @property
    def point_mask(self) -> tuple[bool, ...]:
        """Which slots a point mass fills."""
        return tuple(isinstance(b, Body) and b.point for b in self.bodies)

    @property
    def type_key(self) -> tuple:
        """Everything that makes two instances share one set of element kernels.

        The local parameters by name, in order, not by count: local parameter j is
        ``_p<j>`` in the kernels, and a family may take optional ones (a spatial body
        keeps only the products of inertia that are not structural zeros: m, Jxx, Jyy,
        Jzz with Jxz is another type than with Jyz).  Keyed by the count, the first of
        the two built in a process, or stored in the element cache, served both.
        """
        names = tuple(name for name, _ in self.params)
        key = (self.family, self.role, self.slots, self.ground_mask, names, self.key)
        return (*key, self.point_mask) if any(self.point_mask) else key

    @property
    def type_name(self) -> str:
        """A readable identifier of the type (family, slot kinds, ground and point-mass
        slots: ``g`` ground, ``p``/``s`` planar/spatial body, ``pm``/``sm`` point mass)."""
        tags = "".join(
            "g" if g else s[0] + ("m" if m else "")
            for s, g, m in zip(self.slots, self.ground_mask, self.point_mask, strict=True)
        )
        return f"{self.family}_{tags}" if tags else self.family


def parameter(owner: str, local: str, value: float | sp.Symbol) -> tuple[sp.Symbol, dict]:
    """The global symbol for local parameter ``local`` of ``owner``, and its default.

    A number creates a parameter named ``<owner>_<local>`` with that default (so it
    stays a runtime value, DESIGN rule 3); a Symbol is used as is (its default comes
    from :class:`~mbdgen.model.mechanism.Mechanism`'s ``parameters``).
    """
    if isinstance(value, sp.Symbol):
        return value, {}
    if isinstance(value, sp.Basic) and not value.is_number:
        raise ModelError(
            f"{owner}: parameter {local!r} = {value} must be a number or a single parameter "
            "Symbol (declare a derived quantity as its own parameter)"
        )
    number = finite_number(value, f"{owner}: parameter {local!r}")
    sym = sp.Symbol(f"{owner}_{local}")
    return sym, {sym: number}


def localize(
    owner: str, exprs: Sequence[sp.Expr], bound: Mapping[sp.Symbol, sp.Symbol]
) -> tuple[list[sp.Expr], list[sp.Symbol], str]:
    """Rewrite user expressions in local symbols.

    ``bound`` maps symbols the element itself defines (t, ℓ, ℓ̇, the element's own
    coordinates...) to local placeholders.  Every other free symbol is a global
    parameter and becomes an extra local parameter ``_u<i>``.  Returns the local
    expressions, the global symbols in order, and a key that identifies the
    expressions' structure (two instances with the same key share kernels).
    """
    exprs = [sp.sympify(e) for e in exprs]
    for e in exprs:
        funcs = list(e.atoms(sp.core.function.AppliedUndef))
        if funcs:
            raise ModelError(
                f"{owner}: expression {e} contains the undefined function {funcs[0]}; "
                "use plain Symbols"
            )
    alias = {s: t for e in exprs for s in e.free_symbols if s.name == "t" and s != t}
    exprs = [e.xreplace(alias) for e in exprs]
    free = sorted(
        {s for e in exprs for s in e.free_symbols if s not in bound and s != t},
        key=lambda s: s.name,
    )
    extra = {s: sp.Symbol(f"_u{i}") for i, s in enumerate(free)}
    subs = {**bound, **extra}
    local = [e.xreplace(subs) for e in exprs]
    return local, free, sp.srepr(local)


# -- helpers shared by the planar and spatial element factories and mbdgen.model.forces --
# (here, below all three, so that none of them imports another: forces dispatches to
# planar and spatial, which need only these)

#: The symbols a force element's user expression may use for the quantities it defines,
#: exported to users as :data:`mbdgen.model.forces.l`, ``ldot``, ``theta``, ``thetadot``:
#: a TSDA's length ℓ and its rate ℓ̇, an RSDA's relative angle θ = φ_j − φ_i and its rate.
TSDA_LENGTH = sp.Symbol("_tsda_l")
TSDA_RATE = sp.Symbol("_tsda_ldot")
RSDA_ANGLE = sp.Symbol("_rsda_theta")
RSDA_RATE = sp.Symbol("_rsda_thetadot")


def user_expressions(
    owner: str,
    exprs: Sequence[sp.Expr | float],
    bound: Mapping[sp.Symbol, sp.Symbol] | None = None,
) -> tuple[list[sp.Expr], tuple[tuple[str, sp.Symbol], ...], str]:
    """Localize user expressions: (local expressions, extra params ``_u<i>``, type key).

    ``bound`` maps the symbols the element defines (ℓ, body coordinates, ...) to local
    placeholders; the extra parameters are to be appended to the element's ``params``
    and the placeholders ``_u<i>`` replaced by ``loc.p["_u<i>"]`` with :func:`unbind`.
    """
    local, free, key = localize(owner, list(exprs), dict(bound or {}))
    return local, tuple((f"_u{i}", s) for i, s in enumerate(free)), key


def unbind(loc: Local, extra: Mapping[sp.Symbol, sp.Expr] | None = None) -> dict:
    """The substitution placeholder → local symbol for a builder: ``_u<i>`` → ``loc.p``,
    body-coordinate placeholders (:func:`bind_bodies`) → ``loc.q``/``loc.qd``, and
    ``extra``."""
    subs: dict[sp.Symbol, sp.Expr] = {
        sp.Symbol(name): sym for name, sym in loc.p.items() if name.startswith("_u")
    }
    for s, (q, qd) in enumerate(zip(loc.q, loc.qd, strict=True)):
        for a in range(len(q)):
            subs[sp.Symbol(f"_b{s}_{a}")] = q[a]
            subs[sp.Symbol(f"_bd{s}_{a}")] = qd[a]
    subs.update(extra or {})
    return subs


def bind_bodies(bodies: Sequence[Body | Ground]) -> dict[sp.Symbol, sp.Symbol]:
    """Coordinate and velocity symbols of ``bodies`` → slot placeholders ``_b<s>_<a>``,
    ``_bd<s>_<a>`` (replaced by the slot's local coordinates in :func:`unbind`)."""
    bound: dict[sp.Symbol, sp.Symbol] = {}
    for s, b in enumerate(bodies):
        if isinstance(b, Body):
            for a, (c, v) in enumerate(zip(b.coordinates, b.velocities, strict=True)):
                bound[c] = sp.Symbol(f"_b{s}_{a}")
                bound[v] = sp.Symbol(f"_bd{s}_{a}")
    return bound


@dataclass(frozen=True)
class ElementType:
    """One element type, built once in local symbols.

    ``q``/``qd`` are the local moving coordinates and velocities (slots in order,
    ground slots skipped), ``p`` the local parameters; ``local_mass`` and
    ``local_force`` are assembled over ``q``.
    """

    name: str
    role: str
    slots: tuple[str, ...]
    ground: tuple[bool, ...]
    q: tuple[sp.Symbol, ...]
    qd: tuple[sp.Symbol, ...]
    p: tuple[sp.Symbol, ...]
    contribution: Contribution
    local_mass: sp.Matrix
    local_force: sp.Matrix
    slot_q: tuple[sp.Matrix, ...]
    #: Moving coordinates per slot (0 for the ground; 2 or 3 for a point mass).
    slot_sizes: tuple[int, ...] = ()

    def __repr__(self) -> str:
        return f"ElementType({self.name!r}, {self.role})"

    def substitution(self, mech: Mechanism, e: Element) -> dict[sp.Symbol, sp.Symbol]:
        """Local symbol → global symbol for instance ``e`` of this type."""
        gq = [c for b in e.bodies if isinstance(b, Body) for c in b.coordinates]
        gqd = [c for b in e.bodies if isinstance(b, Body) for c in b.velocities]
        subs = dict(zip(self.q, gq, strict=True))
        subs.update(zip(self.qd, gqd, strict=True))
        subs.update(zip(self.p, (s for _, s in e.params), strict=True))
        return subs


_TYPES: dict[tuple, ElementType] = {}


def element_type(e: Element) -> ElementType:
    """The (cached) :class:`ElementType` of instance ``e``."""
    key = e.type_key
    cached = _TYPES.get(key)
    if cached is not None:
        return cached
    q_all: list[sp.Symbol] = []
    qd_all: list[sp.Symbol] = []
    slot_q, slot_qd = [], []
    k = 0
    sizes: list[int] = []
    for slot, g, point in zip(e.slots, e.ground_mask, e.point_mask, strict=True):
        if g:
            slot_q.append(sp.Matrix(GROUND_COORDINATES[slot]))
            slot_qd.append(sp.zeros(SLOT_SIZES[slot], 1))
            sizes.append(0)
            continue
        size = body_size(slot, point)
        qs = [sp.Symbol(f"_q{k + i}") for i in range(size)]
        qds = [sp.Symbol(f"_qd{k + i}") for i in range(size)]
        k += size
        q_all += qs
        qd_all += qds
        sizes.append(size)
        # A point mass's orientation is the ground's: constants, zero rates.
        pad = list(GROUND_COORDINATES[slot][size:])
        slot_q.append(sp.Matrix(qs + pad))
        slot_qd.append(sp.Matrix(qds + [0] * len(pad)))
    p = tuple(sp.Symbol(f"_p{i}") for i in range(len(e.params)))
    local = Local(
        t=t,
        q=tuple(slot_q),
        qd=tuple(slot_qd),
        p={name: s for (name, _), s in zip(e.params, p, strict=True)},
        ground=e.ground_mask,
        slots=e.slots,
    )
    try:
        c = e.build(local)
    except ModelError:
        raise
    except Exception as exc:
        raise ModelError(f"{e.role} {e.name!r}: cannot build its equations: {exc}") from None
    nq = len(q_all)
    mass = sp.zeros(nq, nq)
    force = sp.zeros(nq, 1)
    off = 0
    for s, (g, size) in enumerate(zip(e.ground_mask, sizes, strict=True)):
        if g:
            continue
        # A point mass keeps the translational part; what an element puts on the
        # rotational coordinates it lacks is dropped (they are constants there).
        if c.mass is not None and c.mass[s] is not None:
            mass[off : off + size, off : off + size] = sp.Matrix(c.mass[s])[:size, :size]
        if c.force is not None and c.force[s] is not None:
            force[off : off + size, 0] = sp.Matrix(c.force[s])[:size, 0]
        off += size
    c.phi = tuple(sp.sympify(f) for f in c.phi)
    if any(e.point_mask):
        for r, f in enumerate(c.phi):
            if not f.free_symbols & set(q_all):
                raise ModelError(
                    f"{e.role} {e.name!r}: its row {r} involves no coordinate: it constrains "
                    "the orientation of a point mass, which has none (use a joint that "
                    "only places points, e.g. a distance or spherical joint)"
                )
    allowed = set(q_all) | set(qd_all) | set(p) | {t}
    for what, exprs in (("constraints", c.phi), ("mass", mass), ("force", force)):
        for ex in exprs:
            stray = sp.sympify(ex).free_symbols - allowed
            if stray:
                names = ", ".join(sorted(s.name for s in stray))
                raise ModelError(f"{e.role} {e.name!r}: {what} use undeclared symbols {names}")
    et = ElementType(
        name=e.type_name,
        role=e.role,
        slots=e.slots,
        ground=e.ground_mask,
        q=tuple(q_all),
        qd=tuple(qd_all),
        p=p,
        contribution=c,
        local_mass=mass,
        local_force=force,
        slot_q=tuple(slot_q),
        slot_sizes=tuple(sizes),
    )
    _TYPES[key] = et
    return et
