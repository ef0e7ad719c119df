"""Sweeps and ensembles: many runs of one compiled model, across cores and machines.

A sweep is a table of parameter sets (DESIGN rule 3: parameters are runtime values,
so no set recompiles anything) and one set of :func:`~mbdgen.simulation.simulate`
options that applies to every run.  Run ``i`` *is* ``simulate(module,
params=set_i, ...)``: the same driver, stepper and jitted entry point, so its result
equals a lone call bit for bit.

How runs are spread:

* in-process, ``workers`` Python threads each run whole batches of runs.  The
  generated entry points are ``nogil=True``, so the jitted chunks of different runs
  advance on different cores at once while one thread holds the GIL only for the
  short Python work between chunks;
* on Dask (``client=``), each batch is one task; a worker imports the generated
  module from its path where it sees the same file (a shared file system), else
  from the module's text, which travels with every task, and sends
  the batch's rows back, which are written as they arrive.  A batch whose worker
  died is run again by the scheduler; one that still fails is reported
  (:class:`SweepIncomplete`) after every other batch finished.

What a sweep writes to its folder (all files atomically, batch by batch, so Ctrl-C
or a lost worker keeps every finished run and ``resume=True`` runs only the rest)::

    sweep.json                 manifest: model, options, outputs, number of runs
    plan.parquet               the parameter table: column ``run`` and one column per
                               varied quantity (a parameter NAME, ``q0.NAME``,
                               ``qd0.NAME`` or ``x0.NAME``)
    batches/batch-NNNNNN.parquet   rows of finished runs (see :data:`RECORD_COLUMNS`);
                               one that cannot be read is renamed
                               ``damaged-batch-NNNNNN.parquet`` on resume and its
                               runs run again
    trajectories/batch-NNNNNN.h5   on request: one HDF5 group ``run-NNNNNNN`` per run
                               with t, q, qd, qdd, lam, phi_norm
    runs.parquet               when every run has a row: the whole table, sorted by run

Each row of the table holds the run's parameters, ``status`` (``finished``,
``failed``: the integrator stopped, ``check``: a ``strict`` check failed,
``error``: the set was refused), ``message``, ``warnings``, the counters
(``counter.steps`` ...), the scalar outputs (``final.q.NAME``, ``final.qd.NAME``,
``max.q.NAME``, ``min.q.NAME``, ``max.phi_norm``, ``final.t`` and the user's
``output.NAME`` = f(result)) and, with trajectories, ``trajectory_file`` and
``trajectory_group``, the index into the HDF5 files.
"""

from __future__ import annotations

import json
import math
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from mbdgen import __version__
from mbdgen.errors import MbdgenError, SimulationError
from mbdgen.inputs import nearest_names

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from mbdgen.results import Result
    from mbdgen.simulation import PreparedRun

MANIFEST = "sweep.json"
PLAN = "plan.parquet"
BATCHES = "batches"
TRAJECTORIES = "trajectories"
TABLE = "runs.parquet"
#: The columns every row has, after the parameters.
RECORD_COLUMNS = ("status", "message", "warnings")
#: Prefixes of the columns that set initial values instead of parameters.
STATE_PREFIXES = ("q0.", "qd0.", "x0.")
#: Arrays of a run kept with ``trajectories=True``.
TRAJECTORY_ARRAYS = ("t", "q", "qd", "qdd", "lam", "phi_norm")
DISTRIBUTIONS = ("uniform", "normal", "loguniform")
#: simulate() keywords a sweep sets per run or owns.
_PER_RUN = ("params", "q0", "qd0", "x0", "progress")

ResultFunction = Callable[["Result"], float]
ProgressCallback = Callable[[int, int], None]


class SweepInterrupted(MbdgenError):
    """A sweep stopped by Ctrl-C or SIGTERM; every finished run is on disk."""

    def __init__(self, message: str, done: int, total: int) -> None:
        super().__init__(message)
        self.done, self.total = done, total


class DamagedBatchWarning(UserWarning):
    """A batch file of a resumed sweep could not be read: its runs are run again."""


class SweepIncomplete(MbdgenError):
    """Batches of a Dask sweep were lost (their worker died more often than the
    scheduler's ``allowed-failures``, or the task raised); every other run finished
    and is on disk, and ``resume=True`` runs the lost ones."""

    def __init__(self, message: str, done: int, total: int, lost: list[int]) -> None:
        super().__init__(message)
        self.done, self.total, self.lost = done, total, lost


# --------------------------------------------------------------------------------------
# Parameter tables
# --------------------------------------------------------------------------------------


def grid(values: Mapping[str, Sequence[float] | float]) -> pd.DataFrame:
    """The Cartesian product of ``values`` (name → values, or one value), one row per
    set; the first name varies slowest."""
    import pandas as pd

    names = list(values)
    axes = [np.atleast_1d(np.asarray(values[k], dtype=np.float64)) for k in names]
    if any(a.size == 0 for a in axes):
        raise MbdgenError("a sweep grid axis has no values")
    mesh = np.meshgrid(*axes, indexing="ij") if axes else []
    return pd.DataFrame({k: m.ravel() for k, m in zip(names, mesh, strict=True)})


def sample(
    ranges: Mapping[str, tuple[float, float]],
    n: int,
    *,
    seed: int | None = 0,
    dist: str = "uniform",
) -> pd.DataFrame:
    """``n`` random sets: per name (in the given order) ``n`` draws from NumPy's
    ``default_rng(seed)``: uniform on [a, b), normal with mean a and standard
    deviation b, or log-uniform on [a, b) (a, b > 0)."""
    import pandas as pd

    if dist not in DISTRIBUTIONS:
        raise MbdgenError(
            f"unknown distribution {dist!r}; choose one of: {', '.join(DISTRIBUTIONS)}"
        )
    if int(n) < 1:
        raise MbdgenError(f"a random sweep needs at least one run, not {n}")
    rng = np.random.default_rng(seed)
    columns = {}
    for name, (a, b) in ranges.items():
        a, b = float(a), float(b)
        if dist == "normal":
            if not b >= 0.0:
                raise MbdgenError(f"{name}: a normal distribution needs a standard deviation ≥ 0")
            columns[name] = rng.normal(a, b, int(n))
        elif dist == "loguniform":
            if not (0.0 < a < b):
                raise MbdgenError(f"{name}: a log-uniform range needs 0 < low < high, got {a}:{b}")
            columns[name] = np.exp(rng.uniform(math.log(a), math.log(b), int(n)))
        else:
            if not a < b:
                raise MbdgenError(f"{name}: a uniform range needs low < high, got {a}:{b}")
            columns[name] = rng.uniform(a, b, int(n))
    return pd.DataFrame(columns)


def read_table(path: str | Path) -> pd.DataFrame:
    """Parameter sets from a CSV or Parquet file (one column per varied quantity)."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise MbdgenError(f"parameter table {path}: no such file")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if path.suffix.lower() == ".csv":
            return pd.read_csv(path)
    except Exception as exc:  # the reader's own words, on one line
        raise MbdgenError(f"cannot read parameter table {path}: {exc}") from None
    raise MbdgenError(f"parameter table {path}: write it as .csv or .parquet")


def parse_spec(item: str) -> tuple[str, list[float] | tuple[float, float]]:
    """A CLI ``-p`` item: ``NAME=A:B:N`` (N values from A to B), ``NAME=A:B`` (a range
    for --random), ``NAME=V1,V2,...`` or ``NAME=V``."""
    name, sep, text = item.partition("=")
    name = name.strip()
    if not sep or not name:
        raise MbdgenError(f"-p {item!r}: write NAME=A:B:N, NAME=A:B, NAME=V1,V2 or NAME=V")
    try:
        if ":" in text:
            parts = tuple(float(s) for s in text.split(":"))
            if len(parts) == 3:
                count = parts[2]
                if count != int(count) or count < 1:
                    raise MbdgenError(
                        f"-p {item!r}: the number of values must be a whole number ≥ 1"
                    )
                return name, list(np.linspace(parts[0], parts[1], int(count)))
            if len(parts) == 2:
                return name, (parts[0], parts[1])
            raise ValueError
        return name, [float(s) for s in text.split(",")]
    except ValueError:
        raise MbdgenError(f"-p {item!r}: {text!r} is not A:B:N, A:B, V1,V2,... or V") from None


def plan_from_specs(
    specs: Sequence[str], *, random: int | None = None, seed: int | None = 0, dist: str = "uniform"
) -> pd.DataFrame:
    """The parameter table of the CLI's ``-p`` items: a grid, or with ``random`` that
    many samples (each item a range ``A:B``; fixed values ``V`` stay fixed)."""
    parsed = [parse_spec(s) for s in specs]
    if random is None:
        for name, v in parsed:
            if isinstance(v, tuple):
                raise MbdgenError(f"-p {name}: A:B is a range for --random; a grid wants A:B:N")
        return grid(dict(parsed))
    ranges: dict[str, tuple[float, float]] = {}
    fixed: dict[str, float] = {}
    for name, v in parsed:
        if isinstance(v, tuple):
            ranges[name] = v
        elif len(v) == 1:
            fixed[name] = v[0]
        else:
            raise MbdgenError(f"-p {name}: with --random give a range A:B (or one value)")
    table = sample(ranges, random, seed=seed, dist=dist)
    for name, value in fixed.items():
        table[name] = value
    return table


def _as_plan(params: Any) -> pd.DataFrame:
    """The parameter table of ``params``: a DataFrame, a mapping of equal-length
    columns, or a sequence of mappings (one per set); a column ``run`` is made."""
    import pandas as pd

    if isinstance(params, pd.DataFrame):
        table = params.copy()
    elif isinstance(params, Mapping):
        table = pd.DataFrame({k: np.atleast_1d(v) for k, v in params.items()})
    elif isinstance(params, Iterable):
        table = pd.DataFrame(list(params))
    else:
        raise MbdgenError("params must be a table of parameter sets (a DataFrame, a mapping "
                          "of columns, or a list of mappings)")  # fmt: skip
    if "run" in table.columns:
        table = table.drop(columns="run")
    if len(table) == 0:
        raise MbdgenError("the sweep has no parameter sets")
    for name in table.columns:
        values = pd.to_numeric(table[name], errors="coerce").to_numpy(dtype=np.float64)
        if not np.isfinite(values).all():
            bad = int(np.flatnonzero(~np.isfinite(values))[0])
            raise MbdgenError(
                f"parameter set {bad}: {name} = {table[name].iloc[bad]!r} is not a finite number"
            )
        table[name] = values
    table.insert(0, "run", np.arange(len(table), dtype=np.int64))
    return table.reset_index(drop=True)


def _check_columns(module: ModuleType, columns: Iterable[str]) -> None:
    """Every column must name a parameter, a coordinate (q0./qd0.) or a user state."""
    params = tuple(module.PARAMETER_NAMES)
    coords = tuple(module.COORDINATE_NAMES)
    states = tuple(getattr(module, "STATE_NAMES", ()))
    for c in columns:
        if c == "run":
            continue
        prefix, _, rest = c.partition(".")
        known = {"q0": coords, "qd0": coords, "x0": states}.get(prefix) if rest else params
        if known is None or (rest or c) not in known:
            close = nearest_names(rest, known) if rest and known else nearest_names(c, params)
            if close:
                named = [f"{prefix}.{n}" if rest and known else n for n in close]
                raise MbdgenError(
                    f"sweep column {c!r} names nothing in model {module.MODEL_NAME!r}; did "
                    f"you mean {' or '.join(named)}?"
                )
            raise MbdgenError(
                f"sweep column {c!r} names nothing in model {module.MODEL_NAME!r}: use a "
                f"parameter ({', '.join(params) or 'none'}), q0.NAME or qd0.NAME for a "
                f"coordinate ({', '.join(coords)})"
                + (f", x0.NAME for a state ({', '.join(states)})" if states else "")
            )


def read_outputs(path: str | Path) -> dict[str, ResultFunction]:
    """The output functions of a Python file (the CLI's ``--outputs``): every public
    function defined in it, ``def NAME(result) -> float``, becomes the column
    ``output.NAME`` of each finished run.

    The file is run like a model file (it is the user's code); it is not registered
    in ``sys.modules``, so on Dask its functions travel to the workers by value.
    """
    import importlib.util
    import inspect

    path = Path(path)
    if not path.is_file() or path.suffix != ".py":
        raise MbdgenError(f"outputs file {path}: no such .py file")
    spec = importlib.util.spec_from_file_location(f"mbdgen_sweep_outputs_{path.stem}", path)
    if spec is None or spec.loader is None:  # pragma: no cover - defensive
        raise MbdgenError(f"cannot load outputs file {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's code: its error on one line
        raise MbdgenError(f"cannot load outputs file {path}: {type(exc).__name__}: {exc}") from None
    functions: dict[str, ResultFunction] = {
        name: fn
        for name, fn in vars(module).items()
        if inspect.isfunction(fn) and not name.startswith("_") and fn.__module__ == module.__name__
    }
    if not functions:
        raise MbdgenError(
            f"outputs file {path} defines no function: write def NAME(result) -> float"
        )
    for name, fn in functions.items():
        params = inspect.signature(fn).parameters
        if len(params) != 1:
            raise MbdgenError(
                f"outputs file {path}: {name}() must take one argument, the run's Result"
            )
    return functions


# --------------------------------------------------------------------------------------
# One run and one batch
# --------------------------------------------------------------------------------------


@dataclass
class _Task:
    """What every run of a sweep shares (picklable: it travels to Dask workers)."""

    options: dict[str, Any]
    outputs: dict[str, ResultFunction] = field(default_factory=dict)
    trajectories: bool = False


def _inputs(module: ModuleType, row: Mapping[str, float], options: Mapping[str, Any]) -> dict:
    """simulate()'s per-run keywords from one row of the plan."""
    params = dict(options.get("params") or {})
    given_q0, given_qd0 = options.get("q0"), options.get("qd0")
    q0 = np.array(module.Q0 if given_q0 is None else given_q0, dtype=np.float64)
    qd0 = np.array(module.QD0 if given_qd0 is None else given_qd0, dtype=np.float64)
    x0 = dict(options.get("x0") or {})
    coords = tuple(module.COORDINATE_NAMES)
    for name, value in row.items():
        if name == "run":
            continue
        prefix, _, rest = name.partition(".")
        if not rest:
            params[name] = float(value)
        elif prefix == "q0":
            q0[coords.index(rest)] = value
        elif prefix == "qd0":
            qd0[coords.index(rest)] = value
        else:
            x0[rest] = float(value)
    return {"params": params, "q0": q0, "qd0": qd0, "x0": x0 or None}


def _scalars(module: ModuleType, result: Result) -> dict[str, float]:
    """Final state, extrema of q and ‖Φ‖ of a run."""
    out: dict[str, float] = {"final.t": float(result.t[-1]) if len(result) else math.nan}
    empty = not len(result)
    for j, name in enumerate(module.COORDINATE_NAMES):
        q, qd = result.q[:, j], result.qd[:, j]
        out[f"final.q.{name}"] = math.nan if empty else float(q[-1])
        out[f"final.qd.{name}"] = math.nan if empty else float(qd[-1])
        out[f"max.q.{name}"] = math.nan if empty else float(q.max())
        out[f"min.q.{name}"] = math.nan if empty else float(q.min())
    phi = result.phi_norm
    out["max.phi_norm"] = float(phi.max()) if phi.size else math.nan
    return out


def run_one(
    module: ModuleType,
    row: Mapping[str, float],
    task: _Task,
    stop: threading.Event | None = None,
    prepared: PreparedRun | None = None,
) -> tuple[dict[str, Any], dict[str, np.ndarray] | None]:
    """One run of a sweep: ``simulate(module, **options, params/q0/qd0/x0 of row)``.

    Returns its row of the table and, with trajectories, its arrays.  A failure
    (SimulationError) or a refused set (MbdgenError) is recorded, not raised; Ctrl-C,
    or ``stop`` set by another thread, raises KeyboardInterrupt between chunks.
    ``prepared``: the batch's :func:`_prepared` run of ``task`` (the same results,
    without checking the shared options again for each row).
    """

    def check_stop(t: float, t_end: float) -> None:
        if stop is not None and stop.is_set():
            raise KeyboardInterrupt

    record: dict[str, Any] = dict(row)
    result = None
    try:
        run = prepared if prepared is not None else _prepared(module, task)
        result = run(**_inputs(module, row, task.options), progress=check_stop)
        status, message = "finished", str(result.info["message"])
    except SimulationError as exc:
        if exc.reason in ("interrupted", "terminated"):
            raise KeyboardInterrupt from None
        result = exc.result  # type: ignore[assignment]
        status, message = exc.reason, str(exc)
    except MbdgenError as exc:
        status, message = "error", str(exc)
    record["status"], record["message"] = status, message
    record["warnings"] = "; ".join(result.info.get("warnings", ())) if result is not None else ""
    if result is not None:
        for key, value in result.counters.items():
            if isinstance(value, (int, float, np.integer, np.floating)):
                record[f"counter.{key}"] = value
    complete = status in ("finished", "check")
    if complete:
        record.update(_scalars(module, result))  # type: ignore[arg-type]
    for name, fn in task.outputs.items():
        record[f"output.{name}"] = _output(name, fn, result, row) if complete else math.nan
    arrays = None
    if task.trajectories and result is not None:
        arrays = {k: np.ascontiguousarray(getattr(result, k)) for k in TRAJECTORY_ARRAYS}
    return record, arrays


def _prepared(module: ModuleType, task: _Task) -> PreparedRun:
    """The run every row of ``task`` makes, with the shared options checked once."""
    from mbdgen.simulation import prepare

    return prepare(module, **{k: v for k, v in task.options.items() if k not in _PER_RUN})


def _output(name: str, fn: ResultFunction, result: Any, row: Mapping[str, float]) -> float:
    """A user's output of a finished run; its failure names the output and the run."""
    try:
        return float(fn(result))
    except Exception as exc:  # the user's code: stop the sweep with one clear line
        raise MbdgenError(
            f"output {name!r} failed on run {int(row['run'])}: {type(exc).__name__}: {exc}"
        ) from None


@dataclass
class _Batch:
    """Rows of the runs a batch finished (all of them unless it was stopped)."""

    records: list[dict[str, Any]]
    arrays: dict[int, dict[str, np.ndarray]]
    stopped: bool = False


def _run_batch(
    module: ModuleType, rows: list[dict[str, float]], task: _Task, stop: threading.Event | None
) -> _Batch:
    batch = _Batch([], {})
    try:
        prepared = _prepared(module, task)
    except MbdgenError:  # refused options: each row records it (run_one)
        prepared = None
    for row in rows:
        if stop is not None and stop.is_set():
            batch.stopped = True
            break
        try:
            record, arrays = run_one(module, row, task, stop, prepared)
        except KeyboardInterrupt:
            batch.stopped = True
            if stop is not None:
                stop.set()
            break
        batch.records.append(record)
        if arrays is not None:
            batch.arrays[int(row["run"])] = arrays
    return batch


def _remote_batch(module_path: str, text: str, rows: list[dict[str, float]], task: _Task) -> _Batch:
    """A batch on a Dask worker: import the generated module (see
    :func:`_worker_module`) and run the rows one after the other."""
    import warnings as _warnings

    from mbdgen.simulation import ConstraintWarning

    module = _worker_module(module_path, text)
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore", ConstraintWarning)  # recorded in the rows
        return _run_batch(module, rows, task, None)


def _worker_module(module_path: str, text: str) -> ModuleType:
    """The generated module on a Dask worker: from ``module_path`` when the worker
    sees that file with the client's ``text`` (a shared file system: its Numba cache
    is used too), else from a copy of ``text`` the worker writes to its own temporary
    folder, under a name of the text's digest (a worker without the shared path, or
    with an out-of-date copy, runs exactly the client's module; rule 4: the module
    needs only numpy, numba and mbdgen.runtime).  That folder is the worker user's own
    (:func:`mbdgen.private_dir.temp_dir`): the copy is imported, so nobody else may
    write there."""
    import hashlib

    from mbdgen.compiler import import_generated
    from mbdgen.private_dir import temp_dir

    path = Path(module_path)
    try:
        shared = path.is_file() and path.read_text(encoding="utf-8") == text
    except OSError:
        shared = False
    if shared:
        return import_generated(path)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    local = temp_dir("mbdgen-sweep") / digest / path.name
    if not (local.is_file() and local.read_text(encoding="utf-8") == text):
        from mbdgen.fileio import atomic_write

        local.parent.mkdir(exist_ok=True)
        with atomic_write(local) as fh:
            fh.write(text.encode("utf-8"))
    return import_generated(local)


# --------------------------------------------------------------------------------------
# Storage
# --------------------------------------------------------------------------------------


class _Store:
    """A sweep folder (or, with ``path=None``, memory only)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.records: list[dict[str, Any]] = []
        self.arrays: dict[int, dict[str, np.ndarray]] = {}
        self.next_batch = 0
        if path is not None:
            (path / BATCHES).mkdir(parents=True, exist_ok=True)
            used = [int(f.stem.split("-")[1]) for d in (BATCHES, TRAJECTORIES)
                    if (path / d).is_dir() for f in (path / d).glob("batch-*.*")]  # fmt: skip
            self.next_batch = max(used, default=-1) + 1

    def write(self, batch: _Batch) -> None:
        if not batch.records:
            return
        if self.path is None:
            self.records.extend(batch.records)
            self.arrays.update(batch.arrays)
            return
        import pandas as pd

        from mbdgen.fileio import atomic_hdf5, atomic_write

        number = self.next_batch
        self.next_batch += 1
        name = f"batch-{number:06d}"
        records = batch.records
        if batch.arrays:
            folder = self.path / TRAJECTORIES
            folder.mkdir(exist_ok=True)
            target = folder / f"{name}.h5"
            with atomic_hdf5(target) as h5:
                for run, arrays in batch.arrays.items():
                    group = h5.create_group(f"run-{run:07d}")
                    for key, value in arrays.items():
                        group.create_dataset(key, data=value)
            for r in records:
                if int(r["run"]) in batch.arrays:
                    r["trajectory_file"] = f"{TRAJECTORIES}/{name}.h5"
                    r["trajectory_group"] = f"run-{int(r['run']):07d}"
        frame = pd.DataFrame(records)
        with atomic_write(self.path / BATCHES / f"{name}.parquet") as fh:
            frame.to_parquet(fh, index=False)


class _DamagedBatch(Exception):
    """A batch file that is not a table of runs (cut short, overwritten, not parquet)."""

    def __init__(self, file: Path, cause: BaseException) -> None:
        super().__init__(str(file))
        self.file = file
        self.cause = " ".join(f"{type(cause).__name__}: {cause}".split())[:300]


def _read_batch(file: Path) -> pd.DataFrame:
    """One batch file's rows, or :class:`_DamagedBatch` where they cannot be read."""
    import pandas as pd

    try:
        frame = pd.read_parquet(file)
    except Exception as exc:  # pyarrow's ArrowInvalid, OSError, ... : the bytes are no table
        raise _DamagedBatch(file, exc) from None
    if "run" not in frame.columns or not pd.api.types.is_integer_dtype(frame["run"]):
        raise _DamagedBatch(file, ValueError("it has no integer column 'run'"))
    return frame


def _rows_in(file: Path) -> int | None:
    """The number of rows a damaged batch file's footer states, None if it is gone too."""
    try:
        import pyarrow.parquet as pq

        return int(pq.read_metadata(file).num_rows)
    except Exception:
        return None


def _set_aside(damaged: _DamagedBatch, folder: Path) -> None:
    """Rename a damaged batch file out of the sweep's batches (``damaged-batch-….parquet``,
    kept for a look) and say once that its runs run again."""
    file = damaged.file
    rows = _rows_in(file)
    kept = file.with_name(f"damaged-{file.name}")
    try:
        os.replace(file, kept)
    except OSError as exc:
        raise MbdgenError(
            f"the sweep's {file} is damaged ({damaged.cause}) and cannot be moved aside "
            f"({exc.strerror or exc}): delete it, then resume to run its runs again"
        ) from None
    runs = f"its {rows} runs" if rows is not None else "the runs it held"
    warnings.warn(
        f"{file.name} was damaged ({damaged.cause}); running {runs} again "
        f"(the file is kept as {kept.relative_to(folder)})",
        DamagedBatchWarning,
        stacklevel=3,
    )


def _read_batches(path: Path, *, set_aside: bool = False) -> pd.DataFrame | None:
    """The rows of every batch file of sweep folder ``path`` sorted by run (None if it
    has none).  A damaged file is an error naming it and the way out; with
    ``set_aside`` (a resume) it is renamed out of the way instead, so that its runs have
    no row and run again."""
    import pandas as pd

    frames = []
    for file in sorted((path / BATCHES).glob("batch-*.parquet")):
        try:
            frames.append(_read_batch(file))
        except _DamagedBatch as damaged:
            if not set_aside:
                raise MbdgenError(
                    f"the sweep's {file} is damaged ({damaged.cause}): resume the sweep "
                    f"(mbdgen sweep --resume -o {path}, or resume=True) to run its runs again"
                ) from None
            _set_aside(damaged, path)
    if not frames:
        return None
    table = pd.concat(frames, ignore_index=True)
    return table.sort_values("run", kind="stable").reset_index(drop=True)


def _json_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options as JSON values (arrays as lists) for the manifest."""
    return json.loads(json.dumps(dict(options), default=lambda v: np.asarray(v).tolist()))


# --------------------------------------------------------------------------------------
# The sweep
# --------------------------------------------------------------------------------------


@dataclass
class Sweep:
    """A sweep's dataset: ``table`` (one row per finished run, sorted by run), the
    ``plan`` (every parameter set), and the trajectories where they were kept."""

    table: pd.DataFrame
    plan: pd.DataFrame
    path: Path | None = None
    manifest: dict[str, Any] = field(default_factory=dict)
    _arrays: dict[int, dict[str, np.ndarray]] = field(default_factory=dict, repr=False)

    @property
    def missing(self) -> list[int]:
        """Runs of the plan without a row (not run yet, or interrupted)."""
        done = set(self.table["run"].tolist()) if len(self.table) else set()
        return [int(r) for r in self.plan["run"] if int(r) not in done]

    def trajectory(self, run: int) -> dict[str, np.ndarray]:
        """Arrays t, q, qd, qdd, lam, phi_norm of run ``run`` (kept with trajectories=True)."""
        if run in self._arrays:
            return self._arrays[run]
        rows = self.table[self.table["run"] == run]
        if self.path is None or rows.empty or "trajectory_file" not in rows:
            raise MbdgenError(f"run {run} has no stored trajectory (sweep with trajectories=True)")
        file, group = rows["trajectory_file"].iloc[0], rows["trajectory_group"].iloc[0]
        if not isinstance(file, str):
            raise MbdgenError(f"run {run} has no stored trajectory (it did not run)")
        import h5py

        with h5py.File(self.path / file, "r") as h5:
            return {k: h5[group][k][()] for k in h5[group]}


def load_sweep(path: str | Path) -> Sweep:
    """Read a sweep folder written by :func:`sweep` (finished or not)."""
    import pandas as pd

    path = Path(path)
    if not (path / MANIFEST).is_file():
        raise MbdgenError(f"{path} is not a sweep folder (it has no {MANIFEST})")
    manifest = json.loads((path / MANIFEST).read_text())
    plan = pd.read_parquet(path / PLAN)
    table = _read_batches(path)
    if table is None:
        table = pd.DataFrame({"run": np.zeros(0, dtype=np.int64)})
    return Sweep(table=table, plan=plan, path=path, manifest=manifest)


def _default_batch_size(n_runs: int, workers: int) -> int:
    """About eight batches per worker (load balance), at most 256 runs per batch."""
    return max(1, min(256, math.ceil(n_runs / (8 * max(1, workers)))))


def sweep(
    model: ModuleType | str | Path,
    params: Any = None,
    *,
    path: str | Path | None = None,
    outputs: Mapping[str, ResultFunction] | None = None,
    trajectories: bool = False,
    workers: int | None = None,
    batch_size: int | None = None,
    client: Any = None,
    resume: bool = False,
    progress: ProgressCallback | None = None,
    **options: Any,
) -> Sweep:
    """Run ``model`` once per parameter set; every ``options`` keyword is a keyword of
    :func:`~mbdgen.simulation.simulate` and applies to every run.

    Parameters
    ----------
    params : the parameter sets: a DataFrame (see :func:`grid`, :func:`sample`,
        :func:`read_table`), a mapping of equal-length columns or a list of mappings.
        A column names a parameter, or ``q0.NAME``/``qd0.NAME`` (a coordinate's
        initial value; with ``assemble=`` each set is assembled) or ``x0.NAME``.
    path : the sweep folder (see the module docstring); None keeps it in memory.
    outputs : name → f(result) → float, stored as ``output.NAME`` per finished run.
    trajectories : also keep every run's t, q, qd, qdd, lam, ‖Φ‖ (HDF5 in the folder).
    workers : threads of the in-process pool (default: the CPUs this process may use).
    batch_size : runs per batch (the unit written to disk and sent to a Dask worker).
    client : a ``dask.distributed.Client``: batches run on its workers, which import
        the generated module from its path where they see it (a shared file system)
        or from its text, sent with every batch.
    resume : finish the sweep in ``path``: run only the sets without a row.
    progress : called as ``progress(done, total)`` after each batch.

    Raises
    ------
    SweepInterrupted
        On Ctrl-C or SIGTERM, after writing every finished run.
    SweepIncomplete
        On Dask, when batches were lost (their workers died, see ``_on_dask``), after
        writing every other run.
    MbdgenError
        On invalid options or columns, or a ``path`` that holds another sweep.
    """
    import pandas as pd

    from mbdgen.inputs import resolve_model

    base = dict(options)
    module = resolve_model(model)
    folder = Path(path) if path is not None else None
    manifest = {
        "mbdgen_version": __version__,
        "model": module.MODEL_NAME,
        "module_file": str(Path(cast(str, module.__file__)).resolve()),
        "body_hash": getattr(module, "BODY_HASH", ""),
        "options": _json_options(base),
        "outputs": sorted(outputs or {}),
        "trajectories": bool(trajectories),
    }
    done_runs: set[int] = set()
    if folder is not None and (folder / MANIFEST).is_file():
        if not resume:
            raise MbdgenError(
                f"{folder} already holds a sweep: resume it (--resume, resume=True) or choose "
                "a new folder"
            )
        old = json.loads((folder / MANIFEST).read_text())
        stored = {k: old.get(k) for k in manifest if k not in ("mbdgen_version", "module_file")}
        if stored != {k: manifest[k] for k in stored}:
            changed = [k for k in stored if stored[k] != manifest[k]]
            raise MbdgenError(
                f"cannot resume the sweep in {folder}: its {', '.join(changed)} differ from "
                "this call's; use the same model and options, or a new folder"
            )
        plan = pd.read_parquet(folder / PLAN)
        if params is not None:
            given = _as_plan(params)
            if not given.equals(plan):
                raise MbdgenError(
                    f"cannot resume the sweep in {folder}: the parameter sets differ from the "
                    "stored plan.parquet (leave them out to resume)"
                )
        table = _read_batches(folder, set_aside=True)
        if table is not None:
            done_runs = set(table["run"].astype(int).tolist())
    else:
        if params is None:
            raise MbdgenError("a sweep needs parameter sets (params=, or -p/--random/--table)")
        if folder is not None and folder.is_dir() and any(folder.iterdir()):
            raise MbdgenError(f"{folder} is not empty and holds no sweep: choose a new folder")
        plan = _as_plan(params)
    _check_columns(module, plan.columns)
    _validate(module, base)
    if folder is not None and not (folder / MANIFEST).is_file():
        from mbdgen.fileio import atomic_write, blocking_file

        if (blocker := blocking_file(folder)) is not None:
            raise MbdgenError(f"cannot create the sweep folder {folder}: {blocker} is a file")
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_write(folder / PLAN) as fh:
            plan.to_parquet(fh, index=False)
        with atomic_write(folder / MANIFEST, "w") as fh:
            json.dump({**manifest, "runs": len(plan), "columns": list(plan.columns)}, fh, indent=2)
    store = _Store(folder)
    todo = [r for r in plan.to_dict("records") if int(r["run"]) not in done_runs]
    for r in todo:
        r["run"] = int(r["run"])
    task = _Task(options=base, outputs=dict(outputs or {}), trajectories=trajectories)
    n_workers = workers or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                            else (os.cpu_count() or 1))  # fmt: skip
    if client is not None and workers is None:
        n_workers = max(1, sum(client.nthreads().values()))
    size = batch_size or _default_batch_size(len(todo), n_workers)
    batches = [todo[i : i + size] for i in range(0, len(todo), size)]
    total, done = len(plan), len(done_runs)

    def report(batch: _Batch) -> None:
        nonlocal done
        store.write(batch)
        done += len(batch.records)
        if progress is not None:
            progress(done, total)

    lost: list[tuple[list[int], str]] = []
    if client is not None:
        stopped = _on_dask(client, module, batches, task, report, lost)
    else:
        stopped = _in_process(module, batches, task, n_workers, report)
    if folder is None:
        table = pd.DataFrame(store.records or {"run": np.zeros(0, dtype=np.int64)})
        table = table.sort_values("run", kind="stable")
        result = Sweep(table.reset_index(drop=True), plan, None, manifest, store.arrays)
    else:
        result = load_sweep(folder)
        if not result.missing:
            from mbdgen.fileio import atomic_write

            with atomic_write(folder / TABLE) as fh:
                result.table.to_parquet(fh, index=False)
    if stopped:
        where = f"; finish it with resume=True (--resume) on {folder}" if folder else ""
        raise SweepInterrupted(
            f"sweep interrupted after {done} of {total} runs{where}", done, total
        )
    if lost:
        runs = sorted(r for batch_runs, _ in lost for r in batch_runs)
        shown = ", ".join(map(str, runs[:8])) + (", ..." if len(runs) > 8 else "")
        where = f"; run the rest with resume=True (--resume) on {folder}" if folder else ""
        raise SweepIncomplete(
            f"sweep incomplete: {len(runs)} of {total} runs lost on the Dask cluster "
            f"(runs {shown}: {lost[0][1]}); {done} finished runs are kept{where}",
            done, total, runs,
        )  # fmt: skip
    return result


def _validate(module: ModuleType, options: Mapping[str, Any]) -> None:
    """Refuse bad simulate options once, before any run (an option error is the
    sweep's error, not every run's): one step of the model's own initial state goes
    through simulate()'s checks, and compiles or loads the entry point."""
    import inspect

    from mbdgen.simulation import ConstraintWarning, simulate

    known = set(inspect.signature(simulate).parameters) - {"model", "progress"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise MbdgenError(f"unknown simulate option(s): {', '.join(unknown)}")
    probe = dict(options)
    t0 = float(probe.get("t0", 0.0))
    probe["t_end"] = t0 + float(probe.get("h", 1e-3))
    probe["output_every"] = 1
    probe["strict"] = False  # the default set's warnings are no option error
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstraintWarning)
        try:
            simulate(module, **probe)
        except SimulationError:
            pass  # a failing run is a row of the table, not an option error


def _in_process(
    module: ModuleType,
    batches: list[list[dict[str, float]]],
    task: _Task,
    workers: int,
    report: Callable[[_Batch], None],
) -> bool:
    """Run the batches on a pool of ``workers`` threads; write each as it finishes.
    Returns True when Ctrl-C (or a stop) ended the sweep early."""
    from mbdgen import interrupts
    from mbdgen.simulation import ConstraintWarning

    stop = threading.Event()
    stopped = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstraintWarning)  # recorded in the rows
        if workers == 1:
            for rows in batches:
                try:
                    batch = _run_batch(module, rows, task, stop)
                except KeyboardInterrupt:  # pragma: no cover - raised between runs
                    stop.set()
                    break
                report(batch)
                if batch.stopped:
                    break
            return stop.is_set()
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mbdgen-sweep")
        pending: set[Future[_Batch]] = set()
        queue = list(reversed(batches))
        failure: BaseException | None = None
        try:
            while queue or pending:
                while queue and len(pending) < 2 * workers and not stop.is_set():
                    pending.add(pool.submit(_run_batch, module, queue.pop(), task, stop))
                if not pending:
                    break
                finished, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
                for fut in finished:
                    # a user's output function failed: start no more batches, keep
                    # the ones that are running, then raise
                    if fut.exception() is not None:
                        failure = failure or fut.exception()
                        queue.clear()
                    else:
                        report(fut.result())
                if stop.is_set():
                    queue.clear()
            if failure is not None:
                raise failure
        except KeyboardInterrupt:
            stopped = True
            stop.set()
            with interrupts.ignored():
                for fut in pending:
                    report(fut.result())
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return stopped or stop.is_set()


def _on_dask(
    client: Any,
    module: ModuleType,
    batches: list[list[dict[str, float]]],
    task: _Task,
    report: Callable[[_Batch], None],
    lost: list[tuple[list[int], str]],
) -> bool:
    """Send each batch to the Dask cluster as one task; write each as it comes back.

    A worker that dies is the scheduler's to handle first: it runs the dead worker's
    tasks again on the others (up to ``distributed.scheduler.allowed-failures``
    deaths per task).  A batch that still fails (``KilledWorker``, or an exception in
    the task) is appended to ``lost`` as (its runs, the reason) and the sweep goes on:
    its runs get no row, so ``resume=True`` runs exactly them."""
    from distributed import as_completed

    module_path = str(Path(cast(str, module.__file__)).resolve())
    # the module's text travels with every task (tens of kB: nothing next to a batch's
    # runs), not scattered: scattered data dies with the workers that hold it, and
    # the batches depending on it would be cancelled.  A worker that sees the same
    # file at module_path imports that one (see _worker_module).
    text = Path(module_path).read_text(encoding="utf-8")
    futures = [
        client.submit(_remote_batch, module_path, text, rows, task, pure=False) for rows in batches
    ]
    runs = {
        fut.key: [int(r["run"]) for r in rows] for fut, rows in zip(futures, batches, strict=True)
    }
    try:
        for fut in as_completed(futures):
            try:
                batch = fut.result()
            except Exception as exc:  # noqa: BLE001 - a lost batch, not a lost sweep
                lost.append((runs[fut.key], _reason(exc)))
            else:
                report(batch)
            fut.release()
    except KeyboardInterrupt:
        client.cancel(futures)
        return True
    return False


def _reason(exc: BaseException) -> str:
    """An exception from a Dask task on one short line."""
    name = type(exc).__name__
    if name == "KilledWorker":
        return "KilledWorker: every worker that ran the batch died"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = text if len(text) <= 160 else text[:157] + "..."
    return f"{name}: {text}" if text else name
