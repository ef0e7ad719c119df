"""Animations of a run: bodies drawn from their attachment points, as GIF or MP4.

``animate(result, "motion.gif")`` draws every frame with matplotlib's Agg renderer
(static parts once, moving parts blitted on top) and writes a GIF with Pillow or an
MP4 with the ffmpeg binary that the ``imageio-ffmpeg`` wheel ships.  What is drawn
comes from the result's ``info["geometry"]`` (:mod:`mbdgen.geometry`, filled from
the generated module's metadata when the run was made):

* a planar body: a bar between its two attachment points, or the filled convex hull
  of three or more (rigid, so the hull's vertex order is fixed once); a body with one
  point is a bar from its centroid to it; the centroid is a dot;
* a spatial body: the same in an orthographic projection (``view``), plus its body
  frame (x, y, z axes in red, green, blue) at the centroid;
* the ground: a hatched support at every ground attachment point;
* a joint: a ring at its point (a line where its two points differ: a massless link;
  a wide gray band along the path of a one-point joint or driver, its guide);
  a force element between two points: a dashed line;
* a time stamp, and the path of every traced point up to the current time.

Frames sample the run at ``fps`` frames per second, in real time or at ``speed``
(the output row nearest to each frame's time; a short run is slowed down), or take
every ``every``-th output row, played in real time where the format can show frames
that far apart (else at its nearest rate).  Any pace other than real time is written
under the time stamp and returned in :class:`Playback`.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mbdgen.errors import MbdgenError, ModelError, OutputError, ResultFileError
from mbdgen.fileio import _file_mode
from mbdgen.geometry import GEOMETRY_VERSION, frames
from mbdgen.results import Result, check_destination, load

#: File types :func:`animate` writes.
ANIMATION_SUFFIXES = (".gif", ".mp4")
#: Largest frame width or height in pixels (memory and encoding time stay bounded).
MAX_PIXELS = 1920
#: Fewest frames the default real-time pace may give before a run is slowed down.
MIN_FRAMES = 50
#: Most frames one animation may have (a GIF holds all of them in memory while written).
MAX_FRAMES = 5000
#: Frames per second unless given (or chosen by ``every``).
DEFAULT_FPS = 25.0
#: Fastest frame rate each format plays as written: GIF frame delays are whole 10 ms
#: ticks and viewers (browsers, Pillow, most image viewers) show delays under 20 ms as
#: 100 ms; MP4 players and screens refresh at 60 Hz.
MAX_PLAY_FPS = {".gif": 50.0, ".mp4": 60.0}
#: Slowest rate that ``every`` chooses by itself (a frame at most 1 s on screen).
MIN_EVERY_FPS = 1.0
#: Where the axes sit in the figure (left, bottom, width, height), room for tick labels.
_AXES_RECT = (0.085, 0.065, 0.9, 0.92)
#: Colors of x, y, z axes (body frames, the spatial view's global triad) and of traces.
_AXIS_COLORS = ("tab:red", "tab:green", "tab:blue")
_TRACE_COLORS = ("black", "dimgray", "darkgoldenrod", "teal")
#: Named views of spatial models: (azimuth, elevation) in degrees, z up.
VIEWS = {"iso": (-60.0, 25.0), "xy": (-90.0, 90.0), "xz": (-90.0, 0.0), "yz": (0.0, 0.0)}


@dataclass
class _Trace:
    label: str
    body: int
    local: np.ndarray


def _geometry(result: Result, module: Any = None) -> dict[str, Any]:
    """The result's drawing geometry, or a one-line error saying why there is none."""
    model = result.info.get("model", "?")
    geo = result.info.get("geometry", "absent")
    if geo == "absent" and module is not None:
        from mbdgen.geometry import describe

        names = tuple(module.PARAMETER_NAMES)
        given = result.info.get("parameters") or result.info.get("params") or {}
        p = np.array([float(given.get(n, d)) for n, d in zip(names, module.P_DEFAULT, strict=True)])
        geo = describe(module, p)
    if geo == "absent":
        raise ResultFileError(
            f"this result of model {model!r} carries no body geometry (it was saved by an older "
            "mbdgen): run the simulation again to animate it"
        )
    if geo is None:
        raise ModelError(
            f"model {model!r} is written in generalized coordinates and has no bodies to draw; "
            "animation draws mechanisms built from bodies and joints (mbdgen.model.planar, "
            "spatial)"
        )
    if not isinstance(geo, dict) or geo.get("version") != GEOMETRY_VERSION:
        raise ResultFileError(f"the body geometry of model {model!r} is of an unknown layout")
    return geo


def _parse_trace(spec: str, geo: dict[str, Any]) -> _Trace:
    """``body`` (its centroid), ``body:element`` (that element's point on it) or
    ``body:x,y[,z]`` (body-frame coordinates)."""
    names = [b["name"] for b in geo["bodies"]]
    body, _, point = spec.partition(":")
    if body not in names:
        raise MbdgenError(f"--trace {spec!r}: no body {body!r}; the bodies are {', '.join(names)}")
    b = names.index(body)
    size = 2 if geo["bodies"][b]["kind"].startswith("planar") else 3
    if not point:
        return _Trace(spec, b, np.zeros(size))
    mine = [p for p in geo["points"] if p["body"] == b]
    for p in mine:
        if p["element"] == point:
            return _Trace(spec, b, np.array(p["local"], dtype=float))
    try:
        local = np.array([float(v) for v in point.split(",")])
    except ValueError:
        elements = ", ".join(sorted({p["element"] for p in mine})) or "(none)"
        raise MbdgenError(
            f"--trace {spec!r}: {point!r} is neither an element attached to {body!r} "
            f"({elements}) nor body-frame coordinates x,y{'' if size == 2 else ',z'}"
        ) from None
    if local.size != size or not np.isfinite(local).all():
        raise MbdgenError(f"--trace {spec!r}: give {size} finite body-frame coordinates")
    return _Trace(spec, b, local)


@dataclass(frozen=True)
class Playback:
    """How an animation plays: the output rows drawn, frames per second and the
    simulated seconds per second of animation (1.0: real time)."""

    rows: np.ndarray
    fps: float
    speed: float

    @property
    def pace(self) -> str:
        """The pace in words: 'real time' or e.g. '0.25× real time'."""
        return "real time" if self.speed == 1.0 else f"{self.speed:.3g}× real time"


def _playback(
    t: np.ndarray, suffix: str, fps: float | None, every: int | None, speed: float | None
) -> Playback:
    """Rows, frame rate and pace.  Frames at equal times are sampled at the rate the
    format plays (``fps``, at most :data:`MAX_PLAY_FPS`); with ``every`` and no ``fps``
    the rate is the one of the drawn rows' spacing (real time), kept within
    [:data:`MIN_EVERY_FPS`, :data:`MAX_PLAY_FPS`], and the pace is what results."""
    top = MAX_PLAY_FPS[suffix]
    if every is None:
        rate = min(DEFAULT_FPS if fps is None else float(fps), top)
        pace = _speed(t, rate, speed)
        return Playback(_rows(t, rate, pace), rate, pace)
    rows = np.arange(0, len(t), every)
    gaps, span = len(rows) - 1, float(t[rows[-1]] - t[rows[0]])
    if gaps == 0 or not span > 0:
        return Playback(rows, min(DEFAULT_FPS if fps is None else float(fps), top), 1.0)
    if fps is None:
        rate = min(max(gaps / span, MIN_EVERY_FPS), top)
    else:
        rate = min(float(fps), top)
    pace = span * rate / gaps
    return Playback(rows, rate, 1.0 if abs(pace - 1.0) < 1e-9 else pace)


def _speed(t: np.ndarray, fps: float, speed: float | None) -> float:
    """Simulated seconds per second of animation: ``speed``, else 1 (real time) unless
    that gives fewer than :data:`MIN_FRAMES` frames (a short run: slow motion with up
    to 100 frames)."""
    if speed is not None:
        return speed
    duration = float(t[-1] - t[0])
    if duration * fps + 1 >= MIN_FRAMES or len(t) < 2:
        return 1.0
    frames = min(100, len(t))
    return duration * fps / (frames - 1)


def _rows(t: np.ndarray, fps: float, speed: float) -> np.ndarray:
    """Output rows shown as frames at equal times ``speed / fps`` apart."""
    n = int(math.floor((t[-1] - t[0]) * fps / speed + 1e-9)) + 1
    times = t[0] + np.arange(n) * (speed / fps)
    right = np.clip(np.searchsorted(t, times), 1, len(t) - 1)
    left = right - 1
    nearer_left = np.abs(times - t[left]) <= np.abs(t[right] - times)
    return np.where(nearer_left, left, right) if len(t) > 1 else np.zeros(1, dtype=np.int64)


def _projection(spatial: bool, view: str | tuple[float, float]) -> np.ndarray:
    """(2, 3) orthographic projection onto the screen's x and y."""
    if not spatial:
        return np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    azim, elev = VIEWS[view] if isinstance(view, str) else view
    a, e = math.radians(azim), math.radians(elev)
    right = [-math.sin(a), math.cos(a), 0.0]
    up = [-math.sin(e) * math.cos(a), -math.sin(e) * math.sin(a), math.cos(e)]
    return np.array([right, up])


def _hull(points: np.ndarray) -> np.ndarray:
    """Indices of the 2-D convex hull of ``points`` (k, 2), counter-clockwise."""
    order = sorted(range(len(points)), key=lambda i: (points[i, 0], points[i, 1]))

    def cross(o: int, a: int, b: int) -> float:
        pa, pb, po = points[a], points[b], points[o]
        return (pa[0] - po[0]) * (pb[1] - po[1]) - (pa[1] - po[1]) * (pb[0] - po[0])

    lower: list[int] = []
    upper: list[int] = []
    for i in order:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], i) <= 1e-12:
            lower.pop()
        lower.append(i)
    for i in reversed(order):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], i) <= 1e-12:
            upper.pop()
        upper.append(i)
    return np.array(lower[:-1] + upper[:-1], dtype=np.int64)


def _unique(points: list[np.ndarray], tol: float) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for p in points:
        if all(np.linalg.norm(p - o) > tol for o in out):
            out.append(p)
    return out


def animate(
    result: Result | str | Path,
    path: str | Path,
    *,
    trace: Sequence[str] = (),
    fps: float | None = None,
    every: int | None = None,
    speed: float | None = None,
    size: tuple[int, int] = (640, 480),
    view: str | tuple[float, float] = "iso",
    module: Any = None,
    on_playback: Callable[[Playback], None] | None = None,
) -> Path:
    """Write an animation of ``result`` (a :class:`~mbdgen.results.Result` or a saved
    ``.npz``) to ``path`` (``.gif`` or ``.mp4``, written atomically).

    Parameters
    ----------
    trace : body specs whose paths are drawn: ``"rod"`` (its centroid),
        ``"rod:slider"`` (the point of element ``slider`` on ``rod``) or
        ``"rod:0.2,0"`` (body-frame coordinates).
    fps : frames per second of the animation (default :data:`DEFAULT_FPS`; a GIF
        plays at most 50, an MP4 at most 60: a higher rate is lowered to that).
    every : one frame per ``every`` output rows, instead of frames at equal times;
        without ``fps`` played in real time (the rate of the drawn rows' spacing) where
        1 to 50 (GIF) or 60 (MP4) frames per second give it, else at the nearest of
        those rates.
    speed : simulated seconds per second of animation (default 1, real time; a run
        that would give fewer than :data:`MIN_FRAMES` frames is slowed down to up to
        100 frames).
        Every pace other than real time is written under the time stamp
        ("(0.25× real time)").
    size : (width, height) in pixels, at most :data:`MAX_PIXELS` each (MP4: even).
    view : spatial models: ``"iso"``, ``"xy"``, ``"xz"``, ``"yz"`` or (azimuth,
        elevation) in degrees, z up.
    module : the generated module, to draw a result saved without geometry.
    on_playback : called with the :class:`Playback` (rows, rate, pace) before drawing.

    Returns the path written.  Raises :class:`~mbdgen.errors.OutputError` for an
    unusable path, :class:`~mbdgen.errors.ResultFileError` or
    :class:`~mbdgen.errors.ModelError` for a result that has nothing to draw.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in ANIMATION_SUFFIXES:
        raise OutputError(
            f"cannot write {str(path)!r}: an animation is a .gif or .mp4 file, not "
            f"{path.suffix or 'a file without suffix'}"
        )
    if fps is not None and not (
        isinstance(fps, (int, float)) and math.isfinite(fps) and 0 < fps <= 100
    ):
        raise MbdgenError(f"fps must be a number in (0, 100], not {fps!r}")
    if every is not None and (not isinstance(every, int) or every < 1):
        raise MbdgenError(f"every must be a positive integer, not {every!r}")
    if speed is not None and not (isinstance(speed, (int, float)) and 0 < speed < math.inf):
        raise MbdgenError(f"speed must be a positive number, not {speed!r}")
    if speed is not None and every is not None:
        raise MbdgenError("give speed or every, not both")
    width, height = (int(v) for v in size)
    if not (16 <= width <= MAX_PIXELS and 16 <= height <= MAX_PIXELS):
        raise MbdgenError(f"size must be between 16 and {MAX_PIXELS} pixels, not {size!r}")
    if suffix == ".mp4":
        width, height = width - width % 2, height - height % 2  # yuv420p needs even sizes
        try:
            import imageio_ffmpeg
        except ImportError:
            raise OutputError(
                f"cannot write {str(path)!r}: MP4 needs the imageio-ffmpeg package "
                "(pip install imageio-ffmpeg); write a .gif instead"
            ) from None
    if isinstance(view, str) and view not in VIEWS:
        raise MbdgenError(f"view must be one of {', '.join(VIEWS)} or (azimuth, elevation)")
    check_destination(path, ANIMATION_SUFFIXES)
    if not isinstance(result, Result):
        result = load(result)
    geo = _geometry(result, module)
    traces = [_parse_trace(s, geo) for s in trace]
    if len(result) == 0:
        raise MbdgenError("the result has no output rows to animate")
    plan = _playback(result.t, suffix, fps, every, speed)
    rows = plan.rows
    if len(rows) > MAX_FRAMES:
        raise MbdgenError(
            f"{len(rows)} frames is more than {MAX_FRAMES}: lower fps or show every k-th "
            "output row (every=k, --every k)"
        )
    renderer = _Renderer(result, geo, traces, rows, (width, height), view)
    renderer.speed = plan.speed
    if on_playback is not None:
        on_playback(plan)
    if suffix == ".gif":
        _write_gif(path, renderer, plan.fps)
    else:
        _write_mp4(path, renderer, plan.fps, (width, height), imageio_ffmpeg)
    return path


class _Renderer:
    """Computes every drawn position up front (vectorized over frames), then draws."""

    #: Simulated seconds per second of animation, shown in the time stamp unless 1.
    speed: float = 1.0

    def __init__(
        self,
        result: Result,
        geo: dict[str, Any],
        traces: list[_Trace],
        rows: np.ndarray,
        size: tuple[int, int],
        view: str | tuple[float, float],
    ) -> None:
        self.result, self.geo, self.traces, self.rows, self.size = result, geo, traces, rows, size
        bodies = geo["bodies"]
        spatial = any(b["kind"].startswith("spatial") for b in bodies)
        self.spatial = spatial
        self.P = _projection(spatial, view)
        q = result.q[rows]
        self.origin, self.rot = [], []
        for b in bodies:
            r, A = frames(b, q)
            self.origin.append(r)
            self.rot.append(A)
        # per body: its distinct attachment points in the body frame
        span = self._local_span()
        tol = 1e-9 * max(span, 1.0)
        self.local: list[list[np.ndarray]] = []
        for i, _b in enumerate(bodies):
            pts = [self._pad(p["local"]) for p in geo["points"] if p["body"] == i]
            self.local.append(_unique(pts, tol))
        self.ground = _unique([self._pad(p["local"]) for p in geo["points"] if p["body"] < 0], tol)
        self.pairs = self._pairs()

    @staticmethod
    def _pad(v: Sequence[float] | np.ndarray) -> np.ndarray:
        out = np.zeros(3)
        out[: len(v)] = v
        return out

    def _local_span(self) -> float:
        pts = [self._pad(p["local"]) for p in self.geo["points"]]
        return float(np.ptp(np.array(pts), axis=0).max()) if pts else 1.0

    def _world(self, body: int, local: np.ndarray) -> np.ndarray:
        """(F, 2) screen positions of a body-frame point over the frames."""
        if body < 0:
            return np.tile(self.P @ local, (len(self.rows), 1))
        return (self.origin[body] + self.rot[body] @ local) @ self.P.T

    def _pairs(self) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """(role, screen path of point a, of point b) of two-point joints and forces."""
        by_element: dict[str, list[dict[str, Any]]] = {}
        for p in self.geo["points"]:
            by_element.setdefault(p["element"], []).append(p)
        out = []
        for pts in by_element.values():
            if len(pts) != 2:
                continue
            a, b = (self._world(p["body"], self._pad(p["local"])) for p in pts)
            out.append((pts[0]["role"], a, b))
        return out

    def _shapes(self) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
        """Per body: (F, k, 2) outline (closed for k ≥ 3) and (F, 3, 2, 2) frame axes."""
        outlines: list[np.ndarray] = []
        axes: list[np.ndarray | None] = []
        scale = 0.08 * self.extent
        for i, b in enumerate(self.geo["bodies"]):
            pts = self.local[i]
            if len(pts) == 0:
                pts = [np.zeros(3)]
            if len(pts) == 1:
                pts = [np.zeros(3), pts[0]]
            path = np.stack([self._world(i, p) for p in pts], axis=1)
            if len(pts) >= 3:
                if b["kind"].startswith("planar"):
                    hull = _hull(np.array([p[:2] for p in pts]))
                    path = path[:, hull]
                else:
                    path = np.stack([f[_hull(f)] if len(f) >= 3 else f for f in path], axis=0)
            outlines.append(path)
            if b["kind"] == "spatial":
                r = self.origin[i] @ self.P.T
                tips = self.origin[i][:, None, :] + scale * np.swapaxes(self.rot[i], 1, 2)
                tips = tips @ self.P.T
                axes.append(np.stack([np.stack([r, tips[:, k]], axis=1) for k in range(3)], 1))
            else:
                axes.append(None)
        return outlines, axes

    def _limits(self) -> tuple[float, float, float, float]:
        chunks = [self.P @ g for g in self.ground]
        for i in range(len(self.geo["bodies"])):
            chunks.append((self.origin[i] @ self.P.T).reshape(-1, 2))
            for p in self.local[i]:
                chunks.append(self._world(i, p))
        for tr in self.trace_paths:
            chunks.append(tr)
        allp = np.vstack([np.atleast_2d(c) for c in chunks])
        allp = allp[np.isfinite(allp).all(axis=1)]
        if len(allp) == 0:
            allp = np.zeros((1, 2))
        lo, hi = allp.min(axis=0), allp.max(axis=0)
        span = max(float((hi - lo).max()), 1e-6)
        lo, hi = lo - 0.08 * span, hi + 0.08 * span
        cx, cy = (lo + hi) / 2
        w, h = hi - lo
        aspect = (_AXES_RECT[2] * self.size[0]) / (_AXES_RECT[3] * self.size[1])
        if w / h < aspect:
            w = h * aspect
        else:
            h = w / aspect
        return cx - w / 2, cx + w / 2, cy - h / 2, cy + h / 2

    def frames(self, which: Iterable[int] | None = None) -> Iterator[np.ndarray]:
        """(H, W, 4) RGBA frames, one per row of ``rows`` (or the frames ``which``), drawn
        as they are asked for."""
        import matplotlib

        matplotlib.use("Agg", force=False)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.collections import LineCollection
        from matplotlib.figure import Figure
        from matplotlib.patches import Polygon

        res = self.result
        # traces through every output row, thinned to at most ~2000 points (drawing cost)
        self.trace_stride = max(1, (self.rows[-1] + 1) // 2000)
        full_q = res.q[: self.rows[-1] + 1 : self.trace_stride]
        self.trace_paths = []
        for tr in self.traces:
            body = self.geo["bodies"][tr.body]
            r, A = frames(body, full_q)
            self.trace_paths.append((r + A @ self._pad(tr.local)) @ self.P.T)
        x0, x1, y0, y1 = self._limits()
        self.extent = max(x1 - x0, y1 - y0)
        outlines, axes = self._shapes()

        dpi = 100
        fig = Figure(figsize=(self.size[0] / dpi, self.size[1] / dpi), dpi=dpi)
        canvas = FigureCanvasAgg(fig)
        ax = fig.add_axes(_AXES_RECT)
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
        ax.set_aspect("equal", adjustable="box")
        ax.tick_params(labelsize=7)
        ax.grid(True, color="0.92", linewidth=0.6)
        ax.set_axisbelow(True)
        # ground supports: a triangle on a hatched base, sized with the scene
        g = 0.025 * self.extent
        for gp in self.ground:
            x, y = self.P @ gp
            ax.add_patch(
                Polygon(
                    [(x, y), (x - g, y - 1.6 * g), (x + g, y - 1.6 * g)],
                    closed=True,
                    facecolor="0.85",
                    edgecolor="0.3",
                    linewidth=1,
                    zorder=1,
                )
            )
            ax.plot([x - 1.6 * g, x + 1.6 * g], [y - 1.6 * g] * 2, color="0.3", lw=1.2, zorder=1)
            hatch = [
                [(x - 1.6 * g + k * 0.8 * g, y - 1.6 * g), (x - 2.2 * g + k * 0.8 * g, y - 2.3 * g)]
                for k in range(5)
            ]
            ax.add_collection(LineCollection(hatch, colors="0.3", linewidths=0.8, zorder=1))
        # a point held by a one-point joint or driver (absolute_y: a slider on y = c): its
        # path over the run, drawn as the guide it moves along
        for p in self.geo["points"]:
            alone = sum(o["element"] == p["element"] for o in self.geo["points"]) == 1
            if alone and p["body"] >= 0 and p["role"] in ("joint", "driver"):
                r, A = frames(self.geo["bodies"][p["body"]], full_q)
                guide = (r + A @ self._pad(p["local"])) @ self.P.T
                ax.plot(*guide.T, color="0.8", lw=7, solid_capstyle="butt", zorder=0.5)
        if self.spatial:  # which way the projection looks: the global axes, lower left
            for k, name in enumerate("xyz"):
                d = self.P[:, k] * 0.06
                ax.annotate(
                    "", xy=(0.06 + d[0], 0.09 + d[1] * self.size[0] / self.size[1]),
                    xytext=(0.06, 0.09), xycoords="axes fraction",
                    arrowprops={"arrowstyle": "-|>", "color": _AXIS_COLORS[k], "lw": 1.2},
                )  # fmt: skip
                if np.hypot(*d) > 0.01:
                    tip = (0.06 + 1.35 * d[0], 0.09 + 1.35 * d[1] * self.size[0] / self.size[1])
                    ax.text(*tip, name, transform=ax.transAxes, fontsize=8, ha="center",
                            va="center", color=_AXIS_COLORS[k])  # fmt: skip
        label = res.info.get("model", "")
        ax.text(0.99, 0.98, label, transform=ax.transAxes, ha="right", va="top", fontsize=9)
        canvas.draw()
        background = canvas.copy_from_bbox(fig.bbox)

        colors = matplotlib.colormaps["tab10"].colors  # type: ignore[attr-defined]  # listed
        bars, polys = [], []
        for i, path in enumerate(outlines):
            c = colors[i % len(colors)]
            if path.shape[1] >= 3:
                poly = Polygon(path[0], closed=True, facecolor=(*c, 0.35), edgecolor=c, lw=2)
                poly.set_animated(True)
                ax.add_patch(poly)
                polys.append((poly, path))
            else:
                (line,) = ax.plot(*path[0].T, color=c, lw=4, solid_capstyle="round", animated=True)
                bars.append((line, path))
        centroids = np.stack([o @ self.P.T for o in self.origin], axis=1)  # (F, B, 2)
        # a body whose attachment points all sit at its centroid (a slider block): a square
        blocks = [
            i for i, pts in enumerate(self.local) if all(np.linalg.norm(p) < 1e-9 for p in pts)
        ]
        block_marks = [
            ax.plot([], [], "s", ms=11, mec="0.2", mfc=colors[i % len(colors)], animated=True)[0]
            for i in blocks
        ]
        (cdots,) = ax.plot(*centroids[0].T, "o", color="0.15", ms=3.5, animated=True)
        frame_axes = [(k, a) for k, a in enumerate(axes) if a is not None]
        axis_lines = LineCollection(
            [],
            colors=[_AXIS_COLORS[k % 3] for k in range(3 * len(frame_axes))],
            linewidths=1.2,
            animated=True,
        )
        ax.add_collection(axis_lines)
        joint_pairs = [(a, b) for role, a, b in self.pairs if role != "force"]
        force_pairs = [(a, b) for role, a, b in self.pairs if role == "force"]
        links = LineCollection([], colors="0.2", linewidths=1.2, animated=True)
        springs = LineCollection(
            [], colors="tab:gray", linewidths=1.4, linestyles="--", animated=True
        )
        ax.add_collection(links)
        ax.add_collection(springs)
        jpts = [self._world(p["body"], self._pad(p["local"])) for p in self.geo["points"]]
        jpts = [j for j, p in zip(jpts, self.geo["points"], strict=True) if p["role"] != "force"]
        jstack = np.stack(jpts, axis=1) if jpts else np.zeros((len(self.rows), 0, 2))
        (joints,) = ax.plot(
            *jstack[0].T, "o", mfc="white", mec="0.1", ms=5, mew=1.2, animated=True, zorder=5
        )
        trace_lines = []
        for k, tr in enumerate(self.traces):
            color = _TRACE_COLORS[k % len(_TRACE_COLORS)]
            (line,) = ax.plot([], [], lw=1.0, color=color, alpha=0.8, animated=True)
            line.set_label(tr.label)
            trace_lines.append(line)
        # a pace other than real time is the stamp's second line: the legend goes below it
        pace = "" if self.speed == 1.0 else f"\n({self.speed:.3g}× real time)"
        if trace_lines:
            below = 10 * 1.2 * dpi / 72 / (_AXES_RECT[3] * self.size[1]) if pace else 0.0
            ax.legend(
                handles=trace_lines, loc="upper left", bbox_to_anchor=(0.0, 0.95 - below),
                fontsize=8, frameon=False,
            )  # fmt: skip
            canvas.draw()
            background = canvas.copy_from_bbox(fig.bbox)
        # a light backing keeps the stamp legible over the drawing
        stamp = ax.text(
            0.01, 0.98, "", transform=ax.transAxes, ha="left", va="top", fontsize=10,
            animated=True, bbox={"facecolor": "white", "alpha": 0.7, "edgecolor": "none", "pad": 1},
        )  # fmt: skip
        # decimals of the frame spacing (0.01 s: 2; log10 of 0.00999… is just below -2)
        digits = max(0, min(6, -int(math.floor(math.log10(max(self._dt(), 1e-12)) + 1e-6))))
        animated = [*(p for p, _ in polys), *(b for b, _ in bars), links, springs, axis_lines]
        animated += [*trace_lines, *block_marks, cdots, joints, stamp]

        for f in range(len(self.rows)) if which is None else which:
            row = self.rows[f]
            for poly, path in polys:
                poly.set_xy(path[f])
            for line, path in bars:
                line.set_data(path[f, :, 0], path[f, :, 1])
            cdots.set_data(centroids[f, :, 0], centroids[f, :, 1])
            for i, mark in zip(blocks, block_marks, strict=True):
                mark.set_data(centroids[f, i : i + 1, 0], centroids[f, i : i + 1, 1])
            joints.set_data(jstack[f, :, 0], jstack[f, :, 1])
            links.set_segments([np.stack([a[f], b[f]]) for a, b in joint_pairs])
            springs.set_segments([np.stack([a[f], b[f]]) for a, b in force_pairs])
            axis_lines.set_segments([a[f, k] for _, a in frame_axes for k in range(3)])
            upto = row // self.trace_stride + 1
            for line, tr in zip(trace_lines, self.trace_paths, strict=True):
                line.set_data(tr[:upto, 0], tr[:upto, 1])
            stamp.set_text(f"t = {res.t[row]:.{digits}f} s{pace}")
            canvas.restore_region(background)
            for artist in animated:
                ax.draw_artist(artist)
            yield np.array(canvas.buffer_rgba())

    def _dt(self) -> float:
        t = self.result.t[self.rows]
        return float(np.min(np.diff(t))) if len(t) > 1 and np.min(np.diff(t)) > 0 else 1.0


def _write_gif(path: Path, renderer: _Renderer, fps: float) -> None:
    """GIF with Pillow.  One adaptive palette for all frames, taken from the last frame
    (every trace complete) and the first, so colors do not flicker between frames."""
    from PIL import Image

    from mbdgen.fileio import atomic_write

    def rgb(frame: np.ndarray) -> Image.Image:
        return Image.fromarray(frame, "RGBA").convert("RGB")

    last = len(renderer.rows) - 1
    sample = np.concatenate(list(renderer.frames([last, 0])), axis=0)
    palette = rgb(sample).quantize(colors=96, method=Image.Quantize.MEDIANCUT)
    images = [rgb(f).quantize(palette=palette, dither=Image.Dither.NONE) for f in renderer.frames()]
    # GIF delays are whole 10 ms ticks: frame k starts at tick round(100 k / fps), so a
    # rate that is not a whole number of ticks (40 fps: 20, 30, 20, 30 ms) keeps real
    # time over the whole animation; fps <= 50 keeps every delay >= 20 ms (what viewers show)
    ticks = np.round(np.arange(len(images) + 1) * (100.0 / fps)).astype(np.int64)
    duration = [int(d) * 10 for d in np.diff(ticks)]
    try:
        with atomic_write(path) as fh:
            images[0].save(
                fh,
                format="GIF",
                save_all=True,
                append_images=images[1:],
                duration=duration,
                loop=0,
                optimize=False,
            )
    except OSError as exc:
        raise OutputError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None


def _write_mp4(
    path: Path, renderer: _Renderer, fps: float, size: tuple[int, int], ffmpeg: Any
) -> None:
    """H.264 MP4 through imageio-ffmpeg's binary, into a temporary file renamed over ``path``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".mp4")
    os.close(fd)
    try:
        writer = ffmpeg.write_frames(
            tmp,
            size,
            fps=fps,
            codec="libx264",
            pix_fmt_in="rgba",
            pix_fmt_out="yuv420p",
            macro_block_size=1,
            output_params=["-movflags", "+faststart"],
        )
        writer.send(None)
        for f in renderer.frames():
            writer.send(np.ascontiguousarray(f[: size[1], : size[0]]))
        writer.close()
        os.chmod(tmp, _file_mode(path))  # mkstemp made it 0o600; give the usual mode
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:
        raise OutputError(f"cannot write {str(path)!r}: ffmpeg failed: {exc}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
