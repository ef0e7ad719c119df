"""The ``mbdgen`` command line: compile, simulate, info, bench.

Every error a user can cause ends as one line on stderr and a non-zero exit code;
``--debug`` shows the traceback instead.  A run that fails or is interrupted still
writes what it computed to the requested output file.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

import click

from mbdgen import __version__
from mbdgen.errors import MbdgenError, SimulationError

EXIT_ERROR = 1
EXIT_INTERRUPT = 130


class _State:
    debug = False


def _fail(exc: BaseException) -> None:
    if _State.debug:
        traceback.print_exception(exc)
    elif isinstance(exc, MbdgenError):
        click.echo(f"error: {exc}", err=True)
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
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except SystemExit:
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(EXIT_INTERRUPT)
        except BrokenPipeError:
            # the reader went away (`mbdgen methods | head`): not an error of ours
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)
        except Exception as exc:
            _fail(exc)
        return None


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="mbdgen")
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
def main(debug: bool) -> None:
    """mbdgen: compile SymPy multibody models to Numba kernels and simulate them."""
    _State.debug = debug


@main.command("compile")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("-o", "--out-dir", default="generated", show_default=True, help="Output folder.")
@click.option("--force", is_flag=True, help="Regenerate even if the module is up to date.")
@click.option("--check", is_flag=True, help="Only check that the module is up to date (exit 1).")
def compile_cmd(model: str, out_dir: str, force: bool, check: bool) -> None:
    """Generate the kernel module of MODEL (a models/*.py file)."""
    from mbdgen.compiler import generate, generated_path, stale_reason

    target = generated_path(model, out_dir)
    reason = stale_reason(model, target)
    if check:
        if reason is not None:
            raise MbdgenError(f"{target} is out of date: {reason}")
        click.echo(f"{target} is up to date")
        return
    if reason is None and not force:
        click.echo(f"{target} is up to date")
        return
    path, written = generate(model, out_dir)
    click.echo(f"compiled {model} -> {path}" + ("" if written else " (unchanged)"))


def _parse_params(values: tuple[str, ...]) -> dict[str, float]:
    params: dict[str, float] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep:
            raise MbdgenError(f"--param {item!r}: write NAME=VALUE")
        try:
            params[name.strip()] = float(value)
        except ValueError:
            raise MbdgenError(f"--param {item!r}: {value!r} is not a number") from None
    return params


@main.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option(
    "--method", default="abm", show_default=True, help="Integration method (`mbdgen methods`)."
)
@click.option("--order", default=None, type=int, help="Adams–Bashforth order k (default 4).")
@click.option(
    "--h", "h", default=1e-3, show_default=True, type=float, help="Step (vabm: output interval)."
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
@click.option("--rtol", default=1e-6, show_default=True, type=float, help="vabm: relative tol.")
@click.option("--atol", default=1e-6, show_default=True, type=float, help="vabm: absolute tol.")
@click.option("-p", "--param", "params", multiple=True, help="Override a parameter: NAME=VALUE.")
@click.option("--assemble", is_flag=True, help="Make q0, q̇0 consistent first (see `assemble`).")
@click.option("--hold", multiple=True, help="With --assemble: a coordinate kept at its q0.")
@click.option("--output-every", default=1, show_default=True, type=int, help="Record stride.")
@click.option("-o", "--output", default=None, help="Result file (.npz or .csv).")
@click.option("--plot", "plot_path", default=None, help="Also write a plot (.png, .pdf, .svg).")
@click.option("--out-dir", default="generated", show_default=True, help="Generated modules.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a tty).")
def simulate(
    model: str,
    method: str,
    order: int | None,
    h: float,
    t_end: float,
    alpha: float,
    beta: float,
    constraints: str | None,
    rtol: float,
    atol: float,
    params: tuple[str, ...],
    assemble: bool,
    hold: tuple[str, ...],
    output_every: int,
    output: str | None,
    plot_path: str | None,
    out_dir: str,
    progress: bool | None,
) -> None:
    """Compile MODEL if needed and integrate it from its initial state."""
    from mbdgen.compiler import compile as compile_model
    from mbdgen.methods import get_method
    from mbdgen.simulation import simulate as run

    get_method(method)
    module = compile_model(model, out_dir)
    show = sys.stderr.isatty() if progress is None else progress
    bar = None
    callback = None
    if show:
        bar = click.progressbar(length=1000, label=f"{module.MODEL_NAME} t", file=sys.stderr)
        bar.__enter__()

        def callback(t: float, t_final: float) -> None:
            bar.update(int(1000 * t / t_final) - bar.pos)

    try:
        result = run(
            module,
            method=method,
            order=order,
            h=h,
            t_end=t_end,
            alpha=alpha,
            beta=beta,
            constraints=constraints,
            rtol=rtol,
            atol=atol,
            assemble=list(hold) if assemble else False,
            params=_parse_params(params),
            output_every=output_every,
            progress=callback,
        )
    except SimulationError as exc:
        if bar is not None:
            bar.__exit__(None, None, None)
        if exc.result is not None and output:
            saved = exc.result.save(output)  # type: ignore[attr-defined]
            click.echo(f"saved the {len(exc.result)} steps computed so far to {saved}", err=True)  # type: ignore[arg-type]
        if "interrupted" in str(exc):
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_INTERRUPT)
        raise
    if bar is not None:
        bar.__exit__(None, None, None)
    c = result.counters
    click.echo(
        f"{module.MODEL_NAME}: {c['steps']} steps of {method} k={result.info['order']}, "
        f"h={h:g} to t={t_end:g} "
        f"in {c['wall_time_s']:.3f} s (+{c['setup_time_s']:.2f} s JIT/cache load); "
        f"max ‖Φ‖ = {result.phi_norm.max():.3e}, "
        f"final ‖Φ‖ = {result.phi_norm[-1]:.3e}"
    )
    if output:
        click.echo(f"wrote {result.save(output)}")
    if plot_path:
        from mbdgen.plot import plot_result

        click.echo(f"wrote {plot_result(result, plot_path)}")


@main.command()
@click.argument("model", type=click.Path(dir_okay=False))
def info(model: str) -> None:
    """Describe MODEL: coordinates, parameters, constraints, degrees of freedom."""
    import numpy as np

    from mbdgen.model.loader import load_model
    from mbdgen.symbolic.derive import derive

    mdl = load_model(model)
    system = derive(mdl)
    click.echo(f"model {mdl.name}: {mdl.description}")
    click.echo(f"coordinates ({mdl.n}): {', '.join(c.name for c in mdl.coordinates)}")
    params = ", ".join(f"{s.name}={v:g}" for s, v in mdl.parameters.items())
    click.echo(f"parameters ({len(mdl.parameters)}): {params or '(none)'}")
    click.echo(f"constraints ({mdl.m}):")
    for i, c in enumerate(mdl.constraints):  # type: ignore[attr-defined]
        click.echo(f"  Φ[{i}] = {c}")
    from mbdgen.model.core import t

    subs = {s: float(v) for s, v in zip(mdl.coordinates, mdl.q0, strict=True)}
    subs.update(mdl.parameters)
    subs[t] = 0.0
    phi_q = np.array(system.blocks["phi_q"].subs(subs).evalf(), dtype=float).reshape(mdl.m, mdl.n)
    phi0 = np.array(system.blocks["phi"].subs(subs).evalf(), dtype=float).ravel()
    rank = int(np.linalg.matrix_rank(phi_q, tol=1e-9)) if mdl.m else 0
    click.echo(f"rank of Φ_q at q0: {rank} of {mdl.m} constraints")
    click.echo(f"degrees of freedom: {mdl.n - rank}")
    if rank < mdl.m:
        click.echo(f"warning: {mdl.m - rank} constraint(s) are redundant at q0")
    click.echo(f"‖Φ(q0, 0)‖ = {float(np.linalg.norm(phi0)):.3e}")


@main.command("assemble")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--hold", multiple=True, help="A coordinate kept at its q0 (repeatable).")
@click.option("-p", "--param", "params", multiple=True, help="Override a parameter: NAME=VALUE.")
@click.option("--out-dir", default="generated", show_default=True, help="Generated modules.")
def assemble_cmd(model: str, hold: tuple[str, ...], params: tuple[str, ...], out_dir: str) -> None:
    """Consistent initial positions, velocities, accelerations and multipliers of MODEL."""
    from mbdgen.analysis.assembly import assemble
    from mbdgen.compiler import compile as compile_model

    module = compile_model(model, out_dir)
    a = assemble(module, hold=hold, params=_parse_params(params))
    click.echo(
        f"{module.MODEL_NAME}: assembled in {a.iterations} Newton iteration(s), "
        f"‖Φ‖ = {a.residual:.2e}; degrees of freedom {a.dof} (rank Φ_q = {a.rank})"
    )
    if a.redundant:
        click.echo(f"redundant constraints (dependent on earlier rows): {a.redundant}")
    width = max(len(c) for c in module.COORDINATE_NAMES)
    click.echo(f"{'':<{width}}  {'q':>14}  {'q̇':>14}  {'q̈':>14}")
    for i, name in enumerate(module.COORDINATE_NAMES):
        click.echo(f"{name:<{width}}  {a.q[i]:>14.10g}  {a.qd[i]:>14.10g}  {a.qdd[i]:>14.10g}")
    click.echo("λ = [" + ", ".join(f"{v:.10g}" for v in a.lam) + "]")


@main.command()
def methods() -> None:
    """List the registered integration methods."""
    from mbdgen.methods import METHODS

    for m in METHODS.values():
        orders = ", ".join(map(str, m.orders))
        click.echo(f"{m.name:<9} k in {{{orders}}}  {m.description}")


@main.command()
@click.option("--quick", is_flag=True, help="Fewer steps and repeats (a smoke run).")
@click.option("-o", "--output", default=None, help="Also write the numbers as JSON.")
def bench(quick: bool, output: str | None) -> None:
    """Time mbdgen against a hand-written Numba kernel and a sympy.lambdify loop."""
    from mbdgen.bench import report, run

    results = run(quick=quick)
    click.echo(report(results))
    if output:
        import json

        Path(output).write_text(json.dumps(results, indent=2))
        click.echo(f"wrote {output}")


if __name__ == "__main__":  # pragma: no cover
    main()
