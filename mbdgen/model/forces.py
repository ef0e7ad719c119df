"""Force elements that dispatch on the kinds of the bodies they act on.

Each factory here checks whether its bodies are planar or spatial and calls the
element factory of :mod:`mbdgen.model.planar` or :mod:`mbdgen.model.spatial` with the
same name; :func:`generalized` works for bodies of either kind.  The force elements
follow Haug 1989, ch. 6 (planar) and ch. 11 (spatial):

* :func:`tsda`: translational spring–damper–actuator between two body points,
  f = k (ℓ − ℓ0) + c ℓ̇ + F(ℓ, ℓ̇, t), acting along the line between the points;
* :func:`rsda`: rotational spring–damper–actuator between two bodies,
  T = k (θ − θ0) + c θ̇ + T_a(θ, θ̇, t), θ = φ_j − φ_i;
* :func:`point_force`: a force at a body point, given in the global or the body frame;
* :func:`torque`: a pure torque on a body;
* :func:`generalized`: an arbitrary generalized force on named coordinates;
* :func:`gravity`: uniform gravity on every body.

User expressions may use the symbols this module exports — :data:`l` and :data:`ldot`
(the TSDA's length ℓ and its rate ℓ̇), :data:`theta` and :data:`thetadot` (the RSDA's
relative angle and its rate) — the time :data:`t`, and global parameter Symbols (whose
defaults go into the Mechanism's ``parameters``).  Every other free symbol is taken as
a parameter, so instances whose expressions have the same structure share one element
type (:func:`~mbdgen.model.elements.localize`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

import sympy as sp

from mbdgen.errors import ModelError
from mbdgen.model import planar, spatial
from mbdgen.model.elements import (
    RSDA_ANGLE,
    RSDA_RATE,
    TSDA_LENGTH,
    TSDA_RATE,
    Body,
    Contribution,
    Element,
    Ground,
    Local,
    bind_bodies,
    unbind,
    user_expressions,
)
from mbdgen.model.names import t

__all__ = [
    "l",
    "ldot",
    "theta",
    "thetadot",
    "t",
    "tsda",
    "rsda",
    "point_force",
    "torque",
    "generalized",
    "gravity",
]

#: Length ℓ of a TSDA (use it in the actuator expression ``F(ℓ, ℓ̇, t)``).
l = TSDA_LENGTH
#: Rate of change ℓ̇ of a TSDA's length.
ldot = TSDA_RATE
#: Relative angle θ = φ_j − φ_i of an RSDA (use it in ``T_a(θ, θ̇, t)``).
theta = RSDA_ANGLE
#: Relative angular velocity θ̇ of an RSDA.
thetadot = RSDA_RATE


def _kind(name: str, bodies: Sequence[Body | Ground]) -> str:
    kinds = {b.kind for b in bodies if isinstance(b, Body)}
    for b in bodies:
        if not isinstance(b, Body | Ground):
            raise ModelError(f"{name}: {b!r} is not a body (use a Body or GROUND)")
    if not kinds:
        raise ModelError(f"{name}: acts on the ground only")
    if len(kinds) > 1:
        raise ModelError(f"{name}: connects planar and spatial bodies")
    return kinds.pop()


def _dispatch(name: str, factory: str, bodies: Sequence[Body | Ground]):
    kind = _kind(name, bodies)
    module = planar if kind == "planar" else spatial
    fn = getattr(module, factory, None)
    if fn is None:
        raise ModelError(
            f"{name}: there is no {kind} {factory} element yet "
            f"(mbdgen.model.{module.__name__.rsplit('.', 1)[-1]}.{factory})"
        )
    return fn


# -- dispatching factories -------------------------------------------------------------
def tsda(
    name: str,
    body_i: Body | Ground,
    s_i: Sequence[float | sp.Symbol],
    body_j: Body | Ground,
    s_j: Sequence[float | sp.Symbol],
    k: float | sp.Symbol = 0.0,
    c: float | sp.Symbol = 0.0,
    l0: float | sp.Symbol = 0.0,
    actuator: sp.Expr | float = 0,
) -> Element:
    """Translational spring–damper–actuator between point P_i of body i and P_j of body j.

    Tension f = k (ℓ − ℓ0) + c ℓ̇ + F(ℓ, ℓ̇, t) pulls the points together (Haug 1989,
    ch. 6, TSDA; planar: :func:`mbdgen.model.planar.tsda`).  ``actuator`` is F, an
    expression in :data:`l`, :data:`ldot`, :data:`t` and parameter Symbols.
    """
    fn = _dispatch(name, "tsda", (body_i, body_j))
    return fn(name, body_i, s_i, body_j, s_j, k=k, c=c, l0=l0, actuator=actuator)


def rsda(
    name: str,
    body_i: Body | Ground,
    body_j: Body | Ground,
    k: float | sp.Symbol = 0.0,
    c: float | sp.Symbol = 0.0,
    theta0: float | sp.Symbol = 0.0,
    actuator: sp.Expr | float = 0,
) -> Element:
    """Rotational spring–damper–actuator: torque T = k (θ − θ0) + c θ̇ + T_a(θ, θ̇, t)
    with θ = φ_j − φ_i, acting +T on body i and −T on body j (Haug 1989, ch. 6, RSDA;
    planar: :func:`mbdgen.model.planar.rsda`)."""
    fn = _dispatch(name, "rsda", (body_i, body_j))
    return fn(name, body_i, body_j, k=k, c=c, theta0=theta0, actuator=actuator)


def point_force(
    name: str,
    body: Body,
    s: Sequence[float | sp.Symbol],
    f: Sequence[sp.Expr | float],
    frame: str = "global",
) -> Element:
    """A force ``f`` applied at the body-fixed point ``s`` (``frame``: ``"global"`` or
    ``"body"`` components); the components may depend on t, parameters and the
    body's own coordinates and velocities (planar: :func:`mbdgen.model.planar.point_load`)."""
    fn = _dispatch(name, "point_load", (body,))
    return fn(name, body, s, f, frame=frame)


def torque(name: str, body: Body, T: sp.Expr | float) -> Element:
    """A pure torque ``T`` on ``body`` (planar: :func:`mbdgen.model.planar.torque`)."""
    fn = _dispatch(name, "torque", (body,))
    return fn(name, body, T)


def _generalized(loc: Local, exprs: tuple, slots: tuple[tuple[int, int], ...]) -> Contribution:
    subs = unbind(loc)
    force: list[sp.Matrix | None] = [None] * len(loc.q)
    for (s, a), ex in zip(slots, exprs, strict=True):
        if force[s] is None:
            force[s] = sp.zeros(len(loc.q[s]), 1)
        force[s][a] += ex.xreplace(subs)
    return Contribution(force=force)


def generalized(
    name: str,
    bodies: Sequence[Body],
    expressions: Mapping[sp.Symbol, sp.Expr | float],
) -> Element:
    """An arbitrary generalized force: ``expressions[c]`` is added to the generalized
    force on coordinate ``c`` (a coordinate of one of ``bodies``), Haug 1989, Eq. 6.1.5
    (δW = Qᵀδq).  The expressions may use the coordinates and velocities of ``bodies``
    (``crank_phi``, ``crank_phi_d``), :data:`t` and parameter Symbols."""
    bodies = tuple(bodies)
    if not bodies:
        raise ModelError(f"{name}: a generalized force needs at least one body")
    for b in bodies:
        if not isinstance(b, Body):
            raise ModelError(f"{name}: {b!r} is not a (moving) body")
    where: dict[sp.Symbol, tuple[int, int]] = {}
    for s, b in enumerate(bodies):
        for a, c in enumerate(b.coordinates):
            where[c] = (s, a)
    slots, exprs = [], []
    for c, ex in expressions.items():
        if c not in where:
            raise ModelError(
                f"{name}: {c} is not a coordinate of {', '.join(repr(b.name) for b in bodies)}"
            )
        slots.append(where[c])
        exprs.append(ex)
    order = sorted(range(len(slots)), key=lambda i: slots[i])
    slots = [slots[i] for i in order]
    exprs = [exprs[i] for i in order]
    local, extra, key = user_expressions(name, exprs, bind_bodies(bodies))
    slot_key = tuple(slots)

    return Element(
        name=name,
        family="generalized_force",
        role="force",
        slots=tuple(b.kind for b in bodies),
        bodies=bodies,
        params=extra,
        build=partial(_generalized, exprs=tuple(local), slots=slot_key),
        key=f"{slot_key}|{key}",
    )


def gravity(bodies: Sequence[Body], g: Sequence[float | sp.Symbol] | None = None) -> list[Element]:
    """Uniform gravity on every body (Haug 1989, Eq. 7.5.7 planar; ch. 11 spatial).

    ``g`` has two components for planar bodies and three for spatial ones (a mixed
    mechanism takes three; the planar bodies use the first two).  Defaults: (0, −9.81)
    planar, (0, 0, −9.81) spatial.  Numbers become the shared parameters ``g_x``,
    ``g_y`` (``g_z``).
    """
    bodies = tuple(bodies)
    for b in bodies:
        if not isinstance(b, Body):
            raise ModelError(f"gravity: {b!r} is not a (moving) body")
    planar_bodies = [b for b in bodies if b.kind == "planar"]
    spatial_bodies = [b for b in bodies if b.kind == "spatial"]
    if g is not None and len(g) not in (2, 3):
        raise ModelError(f"gravity: g must have 2 or 3 components, got {len(g)}")
    if spatial_bodies and g is not None and len(g) != 3:
        raise ModelError("gravity: spatial bodies need a 3-component g")
    out: list[Element] = []
    if planar_bodies:
        gp = (0.0, -9.81) if g is None else tuple(g)[:2]
        if g is None and spatial_bodies:
            gp = (0.0, 0.0)
        out += planar.gravity(planar_bodies, gp)
    if spatial_bodies:
        out += spatial.gravity(spatial_bodies, (0.0, 0.0, -9.81) if g is None else tuple(g))
    return out
