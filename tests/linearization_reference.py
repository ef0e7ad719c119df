"""An independent reference for linearizations about an equilibrium: the linear
first-order state equations x' = A x in minimal coordinates, built and linearized with
``sympy.physics.mechanics`` (Kane's method), and their eigenvalues.

Nothing here imports mbdgen: the geometry, the inertias and the parameter values are
copied by hand from the model files named below, so a test that compares
``mbdgen.linearize`` with these numbers checks the model assembly, the derivation and
the linearization together.  Each eigenvalue array is sorted by imaginary part, then
by real part (``numpy.lexsort``).

:func:`double_pendulum_eigenvalues`
    ``models/double_pendulum.py`` (Welch et al. 2007): two uniform links of mass m and
    length L (J = m L²/12 about the centroid), the first pinned to the ground at the
    origin, the second to the far end of the first.  Generalized coordinates are the
    model's absolute angles th1, th2, with the direction of link i along
    (sin thᵢ, cos thᵢ) in the model's (x, y) — a frame rotated by π/2 − thᵢ about z —
    and gravity m g along +x.  The hanging equilibrium is th1 = th2 = π/2 (both links
    along +x, at rest).  ``KanesMethod`` with q' = u, ``to_linearizer()``,
    ``Linearizer.linearize(op_point, A_and_B=True)``; four eigenvalues ±iω₁, ±iω₂.
    :func:`double_pendulum_closed_form_eigenvalues` is the textbook check: the 2×2
    generalized eigenproblem K φ = ω² M φ with M = m L² [[4/3, cos/2], [cos/2, 1/3]]
    (cos = 1 at the equilibrium) and K = m g L diag(3/2, 1/2).

:func:`spring_fourbar_eigenvalues`, :func:`spring_fourbar_equilibrium`
    ``tests/models/spring_fourbar.py`` with the links of ``models/fourbar.py``: ground
    pivots A = (0, 0) and D = (r0, 0) = (3, 0), crank AB r1 = 1, coupler BC r2 = 3,
    rocker DC r3 = 2.5, each a 1 kg slender bar (J = ℓ²/12) with its centroid at its
    middle; gravity 9.81 along −y on every link; a spring k = 20 N/m, free length
    l0 = 1 m, from the ground point (1.5, 3) to the coupler's centroid.  Generalized
    coordinates are the absolute link angles q1 (crank, from A towards B), q2
    (coupler, from B towards C), q3 (rocker, from D towards C) — the model's
    crank_phi, coupler_phi, rocker_phi; q2 and q3 are dependent through the two
    loop-closure equations (``configuration_constraints``) and their time derivatives
    (``velocity_constraints``), with q1 and u1 = q1' independent.  The equilibrium is
    the root of the reduced static equation F₁(q1) = 0, F₁ = Kane's reduced
    generalized active force (the forcing vector at u = 0), with q2, q3 from the
    closed-form closure on the model's assembly branch (C left of the ray B → D, as
    at the model's initial state, crank angle 0), bracketed in −0.6 < q1 < −0.2: the
    potential-energy minimum q1 ≈ −0.385, the only equilibrium for −1.5 < q1 < 1.5
    (the model swings from 0 up to 1.03 rad and back past −0.6 rad).  The
    linearization about it (u = u' = 0) in [q1, u1] gives two eigenvalues ±iω.

All parameter values are numbers before the equations are formed, so each function
takes a fraction of a second to a few seconds the first time and is cached
(``functools.lru_cache``; the public functions return copies).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache

import numpy as np
import sympy as sp
from scipy.optimize import brentq
from sympy.physics import mechanics as me

# models/double_pendulum.py: parameters={m: 1.0, L: 5.0, g: 10.0}
DOUBLE_PENDULUM_PARAMS: dict[str, float] = {"m": 1.0, "L": 5.0, "g": 10.0}

# models/fourbar.py and tests/models/spring_fourbar.py
FOURBAR_R1, FOURBAR_R2, FOURBAR_R3, FOURBAR_R0 = 1.0, 3.0, 2.5, 3.0
FOURBAR_MASS = 1.0
FOURBAR_G = 9.81  # along −y
SPRING_K, SPRING_L0 = 20.0, 1.0
SPRING_ANCHOR = (1.5, 3.0)  # ground end; the other end is the coupler's centroid


def _sorted(eigenvalues: np.ndarray) -> np.ndarray:
    """Complex eigenvalues sorted by imaginary part, then by real part."""
    ev = np.asarray(eigenvalues, dtype=complex)
    return ev[np.lexsort((ev.real, ev.imag))]


def _merge_params(params: Mapping[str, float] | None) -> tuple[tuple[str, float], ...]:
    value = dict(DOUBLE_PENDULUM_PARAMS)
    for name, v in (params or {}).items():
        if name not in value:
            raise KeyError(f"unknown double-pendulum parameter {name!r} (have m, L, g)")
        value[name] = float(v)
    return tuple(sorted(value.items()))


# -- double pendulum ------------------------------------------------------------------
@lru_cache(maxsize=16)
def _double_pendulum(key: tuple[tuple[str, float], ...]) -> np.ndarray:
    p = dict(key)
    m, L, g = p["m"], p["L"], p["g"]
    J = m * L**2 / 12

    th1, th2 = me.dynamicsymbols("th1 th2")
    u1, u2 = me.dynamicsymbols("u1 u2")
    N = me.ReferenceFrame("N")  # N.x, N.y: the model's x (along gravity) and y
    F1 = N.orientnew("F1", "Axis", (sp.pi / 2 - th1, N.z))  # F1.x = (sin th1, cos th1)
    F2 = N.orientnew("F2", "Axis", (sp.pi / 2 - th2, N.z))
    F1.set_ang_vel(N, -u1 * N.z)
    F2.set_ang_vel(N, -u2 * N.z)

    O = me.Point("O")
    O.set_vel(N, 0)
    G1 = O.locatenew("G1", L / 2 * F1.x)
    P12 = O.locatenew("P12", L * F1.x)
    G2 = P12.locatenew("G2", L / 2 * F2.x)
    G1.v2pt_theory(O, N, F1)
    P12.v2pt_theory(O, N, F1)
    G2.v2pt_theory(P12, N, F2)

    bodies = [
        me.RigidBody("link1", G1, F1, m, (me.inertia(F1, 0, 0, J), G1)),
        me.RigidBody("link2", G2, F2, m, (me.inertia(F2, 0, 0, J), G2)),
    ]
    loads = [(G1, m * g * N.x), (G2, m * g * N.x)]
    kane = me.KanesMethod(
        N, q_ind=[th1, th2], u_ind=[u1, u2], kd_eqs=[th1.diff() - u1, th2.diff() - u2]
    )
    kane.kanes_equations(bodies, loads)

    op = {th1: sp.pi / 2, th2: sp.pi / 2, u1: 0, u2: 0, u1.diff(): 0, u2.diff(): 0}
    A, _ = kane.to_linearizer().linearize(op_point=op, A_and_B=True)
    return _sorted(np.linalg.eigvals(np.array(A, dtype=float)))


def double_pendulum_eigenvalues(params: dict[str, float] | None = None) -> np.ndarray:
    """The 4 eigenvalues (±iω₁, ±iω₂) of the double pendulum of
    ``models/double_pendulum.py`` linearized about its hanging equilibrium
    th1 = th2 = π/2; ``params`` overrides m, L, g by name."""
    return _double_pendulum(_merge_params(params)).copy()


def double_pendulum_closed_form_eigenvalues(params: dict[str, float] | None = None) -> np.ndarray:
    """The same 4 eigenvalues from the closed form K φ = ω² M φ of two uniform links
    hanging straight (M = m L² [[4/3, 1/2], [1/2, 1/3]], K = m g L diag(3/2, 1/2))."""
    p = dict(_merge_params(params))
    m, L, g = p["m"], p["L"], p["g"]
    M = m * L**2 * np.array([[4 / 3, 1 / 2], [1 / 2, 1 / 3]])
    K = m * g * L * np.diag([3 / 2, 1 / 2])
    omega = np.sqrt(np.linalg.eigvals(np.linalg.solve(M, K)).real)
    return _sorted(np.concatenate([1j * omega, -1j * omega]))


# -- spring four-bar ------------------------------------------------------------------
def _fourbar_closure(q1: float) -> tuple[float, float]:
    """Coupler and rocker angles (q2, q3) at crank angle q1: C is the intersection of
    the circles |C − B| = r2 and |C − D| = r3 to the left of the ray from B towards D
    (above the ground line at q1 = 0, the model's assembly branch)."""
    r1, r2, r3, r0 = FOURBAR_R1, FOURBAR_R2, FOURBAR_R3, FOURBAR_R0
    bx, by = r1 * math.cos(q1), r1 * math.sin(q1)
    dx, dy = r0 - bx, -by  # B → D
    d = math.hypot(dx, dy)
    a = (r2**2 - r3**2 + d**2) / (2 * d)  # distance from B to the chord's foot
    h = math.sqrt(r2**2 - a**2)
    ex, ey = dx / d, dy / d
    cx, cy = bx + a * ex - h * ey, by + a * ey + h * ex
    return math.atan2(cy - by, cx - bx), math.atan2(cy, cx - r0)


@lru_cache(maxsize=1)
def _fourbar() -> tuple[dict[str, float], np.ndarray]:
    r1, r2, r3, r0 = FOURBAR_R1, FOURBAR_R2, FOURBAR_R3, FOURBAR_R0
    mass, g, k, l0 = FOURBAR_MASS, FOURBAR_G, SPRING_K, SPRING_L0

    q1, q2, q3 = me.dynamicsymbols("q1 q2 q3")
    u1, u2, u3 = me.dynamicsymbols("u1 u2 u3")
    N = me.ReferenceFrame("N")
    frames = []
    for name, q, u in (("crank", q1, u1), ("coupler", q2, u2), ("rocker", q3, u3)):
        frame = N.orientnew(name, "Axis", (q, N.z))  # body x axis along the link
        frame.set_ang_vel(N, u * N.z)
        frames.append(frame)
    F1, F2, F3 = frames

    A = me.Point("A")
    A.set_vel(N, 0)
    D = A.locatenew("D", r0 * N.x)
    D.set_vel(N, 0)
    S = A.locatenew("S", SPRING_ANCHOR[0] * N.x + SPRING_ANCHOR[1] * N.y)
    B = A.locatenew("B", r1 * F1.x)
    G1 = A.locatenew("G1", r1 / 2 * F1.x)
    G2 = B.locatenew("G2", r2 / 2 * F2.x)
    C = B.locatenew("C", r2 * F2.x)  # C reached through crank and coupler
    C3 = D.locatenew("C3", r3 * F3.x)  # C reached through the rocker
    G3 = D.locatenew("G3", r3 / 2 * F3.x)
    for point, base, frame in ((B, A, F1), (G1, A, F1), (G2, B, F2), (C, B, F2)):
        point.v2pt_theory(base, N, frame)
    for point in (C3, G3):
        point.v2pt_theory(D, N, F3)

    loop = C.pos_from(A) - C3.pos_from(A)
    vloop = C.vel(N) - C3.vel(N)
    config = [loop.dot(N.x), loop.dot(N.y)]
    vel = [vloop.dot(N.x), vloop.dot(N.y)]

    bodies = [
        me.RigidBody(n, G, F, mass, (me.inertia(F, 0, 0, mass * ln**2 / 12), G))
        for n, G, F, ln in (("crank", G1, F1, r1), ("coupler", G2, F2, r2), ("rocker", G3, F3, r3))
    ]
    d = G2.pos_from(S)
    length = sp.sqrt(d.dot(N.x) ** 2 + d.dot(N.y) ** 2)
    loads = [(G, -mass * g * N.y) for G in (G1, G2, G3)]
    loads.append((G2, -k * (length - l0) / length * d))  # tension pulls G2 towards S

    kane = me.KanesMethod(
        N,
        q_ind=[q1],
        u_ind=[u1],
        kd_eqs=[q1.diff() - u1, q2.diff() - u2, q3.diff() - u3],
        q_dependent=[q2, q3],
        configuration_constraints=config,
        u_dependent=[u2, u3],
        velocity_constraints=vel,
    )
    kane.kanes_equations(bodies, loads)

    # reduced static equation: Kane's forcing (n − m = 1 row) at rest
    rest = {u: 0 for u in (u1, u2, u3)}
    static = sp.lambdify((q1, q2, q3), me.msubs(kane.forcing[0], rest), "math")

    def residual(a: float) -> float:
        return static(a, *_fourbar_closure(a))

    eq1 = brentq(residual, -0.6, -0.2, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=200)
    eq2, eq3 = _fourbar_closure(eq1)
    assert abs(residual(eq1)) < 1e-12, residual(eq1)

    op = {q1: eq1, q2: eq2, q3: eq3}
    op.update({u: 0 for u in (u1, u2, u3)})
    op.update({u.diff(): 0 for u in (u1, u2, u3)})
    Amat, _ = kane.to_linearizer().linearize(op_point=op, A_and_B=True)
    eigenvalues = _sorted(np.linalg.eigvals(np.array(Amat, dtype=float)))

    c1, s1, c2, s2, c3, s3 = (f(a) for a in (eq1, eq2, eq3) for f in (math.cos, math.sin))
    bx, by = r1 * c1, r1 * s1
    equilibrium = {
        "crank_x": r1 / 2 * c1,
        "crank_y": r1 / 2 * s1,
        "crank_phi": eq1,
        "coupler_x": bx + r2 / 2 * c2,
        "coupler_y": by + r2 / 2 * s2,
        "coupler_phi": eq2,
        "rocker_x": r0 + r3 / 2 * c3,
        "rocker_y": r3 / 2 * s3,
        "rocker_phi": eq3,
        "static_residual": residual(eq1),
    }
    return equilibrium, eigenvalues


def spring_fourbar_equilibrium() -> dict[str, float]:
    """The spring four-bar's static equilibrium near the model's q0, by the mbdgen
    model's coordinate names (``crank_x``, ``crank_y``, ``crank_phi``, ``coupler_*``,
    ``rocker_*``: centroid position and link angle), plus ``static_residual``, the
    reduced generalized force there (N m)."""
    return dict(_fourbar()[0])


def spring_fourbar_eigenvalues() -> np.ndarray:
    """The 2 eigenvalues (±iω) of the spring four-bar linearized about
    :func:`spring_fourbar_equilibrium` in the crank angle and its rate."""
    return _fourbar()[1].copy()
