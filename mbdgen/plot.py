"""Plots of a :class:`~mbdgen.results.Result` (matplotlib, no display needed).

:func:`plot_result` draws the quantities named in ``what`` as a column of panels
over time, sharing the time axis:

- ``q``, ``qd``: coordinates and velocities, one panel per body of a mechanism
  (lengths on the left axis in m, the angle or Euler parameters on a right axis of
  their own), or per kind of coordinate for a generalized-coordinate model;
- ``energy``: T, V and T + V, and the drift of the balance T + V − E0 − ∫P dt;
- ``phi``: ‖Φ‖ and ‖Φ_q q̇ + Φ_t‖ on a log axis (exact zeros drawn at a floor);
- ``lam``: the multipliers λ, one panel per joint, driver or body (a spatial body's
  Euler-parameter normalization row), each row with its unit (N, N·m, N/m; "unit
  unknown" for a generalized-coordinate model or an older file, :mod:`mbdgen.units`);
- ``reactions``: joint reactions, one panel per ``<joint>.<body>`` (force in N left,
  torque in N·m right);
- ``steps``: mean step size, order and Newton iterations per step over time, from
  ``Result.step_history`` (a fixed-step run shows its constant h).

matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mbdgen.errors import MbdgenError
from mbdgen.results import (
    PLOT_SUFFIXES,
    STEP_HISTORY_COLUMNS,
    Result,
    check_destination,
    settings_text,
)

#: The quantities ``what`` may name, in the order they are drawn.
QUANTITIES = ("q", "qd", "energy", "phi", "lam", "reactions", "steps")
#: Panels one quantity may take before the rest are left out (and the title says so).
MAX_PANELS = 12

_ANGLE = re.compile(
    r"^(theta|th|phi|psi|alpha|beta|gamma|chi|varphi|vartheta|angle|ang)[_0-9]*$"
    r"|_(theta|phi|psi|angle)[_0-9]*$"
)
_LENGTH = re.compile(r"^[xyzsr][_0-9]*$|_[xyz][_0-9]*$")
#: Unit of a coordinate kind, and of its rate.
_UNITS = {
    "length": ("m", "m/s"),
    "angle": ("rad", "rad/s"),
    "euler": ("–", "1/s"),
    "other": ("model units", "model units/s"),
}


@dataclass
class _Group:
    """Coordinates drawn in one panel: ``left`` on the left axis, ``right`` on a
    right axis of their own (angles, Euler parameters), with their kinds."""

    title: str
    left: list[int]
    left_kind: str
    right: list[int]
    right_kind: str


def coordinate_kind(name: str) -> str:
    """``"angle"``, ``"length"`` or ``"other"`` for a generalized coordinate, from
    its name (theta, phi, ... are angles; x, y, z, s and ``*_x`` lengths)."""
    if _ANGLE.search(name):
        return "angle"
    if _LENGTH.search(name):
        return "length"
    return "other"


def coordinate_groups(result: Result, select: Sequence[str] | None = None) -> list[_Group]:
    """Panels for the coordinates of ``result``: one per body of a mechanism (lengths
    left, the angle or the Euler parameters right), else one per kind.

    ``select`` names coordinates or bodies to keep (all when None); an unknown
    name raises :class:`MbdgenError` listing the valid ones.
    """
    names = list(result.coordinates)
    bodies: dict[str, list[int]] = result.info.get("bodies") or {}
    if select:
        known = set(names) | set(bodies)
        unknown = [s for s in select if s not in known]
        if unknown:
            raise MbdgenError(
                f"no coordinate or body {', '.join(map(repr, unknown))}; the coordinates are "
                f"{', '.join(names)}" + (f"; the bodies {', '.join(bodies)}" if bodies else "")
            )
    chosen: set[int] | None = None
    if select:
        chosen = set()
        for s in select:
            if s in bodies:
                offset, size = bodies[s]
                chosen.update(range(offset, offset + size))
            else:
                chosen.add(names.index(s))
    groups: list[_Group] = []
    covered: set[int] = set()
    for body, (offset, size) in bodies.items():
        idx = [i for i in range(offset, offset + size) if chosen is None or i in chosen]
        covered.update(range(offset, offset + size))
        if not idx:
            continue
        split = offset + (2 if size == 3 else 3)  # planar [x, y, φ]; spatial [r, p]
        left = [i for i in idx if i < split]
        right = [i for i in idx if i >= split]
        groups.append(_Group(body, left, "length", right, "angle" if size == 3 else "euler"))
    rest = [i for i in range(len(names)) if i not in covered and (chosen is None or i in chosen)]
    by_kind: dict[str, list[int]] = {}
    for i in rest:
        by_kind.setdefault(coordinate_kind(names[i]), []).append(i)
    for kind in ("length", "angle", "other"):
        if kind in by_kind:
            title = {"length": "lengths", "angle": "angles", "other": "coordinates"}[kind]
            groups.append(_Group(title, by_kind[kind], kind, [], ""))
    return groups


def _floor_log(values: np.ndarray) -> tuple[np.ndarray, float]:
    """``values`` with zeros (and negatives) raised to a floor a decade below the
    smallest positive value, so that a log axis can draw them; and that floor."""
    values = np.asarray(values, dtype=float)
    positive = values[np.isfinite(values) & (values > 0)]
    floor = float(positive.min()) / 10.0 if positive.size else 1e-16
    return np.where(values > 0, values, floor), floor


def parse_what(what: str | Sequence[str]) -> list[str]:
    items = [w.strip() for w in what.split(",")] if isinstance(what, str) else list(what)
    items = [w for w in items if w]
    unknown = [w for w in items if w not in QUANTITIES]
    if unknown or not items:
        raise MbdgenError(
            f"cannot plot {', '.join(map(repr, unknown)) or 'nothing'}; choose from "
            f"{', '.join(QUANTITIES)}"
        )
    return [q for q in QUANTITIES if q in items]


def _title(result: Result) -> str:
    info = result.info
    text = f"{info.get('model', '')}: {settings_text(info)}"
    if info.get("status", "finished") != "finished":
        text += f" ({info['status']} at t = {result.t[-1]:.4g})" if len(result) else ""
    return text


class _Panels:
    """A list of panel-drawing closures, laid out once their number is known."""

    def __init__(self) -> None:
        self.draw: list[Any] = []
        self.notes: list[str] = []

    def add(self, fn: Any) -> None:
        self.draw.append(fn)

    def capped(self, items: list[Any], label: str) -> list[Any]:
        if len(items) > MAX_PANELS:
            self.notes.append(
                f"{label}: the first {MAX_PANELS} of {len(items)} shown (choose with coords=)"
            )
            return items[:MAX_PANELS]
        return items


#: A line of more points than this is drawn as its envelope: per bin of rows the
#: smallest and the largest value, in their order (what a pixel column shows anyway).
ENVELOPE_POINTS = 4000


def envelope(
    t: np.ndarray, y: np.ndarray, points: int = ENVELOPE_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """(t, y) reduced to at most about ``points`` points that draw the same line: the
    rows in bins of b, each bin's minimum and maximum in the order they occur (a NaN
    in a bin is kept, so a gap stays a gap).  Read in blocks, so that a long result on
    disk (a streamed run, a mapped file) is never copied whole."""
    rows = len(t)
    if rows <= points:
        return np.asarray(t), np.asarray(y)
    size = max(1, rows // (points // 2))
    step = size * max(1, (1 << 16) // size)  # whole bins per block
    ts, ys = [], []
    for start in range(0, rows, step):
        stop = min(start + step, rows)
        tb, yb = np.asarray(t[start:stop]), np.asarray(y[start:stop], dtype=np.float64)
        whole = (stop - start) // size * size
        if whole:
            bins = yb[:whole].reshape(-1, size)
            nan = np.isnan(bins)
            low = np.argmin(np.where(nan, np.inf, bins), axis=1)
            high = np.argmax(np.where(nan, -np.inf, bins), axis=1)
            base = np.arange(bins.shape[0]) * size
            order = np.column_stack([base + np.minimum(low, high), base + np.maximum(low, high)])
            values = yb[order.ravel()]
            values.reshape(-1, 2)[nan.any(axis=1), 0] = np.nan  # a bin with a NaN: a gap
            ts.append(tb[order.ravel()])
            ys.append(values)
        if whole < stop - start:
            ts.append(tb[whole:])
            ys.append(yb[whole:])
    return np.concatenate(ts), np.concatenate(ys)


def _plot(ax: Any, t: np.ndarray, y: np.ndarray, *args: Any, log: bool = False, **kw: Any) -> Any:
    """``ax.plot`` (``ax.semilogy`` with ``log``) of the line's :func:`envelope`."""
    te, ye = envelope(t, y, ENVELOPE_POINTS)
    return (ax.semilogy if log else ax.plot)(te, ye, *args, **kw)


def _lines(ax: Any, t: np.ndarray, data: np.ndarray, idx: list[int], labels: list[str], **kw: Any):
    handles = []
    for i in idx:
        (line,) = _plot(ax, t, data[:, i], label=labels[i], lw=1.0, **kw)
        handles.append(line)
    return handles


def _two_axes(ax: Any, t, data, group: _Group, labels: list[str], rate: bool) -> None:
    """Left axis: ``group.left``; right axis (own scale and unit): ``group.right``."""
    k = 1 if rate else 0
    handles = _lines(ax, t, data, group.left, labels) if group.left else []
    if group.left:
        ax.set_ylabel(f"[{_UNITS[group.left_kind][k]}]")
    if group.right:
        target = ax.twinx() if group.left else ax
        colors = [f"C{j}" for j in range(len(group.left), len(group.left) + len(group.right))]
        for i, c in zip(group.right, colors, strict=True):
            (line,) = _plot(target, t, data[:, i], label=labels[i], lw=1.0, ls="--", color=c)
            handles.append(line)
        target.set_ylabel(f"[{_UNITS[group.right_kind][k]}]" + (" (dashed)" if group.left else ""))
    ax.legend(handles=handles, loc="upper right", fontsize="small", ncol=min(4, len(handles)))
    ax.set_title(group.title, fontsize="medium", loc="left")


def plot_result(
    result: Result,
    path: str | Path,
    what: str | Sequence[str] = ("q", "phi"),
    *,
    coords: Sequence[str] | None = None,
    dpi: int = 110,
) -> Path:
    """Write a figure of ``result`` to ``path`` (.png, .pdf or .svg).

    ``what`` names the quantities, as a list or comma-separated (``QUANTITIES``:
    q, qd, energy, phi, lam, reactions, steps); ``coords`` keeps only the named
    coordinates or bodies in the q and q̇ panels and the reactions of those bodies.
    Quantities the result does not have (energy of a module without energy kernels,
    reactions of a model without joints) raise :class:`MbdgenError` naming them.
    """
    items = parse_what(what)
    path = check_destination(path, PLOT_SUFFIXES)
    if not len(result):
        raise MbdgenError("the result has no rows to plot")
    t = result.t
    panels = _Panels()
    labels = list(result.coordinates)

    for key in ("q", "qd"):
        if key not in items:
            continue
        data = result.q if key == "q" else result.qd
        for g in panels.capped(coordinate_groups(result, coords), "bodies"):

            def draw(ax, g=g, data=data, rate=key == "qd"):
                shown = [f"{n}_d" for n in labels] if rate else labels
                _two_axes(ax, t, data, g, shown, rate)
                kind = "velocity" if rate else "position"
                ax.set_title(f"{kind}: {g.title}", fontsize="medium", loc="left")

            panels.add(draw)

    if "energy" in items:
        energy = result.energy
        if energy is None:
            raise MbdgenError("this result has no energy (its module predates energy kernels)")

        def draw_energy(ax):
            _plot(ax, t, energy[:, 0], label="T", lw=1.0)
            if result.has_potential:
                _plot(ax, t, energy[:, 1], label="V", lw=1.0)
                _plot(ax, t, energy[:, 0] + energy[:, 1], label="T + V", lw=1.2, color="k")
            ax.set_ylabel("[J]")
            ax.legend(loc="upper right", fontsize="small", ncol=3)
            ax.set_title("energy", fontsize="medium", loc="left")

        panels.add(draw_energy)
        if result.has_potential and result.power is not None:
            power = result.power
            # the balance of mbdgen.simulation.energy_balance: zero for an exact solution
            work = np.concatenate([[0.0], np.cumsum(0.5 * np.diff(t) * (power[1:] + power[:-1]))])
            total = energy[:, 0] + energy[:, 1]
            drift = total - total[0] - work

            def draw_drift(ax):
                _plot(ax, t, drift, lw=1.0, color="C3")
                ax.set_ylabel("[J]")
                ax.set_title("energy drift T + V − E0 − ∫P dt", fontsize="medium", loc="left")

            panels.add(draw_drift)

    if "phi" in items:

        def draw_phi(ax):
            floor, zeros = math.inf, False
            for values, label, color in (
                (result.phi_norm, "‖Φ‖₂", "k"),
                (result.phid_norm, "‖Φ_q q̇ + Φ_t‖₂", "C1"),
            ):
                shown, f = _floor_log(values)
                floor, zeros = min(floor, f), zeros or bool(np.any(values <= 0))
                _plot(ax, t, shown, log=True, lw=0.9, color=color, label=label)
            title = "constraint residuals"
            if zeros:  # log(0) does not exist: draw exact zeros on a marked floor
                ax.axhline(floor, color="0.6", lw=0.6, ls=":")
                ax.set_ylim(bottom=floor / 2)
                title += f" (exact zeros drawn at {floor:.0e}, dotted)"
            ax.set_title(title, fontsize="medium", loc="left")
            ax.legend(loc="upper right", fontsize="small", ncol=2)

        panels.add(draw_phi)

    if "lam" in items:
        m = result.lam.shape[1]
        names = list(result.constraint_names) or [f"λ[{i}]" for i in range(m)]
        joints: dict[str, list[int]] = {}
        for i, name in enumerate(names):
            joints.setdefault(name.split("[", 1)[0], []).append(i)
        if not m:
            raise MbdgenError(
                "this result has no multipliers λ (no constraints, or a kinematic analysis)"
            )
        for joint, idx in panels.capped(list(joints.items()), "joints (λ)"):

            def draw_lam(ax, joint=joint, idx=idx):
                # rows of one element may differ in unit (a revolute's N and N·m): one
                # line style per unit, named on the axis; "unit unknown" where it is
                units = list(
                    dict.fromkeys(result.multiplier_label(i).split(" ", 1)[1] for i in idx)
                )
                styles = ("-", "--", ":", "-.")
                for i in idx:
                    unit = result.multiplier_label(i).split(" ", 1)[1]
                    _plot(
                        ax,
                        t,
                        result.lam[:, i],
                        lw=1.0,
                        ls=styles[units.index(unit) % len(styles)],
                        label=result.multiplier_label(i),
                    )
                if len(units) == 1:
                    ax.set_ylabel(f"λ {units[0]}")
                else:
                    shown = ", ".join(
                        f"{u} {('solid', 'dashed', 'dotted', 'dash-dot')[k % 4]}"
                        for k, u in enumerate(units)
                    )
                    ax.set_ylabel(f"λ {shown}", fontsize="small")
                ax.legend(loc="upper right", fontsize="small", ncol=min(5, len(idx)))
                kinds = list(dict.fromkeys(k for i in idx if (k := result.multiplier_kind(i))))
                title = f"λ: {joint}"
                if kinds and kinds[0].startswith("Euler-parameter normalization"):
                    title += f" — {kinds[0]} (not a joint)"
                elif kinds:
                    title += f" ({kinds[0].split(',', 1)[0]})"
                ax.set_title(title, fontsize="medium", loc="left")

            panels.add(draw_lam)

    if "reactions" in items:
        rows = list(result.reaction_names)
        if not rows:
            raise MbdgenError("the result has no joint reactions (a model without joints?)")
        if coords:
            rows = [r for r in rows if r.split(".", 1)[-1] in coords or r.split(".")[0] in coords]
        for row in panels.capped(rows, "reactions"):
            columns = result.reaction(row)

            def draw_reaction(ax, row=row, columns=columns):
                forces = [c for c in columns.columns if c.startswith("F")]
                torques = [c for c in columns.columns if c.startswith("T")]
                handles = [_plot(ax, t, columns[c], lw=1.0, label=c)[0] for c in forces]
                ax.set_ylabel("force [N]")
                title = f"reaction {row} (global frame)"
                if not any(np.any(columns[c]) for c in torques):  # a pin: no torque
                    torques = []
                    title += ", torque identically 0"
                right = ax.twinx() if torques else ax
                for j, c in enumerate(torques):
                    color = f"C{len(forces) + j}"
                    handles.append(
                        _plot(right, t, columns[c], lw=1.0, ls="--", label=c, color=color)[0]
                    )
                if torques:
                    right.set_ylabel("torque [N·m] (dashed)")
                ax.legend(handles=handles, loc="upper right", fontsize="small", ncol=6)
                ax.set_title(title, fontsize="medium", loc="left")

            panels.add(draw_reaction)

    if "steps" in items:
        _step_panels(result, panels)

    return _render(result, panels, path, dpi)


def _step_panels(result: Result, panels: _Panels) -> None:
    hist = result.step_history
    col = {name: j for j, name in enumerate(STEP_HISTORY_COLUMNS)}
    info = result.info
    if len(hist) == 0:
        h = info.get("h")
        if h is None:
            raise MbdgenError("the result has no step history (a kinematic analysis?)")

        def draw_fixed(ax):
            ax.plot(result.t[[0, -1]], [h, h], lw=1.0)
            ax.set_yscale("log")
            ax.set_ylabel("h [s]")
            ax.set_title(
                "step size (this file holds no step history: the requested h is shown)",
                fontsize="medium",
                loc="left",
            )

        panels.add(draw_fixed)
        return
    th = hist[:, col["t"]]
    edges = np.concatenate([[result.t[0]], th])  # chunk k spans edges[k] .. edges[k + 1]
    steps = np.diff(np.concatenate([[0.0], hist[:, col["steps"]]]))
    per_step = np.where(steps > 0, 1.0, np.nan) / np.maximum(steps, 1.0)

    h_mean = hist[:, col["h_mean"]]
    finite = h_mean[np.isfinite(h_mean)]
    # a fixed step: the chunk means differ by rounding alone, which a log axis
    # would stretch over the whole panel
    constant = finite.size > 0 and finite.max() - finite.min() <= 1e-9 * finite.max()

    def draw_h(ax):
        ax.stairs(h_mean, edges, lw=1.0, baseline=None)
        if constant:
            ax.set_ylim(0.0, 1.5 * finite.max())
        else:
            ax.set_yscale("log")
        ax.set_ylabel("h [s]")
        ax.set_title(
            f"mean step size per chunk ({int(hist[-1, col['steps']])} steps)",
            fontsize="medium",
            loc="left",
        )
        rejected = np.diff(np.concatenate([[0.0], hist[:, col["rejected_steps"]]]))
        if rejected.any():
            right = ax.twinx()
            right.stairs(rejected, edges, color="C3", alpha=0.3, fill=True)
            right.set_ylabel("rejected steps (shaded)")

    panels.add(draw_h)
    if np.any(hist[:, col["order"]] > 0):

        def draw_order(ax):
            ax.stairs(hist[:, col["order"]], edges, lw=1.0, color="C2", baseline=None)
            ax.set_ylabel("order")
            ax.set_title("order at the end of each chunk", fontsize="medium", loc="left")

        panels.add(draw_order)
    newton = np.diff(np.concatenate([[0.0], hist[:, col["newton_iterations"]]]))
    if newton.any():

        def draw_newton(ax):
            ax.stairs(newton * per_step, edges, lw=1.0, color="C4", baseline=None)
            ax.set_ylabel("iterations / step")
            ax.set_title("Newton iterations per step (chunk mean)", fontsize="medium", loc="left")

        panels.add(draw_newton)


def _render(result: Result, panels: _Panels, path: Path, dpi: int) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    count = len(panels.draw)
    fig, axes = plt.subplots(
        count, 1, figsize=(9, 1.2 + 2.3 * count), sharex=True, squeeze=False, layout="constrained"
    )
    try:
        for ax, draw in zip(axes[:, 0], panels.draw, strict=True):
            draw(ax)
            ax.grid(True, alpha=0.3)
        axes[-1, 0].set_xlabel("t [s]")
        title = _title(result)
        if panels.notes:
            title += "\n" + "; ".join(panels.notes)
        fig.suptitle(title, fontsize="medium")
        from mbdgen.fileio import atomic_write

        with atomic_write(path) as fh:
            fig.savefig(fh, dpi=dpi, format=Path(path).suffix.lower().lstrip("."))
    finally:
        plt.close(fig)
    return path
