"""Per-step cost of one runtime against another (issue 11, item 3).

Runs warm ``mbdgen.simulate`` of (model, method) in fresh interpreters, alternating
between a baseline source tree (e.g. ``git archive main | tar -x -C /tmp/base``) and
this one, each with its own persistent Numba cache (the first round compiles), and
prints the best-of per-step time of each, their ratio (new / base) and whether the
whole trajectories (q, q̇, q̈, λ at every step) are bit-identical.

Usage: python bench/jitcost_step.py BASE_TREE [--models m1,m2] [--methods welch2,...]
       [--rounds 3] [--repeats 5] [--t-end 2.0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import hashlib, json, sys, time
import numpy as np
import mbdgen
model, method, t_end, repeats, root = sys.argv[1:]
t_end, repeats = float(t_end), int(repeats)
mod = mbdgen.compile(f"{root}/models/{model}.py", f"{root}/generated", recompile=False)
h = 1e-3
mbdgen.simulate(mod, method=method, h=h, t_end=2 * h)
best = 1e9
for _ in range(repeats):
    t = time.perf_counter()
    r = mbdgen.simulate(mod, method=method, h=h, t_end=t_end)
    best = min(best, time.perf_counter() - t)
steps = int(round(t_end / h))
arrays = (r.q, r.qd, r.qdd, r.lam)
digest = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays))
print(json.dumps({"step_us": best / steps * 1e6, "digest": digest.hexdigest()}))
"""


def run(tree: Path, cache: str, model: str, method: str, t_end: float, repeats: int) -> dict:
    """Best-of-``repeats`` per-step time in a fresh interpreter importing ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree), NUMBA_CACHE_DIR=cache)
    args = [model, method, str(t_end), str(repeats), str(tree)]
    # cwd = tree: ``python -c`` puts the working directory first on sys.path
    p = subprocess.run(
        [sys.executable, "-c", CHILD, *args], env=env, cwd=tree, capture_output=True, text=True
    )
    if p.returncode:
        raise SystemExit(p.stderr.strip().splitlines()[-1])
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("base", type=Path)
    ap.add_argument("--models", default="slider_crank,planar_chain")
    ap.add_argument("--methods", default="welch2,newmark_gcp")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--t-end", type=float, default=2.0)
    a = ap.parse_args()
    trees = {"base": a.base.resolve(), "new": ROOT}
    caches = {k: f"/tmp/jitcost-step-{k}-{os.getuid()}" for k in trees}
    for model in a.models.split(","):
        for method in a.methods.split(","):
            best = {k: 1e9 for k in trees}
            q_end = {}
            for _ in range(a.rounds):
                for k, tree in trees.items():
                    r = run(tree, caches[k], model, method, a.t_end, a.repeats)
                    best[k] = min(best[k], r["step_us"])
                    q_end[k] = r["digest"]
            row = {
                "model": model,
                "method": method,
                "base_us": round(best["base"], 3),
                "new_us": round(best["new"], 3),
                "ratio": round(best["new"] / best["base"], 3),
                "bit_identical": q_end["base"] == q_end["new"],
            }
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
