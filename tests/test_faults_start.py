"""An inconsistent start (‖Φ(q0)‖ far above phi_tol): what the run says must fit
what the user did.

The pendulum of ``models/pendulum.py`` with x1 moved from 1 to 1.3 starts with
‖Φ(q0)‖ = 0.3 (phi_tol = 1e-3).
"""

from __future__ import annotations

import warnings

import pytest
from conftest import cli

import mbdgen
from mbdgen.simulation import ConstraintWarning

BAD_Q0 = [1.3, 0.0, 0.0]  # ‖Φ(q0)‖ = |1.3 − l cos 0| = 0.3


def _said(pendulum, **settings) -> tuple[list[str], list[int]]:
    """The run's ConstraintWarnings, and how many of them had come when the first
    chunk of steps reported its progress."""
    seen: list[int] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        def progress(t, t_end):
            seen.append(len([w for w in caught if w.category is ConstraintWarning]))

        mbdgen.simulate(pendulum, h=1e-3, t_end=0.1, progress=progress, **settings)
    return [str(w.message) for w in caught if w.category is ConstraintWarning], seen


def _constraint_warning(said: list[str]) -> str:
    found = [w for w in said if w.startswith("the result violates its constraints")]
    assert len(found) == 1, said
    return found[0]


def test_baumgarte_from_an_inconsistent_start_is_not_told_to_use_baumgarte(pendulum):
    """With alpha and beta given, the advice names the start and --assemble
    (or larger gains), never 'use Baumgarte stabilization'."""
    said, _ = _said(pendulum, method="rk4", q0=BAD_Q0, alpha=5.0, beta=5.0)
    text = _constraint_warning(said)
    assert "use Baumgarte stabilization" not in text, text
    assert "‖Φ(q0)‖ = 0.3" in text and "--assemble" in text, text
    assert "alpha = 5, beta = 5" in text and "larger gains" in text, text


def test_direct_integration_from_an_inconsistent_start_assembles_first(pendulum):
    """Direct integration does not pull Φ(q0) back: assemble first; Baumgarte is one
    remedy for the drift."""
    text = _constraint_warning(_said(pendulum, method="rk4", q0=BAD_Q0)[0])
    assert "‖Φ(q0)‖ = 0.3" in text and "--assemble" in text, text


def test_baumgarte_drift_from_a_consistent_start_asks_for_other_gains(pendulum):
    """A consistent start and Baumgarte on: the gains given are named, not Baumgarte
    suggested again (phi_tol = 1e-300 makes every run trip the check)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mbdgen.simulate(pendulum, "rk4", h=0.01, t_end=0.05, alpha=5.0, beta=5.0, phi_tol=1e-300)
    text = _constraint_warning([str(w.message) for w in caught if w.category is ConstraintWarning])
    assert "use Baumgarte stabilization" not in text and "alpha = 5, beta = 5" in text, text
    assert "Φ(q0)" not in text, text


@pytest.mark.parametrize("method", ["rk4", "abm"])
def test_an_inconsistent_start_is_reported_before_the_first_step(pendulum, method):
    """The q0 warning comes when it is found, before the first step, so a long run
    (or one that then fails) does not keep it to its end."""
    said, seen = _said(pendulum, method=method, q0=BAD_Q0, alpha=5.0, beta=5.0)
    assert said[0].startswith("q0 violates the constraints: ‖Φ(q0)‖ = 0.3"), said
    assert seen and seen[0] >= 1, (seen, said)


# -- a fixed-step index-3 method from an inconsistent start --------------------------


_cli = cli


@pytest.mark.parametrize("method", ["hht", "genalpha"])
def test_index3_fixed_step_from_an_inconsistent_start_names_the_rows(method):
    """IFToMM A02's four-bar with crank0_x, crank0_y moved by 0.3, −0.2
    (‖Φ(q0)‖ = 0.51 on joints A0 and B0_1) stopped with 'the matrix of the step became
    numerically singular …; use a smaller step h'.  The first step of an index-3
    method jumps onto Φ = 0 (a smaller step makes the jump's accelerations larger):
    the message names the violated rows and --assemble."""
    from conftest import GENERATED

    from mbdgen.compiler import import_generated
    from mbdgen.errors import SimulationError

    module = import_generated(GENERATED / "iftomm_a02_four_bar.py")
    q0 = list(module.Q0)
    q0[0] += 0.3
    q0[1] -= 0.2
    with warnings.catch_warnings(), pytest.raises(SimulationError) as info:
        warnings.simplefilter("ignore")
        mbdgen.simulate(module, method, h=1e-2, t_end=0.5, q0=q0)
    text = str(info.value)
    assert "q0 violates the constraints: ‖Φ(q0)‖ = 0.51" in text, text
    assert "rows B0_1[0], A0[0], A0[1], B0_1[1] (joints B0_1, A0)" in text, text
    assert "--assemble" in text, text
    assert text.index("--assemble") < text.find("smaller step"), text
    assert info.value.reason == "failed"


def test_index3_fixed_step_from_an_inconsistent_start_on_the_cli():
    """The same on the CLI: -p l=0.7 leaves the pendulum's q0 0.3 off its pivot."""
    from conftest import GENERATED, MODELS

    code, output = _cli(
        "simulate", MODELS / "pendulum.py", "--out-dir", GENERATED, "--method", "hht",
        "-p", "l=0.7", "--t-end", "0.5", "--no-progress",
    )  # fmt: skip
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert code == 1 and len(errors) == 1 and "Traceback" not in output, output
    assert "‖Φ(q0)‖ = 0.3" in errors[0] and "(row phi[0])" in errors[0], errors
    assert "--assemble" in errors[0], errors
