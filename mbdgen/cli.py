"""The ``mbdgen`` command line: compile, simulate, info, bench, and the analyses.

Every error a user can cause ends as one line on stderr and a non-zero exit code;
``--debug`` shows the traceback instead.  A run that fails, is interrupted (Ctrl-C)
or terminated (SIGTERM, as batch schedulers send) still writes what it computed to
the requested output file; output paths are checked before the run starts.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from mbdgen import __version__, interrupts
from mbdgen.errors import MbdgenError, SimulationError

if TYPE_CHECKING:
    from types import ModuleType

    import numpy as np

    from mbdgen.timing import CompileReport

_T = TypeVar("_T")

EXIT_ERROR = 1
#: A run that finished but failed its checks (--strict).
EXIT_CHECK = 3


class _State:
    debug = False


def _fail(exc: BaseException) -> None:
    if _State.debug:
        traceback.print_exception(exc)
    elif isinstance(exc, MbdgenError):
        click.echo(f"error: {exc}", err=True)
    elif isinstance(exc, OSError) and exc.strerror:
        # the user's file system said no (a permission, a file where a folder must be)
        where = f": {exc.filename!r}" if exc.filename else ""
        click.echo(f"error: {exc.strerror}{where}", err=True)
    else:
        click.echo(
            f"error: {type(exc).__name__}: {exc} (internal error; rerun with --debug for the "
            "traceback)",
            err=True,
        )
    sys.exit(EXIT_ERROR)


class _Group(click.Group):
    """Turns exceptions from any command into one-line messages."""

    def invoke(self, ctx: click.Context) -> object:
        interrupts.clear()
        try:
            with interrupts.interrupts_as_exceptions():
                return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except SystemExit:
            raise
        except KeyboardInterrupt as exc:
            _interrupted(exc)
        except BrokenPipeError:
            # the reader went away (`mbdgen methods | head`): not an error of ours
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)
        except Exception as exc:
            if interrupts.last_signal() is not None and not _State.debug:
                _interrupted(None)  # e.g. Numba's compiler wrapped the KeyboardInterrupt
            _fail(exc)
        return None


def _interrupted(exc: BaseException | None) -> None:
    """End like any interrupt: one line, exit 130 (Ctrl-C) or 143 (SIGTERM).

    Objects torn down half-built by the interrupt (llvmlite's, during a Numba
    compilation) may complain from their finalizers; those complaints are silenced.
    """
    sys.exit(_report_interrupt(exc))


def _report_interrupt(exc: BaseException | None) -> int:
    """Say how the command was stopped (one line) and return its exit code."""
    sys.unraisablehook = lambda unraisable: None
    with interrupts.ignored():
        click.echo(interrupts.describe(exc), err=True)
        return interrupts.exit_code(exc)


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="mbdgen")
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
def main(debug: bool) -> None:
    """mbdgen: compile SymPy multibody models to Numba kernels and simulate them."""
    _State.debug = debug
    click.get_current_context().with_resource(_warnings_as_lines())


@main.command("compile")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("-o", "--out-dir", default="generated", show_default=True, help="Output folder.")
@click.option("--force", is_flag=True, help="Regenerate even if the module is up to date.")
@click.option("--check", is_flag=True, help="Only check that the module is up to date (exit 1).")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Report each stage with its time: load, derive (per element type: cached or "
    "derived), cse, render, write (and jit with --jit).",
)
@click.option(
    "--jit",
    "jit",
    default=None,
    metavar="METHODS",
    help="Also JIT-compile these methods' entry points into Numba's disk cache (one "
    "step each, comma-separated, e.g. abm,vabm) and time each.",
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Derive every element type anew: neither read nor fill the element cache "
    "(also MBDGEN_NO_ELEMENT_CACHE=1).",
)
@click.option(
    "--precompile",
    "precompile",
    default=None,
    metavar="METHODS",
    help="Comma-separated methods whose JIT a detached background process does now "
    "(fills Numba's cache; e.g. abm,hht).",
)
def compile_cmd(
    model: str,
    out_dir: str,
    force: bool,
    check: bool,
    verbose: bool,
    jit: str | None,
    no_cache: bool,
    precompile: str | None = None,
) -> None:
    """Generate the kernel module of MODEL (a models/*.py file).

    An existing module that was edited by hand (its text does not match its stamp)
    is refused, and replaced only with --force; a file that is not a generated module
    is never written over.  Library element types are derived once per installation
    and kept in the element cache (~/.cache/mbdgen/elements, or
    MBDGEN_ELEMENT_CACHE_DIR); the generated module is the same with or without it.
    """
    from mbdgen.compiler import generate, generated_path, stale_reason
    from mbdgen.timing import CompileReport

    methods = _jit_methods(jit)
    background: tuple[str, ...] = ()
    if precompile:
        from mbdgen.precompile import parse_methods

        background = parse_methods(precompile)
    target = generated_path(model, out_dir)
    if check:
        reason = stale_reason(model, target)
        if reason is not None:
            raise MbdgenError(f"{target} is out of date: {reason}")
        click.echo(f"{target} is up to date")
        return
    report = CompileReport()
    if not force and stale_reason(model, target) is None:
        click.echo(f"{target} is up to date")
    else:
        path, written = generate(
            model, out_dir, report=report, element_cache=False if no_cache else None
        )
        click.echo(f"compiled {model} -> {path}" + ("" if written else " (unchanged)"))
    if methods:
        _jit_entry_points(target, methods, report)
    if verbose and report.stages:
        click.echo(report.table())
    if background:
        from mbdgen.precompile import start

        pid = start(model, out_dir, background)
        click.echo(f"precompiling {', '.join(background)} in the background (process {pid})")


def _jit_methods(jit: str | None) -> list[str]:
    """The method names of ``--jit`` (checked before any work)."""
    if jit is None:
        return []
    from mbdgen.methods import get_method

    names = [name.strip() for name in jit.split(",") if name.strip()]
    if not names:
        raise MbdgenError("--jit needs at least one method name, e.g. --jit abm,vabm")
    for name in names:
        get_method(name)
    return names


def _jit_entry_points(target: Path, methods: list[str], report: CompileReport) -> None:
    """Run one step of each method on the module at ``target`` (Numba compiles its entry
    point, or loads it from its disk cache) and record the time as a ``jit`` stage."""
    import time

    from mbdgen import specialize
    from mbdgen.compiler import import_generated
    from mbdgen.methods import get_method
    from mbdgen.simulation import simulate

    start = time.perf_counter()
    module = import_generated(target)
    report.add("import", time.perf_counter() - start, target.name)
    for name in methods:
        h = 1e-3
        start = time.perf_counter()
        with _CompileWatch(f"the {name} entry point"), specialize.policy_set("now"):
            simulate(module, method=name, h=h, t_end=h)
        report.add("jit", time.perf_counter() - start, f"{name}: {get_method(name).entry}")


def _compile(model: str, out_dir: str) -> ModuleType:
    """``mbdgen.compile`` that says on stderr when it generates a module (seconds to
    minutes) and how long that took; an up-to-date module is imported silently."""
    import time

    from mbdgen.compiler import compile as compile_model
    from mbdgen.compiler import generated_path, stale_reason

    target = generated_path(model, out_dir)
    reason = stale_reason(model, target) if Path(model).is_file() else None
    if reason is None:
        return compile_model(model, out_dir)
    click.echo(f"compiling {model} -> {target} ({reason}) ...", err=True)
    start = time.perf_counter()
    module = compile_model(model, out_dir)
    click.echo(f"compiled in {time.perf_counter() - start:.1f} s", err=True)
    return module


def _check_parameter_names(model: str, out_dir: str, names: Iterable[str]) -> None:
    """Refuse an unknown parameter name (-p NAME=...) before a stale model is compiled
    (seconds to minutes): the model file is loaded alone for its parameters' names,
    and a typo is answered with the nearest ones.  An up-to-date module is imported in
    moments and :func:`mbdgen.simulate` checks the names before it builds anything."""
    names = list(names)
    if not names or not Path(model).is_file():
        return
    from mbdgen.compiler import generated_path, stale_reason
    from mbdgen.inputs import check_names
    from mbdgen.model.loader import load_model

    if stale_reason(model, generated_path(model, out_dir)) is None:
        return
    loaded = load_model(model)
    check_names(loaded.name, names, [s.name for s in loaded.parameter_symbols])


#: Seconds between the lines that say a compilation is still running.
COMPILE_PROGRESS_S = 5.0


class _CompileWatch:
    """While active, say when Numba starts compiling — what, and that the result is
    cached for the next run — then the time it has taken every ``COMPILE_PROGRESS_S``
    seconds until it ends, and total the wall time of the outermost compilations.

    It listens to Numba's ``numba:compile`` events, which a compilation sends and a
    load from Numba's on-disk cache does not: a warm run says nothing and reports a
    load time, a cold one says that it compiles and for how long.  A timer would also
    fire on a slow warm start, and the time after the entry point is loaded leaves the
    compilation out.
    """

    def __init__(self, what: str, stream: Any = None, estimate_s: float | None = None) -> None:
        import threading

        from numba.core import event

        self.what = what
        self.stream = stream
        self.estimate_s = estimate_s  # the integrator's compile, quiet 2-core machine
        self._integrator_said = False
        self._integrator_began: float | None = None
        target = sys.stderr if stream is None else stream
        self._tty = bool(getattr(target, "isatty", lambda: False)())
        self._open_line = False  # a progress line on a terminal, to be overwritten
        self.seconds = 0.0  # wall time inside outermost compilations
        self.compiled = False
        self._depth = 0
        self._began = 0.0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._done = False
        self._event = event
        watch = self

        class _Listener(event.Listener):
            def on_start(self, e: Any) -> None:
                watch._start(e.data.get("dispatcher") if isinstance(e.data, dict) else None)

            def on_end(self, e: Any) -> None:
                watch._end()

        self._listener = _Listener()
        self._thread = threading.Thread(target=self._progress, daemon=True)

    def _echo(self, text: str) -> None:
        self._close_line()
        click.echo(text, err=True, file=self.stream)

    def _progress_line(self, text: str) -> None:
        """On a terminal one line rewritten in place, elsewhere a line each time."""
        if not self._tty:
            self._echo(text)
            return
        click.echo(f"\r{text}\x1b[K", err=True, file=self.stream, nl=False)
        self._open_line = True

    def _close_line(self) -> None:
        if self._open_line:
            self._open_line = False
            click.echo("", err=True, file=self.stream)

    def _start(self, dispatcher: Any = None) -> None:
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
        with self._lock:
            self._depth += 1
            if self._depth > 1:
                return
            self._began = time.perf_counter()
            first = not self.compiled
            self.compiled = True
            # mbdgen's own routines are the integrator; the rest the model's kernels
            integrator = module.startswith("mbdgen.")
            said = self._integrator_said
            if integrator and not said:
                self._integrator_began = self._began
                self._integrator_said = True
        if first:
            self._echo(f"compiling {self.what} (Numba; cached for the next run) ...")
        if integrator and not said and self.estimate_s is not None:
            self._echo(
                f"  the integrator takes about {self.estimate_s:.0f} s to compile on a quiet "
                "2-core machine (`mbdgen warmup` compiles every method's once per "
                "installation)"
            )
        self._wake.set()

    def _end(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                self.seconds += time.perf_counter() - self._began
                self._close_line()

    def _progress(self) -> None:
        while not self._done:
            self._wake.wait()
            self._wake.clear()
            while not self._done:
                with self._lock:
                    busy, began = self._depth > 0, self._began
                if not busy:
                    break
                if self._wake.wait(COMPILE_PROGRESS_S) or self._done:
                    self._wake.clear()
                    continue
                with self._lock:
                    if self._depth > 0:
                        total = self.seconds + time.perf_counter() - began
                        self._progress_line(f"  ... still compiling, {total:.0f} s so far"
                                            + self._left(total))  # fmt: skip

    def _left(self, so_far: float) -> str:
        """The estimate's part of a progress line (under the lock): what is left of the
        integrator's compile, once it has begun."""
        if self.estimate_s is None or self._integrator_began is None:
            return ""
        spent = time.perf_counter() - self._integrator_began
        if spent < self.estimate_s:
            return f", the integrator about {self.estimate_s - spent:.0f} s more"
        return f", the integrator past the {self.estimate_s:.0f} s of a quiet machine"

    def __enter__(self) -> _CompileWatch:
        self._event.register("numba:compile", self._listener)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._event.unregister("numba:compile", self._listener)
        self._done = True
        self._wake.set()
        with self._lock:
            self._close_line()

    def summary(self, setup_s: float) -> str:
        """The start-up part of the run's summary line."""
        if self.compiled:
            return f"+{self.seconds:.1f} s compiling, cached for the next run"
        return f"+{setup_s:.2f} s loading the compiled code"


def _parse_params(values: tuple[str, ...], flag: str = "--param") -> dict[str, float]:
    """``NAME=VALUE`` items of a repeated option (``flag`` names it in the messages)."""
    params: dict[str, float] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep:
            raise MbdgenError(f"{flag} {item!r}: write NAME=VALUE")
        try:
            number = float(value)
        except ValueError:
            raise MbdgenError(f"{flag} {item!r}: {value!r} is not a number") from None
        if not math.isfinite(number):
            text = value.strip()
            spelled = text.lower().lstrip("+-") in ("nan", "inf", "infinity")
            raise MbdgenError(
                f"{flag} {item!r}: {text!r} is not a finite number"
                + ("" if spelled else f" (it reads as {number!r})")
                + "; give a finite value"
            )
        params[name.strip()] = number
    return params


@main.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option(
    "--method", default="abm", show_default=True, help="Integration method (`mbdgen methods`)."
)
@click.option(
    "--order",
    default=None,
    type=int,
    help="Adams–Bashforth order k (default 4; vabm: the highest order, default 12).",
)
@click.option(
    "--h",
    "h",
    default=1e-3,
    show_default=True,
    type=float,
    help="Step (error-controlled methods such as vabm, dop853: the output interval).",
)
@click.option("--t-end", default=10.0, show_default=True, type=float, help="End time.")
@click.option("--alpha", default=0.0, show_default=True, type=float, help="Baumgarte α.")
@click.option("--beta", default=0.0, show_default=True, type=float, help="Baumgarte β.")
@click.option(
    "--constraints",
    type=click.Choice(["direct", "baumgarte", "gcp", "hybrid"]),
    default=None,
    help="Constraint handling (default: baumgarte if --alpha/--beta, else direct).",
)
@click.option(
    "--hht-alpha",
    default=None,
    type=float,
    help="HHT's α in [-1/3, 0] (--method hht; default -0.05): numerical damping.",
)
@click.option(
    "--rho-inf",
    default=None,
    type=float,
    help="Generalized-α's spectral radius ρ∞ in [0, 1] (--method genalpha; default 0.9): "
    "1 damps nothing, 0 most.",
)
@click.option(
    "--rtol", default=1e-6, show_default=True, type=float, help="Variable step: relative tol."
)
@click.option(
    "--atol", default=1e-6, show_default=True, type=float, help="Variable step: absolute tol."
)
@click.option(
    "--h-min",
    default=None,
    type=float,
    help="hht_adaptive, genalpha_adaptive, radau5: smallest step.",
)
@click.option(
    "--h-max",
    default=None,
    type=float,
    help="hht_adaptive, genalpha_adaptive, radau5: largest step.",
)
@click.option(
    "--raw-outputs",
    is_flag=True,
    help="hht_adaptive, genalpha_adaptive, radau5: keep the interpolated output rows "
    "(default: projected onto Φ = 0 and Φ_q q̇ + Φ_t = 0).",
)
@click.option(
    "--error-per-step",
    is_flag=True,
    help="hht_adaptive, genalpha_adaptive: hold each step's error to rtol (Negrut et al. "
    "2007) instead of rtol per unit step: fewer steps, a final error 10-10⁴ × rtol.",
)
@click.option("-p", "--param", "params", multiple=True, help="Override a parameter: NAME=VALUE.")
@click.option(
    "--x0",
    "x0",
    multiple=True,
    help="Initial value of a user state (hht, genalpha and their adaptive forms): NAME=VALUE.",
)
@click.option(
    "--q0",
    "q0",
    multiple=True,
    help="Initial value of a coordinate: NAME=VALUE (the others keep the model's q0).",
)
@click.option(
    "--qd0",
    "qd0",
    multiple=True,
    help="Initial velocity of a coordinate: NAME=VALUE (the others keep the model's q̇0).",
)
@click.option("--assemble", is_flag=True, help="Make q0, q̇0 consistent first (see `assemble`).")
@click.option("--hold", multiple=True, help="With --assemble: a coordinate kept at its q0.")
@click.option("--output-every", default=1, show_default=True, type=int, help="Record stride.")
@click.option("-o", "--output", default=None, help="Result file (.npz, .h5 or .csv).")
@click.option(
    "--stream/--no-stream",
    default=None,
    help="Keep the output rows on disk beside the -o FILE.h5 while the run goes, so that "
    "memory stays flat however long it is (default: when they would take more than a "
    "quarter of the memory available).",
)
@click.option("--plot", "plot_path", default=None, help="Also write a plot (.png, .pdf, .svg).")
@click.option("--out-dir", default="generated", show_default=True, help="Generated modules.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a tty).")
@click.option(
    "--phi-tol",
    default=1e-3,
    show_default=True,
    type=float,
    help="Warn when ‖Φ‖ exceeds this at t0 or during the run.",
)
@click.option(
    "--energy-tol",
    default=1e-3,
    show_default=True,
    type=float,
    help="Warn when the energy balance is off by more than this share of the energy.",
)
@click.option("--strict", is_flag=True, help=f"Exit {EXIT_CHECK} when a check warns (for CI use).")
@click.option(
    "--estimate-error",
    is_flag=True,
    help="Also estimate the global error of q and q̇ from a second solution (rtol/10 and "
    "atol/10, or h/2 at a fixed step); it costs that second run.",
)
def simulate(
    model: str,
    method: str,
    order: int | None,
    h: float,
    t_end: float,
    alpha: float,
    beta: float,
    constraints: str | None,
    hht_alpha: float | None,
    rho_inf: float | None,
    rtol: float,
    atol: float,
    h_min: float | None,
    h_max: float | None,
    raw_outputs: bool,
    error_per_step: bool,
    params: tuple[str, ...],
    x0: tuple[str, ...],
    q0: tuple[str, ...],
    qd0: tuple[str, ...],
    assemble: bool,
    hold: tuple[str, ...],
    output_every: int,
    output: str | None,
    stream: bool | None,
    plot_path: str | None,
    out_dir: str,
    progress: bool | None,
    phi_tol: float,
    energy_tol: float,
    strict: bool,
    estimate_error: bool,
) -> None:
    """Compile MODEL if needed and integrate it from its initial state."""
    import warnings

    from mbdgen.methods import get_method
    from mbdgen.results import PLOT_SUFFIXES, check_destination, settings_text
    from mbdgen.simulation import ConstraintWarning, OutputSizeWarning, check_tolerances
    from mbdgen.simulation import simulate as run

    check_tolerances(get_method(method), rtol, atol)
    if hold and not assemble:
        raise MbdgenError("--hold keeps coordinates during assembly: add --assemble")
    if error_per_step and method not in ("hht_adaptive", "genalpha_adaptive"):
        raise MbdgenError(
            f"--error-per-step applies to hht_adaptive and genalpha_adaptive, not {method}"
        )
    # a destination that cannot be written must fail now, not after the run
    if output:
        check_destination(output)
    hdf5 = bool(output) and Path(output).suffix.lower() in (".h5", ".hdf5")  # type: ignore[arg-type]
    if stream and not hdf5:
        raise MbdgenError(
            "--stream keeps the rows on disk beside the result file and writes it block by "
            "block: give -o FILE.h5 (.npz and .csv files are written from memory)"
        )
    if plot_path:
        check_destination(plot_path, PLOT_SUFFIXES)
    _check_parameter_names(model, out_dir, _parse_params(params))
    # NAME=VALUE as -p and --x0 (a sweep's q0.NAME): simulate() takes them by name
    initial = {"q0": _parse_params(q0, "--q0"), "qd0": _parse_params(qd0, "--qd0")}
    module = _compile(model, out_dir)
    if output and not stream:
        _warn_if_the_file_may_not_fit(module, h, t_end, output_every, output)
    if stream is None and hdf5:
        from mbdgen.simulation import output_bytes, too_large_for_memory

        need = output_bytes(module, h, t_end, output_every)
        stream = too_large_for_memory(need)
        if stream:
            from mbdgen.rowstore import bytes_text

            click.echo(
                f"note: the output rows (up to {bytes_text(need)}) stay on disk beside {output} "
                "while the run goes, not in memory (--no-stream: in memory)",
                err=True,
            )
    show = sys.stderr.isatty() if progress is None else progress
    bar = None
    from mbdgen.warmup import first_run_estimate

    estimate = first_run_estimate(module, method, constraints)
    # with a warm-up on record the integrator is cached: only the model's kernels compile
    integrator = "" if estimate is None else f" and the {method} integrator"
    notice = _CompileWatch(f"{module.MODEL_NAME}'s kernels{integrator}", estimate_s=estimate)
    if show:
        bar = click.progressbar(length=1000, label=f"{module.MODEL_NAME} t", file=sys.stderr)
        bar.__enter__()

    def callback(t: float, t_final: float) -> None:
        if bar is not None:
            bar.update(int(1000 * t / t_final) - bar.pos)

    caught: list[warnings.WarningMessage] = []

    def collect(
        message: Warning | str, category: type[Warning], filename: str, lineno: int, *_: object
    ) -> None:
        """Warnings are shown after the run with its checks, but the output's size
        (said before the first step) now: a long run is the one it is about."""
        if issubclass(category, OutputSizeWarning):
            click.echo(("\n" if bar is not None else "") + f"warning: {message}", err=True)
        else:
            caught.append(warnings.WarningMessage(message, category, filename, lineno))

    try:
        with notice, warnings.catch_warnings():
            warnings.simplefilter("always", ConstraintWarning)
            warnings.simplefilter("always", OutputSizeWarning)
            warnings.showwarning = collect  # type: ignore[assignment]  # extra args: *_
            result = run(
                module,
                method=method,
                order=order,
                h=h,
                t_end=t_end,
                alpha=alpha,
                beta=beta,
                constraints=constraints,
                hht_alpha=hht_alpha,
                rho_inf=rho_inf,
                rtol=rtol,
                atol=atol,
                options={
                    **{k: v for k, v in (("h_min", h_min), ("h_max", h_max)) if v is not None},
                    **({"project_outputs": False} if raw_outputs else {}),
                    **({"error_per_unit_step": False} if error_per_step else {}),
                },
                assemble=list(hold) if assemble else False,
                params=_parse_params(params),
                x0=_parse_params(x0, "--x0") or None,
                q0=initial["q0"] or None,
                qd0=initial["qd0"] or None,
                output_every=output_every,
                progress=callback,
                phi_tol=phi_tol,
                energy_tol=energy_tol,
                stream_to=output if stream else None,
                error_estimate=estimate_error,
            )
    except SimulationError as exc:
        stopped = exc.reason in ("interrupted", "terminated")
        # a further Ctrl-C must not cost the steps computed: it is held until the file
        # is whole (then it ends a failed run's command with 130; a stopped run exits
        # with its own interrupt's code anyway)
        with interrupts.held(reraise=not stopped):
            if bar is not None:
                bar.__exit__(None, None, None)
            # the run's own message first, then what became of its partial result
            click.echo(f"error: {exc}", err=True)
            if exc.result is not None and output:
                _save_partial(exc.result, output)
        sys.exit(interrupts.exit_code() if stopped else 1)
    if bar is not None:
        bar.__exit__(None, None, None)
    c = result.counters
    click.echo(
        f"{module.MODEL_NAME}: {c['steps']} steps of {settings_text(result.info)}; "
        f"to t={t_end:g} "
        f"in {c['wall_time_s']:.3f} s ({notice.summary(c['setup_time_s'])}); "
        f"max ‖Φ‖ = {result.phi_norm.max():.3e}, "
        f"final ‖Φ‖ = {result.phi_norm[-1]:.3e}"
    )
    estimate = result.info.get("error_estimate")
    if estimate and "max_q" in estimate:
        click.echo(
            f"estimated global error ({estimate['by']}, {estimate['steps']} steps, "
            f"{estimate['time_s']:.3g} s): max |δq| = {estimate['max_q']:.2e} "
            f"({estimate['coordinate']} at t = {estimate['t']:.6g}), at t_end "
            f"{estimate['final_q']:.2e}; max |δq̇| = {estimate['max_qd']:.2e}"
        )
    if get_method(method).error_controlled:
        from mbdgen.accuracy import note

        measured = note(method, rtol, per_step=error_per_step)
        if measured is not None:
            click.echo(f"note: {measured}", err=True)
    if result.info.get("removed_constraints"):
        click.echo(
            f"note: redundant constraint row(s) {', '.join(result.info['removed_constraints'])} "
            "were left out (λ = 0); reactions of "
            f"{', '.join(result.info['lambda_not_unique'])} are not unique"
        )
    # the run's checks; another library's warning is shown but fails no --strict
    checks = [w for w in caught if issubclass(w.category, ConstraintWarning)]
    for w in caught:
        own = w in checks or w.category.__module__.startswith("mbdgen")
        kind = "" if own else f" ({w.category.__name__})"
        click.echo(f"warning{kind}: {w.message}", err=True)
    if output:
        with interrupts.held():  # a Ctrl-C now stops the command once the file is whole
            click.echo(f"wrote {result.save(output)}")
    if plot_path:
        from mbdgen.plot import plot_result

        click.echo(f"wrote {plot_result(result, plot_path)}")
    if strict and checks:
        click.echo(f"error: --strict: {len(checks)} check(s) failed (see the warnings)", err=True)
        sys.exit(EXIT_CHECK)


def _warn_if_the_file_may_not_fit(
    module: Any, h: float, t_end: float, output_every: int, output: str
) -> None:
    """A warning before the run when the result file may not fit where it goes: its
    rows, uncompressed, take more than the folder's free space (a file written from
    memory is written after the run, and a full disk then loses the run)."""
    from mbdgen.rowstore import bytes_text, free_bytes
    from mbdgen.simulation import output_bytes

    need, free = output_bytes(module, h, t_end, output_every), free_bytes(Path(output).parent)
    if free is not None and need > free:
        click.echo(
            f"warning: the result may not fit in {str(Path(output).parent)!r}: its rows take up "
            f"to {bytes_text(need)} and {bytes_text(free)} are free there; the file is written "
            "after the run, which a full disk would lose (with -o FILE.h5, --stream reserves "
            "the space before the first step)",
            err=True,
        )


def _save_partial(result: object, output: str) -> None:
    """Save a stopped run's partial result, saying what was saved (or why it was not)."""
    from mbdgen.results import Result

    assert isinstance(result, Result)
    rows, steps = len(result), result.counters.get("steps", 0)
    if not rows:  # stopped while compiling: an empty file must not replace a good one
        click.echo(f"nothing was computed before the stop; {output} was left as it was", err=True)
        return
    span = f"t = {result.t[0]:.6g} to {result.t[-1]:.6g}"
    try:
        saved = result.save(output)
    except MbdgenError as exc:
        click.echo(f"error: the partial result was not saved: {exc}", err=True)
        return
    click.echo(f"saved {rows} output row(s) ({steps} steps, {span}) to {saved}", err=True)


@main.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--out-dir", default="generated", show_default=True, help="Generated modules.")
def info(model: str, out_dir: str) -> None:
    """Describe MODEL: bodies, joints, coordinates, parameters, constraints, degrees of
    freedom and redundancy (rank of Φ_q at q0)."""
    import numpy as np

    from mbdgen.analysis.assembly import RANK_TOL, dependent_rows, redundant_rows
    from mbdgen.inputs import parameter_vector
    from mbdgen.model.elements import element_type
    from mbdgen.model.loader import load_model
    from mbdgen.model.mechanism import Mechanism

    mdl = load_model(model)
    module = _compile(model, out_dir)
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    click.echo(f"model {mdl.name}: {mdl.description}")
    if isinstance(mdl, Mechanism):
        click.echo(f"bodies ({len(mdl.bodies)}):")
        for b in mdl.bodies:
            mass = mdl.parameters[b.inertia["m"]]
            click.echo(f"  {b.name:<16} {b.kind:<8} m = {mass:g}")
        click.echo(f"joints, drivers and forces ({len(mdl.elements) - len(mdl.bodies)}):")
        for e, row, k in mdl.element_rows():
            if e.role == "body":
                continue
            bodies = " – ".join(b.name for b in e.bodies)
            rows = f"rows {row}-{row + k - 1}" if k else "no constraint rows"
            click.echo(f"  {e.name:<16} {e.role:<7} {element_type(e).name:<24} {bodies} ({rows})")
        types = getattr(module, "ELEMENT_TYPE_NAMES", ())
        click.echo(f"element types ({len(types)}): {', '.join(types)}")
    click.echo(f"coordinates ({n}): {', '.join(module.COORDINATE_NAMES)}")
    params = ", ".join(
        f"{name}={v:g}" for name, v in zip(module.PARAMETER_NAMES, module.P_DEFAULT, strict=True)
    )
    click.echo(f"parameters ({len(module.PARAMETER_NAMES)}): {params or '(none)'}")
    if getattr(module, "N_STATES", 0):
        initial = ", ".join(
            f"{name}(t0)={v:g}" for name, v in zip(module.STATE_NAMES, module.X0, strict=True)
        )
        click.echo(f"user states ({module.N_STATES}): {initial}")
    click.echo(f"constraints ({m}):")
    if not isinstance(mdl, Mechanism):
        constraints: Any = mdl.constraints
        for i, c in enumerate(constraints):
            click.echo(f"  Φ[{i}] = {c}")
    else:
        click.echo("  " + ", ".join(module.CONSTRAINT_NAMES))
    p = parameter_vector(module, None)
    q0 = np.array(module.Q0, dtype=float)
    phi_q = np.zeros((m, n))
    phi0 = np.zeros(m)
    with _CompileWatch(f"{module.MODEL_NAME}'s Φ and Φ_q"):
        module.phi_q(0.0, q0, p, phi_q)
        module.phi(0.0, q0, p, phi0)
    rank, redundant = redundant_rows(phi_q)
    click.echo(f"rank of Φ_q at q0: {rank} of {m} constraints (tolerance {RANK_TOL:g}·‖Φ_q‖)")
    click.echo(f"degrees of freedom: {n - rank}")
    if redundant:
        names = module.CONSTRAINT_NAMES
        involved = []
        for i in dependent_rows(phi_q):
            label = names[i].split("[", 1)[0]
            if label not in involved:
                involved.append(label)
        click.echo(
            f"warning: {len(redundant)} constraint row(s) are redundant at q0: "
            f"{', '.join(names[i] for i in redundant)}; joints involved: {', '.join(involved)}"
        )
    click.echo(f"‖Φ(q0, 0)‖ = {float(np.linalg.norm(phi0)):.3e}")


@main.command("assemble")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--hold", multiple=True, help="A coordinate kept at its q0 (repeatable).")
@click.option("-p", "--param", "params", multiple=True, help="Override a parameter: NAME=VALUE.")
@click.option("--q0", "q0", multiple=True, help="Start value of a coordinate: NAME=VALUE.")
@click.option("--qd0", "qd0", multiple=True, help="Start velocity of a coordinate: NAME=VALUE.")
@click.option("--out-dir", default="generated", show_default=True, help="Generated modules.")
def assemble_cmd(
    model: str,
    hold: tuple[str, ...],
    params: tuple[str, ...],
    q0: tuple[str, ...],
    qd0: tuple[str, ...],
    out_dir: str,
) -> None:
    """Consistent initial positions, velocities, accelerations and multipliers of MODEL."""
    from mbdgen.analysis.assembly import assemble
    from mbdgen.inputs import coordinate_vector

    given = {"q0": _parse_params(q0, "--q0"), "qd0": _parse_params(qd0, "--qd0")}
    module = _compile(model, out_dir)
    a = assemble(
        module,
        q0=coordinate_vector(module, given["q0"], module.Q0, "q0"),
        qd0=coordinate_vector(module, given["qd0"], module.QD0, "qd0"),
        hold=hold,
        params=_parse_params(params),
    )
    click.echo(
        f"{module.MODEL_NAME}: assembled in {a.iterations} Newton iteration(s), "
        f"‖Φ‖ = {a.residual:.2e}; degrees of freedom {a.dof} (rank Φ_q = {a.rank})"
    )
    if a.redundant:
        click.echo(a.redundancy_message())
    width = max(len(c) for c in module.COORDINATE_NAMES)
    click.echo(f"{'':<{width}}  {'q':>14}  {'q̇':>14}  {'q̈':>14}")
    for i, name in enumerate(module.COORDINATE_NAMES):
        click.echo(f"{name:<{width}}  {a.q[i]:>14.10g}  {a.qd[i]:>14.10g}  {a.qdd[i]:>14.10g}")
    _echo_multipliers(module, a.lam)


def _echo_multipliers(module: ModuleType, lam: np.ndarray) -> None:
    """One line per multiplier: its row, its unit and what the row is (a joint's
    position or angle row, a body's Euler-parameter normalization; mbdgen.units)."""
    from mbdgen.units import multipliers

    rows = multipliers(module)
    heads = [f"λ {r.name} [{r.unit}]" if r.unit else f"λ {r.name}" for r in rows]
    width = max(map(len, heads), default=0)
    for r, head, value in zip(rows, heads, lam, strict=True):
        what = [] if r.unit else ["unit unknown"]
        what += [r.kind] if r.kind else []
        click.echo(f"{head:<{width}} = {value:>17.10g}  ({'; '.join(what)})")


def _time_options(f: Callable[..., None]) -> Callable[..., None]:
    """The time grid and model options shared by `kinematics` and `inverse`."""
    for option in reversed(
        [
            click.option("--t-end", default=1.0, show_default=True, type=float, help="End time."),
            click.option("--h", "h", default=None, type=float, help="Output step."),
            click.option(
                "--steps", default=None, type=int, help="Number of steps (default 100 without --h)."
            ),
            click.option("--t0", default=0.0, show_default=True, type=float, help="Start time."),
            click.option(
                "-p", "--param", "params", multiple=True, help="Override a parameter: NAME=VALUE."
            ),
            click.option("-o", "--output", default=None, help="Result file (.npz, .h5 or .csv)."),
            click.option(
                "--out-dir", default="generated", show_default=True, help="Generated modules."
            ),
        ]
    ):
        f = option(f)
    return f


def _kinematic_run(run: Callable[[], _T], output: str | None) -> _T:
    """Run a kinematic analysis; on a singular configuration save what was computed."""
    from mbdgen.analysis.kinematics import SingularConfigurationError

    try:
        return run()
    except SingularConfigurationError as exc:
        if output and exc.result is not None and len(exc.result):  # type: ignore[arg-type]
            with interrupts.held():
                saved = exc.result.save(output)  # type: ignore[attr-defined]
            click.echo(
                f"saved the {len(exc.result)} output times before the singular configuration "  # type: ignore[arg-type]
                f"to {saved}",
                err=True,
            )
        raise


@main.command("kinematics")
@click.argument("model", type=click.Path(dir_okay=False))
@_time_options
def kinematics_cmd(
    model: str,
    t_end: float,
    h: float | None,
    steps: int | None,
    t0: float,
    params: tuple[str, ...],
    output: str | None,
    out_dir: str,
) -> None:
    """Kinematic analysis of a driven MODEL: q, q̇, q̈ from Φ = 0, Φ_q q̇ = ν, Φ_q q̈ = γ."""
    from mbdgen.analysis.kinematics import kinematics
    from mbdgen.results import check_destination

    if output:
        check_destination(output)  # a bad -o fails before the compile and the run
    module = _compile(model, out_dir)
    r = _kinematic_run(
        lambda: kinematics(module, t_end, h, steps=steps, t0=t0, params=_parse_params(params)),
        output,
    )
    c = r.counters
    click.echo(
        f"{module.MODEL_NAME}: kinematic analysis, {c['steps']} steps of h={r.info['h']:g} "
        f"to t={t_end:g}, {c['newton_iterations']} Newton iterations; "
        f"max ‖Φ‖ = {r.phi_norm.max():.2e}; largest condition number of Φ_q "
        f"{c['max_condition']:.3g} at t = {r.info['max_condition_t']:g}"
    )
    width = max(len(name) for name in module.COORDINATE_NAMES)
    click.echo(f"at t = {r.t[-1]:g}:")
    click.echo(f"{'':<{width}}  {'q':>14}  {'q̇':>14}  {'q̈':>14}")
    for i, name in enumerate(module.COORDINATE_NAMES):
        click.echo(
            f"{name:<{width}}  {r.q[-1, i]:>14.10g}  {r.qd[-1, i]:>14.10g}  {r.qdd[-1, i]:>14.10g}"
        )
    if output:
        with interrupts.held():
            click.echo(f"wrote {r.save(output)}")


@main.command("inverse")
@click.argument("model", type=click.Path(dir_okay=False))
@_time_options
@click.option(
    "--driver",
    "drivers",
    multiple=True,
    help="A constraint row (label or index) to report (default: the rheonomic rows).",
)
def inverse_cmd(
    model: str,
    t_end: float,
    h: float | None,
    steps: int | None,
    t0: float,
    params: tuple[str, ...],
    output: str | None,
    out_dir: str,
    drivers: tuple[str, ...],
) -> None:
    """Inverse dynamics of a driven MODEL: multipliers and driving forces along its motion."""
    from mbdgen.analysis.inverse import inverse_dynamics
    from mbdgen.results import check_destination

    if output:
        check_destination(output)  # a bad -o fails before the compile and the run
    module = _compile(model, out_dir)
    rows = [int(d) if d.isdigit() else d for d in drivers] or None
    r = _kinematic_run(
        lambda: inverse_dynamics(
            module, t_end, h, steps=steps, t0=t0, params=_parse_params(params), drivers=rows
        ),
        output,
    )
    labels = r.driver_labels()  # name [unit] of each driver row
    click.echo(
        f"{module.MODEL_NAME}: inverse dynamics at {len(r.t)} times to t={t_end:g}; "
        f"max residual of Φ_qᵀλ = Q − M q̈ {r.info['max_residual']:.2e}"
    )
    if not labels:
        click.echo("no driver rows (no constraint depends on t); name rows with --driver")
    else:
        click.echo("driving forces −λ of the driver rows (N for a row in m, N·m in rad):")
        width = max(14, *(len(s) for s in labels))
        click.echo(f"{'t':>12}  " + "  ".join(f"{s:>{width}}" for s in labels))
        stride = max(1, (len(r.t) - 1) // 10)
        shown = sorted({*range(0, len(r.t), stride), len(r.t) - 1})
        driving = r.driving
        for j in shown:
            click.echo(f"{r.t[j]:>12.6g}  " + "  ".join(f"{v:>{width}.10g}" for v in driving[j]))
    if output:
        with interrupts.held():
            click.echo(f"wrote {r.save(output)}")


@main.command("equilibrium")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option(
    "--method",
    type=click.Choice(["minimize", "settle"]),
    default="minimize",
    show_default=True,
    help="Minimum potential energy (Haug 1989 §7.5) or damped dynamic settling.",
)
@click.option("--t", "t", default=0.0, show_default=True, type=float, help="Time of the forces.")
@click.option(
    "--damping", default=1.0, show_default=True, type=float, help="settle: c of −c M q̇ (1/s)."
)
@click.option(
    "--gtol", default=1e-10, show_default=True, type=float, help="minimize: gradient tolerance."
)
@click.option("-p", "--param", "params", multiple=True, help="Override a parameter: NAME=VALUE.")
@click.option("--out-dir", default="generated", show_default=True, help="Generated modules.")
def equilibrium_cmd(
    model: str,
    method: str,
    t: float,
    damping: float,
    gtol: float,
    params: tuple[str, ...],
    out_dir: str,
) -> None:
    """An equilibrium configuration of MODEL near its q0."""
    from mbdgen.analysis.equilibrium import equilibrium

    module = _compile(model, out_dir)
    e = equilibrium(
        module, method=method, t=t, damping=damping, gtol=gtol, params=_parse_params(params)
    )
    how = (
        f"{e.iterations} BFGS iteration(s), {e.evaluations} gradient evaluations"
        if method == "minimize"
        else f"settled in {e.settle_time:.4g} s of damped motion ({e.evaluations} evaluations)"
    )
    click.echo(
        f"{module.MODEL_NAME}: equilibrium by {method}, {how}; ‖dV/dv‖∞ = {e.residual:.2e}, "
        f"‖Φ‖∞ = {e.phi_norm:.2e}; independent coordinates: {', '.join(e.independent) or '-'}"
    )
    width = max(len(name) for name in module.COORDINATE_NAMES)
    for name, value in zip(module.COORDINATE_NAMES, e.q, strict=True):
        click.echo(f"{name:<{width}}  {value:>18.12g}")
    _echo_multipliers(module, e.lam)


def _linearize_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options ``linearize`` and ``modes`` share."""
    for option in reversed(
        (
            click.option("-p", "--param", "params", multiple=True, help="A parameter: NAME=VALUE."),
            click.option(
                "--q0",
                "q0",
                multiple=True,
                help="The guess of the equilibrium (or with --at-q0 the point): NAME=VALUE.",
            ),
            click.option(
                "--at-q0",
                is_flag=True,
                help="Linearize at q0 itself (it must be an equilibrium) instead of the "
                "equilibrium found near it.",
            ),
            click.option(
                "--input",
                "inputs",
                multiple=True,
                help="A coordinate on which an input generalized force acts (a column of B).",
            ),
            click.option("--t", "t", default=0.0, show_default=True, type=float, help="Time."),
            click.option(
                "--out-dir", default="generated", show_default=True, help="Generated modules."
            ),
        )
    ):
        command = option(command)
    return command


def _linear_model(
    model: str,
    params: tuple[str, ...],
    q0: tuple[str, ...],
    at_q0: bool,
    inputs: tuple[str, ...],
    t: float,
    out_dir: str,
) -> Any:
    """Compile MODEL and linearize it; print the operating point and the modes."""
    from mbdgen.analysis.linearize import linearize

    _check_parameter_names(model, out_dir, _parse_params(params))
    module = _compile(model, out_dir)
    lin = linearize(
        module,
        _parse_params(q0, "--q0") or None,
        params=_parse_params(params),
        t=t,
        find_equilibrium=not at_q0,
        inputs=inputs,
    )
    where = "q0" if at_q0 else "the equilibrium found near q0"
    click.echo(
        f"{module.MODEL_NAME}: linearized at {where} (static force left {lin.residual:.1e}); "
        f"{len(lin.independent)} degree(s) of freedom, independent coordinates "
        f"{', '.join(lin.independent)}"
    )
    width = max(len(name) for name in lin.coordinates)
    for name, value in zip(lin.coordinates, lin.q, strict=True):
        click.echo(f"  {name:<{width}}  {value:>18.12g}")
    click.echo(lin.table())
    unstable = lin.unstable
    if unstable:
        worst = max(mode.eigenvalue.real for mode in unstable)
        click.echo(
            f"warning: the equilibrium is unstable: {len(unstable)} mode(s) grow, the fastest "
            f"at Re λ = {worst:.4g} 1/s (a maximum or saddle of the potential, or a flutter)",
            err=True,
        )
    return lin


@main.command("linearize")
@click.argument("model", type=click.Path(dir_okay=False))
@_linearize_options
@click.option(
    "-o",
    "--output",
    default=None,
    help="Write A, B, C, D, H, mass, damping, stiffness, q, lam, eigenvalues (.npz).",
)
def linearize_cmd(
    model: str,
    params: tuple[str, ...],
    q0: tuple[str, ...],
    at_q0: bool,
    inputs: tuple[str, ...],
    t: float,
    out_dir: str,
    output: str | None,
) -> None:
    """The linear state-space model of MODEL about an equilibrium, exact from its
    generated Jacobian blocks: ẋ = A x + B u, x the independent coordinates and their
    rates, u generalized forces on the --input coordinates, y = [δq; δq̇]."""
    if output:
        from mbdgen.results import check_destination

        check_destination(output, (".npz",))  # before the work, as simulate's -o
    lin = _linear_model(model, params, q0, at_q0, inputs, t, out_dir)
    if output:
        with interrupts.held():
            click.echo(f"wrote {lin.save(output)}")
    else:
        click.echo(
            f"(-o FILE.npz writes A ({lin.A.shape[0]}×{lin.A.shape[1]}), B, C, D and the rest)"
        )


@main.command("modes")
@click.argument("model", type=click.Path(dir_okay=False))
@_linearize_options
@click.option(
    "--sweep",
    default=None,
    metavar="NAME=START:STOP:COUNT",
    help="The eigenvalues against a parameter, COUNT values from START to STOP.",
)
@click.option(
    "--animate",
    "animate_mode",
    default=None,
    type=click.IntRange(min=1),
    help="Animate mode K of the table (with -o FILE.gif or .mp4).",
)
@click.option(
    "--amplitude",
    default=0.1,
    show_default=True,
    type=float,
    help="With --animate: the largest coordinate's excursion (its unit: m or rad).",
)
@click.option(
    "-o", "--output", default=None, help="With --sweep: the table (.csv); with --animate: .gif."
)
@click.option("--plot", "plot_path", default=None, help="With --sweep: Re, Im λ (.png, .pdf).")
def modes_cmd(
    model: str,
    params: tuple[str, ...],
    q0: tuple[str, ...],
    at_q0: bool,
    inputs: tuple[str, ...],
    t: float,
    out_dir: str,
    sweep: str | None,
    animate_mode: int | None,
    amplitude: float,
    output: str | None,
    plot_path: str | None,
) -> None:
    """The modes of MODEL about an equilibrium: natural frequency, damping ratio,
    eigenvalue and the coordinates that move most; with --sweep, the eigenvalues
    against a parameter (a table, -o as .csv, --plot as a picture)."""
    from mbdgen.results import PLOT_SUFFIXES, check_destination

    if animate_mode is not None:
        from mbdgen.analysis.linearize import mode_motion
        from mbdgen.animation import ANIMATION_SUFFIXES, animate

        if sweep is not None or plot_path:
            raise MbdgenError("--animate draws one mode: leave out --sweep and --plot")
        if not output:
            raise MbdgenError("--animate needs -o FILE.gif (or .mp4)")
        check_destination(output, ANIMATION_SUFFIXES)
        lin = _linear_model(model, params, q0, at_q0, inputs, t, out_dir)
        motion = mode_motion(_compile(model, out_dir), lin, animate_mode, amplitude=amplitude)
        click.echo(f"wrote {animate(motion, output)} ({motion.info['message']})")
        return
    if sweep is None:
        if output or plot_path:
            raise MbdgenError(
                "-o and --plot go with --sweep NAME=START:STOP:COUNT (or -o with --animate K)"
            )
        _linear_model(model, params, q0, at_q0, inputs, t, out_dir)
        return
    from mbdgen.analysis.linearize import eigenvalue_text, sweep_modes

    name, grid = _parse_sweep(sweep)
    if output:
        check_destination(output, (".csv",))
    if plot_path:
        check_destination(plot_path, PLOT_SUFFIXES)
    _check_parameter_names(model, out_dir, {**_parse_params(params), name: 0.0})
    module = _compile(model, out_dir)
    result = sweep_modes(
        module,
        name,
        grid,
        _parse_params(q0, "--q0") or None,
        params=_parse_params(params),
        t=t,
        find_equilibrium=not at_q0,
    )
    stride = max(1, grid.size // 20)
    shown_rows = "" if stride == 1 else f"; every {stride}th value shown, all of them in -o"
    click.echo(
        f"{module.MODEL_NAME}: eigenvalues [1/s] of the linear model at {grid.size} values of "
        f"{name} (those with Im λ ≥ 0{shown_rows})"
    )
    for i in sorted({*range(0, grid.size, stride), grid.size - 1}):
        text = ", ".join(eigenvalue_text(v, 5) for v in result.eigenvalues[i] if v.imag >= 0.0)
        click.echo(f"  {name} = {grid[i]:<10.6g} {text}")
    if output:
        click.echo(f"wrote {result.save(output)}")
    if plot_path:
        click.echo(f"wrote {result.plot(plot_path)}")


def _parse_sweep(text: str) -> tuple[str, np.ndarray]:
    """``NAME=START:STOP:COUNT`` as the name and COUNT values from START to STOP."""
    import numpy as np

    name, _, spec = text.partition("=")
    parts = spec.split(":")
    try:
        start, stop, count = float(parts[0]), float(parts[1]), int(parts[2])
        if len(parts) != 3 or count < 1:
            raise ValueError
    except (ValueError, IndexError):
        raise MbdgenError(
            f"--sweep {text!r}: give NAME=START:STOP:COUNT, e.g. v=0:10:101"
        ) from None
    return name.strip(), np.linspace(start, stop, count)


def _write_json(path: str, value: object) -> None:
    """``value`` as indented JSON in ``path``, atomically (a full disk: one line)."""
    import json

    from mbdgen.fileio import atomic_write

    with atomic_write(path, "w") as fh:
        fh.write(json.dumps(value, indent=2))


@main.command()
def methods() -> None:
    """List the registered integration methods."""
    from mbdgen.methods import METHODS

    width = max(len(name) for name in METHODS)
    for m in METHODS.values():
        orders = ", ".join(map(str, m.orders))
        click.echo(f"{m.name:<{width}}  k in {{{orders}}}  {m.description}")


@main.command("warmup")
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Processes that compile at once (default: the cores, at most 4).",
)
@click.option(
    "--methods",
    "methods_",
    default=None,
    metavar="METHODS",
    help="Comma-separated methods (default: every registered one).",
)
@click.option("--force", is_flag=True, help="Compile again where a finished warm-up is recorded.")
@click.option("--list", "list_", is_flag=True, help="Print what it would run; compile nothing.")
def warmup_cmd(jobs: int | None, methods_: str | None, force: bool, list_: bool) -> None:
    """Compile every registered method's integrators into Numba's cache, once per
    installation (`make demo` runs it).

    Afterwards a new model's first run, planar or spatial, with any method, compiles
    the model's own kernels (seconds) and no integrator.  It steps small models of
    each kind (dense and sparse, without and with user states) twice with each method
    and constraint handling, in parallel processes, and says what it compiles and
    about how long is left every 5 s.  A finished warm-up is recorded in the cache
    folder: running it again does nothing until the runtime or Numba changes.
    """
    from mbdgen import warmup

    selected = None
    if methods_:
        from mbdgen.precompile import parse_methods

        selected = parse_methods(methods_)
    if list_:
        units = warmup.plan(selected)
        for batch in warmup.groups(units, jobs or 1):
            labels = ", ".join(u.method + (f"/{u.constraints}" if u.constraints else "")
                               for u in batch)  # fmt: skip
            click.echo(f"{warmup.MODELS[batch[0].model]:<24} about "
                       f"{warmup.estimate(batch):5.0f} s CPU  {labels}")  # fmt: skip
        return
    record = warmup.warm(selected, jobs=jobs, force=force, echo=lambda s: click.echo(s, err=True))
    where = warmup.record_path().parent
    if record["skipped"]:
        click.echo(
            f"warm-up: already done for this installation ({len(record['rows'])} runs, "
            f"{record['cpu_s']:.0f} s CPU; cache {where}); --force compiles again"
        )
        return
    click.echo(
        f"warm-up: {len(record['rows'])} runs in {record['wall_s']:.0f} s "
        f"({record['cpu_s']:.0f} s CPU on {record['jobs']} processes, "
        f"{record['compile_s']:.0f} s of it compiling); cache {where}"
    )


@main.command()
@click.option("--quick", is_flag=True, help="Fewer steps and repeats (a smoke run).")
@click.option("-o", "--output", default=None, help="Also write the numbers as JSON.")
@click.option(
    "--scale",
    "scale_sizes",
    default="8,64,512",
    show_default=True,
    help="Planar chain sizes N for the compile-time/module-size table ('' to skip).",
)
@click.option("--scale-only", is_flag=True, help="Only the chain compile-time table.")
@click.option(
    "--sweep",
    "sweep_runs",
    type=int,
    default=None,
    help="Only the sweep bench, with this many runs (1000: the issue's): serial loop vs "
    "threads vs a Dask LocalCluster; then a prepared run's per-call cost against simulate().",
)
@click.option(
    "--chain",
    is_flag=True,
    help="Only the chain bench: time to 1e-6 against a hand-written O(N) Numba RK4 (and "
    "MuJoCo if installed) for N = 8..128, and per-step cost against N.",
)
@click.option(
    "--new-models",
    is_flag=True,
    help="Only the latency of a new model: every example model copied as a new file, "
    "from a fresh process to the end of its first ABM step (goal < 10 s).",
)
@click.option(
    "--first-run",
    is_flag=True,
    help="Only the first run in a warmed installation (`mbdgen warmup` first, if needed): "
    "a new planar and a new spatial model with one method of each family, from a fresh "
    "process to its first step (goal ≤ 5 s), and how much a background compile slows a "
    "foreground run (goal ≤ 10 %).",
)
def bench(
    quick: bool,
    output: str | None,
    scale_sizes: str,
    scale_only: bool,
    sweep_runs: int | None,
    chain: bool,
    new_models: bool,
    first_run: bool = False,
) -> None:
    """Time mbdgen against a hand-written Numba kernel and a sympy.lambdify loop, the
    cold compile time and module size of planar N-link chains, and (full run) how long
    a new model takes to its first step."""
    from mbdgen.bench import report, run, scale, scale_report

    if first_run:
        from mbdgen import bench_first_run

        methods = bench_first_run.METHODS[:3] if quick else bench_first_run.METHODS
        numbers: dict[str, Any] = {
            "first_run": bench_first_run.first_runs(methods),
            "background": bench_first_run.background_slowdown(2 if quick else 4),
        }
        click.echo(bench_first_run.report(numbers["first_run"], numbers["background"]))
        if output:
            _write_json(output, numbers)
            click.echo(f"wrote {output}")
        return
    if new_models:
        from mbdgen.bench import new_model_latency, new_model_report

        rows = new_model_latency()
        click.echo(new_model_report(rows))
        if output:
            _write_json(output, rows)
            click.echo(f"wrote {output}")
        return
    if chain:
        from mbdgen import bench_chain

        numbers = bench_chain.run(quick=quick)
        click.echo(bench_chain.report(numbers))
        if output:
            _write_json(output, numbers)
            click.echo(f"wrote {output}")
        return

    if sweep_runs is not None:
        from mbdgen.bench import prepared_bench, prepared_report, sweep_bench, sweep_report

        numbers = sweep_bench(sweep_runs)
        click.echo(sweep_report(numbers))
        numbers["prepared"] = prepared_bench()
        click.echo(prepared_report(numbers["prepared"]))
        if output:
            _write_json(output, numbers)
            click.echo(f"wrote {output}")
        return

    try:
        sizes = [int(s) for s in scale_sizes.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(
            f"--scale wants comma-separated integers, not {scale_sizes!r}"
        ) from None
    results: dict = {} if scale_only else run(quick=quick)
    if results:
        click.echo(report(results))
    if sizes:
        rows = scale(sizes)
        results["scale"] = rows
        click.echo("")
        click.echo(scale_report(rows))
    if not (quick or scale_only):
        from mbdgen.bench import new_model_latency, new_model_report

        results["new_models"] = new_model_latency()
        click.echo("")
        click.echo(new_model_report(results["new_models"]))
    if output:
        _write_json(output, results)
        click.echo(f"wrote {output}")


# --------------------------------------------------------------------------- baseline
# Regression baselines for a user's CI (mbdgen.baseline): exit 0 within tolerance,
# 1 when something moved, 2 when a case could not be checked or the settings are bad.


@main.group("baseline")
def baseline_group() -> None:
    """Record and check regression baselines of the cases in an mbdgen-baseline.toml.

    SETTINGS is that file or its folder (default: the current folder).  `check` exits
    0 when every case is within its tolerances, 1 when something moved (with a table of
    what moved, when first and when worst), 2 when a case failed to run, its baseline is
    missing or the settings file is unusable.
    """


def _baseline_suite(settings: str | None) -> object:
    from mbdgen.baseline import load_settings

    return load_settings(settings)


def _baseline_fail(exc: BaseException) -> None:
    from mbdgen.baseline import EXIT_ERROR as BASELINE_ERROR

    if _State.debug:
        traceback.print_exception(exc)
    else:
        click.echo(f"error: {exc}", err=True)
    sys.exit(BASELINE_ERROR)


def _baseline_echo(report: object) -> None:
    from mbdgen.baseline import CaseReport

    assert isinstance(report, CaseReport)
    click.echo(report.summary(), err=report.status == "error")


@baseline_group.command("record")
@click.argument("settings", required=False, type=click.Path())
@click.option("--case", "cases", multiple=True, help="Only this case (repeatable).")
def baseline_record(settings: str | None, cases: tuple[str, ...]) -> None:
    """Run the cases of SETTINGS and write their baselines (exit 2 if one fails)."""
    from mbdgen import baseline

    try:
        suite = _baseline_suite(settings)
        reports = baseline.record(suite, cases, on_case=_baseline_echo)  # type: ignore[arg-type]
    except MbdgenError as exc:
        _baseline_fail(exc)
        return
    failed = sum(r.status == "error" for r in reports)
    click.echo(f"{len(reports) - failed} of {len(reports)} baseline(s) recorded")
    if failed:
        sys.exit(baseline.EXIT_ERROR)


@baseline_group.command("check")
@click.argument("settings", required=False, type=click.Path())
@click.option("--case", "cases", multiple=True, help="Only this case (repeatable).")
@click.option("--junit", default=None, help="Also write a JUnit XML report to this file.")
def baseline_check(settings: str | None, cases: tuple[str, ...], junit: str | None) -> None:
    """Run the cases of SETTINGS again and compare them with their baselines."""
    from mbdgen import baseline

    try:
        suite = _baseline_suite(settings)
        if junit:
            from mbdgen.results import check_destination

            check_destination(junit, (".xml",))
        reports = baseline.check(suite, cases, on_case=_baseline_echo)  # type: ignore[arg-type]
        if junit:
            baseline.write_junit(junit, suite, reports)  # type: ignore[arg-type]
    except MbdgenError as exc:
        _baseline_fail(exc)
        return
    text = baseline.table(reports)
    if text:
        click.echo("")
        click.echo(text)
    for report in reports:
        for note in report.notes if report.status == "moved" else ():
            click.echo(f"note: {report.case}: {note}")
    counts = {s: sum(r.status == s for r in reports) for s in ("ok", "moved", "error")}
    click.echo(
        f"{len(reports)} case(s): {counts['ok']} ok, {counts['moved']} moved, "
        f"{counts['error']} could not be checked" + (f"; wrote {junit}" if junit else "")
    )
    sys.exit(baseline.exit_code(reports))


# -- animate ---------------------------------------------------------------------------------
@main.command("animate")
@click.argument("result", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, help="Animation file (.gif or .mp4).")
@click.option(
    "--trace",
    multiple=True,
    help="Draw the path of a point: BODY (centroid), BODY:ELEMENT (that element's point "
    "on it) or BODY:X,Y[,Z] (body frame); repeatable.",
)
@click.option(
    "--fps",
    default=None,
    type=float,
    help="Frames per second (default 25, or with --every the rate that plays it in real "
    "time; a GIF plays at most 50, an MP4 60).",
)
@click.option(
    "--every",
    default=None,
    type=click.IntRange(min=1),
    help="One frame per k output rows (default: frames follow the run in real time).",
)
@click.option(
    "--speed",
    default=None,
    type=click.FloatRange(min=0, min_open=True),
    help="Simulated seconds per second of animation (default 1; short runs slow down).",
)
@click.option("--size", default="640x480", show_default=True, help="Frame size WIDTHxHEIGHT.")
@click.option(
    "--view",
    default="iso",
    show_default=True,
    help="Spatial models: iso, xy, xz, yz, or AZIMUTH,ELEVATION in degrees (z up).",
)
@click.option(
    "--model",
    "model_path",
    default=None,
    help="The model file, for a result saved before results carried body geometry.",
)
@click.option("--out-dir", default="generated", show_default=True, help="Generated modules.")
def animate_cmd(
    result: str,
    output: str,
    trace: tuple[str, ...],
    fps: float | None,
    every: int | None,
    speed: float | None,
    size: str,
    view: str,
    model_path: str | None,
    out_dir: str,
) -> None:
    """Animate a saved RESULT (.npz): bodies, ground, joints, time stamp and traces."""
    from mbdgen.animation import VIEWS, Playback, animate

    try:
        width, height = (int(v) for v in size.lower().split("x"))
    except ValueError:
        raise MbdgenError(f"--size {size!r}: write WIDTHxHEIGHT, e.g. 640x480") from None
    the_view: str | tuple[float, float] = view
    if view not in VIEWS:
        try:
            azim, elev = (float(v) for v in view.split(","))
        except ValueError:
            raise MbdgenError(
                f"--view {view!r}: use {', '.join(VIEWS)} or AZIMUTH,ELEVATION"
            ) from None
        the_view = (azim, elev)
    module = None
    if model_path is not None:
        from mbdgen.compiler import compile as compile_model

        module = compile_model(model_path, out_dir)
    plans: list[Playback] = []
    path = animate(
        result,
        output,
        trace=trace,
        fps=fps,
        every=every,
        speed=speed,
        size=(width, height),
        view=the_view,
        module=module,
        on_playback=plans.append,
    )
    plan = plans[0]
    click.echo(f"wrote {path} ({len(plan.rows)} frames at {plan.fps:.3g} fps, {plan.pace})")


# --------------------------------------------------------------------------------------
# Results: show and plot a saved result (.npz, .h5; show also reads .csv)
# --------------------------------------------------------------------------------------


def _show_csv(path: Path, final: bool) -> None:
    """Summary of a CSV result: its columns, rows and time span (CSV has no metadata)."""
    import numpy as np

    try:
        header = path.open(encoding="utf-8").readline().strip().split(",")
        data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise MbdgenError(f"cannot read {str(path)!r} as an mbdgen CSV table: {exc}") from None
    if not header or header[0] != "t" or (data.size and data.shape[1] != len(header)):
        raise MbdgenError(f"{str(path)!r} is not an mbdgen CSV result (no 't' column first)")
    rows = data.shape[0] if data.size else 0
    span = f", t = {data[0, 0]:.6g} .. {data[-1, 0]:.6g}" if rows else ""
    click.echo(f"CSV result {path} (no metadata; save as .npz or .h5 to keep it)")
    click.echo(f"  rows: {rows}{span}")
    click.echo(
        f"  columns ({len(header)}): {', '.join(header[:12])}"
        + (" ..." if len(header) > 12 else "")
    )
    if final and rows:
        for name, value in zip(header, data[-1], strict=True):
            click.echo(f"    {name:<24} {value:.10g}")


@main.command("show")
@click.argument("result_file", type=click.Path(dir_okay=False))
@click.option("--final", is_flag=True, help="Also print the last row's values (q, q̇, X, λ).")
def show_cmd(result_file: str, final: bool) -> None:
    """Print a summary of a saved result (.npz, .h5 or .csv): model, method and
    settings, rows and time span, status, counters, ‖Φ‖."""
    path = Path(result_file)
    if path.suffix.lower() == ".csv" and path.is_file():
        _show_csv(path, final)
        return
    from mbdgen.results import load

    click.echo(load(path).summary(final=final))


@main.command("plot")
@click.argument("result_file", type=click.Path(dir_okay=False))
@click.option(
    "--what",
    default="q,phi",
    show_default=True,
    help="Comma-separated: q, qd, energy, phi, lam, reactions, steps.",
)
@click.option("--coords", default=None, help="Comma-separated coordinates or bodies to show.")
@click.option(
    "-o",
    "--output",
    default=None,
    help="Figure file (.png, .pdf, .svg); default: RESULT_FILE with .png.",
)
def plot_cmd(result_file: str, what: str, coords: str | None, output: str | None) -> None:
    """Plot a saved result (.npz or .h5): one panel per body or quantity, units on the
    axes, ‖Φ‖ on a log axis, reactions by joint, step size and Newton iterations."""
    from mbdgen.plot import parse_what, plot_result
    from mbdgen.results import load

    parse_what(what)  # a typo fails before the file is read
    result = load(result_file)
    target = output or str(Path(result_file).with_suffix(".png"))
    chosen = [c.strip() for c in coords.split(",") if c.strip()] if coords else None
    click.echo(f"wrote {plot_result(result, target, what=what, coords=chosen)}")


def entry() -> None:
    """The console script (and ``python -m mbdgen.cli``): run :func:`main`, then end the
    process without the interpreter's teardown.

    After a jitted call, tearing down Numba's and LLVM's objects at exit costs 0.2-0.5 s
    (measured on the slider-crank: more than the integration itself); the atexit
    handlers still run and the output streams are flushed, and every file mbdgen
    writes is complete (atomic writes) before the command returns.  In-process callers
    (tests, ``CliRunner``) call :func:`main` and are not affected.
    """
    import atexit
    import signal

    code: int = 0
    try:
        # Not standalone: click would answer a Ctrl-C that lands outside a command
        # (while it parses arguments, or between the command's end and here) with
        # "Aborted!" and exit 1; every interrupt of mbdgen ends as 130 instead.
        returned = main(standalone_mode=False)
        if isinstance(returned, int) and not isinstance(returned, bool):
            code = returned  # --help, --version: click's Exit code
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:  # sys.exit("message")
            print(exc.code, file=sys.stderr)
            code = EXIT_ERROR
    except (click.Abort, KeyboardInterrupt):
        # a Ctrl-C before a command started or after it finished
        code = _report_interrupt(None)
    except click.ClickException as exc:
        exc.show()
        code = exc.exit_code
    # Everything is written: a signal from here on must not turn the exit into a
    # traceback from the teardown.
    with contextlib.suppress(ValueError, OSError):
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say
            pass
    os._exit(code)


# --------------------------------------------------------------------------------------
# sweep: one model over many parameter sets (mbdgen.sweeps)
# --------------------------------------------------------------------------------------


#: Dask schemes that run over TCP, whose port the CLI probes before it connects.
_TCP_SCHEMES = ("tcp", "tls", "ws", "wss")


@contextlib.contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """Show each warning as it comes as one line, ``warning: MESSAGE`` (mbdgen's own,
    e.g. a damaged cache entry or batch file) or ``warning (Category): MESSAGE``,
    instead of Python's two lines with a file name and source line (every command:
    :func:`main`; ``simulate`` collects the run's own and shows them after it)."""
    import warnings

    def show(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        own = category.__module__.startswith("mbdgen")
        kind = "" if own else f" ({category.__name__})"
        click.echo(f"warning{kind}: {message}", err=True)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def _check_scheduler(address: str, timeout: float) -> None:
    """Refuse a --scheduler ADDRESS that is malformed or where nothing listens, on one
    line and at once: Dask's own parsing raises a bare ValueError, and its connect
    retries a refused port until the whole timeout has passed.  Only the host the user
    named is contacted, once, by a plain TCP connect (closed straight away); an address
    of another transport (inproc://, ucx://) is left to Dask."""
    import socket

    scheme, sep, rest = address.rpartition("://")
    scheme = scheme.lower() if sep else "tcp"
    if scheme not in _TCP_SCHEMES:
        return
    where = f"--scheduler {address!r}"
    if not timeout > 0.0:
        raise MbdgenError(f"--scheduler-timeout must be positive, got {timeout:g}")
    host, colon, port_text = rest.rpartition(":")
    if not colon:
        host, port_text = rest, ""
    host = host.strip("[]")  # an IPv6 address is written [::1]:8786
    if not host:
        raise MbdgenError(f"{where}: no host; write HOST:PORT, e.g. tcp://127.0.0.1:8786")
    if not colon:
        raise MbdgenError(f"{where}: no port; write HOST:PORT (a `dask scheduler` listens on 8786)")
    port = int(port_text) if port_text.isdigit() else 0
    if not 1 <= port <= 65535:
        raise MbdgenError(f"{where}: the port must be a number 1-65535, not {port_text!r}")
    advice = (
        "start one with `dask scheduler` (and workers with `dask worker ADDRESS`), or "
        "leave out --scheduler to run on this machine's cores"
    )
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except ConnectionRefusedError:
        raise MbdgenError(
            f"cannot reach the Dask scheduler at {address}: the connection was refused "
            f"(nothing listens on port {port} of {host}); {advice}"
        ) from None
    except socket.gaierror as exc:
        raise MbdgenError(
            f"cannot reach the Dask scheduler at {address}: unknown host {host!r} "
            f"({exc.strerror}); {advice}"
        ) from None
    except TimeoutError:
        raise MbdgenError(
            f"cannot reach the Dask scheduler at {address}: no answer within "
            f"{timeout:g} s (--scheduler-timeout); {advice}"
        ) from None
    except OSError as exc:
        raise MbdgenError(
            f"cannot reach the Dask scheduler at {address}: {exc.strerror or exc}; {advice}"
        ) from None


@main.command("sweep")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option(
    "-p",
    "--param",
    "specs",
    multiple=True,
    help="A varied quantity (a parameter, q0.NAME, qd0.NAME, x0.NAME): NAME=A:B:N (grid of N "
    "values), NAME=V1,V2,..., NAME=V, or with --random NAME=A:B.",
)
@click.option(
    "--random", "n_random", type=int, default=None, help="N random sets instead of a grid."
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of --random.")
@click.option(
    "--dist",
    type=click.Choice(["uniform", "normal", "loguniform"]),
    default="uniform",
    show_default=True,
    help="--random: uniform on [A, B), normal (mean A, std B), log-uniform on [A, B).",
)
@click.option("--table", default=None, help="Parameter sets from a .csv or .parquet file.")
@click.option("-o", "--output", required=True, help="Sweep folder (see `mbdgen.sweeps`).")
@click.option(
    "--resume", is_flag=True, help="Finish the sweep in --output: run only what is missing."
)
@click.option("--trajectories", is_flag=True, help="Also store every run's trajectory (HDF5).")
@click.option(
    "--outputs",
    "outputs_file",
    default=None,
    help="A .py file of functions def NAME(result) -> float: column output.NAME per run.",
)
@click.option("--workers", type=int, default=None, help="Threads (default: the CPUs).")
@click.option("--batch-size", type=int, default=None, help="Runs per batch (default: automatic).")
@click.option("--scheduler", default=None, help="Dask scheduler ADDRESS: run the batches there.")
@click.option(
    "--scheduler-timeout",
    type=float,
    default=10.0,
    show_default=True,
    help="Seconds to wait for --scheduler before giving up.",
)
@click.option(
    "--method", default="abm", show_default=True, help="Integration method (`mbdgen methods`)."
)
@click.option(
    "--order",
    default=None,
    type=int,
    help="Adams–Bashforth order k (default 4; vabm: the highest order, default 12).",
)
@click.option("--h", "h", default=1e-3, show_default=True, type=float, help="Step.")
@click.option("--t-end", default=10.0, show_default=True, type=float, help="End time.")
@click.option("--alpha", default=0.0, show_default=True, type=float, help="Baumgarte α.")
@click.option("--beta", default=0.0, show_default=True, type=float, help="Baumgarte β.")
@click.option(
    "--constraints",
    type=click.Choice(["direct", "baumgarte", "gcp", "hybrid"]),
    default=None,
    help="Constraint handling (default: baumgarte if --alpha/--beta, else direct).",
)
@click.option("--start", default="rkf45", show_default=True, help="Adams start-up.")
@click.option("--hht-alpha", default=None, type=float, help="HHT's α (--method hht).")
@click.option("--rho-inf", default=None, type=float, help="Generalized-α's ρ∞.")
@click.option("--rtol", default=1e-6, show_default=True, type=float, help="Variable step: rtol.")
@click.option("--atol", default=1e-6, show_default=True, type=float, help="Variable step: atol.")
@click.option(
    "--h-min",
    default=None,
    type=float,
    help="hht_adaptive, genalpha_adaptive, radau5: smallest step.",
)
@click.option(
    "--h-max",
    default=None,
    type=float,
    help="hht_adaptive, genalpha_adaptive, radau5: largest step.",
)
@click.option("--phi-tol", default=None, type=float, help="‖Φ‖ warning level (simulate's).")
@click.option(
    "--energy-tol", default=None, type=float, help="Energy-balance warning level (simulate's)."
)
@click.option("--assemble", is_flag=True, help="Make each set's q0, q̇0 consistent first.")
@click.option("--hold", multiple=True, help="With --assemble: a coordinate kept at its q0.")
@click.option("--output-every", default=1, show_default=True, type=int, help="Record stride.")
@click.option("--strict", is_flag=True, help="A run whose checks warn gets status 'check'.")
@click.option("--out-dir", default="generated", show_default=True, help="Generated modules.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a tty).")
def sweep_cmd(
    model: str,
    specs: tuple[str, ...],
    n_random: int | None,
    seed: int,
    dist: str,
    table: str | None,
    output: str,
    resume: bool,
    trajectories: bool,
    outputs_file: str | None,
    workers: int | None,
    batch_size: int | None,
    scheduler: str | None,
    scheduler_timeout: float,
    method: str,
    order: int | None,
    h: float,
    t_end: float,
    alpha: float,
    beta: float,
    constraints: str | None,
    start: str,
    hht_alpha: float | None,
    rho_inf: float | None,
    rtol: float,
    atol: float,
    h_min: float | None,
    h_max: float | None,
    phi_tol: float | None,
    energy_tol: float | None,
    assemble: bool,
    hold: tuple[str, ...],
    output_every: int,
    strict: bool,
    out_dir: str,
    progress: bool | None,
) -> None:
    """Run MODEL once per parameter set (a grid, random samples or a table) on all
    cores, or on a Dask cluster; write one dataset to the --output folder."""
    from mbdgen.compiler import compile as compile_model
    from mbdgen.methods import get_method
    from mbdgen.simulation import check_tolerances
    from mbdgen.sweeps import (
        SweepIncomplete,
        SweepInterrupted,
        plan_from_specs,
        read_outputs,
        read_table,
        sweep,
    )

    if hold and not assemble:
        raise MbdgenError("--hold keeps coordinates during assembly: add --assemble")
    if table and (specs or n_random is not None):
        raise MbdgenError("give the parameter sets either as --table or as -p/--random, not both")
    if n_random is not None and not specs:
        raise MbdgenError("--random needs the ranges to draw from: -p NAME=A:B")
    plan = None
    if table:
        plan = read_table(table)
    elif specs:
        plan = plan_from_specs(specs, random=n_random, seed=seed, dist=dist)
    elif not resume:
        raise MbdgenError("no parameter sets: give -p NAME=A:B:N, --random N or --table FILE")
    outputs = read_outputs(outputs_file) if outputs_file else None
    manifest = Path(output) / "sweep.json"
    if resume and outputs is None and manifest.is_file():
        import json

        stored_outputs = json.loads(manifest.read_text()).get("outputs") or []
        if stored_outputs:
            raise MbdgenError(
                f"the sweep in {output} has outputs ({', '.join(stored_outputs)}): give "
                "--outputs FILE again to resume it"
            )
    check_tolerances(get_method(method), rtol, atol)  # before the compile, as simulate's
    if scheduler:  # before the compile: a bad address must not wait for it
        _check_scheduler(scheduler, scheduler_timeout)
    if plan is not None:  # its parameter columns; q0./qd0./x0. ones after the compile
        _check_parameter_names(
            model, out_dir, [c for c in plan.columns if "." not in c and c != "run"]
        )
    module = compile_model(model, out_dir)
    client = None
    if scheduler:
        from distributed import Client

        try:
            client = Client(scheduler, timeout=scheduler_timeout)
        except (OSError, TimeoutError) as exc:
            raise MbdgenError(
                f"cannot reach the Dask scheduler at {scheduler}: {exc}; start one with "
                "`dask scheduler` (and workers with `dask worker ADDRESS`), or leave out "
                "--scheduler to run on this machine's cores"
            ) from None
    show = sys.stderr.isatty() if progress is None else progress
    bar = None
    callback = None
    if show:
        bar = click.progressbar(length=1, label=f"{module.MODEL_NAME} runs", file=sys.stderr)
        bar.__enter__()

        def callback(done: int, total: int) -> None:
            bar.length = total
            bar.update(done - bar.pos)

    options: dict[str, Any] = {
        "method": method, "order": order, "h": h, "t_end": t_end, "alpha": alpha, "beta": beta,
        "constraints": constraints, "start": start, "hht_alpha": hht_alpha, "rho_inf": rho_inf,
        "rtol": rtol, "atol": atol, "assemble": list(hold) if assemble else False,
        "output_every": output_every, "strict": strict,
    }  # fmt: skip
    # given only when set, so a sweep written without them resumes unchanged
    stepper = {k: v for k, v in (("h_min", h_min), ("h_max", h_max)) if v is not None}
    if stepper:
        options["options"] = stepper
    checks = {k: v for k, v in (("phi_tol", phi_tol), ("energy_tol", energy_tol)) if v is not None}
    options.update(checks)
    if resume and manifest.is_file():
        # options left at their defaults take the stored sweep's values
        import json

        saved = json.loads(manifest.read_text())
        stored = saved.get("options", {})
        ctx = click.get_current_context()
        if ctx.get_parameter_source("trajectories") is click.core.ParameterSource.DEFAULT:
            trajectories = bool(saved.get("trajectories", False))
        for name in options:
            if (
                name in stored
                and ctx.get_parameter_source(name) is click.core.ParameterSource.DEFAULT
            ):
                options[name] = stored[name]
        for name in ("options", "phi_tol", "energy_tol"):
            if name in stored and name not in options:
                options[name] = stored[name]
    try:
        result = sweep(
            module, plan, path=output, outputs=outputs, trajectories=trajectories,
            workers=workers, batch_size=batch_size, client=client, resume=resume,
            progress=callback, **options,
        )  # fmt: skip
    except (SweepInterrupted, SweepIncomplete) as exc:
        if bar is not None:
            bar.__exit__(None, None, None)
        click.echo(f"error: {exc}", err=True)
        sys.exit(interrupts.exit_code() if isinstance(exc, SweepInterrupted) else EXIT_ERROR)
    finally:
        if client is not None:
            client.close()
    if bar is not None:
        bar.__exit__(None, None, None)
    counts = result.table["status"].value_counts().to_dict()
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    click.echo(f"{module.MODEL_NAME}: {len(result.table)} runs ({summary}); wrote {output}")


if __name__ == "__main__":  # pragma: no cover
    entry()
