"""Planar element library (Haug 1989 ch. 3-6) and force elements (mbdgen.model.forces).

Symbolic checks flatten small mechanisms (:meth:`Mechanism.flatten`) and compare their
equations with hand-written ones at random states; three compiled models check motion:
a one-link chain (small-amplitude period), a conservative check model (energy), the
planar slider-crank against the generalized-coordinate one, and Andrews' mechanism
(assembly and initial accelerations).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from conftest import GENERATED, MODELS, TEST_GENERATED

import mbdgen
from mbdgen.analysis.assembly import assemble
from mbdgen.errors import ModelError
from mbdgen.model import GROUND, Mechanism, forces, planar, spatial, t
from mbdgen.model.elements import element_type
from mbdgen.model.loader import load_model

OUT = TEST_GENERATED / "planar_library"
RNG = np.random.default_rng(20240607)

# -- helpers ------------------------------------------------------------------------------


def _bodies():
    bi = planar.body("bi", 1.3, 0.2, q0=(0.1, 0.2, 0.3))
    bj = planar.body("bj", 0.7, 0.1, q0=(1.0, -0.5, -0.4))
    return bi, bj


def _flat(bodies, elements, parameters=None):
    return Mechanism("check", bodies, elements, parameters=parameters).flatten()


def _random_subs(model, seed=0):
    """Random values for every coordinate, velocity, parameter and t."""
    rng = np.random.default_rng(seed)
    symbols = set(model.coordinates) | set(model.velocities) | set(model.parameters) | {t}
    return {s: sp.Float(rng.uniform(-1.5, 1.5)) for s in symbols}


def _num(expr, subs) -> float:
    return float(sp.sympify(expr).xreplace(subs))


def _close(a, b, subs, tol=1e-12):
    a, b = (sp.Matrix([v]) if isinstance(v, sp.Expr | float) else sp.Matrix(v) for v in (a, b))
    assert a.shape == b.shape
    diff = [abs(_num(x - y, subs)) for x, y in zip(a, b, strict=True)]
    assert max(diff) <= tol, diff


def _pos(q, s):
    x, y, phi = q
    return sp.Matrix(
        [x + s[0] * sp.cos(phi) - s[1] * sp.sin(phi), y + s[0] * sp.sin(phi) + s[1] * sp.cos(phi)]
    )


def _sym(*names):
    return sp.symbols(names)


# -- joints -------------------------------------------------------------------------------


def test_absolute_constraints():
    bi, _ = _bodies()
    sx, sy, cx = _sym("sx", "sy", "cx")
    F = _flat(
        [bi],
        [
            planar.absolute_x("ax", bi, (sx, sy), cx),
            planar.absolute_y("ay", bi, (0.3, -0.2), 0.5),
            planar.absolute_angle("aa", bi, 0.25),
        ],
        {sx: 0.1, sy: 0.2, cx: 0.3},
    )
    q = sp.Matrix(bi.coordinates)
    expected = [
        _pos(q, (sx, sy))[0] - cx,
        _pos(q, (sp.Symbol("ay_sx"), sp.Symbol("ay_sy")))[1] - sp.Symbol("ay_c"),
        q[2] - sp.Symbol("aa_c"),
    ]
    assert len(F.constraints) == 3
    subs = _random_subs(F, 1)
    _close(F.constraints, expected, subs)
    assert F.parameters[sp.Symbol("ay_sx")] == 0.3 and F.parameters[sp.Symbol("aa_c")] == 0.25


def test_revolute_translational_distance_weld_point_on_line():
    bi, bj = _bodies()
    F = _flat(
        [bi, bj],
        [
            planar.translational(
                "tr", bi, (0.1, 0.2), bj, (0.3, -0.1), axis=(3.0, 4.0), theta0=0.2
            ),
            planar.revolute_translational("rtr", bi, (0.2, 0.0), bj, (0.0, 0.1), axis_j=(0.0, 2.0)),
            planar.point_on_line("pl", bi, (0.0, 0.4), (1.0, 0.0), bj, (0.5, 0.5)),
            planar.distance("dist", bi, (0.1, 0.0), bj, (-0.2, 0.0), 1.7),
            planar.weld("w", GROUND, (1.0, 2.0), bj, (0.1, 0.1), theta0=0.5),
        ],
    )
    qi, qj = sp.Matrix(bi.coordinates), sp.Matrix(bj.coordinates)
    P = lambda e, n: (sp.Symbol(f"{e}_{n}x"), sp.Symbol(f"{e}_{n}y"))  # noqa: E731
    A = planar.A

    def perp_axis(e, q):  # A(φ) v' with v' = u' rotated by 90°
        ux, uy = P(e, "u")
        return A(q[2]) * sp.Matrix([-uy, ux])

    d_tr = _pos(qj, P("tr", "sj")) - _pos(qi, P("tr", "si"))
    # revolute_translational: point of bi on the line of bj (slots swapped: line body first)
    d_rt = _pos(qi, P("rtr", "sj")) - _pos(qj, P("rtr", "si"))
    d_pl = _pos(qj, P("pl", "sj")) - _pos(qi, P("pl", "si"))
    d_dist = _pos(qj, P("dist", "sj")) - _pos(qi, P("dist", "si"))
    expected = [
        perp_axis("tr", qi).dot(d_tr),
        qi[2] - qj[2] - sp.Symbol("tr_theta0"),
        perp_axis("rtr", qj).dot(d_rt),
        perp_axis("pl", qi).dot(d_pl),
        d_dist.dot(d_dist) - sp.Symbol("dist_l") ** 2,
        *(sp.Matrix(P("w", "si")) - _pos(qj, P("w", "sj"))),
        -qj[2] - sp.Symbol("w_theta0"),
    ]
    subs = _random_subs(F, 2)
    _close(F.constraints, expected, subs)
    # numeric axes are normalized
    assert F.parameters[sp.Symbol("tr_ux")] == pytest.approx(0.6)
    assert F.parameters[sp.Symbol("rtr_uy")] == pytest.approx(1.0)


def test_translational_joint_holds_on_a_constructed_configuration():
    bi, bj = _bodies()
    si, sj, u, th0 = (0.2, 0.1), (-0.3, 0.4), (0.6, 0.8), 0.35
    F = _flat([bi, bj], [planar.translational("tr", bi, si, bj, sj, axis=u, theta0=th0)])
    phi_i = 0.7
    qi = (1.0, -2.0, phi_i)
    Pi = _pos(sp.Matrix(qi), si)
    Ai = planar.A(phi_i)
    phi_j = phi_i - th0
    for s in (0.0, 0.9, -1.3):  # slide along the axis
        Pj = Pi + s * Ai * sp.Matrix(u)
        rj = Pj - planar.A(phi_j) * sp.Matrix(sj)
        subs = {
            **dict(zip(bi.coordinates, qi, strict=True)),
            **dict(zip(bj.coordinates, (*rj, phi_j), strict=True)),
        }
        subs.update({k: v for k, v in F.parameters.items()})
        assert max(abs(_num(c, subs)) for c in F.constraints) < 1e-14
    subs[bj.coordinates[1]] += 0.01  # off the line by 0.01 (v_y) along the normal v
    v_y = float((planar.A(phi_i) * sp.Matrix([-u[1], u[0]]))[1])
    assert _num(F.constraints[0], subs) == pytest.approx(0.01 * v_y, rel=1e-12)
    subs[bj.coordinates[2]] += 0.01
    assert _num(F.constraints[1], subs) == pytest.approx(-0.01, rel=1e-12)


def _eval(F, values):
    subs = {k: v for k, v in F.parameters.items()}
    subs.update(values)
    subs[t] = 0.0
    return [_num(c, subs) for c in F.constraints]


def test_gears_hold_on_constructed_configurations():
    sun = planar.body("sun", 1.0, 0.1)
    planet = planar.body("planet", 1.0, 0.1)
    # external: planet (R = 2) rolls on a fixed sun (R = 1) at center distance 3:
    # R_j (φ_j − θ) = −R_i (0 − θ) → φ_j = 1.5 θ.
    ext = _flat([planet], [planar.gear("g", GROUND, (0.0, 0.0), 1.0, planet, (0.0, 0.0), 2.0)])
    for th in (0.0, 0.8, 2.5, -2.9):
        q = {
            c: v
            for c, v in zip(
                planet.coordinates, (3 * math.cos(th), 3 * math.sin(th), 1.5 * th), strict=True
            )
        }
        assert abs(_eval(ext, q)[0]) < 1e-14
    # two fixed centers, the line of centers along −x (θ_ij = π, so c = −(R_i + R_j) π):
    # gear ratio φ̇_j / φ̇_i = −R_i / R_j
    pair = _flat(
        [sun, planet],
        [
            planar.revolute("pa", GROUND, (0.0, 0.0), sun, (0.0, 0.0)),
            planar.revolute("pb", GROUND, (-3.0, 0.0), planet, (0.0, 0.0)),
            planar.gear(
                "g", sun, (0.0, 0.0), 1.0, planet, (0.0, 0.0), 2.0, c=-3 * math.pi, alpha=math.pi
            ),
        ],
    )
    x = dict(zip(sun.coordinates + planet.coordinates, (0, 0, 0.9, -3, 0, -0.45), strict=True))
    assert max(map(abs, _eval(pair, x))) < 1e-14
    # internal: a planet (R = 1) rolls inside a fixed ring (R = 3), centers 2 apart, the
    # planet's center at angle ψ from the ring's: φ_i = −2ψ; θ_ij = ψ + π (from i to j)
    c0 = 2 * math.pi  # R_i φ_i − (R_i − R_j) θ_ij at ψ = 0
    inner = _flat(
        [planet],
        [
            planar.gear(
                "g",
                planet,
                (0.0, 0.0),
                1.0,
                GROUND,
                (0.0, 0.0),
                3.0,
                c=c0,
                internal=True,
                alpha=math.pi,
            )
        ],
    )
    for psi in (0.0, 0.7, -1.2):
        q = dict(
            zip(planet.coordinates, (2 * math.cos(psi), 2 * math.sin(psi), -2 * psi), strict=True)
        )
        assert abs(_eval(inner, q)[0]) < 1e-13


def test_rack_and_pinion_holds_when_rolling():
    pinion = planar.body("pinion", 1.0, 0.1)
    rack = planar.body("rack", 1.0, 0.1)
    R = 0.25
    F = _flat([pinion, rack], [planar.rack_pinion("rp", pinion, (0, 0), R, rack, (0, 0))])
    for X, s in ((0.0, 0.0), (0.4, 0.3), (-1.0, -0.7)):
        # rack translated by X; the pinion rolled a distance s along it: φ = −s / R
        q = dict(zip(rack.coordinates, (X, 0.0, 0.0), strict=True))
        q.update(zip(pinion.coordinates, (X + s, R, -s / R), strict=True))
        assert abs(_eval(F, q)[0]) < 1e-14
    q[pinion.coordinates[2]] += 0.1
    assert abs(_eval(F, q)[0]) > 1e-3


# -- drivers ------------------------------------------------------------------------------


def test_drivers():
    bi, bj = _bodies()
    w, a = _sym("w", "a0")
    F = _flat(
        [bi, bj],
        [
            planar.x_driver("dx", bi, a + w * t, s=(0.1, 0.2)),
            planar.y_driver("dy", bj, sp.sin(w * t)),
            planar.angle_driver("dphi", bi, a + w * t**2),
            planar.rotation_driver("drot", bi, bj, w * t),
            planar.translation_driver("dtr", bi, (0.1, 0.0), bj, (0.0, 0.2), a * t, axis=(0, 1)),
            planar.distance_driver("ddist", GROUND, (1.0, 1.0), bj, (0.3, 0.0), 2 + a * t),
        ],
        {w: 1.3, a: 0.4},
    )
    qi, qj = sp.Matrix(bi.coordinates), sp.Matrix(bj.coordinates)
    P = lambda e, n: (sp.Symbol(f"{e}_{n}x"), sp.Symbol(f"{e}_{n}y"))  # noqa: E731
    d_tr = _pos(qj, P("dtr", "sj")) - _pos(qi, P("dtr", "si"))
    u = planar.A(qi[2]) * sp.Matrix(P("dtr", "u"))
    d_d = _pos(qj, P("ddist", "sj")) - sp.Matrix(P("ddist", "si"))
    expected = [
        _pos(qi, P("dx", "s"))[0] - a - w * t,
        _pos(qj, P("dy", "s"))[1] - sp.sin(w * t),
        qi[2] - a - w * t**2,
        qj[2] - qi[2] - w * t,
        u.dot(d_tr) - a * t,
        d_d.dot(d_d) - (2 + a * t) ** 2,
    ]
    _close(F.constraints, expected, _random_subs(F, 3))


def test_same_expression_structure_shares_one_type():
    bi, bj = _bodies()
    w, v = _sym("w", "v")
    d1 = planar.angle_driver("d1", bi, w * t)
    d2 = planar.angle_driver("d2", bj, v * t)
    d3 = planar.angle_driver("d3", bj, v * t**2)
    assert d1.type_key == d2.type_key != d3.type_key
    s1 = forces.tsda("s1", bi, (0, 0), bj, (0, 0), k=1, actuator=w * forces.ldot)
    s2 = forces.tsda("s2", GROUND, (1, 0), bj, (0, 0), k=2, actuator=v * forces.ldot)
    s3 = forces.tsda("s3", bj, (0, 0), bi, (1, 0), k=3, actuator=v * forces.ldot)
    assert s1.type_key == s3.type_key and s1.type_key != s2.type_key  # ground slot differs
    assert element_type(s1) is element_type(s3)


# -- force elements ------------------------------------------------------------------------


def _grad(expr, q):
    return sp.Matrix([sp.diff(expr, c) for c in q])


def test_tsda_force_is_minus_f_times_the_gradient_of_its_length():
    bi, bj = _bodies()
    a, b = _sym("ca", "cb")
    elements = [
        forces.tsda(
            "s",
            bi,
            (0.1, 0.2),
            bj,
            (-0.3, 0.1),
            k=50.0,
            c=3.0,
            l0=0.4,
            actuator=a * forces.l**2 + b * forces.ldot * t,
        )
    ]
    F = _flat([bi, bj], elements, {a: 0.7, b: -0.2})
    q, qd = sp.Matrix(F.coordinates), sp.Matrix(F.velocities)
    d = _pos(q[3:6, 0], (sp.Symbol("s_sjx"), sp.Symbol("s_sjy"))) - _pos(
        q[0:3, 0], (sp.Symbol("s_six"), sp.Symbol("s_siy"))
    )
    ell = sp.sqrt(d.dot(d))
    ell_q = _grad(ell, q)
    elld = ell_q.dot(qd)
    k, c, l0 = (sp.Symbol(f"s_{n}") for n in ("k", "c", "l0"))
    f = k * (ell - l0) + c * elld + a * ell**2 + b * elld * t
    for seed in range(3):
        _close(F.force, -f * ell_q, _random_subs(F, seed), tol=1e-10)
    # the spring part is conservative: Q = −∂V/∂q with V = ½k(ℓ − ℓ0)²
    G = _flat([bi, bj], [forces.tsda("s", bi, (0.1, 0.2), bj, (-0.3, 0.1), k=50.0, l0=0.4)])
    _close(G.potential, k * (ell - l0) ** 2 / 2, _random_subs(G, 4))
    for seed in range(3):
        subs = {**_random_subs(G, seed), c: 0.0}  # no damping
        _close(G.force, -_grad(G.potential, q), subs, tol=1e-10)


def test_rsda_torque_and_potential():
    bi, bj = _bodies()
    a = sp.Symbol("ra")
    F = _flat(
        [bi, bj],
        [forces.rsda("r", bi, bj, k=20.0, c=2.0, theta0=0.3, actuator=a * forces.thetadot**3)],
        {a: 0.5},
    )
    q, qd = sp.Matrix(F.coordinates), sp.Matrix(F.velocities)
    th, thd = q[5] - q[2], qd[5] - qd[2]
    k, c, th0 = (sp.Symbol(f"r_{n}") for n in ("k", "c", "theta0"))
    T = k * (th - th0) + c * thd + a * thd**3
    _close(F.force, -T * _grad(th, q), _random_subs(F, 5))
    G = _flat([bi, bj], [forces.rsda("r", bi, bj, k=20.0, theta0=0.3)])
    _close(G.potential, k * (th - th0) ** 2 / 2, _random_subs(G, 6))
    _close(G.force, -_grad(G.potential, q), {**_random_subs(G, 7), c: 0.0})
    # against the ground: only body j's angle
    H = _flat([bj], [forces.rsda("r", GROUND, bj, k=20.0)])
    _close(H.force, [0, 0, -k * (sp.Symbol("bj_phi") - th0)], {**_random_subs(H, 8), c: 0.0})


def test_point_force_torque_and_generalized_force():
    bi, bj = _bodies()
    w = sp.Symbol("w")
    xi, yi, phii = bi.coordinates
    xdi = bi.velocities[0]
    s = (0.3, -0.2)
    # a point force's components may use its own body's coordinates, not another's
    with pytest.raises(ModelError, match="no default"):
        _flat([bi, bj], [forces.point_force("fb", bj, s, (1.0, xi))])
    F = _flat(
        [bi, bj],
        [
            forces.point_force("fg", bi, s, (w * t, -2.0)),
            forces.point_force("fb", bj, s, (1.0, bj.coordinates[0]), frame="body"),
            forces.torque("tq", bi, w * sp.cos(phii)),
            forces.generalized("gen", [bi, bj], {yi: -w * xdi, bj.coordinates[2]: t}),
        ],
        {w: 2.0},
    )
    q = sp.Matrix(F.coordinates)
    sx = (sp.Symbol("fg_sx"), sp.Symbol("fg_sy"))
    rg = planar.A(phii) * sp.Matrix(sx)  # moment arm A s'
    fg = sp.Matrix([w * t, -2.0])
    sb = (sp.Symbol("fb_sx"), sp.Symbol("fb_sy"))
    rb = planar.A(q[5]) * sp.Matrix(sb)
    fb = planar.A(q[5]) * sp.Matrix([1.0, q[3]])
    cross = lambda r, f: r[0] * f[1] - r[1] * f[0]  # noqa: E731
    expected = [
        fg[0],
        fg[1] - w * xdi,
        cross(rg, fg) + w * sp.cos(phii),
        fb[0],
        fb[1],
        cross(rb, fb) + t,
    ]
    _close(F.force, expected, _random_subs(F, 9))
    with pytest.raises(ModelError, match="not a coordinate"):
        forces.generalized("gen", [bi], {bj.coordinates[0]: 1})
    with pytest.raises(ModelError, match="frame"):
        forces.point_force("p", bi, s, (1, 2), frame="local")


def test_gravity_dispatch_and_spatial_bodies():
    bi, bj = _bodies()
    assert [e.family for e in forces.gravity([bi, bj])] == ["planar_gravity"] * 2
    sb = spatial.body("sb", 1.0, (1.0, 1.0, 1.0))
    mixed = forces.gravity([bi, sb], (0.0, 0.0, -9.81))
    assert [e.family for e in mixed] == ["planar_gravity", "spatial_gravity"]
    with pytest.raises(ModelError, match="3-component"):
        forces.gravity([sb], (0.0, -9.81))
    if not hasattr(spatial, "tsda"):
        with pytest.raises(ModelError, match="no spatial tsda"):
            forces.tsda("s", sb, (0, 0, 0), GROUND, (1, 0, 0), k=1.0)
    with pytest.raises(ModelError, match="planar and spatial"):
        forces.tsda("s", bi, (0, 0), sb, (0, 0, 0))


def test_chain_of_512_links_shares_four_element_types():
    """512 links, four element types (body, two revolute variants, gravity) and nine
    parameters: symbolic work does not grow with N (build time and compile time are
    measured by `mbdgen bench --scale`, not asserted in a unit test)."""
    bodies, elements = planar.chain(512)
    mech = Mechanism("chain", bodies, elements)
    assert (mech.n, mech.m) == (1536, 1024)
    assert len({element_type(e).name for e in mech.elements}) == 4  # body, 2 revolutes, gravity
    assert len({e.type_key for e in mech.elements}) == 4
    assert len(mech.parameters) == 9


def test_example_models_are_consistent_at_their_initial_state():
    for name, tol in (
        ("fourbar", 1e-14),
        ("double_pendulum_rsda", 1e-14),
        ("slider_crank_tsda", 1e-14),
        ("planar_chain", 1e-14),
        ("andrews", 1e-14),
        ("slider_crank_planar", 1e-4),  # Eq. 75 is printed to four digits
    ):
        mech = load_model(MODELS / f"{name}.py")
        assert mech.name == name
        F = mech.flatten()
        subs = {
            **dict(zip(F.coordinates, mech.q0, strict=True)),
            **dict(zip(F.velocities, mech.qd0, strict=True)),
        }
        subs.update(F.parameters)
        subs[t] = 0.0
        assert max(abs(_num(c, subs)) for c in F.constraints) < tol, name
        jac = sp.Matrix(F.constraints).jacobian(F.coordinates).xreplace(subs)
        velocity = np.array(jac, dtype=float) @ np.array(mech.qd0)
        nu = -np.array([_num(sp.diff(c, t), subs) for c in F.constraints])
        np.testing.assert_allclose(velocity, nu, atol=1e-12, err_msg=name)


# -- compiled models ----------------------------------------------------------------------

_CHECK_MODEL = '''"""Test-only: a pendulum and a conservative double pendulum (springs, no damping).

The pendulum (body ``pend``: a slender bar, m = 2, L = 0.8, pinned at one end) moves
independently of the double pendulum (``arm1``, ``arm2``: two bars with an RSDA at each
hinge and a TSDA from arm2's tip to a ground point), so one compiled module serves the
period test and the energy test.
"""

from mbdgen.model import GROUND, Mechanism
from mbdgen.model import forces, planar

pend = planar.body("pend", 2.0, 2.0 * 0.8**2 / 12, q0=(0.0, -0.4, -1.5707963267948966))
a = planar.body("arm1", 1.0, 1.0 / 12, q0=(0.5, 0.0, 0.0))
b = planar.body("arm2", 1.0, 1.0 / 12, q0=(1.5, 0.0, 0.0), qd0=(0.0, 2.0, 4.0))
model = Mechanism(
    name="planar_check",
    bodies=[pend, a, b],
    elements=[
        planar.revolute("pivot", GROUND, (0.0, 0.0), pend, (-0.4, 0.0)),
        planar.revolute("h1", GROUND, (0.0, 0.0), a, (-0.5, 0.0)),
        planar.revolute("h2", a, (0.5, 0.0), b, (-0.5, 0.0)),
        forces.rsda("r1", GROUND, a, k=30.0, theta0=0.2),
        forces.rsda("r2", a, b, k=20.0, theta0=-0.1),
        forces.tsda("spring", b, (0.5, 0.0), GROUND, (2.0, 1.0), k=40.0, l0=0.5),
        forces.gravity([pend, a, b], (0.0, -9.81)),
    ],
)
'''


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


@pytest.fixture(scope="module")
def check_module():
    return mbdgen.compile(_write(OUT / "src" / "planar_check.py", _CHECK_MODEL), OUT)


def test_small_amplitude_pendulum_period(check_module):
    """T = 2π (J_O / (m g d))^½ with J_O = m L²/3, d = L/2 for ε = 1e-3 rad: the
    amplitude correction ε²/16 is 6e-8."""
    mod = check_module
    names = list(mod.COORDINATE_NAMES)
    q0 = np.array(mod.Q0)
    eps, L = 1e-3, 0.8
    phi = -math.pi / 2 + eps
    q0[names.index("pend_x")] = L / 2 * math.cos(phi)
    q0[names.index("pend_y")] = L / 2 * math.sin(phi)
    q0[names.index("pend_phi")] = phi
    period = 2 * math.pi * math.sqrt((L * L / 3) / (9.81 * L / 2))
    r = mbdgen.simulate(
        mod, "abm", 4, 1e-3, round(2.2 * period, 3), q0=q0, assemble=["pend_phi", "arm1_phi"]
    )
    x = r.coordinate("pend_phi") + math.pi / 2
    i = np.nonzero((x[:-1] < 0) & (x[1:] >= 0))[0]  # upward zero crossings
    crossings = r.t[i] - x[i] * (r.t[i + 1] - r.t[i]) / (x[i + 1] - x[i])
    measured = crossings[1] - crossings[0]
    assert abs(measured / period - 1) < 1e-6, (measured, period)  # measured 6.2e-8


def test_conservative_model_conserves_energy(check_module):
    """Kinetic + potential energy (Model.kinetic, Model.potential of the flattened
    mechanism) stays constant to the ABM4 accuracy at h = 1e-3 over 2 s."""
    mod = check_module
    model = load_model(OUT / "src" / "planar_check.py").flatten()
    args = (*model.coordinates, *model.velocities, *model.parameters)
    energy = sp.lambdify(args, model.kinetic + model.potential, "numpy")
    p = [model.parameters[s] for s in model.parameters]
    r = mbdgen.simulate(mod, "abm", 4, 1e-3, 2.0, assemble=["pend_phi", "arm1_phi"])
    e = np.array([energy(*q, *qd, *p) for q, qd in zip(r.q, r.qd, strict=True)])
    drift = np.abs(e - e[0]).max() / np.abs(e).max()
    assert np.ptp(r.coordinate("arm2_phi")) > 0.5  # it really moves
    assert drift < 2e-7, drift  # measured 6.2e-8 (1.9e-9 at h = 5e-4)


@pytest.fixture(scope="module")
def planar_slider_crank():
    return mbdgen.compile(MODELS / "slider_crank_planar.py", GENERATED, recompile=False)


def test_planar_slider_crank_reproduces_the_generalized_coordinate_model(
    slider_crank, planar_slider_crank
):
    """Same θ0 = 0.9851 assembled in both; θ(t) over 1 s agrees to round-off (both
    integrate the same motion with the same steps)."""
    r1 = mbdgen.simulate(slider_crank, "abm", 4, 1e-3, 1.0, assemble=["theta"], newton_tol=1e-12)
    r2 = mbdgen.simulate(
        planar_slider_crank, "abm", 4, 1e-3, 1.0, assemble=["crank_phi"], newton_tol=1e-12
    )
    np.testing.assert_allclose(r2.coordinate("crank_phi"), r1.coordinate("theta"), atol=1e-10)
    np.testing.assert_allclose(r2.coordinate("rod_phi"), r1.coordinate("phi"), atol=1e-10)
    np.testing.assert_allclose(r2.coordinate("rod_x"), r1.coordinate("x"), atol=1e-10)
    assert np.abs(r2.coordinate("crank_x")).max() < 1e-12


def test_andrews_assembles_and_starts_like_hairer_wanner():
    """21 coordinates, 20 constraints, 1 degree of freedom; from a perturbed start
    (β held) assembly returns the problem's angles, and q̈(0) gives the published
    β̈ = 14222.44, Θ̈ = −10666.83 (Mazzia & Magherini's test set), 0 for the others."""
    import importlib.util

    mod = mbdgen.compile(MODELS / "andrews.py", GENERATED, recompile=False)
    spec = importlib.util.spec_from_file_location("andrews_src", MODELS / "andrews.py")
    src = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(src)
    phi0 = np.array(src.absolute_angles(src.ANGLES0))
    a = assemble(mod, hold=["body1_phi"])
    assert (a.dof, a.rank, a.redundant) == (1, 20, [])
    phi = np.zeros(20)
    mod.phi(0.0, a.q, mod.P_DEFAULT, phi)
    assert np.abs(phi).max() < 1e-10
    q0 = np.array(mod.Q0) + RNG.uniform(-2e-3, 2e-3, 21) * np.tile([1, 1, 10], 7)
    q0[2] = mod.Q0[2]
    b = assemble(mod, q0=q0, hold=["body1_phi"])
    np.testing.assert_allclose(b.q[2::3], phi0, atol=1e-10)
    np.testing.assert_allclose(b.q, mod.Q0, atol=1e-10)
    acc = a.qdd[2::3]
    beta, Theta = acc[0], acc[1] - acc[0]
    assert beta == pytest.approx(14222.4439199541138705911625887, rel=1e-9)
    assert Theta == pytest.approx(-10666.8329399655854029433719415, rel=1e-9)
    assert np.abs(acc[2:]).max() < 1e-8
