"""Spatial bodies and joints (Haug 1989, ch. 9-11): q_i = [r_i, p_i], p = [e0, e1, e2, e3].

Notation follows Haug: A(p) = (2e0² − 1)I + 2(eeᵀ + e0 ẽ) (Eq. 9.3.18),
G(p) = [−e, −ẽ + e0 I], E(p) = [−e, ẽ + e0 I] (Eqs. 9.3.24-25), ω' = 2Gṗ
(Eq. 9.3.31).  The equations of motion in [r, p] (Haug 1989, Eq. 11.1.32) use
M_i = diag(m I, 4GᵀJ'G), the quadratic-velocity force 8ĠᵀJ'Ġp and the Euler-parameter
normalization pᵀp − 1 = 0, which every spatial body adds as a constraint row.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy as sp

from mbdgen.errors import ModelError
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

__all__ = ["GROUND", "body", "inertia", "spherical", "gravity", "A", "G", "E", "tilde"]

_INERTIA_NAMES = ("Jxx", "Jyy", "Jzz", "Jxy", "Jxz", "Jyz")


def tilde(a: sp.Matrix) -> sp.Matrix:
    """Skew-symmetric ã with ã b = a × b (Haug 1989, Eq. 9.1.10)."""
    return sp.Matrix([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])


def _split(p: sp.Matrix) -> tuple[sp.Expr, sp.Matrix]:
    return p[0], sp.Matrix(p[1:4])


def G(p: sp.Matrix) -> sp.Matrix:
    """G(p) = [−e, −ẽ + e0 I] (Haug 1989, Eq. 9.3.25)."""
    e0, e = _split(p)
    return (-e).row_join(-tilde(e) + e0 * sp.eye(3))


def E(p: sp.Matrix) -> sp.Matrix:
    """E(p) = [−e, ẽ + e0 I] (Haug 1989, Eq. 9.3.24)."""
    e0, e = _split(p)
    return (-e).row_join(tilde(e) + e0 * sp.eye(3))


def A(p: sp.Matrix) -> sp.Matrix:
    """Rotation matrix A = E Gᵀ = (2e0² − 1)I + 2(eeᵀ + e0 ẽ) (Haug 1989, Eq. 9.3.18)."""
    e0, e = _split(p)
    return (2 * e0**2 - 1) * sp.eye(3) + 2 * (e * e.T + e0 * tilde(e))


def position(q: sp.Matrix, s_local: sp.Matrix) -> sp.Matrix:
    """Global position r + A(p) s' of a body-fixed point (Haug 1989, Eq. 9.4.1)."""
    return sp.Matrix(q[0:3]) + A(sp.Matrix(q[3:7])) * s_local


def point_force(q: sp.Matrix, s_local: sp.Matrix, f: sp.Matrix) -> sp.Matrix:
    """Generalized force of a global force F at s': [F; 2Gᵀ(s̃'AᵀF)] (Haug 1989, Eq. 11.1.21)."""
    p = sp.Matrix(q[3:7])
    torque_local = tilde(s_local) * A(p).T * f
    return sp.Matrix.vstack(f, 2 * G(p).T * torque_local)


def body(
    name: str,
    m: float | sp.Symbol,
    J: Sequence[float | sp.Symbol],
    q0: Sequence[float] = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0),
    qd0: Sequence[float] = (0.0,) * 7,
) -> Body:
    """A spatial body: mass ``m`` and inertia tensor J' about the centroid, body frame.

    ``J`` is (Jxx, Jyy, Jzz) for principal axes or (Jxx, Jyy, Jzz, Jxy, Jxz, Jyz).
    """
    if len(J) not in (3, 6):
        raise ModelError(f"body {name!r}: J must have 3 (principal) or 6 entries, got {len(J)}")
    q, qd = make_coordinates(name, "spatial")
    inertia_map: dict[str, sp.Symbol] = {}
    defaults: dict[sp.Symbol, float] = {}
    s, d = parameter(name, "m", m)
    inertia_map["m"] = s
    defaults.update(d)
    for local, v in zip(_INERTIA_NAMES, tuple(J) + (0.0,) * (6 - len(J)), strict=True):
        s, d = parameter(name, local, v)
        inertia_map[local] = s
        defaults.update(d)
    return Body(
        name=name,
        kind="spatial",
        coordinates=q,
        velocities=qd,
        q0=tuple(float(v) for v in q0),
        qd0=tuple(float(v) for v in qd0),
        inertia=inertia_map,
        defaults=defaults,
    )


def inertia_matrix(p: dict) -> sp.Matrix:
    """J' from local parameters Jxx ... Jyz (symmetric)."""
    return sp.Matrix(
        [
            [p["Jxx"], p["Jxy"], p["Jxz"]],
            [p["Jxy"], p["Jyy"], p["Jyz"]],
            [p["Jxz"], p["Jyz"], p["Jzz"]],
        ]
    )


def _inertia(loc: Local) -> Contribution:
    m = loc.p["m"]
    Jp = inertia_matrix(dict(loc.p))
    q, qd = loc.q[0], loc.qd[0]
    p, pd = sp.Matrix(q[3:7]), sp.Matrix(qd[3:7])
    Gp, Gd = G(p), G(pd)
    mass = sp.diag(m * sp.eye(3), 4 * Gp.T * Jp * Gp)
    # 8 Ġᵀ J' Ġ p with Ġ = G(ṗ) (G is linear in p).
    qv = 8 * Gd.T * Jp * Gd * p
    force = sp.Matrix.vstack(sp.zeros(3, 1), qv)
    rd = sp.Matrix(qd[0:3])
    omega = 2 * Gp * pd
    kinetic = (m * rd.dot(rd) + (omega.T * Jp * omega)[0, 0]) / 2
    return Contribution(
        phi=[p.dot(p) - 1],
        mass=[mass],
        force=[force],
        kinetic=kinetic,
    )


def inertia(b: Body) -> Element:
    """M = diag(mI, 4GᵀJ'G), force 8ĠᵀJ'Ġp and pᵀp − 1 = 0 (Haug 1989, Eqs. 11.1.32-33)."""
    return Element(
        name=b.name,
        family="spatial_body",
        role="body",
        slots=("spatial",),
        bodies=(b,),
        params=(("m", b.inertia["m"]),) + tuple((k, b.inertia[k]) for k in _INERTIA_NAMES),
        build=_inertia,
    )


def _vec3(owner: str, name: str, values: Sequence[float | sp.Symbol]) -> tuple[list, dict]:
    if len(values) != 3:
        raise ModelError(f"{owner}: {name} must have 3 components, got {len(values)}")
    syms, defaults = [], {}
    for axis, v in zip("xyz", values, strict=True):
        s, d = parameter(owner, f"{name}{axis}", v)
        syms.append((f"{name}{axis}", s))
        defaults.update(d)
    return syms, defaults


def local_vector(loc: Local, name: str) -> sp.Matrix:
    """The local 3-vector parameter ``name`` (``namex``, ``namey``, ``namez``)."""
    return sp.Matrix([loc.p[f"{name}{a}"] for a in "xyz"])


def _spherical(loc: Local) -> Contribution:
    si, sj = local_vector(loc, "si"), local_vector(loc, "sj")
    phi = position(loc.q[0], si) - position(loc.q[1], sj)
    return Contribution(phi=list(phi), points=[si, sj])


def spherical(
    name: str,
    body_i: Body | Ground,
    s_i: Sequence[float | sp.Symbol],
    body_j: Body | Ground,
    s_j: Sequence[float | sp.Symbol],
) -> Element:
    """Spherical joint Φ^s = r_i + A_i s'ᵢᴾ − r_j − A_j s'ⱼᴾ = 0 (Haug 1989, Eq. 9.4.10)."""
    pi, di = _vec3(name, "si", s_i)
    pj, dj = _vec3(name, "sj", s_j)
    return Element(
        name=name,
        family="spherical",
        role="joint",
        slots=("spatial", "spatial"),
        bodies=(body_i, body_j),
        params=tuple(pi + pj),
        build=_spherical,
        defaults={**di, **dj},
    )


def _gravity(loc: Local) -> Contribution:
    m = loc.p["m"]
    g = local_vector(loc, "g")
    r = sp.Matrix(loc.q[0][0:3])
    return Contribution(
        force=[sp.Matrix.vstack(m * g, sp.zeros(4, 1))],
        potential=-m * g.dot(r),
    )


def gravity(
    bodies: Sequence[Body], g: Sequence[float | sp.Symbol] = (0.0, 0.0, -9.81)
) -> list[Element]:
    """Uniform gravity m g on every spatial body (parameters ``g_x``, ``g_y``, ``g_z``)."""
    syms, defaults = [], {}
    for axis, v in zip("xyz", g, strict=True):
        s, d = parameter("g", axis, v)
        syms.append((f"g{axis}", s))
        defaults.update(d)
    return [
        Element(
            name=f"gravity_{b.name}",
            family="spatial_gravity",
            role="force",
            slots=("spatial",),
            bodies=(b,),
            params=(("m", b.inertia["m"]), *syms),
            build=_gravity,
            defaults=defaults,
        )
        for b in bodies
        if b.kind == "spatial"
    ]
