"""``mbdgen bench --chain``: chains of N links against a hand-written O(N) Numba RK4.

The speed targets of the sparse-linear-algebra issue are judged here (run as
``mbdgen bench --chain [--quick] [-o numbers.json]``; ``make bench`` includes it).
Three measurements, all times with :func:`time.perf_counter`, warm (the Numba cache
filled by a first call, whose time is reported apart as ``first_call_s``), best of a
few repeats:

(1) **Time to 1e-6 over 5 s** for the planar N-link chain of ``models/planar_chain.py``
    (N uniform slender rods, L = 1 m, m = 1 kg, J = m L²/12, hinged end to end, the
    first pinned at the origin, all along +x at rest, g = 9.81 m/s² along −y), N = 8,
    16, 32, 64, 128.  The error of a run is

        e = max_i |θ_i(5) − θ_i^ref(5)|,

    the largest error of the N absolute link angles at t = 5 s; the reference θ^ref
    is :func:`reference_angles` (SciPy's DOP853 at rtol = atol = 1e-13 on the O(N)
    right side below).  For each contender the cheapest setting with e ≤ 1e-6 is
    found (:func:`largest_step`: the largest fixed step h = 5/n, within 10 %; or
    :func:`loosest_tolerance`: from the grid :data:`TOLERANCES`, bisected to a factor
    :data:`TOLERANCE_RESOLUTION`) and timed:

    * the hand-written baseline :func:`handwritten_chain`: classic RK4 on the 2N
      minimal coordinates (θ, θ̇), whose right side :func:`_chain_accelerations` is
      O(N) (a block-tridiagonal solve for the joint forces, see below), the whole
      integration in one ``@njit(cache=True)`` call, nothing allocated per step;
    * mbdgen (``mbdgen.simulate``, the whole call) with each method of
      :data:`CHAIN_METHODS`: fixed-step ones by their step, error-controlled ones by
      their tolerance; the best is compared with the baseline (ratio mbdgen ÷ hand-written,
      the issue's target ≤ 1.0);
    * MuJoCo where it is installed (``pip install mbdgen[bench]``): an MJCF chain of
      hinge joints (:func:`mujoco_xml`), its RK4 integrator, the largest timestep
      meeting 1e-6.

(2) **Per-step cost against N** of a cheap fixed-step method (:data:`SCALE_METHOD`,
    one fixed h) for planar chains N = 8 … 1000 and spatial chains
    (:func:`mbdgen.model.spatial.chain`, spherical joints) N = 8 … 256, with the
    exponent p of t_step ∝ N^p fitted by least squares on log t against log N
    (the issue's target p ≤ 1.2).  A size whose predecessor took more than
    :data:`SCALE_BUDGET_S` seconds per 10 steps is skipped as too slow.

The baseline in equations.  Link i (0-based) has the angle θ_i from the x axis,
u_i = (cos θ_i, sin θ_i), n_i = (−sin θ_i, cos θ_i), half length l = L/2; F_i is the
force that link i − 1 (the ground for i = 0) exerts on link i at their common joint,
F_N = 0.  Newton–Euler for each link (Haug 1989, Eq. 6.1.21 with the joint reactions
as the unknowns),

    m a_i = F_i − F_{i+1} + m g,       J θ̈_i = −l n_i·(F_i + F_{i+1}),

and the joint conditions "acceleration of the proximal end of link i = acceleration
of the distal end of link i − 1" (zero for i = 0), with a_end = a_i ∓ l(θ̈_i n_i −
θ̇_i² u_i), give for F a symmetric positive definite block-tridiagonal system with
2×2 blocks (it is Φ_q M⁻¹ Φ_qᵀ of the absolute-coordinate model, Haug 1989,
Eq. 6.3.x, written per joint): with P_i = (l²/J) n_i n_iᵀ and μ = 1/m,

    D_0 = μI + P_0,   D_i = 2μI + P_i + P_{i−1},   B_i = P_i − μI   (coupling i, i+1),
    r_0 = −g − l θ̇_0² u_0,   r_i = −l θ̇_i² u_i − l θ̇_{i−1}² u_{i−1},

solved by block Gaussian elimination without pivoting (block Thomas, O(N)); then
θ̈_i follows from the moment equation.  The state (θ, θ̇) satisfies the joints
exactly, so the baseline has no constraint drift.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numba
import numpy as np
from numba import njit

from mbdgen import _numba_cache  # noqa: F401  (sets Numba's cache folder before the @njit below)
from mbdgen.bench import _best, bench_temp_dir

ROOT = Path(__file__).resolve().parent.parent
PLANAR_CHAIN_MODEL = ROOT / "models" / "planar_chain.py"

#: The mechanism (models/planar_chain.py): rods of length L, mass m, J = m L²/12.
LENGTH = 1.0
MASS = 1.0
INERTIA = MASS * LENGTH**2 / 12.0
GRAVITY = 9.81
T_END = 5.0
TARGET_ERROR = 1e-6

ERROR_SIZES = (8, 16, 32, 64, 128)
QUICK_ERROR_SIZES = (8, 16)
PLANAR_SCALE_SIZES = (8, 16, 32, 64, 128, 256, 512, 1000)
SPATIAL_SCALE_SIZES = (8, 16, 32, 64, 128, 256)
QUICK_PLANAR_SCALE_SIZES = (8, 16, 32)
QUICK_SPATIAL_SCALE_SIZES = (8, 16)

#: mbdgen's contenders for time-to-error: (method, fixed step or tolerance).
CHAIN_METHODS: dict[str, str] = {
    "abm": "step",
    "rk4": "step",
    "vabm": "tolerance",
    "rkf45_adaptive": "tolerance",
    "dop853": "tolerance",
}
#: Tolerances tried by the error-controlled methods, loosest first.
TOLERANCES = (1e-5, 3e-6, 1e-6, 3e-7, 1e-7, 3e-8, 1e-8, 3e-9, 1e-9, 1e-10, 1e-11)
#: The bracket between the last failing and the first passing tolerance is bisected to
#: this factor (for vabm at order ~10, about 3 % in steps).
TOLERANCE_RESOLUTION = 1.4
#: Output interval of the error-controlled methods (their h).
ADAPTIVE_OUTPUT = 0.5
#: The per-step scaling: one cheap fixed-step method at one h.
SCALE_METHOD = "rk4"
SCALE_H = 1e-3
#: Skip the next size when a size took longer than this per 10 steps.
SCALE_BUDGET_S = 5.0
#: A time-to-error search gives up on a contender whose next run would take longer.
RUN_BUDGET_S = 20.0
QUICK_RUN_BUDGET_S = 5.0
#: A contender is first run over T/PROBE_FRACTION; ×PROBE_FRACTION predicts a full run.
PROBE_FRACTION = 20
#: Targets of the issue.
GOAL_RATIO = 1.0
GOAL_EXPONENT = 1.2


# --------------------------------------------------------------------------------------
# (1) The hand-written O(N) baseline.
# --------------------------------------------------------------------------------------


@njit(cache=True)
def _chain_accelerations(theta, omega, L, m, J, g, acc, work):  # pragma: no cover - jitted
    """θ̈ of the planar rod chain from (θ, θ̇) in O(N): see the module docstring.

    ``work`` is an (N, 8) array: per joint the inverse of the eliminated diagonal block
    (three entries of a symmetric 2×2), the eliminated right side (2), the coupling
    block B_i (3).  The joint forces overwrite the right side in the back substitution.
    """
    nl = theta.shape[0]
    l = 0.5 * L
    mu = 1.0 / m
    kap = l * l / J
    # previous link's P and ω² u, carried along the forward sweep
    pxx_prev = 0.0
    pxy_prev = 0.0
    pyy_prev = 0.0
    wx_prev = 0.0
    wy_prev = 0.0
    for i in range(nl):
        c = math.cos(theta[i])
        s = math.sin(theta[i])
        nx = -s
        ny = c
        pxx = kap * nx * nx
        pxy = kap * nx * ny
        pyy = kap * ny * ny
        w2 = omega[i] * omega[i] * l
        wx = w2 * c
        wy = w2 * s
        if i == 0:
            dxx = mu + pxx
            dxy = pxy
            dyy = mu + pyy
            rx = -wx
            ry = g - wy
        else:
            dxx = 2.0 * mu + pxx + pxx_prev
            dxy = pxy + pxy_prev
            dyy = 2.0 * mu + pyy + pyy_prev
            rx = -wx - wx_prev
            ry = -wy - wy_prev
            # eliminate with the previous block row: D -= B E⁻¹ Bᵀ, r -= B E⁻¹ r'
            bxx = work[i - 1, 5]
            bxy = work[i - 1, 6]
            byy = work[i - 1, 7]
            exx = work[i - 1, 0]
            exy = work[i - 1, 1]
            eyy = work[i - 1, 2]
            # T = B E⁻¹ (B and E⁻¹ symmetric)
            txx = bxx * exx + bxy * exy
            txy = bxx * exy + bxy * eyy
            tyx = bxy * exx + byy * exy
            tyy = bxy * exy + byy * eyy
            dxx -= txx * bxx + txy * bxy
            dxy -= txx * bxy + txy * byy
            dyy -= tyx * bxy + tyy * byy
            rx -= txx * work[i - 1, 3] + txy * work[i - 1, 4]
            ry -= tyx * work[i - 1, 3] + tyy * work[i - 1, 4]
        inv = 1.0 / (dxx * dyy - dxy * dxy)
        work[i, 0] = dyy * inv
        work[i, 1] = -dxy * inv
        work[i, 2] = dxx * inv
        work[i, 3] = rx
        work[i, 4] = ry
        work[i, 5] = pxx - mu
        work[i, 6] = pxy
        work[i, 7] = pyy - mu
        pxx_prev = pxx
        pxy_prev = pxy
        pyy_prev = pyy
        wx_prev = wx
        wy_prev = wy
    # back substitution: F_i = E_i⁻¹ (r'_i − B_i F_{i+1}); θ̈_i = −(l/J) n_i·(F_i + F_{i+1})
    fx_next = 0.0
    fy_next = 0.0
    lj = l / J
    for i in range(nl - 1, -1, -1):
        rx = work[i, 3] - (work[i, 5] * fx_next + work[i, 6] * fy_next)
        ry = work[i, 4] - (work[i, 6] * fx_next + work[i, 7] * fy_next)
        fx = work[i, 0] * rx + work[i, 1] * ry
        fy = work[i, 1] * rx + work[i, 2] * ry
        acc[i] = -lj * (-math.sin(theta[i]) * (fx + fx_next) + math.cos(theta[i]) * (fy + fy_next))
        fx_next = fx
        fy_next = fy


@njit(cache=True)
def _chain_rk4(theta, omega, h, n_steps, L, m, J, g):  # pragma: no cover - jitted
    """Classic fourth-order Runge–Kutta on y = (θ, θ̇), in place, n_steps of h."""
    nl = theta.shape[0]
    work = np.empty((nl, 8))
    th = np.empty(nl)
    om = np.empty(nl)
    k1 = np.empty(nl)
    k2 = np.empty(nl)
    k3 = np.empty(nl)
    k4 = np.empty(nl)
    half = 0.5 * h
    sixth = h / 6.0
    for _ in range(n_steps):
        # stage 1: θ' = ω, ω' = k1
        _chain_accelerations(theta, omega, L, m, J, g, k1, work)
        for i in range(nl):
            th[i] = theta[i] + half * omega[i]
            om[i] = omega[i] + half * k1[i]
        # stage 2 (its θ' is om, stored in th's update below)
        _chain_accelerations(th, om, L, m, J, g, k2, work)
        for i in range(nl):
            w2 = om[i]
            th[i] = theta[i] + half * w2
            om[i] = omega[i] + half * k2[i]
            k1[i] += 2.0 * k2[i]  # k1 now holds k1 + 2 k2 (accelerations)
            k2[i] = w2  # k2 now holds the stage-2 velocity
        _chain_accelerations(th, om, L, m, J, g, k3, work)
        for i in range(nl):
            w3 = om[i]
            th[i] = theta[i] + h * w3
            om[i] = omega[i] + h * k3[i]
            k1[i] += 2.0 * k3[i]
            k2[i] += w3  # stage-2 + stage-3 velocities
        _chain_accelerations(th, om, L, m, J, g, k4, work)
        for i in range(nl):
            theta[i] += sixth * (omega[i] + 2.0 * k2[i] + om[i])
            omega[i] += sixth * (k1[i] + k4[i])


@njit(cache=True)
def _chain_rhs(y, L, m, J, g):  # pragma: no cover - jitted
    """y' = (θ̇, θ̈) for SciPy (allocates: the reference is not timed)."""
    nl = y.shape[0] // 2
    out = np.empty(2 * nl)
    work = np.empty((nl, 8))
    out[:nl] = y[nl:]
    _chain_accelerations(y[:nl], y[nl:], L, m, J, g, out[nl:], work)
    return out


def handwritten_chain(
    n_links: int, h: float, t_end: float = T_END, theta0: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """θ, θ̇ at ``t_end`` of the hand-written RK4 (steps of ``h``; t_end/h rounded)."""
    n_steps = max(1, round(t_end / h))
    theta = np.full(n_links, float(theta0))
    omega = np.zeros(n_links)
    _chain_rk4(theta, omega, t_end / n_steps, n_steps, LENGTH, MASS, INERTIA, GRAVITY)
    return theta, omega


def reference_angles(
    n_links: int, t_end: float = T_END, accuracy: float = TARGET_ERROR * 1e-3
) -> dict[str, Any]:
    """θ(t_end) far more accurate than the target: Richardson-extrapolated RK4.

    The baseline at n and 2n steps (n doubling from 4000) until the estimate
    max|θ_2n − θ_n|/15 of the error of θ_2n (RK4's error ∝ h⁴) is below
    ``accuracy`` (1e-9 by default, 1000 times below the target); the reference is
    (16 θ_2n − θ_n)/15, whose error is smaller still.  The unit test checks it against
    SciPy's DOP853 at rtol = atol = 1e-13 on the same right side.
    """
    n = 4000
    prev, _ = handwritten_chain(n_links, t_end / n, t_end)
    while True:
        cur, _ = handwritten_chain(n_links, t_end / (2 * n), t_end)
        estimate = float(np.max(np.abs(cur - prev))) / 15.0
        if estimate < accuracy or n >= 2**24:
            return {"theta": (16.0 * cur - prev) / 15.0, "steps": 2 * n, "estimate": estimate}
        prev = cur
        n *= 2


def scipy_reference(n_links: int, t_end: float = T_END, tol: float = 1e-13) -> np.ndarray:
    """θ(t_end) by ``scipy.integrate.solve_ivp`` DOP853 (rtol = atol = ``tol``) on
    :func:`_chain_rhs`: the same equations as the baseline, another integrator."""
    from scipy.integrate import solve_ivp

    y0 = np.zeros(2 * n_links)
    args = (LENGTH, MASS, INERTIA, GRAVITY)
    sol = solve_ivp(
        lambda t, y: _chain_rhs(y, *args), (0.0, t_end), y0, method="DOP853", rtol=tol, atol=tol
    )
    if not sol.success:
        raise RuntimeError(f"reference N={n_links}: {sol.message}")
    return sol.y[:n_links, -1]


# --------------------------------------------------------------------------------------
# The chains as mbdgen models.
# --------------------------------------------------------------------------------------

SPATIAL_CHAIN_SOURCE = '''"""Spatial N-link chain for ``mbdgen bench --chain`` (spherical joints).

Written by :mod:`mbdgen.bench_chain`; N comes from the file name.  Square prisms of
length 1 m joined by spherical joints (:func:`mbdgen.model.spatial.chain`), the first
to the ground at the origin, along +x at rest, g = 9.81 m/s² along −z.
"""

from pathlib import Path

from mbdgen.model import Mechanism, spatial

NAME = Path(__file__).stem
N = int(NAME.rsplit("_", 1)[-1])


def build_model() -> Mechanism:
    bodies, elements = spatial.chain(N, length=1.0, direction=(1.0, 0.0, 0.0))
    return Mechanism(name=NAME, description=f"spatial {N}-link chain", bodies=bodies,
                     elements=elements)
'''


def bench_dir() -> Path:
    """A per-user folder for the chain models and their generated modules; it is kept
    between runs, so their Numba cache (in mbdgen's usual cache folder) stays warm.
    Its parent is private (:func:`mbdgen.bench.bench_temp_dir`): the modules in it are
    imported."""
    path = bench_temp_dir() / "chains"
    path.mkdir(exist_ok=True)
    return path


def chain_module(n_links: int, kind: str = "planar") -> tuple[ModuleType, float]:
    """The compiled ``planar_chain_<N>`` (a copy of models/planar_chain.py) or
    ``spatial_chain_<N>`` module, and the seconds spent generating it (0 when the
    generated module was current)."""
    import mbdgen
    from mbdgen.compiler import generated_path, stale_reason

    base = bench_dir()
    model = base / f"{kind}_chain_{n_links}.py"
    text = (
        PLANAR_CHAIN_MODEL.read_text(encoding="utf-8") if kind == "planar" else SPATIAL_CHAIN_SOURCE
    )
    if not model.is_file() or model.read_text(encoding="utf-8") != text:
        model.write_text(text, encoding="utf-8")
    out = base / "generated"
    stale = stale_reason(model, generated_path(model, out)) is not None
    t0 = time.perf_counter()
    module = mbdgen.compile(model, out)
    return module, (time.perf_counter() - t0) if stale else 0.0


def _simulate(module: ModuleType, method: str, setting: float, t_end: float = T_END) -> Any:
    """``mbdgen.simulate`` of the chain from its model's start; ``setting`` is the
    number of fixed steps, or the tolerance of an error-controlled method."""
    import warnings

    import mbdgen

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # energy/constraint notes are not the bench's business
        if CHAIN_METHODS.get(method, "step") == "tolerance":
            return mbdgen.simulate(
                module, method, h=min(ADAPTIVE_OUTPUT, t_end), t_end=t_end,
                rtol=setting, atol=setting,
            )  # fmt: skip
        n = int(setting)
        return mbdgen.simulate(module, method, h=t_end / n, t_end=t_end, output_every=n)


def planar_angles(result: Any) -> np.ndarray:
    """The link angles φ_i at the last output of a planar chain run (q = [x, y, φ]ᵢ)."""
    return np.asarray(result.q[-1])[2::3]


# --------------------------------------------------------------------------------------
# Time to the target error.
# --------------------------------------------------------------------------------------


def largest_step(
    run: Callable[[int], np.ndarray],
    reference: np.ndarray,
    n_start: int,
    order: int = 4,
    target: float = TARGET_ERROR,
    budget_s: float = RUN_BUDGET_S,
    n_max: int = 2**24,
) -> dict[str, Any]:
    """The fewest fixed steps n (h = T/n) whose final error ≤ ``target``.

    ``run(n)`` returns the angles at T.  From ``n_start`` the step count moves by the
    error model e ∝ n^(−order) (at least ×1.25, at most ×4 a move) until one passing
    and one failing count are known, then bisects (geometric mean) until they are
    within 10 % of each other.  A run that raises or gives a non-finite error fails.
    Stops early when the next run's predicted time exceeds ``budget_s``.  Returns
    ``{"n", "error", "tried"}`` (tried: (n, error, seconds) per run); ``n`` is None
    when no count reached the target.
    """
    tried: list[tuple[int, float, float]] = []
    passed: dict[int, float] = {}
    failed: set[int] = set()
    n = int(n_start)
    per_step = 0.0
    for _ in range(16):
        t0 = time.perf_counter()
        try:
            err = float(np.max(np.abs(run(n) - reference)))
        except Exception:  # a failed run is a miss
            err = math.inf
        seconds = time.perf_counter() - t0
        per_step = max(per_step, seconds / n)
        if not math.isfinite(err):
            err = math.inf
        tried.append((n, err, seconds))
        if err <= target:
            passed[n] = err
        else:
            failed.add(n)
        lo = max(failed, default=None)
        hi = min(passed, default=None)
        if lo is not None and hi is not None:
            if hi <= lo * 1.1 or hi - lo <= 1:
                break
            nxt = round(math.sqrt(hi * lo))
        elif hi is None:
            factor = 2.0 if err == math.inf else (err / target) ** (1.0 / order) * 1.05
            nxt = math.ceil(n * min(4.0, max(1.25, factor)))
        else:
            factor = (target / max(err, 1e-300)) ** (1.0 / order) * 0.95
            nxt = max(1, math.floor(n / min(4.0, max(1.25, factor))))
        if nxt > n_max or (nxt > n and per_step * nxt > budget_s) or nxt in passed or nxt in failed:
            break
        n = nxt
    best = min(passed, default=None)
    return {"n": best, "error": passed.get(best) if best else None, "tried": tried}


def loosest_tolerance(
    run: Callable[[float], np.ndarray],
    reference: np.ndarray,
    tolerances: Sequence[float] = TOLERANCES,
    target: float = TARGET_ERROR,
    budget_s: float = RUN_BUDGET_S,
    resolution: float = TOLERANCE_RESOLUTION,
) -> dict[str, Any]:
    """The loosest tolerance whose final error ≤ ``target`` (``{"tol", "error",
    "tried"}``, tol None when none did or the budget ran out).

    ``tolerances`` are tried loosest first; once one passes after one that failed, the
    interval between them is bisected geometrically until its ends are within a factor
    ``resolution``, the loosest passing tolerance kept.  The grid alone (a factor 3.2)
    decided by chance near the target: on the 8-link chain vabm's error at 1e-8 was
    0.87e-6 in one build and just above 1e-6 in another whose rounding differed, and the
    run at 1e-9 took 1.3× longer.  The fixed-step search (:func:`largest_step`) brackets
    its step count to 10 % in the same way.
    """
    tried: list[tuple[float, float, float]] = []

    def attempt(tol: float) -> tuple[float, float]:
        t0 = time.perf_counter()
        try:
            err = float(np.max(np.abs(run(tol) - reference)))
        except Exception:
            err = math.inf
        seconds = time.perf_counter() - t0
        tried.append((tol, err, seconds))
        return err, seconds

    failed = None
    for tol in tolerances:
        err, seconds = attempt(tol)
        if err <= target:
            best, best_err = tol, err
            while failed is not None and failed / best > resolution:
                mid = math.sqrt(failed * best)
                err, seconds = attempt(mid)
                if err <= target:
                    best, best_err = mid, err
                else:
                    failed = mid
                if seconds * 1.6 > budget_s:
                    break
            return {"tol": best, "error": best_err, "tried": tried}
        failed = tol
        if seconds * 1.6 > budget_s:  # the next, tighter one costs more
            break
    return {"tol": None, "error": None, "tried": tried}


def _timed_best(fn: Callable[[], object], seconds: float, repeats: int) -> float:
    """Best of ``seconds`` (the search's own run of the setting) and further repeats:
    none for runs longer than 2 s, ``repeats`` for shorter ones, and at least 7 for
    runs under 0.5 s (on a loaded machine a cheap run is easily doubled by others)."""
    if seconds > 2.0:
        return seconds
    return min(seconds, _best(fn, max(repeats, 7) if seconds < 0.5 else repeats))


def _seconds_of(tried: Sequence[tuple[Any, float, float]], setting: Any) -> float:
    return min(s for x, _, s in tried if x == setting)


def error_case(n_links: int, quick: bool = False, repeats: int = 3) -> dict[str, Any]:
    """Time to :data:`TARGET_ERROR` at t = 5 s for the N-link planar chain: the
    baseline, each method of :data:`CHAIN_METHODS` and MuJoCo (see the module doc)."""
    budget = QUICK_RUN_BUDGET_S if quick else RUN_BUDGET_S
    t0 = time.perf_counter()
    handwritten_chain(n_links, 0.01, 0.01)  # JIT or cache load
    base_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = reference_angles(n_links)
    ref_s = time.perf_counter() - t0
    reference = ref["theta"]

    def base_run(n: int) -> np.ndarray:
        return handwritten_chain(n_links, T_END / n)[0]

    found = largest_step(base_run, reference, 2000, budget_s=budget)
    n_base = found["n"]
    base: dict[str, Any] = {"first_call_s": base_first, "steps": n_base, "error": found["error"]}
    if n_base is not None:
        base["h"] = T_END / n_base
        base["run_s"] = _timed_best(
            lambda: base_run(n_base), _seconds_of(found["tried"], n_base), repeats
        )
    module, generate_s = chain_module(n_links)
    methods: dict[str, dict[str, Any]] = {}
    for name, kind in CHAIN_METHODS.items():
        t0 = time.perf_counter()
        try:
            _simulate(module, name, 1e-3 if kind == "tolerance" else 2, t_end=0.002)
        except Exception as exc:  # a method the model refuses is reported, not fatal
            methods[name] = {"available": False, "why": str(exc).splitlines()[0][:120]}
            continue
        row: dict[str, Any] = {"available": True, "first_call_s": time.perf_counter() - t0}
        # a probe over T/20 at the loosest setting the search starts from predicts a run
        first = TOLERANCES[0] if kind == "tolerance" else max(1, (n_base or 2000) // PROBE_FRACTION)
        t0 = time.perf_counter()
        try:
            _simulate(module, name, first, t_end=T_END / PROBE_FRACTION)
        except Exception:
            pass  # the search reports it
        row["predicted_run_s"] = (time.perf_counter() - t0) * PROBE_FRACTION
        if row["predicted_run_s"] > budget:
            row.update(reached=False, not_run=True,
                       why=f"a run would take ~{row['predicted_run_s']:.0f} s "
                       f"(budget {budget:g} s)")  # fmt: skip
            methods[name] = row
            continue
        if kind == "tolerance":
            res = loosest_tolerance(
                lambda tol, name=name: planar_angles(_simulate(module, name, tol)),
                reference,
                budget_s=budget,
            )
            setting = res["tol"]
            row.update(tol=setting, error=res["error"], tries=len(res["tried"]))
        else:
            res = largest_step(
                lambda n, name=name: planar_angles(_simulate(module, name, n)),
                reference,
                n_base or 2000,
                budget_s=budget,
            )
            setting = res["n"]
            row.update(steps=setting, error=res["error"], tries=len(res["tried"]))
            if setting is not None:
                row["h"] = T_END / setting
        row["reached"] = setting is not None
        if setting is not None:
            row["run_s"] = _timed_best(
                lambda name=name, setting=setting: _simulate(module, name, setting),
                _seconds_of(res["tried"], setting),
                repeats,
            )
        else:
            row["why"] = "no setting reached the target within the time budget"
        methods[name] = row
    timed = {k: v["run_s"] for k, v in methods.items() if v.get("run_s") is not None}
    best = min(timed, key=timed.__getitem__) if timed else None
    out: dict[str, Any] = {
        "links": n_links,
        "reference_steps": ref["steps"],
        "reference_error_estimate": ref["estimate"],
        "reference_s": ref_s,
        "generate_s": generate_s,
        "handwritten": base,
        "mbdgen": methods,
        "best_method": best,
        "mujoco": mujoco_case(n_links, reference, budget, repeats),
    }
    if best is not None and base.get("run_s"):
        out["ratio_best_over_handwritten"] = timed[best] / base["run_s"]
        out["pass_ratio"] = bool(out["ratio_best_over_handwritten"] <= GOAL_RATIO)
    predicted = [v["predicted_run_s"] for v in methods.values() if v.get("predicted_run_s")]
    if best is None and predicted and base.get("run_s"):
        # every contender over the budget: its probe at the loosest setting bounds the
        # time to the target from below (a tighter setting costs more)
        out["ratio_lower_bound"] = min(predicted) / base["run_s"]
    mj = out["mujoco"]
    if best is not None and mj.get("run_s"):
        out["ratio_best_over_mujoco"] = timed[best] / mj["run_s"]
    return out


# --------------------------------------------------------------------------------------
# MuJoCo (optional).
# --------------------------------------------------------------------------------------


def mujoco_xml(n_links: int) -> str:
    """MJCF of the same chain: nested bodies with hinge joints about z at their
    proximal ends, rods along x (mass m, inertia diag(≈0, J, J) about the centroid),
    gravity along −y, contacts off, MuJoCo's RK4 integrator."""
    inner = ""
    for _ in range(n_links):
        inner = (
            '<body pos="{x} 0 0"><joint type="hinge" axis="0 0 1"/>'
            f'<inertial pos="{LENGTH / 2} 0 0" mass="{MASS}" '
            f'diaginertia="1e-9 {INERTIA!r} {INERTIA!r}"/>' + inner + "</body>"
        )
    # the first body sits at the origin, every later one at the distal end of its parent
    inner = inner.replace("{x}", "0", 1).replace("{x}", repr(LENGTH))
    return (
        '<mujoco model="chain"><option integrator="RK4" '
        f'gravity="0 {-GRAVITY!r} 0"><flag contact="disable"/></option>'
        f"<worldbody>{inner}</worldbody></mujoco>"
    )


def mujoco_case(
    n_links: int, reference: np.ndarray, budget_s: float = RUN_BUDGET_S, repeats: int = 3
) -> dict[str, Any]:
    """MuJoCo's largest RK4 timestep meeting the target, timed (``mj_step`` with
    ``nstep``: the loop runs in C); ``{"available": False}`` when not installed."""
    try:
        import mujoco
    except ImportError:
        return {"available": False, "why": "not installed"}
    t0 = time.perf_counter()
    model = mujoco.MjModel.from_xml_string(mujoco_xml(n_links))
    data = mujoco.MjData(model)
    build_s = time.perf_counter() - t0

    def run(n: int) -> np.ndarray:
        mujoco.mj_resetData(model, data)
        model.opt.timestep = T_END / n
        mujoco.mj_step(model, data, nstep=n)
        return np.cumsum(data.qpos)  # absolute angles from the relative hinge angles

    found = largest_step(run, reference, 2000, budget_s=budget_s)
    row: dict[str, Any] = {
        "available": True,
        "version": mujoco.__version__,
        "first_call_s": build_s,
        "steps": found["n"],
        "error": found["error"],
    }
    if found["n"] is not None:
        n = found["n"]
        row["h"] = T_END / n
        row["run_s"] = _timed_best(lambda: run(n), _seconds_of(found["tried"], n), repeats)
    return row


# --------------------------------------------------------------------------------------
# (2) Per-step cost against N.
# --------------------------------------------------------------------------------------


def fit_exponent(rows: Sequence[dict[str, Any]], key: str = "us_per_step") -> float | None:
    """p of t ∝ N^p by least squares on (log N, log t) over the measured rows."""
    pts = [(r["links"], r[key]) for r in rows if r.get(key)]
    if len(pts) < 2:
        return None
    x = np.log([p[0] for p in pts])
    y = np.log([p[1] for p in pts])
    return float(np.polyfit(x, y, 1)[0])


def scale_case(kind: str, sizes: Sequence[int], quick: bool = False) -> dict[str, Any]:
    """µs per step (warm) of :data:`SCALE_METHOD` at h = :data:`SCALE_H` for chains of
    ``sizes`` links, and the fitted exponent.  Steps per timing: about 0.5 s worth
    (2 to 2000); best of 3 (1 for slow sizes).  After a size that took more than
    :data:`SCALE_BUDGET_S` per 10 steps the larger ones are skipped."""
    rows: list[dict[str, Any]] = []
    too_slow = False
    for n_links in sizes:
        if too_slow:
            rows.append({"links": n_links, "skipped": "too slow"})
            continue
        module, generate_s = chain_module(n_links, kind)
        t0 = time.perf_counter()
        _simulate(module, SCALE_METHOD, 1, t_end=SCALE_H)  # JIT or cache load
        first = time.perf_counter() - t0
        probe = _best(lambda m=module: _simulate(m, SCALE_METHOD, 2, t_end=2 * SCALE_H), 1) / 2
        steps = int(min(2000, max(2, 0.5 // max(probe, 1e-9))))
        repeats = 1 if probe * steps > 2.0 or quick else 3
        wall = _best(
            lambda m=module, k=steps: _simulate(m, SCALE_METHOD, k, t_end=k * SCALE_H), repeats
        )
        row: dict[str, Any] = {
            "links": n_links,
            "n": int(module.N_COORDINATES),
            "m": int(module.N_CONSTRAINTS),
            "generate_s": generate_s,
            "first_call_s": first,
            "steps": steps,
            "us_per_step": wall / steps * 1e6,
        }
        if kind == "planar":
            handwritten_chain(n_links, SCALE_H, SCALE_H)
            k = max(200, int(2e6 // n_links))
            hw = _best(lambda n=n_links, k=k: handwritten_chain(n, SCALE_H, k * SCALE_H), 3)
            row["handwritten_us_per_step"] = hw / k * 1e6
        rows.append(row)
        too_slow = wall / steps * 10 > SCALE_BUDGET_S
    exponent = fit_exponent(rows)
    return {
        "kind": kind,
        "method": SCALE_METHOD,
        "h": SCALE_H,
        "rows": rows,
        "exponent": exponent,
        "handwritten_exponent": fit_exponent(rows, "handwritten_us_per_step"),
        "goal_exponent": GOAL_EXPONENT,
        "pass_exponent": None if exponent is None else bool(exponent <= GOAL_EXPONENT),
        "sizes_complete": not any(r.get("skipped") for r in rows),
    }


# --------------------------------------------------------------------------------------
# The whole bench and its report.
# --------------------------------------------------------------------------------------


def run(quick: bool = False) -> dict[str, Any]:
    """Both parts of the chain bench; a JSON-serialisable dict (times in seconds,
    per-step times in µs).  ``quick`` runs N = 8, 16 for the time to error and short
    size ranges for the scaling, with tighter time budgets."""
    if not PLANAR_CHAIN_MODEL.is_file():
        from mbdgen.errors import MbdgenError

        raise MbdgenError(
            f"mbdgen bench --chain needs a source checkout: {PLANAR_CHAIN_MODEL} not found "
            "(run it from the repository, e.g. `make bench`)"
        )
    repeats = 2 if quick else 3
    cases = [error_case(n, quick, repeats) for n in (QUICK_ERROR_SIZES if quick else ERROR_SIZES)]
    planar = scale_case("planar", QUICK_PLANAR_SCALE_SIZES if quick else PLANAR_SCALE_SIZES, quick)
    spatial = scale_case(
        "spatial", QUICK_SPATIAL_SCALE_SIZES if quick else SPATIAL_SCALE_SIZES, quick
    )
    ratios = [c.get("ratio_best_over_handwritten") for c in cases]
    return {
        "quick": quick,
        "problem": "planar N-link chain of slender rods, 5 s from rest along +x; "
        "error = max |theta_i(5) - theta_ref_i(5)| over the link angles",
        "python": sys.version.split()[0],
        "numba": numba.__version__,
        "numpy": np.__version__,
        "cpu_count": os.cpu_count() or 0,
        "target_error": TARGET_ERROR,
        "t_end": T_END,
        "time_to_error": cases,
        "goal_ratio": GOAL_RATIO,
        "pass_ratio": bool(all(r is not None and r <= GOAL_RATIO for r in ratios)),
        "scale_planar": planar,
        "scale_spatial": spatial,
    }


def _fmt(x: float | None, spec: str, missing: str = "-") -> str:
    return missing if x is None else format(x, spec)


def report(r: dict[str, Any]) -> str:
    """Tables of :func:`run`'s results, as in the issue."""
    cases = r["time_to_error"]
    sizes = [c["links"] for c in cases]
    width = 11
    head = f"{'N':<34}" + "".join(f"{n:>{width}}" for n in sizes)
    lines = [
        f"mbdgen bench --chain{' (quick)' if r['quick'] else ''}: {r['problem']}",
        "",
        f"time to error <= {r['target_error']:g} at t = {r['t_end']:g} s "
        "(run s, warm, best of repeats; h or tol found by search):",
        head,
    ]

    def line(label: str, values: Sequence[str]) -> str:
        return f"{label:<34}" + "".join(f"{v:>{width}}" for v in values)

    lines.append(
        line(
            "hand-written Numba RK4, s", [_fmt(c["handwritten"].get("run_s"), ".4f") for c in cases]
        )
    )
    lines.append(line("  its h", [_fmt(c["handwritten"].get("h"), ".2e") for c in cases]))
    for name, kind in CHAIN_METHODS.items():
        vals, sets = [], []
        for c in cases:
            row = c["mbdgen"][name]
            if not row.get("available"):
                vals.append("n/a")
                sets.append("n/a")
                continue
            est = f">~{row.get('predicted_run_s', 0):.0f}" if row.get("not_run") else "budget"
            vals.append(_fmt(row.get("run_s"), ".4f", est))
            sets.append(_fmt(row.get("h") if kind == "step" else row.get("tol"), ".1e"))
        lines.append(line(f"mbdgen {name}, s", vals))
        lines.append(line(f"  its {'h' if kind == 'step' else 'tol'}", sets))
    mj = [c["mujoco"] for c in cases]
    if all(not m.get("available") for m in mj):
        lines.append(line("MuJoCo RK4, s", ["not inst."] * len(cases)))
    else:
        lines.append(line("MuJoCo RK4, s", [_fmt(m.get("run_s"), ".4f", "budget") for m in mj]))
        lines.append(line("  its h", [_fmt(m.get("h"), ".2e") for m in mj]))
    lines.append(line("mbdgen best method", [c.get("best_method") or "-" for c in cases]))
    lines.append(
        line(
            "hand-written first call, s",
            [_fmt(c["handwritten"].get("first_call_s"), ".2f") for c in cases],
        )
    )
    lines.append(
        line(
            "mbdgen best / hand-written",
            [
                _fmt(c.get("ratio_best_over_handwritten"), ".2f")
                if c.get("ratio_lower_bound") is None
                else f">{c['ratio_lower_bound']:.0f}"
                for c in cases
            ],
        )
    )
    if any(c.get("ratio_best_over_mujoco") for c in cases):
        lines.append(
            line(
                "mbdgen best / MuJoCo",
                [_fmt(c.get("ratio_best_over_mujoco"), ".2f") for c in cases],
            )
        )
    lines.append(
        line(
            "first call (JIT/cache) abm, s",
            [_fmt(c["mbdgen"]["abm"].get("first_call_s"), ".2f") for c in cases],
        )
    )
    lines.append(line("generate (0 if current), s", [_fmt(c["generate_s"], ".2f") for c in cases]))
    budget = QUICK_RUN_BUDGET_S if r["quick"] else RUN_BUDGET_S
    lines += [
        f"(>~X: not run, a run was predicted to take X s, over the budget of {budget:g} s;",
        " budget: the search stopped at the budget before reaching the target;",
        " >R: every method over the budget, R from their probes at the loosest setting;",
        " first call: JIT or Numba cache load plus a 2-step run)",
    ]
    lines.append(
        f"goal  mbdgen best / hand-written <= {r['goal_ratio']:g} for every N: "
        f"{'PASS' if r['pass_ratio'] else 'FAIL'}"
    )
    for key in ("scale_planar", "scale_spatial"):
        s = r[key]
        lines += [
            "",
            f"per-step cost, {s['kind']} chains, {s['method']} h = {s['h']:g} (warm, us/step):",
            f"{'N':>6}{'n':>7}{'m':>7}{'us/step':>14}{'hand-written':>14}{'first call s':>14}"
            f"{'generate s':>12}",
        ]
        for row in s["rows"]:
            if row.get("skipped"):
                lines.append(f"{row['links']:>6}  skipped ({row['skipped']})")
                continue
            lines.append(
                f"{row['links']:>6}{row['n']:>7}{row['m']:>7}{row['us_per_step']:>14.1f}"
                f"{_fmt(row.get('handwritten_us_per_step'), '.2f'):>14}"
                f"{row['first_call_s']:>14.2f}{row['generate_s']:>12.2f}"
            )
        done = [row["links"] for row in s["rows"] if not row.get("skipped")]
        span = f"N = {done[0]}..{done[-1]}" if done else "no sizes"
        verdict = "-" if s["pass_exponent"] is None else ("PASS" if s["pass_exponent"] else "FAIL")
        note = "" if s["sizes_complete"] else " (not every size measured)"
        lines.append(
            f"fitted exponent ({span}): {_fmt(s['exponent'], '.2f')}"
            + (
                f", hand-written {s['handwritten_exponent']:.2f}"
                if s.get("handwritten_exponent") is not None
                else ""
            )
            + f"; goal <= {s['goal_exponent']:g}: {verdict}{note}"
        )
    return "\n".join(lines)
