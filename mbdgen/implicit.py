"""The thin Python driver of the implicit HHT-α integrator (Negrut et al. 2007), fixed step.

It validates the options, allocates the workspace once, calls the module's cached
``hht_chunk`` entry point (:func:`mbdgen.runtime.hht.hht_chunk`) once per chunk of
steps and builds a :class:`~mbdgen.results.Result` with the Newton counters.  It is
not yet one of :func:`mbdgen.simulate`'s methods: that driver is being refactored into
a stepper contract, which will take this family over.

Names: HHT's α is ``hht_alpha`` here, because :func:`mbdgen.simulate` (and the CLI's
``--alpha``) already use ``alpha`` for Baumgarte's stabilization parameter, and one
name must not mean both once HHT is one of its methods; inside the runtime, where
there is no Baumgarte, it is ``alpha`` as in the paper (DESIGN rule 8).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np

from mbdgen import interrupts
from mbdgen.errors import Interrupted, MbdgenError, SimulationError
from mbdgen.inputs import parameter_vector, resolve_model, state_vector
from mbdgen.results import Result
from mbdgen.runtime import hht as rt_hht
from mbdgen.runtime.status import MESSAGES, NEWTON_FAILED, OK

#: Steps per jitted call; big enough that the Python round trip is noise.
CHUNK_STEPS = 4096
#: Range of HHT's α for which the method is A-stable and second order (Eq. 6).
ALPHA_RANGE = (-1.0 / 3.0, 0.0)

_NEWTON_FAILED = (
    "Newton's method on the HHT equations (q̈, λ; Negrut et al. 2007, Eq. 12) did not "
    "converge within max_iterations: the step h is too large for the motion, the "
    "mechanism is near a singular configuration, or newton_tol is below round-off"
)


def _check_alpha(hht_alpha: float) -> float:
    try:
        value = float(hht_alpha)
    except (TypeError, ValueError):
        value = math.nan
    if not ALPHA_RANGE[0] <= value <= ALPHA_RANGE[1]:
        raise MbdgenError(
            f"hht_alpha must be a number in [-1/3, 0] (Negrut et al. 2007, Eq. 6), "
            f"got {hht_alpha!r}"
        )
    return value


def _positive(name: str, value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number > 0.0):
        raise MbdgenError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def hht(
    model: ModuleType | str | Path,
    h: float,
    t_end: float,
    *,
    hht_alpha: float = -0.05,
    t0: float = 0.0,
    params: Mapping[str, float] | None = None,
    q0: Sequence[float] | None = None,
    qd0: Sequence[float] | None = None,
    output_every: int = 1,
    newton_tol: float = 1e-10,
    max_iterations: int = 10,
    predictor_degree: int = 2,
    full_newton: bool = False,
    progress: Callable[[float, float], None] | None = None,
) -> Result:
    """Integrate the index-3 equations of a compiled model with HHT-α at a fixed step h.

    Parameters
    ----------
    model : generated module, or the path of a model file (compiled if stale).
    h : the step size; ``t_end - t0`` must be a whole number of steps.
    hht_alpha : HHT's α ∈ [−1/3, 0] (Negrut et al. 2007, Eq. 6); β = (1 − α)²/4,
        γ = (1 − 2α)/2.  0 is the trapezoidal rule (no numerical damping); −1/3 damps
        most (spectral radius (1 + α)/(1 − α) = 0.5 at hω → ∞).
    q0, qd0 : initial state (default: the model's); q0 should satisfy Φ(q0, t0) = 0
        (the first step enforces Φ = 0 at t0 + h, not at t0).  q̈_0, λ_0 are computed
        from the index-1 equations at t0.
    output_every : record every this many steps.
    newton_tol : stop Newton when the estimated distance to the solution, relative to
        max(1, ‖q̈‖∞) and max(1, ‖λ‖∞), is below this (see :mod:`mbdgen.runtime.hht`).
    max_iterations : Newton iterations allowed per step (a step that needs more is
        retried once with a fresh iteration matrix, then the run fails).
    predictor_degree : degree (0-3) of the polynomial extrapolating q̈, λ to the next
        step (§3.5); 0 takes the last values.
    full_newton : re-evaluate and refactor the iteration matrix at every iterate
        (default: modified Newton, refreshing it only when convergence slows).
    progress : called as ``progress(t, t_end)`` after each chunk.

    Returns
    -------
    Result
        ``counters`` holds steps, newton_iterations, jacobian_evaluations,
        factorizations, residual_evaluations, max_iterations_per_step, newton_restarts.

    Raises
    ------
    SimulationError
        When Newton fails, the iteration matrix is singular, a value becomes NaN, or
        on Ctrl-C / SIGTERM; ``error.result`` holds the steps computed until then.
    MbdgenError
        On invalid options.
    """
    alpha = _check_alpha(hht_alpha)
    h = _positive("step size h", h)
    newton_tol = _positive("newton_tol", newton_tol)
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
        raise MbdgenError(f"max_iterations must be a whole number ≥ 1, got {max_iterations!r}")
    if max_iterations < 1:
        raise MbdgenError(f"max_iterations must be a whole number ≥ 1, got {max_iterations!r}")
    if predictor_degree not in range(rt_hht.MAX_DEGREE + 1):
        raise MbdgenError(
            f"predictor_degree must be 0, 1, 2 or 3 (Negrut et al. 2007, §3.5), "
            f"got {predictor_degree!r}"
        )
    t0 = float(t0)
    if not (math.isfinite(t0) and math.isfinite(float(t_end))):
        raise MbdgenError(f"t0 and t_end must be finite numbers, got {t0} and {t_end}")
    span = float(t_end) - t0
    if not span > 0.0:
        raise MbdgenError(f"t_end ({t_end}) must be greater than t0 ({t0})")
    n_steps = int(round(span / h))
    if abs(n_steps * h - span) > 1e-9 * max(span, 1.0):
        raise MbdgenError(f"t_end - t0 = {span} is not a whole number of steps h = {h}")
    if isinstance(output_every, bool) or not isinstance(output_every, int) or output_every < 1:
        raise MbdgenError(f"output_every must be a whole number ≥ 1, got {output_every!r}")

    module = resolve_model(model)
    n, m = int(module.N_COORDINATES), int(module.N_CONSTRAINTS)
    p = parameter_vector(module, params)
    x = np.zeros(rt_hht.state_width(n, m))
    x[:n] = state_vector(q0, module.Q0, "q0")
    x[n : 2 * n] = state_vector(qd0, module.QD0, "qd0")
    beta, gamma_nm = rt_hht.coefficients(alpha)
    ctrl = rt_hht.control(
        alpha, newton_tol, max_iterations, degree=predictor_degree, full_newton=full_newton
    )
    ws = rt_hht.workspace(n, m)
    state = np.zeros(rt_hht.STATE_SIZE, dtype=np.int64)
    rows = n_steps // output_every + 1
    out_t = np.zeros(rows)
    out_x = np.zeros((rows, x.size))
    out_aux = np.zeros((rows, 2))
    entry = module.hht_chunk

    def advance(todo: int) -> int:
        return int(entry(p, ctrl, ws, t0, h, x, state, todo, output_every, out_t, out_x, out_aux))

    chunk = max(output_every, (CHUNK_STEPS // output_every) * output_every)
    status, chunks = OK, 0
    stop: BaseException | None = None
    started = stepping = time.perf_counter()
    interrupts.clear()
    try:
        with interrupts.interrupts_as_exceptions():
            # zero steps: compile or load the entry point and find q̈_0, λ_0
            status = advance(0)
            stepping = time.perf_counter()
            while status == OK and state[rt_hht.S_STEP] < n_steps:
                status = advance(min(chunk, n_steps - int(state[rt_hht.S_STEP])))
                chunks += 1
                if progress is not None:
                    progress(t0 + int(state[rt_hht.S_STEP]) * h, float(t_end))
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM as Interrupted
        stop = exc
    wall = time.perf_counter() - stepping

    k = int(state[rt_hht.S_ROW])
    steps = int(state[rt_hht.S_STEP])
    t_done = t0 + steps * h
    result = Result(
        t=out_t[:k],
        q=out_x[:k, :n],
        qd=out_x[:k, n : 2 * n],
        qdd=out_x[:k, 2 * n : 3 * n],
        lam=out_x[:k, 3 * n :],
        phi_norm=out_aux[:k, 0],
        phid_norm=out_aux[:k, 1],
        coordinates=tuple(module.COORDINATE_NAMES),
        counters={
            "steps": steps,
            "output_rows": k,
            "newton_iterations": int(state[rt_hht.S_NEWTON]),
            "jacobian_evaluations": int(state[rt_hht.S_JAC]),
            "factorizations": int(state[rt_hht.S_FACT]),
            "residual_evaluations": int(state[rt_hht.S_NEVAL]),
            "max_iterations_per_step": int(state[rt_hht.S_MAX_ITERS]),
            "newton_restarts": int(state[rt_hht.S_RESTARTS]),
            "chunks": chunks,
            "setup_time_s": stepping - started,
            "wall_time_s": wall,
        },
        info={
            "model": module.MODEL_NAME,
            "method": "hht",
            "h": h,
            "t0": t0,
            "t_end": float(t_end),
            "hht_alpha": alpha,
            "newmark_beta": beta,
            "newmark_gamma": gamma_nm,
            "newton_tol": newton_tol,
            "max_iterations": max_iterations,
            "predictor_degree": predictor_degree,
            "full_newton": bool(full_newton),
            "parameters": dict(zip(module.PARAMETER_NAMES, map(float, p), strict=True)),
            "status": "finished",
            "message": MESSAGES[OK],
            "warnings": [],
        },
        constraint_names=tuple(getattr(module, "CONSTRAINT_NAMES", ())),
    )
    p_final = p.copy()

    def derive() -> None:  # energy, power, reactions on first use, as simulate() does
        from mbdgen.simulation import derived_quantities

        derived_quantities(module, result, p_final)

    result._derive = derive
    if stop is not None:
        reason = "terminated" if isinstance(stop, Interrupted) else "interrupted"
        message = f"{interrupts.describe(stop)} at t = {t_done:.6g}"
    elif status != OK:
        reason = "failed"
        cause = _NEWTON_FAILED if status == NEWTON_FAILED else MESSAGES[status]
        message = f"stopped in the step from t = {t_done:.6g} to {t_done + h:.6g}: {cause}"
    else:
        reason, message = "", MESSAGES[OK]
    result.info["status"] = reason or "finished"
    result.info["message"] = message
    if reason:
        raise SimulationError(message, result, reason)
    return result
