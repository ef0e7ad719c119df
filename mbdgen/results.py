"""Simulation results: arrays over time plus counters, saved as ``.npz`` or ``.csv``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mbdgen.errors import MbdgenError


@dataclass
class Result:
    """The outcome of one run.

    Attributes
    ----------
    t : (N,) output times.
    q, qd, qdd : (N, n) coordinates, velocities, accelerations.
    lam : (N, m) Lagrange multipliers.
    phi_norm : (N,) ‖Φ(q, t)‖₂, the position-constraint residual.
    phid_norm : (N,) ‖Φ_q q̇ + Φ_t‖₂, the velocity-constraint residual.
    coordinates : names of q.
    counters : steps, rhs evaluations, wall time, ... (integers and floats).
    info : method, options, model name, status and message.
    energy : (N, 2) kinetic and potential energy [T, V] (None if not computed).
    reactions : (N, R, 12) joint reactions, columns ``REACTION_COLUMNS`` (force and
        torque at the joint point on each body, global then body frame), or None.
    reaction_names : the R row labels, ``<joint>.<body>``.
    constraint_names : a label per column of ``lam``.
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    lam: np.ndarray
    phi_norm: np.ndarray
    phid_norm: np.ndarray
    coordinates: tuple[str, ...]
    counters: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    reaction_names: tuple[str, ...] = ()
    constraint_names: tuple[str, ...] = ()
    _energy: np.ndarray | None = field(default=None, repr=False)
    _reactions: np.ndarray | None = field(default=None, repr=False)
    _derive: Any = field(default=None, repr=False, compare=False)

    def _derived(self) -> None:
        if self._derive is not None:
            derive, self._derive = self._derive, None
            derive()

    @property
    def energy(self) -> np.ndarray | None:
        """(N, 2) kinetic and potential energy [T, V] (computed on first use)."""
        if self._energy is None:
            self._derived()
        return self._energy

    @property
    def reactions(self) -> np.ndarray | None:
        """(N, R, 12) joint reactions (computed on first use); None without joints."""
        if self._reactions is None:
            self._derived()
        return self._reactions

    @property
    def kinetic(self) -> np.ndarray:
        """Kinetic energy T over time."""
        return self._energy_checked()[:, 0]

    @property
    def potential(self) -> np.ndarray:
        """Potential energy V over time (gravity, springs)."""
        return self._energy_checked()[:, 1]

    @property
    def total_energy(self) -> np.ndarray:
        """T + V over time."""
        e = self._energy_checked()
        return e[:, 0] + e[:, 1]

    def _energy_checked(self) -> np.ndarray:
        energy = self.energy
        if energy is None:
            raise MbdgenError("this result has no energy (its module predates energy kernels)")
        return energy

    def reaction(self, name: str, frame: str = "global") -> np.ndarray:
        """(N, 6) force and torque of reaction row ``name`` (``<joint>.<body>``).

        ``frame`` is ``"global"`` or ``"body"`` (components in the body's frame).
        """
        if self.reactions is None or name not in self.reaction_names:
            raise MbdgenError(
                f"no reaction {name!r}; the reactions are "
                f"{', '.join(self.reaction_names) or '(none)'}"
            )
        if frame not in ("global", "body"):
            raise MbdgenError(f"frame must be 'global' or 'body', not {frame!r}")
        cols = slice(0, 6) if frame == "global" else slice(6, 12)
        return self.reactions[:, self.reaction_names.index(name), cols]

    @property
    def ok(self) -> bool:
        """True when the run reached its end time."""
        return self.info.get("status", "finished") == "finished"

    def __len__(self) -> int:
        return int(self.t.shape[0])

    def coordinate(self, name: str) -> np.ndarray:
        """The time history of the coordinate called ``name``."""
        try:
            return self.q[:, self.coordinates.index(name)]
        except ValueError:
            raise MbdgenError(
                f"no coordinate {name!r}; the coordinates are {', '.join(self.coordinates)}"
            ) from None

    def save(self, path: str | Path) -> Path:
        """Write the result; ``.npz`` (NumPy, loadable by :func:`load`) or ``.csv``."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".csv":
            self._save_csv(path)
            return path
        if path.suffix != ".npz":
            raise MbdgenError(f"cannot save to {str(path)!r}: use a .npz or .csv file name")
        np.savez_compressed(
            path,
            t=self.t,
            q=self.q,
            qd=self.qd,
            qdd=self.qdd,
            lam=self.lam,
            phi_norm=self.phi_norm,
            phid_norm=self.phid_norm,
            **({} if self.energy is None else {"energy": self.energy}),
            **({} if self.reactions is None else {"reactions": self.reactions}),
            meta=np.array(
                json.dumps(
                    {
                        "coordinates": list(self.coordinates),
                        "reaction_names": list(self.reaction_names),
                        "constraint_names": list(self.constraint_names),
                        "counters": self.counters,
                        "info": self.info,
                    }
                )
            ),
        )
        return path

    def _save_csv(self, path: Path) -> None:
        m = self.lam.shape[1]
        names = (
            ["t"]
            + list(self.coordinates)
            + [f"{c}_d" for c in self.coordinates]
            + [f"{c}_dd" for c in self.coordinates]
            + [f"lam_{i}" for i in range(m)]
            + ["phi_norm", "phid_norm"]
        )
        columns = [self.t, self.q, self.qd, self.qdd, self.lam, self.phi_norm, self.phid_norm]
        if self.energy is not None:
            names += ["kinetic", "potential"]
            columns.append(self.energy)
        if self.reactions is not None:
            from mbdgen.codegen.abi import REACTION_COLUMNS

            for r, label in enumerate(self.reaction_names):
                names += [f"{label}.{c}" for c in REACTION_COLUMNS]
                columns.append(self.reactions[:, r, :])
        data = np.column_stack(columns)
        np.savetxt(path, data, delimiter=",", header=",".join(names), comments="")


def load(path: str | Path) -> Result:
    """Read a result written by :meth:`Result.save` (``.npz``)."""
    path = Path(path)
    if not path.is_file():
        raise MbdgenError(f"result file {str(path)!r} does not exist")
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        return Result(
            t=data["t"],
            q=data["q"],
            qd=data["qd"],
            qdd=data["qdd"],
            lam=data["lam"],
            phi_norm=data["phi_norm"],
            phid_norm=data["phid_norm"],
            coordinates=tuple(meta["coordinates"]),
            counters=meta["counters"],
            info=meta["info"],
            _energy=data["energy"] if "energy" in data else None,
            _reactions=data["reactions"] if "reactions" in data else None,
            reaction_names=tuple(meta.get("reaction_names", ())),
            constraint_names=tuple(meta.get("constraint_names", ())),
        )
