"""Why a run stopped, in words: the cause the runtime can tell and what to do about it.

A jitted step only returns a status code (:mod:`mbdgen.runtime.status`); one code,
``SINGULAR``, covers a redundant or singular set of constraints, a mass matrix
without inertia in some direction and a solution that blew up before the
factorization failed.  After the run, this module looks at what the last
evaluation left in the workspace — every family keeps M, Q, Φ, Φ_q, Φ_t and γ of
its latest evaluation as the first six fields of ``ws`` — and at the recorded
history, and names the likeliest cause:

1. a model quantity that evaluated to inf/NaN at a finite state (a division by
   zero in a force law, coincident spring end points, a singular driver);
2. a solution that grew by orders of magnitude before it failed (a step too large
   for the model's stiffness, an unstable method);
3. constraint rows that became dependent (rank of Φ_q < m): redundant joints at t0,
   a singular configuration later;
4. a mass matrix without inertia on the motions the constraints allow (or, for the
   Welch schemes, which need M itself positive definite, a singular M).

It runs after the run, in Python, on one state: it costs nothing per step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import ModuleType

import numpy as np

from mbdgen.runtime.status import (
    MESSAGES,
    NEWTON_FAILED,
    NONFINITE,
    REPARTITION,
    SINGULAR,
    STEP_SIZE_COLLAPSE,
)

#: A status of the driver (:func:`mbdgen.simulation._drive`), never of a compiled step:
#: the steps the error control accepts keep shrinking until finishing the run is out of
#: reach.  Kept out of :mod:`mbdgen.runtime.status`, whose source keys the compiled
#: cache (:mod:`mbdgen._numba_cache`): the runtime neither returns nor reads it.
STEP_SIZE_STALL = 7
MESSAGES = {
    **MESSAGES,
    STEP_SIZE_STALL: (
        "the step size collapsed: the error control keeps accepting ever smaller steps "
        "(a singularity, a discontinuity, or a tolerance too tight for the model?)"
    ),
}

#: Growth of ‖(q, q̇)‖ over its initial size that counts as a blow-up.
BLOWUP_GROWTH = 1e6
#: A smaller growth counts too where the last recorded state also left the constraints
#: by this fraction of its initial size: a configuration that far off Φ = 0 is no dead
#: point of the linkage, whatever its Φ_q does (the flyball governor at h = 0.01: |q̇|
#: 5.8 → 1e6 and ‖Φ‖ 1.9 in one step, then Φ_q singular).
DRIFT_GROWTH = 1e3
DRIFT_PHI = 1e-2
#: The remedy for a step that is too large, shared by several causes (fixed step).
SMALLER_STEP = (
    "use a smaller step h, or an error-controlled method (--method vabm or rkf45_adaptive)"
)
#: The same for the index-3 families at a fixed step, whose error control is their own.
SMALLER_STEP_INDEX3 = (
    "use a smaller step h, or the error-controlled form (--method hht_adaptive or "
    "genalpha_adaptive)"
)
#: The same where the error control chose the step: it was cut to its floor already,
#: so a smaller step is no remedy, nor tighter tolerances (they ask for more steps
#: that cannot pass).  A step that fails at its floor is a tolerance the arithmetic
#: cannot meet at this state (loosen it), a floor h_min set too high, or a
#: singularity of the model there.
STEP_FLOOR = (
    "the error control cut the step to its floor without passing: loosen rtol and atol "
    "(they may ask for more than the arithmetic delivers at this state), lower h_min, "
    "or check the model near this time"
)


def _remedy(family: str, error_controlled: bool) -> str:
    """What to change when the step was too large for the motion."""
    if error_controlled:
        return STEP_FLOOR
    return SMALLER_STEP_INDEX3 if family in ("hht", "genalpha") else SMALLER_STEP


def _labels(module: ModuleType) -> dict[str, Sequence[str]]:
    coords = tuple(module.COORDINATE_NAMES)
    rows = tuple(getattr(module, "CONSTRAINT_NAMES", ())) or tuple(
        f"phi[{i}]" for i in range(module.N_CONSTRAINTS)
    )
    return {"coordinate": coords, "constraint": rows}


def _first_nonfinite(module: ModuleType, ws: Sequence[np.ndarray]) -> str | None:
    """'the force Q[theta] = inf' for the first non-finite entry of M, Q, Φ, Φ_q, Φ_t, γ."""
    labels = _labels(module)
    coords, rows = labels["coordinate"], labels["constraint"]
    named = (
        ("mass matrix M", coords, coords),
        ("generalized force Q", coords, None),
        ("constraint Φ", rows, None),
        ("constraint Jacobian Φ_q", rows, coords),
        ("Φ_t (time derivative of Φ)", rows, None),
        ("γ (acceleration right side)", rows, None),
    )
    for (what, row_names, col_names), arr in zip(named, ws[:6], strict=False):
        bad = np.argwhere(~np.isfinite(arr))
        if bad.size:
            index = tuple(int(i) for i in bad[0])
            value = arr[index]
            label = row_names[index[0]] if index[0] < len(row_names) else str(index[0])
            if col_names is not None and len(index) > 1:
                label += f", {col_names[index[1]]}"
            return f"the {what}[{label}] evaluated to {value}"
    return None


def _growth(result: object) -> tuple[float, float]:
    """(‖x‖ at the first, largest ‖x‖ over the last rows) of the recorded q, q̇."""
    q = getattr(result, "q", np.zeros((0, 0)))
    qd = getattr(result, "qd", np.zeros((0, 0)))
    if len(q) == 0:
        return 0.0, 0.0
    x = np.hstack([q, qd])
    first = float(np.max(np.abs(x[0])))
    with np.errstate(invalid="ignore", over="ignore"):
        tail = np.abs(x[-min(len(x), 8) :])
    last = float(np.max(np.where(np.isfinite(tail), tail, np.inf)))
    return first, last


def _last_phi(result: object) -> float:
    """‖Φ‖₂ of the last recorded row (0 where the result has none)."""
    phi = getattr(result, "phi_norm", None)
    if phi is None or len(phi) == 0:
        return 0.0
    value = float(phi[-1])
    return value if np.isfinite(value) else np.inf


def _dependent_joints(module: ModuleType, phi_q: np.ndarray, tol: float | None = None) -> str:
    """'A0, A1, …': the joints whose rows take part in Φ_q's (near-)dependency, the rows
    of Φ_qᵀ's null space at ``tol`` (the rank test's threshold by default)."""
    from mbdgen.analysis.assembly import dependent_rows

    rows = _labels(module)["constraint"]
    found = dependent_rows(phi_q) if tol is None else dependent_rows(phi_q, tol=tol)
    return ", ".join(dict.fromkeys(rows[i].split("[", 1)[0] for i in found))


def _rank_message(
    module: ModuleType, phi_q: np.ndarray, at_start: bool, removed: Sequence[int] = ()
) -> str | None:
    from mbdgen.analysis.assembly import redundant_rows

    if phi_q.size == 0 or not np.isfinite(phi_q).all():
        return None
    rank, redundant = redundant_rows(phi_q)
    redundant = [i for i in redundant if i not in set(removed)]
    if not redundant:
        return None
    rows = _labels(module)["constraint"]
    joints = _dependent_joints(module, phi_q)
    which = ", ".join(rows[i] for i in redundant)
    if at_start:
        return (
            f"the constraints are redundant at t0: rank Φ_q = {rank} of {len(phi_q)} rows, "
            f"row(s) {which} depend on the others (joints involved: {joints}); "
            "remove the redundant joint(s) or replace them by ones that constrain less"
        )
    return (
        f"the mechanism reached a singular configuration: rank Φ_q fell to {rank} of "
        f"{len(phi_q)} rows, row(s) {which} became dependent (joints involved: "
        f"{joints}) — a dead point or a lock-up of the linkage"
    )


#: Φ_q counts as nearly rank-deficient where its smallest singular value is below this
#: fraction of its largest (the rank test's threshold, RANK_TOL, is 1e-9): IFToMM A02's
#: four-bar at its singular position under vabm stopped at 2.7e-8.
NEAR_SINGULAR = 1e-6


def _near_singular_message(module: ModuleType, phi_q: np.ndarray, at_start: bool) -> str | None:
    """'the mechanism reached a singular configuration …' where Φ_q has full rank by the
    rank test but is within :data:`NEAR_SINGULAR` of losing it (the step's matrix is
    singular to working precision there); None elsewhere."""
    if at_start or phi_q.size == 0 or not np.isfinite(phi_q).all():
        return None
    s = np.linalg.svd(phi_q, compute_uv=False)
    if not s[0] > 0.0 or s[-1] >= NEAR_SINGULAR * s[0]:
        return None
    joints = _dependent_joints(module, phi_q, NEAR_SINGULAR)
    return (
        f"the mechanism reached a singular configuration: Φ_q is nearly rank-deficient "
        f"there (its smallest singular value is {s[-1] / s[0]:.1e} of its largest; joints "
        f"involved: {joints}) — a dead point or a branch point of the linkage, "
        "where the multipliers λ are not determined; a method that steps over it can pass "
        "(hht_adaptive, or a fixed step with Baumgarte stabilization, alpha and beta)"
    )


#: The inertia parameters of a body, in the order of the module's BODY_INERTIA_INDEX
#: columns (mbdgen.codegen.elements), and the words for a missing one.
_INERTIA_KEYS = ("m", "J", "Jxx", "Jyy", "Jzz", "Jxy", "Jxz", "Jyz")
_ROTARY = {
    "J": "rotary inertia",
    "Jxx": "rotary inertia about its x axis",
    "Jyy": "rotary inertia about its y axis",
    "Jzz": "rotary inertia about its z axis",
}
#: Translational coordinates at the head of a body's block of q, by body kind.
_TRANSLATIONS = {"planar": 2, "spatial": 3}


def _run_parameters(module: ModuleType, result: object) -> dict[str, float]:
    """The parameters of the run (``result.info``), else the module's defaults."""
    given = (getattr(result, "info", None) or {}).get("parameters")
    if given:
        return {str(k): float(v) for k, v in given.items()}
    return dict(zip(module.PARAMETER_NAMES, map(float, module.P_DEFAULT), strict=False))


def _missing_inertia(module: ModuleType, flagged: Sequence[int], result: object) -> list[str]:
    """'body 'top' has no rotary inertia about its z axis (top_Jzz = 0, set by -p or
    params=; the model's value is 0.1)' for each body owning a coordinate of
    ``flagged`` (the motion without inertia) whose mass or moments of inertia on that
    motion are not positive; empty for a model without body tables (generalized
    coordinates) or where every such parameter is positive."""
    names = tuple(getattr(module, "BODY_NAMES", ()))
    index = getattr(module, "BODY_INERTIA_INDEX", None)
    if not names or index is None:
        return []
    values = _run_parameters(module, result)
    pnames = tuple(module.PARAMETER_NAMES)
    defaults = dict(zip(pnames, map(float, module.P_DEFAULT), strict=False))
    kinds = tuple(getattr(module, "BODY_KINDS", ()))
    causes = []
    for b, body in enumerate(names):
        offset, size = int(module.BODY_OFFSETS[b]), int(module.BODY_SIZES[b])
        local = [i - offset for i in flagged if offset <= i < offset + size]
        if not local:
            continue
        kind = kinds[b] if b < len(kinds) else ""
        point = kind.endswith("_point")
        n_trans = size if point else _TRANSLATIONS.get(kind, size)
        keys = (["m"] if min(local) < n_trans else []) + (
            list(_ROTARY) if max(local) >= n_trans else []
        )
        row = dict(zip(_INERTIA_KEYS, (int(i) for i in index[b]), strict=False))
        for key in keys:
            if row.get(key, -1) < 0:
                continue
            pname = pnames[row[key]]
            value = values[pname] if pname in values else defaults.get(pname, math.nan)
            if value > 0.0:
                continue
            what = "mass" if key == "m" else _ROTARY[key]
            default = defaults.get(pname)
            origin = (
                " in the model"
                if default == value
                else f", set by -p or params=; the model's value is {default:g}"
            )
            causes.append(f"body {body!r} has no {what} ({pname} = {value:g}{origin})")
    return causes


def _inertia_message(
    module: ModuleType,
    mass: np.ndarray,
    phi_q: np.ndarray,
    mass_alone: bool,
    result: object = None,
) -> str | None:
    if not (np.isfinite(mass).all() and np.isfinite(phi_q).all()) or mass.size == 0:
        return None
    n = mass.shape[0]
    if mass_alone or phi_q.size == 0:
        basis = np.eye(n)
    else:
        _, s, vt = np.linalg.svd(phi_q)
        rank = int(np.sum(s > 1e-10 * (s[0] if s.size and s[0] > 0 else 1.0)))
        basis = vt[rank:].T
    if basis.shape[1] == 0:
        return None
    reduced = basis.T @ mass @ basis
    w, v = np.linalg.eigh(0.5 * (reduced + reduced.T))
    scale = max(float(np.max(np.abs(mass))), 1e-300)
    if w.size and w[0] > 1e-12 * scale:
        return None
    direction = np.abs(basis @ v[:, 0])
    coords = _labels(module)["coordinate"]
    flagged = [int(i) for i in np.flatnonzero(direction > 0.3 * direction.max())]
    names = [coords[i] for i in flagged]
    bodies = _missing_inertia(module, flagged, result)
    if bodies:  # the body and the parameter the user set (or the model file did)
        fix = f"give {'it' if len(bodies) == 1 else 'them'} a positive value"
        if mass_alone:
            return (
                f"the mass matrix M is singular: {'; '.join(bodies)}; the Welch schemes "
                f"need M positive definite: {fix}, or use an Adams or Runge–Kutta method"
            )
        return (
            "the mass matrix is singular on the motions the constraints allow: "
            f"{'; '.join(bodies)}: {fix}"
        )
    if mass_alone:
        return (
            f"the mass matrix M is singular: coordinate(s) {', '.join(names)} have no mass "
            "or inertia; the Welch schemes need M positive definite — give every body a "
            "mass and moment of inertia, or use an Adams or Runge–Kutta method"
        )
    return (
        "the mass matrix is singular on the motions the constraints allow: coordinate(s) "
        f"{', '.join(names)} carry no inertia (a body with zero mass or moment of inertia?)"
    )


def _dense_blocks(module: ModuleType, ws: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
    """M, Q, Φ, Φ_q, Φ_t, γ of ``ws`` (every workspace holds them first, the stepper
    contract), with M and Φ_q as dense arrays where a sparse workspace holds their values
    on the module's MASS and PHI_Q patterns (the sparse index-1 and GCP right sides,
    mbdgen.runtime.sparse_newton): only here, after a failure, is an n² array made."""
    mass, force, phi, phi_q, phi_t, gamma = ws[:6]
    rows = getattr(module, "PHI_Q_ROWS", None)
    sparse = rows is not None and np.ndim(mass) == 1 and np.ndim(phi_q) == 1
    if (
        rows is not None
        and sparse
        and mass.size == len(module.MASS_ROWS)
        and phi_q.size == len(rows)
    ):
        n, m = module.N_COORDINATES, module.N_CONSTRAINTS
        dense_mass, dense_phi_q = np.zeros((n, n)), np.zeros((m, n))
        np.add.at(dense_mass, (module.MASS_ROWS, module.MASS_COLS), mass)
        np.add.at(dense_phi_q, (rows, module.PHI_Q_COLS), phi_q)
        mass, phi_q = dense_mass, dense_phi_q
    return (mass, force, phi, phi_q, phi_t, gamma)


def explain_failure(
    module: ModuleType,
    status: int,
    ws: Sequence[np.ndarray],
    result: object,
    *,
    family: str,
    error_controlled: bool = False,
    repartitions: int = 0,
    removed_rows: Sequence[int] = (),
    messages: Mapping[int, str] | None = None,
) -> str:
    """The cause of a failed run and its remedy, as one sentence for the user.

    ``ws`` is the family's workspace (M, Q, Φ, Φ_q, Φ_t, γ of the last evaluation
    first), ``result`` the partial :class:`~mbdgen.results.Result`, ``removed_rows``
    the redundant rows the run left out at t0 (not reported again), ``messages`` the
    family's own words for status codes, ``error_controlled`` whether the method chose
    its steps (then a smaller step is not the remedy: it had one).
    """
    remedy = _remedy(family, error_controlled)
    ws = _dense_blocks(module, ws)
    nonfinite = _first_nonfinite(module, ws)
    first, last = _growth(result)
    scale = max(first, 1.0)
    phi_last = _last_phi(result)
    drifted = last > DRIFT_GROWTH * scale and phi_last > DRIFT_PHI * scale
    blew_up = not np.isfinite(last) or last > BLOWUP_GROWTH * scale or drifted
    if blew_up and status in (
        SINGULAR, NONFINITE, NEWTON_FAILED, STEP_SIZE_COLLAPSE, STEP_SIZE_STALL
    ):  # fmt: skip
        what = f"; {nonfinite}" if nonfinite else ""
        off = f", and ‖Φ‖ reached {phi_last:.3g}" if drifted else ""
        return (
            f"the solution blew up (max |q|, |q̇| grew from {first:.3g} to {last:.3g}{off})"
            f"{what}: "
            f"the step is too large for this model's stiffness or the method is unstable "
            f"here; {remedy}"
        )
    if nonfinite is not None:
        return (
            f"{nonfinite} at a finite state: the model divides by zero or is singular "
            "there (a force law at a singular time or position, two coincident spring "
            "end points, a driver that is not defined there)"
        )
    at_start = len(getattr(result, "t", ())) <= 1
    mass, _, _, phi_q, _, _ = ws
    if status == SINGULAR:
        cause = (
            _rank_message(module, phi_q, at_start, removed_rows)
            or _inertia_message(module, mass, phi_q, family == "welch", result)
            or _near_singular_message(module, phi_q, at_start)
        )
        if cause is None:
            cause = (
                "the matrix of the step became numerically singular although Φ_q has full "
                f"rank and M is positive definite on the constrained motions; {remedy}"
            )
        return cause
    if status in (NEWTON_FAILED, REPARTITION) and repartitions:
        rank = _rank_message(module, phi_q, at_start, removed_rows)
        why = rank or (
            "the dependent coordinates could not be solved for with any choice of "
            "independent coordinates"
        )
        return (
            f"no partition of the coordinates worked after {repartitions} re-partition(s): "
            f"{why}; {remedy}, or constraints='hybrid' or 'baumgarte'"
        )
    if status == NONFINITE:
        return (
            "the solution became NaN or infinite although every model quantity was finite "
            f"at the last evaluation; {remedy}"
        )
    return (messages or {}).get(status, MESSAGES[status])
