"""Inverse dynamics of a kinematically driven system (Haug 1989 §6.6, §7.1).

Along the kinematic solution q(t), q̇(t), q̈(t) of :func:`~mbdgen.analysis.kinematics.
kinematics`, the first row of the equations of motion M q̈ + Φ_qᵀ λ = Q (Haug 1989
Eq. 7.2.1), with rank Φ_q = n, determines the Lagrange multipliers without
integration (§7.1, "solving kinematic equations ... assembling the equations of
motion, and solving for Lagrange multipliers"):

    Φ_qᵀ λ = Q − M q̈

solved in the least-squares sense (the minimum-norm λ where constraints are
redundant) and checked by its residual.  The generalized reaction force of constraint
row i is −Φ_{q,i}ᵀ λ_i (Haug 1989 §6.6); for a driver row the force or torque the
driver applies is its reaction.  :attr:`InverseDynamics.driving` reports
−λ_i per driver row, the generalized force along ∂Φ_i/∂q: for a driver written
``coordinate − f(t)`` it is the force or torque applied to that coordinate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import ModuleType
from typing import IO, Any

import numpy as np

from mbdgen.analysis.assembly import _kernel
from mbdgen.analysis.kinematics import kinematics
from mbdgen.errors import MbdgenError
from mbdgen.results import Result
from mbdgen.units import multipliers

#: Relative residual ‖Φ_qᵀλ − (Q − M q̈)‖ / (‖Q − M q̈‖ + ‖Q‖ + ‖M q̈‖) above which
#: the multipliers are refused.
RESIDUAL_TOL = 1e-8


def _column(label: str) -> str:
    """A CSV column name from a constraint label: ``phi[2]`` → ``phi_2``."""
    return re.sub(r"\W+", "_", label).strip("_")


def constraint_labels(module: ModuleType) -> tuple[str, ...]:
    """The module's ``CONSTRAINT_NAMES``, or ``phi[i]`` for each row."""
    names = getattr(module, "CONSTRAINT_NAMES", None)
    if names is not None and len(names) == module.N_CONSTRAINTS:
        return tuple(str(s) for s in names)
    return tuple(f"phi[{i}]" for i in range(module.N_CONSTRAINTS))


@dataclass
class InverseDynamics:
    """Multipliers, reaction and driving forces along a kinematic solution.

    Attributes
    ----------
    kinematics : the kinematic solution (a :class:`~mbdgen.results.Result`; its
        ``lam`` holds the multipliers below).
    lam : (N, m) Lagrange multipliers λ (Φ_qᵀλ = Q − M q̈, Haug 1989 Eq. 7.2.1).
    reaction : (N, m, n) generalized reaction force −Φ_{q,i}ᵀ λ_i of each row i.
    constraint_names : a label per constraint row.
    constraint_units, constraint_kinds : per row, the unit of λ and of the driving
        force −λ (N, N·m, N/m; "" where not known) and what the row is
        (:mod:`mbdgen.units`).
    drivers : the rows reported as drivers.
    residual : (N,) ‖Φ_qᵀλ − (Q − M q̈)‖₂.
    """

    kinematics: Result
    lam: np.ndarray
    reaction: np.ndarray
    constraint_names: tuple[str, ...]
    drivers: tuple[int, ...]
    residual: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)
    constraint_units: tuple[str, ...] = ()
    constraint_kinds: tuple[str, ...] = ()

    def driver_labels(self) -> list[str]:
        """``drive[0] [N·m]`` for each driver row: its name and the unit of −λ."""
        out = []
        for i in self.drivers:
            unit = self.constraint_units[i] if i < len(self.constraint_units) else ""
            name = self.constraint_names[i]
            out.append(f"{name} [{unit}]" if unit else f"{name} (unit unknown)")
        return out

    @property
    def t(self) -> np.ndarray:
        """Output times."""
        return self.kinematics.t

    @property
    def driving(self) -> np.ndarray:
        """(N, len(drivers)): −λ_i of each driver row, the driving force or torque."""
        return -self.lam[:, list(self.drivers)]

    def driving_force(self, name: str) -> np.ndarray:
        """−λ of the constraint row labelled ``name`` (e.g. ``"phi[2]"``)."""
        try:
            i = self.constraint_names.index(name)
        except ValueError:
            raise MbdgenError(
                f"no constraint {name!r}; the constraints are {', '.join(self.constraint_names)}"
            ) from None
        return -self.lam[:, i]

    def save(self, path: str | Path) -> Path:
        """Write the result atomically as ``.npz`` or ``.h5`` (a result that
        :func:`mbdgen.load` reads: the kinematic solution with these multipliers, plus
        the arrays ``reaction``, ``driving`` and ``residual``) or ``.csv`` (t, q, q̇,
        q̈, λ and the driving forces).

        Raises :class:`~mbdgen.errors.OutputError` if ``path`` cannot be written.
        """
        return self.as_result().save(path)

    def as_result(self) -> Result:
        """The kinematic solution with these multipliers and constraint names, and the
        inverse dynamics' settings in ``info`` (``analysis = "inverse_dynamics"``), as
        a :class:`~mbdgen.results.Result` that saves the inverse arrays too."""
        k = self.kinematics
        info = {**k.info, **self.info, "drivers": [self.constraint_names[i] for i in self.drivers]}
        values = {f.name: getattr(k, f.name) for f in fields(Result) if f.init}
        values.update(
            lam=self.lam,
            constraint_names=tuple(self.constraint_names),
            constraint_units=tuple(self.constraint_units),
            constraint_kinds=tuple(self.constraint_kinds),
            info=info,
        )
        return _InverseResult(**values, inverse=self)


@dataclass
class _InverseResult(Result):
    """A :class:`Result` whose files also hold the inverse dynamics' arrays."""

    inverse: InverseDynamics | None = field(default=None, repr=False, compare=False)

    def _arrays(self) -> dict[str, np.ndarray]:
        arrays = super()._arrays()
        if self.inverse is not None:
            arrays["reaction"] = self.inverse.reaction
            arrays["driving"] = self.inverse.driving
            arrays["residual"] = self.inverse.residual
        return arrays

    def _units(self, name: str) -> str | list[str] | None:
        if name == "driving" and self.inverse is not None:
            from mbdgen.units import ascii_unit

            given = self.inverse.constraint_units
            units = [ascii_unit(given[i]) if i < len(given) else "" for i in self.inverse.drivers]
            return units if any(units) else None
        return super()._units(name)

    def _column_names(self, name: str) -> list[str]:
        if name == "driving" and self.inverse is not None:
            return [self.inverse.constraint_names[i] for i in self.inverse.drivers]
        return super()._column_names(name)

    def _save_csv(self, fh: IO[bytes]) -> None:
        assert self.inverse is not None
        r = self.inverse
        labels = [r.constraint_names[i] for i in r.drivers]
        names = (
            ["t"]
            + list(self.coordinates)
            + [f"{c}_d" for c in self.coordinates]
            + [f"{c}_dd" for c in self.coordinates]
            + [f"lam_{_column(c)}" for c in r.constraint_names]
            + [f"drive_{_column(c)}" for c in labels]
        )
        data = np.column_stack([self.t, self.q, self.qd, self.qdd, r.lam, r.driving])
        np.savetxt(fh, data, delimiter=",", header=",".join(names), comments="")


def _driver_rows(
    module: ModuleType,
    k: Result,
    p: np.ndarray,
    labels: tuple[str, ...],
    drivers: Sequence[str | int] | None,
) -> tuple[int, ...]:
    m = module.N_CONSTRAINTS
    if drivers is None:
        # rheonomic rows: Φ_t ≠ 0 somewhere along the solution
        rows = np.zeros(m, dtype=bool)
        for t, q in zip(k.t, k.q, strict=True):
            rows |= _kernel(module, "phi_t", t, q, p) != 0.0
        return tuple(int(i) for i in np.flatnonzero(rows))
    out = []
    for d in drivers:
        if isinstance(d, (int, np.integer)):
            if not 0 <= d < m:
                raise MbdgenError(f"driver row {d} does not exist: the model has {m} constraints")
            out.append(int(d))
        elif d in labels:
            out.append(labels.index(d))
        else:
            raise MbdgenError(f"no constraint {d!r}; the constraints are {', '.join(labels)}")
    return tuple(out)


def inverse_dynamics(
    model: ModuleType | str | Path,
    t_end: float = 1.0,
    h: float | None = None,
    *,
    steps: int | None = None,
    t0: float = 0.0,
    params: Mapping[str, float] | None = None,
    q0: Sequence[float] | None = None,
    drivers: Sequence[str | int] | None = None,
    kinematic_result: Result | None = None,
    residual_tol: float = RESIDUAL_TOL,
    **kinematics_options: Any,
) -> InverseDynamics:
    """Multipliers and driving forces of a driven system on [t0, t_end].

    Haug 1989 §6.6, §7.1: runs :func:`~mbdgen.analysis.kinematics.
    kinematics` (or takes ``kinematic_result``), then solves Φ_qᵀλ = Q − M q̈ at every
    output time.

    Parameters
    ----------
    drivers : constraint rows (labels from ``CONSTRAINT_NAMES`` / ``phi[i]``, or
        indices) whose driving force to report; default: the rheonomic rows
        (Φ_t ≠ 0 somewhere on the solution).
    residual_tol : largest relative residual of Φ_qᵀλ = Q − M q̈ accepted.
    kinematics_options : passed on to :func:`~mbdgen.analysis.kinematics.kinematics`
        (``tol``, ``singular_tol``, ...).

    Raises
    ------
    MbdgenError
        As :func:`kinematics` does, and when Φ_qᵀλ = Q − M q̈ has no solution.
    """
    from mbdgen.inputs import parameter_vector, resolve_model

    module = resolve_model(model)
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    p = parameter_vector(module, params)
    if kinematic_result is None:
        k = kinematics(
            module, t_end, h, steps=steps, t0=t0, params=params, q0=q0, **kinematics_options
        )
    else:
        k = kinematic_result
    labels = constraint_labels(module)
    rows = _driver_rows(module, k, p, labels, drivers)

    N = len(k)
    lam = np.zeros((N, m))
    reaction = np.zeros((N, m, n))
    residual = np.zeros(N)
    for j in range(N):
        t, q, qd, qdd = k.t[j], k.q[j], k.qd[j], k.qdd[j]
        jac = _kernel(module, "phi_q", t, q, p)
        inertia = _kernel(module, "mass", t, q, p) @ qdd
        force = _kernel(module, "force", t, q, qd, p)
        rhs = force - inertia
        lam[j], *_ = np.linalg.lstsq(jac.T, rhs, rcond=None)
        residual[j] = np.linalg.norm(jac.T @ lam[j] - rhs)
        scale = float(np.linalg.norm(rhs) + np.linalg.norm(force) + np.linalg.norm(inertia))
        if residual[j] > residual_tol * max(scale, 1e-300):
            raise MbdgenError(
                f"no multipliers satisfy Φ_qᵀλ = Q − M q̈ at t = {t:.10g} (residual "
                f"{residual[j]:.3e}): the constraints do not determine the motion"
            )
        reaction[j] = -jac * lam[j][:, None]
    k.lam = lam
    units = multipliers(module)  # λ's unit per row (mbdgen.units)
    info = {
        "analysis": "inverse_dynamics",
        "model": module.MODEL_NAME,
        "max_residual": float(residual.max(initial=0.0)),
    }
    return InverseDynamics(
        kinematics=k,
        lam=lam,
        reaction=reaction,
        constraint_names=labels,
        drivers=rows,
        residual=residual,
        info=info,
        constraint_units=tuple(r.unit for r in units),
        constraint_kinds=tuple(r.kind for r in units),
    )
