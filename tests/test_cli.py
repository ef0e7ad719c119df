"""The command line: every command, and errors as one line with a non-zero exit."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import GENERATED, MODELS, ROOT

import mbdgen
from mbdgen.cli import main


@pytest.fixture
def runner():
    return CliRunner()


def _invoke(runner, *args):
    return runner.invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_compile_check_and_up_to_date(runner, tmp_path):
    model = tmp_path / "pendulum.py"
    shutil.copy(MODELS / "pendulum.py", model)
    out = tmp_path / "gen"
    res = _invoke(runner, "compile", "--check", model, "-o", out)
    assert res.exit_code == 1 and "out of date" in res.output
    res = _invoke(runner, "compile", model, "-o", out)
    assert res.exit_code == 0 and "compiled" in res.output
    assert (out / "pendulum.py").read_text() == (GENERATED / "pendulum.py").read_text()
    res = _invoke(runner, "compile", model, "-o", out)
    assert "up to date" in res.output
    assert _invoke(runner, "compile", "--check", model, "-o", out).exit_code == 0


def test_simulate_writes_npz_csv_and_plot(runner, tmp_path):
    npz, csv, png = tmp_path / "r.npz", tmp_path / "r.csv", tmp_path / "r.png"
    args = ["simulate", MODELS / "slider_crank.py", "--out-dir", GENERATED, "--h", "1e-3"]
    args += ["--t-end", "1", "--alpha", "5", "--beta", "5", "--no-progress"]
    res = _invoke(runner, *args, "-o", npz, "--plot", png)
    assert res.exit_code == 0, res.output
    assert "1000 steps of abm k=4" in res.output
    result = mbdgen.load(npz)
    assert result.q.shape == (1001, 4) and result.info["alpha"] == 5.0
    assert png.stat().st_size > 10_000
    res = _invoke(runner, *args, "-o", csv, "--output-every", "100", "-p", "g=9.81")
    assert res.exit_code == 0, res.output
    table = np.genfromtxt(csv, delimiter=",", names=True)
    assert table.shape == (11,) and "theta" in table.dtype.names
    assert table["theta"][-1] != pytest.approx(result.q[-1, 0])  # g changed the motion


def test_info_reports_degrees_of_freedom(runner):
    res = _invoke(runner, "info", MODELS / "slider_crank.py")
    assert res.exit_code == 0
    assert "coordinates (4): theta, phi, x, y" in res.output
    assert "degrees of freedom: 1" in res.output
    assert "‖Φ(q0, 0)‖ = 4.143e-05" in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["simulate", "nowhere.py"], "error: model file 'nowhere.py' does not exist"),
        (["simulate", MODELS / "pendulum.py", "--method", "leapfrog"], "unknown method 'leapfrog'"),
        (["simulate", MODELS / "pendulum.py", "--order", "9"], "supports orders 1, 2, 3, 4, 5"),
        (["simulate", MODELS / "pendulum.py", "--h", "-1"], "step size h must be positive"),
        (["simulate", MODELS / "pendulum.py", "-p", "g"], "write NAME=VALUE"),
        (["simulate", MODELS / "pendulum.py", "-p", "mass=2"], "no parameter 'mass'"),
        (["info", "nowhere.py"], "does not exist"),
    ],
)
def test_errors_are_one_line(runner, args, message):
    res = runner.invoke(main, [str(a) for a in args])
    assert res.exit_code == 1
    assert message in res.output
    assert "Traceback" not in res.output


def test_failed_run_saves_partial_result(runner, tmp_path):
    out = tmp_path / "partial.npz"
    args = ["simulate", MODELS / "slider_crank.py", "--out-dir", GENERATED, "--method", "ab"]
    args += ["--order", "5", "--h", "0.01", "--alpha", "500", "--beta", "500", "-o", out]
    res = runner.invoke(main, [str(a) for a in args])
    assert res.exit_code == 1
    assert "the solution blew up" in res.output
    assert re.search(r"saved \d+ output row\(s\) \(\d+ steps, t = 0 to [\d.]+\)", res.output)
    assert 0 < len(mbdgen.load(out)) < 1001


def test_bad_model_error_and_debug_traceback(tmp_path):
    """Through the installed entry point: one line normally, a traceback with --debug."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import sympy as sp\nfrom mbdgen.model import Model\nx = sp.Symbol('x')\n"
        "model = Model(name='bad', coordinates=[x], mass=[[1, 0]], force=[0], q0=[0])\n"
    )
    exe = [sys.executable, "-m", "mbdgen.cli"]
    proc = subprocess.run([*exe, "compile", str(bad)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"error: {bad}: mass matrix has shape 1x2 but there are 1 coordinates; it must be 1x1"
    ]
    proc = subprocess.run(
        [*exe, "--debug", "compile", str(bad)], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 1 and "Traceback" in proc.stderr


def test_methods_lists_the_registry(runner):
    from mbdgen.methods import METHODS

    res = _invoke(runner, "methods")
    assert res.exit_code == 0
    assert [line.split()[0] for line in res.output.splitlines()] == list(METHODS)


def test_strict_counts_the_runs_checks_not_other_warnings(runner, monkeypatch):
    """``--strict`` fails on the run's own checks (ConstraintWarning) only: another
    library's warning during the run (NumPy's, a model's) is shown with its category
    and fails nothing (it counted as a failed check, and was printed as one)."""
    import warnings

    from mbdgen import simulation

    draw = simulation.geometry.describe

    def describe_and_warn(*args):
        warnings.warn("a library's note", RuntimeWarning, stacklevel=1)
        return draw(*args)

    monkeypatch.setattr(simulation.geometry, "describe", describe_and_warn)
    args = ["simulate", MODELS / "pendulum.py", "--out-dir", GENERATED, "--h", "1e-3"]
    res = _invoke(runner, *args, "--t-end", "0.1", "--no-progress", "--strict")
    assert res.exit_code == 0, res.output
    assert "warning (RuntimeWarning): a library's note" in res.output
