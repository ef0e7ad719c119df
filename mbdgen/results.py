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
            meta=np.array(
                json.dumps(
                    {
                        "coordinates": list(self.coordinates),
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
        data = np.column_stack(
            [self.t, self.q, self.qd, self.qdd, self.lam, self.phi_norm, self.phid_norm]
        )
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
        )
