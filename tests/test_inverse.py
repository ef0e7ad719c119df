"""Inverse dynamics (Haug 1989 §6.6, §7.1): a bar driven along a quadratic angle."""

from __future__ import annotations

import re

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import TEST_GENERATED, TEST_MODELS

import mbdgen
from mbdgen.analysis import constraint_labels, inverse_dynamics, kinematics
from mbdgen.cli import main
from mbdgen.errors import MbdgenError


@pytest.fixture(scope="module")
def driven_pendulum():
    return mbdgen.compile(TEST_MODELS / "driven_pendulum.py", TEST_GENERATED)


def test_driving_torque_and_pivot_forces_of_a_driven_bar(driven_pendulum):
    """Bar of mass m, centroidal inertia J, centroid at distance l from the pivot at
    angle φ(t) = φ0 + w t + α t²/2 from the horizontal, gravity −g ŷ.

    Moments about the fixed pivot: (J + m l²) φ̈ = τ − m g l cos φ, so the driving
    torque is τ = (J + m l²) α + m g l cos φ.  The centroid x = l cos φ, y = l sin φ
    has ẍ = −l (sin φ φ̈ + cos φ φ̇²), ÿ = l (cos φ φ̈ − sin φ φ̇²), so the pivot force
    on the bar is F = (m ẍ, m ÿ + m g).  In mbdgen's M q̈ + Φ_qᵀλ = Q the driver row
    φ − f(t) has Φ_q = e_φ: τ = −λ₃, and the joint rows' reactions −Φ_qᵀλ are F on
    (x, y) and r × F on φ.  All to 1e-10 (measured 3e-14, 1e-13).
    """
    r = inverse_dynamics(driven_pendulum, 2.0, 0.01)
    m, J, l, g, phi0, w, alpha = driven_pendulum.P_DEFAULT
    t = r.t
    phi = phi0 + w * t + alpha * t**2 / 2
    phid = w + alpha * t
    tau = (J + m * l * l) * alpha + m * g * l * np.cos(phi)
    labels = constraint_labels(driven_pendulum)  # CONSTRAINT_NAMES, or phi[i]
    assert r.drivers == (2,) and r.constraint_names == labels and len(labels) == 3
    np.testing.assert_allclose(r.driving[:, 0], tau, atol=1e-10, rtol=0)
    np.testing.assert_allclose(r.driving_force(labels[2]), tau, atol=1e-10, rtol=0)
    xdd = -l * (np.sin(phi) * alpha + np.cos(phi) * phid**2)
    ydd = l * (np.cos(phi) * alpha - np.sin(phi) * phid**2)
    fx, fy = m * xdd, m * ydd + m * g
    np.testing.assert_allclose(r.reaction[:, 0, 0], fx, atol=1e-10, rtol=0)
    np.testing.assert_allclose(r.reaction[:, 1, 1], fy, atol=1e-10, rtol=0)
    # the joint's reaction torque on φ: moment of F at the pivot about the centroid
    moment = -l * np.cos(phi) * fy + l * np.sin(phi) * fx
    joint_torque = r.reaction[:, 0, 2] + r.reaction[:, 1, 2]
    np.testing.assert_allclose(joint_torque, moment, atol=1e-10, rtol=0)
    np.testing.assert_allclose(r.reaction[:, 2, 2], tau, atol=1e-10, rtol=0)
    assert r.residual.max() < 1e-12
    np.testing.assert_array_equal(r.kinematics.lam, r.lam)


def test_named_drivers_and_a_given_kinematic_solution(driven_pendulum):
    k = kinematics(driven_pendulum, 1.0, steps=10)
    first = constraint_labels(driven_pendulum)[0]
    r = inverse_dynamics(driven_pendulum, kinematic_result=k, drivers=[first, 1])
    assert r.drivers == (0, 1) and r.driving.shape == (11, 2)
    with pytest.raises(MbdgenError, match="no constraint 'hinge'"):
        inverse_dynamics(driven_pendulum, kinematic_result=k, drivers=["hinge"])


def test_save_and_cli_inverse(tmp_path, driven_pendulum):
    r = inverse_dynamics(driven_pendulum, 1.0, steps=10)
    table = np.genfromtxt(r.save(tmp_path / "r.csv"), delimiter=",", names=True)
    column = "drive_" + re.sub(r"\W+", "_", r.constraint_names[2]).strip("_")
    np.testing.assert_allclose(table[column], r.driving[:, 0])
    with np.load(r.save(tmp_path / "r.npz")) as data:
        assert data["reaction"].shape == (11, 3, 3)
    runner = CliRunner()
    out = tmp_path / "cli.npz"
    args = ["inverse", str(TEST_MODELS / "driven_pendulum.py"), "--out-dir", str(TEST_GENERATED)]
    res = runner.invoke(main, [*args, "--t-end", "1", "--steps", "10", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "driving forces" in res.output and r.constraint_names[2] in res.output
    assert f"{r.driving[-1, 0]:.10g}" in res.output
    with np.load(out) as data:
        np.testing.assert_allclose(data["driving"], r.driving)
    res = runner.invoke(main, [*args, "--driver", "hinge"])
    assert res.exit_code == 1 and "error: no constraint 'hinge'" in res.output
