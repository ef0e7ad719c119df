"""Kinematic analysis of a kinematically driven system (Haug 1989 ch. 4-5).

A system is kinematically driven when its constraints, the kinematic ones and the
rheonomic drivers Φ^D(q, t) = 0 together, determine q at every instant: rank Φ_q = n
(Haug 1989 ch. 5).  At each requested time :func:`kinematics` solves

1. the position equations Φ(q, t) = 0 (Haug 1989 Eq. 7.2.2) by Newton's method
   Φ_q Δq = −Φ (ch. 4), started from the previous solution extrapolated with its
   velocity and acceleration, q + Δt q̇ + ½Δt² q̈;
2. the velocity equations Φ_q q̇ = ν = −Φ_t (Eq. 7.2.3);
3. the acceleration equations Φ_q q̈ = γ (the second row of Eq. 7.2.1).

A consistent system with redundant rows (m > n, rank n) is solved in the least-squares
sense, which is exact for consistent equations.

Singular configurations (Haug 1989 ch. 5: lock-up, toggle and bifurcation positions,
where Φ_q loses rank) are detected two ways: the condition number σ_max/σ_min of Φ_q
exceeds ``1 / singular_tol`` at a solution, or Newton's method fails to converge even
as the time step is halved down to ``min_step`` — past a toggle position there is no
solution at all, so the step halving closes in on the singular time.  Either raises
:class:`SingularConfigurationError` naming the time and the condition number, with the
solution computed so far attached.

This is Python-level work on the generated kernels: each time step costs a handful of
kernel calls and an n × n factorization.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np

from mbdgen import geometry
from mbdgen.analysis.assembly import _kernel, redundant_rows
from mbdgen.errors import MbdgenError, SimulationError
from mbdgen.results import Result

#: Default ``singular_tol``: Φ_q counts as singular when σ_min / σ_max falls below it.
SINGULAR_TOL = 1e-8
#: Default number of time steps when neither ``h`` nor ``steps`` is given.
DEFAULT_STEPS = 100


class SingularConfigurationError(SimulationError):
    """Φ_q became singular (or Newton's method found no solution) at time ``t``.

    ``result`` holds the solution at the requested times before ``t``; ``condition`` is
    the condition number of Φ_q at the last solution found.
    """

    def __init__(self, message: str, result: object | None, t: float, condition: float) -> None:
        super().__init__(message, result)
        self.t = t
        self.condition = condition


def condition_number(phi_q: np.ndarray) -> float:
    """σ_max / σ_min of Φ_q over its n column directions (∞ when rank Φ_q < n)."""
    sigma = np.linalg.svd(phi_q, compute_uv=False)
    n = phi_q.shape[1]
    if sigma.size < n or sigma[n - 1] == 0.0:
        return float("inf")
    return float(sigma[0] / sigma[n - 1])


def newton_positions(
    module: ModuleType,
    t: float,
    q: np.ndarray,
    p: np.ndarray,
    *,
    tol: float,
    max_iterations: int,
) -> tuple[np.ndarray, int] | None:
    """Solve Φ(q, t) = 0 from the guess ``q`` by Newton's method (least-squares steps).

    Returns the solution and the iterations taken, or ``None`` when ‖Φ‖∞ ≤ ``tol`` is not
    reached in ``max_iterations`` iterations (or the iterates blow up).
    """
    q = q.copy()
    phi = _kernel(module, "phi", t, q, p)
    for iteration in range(max_iterations + 1):
        err = float(np.abs(phi).max(initial=0.0))
        if err <= tol:
            return q, iteration
        if not np.isfinite(err) or iteration == max_iterations:
            return None
        jac = _kernel(module, "phi_q", t, q, p)
        step, *_ = np.linalg.lstsq(jac, -phi, rcond=None)
        q += step
        phi = _kernel(module, "phi", t, q, p)
    return None  # pragma: no cover


def _time_grid(t0: float, t_end: float, h: float | None, steps: int | None) -> np.ndarray:
    if t_end <= t0:
        raise MbdgenError(f"t_end = {t_end:g} must be later than t0 = {t0:g}")
    if h is not None and steps is not None:
        raise MbdgenError("give the time step h or the number of steps, not both")
    if h is not None:
        if not h > 0:
            raise MbdgenError(f"the time step h = {h:g} must be positive")
        steps = max(1, round((t_end - t0) / h))
        if abs(t0 + steps * h - t_end) > 1e-9 * max(1.0, abs(t_end)):
            raise MbdgenError(
                f"h = {h:g} does not divide [{t0:g}, {t_end:g}] into whole steps; "
                "give --steps instead"
            )
    if steps is None:
        steps = DEFAULT_STEPS
    if steps < 1:
        raise MbdgenError(f"the number of steps must be at least 1 (got {steps})")
    return np.linspace(t0, t_end, steps + 1)


def _check_determined(module: ModuleType, phi_q: np.ndarray) -> None:
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    rank, _ = redundant_rows(phi_q) if m else (0, [])
    if rank < n:
        dof = n - rank
        raise MbdgenError(
            f"model {module.MODEL_NAME!r} is not kinematically determined: rank Φ_q = {rank} "
            f"< n = {n} coordinates ({m} constraints), leaving {dof} degree(s) of freedom; "
            f"add {dof} driving constraint(s) such as `coordinate - f(t)` for kinematic "
            "analysis (or use equilibrium/simulate)"
        )


def kinematics(
    model: ModuleType | str | Path,
    t_end: float = 1.0,
    h: float | None = None,
    *,
    steps: int | None = None,
    t0: float = 0.0,
    params: Mapping[str, float] | None = None,
    q0: Sequence[float] | None = None,
    tol: float = 1e-12,
    max_iterations: int = 25,
    singular_tol: float = SINGULAR_TOL,
    min_step: float | None = None,
) -> Result:
    """Positions, velocities and accelerations of a driven system on [t0, t_end].

    Haug 1989 ch. 4-5: Φ(q, t) = 0 (Eq. 7.2.2) by Newton's method from the
    extrapolated previous solution, then Φ_q q̇ = ν (Eq. 7.2.3) and Φ_q q̈ = γ.

    Parameters
    ----------
    model : generated module, or the path of a model file (compiled if stale).
    t_end, h, steps : the output times t0, t0 + h, ..., t_end (``steps`` of them; give
        ``h`` or ``steps``, default 100 steps).
    q0 : the estimate of q(t0) Newton starts from (default: the model's ``Q0``); it
        selects the assembly mode (branch) followed.
    tol : ‖Φ‖∞ each position solve must reach.
    singular_tol : Φ_q is singular when σ_min / σ_max < ``singular_tol``.
    min_step : the smallest sub-step the time step is halved to when Newton's method
        fails before the failure counts as a singular configuration
        (default 1e-10 (1 + |t_end|)).

    Returns
    -------
    Result with ``t``, ``q``, ``qd``, ``qdd``, ``phi_norm`` = ‖Φ‖₂ and ``phid_norm`` =
    ‖Φ_q q̇ − ν‖₂; ``lam`` has no columns.  ``counters`` has the Newton iterations,
    the sub-steps and the largest condition number of Φ_q (``info["max_condition_t"]``
    says when).

    Raises
    ------
    MbdgenError
        The system is not kinematically determined (rank Φ_q < n): the message names
        the degrees of freedom left.
    SingularConfigurationError
        Φ_q became singular; ``error.t`` and ``error.condition`` say where and how badly,
        ``error.result`` holds the solution before.
    """
    from mbdgen.inputs import parameter_vector, resolve_model, state_vector

    module = resolve_model(model)
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    p = parameter_vector(module, params)
    times = _time_grid(t0, t_end, h, steps)
    if min_step is None:
        min_step = 1e-10 * (1.0 + abs(t_end))
    if m < n:
        _check_determined(module, _kernel(module, "phi_q", t0, np.asarray(module.Q0, float), p))
    start = time.perf_counter()

    N = times.size
    qs, qds, qdds = np.full((N, n), np.nan), np.full((N, n), np.nan), np.full((N, n), np.nan)
    phi_norm, phid_norm = np.full(N, np.nan), np.full(N, np.nan)
    counters: dict[str, float | int] = {
        "steps": 0,
        "newton_iterations": 0,
        "substeps": 0,
        "max_condition": 0.0,
    }
    info: dict[str, object] = {
        "analysis": "kinematics",
        "model": module.MODEL_NAME,
        "t0": t0,
        "t_end": t_end,
        "h": float(times[1] - times[0]),
        "tol": tol,
        "singular_tol": singular_tol,
        "params": dict(
            zip(module.PARAMETER_NAMES, map(float, p[: len(module.PARAMETER_NAMES)]), strict=True)
        ),
        "max_condition_t": t0,
        "geometry": geometry.describe(module, p[: len(module.PARAMETER_NAMES)]),
        "status": "finished",
        "message": "",
    }

    def result(k: int) -> Result:
        counters["wall_time_s"] = time.perf_counter() - start
        return Result(
            t=times[:k].copy(),
            q=qs[:k].copy(),
            qd=qds[:k].copy(),
            qdd=qdds[:k].copy(),
            lam=np.zeros((k, 0)),
            phi_norm=phi_norm[:k].copy(),
            phid_norm=phid_norm[:k].copy(),
            coordinates=tuple(module.COORDINATE_NAMES),
            counters=dict(counters),
            info=dict(info),
        )

    def singular(k: int, t: float, cond: float, why: str) -> SingularConfigurationError:
        message = (
            f"singular configuration of {module.MODEL_NAME!r} at t = {t:.10g}: {why} "
            f"(condition number of Φ_q {cond:.3e}; a toggle, lock-up or bifurcation "
            "position)"
        )
        info["status"], info["message"] = "singular", message
        return SingularConfigurationError(message, result(k), t, cond)

    def solve_state(t: float, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        jac = _kernel(module, "phi_q", t, q, p)
        cond = condition_number(jac)
        nu = _kernel(module, "nu", t, q, p)
        qd, *_ = np.linalg.lstsq(jac, nu, rcond=None)
        gamma = _kernel(module, "gamma", t, q, qd, p)
        qdd, *_ = np.linalg.lstsq(jac, gamma, rcond=None)
        if cond > counters["max_condition"]:
            counters["max_condition"] = cond
            info["max_condition_t"] = float(t)
        return qd, qdd, cond

    # t0: Newton from the estimate q0, then the rank test
    guess = state_vector(q0, np.asarray(module.Q0, dtype=float), "q0")
    solved = newton_positions(module, t0, guess, p, tol=tol, max_iterations=4 * max_iterations)
    if solved is None:
        _check_determined(module, _kernel(module, "phi_q", t0, guess, p))
        raise MbdgenError(
            f"no solution of Φ(q, t0) = 0 near q0 for {module.MODEL_NAME!r}: Newton's method "
            f"did not reach ‖Φ‖∞ ≤ {tol:g}; give a better estimate q0"
        )
    q, iters = solved
    counters["newton_iterations"] += iters
    _check_determined(module, _kernel(module, "phi_q", t0, q, p))
    qd, qdd, cond = solve_state(t0, q)

    def record(k: int, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> None:
        t = times[k]
        qs[k], qds[k], qdds[k] = q, qd, qdd
        phi_norm[k] = np.linalg.norm(_kernel(module, "phi", t, q, p))
        jac = _kernel(module, "phi_q", t, q, p)
        phid_norm[k] = np.linalg.norm(jac @ qd - _kernel(module, "nu", t, q, p))

    record(0, q, qd, qdd)
    if cond * singular_tol > 1.0:
        raise singular(0, t0, cond, "Φ_q is ill-conditioned at the start")

    for k in range(1, N):
        t_a, t_target = times[k - 1], times[k]
        dt = t_target - t_a
        while True:
            t_try = min(t_a + dt, t_target)
            step = t_try - t_a
            guess = q + step * qd + 0.5 * step * step * qdd
            solved = newton_positions(
                module, t_try, guess, p, tol=tol, max_iterations=max_iterations
            )
            counters["substeps"] += 1
            if solved is None:
                dt *= 0.5
                if dt < min_step:
                    raise singular(
                        k,
                        float(t_a),
                        cond,
                        "Newton's method finds no solution of Φ(q, t) = 0 beyond this time",
                    )
                continue
            q, iters = solved
            counters["newton_iterations"] += iters
            qd, qdd, cond = solve_state(t_try, q)
            if cond * singular_tol > 1.0:
                raise singular(k, float(t_try), cond, f"σ_min/σ_max of Φ_q < {singular_tol:g}")
            t_a = t_try
            if t_a >= t_target:
                break
            dt *= 2.0
        record(k, q, qd, qdd)
        counters["steps"] += 1
    return result(N)
