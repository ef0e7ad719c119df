"""The thin Python driver: choose the method, run jitted chunks, build a Result.

Python runs only between chunks (DESIGN rule 1): it reports progress, notices
Ctrl-C and turns status codes into messages.  Everything computed before a failure
or an interrupt is kept in the :class:`~mbdgen.results.Result` attached to the
:class:`~mbdgen.errors.SimulationError`.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import numpy as np

from mbdgen import geometry, interrupts, rowstore, specialize
from mbdgen.analysis.assembly import (
    CONSISTENCY_TOL,
    RemovedRows,
    constraint_blocks,
    constraint_jacobian,
    constraint_residuals,
    removable_rows,
)
from mbdgen.diagnose import STEP_SIZE_STALL, explain_failure
from mbdgen.errors import Interrupted, MbdgenError, OutputError, SimulationError
from mbdgen.fileio import blocking_file
from mbdgen.inputs import coordinate_vector, parameter_vector, resolve_model
from mbdgen.methods import METHODS, STARTS, Method, get_method
from mbdgen.results import Result
from mbdgen.rowstore import RowStore, bytes_text
from mbdgen.runtime import partition, postprocess, shared, sparse
from mbdgen.runtime.status import MESSAGES, NEWTON_FAILED, NONFINITE, OK, REPARTITION, SINGULAR
from mbdgen.steppers import (
    CHUNK_STEPS,
    CONSTRAINT_HANDLING,
    FAMILIES,
    Run,
    Stepper,
    evaluation_kernel,
)
from mbdgen.units import label_result

ProgressCallback = Callable[[float, float], None]

#: Re-partitions allowed per step before GCP gives up (a partition that keeps failing).
MAX_REPARTITIONS_PER_STEP = 3
#: Default bound on ‖Φ‖₂ over a run (and at t0) before the result is reported as
#: violating its constraints; ``phi_tol=`` / ``--phi-tol`` sets it.
PHI_TOL = 1e-3
#: Default bound on the energy balance |T + V − E0 − ∫P dt| relative to the energy
#: the run exchanges (``energy_tol=`` / ``--energy-tol``).
ENERGY_TOL = 1e-3
#: Smallest rtol an error-controlled method accepts: 100 ε of float64 (≈ 2.2e-14).
#: A step's error estimate is the difference of two solutions that each carry the
#: rounding of a few dozen operations on |y| (≈ 10 ε |y| each for the stages, the
#: Newton corrections, the sum); below a hundred ε the estimate is that noise, the
#: step is rejected however small it is, and the control cuts it to its floor.
#: Hairer's RADAU5 and DOP853 refuse rtol ≤ 10 ε for the same reason; the factor 10
#: more keeps the estimate an order above the noise.
RTOL_MIN = 100.0 * float(np.finfo(np.float64).eps)
#: Largest share of the machine's memory the output arrays may take.
MEMORY_SHARE = 0.5
#: Share of the memory available when a run starts (``MemAvailable``) above which its
#: output is announced before the first step (:class:`OutputSizeWarning`).
MEMORY_WARN_SHARE = 0.25
#: simulate()'s keywords that are one family's option → (what it is, its method).
FAMILY_KEYWORDS = {
    "hht_alpha": ("HHT's α", "hht and hht_adaptive"),
    "rho_inf": ("generalized-α's spectral radius ρ∞", "genalpha and genalpha_adaptive"),
}


class ConstraintWarning(UserWarning):
    """A run finished, but its result violates the constraints beyond ``phi_tol``."""


class OutputSizeWarning(UserWarning):
    """A run's output will take more than :data:`MEMORY_WARN_SHARE` of the memory
    available; said before the run starts (no check of the result: ``strict`` ignores it)."""


def _memory_bytes() -> int | None:
    """Physical memory of this machine, or None where the OS does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _available_bytes() -> int | None:
    """Memory available to this process now: ``MemAvailable`` of /proc/meminfo (Linux:
    free memory plus the caches the kernel can drop), else the free pages
    (``os.sysconf``), else None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_AVPHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _output_shape(
    module: ModuleType, h: float, t_end: float, output_every: int, t0: float
) -> tuple[int, int]:
    """Rows and numbers per row of a run's output at most: every number a row may hold
    (t, x and f, 2n each, the GCP aux record, m + 2 + 3n + 3, energy and power, 3) on
    every ``output_every``-th of its steps of ``h`` from ``t0`` to ``t_end``."""
    n, m = int(module.N_COORDINATES), int(module.N_CONSTRAINTS)
    rows = int(round((float(t_end) - t0) / h)) // max(int(output_every), 1) + 1
    return rows, 7 * n + m + 9


def output_bytes(
    module: ModuleType, h: float, t_end: float, output_every: int = 1, t0: float = 0.0
) -> float:
    """The memory a run's output takes at most (:func:`_output_shape`), in bytes."""
    rows, width = _output_shape(module, h, t_end, output_every, t0)
    return 8.0 * rows * width


def _row_store(destination: Path, expected: float) -> RowStore:
    """The store of a run that streams to ``destination``: a folder (one that exists,
    or a path without a suffix, created), or a file, whose folder is taken (created,
    as :meth:`Result.save` creates it)."""
    folder = destination if destination.is_dir() or not destination.suffix else destination.parent
    blocker = blocking_file(folder)
    if blocker is not None:
        raise OutputError(
            f"cannot keep the rows in {str(folder)!r}: {str(blocker)!r} is a file, not a folder"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the folder {str(folder)!r}: {exc.strerror}") from None
    return RowStore(folder, destination, expected=expected)


def too_large_for_memory(nbytes: float) -> bool:
    """Whether an output of ``nbytes`` takes more than :data:`MEMORY_WARN_SHARE` of the
    memory available (where it is known)."""
    free = _available_bytes()
    return free is not None and nbytes > MEMORY_WARN_SHARE * free


def _check_output_size(
    module: ModuleType, h: float, t_end: float, output_every: int, t0: float
) -> None:
    """Refuse, before allocating, an output that would not fit in memory; announce one
    that takes more than :data:`MEMORY_WARN_SHARE` of the memory available.  The
    estimate (every number a row may hold) is about the peak of a run and its save:
    the pendulum's 1e6 rows, 256 MB estimated, peaked at 246 MB (a 92 MB .npz)."""
    rows, width = _output_shape(module, h, t_end, output_every, t0)
    need = 8.0 * rows * width
    have = _memory_bytes()
    remedy = (
        f"record fewer rows with a larger output_every (--output-every, now {output_every}) "
        "or a shorter t_end, or keep the rows on disk while the run goes "
        "(stream_to=FOLDER; mbdgen simulate -o FILE.h5 --stream)"
    )
    if have is not None and need > MEMORY_SHARE * have:
        raise MbdgenError(
            f"the output would need {bytes_text(need)} ({rows:,} rows of {width} numbers), "
            f"more than half of this machine's {bytes_text(have)} of memory: {remedy}"
        )
    if too_large_for_memory(need):
        free = _available_bytes() or 0
        warnings.warn(
            f"the output will take about {bytes_text(need)} in memory ({rows:,} rows of "
            f"{width} numbers), more than {100 * MEMORY_WARN_SHARE:g} % of the "
            f"{bytes_text(free)} available: {remedy}",
            OutputSizeWarning,
            stacklevel=3,
        )


def _positive(name: str, value: float) -> float:
    value = float(value)
    if not (value > 0.0 and math.isfinite(value)):
        raise MbdgenError(f"{name} must be positive and finite, got {value}")
    return value


def check_tolerances(spec: Method, rtol: float, atol: float) -> tuple[float, float]:
    """``rtol``, ``atol`` as floats, refused unless positive and finite and, for an
    error-controlled method, rtol ≥ :data:`RTOL_MIN` (the CLI calls it before it
    compiles; :func:`simulate` for every caller)."""
    rtol, atol = _positive("rtol", rtol), _positive("atol", atol)
    if spec.error_controlled and rtol < RTOL_MIN:
        raise MbdgenError(
            f"rtol = {rtol:g} is below what float64 arithmetic can deliver for method "
            f"{spec.name!r}: the error estimate would be rounding noise; use rtol ≥ "
            f"{RTOL_MIN:.2g} (100 ε)"
        )
    return rtol, atol


#: Reactions are stored only up to this many numbers (N × R × 12); beyond, call
#: :func:`derived_quantities` on a subsampled result.
MAX_REACTION_VALUES = 50_000_000
#: Chunks (rows of ``Result.step_history``) a run of a step-choosing method is cut
#: into at least; each costs one return to Python (microseconds).
HISTORY_ROWS = 128
#: Accepted steps a history row should average at least: a chunk of a step-choosing
#: method with fewer doubles the next one (steps longer than the output interval).
HISTORY_MIN_STEPS = 8
#: A step-choosing run stops with :data:`~mbdgen.diagnose.STEP_SIZE_STALL` after a
#: chunk of at least ``STALL_MIN_STEPS`` accepted steps whose mean step is below
#: ``STALL_FALL`` times the largest mean step of an earlier chunk and at which the rest
#: of the run would take more than ``STALL_STEPS`` steps (:meth:`_Loop.stalled`).
STALL_MIN_STEPS = 1000
STALL_FALL = 1e-3
STALL_STEPS = 1e9


def check_states_supported(module: ModuleType, spec: Method) -> None:
    """Refuse a model with user differential states for a method that cannot integrate
    them (it would hold X at X0 and quietly simulate another system)."""
    n_states = int(getattr(module, "N_STATES", 0))
    if n_states and not spec.integrates_states:
        able = ", ".join(name for name, m in METHODS.items() if m.integrates_states)
        names = ", ".join(module.STATE_NAMES)
        hint = f"use one of: {able}"
        raise MbdgenError(
            f"method {spec.name!r} cannot integrate user states, and model "
            f"{module.MODEL_NAME!r} has {n_states} ({names}); {hint}"
        )
    reads = _states_reading_accelerations(module)
    if reads and spec.error_controlled:
        raise MbdgenError(
            f"model {module.MODEL_NAME!r}: state(s) {', '.join(reads)} read q̈ or λ, which "
            f"{spec.name!r} cannot yet integrate under error control (index-3 noise in q̈ "
            "and λ makes the states' error estimate reject every step); use 'genalpha' or "
            "'hht' at a fixed step"
        )


def _states_reading_accelerations(module: ModuleType) -> list[str]:
    """Names of the implicit states whose residual d depends on q̈ or λ (non-empty
    rows of d_q̈ or d_λ in the module's patterns)."""
    if not getattr(module, "IMPLICIT_STATES", False):
        return []
    rows: set[int] = set()
    for pattern in ("STATE_RESIDUAL_QDD_ROWS", "STATE_RESIDUAL_LAM_ROWS"):
        rows.update(int(i) for i in getattr(module, pattern, ()))
    return [module.STATE_NAMES[i] for i in sorted(rows)]


def column_block(a: np.ndarray) -> tuple[np.ndarray, int, int]:
    """``a`` (rows × width) as the post-processing kernels read it: ``(rows, col,
    width)``, columns ``col`` to ``col + width`` of a C-contiguous 2-D array.

    A Result's q, q̇, λ and X are column slices of the integrator's output record
    (:meth:`mbdgen.steppers.Stepper.columns`); that record is found through the view's
    base and handed over as it is, without copying the strided columns.  Any other
    array is made contiguous (a copy only where it is not).
    """
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"a column block is 2-D, got shape {a.shape}")
    rows, width = a.shape
    base = a.base
    if a.flags.c_contiguous or width == 0 or rows == 0:
        return np.ascontiguousarray(a), 0, width
    if (
        isinstance(base, np.ndarray)
        and base.ndim == 2
        and base.dtype == np.float64
        and base.flags.c_contiguous
        and a.strides == base.strides
    ):
        offset = a.ctypes.data - base.ctypes.data
        row0, col = divmod(offset, base.strides[0])
        col //= base.itemsize
        if offset >= 0 and row0 + rows <= base.shape[0] and col + width <= base.shape[1]:
            return base[row0 : row0 + rows], col, width
    return np.ascontiguousarray(a), 0, width


def derived_quantities(
    module: ModuleType, result: Result, p: np.ndarray, *, reactions: bool = True
) -> None:
    """Fill ``result``'s energy (T, V), power P and joint reactions from the kernels.

    One call of ``energy_rows`` (without reactions) or ``derived`` (with them) over all
    output rows, through the routines compiled once for all models with the module's
    ``energy``, ``phi_t`` (and ``reactions``) kernels by pointer
    (:func:`mbdgen.runtime.shared.postprocess_entry`).  :func:`simulate` runs it without
    reactions for the energy check, and attaches it to the Result, which runs it again
    with reactions on their first use (or on save), so runs that never look at
    reactions pay neither time, nor memory, nor the reactions kernel's compile.
    """
    label_result(result, module)  # λ's names, units and kinds (mbdgen.units)
    if not hasattr(module, "derived"):  # a module generated before energy kernels
        return
    rows = len(result)
    n_react = int(getattr(module, "N_REACTIONS", 0)) if reactions else 0
    if rows * n_react * 12 > MAX_REACTION_VALUES:
        n_react = 0
    store = result._store
    zeros = np.zeros if store is None else store.zeros
    energy = zeros((rows, 2))
    power = zeros(rows)
    q, qd, lam = (column_block(a) for a in (result.q, result.qd, result.lam))
    states = column_block(result.states)  # each row's X into the tail of p
    t = np.ascontiguousarray(result.t)
    p = np.asarray(p, dtype=np.float64)
    energy_only = n_react == 0 and hasattr(module, "energy_rows")
    if not energy_only:
        react = zeros((rows, n_react, 12))
    # rows on disk in blocks, each released before the next (the kernels are row by row)
    size = rows if store is None else rowstore.BLOCK_ROWS
    for a in rowstore.blocks(rows, size) if rows else ():
        b = min(a + size, rows)
        cut = [(block[a:b], col, width) for block, col, width in (q, qd, lam, states)]
        # energy alone: no reactions kernel to compile (3-8 s for a spatial model, cold)
        if energy_only:
            _postprocess(module, "energy_rows")(
                t[a:b], *cut[:3], p, cut[3], energy[a:b], power[a:b]
            )
        else:
            _postprocess(module, "derived")(
                t[a:b], *cut[:3], p, cut[3], energy[a:b], power[a:b], react[a:b]
            )
        if store is not None:
            store.release()
    if not getattr(module, "HAS_POTENTIAL", True):
        energy[:, 1] = np.nan  # the model gave no V: unknown, not 0 (so P is unknown too)
        power[:] = np.nan
    result._energy = energy
    result._power = power
    if n_react:
        result._reactions = react
        result.reaction_names = tuple(module.REACTION_NAMES)


def _postprocess(module: ModuleType, name: str) -> Callable[..., Any]:
    """``module.<name>`` ("energy_rows" or "derived") as the entry points are chosen
    (:func:`mbdgen.steppers._entry_point`): the module's own code, which calls its
    kernels directly, where it is compiled or in Numba's cache; else, under the policy
    "background", the routine shared by all models (kernels by pointer) while the own
    one compiles in a background process (under "shared": instead of compiling it).
    Per output row the own code is 4× faster (the slider-crank's energy rows: 13
    against 51 ns), a millisecond in a run of 20 000 rows; the shared one costs a new
    model no JIT before its first result."""
    own = getattr(module, name)
    if not shared.enabled() or specialize.policy() == "now":
        return own
    chosen = module.__dict__.setdefault("_mbdgen_postprocess", {})
    key = (name, specialize.policy())  # "shared" never switches to the own code
    if key not in chosen:
        chosen[key] = specialize.Specializing(
            own, lambda: shared.postprocess_entry(module, name), module, name
        )
    return chosen[key]


def reaction_names(module: ModuleType, rows: int) -> tuple[str, ...]:
    """Labels ``<joint>.<body>`` of the reaction rows a Result of ``rows`` output rows
    will have (none where the reactions would not fit in memory)."""
    n_react = int(getattr(module, "N_REACTIONS", 0))
    if not hasattr(module, "derived") or rows * n_react * 12 > MAX_REACTION_VALUES:
        return ()
    return tuple(getattr(module, "REACTION_NAMES", ()))


def method_settings(
    method: str, start: str, constraints: str, alpha: float, beta: float
) -> dict[str, Any]:
    """The settings of :func:`simulate` that ``method`` used, for ``Result.info`` (and so
    for a saved file's attributes): the Adams start-up only for the fixed-step Adams
    methods, the constraint handling only for a method that does not enforce the
    constraints itself, Baumgarte's gains only where the handling uses them
    (``baumgarte``, ``hybrid``): an ``hht_adaptive`` result carries no alpha, start or
    constraints, which it does not use."""
    spec = get_method(method)
    out: dict[str, Any] = {}
    if spec.family == "adams":
        out["start"] = start
    if not spec.enforces_constraints:
        out["constraints"] = constraints
        if constraints in ("baumgarte", "hybrid"):
            out.update(alpha=float(alpha), beta=float(beta))
    return out


def body_layout(module: ModuleType) -> dict[str, list[int]]:
    """``{body: [offset, size]}`` of a mechanism's bodies in q (size 3: planar, 7:
    spatial with Euler parameters); empty for a generalized-coordinate model."""
    names = getattr(module, "BODY_NAMES", ())
    offsets = getattr(module, "BODY_OFFSETS", ())
    sizes = getattr(module, "BODY_SIZES", ())
    return {name: [int(o), int(k)] for name, o, k in zip(names, offsets, sizes, strict=False)}


def _initial_partition(
    module: ModuleType,
    t0: float,
    q0: np.ndarray,
    p: np.ndarray,
    constraints: str,
    kernel: str = "phi",
) -> tuple[np.ndarray, np.ndarray, float]:
    """The partition at t0: GCP on a sparse module chooses it on Φ_q's pattern
    (:func:`partition.module_pivot_order`); the hybrid algorithm, which chooses again
    by full pivoting at every evaluation, and dense modules by full pivoting.  Φ_q
    comes from ``kernel`` (:func:`~mbdgen.analysis.assembly.constraint_jacobian`)."""
    _, phi_q = constraint_jacobian(module, t0, q0, p, kernel)
    try:
        if constraints == "gcp":
            return partition.module_pivot_order(module, phi_q)[:3]
        return partition.choose_partition(phi_q)
    except ValueError as exc:
        raise MbdgenError(f"cannot partition the coordinates at t0: {exc}") from None


def _sparse_gcp_workspace(
    module: ModuleType, t0: float, x: np.ndarray, p: np.ndarray
) -> tuple[partition.GcpSparseWorkspace, float]:
    """GCP's sparse workspace at t0 (the partition and Φ_u's static elimination order
    from threshold Markowitz pivoting on Φ_q's pattern, the module's index-1 KKT plan)
    and the partition's quality."""
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    rows, cols = module.PHI_Q_ROWS, module.PHI_Q_COLS
    _, phi_q, _ = constraint_blocks(module, t0, x[:n], x[n:], p, "dynamics_values")
    try:
        order = partition.pivot_order_sparse(m, n, rows, cols, phi_q)
        dep, ind, quality, row_of, col_of = order
    except ValueError as exc:
        raise MbdgenError(f"cannot partition the coordinates at t0: {exc}") from None
    ws = partition.gcp_sparse_workspace(
        module, sparse.module_plan(module), dep, ind, row_of, col_of, x[:n], x[n:]
    )
    return ws, quality


def _repartition(stepper: Stepper, pivot_ratio: float, last_row: np.ndarray | None) -> int:
    """Choose new independent coordinates at the last accepted step (Haug §7.3.2,
    step 7) and restart the multistep method there.

    ``stepper.restart(evaluate_only)`` makes the next ``advance`` start afresh from
    ``run.x`` (the fixed-step loop's history count, the variable-step method's start
    flag; with ``evaluate_only`` the variable-step start takes no trial evaluation for
    its first step, which would leave a perturbed q in ``ws``).  A zero-step call then
    re-evaluates the last accepted state with the old partition, which leaves the full
    q, q̇ and Φ_q in ``ws``; the new partition comes from that Φ_q as the first one did
    (:func:`_initial_partition`, :func:`partition.repartitioned`).
    Newton starts from the last evaluated q, or, if a failed evaluation left it
    non-finite, from the last recorded row (``last_row``, the partitioned aux record).
    """
    run, ws = stepper.run, stepper.ws
    n, m, x, ctrl = run.n, run.m, run.x, run.ctrl
    q, qd = ws.q, ws.qd
    if last_row is not None and not (np.isfinite(q).all() and np.isfinite(qd).all()):
        o = m + 2
        q[:] = last_row[o : o + n]
        qd[:] = last_row[o + n : o + 2 * n]
    stepper.restart(True)
    status = stepper.advance(0)
    if status not in (OK, REPARTITION):
        return status
    dep, ind = ws.dep, ws.ind
    try:
        if isinstance(ws, partition.GcpSparseWorkspace):  # a new static order for Φ_u's LU
            module = run.module
            pattern = (module.PHI_Q_ROWS, module.PHI_Q_COLS)
            ws, new_dep, new_ind, quality = partition.repartitioned(ws, pattern)
            stepper.ws = run.gcp_ws = ws
        elif run.constraints == "gcp":
            new_dep, new_ind, quality = partition.module_pivot_order(run.module, ws.phi_q)[:3]
        else:
            new_dep, new_ind, quality = partition.choose_partition(ws.phi_q)
    except ValueError:
        return SINGULAR
    dep[:] = new_dep
    ind[:] = new_ind
    ctrl[partition.C_PIVOT_RATIO] = pivot_ratio * quality
    nv = n - m
    x[:nv] = q[ind]
    x[nv:] = qd[ind]
    stepper.restart(False)
    return OK


def _redundant_rows(
    module: ModuleType,
    t0: float,
    q0: np.ndarray,
    p: np.ndarray,
    constraints: str,
    newton_tol: float,
    assembled: bool,
    kernel: str = "phi",
) -> RemovedRows:
    """Redundant rows of Φ_q(q0) to leave out of the integration (λ = 0 there), for a
    consistent q0 (:func:`~mbdgen.analysis.assembly.removable_rows`); GCP and the
    hybrid algorithm, which solve for one dependent coordinate per row, refuse them."""
    removed = removable_rows(
        module, t0, q0, p, tol=max(CONSISTENCY_TOL, newton_tol), assembled=assembled,
        kernel=kernel,
    )  # fmt: skip
    if removed and constraints in ("gcp", "hybrid"):
        raise MbdgenError(
            f"constraints={constraints!r} cannot run a mechanism with redundant constraints "
            f"({', '.join(removed.names)} depend on the other rows): partitioning needs "
            "independent rows; use 'direct' or 'baumgarte' (which leave those rows out) "
            "or a Welch method"
        )
    return removed


def _check_motion(
    module: ModuleType,
    spec: Method,
    t0: float,
    t_end: float,
    x: np.ndarray,
    p: np.ndarray,
    removed: RemovedRows,
    kernel: str,
) -> None:
    """Refuse, before the first step, a run of an error-controlled index-3 method on a
    mechanism that cannot move: 0 degrees of freedom (rank Φ_q(q0) = n), no driver (Φ_t
    = 0 at q0 at five times of the run) and no user states.  The error control weighs
    its estimates by the motion, and with none it cut the step to 1e-308 and stopped at
    t0 on 'the solution became NaN'; every other method records the constant state.
    A driven mechanism of 0 degrees of freedom (a kinematic one) runs."""
    n = module.N_COORDINATES
    if spec.family not in ("hht_adaptive", "genalpha_adaptive") or int(
        getattr(module, "N_STATES", 0)
    ):
        return
    if removed.rank < n:  # rank Φ_q(q0) (m for independent rows)
        return
    for t in np.linspace(t0, t_end, 5):
        if np.any(constraint_blocks(module, t, x[:n], x[n:], p, kernel)[2] != 0.0):
            return  # a driver moves it
    raise MbdgenError(
        f"model {module.MODEL_NAME!r} has 0 degrees of freedom (rank Φ_q = {removed.rank} "
        f"on {n} coordinates) and nothing drives it (Φ_t = 0): nothing moves, "
        f"and {spec.name}'s error control has no motion to measure; its configuration, λ "
        "and reactions are constant: `mbdgen assemble` gives them, or a fixed-step method "
        f"({'hht' if spec.family == 'hht_adaptive' else 'genalpha'}, abm) records them"
    )


def _control(alpha: float, beta: float, pivot_ratio: float, newton_tol: float) -> np.ndarray:
    """The ``ctrl`` vector of the right sides (index1, partition): Baumgarte's α, β,
    GCP's pivot-ratio threshold, Newton tolerance and iteration limit."""
    ctrl = np.zeros(partition.CTRL_SIZE)
    ctrl[:2] = float(alpha), float(beta)
    ctrl[partition.C_PIVOT_RATIO] = pivot_ratio
    ctrl[partition.C_NEWTON_TOL] = newton_tol
    ctrl[partition.C_NEWTON_ITERS] = 25
    return ctrl


@dataclass
class _Loop:
    """What :func:`_drive` hands back: the last status, the interrupt or model
    exception that stopped it, chunk and re-partition counts, and its timings."""

    status: int = OK
    stop: BaseException | None = None
    chunks: int = 0
    repartitions: list[int] = field(default_factory=list)
    started: float = 0.0
    stepping: float = 0.0
    wall: float = 0.0
    history: list[tuple[float, ...]] = field(default_factory=list)
    stall: str = ""  # what :meth:`stalled` found, for the message

    def stalled(self, t_end: float) -> bool:
        """Whether the steps that the error control accepts have collapsed: the last
        chunk's ≥ :data:`STALL_MIN_STEPS` steps average less than :data:`STALL_FALL`
        of the largest mean step of a chunk before it, and at that mean the rest of
        the run would take more than :data:`STALL_STEPS` steps.

        The floor each family tests, 16 ulp of t (and h_min), is reached only after
        millions of accepted steps when the error test cuts the step a little at a
        time: an undamped index-3 method (``hht_alpha`` = 0) on the pendulum at ε =
        1e-8 took 3.3 million steps (1.3 s) from t = 0.0788 to 0.0818 as h fell from
        2e-5 to 3e-16.  Both tests together spare a legitimate run: a step that dips
        at a discontinuity recovers within a chunk, and a run that needs small steps
        from its start never fell from large ones."""
        if len(self.history) < 2:
            return False
        (t, steps, h_mean, *_), previous = self.history[-1], self.history[-2]
        taken = steps - previous[1]
        if not (taken >= STALL_MIN_STEPS and h_mean > 0.0):
            return False
        largest = max((row[2] for row in self.history[:-1] if row[2] > 0.0), default=0.0)
        remaining = (t_end - t) / h_mean
        if not (h_mean < STALL_FALL * largest and remaining > STALL_STEPS):
            return False
        self.stall = (
            f"The last {int(taken)} steps averaged h = {h_mean:.3g}, {largest / h_mean:.1e} "
            f"times less than the run's largest mean step ({largest:.3g}); at that size the "
            f"remaining {t_end - t:.3g} would take {remaining:.1e} steps."
        )
        return True

    def record(self, stepper: Stepper) -> None:
        """One row of ``Result.step_history`` after a chunk (counters are cumulative)."""
        c = stepper.counters()
        steps = int(c.get("steps", 0))
        t = float(stepper.t)
        t_last, steps_last = self.history[-1][:2] if self.history else (stepper.run.t0, 0)
        h_mean = (t - t_last) / (steps - steps_last) if steps > steps_last else math.nan
        row = (t, steps, h_mean, c.get("order", 0), c.get("newton_iterations", 0))
        self.history.append((*row, c.get("rejected_steps", 0)))

    def history_array(self) -> np.ndarray:
        return np.array(self.history, dtype=np.float64).reshape(-1, 6)


def _drive(
    stepper: Stepper,
    pivot_ratio: float,
    progress: ProgressCallback | None,
    mark: int | None = None,
) -> _Loop:
    """Advance ``stepper`` chunk by chunk to the run's end (DESIGN rule 1: Python runs
    only between chunks), re-partitioning GCP runs and turning Ctrl-C, SIGTERM and a
    model's exception (without JIT) into a stop with everything kept.  A signal
    received after ``mark`` (:func:`mbdgen.interrupts.count`, taken when the run
    began) stops the run even where its exception was lost (:func:`~mbdgen.interrupts.since`)."""
    run = stepper.run
    n_steps, output_every = run.n_steps, run.output_every
    longest = max(output_every, (CHUNK_STEPS // output_every) * output_every)
    chunk = longest
    if stepper.CHOOSES_STEPS:  # a step-size history worth plotting: about HISTORY_ROWS rows
        chunk = min(
            chunk, max(output_every, (n_steps // HISTORY_ROWS) // output_every * output_every)
        )
    loop = _Loop(started=time.perf_counter())
    loop.stepping = loop.started
    status = OK
    if mark is None:
        mark = interrupts.count()
    guard = interrupts.interrupts_as_exceptions()
    guard.__enter__()
    try:
        # A zero-step call compiles or loads the entry point and evaluates f(x0, t0),
        # so that the step timing below is of stepping alone.
        status = stepper.advance(0)
        # a signal whose exception a finalizer swallowed during a compilation
        interrupts.raise_if_received(mark)
        loop.stepping = time.perf_counter()
        while stepper.progress < n_steps:
            # GCP re-partitions when Φ_u degrades, and also when Newton's method fails
            # (Haug §7.3.2 step 7: "or the integrator struggles"); a step that fails
            # again with a fresh partition stops the run.
            if status in (REPARTITION, NEWTON_FAILED) and run.constraints == "gcp":
                if loop.repartitions.count(stepper.accepted) >= MAX_REPARTITIONS_PER_STEP:
                    break
                # A variable-step run first writes the outputs still due inside its last
                # step, with the old partition (a request to re-partition is advisory).
                while status in (OK, REPARTITION) and stepper.pending_output():
                    status = stepper.advance(1)
                if stepper.pending_output():
                    break  # Newton failed at an output inside the last step
                row = stepper.rows - 1
                last = stepper.out.aux[row] if row >= 0 else None
                status = _repartition(stepper, pivot_ratio, last)
                loop.repartitions.append(stepper.accepted)
            if status not in (OK, REPARTITION):
                break
            accepted = stepper.accepted
            status = stepper.advance(min(chunk, n_steps - stepper.progress))
            interrupts.raise_if_received(mark)
            if run.store is not None:
                run.store.release()
            loop.chunks += 1
            loop.record(stepper)
            if stepper.CHOOSES_STEPS and status == OK and loop.stalled(run.t_end):
                status = STEP_SIZE_STALL
                break
            # A history row of a step or two says nothing a longer one would not, and
            # each chunk costs a return to Python (~20 µs, as many as a short
            # implicit run's steps): grow the chunk while steps outlast the output
            # interval.  Steps, not the clock, decide, so the history is reproducible.
            if stepper.CHOOSES_STEPS and stepper.accepted - accepted < HISTORY_MIN_STEPS:
                chunk = min(longest, 2 * chunk)
            if progress is not None:
                progress(run.t0 + stepper.progress * run.h, run.t_end)
        if status == REPARTITION and stepper.progress >= n_steps:
            status = OK
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM as Interrupted
        loop.stop = exc
    except ArithmeticError as exc:  # a model kernel run without JIT (NUMBA_DISABLE_JIT)
        loop.stop, status = exc, NONFINITE
    except Exception:
        if interrupts.since(mark) is None:
            raise
        loop.stop = KeyboardInterrupt()  # an interrupt that Numba's compiler wrapped
    finally:
        guard.__exit__(None, None, None)
    loop.status = status
    loop.wall = time.perf_counter() - loop.stepping
    return loop


def _consistent_start(
    module: ModuleType,
    t0: float,
    x: np.ndarray,
    params: Mapping[str, float] | None,
    tol: float,
    residuals: tuple[np.ndarray, np.ndarray],
    hold: tuple[str, ...] = (),
    fallback: float | None = None,
) -> tuple[np.ndarray, dict[str, float] | None]:
    """q0, q̇0 made consistent for the error-controlled index-3 methods, as MSC.ADAMS
    runs its initial-conditions analysis before an HHT run (Negrut et al. 2007, §4).

    Their error test (Eq. 25) counts the first step's correction of Φ(q0) as local
    error of q, whatever h: an inconsistency above ε (4e-5 on the slider-crank's
    rounded q0) would reject every step.  ``residuals`` are Φ(q0) and Φ_q q̇0 + Φ_t
    (:func:`constraint_residuals`, which :func:`simulate` evaluated for its own check).
    Returns the state and what was removed (their max-norms), or None when q0, q̇0
    were consistent to ``tol``.  ``hold``: the coordinates a user's ``assemble`` held.
    A ``tol`` at round-off that Newton's method cannot reach falls back to
    ``fallback``.
    """
    from mbdgen.analysis.assembly import assemble as assemble_state

    n = module.N_COORDINATES
    phi, phid = residuals
    before = {
        "phi": float(np.abs(phi).max(initial=0.0)),
        "phid": float(np.abs(phid).max(initial=0.0)),
    }
    if max(before.values()) <= tol:
        return x, None
    try:
        assembled = assemble_state(
            module, q0=x[:n], qd0=x[n:], t0=t0, params=params, hold=hold, tol=tol
        )
    except MbdgenError:
        if fallback is None or fallback <= tol:
            raise
        if max(before.values()) <= fallback:
            return x, None
        assembled = assemble_state(
            module, q0=x[:n], qd0=x[n:], t0=t0, params=params, hold=hold, tol=fallback
        )
    return np.concatenate([assembled.q, assembled.qd]), before


def simulate(
    model: ModuleType | str | Path,
    method: str = "abm",
    order: int | None = None,
    h: float = 1e-3,
    t_end: float = 10.0,
    *,
    t0: float = 0.0,
    params: Mapping[str, float] | None = None,
    q0: Sequence[float] | Mapping[str, float] | None = None,
    qd0: Sequence[float] | Mapping[str, float] | None = None,
    x0: Sequence[float] | Mapping[str, float] | None = None,
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
    hht_alpha: float | None = None,
    rho_inf: float | None = None,
    options: Mapping[str, Any] | None = None,
    phi_tol: float = PHI_TOL,
    energy_tol: float = ENERGY_TOL,
    strict: bool = False,
    stream_to: str | Path | None = None,
    error_estimate: bool = False,
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
    q0, qd0 : initial coordinates and velocities, every one in the order of
        ``COORDINATE_NAMES`` or some by name (the others keep the model's ``Q0``,
        ``QD0``); default the model's.
    x0 : initial values of the model's user differential states X (controllers,
        actuators; Negrut et al. 2007, Eq. 8a), in the order of ``STATE_NAMES`` or by
        name (the others keep the model's ``X0``); default the model's ``X0``.  Only
        the index-3 methods (hht, genalpha and their error-controlled forms) integrate
        states; ``result.states``, ``result.state_rates`` hold X and Ẋ.
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
        ``rkf45_adaptive``, ``dop853``, ``hht_adaptive``, ``genalpha_adaptive``,
        ``radau5``), for which ``h`` is
        the output interval, not a step size.  For the index-3 methods the error of q
        is weighted by max(atol, rtol max_t |q_i|): rtol = atol = ε is Negrut et al.
        2007's ε (Eq. 34); ``options`` ``h_min``, ``h_max``, ``h_first`` bound the steps.
    assemble : first make q0, q̇0 consistent (:func:`mbdgen.analysis.assembly.assemble`);
        a list of coordinate names holds those at their given values.
    newton_tol : ‖Φ‖∞ to which GCP solves for the dependent coordinates.
    pivot_ratio : GCP re-partitions when Φ_u's conditioning (its smallest LU pivot over
        the largest entry of Φ_q) falls below this fraction of its value when the
        partition was chosen; the hybrid algorithm reverts to pure GCP while the
        quality of its full-pivoting partition is below this fraction of its value at t0.
    phi_tol : bound on ‖Φ‖₂ at t0 and over the run; beyond it a
        :class:`ConstraintWarning` names the worst time and value (also kept in
        ``result.info["warnings"]``).
    energy_tol : bound on the energy balance error |T + V − E0 − ∫P dt| over the
        energy the run exchanges (P: the power of dampers, motors, drivers; see
        :func:`energy_balance`); checked where the model gives a potential energy.
    hht_alpha : HHT's α ∈ [−1/3, 0] for ``method="hht"`` (Negrut et al. 2007, Eq. 6;
        default −0.05): β = (1 − α)²/4, γ = (1 − 2α)/2, 0 is the trapezoidal rule, −1/3
        damps most (spectral radius (1 + α)/(1 − α) at hω → ∞).  Not Baumgarte's
        ``alpha``.  ``newton_tol`` is then the Newton tolerance on (q̈, λ).
    rho_inf : generalized-α's spectral radius at hω → ∞, ρ∞ ∈ [0, 1], for
        ``method="genalpha"`` (Chung & Hulbert 1993; default 0.9): 1 damps nothing, 0
        annihilates the highest frequencies in one step.  ``newton_tol`` as for ``hht``.
    options : options of the method's family (:meth:`mbdgen.steppers.Stepper.check_options`),
        e.g. for ``hht``: ``max_iterations`` (10), ``predictor_degree`` (0-3, 2; with error
        control the highest degree, the one that predicted the last step best is used,
        unless ``fixed_degree``) and ``full_newton`` (False: modified Newton); for
        ``newmark_gcp`` and ``newmark_gcp_fv`` (Haug, Negrut & Iancu 1997):
        ``max_iterations`` (10), ``full_newton`` and ``predictor`` ("ode": the §3.3
        predictor stage, or "constant": v̈_n), with ``newton_tol`` the tolerance on v̈ and
        on ‖Φ‖∞; for ``radau5``: ``max_iterations`` (7), ``fixed_step`` (False) and
        ``extra_iteration`` (True: one Newton iteration past RADAU5's stopping test).
    strict : turn those warnings into a :class:`SimulationError` (for CI use); an
        inconsistent q0 then fails before the first step.
    stream_to : a folder (or a file, whose folder is taken) where the output rows are
        kept while the run goes, instead of memory (:mod:`mbdgen.rowstore`): the
        memory of a run is then the same however many rows it records, and the same
        numbers come out.  The space is reserved before the first step (a folder
        without room fails then, naming it); ``result.save("run.h5")`` writes the
        file block by block.  Meant for the folder of the file the result goes to.
    error_estimate : also estimate the global error of q and q̇ at every output row
        (``result.error_q``, ``result.error_qd``): the difference from a second
        solution with rtol and atol a tenth (error-controlled methods) or half the
        step h (the others), on the same output times.  It costs that second run
        (``result.info["error_estimate"]`` gives its time and steps).  The true error
        is the difference × 1/(1 − r), r the second solution's error over the first's:
        2^−p at a fixed step of order p, about 10^−s with error control (s the
        tolerance slope, docs/methods.md).

    Redundant constraint rows of Φ_q(q0) are left out of the integration when Φ(q0)
    holds (λ = 0 there; ``info["removed_constraints"]``, ``info["lambda_not_unique"]``).

    Raises
    ------
    SimulationError
        On a singular matrix, a NaN, Ctrl-C or SIGTERM (``error.reason`` says which);
        ``error.result`` holds the steps computed until then.
    MbdgenError
        On invalid options; on redundant rows that Φ(q0) does not satisfy, or that
        GCP or the hybrid algorithm would need to partition.
    """
    if error_estimate:
        arguments = {k: v for k, v in locals().items() if k != "error_estimate"}
        return _with_error_estimate(arguments)
    mark = interrupts.count()  # signals from here on stop this run (_drive)
    plan = _plan(
        model, method, order, h, t_end, t0=t0, alpha=alpha, beta=beta,
        output_every=output_every, start=start, constraints=constraints, rtol=rtol,
        atol=atol, assemble=assemble, newton_tol=newton_tol, pivot_ratio=pivot_ratio,
        hht_alpha=hht_alpha, rho_inf=rho_inf, options=options, phi_tol=phi_tol,
        energy_tol=energy_tol, strict=strict, stream_to=stream_to,
    )  # fmt: skip
    return _execute(plan, params, q0, qd0, x0, progress, mark)


def prepare(
    model: ModuleType | str | Path,
    method: str = "abm",
    order: int | None = None,
    h: float = 1e-3,
    t_end: float = 10.0,
    *,
    t0: float = 0.0,
    alpha: float = 0.0,
    beta: float = 0.0,
    output_every: int = 1,
    start: str = "rkf45",
    constraints: str | None = None,
    rtol: float = 1e-6,
    atol: float = 1e-6,
    assemble: bool | Sequence[str] = False,
    newton_tol: float = 1e-10,
    pivot_ratio: float = 0.1,
    hht_alpha: float | None = None,
    rho_inf: float | None = None,
    options: Mapping[str, Any] | None = None,
    phi_tol: float = PHI_TOL,
    energy_tol: float = ENERGY_TOL,
    strict: bool = False,
    stream_to: str | Path | None = None,
) -> PreparedRun:
    """A run of :func:`simulate` with everything but the parameters and the initial
    state decided once: ``run = prepare(model, "hht", h=1e-3, t_end=2)``, then
    ``run(params={"k": 2.0})`` for each case of a study.

    The options are those of :func:`simulate` (checked here, so a wrong one fails
    before the first case); each call gives the same :class:`Result`, bit for bit, as
    ``simulate`` with the same arguments would, and raises what it would.  What is
    saved per call is the checking of the options, the resolving of the model, its
    kernels' queue and the output-size check (docs/design-notes.md, "Prepared runs").
    """
    plan = _plan(
        model, method, order, h, t_end, t0=t0, alpha=alpha, beta=beta,
        output_every=output_every, start=start, constraints=constraints, rtol=rtol,
        atol=atol, assemble=assemble, newton_tol=newton_tol, pivot_ratio=pivot_ratio,
        hht_alpha=hht_alpha, rho_inf=rho_inf, options=options, phi_tol=phi_tol,
        energy_tol=energy_tol, strict=strict, stream_to=stream_to,
    )  # fmt: skip
    return PreparedRun(plan)


class PreparedRun:
    """A run planned by :func:`prepare`; call it with the parameters and the initial
    state of one case (each by name or in the model's order, as for :func:`simulate`)."""

    def __init__(self, plan: _Plan) -> None:
        self._plan = plan

    @property
    def module(self) -> ModuleType:
        """The generated module the runs integrate."""
        return self._plan.module

    @property
    def method(self) -> str:
        """The method's name."""
        return self._plan.spec.name

    def __repr__(self) -> str:
        plan = self._plan
        return (
            f"<PreparedRun {plan.module.MODEL_NAME} {plan.spec.name} h={plan.h:g} "
            f"t={plan.t0:g}..{plan.t_end:g}>"
        )

    def __call__(
        self,
        params: Mapping[str, float] | None = None,
        q0: Sequence[float] | Mapping[str, float] | None = None,
        qd0: Sequence[float] | Mapping[str, float] | None = None,
        x0: Sequence[float] | Mapping[str, float] | None = None,
        progress: ProgressCallback | None = None,
    ) -> Result:
        """One run from these parameters and initial state (the model's where None)."""
        mark = interrupts.count()  # signals from here on stop this run (_drive)
        return _execute(self._plan, params, q0, qd0, x0, progress, mark)


@dataclass
class _Plan:
    """A run's settings, checked: what :func:`simulate` decides before it looks at
    the parameters and the initial state (and :func:`prepare` keeps between runs)."""

    module: ModuleType
    spec: Method
    order: int
    h: float
    t0: float
    t_end: float
    n_steps: int
    output_every: int
    start: str
    constraints: str
    alpha: float
    beta: float
    rtol: float
    atol: float
    assemble: bool | Sequence[str]
    newton_tol: float
    pivot_ratio: float
    family_options: dict[str, Any]
    phi_tol: float
    energy_tol: float
    strict: bool
    stream_to: str | Path | None
    kernel: str = ""  # the evaluation kernel, once :func:`_ready` has run


def _plan(
    model: ModuleType | str | Path,
    method: str,
    order: int | None,
    h: float,
    t_end: float,
    *,
    t0: float,
    alpha: float,
    beta: float,
    output_every: int,
    start: str,
    constraints: str | None,
    rtol: float,
    atol: float,
    assemble: bool | Sequence[str],
    newton_tol: float,
    pivot_ratio: float,
    hht_alpha: float | None,
    rho_inf: float | None,
    options: Mapping[str, Any] | None,
    phi_tol: float,
    energy_tol: float,
    strict: bool,
    stream_to: str | Path | None,
) -> _Plan:
    """The options of :func:`simulate` checked, and the model resolved."""
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
    if spec.enforces_constraints and constraints != "direct":
        raise MbdgenError(
            f"method {method!r} enforces the constraints itself; it takes no "
            f"{constraints!r} constraint handling (nor alpha, beta)"
        )
    keywords = {"hht_alpha": hht_alpha, "rho_inf": rho_inf}
    for name, value in keywords.items():
        if value is not None and name not in getattr(FAMILIES[spec.family], "DEFAULTS", {}):
            meaning, owner = FAMILY_KEYWORDS[name]
            raise MbdgenError(
                f"{name} is {meaning}: it applies to methods {owner} only, not {method!r} "
                "(Baumgarte's gains are alpha and beta)"
            )
    try:
        family_options = FAMILIES[spec.family].check_options(
            {**(options or {}), **{k: v for k, v in keywords.items() if v is not None}}
        )
    except MbdgenError as exc:
        raise MbdgenError(f"method {method!r}: {exc}") from None
    if constraints in ("direct", "gcp") and (alpha or beta):
        raise MbdgenError(f"alpha and beta are Baumgarte parameters; {constraints!r} uses none")
    if constraints == "baumgarte" and not (alpha or beta):
        raise MbdgenError(
            "Baumgarte stabilization needs alpha or beta > 0 (Haug 1989, Eq. 7.3.8); with "
            "both 0 it is direct integration: set them, or use constraints='direct'"
        )
    for name, value in (("alpha", alpha), ("beta", beta)):
        if not (math.isfinite(float(value)) and float(value) >= 0.0):
            raise MbdgenError(f"Baumgarte {name} must be a finite number ≥ 0, got {value}")
    h = _positive("step size h", h)
    rtol, atol = check_tolerances(spec, rtol, atol)
    newton_tol, phi_tol = _positive("newton_tol", newton_tol), _positive("phi_tol", phi_tol)
    energy_tol = _positive("energy_tol", energy_tol)
    t0 = float(t0)
    if not (math.isfinite(t0) and math.isfinite(float(t_end))):
        raise MbdgenError(f"t0 and t_end must be finite numbers, got {t0} and {t_end}")
    span = float(t_end) - t0
    if not span > 0.0:
        raise MbdgenError(f"t_end ({t_end}) must be greater than t0 ({t0})")
    n_steps = int(round(span / h))
    if abs(n_steps * h - span) > 1e-9 * max(span, 1.0):
        raise MbdgenError(f"t_end - t0 = {span} is not a whole number of steps h = {h}")
    if output_every < 1:
        raise MbdgenError("output_every must be at least 1")

    return _Plan(
        module=resolve_model(model), spec=spec, order=order, h=h, t0=t0,
        t_end=float(t_end), n_steps=n_steps, output_every=output_every, start=start,
        constraints=constraints, alpha=alpha, beta=beta, rtol=rtol, atol=atol,
        assemble=assemble, newton_tol=newton_tol, pivot_ratio=pivot_ratio,
        family_options=family_options, phi_tol=phi_tol, energy_tol=energy_tol,
        strict=strict, stream_to=stream_to,
    )  # fmt: skip


def _ready(plan: _Plan) -> None:
    """What a plan needs once the names are known good: the method takes the model's
    states, the kernels are queued (policy "background"), the output fits."""
    module, spec, constraints = plan.module, plan.spec, plan.constraints
    check_states_supported(module, spec)
    kernel = evaluation_kernel(module, spec.family, constraints)
    if shared.enabled():  # a new model's kernels on two cores (policy "background")
        queue = shared.kernel_queue(
            module, kernel, shared.kernels_after_start(module, spec.family, constraints)
        )
        signatures = {k: shared.kernel_signature(k) for k in queue}
        if specialize.start_kernels(module, queue, signatures):
            specialize.compile_claimed(module, kernel, shared.kernel_signature(kernel))
    if plan.stream_to is None:
        _check_output_size(module, plan.h, plan.t_end, plan.output_every, plan.t0)
    plan.kernel = kernel


def _execute(
    plan: _Plan,
    params: Mapping[str, float] | None,
    q0: Sequence[float] | Mapping[str, float] | None,
    qd0: Sequence[float] | Mapping[str, float] | None,
    x0: Sequence[float] | Mapping[str, float] | None,
    progress: ProgressCallback | None,
    mark: int,
) -> Result:
    """One run of ``plan`` from these parameters and initial state (:func:`simulate`)."""
    module, spec, order, h, t0 = plan.module, plan.spec, plan.order, plan.h, plan.t0
    t_end, n_steps, output_every = plan.t_end, plan.n_steps, plan.output_every
    start, constraints, alpha, beta = plan.start, plan.constraints, plan.alpha, plan.beta
    rtol, atol, assemble, newton_tol = plan.rtol, plan.atol, plan.assemble, plan.newton_tol
    pivot_ratio, family_options = plan.pivot_ratio, plan.family_options
    phi_tol, energy_tol, strict, stream_to = (
        plan.phi_tol, plan.energy_tol, plan.strict, plan.stream_to,
    )  # fmt: skip
    # the names first: a misspelled one must not wait for kernels to be specialized
    p = parameter_vector(module, params, x0)
    x = np.concatenate(
        [
            coordinate_vector(module, q0, module.Q0, "q0"),
            coordinate_vector(module, qd0, module.QD0, "qd0"),
        ]
    )
    if not plan.kernel:
        _ready(plan)
    kernel = plan.kernel
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    # numbers per output row at most: t, x and f (2n each), the GCP aux record
    # (m + 2 + 3n + 3), energy and power (3)
    store = None
    if stream_to is not None:
        store = _row_store(Path(stream_to), output_bytes(module, h, t_end, output_every, t0))
    n_params = len(module.PARAMETER_NAMES)  # p = [parameters; user states X0]
    if assemble is not False:
        from mbdgen.analysis.assembly import assemble as assemble_state

        hold = () if assemble is True else tuple(assemble)
        assembled = assemble_state(
            module, q0=x[:n], qd0=x[n:], t0=t0, params=params, hold=hold, tol=newton_tol
        )
        x = np.concatenate([assembled.q, assembled.qd])
    removed = _redundant_rows(
        module, t0, x[:n], p, constraints, newton_tol, assemble is not False, kernel
    )
    _check_motion(module, spec, t0, float(t_end), x, p, removed, kernel)
    rows = n_steps // output_every + 1
    warned: list[str] = []
    residuals0 = constraint_residuals(module, t0, x[:n], x[n:], p, kernel)
    phi0 = residuals0[0]
    phi0_norm = float(np.linalg.norm(phi0))
    if not phi0_norm <= phi_tol:
        worst = int(np.argmax(np.abs(np.nan_to_num(phi0, nan=np.inf))))
        label = tuple(getattr(module, "CONSTRAINT_NAMES", ()) or range(m))[worst]
        warned.append(
            f"q0 violates the constraints: ‖Φ(q0)‖ = {phi0_norm:.3g} > phi_tol = {phi_tol:g} "
            f"(worst row {label}); make it consistent with assemble=True (--assemble)"
        )
        if strict:
            raise MbdgenError(warned[-1])
        # said now, before the first step: a long run would keep it to its end, and
        # one that fails would not say it at all (it stays in info["warnings"])
        warnings.warn(warned[-1], ConstraintWarning, stacklevel=3)
        said = len(warned)
        start_note = (
            f"q0 violates the constraints: ‖Φ(q0)‖ = {phi0_norm:.3g} > phi_tol = {phi_tol:g} "
            f"({_violated_rows(module, phi0, phi_tol)})"
        )
    else:
        said, start_note = 0, ""
    projected = None
    family = FAMILIES[spec.family]
    if family.CONSISTENT_START:
        tol0 = family.start_tol(family_options, newton_tol, x[:n])
        if assemble is False or tol0 < newton_tol:
            hold = () if assemble in (False, True) else tuple(cast(Sequence[str], assemble))
            x, projected = _consistent_start(
                module, t0, x, params, tol0, residuals0, hold, newton_tol
            )
    partitioned = constraints in ("gcp", "hybrid")
    gcp_ws: Any = None
    if partitioned:
        if constraints == "gcp" and shared.sparse_gcp(module):
            gcp_ws, quality = _sparse_gcp_workspace(module, t0, x, p)
            ind = gcp_ws.ind
        else:
            dep, ind, quality = _initial_partition(module, t0, x[:n], p, constraints, kernel)
            gcp_ws = partition.gcp_workspace(n, m, dep, ind, x[:n], x[n:])
        if constraints == "gcp":
            x = np.concatenate([x[:n][ind], x[n:][ind]])
    run = Run(
        module=module,
        spec=spec,
        order=order,
        p=p,
        x=x,
        t0=t0,
        t_end=float(t_end),
        h=h,
        n_steps=n_steps,
        output_every=output_every,
        rows=rows,
        constraints=constraints,
        ctrl=_control(alpha, beta, pivot_ratio * (quality if partitioned else 1.0), newton_tol),
        removed=removed,
        start=start,
        rtol=rtol,
        atol=atol,
        newton_tol=newton_tol,
        gcp_ws=gcp_ws if partitioned else None,
        options=family_options,
        store=store,
    )
    stepper = FAMILIES[spec.family](run)
    out = stepper.out

    # A signal after the stepping (while the Result is built and checked, about a
    # millisecond) is recorded, not raised: a second Ctrl-C must not lose the partial
    # result of the first, and one that comes after the last step stops the run with
    # its complete result attached (below).
    with interrupts.held(reraise=False):
        loop = _drive(stepper, pivot_ratio, progress, mark)
        status, stop, chunks, repartitions = loop.status, loop.stop, loop.chunks, loop.repartitions
        started, stepping, wall = loop.started, loop.stepping, loop.wall
        interrupted = isinstance(stop, KeyboardInterrupt)

        k = stepper.rows
        t_done = stepper.t
        try:
            reconciled = stepper.reconcile(k)
        except ArithmeticError as exc:  # a kernel that raises (NUMBA_DISABLE_JIT): keep the rows
            reconciled = {"rows": 0, "failed": k, "skipped": f"the model raised {exc!r}"}
        result = Result(
            **stepper.columns(k),
            coordinates=tuple(module.COORDINATE_NAMES),
            state_names=tuple(getattr(module, "STATE_NAMES", ())),
            counters={
                **stepper.counters(),
                "output_rows": k,
                "chunks": chunks,
                "repartitions": len(repartitions),
                "removed_constraints": len(removed.rows),
                # hybrid: output rows whose evaluation ran as pure GCP (near-singular Φ_q)
                "pure_gcp_rows": int(out.aux[:k, -1].sum()) if constraints == "hybrid" else 0,
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
                **method_settings(spec.name, start, constraints, alpha, beta),
                "assembled_holding": None if assemble is False else list(hold),
                "projected_start": projected,
                # error-controlled index-3 methods: output rows projected onto Φ = 0
                "projected_outputs": reconciled,
                "repartitioned_at_steps": repartitions,  # accepted-step counts (vabm: its steps)
                "removed_constraints": list(removed.names),  # redundant rows left out (λ = 0)
                "lambda_not_unique": list(removed.not_unique),  # joints of the dependency
                "parameters": dict(zip(module.PARAMETER_NAMES, p[:n_params].tolist(), strict=True)),
                "initial_states": dict(
                    zip(getattr(module, "STATE_NAMES", ()), p[n_params:].tolist(), strict=True)
                ),
                # body-frame attachment points for drawing (mbdgen.animate); None for flat models
                "geometry": geometry.describe(module, p[:n_params]),
                **stepper.info(),
                "mbdgen_version": getattr(module, "MBDGEN_VERSION", None),
                "model_hash": getattr(module, "SOURCE_HASH", None),
                "bodies": body_layout(module),
                "status": "finished",
                "message": MESSAGES[OK],
                "phi_tol": phi_tol,
                "energy_tol": energy_tol,
                "warnings": warned,
            },
        )
        label_result(result, module)
        result._store = store
        result.reaction_names = reaction_names(module, len(result))
        result.step_history = loop.history_array()
        p_final = np.array(p, dtype=np.float64)
        result._derive = lambda: derived_quantities(module, result, p_final)
        if interrupted:
            reason = "terminated" if isinstance(stop, Interrupted) else "interrupted"
            message = f"{interrupts.describe(stop)} at t = {t_done:.6g}"
        elif status != OK:
            reason = "failed"
            where = stepper.where()
            if isinstance(stop, ArithmeticError):
                cause = f"the model raised {type(stop).__name__}: {stop}"
            else:
                cause = explain_failure(
                    module,
                    status,
                    stepper.ws,
                    result,
                    family=spec.family,
                    error_controlled=stepper.CHOOSES_STEPS,
                    repartitions=len(repartitions),
                    removed_rows=removed.rows,
                    messages=stepper.messages(),
                )
            if status == STEP_SIZE_STALL:
                cause = f"{cause}. {loop.stall}"
            if start_note and spec.enforces_constraints and projected is None:
                # the first step jumps onto Φ = 0: q̈ ~ Φ(q0)/h², and a smaller h is worse
                cause = (
                    f"{start_note}, which a method that enforces Φ = 0 closes in its first "
                    "step by a jump of q (its accelerations grow as 1/h²): make q0 consistent "
                    f"with assemble=True (--assemble); the step itself reported: {cause}"
                )
            message = f"stopped {where}: {cause}"
        else:
            reason, message = "", MESSAGES[OK]
            warned.extend(_constraint_warnings(result, phi_tol))
            derived_quantities(module, result, p_final, reactions=False)
            warned.extend(_energy_warnings(result, energy_tol))
    late = interrupts.since(mark)
    if late is not None and not reason:
        reason = "interrupted" if late == "SIGINT" else "terminated"
        message = f"{interrupts.describe()} after the last step (the result is complete)"
    if removed:
        message = f"{message}; {removed.note()}"
    result.info["status"] = "finished" if not reason else reason
    result.info["message"] = message
    if reason:
        raise SimulationError(message, result, reason)
    for text in warned[said:]:
        warnings.warn(text, ConstraintWarning, stacklevel=3)
    if strict and warned:
        raise SimulationError("; ".join(warned), result, "check")
    return result


def _with_error_estimate(arguments: dict[str, Any]) -> Result:
    """:func:`simulate` with ``error_estimate=True``: the run, then the second solution
    it is compared with (see the parameter's description there)."""
    result = simulate(**arguments)
    spec = get_method(arguments["method"])
    finer = {**arguments, "progress": None}
    if spec.error_controlled:
        finer["rtol"], finer["atol"] = result.info["rtol"] / 10.0, result.info["atol"] / 10.0
        how = "a second solution at rtol/10, atol/10"
    else:
        finer["h"] = arguments["h"] / 2.0
        finer["output_every"] = 2 * arguments["output_every"]
        how = "a second solution at h/2"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the run's own checks were said above
            second = simulate(**finer)
    except MbdgenError as exc:  # a tolerance below the floor, a failed run
        text = f"no error estimate: {how} could not be made: {exc}"
        result.info["error_estimate"] = {"by": how, "failed": str(exc)}
        result.info["warnings"].append(text)
        warnings.warn(text, ConstraintWarning, stacklevel=3)
        return result
    # the same output times by construction (h/2 with twice the stride, or the grid)
    span = abs(float(result.t[-1] - result.t[0])) if len(result) else 0.0
    same = second.t.shape == result.t.shape
    if not (same and np.allclose(second.t, result.t, rtol=0, atol=1e-12 * span)):
        raise MbdgenError("the error estimate's second solution has other output times")
    result.error_q = np.abs(result.q - second.q)
    result.error_qd = np.abs(result.qd - second.qd)
    row, col = np.unravel_index(int(np.argmax(result.error_q)), result.error_q.shape)
    c = second.counters
    result.info["error_estimate"] = {
        "by": how,
        "max_q": float(result.error_q[row, col]),
        "coordinate": result.coordinates[col],
        "t": float(result.t[row]),
        "final_q": float(result.error_q[-1].max(initial=0.0)),
        "max_qd": float(result.error_qd.max(initial=0.0)),
        "steps": int(c.get("steps", 0)),
        "time_s": float(c.get("wall_time_s", 0.0) + c.get("setup_time_s", 0.0)),
    }
    return result


def energy_balance(result: Result) -> tuple[np.ndarray, float, float]:
    """The energy balance of a run: (T + V − E0 − ∫P dt per row, scale, quadrature error).

    ``P`` is the power of the forces V does not account for (and of rheonomic
    constraints), so the first array is zero for an exact solution; ∫P dt is the
    trapezoidal rule over the output rows.  ``scale`` is the energy the run
    exchanges (largest T, |V − V0| or |∫P dt|); the last number estimates the
    trapezoidal rule's own error by Richardson extrapolation (the rule on every
    second row), so that a coarse output grid is not mistaken for a wrong solution.
    """
    energy, power, t = result.energy, result.power, result.t
    if energy is None or power is None or len(t) < 2:
        return np.zeros(len(t)), 0.0, 0.0
    t, energy, power = (np.ascontiguousarray(a, dtype=np.float64) for a in (t, energy, power))
    store = result._store
    if store is None:  # one jitted pass (the NumPy expression of it cost ~35 µs a run)
        balance = np.empty(len(t))
        scale, quadrature = postprocess.energy_balance(t, energy, power, balance)
        return balance, float(scale), float(quadrature)
    # rows on disk: in blocks, each but the first from two rows before it
    balance = store.zeros(len(t))
    carry = postprocess.energy_balance_start(energy)
    for a in rowstore.blocks(len(t)):
        b, back = min(a + rowstore.BLOCK_ROWS, len(t)), min(a, 2)
        postprocess.energy_balance_rows(
            t[a - back : b], energy[a - back : b], power[a - back : b], balance[a - back : b],
            back, a - back, carry,
        )  # fmt: skip
        store.release()
    scale, quadrature = postprocess.energy_balance_result(carry, len(t))
    return balance, float(scale), float(quadrature)


def _energy_warnings(result: Result, energy_tol: float) -> list[str]:
    """A warning when the energy balance fails by more than ``energy_tol`` × scale."""
    if not result.has_potential:
        return []
    balance, scale, quadrature = energy_balance(result)
    store = result._store
    if not scale > 0.0 or not rowstore.all_finite(balance, store):
        return []
    worst = rowstore.argmax(balance, np.abs, store)
    bound = energy_tol * scale + 10.0 * quadrature
    if abs(balance[worst]) <= bound:
        return []
    info = result.info
    spec = METHODS.get(str(info.get("method")))
    if spec is not None and spec.error_controlled:
        remedy = "use smaller tolerances (rtol, atol)"
    else:
        remedy = "use a smaller step or an error-controlled method"
    if info.get("rho_inf", 1.0) < 1.0 or info.get("hht_alpha", 0.0) < 0.0:
        remedy = (
            "part of it is the method's numerical damping, which removes the energy of "
            "high frequencies by design (rho_inf = 1 or hht_alpha = 0 has none); else " + remedy
        )
    return [
        f"the energy balance is off: T + V − E0 − ∫P dt = {balance[worst]:.3g} at "
        f"t = {result.t[worst]:.6g}, {abs(balance[worst]) / scale:.3g} of the energy the "
        f"run exchanges ({scale:.3g}; energy_tol = {energy_tol:g}); {remedy}"
    ]


def _violated_rows(module: ModuleType, phi: np.ndarray, phi_tol: float, most: int = 6) -> str:
    """'rows A0[0], A0[1] (joint A0)': the rows of Φ(q0) above ``phi_tol``, worst first
    (at most ``most`` named), and the joints they belong to where the rows are a joint's
    (``name[i]``, not the generic ``phi[i]``)."""
    labels = tuple(getattr(module, "CONSTRAINT_NAMES", ()) or ()) or tuple(
        f"phi[{i}]" for i in range(len(phi))
    )
    size = np.abs(np.nan_to_num(phi, nan=np.inf))
    order = [int(i) for i in np.argsort(-size, kind="stable") if size[i] > phi_tol]
    if not order:  # ‖Φ‖₂ above phi_tol with every row below it: the worst row
        order = [int(np.argmax(size))]
    named = [labels[i] for i in order[:most]]
    more = f" and {len(order) - most} more" if len(order) > most else ""
    text = f"row{'s' if len(order) > 1 else ''} {', '.join(named)}{more}"
    joints = [name.split("[", 1)[0] for name in named if "[" in name]
    joints = [j for j in dict.fromkeys(joints) if j != "phi"]
    if joints:
        text += f" (joint{'s' if len(joints) > 1 else ''} {', '.join(joints)})"
    return text


def _drift_remedy(info: Mapping[str, Any]) -> str:
    """What an Adams or Runge–Kutta run can change when Φ drifts: what its constraint
    handling (``info["constraints"]``, ``alpha``, ``beta``) did not yet use."""
    handling = info.get("constraints")
    gains = f"alpha = {info.get('alpha', 0.0):g}, beta = {info.get('beta', 0.0):g}"
    if handling == "baumgarte":
        return (
            f"Baumgarte stabilization ({gains}) did not hold Φ: use larger gains, "
            "constraints='gcp' or 'hybrid', or a smaller step"
        )
    if handling == "hybrid":
        return (
            f"the hybrid algorithm ({gains}) corrects Φ when ‖Φ‖∞ > newton_tol: use a "
            "smaller newton_tol or step, or constraints='gcp'"
        )
    if handling == "gcp":
        return "GCP solves Φ = 0 up to newton_tol: use a smaller newton_tol or step"
    return (
        "use Baumgarte stabilization (alpha, beta), constraints='gcp' or 'hybrid', "
        "or a smaller step"
    )


def _nan_as_inf(phi: np.ndarray) -> np.ndarray:
    """‖Φ‖ with a NaN taken as the largest value."""
    return np.where(np.isnan(phi), np.inf, phi)


def _constraint_warnings(result: Result, phi_tol: float) -> list[str]:
    """Warnings for a finished run whose ‖Φ‖₂ exceeds ``phi_tol`` somewhere."""
    if not len(result) or not result.phi_norm.size:
        return []
    phi, store = result.phi_norm, result._store
    worst = rowstore.argmax(phi, _nan_as_inf, store)
    peak = float(_nan_as_inf(phi[worst : worst + 1])[0])
    if peak <= phi_tol:
        return []
    first = rowstore.first_above(phi, phi_tol, _nan_as_inf, store)
    spec = METHODS.get(str(result.info.get("method")))
    if spec is not None and spec.family == "welch":
        remedy = "use a smaller step"
    elif spec is not None and spec.enforces_constraints and spec.error_controlled:
        # HHT, generalized-α, Radau with error control: Φ = 0 at the steps; the rows
        # between them are the dense output's (fourbar, hht_adaptive at 1e-2: ‖Φ‖ 3e-3
        # on the rows, 3e-10 at the last step), projected onto Φ = 0 after the run
        # unless that was turned off, the model is too large, or it failed on a row
        done = result.info.get("projected_outputs")
        if done and not done.get("skipped") and not done.get("failed"):
            remedy = (
                "the method satisfies Φ = 0 at its steps and projects its output rows onto "
                "Φ = 0, both up to its Newton tolerance: use a smaller newton_tol"
            )
        else:
            why = "project_outputs=True projects them onto Φ = 0"
            if done and done.get("failed"):
                why = (
                    f"{done['failed']} of them could not be projected onto Φ = 0 (Φ_q "
                    "near a singular configuration)"
                )
            elif done and done.get("skipped"):
                why = f"they are not projected onto Φ = 0: {done['skipped']}"
            remedy = (
                "the method satisfies Φ = 0 at its steps up to its Newton tolerance, but the "
                "output rows between steps are interpolated, and the interpolant's constraint "
                f"error grows with the step ({why}): use a smaller rtol, atol or h_max"
            )
    elif spec is not None and spec.enforces_constraints:
        # Newmark-GCP, HHT, generalized-α at a fixed step: Φ = 0 up to their Newton test
        remedy = (
            "the method satisfies Φ = 0 up to its Newton tolerance: use a smaller "
            "newton_tol or step"
        )
    else:
        remedy = _drift_remedy(result.info)
    start = float(_nan_as_inf(phi[:1])[0])
    if start > phi_tol:
        # the start itself violates Φ: no gain or step repairs q0 (the run warned of it)
        remedy = (
            f"the run started from ‖Φ(q0)‖ = {start:.3g}: make q0 consistent with "
            f"assemble=True (--assemble); else {remedy}"
        )
    return [
        f"the result violates its constraints: ‖Φ‖ reached {peak:.3g} at "
        f"t = {result.t[worst]:.6g} (first above phi_tol = {phi_tol:g} at "
        f"t = {result.t[first]:.6g}); {remedy}"
    ]
