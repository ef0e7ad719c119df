"""The thin Python driver: choose the method, run jitted chunks, build a Result.

Python runs only between chunks (DESIGN rule 1): it reports progress, notices
Ctrl-C and turns status codes into messages.  Everything computed before a failure
or an interrupt is kept in the :class:`~mbdgen.results.Result` attached to the
:class:`~mbdgen.errors.SimulationError`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from types import ModuleType

import numpy as np

from mbdgen.errors import MbdgenError, SimulationError
from mbdgen.methods import KMAX, STARTS, adams_tables, get_method, rk_arrays
from mbdgen.results import Result
from mbdgen.runtime import adaptive, explicit, index1, partition, welch
from mbdgen.runtime.status import MESSAGES, NEWTON_FAILED, OK, REPARTITION, SINGULAR

ProgressCallback = Callable[[float, float], None]

#: Steps per jitted call; big enough that the Python round trip is noise.
CHUNK_STEPS = 4096
#: Adams target order no history reaches: every step is a Runge–Kutta step.
RK_ONLY = 1 << 40
#: Constraint handling of the explicit methods → entry point suffix (Haug 1989 §7.3).
CONSTRAINT_HANDLING = {"direct": "", "baumgarte": "", "gcp": "_gcp", "hybrid": "_hybrid"}
#: Re-partitions allowed per step before GCP gives up (a partition that keeps failing).
MAX_REPARTITIONS_PER_STEP = 3


@lru_cache(maxsize=16)
def _tables(start: str, k: int, corrector: str | None) -> tuple[np.ndarray, ...]:
    """AB/corrector weights and the starter's tableau; the published-table start-up
    depends on the target order k, the others do not."""
    tableau = STARTS[start][1]
    rule = corrector or "am+1"  # the corrector rows go unused without a corrector
    if start == "haug1989-tables":
        ab, am = adams_tables(k, start, rule)
    else:
        ab, am = adams_tables(KMAX, "ramp", rule)
    return (ab, am, *rk_arrays(tableau))


def resolve_model(model: ModuleType | str | Path) -> ModuleType:
    """A generated module, or a model file compiled on demand."""
    if isinstance(model, ModuleType):
        return model
    from mbdgen.compiler import compile as compile_model

    return compile_model(model)


#: Reactions are stored only up to this many numbers (N × R × 12); beyond, call
#: :func:`derived_quantities` on a subsampled result.
MAX_REACTION_VALUES = 50_000_000


def derived_quantities(module: ModuleType, result: Result, p: np.ndarray) -> None:
    """Fill ``result``'s energy (T, V) and joint reactions from the module's kernels.

    One call of the module's cached ``derived`` entry point over all output rows.
    :func:`simulate` attaches this to the Result, which runs it on first use of
    ``energy``/``reactions`` (or on save), so runs that never look pay no JIT for it.
    """
    names = tuple(getattr(module, "CONSTRAINT_NAMES", ()))
    result.constraint_names = names
    if not hasattr(module, "derived"):  # a module generated before energy kernels
        return
    rows = len(result)
    n_react = int(getattr(module, "N_REACTIONS", 0))
    if rows * n_react * 12 > MAX_REACTION_VALUES:
        n_react = 0
    energy = np.zeros((rows, 2))
    reactions = np.zeros((rows, n_react, 12))
    q = np.ascontiguousarray(result.q)
    qd = np.ascontiguousarray(result.qd)
    lam = np.ascontiguousarray(result.lam)
    t = np.ascontiguousarray(result.t)
    module.derived(t, q, qd, lam, np.asarray(p, dtype=np.float64), energy, reactions)
    result._energy = energy
    if n_react:
        result._reactions = reactions
        result.reaction_names = tuple(module.REACTION_NAMES)


def parameter_vector(module: ModuleType, params: Mapping[str, float] | None) -> np.ndarray:
    """The module's default parameters with ``params`` (by name) substituted."""
    p = np.array(module.P_DEFAULT, dtype=np.float64)
    for name, value in (params or {}).items():
        if name not in module.PARAMETER_NAMES:
            raise MbdgenError(
                f"model {module.MODEL_NAME!r} has no parameter {name!r}; its parameters are "
                f"{', '.join(module.PARAMETER_NAMES) or '(none)'}"
            )
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise MbdgenError(f"parameter {name!r} = {value!r} is not a number") from None
        if not math.isfinite(number):
            raise MbdgenError(f"parameter {name!r} = {value!r} is not a finite number")
        p[module.PARAMETER_NAMES.index(name)] = number
    return p


def _vector(value: Sequence[float] | None, default: np.ndarray, what: str) -> np.ndarray:
    if value is None:
        return np.array(default, dtype=np.float64)
    arr = np.asarray(value, dtype=np.float64).ravel()
    if arr.shape != default.shape:
        raise MbdgenError(f"{what} has {arr.size} entries, expected {default.size}")
    return arr


def _initial_partition(
    module: ModuleType, t0: float, q0: np.ndarray, p: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    phi_q = np.zeros((module.N_CONSTRAINTS, module.N_COORDINATES))
    module.phi_q(t0, q0, p, phi_q)
    try:
        return partition.choose_partition(phi_q)
    except ValueError as exc:
        raise MbdgenError(f"cannot partition the coordinates at t0: {exc}") from None


def _repartition(
    advance: Callable[[int], int],
    restart: Callable[[bool], None],
    ws: tuple,
    x: np.ndarray,
    n: int,
    m: int,
    ctrl: np.ndarray,
    pivot_ratio: float,
    last_row: np.ndarray | None,
) -> int:
    """Choose new independent coordinates at the last accepted step (Haug §7.3.2,
    step 7) and restart the multistep method there.

    ``restart(evaluate_only)`` makes the next call of ``advance`` start afresh from
    ``x`` (the fixed-step loop's history count, the variable-step method's start flag;
    with ``evaluate_only`` the variable-step start takes no trial evaluation for its
    first step, which would leave a perturbed q in ``ws``).  A zero-step call then
    re-evaluates the last accepted state with the old partition,
    which leaves the full q, q̇ and Φ_q in ``ws``; the new partition comes from that
    Φ_q by full pivoting.  Newton starts from the last evaluated q, or, if a failed
    evaluation left it non-finite, from the last recorded row (``last_row``, the
    partitioned aux record).
    """
    q, qd = ws[8], ws[9]
    if last_row is not None and not (np.isfinite(q).all() and np.isfinite(qd).all()):
        o = m + 2
        q[:] = last_row[o : o + n]
        qd[:] = last_row[o + n : o + 2 * n]
    restart(True)
    status = advance(0)
    if status not in (OK, REPARTITION):
        return status
    dep, ind = ws[10], ws[11]
    try:
        new_dep, new_ind, quality = partition.choose_partition(ws[3])
    except ValueError:
        return SINGULAR
    dep[:] = new_dep
    ind[:] = new_ind
    ctrl[partition.C_PIVOT_RATIO] = pivot_ratio * quality
    nv = n - m
    x[:nv] = q[ind]
    x[nv:] = qd[ind]
    restart(False)
    return OK


def _control(alpha: float, beta: float, pivot_ratio: float, newton_tol: float) -> np.ndarray:
    """The ``ctrl`` vector of the right sides (index1, partition): Baumgarte's α, β,
    GCP's pivot-ratio threshold, Newton tolerance and iteration limit."""
    ctrl = np.zeros(partition.CTRL_SIZE)
    ctrl[:2] = float(alpha), float(beta)
    ctrl[partition.C_PIVOT_RATIO] = pivot_ratio
    ctrl[partition.C_NEWTON_TOL] = newton_tol
    ctrl[partition.C_NEWTON_ITERS] = 25
    return ctrl


def simulate(
    model: ModuleType | str | Path,
    method: str = "abm",
    order: int | None = None,
    h: float = 1e-3,
    t_end: float = 10.0,
    *,
    t0: float = 0.0,
    params: Mapping[str, float] | None = None,
    q0: Sequence[float] | None = None,
    qd0: Sequence[float] | None = None,
    alpha: float = 0.0,
    beta: float = 0.0,
    output_every: int = 1,
    progress: ProgressCallback | None = None,
    start: str = "rkf45",
    constraints: str | None = None,
    rtol: float = 1e-6,
    atol: float = 1e-6,
    assemble: bool | Sequence[str] = False,
    newton_tol: float = 1e-10,
    pivot_ratio: float = 0.1,
) -> Result:
    """Integrate a compiled model from ``t0`` to ``t_end`` with a fixed step ``h``.

    Parameters
    ----------
    model : generated module, or the path of a model file (compiled if stale).
    method : a name from :data:`mbdgen.methods.METHODS` (``abm``: AB k / AM k+1 PECE;
        ``ab``: AB k alone), Haug 1989 §7.4.
    order : k, the Adams–Bashforth order (1-5; default 4); a Runge–Kutta method has
        one order and needs none.
    alpha, beta : Baumgarte parameters (Haug 1989, Eq. 7.3.8); 0, 0 integrates the
        index-1 equations directly (§7.3.3).
    output_every : record every this many steps.
    progress : called as ``progress(t, t_end)`` after each chunk.
    start : how the first k − 1 steps are taken: ``"rkf45"`` (Fehlberg's fifth-order
        Runge–Kutta, keeps the theoretical order), ``"ramp"`` (Haug's self-starting
        order ramp, §7.4.4; limits AB k to order 2), or ``"haug1989-tables"`` (the
        start-up behind Haug's Tables 7.4.11-12, see :func:`~mbdgen.methods.adams_tables`).
    constraints : constraint handling of the Adams and Runge–Kutta methods (Haug 1989
        §7.3): ``"direct"`` (§7.3.3), ``"baumgarte"`` (§7.3.4, with ``alpha``, ``beta``),
        ``"gcp"`` (generalized coordinate partitioning, §7.3.2) or ``"hybrid"``
        (§7.3.5: Baumgarte plus a GCP correction when ‖Φ‖∞ > ``newton_tol``).
        Default: ``"baumgarte"`` if ``alpha`` or ``beta`` is set, else ``"direct"``.
        The Welch schemes enforce constraints themselves and take none.
    rtol, atol : local error tolerances of the variable-step methods (``vabm``,
        ``rkf45_adaptive``), for which
        ``h`` is the output interval, not a step size.
    assemble : first make q0, q̇0 consistent (:func:`mbdgen.analysis.assembly.assemble`);
        a list of coordinate names holds those at their given values.
    newton_tol : ‖Φ‖∞ to which GCP solves for the dependent coordinates.
    pivot_ratio : GCP re-partitions when Φ_u's conditioning (its smallest LU pivot over
        the largest entry of Φ_q) falls below this fraction of its value when the
        partition was chosen; the hybrid algorithm reverts to pure GCP while the
        quality of its full-pivoting partition is below this fraction of its value at t0.

    Raises
    ------
    SimulationError
        On a singular matrix, a NaN, or Ctrl-C; ``error.result`` holds the
        steps computed until then.
    """
    spec = get_method(method)
    if order is None:
        order = spec.default_order
    if order not in spec.orders:
        raise MbdgenError(
            f"method {method!r} supports orders {', '.join(map(str, spec.orders))}, not {order}"
        )
    if start not in STARTS:
        raise MbdgenError(f"unknown start {start!r}; choose one of: {', '.join(STARTS)}")
    if constraints is None:
        constraints = "baumgarte" if (alpha or beta) else "direct"
    if constraints not in CONSTRAINT_HANDLING:
        raise MbdgenError(
            f"unknown constraint handling {constraints!r}; choose one of: "
            f"{', '.join(CONSTRAINT_HANDLING)}"
        )
    if spec.family == "welch" and constraints != "direct":
        raise MbdgenError(
            f"method {method!r} enforces the constraints itself; it takes no "
            f"{constraints!r} constraint handling (nor alpha, beta)"
        )
    if constraints in ("direct", "gcp") and (alpha or beta):
        raise MbdgenError(f"alpha and beta are Baumgarte parameters; {constraints!r} uses none")
    h = float(h)
    t0 = float(t0)
    span = float(t_end) - t0
    if not (h > 0.0 and math.isfinite(h)):
        raise MbdgenError(f"step size h must be positive, got {h}")
    if not span > 0.0:
        raise MbdgenError(f"t_end ({t_end}) must be greater than t0 ({t0})")
    n_steps = int(round(span / h))
    if abs(n_steps * h - span) > 1e-9 * max(span, 1.0):
        raise MbdgenError(f"t_end - t0 = {span} is not a whole number of steps h = {h}")
    if output_every < 1:
        raise MbdgenError("output_every must be at least 1")

    module = resolve_model(model)
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    p = parameter_vector(module, params)
    x = np.concatenate([_vector(q0, module.Q0, "q0"), _vector(qd0, module.QD0, "qd0")])
    if assemble is not False:
        from mbdgen.analysis.assembly import assemble as assemble_state

        hold = () if assemble is True else tuple(assemble)
        assembled = assemble_state(
            module, q0=x[:n], qd0=x[n:], t0=t0, params=params, hold=hold, tol=newton_tol
        )
        x = np.concatenate([assembled.q, assembled.qd])
    rows = n_steps // output_every + 1
    partitioned = constraints in ("gcp", "hybrid")
    if partitioned:
        dep, ind, quality = _initial_partition(module, t0, x[:n], p)
        gcp_ws = partition.gcp_workspace(n, m, dep, ind, x[:n], x[n:])
        if constraints == "gcp":
            x = np.concatenate([x[:n][ind], x[n:][ind]])
        aux_size = partition.n_aux(n, m)
    else:
        aux_size = index1.n_aux(m)
    dim = x.size
    out_t = np.zeros(rows)
    out_x = np.zeros((rows, dim))
    out_f = np.zeros((rows, dim))
    out_aux = np.zeros((rows, aux_size))
    outputs = (output_every, out_t, out_x, out_f, out_aux)
    state = np.zeros(explicit.STATE_SIZE, dtype=np.int64)
    if spec.family == "welch":
        entry = getattr(module, spec.entry)
        state[welch.S_ORDER] = order
        ws = welch.workspace(n, m, *welch.euler_parameter_layout(module))

        def advance(todo: int) -> int:
            return entry(p, ws, t0, h, x, state, todo, *outputs)

    elif spec.family == "adaptive":
        entry = getattr(
            module, spec.entry.replace("_chunk", CONSTRAINT_HANDLING[constraints] + "_chunk")
        )
        tol, fstate, istate, phi_dd, coef, work = adaptive.adaptive_workspace(
            dim, order, t0=t0, rtol=rtol, atol=atol
        )
        t_out = t0 + h * output_every * np.arange(rows)
        t_out[-1] = min(t_out[-1], float(t_end))
        ctrl = _control(alpha, beta, pivot_ratio * (quality if partitioned else 1.0), newton_tol)
        ws = gcp_ws if partitioned else index1.workspace(n, m)
        aux = np.zeros(aux_size)

        def advance(todo: int) -> int:
            outs = min(todo, rows - int(istate[adaptive.I_JOUT]))
            status = entry(
                p, ctrl, ws, aux, x, tol, fstate, istate, phi_dd, coef, work, t_out, outs,
                CHUNK_STEPS, out_x, out_f, out_aux,
            )  # fmt: skip
            out_t[: istate[adaptive.I_JOUT]] = t_out[: istate[adaptive.I_JOUT]]
            # progress in the units of the fixed-step loop: output intervals done
            done = int(istate[adaptive.I_JOUT])
            state[explicit.S_STEP] = n_steps if done == rows else max(0, done - 1) * output_every
            state[explicit.S_ROW] = istate[adaptive.I_JOUT]
            state[explicit.S_NEVAL] = istate[adaptive.I_NEVAL]
            return status

    else:
        entry = getattr(
            module, spec.entry.replace("_chunk", CONSTRAINT_HANDLING[constraints] + "_chunk")
        )
        if spec.family == "rk":
            ab, am, _, _, _ = _tables("ramp", order, None)
            rk_a, rk_b, rk_c = rk_arrays(spec.tableau)  # type: ignore[arg-type]
            history, target, start_code = 2, RK_ONLY, explicit.START_RK
        else:
            ab, am, rk_a, rk_b, rk_c = _tables(start, order, spec.corrector)
            history, target, start_code = order + 1, order, STARTS[start][0]
        hist = np.zeros((history, dim))
        scratch = np.zeros((explicit.scratch_rows(rk_b.size), dim))
        state[explicit.S_ORDER] = target
        state[explicit.S_CORRECT] = 0 if spec.corrector is None else 1
        state[explicit.S_START] = start_code
        ctrl = _control(alpha, beta, pivot_ratio * (quality if partitioned else 1.0), newton_tol)
        ws = gcp_ws if partitioned else index1.workspace(n, m)
        aux = np.zeros(aux_size)

        def advance(todo: int) -> int:
            return entry(
                p, ctrl, ws, aux, t0, h, x, hist, scratch, state, ab, am, rk_a, rk_b, rk_c,
                todo, *outputs,
            )  # fmt: skip

    adaptive_run = spec.family == "adaptive"

    def step_id() -> int:
        """Accepted steps so far (re-partitions are limited per step)."""
        return int(istate[adaptive.I_NSTEP]) if adaptive_run else int(state[explicit.S_STEP])

    def pending_output() -> bool:
        """An output time inside the last accepted step is not written yet."""
        j = int(istate[adaptive.I_JOUT])
        return j < rows and t_out[j] <= fstate[adaptive.F_T]

    def restart(evaluate_only: bool) -> None:
        if adaptive_run:
            istate[adaptive.I_STARTED] = 0
            fstate[adaptive.F_HFIRST] = fstate[adaptive.F_H] if evaluate_only else 0.0
        else:
            state[explicit.S_NHIST] = 0

    chunk = max(output_every, (CHUNK_STEPS // output_every) * output_every)
    status, interrupted, chunks = OK, False, 0
    repartitions: list[int] = []
    started = stepping = time.perf_counter()
    try:
        # A zero-step call compiles or loads the entry point and evaluates f(x0, t0),
        # so that the step timing below is of stepping alone.
        status = advance(0)
        stepping = time.perf_counter()
        while state[explicit.S_STEP] < n_steps:
            # GCP re-partitions when Φ_u degrades, and also when Newton's method fails
            # (Haug §7.3.2 step 7: "or the integrator struggles"); a step that fails
            # again with a fresh partition stops the run.
            if status in (REPARTITION, NEWTON_FAILED) and constraints == "gcp":
                if repartitions.count(step_id()) >= MAX_REPARTITIONS_PER_STEP:
                    break
                # A variable-step run first writes the outputs still due inside its last
                # step, with the old partition (a request to re-partition is advisory).
                if adaptive_run:
                    while status in (OK, REPARTITION) and pending_output():
                        status = advance(1)
                    if pending_output():
                        break  # Newton failed at an output inside the last step
                row = int(state[explicit.S_ROW]) - 1
                status = _repartition(
                    advance, restart, gcp_ws, x, n, m, ctrl, pivot_ratio,
                    out_aux[row] if row >= 0 else None,
                )  # fmt: skip
                repartitions.append(step_id())
            if status not in (OK, REPARTITION):
                break
            status = advance(min(chunk, n_steps - int(state[explicit.S_STEP])))
            chunks += 1
            if progress is not None:
                progress(t0 + int(state[explicit.S_STEP]) * h, float(t_end))
        if status == REPARTITION and state[explicit.S_STEP] >= n_steps:
            status = OK
    except KeyboardInterrupt:
        interrupted = True
    wall = time.perf_counter() - stepping

    k = int(state[explicit.S_ROW])
    steps = int(state[explicit.S_STEP])
    if interrupted:
        message = f"interrupted by the user at t = {t0 + steps * h:.6g}"
    elif status != OK:
        t_stop = fstate[adaptive.F_T] if spec.family == "adaptive" else t0 + (steps + 1) * h
        message = f"stopped at t = {t_stop:.6g}: {MESSAGES[status]}"
    else:
        message = MESSAGES[OK]
    if partitioned:  # the full state is in the aux record (partition.n_aux)
        o = m + 2
        q_out, qd_out, qdd_out = (out_aux[:k, o + i * n : o + (i + 1) * n] for i in range(3))
    else:
        q_out, qd_out, qdd_out = out_x[:k, :n], out_x[:k, n:], out_f[:k, n:]
    result = Result(
        t=out_t[:k],
        q=q_out,
        qd=qd_out,
        qdd=qdd_out,
        lam=out_aux[:k, :m],
        phi_norm=out_aux[:k, m],
        phid_norm=out_aux[:k, m + 1],
        coordinates=tuple(module.COORDINATE_NAMES),
        counters={
            **(adaptive.counters(istate) if spec.family == "adaptive" else {}),
            "steps": steps if spec.family != "adaptive" else int(istate[adaptive.I_NSTEP]),
            "rhs_evaluations": int(state[explicit.S_NEVAL]),
            "factorizations": int(state[explicit.S_NEVAL]),
            "chunks": chunks,
            "repartitions": len(repartitions),
            # hybrid: output rows whose evaluation ran as pure GCP (near-singular Φ_q)
            "pure_gcp_rows": int(out_aux[:k, -1].sum()) if constraints == "hybrid" else 0,
            "setup_time_s": stepping - started,
            "wall_time_s": wall,
        },
        info={
            "model": module.MODEL_NAME,
            "method": spec.name,
            "order": order,
            "tableau": spec.tableau,
            "h": h,
            "t0": t0,
            "t_end": float(t_end),
            "alpha": float(alpha),
            "beta": float(beta),
            "start": start,
            "constraints": constraints,
            "assembled_holding": None if assemble is False else list(hold),
            "repartitioned_at_steps": repartitions,  # accepted-step counts (vabm: its steps)
            "parameters": dict(zip(module.PARAMETER_NAMES, map(float, p), strict=True)),
            "status": "finished" if status == OK and not interrupted else "failed",
            "message": message,
        },
    )
    result.constraint_names = tuple(getattr(module, "CONSTRAINT_NAMES", ()))
    p_final = np.array(p, dtype=np.float64)
    result._derive = lambda: derived_quantities(module, result, p_final)
    if interrupted or status != OK:
        raise SimulationError(message, result)
    return result
