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

import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import numba
import numpy as np
from numba import njit

from mbdgen import (
    _numba_cache,  # noqa: F401  (sets Numba's cache folder before the @njit below)
    compiler,
    specialize,
)

# The benchmarks time a method's steps: a small model's own entry point compiles at its
# first (untimed) call, not in the background (:mod:`mbdgen.specialize`); the
# new-model latency sets the user's default policy for its children.
os.environ.setdefault(specialize.POLICY_ENV, "now")

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
GOAL_WARM_CLI_S = 0.5  # `mbdgen simulate` of one step, compiled model, warm cache, at most
#: Packages the everyday `mbdgen simulate` must not import (issue 12, §6).
HEAVY_PACKAGES = ("sympy", "matplotlib", "pandas", "h5py", "jinja2")

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


@njit(cache=True, inline="always")
def _hw_constraints(th, ph, xx, yy, p):  # pragma: no cover - jitted
    """Φ of the slider-crank (Welch et al. 2007, Eq. 72), derived by hand.

    Returns Φ₀, Φ₁, Φ₂; the five entries of Φ_q that depend on q,
    a00 = ∂Φ₀/∂θ, a01 = ∂Φ₀/∂φ, a10 = ∂Φ₁/∂θ, a11 = ∂Φ₁/∂φ, a21 = ∂Φ₂/∂φ (the others
    are the constants −1 at (0, 2), (1, 3) and +1 at (2, 3)); and (L − L1) sin φ, with
    which the second derivatives read Φ_θθ = (−a10, a00, 0) and
    Φ_φφ = (−a11, a01, −(L − L1) sin φ) (Φ is linear in x, y): the pieces of
    γ = −(Φ_q q̇)_q q̇ (ABM) and of (Φ_qᵀλ)_q (HHT).
    """
    r = p[3]
    L = p[4]
    L1 = p[5]
    s1 = math.sin(th)
    c1 = math.cos(th)
    s2 = math.sin(ph)
    c2 = math.cos(ph)
    d = L - L1
    phi0 = r * c1 + L1 * c2 - xx
    phi1 = r * s1 + L1 * s2 - yy
    phi2 = d * s2 + yy
    return phi0, phi1, phi2, -r * s1, -L1 * s2, r * c1, L1 * c2, d * c2, d * s2


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
    g = p[6]
    thd = x[4]
    phd = x[5]
    xd = x[6]
    yd = x[7]
    phi0, phi1, phi2, a00, a01, a10, a11, a21, ds2 = _hw_constraints(x[0], x[1], x[2], x[3], p)
    # γ = −(Φ_q q̇)_q q̇ = −(Φ_θθ θ̇² + Φ_φφ φ̇²)
    thd2 = thd * thd
    phd2 = phd * phd
    g0 = a10 * thd2 + a11 * phd2
    g1 = -a00 * thd2 - a01 * phd2
    g2 = ds2 * phd2
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
    return _example_module(MODEL_PATH)


def bench_temp_dir() -> Path:
    """The per-user folder ``<tempdir>/mbdgen-bench-<user>`` for modules generated by
    the benchmarks.  Private (0700, this user's, else refused:
    :func:`mbdgen.private_dir.private_dir`): the modules in it are imported."""
    from mbdgen.private_dir import private_dir

    user = "".join(c for c in os.environ.get("USER", "user") if c.isalnum()) or "user"
    return private_dir(Path(tempfile.gettempdir()) / f"mbdgen-bench-{user}")


def _example_module(path: Path) -> ModuleType:
    """The committed generated module of an example model, or a fresh temporary one."""
    import mbdgen
    from mbdgen.errors import StaleModuleError

    try:
        return mbdgen.compile(path, GENERATED_DIR, recompile=False)
    except StaleModuleError:
        return mbdgen.compile(path, bench_temp_dir())


def mbdgen_simulate(module: ModuleType, n_steps: int, h: float = H) -> Any:
    """``mbdgen.simulate`` of the benchmark problem (ABM 4 PECE, α = β = 5, order ramp)."""
    import mbdgen

    return mbdgen.simulate(
        module, method="abm", order=ORDER, h=h, t_end=n_steps * h,
        q0=Q0, qd0=QD0, params=_param_dict(module), alpha=ALPHA, beta=BETA, start="ramp",
    )  # fmt: skip


def module_defaults(module: ModuleType) -> dict[str, float]:
    """A generated module's parameters at their defaults, by name."""
    return dict(zip(module.PARAMETER_NAMES, map(float, module.P_DEFAULT), strict=True))


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
    if METHOD == "abm":
        mbdgen.simulate(
            module, method="abm", order=ORDER, h=H, t_end=H, alpha=ALPHA, beta=BETA,
            start="ramp",
        )
    else:
        mbdgen.simulate(module, method=METHOD, h=H, t_end=H)
t2 = time.perf_counter()
wall_end = time.time()
from mbdgen.methods import METHODS
stats = getattr(module, METHODS[METHOD].entry).stats
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


def _run_child(model: Path, out_dir: Path, cache_dir: Path, method: str) -> dict[str, Any]:
    code = "\n".join(
        [
            f"MODEL = {str(model)!r}",
            f"OUT = {str(out_dir)!r}",
            f"METHOD = {method!r}",
            f"ORDER, H, ALPHA, BETA = {ORDER!r}, {H!r}, {ALPHA!r}, {BETA!r}",
            _CHILD,
        ]
    )
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = str(cache_dir)
    env["MBDGEN_ELEMENT_CACHE_DIR"] = str(Path(cache_dir) / "elements")  # cold: no types
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


def warm_cli(
    model: Path, out_dir: Path, cache_dir: Path, method: str = "abm", repeats: int = 3
) -> dict[str, Any]:
    """Wall time of the everyday command, ``mbdgen simulate MODEL`` of one step, in a
    fresh process whose module and Numba cache are warm (best of ``repeats`` after one
    untimed run), and the heavy packages that process imported.

    One step makes the process time the time to the first step plus the CLI's exit.
    """
    args = [sys.executable, "-m", "mbdgen.cli", "simulate", str(model), "--out-dir", str(out_dir)]
    args += ["--method", method, "--h", repr(H), "--t-end", repr(H), "--no-progress"]
    if method == "abm":
        args += ["--alpha", repr(ALPHA), "--beta", repr(BETA)]
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = str(cache_dir)
    # An installed package has its bytecode compiled; without it every run recompiles
    # mbdgen's ~40 modules from source (about 0.08 s quiet), which no user pays.
    bytecode = "PYTHONDONTWRITEBYTECODE" not in env
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    floor_script = out_dir / "numba_floor.py"
    floor_script.write_text(_NUMBA_FLOOR)
    floor_cmd = [sys.executable, str(floor_script)]
    probe = "import sys, runpy; sys.argv = ['mbdgen'] + sys.argv[1:]\n"
    probe += "import atexit, json\n"
    probe += "atexit.register(lambda: print('MODULES ' + json.dumps(sorted(m for m in "
    probe += f"{list(HEAVY_PACKAGES)!r} if m in sys.modules))))\n"
    probe += "runpy.run_module('mbdgen.cli', run_name='__main__')\n"
    times = []
    floor = []
    modules: list[str] = []
    subprocess.run(floor_cmd, cwd=out_dir, env=env, capture_output=True, check=True)
    for i in range(repeats + 1):
        cmd = args if i else [sys.executable, "-c", probe, *args[3:]]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=model.parent, env=env, capture_output=True, text=True)
        elapsed = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"benchmark CLI run failed:\n{proc.stderr[-3000:]}")
        if i:
            times.append(elapsed)
            t0 = time.perf_counter()
            subprocess.run(floor_cmd, cwd=out_dir, env=env, capture_output=True, check=True)
            floor.append(time.perf_counter() - t0)
        else:
            line = [x for x in proc.stdout.splitlines() if x.startswith("MODULES ")][-1]
            modules = json.loads(line[len("MODULES ") :])
    return {
        "warm_cli_s": min(times),
        "warm_cli_repeats": len(times),
        "warm_cli_heavy_imports": modules,
        "warm_cli_numba_floor_s": min(floor),
        "warm_cli_over_floor_s": min(times) - min(floor),
        "warm_cli_bytecode_in_env": bytecode,
        "goal_warm_cli_s": GOAL_WARM_CLI_S,
        "pass_warm_cli": bool(min(times) < GOAL_WARM_CLI_S),
    }


#: The floor under any warm Numba program: interpreter, NumPy and Numba imports, the
#: target's initialisation and one function loaded from the disk cache and called.
_NUMBA_FLOOR = """\
import numpy as np
from numba import njit


@njit(cache=True)
def total(x):
    return x.sum()


total(np.ones(3))
"""


def cold_warm(warm_repeats: int = 2, method: str = "abm") -> dict[str, Any]:
    """Time a cold compile and warm starts in subprocesses with an empty Numba cache.

    A temporary copy of the model is compiled into a temporary folder under a
    temporary ``NUMBA_CACHE_DIR``: the first process generates the module
    (:func:`mbdgen.compiler.generate`, inside ``mbdgen.compile``) and JIT-compiles
    what one step of ``method`` needs (``"abm"``: ABM 4 with Baumgarte, as the
    benchmark; ``"hht"``, ``"genalpha"``: the implicit entry point with its Jacobian
    blocks); the next ones only import it and load the machine code from the cache.
    """
    with tempfile.TemporaryDirectory(prefix="mbdgen-bench-") as tmp:
        base = Path(tmp)
        model = base / "model" / MODEL_PATH.name
        model.parent.mkdir()
        shutil.copy2(MODEL_PATH, model)
        out_dir = base / "generated"
        cache = base / "numba-cache"
        cold = _run_child(model, out_dir, cache, method)
        warms = [_run_child(model, out_dir, cache, method) for _ in range(max(1, warm_repeats))]
        cli = warm_cli(model, out_dir, cache, method, repeats=max(1, warm_repeats))
    warm = min(warms, key=lambda d: d["start_to_first_step_s"])
    return {
        **cli,
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


#: From a new model file to the end of its first step, on an installation in use
#: (issue 11: "under 10 s on 2 cores for every example model").
GOAL_NEW_MODEL_S = 10.0

_NEW_MODEL_CHILD = r"""
import time
wall_start = time.time()
import json, warnings
t0 = time.perf_counter()
import mbdgen
module = mbdgen.compile(MODEL, OUT)
t1 = time.perf_counter()
from numba.core import event
warnings.simplefilter("ignore")  # a model's own notes (energy, constraints) are not timed
with event.install_recorder("numba:compile") as rec:
    mbdgen.simulate(module, method=METHOD, h=1e-3, t_end=1e-3)
t2 = time.perf_counter()
wall_end = time.time()
from mbdgen import specialize
specialize.wait_started()  # a small model's own entry point, compiled in the background
print(json.dumps({
    "wall_start": wall_start,
    "wall_end": wall_end,
    "generate_s": t1 - t0,
    "first_step_s": t2 - t1,
    "background_s": time.perf_counter() - t2,
    "numba_compilations": sum(1 for _, ev in rec.buffer if ev.is_start),
}))
"""


@contextlib.contextmanager
def _shared_entries_for_all() -> Iterator[None]:
    """Within the block every model, small ones too, runs the shared entry points."""
    from mbdgen import steppers

    limit = steppers.UNROLL_LIMIT
    steppers.UNROLL_LIMIT = 0
    try:
        yield
    finally:
        steppers.UNROLL_LIMIT = limit


def new_model_latency(
    names: Sequence[str] | None = None, method: str = "abm"
) -> list[dict[str, Any]]:
    """Seconds from a new model file to the end of its first ``method`` step (``hht``
    for a model with user states), for each example model, on this installation as a
    user finds it after a first run.

    Each model is first rendered and run from its committed module, which fills the
    installation's caches as any first use does: the element types (derived once per
    installation; the committed module alone would not derive them, and on an empty
    cache the timed copy paid for them, 14 s for the flyball governor) and the entry
    points compiled once for all models (:mod:`mbdgen.runtime.shared`).
    Then a copy with one line added — a new model to mbdgen and to Numba's cache —
    is generated, compiled and stepped once in a fresh interpreter; the time runs from
    the spawn of that interpreter to the end of the step.
    """
    import warnings

    import mbdgen

    rows = []
    models = sorted((ROOT / "models").glob("*.py"))
    with tempfile.TemporaryDirectory(prefix="mbdgen-new-model-") as tmp:
        for k, path in enumerate(models):
            if names is not None and path.stem not in names:
                continue
            compiler.render(path)  # the element types, derived once per installation
            committed = _example_module(path)
            # a model with user states runs the index-3 family, the one that integrates them
            run_method = "hht" if getattr(committed, "N_STATES", 0) else method
            row: dict[str, Any] = {"model": path.stem, "method": run_method}
            try:
                with warnings.catch_warnings(), specialize.policy_set("background"):
                    warnings.simplefilter("ignore")
                    # the shared routines too, which a small model's first run steps
                    # through, even where its own entry point is cached already
                    with _shared_entries_for_all():
                        mbdgen.simulate(committed, method=run_method, h=1e-3, t_end=1e-3)
                    mbdgen.simulate(committed, method=run_method, h=1e-3, t_end=1e-3)
                specialize.wait_started()
            except Exception as exc:  # noqa: BLE001 - a model this method cannot run
                rows.append({**row, "error": f"{type(exc).__name__}: {exc}"[:120]})
                continue
            folder = Path(tmp) / str(k)  # with its siblings: a model may import another
            folder.mkdir()
            for sibling in models:
                shutil.copy2(sibling, folder / sibling.name)
            model = folder / path.name
            model.write_text(path.read_text() + "\n# a new model\n")
            code = "\n".join(
                [f"MODEL = {str(model)!r}", f"OUT = {str(folder / 'gen')!r}",
                 f"METHOD = {run_method!r}", _NEW_MODEL_CHILD]
            )  # fmt: skip
            spawn = time.time()
            proc = subprocess.run(
                [sys.executable, "-c", code], cwd=model.parent, capture_output=True,
                text=True, timeout=900, env={**os.environ, specialize.POLICY_ENV: "background"},
            )  # fmt: skip
            if proc.returncode != 0:
                rows.append({**row, "error": proc.stderr.strip().splitlines()[-1][:120]})
                continue
            data = json.loads(proc.stdout.strip().splitlines()[-1])
            total = data["wall_end"] - spawn
            rows.append(
                {
                    **row,
                    "start_to_first_step_s": total,
                    "startup_s": data["wall_start"] - spawn,
                    "generate_s": data["generate_s"],
                    "first_step_s": data["first_step_s"],
                    "numba_compilations": data["numba_compilations"],
                    "background_s": data["background_s"],
                    "pass": bool(total < GOAL_NEW_MODEL_S),
                }
            )
    return rows


def new_model_report(rows: Sequence[dict[str, Any]], method: str = "abm") -> str:
    """Table of :func:`new_model_latency`'s rows."""
    lines = [
        f"a new model file to the end of its first {method} step (hht for a model with "
        "user states; fresh process; element types and shared entry points already on "
        "this installation; 'own JIT s': a small model's own entry point, compiled in "
        "the background after the first step):",
        f"{'model':<30}{'total s':>9}{'start s':>9}{'generate s':>12}{'JIT+step s':>12}"
        f"{'compiles':>10}{'own JIT s':>11}  goal < {GOAL_NEW_MODEL_S:g} s",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['model']:<30}  not run: {r['error']}")
            continue
        lines.append(
            f"{r['model']:<30}{r['start_to_first_step_s']:>9.2f}{r['startup_s']:>9.2f}"
            f"{r['generate_s']:>12.2f}{r['first_step_s']:>12.2f}{r['numba_compilations']:>10}"
            f"{r.get('background_s', 0.0):>11.2f}  {'PASS' if r['pass'] else 'FAIL'}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Driver and report.
# --------------------------------------------------------------------------------------


def _elapsed(fn: Callable[[], object]) -> float:
    """Seconds of one call of ``fn``."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _best(fn: Callable[[], object], repeats: int) -> float:
    return min((_elapsed(fn) for _ in range(repeats)), default=math.inf)


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
    implicit = implicit_cases(module, quick)

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
        **implicit,
    }


def method_table(
    module: ModuleType, steps: int, repeats: int, us_hw: float
) -> list[dict[str, Any]]:
    """µs per step of every registered method on the benchmark problem.

    Each method at its default order (Adams k = 4), α = β = 5 (ignored by the
    parameter-free Welch schemes); the ratio is to the hand-written ABM 4 loop
    measured in the same run, so it compares cost per step, not accuracy.
    """
    import warnings

    import mbdgen
    from mbdgen.methods import METHODS

    def run_method(name: str) -> Any:
        gains = {} if METHODS[name].enforces_constraints else {"alpha": ALPHA, "beta": BETA}
        with warnings.catch_warnings():
            # a fixed step chosen for timing, not accuracy: the energy and constraint
            # notes of the less accurate methods are not this table's business
            warnings.simplefilter("ignore")
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
        f"warm CLI (`mbdgen simulate`, one step, process wall time): {r['warm_cli_s']:.2f} s; "
        f"heavy imports: {', '.join(r['warm_cli_heavy_imports']) or 'none'}",
        f"  Numba's floor (import + one cached function, same run): "
        f"{r['warm_cli_numba_floor_s']:.2f} s; mbdgen above it: {r['warm_cli_over_floor_s']:.2f} s",
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
        f"goal  warm CLI < {r['goal_warm_cli_s']:g} s: {r['warm_cli_s']:.2f} s  "
        f"{ok(r['pass_warm_cli'])}",
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
        "(vabm, rkf45_adaptive and dop853 choose their own steps: their figures are per output "
        "interval h, tol 1e-6)"
    )
    if "hht" in r:
        lines += ["", implicit_report(r)]
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
            env["MBDGEN_ELEMENT_CACHE_DIR"] = str(cache / "elements")  # derive every type
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


# --------------------------------------------------------------------------------------
# (e) HHT-α: a hand-written @njit step of the slider-crank against ``method="hht"``.
# --------------------------------------------------------------------------------------

#: HHT's α, the Newton tolerance and iteration limit of the HHT case: mbdgen's defaults.
HHT_ALPHA = -0.05
HHT_NEWTON_TOL = 1e-10
HHT_MAX_ITERATIONS = 10
#: mbdgen's defaults too: extrapolation degree of the predictor (Negrut et al. 2007,
#: §3.5) and the convergence rate above which an old iteration matrix is re-evaluated.
_HW_DEGREE = 2
_HW_RATE_SLOW = 0.05
_HW_HIST = 4  # rows of the predictor's history
_HW_X = 3 * _N + _M  # state [q; q̇; q̈; λ]
_NEWTON_FAILED = 3
#: Round-off floor of a Newton correction, in units of eps max(1, ‖q‖∞)/(βh²).
_HW_NOISE = 10.0 * np.finfo(np.float64).eps


@njit(cache=True, inline="always")
def _hw_lu_factor(A, piv):  # pragma: no cover - jitted
    """A = P L U in place, partial pivoting, 7×7; L below the diagonal (unit), U above."""
    for k in range(_NA):
        pk = k
        best = abs(A[k, k])
        for i in range(k + 1, _NA):
            v = abs(A[i, k])
            if v > best:
                best = v
                pk = i
        piv[k] = pk
        if not best > 1e-14:
            return _SINGULAR
        if pk != k:
            for j in range(_NA):
                tmp = A[k, j]
                A[k, j] = A[pk, j]
                A[pk, j] = tmp
        inv = 1.0 / A[k, k]
        for i in range(k + 1, _NA):
            fct = A[i, k] * inv
            A[i, k] = fct
            if fct != 0.0:
                for j in range(k + 1, _NA):
                    A[i, j] -= fct * A[k, j]
    return _OK


@njit(cache=True, inline="always")
def _hw_lu_solve(A, piv, b):  # pragma: no cover - jitted
    """b ← A⁻¹ b from :func:`_hw_lu_factor`'s factors."""
    for k in range(_NA):
        pk = piv[k]
        if pk != k:
            tmp = b[k]
            b[k] = b[pk]
            b[pk] = tmp
    for i in range(1, _NA):
        s = b[i]
        for j in range(i):
            s -= A[i, j] * b[j]
        b[i] = s
    for i in range(_NA - 1, -1, -1):
        s = b[i]
        for j in range(i + 1, _NA):
            s -= A[i, j] * b[j]
        b[i] = s / A[i, i]


@njit(cache=True)
def _hw_hht(
    p, alpha, h, tol, max_iterations, x, n_steps, hist, A, piv, b, rp, f0, aux0, counts,
    out_t, out_x, out_aux,
):  # fmt: skip  # pragma: no cover - jitted
    """Fixed-step HHT-α of the slider-crank, index 3 (Negrut et al. 2007, Eqs. 2, 6, 10-14).

    ``x`` = [q; q̇; q̈; λ] (15,), q, q̇ given; q̈_0, λ_0 solve the index-1 equations
    (Haug 1989, Eq. 7.2.1: :func:`_hw_rhs` with α = β = 0).  Each step predicts
    q̈_{n+1}, λ_{n+1} by the quadratic through the last three accepted values (§3.5),
    then runs modified Newton on the residual of Eq. 13,

        e1 = M q̈/(1 + α) − Q + Φ_qᵀλ − α/(1 + α) (Φ_qᵀλ − Q)_n,   e2 = Φ/(βh²),

    with the matrix of Eq. 12, M̂ = M/(1 + α) + (Φ_qᵀλ)_q βh² (M and Q of the
    slider-crank are constant, so (M q̈)_q = Q_q = Q_q̇ = 0): factorized once and kept
    over iterations and steps, re-evaluated when the convergence rate ξ (Eq. 43)
    exceeds 0.05 or is too slow for the iterations left; stop when ξ/(1 − ξ)‖Δ‖
    (Eq. 42; ‖Δ‖ on the first iteration) ≤ 1, ‖·‖ weighted by ``tol`` max(1, |·|∞)
    or the round-off floor; a step out of iterations restarts once from the
    predictor with a fresh matrix.  The algorithm of :func:`mbdgen.runtime.hht.index3_chunk`
    with its defaults, written for this one model.

    ``counts`` ← [Newton iterations, matrix evaluations, factorizations, restarts,
    most iterations in one step].  Returns (status, steps taken).
    """
    J1 = p[0]
    J2 = p[1]
    m = p[2]
    g = p[6]
    beta = (1.0 - alpha) * (1.0 - alpha) / 4.0
    gamma_nm = (1.0 - 2.0 * alpha) / 2.0
    bh2 = beta * h * h
    c = 1.0 / (1.0 + alpha)
    hh = 0.5 * h * h
    sm = max(max(J1, J2), m)  # largest M_ii
    # start: [q̈_0; λ_0] from the index-1 equations, (Φ_qᵀλ − Q)_0
    status = _hw_rhs(x, p, 0.0, 0.0, A, b, f0, aux0)
    if status != _OK:
        return status, 0
    for i in range(_N):
        x[2 * _N + i] = f0[_N + i]
        hist[0, i] = f0[_N + i]
    for i in range(_M):
        x[3 * _N + i] = aux0[i]
        hist[0, _N + i] = aux0[i]
    _, _, _, a00, a01, a10, a11, a21, _ = _hw_constraints(x[0], x[1], x[2], x[3], p)
    lam0 = aux0[0]
    lam1 = aux0[1]
    lam2 = aux0[2]
    rp[0] = a00 * lam0 + a10 * lam1
    rp[1] = a01 * lam0 + a11 * lam1 + a21 * lam2
    rp[2] = -lam0
    rp[3] = -lam1 + lam2 + m * g
    out_t[0] = 0.0
    for i in range(_HW_X):
        out_x[0, i] = x[i]
    out_aux[0, 0] = aux0[_M]
    out_aux[0, 1] = aux0[_M + 1]
    head = 0
    nhist = 1
    jac_valid = False
    uses = 1 << 30
    q1 = np.empty(_N)
    qd1 = np.empty(_N)
    y = np.empty(_NA)  # Newton iterate [q̈_{n+1}; λ_{n+1}]
    for step in range(n_steps):
        restarted = False
        while True:  # one pass per (re)start from the predictor
            # predictor (§3.5): weights (−1)^j C(d + 1, j + 1) on equally spaced values
            d = min(_HW_DEGREE, nhist - 1)
            for i in range(_NA):
                s = 0.0
                row = head
                w = float(d + 1)
                for j in range(d + 1):
                    s += w * hist[row, i]
                    w = -w * (d - j) / (j + 2)
                    row = row - 1 if row > 0 else _HW_HIST - 1
                y[i] = s
            k = 0
            nrm_prev = 0.0
            converged = False
            while True:
                # Newmark (Eq. 2) and the model at (q_{n+1}, t_{n+1})
                for i in range(_N):
                    qdd = x[2 * _N + i]
                    q1[i] = (
                        x[i] + h * x[_N + i] + hh * ((1.0 - 2.0 * beta) * qdd + 2.0 * beta * y[i])
                    )
                    qd1[i] = x[_N + i] + h * ((1.0 - gamma_nm) * qdd + gamma_nm * y[i])
                phi0, phi1, phi2, a00, a01, a10, a11, a21, ds2 = _hw_constraints(
                    q1[0], q1[1], q1[2], q1[3], p
                )
                l0 = y[_N]
                l1 = y[_N + 1]
                l2 = y[_N + 2]
                # Φ_qᵀλ − Q
                r0 = a00 * l0 + a10 * l1
                r1 = a01 * l0 + a11 * l1 + a21 * l2
                r2 = -l0
                r3 = -l1 + l2 + m * g
                if converged or k >= max_iterations:
                    break
                # −e of Eq. 13
                ac = alpha * c
                b[0] = -(c * J1 * y[0] + r0 - ac * rp[0])
                b[1] = -(c * J2 * y[1] + r1 - ac * rp[1])
                b[2] = -(c * m * y[2] + r2 - ac * rp[2])
                b[3] = -(c * m * y[3] + r3 - ac * rp[3])
                b[4] = -phi0 / bh2
                b[5] = -phi1 / bh2
                b[6] = -phi2 / bh2
                if not jac_valid:
                    # Eq. 12 with M̂ of Eq. 14: (Φ_qᵀλ)_q has (θ, θ) Φ_θθ·λ, (φ, φ) Φ_φφ·λ
                    for i in range(_NA):
                        for j in range(_NA):
                            A[i, j] = 0.0
                    A[0, 0] = c * J1 + (-a10 * l0 + a00 * l1) * bh2
                    A[1, 1] = c * J2 + (-a11 * l0 + a01 * l1 - ds2 * l2) * bh2
                    A[2, 2] = c * m
                    A[3, 3] = c * m
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
                    counts[1] += 1
                    status = _hw_lu_factor(A, piv)
                    counts[2] += 1
                    if status != _OK:
                        return status, step
                    jac_valid = True
                    uses = 0
                _hw_lu_solve(A, piv, b)
                uses += 1
                # update, weighted by the tolerance or the round-off floor (Eq. 2a)
                dq = 0.0
                sq = 1.0
                sx = 1.0
                for i in range(_N):
                    y[i] += b[i]
                    dq = max(dq, abs(b[i]))
                    sq = max(sq, abs(y[i]))
                    sx = max(sx, abs(q1[i]))
                dl = 0.0
                sl = 1.0
                for i in range(_N, _NA):
                    y[i] += b[i]
                    dl = max(dl, abs(b[i]))
                    sl = max(sl, abs(y[i]))
                floor = _HW_NOISE * sx / bh2
                nrm = max(dq / max(tol * sq, floor), dl / max(tol * sl, floor * sm))
                k += 1
                counts[0] += 1
                if not math.isfinite(nrm):
                    return _NONFINITE, step
                if nrm_prev == 0.0:
                    converged = nrm <= 1.0
                else:
                    xi = nrm / nrm_prev  # Eq. 43
                    if xi < 1.0:
                        converged = nrm * xi / (1.0 - xi) <= 1.0  # Eq. 42
                    else:
                        converged = nrm <= 1.0
                    slow = xi > _HW_RATE_SLOW or nrm * xi ** (max_iterations - k) / (1.0 - xi) > 1.0
                    if not converged and slow and uses > 1:
                        jac_valid = False
                nrm_prev = nrm
            if converged:
                break
            if restarted:
                return _NEWTON_FAILED, step
            restarted = True
            counts[3] += 1
            jac_valid = False
        # accept
        rp[0] = r0
        rp[1] = r1
        rp[2] = r2
        rp[3] = r3
        for i in range(_N):
            x[i] = q1[i]
            x[_N + i] = qd1[i]
        for i in range(_NA):
            x[2 * _N + i] = y[i]
        for i in range(_HW_X):
            if not math.isfinite(x[i]):
                return _NONFINITE, step
        head = head + 1 if head + 1 < _HW_HIST else 0
        for i in range(_NA):
            hist[head, i] = y[i]
        if nhist < _HW_HIST:
            nhist += 1
        if k > counts[4]:
            counts[4] = k
        row = step + 1
        out_t[row] = row * h
        for i in range(_HW_X):
            out_x[row, i] = x[i]
        v0 = a00 * qd1[0] + a01 * qd1[1] - qd1[2]
        v1 = a10 * qd1[0] + a11 * qd1[1] - qd1[3]
        v2 = a21 * qd1[1] + qd1[3]
        out_aux[row, 0] = math.sqrt(phi0 * phi0 + phi1 * phi1 + phi2 * phi2)
        out_aux[row, 1] = math.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
    return _OK, n_steps


def handwritten_hht(
    n_steps: int,
    h: float = H,
    hht_alpha: float = HHT_ALPHA,
    newton_tol: float = HHT_NEWTON_TOL,
    max_iterations: int = HHT_MAX_ITERATIONS,
) -> dict[str, Any]:
    """Run the hand-written HHT-α baseline (:func:`_hw_hht`) from Q0, QD0.

    Returns ``t`` (rows,), ``x`` = [q, q̇, q̈, λ] (rows, 15), ``aux`` = [‖Φ‖₂, ‖Φ̇‖₂]
    (rows, 2), rows = n_steps + 1, and ``counters`` (Newton iterations, iteration-matrix
    evaluations, factorizations, restarts, most iterations in a step).
    """
    rows = n_steps + 1
    out_t = np.empty(rows)
    out_x = np.empty((rows, _HW_X))
    out_aux = np.empty((rows, 2))
    x = np.zeros(_HW_X)
    x[:_N] = Q0
    x[_N : 2 * _N] = QD0
    counts = np.zeros(5, dtype=np.int64)
    status, steps = _hw_hht(
        PARAMS, float(hht_alpha), float(h), float(newton_tol), int(max_iterations), x,
        n_steps, np.zeros((_HW_HIST, _NA)), np.zeros((_NA, _NA)),
        np.zeros(_NA, dtype=np.int64), np.zeros(_NA), np.zeros(_N), np.zeros(_DIM),
        np.zeros(_M + 2), counts, out_t, out_x, out_aux,
    )  # fmt: skip
    if status != _OK:
        raise RuntimeError(f"hand-written HHT failed with status {status} at step {steps}")
    names = ("newton_iterations", "jacobian_evaluations", "factorizations", "newton_restarts")
    counters = {name: int(v) for name, v in zip(names, counts[:4], strict=True)}
    counters["max_iterations_per_step"] = int(counts[4])
    return {"t": out_t, "x": out_x, "aux": out_aux, "counters": counters}


def mbdgen_hht(module: ModuleType, n_steps: int, h: float = H) -> Any:
    """``mbdgen.simulate(method="hht")`` of the slider-crank from Q0, QD0 (defaults of
    :data:`HHT_ALPHA`, :data:`HHT_NEWTON_TOL`, :data:`HHT_MAX_ITERATIONS`)."""
    import mbdgen

    return mbdgen.simulate(
        module, method="hht", h=h, t_end=n_steps * h, q0=Q0, qd0=QD0,
        params=_param_dict(module), hht_alpha=HHT_ALPHA, newton_tol=HHT_NEWTON_TOL,
        options={"max_iterations": HHT_MAX_ITERATIONS},
    )  # fmt: skip


def hht_case(module: ModuleType, steps: int, repeats: int) -> dict[str, Any]:
    """µs per step of ``method="hht"`` against :func:`handwritten_hht`, same run.

    Both run ``steps`` and ``2 * steps`` steps of h = 1e-3 from Q0, QD0 with α = −0.05
    and Newton tolerance 1e-10, interleaved ``repeats`` times (best of each).  Two
    measures of the cost of a step: the whole call of ``steps`` steps over ``steps``
    (a call's fixed cost spread over its steps), and the slope between the two lengths,
    (T(2s) − T(s))/s, in which the fixed costs cancel and what grows with the steps
    stays (the loop and the per-row checks).  The goal asks both to be within
    :data:`GOAL_HANDWRITTEN_RATIO`.  Also the Newton iterations per step of each, and
    their largest difference in q at any step.
    """
    result = mbdgen_hht(module, steps)  # JIT (or cache load) and warm-up
    hand = handwritten_hht(steps)
    agreement = float(np.max(np.abs(result.q - hand["x"][:, :_N])))
    best_mb = best_loop = best_hw = best_mb2 = best_hw2 = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = mbdgen_hht(module, steps)
        best_mb = min(best_mb, time.perf_counter() - t0)
        best_loop = min(best_loop, res.counters["wall_time_s"])
        best_hw = min(best_hw, _elapsed(lambda: handwritten_hht(steps)))
        best_mb2 = min(best_mb2, _elapsed(lambda: mbdgen_hht(module, 2 * steps)))
        best_hw2 = min(best_hw2, _elapsed(lambda: handwritten_hht(2 * steps)))
    us_mb = best_mb / steps * 1e6
    us_hw = best_hw / steps * 1e6
    slope_mb = (best_mb2 - best_mb) / steps * 1e6
    slope_hw = (best_hw2 - best_hw) / steps * 1e6
    ratio = us_mb / us_hw
    ratio_slope = slope_mb / slope_hw
    return {
        "problem": f"slider_crank, HHT alpha={HHT_ALPHA:g}, h={H:g}, newton_tol={HHT_NEWTON_TOL:g}",
        "steps": steps,
        "repeats": repeats,
        "mbdgen_us_per_step": us_mb,
        "mbdgen_loop_us_per_step": best_loop / steps * 1e6,
        "handwritten_us_per_step": us_hw,
        "mbdgen_slope_us_per_step": slope_mb,
        "handwritten_slope_us_per_step": slope_hw,
        "ratio_mbdgen_over_handwritten": ratio,
        "ratio_loop_over_handwritten": best_loop / best_hw,
        "ratio_slope": ratio_slope,
        "mbdgen_newton_per_step": result.counters["newton_iterations"] / steps,
        "handwritten_newton_per_step": hand["counters"]["newton_iterations"] / steps,
        "mbdgen_factorizations": result.counters["factorizations"],
        "handwritten_factorizations": hand["counters"]["factorizations"],
        "max_abs_q_difference": agreement,
        "goal_ratio": GOAL_HANDWRITTEN_RATIO,
        "pass_ratio": bool(max(ratio, ratio_slope) <= GOAL_HANDWRITTEN_RATIO),
    }


#: Generalized-α against Exudyn's: Exudyn's default ρ∞, the bench's h, 2 s from rest.
GENALPHA_EXUDYN_RHO_INF = 0.9
GENALPHA_EXUDYN_T_END = 2.0
#: Steps of the short runs whose time is subtracted: what is left is the stepping.
GENALPHA_EXUDYN_SHORT_STEPS = 20


def genalpha_exudyn_case(
    module: ModuleType,
    t_end: float = GENALPHA_EXUDYN_T_END,
    repeats: int = 5,
    rho_inf: float = GENALPHA_EXUDYN_RHO_INF,
) -> dict[str, Any]:
    """mbdgen's ``genalpha`` against Exudyn's generalized-α on the slider-crank (issue
    10 §3: the method Exudyn and Chrono users reach for first).

    The same method — generalized-α on the index-3 equations (Arnold & Brüls 2007),
    ρ∞ = ``rho_inf`` — at the same h = :data:`H`, from the same assembled state at
    rest (:mod:`mbdgen.bench_exudyn` builds the mechanism from Exudyn's planar items).
    Time: the best of ``repeats`` whole calls each (mbdgen: ``simulate`` with the
    assembly and one output row at the end; Exudyn: building the system and
    ``SolveDynamic``), interleaved; the per-step cost is the difference between a run
    to ``t_end`` and one of :data:`GENALPHA_EXUDYN_SHORT_STEPS` steps, so that each
    tool's fixed cost drops out.  Agreement: both final [θ, φ, x, y] against vabm at
    rtol = atol = 1e-12; the same method at the same h differs from itself by the two
    Newton iterations' tolerances only, far below the error they share.
    ``{"installed": False}`` without Exudyn.
    """
    import warnings

    import mbdgen
    from mbdgen import bench_exudyn

    if not bench_exudyn.available():
        return {"installed": False}
    defaults = module_defaults(module)
    theta0 = float(module.Q0[0])
    short_t = GENALPHA_EXUDYN_SHORT_STEPS * H

    def mine(t: float) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the run's energy note (ρ∞ < 1 damps)
            return mbdgen.simulate(
                module, method="genalpha", rho_inf=rho_inf, h=H, t_end=t,
                assemble=["theta"], output_every=int(round(t / H)),
            )  # fmt: skip

    def theirs(t: float) -> np.ndarray:
        return np.asarray(bench_exudyn.simulate_one(defaults, theta0, H, t, rho_inf))

    def timed(fn: Callable[[float], Any], t: float) -> float:
        start = time.perf_counter()
        fn(t)
        return time.perf_counter() - start

    final_mine, final_theirs = mine(t_end).q[-1], theirs(t_end)  # JIT or cache load
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = mbdgen.simulate(
            module, method="vabm", rtol=1e-12, atol=1e-12, h=t_end, t_end=t_end,
            assemble=["theta"],
        ).q[-1]  # fmt: skip
    best = {key: math.inf for key in ("mine", "mine_short", "theirs", "theirs_short")}
    for _ in range(repeats):
        best["mine"] = min(best["mine"], timed(mine, t_end))
        best["theirs"] = min(best["theirs"], timed(theirs, t_end))
        best["mine_short"] = min(best["mine_short"], timed(mine, short_t))
        best["theirs_short"] = min(best["theirs_short"], timed(theirs, short_t))
    steps = int(round(t_end / H)) - GENALPHA_EXUDYN_SHORT_STEPS
    us_mine = (best["mine"] - best["mine_short"]) / steps * 1e6
    us_theirs = (best["theirs"] - best["theirs_short"]) / steps * 1e6
    return {
        "installed": True,
        "version": bench_exudyn.version(),
        "problem": f"slider_crank from rest, rho_inf={rho_inf:g}, h={H:g}, t_end={t_end:g}",
        "steps": int(round(t_end / H)),
        "repeats": repeats,
        "mbdgen_ms": best["mine"] * 1e3,
        "exudyn_ms": best["theirs"] * 1e3,
        "mbdgen_us_per_step": us_mine,
        "exudyn_us_per_step": us_theirs,
        "ratio_exudyn_over_mbdgen_per_step": us_theirs / us_mine,
        "ratio_exudyn_over_mbdgen_whole": best["theirs"] / best["mine"],
        "max_abs_diff_mbdgen_exudyn": float(np.max(np.abs(final_mine - final_theirs))),
        "max_abs_error_mbdgen": float(np.max(np.abs(final_mine - ref))),
        "max_abs_error_exudyn": float(np.max(np.abs(final_theirs - ref))),
        "pass_faster": bool(us_theirs > us_mine),
    }


def genalpha_exudyn_report(g: dict[str, Any] | None) -> list[str]:
    """Lines of :func:`genalpha_exudyn_case` for :func:`implicit_report`."""
    if g is None:
        return ["generalized-α against Exudyn: skipped in the quick run"]
    if not g["installed"]:
        return ["generalized-α against Exudyn: Exudyn not installed (pip install 'mbdgen[bench]')"]
    return [
        f"generalized-α against Exudyn {g['version']} (same method, index 3): {g['problem']}",
        f"{'implementation':<34}{'whole ms':>10}{'us/step':>10}   (us/step: fixed costs removed)",
        f"{'mbdgen genalpha':<34}{g['mbdgen_ms']:>10.2f}{g['mbdgen_us_per_step']:>10.3f}",
        f"{'Exudyn SolveDynamic':<34}{g['exudyn_ms']:>10.2f}{g['exudyn_us_per_step']:>10.3f}",
        f"final [θ, φ, x, y]: |mbdgen - Exudyn| {g['max_abs_diff_mbdgen_exudyn']:.2e}; "
        f"against vabm at 1e-12: mbdgen {g['max_abs_error_mbdgen']:.2e}, Exudyn "
        f"{g['max_abs_error_exudyn']:.2e}",
        f"goal  generalized-α faster than Exudyn's: Exudyn / mbdgen per step "
        f"{g['ratio_exudyn_over_mbdgen_per_step']:.1f} (whole call "
        f"{g['ratio_exudyn_over_mbdgen_whole']:.1f})  {_goal(g['pass_faster'])}",
    ]


# --------------------------------------------------------------------------------------
# (f) Andrews' squeezing mechanism: work to a given final error.
# --------------------------------------------------------------------------------------

ANDREWS_PATH = ROOT / "models" / "andrews.py"
#: The two problems: the standard one (Hairer & Wanner 1991, §VII.7) and the one
#: Haug, Negrut & Iancu 1997 (§4.3) stiffen and damp (k = 30 000, c = 100 000).
ANDREWS_CASES: dict[str, dict[str, Any]] = {
    "standard": {"t_end": 0.03, "k": 4530.0, "c": 0.0},
    "stiff": {"t_end": 0.035, "k": 30000.0, "c": 100000.0},
}
#: Final error every method must reach: max over the seven angles of |q(t_end) − q_ref|.
ANDREWS_TARGET_ERROR = 1e-6
#: Tolerances tried, loosest first, rtol = atol (a quarter decade apart).
ANDREWS_TOLERANCES = tuple(10.0 ** (-3.0 - 0.25 * k) for k in range(37))
#: Output interval of the mbdgen runs (variable step: outputs on this grid only).
ANDREWS_OUTPUT_INTERVAL = 1e-3
GOAL_ANDREWS_RADAU_RATIO = 0.2  # HHT or generalized-α / Radau, at most
GOAL_ANDREWS_STIFF_SPEEDUP = 10.0  # vabm / HHT on the stiff problem, at least

#: The hook for the error-controlled implicit methods: method name → the
#: ``mbdgen.simulate`` keywords that ask it for the tolerance ``tol``.  A method whose
#: keywords ``simulate`` refuses, or ignores (a fixed-step run, see
#: :func:`error_control_available`), is reported as not yet available.
IMPLICIT_TOLERANCE_OPTIONS: dict[str, Callable[[float], dict[str, Any]]] = {
    "hht_adaptive": lambda tol: {"rtol": tol, "atol": tol},
    "genalpha_adaptive": lambda tol: {"rtol": tol, "atol": tol},
    "radau5": lambda tol: {"rtol": tol, "atol": tol},
}
#: The implicit methods whose best time the Andrews goals take (the issue names HHT and
#: generalized-α; Radau IIA is the implicit family's fifth-order member, reported apart).
ANDREWS_GOAL_METHODS = ("hht_adaptive", "genalpha_adaptive", "radau5")


def andrews_equations() -> tuple[Any, ...]:
    """Andrews' mechanism in the seven relative angles of Hairer & Wanner (SymPy).

    Written from the problem's own equations (Hairer & Wanner 1991, §VII.7; the Bari
    test set): q = (β, Θ, γ, Φ, δ, Ω, ε), M(q) q̈ = f(q, q̇) − Gᵀλ, g(q) = 0, with
    the mass matrix, the forces f1-f7 and the constraints g1-g6 as the problem gives
    them, and none of mbdgen's model, derivation or kernels (its 21 planar
    coordinates are an independent formulation of the same motion).  The spring
    becomes a spring–damper, F = −(k (L − l0) + c L̇)/L, so that the stiff variant of
    Haug, Negrut & Iancu 1997 (§4.3) is the same function with other k, c.

    Returns the symbols q, q̇, (k, c) and M, f, G = g_q, γ = −(G q̇)_q q̇, g.
    """
    import sympy as sp

    q = sp.symbols("beta Theta gamma Phi delta Omega epsilon")
    qd = sp.symbols("beta_d Theta_d gamma_d Phi_d delta_d Omega_d epsilon_d")
    k, c = sp.symbols("k c")
    be, th, ga, ph, de, om, ep = q
    bed, thd, gad, phd, ded, omd, epd = qd
    m1, m2, m3, m4, m5, m6, m7 = 0.04325, 0.00365, 0.02373, 0.00706, 0.07050, 0.00706, 0.05498
    i1, i2, i3, i4, i5, i6, i7 = (
        2.194e-6,
        4.410e-7,
        5.255e-6,
        5.667e-7,
        1.169e-5,
        5.667e-7,
        1.912e-5,
    )
    xa, ya, xb, yb, xc, yc = -0.06934, -0.00227, -0.03635, 0.03273, 0.014, 0.072
    d, da, e, ea, rr, ra = 28e-3, 115e-4, 2e-2, 1421e-5, 7e-3, 92e-5
    ss, sa, sb, sc, sd = 35e-3, 1874e-5, 1043e-5, 18e-3, 2e-2
    ta, tb, u, ua, ub = 2308e-5, 916e-5, 4e-2, 1228e-5, 449e-5
    zf, zt, fa = 2e-2, 4e-2, 1421e-5
    l0, mom = 7785e-5, 0.033
    cos, sin = sp.cos, sp.sin
    M = sp.zeros(7, 7)
    M[0, 0] = m1 * ra**2 + m2 * (rr**2 - 2 * da * rr * cos(th) + da**2) + i1 + i2
    M[1, 0] = M[0, 1] = m2 * (da**2 - da * rr * cos(th)) + i2
    M[1, 1] = m2 * da**2 + i2
    M[2, 2] = m3 * (sa**2 + sb**2) + i3
    M[3, 3] = m4 * (e - ea) ** 2 + i4
    M[4, 3] = M[3, 4] = m4 * ((e - ea) ** 2 + zt * (e - ea) * sin(ph)) + i4
    M[4, 4] = (
        m4 * (zt**2 + 2 * zt * (e - ea) * sin(ph) + (e - ea) ** 2)
        + m5 * (ta**2 + tb**2) + i4 + i5
    )  # fmt: skip
    M[5, 5] = m6 * (zf - fa) ** 2 + i6
    M[6, 5] = M[5, 6] = m6 * ((zf - fa) ** 2 - u * (zf - fa) * sin(om)) + i6
    M[6, 6] = (
        m6 * ((zf - fa) ** 2 - 2 * u * (zf - fa) * sin(om) + u**2)
        + m7 * (ua**2 + ub**2) + i6 + i7
    )  # fmt: skip
    xd = sd * cos(ga) + sc * sin(ga) + xb
    yd = sd * sin(ga) - sc * cos(ga) + yb
    length = sp.sqrt((xd - xc) ** 2 + (yd - yc) ** 2)
    length_d = (sp.diff(xd, ga) * (xd - xc) + sp.diff(yd, ga) * (yd - yc)) * gad / length
    F = -(k * (length - l0) + c * length_d) / length
    fx, fy = F * (xd - xc), F * (yd - yc)
    f = sp.Matrix(
        [
            mom - m2 * da * rr * thd * (thd + 2 * bed) * sin(th),
            m2 * da * rr * bed**2 * sin(th),
            fx * (sc * cos(ga) - sd * sin(ga)) + fy * (sd * cos(ga) + sc * sin(ga)),
            m4 * zt * (e - ea) * ded**2 * cos(ph),
            -m4 * zt * (e - ea) * phd * (phd + 2 * ded) * cos(ph),
            -m6 * u * (zf - fa) * epd**2 * cos(om),
            m6 * u * (zf - fa) * omd * (omd + 2 * epd) * cos(om),
        ]
    )
    base_x = rr * cos(be) - d * cos(be + th)
    base_y = rr * sin(be) - d * sin(be + th)
    g = sp.Matrix(
        [
            base_x - ss * sin(ga) - xb,
            base_y + ss * cos(ga) - yb,
            base_x - e * sin(ph + de) - zt * cos(de) - xa,
            base_y + e * cos(ph + de) - zt * sin(de) - ya,
            base_x - zf * cos(om + ep) - u * sin(ep) - xa,
            base_y - zf * sin(om + ep) + u * cos(ep) - ya,
        ]
    )
    G = g.jacobian(q)
    qd_vec = sp.Matrix(qd)
    gamma = -(G * qd_vec).jacobian(q) * qd_vec
    return q, qd, (k, c), M, f, G, gamma, g


#: The problem's consistent initial angles (β, Θ, γ, Φ, δ, Ω, ε); it starts at rest.
ANDREWS_ANGLES0 = (
    -0.0617138900142764496358948458001,
    0.0,
    0.455279819163070380255912382449,
    0.222668390165885884674473185609,
    0.487364979543842550225598953530,
    -0.222668390165885884674473185609,
    1.23054744454982119249735015568,
)


def andrews_right_side(k: float, c: float) -> Callable[[float, np.ndarray], np.ndarray]:
    """y' = [q̇; q̈] of :func:`andrews_equations` (index 1) for ``solve_ivp``.

    M, f, G, γ come from one ``sympy.lambdify`` (NumPy, common subexpressions);
    q̈, λ solve [[M, Gᵀ], [G, 0]] [q̈; λ] = [f; γ] by ``np.linalg.solve``.
    """
    import sympy as sp

    q, qd, kc, M, f, G, gamma, _ = andrews_equations()
    fn = sp.lambdify([list(q), list(qd), list(kc)], [M, f, G, gamma], modules="numpy", cse=True)
    spring = [float(k), float(c)]
    A = np.zeros((13, 13))
    b = np.zeros(13)

    def rhs(t: float, y: np.ndarray) -> np.ndarray:
        mass, force, jac, gam = fn(y[:7], y[7:], spring)
        A[:7, :7] = mass
        A[7:, :7] = jac
        A[:7, 7:] = np.transpose(jac)
        b[:7] = np.ravel(force)
        b[7:] = np.ravel(gam)
        return np.concatenate([y[7:], np.linalg.solve(A, b)[:7]])

    return rhs


def andrews_scipy(
    rhs: Callable[[float, np.ndarray], np.ndarray], t_end: float, method: str, tol: float
) -> np.ndarray:
    """The seven angles at ``t_end`` by ``scipy.integrate.solve_ivp`` (rtol = atol = tol)."""
    from scipy.integrate import solve_ivp

    y0 = np.concatenate([ANDREWS_ANGLES0, np.zeros(7)])
    sol = solve_ivp(rhs, (0.0, t_end), y0, method=method, rtol=tol, atol=tol)
    if not sol.success:
        raise RuntimeError(f"solve_ivp({method}, tol={tol:g}) failed: {sol.message}")
    return sol.y[:7, -1]


def andrews_reference(case: str, quick: bool = False) -> np.ndarray:
    """The angles at t_end, computed independently of mbdgen (:func:`andrews_equations`).

    Standard problem: DOP853 at rtol = atol = 1e-13 (measured: agrees with DOP853 at
    1e-12 and Radau at 1e-12 to 4e-12).  Stiff problem: Radau at 1e-12 (1e-10 when
    ``quick``; measured: the two agree to 2e-12, and LSODA at 1e-12 to 1e-11).
    """
    spec = ANDREWS_CASES[case]
    rhs = andrews_right_side(spec["k"], spec["c"])
    if case == "standard":
        return andrews_scipy(rhs, spec["t_end"], "DOP853", 1e-13)
    return andrews_scipy(rhs, spec["t_end"], "Radau", 1e-10 if quick else 1e-12)


def andrews_angles(q: np.ndarray) -> np.ndarray:
    """(β, Θ, γ, Φ, δ, Ω, ε) from the 21 planar coordinates of ``models/andrews.py``:
    the absolute angles φ_i are q[3i + 2], and β = φ1, Θ = φ2 − φ1, γ = φ3,
    Φ = φ4 − φ5, δ = φ5, Ω = φ6 − φ7, ε = φ7 (the model file's docstring)."""
    p = np.asarray(q)[..., 2::3]
    return np.stack(
        [p[..., 0], p[..., 1] - p[..., 0], p[..., 2], p[..., 3] - p[..., 4], p[..., 4],
         p[..., 5] - p[..., 6], p[..., 6]],
        axis=-1,
    )  # fmt: skip


def andrews_module() -> ModuleType:
    """The generated Andrews module (committed, or compiled into a temporary folder)."""
    return _example_module(ANDREWS_PATH)


def andrews_mbdgen(module: ModuleType, case: str, method: str, **keywords: Any) -> Any:
    """``mbdgen.simulate`` of an Andrews problem, outputs every millisecond."""
    import warnings

    import mbdgen

    spec = ANDREWS_CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # energy/constraint notes are not the bench's business
        return mbdgen.simulate(
            module, method=method, h=ANDREWS_OUTPUT_INTERVAL, t_end=spec["t_end"],
            params={"spring_k": spec["k"], "spring_c": spec["c"]}, **keywords,
        )  # fmt: skip


def error_control_available(method: str, keywords: dict[str, Any]) -> bool:
    """Whether ``simulate(method=..., **keywords)`` runs with error control.

    A probe on the pendulum (the smallest example, whose kernels the test suite
    compiles for every method) with one output interval h = 0.1: a fixed-step method
    takes exactly one step there whatever else it is told (``rtol`` is a keyword of
    ``simulate`` for every method, so ignoring it is possible); an error-controlled
    one at the hook's tolerance takes several.  A refusal (``MbdgenError``,
    ``TypeError``) or a failed run (``SimulationError``) counts as not available.
    """
    import warnings

    import mbdgen

    module = _example_module(ROOT / "models" / "pendulum.py")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = mbdgen.simulate(module, method=method, h=0.1, t_end=0.1, **keywords)
    except (mbdgen.MbdgenError, TypeError):
        return False
    return int(result.counters.get("steps", 1)) > 1


def at_error(
    run: Callable[[float], np.ndarray],
    reference: np.ndarray,
    target: float = ANDREWS_TARGET_ERROR,
    tolerances: Sequence[float] = ANDREWS_TOLERANCES,
) -> dict[str, Any] | None:
    """The loosest tolerance whose final error reaches ``target``.

    ``run(tol)`` returns the seven angles at t_end; the error is max |angles − reference|.
    Tries ``tolerances`` loosest first; a run that raises counts as not reaching it.
    Returns ``{"tol", "error", "tried"}`` or None when none reaches the target.
    """
    tried = []
    for tol in tolerances:
        try:
            err = float(np.max(np.abs(run(tol) - reference)))
        except Exception as exc:  # a failed run is a miss; keep searching tighter
            tried.append((tol, repr(exc)[:80]))
            continue
        tried.append((tol, err))
        if err <= target:
            return {"tol": tol, "error": err, "tried": tried}
    return None


def _loop_split(
    module: ModuleType, case: str, method: str, tol: float, repeats: int
) -> dict[str, Any]:
    """An mbdgen run's accepted steps, Newton iterations and the best of ``repeats``
    times of its jitted time loop alone (``counters["wall_time_s"]``): the rest of a
    ``simulate()`` call is its fixed cost (the checks at t0, the workspace, the Result,
    the energy and constraint checks, the output projection of the index-3 methods)."""
    loops, counters = [], {}
    for _ in range(repeats):
        counters = andrews_mbdgen(module, case, method, rtol=tol, atol=tol).counters
        loops.append(float(counters["wall_time_s"]))
    return {
        "loop_s": min(loops),
        "steps": int(counters.get("steps", 0)),
        "newton_iterations": int(counters.get("newton_iterations", 0)),
    }


def andrews_case(case: str, quick: bool = False, repeats: int = 3) -> dict[str, Any]:
    """Wall time of each method to reach :data:`ANDREWS_TARGET_ERROR` on one problem.

    Error: max over the seven angles of |q(t_end) − q_ref(t_end)|, mbdgen's 21
    coordinates mapped by :func:`andrews_angles`, the reference by
    :func:`andrews_reference`.  Each method at the loosest tolerance of
    :data:`ANDREWS_TOLERANCES` that reaches the target (:func:`at_error`), then timed
    best of ``repeats``: SciPy's Radau on :func:`andrews_right_side` (the
    ``sympy.lambdify`` is built once, outside the timing; Jacobian by SciPy's finite
    differences), mbdgen's ``vabm`` (index 1, constraints not stabilized) and every
    method of :data:`IMPLICIT_TOLERANCE_OPTIONS` whose error control is available.
    """
    spec = ANDREWS_CASES[case]
    reference = andrews_reference(case, quick)
    module = andrews_module()
    rhs = andrews_right_side(spec["k"], spec["c"])
    runs: dict[str, Callable[[float], np.ndarray]] = {
        "radau": lambda tol: andrews_scipy(rhs, spec["t_end"], "Radau", tol),
        "vabm": lambda tol: andrews_angles(
            andrews_mbdgen(module, case, "vabm", rtol=tol, atol=tol).q[-1]
        ),
    }
    rows: dict[str, dict[str, Any]] = {}
    for name, options in IMPLICIT_TOLERANCE_OPTIONS.items():
        if not error_control_available(name, options(1e-6)):
            rows[name] = {"available": False}
            continue
        runs[name] = lambda tol, name=name, options=options: andrews_angles(
            andrews_mbdgen(module, case, name, **options(tol)).q[-1]
        )
    for name, fn in runs.items():
        found = at_error(fn, reference)
        if found is None:
            rows[name] = {"available": True, "reached": False}
            continue
        best = _best(lambda fn=fn, tol=found["tol"]: fn(tol), repeats)
        rows[name] = {
            "available": True,
            "reached": True,
            "tol": found["tol"],
            "error": found["error"],
            "wall_s": best,
            "tries": len(found["tried"]),
        }
        if name != "radau":
            rows[name].update(_loop_split(module, case, name, found["tol"], repeats))
    return {
        "case": case,
        "t_end": spec["t_end"],
        "k": spec["k"],
        "c": spec["c"],
        "target_error": ANDREWS_TARGET_ERROR,
        "methods": rows,
    }


#: Final errors of the work-precision table (:func:`andrews_work_precision`).
WORK_PRECISION_ERRORS = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
#: Its tolerance grid: a quarter decade apart from 1e-1 (loose enough for 1e-2).
WORK_PRECISION_TOLERANCES = tuple(10.0 ** (-1.0 - 0.25 * k) for k in range(45))


def andrews_work_precision(
    case: str,
    targets: Sequence[float] = WORK_PRECISION_ERRORS,
    methods: Sequence[str] = ("vabm", "hht_adaptive", "genalpha_adaptive", "radau5"),
    repeats: int = 3,
) -> dict[str, Any]:
    """Wall time of each method against the final error it reaches, for ``targets``.

    For each target, each method's loosest tolerance of
    :data:`WORK_PRECISION_TOLERANCES` that reaches it (:func:`at_error`; the search for
    a tighter target starts where the looser one stopped) and the best of ``repeats``
    ``simulate()`` calls there, with its steps and Newton iterations.  One number at
    one error says little when the methods' orders differ (vabm up to 12, HHT 2): on
    the stiff problem vabm's cost is set by stability and HHT's by accuracy, so their
    ratio depends on the error asked for, and the table shows where each wins.
    """

    spec = ANDREWS_CASES[case]
    reference = andrews_reference(case)
    module = andrews_module()
    rows: dict[str, list[dict[str, Any]]] = {}
    for name in methods:
        start = 0
        rows[name] = []
        for target in targets:
            grid = WORK_PRECISION_TOLERANCES[start:]

            def angles(tol: float, name: str = name) -> np.ndarray:
                return andrews_angles(andrews_mbdgen(module, case, name, rtol=tol, atol=tol).q[-1])

            found = at_error(angles, reference, target=target, tolerances=grid)
            if found is None:
                rows[name].append({"target": target, "reached": False})
                continue
            start = WORK_PRECISION_TOLERANCES.index(found["tol"])
            best = _best(lambda tol=found["tol"], name=name: angles(tol, name), repeats)
            rows[name].append(
                {
                    "target": target,
                    "reached": True,
                    "tol": found["tol"],
                    "error": found["error"],
                    "wall_s": best,
                    **_loop_split(module, case, name, found["tol"], repeats),
                }
            )
    return {"case": case, "k": spec["k"], "c": spec["c"], "t_end": spec["t_end"], "rows": rows}


def work_precision_report(wp: dict[str, Any]) -> list[str]:
    """Lines of :func:`andrews_work_precision`'s table, with vabm / HHT per error."""
    rows = wp["rows"]
    names = list(rows)
    lines = [
        f"  work against error, {wp['case']} Andrews (k = {wp['k']:g}, c = {wp['c']:g}): "
        "ms per simulate() at the loosest tolerance reaching each final error (steps)",
        f"    {'error':>8}" + "".join(f"{n:>24}" for n in names) + f"{'vabm / hht':>12}"
        + f"{'loops alone':>13}",
    ]  # fmt: skip
    for i, target in enumerate(rows[names[0]]):
        cells = [
            f"{r['wall_s'] * 1e3:>14.2f} ({r['steps']:>5})" if r["reached"] else f"{'-':>22}"
            for r in (rows[n][i] for n in names)
        ]
        a, b = rows["vabm"][i], rows["hht_adaptive"][i]
        both = a["reached"] and b["reached"]
        ratio = a["wall_s"] / b["wall_s"] if both else None
        loops = a["loop_s"] / b["loop_s"] if both and a.get("loop_s") and b.get("loop_s") else None
        lines.append(
            f"    {target['target']:>8.0e}" + "".join(f"{c:>24}" for c in cells)
            + ("" if ratio is None else f"{ratio:>12.1f}")
            + ("" if loops is None else f"{loops:>13.1f}")
        )  # fmt: skip
    return lines


# --------------------------------------------------------------------------------------
# (g) The implicit methods together: cases, goals and report.
# --------------------------------------------------------------------------------------

GOAL_IMPLICIT_COLD_S = 30.0  # fresh Numba cache to the end of the first hht step, at most


def _seconds(row: dict[str, Any]) -> float | None:
    return row["wall_s"] if row.get("reached") else None


def andrews_goals(cases: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The Andrews goals of the issue from :func:`andrews_case`'s rows; a goal whose
    method has no error control yet is None (reported "n/a (not yet available)").

    Standard: the faster of HHT and generalized-α ≤ 0.2× Radau and faster than vabm;
    stiff: HHT at least 10× faster than vabm — all at the same target error.
    """
    std = cases["standard"]["methods"]
    stiff = cases["stiff"]["methods"]

    def best_of(rows: dict[str, dict[str, Any]], names: Sequence[str]) -> float | None:
        times = [t for t in (_seconds(rows[k]) for k in names if k in rows) if t is not None]
        return min(times) if times else None

    second_order = ("hht_adaptive", "genalpha_adaptive")
    best = best_of(std, ANDREWS_GOAL_METHODS)
    radau, vabm = _seconds(std["radau"]), _seconds(std["vabm"])
    hht_stiff = best_of(stiff, ANDREWS_GOAL_METHODS)
    vabm_stiff = _seconds(stiff["vabm"])
    ratio_radau = best / radau if best is not None and radau else None
    ratio_vabm = best / vabm if best is not None and vabm else None
    speedup = vabm_stiff / hht_stiff if hht_stiff and vabm_stiff is not None else None
    hht_only = best_of(std, second_order)
    hht_only_stiff = best_of(stiff, second_order)
    loop_vabm, loop_hht = stiff["vabm"].get("loop_s"), stiff.get("hht_adaptive", {}).get("loop_s")
    return {
        # the time loops alone: what the 10x asks of the integrator, without the ~0.2-0.5
        # ms a simulate() call costs around its loop (set-up, checks, Result, projection)
        "andrews_stiff_vabm_over_hht_loop": loop_vabm / loop_hht
        if loop_vabm and loop_hht
        else None,
        "andrews_stiff_fixed_cost_s": {
            name: row["wall_s"] - row["loop_s"]
            for name, row in stiff.items()
            if row.get("reached") and "loop_s" in row
        },
        "andrews_second_order_over_radau": hht_only / radau if hht_only and radau else None,
        "andrews_stiff_vabm_over_second_order": vabm_stiff / hht_only_stiff
        if hht_only_stiff and vabm_stiff is not None
        else None,
        "andrews_implicit_over_radau": ratio_radau,
        "andrews_implicit_over_vabm": ratio_vabm,
        "andrews_vabm_over_radau": vabm / radau if vabm and radau else None,
        "andrews_stiff_vabm_over_hht": speedup,
        "pass_andrews_radau": None
        if ratio_radau is None
        else ratio_radau <= GOAL_ANDREWS_RADAU_RATIO,
        "pass_andrews_vabm": None if ratio_vabm is None else ratio_vabm < 1.0,
        "pass_andrews_stiff": None if speedup is None else speedup >= GOAL_ANDREWS_STIFF_SPEEDUP,
    }


def implicit_cases(module: ModuleType, quick: bool = False) -> dict[str, Any]:
    """The speed section of the implicit methods (issue 10): the HHT step against the
    hand-written one (:func:`hht_case`), generalized-α against Exudyn's
    (:func:`genalpha_exudyn_case`), Andrews to a final error (:func:`andrews_case`,
    both problems) and the cold compile of an ``hht`` run."""
    hht = hht_case(module, 2000 if quick else 20000, 5 if quick else 25)
    andrews = {case: andrews_case(case, quick, 1 if quick else 3) for case in ANDREWS_CASES}
    # a cold compile costs ~20 s, too much for the quick (smoke) run
    cold = None if quick else cold_warm(warm_repeats=2, method="hht")
    stiff = None if quick else andrews_work_precision("stiff")
    exudyn = None if quick else genalpha_exudyn_case(module)
    return {
        "hht": hht,
        "genalpha_exudyn": exudyn,
        "andrews": andrews,
        "andrews_stiff_work_precision": stiff,
        **andrews_goals(andrews),
        "hht_cold": cold,
        "pass_hht_cold": None
        if cold is None
        else bool(cold["cold_total_s"] < GOAL_IMPLICIT_COLD_S),
        "pass_hht_warm_cache": None
        if cold is None
        else bool(
            cold["warm_cache_misses"] == 0
            and cold["warm_cache_hits"] > 0
            and cold["warm_numba_compilations"] == 0
        ),
    }


def _goal(flag: bool | None) -> str:
    return "n/a (not yet available)" if flag is None else ("PASS" if flag else "FAIL")


def implicit_report(r: dict[str, Any]) -> str:
    """Lines of :func:`implicit_cases`' results for :func:`report`."""
    h = r["hht"]
    lines = [
        f"implicit: {h['problem']}, {h['steps']} steps",
        f"{'implementation':<34}{'us/step':>10}{'Newton/step':>13}{'factorizations':>16}",
        f"{'mbdgen hht (whole call)':<34}{h['mbdgen_us_per_step']:>10.3f}"
        f"{h['mbdgen_newton_per_step']:>13.3f}{h['mbdgen_factorizations']:>16}",
        f"{'  of which the jitted loop':<34}{h['mbdgen_loop_us_per_step']:>10.3f}",
        f"{'  per step (slope, 2x the steps)':<34}{h['mbdgen_slope_us_per_step']:>10.3f}",
        f"{'hand-written @njit HHT':<34}{h['handwritten_us_per_step']:>10.3f}"
        f"{h['handwritten_newton_per_step']:>13.3f}{h['handwritten_factorizations']:>16}",
        f"{'  per step (slope, 2x the steps)':<34}{h['handwritten_slope_us_per_step']:>10.3f}",
        f"max |q_mbdgen - q_handwritten| over the run: {h['max_abs_q_difference']:.2e}",
        f"goal  mbdgen hht / hand-written <= {h['goal_ratio']:g}, whole call and per step: "
        f"{h['ratio_mbdgen_over_handwritten']:.2f} and {h['ratio_slope']:.2f} (loop alone "
        f"{h['ratio_loop_over_handwritten']:.2f})  {_goal(h['pass_ratio'])}",
        "",
        *genalpha_exudyn_report(r.get("genalpha_exudyn")),
        "",
        f"Andrews' squeezing mechanism to a final error <= {ANDREWS_TARGET_ERROR:g} (max over "
        "the 7 angles of |q(t_end) - q_ref|; loosest rtol = atol of a quarter-decade grid "
        "reaching it):",
    ]
    for case, data in r["andrews"].items():
        lines.append(f"  {case} (k = {data['k']:g}, c = {data['c']:g}, t_end = {data['t_end']:g}):")
        for name, row in data["methods"].items():
            label = "scipy Radau (lambdify)" if name == "radau" else f"mbdgen {name}"
            if not row["available"]:
                text = "n/a (not yet available)"
            elif not row["reached"]:
                text = "did not reach the target error"
            else:
                text = (
                    f"{row['wall_s'] * 1e3:9.2f} ms  tol {row['tol']:.2e}  error {row['error']:.2e}"
                )
            lines.append(f"    {label:<26}{text}")

    def val(x: float | None, fmt: str) -> str:
        return "n/a" if x is None else format(x, fmt)

    lines += [
        f"  vabm / Radau (standard): {val(r['andrews_vabm_over_radau'], '.3f')}",
        f"  HHT or genalpha alone: / Radau "
        f"{val(r.get('andrews_second_order_over_radau'), '.3f')}, stiff vabm / them "
        f"{val(r.get('andrews_stiff_vabm_over_second_order'), '.1f')}",
        f"goal  Andrews: best implicit (HHT, genalpha, radau5) / Radau <= "
        f"{GOAL_ANDREWS_RADAU_RATIO:g}: "
        f"{val(r['andrews_implicit_over_radau'], '.3f')}  {_goal(r['pass_andrews_radau'])}",
        f"goal  Andrews: best implicit faster than vabm: "
        f"{val(r['andrews_implicit_over_vabm'], '.3f')}  {_goal(r['pass_andrews_vabm'])}",
        f"goal  stiff Andrews: vabm / best implicit >= {GOAL_ANDREWS_STIFF_SPEEDUP:g}: "
        f"{val(r['andrews_stiff_vabm_over_hht'], '.1f')}  {_goal(r['pass_andrews_stiff'])}",
        f"  stiff, the time loops alone: vabm / hht_adaptive "
        f"{val(r.get('andrews_stiff_vabm_over_hht_loop'), '.1f')}; a call's time outside "
        "its loop: "
        + ", ".join(
            f"{name} {sec * 1e3:.2f} ms"
            for name, sec in (r.get("andrews_stiff_fixed_cost_s") or {}).items()
        ),
    ]
    for case, data in r["andrews"].items():
        steps = {k: v["steps"] for k, v in data["methods"].items() if v.get("steps")}
        if steps:
            lines.append(
                f"  steps to the target, {case}: " + ", ".join(f"{k} {v}" for k, v in steps.items())
            )
    if r.get("andrews_stiff_work_precision"):
        lines += work_precision_report(r["andrews_stiff_work_precision"])
    lines.append("")
    c = r["hht_cold"]
    if c is None:
        lines.append("cold compile, hht: skipped in the quick run")
        return "\n".join(lines)
    lines += [
        f"cold compile, hht (generate + JIT + 1 step, empty cache): {c['cold_total_s']:.2f} s "
        f"(generate {c['cold_generate_s']:.2f} s, JIT + first step {c['cold_jit_s']:.2f} s, "
        f"{c['cold_numba_compilations']} Numba compilation(s))",
        f"warm start, hht: {c['warm_total_s']:.2f} s; {c['warm_cache_hits']} hit(s), "
        f"{c['warm_cache_misses']} miss(es), {c['warm_numba_compilations']} Numba "
        "compilation(s)",
        f"goal  cold compile with hht < {GOAL_IMPLICIT_COLD_S:g} s: {c['cold_total_s']:.2f} s  "
        f"{_goal(r['pass_hht_cold'])}",
        f"goal  warm hht start compiles nothing: {_goal(r['pass_hht_warm_cache'])}",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# (s) Sweeps: many runs of the slider-crank on threads and on a Dask LocalCluster.
# --------------------------------------------------------------------------------------

SWEEP_RUNS = 1000
SWEEP_T_END = 10.0
#: Runs record every this many steps (the final state is exact; extrema on a 0.1 s grid).
SWEEP_OUTPUT_EVERY = 100
GOAL_SWEEP_THREADS = 1.8  # serial loop / in-process on 2 cores, at least
GOAL_SWEEP_DASK = 1.2  # Dask LocalCluster (2 workers) / in-process, at most
GOAL_SWEEP_DASK_OVERHEAD_MS = 5.0  # Dask's extra wall time per run, at most


def sweep_plan(runs: int = SWEEP_RUNS, seed: int = 0) -> Any:
    """Random masses and lengths of the slider-crank (±10 % uniform around the
    published values; each set assembled with θ0 held)."""
    from mbdgen.sweeps import sample

    ranges = {"m": (0.9, 1.1), "J1": (0.0405, 0.0495), "J2": (0.9 * 33 / 4800, 1.1 * 33 / 4800),
              "r": (0.27, 0.33), "L": (0.45, 0.55), "L1": (0.27, 0.33)}  # fmt: skip
    return sample(ranges, runs, seed=seed)


def sweep_options(t_end: float = SWEEP_T_END) -> dict[str, Any]:
    """The benchmark problem's simulate options (ABM 4 PECE, α = β = 5, order ramp)."""
    return dict(method="abm", order=ORDER, h=H, t_end=t_end, alpha=ALPHA, beta=BETA,
                start="ramp", assemble=["theta"], output_every=SWEEP_OUTPUT_EVERY)  # fmt: skip


def sweep_bench(
    runs: int = SWEEP_RUNS,
    t_end: float = SWEEP_T_END,
    repeats: int = 2,
    workers: int = 2,
    exudyn: bool = True,
) -> dict[str, Any]:
    """Wall time of one sweep of ``runs`` sets: the serial loop (one thread), the
    in-process pool of ``workers`` threads and a Dask ``LocalCluster`` of ``workers``
    single-threaded worker processes; best of ``repeats``, each writing its folder.

    With ``exudyn`` and Exudyn installed (the ``bench`` extra), also the same plan
    through Exudyn's ``ParameterVariation`` on ``workers`` processes, once (see
    :mod:`mbdgen.bench_exudyn`), and how far its final crank angles lie from
    mbdgen's."""
    import mbdgen

    module = mbdgen_module()
    plan, options = sweep_plan(runs), sweep_options(t_end)
    mbdgen.sweep(module, plan.iloc[:2], workers=1, **options)  # JIT or cache load
    load_before = os.getloadavg()
    stepping: list[float] = []
    tables: list[Any] = []

    def timed(**kw: Any) -> float:
        best = math.inf
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                done = mbdgen.sweep(module, plan, path=Path(tmp) / "s", **options, **kw)
                best = min(best, time.perf_counter() - start)
            stepping.append(float(done.table["counter.wall_time_s"].sum()))
            assert (done.table["status"] == "finished").all()
            tables.append(done.table)
        return best

    serial = timed(workers=1)
    threads = timed(workers=workers)
    from distributed import Client, LocalCluster

    start = time.perf_counter()
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:  # fmt: skip
        mbdgen.sweep(module, plan.iloc[: 2 * workers], client=client, batch_size=1, **options)
        cluster_start = time.perf_counter() - start
        dask = timed(client=client)
    exu = _exudyn_column(module, runs, t_end, workers, tables[0]) if exudyn else None
    load_after = os.getloadavg()
    return {
        "exudyn": exu,
        "runs": runs,
        "t_end": t_end,
        "steps_per_run": int(round(t_end / H)),
        "workers": workers,
        "serial_s": serial,
        "threads_s": threads,
        "dask_s": dask,
        "serial_ms_per_run": 1e3 * serial / runs,
        "stepping_ms_per_run": 1e3 * min(stepping[:repeats]) / runs,
        "threads_speedup": serial / threads,
        "dask_over_threads": dask / threads,
        "dask_overhead_ms_per_run": 1e3 * (dask - threads) / runs,
        "dask_cluster_start_s": cluster_start,
        "load_average_before": load_before[0],
        "load_average_after": load_after[0],
        "pass_threads": serial / threads >= GOAL_SWEEP_THREADS,
        "pass_dask": dask / threads <= GOAL_SWEEP_DASK,
        "pass_dask_overhead": 1e3 * (dask - threads) / runs <= GOAL_SWEEP_DASK_OVERHEAD_MS,
    }


def _exudyn_column(
    module: ModuleType, runs: int, t_end: float, workers: int, table: Any
) -> dict[str, Any]:
    """Exudyn's ParameterVariation over the same plan (None values: not installed)."""
    from mbdgen import bench_exudyn

    if not bench_exudyn.available():
        return {"installed": False}
    defaults = module_defaults(module)
    out = bench_exudyn.exudyn_sweep(runs, 0, t_end, H, workers, defaults, float(module.Q0[0]))
    assert out is not None
    theta = out["final_q"][:, 0]
    mine = table.sort_values("run")["final.q.theta"].to_numpy()
    diff = np.abs(theta - mine)
    return {
        "installed": True,
        "version": bench_exudyn.version(),
        "wall_s": out["wall_s"],
        "ms_per_run": 1e3 * out["wall_s"] / runs,
        "max_abs_diff_final_theta": float(diff.max()),
        "median_abs_diff_final_theta": float(np.median(diff)),
    }


#: The per-call cost beyond the loop that a prepared run is to reach (issue goal).
GOAL_PREPARED_US = 20.0
PREPARED_METHODS = ("abm", "hht", "dop853")


def prepared_bench(calls: int = 200, rounds: int = 3, steps: int = 10) -> list[dict[str, Any]]:
    """What a call costs beyond its integration loop (the call's time less the
    loop's ``wall_time_s``), for :func:`mbdgen.simulate` and for a run made once by
    :func:`mbdgen.prepare` and called again: the slider-crank, ``steps`` steps per
    call, median of ``calls`` calls per round, best of ``rounds`` interleaved rounds
    (wall time and process CPU time)."""
    import mbdgen
    from mbdgen.analysis.assembly import assemble

    module = mbdgen_module()
    q0 = assemble(module, hold=["theta"]).q
    rows = []
    for method in PREPARED_METHODS:
        options = {"h": H, "t_end": steps * H}
        run = mbdgen.prepare(module, method, **options)
        ways = {
            "simulate": partial(mbdgen.simulate, module, method, q0=q0, **options),
            "prepared": partial(run, q0=q0),
        }
        for way in ways.values():  # entry points chosen, kernels loaded
            for _ in range(10):
                way()
        best: dict[str, dict[str, float]] = {}
        for _ in range(rounds):
            for name, way in ways.items():
                beyond, cpu = [], []
                for _ in range(calls):
                    w0, c0 = time.perf_counter(), time.process_time()
                    result = way()
                    w, c = time.perf_counter() - w0, time.process_time() - c0
                    loop = float(result.counters["wall_time_s"])
                    beyond.append(w - loop)
                    cpu.append(c)
                numbers = {"beyond_us": 1e6 * float(np.median(beyond)),
                           "cpu_us": 1e6 * float(np.median(cpu))}  # fmt: skip
                old = best.get(name)
                if old is None or numbers["beyond_us"] < old["beyond_us"]:
                    best[name] = numbers
        rows.append({"method": method, "steps": steps, **{
            f"{name}_{key}": value for name, numbers in best.items()
            for key, value in numbers.items()
        }})  # fmt: skip
    return rows


def prepared_report(rows: list[dict[str, Any]]) -> str:
    """The prepared-run numbers as text."""
    lines = [
        f"many short runs: the slider-crank, {rows[0]['steps']} steps a call; the time of "
        "a call beyond its loop (median; process CPU of the whole call in brackets)",
        "  method    simulate()          prepared run        prepared / simulate",
    ]
    for r in rows:
        lines.append(
            f"  {r['method']:<8}  {r['simulate_beyond_us']:6.0f} µs ({r['simulate_cpu_us']:4.0f})"
            f"      {r['prepared_beyond_us']:6.0f} µs ({r['prepared_cpu_us']:4.0f})"
            f"      {r['prepared_beyond_us'] / r['simulate_beyond_us']:.2f}"
        )
    worst = max(r["prepared_beyond_us"] for r in rows)
    lines.append(
        f"goal  prepared run beyond its loop <= {GOAL_PREPARED_US:g} µs: {worst:.0f} µs  "
        f"{_goal(worst <= GOAL_PREPARED_US)} (the checks at t0 and at the end, the Result "
        "and its energy check stay per call: docs/design-notes.md, Prepared runs)"
    )
    return "\n".join(lines)


def sweep_report(s: dict[str, Any]) -> str:
    """The sweep numbers as text."""
    e = s.get("exudyn")
    if e is None:
        exu = ["  Exudyn ParameterVariation: not run"]
    elif not e["installed"]:
        exu = ["  Exudyn ParameterVariation: not installed (pip install 'mbdgen[bench]')"]
    else:
        exu = [
            f"  Exudyn {e['version']} ParameterVariation ({s['workers']} processes, "
            f"generalized-α) {e['wall_s']:8.2f} s  ({e['ms_per_run']:.2f} ms/run; "
            f"Exudyn / mbdgen threads {e['wall_s'] / s['threads_s']:.1f})",
            f"    final θ, Exudyn vs mbdgen: max |Δ| {e['max_abs_diff_final_theta']:.2e} rad, "
            f"median {e['median_abs_diff_final_theta']:.2e} rad (generalized-α, 2nd order, "
            "vs ABM 4)",
        ]
    return "\n".join(
        [
            f"sweep: {s['runs']} runs of the slider-crank, {s['steps_per_run']} steps each "
            f"(random masses and lengths, ABM 4, α = β = 5), {s['workers']} cores",
            f"  serial loop        {s['serial_s']:8.2f} s  ({s['serial_ms_per_run']:.2f} ms/run, "
            f"of which stepping {s['stepping_ms_per_run']:.2f} ms)",
            f"  in-process threads {s['threads_s']:8.2f} s",
            f"  Dask LocalCluster  {s['dask_s']:8.2f} s  "
            f"(cluster start {s['dask_cluster_start_s']:.1f} s, not counted)",
            *exu,
            f"  load average {s['load_average_before']:.2f} before, {s['load_average_after']:.2f} "
            "after (other processes share the cores)",
            f"goal  serial / threads >= {GOAL_SWEEP_THREADS:g}: {s['threads_speedup']:.2f}  "
            f"{_goal(s['pass_threads'])}",
            f"goal  Dask / threads <= {GOAL_SWEEP_DASK:g}: {s['dask_over_threads']:.2f}  "
            f"{_goal(s['pass_dask'])}",
            f"goal  Dask overhead per run <= {GOAL_SWEEP_DASK_OVERHEAD_MS:g} ms: "
            f"{s['dask_overhead_ms_per_run']:.2f} ms  {_goal(s['pass_dask_overhead'])}",
        ]
    )
