"""Compile every registered method's integrators once per installation (``mbdgen warmup``).

The integrators compiled once for all models (:mod:`mbdgen.runtime.shared`) take a
model's kernels as first-class functions, so their argument types depend only on the
kind of model: dense or sparse linear algebra, with no user states, explicit ones or
implicit ones (the workspace types), and the constraint handling of the explicit
methods (direct index-1 or Baumgarte, GCP, hybrid).  One small model of each kind
(:mod:`mbdgen.warmup_models`), stepped twice with every method that takes it, fills
Numba's on-disk cache (:mod:`mbdgen._numba_cache`) with every such integrator.  After
that a new model's first run compiles its own kernels and no integrator.  A spatial
model, last, compiles the library kernels of the common spatial element types
(:mod:`mbdgen.runtime.library`), which a new spatial model's first run would otherwise
compile.

The work is split into groups that compile different integrators (a method family on
one kind of model, in one constraint handling), run in ``jobs`` processes; a group's
units run in order in one process, so that two processes never compile the same
integrator at once.  The parent says what runs, the time so far and an estimate of
what is left, from :data:`ESTIMATE_S` (CPU seconds measured on a quiet 2-core
machine), every :data:`PROGRESS_S` seconds.  The record of a finished warm-up,
``warmup.json`` in the cache folder, makes a second call a no-op; it goes with the
cache when the runtime or Numba changes (a new cache folder).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, astuple, dataclass
from pathlib import Path
from typing import Any

from mbdgen.errors import MbdgenError

#: Seconds between the progress lines.
PROGRESS_S = 5.0

MODELS_DIR = Path(__file__).resolve().parent / "warmup_models"

#: Warm-up model → what it stands for, in the progress lines.
MODELS: dict[str, str] = {
    "warmup_pendulum": "dense",
    "warmup_chain": "sparse",
    "warmup_pendulum_explicit": "dense, explicit states",
    "warmup_chain_explicit": "sparse, explicit states",
    "warmup_pendulum_implicit": "dense, implicit states",
    "warmup_chain_implicit": "sparse, implicit states",
    "warmup_spatial": "spatial element kernels",
}

#: The model whose runs compile element kernels, not integrators: after every
#: integrator group (it takes the sparse ones), in one group, with the methods that
#: between them evaluate every kind of kernel (the dynamics and energy, Welch's Φ, the
#: index-3 and RADAU5 Newton blocks, Newmark-GCP's).
KERNEL_MODEL = "warmup_spatial"
KERNEL_METHODS = ("abm", "welch2", "hht", "radau5", "newmark_gcp")

#: Constraint handlings of the methods that take one (the others enforce Φ = 0 themselves).
HANDLINGS = ("direct", "gcp", "hybrid")


@dataclass(frozen=True)
class Unit:
    """One two-step run: ``method`` on the warm-up model ``model`` with the constraint
    handling ``constraints`` (None where the method enforces the constraints itself)."""

    model: str
    method: str
    constraints: str | None

    @property
    def label(self) -> str:
        handling = f", {self.constraints}" if self.constraints else ""
        return f"{self.method} ({MODELS[self.model]}{handling})"

    @property
    def group(self) -> tuple[str, str, str | None]:
        """Units of one group compile the same integrator: one process runs them in
        order.  The fixed-step explicit methods share the ABM chunk; HHT-α and
        generalized-α, fixed or adaptive, the index-3 loop."""
        from mbdgen.methods import INDEX3_FAMILIES, METHODS

        method = METHODS[self.method]
        if self.model == KERNEL_MODEL:
            return (self.model, "kernels", None)
        if method.family in INDEX3_FAMILIES:
            family = "index3"
        elif method.family == "adaptive":
            family = self.method
        else:
            family = method.family if method.enforces_constraints else "explicit"
        model = self.model
        if self.constraints == "hybrid" or family in ("welch", "newmark_gcp"):
            # these run on dense matrices for every model: the sparse model's run takes
            # the dense one's integrator (and must not compile it at the same time)
            model = model.replace("warmup_chain", "warmup_pendulum")
        return (model, family, self.constraints)


def plan(methods: tuple[str, ...] | None = None) -> list[Unit]:
    """Every (model kind, method, constraint handling) whose integrator a user's run can
    need, for ``methods`` (default: every registered one)."""
    from mbdgen.methods import METHODS

    names = tuple(METHODS) if methods is None else methods
    units = []
    for model, kind in MODELS.items():
        stateful = "states" in kind
        for name in names:
            if model == KERNEL_MODEL:
                if name in KERNEL_METHODS:
                    units.append(Unit(model, name, None if name != "abm" else "direct"))
                continue
            method = METHODS[name]
            if stateful and not method.integrates_states:
                continue
            for handling in (None,) if method.enforces_constraints else HANDLINGS:
                units.append(Unit(model, name, handling))
    return units


#: CPU seconds of each group on an empty cache, quiet 2-core machine (``mbdgen warmup
#: --jobs 1 --force`` with an empty ``NUMBA_CACHE_DIR``, Numba 0.68: 582 s in all; the
#: spatial kernels' group, 70 s, measured after the others; the model kernels and the
#: post-processing counted in the group that compiled them first): the estimate of the
#: progress lines and of a first run's compile.  A group not listed counts
#: :data:`DEFAULT_ESTIMATE_S`.
ESTIMATE_S: dict[str, float] = {
    "warmup_chain/dop853/direct": 12.3,
    "warmup_chain/dop853/gcp": 17.8,
    "warmup_chain/explicit/direct": 19.8,
    "warmup_chain/explicit/gcp": 13.1,
    "warmup_chain/index3/None": 65.1,
    "warmup_chain/radau/None": 56.1,
    "warmup_chain/rkf45_adaptive/direct": 10.2,
    "warmup_chain/rkf45_adaptive/gcp": 15.6,
    "warmup_chain/vabm/direct": 9.1,
    "warmup_chain/vabm/gcp": 15.1,
    "warmup_chain_explicit/index3/None": 32.0,
    "warmup_chain_implicit/index3/None": 47.2,
    "warmup_pendulum/dop853/direct": 5.0,
    "warmup_pendulum/dop853/gcp": 6.8,
    "warmup_pendulum/dop853/hybrid": 8.6,
    "warmup_pendulum/explicit/direct": 5.1,
    "warmup_pendulum/explicit/gcp": 4.8,
    "warmup_pendulum/explicit/hybrid": 7.2,
    "warmup_pendulum/index3/None": 38.2,
    "warmup_pendulum/newmark_gcp/None": 22.0,
    "warmup_pendulum/radau/None": 30.9,
    "warmup_pendulum/rkf45_adaptive/direct": 3.6,
    "warmup_pendulum/rkf45_adaptive/gcp": 6.3,
    "warmup_pendulum/rkf45_adaptive/hybrid": 7.0,
    "warmup_pendulum/vabm/direct": 6.6,
    "warmup_pendulum/vabm/gcp": 5.7,
    "warmup_pendulum/vabm/hybrid": 7.1,
    "warmup_pendulum/welch/None": 12.3,
    "warmup_pendulum_explicit/index3/None": 34.5,
    "warmup_pendulum_implicit/index3/None": 50.5,
    "warmup_spatial/kernels/None": 69.7,
}
DEFAULT_ESTIMATE_S = 10.0


def _group_key(group: tuple[str, str, str | None]) -> str:
    return "/".join(str(v) for v in group)


def groups(units: list[Unit], jobs: int) -> list[list[Unit]]:
    """The units by :attr:`Unit.group`, the most expensive group first (so that the
    long ones start at once and the short ones fill the end), the element kernels'
    group last."""
    by_group: dict[tuple[str, str, str | None], list[Unit]] = {}
    for unit in units:
        by_group.setdefault(unit.group, []).append(unit)
    order = sorted(
        by_group,
        key=lambda g: (g[0] == KERNEL_MODEL, -ESTIMATE_S.get(_group_key(g), DEFAULT_ESTIMATE_S)),
    )
    return [by_group[g] for g in order]


def record_path() -> Path:
    """``warmup.json`` in this runtime's Numba cache folder."""
    from mbdgen._numba_cache import CACHE_DIR

    return Path(CACHE_DIR) / "warmup.json"


def modules_dir() -> Path:
    """Where the warm-up models' generated modules live: next to the Numba cache."""
    from mbdgen._numba_cache import CACHE_DIR

    return Path(CACHE_DIR) / "warmup-modules"


def done(units: list[Unit]) -> dict[str, Any] | None:
    """The record of a finished warm-up that covered ``units``, or None."""
    try:
        record = json.loads(record_path().read_text())
    except (OSError, ValueError):
        return None
    covered = {tuple(u) for u in record.get("units", [])}
    if all((u.model, u.method, u.constraints) in covered for u in units):
        return record
    return None


def unit_for(module: Any, method: str, constraints: str | None) -> Unit:
    """The warm-up unit whose integrator a run of ``method`` on ``module`` uses."""
    from mbdgen.methods import METHODS

    sparse = getattr(module, "LINEAR_ALGEBRA", "dense") == "sparse"
    name = "warmup_chain" if sparse else "warmup_pendulum"
    if getattr(module, "N_STATES", 0):
        name += "_implicit" if getattr(module, "IMPLICIT_STATES", False) else "_explicit"
    if METHODS[method].enforces_constraints:
        handling = None
    elif constraints in (None, "baumgarte"):
        handling = "direct"  # Baumgarte's gains are run-time values of the same chunk
    else:
        handling = constraints
    return Unit(name, method, handling)


def first_run_estimate(module: Any, method: str, constraints: str | None) -> float | None:
    """About how many CPU seconds (quiet 2-core machine) a run of ``method`` on
    ``module`` spends compiling its integrator, or None where a finished warm-up holds
    it (or the method is unknown: the run says so itself)."""
    from mbdgen.methods import METHODS

    if method not in METHODS:
        return None
    unit = unit_for(module, method, constraints)
    if done([unit]) is not None:
        return None
    return ESTIMATE_S.get(_group_key(unit.group), DEFAULT_ESTIMATE_S)


# -- in the worker processes ---------------------------------------------------------


def run_group(units: list[Unit], out_dir: str) -> list[dict[str, Any]]:
    """Run ``units`` in this process: per unit its CPU and wall seconds, the seconds
    inside Numba compilations, and "ok" or the error."""
    from numba.core import event

    import mbdgen

    compiling = [0, 0.0, 0.0]  # depth, began, total

    class _Listener(event.Listener):
        def on_start(self, e: Any) -> None:
            if compiling[0] == 0:
                compiling[1] = time.perf_counter()
            compiling[0] += 1

        def on_end(self, e: Any) -> None:
            compiling[0] -= 1
            if compiling[0] == 0:
                compiling[2] += time.perf_counter() - compiling[1]

    listener = _Listener()
    event.register("numba:compile", listener)
    rows = []
    try:
        for unit in units:
            compiling[2] = 0.0
            cpu, wall = time.process_time(), time.perf_counter()
            try:
                module = mbdgen.compile(MODELS_DIR / f"{unit.model}.py", out_dir, recompile=False)
                kwargs = {} if unit.constraints is None else {"constraints": unit.constraints}
                mbdgen.simulate(module, method=unit.method, h=1e-4, t_end=2e-4, **kwargs)
                outcome = "ok"
            except Exception as error:  # noqa: BLE001 - recorded per unit, not fatal
                outcome = f"{type(error).__name__}: {error}"
            rows.append(
                {
                    **asdict(unit),
                    "cpu_s": time.process_time() - cpu,
                    "wall_s": time.perf_counter() - wall,
                    "compile_s": compiling[2],
                    "outcome": outcome,
                }
            )
    finally:
        event.unregister("numba:compile", listener)
    return rows


# -- in the parent -----------------------------------------------------------------------


def _generate(out_dir: Path) -> None:
    """Generate the warm-up models' modules (in this process, before the workers start:
    two workers would write the same module)."""
    import mbdgen

    out_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    for model in MODELS:
        mbdgen.compile(MODELS_DIR / f"{model}.py", out_dir)


def _fmt(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def warm(
    methods: tuple[str, ...] | None = None,
    jobs: int | None = None,
    force: bool = False,
    echo: Callable[[str], None] = print,
    progress_s: float = PROGRESS_S,
) -> dict[str, Any]:
    """Compile every integrator the plan's units need (see the module docstring) and
    write the record; return it (``"units"``, ``"rows"``, ``"wall_s"``, ``"cpu_s"``,
    ``"jobs"``, ``"skipped"``: True where a finished warm-up already covered them)."""
    units = plan(methods)
    if not force:
        record = done(units)
        if record is not None:
            return {**record, "skipped": True}
    jobs = max(1, jobs or min(cores(), 4))
    began, cpu0 = time.perf_counter(), _children_cpu()
    out_dir = modules_dir()
    echo(f"warm-up: generating {len(MODELS)} small models in {out_dir} ...")
    _generate(out_dir)
    batches = groups(units, jobs)
    expected = sum(estimate(b) for b in batches) / jobs
    echo(
        f"warm-up: {len(units)} runs in {len(batches)} groups on {jobs} "
        f"process{'es' if jobs > 1 else ''}, "
        f"about {_fmt(expected)} on a quiet 2-core machine (Ctrl-C stops it; what is "
        "compiled stays cached)"
    )
    rows: list[dict[str, Any]] = []
    workers = [_Worker(out_dir) for _ in range(min(jobs, len(batches)))]
    try:
        queue = list(batches)
        idle = list(workers)
        running: dict[_Worker, tuple[list[Unit], float]] = {}
        last = time.perf_counter()
        while queue or running:
            while queue and idle:
                if queue[0][0].model == KERNEL_MODEL and running:
                    break  # after the integrators it takes: else two workers compile them
                worker, batch = idle.pop(), queue.pop(0)
                worker.send(batch)
                running[worker] = (batch, time.perf_counter())
            for worker in _ready(list(running), timeout=min(progress_s, 1.0)):
                rows += worker.receive()
                running.pop(worker)
                idle.append(worker)
            now = time.perf_counter()
            if now - last >= progress_s and running:
                last = now
                left = sum(estimate(b) for b in queue)
                left += sum(max(0.0, estimate(b) - (now - t)) for b, t in running.values())
                doing = ", ".join(b[0].label for b, _ in running.values())
                echo(
                    f"  ... {len(rows)} of {len(units)} runs done, {_fmt(now - began)} so far, "
                    f"about {_fmt(left / jobs)} left; compiling {doing}"
                )
    finally:
        for worker in workers:
            worker.close()
    failed = [r for r in rows if r["outcome"] != "ok"]
    if failed:
        first = failed[0]
        raise MbdgenError(
            f"warm-up: {len(failed)} of {len(rows)} runs failed, the first "
            f"{Unit(first['model'], first['method'], first['constraints']).label}: "
            f"{first['outcome']}"
        )
    before = done([]) or {}  # a record of other methods' warm-up stays covered
    covered = [list(u) for u in before.get("units", [])]
    covered += [[u.model, u.method, u.constraints] for u in units if [*astuple(u)] not in covered]
    record = {
        "units": covered,
        "rows": rows,
        "jobs": jobs,
        "wall_s": time.perf_counter() - began,
        "cpu_s": _children_cpu() - cpu0,
        "compile_s": sum(r["compile_s"] for r in rows),
    }
    _write_record(record)
    return {**record, "skipped": False}


class _Worker:
    """A ``python -m mbdgen.warmup OUT_DIR`` process: a group of units as a JSON line on
    its stdin, their rows as a JSON line on its stdout, until its stdin closes."""

    def __init__(self, out_dir: Path) -> None:
        env = {**os.environ, "MBDGEN_SPECIALIZE": "shared"}  # shared integrators only
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mbdgen.warmup", str(out_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )

    def send(self, batch: list[Unit]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps([asdict(u) for u in batch]) + "\n")
        self.process.stdin.flush()

    def receive(self) -> list[dict[str, Any]]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            raise MbdgenError(f"warm-up: a worker process ended with exit status {code}")
        rows: list[dict[str, Any]] = json.loads(line)
        return rows

    def close(self) -> None:
        """End the process: at once where it still works (an error, Ctrl-C)."""
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _ready(workers: list[_Worker], timeout: float) -> list[_Worker]:
    """The workers whose answer can be read, waiting up to ``timeout`` seconds."""
    if not workers:
        return []
    with selectors.DefaultSelector() as selector:
        for worker in workers:
            assert worker.process.stdout is not None
            selector.register(worker.process.stdout, selectors.EVENT_READ, worker)
        return [key.data for key, _ in selector.select(timeout)]


def cores() -> int:
    """The cores this process may use (all of them where the system cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def estimate(batch: list[Unit]) -> float:
    """The estimated CPU seconds of a group (:data:`ESTIMATE_S`)."""
    return ESTIMATE_S.get(_group_key(batch[0].group), DEFAULT_ESTIMATE_S)


def _children_cpu() -> float:
    """CPU seconds of this process and its ended children (the workers, once joined)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _write_record(record: dict[str, Any]) -> None:
    path = record_path()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(record, indent=1))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # the cache is warm all the same; the next call rechecks


def group_costs(rows: list[dict[str, Any]]) -> Iterator[tuple[str, float]]:
    """(group key, CPU seconds) of a record's rows: what :data:`ESTIMATE_S` holds."""
    totals: dict[str, float] = {}
    for r in rows:
        key = _group_key(Unit(r["model"], r["method"], r["constraints"]).group)
        totals[key] = totals.get(key, 0.0) + r["cpu_s"]
    yield from sorted(totals.items())


def _serve(out_dir: str) -> None:
    """The worker's loop (:class:`_Worker`)."""
    import warnings

    warnings.simplefilter("ignore")  # a two-step run's checks say nothing to anybody
    answers, sys.stdout = sys.stdout, sys.stderr  # stdout carries the answers alone
    for line in sys.stdin:
        units = [Unit(**u) for u in json.loads(line)]
        print(json.dumps(run_group(units, out_dir)), file=answers, flush=True)


if __name__ == "__main__":  # pragma: no cover - the worker process
    _serve(sys.argv[1])
