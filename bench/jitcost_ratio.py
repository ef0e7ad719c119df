"""Per-step time of the shared entry points (mbdgen.runtime.shared) against the
module's own inlined ones, same run, best of 3.  python bench/jitcost_ratio.py MODEL"""

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import mbdgen

ROOT = Path(__file__).resolve().parents[1]
model = sys.argv[1] if len(sys.argv) > 1 else "planar_chain"
mod = mbdgen.compile(ROOT / "models" / f"{model}.py", ROOT / "generated", recompile=False)
for method, t_end in (("abm", 5.0), ("vabm", 5.0), ("abm", 5.0), ("vabm", 5.0)):
    row, q = {"model": model, "method": method}, {}
    for flag in ("1", "0"):
        os.environ["MBDGEN_SHARED_ENTRY"] = flag
        mbdgen.simulate(mod, method=method, h=1e-3, t_end=1e-3)
        best = 1e9
        for _ in range(5):
            t = time.perf_counter()
            r = mbdgen.simulate(mod, method=method, h=1e-3, t_end=t_end)
            best = min(best, time.perf_counter() - t)
        row["shared_s" if flag == "1" else "inlined_s"] = best
        q[flag] = r.q
    row["ratio"] = row["shared_s"] / row["inlined_s"]
    row["bit_identical"] = bool(np.array_equal(q["1"], q["0"]))
    print(json.dumps(row), flush=True)
