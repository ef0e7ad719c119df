"""Kinematic analysis of driven systems (Haug 1989 ch. 4-5): a four-bar linkage
against its closed-form (triangle) position solution, and a toggle position."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import TEST_GENERATED, TEST_MODELS

import mbdgen
from mbdgen.analysis import SingularConfigurationError, kinematics
from mbdgen.cli import main
from mbdgen.errors import MbdgenError

#: a non-Grashof linkage whose crank locks where coupler and rocker align
LOCKING = {"r1": 2.0, "r2": 1.5, "r3": 2.0, "r0": 3.0, "w": 1.0}


@pytest.fixture(scope="module")
def fourbar():
    return mbdgen.compile(TEST_MODELS / "fourbar_gc.py", TEST_GENERATED)


def fourbar_closed_form(th1, w, r1, r2, r3, r0, branch):
    """Triangle solution of A + r1 e(th1) + r2 e(th2) = D + r3 e(th3), D = (r0, 0).

    With B = r1 e(th1) and s = |B − D|, the law of cosines in triangle B, C, D gives
    the angle ψ at D between DB and DC: cos ψ = (r3² + s² − r2²) / (2 r3 s), so
    th3 = arg(B − D) + branch·ψ and th2 = arg(C − B) with C = D + r3 e(th3).

    Velocities and accelerations from the complex loop r1 e^{iθ1} + r2 e^{iθ2} −
    r3 e^{iθ3} = r0 differentiated once and twice (θ̈1 = 0), each multiplied by
    e^{−iθ3} or e^{−iθ2} and its imaginary part taken:
    ω2 = r1 ω1 sin(θ3 − θ1) / (r2 sin(θ2 − θ3)),  ω3 = r1 ω1 sin(θ1 − θ2) / (r3 sin(θ3 − θ2)),
    r2 α2 e2 − r3 α3 e3 = −i R,  R = r1 ω1² e1 + r2 ω2² e2 − r3 ω3² e3.
    """
    b = r1 * np.exp(1j * th1)
    s = np.abs(b - r0)
    psi = np.arccos((r3**2 + s**2 - r2**2) / (2 * r3 * s))
    th3 = np.angle(b - r0) + branch * psi
    c = r0 + r3 * np.exp(1j * th3)
    th2 = np.angle(c - b)
    w2 = r1 * w * np.sin(th3 - th1) / (r2 * np.sin(th2 - th3))
    w3 = r1 * w * np.sin(th1 - th2) / (r3 * np.sin(th3 - th2))
    e1, e2, e3 = np.exp(1j * th1), np.exp(1j * th2), np.exp(1j * th3)
    rr = -1j * (r1 * w**2 * e1 + r2 * w2**2 * e2 - r3 * w3**2 * e3)
    a2 = (rr * np.exp(-1j * th3)).imag / (r2 * np.sin(th2 - th3))
    a3 = -(rr * np.exp(-1j * th2)).imag / (r3 * np.sin(th3 - th2))
    return th2, th3, w2, w3, a2, a3


def _angle_error(a, b):
    return np.abs(np.angle(np.exp(1j * (a - b)))).max()


def test_fourbar_matches_the_triangle_solution(fourbar):
    """One full crank turn (ω = 2 rad/s, 320 steps): q to 1e-10, q̇ and q̈ to 1e-9
    of the closed form (measured 7e-13, 4e-13, 2e-12)."""
    r = kinematics(fourbar, 3.2, 0.01)
    assert r.q.shape == (321, 3) and r.counters["steps"] == 320
    r1, r2, r3, r0, w, _ = fourbar.P_DEFAULT
    th1 = w * r.t
    np.testing.assert_allclose(r.q[:, 0], th1, atol=1e-12)
    # the assembly mode of the model's q0: th3 = 2 lies below arg(B − D) = π at t = 0
    branch = -1.0
    th2, th3, w2, w3, a2, a3 = fourbar_closed_form(th1, w, r1, r2, r3, r0, branch)
    assert _angle_error(r.q[:, 1], th2) < 1e-10
    assert _angle_error(r.q[:, 2], th3) < 1e-10
    np.testing.assert_allclose(r.qd[:, 1:], np.column_stack([w2, w3]), atol=1e-9, rtol=0)
    np.testing.assert_allclose(r.qdd[:, 1:], np.column_stack([a2, a3]), atol=1e-9, rtol=0)
    np.testing.assert_allclose(r.qd[:, 0], w, atol=1e-12)
    assert r.phi_norm.max() < 1e-11 and r.phid_norm.max() < 1e-11
    assert r.lam.shape == (321, 0) and r.ok


def test_steps_and_h_give_the_same_grid(fourbar):
    a = kinematics(fourbar, 1.0, 0.1)
    b = kinematics(fourbar, 1.0, steps=10)
    np.testing.assert_array_equal(a.t, b.t)
    np.testing.assert_allclose(a.q, b.q, atol=1e-14)
    with pytest.raises(MbdgenError, match="not both"):
        kinematics(fourbar, 1.0, 0.1, steps=10)


def test_toggle_position_is_reported_with_its_time(fourbar):
    """The locking linkage reaches s = |B − D| = r2 + r3 at cos θ1* = (r1² + r0² −
    (r2 + r3)²) / (2 r1 r0) = 1/16: the error names t* to 1e-8 (measured 4e-10) and
    keeps the 151 output times before it."""
    t_star = np.arccos((2.0**2 + 3.0**2 - 3.5**2) / (2 * 2.0 * 3.0))
    with pytest.raises(SingularConfigurationError, match="singular configuration") as info:
        kinematics(fourbar, 2.0, 0.01, params=LOCKING)
    err = info.value
    assert err.t == pytest.approx(t_star, abs=1e-8)
    assert err.condition > 1e4
    assert f"t = {err.t:.10g}" in str(err) and "condition number" in str(err)
    assert len(err.result) == 151 and err.result.t[-1] == pytest.approx(1.5)
    assert err.result.info["status"] == "singular"


def test_ill_conditioning_threshold(fourbar):
    """With a loose singular_tol the growing condition number stops the run first."""
    with pytest.raises(SingularConfigurationError, match="σ_min/σ_max") as info:
        kinematics(fourbar, 2.0, 0.01, params=LOCKING, singular_tol=1e-2)
    assert info.value.condition > 100 and info.value.t < 1.5083


def test_underdetermined_model_is_refused():
    """A free pendulum (n = 3, two joint rows) has one degree of freedom left."""
    module = mbdgen.compile(TEST_MODELS / "spring_pendulum.py", TEST_GENERATED)
    with pytest.raises(MbdgenError, match="not kinematically determined.*1 degree"):
        kinematics(module, 1.0, 0.1)


def test_cli_kinematics(tmp_path, fourbar):
    runner = CliRunner()
    npz, csv = tmp_path / "k.npz", tmp_path / "k.csv"
    args = ["kinematics", str(TEST_MODELS / "fourbar_gc.py"), "--out-dir", str(TEST_GENERATED)]
    res = runner.invoke(main, [*args, "--t-end", "1", "--h", "0.1", "-o", str(npz)])
    assert res.exit_code == 0, res.output
    assert "10 steps of h=0.1" in res.output and "th3" in res.output
    saved = mbdgen.load(npz)
    assert saved.q.shape == (11, 3)
    res = runner.invoke(main, [*args, "--steps", "20", "-p", "w=1", "-o", str(csv)])
    assert res.exit_code == 0, res.output
    table = np.genfromtxt(csv, delimiter=",", names=True)
    assert table.shape == (21,) and table["th1"][-1] == pytest.approx(1.0)
    locking = [f"-p{k}={v}" for k, v in LOCKING.items()]
    res = runner.invoke(main, [*args, "--t-end", "2", *locking, "-o", str(npz)])
    assert res.exit_code == 1 and "error: singular configuration" in res.output
    assert "at t = 1.50825556" in res.output and len(mbdgen.load(npz)) == 76  # h = 0.02
    spring = ["kinematics", str(TEST_MODELS / "spring_pendulum.py"), "--out-dir"]
    res = runner.invoke(main, [*spring, str(TEST_GENERATED)])
    assert res.exit_code == 1 and "not kinematically determined" in res.output


def test_planar_body_fourbar_matches_the_triangle_solution():
    """The example ``models/fourbar.py`` (planar bodies, four revolutes, an angle
    driver; element kernels): body angles φ_coupler, φ_rocker and their rates against
    the closed form, over one crank turn (ω = 2 rad/s), q to 1e-10, q̇ and q̈ to 1e-9."""
    from conftest import GENERATED, MODELS

    module = mbdgen.compile(MODELS / "fourbar.py", GENERATED, recompile=False)
    r = kinematics(module, 3.2, 0.01)
    names = list(module.COORDINATE_NAMES)
    w = 2.0
    th1 = w * r.t
    th2, th3, w2, w3, a2, a3 = fourbar_closed_form(th1, w, 1.0, 3.0, 2.5, 3.0, -1.0)
    cols = [names.index("coupler_phi"), names.index("rocker_phi")]
    assert _angle_error(r.q[:, names.index("crank_phi")], th1) < 1e-12
    assert _angle_error(r.q[:, cols[0]], th2) < 1e-10
    assert _angle_error(r.q[:, cols[1]], th3) < 1e-10
    np.testing.assert_allclose(r.qd[:, cols], np.column_stack([w2, w3]), atol=1e-9, rtol=0)
    np.testing.assert_allclose(r.qdd[:, cols], np.column_stack([a2, a3]), atol=1e-9, rtol=0)
