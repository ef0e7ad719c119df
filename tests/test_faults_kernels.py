"""A kernel that divides by zero gives the right message on a model's first run too.

A force 1/(t − tc)² was printed as ``(t - p[4])**(-2)``; Numba's integer power raises
ZeroDivisionError at a zero base whatever the error model.  Through a model's own
entry point the exception propagated and the run stopped with a message; through the
shared entry points, which a new model's first run (and every sweep task) steps
through, the kernel is called through its C wrapper, which cannot pass an exception
on: Numba printed "Exception ignored in: '<numba.core.cpu.CPUContext>' …
ZeroDivisionError", left the force unwritten, and the run "finished" with exit 0 and a
garbage trajectory (q = [−186, −6366, 2407]).  The printer now writes x**(-k) as
(1/x**k), inf under NumPy's error model, which the runtime's checks stop at the step
where it happens, naming the quantity.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import sympy as sp

import mbdgen
from mbdgen.codegen.emit import KernelPrinter
from mbdgen.simulation import SimulationError

SINGULAR = """\
import sympy as sp
from mbdgen.model import Model, t
x1, y1, phi1 = sp.symbols("x1 y1 phi1")
m, J, l, g, tc = sp.symbols("m J l g tc")
model = Model(
    name="{name}",
    coordinates=[x1, y1, phi1],
    parameters={{m: 1.0, J: 1.0 / 3.0, l: 1.0, g: 9.81, tc: 5.0}},
    mass=sp.diag(m, m, J),
    force=[0, -m * g, 1 / (t - tc) ** 2],
    constraints=[x1 - l * sp.cos(phi1), y1 - l * sp.sin(phi1)],
    q0=[1.0, 0.0, 0.0],
)
"""


def _model(folder, name):
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(SINGULAR.format(name=name)))
    return path


def test_negative_integer_powers_are_printed_as_divisions():
    x, y = sp.symbols("x y")
    printer = KernelPrinter({})
    assert printer.doprint(x**-2) == "(1/x**2)"
    assert printer.doprint((x + y) ** -3) == "(1/(x + y)**3)"
    assert printer.doprint(sp.sin(1 / (x - y) ** 2)) == "math.sin((1/(x - y)**2))"
    # unchanged: 1/x, a power inside a product, a fractional power (inf at 0 already)
    assert printer.doprint(1 / x) == "1/x"
    assert printer.doprint(y / x**2) == "y/x**2"
    assert printer.doprint(x ** sp.Rational(-3, 2)) == "x**(-3/2)"


@pytest.mark.parametrize("method", ["rk4", "hht"])
def test_first_run_through_the_shared_entry_names_the_division(tmp_path, method):
    """The test suite's policy is "shared": a model compiled here steps through the
    entry points compiled once per installation, as a user's first run does."""
    module = mbdgen.compile(_model(tmp_path, f"singular_{method}"), tmp_path / "gen")
    assert "**(-" not in (tmp_path / "gen" / f"singular_{method}.py").read_text()
    with pytest.raises(SimulationError, match=r"Q\[phi1\] evaluated to inf") as info:
        mbdgen.simulate(module, method, h=1e-3, t_end=1.0, params={"tc": 0.25})
    assert "in the step from t = 0.249 to 0.25" in str(info.value)
    assert len(info.value.result) == 250  # the steps before t = 0.25 are kept


def test_first_run_on_the_cli_exits_1_without_numbas_ignored_exception(tmp_path):
    path = _model(tmp_path, "singular_cli")
    proc = subprocess.run(
        [sys.executable, "-m", "mbdgen.cli", "simulate", str(path), "--out-dir",
         str(tmp_path / "gen"), "-p", "tc=0.25", "--t-end", "1", "--no-progress",
         "-o", str(tmp_path / "r.npz")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Q[phi1] evaluated to inf" in errors[0], proc.stderr
    assert len(mbdgen.load(tmp_path / "r.npz")) == 250
