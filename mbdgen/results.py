"""Simulation results: arrays over time plus counters, saved as ``.npz``, ``.h5`` or ``.csv``.

The three formats hold the same data: ``.npz`` (NumPy), ``.h5`` (HDF5 through h5py,
every array a dataset with its column names and units as attributes, and the run's
metadata — model hash, mbdgen version, method and settings, counters, parameter
values — as attributes that h5dump and HDFView show) and ``.csv`` (one table, for
spreadsheets).  :func:`load` reads ``.npz`` and ``.h5`` back into a :class:`Result`.

Saving is atomic: a result is written to a temporary file in the destination's
folder and renamed over the destination, so an interrupt or a full disk leaves
either the old file or the complete new one, never a truncated one.
:func:`check_destination` lets a caller refuse an unusable path *before* a run.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

import numpy as np

from mbdgen import rowstore
from mbdgen.errors import MbdgenError, OutputError, ResultFileError
from mbdgen.fileio import atomic_write, blocking_file
from mbdgen.methods import METHODS

#: File types :meth:`Result.save` writes.
RESULT_SUFFIXES = (".npz", ".h5", ".hdf5", ".csv")
#: File types :func:`load` reads.
LOADABLE_SUFFIXES = (".npz", ".h5", ".hdf5")
#: Arrays every saved ``.npz`` result holds (besides the optional energy, reactions).
_REQUIRED = ("t", "q", "qd", "qdd", "lam", "phi_norm", "phid_norm", "meta")
#: Picture formats :func:`mbdgen.plot.plot_result` writes (matplotlib's vector and raster
#: formats); defined here so that ``mbdgen simulate --plot`` checks its destination
#: without importing the plotting module.
PLOT_SUFFIXES = (".png", ".pdf", ".svg")
#: Columns of ``Result.step_history``: per chunk of the integration loop, the time
#: reached, accepted steps so far, the mean step over the chunk, the method's order at
#: its end (0: not a variable-order method), Newton iterations and rejected steps so far.
STEP_HISTORY_COLUMNS = ("t", "steps", "h_mean", "order", "newton_iterations", "rejected_steps")
#: Reaction columns of a planar body's row (force in the plane, torque about z) and of
#: a spatial body's row, global frame (``frame="body"``: the same in the body frame).
PLANAR_REACTION = ("Fx", "Fy", "Tz")
SPATIAL_REACTION = ("Fx", "Fy", "Fz", "Tx", "Ty", "Tz")
_HDF5_MAGIC = b"\x89HDF"
#: Longest string written as one readable HDF5 attribute (see ``Result._save_h5``).
_MAX_ATTRIBUTE_CHARS = 4096
#: Format tag and version written into HDF5 results (root attributes).
HDF5_FORMAT = "mbdgen-result"
HDF5_FORMAT_VERSION = 1


class Columns(np.ndarray):
    """A 2-D array whose columns have names: ``r["Fx"]`` is a column, ``r.columns``
    the names; any other indexing gives a plain :class:`numpy.ndarray`."""

    columns: tuple[str, ...]

    def __new__(cls, data: np.ndarray, columns: tuple[str, ...]) -> Columns:
        obj = np.asarray(data).view(cls)
        obj.columns = tuple(columns)
        return obj

    def __array_finalize__(self, obj: Any) -> None:
        self.columns = getattr(obj, "columns", ())

    def __array_wrap__(self, arr: Any, context: Any = None, return_scalar: bool = False) -> Any:
        return np.asarray(arr)[()] if return_scalar else np.asarray(arr)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            if key not in self.columns:
                raise MbdgenError(f"no column {key!r}; the columns are {', '.join(self.columns)}")
            return np.asarray(self)[:, self.columns.index(key)]
        return np.asarray(self)[key]

    def to_dataframe(self) -> Any:
        """The columns as a :class:`pandas.DataFrame`."""
        import pandas as pd

        return pd.DataFrame(np.asarray(self), columns=list(self.columns))


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


def settings_text(info: dict[str, Any]) -> str:
    """The settings that made a result, as one line for summaries and plot titles.

    The step number k only where the user chooses it (the Adams methods: a method of
    one order, such as HHT-α or RK4, shows none); for an error-controlled method the
    tolerances and the output interval, since its ``h`` is not a step; HHT's α or
    generalized-α's ρ∞; the constraint handling other than ``direct`` and Baumgarte's
    gains.  Keys a result does not have (an older file, a kinematic analysis) are left
    out.
    """
    name = info.get("method") or info.get("analysis") or "?"
    spec = METHODS.get(str(name))
    text = str(name)
    order = info.get("order")
    if order is not None and (spec is None or len(spec.orders) > 1):
        text += f" k={order}"
    h = info.get("h")
    if spec is not None and spec.error_controlled and info.get("rtol") is not None:
        text += f", rtol={info['rtol']:g}, atol={info.get('atol', info['rtol']):g}"
        if info.get("error_per_unit_step") is False:
            text += ", error per step"
        if h is not None:
            text += f", output every {h:g}"
    elif h is not None:
        text += f", h={h:g}"
    if info.get("hht_alpha") is not None:
        text += f", hht_alpha={info['hht_alpha']:g}"
    if info.get("rho_inf") is not None:
        text += f", rho_inf={info['rho_inf']:g}"
    if info.get("constraints") not in (None, "direct"):
        text += f", {info['constraints']}"
    if info.get("alpha") or info.get("beta"):
        text += f" α={info.get('alpha', 0):g} β={info.get('beta', 0):g}"
    return text


@dataclass
class Result:
    """The outcome of one run.

    Attributes
    ----------
    t : (N,) output times.
    q, qd, qdd : (N, n) coordinates, velocities, accelerations.  Under HHT-α with
        α ≠ 0 ``qdd`` is the method's unknown q̈_{n+1} of Negrut et al. 2007, Eq. 10,
        which satisfies the equations of motion weighted between t_n and t_{n+1}; it
        differs from M⁻¹(Q − Φ_qᵀλ) at t_{n+1} by O(|α| h) (generalized-α and α = 0
        satisfy them at t_{n+1}); ``mbdgen.analysis.assemble(module, q0=q[k], qd0=qd[k], t0=t[k])``
        gives the latter at row k.
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
    constraint_units, constraint_kinds : per column of ``lam``, the unit of λ (N, N·m,
        N/m; "" where it is not known) and what its row is ("revolute joint, Φ in m",
        "Euler-parameter normalization pᵀp − 1 of body crank"; see :mod:`mbdgen.units`);
        empty for a file written before they were recorded.
    states, state_rates : (N, nd) user differential states X and their rates Ẋ
        (Negrut et al. 2007, Eq. 8a), columns named by ``state_names``; (N, 0) for a
        model without states.
    step_history : (K, 6) the integration loop's progress per chunk, columns
        ``STEP_HISTORY_COLUMNS`` (mean step, order, Newton iterations over time).
    error_q, error_qd : (N, n) the estimated global error of q and q̇ at every row
        (``simulate(..., error_estimate=True)``: the difference from a second, finer
        solution; ``info["error_estimate"]`` says how it was made and what it cost);
        (0, 0) without an estimate.

    ``print(result)`` gives a short summary (:meth:`summary`); ``repr`` one line.
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
    constraint_units: tuple[str, ...] = ()
    constraint_kinds: tuple[str, ...] = ()
    _energy: np.ndarray | None = field(default=None, repr=False)
    _reactions: np.ndarray | None = field(default=None, repr=False)
    _power: np.ndarray | None = field(default=None, repr=False)
    _derive: Any = field(default=None, repr=False, compare=False)
    #: The :class:`mbdgen.rowstore.RowStore` holding the arrays of a run that streamed its
    #: rows to disk (``simulate(stream_to=...)``), else None.
    _store: Any = field(default=None, repr=False, compare=False)
    state_names: tuple[str, ...] = ()
    states: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    state_rates: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    step_history: np.ndarray = field(
        default_factory=lambda: np.zeros((0, len(STEP_HISTORY_COLUMNS)))
    )
    error_q: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    error_qd: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def __post_init__(self) -> None:
        rows = self.t.shape[0]
        nd = len(self.state_names)
        for name in ("states", "state_rates"):
            value = getattr(self, name)
            if value.size == 0:
                setattr(self, name, np.zeros((rows, nd)))

    def multiplier_label(self, i: int) -> str:
        """``pivot[0] [N]``: the name of λ_i's row and its unit, "(unit unknown)" where
        the result does not know it (a generalized-coordinate model, an older file)."""
        name = self.constraint_names[i] if i < len(self.constraint_names) else f"λ[{i}]"
        unit = self.constraint_units[i] if i < len(self.constraint_units) else ""
        return f"{name} [{unit}]" if unit else f"{name} (unit unknown)"

    def multiplier_kind(self, i: int) -> str:
        """What λ_i's row is (:attr:`constraint_kinds`), "" where not known."""
        return self.constraint_kinds[i] if i < len(self.constraint_kinds) else ""

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
        # row 0 first: a streamed run's column stays on disk (mbdgen.rowstore)
        return energy is not None and not (
            len(energy) and np.isnan(energy[0, 1]) and np.isnan(energy[:, 1]).all()
        )

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

    def _reaction_row(self, name: str) -> int:
        names = self.reaction_names
        if name not in names:  # a joint with one moving body may be named alone
            matches = [r for r in names if r.split(".", 1)[0] == name]
            if len(matches) == 1:
                name = matches[0]
        if name not in names:
            raise MbdgenError(
                f"no reaction {name!r}; the reactions are {', '.join(names) or '(none)'}"
            )
        if self.reactions is None:
            raise MbdgenError(
                "the reactions of this result were not computed (too many output rows "
                "for memory; record fewer rows with output_every)"
            )
        return names.index(name)

    def reaction_columns(self, name: str) -> tuple[str, ...]:
        """Column names of :meth:`reaction` for row ``name``: ``Fx, Fy, Tz`` where the
        body is planar, ``Fx, Fy, Fz, Tx, Ty, Tz`` where it is spatial."""
        row = self._reaction_row(name)
        body = self.reaction_names[row].split(".", 1)[-1]
        size = self.info.get("bodies", {}).get(body, (0, 0))[1]
        if size == 3:
            return PLANAR_REACTION
        if size == 7:
            return SPATIAL_REACTION
        # a file without the body layout: planar rows have Fz = Tx = Ty = 0 exactly
        off_plane = np.asarray(self.reactions)[:, row, 2:5]
        return SPATIAL_REACTION if np.any(off_plane) else PLANAR_REACTION

    def reaction(self, name: str, frame: str = "global") -> Columns:
        """Force and torque of reaction row ``name`` (``<joint>.<body>``, or the joint's
        name alone where it has one moving body) as labelled columns.

        The reaction is what the joint exerts on the body at the joint point (Haug
        1989, Eq. 6.6.2 planar, Eq. 11.5.x spatial).  A planar body gives (N, 3)
        columns ``Fx, Fy, Tz``; a spatial one (N, 6) ``Fx, Fy, Fz, Tx, Ty, Tz``;
        ``r["Fx"]`` is one column.  ``frame`` is ``"global"`` or ``"body"`` (components
        in the body's frame).
        """
        if frame not in ("global", "body"):
            raise MbdgenError(f"frame must be 'global' or 'body', not {frame!r}")
        row = self._reaction_row(name)
        columns = self.reaction_columns(name)
        index = [SPATIAL_REACTION.index(c) + (0 if frame == "global" else 6) for c in columns]
        return Columns(np.asarray(self.reactions)[:, row, index], columns)

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

    # ------------------------------------------------------------------ summaries

    def _settings(self) -> str:
        return settings_text(self.info)

    def __repr__(self) -> str:
        span = f"t={self.t[0]:g}..{self.t[-1]:g}" if len(self) else "no rows"
        steps = self.counters.get("steps")
        return (
            f"<Result {self.info.get('model', '?')}: {self._settings()}; {len(self)} rows, "
            f"{span}, {self.info.get('status', 'finished')}"
            + (f", {steps} steps" if steps is not None else "")
            + ">"
        )

    def summary(self, final: bool = False) -> str:
        """A few lines: model, method and settings, rows and time span, status, the key
        counters and the constraint residual; ``final`` adds the last row's values."""
        info, c = self.info, self.counters
        lines = [f"result of {info.get('model', '?')}: {self._settings()}"]
        if info.get("model_hash"):
            lines.append(
                f"  model hash {str(info['model_hash'])[:16]}, mbdgen "
                f"{info.get('mbdgen_version', '?')}"
            )
        status = info.get("status", "finished")
        message = info.get("message", "")
        said = f" ({message})" if message not in ("", status) else ""
        if message.startswith(f"{status} "):  # "terminated (SIGTERM) at t = 2": said once
            status, said = message, ""
        lines.append(f"  status: {status}{said}")
        if len(self):
            lines.append(f"  rows: {len(self)}, t = {self.t[0]:.6g} .. {self.t[-1]:.6g}")
        else:
            lines.append("  rows: 0")
        lines.append(
            f"  coordinates ({len(self.coordinates)}): {_shorten(self.coordinates)}; "
            f"multipliers λ: {self.lam.shape[1]}"
            + (f"; states: {', '.join(self.state_names)}" if self.state_names else "")
        )
        keys = [
            ("steps", "steps"),
            ("rejected_steps", "rejected"),
            ("rhs_evaluations", "rhs evaluations"),
            ("newton_iterations", "Newton iterations"),
            ("factorizations", "factorizations"),
            ("repartitions", "re-partitions"),
        ]
        shown = [f"{label} {c[k]}" for k, label in keys if c.get(k)]
        if "wall_time_s" in c:
            shown.append(f"wall {c['wall_time_s']:.3g} s")
        if shown:
            lines.append("  counters: " + ", ".join(shown))
        if len(self) and self.phi_norm.size:
            lines.append(
                f"  ‖Φ‖: max {float(np.max(self.phi_norm)):.3e}, "
                f"final {float(self.phi_norm[-1]):.3e}"
            )
        for text in info.get("warnings", ()) or ():
            lines.append(f"  warning: {text}")
        if final and len(self):
            width = max(len(n) for n in (*self.coordinates, *self.state_names, "t"))
            lines.append(f"  final values at t = {self.t[-1]:.10g}:")
            lines.append(f"    {'':<{width}}  {'q':>16}  {'q̇':>16}")
            for i, name in enumerate(self.coordinates):
                lines.append(
                    f"    {name:<{width}}  {self.q[-1, i]:>16.10g}  {self.qd[-1, i]:>16.10g}"
                )
            for i, name in enumerate(self.state_names):
                lines.append(
                    f"    {name:<{width}}  {self.states[-1, i]:>16.10g}  "
                    f"{self.state_rates[-1, i]:>16.10g}"
                )
            for i in range(self.lam.shape[1]):
                lines.append(f"    λ {self.multiplier_label(i)}: {self.lam[-1, i]:.10g}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_dataframe(
        self, *, qdd: bool = False, energy: bool = False, reactions: bool = False
    ) -> Any:
        """The result as a :class:`pandas.DataFrame`, one row per output time.

        Columns: ``t``, the coordinates by name, their rates ``<name>_d`` (``qdd``:
        also ``<name>_dd``), the multipliers ``lam[<constraint>]``, the user states and
        their rates, ``phi_norm``, ``phid_norm``; ``energy`` adds ``kinetic``,
        ``potential``, ``total``, ``power``; ``reactions`` adds ``<joint>.<body>.<Fx...>``
        (global frame; planar bodies Fx, Fy, Tz).
        """
        import pandas as pd

        data: dict[str, np.ndarray] = {"t": self.t}
        for i, name in enumerate(self.coordinates):
            data[name] = self.q[:, i]
        for i, name in enumerate(self.coordinates):
            data[f"{name}_d"] = self.qd[:, i]
        if qdd:
            for i, name in enumerate(self.coordinates):
                data[f"{name}_dd"] = self.qdd[:, i]
        names = self.constraint_names or tuple(str(i) for i in range(self.lam.shape[1]))
        for i, name in enumerate(names):
            data[f"lam[{name}]"] = self.lam[:, i]
        for i, name in enumerate(self.state_names):
            data[name] = self.states[:, i]
        for i, name in enumerate(self.state_names):
            data[f"{name}_d"] = self.state_rates[:, i]
        data["phi_norm"] = self.phi_norm
        data["phid_norm"] = self.phid_norm
        if energy:
            e = self._energy_checked()
            data["kinetic"] = e[:, 0]
            data["potential"] = e[:, 1]
            data["total"] = e[:, 0] + e[:, 1]
            if self.power is not None:
                data["power"] = self.power
        if reactions:
            for label in self.reaction_names:
                r = self.reaction(label)
                for column in r.columns:
                    data[f"{label}.{column}"] = r[column]
        return pd.DataFrame(data)

    def plot(
        self, path: str | Path, what: str | tuple[str, ...] = ("q", "phi"), **options: Any
    ) -> Path:
        """Write a figure of this result; see :func:`mbdgen.plot.plot_result`."""
        from mbdgen.plot import plot_result

        return plot_result(self, path, what=what, **options)

    # ------------------------------------------------------------------ saving

    def save(self, path: str | Path) -> Path:
        """Write the result atomically: ``.npz`` or ``.h5``/``.hdf5`` (both loadable by
        :func:`load`) or ``.csv``.

        Raises :class:`~mbdgen.errors.OutputError` if ``path`` cannot be written; an
        existing file there is replaced only once the new one is complete.
        """
        path = check_destination(path)
        suffix = path.suffix.lower()
        try:
            if suffix in (".h5", ".hdf5") and self._store is not None:
                self._save_h5_blocks(path)
            elif suffix in (".h5", ".hdf5"):
                with atomic_write(path) as fh:
                    self._save_h5(fh)
            else:
                with atomic_write(path) as fh:
                    if suffix == ".csv":
                        self._save_csv(fh)
                    else:
                        self._save_npz(fh)
        except OSError as exc:
            raise OutputError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
        return path

    def _arrays(self) -> dict[str, np.ndarray]:
        """The arrays a saved result holds, by name (optional ones only when present)."""
        arrays = {
            "t": self.t,
            "q": self.q,
            "qd": self.qd,
            "qdd": self.qdd,
            "lam": self.lam,
            "phi_norm": self.phi_norm,
            "phid_norm": self.phid_norm,
        }
        for name in ("energy", "power", "reactions"):
            value = getattr(self, name)
            if value is not None:
                arrays[name] = value
        if self.state_names:
            arrays["states"] = self.states
            arrays["state_rates"] = self.state_rates
        if len(self.step_history):
            arrays["step_history"] = self.step_history
        if self.error_q.size:
            arrays["error_q"] = self.error_q
            arrays["error_qd"] = self.error_qd
        return arrays

    def _meta(self) -> dict[str, Any]:
        return {
            "coordinates": list(self.coordinates),
            "state_names": list(self.state_names),
            "reaction_names": list(self.reaction_names),
            "constraint_names": list(self.constraint_names),
            "constraint_units": list(self.constraint_units),
            "constraint_kinds": list(self.constraint_kinds),
            "counters": self.counters,
            "info": self.info,
        }

    def _save_npz(self, fh: IO[bytes]) -> None:
        # NumPy's stubs match the arrays' names against allow_pickle
        np.savez_compressed(fh, **self._arrays(), meta=np.array(json.dumps(self._meta())))  # type: ignore[arg-type]

    def _save_h5(self, fh: IO[bytes]) -> None:
        """HDF5: arrays as datasets with column names and units, metadata as attributes.

        The string dataset ``meta`` holds the same JSON as an ``.npz`` (what
        :func:`load` reads); the readable copies are root attributes (format, model,
        model hash, mbdgen version, method, status, settings) and the attributes of the
        groups ``counters`` and ``parameters`` (and ``initial_states``).  An attribute
        is kept short (HDF5 stores small attributes in the object header): a longer
        value, e.g. the list of re-partition steps of a long GCP run, is cut there and
        complete in ``meta``.
        """
        import h5py

        # built in memory, then one plain write: HDF5 writing into fh crashed the
        # interpreter when the disk filled part-way
        buffer = io.BytesIO()
        with h5py.File(buffer, "w", track_order=True) as f:
            self._h5_header(f)
            for name, value in self._arrays().items():
                value = np.ascontiguousarray(value)
                big = value.size > 1024
                ds = f.create_dataset(
                    name,
                    data=value,
                    compression="gzip" if big else None,
                    compression_opts=4 if big else None,
                    shuffle=big,
                )
                self._h5_describe(ds, name)
        fh.write(buffer.getbuffer())

    def _h5_header(self, f: Any) -> None:
        """The root attributes, the ``meta`` dataset and the attribute groups of an HDF5
        result (see :meth:`_save_h5`)."""
        from mbdgen import __version__

        info = self.info
        f.attrs["format"] = HDF5_FORMAT
        f.attrs["format_version"] = HDF5_FORMAT_VERSION
        f.attrs["mbdgen_version"] = str(info.get("mbdgen_version") or __version__)
        f.create_dataset("meta", data=json.dumps(self._meta()))
        for key, value in info.items():
            if key in ("parameters", "initial_states") or value is None:
                continue
            if not isinstance(value, bool | int | float | str):
                value = json.dumps(value)
            if isinstance(value, str) and len(value) > _MAX_ATTRIBUTE_CHARS:
                value = value[:_MAX_ATTRIBUTE_CHARS] + " ... (complete in the meta dataset)"
            f.attrs[key] = value
        for group, values in (
            ("counters", self.counters),
            ("parameters", info.get("parameters", {})),
            ("initial_states", info.get("initial_states", {})),
        ):
            g = f.create_group(group, track_order=True)
            for key, value in values.items():
                g.attrs[key] = (
                    value if isinstance(value, bool | int | float | str) else json.dumps(value)
                )

    def _h5_describe(self, ds: Any, name: str) -> None:
        """Column names, units and a description as attributes of dataset ``name``."""
        columns = self._column_names(name)
        if columns:
            ds.attrs["columns"] = columns
        units = self._units(name)
        if units:
            ds.attrs["units"] = units
        ds.attrs["description"] = _DESCRIPTIONS.get(name, name)

    def _save_h5_blocks(self, path: Path) -> None:
        """HDF5 as :meth:`_save_h5` lays it out, written block by block from arrays that
        stay on disk (a run that streamed its rows, :mod:`mbdgen.rowstore`), so that the
        memory a save takes is the same for any number of rows.

        The datasets are contiguous and uncompressed: their size is known, so the whole
        file's blocks are reserved before HDF5 writes a byte (a disk without room fails
        there, one :class:`~mbdgen.errors.WriteError`, and HDF5 never meets a failing
        write, which crashed it), and a reader can map them instead of reading them
        (:func:`load` does, for large ones).  Written to a temporary file beside
        ``path`` and renamed over it once complete (:func:`~mbdgen.fileio.atomic_write`).
        """
        import h5py

        arrays = self._arrays()
        meta = len(json.dumps(self._meta()))
        info = self.info
        small = (
            len(self.counters)
            + len(info.get("parameters", {}))
            + len(info.get("initial_states", {}))
        )
        # the data, the meta JSON, the attributes (each info item at most
        # _MAX_ATTRIBUTE_CHARS) and HDF5's headers: HDF5 never writes past this
        need = sum(8 * a.size for a in arrays.values()) + meta + (1 << 20)
        need += len(info) * (_MAX_ATTRIBUTE_CHARS + 512) + 512 * small + 8192 * len(arrays)
        store = self._store
        with atomic_write(path, "w+b") as fh:
            rowstore.reserve(fh.fileno(), need, keep_size=True)
            with h5py.File(fh, "w", track_order=True) as f:
                self._h5_header(f)
                for name, value in arrays.items():
                    ds = f.create_dataset(name, shape=value.shape, dtype=np.float64)
                    for a in rowstore.blocks(len(value)):
                        b = a + rowstore.BLOCK_ROWS
                        ds[a:b] = value[a:b]
                        if store is not None:
                            store.release()
                    self._h5_describe(ds, name)
            fh.flush()
            rowstore.trim(fh.fileno())

    def _units(self, name: str) -> str | list[str] | None:
        """The ``units`` attribute of dataset ``name`` (ASCII, UDUNITS syntax): one unit
        for the whole array, or one per column with "" where a column's is not known;
        None (no attribute) where none is known.  t in s; q, q̇, q̈ of a mechanism's
        bodies (x, y, z in m, a planar angle in rad, Euler parameters "1"); λ per row
        (:mod:`mbdgen.units`); energy J, power W, reactions N and N m.  The coordinates
        of a generalized-coordinate model and the user states are in the user's units,
        which mbdgen does not know."""
        from mbdgen.units import ascii_unit, coordinate_units, rate_unit

        whole = {"t": "s", "energy": "J", "power": "W"}
        if name in whole:
            return whole[name]
        units: list[str] = []
        if name in ("q", "qd", "qdd", "error_q", "error_qd"):
            order = {"q": 0, "qd": 1, "qdd": 2, "error_q": 0, "error_qd": 1}[name]
            base = coordinate_units(self.coordinates, self.info.get("bodies") or {})
            units = [ascii_unit(rate_unit(u, order)) for u in base]
        elif name == "lam":
            units = [ascii_unit(u) for u in self.constraint_units]
        elif name == "reactions":
            units = ["N" if c.startswith("F") else "N m" for c in self._column_names("reactions")]
        elif name == "step_history":
            units = ["s", "1", "s", "1", "1", "1"]
        return units if any(units) else None

    def _column_names(self, name: str) -> list[str]:
        if name in ("q", "qdd", "error_q"):
            return list(self.coordinates)
        if name in ("qd", "error_qd"):
            return [f"{c}_d" for c in self.coordinates]
        if name == "lam":
            return list(self.constraint_names)
        if name in ("states", "state_rates"):
            return list(self.state_names)
        if name == "energy":
            return ["kinetic", "potential"]
        if name == "step_history":
            return list(STEP_HISTORY_COLUMNS)
        if name == "reactions":
            from mbdgen.codegen.abi import REACTION_COLUMNS

            return list(REACTION_COLUMNS)
        return []

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
                columns += [self.energy[:, 1:], cast(np.ndarray, self.power)[:, None]]
        if self.reactions is not None:
            from mbdgen.codegen.abi import REACTION_COLUMNS

            for r, label in enumerate(self.reaction_names):
                names += [f"{label}.{c}" for c in REACTION_COLUMNS]
                columns.append(self.reactions[:, r, :])
        data = np.column_stack(columns)
        np.savetxt(fh, data, delimiter=",", header=",".join(names), comments="")


_DESCRIPTIONS = {
    "t": "output times [s]",
    "q": "coordinates q (N, n)",
    "qd": "velocities dq/dt (N, n)",
    "qdd": "accelerations d2q/dt2 (N, n)",
    "lam": "Lagrange multipliers lambda (N, m)",
    "phi_norm": "position-constraint residual ||Phi(q, t)||_2 (N,)",
    "phid_norm": "velocity-constraint residual ||Phi_q qd + Phi_t||_2 (N,)",
    "energy": "kinetic and potential energy T, V [J] (N, 2)",
    "power": "power P of the forces V does not account for [W] (N,)",
    "reactions": "joint reactions (N, R, 12): force [N] and torque [N m], global then body frame;"
    " rows named by the reaction_names of the meta attribute",
    "states": "user differential states X (N, nd)",
    "state_rates": "rates of the user states dX/dt (N, nd)",
    "step_history": "integration progress per chunk (K, 6)",
    "error_q": "estimated global error of q: |q - q of a finer second solution| (N, n)",
    "error_qd": "estimated global error of dq/dt, as error_q (N, n)",
    "reaction": "inverse dynamics: generalized reaction force -Phi_q,i^T lambda_i of each"
    " constraint row (N, m, n)",
    "driving": "inverse dynamics: driving force or torque -lambda_i of each driver row (N, d)",
    "residual": "inverse dynamics: ||Phi_q^T lambda - (Q - M qdd)||_2 (N,)",
}


def _shorten(names: tuple[str, ...] | list[str], limit: int = 8) -> str:
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f", ... ({len(names) - limit} more)"


def load(path: str | Path) -> Result:
    """Read a result written by :meth:`Result.save` (``.npz`` or ``.h5``/``.hdf5``).

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
            f"{where} is a CSV table; mbdgen.load reads the .npz and .h5 results "
            "(save with -o out.npz or -o out.h5)"
        )
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ResultFileError(f"cannot read {where}: {exc.strerror}") from None
    if not magic:
        raise ResultFileError(f"{where} is empty (an interrupted write?)")
    if magic == _HDF5_MAGIC:
        meta, arrays = _read_h5(path, where)
    elif magic == b"PK\x03\x04":
        meta, arrays = _read_npz(path, where)
    else:
        raise ResultFileError(
            f"{where} is not an mbdgen result: neither a NumPy .npz archive nor an HDF5 file"
        )
    _check_contents(where, meta, arrays)
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
        constraint_units=tuple(meta.get("constraint_units", ())),  # () before they were saved
        constraint_kinds=tuple(meta.get("constraint_kinds", ())),
        state_names=tuple(meta.get("state_names", ())),
        **{
            k: arrays[k]
            for k in ("states", "state_rates", "step_history", "error_q", "error_qd")
            if k in arrays
        },
    )


#: Names in a result's metadata that are lists of strings.
_NAME_LISTS = (
    "coordinates",
    "state_names",
    "reaction_names",
    "constraint_names",
    "constraint_units",
    "constraint_kinds",
)


def _check_contents(where: str, meta: Any, arrays: dict[str, np.ndarray]) -> None:
    """Refuse a file whose metadata are not what :meth:`Result.save` writes, or one of
    whose arrays is not floating-point or not of the shape its own names give.

    The shapes follow from the file itself: N rows from ``t``, n columns from the
    coordinates' names, m from the constraints' (when the file names them), nd from
    the user states', R reaction rows from the reactions'.  Without this, an array of
    strings or of another shape loads and fails later, inside a plot or an animation.
    """
    if not isinstance(meta, dict) or not {"coordinates", "counters", "info"} <= meta.keys():
        raise ResultFileError(f"{where} has no valid mbdgen metadata")
    for key in _NAME_LISTS:
        names = meta.get(key, [])
        if not isinstance(names, list) or not all(isinstance(v, str) for v in names):
            raise ResultFileError(
                f"{where} has invalid mbdgen metadata: {key!r} is not a list of names"
            )
    for key in ("constraint_units", "constraint_kinds"):
        given = len(meta.get(key, ()))
        if given and given != len(meta.get("constraint_names", ())):
            raise ResultFileError(
                f"{where} has invalid mbdgen metadata: {given} {key} for "
                f"{len(meta.get('constraint_names', ()))} constraint rows"
            )
    for key in ("counters", "info"):
        if not isinstance(meta[key], dict):
            raise ResultFileError(f"{where} has invalid mbdgen metadata: {key!r} is not a table")
    for key, value in arrays.items():
        if not np.issubdtype(value.dtype, np.floating):
            kind = "strings" if value.dtype.kind in "OSU" else f"{value.dtype} values"
            raise ResultFileError(
                f"{where} is inconsistent: its {key!r} array holds {kind}, "
                "not floating-point numbers"
            )
    t = arrays["t"]
    if t.ndim != 1:
        raise ResultFileError(
            f"{where} is inconsistent: its 't' array has shape {t.shape}, not (N,)"
        )
    rows = t.shape[0]
    n = len(meta["coordinates"])
    m = len(meta.get("constraint_names", ())) or None  # an older file may not name them
    nd = len(meta.get("state_names", ()))
    expected: dict[str, tuple[int | None, ...]] = {
        "q": (rows, n),
        "qd": (rows, n),
        "qdd": (rows, n),
        "lam": (rows, m),
        "phi_norm": (rows,),
        "phid_norm": (rows,),
        "energy": (rows, 2),
        "power": (rows,),
        "reactions": (rows, len(meta.get("reaction_names", ())), 12),
        "states": (rows, nd),
        "state_rates": (rows, nd),
        "step_history": (None, len(STEP_HISTORY_COLUMNS)),
        "error_q": (rows, n),
        "error_qd": (rows, n),
    }
    for key in ("states", "state_rates") if nd else ():
        if key not in arrays:
            raise ResultFileError(
                f"{where} is inconsistent: it names {nd} user state(s) but has no {key!r} array"
            )
    for key, shape in expected.items():
        if key not in arrays:
            continue
        value = arrays[key]
        if value.ndim != len(shape) or any(
            want is not None and got != want for got, want in zip(value.shape, shape, strict=True)
        ):
            unknown = "K" if key == "step_history" else "m"
            text = "(" + ", ".join(unknown if d is None else str(d) for d in shape)
            text += ",)" if len(shape) == 1 else ")"
            raise ResultFileError(
                f"{where} is inconsistent: its {key!r} array has shape {value.shape}, not "
                f"{text} ({rows} times of t, {n} coordinate(s), "
                f"{'?' if m is None else m} constraint row(s), {nd} user state(s))"
            )


def _missing(where: str, kind: str, names: list[str] | set[str]) -> ResultFileError:
    missing = [key for key in _REQUIRED if key not in names]
    return ResultFileError(
        f"{where} is {kind} but not an mbdgen result: it lacks {', '.join(missing)}"
    )


def _read_npz(path: Path, where: str) -> tuple[Any, dict[str, np.ndarray]]:
    try:
        with np.load(path, allow_pickle=False) as data:
            if {"A", "stiffness", "eigenvalues"} <= set(data.files):
                raise ResultFileError(
                    f"{where} is a linear model (mbdgen linearize -o), not a result: read it "
                    "with mbdgen.analysis.linearize.Linearization.load"
                )
            if not set(_REQUIRED) <= set(data.files):
                raise _missing(where, "a NumPy archive", data.files)
            meta = json.loads(str(data["meta"]))
            arrays = {key: data[key] for key in data.files if key != "meta"}
    except ResultFileError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as exc:
        raise ResultFileError(
            f"{where} is damaged (truncated or corrupt archive: {type(exc).__name__}: {exc})"
        ) from None
    return meta, arrays


def _read_h5(path: Path, where: str) -> tuple[Any, dict[str, np.ndarray]]:
    import h5py

    try:
        with h5py.File(path, "r") as f:
            for name in f:  # before anything is read: where do the data come from?
                outside = _outside(f, name)
                if outside:
                    raise ResultFileError(
                        f"{where} is refused: its dataset {name!r} is {outside}; an mbdgen "
                        "result keeps all its data inside the file"
                    )
            names = {k for k, v in f.items() if isinstance(v, h5py.Dataset)}
            if f.attrs.get("format") != HDF5_FORMAT or not set(_REQUIRED) <= names:
                raise _missing(where, "an HDF5 file", names)
            meta = json.loads(f["meta"].asstr()[()])
            arrays = {key: _dataset_array(path, f[key]) for key in names if key != "meta"}
    except ResultFileError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ResultFileError(
            f"{where} is damaged (truncated or corrupt HDF5 file: {type(exc).__name__}: {exc})"
        ) from None
    return meta, arrays


#: A dataset at least this large that lies in one piece in the file, uncompressed, is
#: mapped into memory by :func:`load` instead of read (a streamed run's, written by
#: ``Result._save_h5_blocks``), so that loading a long run takes no memory for it.
MAP_BYTES = 64 << 20


def _dataset_array(path: Path, ds: Any) -> np.ndarray:
    """Dataset ``ds`` of the file ``path`` as an array: read into memory, or mapped
    read-only where it is large and contiguous (:data:`MAP_BYTES`)."""
    if (
        ds.nbytes >= MAP_BYTES
        and ds.chunks is None
        and ds.compression is None
        and ds.dtype == np.dtype("<f8")
        and not ds.external
    ):
        offset = ds.id.get_offset()
        if offset is not None:
            return np.memmap(path, dtype="<f8", mode="r", offset=offset, shape=ds.shape)
    return np.asarray(ds[()])


def _outside(f: Any, name: str) -> str | None:
    """What makes the HDF5 object ``name`` of group ``f`` read data from outside the
    file (an external or soft link, a virtual dataset, external storage), or None.

    mbdgen writes none of these; a file that has one could make any local file (or
    one it names but that does not exist) the bytes of a result.
    """
    import h5py

    link = f.get(name, getlink=True)
    if isinstance(link, h5py.ExternalLink):
        return f"an external link to {link.filename!r}"
    if isinstance(link, h5py.SoftLink):
        return f"a soft link to {link.path!r}"
    if not isinstance(link, h5py.HardLink):
        return f"a link of an unknown kind ({type(link).__name__})"
    obj = f[name]
    if isinstance(obj, h5py.Dataset):
        if obj.is_virtual:
            sources = sorted({s.file_name for s in obj.virtual_sources()})
            return f"a virtual dataset (data from {', '.join(map(repr, sources))})"
        if obj.external:
            files = sorted({str(entry[0]) for entry in obj.external})
            return f"in HDF5 external storage ({', '.join(map(repr, files))})"
    return None
