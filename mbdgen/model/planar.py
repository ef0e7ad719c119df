"""Planar bodies and joints (Haug 1989, ch. 3-6): q_i = [x_i, y_i, φ_i].

Notation follows Haug: A(φ) is the rotation matrix (Eq. 2.4.12), B(φ) = dA/dφ,
s'ᴾ a body-fixed point, r^P = r + A s'ᴾ its global position (Eq. 3.2.1).
Every factory returns an :class:`~mbdgen.model.elements.Element`; numbers given for
geometric data become runtime parameters named ``<element>_<name>``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy as sp

from mbdgen.model.elements import (
    GROUND,
    Body,
    Contribution,
    Element,
    Ground,
    Local,
    make_coordinates,
    parameter,
)

__all__ = ["GROUND", "body", "inertia", "revolute", "gravity", "A", "B"]


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


def _inertia(loc: Local) -> Contribution:
    m, J = loc.p["m"], loc.p["J"]
    qd = loc.qd[0]
    return Contribution(
        mass=[sp.diag(m, m, J)],
        kinetic=(m * (qd[0] ** 2 + qd[1] ** 2) + J * qd[2] ** 2) / 2,
    )


def inertia(b: Body) -> Element:
    """The body's own mass matrix diag(m, m, J) (Haug 1989, Eq. 6.1.22) and kinetic energy."""
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
