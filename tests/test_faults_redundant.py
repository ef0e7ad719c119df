"""Redundant but consistent constraints (issue 9, item 8): the integrators run them.

The redundant rows that :func:`mbdgen.analysis.assembly.redundant_rows` finds at t0
are left out (λ = 0 there, reported by name and as not unique); GCP and the hybrid
algorithm refuse such mechanisms; an inconsistent redundant q0 is an error naming
the rows.  Models: Bricard's mechanism (IFToMM A04, ``tests/models/bricard.py``) and a
parallelogram four-bar with a third parallel crank (``double_parallelogram.py``).
"""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import TEST_GENERATED, TEST_MODELS

import mbdgen
from mbdgen.analysis.assembly import assemble, removable_rows
from mbdgen.cli import main
from mbdgen.errors import MbdgenError
from mbdgen.simulation import parameter_vector

PARALLELOGRAM_JOINTS = ["A0", "B0", "C0", "A1", "B1", "C1"]
BRICARD_JOINTS = ["J1", "J2", "J3", "J4", "J5", "J6"]


@pytest.fixture(scope="module")
def parallelogram():
    return mbdgen.compile(TEST_MODELS / "double_parallelogram.py", TEST_GENERATED)


@pytest.fixture(scope="module")
def bricard():
    return mbdgen.compile(TEST_MODELS / "bricard.py", TEST_GENERATED)


def _energy_drift(result) -> float:
    e = result.energy.sum(axis=1)
    return float(np.abs(e - e[0]).max())


def _equation_of_motion_residual(module, result, rows) -> float:
    """max ‖M q̈ + Φ_qᵀ λ − Q‖∞ over output ``rows``: the reported λ (0 on the removed
    rows) is a valid set of multipliers for the motion."""
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    p = parameter_vector(module, None)
    worst = 0.0
    for k in rows:
        t, q, qd = result.t[k], result.q[k], result.qd[k]
        mass, force, phi_q = np.zeros((n, n)), np.zeros(n), np.zeros((m, n))
        module.mass(t, q, p, mass)
        module.force(t, q, qd, p, force)
        module.phi_q(t, q, p, phi_q)
        r = mass @ result.qdd[k] + phi_q.T @ result.lam[k] - force
        worst = max(worst, float(np.abs(r).max()))
    return worst


def test_redundant_rows_are_found_at_t0(parallelogram, bricard):
    """Grübler's count says 0 degrees of freedom for both; each keeps one, with one
    redundant row: the last joint's (rows depend on the earlier ones)."""
    a = assemble(parallelogram)
    assert (a.dof, a.rank, a.redundant_names) == (1, 11, ["C1[1]"])
    b = assemble(bricard)
    assert (bricard.N_COORDINATES, bricard.N_CONSTRAINTS) == (35, 35)
    assert (b.dof, b.rank, b.redundant_names) == (1, 34, ["J6[4]"])
    removed = removable_rows(bricard, 0.0, b.q, parameter_vector(bricard, None))
    assert removed.names == ("J6[4]",) and removed.active.sum() == 34
    # the rods' Euler-parameter normalizations take part, but carry no joint reaction
    assert list(removed.not_unique) == BRICARD_JOINTS


# (method, options, energy drift bound [J], ‖Φ‖ bound) over 2 s; measured drifts:
# abm 6e-12, Baumgarte 2e-11, vabm 9e-8, rk4 4e-11, welch2 1.9e-5 (second order in h).
PARALLELOGRAM_RUNS = [
    ("abm", {"h": 1e-3}, 1e-9, 1e-10),
    ("abm", {"h": 1e-3, "alpha": 10.0, "beta": 10.0}, 1e-9, 1e-10),
    ("rk4", {"h": 1e-3}, 1e-9, 1e-10),
    ("vabm", {"h": 1e-2, "rtol": 1e-8, "atol": 1e-8}, 1e-6, 1e-7),
    ("welch2", {"h": 1e-3}, 1e-4, 1e-7),
]


@pytest.mark.parametrize(
    ("method", "options", "energy_tol", "phi_tol"),
    PARALLELOGRAM_RUNS,
    ids=["abm", "abm-baumgarte", "rk4", "vabm", "welch2"],
)
def test_parallelogram_runs_with_the_redundant_row_removed(
    parallelogram, method, options, energy_tol, phi_tol
):
    r = mbdgen.simulate(parallelogram, method, t_end=2.0, **options)
    assert r.ok and r.t[-1] == pytest.approx(2.0)
    assert r.info["removed_constraints"] == ["C1[1]"]
    assert r.info["lambda_not_unique"] == PARALLELOGRAM_JOINTS
    assert r.counters["removed_constraints"] == 1
    assert "redundant constraint row(s) removed at t0: C1[1]" in r.info["message"]
    row = list(parallelogram.CONSTRAINT_NAMES).index("C1[1]")
    assert np.all(r.lam[:, row] == 0.0)
    # the removed row is still measured: ‖Φ‖ is over all rows, and it stays small
    assert r.phi_norm.max() < phi_tol
    assert _energy_drift(r) < energy_tol
    theta = r.q[:, 2]
    assert np.ptp(theta) > 1.0  # it swung (0.6 rad either side)
    if method != "welch2":  # Welch's λ is that of its own discrete scheme
        assert _equation_of_motion_residual(parallelogram, r, range(0, len(r), 250)) < 1e-8


@pytest.mark.parametrize(
    ("method", "options", "energy_tol", "phi_tol"),
    [
        ("abm", {"h": 1e-3}, 1e-8, 1e-9),
        ("vabm", {"h": 1e-2, "rtol": 1e-9, "atol": 1e-9}, 1e-5, 1e-6),
        ("welch2", {"h": 1e-3}, 0.1, 1e-6),
    ],
    ids=["abm", "vabm", "welch2"],
)
def test_bricard_mechanism_runs_to_its_end(bricard, method, options, energy_tol, phi_tol):
    """IFToMM A04 from rest under gravity for 2 s (10 s, abm h = 1e-3: energy drift
    6e-10 J, max ‖Φ‖ 2e-10; vabm rtol = atol = 1e-9: 6e-7 J, 1e-7).  Welch's scheme
    with Euler parameters drifts in energy to first order in h, as it does on the
    non-redundant ``welch_pendulum3d`` (0.86 J in 1 s at h = 1e-3 there)."""
    r = mbdgen.simulate(bricard, method, t_end=2.0, **options)
    assert r.ok and r.t[-1] == pytest.approx(2.0)
    assert r.info["removed_constraints"] == ["J6[4]"]
    assert r.info["lambda_not_unique"] == BRICARD_JOINTS
    assert r.phi_norm.max() < phi_tol
    assert _energy_drift(r) < energy_tol
    assert np.ptp(r.q, axis=0).max() > 1.0  # the mechanism moved through its one DOF
    reactions = r.reactions  # derived from λ (0 on J6[4]): a valid particular solution
    assert np.isfinite(reactions).all()
    if method == "abm":
        assert _equation_of_motion_residual(bricard, r, range(0, len(r), 500)) < 1e-8


@pytest.mark.parametrize("constraints", ["gcp", "hybrid"])
def test_partitioning_refuses_redundant_mechanisms(parallelogram, constraints):
    gains = {"alpha": 5.0, "beta": 5.0} if constraints == "hybrid" else {}
    with pytest.raises(MbdgenError, match=r"redundant constraints \(C1\[1\] depend") as info:
        mbdgen.simulate(parallelogram, "abm", h=1e-3, t_end=0.1, constraints=constraints, **gains)
    assert "use 'direct' or 'baumgarte'" in str(info.value)


def test_unassembled_redundant_q0_is_an_error_until_assembled(parallelogram):
    q0 = np.array(parallelogram.Q0, dtype=float)
    q0[9] += 1e-3  # the coupler's x: all six joints' rows stay, Φ ≠ 0
    with pytest.raises(MbdgenError, match=r"C1\[1\].*not satisfied at q0.*--assemble"):
        mbdgen.simulate(parallelogram, "abm", h=1e-3, t_end=0.1, q0=q0)
    r = mbdgen.simulate(parallelogram, "abm", h=1e-3, t_end=0.1, q0=q0, assemble=True)
    assert r.ok and r.info["removed_constraints"] == ["C1[1]"] and r.phi_norm.max() < 1e-10


def _generalized(tmp_path, name, constraints, q0="[1, 0, 0]"):
    path = tmp_path / f"{name}.py"
    path.write_text(
        "import sympy as sp\n"
        "from mbdgen.model import Model\n"
        "x, y, th = sp.symbols('x y th')\n"
        f"model = Model(name={name!r}, coordinates=[x, y, th], mass=sp.eye(3),\n"
        f"    force=[0, -9.81, 0], constraints={constraints}, q0={q0})\n"
    )
    return mbdgen.compile(path, tmp_path / "gen")


def test_generalized_coordinate_model_with_a_repeated_row(tmp_path):
    """Φ = [x − cos θ, 2x − 2cos θ] used to stop with SINGULAR at t0; now the second
    row is left out and named by its label."""
    module = _generalized(tmp_path, "repeated", "[x - sp.cos(th), 2 * x - 2 * sp.cos(th)]")
    r = mbdgen.simulate(module, h=0.01, t_end=1.0)
    assert r.ok and r.info["removed_constraints"] == ["phi[1]"]
    assert r.info["lambda_not_unique"] == ["phi[0]", "phi[1]"]
    assert np.all(r.lam[:, 1] == 0.0) and r.phi_norm.max() < 1e-12
    assert r.q[-1, 1] == pytest.approx(-9.81 / 2, rel=1e-9)  # y falls freely


def test_contradictory_redundant_rows_are_an_error(tmp_path):
    module = _generalized(tmp_path, "contradictory", "[x - sp.cos(th), x - sp.cos(th) - 0.1]")
    with pytest.raises(MbdgenError, match=r"phi\[1\].*not satisfied at q0.*--assemble"):
        mbdgen.simulate(module, h=0.01, t_end=1.0)
    with pytest.raises(MbdgenError, match="inconsistent"):
        mbdgen.simulate(module, h=0.01, t_end=1.0, assemble=True)


def test_non_redundant_models_remove_nothing(parallelogram):
    """The row weights stay 1.0, which leaves the arithmetic bit for bit unchanged
    (the published tables of test_adams.py and test_dynamics.py check the numbers)."""
    pendulum = mbdgen.compile(TEST_MODELS / "spring_pendulum.py", TEST_GENERATED)
    r = mbdgen.simulate(pendulum, h=1e-3, t_end=0.1)
    assert r.info["removed_constraints"] == [] and r.info["lambda_not_unique"] == []
    assert r.counters["removed_constraints"] == 0 and r.info["message"] == "finished"


def test_cli_simulate_names_the_removed_rows():
    args = ["simulate", TEST_MODELS / "double_parallelogram.py", "--out-dir", TEST_GENERATED]
    args += ["--h", "1e-3", "--t-end", "0.1", "--no-progress"]
    res = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "redundant constraint row(s) C1[1] were left out" in res.output
