"""Measure prototype 3a: cold compile of the shared integrator, of a model's cfunc
kernel, cache reuse across processes and models, and per-step time vs the inlined
entry point.  Run: python bench/jitcost_fp.py MODEL [STEPS]"""

import json
import sys
import time

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import numpy as np  # noqa: E402
from numba import cfunc, types  # noqa: E402

import mbdgen  # noqa: E402

model = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
mode = sys.argv[3] if len(sys.argv) > 3 else "both"
root = __file__.rsplit("/", 2)[0]
mod = mbdgen.compile(f"{root}/models/{model}.py", f"{root}/generated", recompile=False)
out = {"model": model}
a1 = types.float64[::1]
a2 = types.float64[:, ::1]
sig = types.void(types.float64, a1, a1, a1, a2, a1, a1, a2, a1, a1)
t = time.perf_counter()
kern = cfunc(sig, cache=True)(mod.dynamics.py_func)
out["cfunc_kernel_s"] = time.perf_counter() - t
import fp_shared  # noqa: E402

ftype = types.FunctionType(sig)
orig = mod.abm_chunk
calls = []


def fp_entry(*a):
    if not calls:
        t = time.perf_counter()
        r = fp_shared.abm_chunk_fp(kern, *a)
        out["shared_first_call_s"] = time.perf_counter() - t
        calls.append(1)
        return r
    return fp_shared.abm_chunk_fp(kern, *a)


def run(n):
    return mbdgen.simulate(mod, method="abm", h=1e-3, t_end=n * 1e-3)


res = {}
for label, entry in (("shared", fp_entry), ("inlined", orig)):
    if mode not in ("both", label):
        continue
    mod.abm_chunk = entry
    t = time.perf_counter()
    run(1)
    out[f"{label}_first_s"] = time.perf_counter() - t
    best = 1e9
    for _ in range(3):
        t = time.perf_counter()
        r = run(steps)
        best = min(best, time.perf_counter() - t)
    out[f"{label}_us_per_step"] = best / steps * 1e6
    res[label] = r.q[-1]
mod.abm_chunk = orig
if len(res) == 2:
    out["max_diff_q"] = float(np.max(np.abs(res["shared"] - res["inlined"])))
    out["ratio"] = out["shared_us_per_step"] / out["inlined_us_per_step"]
out["shared_sigs"] = len(fp_shared.abm_chunk_fp.signatures)
out["shared_hits"] = sum(fp_shared.abm_chunk_fp.stats.cache_hits.values())
print(json.dumps(out))
