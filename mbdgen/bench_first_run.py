"""A new model's first run in a warmed installation, and what background work costs the
foreground (``mbdgen bench --first-run``).

(a) After :func:`mbdgen.warmup.warm` (run first if the installation is not warm, and
its cost reported), each (model, method) runs in a fresh interpreter on a copy of the
model, one line longer, in a new folder, so that nothing of it is cached but its
element types (derived once per installation, as a user who ran any model has them).
Measured: the time from the process's start to the end of its first step, split into
start-up, code generation (SymPy) and the first step (the model's kernels and the
step); its CPU time; and the integrators Numba compiled in the process (0 is the
promise).  Runs use the default policy "background" (:mod:`mbdgen.specialize`), as a
user's run does: a helper process may compile kernels beside the first step, and a
small model's own entry point compiles in the background after it; the child waits for
that (not timed; its cost to a foreground run is (b)).

(b) A CPU-bound foreground run (the slider-crank under ABM, cached) is timed alone and
while a background process compiles a small model's own HHT entry point (what
:mod:`mbdgen.specialize` starts after a small model's first run), in interleaved
rounds: the ratio of the medians, wall and CPU.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: A planar model and a spatial one with Euler parameters.
MODELS = {"planar": ROOT / "models" / "slider_crank.py",
          "spatial": ROOT / "models" / "spatial_slider_crank.py"}  # fmt: skip
#: One method of each integrator family.
METHODS = ("abm", "rk4", "vabm", "rkf45_adaptive", "dop853", "welch2", "hht", "genalpha",
           "hht_adaptive", "genalpha_adaptive", "radau5", "newmark_gcp")  # fmt: skip
#: The promise: process start to the end of a new model's first step, quiet 2-core machine.
GOAL_FIRST_RUN_S = 5.0
#: The most background work may slow the foreground (wall time), 2 cores.
GOAL_BACKGROUND_SLOWDOWN = 1.10

_CHILD = r"""
import time
start = time.time()
import json, os, sys
from numba.core import event
import mbdgen
t0 = time.perf_counter()
module = mbdgen.compile(MODEL, OUT)
t1 = time.perf_counter()
integrators = []
class L(event.Listener):
    def on_start(self, e):
        d = e.data.get("dispatcher")
        name = getattr(getattr(d, "py_func", None), "__module__", "") or ""
        if name.startswith("mbdgen."):
            integrators.append(name + "." + d.py_func.__name__)
    def on_end(self, e):
        pass
event.register("numba:compile", L())
mbdgen.simulate(module, method=METHOD, h=1e-4, t_end=1e-4)
t2 = time.perf_counter()
end = time.time()
t = os.times()
from mbdgen import specialize
specialize.wait_started()  # a small model's own entry point, compiled in the background
print(json.dumps({"start": start, "end": end, "generate_s": t1 - t0,
                  "first_step_s": t2 - t1, "cpu_s": t.user + t.system,
                  "background_s": time.perf_counter() - t2,
                  "integrators": sorted(set(integrators))}))
"""


def _first_run(model: Path, method: str, work: Path) -> dict[str, Any]:
    folder = work / f"{model.stem}-{method}"  # a new path: nothing of it is cached
    folder.mkdir()
    copy = folder / model.name
    copy.write_text(model.read_text() + "\n# a new model\n")
    code = f"MODEL, OUT, METHOD = {str(copy)!r}, {str(folder / 'gen')!r}, {method!r}\n" + _CHILD
    env = {**os.environ, "MBDGEN_SPECIALIZE": "background"}  # what a user's run does
    spawn = time.time()
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=900, cwd=folder)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"first run of {method} on {model.name} failed:\n{proc.stderr[-2000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return {
        "model": model.stem,
        "method": method,
        "total_s": data["end"] - spawn,
        "startup_s": data["start"] - spawn,
        "generate_s": data["generate_s"],
        "first_step_s": data["first_step_s"],
        "cpu_s": data["cpu_s"],
        "background_s": data["background_s"],
        "integrators_compiled": data["integrators"],
    }


def first_runs(methods: tuple[str, ...] = METHODS, warm: bool = True) -> dict[str, Any]:
    """(a) of the module docstring."""
    from mbdgen import warmup

    record = warmup.warm(echo=lambda s: print(s, file=sys.stderr)) if warm else None
    rows = []
    with tempfile.TemporaryDirectory(prefix="mbdgen-first-run-") as tmp:
        for kind, model in MODELS.items():
            for method in methods:
                row = _first_run(model, method, Path(tmp))
                row["kind"] = kind
                rows.append(row)
    worst = max(r["total_s"] for r in rows)
    kept = ("skipped", "wall_s", "cpu_s", "jobs")
    return {
        "warmup": None if record is None else {k: record[k] for k in kept},
        "rows": rows,
        "worst_total_s": worst,
        "goal_first_run_s": GOAL_FIRST_RUN_S,
        "pass_first_run": bool(worst <= GOAL_FIRST_RUN_S),
        "integrators_compiled": sorted({n for r in rows for n in r["integrators_compiled"]}),
    }


_FOREGROUND = r"""
import time, json, warnings
warnings.simplefilter("ignore")
import mbdgen
from mbdgen.compiler import import_generated
module = import_generated(GENERATED)
mbdgen.simulate(module, method="abm", h=1e-3, t_end=1e-2)
print("ready", flush=True)
import sys
for line in sys.stdin:
    c, w = time.process_time(), time.perf_counter()
    mbdgen.simulate(module, method="abm", h=2e-5, t_end=4.0, output_every=1000)
    print(json.dumps([time.perf_counter() - w, time.process_time() - c]), flush=True)
"""

_BACKGROUND = (
    "import mbdgen; m = mbdgen.compile({model!r}, {out!r}); "
    "mbdgen.simulate(m, method='hht', h=1e-4, t_end=2e-4)"
)


def background_slowdown(rounds: int = 4) -> dict[str, Any]:
    """(b) of the module docstring."""
    from mbdgen.warmup import cores

    generated = ROOT / "generated" / "slider_crank.py"
    fg = subprocess.Popen([sys.executable, "-c", f"GENERATED = {str(generated)!r}\n" + _FOREGROUND],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert fg.stdin is not None and fg.stdout is not None
    fg.stdout.readline()

    def timed() -> tuple[float, float]:
        fg.stdin.write("go\n")  # type: ignore[union-attr]
        fg.stdin.flush()  # type: ignore[union-attr]
        wall, cpu = json.loads(fg.stdout.readline())  # type: ignore[union-attr]
        return wall, cpu

    alone, busy, overlapped = [], [], 0
    try:
        timed()
        for _ in range(rounds):
            alone.append(timed())
            tmp = tempfile.mkdtemp(prefix="mbdgen-bg-")
            code = _BACKGROUND.format(model=str(ROOT / "models" / "pendulum.py"), out=tmp)
            env = {**os.environ, "NUMBA_CACHE_DIR": tmp, "MBDGEN_SPECIALIZE": "now"}
            bg = subprocess.Popen([sys.executable, "-c", code], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            time.sleep(3.0)  # past its imports: compiling
            busy.append(timed())
            overlapped += bg.poll() is None
            bg.kill()
            bg.wait()
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        fg.stdin.close()
        fg.wait()
    wall = statistics.median(b[0] for b in busy) / statistics.median(a[0] for a in alone)
    cpu = statistics.median(b[1] for b in busy) / statistics.median(a[1] for a in alone)
    return {
        "alone_s": [a[0] for a in alone],
        "with_background_s": [b[0] for b in busy],
        "wall_ratio": wall,
        "cpu_ratio": cpu,
        "rounds_overlapped": overlapped,
        "rounds": rounds,
        "cores": cores(),
        "goal_slowdown": GOAL_BACKGROUND_SLOWDOWN,
        "pass_background": bool(wall <= GOAL_BACKGROUND_SLOWDOWN),
    }


def report(first: dict[str, Any], background: dict[str, Any]) -> str:
    """The two measurements as text."""
    lines = []
    w = first["warmup"]
    if w is not None:
        lines.append(
            "warm-up: already done" if w["skipped"] else
            f"warm-up: {w['wall_s']:.0f} s wall, {w['cpu_s']:.0f} s CPU on {w['jobs']} processes"
        )  # fmt: skip
    lines.append("a new model's first run (fresh process; s): total = start-up + generate + "
                 "first step; CPU; integrators compiled")  # fmt: skip
    for r in first["rows"]:
        lines.append(
            f"  {r['kind']:<8} {r['method']:<18} {r['total_s']:6.2f} = {r['startup_s']:.2f} + "
            f"{r['generate_s']:.2f} + {r['first_step_s']:.2f}   CPU {r['cpu_s']:5.2f}   "
            f"{len(r['integrators_compiled'])}"
        )
    verdict = "PASS" if first["pass_first_run"] else "FAIL"
    lines.append(
        f"  worst {first['worst_total_s']:.2f} s (goal ≤ {GOAL_FIRST_RUN_S:g} s) {verdict}"
    )
    b = background
    verdict = "PASS" if b["pass_background"] else "FAIL"
    lines.append(
        f"foreground ABM run with a background compile, {b['cores']} cores: wall "
        f"{b['wall_ratio']:.3f}x, CPU {b['cpu_ratio']:.3f}x of alone (median of {b['rounds']}, "
        f"{b['rounds_overlapped']} overlapped to the end; goal ≤ {GOAL_BACKGROUND_SLOWDOWN:g}x) "
        f"{verdict}"
    )
    return "\n".join(lines)
