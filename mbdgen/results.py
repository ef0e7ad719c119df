"""Simulation results: arrays over time plus counters, saved as ``.npz`` or ``.csv``.

Saving is atomic: a result is written to a temporary file in the destination's
folder and renamed over the destination, so an interrupt or a full disk leaves
either the old file or the complete new one, never a truncated one.
:func:`check_destination` lets a caller refuse an unusable path *before* a run.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from mbdgen.errors import MbdgenError, OutputError, ResultFileError
from mbdgen.fileio import atomic_write, blocking_file

#: File types :meth:`Result.save` writes.
RESULT_SUFFIXES = (".npz", ".csv")
#: Arrays every saved ``.npz`` result holds (besides the optional energy, reactions).
_REQUIRED = ("t", "q", "qd", "qdd", "lam", "phi_norm", "phid_norm", "meta")


def check_destination(path: str | Path, suffixes: tuple[str, ...] = RESULT_SUFFIXES) -> Path:
    """Check that ``path`` can be written, creating its folder; raise :class:`OutputError`.

    Called before a run so that a bad ``-o`` costs nothing: the suffix must be one of
    ``suffixes``, the path must not be a folder, its folder must be a folder (not a
    file) that can be created and written to.
    """
    path = Path(path)
    if path.suffix.lower() not in suffixes:
        raise OutputError(
            f"cannot write {str(path)!r}: use a file name ending in {' or '.join(suffixes)}"
        )
    if path.is_dir():
        raise OutputError(f"cannot write {str(path)!r}: it is a folder; give a file name")
    folder = path.parent
    blocker = blocking_file(folder)
    if blocker is not None:
        raise OutputError(f"cannot write {str(path)!r}: {str(blocker)!r} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the folder {str(folder)!r}: {exc.strerror}") from None
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".probe")
    except OSError as exc:
        raise OutputError(f"cannot write into {str(folder)!r}: {exc.strerror}") from None
    os.close(fd)
    os.unlink(probe)
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputError(f"cannot write {str(path)!r}: the file is read-only")
    return path


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
    states, state_rates : (N, nd) user differential states X and their rates Ẋ
        (Negrut et al. 2007, Eq. 8a), columns named by ``state_names``; (N, 0) for a
        model without states.
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
    _power: np.ndarray | None = field(default=None, repr=False)
    _derive: Any = field(default=None, repr=False, compare=False)
    state_names: tuple[str, ...] = ()
    states: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    state_rates: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def __post_init__(self) -> None:
        rows = self.t.shape[0]
        nd = len(self.state_names)
        for name in ("states", "state_rates"):
            value = getattr(self, name)
            if value.size == 0:
                setattr(self, name, np.zeros((rows, nd)))

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
    def power(self) -> np.ndarray | None:
        """(N,) power P of the forces V does not account for and of rheonomic
        constraints: d(T + V)/dt = P (computed on first use)."""
        if self._power is None:
            self._derived()
        return self._power

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
    def has_potential(self) -> bool:
        """False when the model gave no potential energy V (stored as NaN)."""
        energy = self.energy
        return energy is not None and not (len(energy) and np.isnan(energy[:, 1]).all())

    @property
    def potential(self) -> np.ndarray:
        """Potential energy V over time (gravity, springs)."""
        return self._energy_checked(potential=True)[:, 1]

    @property
    def total_energy(self) -> np.ndarray:
        """T + V over time."""
        e = self._energy_checked(potential=True)
        return e[:, 0] + e[:, 1]

    def _energy_checked(self, potential: bool = False) -> np.ndarray:
        energy = self.energy
        if energy is None:
            raise MbdgenError("this result has no energy (its module predates energy kernels)")
        if potential and not self.has_potential:
            raise MbdgenError(
                f"model {self.info.get('model', '')!r} gave no potential energy: pass "
                "potential=V(q) to its Model to get V and the energy balance"
            )
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

    def state(self, name: str) -> np.ndarray:
        """The time history of the user state called ``name``."""
        try:
            return self.states[:, self.state_names.index(name)]
        except ValueError:
            raise MbdgenError(
                f"no state {name!r}; the states are {', '.join(self.state_names) or '(none)'}"
            ) from None

    def save(self, path: str | Path) -> Path:
        """Write the result atomically; ``.npz`` (loadable by :func:`load`) or ``.csv``.

        Raises :class:`~mbdgen.errors.OutputError` if ``path`` cannot be written; an
        existing file there is replaced only once the new one is complete.
        """
        path = check_destination(path)
        try:
            with atomic_write(path) as fh:
                if path.suffix.lower() == ".csv":
                    self._save_csv(fh)
                else:
                    self._save_npz(fh)
        except OSError as exc:
            raise OutputError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
        return path

    def _save_npz(self, fh: IO[bytes]) -> None:
        np.savez_compressed(
            fh,
            t=self.t,
            q=self.q,
            qd=self.qd,
            qdd=self.qdd,
            lam=self.lam,
            phi_norm=self.phi_norm,
            phid_norm=self.phid_norm,
            **({} if self.energy is None else {"energy": self.energy}),
            **({} if self.power is None else {"power": self.power}),
            **({} if self.reactions is None else {"reactions": self.reactions}),
            **(
                {"states": self.states, "state_rates": self.state_rates} if self.state_names else {}
            ),
            meta=np.array(
                json.dumps(
                    {
                        "coordinates": list(self.coordinates),
                        "state_names": list(self.state_names),
                        "reaction_names": list(self.reaction_names),
                        "constraint_names": list(self.constraint_names),
                        "counters": self.counters,
                        "info": self.info,
                    }
                )
            ),
        )

    def _save_csv(self, fh: IO[bytes]) -> None:
        m = self.lam.shape[1]
        names = (
            ["t"]
            + list(self.coordinates)
            + [f"{c}_d" for c in self.coordinates]
            + [f"{c}_dd" for c in self.coordinates]
            + [f"lam_{i}" for i in range(m)]
            + list(self.state_names)
            + [f"{s}_d" for s in self.state_names]
            + ["phi_norm", "phid_norm"]
        )
        columns = [self.t, self.q, self.qd, self.qdd, self.lam, self.states, self.state_rates]
        columns += [self.phi_norm, self.phid_norm]
        if self.energy is not None:
            names.append("kinetic")
            columns.append(self.energy[:, :1])
            if self.has_potential:  # a model without V gets no column of zeros
                names += ["potential", "power"]
                columns += [self.energy[:, 1:], self.power[:, None]]
        if self.reactions is not None:
            from mbdgen.codegen.abi import REACTION_COLUMNS

            for r, label in enumerate(self.reaction_names):
                names += [f"{label}.{c}" for c in REACTION_COLUMNS]
                columns.append(self.reactions[:, r, :])
        data = np.column_stack(columns)
        np.savetxt(fh, data, delimiter=",", header=",".join(names), comments="")


def load(path: str | Path) -> Result:
    """Read a result written by :meth:`Result.save` (``.npz``).

    Raises :class:`~mbdgen.errors.ResultFileError`, naming the file and what is wrong
    with it, for a missing, truncated, corrupt or foreign file.
    """
    path = Path(path)
    where = repr(str(path))
    if not path.exists():
        raise ResultFileError(f"result file {where} does not exist")
    if not path.is_file():
        raise ResultFileError(f"{where} is not a file")
    if path.suffix.lower() == ".csv":
        raise ResultFileError(
            f"{where} is a CSV table; mbdgen.load reads the .npz results (save with -o out.npz)"
        )
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ResultFileError(f"cannot read {where}: {exc.strerror}") from None
    if not magic:
        raise ResultFileError(f"{where} is empty (an interrupted write?)")
    if magic != b"PK\x03\x04":
        raise ResultFileError(f"{where} is not an mbdgen result: not a NumPy .npz archive")
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [key for key in _REQUIRED if key not in data.files]
            if missing:
                raise ResultFileError(
                    f"{where} is a NumPy archive but not an mbdgen result: it lacks "
                    f"{', '.join(missing)}"
                )
            meta = json.loads(str(data["meta"]))
            arrays = {key: data[key] for key in data.files if key != "meta"}
    except ResultFileError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as exc:
        raise ResultFileError(
            f"{where} is damaged (truncated or corrupt archive: {type(exc).__name__}: {exc})"
        ) from None
    if not isinstance(meta, dict) or not {"coordinates", "counters", "info"} <= meta.keys():
        raise ResultFileError(f"{where} has no valid mbdgen metadata")
    rows = arrays["t"].shape[0] if arrays["t"].ndim == 1 else -1
    if any(arrays[k].shape[:1] != (rows,) for k in _REQUIRED if k != "meta"):
        raise ResultFileError(f"{where} is inconsistent: its arrays differ in length")
    nd = len(meta.get("state_names", ()))
    for key in ("states", "state_rates") if nd else ():
        if key not in arrays or arrays[key].shape != (rows, nd):
            raise ResultFileError(
                f"{where} is inconsistent: it names {nd} user state(s) but its {key!r} "
                "array is missing or of another shape"
            )
    return Result(
        t=arrays["t"],
        q=arrays["q"],
        qd=arrays["qd"],
        qdd=arrays["qdd"],
        lam=arrays["lam"],
        phi_norm=arrays["phi_norm"],
        phid_norm=arrays["phid_norm"],
        coordinates=tuple(meta["coordinates"]),
        counters=meta["counters"],
        info=meta["info"],
        _energy=arrays.get("energy"),
        _reactions=arrays.get("reactions"),
        _power=arrays.get("power"),
        reaction_names=tuple(meta.get("reaction_names", ())),
        constraint_names=tuple(meta.get("constraint_names", ())),
        state_names=tuple(meta.get("state_names", ())),
        **{k: arrays[k] for k in ("states", "state_rates") if k in arrays},
    )
