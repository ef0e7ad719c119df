"""Spatial bodies and joints (Haug 1989, ch. 9-11): q_i = [r_i, p_i], p = [e0, e1, e2, e3].

Notation follows Haug: A(p) = (2e0² − 1)I + 2(eeᵀ + e0 ẽ) (Eq. 9.3.18),
G(p) = [−e, −ẽ + e0 I], E(p) = [−e, ẽ + e0 I] (Eqs. 9.3.24-25), ω' = 2Gṗ
(Eq. 9.3.31).  The equations of motion in [r, p] (Haug 1989, Eq. 11.1.32) use
M_i = diag(m I, 4GᵀJ'G), the quadratic-velocity force 8ĠᵀJ'Ġp and the Euler-parameter
normalization pᵀp − 1 = 0, which every spatial body adds as a constraint row.

The library (Haug 1989, §9.4-9.5 and §11.1-11.3): the basic constraints dot-1, dot-2,
spherical and distance; the joints universal, revolute, cylindrical, translational,
fixed and parallel built from them; the composite revolute–spherical and
spherical–spherical joints; rotational and translational drivers; TSDA and RSDA force
elements; applied forces (:func:`point_load`) and torques; gravity; and :func:`chain`
(N-link spherical pendulums).  Joints take body-fixed points s'ᵖ and joint-frame
vectors f', h' in the body frames (g' = h' × f'), as in Haug's input data; numbers
become runtime parameters ``<element>_<name><axis>``, parameter Symbols are used as given.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    localize,
    make_coordinates,
    parameter,
)
from mbdgen.model.names import finite_number

__all__ = [
    "GROUND",
    "A",
    "A_dot",
    "E",
    "G",
    "body",
    "chain",
    "cylindrical",
    "distance",
    "dot1",
    "dot2",
    "euler_parameter_rates",
    "euler_parameters",
    "fixed",
    "gravity",
    "inertia",
    "l",
    "ldot",
    "parallel",
    "perpendicular",
    "point_load",
    "point_mass",
    "prism_inertia",
    "revolute",
    "revolute_spherical",
    "rotational_driver",
    "rsda",
    "spherical",
    "spherical_spherical",
    "theta",
    "thetadot",
    "tilde",
    "torque",
    "translational",
    "translational_driver",
    "tsda",
    "universal",
]

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
    omega0: Sequence[float] | None = None,
    omega0_frame: str = "body",
) -> Body:
    """A spatial body: mass ``m`` and inertia tensor J' about the centroid, body frame.

    ``J`` is (Jxx, Jyy, Jzz) for principal axes or (Jxx, Jyy, Jzz, Jxy, Jxz, Jyz).
    Products of inertia given as the number 0 are structural zeros (principal axes:
    a smaller element type, with far smaller kernels); give them as Symbols to keep
    them runtime parameters.

    Initial velocity: ``qd0`` = [ṙ, ṗ] (7 entries), or, with ``omega0``, the initial
    angular velocity ω' (``omega0_frame="body"``, components in the body frame) or ω
    (``"global"``); ``qd0`` then gives ṙ (3 entries, or 7 with ṗ = 0).  ω is turned
    into Euler-parameter rates by :func:`euler_parameter_rates`.
    """
    if len(J) not in (3, 6):
        raise ModelError(f"body {name!r}: J must have 3 (principal) or 6 entries, got {len(J)}")
    if omega0 is not None:
        qd0 = _velocities_from_omega(name, q0, qd0, omega0, omega0_frame)
    q, qd = make_coordinates(name, "spatial")
    inertia_map: dict[str, sp.Symbol] = {}
    defaults: dict[sp.Symbol, float] = {}
    s, d = parameter(name, "m", m)
    inertia_map["m"] = s
    defaults.update(d)
    for local, v in zip(_INERTIA_NAMES, tuple(J) + (0.0,) * (6 - len(J)), strict=True):
        if local in ("Jxy", "Jxz", "Jyz") and not isinstance(v, sp.Basic) and float(v) == 0.0:
            continue
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


def point_mass(
    name: str,
    m: float | sp.Symbol,
    q0: Sequence[float] = (0.0, 0.0, 0.0),
    qd0: Sequence[float] = (0.0, 0.0, 0.0),
) -> Body:
    """A spatial point mass: coordinates r = [x, y, z] only, mass matrix m I₃.

    Why a body of its own and not a rigid body with J' = 0: with no inertia its
    Euler parameters would be undetermined (a singular mass matrix, three
    orientation locks to add by hand) and it would carry 7 coordinates and a
    normalization row for 3 degrees of freedom.  A point mass has no orientation:
    in the library's joints and forces it fills a spatial slot as a body whose
    Euler parameters are the ground's (p ≡ [1, 0, 0, 0]), so body-fixed points on it
    are offsets along the global axes — give s' = (0, 0, 0) (the mass itself).
    Joints that only place points apply: :func:`spherical` (3 rows: the mass is
    fixed to a point of the other body), :func:`distance` (a massless rigid link:
    the spherical pendulum), :func:`dot2`, :func:`revolute_spherical`,
    :func:`translational_driver`, TSDA, point loads and gravity.  Joints with rows on
    its orientation (revolute, universal, dot1 ...) leave rows with no coordinate in
    them and are refused, as are torques and RSDAs.
    """
    q, qd = make_coordinates(name, "spatial", point=True)
    ms, md = parameter(name, "m", m)
    return Body(
        name=name,
        kind="spatial",
        coordinates=q,
        velocities=qd,
        q0=tuple(float(v) for v in q0),
        qd0=tuple(float(v) for v in qd0),
        inertia={"m": ms},
        defaults=md,
        point=True,
    )


def euler_parameter_rates(
    p: Sequence[float], omega: Sequence[float], frame: str = "body"
) -> tuple[float, float, float, float]:
    """ṗ of a body at Euler parameters ``p`` turning at angular velocity ``omega``:

        ṗ = ½ G(p)ᵀ ω'  (body frame),   ṗ = ½ E(p)ᵀ ω  (global frame),

    the inverses of ω' = 2Gṗ and ω = 2Eṗ (Haug 1989, Eqs. 9.3.30-9.3.31) on pᵀp = 1,
    where GGᵀ = EEᵀ = I and Gp = Ep = 0 (Eqs. 9.3.26-9.3.27): the ṗ returned
    satisfies pᵀṗ = 0, the velocity form of the normalization constraint.
    ``p`` must be a unit quaternion (to 1e-9: the rates scale with ‖p‖).
    """
    if frame not in _FRAMES:
        raise ModelError(f"omega0_frame must be one of {_FRAMES}, got {frame!r}")
    e0, e1, e2, e3 = (float(v) for v in p)
    w = [float(v) for v in omega]
    if frame == "body":  # Gᵀ, the transpose of Eq. 9.3.25
        rows = ((-e1, -e2, -e3), (e0, -e3, e2), (e3, e0, -e1), (-e2, e1, e0))
    else:  # Eᵀ, the transpose of Eq. 9.3.24
        rows = ((-e1, -e2, -e3), (e0, e3, -e2), (-e3, e0, e1), (e2, -e1, e0))
    pd = tuple(0.5 * sum(r[k] * w[k] for k in range(3)) for r in rows)
    return (pd[0], pd[1], pd[2], pd[3])


def _velocities_from_omega(
    name: str,
    q0: Sequence[float],
    qd0: Sequence[float],
    omega0: Sequence[float],
    frame: str,
) -> tuple[float, ...]:
    """[ṙ, ṗ] from ṙ (``qd0``) and an angular velocity (:func:`euler_parameter_rates`)."""
    owner = f"body {name!r}"
    if frame not in _FRAMES:
        raise ModelError(f"{owner}: omega0_frame must be one of {_FRAMES}, got {frame!r}")
    if len(omega0) != 3:
        raise ModelError(f"{owner}: omega0 must have 3 components, got {len(omega0)}")
    if len(q0) != 7:
        raise ModelError(f"{owner}: q0 has {len(q0)} entries, a spatial body has 7")
    w = [finite_number(v, f"{owner}: omega0[{i}]") for i, v in enumerate(omega0)]
    if len(qd0) == 7:
        if any(float(v) != 0.0 for v in qd0[3:]):
            raise ModelError(
                f"{owner}: give the initial rotation either as omega0 or as Euler-parameter "
                "rates in qd0[3:7], not both"
            )
        qd0 = qd0[:3]
    if len(qd0) != 3:
        raise ModelError(
            f"{owner}: with omega0, qd0 is the centroid's velocity (3 entries), got {len(qd0)}"
        )
    p = [finite_number(v, f"{owner}: q0[{i + 3}]") for i, v in enumerate(q0[3:7])]
    norm = sum(v * v for v in p) ** 0.5
    if abs(norm - 1.0) > 1e-9:
        raise ModelError(
            f"{owner}: omega0 needs unit Euler parameters in q0, but ‖p‖ = {norm:.12g}"
        )
    return (*(float(v) for v in qd0), *euler_parameter_rates(p, w, frame))


def inertia_matrix(p: dict) -> sp.Matrix:
    """J' from local parameters Jxx ... Jyz (symmetric; absent products are zero)."""
    xy, xz, yz = (p.get(k, sp.S.Zero) for k in ("Jxy", "Jxz", "Jyz"))
    return sp.Matrix(
        [
            [p["Jxx"], xy, xz],
            [xy, p["Jyy"], yz],
            [xz, yz, p["Jzz"]],
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


def _point_inertia(loc: Local) -> Contribution:
    m = loc.p["m"]
    rd = sp.Matrix(loc.qd[0][0:3])
    return Contribution(mass=[sp.diag(m, m, m, 0, 0, 0, 0)], kinetic=m * rd.dot(rd) / 2)


def inertia(b: Body) -> Element:
    """M = diag(mI, 4GᵀJ'G), force 8ĠᵀJ'Ġp and pᵀp − 1 = 0 (Haug 1989, Eqs. 11.1.32-33);
    a point mass: M = m I₃, no normalization row."""
    if b.point:
        return Element(
            name=b.name,
            family="spatial_point_mass",
            role="body",
            slots=("spatial",),
            bodies=(b,),
            params=(("m", b.inertia["m"]),),
            build=_point_inertia,
        )
    return Element(
        name=b.name,
        family="spatial_body",
        role="body",
        slots=("spatial",),
        bodies=(b,),
        params=(("m", b.inertia["m"]),)
        + tuple((k, b.inertia[k]) for k in _INERTIA_NAMES if k in b.inertia),
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


# ---------------------------------------------------------------------------------------
# The spatial element library (Haug 1989, §9.4-9.5 constraints and drivers, §11 forces)
# ---------------------------------------------------------------------------------------

#: Symbols a TSDA actuator expression may use: the length ℓ and its rate ℓ̇ (and t).
l = sp.Symbol("l")
ldot = sp.Symbol("ldot")
#: Symbols an RSDA actuator expression may use: the angle θ and its rate θ̇ (and t).
theta = sp.Symbol("theta")
thetadot = sp.Symbol("thetadot")

# Local placeholders of the bound symbols inside a type's user expressions.
_L, _LD = sp.Symbol("_ell"), sp.Symbol("_elld")
_TH, _THD = sp.Symbol("_th"), sp.Symbol("_thd")
# mbdgen.model.forces exports its own symbols for the same quantities; both are bound.
_TSDA_BOUND = {l: _L, ldot: _LD, TSDA_LENGTH: _L, TSDA_RATE: _LD}
_RSDA_BOUND = {theta: _TH, thetadot: _THD, RSDA_ANGLE: _TH, RSDA_RATE: _THD}

Vector = Sequence[float | sp.Symbol]


def A_dot(p: sp.Matrix, pd: sp.Matrix) -> sp.Matrix:
    """Time derivative of A(p) (Haug 1989, Eq. 9.3.18 differentiated term by term).

    Exact for every p (not only on pᵀp = 1), so velocities built from it are the
    exact time derivatives of :func:`position`; zero for the ground (ṗ = 0).
    """
    e0, e = _split(p)
    e0d, ed = _split(pd)
    return 4 * e0 * e0d * sp.eye(3) + 2 * (ed * e.T + e * ed.T + e0d * tilde(e) + e0 * tilde(ed))


def velocity(q: sp.Matrix, qd: sp.Matrix, s_local: sp.Matrix) -> sp.Matrix:
    """Global velocity ṙ + Ȧ s' of a body-fixed point (Haug 1989, Eq. 9.4.1 differentiated)."""
    p, pd = sp.Matrix(q[3:7]), sp.Matrix(qd[3:7])
    return sp.Matrix(qd[0:3]) + A_dot(p, pd) * s_local


def _is_number(v: object) -> bool:
    return not isinstance(v, sp.Basic) or bool(v.is_number)


def _is_scalar(v: object) -> bool:
    return isinstance(v, (int, float)) or (isinstance(v, sp.Basic) and bool(v.is_number))


def _numeric(values: Vector) -> bool:
    return all(_is_number(v) for v in values)


def _unit(owner: str, name: str, values: Vector) -> tuple:
    """Numeric directions are normalized; symbolic ones are used as given."""
    if len(values) != 3:
        raise ModelError(f"{owner}: {name} must have 3 components, got {len(values)}")
    if not _numeric(values):
        return tuple(values)
    v = [float(x) for x in values]
    norm = sum(x * x for x in v) ** 0.5
    if norm == 0.0:
        raise ModelError(f"{owner}: {name} is the zero vector; a direction is needed")
    return tuple(x / norm for x in v)


def perpendicular(h: Sequence[float]) -> tuple[float, float, float]:
    """A unit vector f ⟂ h, deterministic: the coordinate axis eₖ least aligned with h
    (smallest |hₖ|, first on ties), made orthogonal to h (Gram–Schmidt).

    With g = h × f, (f, g, h) is a right-handed joint frame (Haug 1989, §9.4.2).
    """
    hv = [float(x) for x in h]
    norm = sum(x * x for x in hv) ** 0.5
    hv = [x / norm for x in hv]
    k = min(range(3), key=lambda i: abs(hv[i]))
    e = [1.0 if i == k else 0.0 for i in range(3)]
    dot = hv[k]
    f = [e[i] - dot * hv[i] for i in range(3)]
    nf = sum(x * x for x in f) ** 0.5
    return tuple(x / nf for x in f)  # type: ignore[return-value]


def _frame(owner: str, which: str, h: Vector, f: Vector | None) -> tuple[tuple, tuple]:
    """(h, f) of a joint frame on one body: unit, orthogonal, f chosen if not given."""
    hu = _unit(owner, f"h_{which}", h)
    if f is None:
        if not _numeric(hu):
            raise ModelError(
                f"{owner}: h_{which} is symbolic, so f_{which} (a body-fixed vector ⟂ "
                f"h_{which}) must be given"
            )
        return hu, perpendicular(hu)
    fu = _unit(owner, f"f_{which}", f)
    if _numeric(hu) and _numeric(fu):
        if abs(sum(a * b for a, b in zip(hu, fu, strict=True))) > 1e-9:
            raise ModelError(f"{owner}: f_{which} must be perpendicular to h_{which}")
    return hu, fu


def _params(owner: str, **vectors: Vector) -> tuple[list, dict]:
    """Parameters of several 3-vectors, in the order given."""
    out, defaults = [], {}
    for name, v in vectors.items():
        syms, d = _vec3(owner, name, v)
        out += syms
        defaults.update(d)
    return out, defaults


def _scalars(owner: str, **values: float | sp.Symbol) -> tuple[list, dict]:
    out, defaults = [], {}
    for name, v in values.items():
        s, d = parameter(owner, name, v)
        out.append((name, s))
        defaults.update(d)
    return out, defaults


def _user(owner: str, exprs: Sequence[sp.Expr], bound: dict) -> tuple[list, list, str]:
    """User expressions in local placeholders (:func:`localize`), their parameters
    (``_u0``, ``_u1``, ... → the global symbols) and the type key."""
    local, free, key = localize(owner, exprs, bound)
    return local, [(f"_u{i}", s) for i, s in enumerate(free)], key


def _user_subs(loc: Local, exprs: Sequence[sp.Expr], bound: dict) -> list[sp.Expr]:
    extra = {sp.Symbol(k): v for k, v in loc.p.items() if k.startswith("_u")}
    return [sp.sympify(e).xreplace({**extra, **bound}) for e in exprs]


def _rot(loc: Local, slot: int) -> sp.Matrix:
    return A(sp.Matrix(loc.q[slot][3:7]))


def _gvec(loc: Local, slot: int, name: str) -> sp.Matrix:
    """The body-fixed vector parameter ``name`` of slot ``slot`` in global coordinates."""
    return _rot(loc, slot) * local_vector(loc, name)


def _cross_g(loc: Local, slot: int, h: str, f: str) -> sp.Matrix:
    """g = h × f of a joint frame, in global coordinates (A(h' × f') = h × f)."""
    return _rot(loc, slot) * (tilde(local_vector(loc, h)) * local_vector(loc, f))


def _d(loc: Local) -> sp.Matrix:
    """d_ij = r_j + A_j s'ⱼ − r_i − A_i s'ᵢ (Haug 1989, §9.4.1)."""
    si, sj = local_vector(loc, "si"), local_vector(loc, "sj")
    return position(loc.q[1], sj) - position(loc.q[0], si)


def _d_dot(loc: Local) -> sp.Matrix:
    si, sj = local_vector(loc, "si"), local_vector(loc, "sj")
    return velocity(loc.q[1], loc.qd[1], sj) - velocity(loc.q[0], loc.qd[0], si)


def _points(loc: Local) -> list[sp.Matrix]:
    return [local_vector(loc, "si"), local_vector(loc, "sj")]


def _joint(
    name: str,
    family: str,
    bodies: tuple[Body | Ground, ...],
    build,
    params: list,
    defaults: dict,
    role: str = "joint",
    key: str = "",
) -> Element:
    return Element(
        name=name,
        family=family,
        role=role,
        slots=("spatial",) * len(bodies),
        bodies=bodies,
        params=tuple(params),
        build=build,
        key=key,
        defaults=defaults,
    )


# -- basic constraints (Haug 1989, §9.4.1) ---------------------------------------------


def _dot1(loc: Local) -> Contribution:
    return Contribution(phi=[_gvec(loc, 0, "ai").dot(_gvec(loc, 1, "aj"))])


def dot1(
    name: str, body_i: Body | Ground, a_i: Vector, body_j: Body | Ground, a_j: Vector
) -> Element:
    """Dot-1 constraint Φ^{d1}(a_i, a_j) = a_iᵀ a_j = a'ᵢᵀ A_iᵀ A_j a'ⱼ = 0: two
    body-fixed vectors stay orthogonal (Haug 1989, §9.4.1).  One row."""
    params, defaults = _params(name, ai=a_i, aj=a_j)
    return _joint(name, "dot1", (body_i, body_j), _dot1, params, defaults)


def _dot2(loc: Local) -> Contribution:
    return Contribution(phi=[_gvec(loc, 0, "ai").dot(_d(loc))], points=_points(loc))


def dot2(
    name: str,
    body_i: Body | Ground,
    a_i: Vector,
    s_i: Vector,
    body_j: Body | Ground,
    s_j: Vector,
) -> Element:
    """Dot-2 constraint Φ^{d2}(a_i, d_ij) = a_iᵀ d_ij = 0: the vector from Pᵢ to Pⱼ
    stays orthogonal to the body-fixed a_i (Haug 1989, §9.4.1).  One row."""
    params, defaults = _params(name, ai=a_i, si=s_i, sj=s_j)
    return _joint(name, "dot2", (body_i, body_j), _dot2, params, defaults)


def _distance(loc: Local) -> Contribution:
    d = _d(loc)
    return Contribution(phi=[d.dot(d) - loc.p["C"] ** 2], points=_points(loc))


def distance(
    name: str,
    body_i: Body | Ground,
    s_i: Vector,
    body_j: Body | Ground,
    s_j: Vector,
    C: float | sp.Symbol,
) -> Element:
    """Distance (spherical–spherical) constraint Φ^{ss} = d_ijᵀ d_ij − C² = 0 (Haug
    1989, §9.4.1): a massless link of length C with a spherical joint at
    each end.  One row."""
    params, defaults = _params(name, si=s_i, sj=s_j)
    c, dc = _scalars(name, C=C)
    return _joint(name, "distance", (body_i, body_j), _distance, params + c, {**defaults, **dc})


def spherical_spherical(
    name: str,
    body_i: Body | Ground,
    s_i: Vector,
    body_j: Body | Ground,
    s_j: Vector,
    C: float | sp.Symbol,
) -> Element:
    """Spherical–spherical composite joint (Haug 1989, §9.4.3): :func:`distance`."""
    return distance(name, body_i, s_i, body_j, s_j, C)


# -- joints built from the basic constraints (Haug 1989, §9.4.2-9.4.3) -------------------


def _spherical_rows(loc: Local) -> list[sp.Expr]:
    return list(-_d(loc))


def _universal(loc: Local) -> Contribution:
    rows = _spherical_rows(loc) + [_gvec(loc, 0, "hi").dot(_gvec(loc, 1, "hj"))]
    return Contribution(phi=rows, points=_points(loc))


def universal(
    name: str,
    body_i: Body | Ground,
    s_i: Vector,
    body_j: Body | Ground,
    s_j: Vector,
    h_i: Vector,
    h_j: Vector,
) -> Element:
    """Universal (Hooke) joint: Φ^s(Pᵢ, Pⱼ) and Φ^{d1}(h_i, h_j) — the cross's two
    axes h_i (on body i) and h_j (on body j) stay orthogonal (Haug 1989, §9.4.2).
    Four rows."""
    hi, hj = _unit(name, "h_i", h_i), _unit(name, "h_j", h_j)
    params, defaults = _params(name, si=s_i, sj=s_j, hi=hi, hj=hj)
    return _joint(name, "universal", (body_i, body_j), _universal, params, defaults)


def _axis_rows(loc: Local) -> list[sp.Expr]:
    """Φ^{d1}(f_i, h_j), Φ^{d1}(g_i, h_j): h_j parallel to h_i."""
    hj = _gvec(loc, 1, "hj")
    return [_gvec(loc, 0, "fi").dot(hj), _cross_g(loc, 0, "hi", "fi").dot(hj)]


def _revolute(loc: Local) -> Contribution:
    return Contribution(phi=_spherical_rows(loc) + _axis_rows(loc), points=_points(loc))


def revolute(
    name: str,
    body_i: Body | Ground,
    s_i: Vector,
    body_j: Body | Ground,
    s_j: Vector,
    h_i: Vector,
    h_j: Vector,
    f_i: Vector | None = None,
) -> Element:
    """Revolute joint about the axis h through P: Φ^s(Pᵢ, Pⱼ), Φ^{d1}(f_i, h_j),
    Φ^{d1}(g_i, h_j) (Haug 1989, §9.4.2).  Five rows.

    h_i, h_j: the joint axis fixed in body i and in body j; f_i ⟂ h_i (chosen by
    :func:`perpendicular` when omitted) and g_i = h_i × f_i complete body i's joint
    frame.  Numeric directions are normalized; all become runtime parameters.
    """
    hi, fi = _frame(name, "i", h_i, f_i)
    hj = _unit(name, "h_j", h_j)
    params, defaults = _params(name, si=s_i, sj=s_j, hi=hi, fi=fi, hj=hj)
    return _joint(name, "revolute", (body_i, body_j), _revolute, params, defaults)


def _cylindrical_rows(loc: Local) -> list[sp.Expr]:
    d = _d(loc)
    return _axis_rows(loc) + [
        _gvec(loc, 0, "fi").dot(d),
        _cross_g(loc, 0, "hi", "fi").dot(d),
    ]


def _cylindrical(loc: Local) -> Contribution:
    return Contribution(phi=_cylindrical_rows(loc), points=_points(loc))


def cylindrical(
    name: str,
    body_i: Body | Ground,
    s_i: Vector,
    body_j: Body | Ground,
    s_j: Vector,
    h_i: Vector,
    h_j: Vector,
    f_i: Vector | None = None,
) -> Element:
    """Cylindrical joint: Φ^{d1}(f_i, h_j), Φ^{d1}(g_i, h_j), Φ^{d2}(f_i, d_ij),
    Φ^{d2}(g_i, d_ij) — axes parallel and Pⱼ on body i's axis through Pᵢ (Haug 1989,
    §9.4.2).  Four rows; arguments as in :func:`revolute`."""
    hi, fi = _frame(name, "i", h_i, f_i)
    hj = _unit(name, "h_j", h_j)
    params, defaults = _params(name, si=s_i, sj=s_j, hi=hi, fi=fi, hj=hj)
    return _joint(name, "cylindrical", (body_i, body_j), _cylindrical, params, defaults)


def _translational(loc: Local) -> Contribution:
    gj = _cross_g(loc, 1, "hj", "fj")
    rows = _cylindrical_rows(loc) + [_gvec(loc, 0, "fi").dot(gj)]
    return Contribution(phi=rows, points=_points(loc))


def translational(
    name: str,
    body_i: Body | Ground,
    s_i: Vector,
    body_j: Body | Ground,
    s_j: Vector,
    h_i: Vector,
    h_j: Vector,
    f_i: Vector | None = None,
    f_j: Vector | None = None,
) -> Element:
    """Translational (prismatic) joint along h: the cylindrical rows and Φ^{d1}(f_i, g_j)
    with g_j = h_j × f_j, which stops the rotation about the axis (Haug 1989, §9.4.2).
    Five rows.

    f_i and f_j are the body-fixed vectors ⟂ the axis that coincide in the assembled
    joint (default: :func:`perpendicular` of h_i and of h_j).
    """
    hi, fi = _frame(name, "i", h_i, f_i)
    hj, fj = _frame(name, "j", h_j, f_j)
    params, defaults = _params(name, si=s_i, sj=s_j, hi=hi, fi=fi, hj=hj, fj=fj)
    return _joint(name, "translational", (body_i, body_j), _translational, params, defaults)


def _fixed(loc: Local) -> Contribution:
    gj = _cross_g(loc, 1, "hj", "fj")
    rows = _spherical_rows(loc) + _axis_rows(loc) + [_gvec(loc, 0, "fi").dot(gj)]
    return Contribution(phi=rows, points=_points(loc))


def fixed(
    name: str,
    body_i: Body | Ground,
    s_i: Vector,
    body_j: Body | Ground,
    s_j: Vector,
    h_i: Vector = (0.0, 0.0, 1.0),
    h_j: Vector = (0.0, 0.0, 1.0),
    f_i: Vector | None = None,
    f_j: Vector | None = None,
) -> Element:
    """Fixed (weld) joint: Φ^s(Pᵢ, Pⱼ), Φ^{d1}(f_i, h_j), Φ^{d1}(g_i, h_j),
    Φ^{d1}(f_i, g_j) — the joint frames (f, g, h) of both bodies coincide (Haug 1989,
    §9.4.2: a revolute plus the translational joint's rotation lock).  Six rows."""
    hi, fi = _frame(name, "i", h_i, f_i)
    hj, fj = _frame(name, "j", h_j, f_j)
    params, defaults = _params(name, si=s_i, sj=s_j, hi=hi, fi=fi, hj=hj, fj=fj)
    return _joint(name, "fixed", (body_i, body_j), _fixed, params, defaults)


def _parallel(loc: Local) -> Contribution:
    return Contribution(phi=_axis_rows(loc))


def parallel(
    name: str,
    body_i: Body | Ground,
    h_i: Vector,
    body_j: Body | Ground,
    h_j: Vector,
    f_i: Vector | None = None,
) -> Element:
    """Parallel-axes constraint Φ^p(h_i, h_j): Φ^{d1}(f_i, h_j), Φ^{d1}(g_i, h_j)
    (Haug 1989, §9.4.1).  Two rows."""
    hi, fi = _frame(name, "i", h_i, f_i)
    hj = _unit(name, "h_j", h_j)
    params, defaults = _params(name, hi=hi, fi=fi, hj=hj)
    return _joint(name, "parallel", (body_i, body_j), _parallel, params, defaults)


def _revolute_spherical(loc: Local) -> Contribution:
    d = _d(loc)
    rows = [_gvec(loc, 0, "hi").dot(d), d.dot(d) - loc.p["C"] ** 2]
    return Contribution(phi=rows, points=_points(loc))


def revolute_spherical(
    name: str,
    body_i: Body | Ground,
    s_i: Vector,
    body_j: Body | Ground,
    s_j: Vector,
    h_i: Vector,
    C: float | sp.Symbol,
) -> Element:
    """Revolute–spherical composite joint (Haug 1989, §9.4.3): a massless link turns
    on a revolute joint about h_i through Pᵢ and carries Pⱼ on a spherical joint at
    distance C: Φ^{d2}(h_i, d_ij) = h_iᵀ d_ij = 0 (Pⱼ stays in the plane ⟂ h_i through
    Pᵢ) and Φ^{ss} = d_ijᵀ d_ij − C² = 0 (at distance C from the axis).  Two rows."""
    hi = _unit(name, "h_i", h_i)
    params, defaults = _params(name, si=s_i, sj=s_j, hi=hi)
    c, dc = _scalars(name, C=C)
    return _joint(
        name,
        "revolute_spherical",
        (body_i, body_j),
        _revolute_spherical,
        params + c,
        {**defaults, **dc},
    )


# -- drivers (Haug 1989, §9.5) ---------------------------------------------------------


def rotational_driver(
    name: str,
    body_i: Body | Ground,
    body_j: Body | Ground,
    h_i: Vector,
    h_j: Vector,
    f: sp.Expr,
    f_i: Vector | None = None,
    f_j: Vector | None = None,
) -> Element:
    """Rotational driver θ = f(t) about a revolute (or cylindrical) joint's axis.

    θ is the angle from f_i to f_j about h_i (f_j = cos θ f_i + sin θ g_i with
    g_i = h_i × f_i when the axes are aligned; Haug 1989, §9.5, rotational driver
    about the joint axis).  The row is the robust sine form

        Φ = cos f(t) · g_iᵀ f_j − sin f(t) · f_iᵀ f_j = sin(θ − f(t)) = 0,

    whose Jacobian does not vanish at any θ (unlike cos θ − cos f, singular at θ = 0).
    ``f`` is an expression in ``t`` and parameter Symbols; f_i, f_j default to
    :func:`perpendicular` of h_i and of h_j, so θ = 0 when the two frames coincide.
    """
    hi, fi = _frame(name, "i", h_i, f_i)
    _, fj = _frame(name, "j", h_j, f_j)
    params, defaults = _params(name, hi=hi, fi=fi, fj=fj)
    (expr,), extra, key = _user(name, [f], {})

    def build(loc: Local) -> Contribution:
        (ft,) = _user_subs(loc, [expr], {})
        fjg = _gvec(loc, 1, "fj")
        c = _gvec(loc, 0, "fi").dot(fjg)
        s = _cross_g(loc, 0, "hi", "fi").dot(fjg)
        return Contribution(phi=[sp.cos(ft) * s - sp.sin(ft) * c])

    return _joint(
        name, "rotational_driver", (body_i, body_j), build, params + extra, defaults, "driver", key
    )


def translational_driver(
    name: str,
    body_i: Body | Ground,
    s_i: Vector,
    body_j: Body | Ground,
    s_j: Vector,
    h_i: Vector,
    f: sp.Expr,
) -> Element:
    """Translational driver along the axis h_i: Φ = h_iᵀ d_ij − f(t) = 0 (Haug 1989,
    §9.5, distance driver along a translational or cylindrical joint's axis).

    A numeric h_i is normalized, so f(t) is the distance of Pⱼ from Pᵢ along the axis.
    """
    hi = _unit(name, "h_i", h_i)
    params, defaults = _params(name, si=s_i, sj=s_j, hi=hi)
    (expr,), extra, key = _user(name, [f], {})

    def build(loc: Local) -> Contribution:
        (ft,) = _user_subs(loc, [expr], {})
        return Contribution(phi=[_gvec(loc, 0, "hi").dot(_d(loc)) - ft], points=_points(loc))

    return _joint(
        name,
        "translational_driver",
        (body_i, body_j),
        build,
        params + extra,
        defaults,
        "driver",
        key,
    )


# -- forces (Haug 1989, §11.1-11.3) ----------------------------------------------------


def tsda(
    name: str,
    body_i: Body | Ground,
    s_i: Vector,
    body_j: Body | Ground,
    s_j: Vector,
    k: float | sp.Symbol = 0.0,
    c: float | sp.Symbol = 0.0,
    l0: float | sp.Symbol = 0.0,
    actuator: sp.Expr | float = 0,
) -> Element:
    """Translational spring–damper–actuator between Pᵢ and Pⱼ (Haug 1989, §11.3).

    With d_ij = r_j^P − r_i^P, ℓ = ‖d_ij‖ and ℓ̇ = d_ijᵀ ḋ_ij / ℓ, the tension

        F = k (ℓ − ℓ0) + c ℓ̇ + F_a(ℓ, ℓ̇, t)

    pulls Pᵢ toward Pⱼ with F d_ij/ℓ and Pⱼ toward Pᵢ with −F d_ij/ℓ; the generalized
    forces are those of point forces (:func:`point_force`, Eq. 11.1.21).  Potential
    ½ k (ℓ − ℓ0)².  ``actuator`` is F_a, an expression in :data:`l`, :data:`ldot`
    (or :data:`mbdgen.model.forces.l`, ``ldot``), ``t`` and parameter Symbols.
    Undefined at ℓ = 0.
    """
    params, defaults = _params(name, si=s_i, sj=s_j)
    sc, dsc = _scalars(name, k=k, c=c, l0=l0)
    (expr,), extra, key = _user(name, [actuator], _TSDA_BOUND)

    def build(loc: Local) -> Contribution:
        d, dd = _d(loc), _d_dot(loc)
        ell = sp.sqrt(d.dot(d))
        elld = d.dot(dd) / ell
        (act,) = _user_subs(loc, [expr], {_L: ell, _LD: elld})
        kk, cc, ll0 = loc.p["k"], loc.p["c"], loc.p["l0"]
        tension = kk * (ell - ll0) + cc * elld + act
        fi = tension / ell * d
        si, sj = local_vector(loc, "si"), local_vector(loc, "sj")
        forces = [
            None if loc.ground[0] else point_force(loc.q[0], si, fi),
            None if loc.ground[1] else point_force(loc.q[1], sj, -fi),
        ]
        return Contribution(force=forces, potential=kk * (ell - ll0) ** 2 / 2, points=[si, sj])

    return _joint(
        name,
        "tsda",
        (body_i, body_j),
        build,
        params + sc + extra,
        {**defaults, **dsc},
        "force",
        key,
    )


def rsda(
    name: str,
    body_i: Body | Ground,
    body_j: Body | Ground,
    h_i: Vector = (0.0, 0.0, 1.0),
    h_j: Vector = (0.0, 0.0, 1.0),
    k: float | sp.Symbol = 0.0,
    c: float | sp.Symbol = 0.0,
    theta0: float | sp.Symbol = 0.0,
    actuator: sp.Expr | float = 0,
    f_i: Vector | None = None,
    f_j: Vector | None = None,
) -> Element:
    """Rotational spring–damper–actuator about a revolute joint's axis (Haug 1989, §11.3).

    θ is the angle from f_i to f_j about h_i, as in :func:`rotational_driver`:
    with c = f_iᵀ f_j and s = g_iᵀ f_j, θ = θ0 + atan2(s cos θ0 − c sin θ0,
    c cos θ0 + s sin θ0) (continuous for |θ − θ0| < π), θ̇ its exact time derivative.
    The torque T = k (θ − θ0) + c θ̇ + T_a(θ, θ̇, t) acts on body j about −h and on body
    i about +h; its generalized force is Q = −T ∂θ/∂q (virtual work δW = −T δθ, which
    equals that of the torques ±T h, Q = 2GᵀAᵀn, Eq. 11.1.21, on the revolute joint's
    constraint manifold, and is exactly −∇V of V = ½ k (θ − θ0)² everywhere).
    ``actuator`` is T_a, an expression in :data:`theta`, :data:`thetadot` (or
    :data:`mbdgen.model.forces.theta`, ``thetadot``), ``t`` and parameter Symbols.
    The axes default to the bodies' z axes (the planar RSDA's axis).
    """
    hi, fi = _frame(name, "i", h_i, f_i)
    _, fj = _frame(name, "j", h_j, f_j)
    params, defaults = _params(name, hi=hi, fi=fi, fj=fj)
    sc, dsc = _scalars(name, k=k, c=c, theta0=theta0)
    (expr,), extra, key = _user(name, [actuator], _RSDA_BOUND)

    def build(loc: Local) -> Contribution:
        Ai, Aj = _rot(loc, 0), _rot(loc, 1)
        pi_, pdi = sp.Matrix(loc.q[0][3:7]), sp.Matrix(loc.qd[0][3:7])
        pj_, pdj = sp.Matrix(loc.q[1][3:7]), sp.Matrix(loc.qd[1][3:7])
        fi_l, fj_l = local_vector(loc, "fi"), local_vector(loc, "fj")
        gi_l = tilde(local_vector(loc, "hi")) * fi_l
        fig, gig, fjg = Ai * fi_l, Ai * gi_l, Aj * fj_l
        cos_, sin_ = fig.dot(fjg), gig.dot(fjg)
        t0 = loc.p["theta0"]
        dth = sp.atan2(sin_ * sp.cos(t0) - cos_ * sp.sin(t0), cos_ * sp.cos(t0) + sin_ * sp.sin(t0))
        th = t0 + dth
        fjd = A_dot(pj_, pdj) * fj_l
        cos_d = (A_dot(pi_, pdi) * fi_l).dot(fjg) + fig.dot(fjd)
        sin_d = (A_dot(pi_, pdi) * gi_l).dot(fjg) + gig.dot(fjd)
        rho2 = cos_**2 + sin_**2
        thd = (cos_ * sin_d - sin_ * cos_d) / rho2
        (act,) = _user_subs(loc, [expr], {_TH: th, _THD: thd})
        kk, cc = loc.p["k"], loc.p["c"]
        torque = kk * dth + cc * thd + act
        forces: list[sp.Matrix | None] = []
        for s in (0, 1):
            if loc.ground[s]:
                forces.append(None)
                continue
            qs = loc.q[s]
            grad = cos_ * sp.Matrix([sin_]).jacobian(qs) - sin_ * sp.Matrix([cos_]).jacobian(qs)
            forces.append(-torque * grad.T / rho2)
        return Contribution(force=forces, potential=kk * dth**2 / 2)

    return _joint(
        name,
        "rsda",
        (body_i, body_j),
        build,
        params + sc + extra,
        {**defaults, **dsc},
        "force",
        key,
    )


_FRAMES = ("global", "body")


def _bind_body(b: Body) -> dict:
    """The body's coordinates and velocities → slot-0 placeholders."""
    bound = {c: sp.Symbol(f"_b0_{a}") for a, c in enumerate(b.coordinates)}
    bound.update({v: sp.Symbol(f"_bd0_{a}") for a, v in enumerate(b.velocities)})
    return bound


def _unbind_body(loc: Local) -> dict:
    subs = {sp.Symbol(f"_b0_{a}"): loc.q[0][a] for a in range(7)}
    subs.update({sp.Symbol(f"_bd0_{a}"): loc.qd[0][a] for a in range(7)})
    return subs


def point_load(
    name: str,
    body_i: Body,
    s_i: Vector,
    F: Sequence[sp.Expr | float],
    frame: str = "global",
) -> Element:
    """A force F(t) at the body-fixed point s'ᵢ, its components in the global frame
    (``frame="global"``) or in the body frame (``"body"``, F = A F').  Generalized
    force [F; 2Gᵀ s̃' AᵀF] (Haug 1989, Eq. 11.1.21).  The components are expressions in
    ``t``, parameter Symbols and the body's own coordinates and velocities (numbers
    become constants of the type).  (:func:`point_force` is the helper that maps a
    force to generalized forces; this is the element.)"""
    if frame not in _FRAMES:
        raise ModelError(f"{name}: frame must be one of {_FRAMES}, got {frame!r}")
    if len(F) != 3:
        raise ModelError(f"{name}: F must have 3 components, got {len(F)}")
    params, defaults = _params(name, si=s_i)
    exprs, extra, key = _user(name, list(F), _bind_body(body_i))

    def build(loc: Local) -> Contribution:
        fv = sp.Matrix(_user_subs(loc, exprs, _unbind_body(loc)))
        si = local_vector(loc, "si")
        if frame == "body":
            fv = _rot(loc, 0) * fv
        return Contribution(force=[point_force(loc.q[0], si, fv)], points=[si])

    return Element(
        name=name,
        family=f"spatial_force_{frame}",
        role="force",
        slots=("spatial",),
        bodies=(body_i,),
        params=tuple(params + extra),
        build=build,
        key=key,
        defaults=defaults,
    )


def torque(name: str, body_i: Body, n: Sequence[sp.Expr | float], frame: str = "global") -> Element:
    """A torque n(t), components in the global (``frame="global"``, n' = Aᵀn) or body
    frame (``"body"``); generalized force [0; 2Gᵀn'] (Haug 1989, Eq. 11.1.21).  The
    components may use ``t``, parameter Symbols and the body's own coordinates and
    velocities."""
    if frame not in _FRAMES:
        raise ModelError(f"{name}: frame must be one of {_FRAMES}, got {frame!r}")
    if len(n) != 3:
        raise ModelError(f"{name}: n must have 3 components, got {len(n)}")
    exprs, extra, key = _user(name, list(n), _bind_body(body_i))

    def build(loc: Local) -> Contribution:
        nv = sp.Matrix(_user_subs(loc, exprs, _unbind_body(loc)))
        p = sp.Matrix(loc.q[0][3:7])
        if frame == "global":
            nv = A(p).T * nv
        return Contribution(force=[sp.Matrix.vstack(sp.zeros(3, 1), 2 * G(p).T * nv)])

    return Element(
        name=name,
        family=f"spatial_torque_{frame}",
        role="force",
        slots=("spatial",),
        bodies=(body_i,),
        params=tuple(extra),
        build=build,
        key=key,
        defaults={},
    )


# -- helpers for models -----------------------------------------------------------------


def euler_parameters(R: Sequence[Sequence[float]]) -> tuple[float, float, float, float]:
    """Euler parameters p = [e0, e] of a rotation matrix, e0 ≥ 0 (Haug 1989, §9.3:
    the inverse of Eq. 9.3.18, computed from the largest of e0², e1², e2², e3²)."""
    r = [[float(R[i][j]) for j in range(3)] for i in range(3)]
    tr = r[0][0] + r[1][1] + r[2][2]
    sq = [(tr + 1) / 4] + [(1 + 2 * r[i][i] - tr) / 4 for i in range(3)]
    k = max(range(4), key=lambda i: sq[i])
    ek = sq[k] ** 0.5
    if k == 0:
        e = [ek, (r[2][1] - r[1][2]) / (4 * ek), (r[0][2] - r[2][0]) / (4 * ek)]
        e.append((r[1][0] - r[0][1]) / (4 * ek))
    elif k == 1:
        e = [(r[2][1] - r[1][2]) / (4 * ek), ek, (r[0][1] + r[1][0]) / (4 * ek)]
        e.append((r[0][2] + r[2][0]) / (4 * ek))
    elif k == 2:
        e = [(r[0][2] - r[2][0]) / (4 * ek), (r[0][1] + r[1][0]) / (4 * ek), ek]
        e.append((r[1][2] + r[2][1]) / (4 * ek))
    else:
        e = [(r[1][0] - r[0][1]) / (4 * ek), (r[0][2] + r[2][0]) / (4 * ek)]
        e += [(r[1][2] + r[2][1]) / (4 * ek), ek]
    if e[0] < 0:
        e = [-x for x in e]
    return (e[0], e[1], e[2], e[3])


def prism_inertia(
    length: float, width: float, density: float, axis: Sequence[float] = (0.0, 0.0, 1.0)
) -> tuple[float, tuple[float, ...]]:
    """Mass and centroidal inertia (Jxx, Jyy, Jzz, Jxy, Jxz, Jyz) of a uniform prism of
    square cross-section width × width along the unit ``axis`` d:
    J' = m (L² + a²)/12 (I − ddᵀ) + m a²/6 ddᵀ."""
    nd = sum(float(x) ** 2 for x in axis) ** 0.5
    d = [float(x) / nd for x in axis]
    m = density * length * width * width
    a = m * (length**2 + width**2) / 12
    b = m * width**2 / 6
    J = [[(a if i == j else 0.0) + (b - a) * d[i] * d[j] for j in range(3)] for i in range(3)]
    return m, (J[0][0], J[1][1], J[2][2], J[0][1], J[0][2], J[1][2])


def chain(
    n: int,
    length: float | Sequence[float] = 1.0,
    width: float | Sequence[float] | None = None,
    density: float = 7800.0,
    direction: Sequence[float] = (0.0, 0.0, -1.0),
    g: Sequence[float | sp.Symbol] = (0.0, 0.0, -9.81),
    name: str = "link",
) -> tuple[list[Body], list[Element]]:
    """A spatial N-link pendulum: uniform square prisms joined end to end by spherical
    joints, the first to the ground at the origin, under gravity ``g``.

    Link k (``<name>1`` … ``<name>n``, joints ``<name>1_s`` …) of length Lₖ and width
    aₖ (default Lₖ/10, as in Welch et al. 2007 §VI) starts at rest along ``direction``
    with its body frame parallel to the global one (p = [1, 0, 0, 0]); its proximal
    end is s' = −(Lₖ/2) d and its distal end s' = +(Lₖ/2) d.  Returns (bodies,
    elements) for :class:`~mbdgen.model.mechanism.Mechanism`.
    """
    if n < 1:
        raise ModelError("chain: n must be at least 1")
    lengths = [float(length)] * n if _is_scalar(length) else [float(v) for v in length]  # type: ignore[arg-type]
    if len(lengths) != n:
        raise ModelError(f"chain: {len(lengths)} lengths for {n} links")
    if width is None:
        widths = [v / 10 for v in lengths]
    elif _is_scalar(width):
        widths = [float(width)] * n  # type: ignore[arg-type]
    else:
        widths = [float(v) for v in width]  # type: ignore[union-attr]
    d = _unit("chain", "direction", direction)
    bodies: list[Body] = []
    elements: list[Element] = []
    tip = [0.0, 0.0, 0.0]
    prev: Body | Ground = GROUND
    prev_s: tuple[float, ...] = (0.0, 0.0, 0.0)
    for k in range(n):
        L, a = lengths[k], widths[k]
        m, J = prism_inertia(L, a, density, d)
        centre = [tip[i] + L / 2 * d[i] for i in range(3)]
        b = body(f"{name}{k + 1}", m, J, q0=(*centre, 1.0, 0.0, 0.0, 0.0))
        half = tuple(L / 2 * x for x in d)
        elements.append(spherical(f"{name}{k + 1}_s", prev, prev_s, b, tuple(-x for x in half)))
        bodies.append(b)
        prev, prev_s = b, half
        tip = [tip[i] + L * d[i] for i in range(3)]
    elements += gravity(bodies, g)
    return bodies, elements
