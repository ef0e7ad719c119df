"""Measure the numbers of docs/methods.md: compile cost, step cost, work to 1e-6.

Run as ``.venv/bin/python docs/measure_methods.py [--skip-cold] [-o numbers.json]``.
For every registered method, on the slider-crank of the benchmark
(models/slider_crank.py, Wu et al. 2000; gravity only, 2 s from the bench's start):

* cold: a new process, an empty Numba cache, from the model file to the end of the
  first step (:func:`mbdgen.bench.cold_warm`), and the warm start after it;
* work to a final error of 1e-6 in q at t = 2 s, from the bench's start made
  consistent (assembled holding the crank angle), against an rkf45_adaptive reference
  with partitioning (GCP) at rtol = atol = 1e-13: fixed-step methods over a ladder
  of h, error-controlled ones over a ladder of tolerances; the cheapest run that
  reaches the error is reported, with its steps and wall time (best of 3).

Times depend on the machine and its load: compare rows of one run, not across runs.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

import mbdgen
from mbdgen import bench
from mbdgen.methods import METHODS

T_END = 2.0
TARGET = 1e-6
STEPS = (2e-2, 1e-2, 5e-3, 2e-3, 1e-3, 5e-4, 2e-4, 1e-4, 5e-5)
TOLS = (1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11)
ADAPTIVE = ("vabm", "rkf45_adaptive", "hht_adaptive", "genalpha_adaptive")


START: dict = {}


def _run(module, name: str, **kw):
    return mbdgen.simulate(module, name, None, t_end=T_END, q0=START["q"], qd0=START["qd"],
                           params=bench._param_dict(module), **kw)  # fmt: skip


def _timed(fn, repeats: int = 3):
    best, out = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def work_to_target(module, reference: np.ndarray) -> list[dict]:
    rows = []
    for name, spec in METHODS.items():
        settings = (
            [{"h": 0.01, "rtol": tol, "atol": tol} for tol in TOLS]
            if name in ADAPTIVE
            else [{"h": h} for h in STEPS]
        )
        if not spec.enforces_constraints:  # Adams and Runge-Kutta: partitioning
            settings = [{**s, "constraints": "gcp"} for s in settings]
        best = None
        for kw in settings:
            try:
                _run(module, name, **kw)  # compile / warm up
                wall, result = _timed(lambda kw=kw, name=name: _run(module, name, **kw))
            except mbdgen.MbdgenError as exc:
                print(f"  {name} {kw}: {exc}")
                continue
            err = float(np.max(np.abs(result.q[-1] - reference)))
            print(f"  {name} {kw}: error {err:.2e} in {wall * 1e3:.2f} ms")
            if err <= TARGET and (best is None or wall < best["wall_ms"] / 1e3):
                best = {"method": name, **kw, "error": err, "wall_ms": wall * 1e3,
                        "steps": int(result.counters.get("steps", 0))}  # fmt: skip
        rows.append(best or {"method": name, "wall_ms": None})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-cold", action="store_true")
    parser.add_argument("--skip-work", action="store_true")
    parser.add_argument("-o", "--output")
    args = parser.parse_args()
    from mbdgen.analysis.assembly import assemble

    module = bench.mbdgen_module()
    start = assemble(module, q0=bench.Q0, qd0=bench.QD0, params=bench._param_dict(module),
                     hold=[module.COORDINATE_NAMES[0]])  # fmt: skip
    START.update(q=np.asarray(start.q), qd=np.asarray(start.qd))
    ref = _run(module, "rkf45_adaptive", h=0.01, rtol=1e-13, atol=1e-13,
               constraints="gcp").q[-1]  # fmt: skip
    out: dict = {} if args.skip_work else {"work": work_to_target(module, ref)}
    if not args.skip_cold:
        out["cold"] = {}
        for name in METHODS:
            data = bench.cold_warm(warm_repeats=1, method=name)
            out["cold"][name] = {k: data[k] for k in ("cold_total_s", "warm_total_s")}
            print(f"  cold {name}: {data['cold_total_s']:.1f} s, warm {data['warm_total_s']:.2f} s")
    text = json.dumps(out, indent=1)
    if args.output:
        with open(args.output, "w") as fh:
            fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
