"""The baseline of ``mbdgen bench --chain`` integrates the mechanism mbdgen integrates.

The hand-written O(N) RK4 of :mod:`mbdgen.bench_chain` (minimal coordinates, a
block-tridiagonal solve for the joint forces) against mbdgen's compiled
``models/planar_chain.py`` (absolute coordinates, index-1 augmented system), against
energy conservation, and its Richardson reference against SciPy's DOP853.  Timings
are the benchmark's business, not asserted here.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from conftest import GENERATED

from mbdgen import bench_chain as bc
from mbdgen.compiler import import_generated


def _energy(theta: np.ndarray, omega: np.ndarray) -> float:
    """T + V of the rod chain in absolute coordinates, from its geometry alone."""
    l = bc.LENGTH / 2
    joint = np.zeros(2)
    joint_v = np.zeros(2)
    total = 0.0
    for th, om in zip(theta, omega, strict=True):
        u = np.array([math.cos(th), math.sin(th)])
        n = np.array([-math.sin(th), math.cos(th)])
        centre = joint + l * u
        v = joint_v + l * om * n
        total += 0.5 * bc.MASS * v @ v + 0.5 * bc.INERTIA * om * om
        total += bc.MASS * bc.GRAVITY * centre[1]
        joint = joint + bc.LENGTH * u
        joint_v = joint_v + bc.LENGTH * om * n
    return total


def test_baseline_matches_mbdgen_planar_chain():
    # The committed 8-link module run as tests/test_examples.py runs it (ABM 4 PECE,
    # Baumgarte α = β = 10, h = 1e-3: the same compiled entry point, no new JIT), over
    # 0.1 s; the baseline is RK4 on the 8 angles at h = 1e-3.  Baumgarte's terms vanish
    # on the exact solution and both integrators are within ~1e-11 of it at this step
    # (measured difference 4e-13 in θ, 6e-11 in θ̇), so 1e-9 checks the mechanism.
    import mbdgen

    module = import_generated(GENERATED / "planar_chain.py")
    assert module.N_COORDINATES == 3 * 8
    result = mbdgen.simulate(module, "abm", 4, 1e-3, 0.1, alpha=10, beta=10)
    theta, omega = bc.handwritten_chain(8, 1e-3, 0.1)
    assert abs(result.t[-1] - 0.1) < 1e-12
    np.testing.assert_allclose(bc.planar_angles(result), theta, rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.asarray(result.qd[-1])[2::3], omega, rtol=0, atol=1e-9)
    assert np.max(np.abs(theta)) > 1e-3  # it moved


def test_single_rod_is_the_compound_pendulum():
    # θ̈ = −m g l cos θ / (J + m l²) for one rod pinned at its end (at rest).
    acc = np.zeros(1)
    work = np.zeros((1, 8))
    for th in (0.0, 0.7, -2.0):
        bc._chain_accelerations(
            np.array([th]), np.zeros(1), bc.LENGTH, bc.MASS, bc.INERTIA, bc.GRAVITY, acc, work
        )
        l = bc.LENGTH / 2
        exact = -bc.MASS * bc.GRAVITY * l * math.cos(th) / (bc.INERTIA + bc.MASS * l * l)
        assert acc[0] == pytest.approx(exact, rel=1e-14)


def test_baseline_conserves_energy():
    # RK4 at h = 1e-3 over 1 s on a 3-link chain: the energy error is the integration
    # error, O(h⁴) ≈ 1e-9 relative to the energy exchanged (|V| ~ 40 J); 1e-7 J bounds it
    # (a wrong sign or factor in the O(N) solve breaks it by orders of magnitude).
    theta, omega = bc.handwritten_chain(3, 1e-3, 1.0)
    assert np.max(np.abs(omega)) > 1.0
    assert abs(_energy(theta, omega) - _energy(np.zeros(3), np.zeros(3))) < 1e-7


def test_reference_agrees_with_dop853():
    # Richardson-extrapolated RK4 against SciPy's DOP853 at rtol = atol = 1e-13 on a
    # 3-link chain over 0.5 s: both ≲ 1e-11 from the exact solution; 1e-9 is the
    # reference's accuracy the bench relies on (1000 times below the target 1e-6).
    ref = bc.reference_angles(3, 0.5)
    assert ref["estimate"] < 1e-9
    np.testing.assert_allclose(ref["theta"], bc.scipy_reference(3, 0.5), rtol=0, atol=1e-9)


def test_largest_step_finds_the_fewest_steps_within_ten_percent():
    # A synthetic error e(n) = 3 (100/n)^4 (RK4-like): e ≤ 1e-6 from n ≥ 100·3e6^(1/4).
    reference = np.zeros(2)
    exact_n = 100 * (3e6) ** 0.25

    def run(n: int) -> np.ndarray:
        return np.array([3.0 * (100.0 / n) ** 4, 0.0])

    for start in (50, 4000, 100000):
        found = bc.largest_step(run, reference, start)
        assert exact_n <= found["n"] <= 1.1 * exact_n + 1
        assert found["error"] <= bc.TARGET_ERROR


def test_largest_step_reports_failure_within_budget():
    found = bc.largest_step(lambda n: np.array([math.nan]), np.zeros(1), 10, n_max=1000)
    assert found["n"] is None and found["tried"]


def test_loosest_tolerance_bisects_the_grid_bracket():
    """A synthetic error e(tol) = 25 tol: the grid's first pass is 3e-8 after 1e-7
    failed; bisection finds a tolerance within TOLERANCE_RESOLUTION of the exact
    4e-8, never one that misses the target; without a failing bracket (the loosest
    grid value passes) nothing is bisected."""
    reference = np.zeros(1)
    found = bc.loosest_tolerance(lambda tol: np.array([25.0 * tol]), reference)
    assert 4e-8 / bc.TOLERANCE_RESOLUTION <= found["tol"] <= 4e-8
    assert found["error"] <= bc.TARGET_ERROR
    assert all(tol < 1e-7 for tol, err, _ in found["tried"] if err <= bc.TARGET_ERROR)
    found = bc.loosest_tolerance(lambda tol: np.array([0.01 * tol]), reference)
    assert found["tol"] == bc.TOLERANCES[0] and len(found["tried"]) == 1


def test_fit_exponent_of_a_power_law():
    rows = [{"links": n, "us_per_step": 2.0 * n**1.5} for n in (8, 16, 64)]
    rows.append({"links": 128, "skipped": "too slow"})
    assert bc.fit_exponent(rows) == pytest.approx(1.5, abs=1e-12)


def test_mujoco_chain_is_the_same_mechanism():
    # MuJoCo's RK4 on relative hinge angles, h = 1e-3 over 0.1 s, 2 links: the same
    # exact solution as the baseline, each within ~1e-12 of it; 1e-9 checks the MJCF.
    mujoco = pytest.importorskip("mujoco")
    model = mujoco.MjModel.from_xml_string(bc.mujoco_xml(2))
    data = mujoco.MjData(model)
    model.opt.timestep = 1e-3
    mujoco.mj_step(model, data, nstep=100)
    theta, _ = bc.handwritten_chain(2, 1e-3, 0.1)
    np.testing.assert_allclose(np.cumsum(data.qpos), theta, rtol=0, atol=1e-9)


def test_mujoco_column_without_mujoco(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco", None)  # `import mujoco` raises ImportError
    assert bc.mujoco_case(2, np.zeros(2)) == {"available": False, "why": "not installed"}


def test_report_renders_ratios_skips_and_missing_columns():
    # Synthetic numbers (the bench's own are too slow for a unit test): the table shows
    # the ratio per N, a method over the budget, MuJoCo "not installed", skipped sizes.
    method = {"available": True, "run_s": 2.0, "h": 1e-3, "tol": 1e-8, "first_call_s": 9.0}
    over = {"available": True, "reached": False, "not_run": True, "predicted_run_s": 123.0}
    case = {
        "links": 8,
        "generate_s": 0.0,
        "handwritten": {"run_s": 0.5, "h": 1e-3, "first_call_s": 0.1},
        "mbdgen": {name: dict(method) for name in bc.CHAIN_METHODS},
        "mujoco": {"available": False, "why": "not installed"},
        "best_method": "abm",
        "ratio_best_over_handwritten": 4.0,
    }
    case["mbdgen"]["rk4"] = over
    rows = [{"links": 8, "n": 24, "m": 16, "us_per_step": 10.0, "first_call_s": 1.0,
             "generate_s": 0.0}, {"links": 16, "skipped": "too slow"}]  # fmt: skip
    scale = {"kind": "planar", "method": "rk4", "h": 1e-3, "rows": rows, "exponent": None,
             "handwritten_exponent": None, "goal_exponent": 1.2, "pass_exponent": None,
             "sizes_complete": False}  # fmt: skip
    text = bc.report(
        {"quick": True, "problem": "p", "target_error": 1e-6, "t_end": 5.0,
         "time_to_error": [case], "goal_ratio": 1.0, "pass_ratio": False,
         "scale_planar": scale, "scale_spatial": {**scale, "kind": "spatial"}}
    )  # fmt: skip
    assert "4.00" in text and "not inst." in text and ">~123" in text
    assert "skipped (too slow)" in text and "FAIL" in text


def test_cli_offers_the_chain_bench():
    from click.testing import CliRunner

    from mbdgen.cli import main

    out = CliRunner().invoke(main, ["bench", "--help"])
    assert out.exit_code == 0 and "--chain" in out.output
