"""``mbdgen bench``: mbdgen against a hand-written Numba kernel and a ``sympy.lambdify`` loop.

The problem is the slider-crank of ``models/slider_crank.py`` (Welch, Hong, Trapp &
Choi 2007, Eqs. 71-76), integrated with the Adams–Bashforth predictor of order 4
(Haug 1989 §7.4, Eq. 7.4.11) and the Adams–Moulton corrector of order 5
(Eq. 7.4.15) in PECE mode, self-started by raising the order 1, 2, 3, 4 (§7.4.4),
with Baumgarte stabilisation α = β = 5 (Haug 1989, Eq. 7.3.8) and h = 1e-3.
Four numbers are measured, all with :func:`time.perf_counter`, best of several
repeats:

(0) ``mbdgen.simulate`` of the compiled model, the whole call (driver, output
    arrays and :class:`~mbdgen.results.Result` included), after a warm-up call;
(a) :func:`handwritten_simulate`: the same algorithm written by hand as one
    ``@njit`` loop, hard-coded M, Q, Φ, Φ_q, γ, an in-place Gaussian elimination
    of the 7×7 augmented system and preallocated outputs: what an expert would
    write for this one model;
(b) :func:`lambdify_simulate`: the same algorithm in plain Python with the model
    functions from ``sympy.lambdify`` and ``np.linalg.solve``;
(c) the cold compile (generate the module, JIT it, first step; empty Numba cache)
    and the warm start (a second identical process) in fresh interpreters.

Per-step times are reported in microseconds.  The goals of the issue: mbdgen
within 1.3× of (a), at least 50× faster than (b), and a warm start under 2 s
that compiles nothing.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numba
import numpy as np
from numba import njit

from mbdgen import _numba_cache  # noqa: F401  (sets Numba's cache folder before the @njit below)

#: The repository (or the installed package's parent) that holds ``models/``.
ROOT = Path(__file__).resolve().parent.parent
MODEL_PATH = ROOT / "models" / "slider_crank.py"
GENERATED_DIR = ROOT / "generated"

# The benchmark problem (Welch et al. 2007, Table 2 and Eq. 75).
#: Parameters in the generated module's order: J1, J2, m, r, L, L1, g.
PARAMS = np.array([0.045, 33 / 4800, 1.0, 0.3, 0.5, 0.3, 10.0])
Q0 = np.array([0.9851, -0.5236, 0.4256, 0.1])
QD0 = np.zeros(4)
H = 1e-3
ALPHA = 5.0
BETA = 5.0
ORDER = 4

#: Goals of the issue.
GOAL_HANDWRITTEN_RATIO = 1.3  # mbdgen / hand-written, at most
GOAL_LAMBDIFY_SPEEDUP = 50.0  # lambdify / mbdgen, at least
GOAL_WARM_START_S = 2.0  # process start to end of the first step, at most

# Sizes of the hand-written kernel, compile-time constants for Numba.
_N = 4  # coordinates
_M = 3  # constraints
_NA = _N + _M  # augmented system
_DIM = 2 * _N  # state x = [q; q̇]
_K = ORDER + 1  # history ring
_OK = 0
_SINGULAR = 1
_NONFINITE = 2


def adams_weights() -> tuple[np.ndarray, np.ndarray]:
    """AB (Eq. 7.4.11) and AM (Eq. 7.4.15) ordinate weights, rows indexed as in mbdgen.

    Row k of the AB table is the order-k predictor, row k + 1 of the AM table the
    corrector that follows it: the self-starting order ramp of Haug 1989 §7.4.4.
    """
    from mbdgen.methods import KMAX, adams_tables

    return adams_tables(KMAX, "ramp")


# --------------------------------------------------------------------------------------
# (a) The hand-written baseline.
# --------------------------------------------------------------------------------------


@njit(cache=True)
def _hw_rhs(x, p, alpha, beta, A, b, f, aux):  # pragma: no cover - jitted
    """f = [q̇; q̈] of the slider-crank with Baumgarte's γ̂ (Haug 1989, Eq. 7.3.8).

    Builds [[M, Φ_qᵀ], [Φ_q, 0]] [q̈; λ] = [Q; γ − 2αΦ_q q̇ − β²Φ] in ``A``, ``b`` and
    solves it by Gaussian elimination with partial pivoting, in place.  Writes λ,
    ‖Φ‖₂ and ‖Φ_q q̇‖₂ into ``aux``.
    """
    J1 = p[0]
    J2 = p[1]
    m = p[2]
    r = p[3]
    L = p[4]
    L1 = p[5]
    g = p[6]
    th = x[0]
    ph = x[1]
    xx = x[2]
    yy = x[3]
    thd = x[4]
    phd = x[5]
    xd = x[6]
    yd = x[7]
    s1 = math.sin(th)
    c1 = math.cos(th)
    s2 = math.sin(ph)
    c2 = math.cos(ph)
    d = L - L1
    # Φ (Welch et al. 2007, Eq. 72)
    phi0 = r * c1 + L1 * c2 - xx
    phi1 = r * s1 + L1 * s2 - yy
    phi2 = d * s2 + yy
    # Φ_q; the structural zeros and ±1 are written below.
    a00 = -r * s1
    a01 = -L1 * s2
    a10 = r * c1
    a11 = L1 * c2
    a21 = d * c2
    # γ = −(Φ_q q̇)_q q̇
    thd2 = thd * thd
    phd2 = phd * phd
    g0 = r * c1 * thd2 + L1 * c2 * phd2
    g1 = r * s1 * thd2 + L1 * s2 * phd2
    g2 = d * s2 * phd2
    # Φ̇ = Φ_q q̇
    v0 = a00 * thd + a01 * phd - xd
    v1 = a10 * thd + a11 * phd - yd
    v2 = a21 * phd + yd
    for i in range(_NA):
        for j in range(_NA):
            A[i, j] = 0.0
    A[0, 0] = J1
    A[1, 1] = J2
    A[2, 2] = m
    A[3, 3] = m
    A[4, 0] = a00
    A[4, 1] = a01
    A[4, 2] = -1.0
    A[5, 0] = a10
    A[5, 1] = a11
    A[5, 3] = -1.0
    A[6, 1] = a21
    A[6, 3] = 1.0
    for i in range(_M):
        for j in range(_N):
            A[j, _N + i] = A[_N + i, j]
    b[0] = 0.0
    b[1] = 0.0
    b[2] = 0.0
    b[3] = -m * g
    ta = 2.0 * alpha
    bb = beta * beta
    b[4] = g0 - ta * v0 - bb * phi0
    b[5] = g1 - ta * v1 - bb * phi1
    b[6] = g2 - ta * v2 - bb * phi2
    # Gaussian elimination with partial pivoting (7×7, in place).
    for k in range(_NA):
        piv = k
        best = abs(A[k, k])
        for i in range(k + 1, _NA):
            v = abs(A[i, k])
            if v > best:
                best = v
                piv = i
        if not best > 1e-14:
            return _SINGULAR
        if piv != k:
            for j in range(k, _NA):
                tmp = A[k, j]
                A[k, j] = A[piv, j]
                A[piv, j] = tmp
            tmp = b[k]
            b[k] = b[piv]
            b[piv] = tmp
        inv = 1.0 / A[k, k]
        for i in range(k + 1, _NA):
            fct = A[i, k] * inv
            if fct != 0.0:
                for j in range(k + 1, _NA):
                    A[i, j] -= fct * A[k, j]
                b[i] -= fct * b[k]
    for i in range(_NA - 1, -1, -1):
        s = b[i]
        for j in range(i + 1, _NA):
            s -= A[i, j] * b[j]
        b[i] = s / A[i, i]
    for i in range(_N):
        f[i] = x[_N + i]
        f[_N + i] = b[i]
    for i in range(_M):
        aux[i] = b[_N + i]
    aux[_M] = math.sqrt(phi0 * phi0 + phi1 * phi1 + phi2 * phi2)
    aux[_M + 1] = math.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
    return _OK


@njit(cache=True)
def _hw_abm(
    p, alpha, beta, h, x, n_steps, ab, am, hist, xc, fp, A, b, aux, out_t, out_x, out_f, out_aux
):  # pragma: no cover - jitted
    """ABM 4 PECE from t = 0 (Haug 1989 §7.4); returns (status, steps taken).

    Row ``s`` of ``out_*`` holds step ``s``; ``hist[(head − j) mod K] = f_{n−j}``.
    """
    status = _hw_rhs(x, p, alpha, beta, A, b, hist[0], aux)
    if status != _OK:
        return status, 0
    out_t[0] = 0.0
    for i in range(_DIM):
        out_x[0, i] = x[i]
        out_f[0, i] = hist[0, i]
    for i in range(_M + 2):
        out_aux[0, i] = aux[i]
    head = 0
    nhist = 1
    for step in range(n_steps):
        kk = min(ORDER, nhist)
        t_new = (step + 1) * h
        # P: x^p = x_n + h Σ_j β_{kk,j} f_{n−j}   (Eq. 7.4.11, ordinate form)
        for i in range(_DIM):
            s = 0.0
            for j in range(kk):
                r = head - j
                if r < 0:
                    r += _K
                s += ab[kk, j] * hist[r, i]
            xc[i] = x[i] + h * s
        # E, C: x_{n+1} = x_n + h (β*_0 f^p + Σ_{j≥1} β*_j f_{n+1−j})   (Eq. 7.4.15)
        status = _hw_rhs(xc, p, alpha, beta, A, b, fp, aux)
        if status != _OK:
            return status, step
        for i in range(_DIM):
            s = am[kk + 1, 0] * fp[i]
            for j in range(1, kk + 1):
                r = head - j + 1
                if r < 0:
                    r += _K
                s += am[kk + 1, j] * hist[r, i]
            xc[i] = x[i] + h * s
        # E: f_{n+1} into the oldest ring slot.
        new = head + 1
        if new == _K:
            new = 0
        fn = hist[new]
        status = _hw_rhs(xc, p, alpha, beta, A, b, fn, aux)
        if status != _OK:
            return status, step
        for i in range(_DIM):
            if not math.isfinite(xc[i]):
                return _NONFINITE, step
        row = step + 1
        out_t[row] = t_new
        for i in range(_DIM):
            x[i] = xc[i]
            out_x[row, i] = xc[i]
            out_f[row, i] = fn[i]
        for i in range(_M + 2):
            out_aux[row, i] = aux[i]
        head = new
        if nhist < _K:
            nhist += 1
    return _OK, n_steps


def handwritten_simulate(
    n_steps: int,
    h: float = H,
    alpha: float = ALPHA,
    beta: float = BETA,
    weights: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Run the hand-written ``@njit`` baseline for ``n_steps`` steps from Q0, QD0.

    Allocates the work and output arrays (as :func:`mbdgen.simulate` does) and
    returns ``t`` (rows,), ``x`` = [q, q̇] (rows, 8), ``f`` = [q̇, q̈] (rows, 8) and
    ``aux`` = [λ, ‖Φ‖₂, ‖Φ̇‖₂] (rows, 5), rows = n_steps + 1.
    """
    ab, am = weights if weights is not None else adams_weights()
    rows = n_steps + 1
    out_t = np.empty(rows)
    out_x = np.empty((rows, _DIM))
    out_f = np.empty((rows, _DIM))
    out_aux = np.empty((rows, _M + 2))
    x = np.concatenate([Q0, QD0])
    status, steps = _hw_abm(
        PARAMS, float(alpha), float(beta), float(h), x, n_steps, ab, am,
        np.zeros((_K, _DIM)), np.zeros(_DIM), np.zeros(_DIM),
        np.zeros((_NA, _NA)), np.zeros(_NA), np.zeros(_M + 2),
        out_t, out_x, out_f, out_aux,
    )  # fmt: skip
    if status != _OK:
        raise RuntimeError(f"hand-written baseline failed with status {status} at step {steps}")
    return {"t": out_t, "x": out_x, "f": out_f, "aux": out_aux}


# --------------------------------------------------------------------------------------
# (b) The sympy.lambdify baseline.
# --------------------------------------------------------------------------------------


def lambdify_functions(model_path: str | Path = MODEL_PATH) -> dict[str, Callable[..., Any]]:
    """``sympy.lambdify`` (NumPy) of M, Q, Φ, Φ_q, γ, each called as ``fn(q, qd, p)``."""
    import sympy as sp

    from mbdgen.model import load_model
    from mbdgen.symbolic import derive

    system = derive(load_model(model_path))
    args = [list(system.q), list(system.qd), list(system.p)]
    return {
        name: sp.lambdify(args, system.blocks[name], modules="numpy")
        for name in ("mass", "force", "phi", "phi_q", "gamma")
    }


def lambdify_simulate(
    n_steps: int,
    funcs: dict[str, Callable[..., Any]] | None = None,
    h: float = H,
    alpha: float = ALPHA,
    beta: float = BETA,
    weights: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """ABM 4 PECE in plain Python on lambdified model functions and ``np.linalg.solve``.

    Same algorithm and outputs as :func:`handwritten_simulate`.
    """
    funcs = funcs if funcs is not None else lambdify_functions()
    ab, am = weights if weights is not None else adams_weights()
    fM, fQ, fphi, fJ, fgam = (funcs[k] for k in ("mass", "force", "phi", "phi_q", "gamma"))
    n, m, dim, K = _N, _M, _DIM, _K
    p = list(PARAMS)
    zeros_mm = np.zeros((m, m))

    def rhs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q, qd = x[:n], x[n:]
        M = np.asarray(fM(q, qd, p), dtype=float)
        Q = np.asarray(fQ(q, qd, p), dtype=float).ravel()
        phi = np.asarray(fphi(q, qd, p), dtype=float).ravel()
        J = np.asarray(fJ(q, qd, p), dtype=float)
        gam = np.asarray(fgam(q, qd, p), dtype=float).ravel()
        phid = J @ qd
        A = np.block([[M, J.T], [J, zeros_mm]])
        rhs_b = np.concatenate([Q, gam - 2.0 * alpha * phid - beta * beta * phi])
        sol = np.linalg.solve(A, rhs_b)
        aux = np.concatenate([sol[n:], [np.linalg.norm(phi), np.linalg.norm(phid)]])
        return np.concatenate([qd, sol[:n]]), aux

    rows = n_steps + 1
    out_t = np.empty(rows)
    out_x = np.empty((rows, dim))
    out_f = np.empty((rows, dim))
    out_aux = np.empty((rows, m + 2))
    x = np.concatenate([Q0, QD0])
    f, aux = rhs(x)
    hist = [f]  # newest first: hist[j] = f_{n−j}
    out_t[0], out_x[0], out_f[0], out_aux[0] = 0.0, x, f, aux
    for step in range(n_steps):
        kk = min(ORDER, len(hist))
        s = 0.0
        for j in range(kk):
            s = s + ab[kk, j] * hist[j]
        xp = x + h * s
        fp, _ = rhs(xp)
        s = am[kk + 1, 0] * fp
        for j in range(1, kk + 1):
            s = s + am[kk + 1, j] * hist[j - 1]
        x = x + h * s
        f, aux = rhs(x)
        hist.insert(0, f)
        del hist[K:]
        row = step + 1
        out_t[row], out_x[row], out_f[row], out_aux[row] = row * h, x, f, aux
    return {"t": out_t, "x": out_x, "f": out_f, "aux": out_aux}


# --------------------------------------------------------------------------------------
# (0) mbdgen.
# --------------------------------------------------------------------------------------


def mbdgen_module() -> ModuleType:
    """The generated slider-crank module.

    The committed ``generated/slider_crank.py`` when it is up to date (its Numba
    cache is then shared with the tests); otherwise the model is compiled into a
    per-user temporary folder, so that the bench never rewrites ``generated/``.
    """
    import mbdgen
    from mbdgen.errors import StaleModuleError

    try:
        return mbdgen.compile(MODEL_PATH, GENERATED_DIR, recompile=False)
    except StaleModuleError:
        user = "".join(c for c in os.environ.get("USER", "user") if c.isalnum()) or "user"
        return mbdgen.compile(MODEL_PATH, Path(tempfile.gettempdir()) / f"mbdgen-bench-{user}")


def mbdgen_simulate(module: ModuleType, n_steps: int, h: float = H) -> Any:
    """``mbdgen.simulate`` of the benchmark problem (ABM 4 PECE, α = β = 5, order ramp)."""
    import mbdgen

    return mbdgen.simulate(
        module, method="abm", order=ORDER, h=h, t_end=n_steps * h,
        q0=Q0, qd0=QD0, params=_param_dict(module), alpha=ALPHA, beta=BETA, start="ramp",
    )  # fmt: skip


def _param_dict(module: ModuleType) -> dict[str, float]:
    names = ("J1", "J2", "m", "r", "L", "L1", "g")
    return {name: float(PARAMS[names.index(name)]) for name in module.PARAMETER_NAMES}


# --------------------------------------------------------------------------------------
# (c) Cold compile and warm start, in fresh interpreters.
# --------------------------------------------------------------------------------------

_CHILD = r"""
import time
wall_start = time.time()
import json, sys
t0 = time.perf_counter()
import mbdgen
module = mbdgen.compile(MODEL, OUT)
t1 = time.perf_counter()
from numba.core import event
with event.install_recorder("numba:compile") as rec:
    mbdgen.simulate(
        module, method="abm", order=ORDER, h=H, t_end=H, alpha=ALPHA, beta=BETA, start="ramp"
    )
t2 = time.perf_counter()
wall_end = time.time()
stats = module.abm_chunk.stats
print(json.dumps({
    "wall_start": wall_start,
    "wall_end": wall_end,
    "compile_s": t1 - t0,
    "first_step_s": t2 - t1,
    "cache_hits": int(sum(stats.cache_hits.values())),
    "cache_misses": int(sum(stats.cache_misses.values())),
    "numba_compilations": sum(1 for _, ev in rec.buffer if ev.is_start),
    "sympy_imported": "sympy" in sys.modules,
}))
"""


def _run_child(model: Path, out_dir: Path, cache_dir: Path) -> dict[str, Any]:
    code = "\n".join(
        [
            f"MODEL = {str(model)!r}",
            f"OUT = {str(out_dir)!r}",
            f"ORDER, H, ALPHA, BETA = {ORDER!r}, {H!r}, {ALPHA!r}, {BETA!r}",
            _CHILD,
        ]
    )
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = str(cache_dir)
    spawn = time.time()
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=model.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    total = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed:\n{proc.stderr[-3000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    data["start_to_first_step_s"] = data["wall_end"] - spawn
    data["startup_s"] = data["wall_start"] - spawn
    data["process_s"] = total
    return data


def cold_warm(warm_repeats: int = 2) -> dict[str, Any]:
    """Time a cold compile and warm starts in subprocesses with an empty Numba cache.

    A temporary copy of the model is compiled into a temporary folder under a
    temporary ``NUMBA_CACHE_DIR``: the first process generates the module
    (:func:`mbdgen.compiler.generate`, inside ``mbdgen.compile``) and JIT-compiles
    it; the next ones only import it and load the machine code from the cache.
    """
    with tempfile.TemporaryDirectory(prefix="mbdgen-bench-") as tmp:
        base = Path(tmp)
        model = base / "model" / MODEL_PATH.name
        model.parent.mkdir()
        shutil.copy2(MODEL_PATH, model)
        out_dir = base / "generated"
        cache = base / "numba-cache"
        cold = _run_child(model, out_dir, cache)
        warms = [_run_child(model, out_dir, cache) for _ in range(max(1, warm_repeats))]
    warm = min(warms, key=lambda d: d["start_to_first_step_s"])
    return {
        "cold_total_s": cold["start_to_first_step_s"],
        "cold_generate_s": cold["compile_s"],
        "cold_jit_s": cold["first_step_s"],
        "cold_cache_misses": cold["cache_misses"],
        "cold_numba_compilations": cold["numba_compilations"],
        "warm_total_s": warm["start_to_first_step_s"],
        "warm_interpreter_start_s": warm["startup_s"],
        "warm_import_compile_s": warm["compile_s"],
        "warm_first_step_s": warm["first_step_s"],
        "warm_process_s": warm["process_s"],
        "warm_cache_hits": warm["cache_hits"],
        "warm_cache_misses": warm["cache_misses"],
        "warm_numba_compilations": warm["numba_compilations"],
        "warm_imports_sympy": bool(warm["sympy_imported"]),
        "warm_repeats": len(warms),
    }


# --------------------------------------------------------------------------------------
# Driver and report.
# --------------------------------------------------------------------------------------


def _best(fn: Callable[[], object], repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run(quick: bool = False) -> dict[str, Any]:
    """Run the benchmark; all times per step are in microseconds.

    ``quick`` is a smoke run with fewer steps and repeats.  The returned dict is
    JSON-serialisable: per-step times, the ratios mbdgen / hand-written and
    lambdify / mbdgen, cold and warm start times, the cache evidence of the warm
    start, the step counts, and each goal with a pass/fail boolean.
    """
    if not MODEL_PATH.is_file():
        from mbdgen.errors import MbdgenError

        raise MbdgenError(
            f"mbdgen bench needs a source checkout: {MODEL_PATH} not found "
            "(run it from the repository, e.g. `make bench`)"
        )
    steps = 2000 if quick else 20000
    repeats = 7 if quick else 25
    lam_steps = 200 if quick else 2000
    lam_repeats = 1 if quick else 3
    weights = adams_weights()

    module = mbdgen_module()
    result = mbdgen_simulate(module, steps)  # JIT (or cache load) and warm-up
    hw = handwritten_simulate(steps, weights=weights)
    agreement = float(np.max(np.abs(result.q[-1] - hw["x"][-1, :_N])))

    # Interleave the two fast codes so that both see the same machine load.
    best_mb = best_hw = best_loop = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = mbdgen_simulate(module, steps)
        best_mb = min(best_mb, time.perf_counter() - t0)
        best_loop = min(best_loop, res.counters["wall_time_s"])
        t0 = time.perf_counter()
        handwritten_simulate(steps, weights=weights)
        best_hw = min(best_hw, time.perf_counter() - t0)

    funcs = lambdify_functions()
    lambdify_simulate(2, funcs, weights=weights)
    best_lam = _best(lambda: lambdify_simulate(lam_steps, funcs, weights=weights), lam_repeats)

    start = cold_warm(warm_repeats=1 if quick else 3)
    per_method = method_table(module, steps, 3 if quick else 7, us_hw=best_hw / steps * 1e6)

    us_mb = best_mb / steps * 1e6
    us_hw = best_hw / steps * 1e6
    us_lam = best_lam / lam_steps * 1e6
    ratio_hw = us_mb / us_hw
    speedup_lam = us_lam / us_mb
    warm_ok = start["warm_cache_misses"] == 0 and start["warm_cache_hits"] > 0
    return {
        "quick": quick,
        "problem": "slider_crank, ABM 4 PECE, Baumgarte alpha=beta=5, h=1e-3",
        "python": sys.version.split()[0],
        "numba": numba.__version__,
        "numpy": np.__version__,
        "cpu_count": os.cpu_count() or 0,
        "steps": steps,
        "lambdify_steps": lam_steps,
        "repeats": repeats,
        "lambdify_repeats": lam_repeats,
        "mbdgen_us_per_step": us_mb,
        "mbdgen_loop_us_per_step": best_loop / steps * 1e6,
        "handwritten_us_per_step": us_hw,
        "lambdify_us_per_step": us_lam,
        "ratio_mbdgen_over_handwritten": ratio_hw,
        "ratio_lambdify_over_mbdgen": speedup_lam,
        "max_abs_q_difference_mbdgen_handwritten": agreement,
        **start,
        "warm_compiled_nothing": bool(warm_ok and start["warm_numba_compilations"] == 0),
        "goal_handwritten_ratio": GOAL_HANDWRITTEN_RATIO,
        "goal_lambdify_speedup": GOAL_LAMBDIFY_SPEEDUP,
        "goal_warm_start_s": GOAL_WARM_START_S,
        "pass_handwritten_ratio": bool(ratio_hw <= GOAL_HANDWRITTEN_RATIO),
        "pass_lambdify_speedup": bool(speedup_lam >= GOAL_LAMBDIFY_SPEEDUP),
        "pass_warm_start": bool(start["warm_total_s"] < GOAL_WARM_START_S),
        "pass_warm_cache": bool(warm_ok),
        "methods": per_method,
    }


def method_table(
    module: ModuleType, steps: int, repeats: int, us_hw: float
) -> list[dict[str, Any]]:
    """µs per step of every registered method on the benchmark problem.

    Each method at its default order (Adams k = 4), α = β = 5 (ignored by the
    parameter-free Welch schemes); the ratio is to the hand-written ABM 4 loop
    measured in the same run, so it compares cost per step, not accuracy.
    """
    import mbdgen
    from mbdgen.methods import METHODS

    def run_method(name: str) -> Any:
        gains = {} if METHODS[name].enforces_constraints else {"alpha": ALPHA, "beta": BETA}
        return mbdgen.simulate(
            module, name, None, H, steps * H, q0=Q0, qd0=QD0, params=_param_dict(module),
            **gains,
        )  # fmt: skip

    evals = {name: run_method(name).counters["rhs_evaluations"] for name in METHODS}  # JIT
    best = dict.fromkeys(METHODS, math.inf)
    for _ in range(repeats):  # interleaved, so that every method sees the same load
        for name in METHODS:
            t0 = time.perf_counter()
            run_method(name)
            best[name] = min(best[name], time.perf_counter() - t0)
    rows = []
    for name, method in METHODS.items():
        us = best[name] / steps * 1e6
        rows.append(
            {
                "method": name,
                "order": method.order(method.default_order),
                "us_per_step": us,
                "rhs_evaluations_per_step": evals[name] / steps,
                "ratio_to_handwritten_abm4": us / us_hw,
            }
        )
    return rows


def report(results: dict[str, Any]) -> str:
    """A short table of the per-step times, ratios, start-up times and goals."""
    r = results

    def ok(flag: bool) -> str:
        return "PASS" if flag else "FAIL"

    lines = [
        f"mbdgen bench{' (quick)' if r['quick'] else ''}: {r['problem']}",
        "",
        f"{'implementation':<34}{'us/step':>10}{'steps':>8}",
        f"{'mbdgen.simulate (whole call)':<34}{r['mbdgen_us_per_step']:>10.3f}{r['steps']:>8}",
        f"{'  of which the jitted loop':<34}{r['mbdgen_loop_us_per_step']:>10.3f}{r['steps']:>8}",
        f"{'hand-written @njit':<34}{r['handwritten_us_per_step']:>10.3f}{r['steps']:>8}",
        f"{'sympy.lambdify + np.linalg.solve':<34}{r['lambdify_us_per_step']:>10.1f}"
        f"{r['lambdify_steps']:>8}",
        "",
        f"cold compile (generate + JIT + 1 step): {r['cold_total_s']:.2f} s "
        f"(generate {r['cold_generate_s']:.2f} s, JIT + first step {r['cold_jit_s']:.2f} s)",
        f"warm start (process start to end of first step): {r['warm_total_s']:.2f} s "
        f"(interpreter {r['warm_interpreter_start_s']:.2f} s, import + compile check "
        f"{r['warm_import_compile_s']:.2f} s, first step {r['warm_first_step_s']:.2f} s)",
        f"warm cache: {r['warm_cache_hits']} hit(s), {r['warm_cache_misses']} miss(es), "
        f"{r['warm_numba_compilations']} Numba compilation(s); sympy imported: "
        f"{r['warm_imports_sympy']}",
        f"max |q_mbdgen - q_handwritten| at the end: "
        f"{r['max_abs_q_difference_mbdgen_handwritten']:.2e}",
        "",
        f"goal  mbdgen / hand-written <= {r['goal_handwritten_ratio']:g}: "
        f"{r['ratio_mbdgen_over_handwritten']:.2f}  {ok(r['pass_handwritten_ratio'])}",
        f"goal  lambdify / mbdgen >= {r['goal_lambdify_speedup']:g}: "
        f"{r['ratio_lambdify_over_mbdgen']:.0f}  {ok(r['pass_lambdify_speedup'])}",
        f"goal  warm start < {r['goal_warm_start_s']:g} s: {r['warm_total_s']:.2f} s  "
        f"{ok(r['pass_warm_start'])}",
        f"goal  warm start compiles nothing: {ok(r['pass_warm_cache'])}",
        "",
        "every registered method (default order, same problem; ratio to hand-written ABM 4):",
        f"{'method':<16}{'order':>6}{'us/step':>10}{'evals/step':>12}{'ratio':>8}",
    ]
    for row in r["methods"]:
        lines.append(
            f"{row['method']:<16}{row['order']:>6}{row['us_per_step']:>10.3f}"
            f"{row['rhs_evaluations_per_step']:>12.2f}{row['ratio_to_handwritten_abm4']:>8.2f}"
        )
    lines.append(
        "(vabm and rkf45_adaptive choose their own steps: their figures are per output "
        "interval h, tol 1e-6)"
    )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# (d) Scale: compile time and module size of planar chains (element kernels).
# --------------------------------------------------------------------------------------

CHAIN_MODEL = Path(__file__).resolve().parent.parent / "models" / "planar_chain.py"
SCALE_SIZES = (8, 64, 512)
GOAL_SCALE_COLD_S = 30.0

_SCALE_CHILD = r"""
import json, time
t0 = time.perf_counter()
from mbdgen.compiler import generate, import_generated
path, _ = generate(MODEL, OUT)
t1 = time.perf_counter()
module = import_generated(path)
import mbdgen
from numba.core import event
with event.install_recorder("numba:compile") as rec:
    t2 = time.perf_counter()
    mbdgen.simulate(module, method="abm", order=4, h=1e-3, t_end=1e-3, start="ramp")
    t3 = time.perf_counter()
depth, start, jit = 0, 0.0, 0.0
for stamp, ev in rec.buffer:
    if ev.is_start:
        if depth == 0:
            start = stamp
        depth += 1
    else:
        depth -= 1
        if depth == 0:
            jit += stamp - start
print(json.dumps({"generate_s": t1 - t0, "jit_s": jit, "first_call_s": t3 - t2,
                  "n": module.N_COORDINATES, "m": module.N_CONSTRAINTS, "path": str(path)}))
"""


def module_sizes(path: str | Path) -> dict[str, int]:
    """Bytes of a generated module: total, its code, and its compressed data block."""
    text = Path(path).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    data = 0
    inside = False
    for line in lines:
        if line.startswith("_DATA = rt.tables.decode("):
            inside = True
        if inside:
            data += len(line.encode())
            if line.startswith(")"):
                inside = False
    total = len(text.encode())
    return {"bytes": total, "code_bytes": total - data, "data_bytes": data}


def scale(sizes: Sequence[int] = SCALE_SIZES) -> list[dict[str, Any]]:
    """Cold compile time and module size of planar N-link chains (element path).

    Each N runs in a fresh interpreter with an empty Numba cache: generate the module
    from ``models/planar_chain.py`` copied as ``planar_chain_<N>.py``, import it and
    take one ABM step.  ``jit_s`` sums Numba's outermost compile events, so it
    excludes the step itself (a dense (n+m)² solve that grows with N³).
    """
    rows = []
    with tempfile.TemporaryDirectory(prefix="mbdgen-scale-") as tmp:
        base = Path(tmp)
        for n_links in sizes:
            model = base / f"planar_chain_{n_links}.py"
            shutil.copy2(CHAIN_MODEL, model)
            cache = base / f"cache-{n_links}"
            code = "\n".join(
                [f"MODEL = {str(model)!r}", f"OUT = {str(base / 'gen')!r}", _SCALE_CHILD]
            )
            env = dict(os.environ)
            env["NUMBA_CACHE_DIR"] = str(cache)
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-c", code],
                cwd=base,
                env=env,
                capture_output=True,
                text=True,
                timeout=1800,
            )
            wall = time.perf_counter() - t0
            if proc.returncode != 0:
                raise RuntimeError(f"scale benchmark N={n_links} failed:\n{proc.stderr[-3000:]}")
            data = json.loads(proc.stdout.strip().splitlines()[-1])
            data.update(module_sizes(data.pop("path")))
            data["links"] = n_links
            data["cold_compile_s"] = data["generate_s"] + data["jit_s"]
            data["process_s"] = wall
            data["pass_cold"] = bool(data["cold_compile_s"] < GOAL_SCALE_COLD_S)
            rows.append(data)
    return rows


def scale_report(rows: Sequence[dict[str, Any]]) -> str:
    """Table of :func:`scale`'s rows."""
    lines = [
        "planar N-link chains, element kernels (cold: empty Numba cache, fresh process):",
        f"{'N':>5}{'n':>6}{'m':>6}{'generate s':>12}{'JIT s':>8}{'cold s':>8}"
        f"{'module B':>10}{'code B':>9}{'data B':>9}  goal < {GOAL_SCALE_COLD_S:g} s",
    ]
    for r in rows:
        lines.append(
            f"{r['links']:>5}{r['n']:>6}{r['m']:>6}{r['generate_s']:>12.2f}{r['jit_s']:>8.2f}"
            f"{r['cold_compile_s']:>8.2f}{r['bytes']:>10}{r['code_bytes']:>9}"
            f"{r['data_bytes']:>9}  {'PASS' if r['pass_cold'] else 'FAIL'}"
        )
    lines.append(
        "(code B is the module without its compressed data block; the data block holds "
        "the per-element index tables, names and defaults)"
    )
    return "\n".join(lines)
