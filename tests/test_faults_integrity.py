"""Nothing lost, nothing silent: the compiler's files, as a user meets them.

- the model file is never overwritten by its own generated module, nor is any file
  that is not a generated module;
- a module is stale when anything the model read changed (a JSON file, a helper
  module), and a module edited by hand or damaged is refused, not used;
- NaN and infinite defaults, initial values and ``-p`` values are rejected up front;
- names outside the Basic Multilingual Plane (😀) survive into the module and print.

None of these tests runs an integrator: they compile, check stamps and call kernels.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
import sympy as sp
from click.testing import CliRunner
from conftest import GENERATED, MODELS

import mbdgen
from mbdgen.cli import main
from mbdgen.errors import MbdgenError, ModelError
from mbdgen.model import Mechanism, Model, planar
from mbdgen.simulation import parameter_vector


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _copy_pendulum(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "pendulum.py"
    shutil.copy(MODELS / "pendulum.py", model)
    return model


def _one_line_error(res) -> str:
    assert res.exit_code == 1, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]


# -- item 10: non-finite numbers -----------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
def test_a_non_finite_parameter_on_the_command_line_is_a_one_line_error(value):
    res = _cli("assemble", MODELS / "pendulum.py", "--out-dir", GENERATED, "-p", f"g={value}")
    line = _one_line_error(res)
    assert line.startswith(f"error: --param 'g={value}': '{value}' is not a finite number")


def test_parameter_vector_rejects_non_finite_values(pendulum):
    for value in (math.nan, math.inf, "1e400"):
        with pytest.raises(MbdgenError, match="'g' = .* is not a finite number"):
            parameter_vector(pendulum, {"g": value})
    assert parameter_vector(pendulum, {"g": 1.5})[3] == 1.5


x, y, th = sp.symbols("x y th")
m, g = sp.symbols("m g")


def _model(**changes):
    kwargs = dict(
        name="pend",
        coordinates=[x, y, th],
        parameters={m: 1.0, g: 9.81},
        mass=sp.diag(m, m, m / 12),
        force=[0, -m * g, 0],
        constraints=[x - sp.cos(th) / 2, y - sp.sin(th) / 2],
        q0=[0.5, 0.0, 0.0],
    )
    kwargs.update(changes)
    return Model(**kwargs)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"parameters": {m: 1.0, g: math.nan}}, "parameter 'g': default = nan is not a finite"),
        ({"parameters": {m: "inf", g: 9.81}}, "parameter 'm': default = 'inf' is not a finite"),
        ({"parameters": {m: 1.0, g: "1e400"}}, "parameter 'g': default = '1e400' is not"),
        ({"q0": [0.5, math.inf, 0.0]}, r"q0\[1\] \(y\) = inf is not a finite number"),
        ({"qd0": [0.0, 0.0, -math.inf]}, r"qd0\[2\] \(th\) = -inf is not a finite number"),
    ],
)
def test_a_model_with_a_non_finite_default_or_initial_value_is_a_model_error(changes, message):
    with pytest.raises(ModelError, match=message):
        _model(**changes)


def test_a_mechanism_with_a_non_finite_value_is_a_model_error():
    with pytest.raises(ModelError, match=r"body 'crank': q0\[2\] \(crank_phi\) = nan"):
        planar.body("crank", 1.0, 0.1, q0=(0.0, 0.0, math.nan))
    with pytest.raises(ModelError, match="crank: parameter 'm' = inf is not a finite number"):
        planar.body("crank", math.inf, 0.1)
    J = sp.Symbol("J")
    with pytest.raises(ModelError, match="parameter 'J': default = nan is not a finite"):
        Mechanism("chain", bodies=[planar.body("crank", 1.0, J)], parameters={J: math.nan})


def test_a_model_file_with_a_nan_default_fails_to_compile_with_its_name(tmp_path):
    model = _copy_pendulum(tmp_path)
    model.write_text(model.read_text().replace("g: 9.81", 'g: float("nan")'))
    line = _one_line_error(_cli("compile", model, "-o", tmp_path / "gen"))
    assert "parameter 'g': default = nan is not a finite number" in line
    assert not (tmp_path / "gen").exists()


# -- item 11: names outside the Basic Multilingual Plane -----------------------------


def test_non_bmp_names_survive_into_the_module_and_print(tmp_path):
    model = _copy_pendulum(tmp_path / "emoji")
    text = model.read_text(encoding="utf-8")
    text = text.replace(
        'description="Simple pendulum, Haug 1989 Example 7.2.1",',
        'description="pendulum 😀 \\"quoted\\" \'too\'",\n'
        '    constraint_names=["x 😀", "y 😀", "x again 😀"],',
    )
    # a redundant row, so that `info` and `assemble` print the constraint names
    text = text.replace(
        "constraints=[x1 - l * sp.cos(phi1), y1 - l * sp.sin(phi1)],",
        "constraints=[x1 - l * sp.cos(phi1), y1 - l * sp.sin(phi1), 2 * (x1 - l * sp.cos(phi1))],",
    )
    model.write_text(text, encoding="utf-8")
    out = tmp_path / "gen"
    module = mbdgen.compile(model, out)
    assert module.CONSTRAINT_NAMES == ("x 😀", "y 😀", "x again 😀")
    assert module.DESCRIPTION == "pendulum 😀 \"quoted\" 'too'"
    assert "😀" in (out / "pendulum.py").read_text(encoding="utf-8")

    res = _cli("info", model, "--out-dir", out)
    assert res.exit_code == 0, res.output
    assert "model pendulum: pendulum 😀" in res.output
    assert "redundant at q0: x again 😀" in res.output
    res = _cli("assemble", model, "--out-dir", out)
    assert res.exit_code == 0, res.output
    assert "x again 😀" in res.output
