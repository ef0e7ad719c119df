"""Every implicit method runs on every example model, through the Python API and the
CLI, as plain Python (``NUMBA_DISABLE_JIT=1``).

The jitted path of the same code is checked per method in test_hht, test_genalpha,
test_hht_adaptive and test_newmark_gcp (pendulum, slider-crank, spatial slider-crank,
double pendulum, Andrews, slider-crank with TSDA); compiling every index-3 and
Newmark-GCP entry point of all example models would add about 13 × 3 cold compiles
of 15-19 s each to the suite (issue 11 is about that cost).  Plain Python runs the
same integrator source line for line, so a model whose kernels or sizes trip an
integrator shows here.
"""

from __future__ import annotations

import json

import pytest
from conftest import MODELS, run_python

import mbdgen
from mbdgen.methods import INDEX3_FAMILIES, METHODS

IMPLICIT = [n for n, m in METHODS.items() if m.family in (*INDEX3_FAMILIES, "newmark_gcp", "radau")]
EXAMPLES = sorted(p.stem for p in MODELS.glob("*.py"))

#: Five steps of h (fixed step) or five output intervals h (error control, rtol = atol
#: = 1e-4); Andrews' mechanism moves 1e4 times faster than the others at t = 0.
STEP = {"andrews": 1e-5}
#: Example models with redundant constraint rows (IFToMM A04, Bricard).
REDUNDANT_ROWS = {"iftomm_a04_bricard"}
STEPS = 5

_RUN = """
import json, sys, tempfile
from pathlib import Path
import numpy as np
from click.testing import CliRunner
import numba, mbdgen
from mbdgen.cli import main
from mbdgen.compiler import import_generated
from mbdgen.results import load

assert numba.config.DISABLE_JIT
names, methods, steps, step = json.loads(sys.argv[1])
tmp = Path(tempfile.mkdtemp())
report = {}
for name in names:
    module = import_generated(Path("generated") / f"{name}.py")
    h = step.get(name, 1e-3)
    for method in methods:
        opts = dict(assemble=True, rtol=1e-4, atol=1e-4)
        try:
            r = mbdgen.simulate(module, method, None, h, steps * h, **opts)
            api = {"ok": bool(r.ok), "rows": len(r.t), "t_end": float(r.t[-1]),
                   "phi": float(np.max(r.phi_norm)), "q": r.q[-1].tolist()}
        except mbdgen.MbdgenError as e:
            api = {"error": str(e)}
        out = tmp / f"{name}-{method}.npz"
        args = ["simulate", f"models/{name}.py", "--method", method, "--h", repr(h),
                "--t-end", repr(steps * h), "--assemble", "--rtol", "1e-4", "--atol", "1e-4",
                "-o", str(out), "--no-progress"]
        res = CliRunner().invoke(main, args)
        cli = {"exit": res.exit_code, "output": res.output}
        if res.exit_code == 0:
            cli["q"] = load(out).q[-1].tolist()
        report[f"{name}/{method}"] = {"api": api, "cli": cli}
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def report():
    """One interpreter with the JIT disabled runs every (model, method) pair twice."""
    args = json.dumps([EXAMPLES, IMPLICIT, STEPS, STEP])
    code = f"import sys; sys.argv[1:] = [{args!r}]\n" + _RUN
    return json.loads(run_python(code, env={"NUMBA_DISABLE_JIT": "1"}).splitlines()[-1])


def _module(name):
    return mbdgen.compile(MODELS / f"{name}.py", MODELS.parent / "generated", recompile=False)


@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.parametrize("method", IMPLICIT)
def test_implicit_method_on_example(report, name, method):
    """The API run reaches t_end on the constraints (‖Φ‖₂ ≤ 1e-5: index-3 methods hold
    Φ = 0 to the Newton tolerance at a fixed step; with error control the rows are
    projected onto Φ = 0 to that tolerance, ‖Φ‖₂ ≤ 1e-9),
    and the CLI writes the same final state (bit for bit: same code, same input).  A
    model the method cannot integrate is refused by both with the same one-line
    message: a kinematically driven mechanism (no degree of freedom) by Newmark-GCP,
    which integrates independent coordinates (and needs independent rows), and a model
    with user states by a method that does not integrate them.  The index-3 methods
    leave out the redundant rows that assembly finds (λ = 0 there, as the Adams
    methods do): IFToMM A04 (Bricard) runs with them."""
    api, cli = report[f"{name}/{method}"]["api"], report[f"{name}/{method}"]["cli"]
    module = _module(name)
    spec = METHODS[method]
    h = STEP.get(name, 1e-3)
    refused = (module.N_STATES and not spec.integrates_states) or (
        spec.family == "newmark_gcp"
        and (module.N_CONSTRAINTS >= module.N_COORDINATES or name in REDUNDANT_ROWS)
    )
    if refused:
        assert "error" in api, api
        assert "\n" not in api["error"]
        assert cli["exit"] != 0 and cli["output"].strip() == f"error: {api['error']}"
        return
    assert "error" not in api, api
    assert api["ok"] and api["t_end"] == pytest.approx(STEPS * h, rel=1e-12)
    assert api["phi"] < 1e-5, api["phi"]
    if spec.error_controlled:  # rows projected onto Φ = 0 up to newton_tol (1e-10)
        assert api["phi"] < 1e-9, api["phi"]
    assert cli["exit"] == 0, cli["output"]
    assert cli["q"] == api["q"]
