"""Planar bodies and joints (Haug 1989, ch. 3-6): q_i = [x_i, y_i, φ_i].

Notation follows Haug: A(φ) is the rotation matrix (Eq. 2.4.12), B(φ) = dA/dφ,
s'ᴾ a body-fixed point, r^P = r + A s'ᴾ its global position (Eq. 3.2.1).
Every factory returns an :class:`~mbdgen.model.elements.Element`; numbers given for
geometric data become runtime parameters named ``<element>_<name>``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from functools import partial

import sympy as sp

from mbdgen.errors import ModelError
from mbdgen.model.elements import (
    GROUND,
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
    make_coordinates,
    parameter,
    unbind,
    user_expressions,
)

__all__ = [
    "GROUND",
    "A",
    "B",
    "body",
    "point_mass",
    "inertia",
    "gravity",
    # joints (Haug 1989, ch. 3)
    "absolute_x",
    "absolute_y",
    "absolute_angle",
    "revolute",
    "translational",
    "revolute_translational",
    "point_on_line",
    "distance",
    "revolute_revolute",
    "weld",
    "gear",
    "rack_pinion",
    # drivers (Haug 1989, §3.5)
    "x_driver",
    "y_driver",
    "angle_driver",
    "rotation_driver",
    "translation_driver",
    "distance_driver",
    # force elements (Haug 1989, ch. 6)
    "tsda",
    "rsda",
    "point_load",
    "torque",
    # generators
    "chain",
]


def A(phi: sp.Expr) -> sp.Matrix:
    """Planar rotation matrix A(φ) (Haug 1989, Eq. 2.4.12)."""
    c, s = sp.cos(phi), sp.sin(phi)
    return sp.Matrix([[c, -s], [s, c]])


def B(phi: sp.Expr) -> sp.Matrix:
    """B(φ) = dA/dφ (Haug 1989, Eq. 3.2.5)."""
    c, s = sp.cos(phi), sp.sin(phi)
    return sp.Matrix([[-s, -c], [c, -s]])


def position(q: sp.Matrix, s_local: sp.Matrix) -> sp.Matrix:
    """Global position r + A(φ) s' of a body-fixed point (Haug 1989, Eq. 3.2.1)."""
    return sp.Matrix(q[0:2]) + A(q[2]) * s_local


def point_force(q: sp.Matrix, s_local: sp.Matrix, f: sp.Matrix) -> sp.Matrix:
    """Generalized force [F; (B s')ᵀF] of a global force F at s' (Haug 1989, Eq. 6.1.8)."""
    return sp.Matrix([f[0], f[1], (B(q[2]) * s_local).dot(f)])


def _vec(owner: str, name: str, values: Sequence[float | sp.Symbol]) -> tuple[list, dict]:
    syms, defaults = [], {}
    if len(values) != 2:
        raise ValueError(f"{name} must have 2 components, got {len(values)}")
    for axis, v in zip("xy", values, strict=True):
        s, d = parameter(owner, f"{name}{axis}", v)
        syms.append((f"{name}{axis}", s))
        defaults.update(d)
    return syms, defaults


def body(
    name: str,
    m: float | sp.Symbol,
    J: float | sp.Symbol,
    q0: Sequence[float] = (0.0, 0.0, 0.0),
    qd0: Sequence[float] = (0.0, 0.0, 0.0),
) -> Body:
    """A planar body with mass ``m`` and polar moment of inertia ``J`` about its centroid."""
    q, qd = make_coordinates(name, "planar")
    ms, md = parameter(name, "m", m)
    js, jd = parameter(name, "J", J)
    return Body(
        name=name,
        kind="planar",
        coordinates=q,
        velocities=qd,
        q0=tuple(float(v) for v in q0),
        qd0=tuple(float(v) for v in qd0),
        inertia={"m": ms, "J": js},
        defaults={**md, **jd},
    )


def point_mass(
    name: str,
    m: float | sp.Symbol,
    q0: Sequence[float] = (0.0, 0.0),
    qd0: Sequence[float] = (0.0, 0.0),
) -> Body:
    """A planar point mass: coordinates [x, y] only, mass matrix diag(m, m).

    Why a body of its own and not a rigid body with J = 0: a rigid body's angle φ
    with no inertia is undetermined unless every joint fixes it, so the mass matrix
    is singular and the angle must be locked by hand; a point mass simply has no φ.
    In the library's joints and forces it fills a planar slot as a body whose
    angle is the ground's (φ ≡ 0), so body-fixed points on it are offsets along the
    global axes — give s' = (0, 0) (the mass itself).  Joints that only place
    points (revolute, distance, point-on-line, drivers of x and y, TSDA, point loads,
    gravity) apply; elements that act on its angle (torque, RSDA) are refused.
    A simple pendulum is the mass on a :func:`distance` constraint to the ground
    (its massless rigid link: one row).
    """
    q, qd = make_coordinates(name, "planar", point=True)
    ms, md = parameter(name, "m", m)
    return Body(
        name=name,
        kind="planar",
        coordinates=q,
        velocities=qd,
        q0=tuple(float(v) for v in q0),
        qd0=tuple(float(v) for v in qd0),
        inertia={"m": ms},
        defaults=md,
        point=True,
    )


def _point_inertia(loc: Local) -> Contribution:
    m = loc.p["m"]
    qd = loc.qd[0]
    return Contribution(mass=[sp.diag(m, m, 0)], kinetic=m * (qd[0] ** 2 + qd[1] ** 2) / 2)


def _inertia(loc: Local) -> Contribution:
    m, J = loc.p["m"], loc.p["J"]
    qd = loc.qd[0]
    return Contribution(
        mass=[sp.diag(m, m, J)],
        kinetic=(m * (qd[0] ** 2 + qd[1] ** 2) + J * qd[2] ** 2) / 2,
    )


def inertia(b: Body) -> Element:
    """The body's own mass matrix diag(m, m, J) (Haug 1989, Eq. 6.1.22) and kinetic energy
    (a point mass: diag(m, m))."""
    if b.point:
        return Element(
            name=b.name,
            family="planar_point_mass",
            role="body",
            slots=("planar",),
            bodies=(b,),
            params=(("m", b.inertia["m"]),),
            build=_point_inertia,
        )
    return Element(
        name=b.name,
        family="planar_body",
        role="body",
        slots=("planar",),
        bodies=(b,),
        params=(("m", b.inertia["m"]), ("J", b.inertia["J"])),
        build=_inertia,
    )


def _revolute(loc: Local) -> Contribution:
    si = sp.Matrix([loc.p["six"], loc.p["siy"]])
    sj = sp.Matrix([loc.p["sjx"], loc.p["sjy"]])
    phi = position(loc.q[0], si) - position(loc.q[1], sj)
    return Contribution(phi=list(phi), points=[si, sj])


def revolute(
    name: str,
    body_i: Body | Ground,
    s_i: Sequence[float | sp.Symbol],
    body_j: Body | Ground,
    s_j: Sequence[float | sp.Symbol],
) -> Element:
    """Revolute joint: r_i + A_i s'ᵢᴾ − r_j − A_j s'ⱼᴾ = 0 (Haug 1989, Eq. 3.3.10)."""
    pi, di = _vec(name, "si", s_i)
    pj, dj = _vec(name, "sj", s_j)
    return Element(
        name=name,
        family="revolute",
        role="joint",
        slots=("planar", "planar"),
        bodies=(body_i, body_j),
        params=tuple(pi + pj),
        build=_revolute,
        defaults={**di, **dj},
    )


def _gravity(loc: Local) -> Contribution:
    m, gx, gy = loc.p["m"], loc.p["gx"], loc.p["gy"]
    q = loc.q[0]
    return Contribution(
        force=[sp.Matrix([m * gx, m * gy, 0])],
        potential=-m * (gx * q[0] + gy * q[1]),
    )


def gravity(bodies: Sequence[Body], g: Sequence[float | sp.Symbol] = (0.0, -9.81)) -> list[Element]:
    """Uniform gravity m g on every planar body; V = −m gᵀr (Haug 1989, Eq. 7.5.7).

    Numbers for ``g`` become the shared parameters ``g_x`` and ``g_y``.
    """
    (gx, dx), (gy, dy) = (parameter("g", axis, v) for axis, v in zip("xy", g, strict=True))
    return [
        Element(
            name=f"gravity_{b.name}",
            family="planar_gravity",
            role="force",
            slots=("planar",),
            bodies=(b,),
            params=(("m", b.inertia["m"]), ("gx", gx), ("gy", gy)),
            build=_gravity,
            defaults={**dx, **dy},
        )
        for b in bodies
        if b.kind == "planar"
    ]


# -- helpers ------------------------------------------------------------------------
def _scalar(owner: str, name: str, value: float | sp.Symbol) -> tuple[list, dict]:
    s, d = parameter(owner, name, value)
    return [(name, s)], d


def _unit(owner: str, name: str, values: Sequence[float | sp.Symbol]) -> Sequence:
    """Normalize a numeric direction (symbolic directions are taken as given: unit)."""
    if len(values) != 2:
        raise ModelError(f"{owner}: {name} must have 2 components, got {len(values)}")
    if any(isinstance(v, sp.Basic) and not v.is_number for v in values):
        return values
    x, y = (float(v) for v in values)
    n = math.hypot(x, y)
    if n == 0.0:
        raise ModelError(f"{owner}: {name} must not be the zero vector")
    return (x / n, y / n)


def _local(loc: Local, name: str) -> sp.Matrix:
    """The local 2-vector parameter ``name`` (``namex``, ``namey``)."""
    return sp.Matrix([loc.p[f"{name}x"], loc.p[f"{name}y"]])


def _perp(u: sp.Matrix) -> sp.Matrix:
    """u rotated by +90°: R u with R = A(π/2) (Haug 1989, ch. 2)."""
    return sp.Matrix([-u[1], u[0]])


def _velocity(q: sp.Matrix, qd: sp.Matrix, s_local: sp.Matrix) -> sp.Matrix:
    """Velocity ṙ + B(φ) s' φ̇ of a body-fixed point (d/dt of Haug 1989, Eq. 3.2.1)."""
    return sp.Matrix(qd[0:2]) + B(q[2]) * s_local * qd[2]


def _two_point(
    name: str, body_i: Body | Ground, s_i: Sequence, body_j: Body | Ground, s_j: Sequence
) -> tuple[list, dict]:
    pi, di = _vec(name, "si", s_i)
    pj, dj = _vec(name, "sj", s_j)
    return pi + pj, {**di, **dj}


def _element(
    name: str,
    family: str,
    role: str,
    bodies: tuple,
    params: Sequence,
    build,
    defaults: dict,
    key: str = "",
) -> Element:
    return Element(
        name=name,
        family=family,
        role=role,
        slots=("planar",) * len(bodies),
        bodies=bodies,
        params=tuple(params),
        build=build,
        key=key,
        defaults=defaults,
    )


# -- absolute constraints (Haug 1989, ch. 3, absolute constraints) ----------------------
def _absolute(loc: Local, axis: int) -> Contribution:
    s = _local(loc, "s")
    return Contribution(phi=[position(loc.q[0], s)[axis] - loc.p["c"]], points=[s])


def _absolute_x(loc: Local) -> Contribution:
    return _absolute(loc, 0)


def _absolute_y(loc: Local) -> Contribution:
    return _absolute(loc, 1)


def _absolute_angle(loc: Local) -> Contribution:
    return Contribution(phi=[loc.q[0][2] - loc.p["c"]])


def absolute_x(
    name: str, b: Body, s: Sequence[float | sp.Symbol] = (0.0, 0.0), c: float | sp.Symbol = 0.0
) -> Element:
    """x of the point P of ``b`` fixed: Φ = x_i + [1 0] A_i s'ᴾ − c = 0 (Haug 1989,
    §3.2, the absolute x constraint)."""
    p, d = _vec(name, "s", s)
    pc, dc = _scalar(name, "c", c)
    return _element(name, "absolute_x", "joint", (b,), p + pc, _absolute_x, {**d, **dc})


def absolute_y(
    name: str, b: Body, s: Sequence[float | sp.Symbol] = (0.0, 0.0), c: float | sp.Symbol = 0.0
) -> Element:
    """y of the point P of ``b`` fixed: Φ = y_i + [0 1] A_i s'ᴾ − c = 0 (Haug 1989,
    §3.2, the absolute y constraint)."""
    p, d = _vec(name, "s", s)
    pc, dc = _scalar(name, "c", c)
    return _element(name, "absolute_y", "joint", (b,), p + pc, _absolute_y, {**d, **dc})


def absolute_angle(name: str, b: Body, c: float | sp.Symbol = 0.0) -> Element:
    """Orientation of ``b`` fixed: Φ = φ_i − c = 0 (Haug 1989, §3.2, the absolute
    angle constraint).  Reactions are reported at the body's origin."""
    pc, dc = _scalar(name, "c", c)
    return _element(name, "absolute_angle", "joint", (b,), pc, _absolute_angle, dc)


# -- relative constraints between pairs of bodies (Haug 1989, ch. 3) ----------------------
def _translational(loc: Local) -> Contribution:
    si, sj, u = _local(loc, "si"), _local(loc, "sj"), _local(loc, "u")
    qi, qj = loc.q
    d = position(qj, sj) - position(qi, si)
    v = A(qi[2]) * _perp(u)
    return Contribution(
        phi=[v.dot(d), qi[2] - qj[2] - loc.p["theta0"]],
        points=[si, sj],
    )


def translational(
    name: str,
    body_i: Body | Ground,
    s_i: Sequence[float | sp.Symbol],
    body_j: Body | Ground,
    s_j: Sequence[float | sp.Symbol],
    axis: Sequence[float | sp.Symbol] = (1.0, 0.0),
    theta0: float | sp.Symbol = 0.0,
) -> Element:
    """Translational (prismatic) joint: P_j of body j slides on the line through P_i of
    body i along the body-i-fixed direction u'ᵢ (``axis``), and the bodies do not rotate
    relative to each other (Haug 1989, §3.3, the translational joint):

        Φ = [ (A_i v'ᵢ)ᵀ (r_j + A_j s'ⱼ − r_i − A_i s'ᵢ),  φ_i − φ_j − θ0 ] = 0,

    with v'ᵢ = R u'ᵢ ⊥ the line (R the 90° rotation).  Numeric axes are
    normalized; θ0 is the constant relative angle φ_i − φ_j.
    """
    p, d = _two_point(name, body_i, s_i, body_j, s_j)
    pu, du = _vec(name, "u", _unit(name, "axis", axis))
    pt, dt = _scalar(name, "theta0", theta0)
    return _element(
        name,
        "translational",
        "joint",
        (body_i, body_j),
        p + pu + pt,
        _translational,
        {**d, **du, **dt},
    )


def _point_on_line(loc: Local) -> Contribution:
    si, sj, u = _local(loc, "si"), _local(loc, "sj"), _local(loc, "u")
    qi, qj = loc.q
    d = position(qj, sj) - position(qi, si)
    return Contribution(phi=[(A(qi[2]) * _perp(u)).dot(d)], points=[si, sj])


def point_on_line(
    name: str,
    body_i: Body | Ground,
    s_i: Sequence[float | sp.Symbol],
    axis: Sequence[float | sp.Symbol],
    body_j: Body | Ground,
    s_j: Sequence[float | sp.Symbol],
) -> Element:
    """Point P_j of body j on the line through P_i of body i with the body-i-fixed
    direction u'ᵢ (``axis``): Φ = (A_i R u'ᵢ)ᵀ (r_j + A_j s'ⱼ − r_i − A_i s'ᵢ) = 0, the
    first row of the translational joint (Haug 1989, §3.3).  Numeric axes are
    normalized."""
    p, d = _two_point(name, body_i, s_i, body_j, s_j)
    pu, du = _vec(name, "u", _unit(name, "axis", axis))
    return _element(
        name, "point_on_line", "joint", (body_i, body_j), p + pu, _point_on_line, {**d, **du}
    )


def revolute_translational(
    name: str,
    body_i: Body | Ground,
    s_i: Sequence[float | sp.Symbol],
    body_j: Body | Ground,
    s_j: Sequence[float | sp.Symbol],
    axis_j: Sequence[float | sp.Symbol],
) -> Element:
    """Revolute–translational composite joint (Haug 1989, §3.3, composite joints): a
    massless coupler pinned to body i at P_i slides along the line through P_j of body j
    with the body-j-fixed direction u'ⱼ (``axis_j``).  Eliminating the coupler leaves one
    equation, Φ = (A_j R u'ⱼ)ᵀ (r_i + A_i s'ᵢ − r_j − A_j s'ⱼ) = 0 — the point P_i stays
    on the line (:func:`point_on_line` with the bodies' roles swapped)."""
    p, d = _two_point(name, body_j, s_j, body_i, s_i)
    pu, du = _vec(name, "u", _unit(name, "axis_j", axis_j))
    return _element(
        name,
        "revolute_translational",
        "joint",
        (body_j, body_i),
        p + pu,
        _point_on_line,
        {**d, **du},
    )


def _distance(loc: Local) -> Contribution:
    si, sj = _local(loc, "si"), _local(loc, "sj")
    d = position(loc.q[1], sj) - position(loc.q[0], si)
    return Contribution(phi=[d.dot(d) - loc.p["l"] ** 2], points=[si, sj])


def distance(
    name: str,
    body_i: Body | Ground,
    s_i: Sequence[float | sp.Symbol],
    body_j: Body | Ground,
    s_j: Sequence[float | sp.Symbol],
    length: float | sp.Symbol,
) -> Element:
    """Distance constraint = revolute–revolute composite joint (Haug 1989, §3.3,
    composite joints): a massless link of length ℓ pinned at P_i and P_j,
    Φ = d_ijᵀ d_ij − ℓ² = 0 with d_ij = r_j + A_j s'ⱼ − r_i − A_i s'ᵢ."""
    p, d = _two_point(name, body_i, s_i, body_j, s_j)
    pl, dl = _scalar(name, "l", length)
    return _element(name, "distance", "joint", (body_i, body_j), p + pl, _distance, {**d, **dl})


#: The revolute–revolute composite joint is the distance constraint.
revolute_revolute = distance


def _weld(loc: Local) -> Contribution:
    si, sj = _local(loc, "si"), _local(loc, "sj")
    qi, qj = loc.q
    phi = position(qi, si) - position(qj, sj)
    return Contribution(phi=[*phi, qi[2] - qj[2] - loc.p["theta0"]], points=[si, sj])


def weld(
    name: str,
    body_i: Body | Ground,
    s_i: Sequence[float | sp.Symbol],
    body_j: Body | Ground,
    s_j: Sequence[float | sp.Symbol],
    theta0: float | sp.Symbol = 0.0,
) -> Element:
    """Fixed (weld) joint: the revolute equations (Haug 1989, Eq. 3.3.10) plus
    φ_i − φ_j − θ0 = 0, three rows."""
    p, d = _two_point(name, body_i, s_i, body_j, s_j)
    pt, dt = _scalar(name, "theta0", theta0)
    return _element(name, "weld", "joint", (body_i, body_j), p + pt, _weld, {**d, **dt})


# -- gears (Haug 1989, §3.4) -------------------------------------------------------------
def _center_angle(loc: Local) -> sp.Expr:
    """θ_ij: the angle of the line of centers d_ij = r_j^Q − r_i^P, measured from the
    reference direction α (so the atan2 branch cut lies at α ± π)."""
    si, sj = _local(loc, "si"), _local(loc, "sj")
    d = position(loc.q[1], sj) - position(loc.q[0], si)
    a = loc.p["alpha"]
    ca, sa = sp.cos(a), sp.sin(a)
    return a + sp.atan2(-sa * d[0] + ca * d[1], ca * d[0] + sa * d[1])


def _gear_external(loc: Local) -> Contribution:
    Ri, Rj, c = loc.p["Ri"], loc.p["Rj"], loc.p["c"]
    th = _center_angle(loc)
    phi = Ri * loc.q[0][2] + Rj * loc.q[1][2] - (Ri + Rj) * th - c
    return Contribution(phi=[phi], points=[_local(loc, "si"), _local(loc, "sj")])


def _gear_internal(loc: Local) -> Contribution:
    Ri, Rj, c = loc.p["Ri"], loc.p["Rj"], loc.p["c"]
    th = _center_angle(loc)
    phi = Ri * loc.q[0][2] - Rj * loc.q[1][2] - (Ri - Rj) * th - c
    return Contribution(phi=[phi], points=[_local(loc, "si"), _local(loc, "sj")])


def gear(
    name: str,
    body_i: Body | Ground,
    s_i: Sequence[float | sp.Symbol],
    R_i: float | sp.Symbol,
    body_j: Body | Ground,
    s_j: Sequence[float | sp.Symbol],
    R_j: float | sp.Symbol,
    c: float | sp.Symbol = 0.0,
    internal: bool = False,
    alpha: float | sp.Symbol = 0.0,
) -> Element:
    """Spur gear pair (Haug 1989, §3.4, gears): gear i with center P_i and pitch radius R_i
    rolls without slip on gear j (center P_j, pitch radius R_j).  With θ_ij the angle of
    the line of centers d_ij = r_j^P − r_i^P, the pitch circles roll when

        external:  R_i φ_i + R_j φ_j − (R_i + R_j) θ_ij − c = 0,
        internal:  R_i φ_i − R_j φ_j − (R_i − R_j) θ_ij − c = 0  (i inside the ring j),

    i.e. R_i(φ_i − θ_ij) = ∓R_j(φ_j − θ_ij) + const; with both centers fixed this is
    the gear ratio φ̇_j/φ̇_i = ∓R_i/R_j.  ``c`` fixes the initial mesh (its value at
    the initial configuration).  The center distance (R_i ± R_j) is not imposed here:
    keep it with other joints (both gears pinned, or a :func:`distance` link).  θ_ij is
    measured from the reference direction ``alpha``: the formula is smooth while the line
    of centers stays away from α ± π.
    """
    p, d = _two_point(name, body_i, s_i, body_j, s_j)
    pr, dr = [], {}
    for local, v in (("Ri", R_i), ("Rj", R_j), ("c", c), ("alpha", alpha)):
        pp, dd = _scalar(name, local, v)
        pr += pp
        dr.update(dd)
    family, build = ("gear_internal", _gear_internal) if internal else ("gear", _gear_external)
    return _element(name, family, "joint", (body_i, body_j), p + pr, build, {**d, **dr})


def _rack_pinion(loc: Local) -> Contribution:
    si, sj, u = _local(loc, "si"), _local(loc, "sj"), _local(loc, "u")
    qi, qj = loc.q
    d = position(qi, si) - position(qj, sj)
    phi = (A(qj[2]) * u).dot(d) + loc.p["R"] * (qi[2] - qj[2]) - loc.p["c"]
    return Contribution(phi=[phi], points=[si, sj])


def rack_pinion(
    name: str,
    pinion: Body | Ground,
    s_i: Sequence[float | sp.Symbol],
    R: float | sp.Symbol,
    rack: Body | Ground,
    s_j: Sequence[float | sp.Symbol],
    axis: Sequence[float | sp.Symbol] = (1.0, 0.0),
    c: float | sp.Symbol = 0.0,
) -> Element:
    """Rack and pinion (Haug 1989, §3.4, rack and pinion): the pinion (center P_i, pitch radius R)
    rolls on the rack's pitch line through Q_j with the rack-fixed direction u'ⱼ:

        Φ = (A_j u'ⱼ)ᵀ (r_i^P − r_j^Q) + R (φ_i − φ_j) − c = 0,

    the travel of the pinion center along the rack equals the arc rolled off.  The
    pinion lies on the left of u (counter-clockwise side); for a pinion on the right,
    pass −R.  The center's distance R from the pitch line is not imposed here (keep
    it with other joints).  ``c`` fixes the initial mesh.
    """
    p, d = _two_point(name, pinion, s_i, rack, s_j)
    pu, du = _vec(name, "u", _unit(name, "axis", axis))
    pr, dr = _scalar(name, "R", R)
    pc, dc = _scalar(name, "c", c)
    return _element(
        name,
        "rack_pinion",
        "joint",
        (pinion, rack),
        p + pu + pr + pc,
        _rack_pinion,
        {**d, **du, **dr, **dc},
    )


# -- drivers (Haug 1989, §3.5: driving constraints Φ^D(q, t) = 0) ------------------------
def _driver_fn(owner: str, f: sp.Expr | float) -> tuple[sp.Expr, tuple, str]:
    local, extra, key = user_expressions(owner, [f])
    return local[0], extra, key


def _f(loc: Local, f: sp.Expr) -> sp.Expr:
    return f.xreplace(unbind(loc))


def _absolute_driver(loc: Local, axis: int, f: sp.Expr) -> Contribution:
    q = loc.q[0]
    if axis == 2:
        return Contribution(phi=[q[2] - _f(loc, f)])
    s = _local(loc, "s")
    return Contribution(phi=[position(q, s)[axis] - _f(loc, f)], points=[s])


def _abs_driver(name: str, b: Body, s, f, axis: int, family: str) -> Element:
    fl, extra, key = _driver_fn(name, f)
    p, d = _vec(name, "s", s) if axis < 2 else ([], {})
    return _element(
        name,
        family,
        "driver",
        (b,),
        p + list(extra),
        partial(_absolute_driver, axis=axis, f=fl),
        d,
        key,
    )


def x_driver(
    name: str, b: Body, f: sp.Expr | float, s: Sequence[float | sp.Symbol] = (0, 0)
) -> Element:
    """Absolute x driver: x_i + [1 0] A_i s'ᴾ − f(t) = 0 (Haug 1989, §3.5, the absolute
    x constraint of §3.2 with a time-dependent right side)."""
    return _abs_driver(name, b, s, f, 0, "x_driver")


def y_driver(
    name: str, b: Body, f: sp.Expr | float, s: Sequence[float | sp.Symbol] = (0, 0)
) -> Element:
    """Absolute y driver: y_i + [0 1] A_i s'ᴾ − f(t) = 0 (Haug 1989, §3.5, the absolute
    y constraint driven)."""
    return _abs_driver(name, b, s, f, 1, "y_driver")


def angle_driver(name: str, b: Body, f: sp.Expr | float) -> Element:
    """Absolute angle driver: φ_i − f(t) = 0 (Haug 1989, §3.5, the absolute angle
    constraint driven), e.g. a crank turning at constant rate, f = φ0 + ω t."""
    return _abs_driver(name, b, None, f, 2, "angle_driver")


def _rotation_driver(loc: Local, f: sp.Expr) -> Contribution:
    return Contribution(phi=[loc.q[1][2] - loc.q[0][2] - _f(loc, f)])


def rotation_driver(
    name: str, body_i: Body | Ground, body_j: Body | Ground, f: sp.Expr | float
) -> Element:
    """Relative rotational driver: φ_j − φ_i − f(t) = 0 (Haug 1989, §3.5, the driver
    that prescribes the angle of a revolute joint)."""
    fl, extra, key = _driver_fn(name, f)
    return _element(
        name,
        "rotation_driver",
        "driver",
        (body_i, body_j),
        list(extra),
        partial(_rotation_driver, f=fl),
        {},
        key,
    )


def _translation_driver(loc: Local, f: sp.Expr) -> Contribution:
    si, sj, u = _local(loc, "si"), _local(loc, "sj"), _local(loc, "u")
    qi, qj = loc.q
    d = position(qj, sj) - position(qi, si)
    return Contribution(phi=[(A(qi[2]) * u).dot(d) - _f(loc, f)], points=[si, sj])


def translation_driver(
    name: str,
    body_i: Body | Ground,
    s_i: Sequence[float | sp.Symbol],
    body_j: Body | Ground,
    s_j: Sequence[float | sp.Symbol],
    f: sp.Expr | float,
    axis: Sequence[float | sp.Symbol] = (1.0, 0.0),
) -> Element:
    """Relative translational driver: the distance of P_j from P_i along the
    body-i-fixed unit axis u'ᵢ, (A_i u'ᵢ)ᵀ (r_j + A_j s'ⱼ − r_i − A_i s'ᵢ) − f(t) = 0
    (Haug 1989, §3.5, the driver of a translational joint).  Numeric axes are
    normalized."""
    fl, extra, key = _driver_fn(name, f)
    p, d = _two_point(name, body_i, s_i, body_j, s_j)
    pu, du = _vec(name, "u", _unit(name, "axis", axis))
    return _element(
        name,
        "translation_driver",
        "driver",
        (body_i, body_j),
        p + pu + list(extra),
        partial(_translation_driver, f=fl),
        {**d, **du},
        key,
    )


def _distance_driver(loc: Local, f: sp.Expr) -> Contribution:
    si, sj = _local(loc, "si"), _local(loc, "sj")
    d = position(loc.q[1], sj) - position(loc.q[0], si)
    return Contribution(phi=[d.dot(d) - _f(loc, f) ** 2], points=[si, sj])


def distance_driver(
    name: str,
    body_i: Body | Ground,
    s_i: Sequence[float | sp.Symbol],
    body_j: Body | Ground,
    s_j: Sequence[float | sp.Symbol],
    f: sp.Expr | float,
) -> Element:
    """Distance driver |d_ij| = f(t) > 0, written d_ijᵀ d_ij − f(t)² = 0 (Haug 1989, §3.5,
    the driven revolute–revolute composite), smooth where |d_ij| is not."""
    fl, extra, key = _driver_fn(name, f)
    p, d = _two_point(name, body_i, s_i, body_j, s_j)
    return _element(
        name,
        "distance_driver",
        "driver",
        (body_i, body_j),
        p + list(extra),
        partial(_distance_driver, f=fl),
        d,
        key,
    )


# -- force elements (Haug 1989, ch. 6) -------------------------------------------------
def _tsda(loc: Local, actuator: sp.Expr) -> Contribution:
    si, sj = _local(loc, "si"), _local(loc, "sj")
    (qi, qj), (vi, vj) = loc.q, loc.qd
    k, c, l0 = loc.p["k"], loc.p["c"], loc.p["l0"]
    d = position(qj, sj) - position(qi, si)
    ell = sp.sqrt(d.dot(d))
    elld = d.dot(_velocity(qj, vj, sj) - _velocity(qi, vi, si)) / ell
    fa = actuator.xreplace(unbind(loc, {TSDA_LENGTH: ell, TSDA_RATE: elld}))
    f = k * (ell - l0) + c * elld + fa
    fvec = f / ell * d  # force on P_i (towards P_j when f > 0); −fvec on P_j
    return Contribution(
        force=[point_force(qi, si, fvec), point_force(qj, sj, -fvec)],
        potential=k * (ell - l0) ** 2 / 2,
        points=[si, sj],
    )


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
    """Translational spring–damper–actuator between P_i of body i and P_j of body j
    (Haug 1989, ch. 6, the TSDA).  With d_ij = r_j^P − r_i^P, ℓ = (d_ijᵀd_ij)^½ and
    ℓ̇ = d_ijᵀḋ_ij / ℓ the tension

        f = k (ℓ − ℓ0) + c ℓ̇ + F(ℓ, ℓ̇, t)

    acts on P_i along +d_ij/ℓ and on P_j along −d_ij/ℓ; the generalized forces are
    Q_i = [f d/ℓ; (B_i s'ᵢ)ᵀ f d/ℓ], Q_j = −[f d/ℓ; (B_j s'ⱼ)ᵀ f d/ℓ] (Eq. 6.1.8).  The
    spring alone is conservative with V = ½ k (ℓ − ℓ0)².  ``actuator`` is F, an
    expression in :data:`mbdgen.model.forces.l`, :data:`~mbdgen.model.forces.ldot`,
    t and parameter Symbols.  Singular at ℓ = 0.
    """
    fa, extra, key = user_expressions(
        name, [actuator], {TSDA_LENGTH: TSDA_LENGTH, TSDA_RATE: TSDA_RATE}
    )
    p, d = _two_point(name, body_i, s_i, body_j, s_j)
    pk, dd = [], dict(d)
    for local, v in (("k", k), ("c", c), ("l0", l0)):
        pp, dv = _scalar(name, local, v)
        pk += pp
        dd.update(dv)
    return _element(
        name,
        "tsda",
        "force",
        (body_i, body_j),
        p + pk + list(extra),
        partial(_tsda, actuator=fa[0]),
        dd,
        key,
    )


def _rsda(loc: Local, actuator: sp.Expr) -> Contribution:
    (qi, qj), (vi, vj) = loc.q, loc.qd
    k, c, th0 = loc.p["k"], loc.p["c"], loc.p["theta0"]
    th = qj[2] - qi[2]
    thd = vj[2] - vi[2]
    ta = actuator.xreplace(unbind(loc, {RSDA_ANGLE: th, RSDA_RATE: thd}))
    T = k * (th - th0) + c * thd + ta
    return Contribution(
        force=[sp.Matrix([0, 0, T]), sp.Matrix([0, 0, -T])],
        potential=k * (th - th0) ** 2 / 2,
    )


def rsda(
    name: str,
    body_i: Body | Ground,
    body_j: Body | Ground,
    k: float | sp.Symbol = 0.0,
    c: float | sp.Symbol = 0.0,
    theta0: float | sp.Symbol = 0.0,
    actuator: sp.Expr | float = 0,
) -> Element:
    """Rotational spring–damper–actuator between bodies i and j (Haug 1989, ch. 6, the RSDA).
    With θ = φ_j − φ_i the torque

        T = k (θ − θ0) + c θ̇ + T_a(θ, θ̇, t)

    acts +T on body i and −T on body j (it resists the relative rotation); the spring
    alone is conservative with V = ½ k (θ − θ0)².  ``actuator`` is T_a, an expression
    in :data:`mbdgen.model.forces.theta`, :data:`~mbdgen.model.forces.thetadot`, t and
    parameter Symbols.
    """
    ta, extra, key = user_expressions(
        name, [actuator], {RSDA_ANGLE: RSDA_ANGLE, RSDA_RATE: RSDA_RATE}
    )
    pk, dd = [], {}
    for local, v in (("k", k), ("c", c), ("theta0", theta0)):
        pp, dv = _scalar(name, local, v)
        pk += pp
        dd.update(dv)
    return _element(
        name,
        "rsda",
        "force",
        (body_i, body_j),
        pk + list(extra),
        partial(_rsda, actuator=ta[0]),
        dd,
        key,
    )


def _point_load(loc: Local, f: tuple, frame: str) -> Contribution:
    s = _local(loc, "s")
    q = loc.q[0]
    subs = unbind(loc)
    fv = sp.Matrix([e.xreplace(subs) for e in f])
    if frame == "body":
        fv = A(q[2]) * fv
    return Contribution(force=[point_force(q, s, fv)], points=[s])


def point_load(
    name: str,
    b: Body,
    s: Sequence[float | sp.Symbol],
    f: Sequence[sp.Expr | float],
    frame: str = "global",
) -> Element:
    """A force at the body point P: Q = [F; (B s'ᴾ)ᵀ F] (Haug 1989, Eq. 6.1.8), with
    F = f (``frame="global"``) or F = A(φ) f' (``frame="body"``: components in the body
    frame, turning with it).  The components may use t, parameter Symbols and the
    body's own coordinates and velocities."""
    if frame not in ("global", "body"):
        raise ModelError(f"{name}: frame must be 'global' or 'body', not {frame!r}")
    if len(f) != 2:
        raise ModelError(f"{name}: a planar force has 2 components, got {len(f)}")
    fl, extra, key = user_expressions(name, list(f), bind_bodies((b,)))
    p, d = _vec(name, "s", s)
    return _element(
        name,
        f"point_force_{frame}",
        "force",
        (b,),
        p + list(extra),
        partial(_point_load, f=tuple(fl), frame=frame),
        d,
        key,
    )


def _torque(loc: Local, T: sp.Expr) -> Contribution:
    return Contribution(force=[sp.Matrix([0, 0, T.xreplace(unbind(loc))])])


def torque(name: str, b: Body, T: sp.Expr | float) -> Element:
    """A pure torque T on body b: Q = [0, 0, T] (Haug 1989, §6.1, the virtual work
    T δφ).  T may use t, parameter Symbols and the body's coordinates and velocities."""
    tl, extra, key = user_expressions(name, [T], bind_bodies((b,)))
    return _element(name, "torque", "force", (b,), list(extra), partial(_torque, T=tl[0]), {}, key)


# -- generators ---------------------------------------------------------------------------
def chain(
    n: int,
    link_length: float = 1.0,
    mass: float = 1.0,
    inertia: float | None = None,
    g: Sequence[float] = (0.0, -9.81),
    phi0: float = 0.0,
    prefix: str = "link",
) -> tuple[list[Body], list[Element]]:
    """A planar N-link pendulum chain: uniform links of length L hinged end to end by
    revolute joints (Haug 1989, Eq. 3.3.10), the first to the ground at the origin,
    under gravity; every link starts at the angle ``phi0`` from the x axis, at rest.

    Body k (``{prefix}{k}``) has its centroid at the middle of the link, its joints at
    the body-fixed points (∓L/2, off).  The links share the parameters
    ``{prefix}_m``, ``{prefix}_J`` (default m L²/12, a slender bar),
    ``{prefix}_half`` (L/2), ``{prefix}_mhalf`` (−L/2) and ``{prefix}_off`` (0, a
    lateral offset of the hinges), so N does not multiply the parameter count.  Returns
    (bodies, elements) for :class:`~mbdgen.model.mechanism.Mechanism`.
    """
    if n < 1:
        raise ModelError(f"chain: n must be at least 1, got {n}")
    L = float(link_length)
    J = mass * L * L / 12.0 if inertia is None else float(inertia)
    m_s, J_s = sp.Symbol(f"{prefix}_m"), sp.Symbol(f"{prefix}_J")
    half, mhalf, off = (sp.Symbol(f"{prefix}_{s}") for s in ("half", "mhalf", "off"))
    body_defaults = {m_s: float(mass), J_s: J}
    joint_defaults = {half: L / 2, mhalf: -L / 2, off: 0.0}
    c, s = math.cos(phi0), math.sin(phi0)
    bodies = []
    for k in range(n):
        b = body(f"{prefix}{k}", m_s, J_s, q0=((k + 0.5) * L * c, (k + 0.5) * L * s, phi0))
        bodies.append(dataclasses.replace(b, defaults=body_defaults))
    elements: list[Element] = [
        revolute(f"{prefix}_pin0", GROUND, (0.0, 0.0), bodies[0], (mhalf, off))
    ]
    for k in range(1, n):
        e = revolute(f"{prefix}_pin{k}", bodies[k - 1], (half, off), bodies[k], (mhalf, off))
        elements.append(e)
    elements[0] = dataclasses.replace(
        elements[0], defaults={**elements[0].defaults, **joint_defaults}
    )
    elements += gravity(bodies, g)
    return bodies, elements
