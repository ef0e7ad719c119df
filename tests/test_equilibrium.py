"""Equilibrium analysis (Haug 1989 §7.5, Eqs. 7.5.14-7.5.24; dynamic settling §7.1)."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import GENERATED, TEST_GENERATED, TEST_MODELS
from scipy.optimize import brentq

import mbdgen
from mbdgen.analysis import equilibrium
from mbdgen.cli import main
from mbdgen.compiler import import_generated
from mbdgen.errors import MbdgenError


@pytest.fixture(scope="module")
def spring_pendulum():
    return mbdgen.compile(TEST_MODELS / "spring_pendulum.py", TEST_GENERATED)


@pytest.fixture(scope="module")
def double_pendulum():
    return import_generated(GENERATED / "double_pendulum.py")


def _spring_reference(module):
    """k (φ_s − φ) = m g l sin φ: the spring torque balances gravity's about the pivot."""
    m, _, l, g, k, phis, _ = module.P_DEFAULT
    phi = brentq(lambda f: k * (phis - f) - m * g * l * np.sin(f), 0.0, phis, xtol=1e-15)
    return phi, np.array([l * np.sin(phi), -l * np.cos(phi), phi])


def test_pendulum_with_torsional_spring(spring_pendulum):
    """Minimization in v = φ (the pivot coordinates x, y dependent): φ to 1e-10
    (measured 3e-12), the reduced gradient below 1e-10 · ‖Q‖ and λ = the pivot
    reaction, Φ_qᵀλ = Q: λ = (0, −m g)."""
    phi, q_ref = _spring_reference(spring_pendulum)
    e = equilibrium(spring_pendulum)
    assert e.independent == ("phi",) and e.method == "minimize"
    np.testing.assert_allclose(e.q, q_ref, atol=1e-10)
    assert e.coordinate("phi") == pytest.approx(phi, abs=1e-10)
    assert e.residual < 1e-9 and e.phi_norm < 1e-12 and e.iterations < 20
    m, g = spring_pendulum.P_DEFAULT[0], spring_pendulum.P_DEFAULT[3]
    np.testing.assert_allclose(e.lam, [0.0, -m * g], atol=1e-9)


def test_settling_agrees_with_minimization(spring_pendulum):
    """Damped settling (c = 2/s added to the model's own damper) ends at the same
    equilibrium to 1e-8 (measured 6e-11)."""
    phi, q_ref = _spring_reference(spring_pendulum)
    e = equilibrium(spring_pendulum, method="settle", damping=2.0)
    np.testing.assert_allclose(e.q, q_ref, atol=1e-8)
    assert e.settle_time > 1.0 and e.residual < 1e-7


def test_double_pendulum_hangs_along_gravity(double_pendulum):
    """g acts along +x (models/double_pendulum.py), so both links hang along +x:
    θ1 = θ2 = π/2, centroids at (2.5, 0) and (7.5, 0), and the joint reactions carry
    the weights, λ = (2 m g, 0, m g, 0).  Minimization to 1e-10 (measured 3e-12,
    re-partitioning on the way: x1, x2 independent at q0 cannot pass θ = π/2);
    settling from q0 to 1e-8 (measured 2e-10)."""
    q_ref = np.array([2.5, 0.0, np.pi / 2, 7.5, 0.0, np.pi / 2])
    m, _, g = double_pendulum.P_DEFAULT
    e = equilibrium(double_pendulum)
    np.testing.assert_allclose(e.q, q_ref, atol=1e-10)
    np.testing.assert_allclose(e.lam, [2 * m * g, 0.0, m * g, 0.0], atol=1e-9)
    s = equilibrium(double_pendulum, method="settle", damping=2.0)
    np.testing.assert_allclose(s.q, q_ref, atol=1e-8)


def test_errors(spring_pendulum):
    with pytest.raises(MbdgenError, match="unknown equilibrium method 'newton'"):
        equilibrium(spring_pendulum, method="newton")
    with pytest.raises(MbdgenError, match="did not converge in 1 iterations"):
        equilibrium(spring_pendulum, max_iterations=1)


def test_cli_equilibrium(spring_pendulum):
    phi, _ = _spring_reference(spring_pendulum)
    runner = CliRunner()
    args = ["equilibrium", str(TEST_MODELS / "spring_pendulum.py"), "--out-dir"]
    args.append(str(TEST_GENERATED))
    res = runner.invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "equilibrium by minimize" in res.output and f"{phi:.10g}"[:10] in res.output
    res = runner.invoke(main, [*args, "--method", "settle", "--damping", "2", "-p", "k=6"])
    assert res.exit_code == 0, res.output
    assert "settled in" in res.output and "\nλ " in res.output and "unit unknown" in res.output
    res = runner.invoke(main, [*args, "-p", "mass=2"])
    assert res.exit_code == 1 and "has no parameter 'mass'" in res.output


def test_a_line_search_that_leaves_its_partition_repartitions():
    """A point mass on a circle from a horizontal start (models/circle.py, x² + y² = 1):
    with y independent, the line down to y = −1 ends where x's row turns singular; the
    search re-partitions (x independent) and finds the bottom.  It failed with "the
    line search found no descent" before."""
    module = import_generated(GENERATED / "circle.py")
    e = equilibrium(module)
    assert e.q == pytest.approx([0.0, -1.0], abs=1e-12) and e.residual < 1e-12
    assert e.independent == ("x",)
