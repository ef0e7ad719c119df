"""Tolerance → global error of every error-controlled method on the test problems.

For each problem and method, the final max-norm error of q at t_end, against RADAU5 at
rtol = atol = 1e-11 (one reference per problem), for rtol = atol = 1e-3 … 1e-9, and the
log-log slope of error against tolerance over the tolerances the method reached.  Run
from the repository root:

    .venv/bin/python docs/measure_tolerances.py [-o tolerances.json] [--markdown]

The table in docs/methods.md ("What a tolerance buys") and
:data:`mbdgen.accuracy.MEASURED` come from its output (``--error-per-step``:
:data:`mbdgen.accuracy.MEASURED_PER_STEP`), and so does the table of the
error estimate (``simulate(..., error_estimate=True)``, the difference from the run
at a tenth of the tolerance): the true error over that estimate per method.  A run that fails (a step-size
collapse, too many steps) is recorded as such.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np

import mbdgen

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / ".generated"

#: problem → (model file, t_end, simulate() keywords).  The slider-crank's printed q0
#: leaves ‖Φ‖ = 4e-5, which the index-3 methods project away at t0 and the index-1 ones
#: would keep as an error of 4.4e-5 whatever the tolerance: it is assembled first,
#: holding θ.
PROBLEMS = {
    "pendulum": (ROOT / "models" / "pendulum.py", 2.0, {}),
    "four-bar with a spring": (ROOT / "tests" / "models" / "spring_fourbar.py", 2.0, {}),
    "slider-crank": (ROOT / "models" / "slider_crank.py", 1.0, {"assemble": ["theta"]}),
    "spatial double pendulum": (ROOT / "tests" / "models" / "spatial_double_pendulum.py", 1.0, {}),
    "heavy top": (ROOT / "tests" / "models" / "heavy_top.py", 1.0, {}),
    "Andrews, standard": (ROOT / "models" / "andrews.py", 0.03, {}),
    "Andrews, stiff": (ROOT / "models" / "andrews.py", 0.035,
                       {"params": {"spring_k": 30000.0, "spring_c": 100000.0}}),
}  # fmt: skip
METHODS = ("vabm", "rkf45_adaptive", "dop853", "hht_adaptive", "genalpha_adaptive", "radau5")
TOLERANCES = tuple(10.0**-k for k in range(3, 10))
REFERENCE_TOL = 1e-11


#: The index-3 methods that can hold the error per step instead of per unit step.
PER_STEP_METHODS = ("hht_adaptive", "genalpha_adaptive")


def _final(module, method, t_end, keywords, tol, per_step=False):
    h = t_end / 10  # output interval: the error at t_end is what is measured
    if per_step and method in PER_STEP_METHODS:
        keywords = {**keywords, "options": {"error_per_unit_step": False}}
    result = mbdgen.simulate(module, method=method, h=h, t_end=t_end, rtol=tol, atol=tol,
                             **keywords)  # fmt: skip
    return result.q[-1], result.counters["steps"]


def measure(problems=PROBLEMS, methods=METHODS, tolerances=TOLERANCES, only=None,
            per_step=False):  # fmt: skip
    """The rows; ``per_step``: hht_adaptive and genalpha_adaptive with the paper's
    error per step (:data:`mbdgen.accuracy.MEASURED_PER_STEP`)."""
    warnings.simplefilter("ignore")
    rows = []
    for name, (path, t_end, params) in problems.items():
        if only and name not in only:
            continue
        module = mbdgen.compile(path, OUT)
        ref, _ = _final(module, "radau5", t_end, params, REFERENCE_TOL)
        for method in methods:
            for tol in tolerances:
                start = time.process_time()
                try:
                    q, steps = _final(module, method, t_end, params, tol, per_step)
                    error, outcome = float(np.max(np.abs(q - ref))), "ok"
                except Exception as exc:  # noqa: BLE001 - recorded
                    q = None
                    error, steps, outcome = math.nan, 0, f"{type(exc).__name__}: {exc}"[:120]
                rows.append({"problem": name, "method": method, "tol": tol, "error": error,
                             "steps": steps, "cpu_s": time.process_time() - start,
                             "outcome": outcome})  # fmt: skip
                print(json.dumps(rows[-1]), flush=True)
                rows[-1]["q"] = None if q is None else q.tolist()
    return rows


def slope(rows):
    """Least-squares slope of log error against log tol over the finite errors."""
    pts = [(math.log10(r["tol"]), math.log10(r["error"])) for r in rows
           if r["error"] == r["error"] and r["error"] > 0]  # fmt: skip
    if len(pts) < 3:
        return math.nan
    x, y = np.array(pts).T
    return float(np.polyfit(x, y, 1)[0])


def estimate_ratios(rows):
    """method → the ratios true error / estimated error at t_end, the estimate being
    what ``simulate(..., error_estimate=True)`` reports: max |q(tol) − q(tol/10)|."""
    ratios = {}
    for name in PROBLEMS:
        for method in METHODS:
            mine = [r for r in rows if r["problem"] == name and r["method"] == method]
            for coarse, fine in zip(mine, mine[1:]):
                if coarse["outcome"] != "ok" or fine["outcome"] != "ok":
                    continue
                estimate = float(np.max(np.abs(np.subtract(coarse["q"], fine["q"]))))
                if estimate > 0 and coarse["error"] > 0:
                    ratios.setdefault(method, []).append(coarse["error"] / estimate)
    return ratios


def estimate_markdown(rows):
    lines = ["| method | pairs | true / estimated: min | median | max | within [0.5, 2] |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for method, values in estimate_ratios(rows).items():
        v = np.array(values)
        inside = np.mean((v >= 0.5) & (v <= 2.0))
        lines.append(f"| {method} | {v.size} | {v.min():.2g} | {np.median(v):.2g} | "
                     f"{v.max():.2g} | {100 * inside:.0f} % |")  # fmt: skip
    return "\n".join(lines)


def markdown(rows):
    lines = ["| problem | method | " + " | ".join(f"{t:.0e}" for t in TOLERANCES) + " | slope |",
             "|---|---|" + "---|" * (len(TOLERANCES) + 1)]  # fmt: skip
    for name in PROBLEMS:
        for method in METHODS:
            mine = [r for r in rows if r["problem"] == name and r["method"] == method]
            if not mine:
                continue
            cells = [f"{r['error'] / r['tol']:.2g}" if r["outcome"] == "ok" else "fails"
                     for r in mine]  # fmt: skip
            lines.append(f"| {name} | {method} | " + " | ".join(cells) + f" | {slope(mine):.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--problem", action="append", help="only these problems")
    parser.add_argument("--error-per-step", action="store_true",
                        help="hht_adaptive, genalpha_adaptive with the error per step")  # fmt: skip
    args = parser.parse_args()
    methods = PER_STEP_METHODS if args.error_per_step else METHODS
    measured = measure(methods=methods, only=args.problem, per_step=args.error_per_step)
    if args.output:
        Path(args.output).write_text(json.dumps(measured, indent=1))
    if args.markdown:
        print(markdown(measured))
        print()
        print(estimate_markdown(measured))
