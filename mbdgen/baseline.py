"""Regression baselines: record a folder of runs once, check in CI that nothing moved.

A team keeps its models and a small declarative settings file,
``mbdgen-baseline.toml``, in a repository.  ``mbdgen baseline record`` runs every
case of that file and stores its result at the case's output grid;
``mbdgen baseline check`` runs them again and compares quantity by quantity (q, q̇,
λ, joint reactions, energy, ...) within per-quantity tolerances.  The outcome is an
exit code, a table of what moved (case, quantity, column, first time beyond the
tolerance, worst time, worst deviation against its tolerance) and optionally a JUnit
XML report (:func:`write_junit`).  The pytest plugin :mod:`mbdgen.pytest_plugin`
runs the same check inside a test suite.

The settings file (paths are relative to its folder)::

    baseline_dir = "baselines"    # where the baselines go (default)
    generated = "generated"       # where models are compiled to (default)

    [defaults]                    # run settings every case starts from
    t_end = 0.5

    [tolerances]                  # per quantity: |new - old| <= atol + rtol * peak
    q = { rtol = 1e-6, atol = 1e-9 }

    [cases.pendulum_abm]          # one table per case; the name names the baseline file
    model = "pendulum.py"
    method = "abm"                # ... and any other keyword of mbdgen.simulate
    h = 1e-3
    output_every = 50
    params = { l = 1.2 }
    quantities = ["q", "qd", "lam", "energy"]   # default: every quantity the run has
    tolerances = { lam = { rtol = 1e-4 }, "q.phi1" = { atol = 1e-8 } }

A value of column c passes at every output time when

    |new(t) − old(t)| ≤ atol + rtol · max_t |old(t)|          (per column c)

so ``rtol`` is relative to the column's peak over the run (a quantity crossing zero
is not held to a relative tolerance at the crossing).  Unset bounds take the
defaults :data:`DEFAULT_TOLERANCES`; a key ``"q.<column>"`` sets one column.

A baseline is one ``<case>.npz`` per case (``np.load``-able, no pickles): the
output times ``t``, one 2-D array per quantity, and ``meta``, a JSON string with the
case's run settings, the column names, the model's SHA-256 and the mbdgen, NumPy,
Numba and Python versions it was recorded with.  The archive is written atomically
and byte for byte the same when nothing changed, so a re-record of an unchanged
model makes no diff in version control.
"""

from __future__ import annotations

import io
import json
import math
import platform
import time
import warnings
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mbdgen import __version__
from mbdgen.errors import MbdgenError
from mbdgen.fileio import atomic_write

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

#: The settings file a folder argument stands for.
SETTINGS_NAME = "mbdgen-baseline.toml"
#: Version of the baseline file layout (``meta["format"]``).
FORMAT = 1

#: Quantities a baseline can hold, in table order, and what each is.
QUANTITIES: dict[str, str] = {
    "q": "coordinates",
    "qd": "velocities",
    "qdd": "accelerations",
    "lam": "Lagrange multipliers",
    "reactions": "joint reactions (force, torque per joint and body)",
    "energy": "kinetic and potential energy T, V",
    "states": "user differential states X",
}
#: Quantities recorded when a case names none: all those the run has, except q̈.
DEFAULT_QUANTITIES = ("q", "qd", "lam", "reactions", "energy", "states")

#: Default (rtol, atol) per quantity.  rtol is relative to a column's peak |value|
#: over the run.  Repeated runs on one machine agree to the last bit; a different
#: CPU, BLAS, NumPy or Numba moves a short run by ~1e-12 of its scale, a changed
#: mass, length or step by ≳1e-4: 1e-6 lies between, with room on both sides.  λ
#: and the reactions come out of a linear solve and q̈ is their partner, so they get
#: 10× more.  atol only matters for columns that stay near zero (units of the model).
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "q": (1e-6, 1e-9),
    "qd": (1e-6, 1e-9),
    "qdd": (1e-5, 1e-8),
    "lam": (1e-5, 1e-8),
    "reactions": (1e-5, 1e-8),
    "energy": (1e-6, 1e-9),
    "states": (1e-6, 1e-9),
}

#: Exit codes of the ``mbdgen baseline`` commands.
EXIT_OK, EXIT_MOVED, EXIT_ERROR = 0, 1, 2

_CASE_KEYS = ("model", "quantities", "tolerances")
_TOP_KEYS = ("baseline_dir", "generated", "defaults", "tolerances", "cases")
#: Keywords of mbdgen.simulate a settings file may not set.
_NOT_SETTINGS = ("model", "progress")


class BaselineError(MbdgenError):
    """A settings file, a case or a baseline file is unusable (one line, naming which)."""


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Tolerance:
    """Bounds of one quantity (or column): pass when |Δ| ≤ atol + rtol · peak."""

    rtol: float
    atol: float

    def bound(self, peak: Any) -> Any:
        """atol + rtol · peak, elementwise (``peak``: an array or a scalar)."""
        return self.atol + self.rtol * peak

    def __str__(self) -> str:
        return f"rtol={self.rtol:g}, atol={self.atol:g}"


@dataclass(frozen=True)
class Case:
    """One run of a settings file: a model, the keywords of ``mbdgen.simulate``,
    the quantities to compare and their tolerances."""

    name: str
    model: Path
    settings: dict[str, Any]
    quantities: tuple[str, ...] | None
    tolerances: dict[str, Tolerance]

    def tolerance(self, quantity: str, column: str) -> Tolerance:
        """The bound of ``column`` of ``quantity``: its own, else its quantity's."""
        return self.tolerances.get(f"{quantity}.{column}") or self.tolerances[quantity]


@dataclass(frozen=True)
class Suite:
    """A parsed settings file."""

    path: Path
    baseline_dir: Path
    generated: Path
    cases: dict[str, Case]

    def baseline_path(self, case: str) -> Path:
        return self.baseline_dir / f"{case}.npz"

    def select(self, names: Sequence[str] = ()) -> list[Case]:
        """The cases called ``names`` (all when empty); an unknown name is an error."""
        unknown = [n for n in names if n not in self.cases]
        if unknown:
            raise BaselineError(
                f"{self.path}: no case {', '.join(map(repr, unknown))}; the cases are "
                f"{', '.join(self.cases)}"
            )
        return [self.cases[n] for n in (names or self.cases)]


def settings_path(path: str | Path | None = None) -> Path:
    """The settings file ``path`` names: a ``.toml`` file, or a folder holding
    ``mbdgen-baseline.toml`` (default: the current folder)."""
    path = Path(path) if path is not None else Path(".")
    if path.is_dir():
        path = path / SETTINGS_NAME
    if not path.is_file():
        raise BaselineError(
            f"no baseline settings file {str(path)!r}"
            + (
                f" (write a {SETTINGS_NAME}, see `mbdgen baseline --help`)"
                if not path.exists()
                else ""
            )
        )
    return path


def _simulate_keywords() -> set[str]:
    import inspect

    from mbdgen.simulation import simulate

    return set(inspect.signature(simulate).parameters) - set(_NOT_SETTINGS)


def _tolerances(where: str, table: Any, base: dict[str, Tolerance]) -> dict[str, Tolerance]:
    """``base`` updated by a ``tolerances`` table (keys ``q`` or ``q.<column>``)."""
    if not isinstance(table, dict):
        raise BaselineError(
            f"{where}: 'tolerances' must be a table like {{ q = {{ rtol = 1e-6 }} }}"
        )
    out = dict(base)
    for key, value in table.items():
        quantity = key.partition(".")[0]
        if quantity not in QUANTITIES:
            raise BaselineError(
                f"{where}: tolerances for unknown quantity {key!r}; the quantities are "
                f"{', '.join(QUANTITIES)}"
            )
        if not isinstance(value, dict) or not value or set(value) - {"rtol", "atol"}:
            raise BaselineError(
                f"{where}: tolerance {key!r} must be a table of rtol and/or atol, e.g. "
                f"{key} = {{ rtol = 1e-6, atol = 1e-9 }}"
            )
        for bound, number in value.items():
            ok = isinstance(number, int | float) and not isinstance(number, bool)
            if not ok or not math.isfinite(number) or number < 0:
                raise BaselineError(
                    f"{where}: tolerance {key}.{bound} must be a finite number >= 0, not {number!r}"
                )
        start = out.get(key) or out[quantity]
        out[key] = Tolerance(
            float(value.get("rtol", start.rtol)), float(value.get("atol", start.atol))
        )
    return out


def load_settings(path: str | Path | None = None) -> Suite:
    """Parse and validate a settings file (see the module docstring).

    Raises :class:`BaselineError` naming the file and what is wrong: a TOML syntax
    error (with its line), an unknown key, a missing model, a setting that
    ``mbdgen.simulate`` does not take.
    """
    path = settings_path(path)
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise BaselineError(f"{where} is not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"cannot read {where}: {exc}") from None
    unknown = set(data) - set(_TOP_KEYS)
    if unknown:
        raise BaselineError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))}; the top level takes "
            f"{', '.join(_TOP_KEYS)}"
        )
    folder = path.parent
    for key in ("baseline_dir", "generated"):
        if not isinstance(data.get(key, ""), str):
            raise BaselineError(f"{where}: {key} must be a path (a string)")
    defaults = data.get("defaults", {})
    cases = data.get("cases")
    if not isinstance(defaults, dict):
        raise BaselineError(f"{where}: [defaults] must be a table of run settings")
    base = {q: Tolerance(*DEFAULT_TOLERANCES[q]) for q in QUANTITIES}
    base = _tolerances(f"{where} [tolerances]", data.get("tolerances", {}), base)
    if not isinstance(cases, dict) or not cases:
        raise BaselineError(
            f'{where} has no cases: add one, e.g. [cases.pendulum] model = "pendulum.py"'
        )
    keywords = _simulate_keywords()
    parsed: dict[str, Case] = {}
    for name, table in cases.items():
        at = f"{where} case {name!r}"
        if not name.isidentifier():
            raise BaselineError(f"{at}: a case name must be an identifier (letters, digits, _)")
        if not isinstance(table, dict):
            raise BaselineError(f"{at}: must be a table ([cases.{name}])")
        merged = {**defaults, **table}
        model = merged.get("model")
        if not isinstance(model, str):
            raise BaselineError(f'{at}: give the model file, e.g. model = "pendulum.py"')
        model_path = folder / model
        if not model_path.is_file():
            raise BaselineError(f"{at}: model file {str(model_path)!r} does not exist")
        settings = {k: v for k, v in merged.items() if k not in _CASE_KEYS}
        bad = sorted(set(settings) - keywords)
        if bad:
            raise BaselineError(
                f"{at}: {', '.join(bad)} is not a setting of mbdgen.simulate; the settings are "
                f"{', '.join(sorted(keywords))} (and model, quantities, tolerances)"
            )
        quantities = merged.get("quantities")
        if quantities is not None:
            if not isinstance(quantities, list) or not all(
                isinstance(q, str) and q in QUANTITIES for q in quantities
            ):
                raise BaselineError(
                    f"{at}: quantities must be a list of {', '.join(QUANTITIES)}, "
                    f"not {quantities!r}"
                )
            quantities = tuple(dict.fromkeys(quantities))
        tolerances = _tolerances(at, merged.get("tolerances", {}), base)
        parsed[name] = Case(name, model_path, settings, quantities, tolerances)
    return Suite(
        path=path,
        baseline_dir=folder / data.get("baseline_dir", "baselines"),
        generated=folder / data.get("generated", "generated"),
        cases=parsed,
    )


# --------------------------------------------------------------------------- running


@dataclass
class Run:
    """A case's outcome as compared: output times, quantities and their column names."""

    t: np.ndarray
    arrays: dict[str, np.ndarray]
    columns: dict[str, list[str]]
    meta: dict[str, Any] = field(default_factory=dict)


def _columns(result: Any, module: Any) -> dict[str, tuple[np.ndarray, list[str]]]:
    """Every quantity a result has, as a 2-D (N, C) array with C column names."""
    coords = list(result.coordinates)
    out: dict[str, tuple[np.ndarray, list[str]]] = {
        "q": (result.q, coords),
        "qd": (result.qd, [f"{c}_d" for c in coords]),
        "qdd": (result.qdd, [f"{c}_dd" for c in coords]),
    }
    lam_names = list(result.constraint_names) or [f"lam_{i}" for i in range(result.lam.shape[1])]
    out["lam"] = (result.lam, lam_names)
    reactions = result.reactions
    if reactions is not None and reactions.ndim == 3 and reactions.shape[1]:
        n, r, c = reactions.shape
        names = tuple(getattr(module, "REACTION_COLUMNS", ()))
        cols = list(names) if len(names) == c else [f"c{j}" for j in range(c)]
        labels = list(result.reaction_names) or [f"r{i}" for i in range(r)]
        out["reactions"] = (
            reactions.reshape(n, r * c),
            [f"{label}.{col}" for label in labels for col in cols],
        )
    energy = result.energy
    if energy is not None:
        out["energy"] = (energy, ["T", "V"][: energy.shape[1]])
    if result.state_names:
        out["states"] = (result.states, list(result.state_names))
    return out


def _model_hash(path: Path) -> str:
    from mbdgen.codegen.stamp import source_hash

    return source_hash(path)


def run_case(suite: Suite, case: Case) -> Run:
    """Compile ``case``'s model (if stale) and run it; raise :class:`MbdgenError` on failure."""
    from mbdgen.compiler import compile as compile_model
    from mbdgen.simulation import simulate

    module = compile_model(case.model, suite.generated)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = simulate(module, **case.settings)
    if not result.ok:
        raise MbdgenError(
            f"the run stopped at t = {result.t[-1]:.6g}: {result.info.get('message')}"
        )
    available = _columns(result, module)
    wanted = case.quantities or tuple(q for q in DEFAULT_QUANTITIES if q in available)
    missing = [q for q in wanted if q not in available]
    if missing:
        raise BaselineError(
            f"case {case.name!r}: the run has no {', '.join(missing)} (it has "
            f"{', '.join(available)})"
        )
    import numba

    meta = {
        "format": FORMAT,
        "case": case.name,
        "model": case.model.name,
        "model_sha256": _model_hash(case.model),
        "settings": _jsonable(case.settings),
        "mbdgen": __version__,
        "numpy": np.__version__,
        "numba": numba.__version__,
        "python": platform.python_version(),
        "steps": int(result.counters.get("steps", 0)),
        "warnings": sorted({str(w.message) for w in caught}),
    }
    return Run(
        t=np.asarray(result.t, dtype=np.float64),
        arrays={q: np.asarray(available[q][0], dtype=np.float64) for q in wanted},
        columns={q: available[q][1] for q in wanted},
        meta=meta,
    )


def _jsonable(value: Any) -> Any:
    """TOML values as JSON (a datetime is no setting of a run)."""
    return json.loads(json.dumps(value, default=str))


# --------------------------------------------------------------------------- files


def _npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """A deflated ``.npz`` whose bytes depend on the arrays only (fixed zip dates)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asarray(array, order="C"), allow_pickle=False)
            archive.writestr(info, member.getvalue())
    return buffer.getvalue()


def write_baseline(path: Path, run: Run) -> Path:
    """Write ``run`` as a baseline file, atomically."""
    meta = {**run.meta, "columns": run.columns}
    arrays = {"t": run.t, **run.arrays}
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    data = _npz_bytes(arrays)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path) as fh:
            fh.write(data)
    except OSError as exc:
        raise BaselineError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    return path


def read_baseline(path: Path, case: str) -> Run:
    """Read a baseline file; a missing or damaged one is a :class:`BaselineError`."""
    if not path.is_file():
        raise BaselineError(
            f"no baseline for case {case!r} ({str(path)!r}); record it with "
            f"`mbdgen baseline record --case {case}`"
        )
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            t = data["t"]
            arrays = {q: data[q] for q in meta["columns"]}
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile, EOFError) as exc:
        raise BaselineError(
            f"baseline {str(path)!r} is damaged or not an mbdgen baseline "
            f"({type(exc).__name__}: {exc}); record it again"
        ) from None
    return Run(t=t, arrays=arrays, columns=meta.pop("columns"), meta=meta)


# --------------------------------------------------------------------------- comparing


@dataclass(frozen=True)
class Deviation:
    """A column that moved: where it first left its bound and where it was worst.

    ``first_t``/``worst_t`` are None for a structural change (``detail`` says which:
    a different output grid, a column that appeared or vanished).
    """

    case: str
    quantity: str
    column: str
    first_t: float | None
    worst_t: float | None
    deviation: float
    bound: float
    detail: str = ""

    @property
    def ratio(self) -> float:
        """Worst deviation over its bound (> 1 means moved)."""
        if self.bound > 0:
            return self.deviation / self.bound
        return math.inf if self.deviation > 0 else 0.0


@dataclass
class CaseReport:
    """The outcome of checking (or recording) one case."""

    case: str
    status: str  # "ok", "moved", "error", "recorded"
    rows: list[Deviation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    message: str = ""
    seconds: float = 0.0
    #: The largest deviation over its bound of each compared quantity (≤ 1 when ok).
    worst: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "recorded")

    def summary(self) -> str:
        """One line: the status and why."""
        if self.status == "error":
            return f"ERROR  {self.case}: {self.message}"
        if self.status == "moved":
            moved = sorted({r.quantity for r in self.rows}, key=_quantity_order)
            return f"MOVED  {self.case}: {', '.join(moved)} ({len(self.rows)} column(s))"
        if self.status == "recorded":
            return f"rec    {self.case}: {self.message} ({self.seconds:.2f} s)"
        quantity, ratio = max(self.worst.items(), key=lambda kv: kv[1], default=("", 0.0))
        if ratio > 0:
            margin = f"worst {ratio:.2g} of its tolerance ({quantity})"
        else:
            margin = "identical to its baseline"
        return f"ok     {self.case}: {margin} ({self.seconds:.2f} s)"


def _quantity_order(quantity: str) -> int:
    keys = ["t", *QUANTITIES]
    return keys.index(quantity) if quantity in keys else len(keys)


def compare(case: Case, old: Run, new: Run) -> CaseReport:
    """Compare a new run with its baseline column by column (module docstring's bound)."""
    name = case.name
    report = CaseReport(name, "ok")
    if old.t.shape != new.t.shape:
        report.rows.append(
            Deviation(
                name,
                "t",
                "t",
                None,
                None,
                math.inf,
                0.0,
                f"output grid of {old.t.size} times became {new.t.size}",
            )
        )
    else:
        dt = np.abs(new.t - old.t)
        scale = 1e-12 * max(1.0, float(np.abs(old.t).max(initial=0.0)))
        if dt.size and dt.max() > scale:
            i = int(np.argmax(dt > scale))
            report.rows.append(
                Deviation(
                    name,
                    "t",
                    "t",
                    float(old.t[i]),
                    float(old.t[int(np.argmax(dt))]),
                    float(dt.max()),
                    scale,
                    "the output times moved",
                )
            )
    grid_ok = not report.rows
    for quantity in sorted(set(old.arrays) | set(new.arrays), key=_quantity_order):
        if quantity not in new.arrays or quantity not in old.arrays:
            where = "the baseline" if quantity not in old.arrays else "the new run"
            report.rows.append(
                Deviation(name, quantity, "*", None, None, math.inf, 0.0, f"not in {where}")
            )
            continue
        a, b = old.arrays[quantity], new.arrays[quantity]
        ca, cb = old.columns[quantity], new.columns[quantity]
        if ca != cb or a.shape != b.shape:
            report.rows.append(
                Deviation(
                    name,
                    quantity,
                    "*",
                    None,
                    None,
                    math.inf,
                    0.0,
                    f"columns {', '.join(ca)} became {', '.join(cb)}"
                    if ca != cb
                    else f"shape {a.shape} became {b.shape}",
                )
            )
            continue
        if not grid_ok or a.size == 0:
            continue
        report.worst[quantity] = 0.0
        for j, column in enumerate(ca):
            row = _column_deviation(
                name, quantity, column, old.t, a[:, j], b[:, j], case.tolerance(quantity, column)
            )
            report.worst[quantity] = max(report.worst[quantity], row.ratio)
            if row.ratio > 1.0:
                report.rows.append(row)
    report.notes = _notes(case, old.meta, new.meta)
    report.status = "moved" if report.rows else "ok"
    return report


def _column_deviation(
    case: str,
    quantity: str,
    column: str,
    t: np.ndarray,
    old: np.ndarray,
    new: np.ndarray,
    tol: Tolerance,
) -> Deviation:
    both_nan = np.isnan(old) & np.isnan(new)
    diff = np.where(both_nan, 0.0, np.abs(new - old))
    diff = np.where(np.isnan(diff), np.inf, diff)  # NaN on one side only
    peak = float(np.nanmax(np.abs(old))) if not np.isnan(old).all() else 0.0
    bound = float(tol.bound(np.float64(peak)))
    exceeded = diff > bound
    worst = int(np.argmax(diff))
    first = float(t[int(np.argmax(exceeded))]) if exceeded.any() else None
    return Deviation(case, quantity, column, first, float(t[worst]), float(diff[worst]), bound)


def _notes(case: Case, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between the recording and this run besides the numbers."""
    notes = []
    a, b = old.get("settings", {}), new.get("settings", {})
    changed = [
        f"{k}: {a.get(k, '(unset)')!r} -> {b.get(k, '(unset)')!r}"
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    ]
    if changed:
        notes.append(f"run settings changed since the recording ({'; '.join(changed)})")
    if old.get("model_sha256") != new.get("model_sha256"):
        notes.append(f"model {new.get('model')} changed since the recording")
    for key in ("mbdgen", "numpy", "numba", "python"):
        if old.get(key) != new.get(key):
            notes.append(f"{key} {old.get(key)} at the recording, {new.get(key)} now")
    return notes


# --------------------------------------------------------------------------- commands


def _error_message(exc: BaseException) -> str:
    if isinstance(exc, MbdgenError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def record(
    suite: Suite, names: Sequence[str] = (), *, on_case: Callable[[CaseReport], None] | None = None
) -> list[CaseReport]:
    """Run the cases ``names`` (default all) and write their baselines."""
    reports = []
    for case in suite.select(names):
        start = time.perf_counter()
        try:
            run = run_case(suite, case)
            path = write_baseline(suite.baseline_path(case.name), run)
            report = CaseReport(
                case.name,
                "recorded",
                message=f"{path} ({run.t.size} times; {', '.join(run.arrays)})",
            )
        except Exception as exc:  # noqa: BLE001 - a case that cannot run is reported, not fatal
            report = CaseReport(case.name, "error", message=_error_message(exc))
        report.seconds = time.perf_counter() - start
        reports.append(report)
        if on_case is not None:
            on_case(report)
    return reports


def check_case(suite: Suite, case: Case) -> CaseReport:
    """Run one case and compare it with its baseline (an error report if either fails)."""
    start = time.perf_counter()
    try:
        old = read_baseline(suite.baseline_path(case.name), case.name)
        new = run_case(suite, case)
        report = compare(case, old, new)
    except Exception as exc:  # noqa: BLE001 - reported per case
        report = CaseReport(case.name, "error", message=_error_message(exc))
    report.seconds = time.perf_counter() - start
    return report


def check(
    suite: Suite, names: Sequence[str] = (), *, on_case: Callable[[CaseReport], None] | None = None
) -> list[CaseReport]:
    """Check the cases ``names`` (default all) against their baselines."""
    reports = []
    for case in suite.select(names):
        report = check_case(suite, case)
        reports.append(report)
        if on_case is not None:
            on_case(report)
    return reports


def exit_code(reports: Iterable[CaseReport]) -> int:
    """0 when every case is within tolerance, 1 when one moved, 2 when one could not
    be checked (it failed to run, or its baseline is missing or damaged)."""
    statuses = {r.status for r in reports}
    if "error" in statuses:
        return EXIT_ERROR
    return EXIT_MOVED if "moved" in statuses else EXIT_OK


def _g(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def table(reports: Iterable[CaseReport]) -> str:
    """The rows of every case that moved, as an aligned text table (empty if none)."""
    header = (
        "case",
        "quantity",
        "column",
        "first t",
        "worst t",
        "|deviation|",
        "tolerance",
        "× tol",
    )
    lines = []
    for report in reports:
        for r in report.rows:
            if r.first_t is None and r.worst_t is None:
                lines.append((r.case, r.quantity, r.column, "-", "-", r.detail, "", ""))
            else:
                lines.append(
                    (
                        r.case,
                        r.quantity,
                        r.column,
                        _g(r.first_t),
                        _g(r.worst_t),
                        f"{r.deviation:.3e}",
                        f"{r.bound:.3e}",
                        f"{r.ratio:.3g}",
                    )
                )
    if not lines:
        return ""
    widths = [max(len(h), *(len(row[i]) for row in lines)) for i, h in enumerate(header)]
    text = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in (header, tuple("-" * w for w in widths), *lines)
    ]
    return "\n".join(text)


def failure_text(report: CaseReport) -> str:
    """What a failed case reports (the JUnit failure body, the pytest message)."""
    if report.status == "error":
        return f"case {report.case!r} could not be checked: {report.message}"
    moved = sorted({r.quantity for r in report.rows}, key=_quantity_order)
    head = f"case {report.case!r} moved beyond its tolerances: {', '.join(moved)}"
    parts = [f"{head} ({len(report.rows)} column(s))", table([report])]
    parts += [f"note: {n}" for n in report.notes]
    return "\n".join(parts)


def write_junit(path: str | Path, suite: Suite, reports: Sequence[CaseReport]) -> Path:
    """Write a JUnit XML report: one ``<testcase>`` per case, a ``<failure>`` with the
    table for a case that moved, an ``<error>`` for one that could not be checked.

    The layout is the one Jenkins, GitLab, GitHub actions and Azure read (Ant's
    JUnit task: ``<testsuites>`` / ``<testsuite>`` with name, tests, failures,
    errors, skipped, time, timestamp, hostname; ``<properties>``; ``<testcase>``
    with classname, name, time); the reports of a passing, a moved and a failed
    check validate against Jenkins' ``junit-10.xsd`` (xunit-plugin).
    """
    import datetime
    import socket
    import xml.etree.ElementTree as ET

    path = Path(path)
    failures = sum(r.status == "moved" for r in reports)
    errors = sum(r.status == "error" for r in reports)
    seconds = f"{sum(r.seconds for r in reports):.3f}"
    counts = {"tests": str(len(reports)), "failures": str(failures), "errors": str(errors)}
    root = ET.Element("testsuites", {}, name="mbdgen baseline", **counts, time=seconds)
    stamp = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0, tzinfo=None)
    testsuite = ET.SubElement(
        root,
        "testsuite",
        {},
        name=str(suite.path),
        **counts,
        skipped="0",
        time=seconds,
        timestamp=stamp.isoformat(),
        hostname=socket.gethostname() or "localhost",
        id="0",
        package="mbdgen.baseline",
    )
    properties = ET.SubElement(testsuite, "properties")
    import numba

    for key, value in (
        ("mbdgen", __version__),
        ("numpy", np.__version__),
        ("numba", numba.__version__),
        ("python", platform.python_version()),
    ):
        ET.SubElement(properties, "property", name=key, value=value)
    classname = f"mbdgen.baseline.{suite.path.parent.name or 'suite'}"
    for report in reports:
        testcase = ET.SubElement(
            testsuite,
            "testcase",
            classname=classname,
            name=report.case,
            time=f"{report.seconds:.3f}",
        )
        if report.status == "moved":
            moved = sorted({r.quantity for r in report.rows}, key=_quantity_order)
            failure = ET.SubElement(
                testcase,
                "failure",
                type="BaselineMoved",
                message=f"{', '.join(moved)} moved beyond tolerance "
                f"in {len(report.rows)} column(s)",
            )
            failure.text = failure_text(report)
        elif report.status == "error":
            error = ET.SubElement(testcase, "error", type="BaselineError", message=report.message)
            error.text = failure_text(report)
    lines = [r.summary() for r in reports]
    lines += [f"note: {r.case}: {n}" for r in reports for n in r.notes]
    ET.SubElement(testsuite, "system-out").text = "\n".join(lines)
    ET.SubElement(testsuite, "system-err").text = ""
    ET.indent(root)
    data = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    try:
        with atomic_write(path) as fh:
            fh.write(data + b"\n")
    except OSError as exc:
        raise BaselineError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    return path
