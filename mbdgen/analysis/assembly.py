"""Assembly analysis: consistent initial conditions from a user's approximate state.

Haug 1989 §7.2 (Eqs. 7.2.2-7.2.5): a dynamic analysis must start from q(t0), q̇(t0)
that satisfy Φ(q, t0) = 0 and Φ_q q̇ = ν, with the accelerations and multipliers of
Eq. 7.2.1.  :func:`assemble` solves

1. Φ(q, t0) = 0 by Newton's method with minimum-norm steps Δq_F = −Φ_{q_F}⁺ Φ over
   the coordinates F that are not held (the held ones play the role of Eq. 7.2.4);
2. Φ_q q̇ = ν for the velocities not held, again with the minimum-norm correction;
3. Eq. 7.2.1 for q̈ and λ.

It reports the degrees of freedom n − rank Φ_q, the constraints that are redundant
(rank test with a stated tolerance; each redundant row is a combination of the rows
before it), and refuses inconsistent constraints with the residual it could not remove.
This is Python-level work on the generated kernels (it runs once, not per step).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

from mbdgen.errors import MbdgenError

#: Relative singular-value tolerance of the rank test (times the largest singular value).
RANK_TOL = 1e-9


@dataclass
class Assembly:
    """The assembled state at ``t0`` and what was learnt on the way."""

    t0: float
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    lam: np.ndarray
    dof: int
    rank: int
    redundant: list[int] = field(default_factory=list)
    iterations: int = 0
    residual: float = 0.0
    held: tuple[str, ...] = ()
    constraint_names: tuple[str, ...] = ()
    involved: list[int] = field(default_factory=list)

    @property
    def redundant_names(self) -> list[str]:
        """Labels of the redundant rows (``<joint>[<row>]`` for mechanisms)."""
        return [self.constraint_names[i] for i in self.redundant]

    @property
    def involved_elements(self) -> list[str]:
        """Joints/drivers whose rows take part in a linear dependency of Φ_q's rows."""
        out: list[str] = []
        for i in self.involved:
            name = self.constraint_names[i].split("[", 1)[0]
            if name not in out:
                out.append(name)
        return out

    def redundancy_message(self) -> str:
        """One line naming the redundant rows and the joints involved ('' if none)."""
        if not self.redundant:
            return ""
        return (
            f"{len(self.redundant)} redundant constraint row(s): "
            f"{', '.join(self.redundant_names)} (rank Φ_q = {self.rank} of "
            f"{len(self.constraint_names)} rows, tolerance {RANK_TOL:g}·‖Φ_q‖); "
            f"joints involved: {', '.join(self.involved_elements)}"
        )


def constraint_blocks(
    module: ModuleType, t: float, q: np.ndarray, qd: np.ndarray, p: np.ndarray, kernel: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Φ, Φ_q and Φ_t from one call of ``kernel`` ("dynamics" or "dynamics_values"; Φ_q
    then as values on PHI_Q_ROWS/COLS) or of the ``phi``, ``phi_q``, ``phi_t`` kernels."""
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    if kernel == "phi":
        phi, phi_q, phi_t = (_kernel(module, name, t, q, p) for name in ("phi", "phi_q", "phi_t"))
        return phi, phi_q, phi_t
    phi, phi_t, force, gamma = np.zeros(m), np.zeros(m), np.zeros(n), np.zeros(m)
    if kernel == "dynamics_values":
        mass, phi_q = np.zeros(len(module.MASS_ROWS)), np.zeros(len(module.PHI_Q_ROWS))
    else:
        mass, phi_q = np.zeros((n, n)), np.zeros((m, n))
    getattr(module, kernel)(float(t), q, qd, p, mass, force, phi, phi_q, phi_t, gamma)
    return phi, phi_q, phi_t


def constraint_residuals(
    module: ModuleType,
    t: float,
    q: np.ndarray,
    qd: np.ndarray,
    p: np.ndarray,
    kernel: str = "phi",
) -> tuple[np.ndarray, np.ndarray]:
    """Φ(q, t) and Φ̇ = Φ_q q̇ + Φ_t, from ``kernel``: "dynamics" or "dynamics_values",
    the kernel a run's entry point evaluates (:func:`mbdgen.steppers.evaluation_kernel`),
    so that checking the start compiles nothing the run does not (``phi`` took 1.5-3.8 s
    to compile for the spatial examples); "phi" uses the ``phi``, ``phi_q``, ``phi_t``
    kernels.  No m × n array is made for the values kernel."""
    qd = np.ascontiguousarray(qd, dtype=np.float64)
    phi, phi_q, phi_t = constraint_blocks(
        module, t, np.ascontiguousarray(q, dtype=np.float64), qd,
        np.ascontiguousarray(p, dtype=np.float64), kernel,
    )  # fmt: skip
    if phi_q.ndim == 2:
        return phi, phi_q @ qd + phi_t
    rows, cols = _phi_q_pattern(module)
    return phi, np.bincount(rows, phi_q * qd[cols], minlength=phi.size) + phi_t


def _phi_q_pattern(module: ModuleType) -> tuple[np.ndarray, np.ndarray]:
    """Φ_q's pattern (rows, columns) as arrays, converted once per module."""
    pattern = getattr(module, "_mbdgen_phi_q_pattern", None)
    if pattern is None:
        pattern = (np.asarray(module.PHI_Q_ROWS), np.asarray(module.PHI_Q_COLS))
        module._mbdgen_phi_q_pattern = pattern  # type: ignore[attr-defined]
    return pattern


def _identity_mass(module: ModuleType) -> np.ndarray:
    """H = I as values on M's pattern (1 on its diagonal entries), once per module."""
    h_val = getattr(module, "_mbdgen_identity_mass", None)
    if h_val is None:
        h_val = (np.asarray(module.MASS_ROWS) == np.asarray(module.MASS_COLS)).astype(np.float64)
        module._mbdgen_identity_mass = h_val  # type: ignore[attr-defined]
    return h_val


def constraint_jacobian(
    module: ModuleType, t: float, q: np.ndarray, p: np.ndarray, kernel: str = "phi"
) -> tuple[np.ndarray, np.ndarray]:
    """Φ(q, t) and the dense m × n Φ_q from ``kernel`` (as :func:`constraint_residuals`),
    for the dense rank tests."""
    q = np.ascontiguousarray(q, dtype=np.float64)
    p = np.ascontiguousarray(p, dtype=np.float64)
    phi, phi_q, _ = constraint_blocks(module, t, q, np.zeros_like(q), p, kernel)
    if phi_q.ndim == 2:
        return phi, phi_q
    dense = np.zeros((phi.size, q.size))
    np.add.at(dense, _phi_q_pattern(module), phi_q)
    return phi, dense


def _kernel(module: ModuleType, name: str, *args: object) -> np.ndarray:
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    shapes = {
        "phi": (m,),
        "phi_q": (m, n),
        "phi_t": (m,),
        "nu": (m,),
        "gamma": (m,),
        "mass": (n, n),
        "force": (n,),
    }
    out = np.zeros(shapes[name])
    getattr(module, name)(*args, out)
    return out


def redundant_rows(phi_q: np.ndarray, tol: float = RANK_TOL) -> tuple[int, list[int]]:
    """Rank of Φ_q and the rows that depend on earlier ones (Gram–Schmidt in row order).

    Row i is redundant when its part orthogonal to the rows kept before it is at most
    ``tol``·‖Φ_q‖₂.  The common case, no redundant row, is settled by one LAPACK QR of
    Φ_qᵀ: without a dependent row, |R_ii| is exactly that orthogonal part, and
    min |R_ii| > tol·‖Φ_q‖_F (≥ tol·‖Φ_q‖₂) proves every row independent — 20 ms
    instead of 1.6 s of Python loops for m = 1024.  LAPACK's ``dgeqrf`` is called
    directly: ``numpy.linalg.qr`` wraps the same routine in ~70 µs of Python at a run's
    start (the slider-crank's 3 × 4 Φ_q; 2.6 µs here, and |R_ii| bit for bit the same).
    """
    from scipy.linalg import lapack

    if phi_q.size == 0:
        return 0, []
    m, n = phi_q.shape
    if m <= n:
        a = np.asarray(phi_q, dtype=np.float64)
        r, _, _, info = lapack.dgeqrf(a.T, lwork=64 * m)  # a.T: Fortran order, no copy
        if info == 0 and np.abs(np.diagonal(r)).min() > tol * math.sqrt(float(np.vdot(a, a))):
            return m, []
    scale = float(np.linalg.norm(phi_q, 2)) or 1.0
    basis: list[np.ndarray] = []
    redundant = []
    for i, row in enumerate(phi_q):
        r = row.astype(float).copy()
        for b in basis:
            r -= (r @ b) * b
        norm = float(np.linalg.norm(r))
        if norm <= tol * scale:
            redundant.append(i)
        else:
            basis.append(r / norm)
    return len(basis), redundant


#: Margin of the sparse independence proof over the dense test's |R_ii| threshold: a
#: row whose multiplier pivot is within this factor of ``RANK_TOL`` goes to the dense
#: test (the two tests eliminate the rows in different orders).
SPARSE_RANK_MARGIN = 100.0


def sparse_rows_independent(module: ModuleType, t0: float, q: np.ndarray, p: np.ndarray,
                            tol: float = RANK_TOL) -> bool:  # fmt: skip
    """True when the sparse LU of K = [[I, Φ_qᵀ], [Φ_q, 0]] proves every row of
    Φ_q(q, t0) independent; False means "not proven" (the dense test decides).

    Φ_q comes from the module's ``dynamics_values`` kernel (compiled for the sparse run
    anyway) and the factorization uses the module's index-1 plan (:mod:`mbdgen.runtime.sparse`)
    with H = I on M's pattern.  In the plan's order a multiplier λ_k is eliminated
    after every coordinate its row touches, so its pivot is −‖(I − P)a_k‖², the
    squared part of row k orthogonal to the rows eliminated before it: Gram–Schmidt's
    |R_kk|² of :func:`redundant_rows` in another row order (the body-local rows the
    plan adds to H change it by a bounded factor).  Every |pivot| above
    (``SPARSE_RANK_MARGIN``·tol·‖Φ_q‖_F)² proves the rows independent in O(n + m),
    with no dense array; a smaller pivot (a redundant row, or one close to it) leaves
    the decision, and the naming of the rows, to the dense QR as before.
    """
    from mbdgen.runtime import sparse

    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    if getattr(module, "LINEAR_ALGEBRA", "dense") != "sparse" or m == 0:
        return False
    plan = sparse.module_plan(module)
    # dynamics_values, not phi_q_values: the sparse run compiles it anyway (one JIT less)
    q = np.ascontiguousarray(q, dtype=np.float64)
    a_val = np.zeros(len(module.PHI_Q_ROWS))
    module.dynamics_values(
        float(t0), q, np.zeros(n), np.ascontiguousarray(p, dtype=np.float64),
        np.zeros(len(module.MASS_ROWS)), np.zeros(n), np.zeros(m), a_val, np.zeros(m), np.zeros(m),
    )  # fmt: skip
    smallest = sparse.kkt_multiplier_pivot(plan, _identity_mass(module), a_val)  # −1: not proven
    bound = SPARSE_RANK_MARGIN * tol * math.sqrt(float(a_val @ a_val))
    return smallest > bound * bound


def dependent_rows(phi_q: np.ndarray, tol: float = RANK_TOL) -> list[int]:
    """Rows that take part in a linear dependency: non-zero in the null space of Φ_qᵀ."""
    if phi_q.size == 0:
        return []
    u, s, _ = np.linalg.svd(phi_q, full_matrices=True)
    scale = float(s[0]) if s.size and s[0] > 0 else 1.0
    rank = int(np.sum(s > tol * scale))
    null = u[:, rank:]
    if null.shape[1] == 0:
        return []
    weight = np.sqrt((null**2).sum(axis=1))
    return [int(i) for i in np.flatnonzero(weight > 1e-8)]


def at_origin(module: ModuleType, q: Sequence[float] | np.ndarray) -> bool:
    """Whether ``q`` puts every body of a mechanism at the origin, unrotated: the q0 a
    body gets where the model gives it none (planar (0, 0, 0), spatial (0, 0, 0, 1, 0,
    0, 0), a point body 0).  False for a generalized-coordinate model, whose q = 0 is
    as likely chosen as defaulted."""
    kinds = tuple(getattr(module, "BODY_KINDS", ()))
    q = np.asarray(q, dtype=np.float64)
    if not kinds or q.shape != (module.N_COORDINATES,):
        return False
    origin = np.zeros(module.N_COORDINATES)
    for kind, offset in zip(kinds, module.BODY_OFFSETS, strict=False):
        if kind == "spatial":  # Euler parameters (1, 0, 0, 0)
            origin[int(offset) + 3] = 1.0
    return bool(np.array_equal(q, origin))


def origin_advice(what: str) -> str:
    """What a start at the origin (:func:`at_origin`) needs, for a message saying
    ``what`` happened there: Newton's method from there need not find the configuration
    in which the mechanism closes (the links lie on top of each other)."""
    return (
        "q0 defaults to the origin (no body is given a q0=: all of them sit there), and "
        f"{what}; --assemble needs a start near a configuration that closes: give one, "
        "roughly, by q0= of each body in the model or by --q0 NAME=VALUE"
    )


def assemble(
    module: ModuleType,
    *,
    q0: Sequence[float] | np.ndarray | None = None,
    qd0: Sequence[float] | np.ndarray | None = None,
    t0: float = 0.0,
    params: Mapping[str, float] | None = None,
    hold: Sequence[str] = (),
    tol: float = 1e-12,
    max_iterations: int = 50,
) -> Assembly:
    """Consistent q, q̇, q̈, λ at ``t0`` near ``q0``, ``qd0`` (default: the model's).

    ``hold`` names coordinates kept at their given values (position and velocity).
    Raises :class:`MbdgenError` when the held coordinates leave no solution, or the
    constraints are inconsistent (the message carries the remaining ‖Φ‖).
    """
    from mbdgen.inputs import parameter_vector

    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    names = list(module.COORDINATE_NAMES)
    for name in hold:
        if name not in names:
            raise MbdgenError(f"cannot hold {name!r}: the coordinates are {', '.join(names)}")
    held = [names.index(name) for name in hold]
    free = [i for i in range(n) if i not in held]
    p = parameter_vector(module, params)
    q = np.array(module.Q0 if q0 is None else q0, dtype=float)
    qd = np.array(module.QD0 if qd0 is None else qd0, dtype=float)
    if q.shape != (n,) or qd.shape != (n,):
        raise MbdgenError(f"q0 and qd0 need {n} entries each")

    iterations = 0
    origin = at_origin(module, q)
    phi = _kernel(module, "phi", t0, q, p)
    while np.abs(phi).max(initial=0.0) > tol:
        if iterations == max_iterations:
            if origin:
                raise MbdgenError(_origin_stall(module, phi, iterations, hold))
            raise MbdgenError(
                f"assembly did not converge in {max_iterations} Newton iterations: "
                f"‖Φ‖ = {np.linalg.norm(phi):.3e} remains; the constraints are inconsistent "
                f"or the held coordinates ({', '.join(hold) or 'none'}) admit no solution"
            )
        jac = _kernel(module, "phi_q", t0, q, p)[:, free]
        step, *_ = np.linalg.lstsq(jac, -phi, rcond=None)
        q[free] += step
        new_phi = _kernel(module, "phi", t0, q, p)
        if iterations > 5 and np.linalg.norm(new_phi) > 0.9 * np.linalg.norm(phi):
            if origin:  # no sign that the constraints are inconsistent: a poor start
                raise MbdgenError(_origin_stall(module, new_phi, iterations, hold))
            raise MbdgenError(
                f"assembly stalls at ‖Φ‖ = {np.linalg.norm(new_phi):.3e} after {iterations} "
                "Newton iterations: the constraints are inconsistent (no q satisfies them) "
                f"with {', '.join(hold) or 'nothing'} held"
            )
        phi = new_phi
        iterations += 1

    phi_q = _kernel(module, "phi_q", t0, q, p)
    rank, redundant = redundant_rows(phi_q)
    nu = _kernel(module, "nu", t0, q, p)
    if m:
        step, *_ = np.linalg.lstsq(phi_q[:, free], nu - phi_q @ qd, rcond=None)
        qd[free] += step
        velocity_residual = float(np.linalg.norm(phi_q @ qd - nu))
        if velocity_residual > 1e-9 * max(1.0, float(np.abs(qd).max())):
            raise MbdgenError(
                f"no velocities satisfy Φ_q q̇ = ν with {', '.join(hold) or 'nothing'} held "
                f"(residual {velocity_residual:.3e})"
            )

    mass = _kernel(module, "mass", t0, q, p)
    force = _kernel(module, "force", t0, q, qd, p)
    gamma = _kernel(module, "gamma", t0, q, qd, p)
    keep = [i for i in range(m) if i not in redundant]
    a = np.block([[mass, phi_q[keep].T], [phi_q[keep], np.zeros((len(keep), len(keep)))]])
    try:
        sol = np.linalg.solve(a, np.concatenate([force, gamma[keep]]))
    except np.linalg.LinAlgError:
        raise MbdgenError("the mass matrix is singular on the constraint manifold") from None
    lam = np.zeros(m)
    lam[keep] = sol[n:]
    return Assembly(
        t0=t0,
        q=q,
        qd=qd,
        qdd=sol[:n],
        lam=lam,
        dof=n - rank,
        rank=rank,
        redundant=redundant,
        iterations=iterations,
        residual=float(np.linalg.norm(phi)),
        held=tuple(hold),
        constraint_names=tuple(
            getattr(module, "CONSTRAINT_NAMES", None) or (f"phi[{i}]" for i in range(m))
        ),
        involved=dependent_rows(phi_q) if redundant else [],
    )


def _origin_stall(module: ModuleType, phi: np.ndarray, iterations: int, hold: Sequence[str]) -> str:
    held = f" with {', '.join(hold)} held" if hold else ""
    return (
        f"assembly from q0 at the origin stalls at ‖Φ‖ = {np.linalg.norm(phi):.3e} after "
        f"{iterations} Newton iterations{held}: "
        + origin_advice("Newton's method finds no closed configuration from there")
    )


#: ‖Φ(q0)‖∞ up to which a redundant mechanism counts as consistent at t0, so that its
#: redundant rows may be removed for the integration (:func:`removable_rows`).
CONSISTENCY_TOL = 1e-8


@dataclass(frozen=True)
class RemovedRows:
    """Redundant constraint rows left out of an integration (:func:`removable_rows`).

    ``active`` is the (m,) row weight vector the runtime takes (1.0 enforced, 0.0
    removed); ``names`` label the removed rows; ``not_unique`` names the joints and
    drivers whose rows take part in the dependency, whose reactions are therefore not
    unique (the integrators report the particular solution with λ = 0 on the
    removed rows).
    """

    active: np.ndarray
    rows: tuple[int, ...] = ()
    names: tuple[str, ...] = ()
    not_unique: tuple[str, ...] = ()
    rank: int = 0

    def __bool__(self) -> bool:
        return bool(self.rows)

    def note(self) -> str:
        """One line for messages ('' when nothing was removed)."""
        if not self.rows:
            return ""
        return (
            f"{len(self.rows)} redundant constraint row(s) removed at t0: "
            f"{', '.join(self.names)} (rank Φ_q = {self.rank} of {self.active.size}); "
            f"their λ is reported as 0, and the reactions (multipliers) of "
            f"{', '.join(self.not_unique)} are not unique"
        )


def removable_rows(
    module: ModuleType,
    t0: float,
    q: np.ndarray,
    p: np.ndarray,
    *,
    tol: float = CONSISTENCY_TOL,
    assembled: bool = False,
    kernel: str = "phi",
) -> RemovedRows:
    """The redundant rows of Φ_q(q, t0) that an integration may leave out.

    A row that :func:`redundant_rows` finds dependent on earlier rows is implied by
    them near q (to first order, and along the motion for a mechanism whose
    redundancy is structural, such as Bricard's) *if* the configuration satisfies
    all rows.  So rows are removed only when ‖Φ(q, t0)‖∞ ≤ ``tol``; otherwise the
    redundant constraints are inconsistent at q (contradictory rows, or a q0 that
    was never assembled) and :class:`MbdgenError` is raised, naming the rows.
    Φ and Φ_q come from ``kernel`` (:func:`constraint_jacobian`).
    """
    m = module.N_CONSTRAINTS
    active = np.ones(m)
    if m == 0:
        return RemovedRows(active)
    q = np.asarray(q, dtype=np.float64)
    # not for a run whose entry point evaluates the dense ``dynamics`` (Welch,
    # Newmark-GCP, the hybrid method): it compiled no ``dynamics_values``, and the
    # dense test below costs less than that compile (3 s on the flyball governor)
    if kernel != "dynamics" and sparse_rows_independent(module, t0, q, p):
        return RemovedRows(active, rank=m)
    phi, phi_q = constraint_jacobian(module, t0, q, p, kernel)
    rank, redundant = redundant_rows(phi_q)
    if not redundant:
        return RemovedRows(active, rank=rank)
    labels = tuple(getattr(module, "CONSTRAINT_NAMES", None) or (f"phi[{i}]" for i in range(m)))
    names = tuple(labels[i] for i in redundant)
    worst = float(np.abs(phi).max())
    if not worst <= tol and not assembled and at_origin(module, q):
        # rows that depend on the others where every body lies on top of the others: no
        # sign of a redundant mechanism
        raise MbdgenError(
            origin_advice(
                f"the constraints do not close there (‖Φ‖∞ = {worst:.3e}; Φ_q has rank "
                f"{rank} of {m} there, row(s) {', '.join(names)} depend on the others)",
            )
        )
    if not worst <= tol:
        where = "after assembly" if assembled else "at q0"
        hint = "" if assembled else "; assemble q0 first (--assemble, or assemble=True)"
        raise MbdgenError(
            f"the constraints are redundant (row(s) {', '.join(names)} depend on the others, "
            f"rank Φ_q = {rank} of {m}) and not satisfied {where} (‖Φ‖∞ = {worst:.3e} > "
            f"{tol:g}): redundant rows can be removed only on a consistent configuration"
            f"{hint}"
        )
    involved: list[str] = []
    elements = hasattr(module, "ELEMENT_NAMES")  # else generalized coordinates: rows
    bodies = set(getattr(module, "BODY_NAMES", ()))  # Euler-parameter normalizations
    for i in dependent_rows(phi_q):
        name = labels[i].split("[", 1)[0] if elements else labels[i]
        if name not in involved and name not in bodies:
            involved.append(name)
    active[redundant] = 0.0
    return RemovedRows(active, tuple(redundant), names, tuple(involved), rank)
