"""A newcomer's model and its start: each case ends in one line naming the cause, or
runs.

Each test reproduces the case as the user met it: a CLI call and its error line (no
traceback, no "internal error"), or the library call and its MbdgenError.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import MODELS, TEST_GENERATED, TEST_MODELS, cli, one_line_error

import mbdgen

FOURBAR = MODELS / "fourbar.py"
HEAVY_TOP = TEST_MODELS / "heavy_top.py"


# -- simulate --q0 NAME=VALUE, --qd0 NAME=VALUE ----------------------------------------


def test_simulate_takes_q0_and_qd0_by_name(tmp_path):
    out = tmp_path / "a.npz"
    code, output = cli(
        "simulate", FOURBAR, "--h", "1e-3", "--t-end", "2e-3", "--no-progress",
        "-p", "th10=0.3", "-p", "w=1",
        "--q0", "crank_phi=0.3", "--qd0", "crank_phi=1", "--qd0", "crank_x=0.5",
        "-o", out,
    )  # fmt: skip
    assert code == 0, output
    result = mbdgen.load(out)
    names = list(result.coordinates)
    q0, qd0 = result.q[0], result.qd[0]
    assert q0[names.index("crank_phi")] == 0.3
    assert qd0[names.index("crank_phi")] == 1.0 and qd0[names.index("crank_x")] == 0.5
    # the others keep the model's q0
    module = mbdgen.compile(FOURBAR)
    others = [i for i, n in enumerate(names) if n != "crank_phi"]
    assert np.array_equal(q0[others], module.Q0[others])


def test_simulate_q0_with_assemble_holds_the_given_value(tmp_path):
    out = tmp_path / "a.npz"
    code, output = cli(
        "simulate", FOURBAR, "--h", "1e-3", "--t-end", "2e-3", "--no-progress",
        "-p", "th10=0.3", "--q0", "crank_phi=0.3", "--assemble", "--hold", "crank_phi",
        "-o", out,
    )  # fmt: skip
    assert code == 0, output
    result = mbdgen.load(out)
    assert result.q[0, list(result.coordinates).index("crank_phi")] == 0.3
    assert result.phi_norm[0] < 1e-9


@pytest.mark.parametrize("flag", ["--q0", "--qd0"])
def test_simulate_q0_unknown_name_suggests_the_nearest(flag):
    code, output = cli("simulate", FOURBAR, "--t-end", "1e-3", flag, "crank_ph=0.3")
    assert code == 1
    line = one_line_error(output, only=True)
    assert "no coordinate 'crank_ph'" in line and "did you mean crank_phi?" in line, line


def test_simulate_q0_must_be_name_value():
    code, output = cli("simulate", FOURBAR, "--t-end", "1e-3", "--q0", "0.3")
    assert code == 1
    assert "--q0 '0.3': write NAME=VALUE" in one_line_error(output, only=True)


def test_library_simulate_takes_q0_by_name():
    module = mbdgen.compile(FOURBAR)
    result = mbdgen.simulate(
        module, "abm", h=1e-3, t_end=1e-3, params={"th10": 0.3}, q0={"crank_phi": 0.3},
        assemble=["crank_phi"],
    )  # fmt: skip
    assert result.q[0, 2] == 0.3 and result.phi_norm[0] < 1e-9
    with pytest.raises(mbdgen.MbdgenError, match="did you mean crank_phi"):
        mbdgen.simulate(module, "abm", h=1e-3, t_end=1e-3, qd0={"crank_ph": 1.0})


# -- a body without inertia is named with the parameter that was set -------------------


@pytest.mark.parametrize("method", ["abm", "welch1"])
def test_zero_inertia_set_by_p_names_the_body_and_the_parameter(method):
    code, output = cli(
        "simulate", HEAVY_TOP, "--out-dir", TEST_GENERATED, "--method", method,
        "-p", "top_Jzz=0", "--t-end", "0.01", "--no-progress",
    )  # fmt: skip
    assert code == 1
    line = one_line_error(output, only=True)
    assert "body 'top' has no rotary inertia about its z axis" in line, line
    assert "top_Jzz = 0, set by -p" in line and "the model's value is 0.1" in line, line
    assert "top_e3" not in line, line


def test_zero_inertia_in_the_model_file_says_so(tmp_path):
    source = HEAVY_TOP.read_text()
    assert "(0.3, 0.3, 0.1)" in source
    model = tmp_path / "heavy_top.py"
    model.write_text(source.replace("(0.3, 0.3, 0.1)", "(0.3, 0.3, 0.0)"))
    code, output = cli(
        "simulate", model, "--out-dir", tmp_path / "gen", "--t-end", "0.01", "--no-progress"
    )
    assert code == 1
    line = one_line_error(output, only=True)
    assert "body 'top' has no rotary inertia about its z axis (top_Jzz = 0 in the model)" in line


# -- a model without q0 starts at the origin -------------------------------------------


@pytest.fixture
def fourbar_without_q0(tmp_path):
    """models/fourbar.py with its bodies' q0 and qd0 left out: every body at the origin."""
    source = FOURBAR.read_text()
    given = ", q0=(*centroid, angle), qd0=(*v, omega))"
    assert given in source
    model = tmp_path / "fourbar.py"
    model.write_text(source.replace(given, ")"))
    return model


def _origin_advice(line):
    assert "q0 defaults to the origin" in line, line
    assert "--assemble needs a start near a configuration that closes" in line, line
    assert "--q0 NAME=VALUE" in line, line


def test_simulate_from_the_origin_says_q0_defaults_to_it(fourbar_without_q0):
    code, output = cli(
        "simulate", fourbar_without_q0, "--out-dir", fourbar_without_q0.parent / "gen",
        "--t-end", "0.01", "--no-progress",
    )  # fmt: skip
    assert code == 1
    line = one_line_error(output, only=True)
    _origin_advice(line)
    assert "constraints are redundant" not in line and "assemble q0 first" not in line, line


@pytest.mark.parametrize("command", ["simulate", "assemble"])
def test_assembly_from_the_origin_is_not_called_inconsistent(fourbar_without_q0, command):
    args = ["--assemble", "--no-progress", "--t-end", "0.01"] if command == "simulate" else []
    code, output = cli(
        command, fourbar_without_q0, "--out-dir", fourbar_without_q0.parent / "gen",
        "--hold", "crank_phi", *args,
    )  # fmt: skip
    assert code == 1
    line = one_line_error(output, only=True)
    _origin_advice(line)
    assert "inconsistent" not in line, line


def test_a_rough_q0_off_the_origin_assembles(fourbar_without_q0):
    """The advice works: the couplers lifted off the x axis are enough."""
    code, output = cli(
        "assemble", fourbar_without_q0, "--out-dir", fourbar_without_q0.parent / "gen",
        "--q0", "coupler_y=1", "--q0", "rocker_y=1",
    )  # fmt: skip
    assert code == 0, output
    assert "degrees of freedom 0" in output


# -- an error-controlled index-3 method on a mechanism that cannot move ----------------


@pytest.fixture
def locked_fourbar(tmp_path):
    """models/fourbar.py with its crank held at th10 (no w t) and at rest: 0 degrees of
    freedom, undriven."""
    source = FOURBAR.read_text()
    for old, new in (
        ('angle_driver("drive", crank, th10 + w * t)', 'angle_driver("drive", crank, th10)'),
        ("parameters={w: W0, th10: 0.0}", "parameters={th10: 0.0}"),
        ('name="fourbar"', 'name="locked"'),
        ("W0 = 2.0", "W0 = 0.0"),
    ):
        assert old in source
        source = source.replace(old, new)
    model = tmp_path / "locked.py"
    model.write_text(source)
    return mbdgen.compile(model, tmp_path / "gen")


@pytest.mark.parametrize("method", ["hht_adaptive", "genalpha_adaptive"])
def test_zero_dof_undriven_is_refused_before_the_first_step(locked_fourbar, method):
    with pytest.raises(mbdgen.MbdgenError) as info:
        mbdgen.simulate(locked_fourbar, method, h=0.01, t_end=0.1)
    assert not isinstance(info.value, mbdgen.SimulationError)  # no step was taken
    message = str(info.value)
    assert "0 degrees of freedom (rank Φ_q = 9 on 9 coordinates)" in message, message
    assert "NaN" not in message


def test_zero_dof_undriven_on_the_cli(locked_fourbar, tmp_path):
    code, output = cli(
        "simulate", tmp_path / "locked.py", "--out-dir", tmp_path / "gen",
        "--method", "hht_adaptive", "--h", "0.01", "--t-end", "0.1", "--no-progress",
    )  # fmt: skip
    assert code == 1
    assert "0 degrees of freedom" in one_line_error(output, only=True)


def test_zero_dof_undriven_runs_where_the_method_can(locked_fourbar):
    result = mbdgen.simulate(locked_fourbar, "hht", h=0.01, t_end=0.1)
    assert result.ok and np.array_equal(result.q[-1], result.q[0])


@pytest.mark.parametrize("method", ["hht_adaptive", "genalpha_adaptive"])
def test_zero_dof_driven_still_runs(method):
    result = mbdgen.simulate(mbdgen.compile(FOURBAR), method, h=0.01, t_end=0.1)
    assert result.ok and result.q[-1, 2] == pytest.approx(0.2, abs=1e-9)
