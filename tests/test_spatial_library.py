"""The spatial element library (Haug 1989 ch. 9-11): body, joints, drivers, forces.

Symbolic checks go through ``Mechanism.flatten()`` and lambdify (no compiling): each
joint's Φ at random states against Haug's formulas written out here in NumPy, Φ = 0
and full row rank at a configuration built to satisfy the joint, the rows per joint,
force elements against −∇V and their dissipated power, and the body's equations of
motion against Euler's equations.  Four compiled models share module-scoped fixtures:
a "zoo" of three uncoupled subsystems (a planar double pendulum, the same pendulum of
spatial bodies on z revolutes, a 3-D double pendulum on spherical joints checked
against ``sympy.physics.mechanics``), a redundant four-bar of spatial revolutes, and
the example models ``welch_pendulum3d`` and ``spatial_slider_crank``.
"""

from __future__ import annotations

import math
import zlib
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from conftest import GENERATED, MODELS, TEST_GENERATED

import mbdgen
from mbdgen.analysis.assembly import assemble
from mbdgen.model import GROUND, Mechanism, load_model, t
from mbdgen.model import spatial as S

SRC = TEST_GENERATED / "spatial_src"

# -- NumPy versions of Haug's formulas (independent of the library) -------------------


def tilde(a):
    return np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])


def A_np(p):
    e0, e = p[0], np.asarray(p[1:])
    return (2 * e0**2 - 1) * np.eye(3) + 2 * (np.outer(e, e) + e0 * tilde(e))


def G_np(p):
    e0, e = p[0], np.asarray(p[1:])
    return np.column_stack([-e, -tilde(e) + e0 * np.eye(3)])


def unit(v):
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


def rand_p(rng):
    return unit(rng.normal(size=4))


def rand_unit_perp(rng, h):
    v = rng.normal(size=3)
    return unit(v - (v @ h) * h)


def rot(axis, angle):
    """Rotation by ``angle`` about the unit ``axis`` (Rodrigues)."""
    k = tilde(unit(axis))
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * k @ k


def p_of(R):
    return np.array(S.euler_parameters(R.tolist()))


# -- flattening helpers -----------------------------------------------------------------


class Flat:
    """Φ, Φ_q, Q, M, T, V and γ of a mechanism, lambdified on first use with the
    parameter defaults substituted."""

    def __init__(self, mech: Mechanism) -> None:
        model = mech.flatten()
        self.mech = mech
        self.q = sp.Matrix(model.coordinates)
        self.qd = sp.Matrix(model.velocities)
        self.subs = {s: sp.Float(v) for s, v in model.parameters.items()}
        self.model = model
        self._phi = sp.Matrix(model.constraints).xreplace(self.subs)

    def _fn(self, args, expr):
        return sp.lambdify(args, expr, "numpy", cse=True)

    def __getattr__(self, name):
        q, qd, m = self.q, self.qd, self.model
        make = {
            "phi": lambda: self._fn([t, q], self._phi),
            "phi_q": lambda: self._fn([t, q], self._phi.jacobian(q)),
            "force": lambda: self._fn([t, q, qd], sp.Matrix(m.force).xreplace(self.subs)),
            "mass": lambda: self._fn([q], sp.Matrix(m.mass).xreplace(self.subs)),
            "kinetic": lambda: self._fn([q, qd], sp.sympify(m.kinetic).xreplace(self.subs)),
            "V": lambda: self._fn([q], sp.sympify(m.potential).xreplace(self.subs)),
            "grad_V": lambda: self._fn(
                [q], sp.Matrix([sp.sympify(m.potential).xreplace(self.subs)]).jacobian(q)
            ),
            "gamma": lambda: self._fn([t, q, qd], -(self._phi.jacobian(q) * qd).jacobian(q) * qd),
        }
        if name not in make:
            raise AttributeError(name)
        fn = make[name]()
        setattr(self, name, fn)
        return fn


def rows(mech: Mechanism, name: str) -> slice:
    for e, r, k in mech.element_rows():
        if e.name == name:
            return slice(r, r + k)
    raise KeyError(name)


# -- 1. the body: M = diag(mI, 4GᵀJ'G), Q = 8ĠᵀJ'Ġp, pᵀp = 1 ------------------------


def _free_body_accelerations(flat, q, qd, t0=0.0):
    M = flat.mass(q)
    Q = np.asarray(flat.force(t0, q, qd), float).ravel()
    Pq = np.asarray(flat.phi_q(t0, q), float)
    g = np.asarray(flat.gamma(t0, q, qd), float).ravel()
    m = Pq.shape[0]
    a = np.block([[M, Pq.T], [Pq, np.zeros((m, m))]])
    return np.linalg.solve(a, np.concatenate([Q, g]))[: len(q)]


def test_body_equations_are_eulers_equations_with_applied_force_and_torque():
    """The augmented system [[M, Φ_qᵀ], [Φ_q, 0]] of one body under a force F at s'
    and a torque n gives m r̈ = F and J'ω̇' + ω̃'J'ω' = n' + s̃'AᵀF with ω' = 2Gṗ,
    ω̇' = 2Gp̈ (Haug 1989, Eqs. 11.1.32 and the Newton–Euler equations)."""
    rng = np.random.default_rng(1)
    J = (1.0, 2.0, 3.5, 0.1, -0.2, 0.3)
    Jm = np.array([[1.0, 0.1, -0.2], [0.1, 2.0, 0.3], [-0.2, 0.3, 3.5]])
    b = S.body("b", 2.0, J)
    F = (0.3, -1.2, 0.7)
    s = (0.2, -0.1, 0.4)
    n = (0.5, 0.25, -1.0)
    for frame in ("global", "body"):
        mech = Mechanism(
            "free", [b], [S.point_load("F", b, s, F, frame), S.torque("N", b, n, frame)]
        )
        flat = Flat(mech)
        for _ in range(3):
            p = rand_p(rng)
            pd = rng.normal(size=4)
            pd -= p * (p @ pd)
            q, qd = np.r_[rng.normal(size=3), p], np.r_[rng.normal(size=3), pd]
            qdd = _free_body_accelerations(flat, q, qd)
            Am = A_np(p)
            Fg = np.array(F) if frame == "global" else Am @ np.array(F)
            nb = Am.T @ np.array(n) if frame == "global" else np.array(n)
            w = 2 * G_np(p) @ pd
            wd = 2 * G_np(p) @ qdd[3:]
            np.testing.assert_allclose(2.0 * qdd[:3], Fg, atol=1e-12)
            rhs = nb + tilde(np.array(s)) @ Am.T @ Fg - np.cross(w, Jm @ w)
            np.testing.assert_allclose(Jm @ wd, rhs, atol=1e-12)
            # kinetic energy ½ q̇ᵀMq̇ = ½ m ṙᵀṙ + ½ ω'ᵀJ'ω'
            T = 0.5 * 2.0 * qd[:3] @ qd[:3] + 0.5 * w @ Jm @ w
            assert flat.kinetic(q, qd) == pytest.approx(T, rel=1e-12)
            assert 0.5 * qd @ flat.mass(q) @ qd == pytest.approx(T, rel=1e-12)


# -- 2-3. joints and drivers: rows, Haug's formulas, Φ = 0 where they should hold ------

ROWS = {
    "spherical": 3,
    "universal": 4,
    "revolute": 5,
    "cylindrical": 4,
    "translational": 5,
    "fixed": 6,
    "parallel": 2,
    "revolute_spherical": 2,
    "distance": 1,
    "dot1": 1,
    "dot2": 1,
    "rotational_driver": 1,
    "translational_driver": 1,
}

w_sym, ph_sym = sp.symbols("drive_w drive_phase")
DRIVE = {w_sym: 0.7, ph_sym: 0.3}


def _case(kind: str, rng, with_ground: bool):
    """A joint between b1 (or the ground) and b2 with data chosen so that the joint
    holds at the configuration (q1, q2); returns (element, q1, q2, expected Φ(q1, q2, t))
    and the expectation function for arbitrary states."""
    b1 = S.body("b1", 1.0, (0.1, 0.2, 0.3))
    b2 = S.body("b2", 1.5, (0.2, 0.1, 0.25))
    p1 = np.array([1.0, 0, 0, 0]) if with_ground else rand_p(rng)
    r1 = np.zeros(3) if with_ground else rng.normal(size=3)
    p2 = rand_p(rng)
    A1, A2 = A_np(p1), A_np(p2)
    si, sj = rng.normal(size=3), rng.normal(size=3)
    hi = unit(rng.normal(size=3))
    fi = rand_unit_perp(rng, hi)
    gi = np.cross(hi, fi)
    H, Fv, Gv = A1 @ hi, A1 @ fi, A1 @ gi  # body i's joint frame, global
    d = np.zeros(3)  # d_ij at the configuration
    data = {}
    theta = rng.uniform(-2.5, 2.5)
    if kind in ("revolute", "cylindrical", "parallel"):
        # body j's axis along h_i; its other vectors turned by θ about it
        data["hj"] = A2.T @ H
    if kind in ("translational", "fixed"):
        data["hj"], data["fj"] = A2.T @ H, A2.T @ Fv
    if kind == "cylindrical":
        d = rng.normal() * H
    if kind == "translational":
        d = rng.normal() * H
    if kind == "universal":
        data["hj"] = A2.T @ rand_unit_perp(rng, H)
    if kind == "dot1":
        data["aj"] = A2.T @ rand_unit_perp(rng, Fv)
    if kind == "dot2":
        d = rand_unit_perp(rng, Fv) * rng.uniform(0.5, 2)
    C = rng.uniform(0.5, 2.0)
    if kind == "distance":
        d = C * unit(rng.normal(size=3))
    if kind == "revolute_spherical":
        d = C * rand_unit_perp(rng, H)
    if kind == "rotational_driver":
        data["hj"] = A2.T @ H
        data["fj"] = A2.T @ (math.cos(theta) * Fv + math.sin(theta) * Gv)
    delta = rng.normal()
    if kind == "translational_driver":
        d = delta * H + rand_unit_perp(rng, H) * rng.normal()
    r2 = r1 + A1 @ si + d - A2 @ sj
    bi = GROUND if with_ground else b1
    fdrive = w_sym * t + ph_sym
    elements = {
        "spherical": lambda: S.spherical("j", bi, si, b2, sj),
        "universal": lambda: S.universal("j", bi, si, b2, sj, hi, data["hj"]),
        "revolute": lambda: S.revolute("j", bi, si, b2, sj, hi, data["hj"], f_i=fi),
        "cylindrical": lambda: S.cylindrical("j", bi, si, b2, sj, hi, data["hj"], f_i=fi),
        "translational": lambda: S.translational(
            "j", bi, si, b2, sj, hi, data["hj"], f_i=fi, f_j=data["fj"]
        ),
        "fixed": lambda: S.fixed("j", bi, si, b2, sj, hi, data["hj"], f_i=fi, f_j=data["fj"]),
        "parallel": lambda: S.parallel("j", bi, hi, b2, data["hj"], f_i=fi),
        "revolute_spherical": lambda: S.revolute_spherical("j", bi, si, b2, sj, hi, C),
        "distance": lambda: S.distance("j", bi, si, b2, sj, C),
        "dot1": lambda: S.dot1("j", bi, fi, b2, data["aj"]),
        "dot2": lambda: S.dot2("j", bi, fi, si, b2, sj),
        "rotational_driver": lambda: S.rotational_driver(
            "j", bi, b2, hi, data["hj"], fdrive, f_i=fi, f_j=data["fj"]
        ),
        "translational_driver": lambda: S.translational_driver("j", bi, si, b2, sj, hi, fdrive),
    }

    def expected(q1, q2, time):
        """Haug's rows at an arbitrary state."""
        Ai, Aj = A_np(q1[3:]), A_np(q2[3:])
        dij = q2[:3] + Aj @ sj - q1[:3] - Ai @ si
        Fg, Gg, Hg = Ai @ fi, Ai @ gi, Ai @ hi
        sph = list(-dij)
        if kind in ("revolute", "cylindrical", "parallel", "translational", "fixed"):
            hj = Aj @ data["hj"]
            axis = [Fg @ hj, Gg @ hj]
        if kind in ("translational", "fixed"):
            gj = Aj @ np.cross(data["hj"], data["fj"])
        f_t = DRIVE[w_sym] * time + DRIVE[ph_sym]
        return {
            "spherical": lambda: sph,
            "universal": lambda: sph + [Hg @ (Aj @ data["hj"])],
            "revolute": lambda: sph + axis,
            "cylindrical": lambda: axis + [Fg @ dij, Gg @ dij],
            "translational": lambda: axis + [Fg @ dij, Gg @ dij, Fg @ gj],
            "fixed": lambda: sph + axis + [Fg @ gj],
            "parallel": lambda: axis,
            "revolute_spherical": lambda: [Hg @ dij, dij @ dij - C * C],
            "distance": lambda: [dij @ dij - C * C],
            "dot1": lambda: [Fg @ (Aj @ data["aj"])],
            "dot2": lambda: [Fg @ dij],
            "rotational_driver": lambda: [
                math.cos(f_t) * (Gg @ (Aj @ data["fj"])) - math.sin(f_t) * (Fg @ (Aj @ data["fj"]))
            ],
            "translational_driver": lambda: [Hg @ dij - f_t],
        }[kind]()

    bodies = [b2] if with_ground else [b1, b2]
    mech = Mechanism("j_test", bodies, [elements[kind]()], parameters=DRIVE)
    q_cons = np.r_[r2, p2] if with_ground else np.r_[r1, p1, r2, p2]
    # the configuration's own value of the driven quantity
    exact = {"rotational_driver": theta, "translational_driver": delta}.get(kind)
    return mech, q_cons, expected, exact


@pytest.mark.parametrize("with_ground", [False, True], ids=["bodies", "ground"])
@pytest.mark.parametrize("kind", list(ROWS))
def test_joint_rows_formulas_and_consistent_configuration(kind, with_ground):
    rng = np.random.default_rng(zlib.crc32(f"{kind}{with_ground}".encode()))
    mech, q_cons, expected, exact = _case(kind, rng, with_ground)
    nb = len(mech.bodies)
    sl = rows(mech, "j")
    assert sl.stop - sl.start == ROWS[kind]
    flat = Flat(mech)
    # Haug's formulas at random states (p normalized or not: the rows are polynomials)
    for _ in range(3):
        q = rng.normal(size=7 * nb)
        q1 = np.r_[0, 0, 0, 1.0, 0, 0, 0] if with_ground else q[:7]
        q2 = q[-7:]
        time = rng.uniform(0, 3)
        got = np.asarray(flat.phi(time, q), float).ravel()[sl]
        np.testing.assert_allclose(got, expected(q1, q2, time), rtol=1e-11, atol=1e-11)
    # Φ = 0 at the configuration built to satisfy the joint, and full row rank there
    time = 0.0
    if exact is not None:  # drivers: choose t with f(t) = the configuration's value
        time = (exact - DRIVE[ph_sym]) / DRIVE[w_sym]
    phi = np.asarray(flat.phi(time, q_cons), float).ravel()
    assert np.abs(phi).max() < 1e-12
    jac = np.asarray(flat.phi_q(time, q_cons), float)
    assert np.linalg.matrix_rank(jac, tol=1e-9) == jac.shape[0]
    # degrees of freedom of a body on the ground: 6 − rows
    if with_ground:
        assert 7 - np.linalg.matrix_rank(jac, tol=1e-9) == 6 - ROWS[kind]


def test_perpendicular_and_default_frames():
    for h in [(0, 0, 1), (1, 0, 0), (0.3, -0.9, 0.2), (1, 1, 1)]:
        h = unit(h)
        f = np.array(S.perpendicular(h))
        assert abs(f @ h) < 1e-15 and abs(np.linalg.norm(f) - 1) < 1e-15
        assert np.array_equal(f, np.array(S.perpendicular(h)))  # deterministic
    # frames given numerically are normalized and checked
    b = S.body("b", 1.0, (1, 1, 1))
    e = S.revolute("r", GROUND, (0, 0, 0), b, (0, 0, 0), (0, 0, 2), (0, 0, 3))
    defaults = dict(e.defaults)
    assert defaults[sp.Symbol("r_hiz")] == 1.0 and defaults[sp.Symbol("r_hjz")] == 1.0
    assert defaults[sp.Symbol("r_fix")] == 1.0  # e_x is least aligned with z
    with pytest.raises(mbdgen.errors.ModelError, match="perpendicular"):
        S.revolute("r", GROUND, (0, 0, 0), b, (0, 0, 0), (0, 0, 1), (0, 0, 1), f_i=(1, 0, 1))
    with pytest.raises(mbdgen.errors.ModelError, match="must be given"):
        S.revolute("r", GROUND, (0, 0, 0), b, (0, 0, 0), sp.symbols("a b c"), (0, 0, 1))


def test_chain_and_euler_parameters():
    """chain(3): spherical joints end to end, Φ(q0) = 0, 3 × 3 = 9 degrees of freedom;
    euler_parameters inverts A(p) (e0 ≥ 0)."""
    bodies, elements = S.chain(3, length=(1.0, 2.0, 2.5), direction=(1, 0, -1))
    mech = Mechanism("chain3", bodies, elements)
    assert [e.name for e in elements[:3]] == ["link1_s", "link2_s", "link3_s"]
    flat = Flat(mech)
    q0 = np.array(mech.q0)
    assert np.abs(np.asarray(flat.phi(0.0, q0), float)).max() < 1e-14
    assert 21 - np.linalg.matrix_rank(np.asarray(flat.phi_q(0.0, q0), float)) == 9
    assert bodies[2].defaults[sp.Symbol("link3_m")] == pytest.approx(7800 * 2.5 * 0.25**2)
    rng = np.random.default_rng(5)
    for _ in range(20):
        p = rand_p(rng)
        p *= np.sign(p[0])
        np.testing.assert_allclose(p_of(A_np(p)), p, atol=1e-14)


def test_instances_with_the_same_structure_share_one_type():
    from mbdgen.model.elements import element_type

    b1 = S.body("b1", 1.0, (1, 1, 1))
    b2 = S.body("b2", 1.0, (1, 1, 1))
    k1, k2 = sp.symbols("k_one k_two")
    e1 = S.tsda("s1", b1, (0, 0, 0), b2, (1, 0, 0), 1.0, 0.1, 0.5, k1 * S.l * S.ldot)
    e2 = S.tsda("s2", b1, (0, 0, 1), b2, (0, 0, 0), 2.0, 0.2, 0.7, k2 * S.l * S.ldot)
    e3 = S.tsda("s3", b1, (0, 0, 1), b2, (0, 0, 0), 2.0, 0.2, 0.7, k2 * S.ldot)
    assert element_type(e1) is element_type(e2)
    assert element_type(e1) is not element_type(e3)
    d1 = S.rotational_driver("d1", GROUND, b1, (0, 0, 1), (0, 0, 1), k1 * t)
    d2 = S.rotational_driver("d2", GROUND, b2, (1, 0, 0), (1, 0, 0), k2 * t)
    assert element_type(d1) is element_type(d2)


def test_generic_force_factories_dispatch_to_the_spatial_library():
    """mbdgen.model.forces.tsda/rsda/point_force/torque on spatial bodies reach
    spatial.tsda/rsda/point_load/torque; its ℓ, θ symbols and ours give one type."""
    from mbdgen.model import forces
    from mbdgen.model.elements import element_type

    b1 = S.body("b1", 1.0, (1, 1, 1))
    b2 = S.body("b2", 1.0, (1, 1, 1))
    e1 = forces.tsda("s1", b1, (0, 0, 0), b2, (1, 0, 0), 1.0, 0.1, 0.5, forces.l * forces.ldot)
    e2 = S.tsda("s2", b1, (0, 0, 1), b2, (0, 0, 0), 2.0, 0.2, 0.7, S.l * S.ldot)
    assert element_type(e1) is element_type(e2)
    r1 = forces.rsda("r1", b1, b2, 1.0, 0.0, 0.1, forces.theta)
    r2 = S.rsda("r2", b1, b2, actuator=S.theta)
    assert element_type(r1) is element_type(r2)
    f = forces.point_force("f", b1, (0, 0, 1), (0, 0, t), frame="body")
    n = forces.torque("n", b2, (0, 1, 0))
    assert (f.family, n.family) == ("spatial_force_body", "spatial_torque_global")
    flat = Flat(Mechanism("dispatch", [b1, b2], [e1, r1, f, n]))
    q, qd = _random_state(np.random.default_rng(0), 2)
    assert np.isfinite(np.asarray(flat.force(0.5, q, qd), float)).all()


# -- 4. forces: −∇V, dissipated power, actuators -----------------------------------------


def _random_state(rng, nb):
    q, qd = [], []
    for _ in range(nb):
        p = rand_p(rng)
        pd = rng.normal(size=4)
        pd -= p * (p @ pd)  # tangent to pᵀp = 1
        q += [*rng.normal(size=3), *p]
        qd += [*rng.normal(size=3), *pd]
    return np.array(q), np.array(qd)


def _theta(q, hi, fi, fj):
    Ai, Aj = A_np(q[3:7]), A_np(q[10:14])
    gi = np.cross(hi, fi)
    Fj = Aj @ fj
    return math.atan2((Ai @ gi) @ Fj, (Ai @ fi) @ Fj)


def _spring_pair(k, c, extra=0, theta0=0.4):
    b1 = S.body("b1", 1.0, (0.1, 0.2, 0.3))
    b2 = S.body("b2", 1.5, (0.2, 0.1, 0.25))
    si, sj = (0.1, -0.2, 0.3), (-0.3, 0.1, 0.2)
    hi, hj = unit((0.2, 0.1, 1.0)), unit((-0.1, 0.3, 1.0))
    els = [
        S.tsda("spring", b1, si, b2, sj, k, c, 0.8, extra * S.l),
        S.rsda("torsion", b1, b2, hi, hj, k, c, theta0, extra * S.theta),
    ]
    return Mechanism("springs", [b1, b2], els), (si, sj, hi, hj)


def test_tsda_and_rsda_forces_are_minus_grad_V():
    """c = 0: Q = −∇V.  The RSDA's Q = −T ∂θ/∂q is exact; the TSDA's point forces
    (2Gᵀs̃'AᵀF) equal −∇V up to a multiple of p per body (the direction the
    normalization multiplier takes), since δ(As') = −As̃'·2Gδp only for pᵀδp = 0."""
    mech, _ = _spring_pair(k=3.0, c=0.0)
    for name in ("spring", "torsion"):
        sub = Mechanism(
            "one", mech.bodies, [e for e in mech.elements if e.name == name and e.role == "force"]
        )
        flat = Flat(sub)
        rng = np.random.default_rng(7)
        for _ in range(5):
            q, qd = _random_state(rng, 2)
            # at q̇ = 0 the bodies' own quadratic-velocity forces vanish
            Q = np.asarray(flat.force(0.0, q, 0 * qd), float).ravel()
            r = Q + np.asarray(flat.grad_V(q), float).ravel()
            for b in range(2):
                np.testing.assert_allclose(r[7 * b : 7 * b + 3], 0, atol=1e-11)
                p, rp = q[7 * b + 3 : 7 * b + 7], r[7 * b + 3 : 7 * b + 7]
                tangential = rp - p * (p @ rp)
                np.testing.assert_allclose(tangential, 0, atol=1e-11)
                if name == "torsion":
                    np.testing.assert_allclose(rp, 0, atol=1e-11)


def test_dampers_dissipate_c_times_rate_squared():
    """k = 0, c = 2: the power Qᵀq̇ is −c ℓ̇² and −c θ̇², with ℓ̇ and θ̇ taken by
    central differences of ℓ and θ along q̇ (tangent velocities)."""
    mech, (si, sj, hi, hj) = _spring_pair(k=0.0, c=2.0)
    fi = np.array(S.perpendicular(hi))
    fj = np.array(S.perpendicular(hj))
    bodies_only = Flat(Mechanism("none", mech.bodies, []))
    rng = np.random.default_rng(3)
    for name in ("spring", "torsion"):
        flat = Flat(Mechanism("one", mech.bodies, [e for e in mech.elements if e.name == name]))
        for _ in range(4):
            q, qd = _random_state(rng, 2)
            Q = np.asarray(flat.force(0.0, q, qd), float).ravel()
            Q -= np.asarray(bodies_only.force(0.0, q, qd), float).ravel()
            eps = 1e-6
            if name == "spring":

                def ell(x):
                    return np.linalg.norm(
                        x[7:10] + A_np(x[10:14]) @ sj - x[0:3] - A_np(x[3:7]) @ si
                    )

                rate = (ell(q + eps * qd) - ell(q - eps * qd)) / (2 * eps)
            else:
                rate = (_theta(q + eps * qd, hi, fi, fj) - _theta(q - eps * qd, hi, fi, fj)) / (
                    2 * eps
                )
            assert Q @ qd == pytest.approx(-2.0 * rate**2, rel=1e-7, abs=1e-9)


def test_actuator_expressions_and_rsda_angle():
    """The actuator f(ℓ) = 5ℓ adds the tension 5ℓ along d/ℓ; the RSDA's V = ½k(θ − θ0)²
    uses θ measured from f_i to f_j about h_i."""
    mech, (si, sj, hi, hj) = _spring_pair(k=0.0, c=0.0, extra=5.0)
    fi, fj = np.array(S.perpendicular(hi)), np.array(S.perpendicular(hj))
    flat = Flat(Mechanism("one", mech.bodies, [mech.elements[2]]))
    rng = np.random.default_rng(11)
    q, qd = _random_state(rng, 2)
    Q = np.asarray(flat.force(0.0, q, 0 * qd), float).ravel()
    d = q[7:10] + A_np(q[10:14]) @ np.array(sj) - q[0:3] - A_np(q[3:7]) @ np.array(si)
    np.testing.assert_allclose(Q[0:3], 5.0 * d, atol=1e-12)  # 5ℓ · d/ℓ on body i
    np.testing.assert_allclose(Q[7:10], -5.0 * d, atol=1e-12)
    mech, _ = _spring_pair(k=3.0, c=0.0, theta0=0.4)
    flat = Flat(Mechanism("one", mech.bodies, [mech.elements[3]]))
    th = _theta(q, hi, fi, fj)
    dth = (th - 0.4 + math.pi) % (2 * math.pi) - math.pi
    assert flat.V(q) == pytest.approx(1.5 * dth**2, rel=1e-12)


# -- 5-6. compiled models ----------------------------------------------------------------

ZOO_SOURCE = '''"""Test-only: three uncoupled subsystems sharing g = (0, -9.81, 0).

(a) a planar double pendulum of planar bodies and revolutes; (b) the same pendulum of
spatial bodies on revolutes with parallel z axes; (c) a 3-D double pendulum of two
asymmetric bodies on spherical joints (checked against sympy.physics.mechanics).
"""

from mbdgen.model import GROUND, Mechanism, planar, spatial

a1 = planar.body("a1", 2.0, 0.3, q0=(0.5, 0.0, 0.0))
a2 = planar.body("a2", 1.5, 0.25, q0=(1.6, 0.0, 0.0))
b1 = spatial.body("b1", 2.0, (0.11, 0.17, 0.3), q0=(0.5, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0))
b2 = spatial.body("b2", 1.5, (0.13, 0.19, 0.25), q0=(1.6, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0))
c1 = spatial.body("c1", 2.0, (0.3, 0.2, 0.05), q0=(0.0, 0.0, -0.5, 1.0, 0.0, 0.0, 0.0))
c2 = spatial.body("c2", 1.5, (0.25, 0.3, 0.04), q0=(0.0, 0.0, -1.6, 1.0, 0.0, 0.0, 0.0))
Z = (0.0, 0.0, 1.0)

model = Mechanism(
    name="spatial_zoo",
    description="planar and spatial double pendulums (tests only)",
    bodies=[a1, a2, b1, b2, c1, c2],
    elements=[
        planar.revolute("a_r1", GROUND, (0.0, 0.0), a1, (-0.5, 0.0)),
        planar.revolute("a_r2", a1, (0.5, 0.0), a2, (-0.6, 0.0)),
        planar.gravity([a1, a2], (0.0, -9.81)),
        spatial.revolute("b_r1", GROUND, (0.0, 0.0, 0.0), b1, (-0.5, 0.0, 0.0), Z, Z),
        spatial.revolute("b_r2", b1, (0.5, 0.0, 0.0), b2, (-0.6, 0.0, 0.0), Z, Z),
        spatial.spherical("c_s1", GROUND, (0.0, 0.0, 0.0), c1, (0.0, 0.0, 0.5)),
        spatial.spherical("c_s2", c1, (0.0, 0.0, -0.5), c2, (0.0, 0.0, 0.6)),
        spatial.gravity([b1, b2, c1, c2], (0.0, -9.81, 0.0)),
    ],
)
'''

FOURBAR_SOURCE = '''"""Test-only: a planar four-bar of spatial bodies on four revolutes with
parallel z axes (three of its 20 joint rows are redundant).  Crank 1, coupler 3,
rocker 2.5, ground 3 (tests/models/fourbar.py), crank at 90 degrees."""

from mbdgen.model import GROUND, Mechanism, spatial

Z = (0.0, 0.0, 1.0)
crank = spatial.body("crank", 1.0, (0.1, 0.1, 0.1), q0={crank})
coupler = spatial.body("coupler", 1.0, (0.1, 0.1, 0.8), q0={coupler})
rocker = spatial.body("rocker", 1.0, (0.1, 0.1, 0.5), q0={rocker})

model = Mechanism(
    name="spatial_fourbar",
    description="planar four-bar of spatial revolutes (tests only)",
    bodies=[crank, coupler, rocker],
    elements=[
        spatial.revolute("rA", GROUND, (0.0, 0.0, 0.0), crank, (-0.5, 0.0, 0.0), Z, Z),
        spatial.revolute("rB", crank, (0.5, 0.0, 0.0), coupler, (-1.5, 0.0, 0.0), Z, Z),
        spatial.revolute("rC", coupler, (1.5, 0.0, 0.0), rocker, (1.25, 0.0, 0.0), Z, Z),
        spatial.revolute("rD", GROUND, (3.0, 0.0, 0.0), rocker, (-1.25, 0.0, 0.0), Z, Z),
    ],
)
'''


def _write(name: str, text: str) -> Path:
    SRC.mkdir(parents=True, exist_ok=True)
    path = SRC / f"{name}.py"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def _fourbar_source() -> str:
    B, D = np.array([0.0, 1.0]), np.array([3.0, 0.0])
    # C: |C − B| = 3, |C − D| = 2.5, upper intersection
    dist = np.linalg.norm(D - B)
    a = (9.0 - 6.25 + dist**2) / (2 * dist)
    h = math.sqrt(9.0 - a * a)
    u = (D - B) / dist
    C = B + a * u + h * np.array([-u[1], u[0]])

    def link(P0, P1):
        c = (P0 + P1) / 2
        ang = math.atan2(*(P1 - P0)[::-1])
        return tuple(float(v) for v in (c[0], c[1], 0, math.cos(ang / 2), 0, 0, math.sin(ang / 2)))

    return FOURBAR_SOURCE.format(crank=link(np.zeros(2), B), coupler=link(B, C), rocker=link(D, C))


@pytest.fixture(scope="module")
def zoo():
    return mbdgen.compile(_write("spatial_zoo", ZOO_SOURCE), TEST_GENERATED)


@pytest.fixture(scope="module")
def fourbar():
    return mbdgen.compile(_write("spatial_fourbar", _fourbar_source()), TEST_GENERATED)


@pytest.fixture(scope="module")
def welch():
    return mbdgen.compile(MODELS / "welch_pendulum3d.py", GENERATED, recompile=False)


@pytest.fixture(scope="module")
def slider_crank3d():
    return mbdgen.compile(MODELS / "spatial_slider_crank.py", GENERATED, recompile=False)


def _mechanics_double_pendulum():
    """The 3-D double pendulum (c) in minimal coordinates: body-fixed XYZ angles of each
    link, generalized speeds the body-frame angular velocities, Kane's method."""
    import sympy.physics.mechanics as me

    q = me.dynamicsymbols("q1:7")
    u = me.dynamicsymbols("u1:7")
    N = me.ReferenceFrame("N")
    Af, Bf = me.ReferenceFrame("A"), me.ReferenceFrame("B")
    Af.orient_body_fixed(N, q[0:3], "XYZ")
    Bf.orient_body_fixed(N, q[3:6], "XYZ")
    kd = [Af.ang_vel_in(N).dot(v) - ui for v, ui in zip((Af.x, Af.y, Af.z), u[0:3], strict=True)]
    kd += [Bf.ang_vel_in(N).dot(v) - ui for v, ui in zip((Bf.x, Bf.y, Bf.z), u[3:6], strict=True)]
    Af.set_ang_vel(N, u[0] * Af.x + u[1] * Af.y + u[2] * Af.z)
    Bf.set_ang_vel(N, u[3] * Bf.x + u[4] * Bf.y + u[5] * Bf.z)
    O = me.Point("O")
    O.set_vel(N, 0)
    Ao = O.locatenew("Ao", -0.5 * Af.z)
    Pj = Ao.locatenew("P", -0.5 * Af.z)
    Bo = Pj.locatenew("Bo", -0.6 * Bf.z)
    Ao.v2pt_theory(O, N, Af)
    Pj.v2pt_theory(Ao, N, Af)
    Bo.v2pt_theory(Pj, N, Bf)
    ba = me.RigidBody("a", Ao, Af, 2.0, (me.inertia(Af, 0.3, 0.2, 0.05), Ao))
    bb = me.RigidBody("b", Bo, Bf, 1.5, (me.inertia(Bf, 0.25, 0.3, 0.04), Bo))
    loads = [(Ao, -2.0 * 9.81 * N.y), (Bo, -1.5 * 9.81 * N.y)]
    km = me.KanesMethod(N, q_ind=q, u_ind=u, kd_eqs=kd)
    km.kanes_equations([ba, bb], loads)
    M = sp.lambdify([q + u], km.mass_matrix_full, "numpy")
    F = sp.lambdify([q + u], km.forcing_full, "numpy")
    pos = sp.lambdify(
        [q],
        [
            [Ao.pos_from(O).dot(v) for v in (N.x, N.y, N.z)],
            [Bo.pos_from(O).dot(v) for v in (N.x, N.y, N.z)],
            N.dcm(Af),
            N.dcm(Bf),
        ],
        "numpy",
    )
    return M, F, pos


def test_planar_and_spatial_double_pendulums_and_kanes_method_agree(zoo):
    """Subsystems (a) and (b) move alike; (c) agrees with an independent Kane's-method
    model in minimal coordinates (solve_ivp DOP853, rtol 1e-11); every spatial body
    keeps pᵀp = 1.  mbdgen: RK4, h = 1e-3, direct index-1 integration, 1 s."""
    from scipy.integrate import solve_ivp

    M, F, pos = _mechanics_double_pendulum()
    angles0 = np.array([0.4, -0.3, 0.2, 0.7, 0.2, -0.5])
    omega0 = np.array([0.5, -0.8, 1.2, -0.6, 0.9, 0.3])
    ra, rb, Ra, Rb = (np.array(v, float) for v in pos(angles0))
    # mbdgen state of (c): r, p, ṙ = ω × (r − pivot), ṗ = ½ Gᵀω'
    pa, pb = p_of(Ra), p_of(Rb)
    wa, wb = Ra @ omega0[:3], Rb @ omega0[3:]
    joint = ra + Ra @ np.array([0, 0, -0.5])
    va = np.cross(wa, ra)
    vb = va + np.cross(wa, joint - ra) + np.cross(wb, rb - joint)
    names = list(zoo.COORDINATE_NAMES)
    q0, qd0 = np.array(zoo.Q0, float), np.array(zoo.QD0, float)
    i = names.index("c1_x")
    q0[i : i + 14] = np.r_[ra, pa, rb, pb]
    qd0[i : i + 14] = np.r_[va, 0.5 * G_np(pa).T @ omega0[:3], vb, 0.5 * G_np(pb).T @ omega0[3:]]
    r = mbdgen.simulate(zoo, "rk4", None, 1e-3, 1.0, q0=q0, qd0=qd0)
    assert r.ok and r.phi_norm.max() < 1e-8
    col = {n: r.coordinate(n) for n in names}

    # (a) against (b): x, y and the angle about z, φ = 2 atan2(e3, e0)
    for k in (1, 2):
        np.testing.assert_allclose(col[f"b{k}_x"], col[f"a{k}_x"], atol=1e-9)
        np.testing.assert_allclose(col[f"b{k}_y"], col[f"a{k}_y"], atol=1e-9)
        phi_b = 2 * np.arctan2(col[f"b{k}_e3"], col[f"b{k}_e0"])
        wrapped = (phi_b - col[f"a{k}_phi"] + np.pi) % (2 * np.pi) - np.pi
        np.testing.assert_allclose(wrapped, 0, atol=1e-9)
        np.testing.assert_allclose(col[f"b{k}_z"], 0, atol=1e-12)
    assert abs(col["a2_phi"][-1]) > 0.5  # it did swing

    # Euler-parameter normalization along the run (direct integration: drift only)
    for b in ("b1", "b2", "c1", "c2"):
        pp = sum(col[f"{b}_e{j}"] ** 2 for j in range(4))
        assert np.abs(pp - 1).max() < 1e-8

    # (c) against Kane's method
    def rhs(_, y):
        return np.linalg.solve(np.asarray(M(y), float), np.asarray(F(y), float).ravel())

    sol = solve_ivp(
        rhs,
        (0, 1),
        np.r_[angles0, omega0],
        method="DOP853",
        rtol=1e-11,
        atol=1e-12,
        t_eval=r.t[::250],
    )
    assert sol.success
    for j, tj in enumerate(sol.t):
        row = int(round(tj / 1e-3))
        ra, rb, Ra, Rb = (np.array(v, float) for v in pos(sol.y[:6, j]))
        qrow = r.q[row, i : i + 14]
        np.testing.assert_allclose(qrow[0:3], ra, atol=1e-8)
        np.testing.assert_allclose(qrow[7:10], rb, atol=1e-8)
        np.testing.assert_allclose(A_np(qrow[3:7]), Ra, atol=1e-8)
        np.testing.assert_allclose(A_np(qrow[10:14]), Rb, atol=1e-8)
    assert np.linalg.norm(r.q[-1, i : i + 3] - r.q[0, i : i + 3]) > 0.05  # it moved


def test_four_bar_of_spatial_revolutes_is_redundant(fourbar):
    """Four revolutes with parallel axes: 3 + 20 rows, rank 20, one degree of freedom;
    the three rows that depend on earlier ones are named (Haug 1989 §9.4 on
    redundant constraints)."""
    a = assemble(fourbar)
    assert fourbar.N_COORDINATES == 21 and fourbar.N_CONSTRAINTS == 23
    assert a.dof == 1 and a.rank == 20
    assert len(a.redundant) == 3
    assert a.residual < 1e-12
    # Reported by name: the rows of the last revolute depend on the others; every
    # revolute takes part in the dependency (the loop), the normalizations do not.
    assert all(name.startswith("rD[") for name in a.redundant_names), a.redundant_names
    joints = set(a.involved_elements)
    assert {"rA", "rB", "rC", "rD"} <= joints, joints
    message = a.redundancy_message()
    assert "rD[" in message and "joints involved" in message


def _energy(model_path: Path):
    mech = load_model(model_path)
    flat = mech.flatten()
    subs = {s: sp.Float(v) for s, v in flat.parameters.items()}
    q, qd = sp.Matrix(flat.coordinates), sp.Matrix(flat.velocities)
    e = (sp.sympify(flat.kinetic) + sp.sympify(flat.potential)).xreplace(subs)
    return sp.lambdify([q, qd], e, "numpy")


@pytest.mark.parametrize(
    ("fixture", "stem", "dof"),
    [("welch", "welch_pendulum3d", 7), ("slider_crank3d", "spatial_slider_crank", 1)],
)
def test_spatial_example_models_assemble_and_simulate(request, fixture, stem, dof):
    """Assembled at rest (Φ = 0 already), integrated 1 s with RK4 (h = 1e-3):
    constraints and pᵀp = 1 hold to the integration error and the energy is
    conserved (no dissipation), which checks the sign of 8ĠᵀJ'Ġp in a chain."""
    module = request.getfixturevalue(fixture)
    a = assemble(module)
    assert a.dof == dof and a.redundant == [] and a.residual < 1e-12
    r = mbdgen.simulate(module, "rk4", None, 1e-3, 1.0, assemble=True)
    assert r.ok and r.phi_norm.max() < 1e-6
    energy = _energy(MODELS / f"{stem}.py")
    e = np.array([energy(q, qd) for q, qd in zip(r.q, r.qd, strict=True)])
    scale = max(abs(e[0]), float(np.abs(e - e[0]).max()), 1.0)
    drift = float(np.abs(e - e[0]).max()) / scale
    assert drift < 1e-6, drift
    assert np.abs(r.q[-1] - r.q[0]).max() > 0.01  # it moved
