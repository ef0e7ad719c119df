"""Cold JIT cost of the generated entry points (issue 11, item 3).

For each (model, method) a fresh interpreter with an empty Numba cache imports the
committed generated module, runs one step of ``mbdgen.simulate`` and reports:

* ``first_step_s``: wall time of that first ``simulate`` call (all JIT included);
* ``ep_s``: the entry point's own compile (Numba's ``compiler_lock`` timer of the
  entry point minus those of the kernels it compiled on the way);
* ``kernels_s``: the model kernels' compiles (sum of their ``compiler_lock`` timers);
* ``llvm_s``: time inside LLVM (``llvm_lock`` timer of the entry point);
* ``typeinf_s``: Numba's type inference passes of the entry point's pipeline.

With ``--prime MODEL`` each measurement runs in a cache that first served one step of
MODEL with the same method: the cost of a *new* model on an installation that has
already compiled the runtime's model-independent routines.

The child imports the ``mbdgen`` of the working directory (``python -c`` puts it first
on sys.path): to measure another tree, run from that tree with PYTHONPATH set to it.

Usage: python bench/jitcost.py [models...] [--methods abm,vabm,...] [--prime MODEL]
       [--json out]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("pendulum", "slider_crank", "planar_chain", "spatial_slider_crank")
METHODS = ("abm", "vabm", "welch2", "hht", "newmark_gcp")
ENTRY = {
    "abm": "abm_chunk",
    "vabm": "vabm_chunk",
    "welch2": "welch_chunk",
    "hht": "index3_chunk",
    "newmark_gcp": "newmark_gcp_chunk",
}

CHILD = r"""
import json, time
from collections import defaultdict
t0 = time.perf_counter()
import numba
from numba.core import event as ev
import mbdgen
mod = mbdgen.compile(MODEL, GENDIR, recompile=False)
t_import = time.perf_counter() - t0

# exclusive time per compiled function (nested compiles subtracted), and the LLVM
# and type-inference time spent inside each (innermost active compile)
passes = defaultdict(float)
stack, excl, llvm, tinf, lower = [], defaultdict(float), defaultdict(float), defaultdict(float), defaultdict(float)
class L(ev.Listener):
    def on_start(self, e):
        if e.kind == "numba:compile":
            d = e.data["dispatcher"]
            stack.append([d.py_func.__module__ + "." + d.py_func.__qualname__, time.perf_counter(), 0.0])
        else:
            self._t = getattr(self, "_t", {})
            mark = (time.perf_counter(), stack[-1][2] if stack else 0.0)
            if e.kind == "numba:llvm_lock":
                self._t.setdefault("llvm", []).append(mark)
            else:
                self._t[id(e.data)] = mark
    def on_end(self, e):
        now = time.perf_counter()
        if e.kind == "numba:compile":
            name, t, child = stack.pop()
            excl[name] += now - t - child
            if stack: stack[-1][2] += now - t
        elif e.kind == "numba:llvm_lock":
            t, c = self._t["llvm"].pop()
            if stack: llvm[stack[-1][0]] += now - t - (stack[-1][2] - c)
        else:
            t, c = self._t.pop(id(e.data), (now, 0.0))
            t += stack[-1][2] - c if stack else 0.0
            nm = e.data["name"]
            if stack and stack[-1][0].endswith("." + ENTRY):
                passes[nm] += now - t
            if stack and ("type_inference" in nm):
                tinf[stack[-1][0]] += now - t - 0
            if stack and ("lowering" in nm):
                lower[stack[-1][0]] += now - t
lis = L()
for k in ("numba:compile", "numba:llvm_lock", "numba:run_pass"):
    ev.register(k, lis)
t1 = time.perf_counter()
r = mbdgen.simulate(mod, method=METHOD, t_end=H, h=H)
first = time.perf_counter() - t1
epname = [k for k in excl if k.endswith("." + ENTRY)]
ep = epname[0] if epname else None
kern = sum(v for k, v in excl.items() if k.startswith(mod.__name__) and k != ep)
rtm = sum(v for k, v in excl.items() if not k.startswith(mod.__name__))
print(json.dumps({"import_s": t_import, "first_step_s": first,
    "ep_s": excl.get(ep, 0.0), "ep_llvm_s": llvm.get(ep, 0.0),
    "ep_typeinf_s": tinf.get(ep, 0.0), "ep_lower_s": lower.get(ep, 0.0),
    "kernels_s": kern, "runtime_other_s": rtm, "n_compiled": len(excl),
    "passes": sorted(((round(v, 2), k) for k, v in passes.items()), reverse=True)[:5],
    "top": sorted(((round(v, 2), k) for k, v in excl.items()), reverse=True)[:6]}))
"""


def run_one(model: str, method: str, h: float = 1e-3, cache: str | None = None) -> dict:
    """One cold (model, method) in a fresh process; ``cache`` None = a new empty dir."""
    tmp = cache or tempfile.mkdtemp(prefix="jitcost-")
    code = "\n".join(
        [
            f"MODEL = {str(ROOT / 'models' / (model + '.py'))!r}",
            f"GENDIR = {str(ROOT / 'generated')!r}",
            f"GEN = {str(ROOT / 'generated' / (model + '.py'))!r}",
            f"METHOD = {method!r}",
            f"ENTRY = {ENTRY.get(method, method + '_chunk')!r}",
            f"H = {h!r}",
            CHILD,
        ]
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=tmp)
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900
    )
    wall = time.perf_counter() - t0
    if p.returncode:
        return {"model": model, "method": method, "error": p.stderr.strip().splitlines()[-1]}
    row = json.loads(p.stdout.strip().splitlines()[-1])
    row.update(model=model, method=method, process_s=wall)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=list(MODELS))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--prime", help="model run first in the same cache (see docstring)")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for model in a.models:
        for method in a.methods.split(","):
            cache = None
            if a.prime:
                cache = tempfile.mkdtemp(prefix="jitcost-")
                run_one(a.prime, method, cache=cache)
            row = run_one(model, method, cache=cache)
            row["primed_with"] = a.prime
            rows.append(row)
            print(json.dumps(row), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
