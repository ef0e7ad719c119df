"""Integrator families behind one small contract; the driver knows none of them.

The contract (after SciPy's ``OdeSolver``; STYLE lessons 7-9):

1. A family is a :class:`Stepper` subclass built from a :class:`Run` (the validated
   problem: module, parameters, initial state, time grid, options); it builds its
   own workspace and :class:`Outputs`, and reads them back as the columns of a
   Result (:meth:`Stepper.columns`).  :meth:`Stepper.check_options` validates its
   own options before anything is compiled.
2. :meth:`Stepper.advance` runs one jitted chunk — at most ``todo`` steps (fixed
   step) or output intervals (variable step) — writing rows into the outputs, and
   returns a status code of :mod:`mbdgen.runtime.status`.
3. :attr:`Stepper.progress` is the work done in fixed-step units (``0 ..
   run.n_steps``; the driver loops until it is reached), :attr:`Stepper.rows` the
   output rows written, :attr:`Stepper.accepted` the accepted steps and
   :attr:`Stepper.t` the time reached.
4. :meth:`Stepper.restart` makes the next ``advance`` start afresh from the state
   ``run.x`` (after a GCP re-partition); :meth:`Stepper.pending_output` says whether
   an output time inside the last accepted step is still due.
5. :attr:`Stepper.ws` keeps M, Q, Φ, Φ_q, Φ_t, γ of the latest evaluation first
   (what :mod:`mbdgen.diagnose` reads); :meth:`Stepper.counters` names the family's
   own counters, :meth:`Stepper.info` its settings, :attr:`Stepper.status_messages`
   its own words for a status code.

Adding a family is a runtime module, its entry points in
:data:`mbdgen.codegen.abi.ENTRY_POINTS`, a class here registered in
:data:`FAMILIES`, and a :data:`mbdgen.methods.METHODS` entry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from mbdgen import rowstore, specialize
from mbdgen.analysis.assembly import RemovedRows
from mbdgen.codegen.abi import UNROLL_LIMIT
from mbdgen.diagnose import STEP_SIZE_STALL
from mbdgen.errors import MbdgenError
from mbdgen.methods import KMAX, STARTS, Method, adams_tables, rk_arrays
from mbdgen.rowstore import RowStore
from mbdgen.runtime import (
    adaptive,
    dop853,
    explicit,
    genalpha,
    hht,
    index1,
    newmark_gcp,
    partition,
    postprocess,
    radau,
    shared,
    sparse,
    sparse_newton,
    welch,
)
from mbdgen.runtime.status import NEWTON_FAILED, SINGULAR_STATES, STEP_SIZE_COLLAPSE

#: Steps per jitted call (variable step: attempts); big enough that the Python round
#: trip is noise, small enough for progress reports and Ctrl-C.
CHUNK_STEPS = 4096
#: Adams target order no history reaches: every step is a Runge–Kutta step.
RK_ONLY = 1 << 40
#: Constraint handling of the explicit methods → entry point suffix (Haug 1989 §7.3).
CONSTRAINT_HANDLING = {"direct": "", "baumgarte": "", "gcp": "_gcp", "hybrid": "_hybrid"}
#: Largest n + m of a dense module (generalized coordinates) whose output rows the
#: index-3 methods project with a dense LU; mechanisms project on their sparse patterns.
PROJECT_LIMIT = 200


@dataclass
class Run:
    """A validated problem, as every family receives it.

    ``x`` is the initial state ([q; q̇], or the independent coordinates and their
    velocities under GCP), advanced in place; ``ctrl`` the right sides' control
    vector (Baumgarte α, β, GCP thresholds); ``gcp_ws`` the partitioned right side's
    workspace, or None.
    """

    module: ModuleType
    spec: Method
    order: int
    p: np.ndarray
    x: np.ndarray
    t0: float
    t_end: float
    h: float
    n_steps: int
    output_every: int
    rows: int
    constraints: str
    ctrl: np.ndarray
    removed: RemovedRows
    start: str
    rtol: float
    atol: float
    newton_tol: float
    gcp_ws: tuple | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    #: Where the output arrays live when the run streams its rows to disk, else None.
    store: RowStore | None = None

    @property
    def n(self) -> int:
        return int(self.module.N_COORDINATES)

    @property
    def m(self) -> int:
        return int(self.module.N_CONSTRAINTS)

    @property
    def nd(self) -> int:
        """Number of user differential states X (the tail of ``p``)."""
        return int(getattr(self.module, "N_STATES", 0))

    def zeros(self, shape: int | tuple[int, ...]) -> np.ndarray:
        """A zero-filled output array: in memory, or on disk where the run streams
        (:mod:`mbdgen.rowstore`; the integrators cannot tell them apart)."""
        return np.zeros(shape) if self.store is None else self.store.zeros(shape)

    def output_grid(self) -> np.ndarray:
        """The output times of an error-controlled run, t0 + (h · output_every) · j for
        j = 0 … rows − 1, the last cut at t_end (written in blocks: the same numbers
        as the one NumPy expression, without its temporary)."""
        grid = self.zeros(self.rows)
        step = self.h * self.output_every
        for start in rowstore.blocks(self.rows):
            stop = min(start + rowstore.BLOCK_ROWS, self.rows)
            grid[start:stop] = self.t0 + step * np.arange(start, stop)
        grid[-1] = min(grid[-1], self.t_end)
        return grid


@dataclass
class Outputs:
    """The arrays the driver allocated for ``rows`` output rows."""

    t: np.ndarray
    x: np.ndarray
    f: np.ndarray
    aux: np.ndarray


class Stepper:
    """Base of the integrator families (see the module docstring for the contract)."""

    family: ClassVar[str]
    #: The family needs q0, q̇0 consistent with the constraints (the driver projects
    #: them when the user did not assemble, :func:`mbdgen.simulation.simulate`).
    CONSISTENT_START: ClassVar[bool] = False
    #: Family-specific words for status codes (default: mbdgen.runtime.status).
    status_messages: ClassVar[dict[int, str]] = {}
    #: The family chooses its step sizes (the driver cuts its run into more chunks so
    #: that ``Result.step_history`` shows them).
    CHOOSES_STEPS: ClassVar[bool] = False
    ws: Any  # the family's workspace, a NamedTuple of its runtime module
    out: Outputs

    def __init__(self, run: Run) -> None:
        self.run = run

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """The family's options with their defaults; a one-line error for others."""
        if options:
            raise MbdgenError(
                f"options {', '.join(sorted(options))} do not apply to this method family"
            )
        return {}

    def info(self) -> dict[str, Any]:
        """Settings of the family for ``result.info``."""
        return {}

    def columns(self, k: int) -> dict[str, Any]:
        """The first ``k`` output rows as the arrays of a Result."""
        run, out = self.run, self.out
        n, m = run.n, run.m
        if run.gcp_ws is not None:  # the full state is in the aux record (partition.n_aux)
            o = m + 2
            q, qd, qdd = (out.aux[:k, o + i * n : o + (i + 1) * n] for i in range(3))
        else:
            q, qd, qdd = out.x[:k, :n], out.x[:k, n:], out.f[:k, n:]
        return {
            "t": out.t[:k],
            "q": q,
            "qd": qd,
            "qdd": qdd,
            "lam": out.aux[:k, :m],
            "phi_norm": out.aux[:k, m],
            "phid_norm": out.aux[:k, m + 1],
        }

    def _allocate_index1(self) -> None:
        """Outputs of the index-1 families: x = [q; q̇] (or GCP's independent part),
        f = ẋ, and the right side's aux record (λ, ‖Φ‖, ‖Φ̇‖, ...)."""
        run = self.run
        aux = partition.n_aux(run.n, run.m) if run.gcp_ws is not None else index1.n_aux(run.m)
        dim = run.x.size
        self.out = Outputs(
            t=run.zeros(run.rows),
            x=run.zeros((run.rows, dim)),
            f=run.zeros((run.rows, dim)),
            aux=run.zeros((run.rows, aux)),
        )

    def advance(self, todo: int) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def progress(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def rows(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def accepted(self) -> int:
        return self.progress

    @property
    def t(self) -> float:
        return self.run.t0 + self.progress * self.run.h

    def where(self) -> str:
        """Where a failure happened, for the message."""
        return f"in the step from t = {self.t:.6g} to {self.t + self.run.h:.6g}"

    def restart(self, evaluate_only: bool) -> None:
        """Start afresh from ``run.x`` at the next :meth:`advance`."""

    def messages(self) -> Mapping[int, str]:
        """The family's words for the status codes of the failure at hand (default:
        :attr:`status_messages`)."""
        return self.status_messages

    def pending_output(self) -> bool:
        return False

    @classmethod
    def start_tol(cls, options: Mapping[str, Any], newton_tol: float, q0: np.ndarray) -> float:
        """How consistent q0, q̇0 must be before the first step (families with
        :attr:`CONSISTENT_START` only)."""
        raise NotImplementedError(f"{cls.__name__} takes q0 as given")

    def reconcile(self, k: int) -> dict[str, Any] | None:
        """Make the first ``k`` output rows consistent where the family's rows need it
        (:meth:`ErrorControlled.reconcile`); what was done, for ``result.info``."""
        return None

    def counters(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _right_side_workspace(self) -> tuple:
        run = self.run
        if run.gcp_ws is not None:
            return run.gcp_ws
        module = run.module
        if getattr(module, "LINEAR_ALGEBRA", "dense") == "sparse":
            return index1.sparse_workspace(
                run.n, run.m, module.MASS_ROWS, module.MASS_COLS, module.PHI_Q_ROWS,
                module.PHI_Q_COLS, run.removed.active, plan=sparse.module_plan(module),
                pair=index1.module_pair_plan(module),
            )  # fmt: skip
        return index1.workspace(run.n, run.m, run.removed.active)

    def _entry(self) -> Any:
        """The module's entry point of this method under the run's constraint handling."""
        suffix = CONSTRAINT_HANDLING[self.run.constraints] + "_chunk"
        return _entry_point(self.run, self.run.spec.entry.replace("_chunk", suffix))


def _entry_point(run: Run, name: str) -> Any:
    """The entry point ``name`` for this run.  Where the model's sizes are read at run
    time, the integrator compiled once for all models (mbdgen.runtime.shared), which
    steps as fast and costs this model no JIT.  Else the module's own, whose constant
    sizes step faster; under the policy "background" (:mod:`mbdgen.specialize`) a run
    that would have to compile it first steps through the shared routine meanwhile,
    under "shared" instead of compiling it."""
    if run.n + run.m + run.nd > UNROLL_LIMIT:
        entry = shared.entry(run.module, name)
        if entry is not None:
            return entry
    own = getattr(run.module, name)
    policy = specialize.policy()
    if not shared.available(run.module, name) or policy == "now":
        return own
    module = run.module
    chosen = module.__dict__.setdefault("_mbdgen_entry_points", {})
    key = (name, policy)  # "shared" never switches to the own code
    if key not in chosen:
        chosen[key] = specialize.Specializing(own, lambda: shared.entry(module, name), module, name)
    return chosen[key]


def evaluation_kernel(module: ModuleType, family: str, constraints: str) -> str:
    """The kernel that evaluates M, Q, Φ, Φ_q, Φ_t, γ in the entry point a run of
    ``family`` under ``constraints`` calls: "dynamics_values" (M and Φ_q as values on
    their patterns) for a sparse module's index-1, sparse GCP and index-3 runs, else
    "dynamics" (:data:`mbdgen.codegen.abi.ENTRY_POINTS`, :func:`mbdgen.runtime.shared.entry`).
    The checks at t0 evaluate Φ with it, so that they compile no kernel of their own."""
    if getattr(module, "LINEAR_ALGEBRA", "dense") != "sparse" or family in ("welch", "newmark_gcp"):
        return "dynamics"
    if constraints == "hybrid" or (constraints == "gcp" and not shared.sparse_gcp(module)):
        return "dynamics"
    return "dynamics_values"


def _index3_workspace(run: Run, t_out: np.ndarray | None) -> Any:
    """The index-3 loop's workspace: on the sparse patterns where the module's entry
    point binds the sparse Newton matrix (:mod:`mbdgen.runtime.sparse_newton`)."""
    n_params = run.p.size - run.nd
    if getattr(run.module, "LINEAR_ALGEBRA", "dense") == "sparse":
        return sparse_newton.module_workspace(
            run.module, t_out, n_params=n_params, active=run.removed.active
        )
    return hht.workspace(
        run.n, run.m, t_out, nd=run.nd, n_params=n_params, active=run.removed.active,
        implicit=bool(getattr(run.module, "IMPLICIT_STATES", False)),
    )  # fmt: skip


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


class FixedStep(Stepper):
    """Adams–Bashforth(–Moulton) and Runge–Kutta at a fixed step h (Haug 1989 §7.4;
    :func:`mbdgen.runtime.explicit.abm_chunk`)."""

    family = "fixed"

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        self._allocate_index1()
        spec, dim = run.spec, run.x.size
        self.entry = self._entry()
        if spec.family == "rk":
            self.ab, self.am, _, _, _ = _tables("ramp", run.order, None)
            self.rk: tuple[np.ndarray, ...] = rk_arrays(spec.tableau)  # type: ignore[arg-type]
            history, target, start_code = 2, RK_ONLY, explicit.START_RK
        else:
            self.ab, self.am, *rk = _tables(run.start, run.order, spec.corrector)
            self.rk = tuple(rk)
            history, target, start_code = run.order + 1, run.order, STARTS[run.start][0]
        self.hist = np.zeros((history, dim))
        self.scratch = np.zeros((explicit.scratch_rows(self.rk[1].size), dim))
        self.state = np.zeros(explicit.STATE_SIZE, dtype=np.int64)
        self.state[explicit.S_ORDER] = target
        self.state[explicit.S_CORRECT] = 0 if spec.corrector is None else 1
        self.state[explicit.S_START] = start_code
        self.ws = self._right_side_workspace()
        self.aux = np.zeros(self.out.aux.shape[1])

    def advance(self, todo: int) -> int:
        run, out = self.run, self.out
        return self.entry(
            run.p, run.ctrl, self.ws, self.aux, run.t0, run.h, run.x, self.hist, self.scratch,
            self.state, self.ab, self.am, *self.rk, todo, run.output_every, out.t, out.x,
            out.f, out.aux,
        )  # fmt: skip

    @property
    def progress(self) -> int:
        return int(self.state[explicit.S_STEP])

    @property
    def rows(self) -> int:
        return int(self.state[explicit.S_ROW])

    def restart(self, evaluate_only: bool) -> None:
        self.state[explicit.S_NHIST] = 0

    def counters(self) -> dict[str, Any]:
        evaluations = int(self.state[explicit.S_NEVAL])
        return {
            "steps": self.progress,
            "rhs_evaluations": evaluations,
            "factorizations": evaluations,
        }


class Welch(FixedStep):
    """Welch et al. 2007's parameter-free schemes, Eqs. 43-44
    (:func:`mbdgen.runtime.welch.welch_chunk`); they enforce the constraints
    themselves."""

    family = "welch"

    def __init__(self, run: Run) -> None:
        Stepper.__init__(self, run)
        self._allocate_index1()
        self.entry = _entry_point(run, run.spec.entry)
        self.state = np.zeros(explicit.STATE_SIZE, dtype=np.int64)
        self.state[welch.S_ORDER] = run.order
        layout = welch.euler_parameter_layout(run.module)
        self.ws = welch.workspace(run.n, run.m, *layout, run.removed.active)

    def advance(self, todo: int) -> int:
        run, out = self.run, self.out
        return self.entry(
            run.p, self.ws, run.t0, run.h, run.x, self.state, todo, run.output_every, out.t,
            out.x, out.f, out.aux,
        )  # fmt: skip


def _output_progress(done: int, run: Run) -> int:
    """Output rows ``done`` of a variable-step run in the fixed-step loop's units."""
    return run.n_steps if done == run.rows else max(0, done - 1) * run.output_every


class VariableStep(Stepper):
    """Variable step (and order) with error control and dense output on the output
    grid: vabm (Haug 1989 §7.4.4), rkf45_adaptive and dop853
    (:mod:`mbdgen.runtime.adaptive`, :mod:`mbdgen.runtime.adaptive_rk`,
    :mod:`mbdgen.runtime.dop853`).  One
    ``advance`` unit is one output interval."""

    family = "variable"
    CHOOSES_STEPS = True

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        if run.x.size == 0:
            raise MbdgenError(
                f"{run.spec.name} with {run.constraints} integrates the independent coordinates, "
                f"but the model has {run.m} constraints on {run.n} coordinates: no degree of "
                "freedom is left (a kinematically driven mechanism); use constraints='direct' or a "
                "fixed-step method (abm with gcp solves its kinematics)"
            )
        self._allocate_index1()
        self.entry = self._entry()
        self.tol, self.fstate, self.istate, self.phi_dd, self.coef, self.work = (
            adaptive.adaptive_workspace(
                run.x.size,
                run.order,
                t0=run.t0,
                rtol=run.rtol,
                atol=run.atol,
                stages=dop853.STAGES if run.spec.tableau == "dop853" else 0,
            )
        )
        self.t_out = run.output_grid()
        self._timed = 0  # output rows whose time is in out.t
        self.ws = self._right_side_workspace()
        self.aux = np.zeros(self.out.aux.shape[1])

    def info(self) -> dict[str, Any]:
        return {"rtol": self.run.rtol, "atol": self.run.atol}

    def advance(self, todo: int) -> int:
        run, out, istate = self.run, self.out, self.istate
        outs = min(todo, run.rows - int(istate[adaptive.I_JOUT]))
        status = self.entry(
            run.p, run.ctrl, self.ws, self.aux, run.x, self.tol, self.fstate, istate,
            self.phi_dd, self.coef, self.work, self.t_out, outs, CHUNK_STEPS, out.x, out.f,
            out.aux,
        )  # fmt: skip
        done = int(istate[adaptive.I_JOUT])
        # only the rows this chunk wrote: all of them each time was quadratic in the
        # rows (the pendulum with vabm, 1e7 rows: 14.7 s instead of 6.4 s CPU)
        out.t[self._timed : done] = self.t_out[self._timed : done]
        self._timed = done
        return status

    @property
    def progress(self) -> int:
        return _output_progress(self.rows, self.run)

    @property
    def rows(self) -> int:
        return int(self.istate[adaptive.I_JOUT])

    @property
    def accepted(self) -> int:
        return int(self.istate[adaptive.I_NSTEP])

    @property
    def t(self) -> float:
        return float(self.fstate[adaptive.F_T])

    def where(self) -> str:
        return f"at t = {self.t:.6g}"

    def restart(self, evaluate_only: bool) -> None:
        self.istate[adaptive.I_STARTED] = 0
        self.fstate[adaptive.F_HFIRST] = self.fstate[adaptive.F_H] if evaluate_only else 0.0

    def pending_output(self) -> bool:
        j = self.rows
        return j < self.run.rows and self.t_out[j] <= self.fstate[adaptive.F_T]

    def counters(self) -> dict[str, Any]:
        evaluations = int(self.istate[adaptive.I_NEVAL])
        return {
            **adaptive.counters(self.istate),
            "steps": self.accepted,
            "rhs_evaluations": evaluations,
            "factorizations": evaluations,
        }


class AccelerationState(Stepper):
    """Base of the fixed-step implicit families whose state is x = [q; q̇; q̈; λ] (with
    [X; Ẋ] after it where the family integrates user states) and
    whose entry point is ``entry(p, ctrl, ws, t0, h, x, state, n_steps, stride, out_t,
    out_x, out_aux)`` with the step and row counts in ``state[0]``, ``state[1]``
    (:mod:`mbdgen.runtime.hht`, :mod:`mbdgen.runtime.newmark_gcp`)."""

    ctrl: np.ndarray
    state: np.ndarray
    entry: Any

    def _allocate_state(self) -> None:
        """x = [q; q̇; q̈; λ; X; Ẋ] from the run's [q0; q̇0] and X0 (the tail of p; q̈, λ
        and Ẋ found at the start) and the output rows: t, x and [‖Φ‖₂, ‖Φ_q q̇ + Φ_t‖₂]."""
        run = self.run
        n, m, nd = run.n, run.m, run.nd
        self.x = np.zeros(hht.state_width(n, m, nd))
        self.x[: 2 * n] = run.x
        self.x[3 * n + m : 3 * n + m + nd] = run.p[run.p.size - nd :]
        self.out = Outputs(
            t=run.zeros(run.rows),
            x=run.zeros((run.rows, self.x.size)),
            f=np.zeros((run.rows, 0)),
            aux=run.zeros((run.rows, 2)),
        )

    def advance(self, todo: int) -> int:
        run, out = self.run, self.out
        return int(
            self.entry(
                run.p, self.ctrl, self.ws, run.t0, run.h, self.x, self.state, todo,
                run.output_every, out.t, out.x, out.aux,
            )
        )  # fmt: skip

    @property
    def progress(self) -> int:
        return int(self.state[0])

    @property
    def rows(self) -> int:
        return int(self.state[1])

    def columns(self, k: int) -> dict[str, Any]:
        n, m, nd, x = self.run.n, self.run.m, self.run.nd, self.out.x
        o = 3 * n + m
        return {
            "t": self.out.t[:k],
            "q": x[:k, :n],
            "qd": x[:k, n : 2 * n],
            "qdd": x[:k, 2 * n : 3 * n],
            "lam": x[:k, 3 * n : o],
            "phi_norm": self.out.aux[:k, 0],
            "phid_norm": self.out.aux[:k, 1],
            "states": x[:k, o : o + nd],
            "state_rates": x[:k, o + nd :],
        }


class HHT(AccelerationState):
    """HHT-α for the index-3 DAE at a fixed step (Negrut et al. 2007, Eqs. 10-14;
    :func:`mbdgen.runtime.hht.index3_chunk`): Newton on (q̈, λ) with the iteration matrix
    of Eq. 12 from the generated Jacobian blocks, and Ẋ for user states X (Eqs. 9,
    13 e3).  Its state is [q; q̇; q̈; λ; X; Ẋ]."""

    family = "hht"
    #: Range of HHT's α for which the method is A-stable and second order (Eq. 6).
    ALPHA_RANGE = (-1.0 / 3.0, 0.0)
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "hht_alpha": -0.05,
        "max_iterations": 10,
        "predictor_degree": 2,
        "fixed_degree": False,
        "full_newton": False,
    }
    status_messages: ClassVar[dict[int, str]] = {
        NEWTON_FAILED: (
            "Newton's method on the HHT equations (q̈, λ; Negrut et al. 2007, Eq. 12) did "
            "not converge within max_iterations: the step h is too large for the motion, "
            "the mechanism is near a singular configuration, or newton_tol is below "
            "round-off"
        ),
    }

    #: The option that sets the method's numerical damping (checked by
    #: :meth:`check_parameter`).
    PARAMETER: ClassVar[str] = "hht_alpha"

    @classmethod
    def check_parameter(cls, value: Any) -> float:
        """HHT's α as a float in :attr:`ALPHA_RANGE`, or a one-line error."""
        try:
            alpha = float(value)
        except (TypeError, ValueError):
            alpha = math.nan
        if not cls.ALPHA_RANGE[0] <= alpha <= cls.ALPHA_RANGE[1]:
            raise MbdgenError(
                f"hht_alpha must be a number in [-1/3, 0] (Negrut et al. 2007, Eq. 6), "
                f"got {value!r}"
            )
        return alpha

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        unknown = set(options) - set(cls.DEFAULTS)
        if unknown:
            raise MbdgenError(
                f"method {cls.family!r} takes the options {', '.join(cls.DEFAULTS)}, not "
                f"{', '.join(sorted(unknown))}"
            )
        values = {**cls.DEFAULTS, **{k: v for k, v in options.items() if v is not None}}
        parameter = cls.check_parameter(values[cls.PARAMETER])
        iterations = values["max_iterations"]
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
            raise MbdgenError(f"max_iterations must be a whole number ≥ 1, got {iterations!r}")
        if values["predictor_degree"] not in range(hht.MAX_DEGREE + 1):
            raise MbdgenError(
                "predictor_degree must be 0, 1, 2 or 3 (Negrut et al. 2007, §3.5), got "
                f"{values['predictor_degree']!r}"
            )
        return {
            **values,
            cls.PARAMETER: parameter,
            "full_newton": bool(values["full_newton"]),
            "fixed_degree": bool(values["fixed_degree"]),
        }

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        self._allocate_state()
        self.ctrl = self.control()
        self.beta, self.gamma_nm = self.ctrl[hht.C_BETA], self.ctrl[hht.C_GAMMA]
        self.state = np.zeros(hht.STATE_SIZE, dtype=np.int64)
        self._setup()
        self.entry = _entry_point(run, run.spec.entry)

    def _setup(self) -> None:
        run = self.run
        self.ws = _index3_workspace(run, None)

    def messages(self) -> Mapping[int, str]:
        """:attr:`status_messages` and, for ``SINGULAR_STATES``, the implicit state whose
        Ẋ the residuals do not determine at t0 (:func:`mbdgen.runtime.hht.implicit_state_start`)."""
        names = tuple(getattr(self.run.module, "STATE_NAMES", ()))
        k = int(self.state[hht.S_BADSTATE])
        name = names[k] if 0 <= k < len(names) else f"#{k}"
        return {
            **self.status_messages,
            SINGULAR_STATES: (
                f"d_Ẋ of the user states is singular at the start: the residual of state "
                f"{name!r} (with those of the states before it) does not determine its rate "
                "Ẋ there (Negrut et al. 2007, Eq. 8a); check that d depends on Ẋ of "
                f"{name!r} at t0 and x0"
            ),
        }

    def control(self) -> np.ndarray:
        """The runtime's ``ctrl`` vector for the options."""
        return self._control()

    def _control(self, **step: Any) -> np.ndarray:
        o = self.run.options
        return hht.control(
            o["hht_alpha"], self.run.newton_tol, o["max_iterations"],
            degree=o["predictor_degree"], full_newton=o["full_newton"],
            fixed_degree=o["fixed_degree"], **step,
        )  # fmt: skip

    def counters(self) -> dict[str, Any]:
        s = self.state
        return {
            "steps": self.progress,
            "newton_iterations": int(s[hht.S_NEWTON]),
            "jacobian_evaluations": int(s[hht.S_JAC]),
            "factorizations": int(s[hht.S_FACT]),
            "rhs_evaluations": int(s[hht.S_NEVAL]),
            "residual_evaluations": int(s[hht.S_NEVAL]),
            "max_iterations_per_step": int(s[hht.S_MAX_ITERS]),
            "newton_restarts": int(s[hht.S_RESTARTS]),
        }

    def info(self) -> dict[str, Any]:
        o = self.run.options
        return {
            **self.parameters(),
            "newmark_beta": float(self.beta),
            "newmark_gamma": float(self.gamma_nm),
            "newton_tol": self.run.newton_tol,
            "max_iterations": o["max_iterations"],
            "predictor_degree": o["predictor_degree"],
            "fixed_degree": o["fixed_degree"],
            "full_newton": o["full_newton"],
            **self.state_formula(),
        }

    def state_formula(self) -> dict[str, float]:
        """ρ, α_m, α_f of the user states' formula (:mod:`mbdgen.runtime.hht`), for
        :meth:`info`; empty without states."""
        if not self.run.nd:
            return {}
        c = self.ctrl
        return {
            "state_rho": float(c[hht.C_XRHO]),
            "state_alpha_m": float(c[hht.C_XALPHA_M]),
            "state_alpha_f": float(c[hht.C_XALPHA_F]),
        }

    def parameters(self) -> dict[str, float]:
        """The method's own coefficients, for :meth:`info`."""
        return {"hht_alpha": self.run.options["hht_alpha"]}


class GeneralizedAlpha(HHT):
    """Generalized-α for the index-3 DAE at a fixed step (Chung & Hulbert 1993; Arnold
    & Brüls 2007; :mod:`mbdgen.runtime.genalpha`), parameterized by the spectral radius
    ρ∞ at hω → ∞.  HHT's Newton loop and iteration matrix; state [q; q̇; q̈; λ; X; Ẋ].

    Default ρ∞ = 0.9: Exudyn's default spectral radius, and about the damping of HHT's
    default α = −0.05 ((1 + α)/(1 − α) = 0.905) — little damping of the resolved
    frequencies, enough to kill the undamped (−1)ⁿ mode λ carries at ρ∞ = 1.
    """

    family = "genalpha"
    PARAMETER: ClassVar[str] = "rho_inf"
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "rho_inf": 0.9,
        "max_iterations": 10,
        "predictor_degree": 2,
        "fixed_degree": False,
        "full_newton": False,
    }
    status_messages: ClassVar[dict[int, str]] = {
        NEWTON_FAILED: (
            "Newton's method on the generalized-α equations (q̈, λ; Arnold & Brüls 2007) "
            "did not converge within max_iterations: the step h is too large for the "
            "motion, the mechanism is near a singular configuration, or newton_tol is "
            "below round-off"
        ),
    }

    @classmethod
    def check_parameter(cls, value: Any) -> float:
        """ρ∞ as a float in [0, 1], or a one-line error."""
        try:
            rho_inf = float(value)
        except (TypeError, ValueError):
            rho_inf = math.nan
        if not 0.0 <= rho_inf <= 1.0:
            raise MbdgenError(
                "rho_inf must be a number in [0, 1] (the spectral radius at hω → ∞; Chung "
                f"& Hulbert 1993), got {value!r}"
            )
        return rho_inf

    def _control(self, **step: Any) -> np.ndarray:
        o = self.run.options
        return genalpha.control(
            o["rho_inf"], self.run.newton_tol, o["max_iterations"],
            degree=o["predictor_degree"], full_newton=o["full_newton"],
            fixed_degree=o["fixed_degree"], **step,
        )  # fmt: skip

    def parameters(self) -> dict[str, float]:
        return {
            "rho_inf": self.run.options["rho_inf"],
            "alpha_m": float(self.ctrl[hht.C_ALPHA_M]),
            "alpha_f": float(self.ctrl[hht.C_ALPHA_F]),
        }


class ErrorControlled:
    """Error control and dense output for the index-3 families (mixed into
    :class:`HHT` and :class:`GeneralizedAlpha`): Negrut et al. 2007's local error
    estimate (Eq. 25), composite error with ε = rtol, atol (Eq. 34), step-size
    selection (Eqs. 37-38, :data:`mbdgen.runtime.stepsize.INDEX3`), corrector
    stopping test (Eq. 45), rejections, h_min/h_max; outputs interpolated on the grid
    of ``h`` × ``output_every`` (:func:`mbdgen.runtime.hht.interpolate`), as the other
    variable-step methods.  One ``advance`` unit is one output interval."""

    CHOOSES_STEPS = True

    #: ``project_outputs``: the output rows projected onto Φ = 0 and Φ_q q̇ + Φ_t = 0
    #: after the run (:meth:`reconcile`); False keeps the method's interpolants.
    STEP_OPTIONS: ClassVar[dict[str, Any]] = {
        "h_min": 0.0, "h_max": None, "h_first": None, "project_outputs": True,
    }  # fmt: skip
    CONSISTENT_START: ClassVar[bool] = True
    run: Run
    ws: Any  # hht.Workspace; radau's for Radau
    out: Outputs
    state: np.ndarray

    @classmethod
    def start_tol(cls, options: Mapping[str, Any], newton_tol: float, q0: np.ndarray) -> float:
        """The residual max(‖Φ(q0)‖∞, ‖Φ_q q̇0 + Φ_t‖∞) to which the start is made
        consistent (:func:`mbdgen.simulation.simulate`): ``newton_tol``."""
        return newton_tol

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        steps = {k: options[k] for k in cls.STEP_OPTIONS if options.get(k) is not None}
        rest = {k: v for k, v in options.items() if k not in cls.STEP_OPTIONS}
        values = super().check_options(rest)  # type: ignore[misc]
        project = steps.pop("project_outputs", True)
        if not isinstance(project, (bool, np.bool_)):
            raise MbdgenError(f"project_outputs must be True or False, got {project!r}")
        for name, value in steps.items():
            try:
                ok = float(value) >= 0.0 if name == "h_min" else float(value) > 0.0
            except (TypeError, ValueError):
                ok = False
            if not ok:
                bound = "≥ 0" if name == "h_min" else "> 0"
                raise MbdgenError(f"{name} must be a number {bound}, got {value!r}")
        steps = {k: float(v) for k, v in steps.items()}
        if steps.get("h_min", 0.0) >= steps.get("h_max", math.inf):
            raise MbdgenError(
                f"h_min = {steps['h_min']:g} must be below h_max = {steps['h_max']:g}"
            )
        return {**values, **cls.STEP_OPTIONS, **steps, "project_outputs": bool(project)}

    def _setup(self) -> None:
        run = self.run
        t_out = run.output_grid()
        self.ws = _index3_workspace(run, t_out)
        o, f = run.options, self.ws.fstate
        span = run.t_end - run.t0
        h_max = o["h_max"] if o["h_max"] is not None else span
        # the first step: the output interval, at most a thousandth of the run; a
        # step too large is cut by the error test within a few attempts
        h_first = o["h_first"] or min(run.h * run.output_every, 1e-3 * span)
        f[hht.F_T] = f[hht.F_TPREV] = run.t0
        f[hht.F_H] = min(h_first, h_max)
        f[hht.F_HMIN] = o["h_min"]
        f[hht.F_HMAX] = h_max
        f[hht.F_TEND] = run.t_end

    def control(self) -> np.ndarray:
        return self._control(rtol=self.run.rtol, atol=self.run.atol, attempts=CHUNK_STEPS)  # type: ignore[attr-defined]

    def advance(self, todo: int) -> int:
        run, out = self.run, self.out
        outs = min(todo, run.rows - self.rows)
        return int(
            self.entry(  # type: ignore[attr-defined]
                run.p, self.ctrl, self.ws, run.t0, run.h, self.x, self.state, outs,  # type: ignore[attr-defined]
                run.output_every, out.t, out.x, out.aux,
            )
        )  # fmt: skip

    @property
    def progress(self) -> int:
        return _output_progress(self.rows, self.run)

    @property
    def rows(self) -> int:
        return int(self.state[hht.S_ROW])

    @property
    def accepted(self) -> int:
        return int(self.state[hht.S_STEP])

    @property
    def t(self) -> float:
        return float(self.ws.fstate[hht.F_T])

    def where(self) -> str:
        return f"at t = {self.t:.6g} (step h = {self.ws.fstate[hht.F_H]:.3g})"

    def pending_output(self) -> bool:
        j = self.rows
        return j < self.run.rows and self.ws.t_out[j] <= self.t

    def reconcile(self, k: int) -> dict[str, Any] | None:
        """Project the output rows onto the position and velocity constraints
        (:func:`mbdgen.runtime.postprocess.project_rows`): the rows between steps are the
        method's interpolants, whose ‖Φ‖ is of the order of the local error (rtol), not
        of the Newton tolerance that holds at the steps.  On the sparse patterns for a
        sparse module, else densely up to n + m = :data:`PROJECT_LIMIT`; Radau's
        fixed-step mode, whose rows are its steps, is left alone."""
        run = self.run
        if not run.options.get("project_outputs", True) or run.options.get("fixed_step"):
            return None
        n, m = run.n, run.m
        if m == 0 or k == 0:
            return {"rows": 0, "failed": 0}
        module, out = run.module, self.out
        if getattr(module, "LINEAR_ALGEBRA", "dense") == "sparse":
            la: Any = postprocess.sparse_projection(sparse.module_plan(module))
            kernel = "dynamics_values"
        elif n + m <= PROJECT_LIMIT:
            la, kernel = postprocess.dense_projection(n, m), "dynamics"
        else:
            skipped = f"the model's n + m = {n + m} is above {PROJECT_LIMIT} (dense)"
            return {"rows": 0, "failed": 0, "skipped": skipped}
        project = shared.project_entry(module, kernel)
        active = np.asarray(run.removed.active, dtype=np.float64)
        changed = failed = 0
        # row by row, so rows on disk go in blocks, each released before the next
        size = k if run.store is None else rowstore.BLOCK_ROWS
        for a in rowstore.blocks(k, size):
            b = min(a + size, k)
            rows, bad = project(
                la, out.t[a:b], out.x[a:b], out.aux[a:b], n, m, run.nd, run.p, active,
                run.newton_tol,
            )  # fmt: skip
            changed, failed = changed + int(rows), failed + int(bad)
            if run.store is not None:
                run.store.release()
        return {"rows": changed, "failed": failed}

    def counters(self) -> dict[str, Any]:
        s = self.state
        return {
            **super().counters(),  # type: ignore[misc]
            "steps": self.accepted,
            "rejected_steps": int(s[hht.S_REJECTS]),
            "newton_failures": int(s[hht.S_CUTS]),
        }

    def messages(self) -> Mapping[int, str]:
        """The family's words, and for a step-size collapse of an undamped index-3
        method (``hht_alpha`` = 0, ``rho_inf`` = 1) the likely cause: without numerical
        damping the constraint-normal mode of q̈ and λ that every change of h starts
        never decays (a double root at −1 for the trapezoidal rule; Negrut et al. 2007
        damp it with α < 0).  Standard Andrews at ε = 1e-6 stops that way at t ≈ 0.018
        with either method; with hht_alpha = −0.01 it finishes in 1128 steps."""
        words = super().messages()  # type: ignore[misc]
        name = getattr(self, "PARAMETER", None)
        value = self.run.options.get(name) if name else None
        if (name, value) not in (("hht_alpha", 0.0), ("rho_inf", 1.0)) or self.run.options["h_min"]:
            return words  # damped, or a floor the user set
        damped = "hht_alpha < 0 (e.g. −0.3)" if name == "hht_alpha" else "rho_inf < 1 (e.g. 0.5)"
        cause = (
            f"with {name} = {value:g}, a method without numerical damping: on the index-3 "
            "equations the oscillation of q̈ and λ that every change of step starts does not "
            f"decay, and the error test keeps cutting the step; use {damped}"
        )
        return {
            **words,
            STEP_SIZE_COLLAPSE: f"the step size fell below its minimum {cause}",
            STEP_SIZE_STALL: f"the step size collapsed {cause}",
        }

    def info(self) -> dict[str, Any]:
        o, f = self.run.options, self.ws.fstate
        return {
            **super().info(),  # type: ignore[misc]
            "rtol": self.run.rtol,
            "atol": self.run.atol,
            "h_min": float(f[hht.F_HMIN]),
            "h_max": float(f[hht.F_HMAX]),
            "h_first": o["h_first"],
            "error_coefficient": float(self.ctrl[hht.C_ERRCOEF]),  # type: ignore[attr-defined]
            **(
                {"state_error_coefficient": float(self.ctrl[hht.C_XERRCOEF])}  # type: ignore[attr-defined]
                if self.run.nd
                else {}
            ),
        }


class _PerUnitStep:
    """The index-3 families' error test per unit step (Shampine's "error per unit step";
    :mod:`mbdgen.runtime.hht`, ``C_SPAN``), mixed into :class:`HHTAdaptive` and
    :class:`GeneralizedAlphaAdaptive`.

    Negrut et al. 2007 hold each step's local error δ ≈ C h³ q⃛ (Eq. 25) to ε: then
    h ∝ ε^{1/3} and the global error of a second-order method, ∝ h², falls as ε^{2/3}
    — 1e3-1e4 × ε at ε = 1e-6 on the seven problems of docs/methods.md.  Held to ε h/T
    instead (T = t_end − t0), the errors the steps leave add up to at most about ε over
    the run: h ∝ ε^{1/2}, global error ∝ ε.  ``error_per_unit_step=False`` is the
    paper's test (and every result of it as before)."""

    OPTIONS: ClassVar[dict[str, Any]] = {"error_per_unit_step": True}
    #: The start is made consistent to this many ulps of max(1, ‖q0‖∞): per unit step
    #: the first step's correction of Φ(q0) counts as local error over h/T, so an
    #: inconsistency at ``newton_tol`` (1e-10) would be rejected at every h below
    #: about 1e-10 T/ε.
    START_ULPS: ClassVar[float] = 10.0
    run: Run

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        values = super().check_options(options)  # type: ignore[misc]
        flag = values["error_per_unit_step"]
        if not isinstance(flag, (bool, np.bool_)):
            raise MbdgenError(f"error_per_unit_step must be True or False, got {flag!r}")
        return {**values, "error_per_unit_step": bool(flag)}

    @classmethod
    def start_tol(cls, options: Mapping[str, Any], newton_tol: float, q0: np.ndarray) -> float:
        if not options.get("error_per_unit_step", True):
            return newton_tol
        scale = max(1.0, float(np.abs(q0).max(initial=0.0)))
        return min(newton_tol, cls.START_ULPS * float(np.finfo(np.float64).eps) * scale)

    def control(self) -> np.ndarray:
        ctrl = super().control()  # type: ignore[misc]
        if self.run.options["error_per_unit_step"]:
            ctrl[hht.C_SPAN] = self.run.t_end - self.run.t0
        return ctrl

    def info(self) -> dict[str, Any]:
        return {**super().info(), "error_per_unit_step": self.run.options["error_per_unit_step"]}  # type: ignore[misc]


class HHTAdaptive(_PerUnitStep, ErrorControlled, HHT):
    """HHT-α with error control (Negrut et al. 2007, §3; :class:`ErrorControlled`).

    Default α = −0.3, MSC.ADAMS' default for its HHT integrator (the paper's
    implementation), not the fixed-step −0.05: every change of h excites the
    constraint-normal mode of index-3 Newmark in q̈ and λ, which α damps.  Measured on
    the pendulum to t = 2 (tests/test_hht_adaptive.py): max |λ − λ_exact| = 1.5, 2.5,
    0.77 at ε = 1e-4, 1e-6, 1e-8 with α = −0.05, and 0.43, 0.19, 0.0064 with α = −0.3
    (λ ≈ 25); q's error is the same within 30 % (0.0072 against 0.0083 at ε = 1e-4).
    """

    family = "hht_adaptive"
    DEFAULTS: ClassVar[dict[str, Any]] = {
        **HHT.DEFAULTS, "hht_alpha": -0.3, **ErrorControlled.STEP_OPTIONS,
        **_PerUnitStep.OPTIONS,
    }  # fmt: skip


class GeneralizedAlphaAdaptive(_PerUnitStep, ErrorControlled, GeneralizedAlpha):
    """Generalized-α with HHT's error control (:class:`ErrorControlled`); the local
    error constant is generalized-α's own (:func:`mbdgen.runtime.genalpha.control`)."""

    family = "genalpha_adaptive"
    #: ρ∞ = 0.5 by default, for the reason :class:`HHTAdaptive` gives: max |λ error|
    #: on the pendulum 38, 12, 2.1 at ε = 1e-4, 1e-6, 1e-8 with ρ∞ = 0.9, and 0.66,
    #: 0.44, 0.025 with ρ∞ = 0.5.
    DEFAULTS: ClassVar[dict[str, Any]] = {
        **GeneralizedAlpha.DEFAULTS, "rho_inf": 0.5, **ErrorControlled.STEP_OPTIONS,
        **_PerUnitStep.OPTIONS,
    }  # fmt: skip


class _RadauOptions(AccelerationState):
    """The options of :class:`Radau` that are not about the step size."""

    #: ``extra_iteration``: one Newton iteration past RADAU5's stopping test (False:
    #: RADAU5's iteration; :mod:`mbdgen.runtime.radau`).
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "max_iterations": 7, "fixed_step": False, "extra_iteration": True,
    }  # fmt: skip

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        unknown = set(options) - set(cls.DEFAULTS)
        if unknown:
            raise MbdgenError(
                f"method 'radau5' takes the options {', '.join(Radau.DEFAULTS)}, not "
                f"{', '.join(sorted(unknown))}"
            )
        values = {**cls.DEFAULTS, **{k: v for k, v in options.items() if v is not None}}
        iterations = values["max_iterations"]
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 2:
            raise MbdgenError(f"max_iterations must be a whole number ≥ 2, got {iterations!r}")
        return {
            **values,
            "fixed_step": bool(values["fixed_step"]),
            "extra_iteration": bool(values["extra_iteration"]),
        }


class Radau(ErrorControlled, _RadauOptions):
    """Radau IIA of order 5 on the index-3 DAE with error control and dense output
    (Hairer & Wanner 1996, §IV.8, §VII.4; :mod:`mbdgen.runtime.radau`): Newton on the
    three stages' [q; q̇; λ] with RADAU5's transformed real and complex matrices, built
    from the generated blocks HHT's iteration matrix uses.  The state the driver reads is
    [q; q̇; q̈; λ]; the outputs are the collocation polynomial's on the output grid.

    For accuracy beyond what a second-order method reaches in reasonable time (1e-6 and
    tighter), and for stiff mechanisms at any accuracy.  The integrator is compiled once
    per installation (:mod:`mbdgen.runtime.shared`); a model compiles only its kernels.
    """

    family = "radau"
    DEFAULTS: ClassVar[dict[str, Any]] = {
        **_RadauOptions.DEFAULTS, **ErrorControlled.STEP_OPTIONS,
    }  # fmt: skip
    status_messages: ClassVar[dict[int, str]] = {
        NEWTON_FAILED: (
            "the simplified Newton iteration of the Radau IIA stages (q, q̇, λ; Hairer & "
            "Wanner §IV.8) did not converge, also with smaller steps: the mechanism is "
            "near a singular configuration, or a force is discontinuous"
        ),
    }

    def __init__(self, run: Run) -> None:
        Stepper.__init__(self, run)
        self._allocate_state()
        self.ctrl = self.control()
        self.state = np.zeros(radau.STATE_SIZE, dtype=np.int64)
        self._setup()
        self.entry = _radau_entry(run)

    def _setup(self) -> None:
        run = self.run
        t_out = run.output_grid()
        if getattr(run.module, "LINEAR_ALGEBRA", "dense") == "sparse":
            self.ws = radau.sparse_workspace(run.module, t_out, active=run.removed.active)
        else:
            self.ws = radau.workspace(run.n, run.m, t_out, active=run.removed.active)
        o, f = run.options, self.ws.fstate
        span = run.t_end - run.t0
        h_max = o["h_max"] if o["h_max"] is not None else span
        h_first = o["h_first"] or min(run.h * run.output_every, 1e-3 * span)
        if o["fixed_step"]:  # every step h (order studies): the error test is not applied
            h_first = h_max = run.h
        f[radau.F_T] = f[radau.F_TPREV] = run.t0
        f[radau.F_H] = min(h_first, h_max)
        f[radau.F_HMIN] = o["h_min"]
        f[radau.F_HMAX] = h_max
        f[radau.F_TEND] = run.t_end

    def _control(self, **step: Any) -> np.ndarray:
        return radau.control(
            step["rtol"], step["atol"], max_iterations=self.run.options["max_iterations"],
            attempts=step["attempts"], fixed_step=self.run.options["fixed_step"],
            extra_iteration=self.run.options["extra_iteration"],
        )  # fmt: skip

    def counters(self) -> dict[str, Any]:
        s = self.state
        return {
            "steps": self.accepted,
            "rejected_steps": int(s[radau.S_REJECTS]),
            "newton_failures": int(s[radau.S_CUTS]),
            "newton_iterations": int(s[radau.S_NEWTON]),
            "jacobian_evaluations": int(s[radau.S_JAC]),
            "factorizations": int(s[radau.S_FACT]),
            "rhs_evaluations": int(s[radau.S_NEVAL]),
            "residual_evaluations": int(s[radau.S_NEVAL]),
            "max_iterations_per_step": int(s[radau.S_MAX_ITERS]),
        }

    def info(self) -> dict[str, Any]:
        o, f = self.run.options, self.ws.fstate
        return {
            "rtol": self.run.rtol,
            "atol": self.run.atol,
            "h_min": float(f[radau.F_HMIN]),
            "h_max": float(f[radau.F_HMAX]),
            "h_first": o["h_first"],
            "max_iterations": o["max_iterations"],
            "fixed_step": o["fixed_step"],
            "newton_stop": float(self.ctrl[radau.C_KAPPA]),
        }


def _radau_entry(run: Run) -> Any:
    """Radau's chunk for ``run.module``: the routine compiled once per installation with
    the kernels by pointer, or (Numba off, or shared entry points off) the routine
    called with the module's kernels."""
    module = run.module
    entry = shared.entry(module, "radau_chunk")
    if entry is not None:
        return entry
    names = ("dynamics", *shared.INDEX3_BLOCKS)
    if getattr(module, "LINEAR_ALGEBRA", "dense") == "sparse":
        names = tuple(f"{k}_values" for k in names)  # type: ignore[assignment]
    kernels = tuple(getattr(module, k) for k in names)

    def call(*args: Any) -> Any:
        return radau.radau_chunk(*kernels, *args)

    return call


class NewmarkGCP(AccelerationState):
    """Implicit Newmark (trapezoidal: β = ¼, γ = ½) on the state-space ODE of
    generalized coordinate partitioning, fixed step (Haug, Negrut & Iancu 1997, §3;
    :mod:`mbdgen.runtime.newmark_gcp`): Newton on the independent accelerations v̈.
    Its state is [q; q̇; q̈; λ], as HHT's.

    Two methods share it, named as the paper compares them: ``newmark_gcp`` is IMPL,
    the paper's algorithm with the exact Jacobian of Eq. 29; ``newmark_gcp_fv`` is
    Fisette & Vaneghem's quasi-Newton variant (FV, Eq. 40), the same discretization
    with an inexact iteration matrix, kept for the paper's comparison (§4.4).
    """

    family = "newmark_gcp"
    #: Method name → uses FV's iteration matrix.
    VARIANTS: ClassVar[dict[str, bool]] = {"newmark_gcp": False, "newmark_gcp_fv": True}
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "max_iterations": 10,
        "full_newton": False,
        "predictor": "ode",
    }
    status_messages: ClassVar[dict[int, str]] = {
        NEWTON_FAILED: (
            "Newton's method on the independent accelerations (Haug, Negrut & Iancu 1997, "
            "Eq. 30) did not converge within max_iterations, even after a new partition, "
            "or an iterate admits no dependent coordinates (Eq. 11): the step h is too "
            "large for the motion, the mechanism is near a singular configuration, or "
            "newton_tol is below round-off"
        ),
    }

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        unknown = set(options) - set(cls.DEFAULTS)
        if unknown:
            raise MbdgenError(
                f"the newmark_gcp methods take the options {', '.join(cls.DEFAULTS)}, not "
                f"{', '.join(sorted(unknown))}"
            )
        values = {**cls.DEFAULTS, **{k: v for k, v in options.items() if v is not None}}
        iterations = values["max_iterations"]
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
            raise MbdgenError(f"max_iterations must be a whole number ≥ 1, got {iterations!r}")
        if values["predictor"] not in newmark_gcp.PREDICTORS:
            raise MbdgenError(
                "predictor must be 'ode' (the §3.3 predictor stage of Haug, Negrut & Iancu "
                f"1997) or 'constant' (v̈_n), got {values['predictor']!r}"
            )
        return {**values, "full_newton": bool(values["full_newton"])}

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        n, m = run.n, run.m
        if m >= n:
            raise MbdgenError(
                f"newmark_gcp integrates the independent coordinates, but the model has "
                f"{m} constraints on {n} coordinates: no degree of freedom is left"
            )
        if run.removed:
            raise MbdgenError(
                f"newmark_gcp cannot run a mechanism with redundant constraints "
                f"({', '.join(run.removed.names)} depend on the other rows): partitioning "
                "needs independent rows; use hht or genalpha, which leave those rows out"
            )
        phi_q = np.zeros((m, n))
        run.module.phi_q(run.t0, run.x[:n], run.p, phi_q)
        try:
            dep, ind, quality = partition.choose_partition(phi_q)
        except ValueError as exc:
            raise MbdgenError(f"cannot partition the coordinates at t0: {exc}") from None
        # the driver's GCP threshold: pivot_ratio × the quality of the partition
        fraction = float(run.ctrl[partition.C_PIVOT_RATIO])
        o = run.options
        self.fv = self.VARIANTS[run.spec.name]
        self.ctrl = newmark_gcp.control(
            run.newton_tol, o["max_iterations"], fv=self.fv, full_newton=o["full_newton"],
            phi_tol=run.newton_tol, pivot_ratio=fraction * quality, pivot_fraction=fraction,
            predictor=o["predictor"],
        )  # fmt: skip
        self._allocate_state()
        self.ws = newmark_gcp.workspace(n, m, dep, ind)
        self.state = np.zeros(newmark_gcp.STATE_SIZE, dtype=np.int64)
        self.entry = _entry_point(run, "newmark_gcp_chunk")

    def counters(self) -> dict[str, Any]:
        s, nm = self.state, newmark_gcp
        return {
            "steps": self.progress,
            "newton_iterations": int(s[nm.S_NEWTON]),
            "jacobian_evaluations": int(s[nm.S_JAC]),
            "factorizations": int(s[nm.S_FACT]),
            "rhs_evaluations": int(s[nm.S_NEVAL]),
            "residual_evaluations": int(s[nm.S_RESIDUALS]),
            "max_iterations_per_step": int(s[nm.S_MAX_ITERS]),
            "newton_restarts": int(s[nm.S_RESTARTS]),
            "partition_changes": int(s[nm.S_REPART]),
            "position_iterations": int(s[nm.S_POSITION_ITERS]),
            "predictor_fallbacks": int(s[nm.S_PRED_FALLBACK]),
        }

    def info(self) -> dict[str, Any]:
        o = self.run.options
        return {
            "variant": "fv" if self.fv else "impl",
            "newmark_beta": float(self.ctrl[newmark_gcp.C_BETA]),
            "newmark_gamma": float(self.ctrl[newmark_gcp.C_GAMMA]),
            "newton_tol": self.run.newton_tol,
            "max_iterations": o["max_iterations"],
            "full_newton": o["full_newton"],
            "predictor": o["predictor"],
            "independent_coordinates": [self.run.module.COORDINATE_NAMES[i] for i in self.ws.ind],
        }


#: Method family (:attr:`mbdgen.methods.Method.family`) → its stepper.
FAMILIES: dict[str, type[Stepper]] = {
    "adams": FixedStep,
    "rk": FixedStep,
    "welch": Welch,
    "adaptive": VariableStep,
    "hht": HHT,
    "genalpha": GeneralizedAlpha,
    "hht_adaptive": HHTAdaptive,
    "genalpha_adaptive": GeneralizedAlphaAdaptive,
    "newmark_gcp": NewmarkGCP,
    "radau": Radau,
}
