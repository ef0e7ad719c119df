"""Every malformed model is rejected with a message that names the offending item."""

from __future__ import annotations

import textwrap

import pytest
import sympy as sp

from mbdgen.compiler import generate
from mbdgen.errors import ModelError
from mbdgen.model import Model, load_model, speeds, t

x, y, th = sp.symbols("x y th")
m, g, l = sp.symbols("m g l")


def good(**changes):
    kwargs = dict(
        name="pend",
        coordinates=[x, y, th],
        parameters={m: 1.0, g: 9.81, l: 1.0},
        mass=sp.diag(m, m, m * l**2 / 12),
        force=[0, -m * g, 0],
        constraints=[x - l / 2 * sp.cos(th), y - l / 2 * sp.sin(th)],
        q0=[0.5, 0.0, 0.0],
        qd0=[0.0, 0.0, 0.0],
    )
    kwargs.update(changes)
    return Model(**kwargs)


def test_the_reference_model_is_valid():
    model = good()
    assert (model.n, model.m) == (3, 2)
    assert [v.name for v in model.velocities] == ["x_d", "y_d", "th_d"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"mass": sp.Matrix([[m, 0, 0], [0, m, 0]])}, r"mass matrix has shape 2x3 .* must be 3x3"),
        ({"mass": sp.Matrix([[m, 1, 0], [0, m, 0], [0, 0, m]])}, r"not symmetric: M\[0,1\]"),
        ({"force": [0, -m * g]}, r"force has 2 entries but there are 3 coordinates"),
        ({"q0": [0.5, 0.0]}, r"q0 has 2 entries"),
        ({"qd0": [0.0] * 4}, r"qd0 has 4 entries"),
        ({"q0": ["a", 0, 0]}, r"q0 must be a list of 3 numbers"),
        (
            {"constraints": [x - sp.Symbol("R") * sp.cos(th), y]},
            r"constraint 0 .* uses 'R', which is neither a coordinate, a parameter nor t",
        ),
        ({"force": [0, -m * sp.Symbol("G"), 0]}, r"force: Q\[1\] .* uses 'G'"),
        ({"mass": sp.diag(m, m, speeds([th])[0])}, r"mass matrix: M\[2,2\] .* uses 'th_d'"),
        ({"constraints": [x - speeds([x])[0], y]}, r"constraint 0 .* uses 'x_d'"),
        (
            {"constraints": [sp.Function("f")(t) - x, y]},
            r"constraint 0 contains the undefined function f\(t\)",
        ),
        ({"name": "my-model"}, r"model name 'my-model' is not a safe identifier"),
        ({"name": "lambda"}, r"model name 'lambda' is a Python keyword"),
        (
            {"coordinates": [sp.Symbol("x0; import os"), y, th]},
            r"coordinate name 'x0; import os' is not a safe identifier",
        ),
        ({"coordinates": [sp.Symbol("q"), y, th]}, r"coordinate name 'q' is reserved"),
        (
            {"parameters": {sp.Symbol("__class__"): 1.0}},
            r"parameter name '__class__' is not a safe",
        ),
        ({"parameters": {x: 1.0, m: 1.0, g: 1.0, l: 1.0}}, r"duplicate name 'x'"),
        ({"parameters": {m: "heavy", g: 9.81, l: 1.0}}, r"parameter 'm' has non-numeric default"),
        ({"coordinates": []}, r"has no coordinates"),
        ({"coordinates": [x, y, th**2]}, r"must be a sympy Symbol"),
    ],
)
def test_bad_model_is_rejected_with_a_clear_message(changes, message):
    with pytest.raises(ModelError, match=message):
        good(**changes)


def test_as_many_constraints_as_coordinates_is_a_valid_model():
    """A kinematically driven mechanism has m = n (Haug 1989 ch. 4-5)."""
    assert good(constraints=[x, y, th - t]).m == 3


def test_time_symbol_with_other_assumptions_is_the_model_time():
    tr = sp.Symbol("t", real=True)
    model = good(constraints=[x - l / 2 * sp.cos(th) - sp.sin(tr), y - l / 2 * sp.sin(th)])
    assert t in model.constraints.free_symbols


def _write(tmp_path, name, body):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_loader_errors_name_file_and_line(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        load_model(tmp_path / "missing.py")
    with pytest.raises(ModelError, match=r"broken.py:3: syntax error"):
        load_model(_write(tmp_path, "broken", "import sympy\n\nx = (\n"))
    with pytest.raises(ModelError, match="defines no model"):
        load_model(_write(tmp_path, "empty", "x = 1\n"))
    with pytest.raises(ModelError, match=r"raises.py:2: ZeroDivisionError"):
        load_model(_write(tmp_path, "raises", "a = 1\nb = a / 0\n"))
    body = """\
        import sympy as sp
        from mbdgen.model import Model
        x, y = sp.symbols("x y")
        model = Model(name="ok", coordinates=[x, y], mass=sp.eye(2), force=[0, 0],
                      constraints=[x - y], q0=[0, 0])
    """
    with pytest.raises(ModelError, match=r"named 'ok' but the file is 'other.py'"):
        generate(_write(tmp_path, "other", body), tmp_path / "gen")
    bad = body.replace("force=[0, 0]", "force=[0, 0, 0]")
    with pytest.raises(ModelError, match=r"ok.py: force has 3 entries"):
        load_model(_write(tmp_path, "ok", bad))


def test_unsupported_function_is_a_compile_error(tmp_path):
    from mbdgen.errors import CompileError

    body = """\
        import sympy as sp
        from mbdgen.model import Model
        x, y = sp.symbols("x y")
        model = Model(name="weird", coordinates=[x, y], mass=sp.eye(2),
                      force=[sp.besselj(0, x), 0], constraints=[x - y], q0=[0, 0])
    """
    with pytest.raises(CompileError, match="kernel 'force'"):
        generate(_write(tmp_path, "weird", body), tmp_path / "gen")
