"""Assembly analysis (Haug 1989 §7.2, Eqs. 7.2.1-7.2.5): consistent initial conditions."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import MODELS

import mbdgen
from mbdgen.analysis.assembly import assemble, redundant_rows
from mbdgen.cli import main
from mbdgen.errors import MbdgenError


def _check_consistent(module, a, tol=1e-12):
    p = module.P_DEFAULT
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    phi, jac, nu, gamma = np.zeros(m), np.zeros((m, n)), np.zeros(m), np.zeros(m)
    module.phi(a.t0, a.q, p, phi)
    module.phi_q(a.t0, a.q, p, jac)
    module.nu(a.t0, a.q, p, nu)
    module.gamma(a.t0, a.q, a.qd, p, gamma)
    assert np.abs(phi).max() <= tol
    np.testing.assert_allclose(jac @ a.qd, nu, atol=1e-12)
    np.testing.assert_allclose(jac @ a.qdd, gamma, atol=1e-10)


def test_slider_crank_from_its_printed_initial_state(slider_crank):
    """Eq. 75 (four digits, ‖Φ‖ = 4e-5) assembled holding θ0 = 0.9851: one degree of
    freedom, Φ = 0 to 1e-12 in two Newton iterations, q̈ and λ from Eq. 7.2.1."""
    a = assemble(slider_crank, hold=["theta"])
    assert (a.dof, a.rank, a.redundant) == (1, 3, [])
    assert a.q[0] == 0.9851 and a.iterations <= 3
    assert a.q[1:] == pytest.approx([-0.52359465, 0.42564218, 0.09999928], abs=1e-8)
    _check_consistent(slider_crank, a)
    # the same start through simulate(assemble=...)
    r = mbdgen.simulate(slider_crank, "abm", 4, 1e-3, 0.001, assemble=["theta"], newton_tol=1e-12)
    np.testing.assert_array_equal(r.q[0], a.q)


@pytest.mark.parametrize("seed", range(5))
def test_assembly_converges_from_perturbed_starts(slider_crank, pendulum, seed):
    rng = np.random.default_rng(seed)
    for module, hold in ((slider_crank, ["theta"]), (pendulum, ["phi1"])):
        q0 = module.Q0 + rng.uniform(-0.1, 0.1, module.N_COORDINATES)
        qd0 = rng.uniform(-1, 1, module.N_COORDINATES)
        a = assemble(module, q0=q0, qd0=qd0, hold=hold)
        _check_consistent(module, a)
        i = list(module.COORDINATE_NAMES).index(hold[0])
        assert (a.q[i], a.qd[i]) == (q0[i], qd0[i])


def _write(tmp_path, name, constraints):
    path = tmp_path / f"{name}.py"
    path.write_text(
        "import sympy as sp\n"
        "from mbdgen.model import Model\n"
        "x, y, th = sp.symbols('x y th')\n"
        f"model = Model(name='{name}', coordinates=[x, y, th], mass=sp.eye(3),\n"
        f"    force=[0, -9.81, 0], constraints={constraints}, q0=[0.9, 0.1, 0.0])\n"
    )
    return mbdgen.compile(path, tmp_path / "gen")


def test_redundant_constraints_are_named(tmp_path):
    module = _write(tmp_path, "redundant", "[x - sp.cos(th), y - sp.sin(th), 2*x - 2*sp.cos(th)]")
    a = assemble(module)
    assert a.redundant == [2] and a.rank == 2 and a.dof == 1
    assert redundant_rows(np.array([[1.0, 0.0], [0.0, 1.0]])) == (2, [])


def test_inconsistent_constraints_are_refused_with_the_residual(tmp_path):
    module = _write(tmp_path, "inconsistent", "[x - 1, x - 2]")
    with pytest.raises(MbdgenError, match=r"inconsistent.*|‖Φ‖ = 7\.07"):
        assemble(module)
    with pytest.raises(MbdgenError, match="cannot hold 'z'"):
        assemble(module, hold=["z"])


def test_cli_assemble(tmp_path):
    res = CliRunner().invoke(main, ["assemble", str(MODELS / "slider_crank.py"), "--hold", "theta"])
    assert res.exit_code == 0, res.output
    assert "degrees of freedom 1 (rank Φ_q = 3)" in res.output
    assert "-0.5235946459" in res.output
