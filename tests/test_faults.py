"""Fault injection: bad input, faults and interrupts end with a message naming the
cause, and nothing computed is lost (issue 9).

Each test is written as a user meets the case: a model file or a CLI call, then the
file on disk, the exit code and the message.  The items of the issue are named in
the test names' docstrings.  Compiled kernels are shared through the committed
``generated/`` modules and Numba's disk cache; the few test-only models compile
into ``tmp_path`` once per test module.
"""

from __future__ import annotations

import math
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import GENERATED, MODELS, ROOT, cli, one_line_error

import mbdgen
from mbdgen import simulation
from mbdgen.compiler import import_generated
from mbdgen.errors import MbdgenError, OutputError, ResultFileError, SimulationError
from mbdgen.runtime import postprocess
from mbdgen.simulation import ConstraintWarning

MBDGEN = [sys.executable, "-m", "mbdgen.cli"]
PENDULUM = MODELS / "pendulum.py"


_cli = cli
_one_line_error = one_line_error


def _model(folder: Path, name: str, body: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return path


PENDULUM_FORCE = """\
    import sympy as sp
    from mbdgen.model import Model, t
    x1, y1, phi1 = sp.symbols("x1 y1 phi1")
    m, J, l, g = sp.symbols("m J l g")
    model = Model(
        name="{name}",
        coordinates=[x1, y1, phi1],
        parameters={{m: 1.0, J: {J}, l: 1.0, g: 9.81}},
        mass=sp.diag(m, m, J),
        force=[0, -m * g, {torque}],
        constraints=[x1 - l * sp.cos(phi1), y1 - l * sp.sin(phi1)],
        q0=[1.0, 0.0, 0.0],
    )
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Test-only model files (compiled on first use into ``<folder>/gen``)."""
    folder = tmp_path_factory.mktemp("fault_models")
    _model(
        folder, "kick", PENDULUM_FORCE.format(name="kick", J="1.0 / 3.0", torque="1 / (t - 0.5)")
    )
    _model(folder, "massless", PENDULUM_FORCE.format(name="massless", J="0.0", torque="0"))
    _model(
        folder,
        "coincident",
        """\
        from mbdgen.model import GROUND, Mechanism, forces, planar
        b = planar.body("b", m=1.0, J=0.1)
        model = Mechanism(
            name="coincident",
            bodies=[b],
            elements=[forces.tsda("spring", GROUND, (0, 0), b, (0, 0), k=100.0, l0=0.5)],
        )
        """,
    )
    return folder


# -- 1-3: results are written atomically; Ctrl-C and SIGTERM keep the run ------------


def test_interrupted_save_leaves_the_old_file(pendulum, tmp_path, monkeypatch):
    """Item 2: a Ctrl-C while a result is written leaves the earlier file intact and no
    temporary file behind."""
    out = tmp_path / "out.npz"
    old = mbdgen.simulate(pendulum, h=1e-2, t_end=0.5)
    old.save(out)
    before = out.read_bytes()

    def interrupted_write(fh, **arrays):
        fh.write(b"PK\x03\x04 half an archive")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez_compressed", interrupted_write)
    with pytest.raises(KeyboardInterrupt):
        mbdgen.simulate(pendulum, h=1e-2, t_end=1.0).save(out)
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["out.npz"]
    assert len(mbdgen.load(out)) == len(old)


def test_sigterm_is_an_interrupt_that_keeps_the_steps(pendulum):
    """Item 3: SIGTERM (what batch schedulers send) ends the run like Ctrl-C: the
    partial result is kept, and the reason says which signal came."""
    calls = []

    def progress(t, t_end):
        calls.append(t)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SimulationError, match=r"terminated \(SIGTERM\) at t = ") as info:
        mbdgen.simulate(pendulum, "abm", 4, 1e-4, 10.0, progress=progress)
    assert info.value.reason == "terminated"
    assert len(info.value.result) == 2 * 4096 + 1
    assert info.value.result.info["status"] == "terminated"
    assert signal.getsignal(signal.SIGTERM) is before  # the caller's handler is back


def test_a_signal_while_the_result_is_built_keeps_it(pendulum, monkeypatch):
    """A Ctrl-C after the stepping, while ``simulate`` builds and checks the Result
    (about a millisecond), raised out of ``simulate`` and lost the steps: a second
    Ctrl-C soon after the first lost the first one's partial result, and one after the
    last step lost a complete run.  Now both end as an interrupt with the result."""
    draw = simulation.geometry.describe
    sent = []

    def describe_and_signal(*args):
        os.kill(os.getpid(), signal.SIGINT)  # handled at the next bytecode, in here
        sent.append(1)
        return draw(*args)

    monkeypatch.setattr(simulation.geometry, "describe", describe_and_signal)
    with pytest.raises(
        SimulationError, match=r"interrupted \(Ctrl-C\) after the last step"
    ) as info:
        mbdgen.simulate(pendulum, "rk4", None, 1e-2, 1.0)
    assert sent and info.value.reason == "interrupted"
    complete = info.value.result
    assert len(complete) == 101 and complete.info["status"] == "interrupted"

    calls = []

    def progress(t, t_end):  # the first Ctrl-C, during the stepping
        calls.append(t)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(SimulationError, match=r"interrupted \(Ctrl-C\) at t = ") as info:
        mbdgen.simulate(pendulum, "abm", 4, 1e-4, 10.0, progress=progress)
    assert len(sent) == 2 and len(info.value.result) == 2 * 4096 + 1


IMPLICIT = ("hht", "genalpha", "hht_adaptive", "genalpha_adaptive", "newmark_gcp", "newmark_gcp_fv")


@pytest.mark.parametrize("method", IMPLICIT)
def test_implicit_methods_keep_the_steps_on_sigterm_and_name_a_singular_matrix(pendulum, method):
    """Items 3 and 7 for the implicit families (issue 10): SIGTERM keeps every row the
    run recorded (up to the chunk that was running), and a pendulum without mass or
    inertia stops at its first iteration matrix with the cause named."""
    calls = []

    def progress(t, t_end):
        calls.append(t)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(SimulationError, match=r"terminated \(SIGTERM\) at t = ") as info:
        mbdgen.simulate(pendulum, method, None, 1e-3, 50.0, progress=progress)
    partial = info.value.result
    # two chunks: 4096 steps each, or for a step-choosing method 1/HISTORY_ROWS of the
    # output rows each (the driver cuts it finer to record its step sizes)
    # output rows each (the driver cuts it finer to record its step sizes), or of
    # 4096 step attempts, whichever ends first
    chunk = 4096 if "adaptive" not in method else 50_000 // simulation.HISTORY_ROWS
    c = partial.counters
    attempts = c["steps"] + c.get("rejected_steps", 0) + c.get("newton_failures", 0)
    assert info.value.reason == "terminated"
    assert len(partial) >= 2 * chunk or attempts >= 2 * 4096, (len(partial), attempts)
    assert np.isfinite(partial.q).all() and partial.t[-1] < 50.0
    with pytest.raises(SimulationError, match="mass matrix is singular on the motions") as info:
        mbdgen.simulate(pendulum, method, None, 0.01, 0.1, params={"m": 0.0, "J": 0.0})
    assert info.value.reason == "failed"


def test_a_signal_whose_exception_was_lost_still_stops_the_run(pendulum, monkeypatch):
    """Item 3: a SIGTERM that arrives while Python runs a finalizer (llvmlite's, during
    Numba's compilation of the first chunk) raises where the exception can only be
    printed as "ignored"; the run went on to its end and exited 0 (2 of 92 CLI runs
    signalled 0.03-0.05 s into a cold compile).  The handler records the signal first,
    so the driver stops the run after that chunk, as for any SIGTERM."""
    from mbdgen import interrupts

    advance = simulation.FAMILIES["adams"].advance

    def swallowing(self, todo):
        if todo == 0:
            try:
                interrupts._handler(signal.SIGTERM, None)
            except KeyboardInterrupt:
                pass  # as a finalizer's exception is: printed, and lost
        return advance(self, todo)

    monkeypatch.setattr(simulation.FAMILIES["adams"], "advance", swallowing)
    with pytest.raises(SimulationError, match=r"terminated \(SIGTERM\) at t = 0") as info:
        mbdgen.simulate(pendulum, h=1e-3, t_end=1.0)
    assert info.value.reason == "terminated"


def test_an_interrupt_inside_a_callback_from_c_prints_nothing(monkeypatch):
    """Item 14: llvmlite notifies its object cache through a ctypes callback while
    Numba compiles; a Ctrl-C that lands there cannot propagate, and Python printed it
    as "Exception ignored on calling ctypes callback function" with a traceback (a
    cold CI run, 1 in ~20 tries of the test below).  While the handlers are
    installed that report is dropped, and the recorded signal is raised again."""
    import ctypes

    from mbdgen import interrupts

    reported = []

    def recording(unraisable):
        reported.append(unraisable.exc_value)

    monkeypatch.setattr(sys, "unraisablehook", recording)

    @ctypes.CFUNCTYPE(None)
    def callback():
        interrupts._handler(signal.SIGINT, None)

    mark = interrupts.count()
    with interrupts.interrupts_as_exceptions():
        callback()
        with pytest.raises(KeyboardInterrupt):
            interrupts.raise_if_received(mark)

    @ctypes.CFUNCTYPE(None)
    def failing():
        raise ValueError("not an interrupt")

    with interrupts.interrupts_as_exceptions():
        failing()  # other exceptions are still reported
    assert [str(e) for e in reported] == ["not an interrupt"]
    assert sys.unraisablehook is recording  # put back when the handlers go
    interrupts.clear()


# The CLI, with Python's stacks dumped on SIGUSR1: a child that outlives its wait
# tells the test where it hangs (see _finish); and on a fatal signal, so that a crash
# names its line too (stop 33: one child of the random-moment test below ended with
# SIGSEGV in CI, after two SIGINTs, and 100 replays with the timings around the end of
# the run did not repeat it).
_CLI_WITH_STACKS = (
    "import faulthandler, signal; faulthandler.enable(all_threads=True)\n"
    "faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
    "from mbdgen.cli import entry; entry()"
)


def _finish(proc: subprocess.Popen, timeout: float = 300.0) -> str:
    """The child's stderr once it has exited; a child still running after ``timeout``
    fails the test with its Python stacks, so a hang names the line it hangs on."""
    try:
        return proc.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2.0)
        proc.kill()
        stderr = proc.communicate()[1]
        pytest.fail(f"the CLI did not exit within {timeout:.0f} s; its stacks:\n{stderr[-6000:]}")


def _start_long_run(out: Path, t_end: float, patch: str = "") -> subprocess.Popen:
    """A CLI run of the pendulum that steps for about a second per 100 s of t_end;
    ``patch`` is Python run in the child before the CLI starts."""
    args = [PENDULUM, "--out-dir", GENERATED, "--h", "1e-4", "--t-end", t_end]
    args += ["--output-every", "5", "-o", out, "--progress"]
    return subprocess.Popen(
        [sys.executable, "-c", patch + _CLI_WITH_STACKS, "simulate", *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_until_stepping(proc: subprocess.Popen) -> None:
    """The progress bar's label is printed once the module is loaded, before step 1."""
    assert proc.stderr is not None
    line = ""
    while "pendulum t" not in line:
        char = proc.stderr.read(1)
        assert char, "the run ended before it started stepping"
        line += char


def test_sigterm_on_the_cli_saves_the_partial_run(tmp_path):
    """Item 3 through the CLI: exit 143, the cause named, the steps so far on disk.

    The child's entry point is loaded from Numba's disk cache, filled here first: on a
    cold cache (the first run after a runtime change) the child would still be
    compiling when the signal comes, and rightly save nothing."""
    out = tmp_path / "run.npz"
    mbdgen.simulate(mbdgen.compile(PENDULUM, GENERATED), h=1e-4, t_end=1e-3)
    proc = _start_long_run(out, 1000.0)
    _wait_until_stepping(proc)
    # the label comes before the run's set-up (t0 checks, kernels loaded from the
    # cache), which took over 0.5 s at load 12; the stepping takes 10 s and more
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    stderr = _finish(proc)
    assert proc.returncode == 143, stderr
    assert "error: terminated (SIGTERM) at t = " in stderr and "Traceback" not in stderr
    saved = mbdgen.load(out)
    assert 1 < len(saved) < 2_000_001 and saved.info["status"] == "terminated"
    assert re.search(rf"saved {len(saved)} output row\(s\) \(\d+ steps, t = 0 to ", stderr)


#: The CLI child with ``Result.save`` sending the process a SIGINT as it begins: a
#: (further) Ctrl-C at the worst moment, the start of the write.
_CTRL_C_AS_SAVE_BEGINS = (
    "import os, signal\n"
    "from mbdgen import results\n"
    "_save = results.Result.save\n"
    "def save(self, *args, **kwargs):\n"
    "    os.kill(os.getpid(), signal.SIGINT)\n"
    "    return _save(self, *args, **kwargs)\n"
    "results.Result.save = save\n"
)


def test_a_second_ctrl_c_while_the_partial_run_is_saved_loses_nothing(tmp_path):
    """Item 2: Ctrl-C, then Ctrl-C again while the partial result is written (users
    press it twice).  The second one used to raise inside the write, whose atomic
    replace then kept the old file: the steps were lost (7 of 12 double Ctrl-Cs by
    hand on a 10⁵-10⁶-row run).  Now it waits for the file, and the exit is 130."""
    out = tmp_path / "run.npz"
    mbdgen.simulate(mbdgen.compile(PENDULUM, GENERATED), h=1e-4, t_end=1e-3)  # cache filled
    proc = _start_long_run(out, 1000.0, _CTRL_C_AS_SAVE_BEGINS)
    _wait_until_stepping(proc)
    time.sleep(2.0)  # past the run's set-up (see the SIGTERM test above)
    proc.send_signal(signal.SIGINT)
    stderr = _finish(proc)
    assert proc.returncode == 130, stderr
    assert "error: interrupted (Ctrl-C) at t = " in stderr and "Traceback" not in stderr
    saved = mbdgen.load(out)
    assert 1 < len(saved) < 2_000_001 and saved.info["status"] == "interrupted"
    assert re.search(rf"saved {len(saved)} output row\(s\)", stderr), stderr


def test_ctrl_c_while_a_finished_run_is_saved_stops_after_the_write(tmp_path):
    """Item 2: a Ctrl-C while a finished run's result is written stops the command (130,
    one line) once the file is whole, instead of discarding the run."""
    out = tmp_path / "run.npz"
    args = [PENDULUM, "--out-dir", GENERATED, "--h", "1e-3", "--t-end", 0.5, "-o", out]
    proc = subprocess.run(
        [sys.executable, "-c", _CTRL_C_AS_SAVE_BEGINS + _CLI_WITH_STACKS, "simulate",
         *map(str, args)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() == "interrupted (Ctrl-C)", proc.stderr
    assert f"wrote {out}" in proc.stdout
    saved = mbdgen.load(out)
    assert len(saved) == 501 and saved.info["status"] == "finished"


_CTRL_C_OUTSIDE_A_COMMAND = {
    # the signal lands while click parses the arguments, before any command runs
    "while parsing": "cli.main.make_context = lambda *a, **k: (_ for _ in ()).throw("
    "KeyboardInterrupt())",
    # the command has finished (its files are written); the process is on its way out
    "after the command": "invoke = cli.main.invoke\n"
    "def late(ctx):\n    invoke(ctx)\n    raise KeyboardInterrupt\n"
    "cli.main.invoke = late",
}


@pytest.mark.parametrize("moment", sorted(_CTRL_C_OUTSIDE_A_COMMAND))
def test_ctrl_c_outside_a_command_exits_130_not_clicks_abort(moment):
    """Item 2: a Ctrl-C outside mbdgen's own handlers (click's argument parsing, or
    between the end of a command and the exit) ends like every interrupt: exit 130
    and one line, not click's "Aborted!" with exit 1.  Found by the random-moment test
    below, which hit that window once in CI; here the window is forced."""
    script = "import mbdgen.cli as cli\n" + _CTRL_C_OUTSIDE_A_COMMAND[moment] + "\ncli.entry()"
    proc = subprocess.run(
        [sys.executable, "-c", script, "methods"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() == "interrupted (Ctrl-C)", proc.stderr
    assert "Aborted" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("signals", [("SIGINT",), ("SIGTERM",), ("SIGINT", "SIGINT")])
def test_signals_at_random_moments_never_break_the_file(tmp_path, signals):
    """Items 2 and 3: SIGINT or SIGTERM at a random moment of a run (loading, stepping,
    saving; a second Ctrl-C during the save of the partial result) leaves either the
    old file or a complete new one.  Seeded, so a failure can be replayed."""
    rng = random.Random(f"{signals}")
    out = tmp_path / "run.npz"
    mbdgen.simulate(mbdgen.compile(PENDULUM, GENERATED), h=1e-2, t_end=1.0).save(out)
    old = out.read_bytes()
    for _ in range(3):
        proc = _start_long_run(out, 150.0)
        _wait_until_stepping(proc)
        time.sleep(rng.uniform(0.0, 3.0))  # stepping takes ~1 s, saving ~2 s
        for name in signals:
            proc.send_signal(getattr(signal, name))
            time.sleep(rng.uniform(0.0, 0.5))
        stderr = _finish(proc)
        # a signal that comes while the interpreter exits kills it the default way
        # (-2, -15), after everything was written
        assert proc.returncode in (0, 130, 143, -2, -15), stderr
        assert "Traceback" not in stderr, stderr
        if out.read_bytes() != old:
            new = mbdgen.load(out)  # complete: every array present and of one length
            assert len(new) >= 1  # a run stopped before its first row writes nothing
            old = out.read_bytes()
        assert [p.name for p in tmp_path.iterdir()] == ["run.npz"]


# -- 4: a kernel that divides by zero stops the run, keeps the steps, names the value -


def test_division_by_zero_in_a_force_keeps_the_steps(models, tmp_path):
    """Item 4: a force 1/(t − 0.5) follows IEEE arithmetic (no ZeroDivisionError); the
    run stops at t = 0.5 with the steps before it saved and the quantity named."""
    out = tmp_path / "kick.npz"
    code, output = _cli(
        "simulate", models / "kick.py", "--out-dir", models / "gen", "--method", "rk4",
        "--t-end", "1", "--no-progress", "-o", out,
    )  # fmt: skip
    assert code == 1
    line = _one_line_error(output)
    assert "in the step from t = 0.499 to 0.5" in line
    assert "the generalized force Q[phi1] evaluated to inf" in line
    saved = mbdgen.load(out)
    assert len(saved) == 500 and saved.t[-1] == pytest.approx(0.499)
    with pytest.raises(SimulationError) as info:  # the API keeps them on the exception
        mbdgen.simulate(mbdgen.compile(models / "kick.py", models / "gen"), "rk4", t_end=1.0)
    assert len(info.value.result) == 500


@pytest.mark.parametrize("method", ["hht_adaptive", "genalpha_adaptive"])
@pytest.mark.parametrize("tol", [1e-3, 1e-6])
def test_error_control_does_not_step_over_a_singular_force(models, method, tol):
    """Issue item 4: the torque 1/(t − 0.5), whose velocity diverges as log|t − 0.5|.
    The explicit methods' error estimates grow without bound there and their step
    collapses; the index-3 methods' estimate of q's error (Negrut et al. 2007, Eq. 25)
    falls with h, and per step they finished with q̇(0.5) = −12.3 as if nothing had
    happened.  Per unit step, with the floor below which q̇ is not resolved
    (:func:`mbdgen.runtime.hht._velocity_floor`), they stop just before t = 0.5 with
    the collapse message (measured h at the stop: 9e-15 … 3e-11 for ε = 1e-3 … 1e-6)."""
    module = mbdgen.compile(models / "kick.py", models / "gen")
    with pytest.raises(SimulationError, match="the step size fell below its minimum") as info:
        mbdgen.simulate(module, method, h=1e-3, t_end=1.0, rtol=tol, atol=tol)
    assert "a singularity" in str(info.value)
    assert len(info.value.result) == 500  # the rows to t = 0.499, kept
    assert str(info.value).startswith("stopped at t = 0.5 ")
    code, output = _cli(
        "simulate", models / "kick.py", "--out-dir", models / "gen", "--method", method,
        "--t-end", "1", "--rtol", str(tol), "--atol", str(tol), "--no-progress",
    )  # fmt: skip
    assert code == 1 and "stopped at t = 0.5" in _one_line_error(output)


@pytest.mark.parametrize("method", ["hht_adaptive", "genalpha_adaptive"])
def test_the_error_per_step_steps_over_a_singular_force_as_its_note_says(models, method):
    """The paper's error per step (``error_per_unit_step=False``, ``--error-per-step``)
    keeps the behaviour the per-unit-step test removed: at 1e-3 and 1e-6 it finishes
    past 1/(t − 0.5) with a finite q̇ (measured −7.6 … −16.3 at t = 0.5, where the true
    velocity diverges), which the note after such a run says
    (:func:`mbdgen.accuracy.note`).  Should this ever stop at t = 0.5, that note is
    to change with it."""
    module = mbdgen.compile(models / "kick.py", models / "gen")
    for tol in (1e-3, 1e-6):
        result = mbdgen.simulate(
            module, method, h=1e-3, t_end=1.0, rtol=tol, atol=tol,
            options={"error_per_unit_step": False},
        )  # fmt: skip
        assert result.t[-1] == 1.0 and np.isfinite(result.qd[500]).all()


def test_coincident_spring_end_points_are_named(models):
    """Item 4: a TSDA whose two points coincide has no direction: NaN, named."""
    module = mbdgen.compile(models / "coincident.py", models / "gen")
    with pytest.raises(SimulationError, match=r"generalized force Q\[b_x\] evaluated to nan"):
        mbdgen.simulate(module, t_end=0.1)


# -- 5: the destination is checked before the run; a failed save is said after it ----


@pytest.mark.parametrize(
    ("destination", "message"),
    [
        ("out.txt", "use a file name ending in .npz or .h5 or .hdf5 or .csv"),
        ("out.xlsx", "use a file name ending in .npz or .h5 or .hdf5 or .csv"),
        ("blocker/out.npz", "'blocker' is a file, not a folder"),
        ("/proc/mbdgen-no-such-folder/out.npz", "cannot create the folder"),
        ("folder.npz", "it is a folder"),
    ],
)
def test_bad_output_path_fails_before_the_run(tmp_path, destination, message, monkeypatch):
    """Item 5: -o is checked before a single step is taken."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "blocker").write_text("a file")
    (tmp_path / "folder.npz").mkdir()
    code, output = _cli(
        "simulate", PENDULUM, "--out-dir", GENERATED, "--no-progress", "-o", destination
    )
    assert code == 1 and message in _one_line_error(output)
    assert "steps of" not in output


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only folder")
def test_unwritable_folder_fails_before_the_run(tmp_path):
    """Item 5: a folder without write permission is reported before the run."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    code, output = _cli("simulate", PENDULUM, "--out-dir", GENERATED, "-o", locked / "r.npz")
    assert code == 1 and "cannot write into" in _one_line_error(output)


def test_a_failed_save_is_reported_after_the_runs_own_message(models, tmp_path, monkeypatch):
    """Item 5: when the run failed and saving fails too, the run's message comes first
    and the save error second; the API caller still has the result in memory."""

    def full_disk(self, path):
        raise OutputError(f"cannot write {str(path)!r}: No space left on device")

    monkeypatch.setattr(mbdgen.results.Result, "save", full_disk)
    code, output = _cli(
        "simulate", models / "kick.py", "--out-dir", models / "gen", "--method", "rk4",
        "--t-end", "1", "--no-progress", "-o", tmp_path / "r.npz",
    )  # fmt: skip
    lines = [line for line in output.splitlines() if line.startswith("error: ")]
    assert code == 1 and len(lines) == 2
    assert "Q[phi1] evaluated to inf" in lines[0]
    assert "the partial result was not saved" in lines[1] and "No space left" in lines[1]


# -- 6: a finished run that violates its constraints says so -------------------------


def test_constraint_violation_is_reported_and_strict_fails(pendulum):
    """Item 6: the pendulum at h = 1 'finishes' with ‖Φ‖ ~ 1e3: a warning names the
    worst time and value; ``strict`` fails with the result attached."""
    with pytest.warns(ConstraintWarning, match=r"‖Φ‖ reached .* at t = .*first above"):
        r = mbdgen.simulate(pendulum, h=1.0, t_end=10.0)
    assert r.ok and r.info["warnings"]
    with pytest.raises(SimulationError, match="violates its constraints") as info:
        mbdgen.simulate(pendulum, h=1.0, t_end=10.0, strict=True)
    assert info.value.reason == "check" and len(info.value.result) == 11
    quiet = mbdgen.simulate(pendulum, h=1e-3, t_end=1.0)  # a good run says nothing
    assert quiet.info["warnings"] == []


@pytest.mark.parametrize(
    ("method", "constraint_remedy", "energy_remedy"),
    [
        ("rk4", "use Baumgarte stabilization", "a smaller step or an error-controlled method"),
        ("vabm", "use Baumgarte stabilization", "smaller tolerances (rtol, atol)"),
        ("hht", "Newton tolerance: use a smaller newton_tol or step", "a smaller step or an"),
        (
            "hht_adaptive",
            "projects its output rows onto Φ = 0, both up to its Newton tolerance: use a "
            "smaller newton_tol",
            "smaller tolerances (rtol",
        ),
    ],
)
def test_warnings_suggest_what_the_method_can_change(
    pendulum, method, constraint_remedy, energy_remedy
):
    """A remedy the method has: Baumgarte is no cure for a method that enforces Φ = 0
    itself (its Newton tolerance is), nor a smaller step for an error-controlled one
    (its tolerances are).  Bounds of 1e-300 make every run trip both checks."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # to 0.2: hht_adaptive's rows to 0.05 satisfy Φ = 0 to the last bit
        mbdgen.simulate(pendulum, method, h=0.01, t_end=0.2, phi_tol=1e-300, energy_tol=1e-300)
    said = [str(w.message) for w in caught]
    constraint = [w for w in said if w.startswith("the result violates its constraints")]
    energy = [w for w in said if w.startswith("the energy balance is off")]
    assert len(constraint) == 1 and constraint_remedy in constraint[0], said
    assert len(energy) == 1 and energy_remedy in energy[0], said


def test_constraint_violation_on_the_cli_exit_code():
    """Item 6 for CI: exit 0 with a warning; --strict exits 3; --phi-tol sets the bound."""
    args = ["simulate", PENDULUM, "--out-dir", GENERATED, "--h", "1", "--no-progress"]
    code, output = _cli(*args)
    assert code == 0 and "warning: the result violates its constraints" in output
    code, output = _cli(*args, "--strict")
    assert code == 3 and re.search(r"error: --strict: \d check\(s\) failed", output)
    assert _cli(*args, "--strict", "--phi-tol", "1e4", "--energy-tol", "10")[0] == 0


@pytest.mark.parametrize(
    "name", ["slider_crank_tsda", "double_pendulum_rsda", "fourbar", "slider_crank"]
)
def test_energy_balance_closes_with_dampers_and_drivers(name):
    """Item 6: T + V − E0 = ∫P dt, P = q̇ᵀ(Q + V_qᵀ) + λᵀΦ_t, for a TSDA and RSDAs with
    damping (P up to 500 W), a kinematic driver (the four-bar's crank) and a
    conservative model (P ≡ 0).  What is left is the trapezoidal rule's own error,
    which the Richardson estimate matches to 2 % (measured: 0.1-1 %)."""
    module = mbdgen.compile(MODELS / f"{name}.py", GENERATED)
    r = mbdgen.simulate(module, "abm", 4, 1e-3, 1.0)
    balance, scale, quadrature = mbdgen.simulation.energy_balance(r)
    assert scale > 0 and not r.info["warnings"]
    if name == "slider_crank":
        assert not r.power.any() and np.abs(balance).max() < 1e-9 * scale
    else:
        assert np.abs(r.power).max() > 1.0
        assert np.abs(balance).max() == pytest.approx(quadrature, rel=0.02)


def _numpy_energy_balance(t, energy, power):
    """The balance as NumPy writes it (mbdgen's before it became one jitted pass)."""
    work = np.concatenate([[0.0], np.cumsum(0.5 * np.diff(t) * (power[1:] + power[:-1]))])
    total = energy[:, 0] + energy[:, 1]
    scale = max(
        float(np.max(energy[:, 0])),
        float(np.max(np.abs(energy[:, 1] - energy[0, 1]))),
        float(np.max(np.abs(work))),
    )
    quadrature = 0.0
    if len(t) >= 5 and np.any(power != 0.0):
        t2, p2 = t[::2], power[::2]
        coarse = np.concatenate([[0.0], np.cumsum(0.5 * np.diff(t2) * (p2[1:] + p2[:-1]))])
        quadrature = float(np.max(np.abs(work[::2] - coarse))) / 3.0
    return total - total[0] - work, scale, quadrature


@pytest.mark.parametrize("rows", [2, 3, 4, 5, 6, 7, 50, 51])
def test_energy_balance_is_numpys_bit_for_bit(rows):
    """The jitted balance (mbdgen.runtime.postprocess.energy_balance) makes NumPy's
    operations in NumPy's order: equal to the last bit, NaN where NumPy has NaN, on
    uneven grids, with P ≡ 0, and with a NaN in T, V or P."""
    rng = np.random.default_rng(rows)
    t = np.cumsum(rng.uniform(0.1, 1.0, rows))
    energy = rng.normal(size=(rows, 2))
    for power in (rng.normal(size=rows), np.zeros(rows)):
        cases = [(energy, power)]
        for where in (0, rows // 2, rows - 1):
            for column in (0, 1):
                bad = energy.copy()
                bad[where, column] = np.nan
                cases.append((bad, power))
            bad_power = power.copy()
            bad_power[where] = np.nan
            cases.append((energy, bad_power))
        for e, p in cases:
            balance = np.empty(rows)
            scale, quadrature = postprocess.energy_balance(t, e, p, balance)
            expected, scale_np, quadrature_np = _numpy_energy_balance(t, e, p)
            np.testing.assert_array_equal(balance, expected)
            np.testing.assert_array_equal([scale, quadrature], [scale_np, quadrature_np])


def test_inconsistent_q0_suggests_assemble(pendulum):
    """Item 6: at t0, ‖Φ(q0)‖ = 4 is named with its worst row and the remedy."""
    with pytest.warns(ConstraintWarning, match=r"‖Φ\(q0\)‖ = 4 .*phi\[0\].*--assemble"):
        mbdgen.simulate(pendulum, h=1e-2, t_end=0.1, q0=[5.0, 0.0, 0.0], alpha=5, beta=5)
    with pytest.raises(MbdgenError, match="q0 violates the constraints"):
        mbdgen.simulate(pendulum, h=1e-2, t_end=0.1, q0=[5.0, 0.0, 0.0], strict=True)


# -- 7: failure messages name the cause the runtime can tell -------------------------


def test_singular_mass_matrix_is_named(models):
    """Item 7: a body without rotational inertia: the Welch schemes need M positive
    definite and say so; the index-1 methods run it unless the constrained motion
    itself has no inertia."""
    module = mbdgen.compile(models / "massless.py", models / "gen")
    with pytest.raises(SimulationError, match=r"mass matrix M is singular: coordinate\(s\) phi1"):
        mbdgen.simulate(module, "welch2", t_end=0.1)
    assert mbdgen.simulate(module, t_end=0.1).ok  # x1, y1 carry the pendulum's inertia
    with pytest.raises(SimulationError, match="singular on the motions the constraints allow"):
        mbdgen.simulate(module, t_end=0.1, params={"m": 0.0})


def test_blow_up_is_told_from_singularity(tmp_path):
    """Item 7: a step far too large for a stiff spring blows up; the message says so and
    suggests a smaller step or an error-controlled method, not redundancy."""
    module = mbdgen.compile(ROOT / "tests" / "models" / "spring_pendulum.py", tmp_path)
    with pytest.raises(SimulationError, match=r"blew up .*smaller step h.*vabm") as info:
        mbdgen.simulate(module, "ab", 4, 0.05, 20.0, params={"k": 1e5})
    assert "redundant" not in str(info.value)


def test_a_state_far_off_the_constraints_is_a_blow_up_not_a_dead_point():
    """The stiff flyball governor at h = 0.01: the first step takes |q̇| from 5.8 to 1e6
    and ‖Φ‖ to 1.9, and the next finds Φ_q singular.  That is no dead point of the
    linkage (which the message said, naming 21 rows): growth by 1e3 with the
    constraints left by 1 % of the state's size counts as a blow-up."""
    module = import_generated(GENERATED / "iftomm_a05_flyball_governor.py")
    with pytest.raises(SimulationError, match=r"blew up .*‖Φ‖ reached .*smaller step h") as info:
        mbdgen.simulate(module, "abm", 4, 0.01, 0.5)
    assert "singular configuration" not in str(info.value)


def test_the_remedy_fits_the_method():
    """A step too large is remedied by a smaller one (or error control) at a fixed step;
    an index-3 method is pointed at its own error-controlled form; a method that chose
    its steps already had a smaller one: its remedy is looser tolerances or a lower h_min."""
    from mbdgen.diagnose import _remedy

    assert "vabm" in _remedy("fixed", False) and "smaller step h" in _remedy("fixed", False)
    assert "hht_adaptive" in _remedy("hht", False)
    for family in ("variable", "hht_adaptive", "genalpha_adaptive"):
        remedy = _remedy(family, True)
        assert "rtol" in remedy and "h_min" in remedy and "smaller step h" not in remedy


def _history(*chunks: tuple[int, float]) -> simulation._Loop:
    """A driver's loop record after chunks of (accepted steps, mean step) from t = 0."""
    loop = simulation._Loop()
    t, steps = 0.0, 0
    loop.history.append((t, steps, math.nan, 0, 0, 0))
    for taken, h in chunks:
        t, steps = t + taken * h, steps + taken
        loop.history.append((t, steps, h, 0, 0, 0))
    return loop


def test_a_stalled_step_size_stops_the_run_and_a_dip_does_not():
    """The driver's stall test (:meth:`mbdgen.simulation._Loop.stalled`, checked after
    each chunk): a chunk of ≥ 1000 steps averaging 1000 times less than the largest
    chunk before it, at which the rest of the run would take more than 1e9 steps,
    stops it; a dip that recovers, small steps from the start, too few steps in the
    chunk, or a chunk from which the end is within reach do not."""
    t_end = 2.0
    collapse = _history((4096, 2e-5), (4096, 1e-7), (4096, 1.5e-9))
    assert collapse.stalled(t_end)
    assert "1.5e-09" in collapse.stall and "would take 1.3e+09 steps" in collapse.stall
    fine = _history((4096, 1e-9), (4096, 1e-9), (4096, 1e-9))
    assert not fine.stalled(t_end)  # never fell: a run that needs its small steps
    few = _history((4096, 2e-5), (999, 1e-10))
    assert not few.stalled(t_end)  # a dip at a discontinuity: a short chunk
    near = _history((4096, 2e-5), (4096, 1e-8))
    assert not near.stalled(near.history[-1][0] + 0.5)  # the end is 5e7 steps away
    assert not _history((4096, 2e-5), (4096, 1e-7), (4096, 1.5e-9)).stalled(1e-3)


def test_gcp_that_finds_no_partition_says_so():
    """Item 7: GCP gives up after three re-partitions and says that none worked."""
    circle = mbdgen.compile(MODELS / "circle.py", GENERATED)
    with pytest.raises(SimulationError, match=r"no partition of the coordinates worked after 3"):
        mbdgen.simulate(circle, "abm", 4, 0.5, 5.0, constraints="gcp")


# -- 12, 14: the user's mistakes are named as such, in one line ----------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--method", "vabm", "--rtol", "0"], "rtol must be positive and finite"),
        (["--method", "vabm", "--atol", "nan"], "atol must be positive and finite"),
        (["--t-end", "inf"], "t_end must be finite numbers"),
        (["--t-end", "1e9", "--h", "1e-6"], "the output would need"),
        (["--plot", "x.bmp"], "use a file name ending in .png or .pdf or .svg"),
        (["--hold", "x1"], "--hold keeps coordinates during assembly: add --assemble"),
        (["--constraints", "baumgarte"], "Baumgarte stabilization needs alpha or beta > 0"),
        (["--out-dir", "afile"], "afile is a file, not a folder"),
    ],
)
def test_user_errors_are_one_line(tmp_path, monkeypatch, args, message):
    """Items 12 and 14: each mistake gets a one-line error that says what to change."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("not a folder")
    out_dir = [] if "--out-dir" in args else ["--out-dir", str(GENERATED)]
    code, output = _cli("simulate", PENDULUM, *out_dir, "--no-progress", *args)
    assert code == 1 and message in _one_line_error(output)


def test_model_file_calling_sys_exit(tmp_path):
    """Item 12: a model that calls sys.exit(3) is an error in the model, with a message."""
    model = _model(tmp_path, "quits", "import sys\nsys.exit(3)\n")
    code, output = _cli("info", model, "--out-dir", tmp_path / "gen")
    assert code == 1 and "called sys.exit(3)" in _one_line_error(output)


def test_ctrl_c_during_numba_compilation_ends_like_an_interrupt(tmp_path):
    """Item 14: Ctrl-C while Numba compiles (a cold cache) prints one line and exits
    130, without an llvmlite traceback or 'no compiled object yet'."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cold"))
    args = [PENDULUM, "--out-dir", GENERATED, "--method", "vabm", "--t-end", "1"]
    args += ["-o", tmp_path / "run.npz"]
    proc = subprocess.Popen(
        [*MBDGEN, "simulate", *map(str, args), "--progress"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_until_stepping(proc)  # the module is loaded; its entry point compiles next (~5 s)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    if proc.returncode == 0:
        pytest.skip("the compilation finished before the signal came (a fast machine)")
    assert proc.returncode == 130, stderr
    assert "interrupted (Ctrl-C)" in stderr
    assert not (tmp_path / "run.npz").exists()  # nothing computed, nothing written
    for noise in ("Traceback", "RuntimeError", "no compiled object", "Exception ignored"):
        assert noise not in stderr, stderr


# -- 13: damaged or foreign result files -----------------------------------------------


def _foreign_files(folder: Path, good: Path) -> dict[str, Path]:
    files = {
        "empty": b"",
        "random bytes": bytes(random.Random(1).randrange(256) for _ in range(4096)),
        "truncated": good.read_bytes()[: good.stat().st_size // 2],
    }
    paths = {}
    for name, data in files.items():
        paths[name] = folder / f"{name.replace(' ', '_')}.npz"
        paths[name].write_bytes(data)
    paths["other archive"] = folder / "other.npz"
    np.savez(paths["other archive"], a=np.zeros(3))
    paths["zip of text"] = folder / "text.npz"
    with zipfile.ZipFile(paths["zip of text"], "w") as z:
        z.writestr("readme.txt", "hello")
    return paths


def test_loading_damaged_or_foreign_files(pendulum, tmp_path):
    """Item 13: one documented exception, naming the file and what is wrong."""
    good = mbdgen.simulate(pendulum, h=1e-2, t_end=1.0).save(tmp_path / "good.npz")
    expected = {
        "empty": "is empty",
        "random bytes": "neither a NumPy .npz archive nor an HDF5 file",
        "truncated": "is damaged",
        "other archive": "not an mbdgen result: it lacks t, q",
        "zip of text": "not an mbdgen result",
    }
    for name, path in _foreign_files(tmp_path, good).items():
        with pytest.raises(ResultFileError, match=expected[name]) as info:
            mbdgen.load(path)
        assert path.name in str(info.value)
        assert "pickled" not in str(info.value)
    with pytest.raises(mbdgen.MbdgenError, match="does not exist"):
        mbdgen.load(tmp_path / "missing.npz")


# -- 15: a model without a potential has no potential column of zeros ----------------


def test_model_without_potential_reports_none(rheonomic, tmp_path):
    """Item 15: a generalized-coordinate Model without ``potential=`` leaves V out of
    the CSV and says so when asked, instead of a column of zeros."""
    assert not rheonomic.HAS_POTENTIAL
    r = mbdgen.simulate(rheonomic, h=1e-3, t_end=0.1)
    header = r.save(tmp_path / "r.csv").read_text().splitlines()[0].split(",")
    assert "kinetic" in header and "potential" not in header
    with pytest.raises(MbdgenError, match="gave no potential energy"):
        r.potential  # noqa: B018


def test_demo_model_has_its_gravity_potential(slider_crank, slider_crank_q0, tmp_path):
    """Item 15: the demo's slider-crank now declares V = m g y; T + V is conserved."""
    r = mbdgen.simulate(slider_crank, h=1e-3, t_end=1.0, q0=slider_crank_q0)
    header = r.save(tmp_path / "r.csv").read_text().splitlines()[0].split(",")
    assert "potential" in header
    drift = np.abs(r.total_energy - r.total_energy[0]).max()
    assert drift < 1e-8  # direct ABM 4 at h = 1 ms (test_dynamics: 3e-10 over 10 s)


# -- the suite: many processes at once, one cold cache --------------------------------

CONCURRENT_PROCESSES = 10
CONCURRENT_RUN = """
import sys
import numpy as np
import mbdgen
folder = sys.argv[1]
module = mbdgen.compile(folder + "/pendulum.py", folder + "/gen")
result = mbdgen.simulate(module, "abm", 4, 1e-3, 0.5)
np.save(folder + f"/q{sys.argv[2]}.npy", result.q)
"""


@pytest.mark.slow
def test_concurrent_cold_compiles_and_runs_agree(tmp_path):
    """Ten processes compile and simulate one model at once into one folder, with one
    cold Numba cache: every process succeeds, the generated module is the committed
    one byte for byte, no temporary file is left, and every result is bitwise equal.

    Each process compiles for about 8 s of CPU, so on CI's two cores all ten are
    generating, compiling and writing the cache at the same moments.  It was 20: twice
    the CPU (150 s, the whole machine for 75 s, which stalled the other worker's tests
    as well) for the same overlap."""
    (tmp_path / "pendulum.py").write_bytes(PENDULUM.read_bytes())
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT_RUN, str(tmp_path), str(i)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(CONCURRENT_PROCESSES)
    ]
    for proc in procs:
        _, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, stderr[-3000:]
    generated = tmp_path / "gen" / "pendulum.py"
    assert generated.read_bytes() == (GENERATED / "pendulum.py").read_bytes()
    assert not [p.name for p in (tmp_path / "gen").iterdir() if p.suffix == ".tmp"]
    first = np.load(tmp_path / "q0.npy")
    for i in range(1, CONCURRENT_PROCESSES):
        np.testing.assert_array_equal(np.load(tmp_path / f"q{i}.npy"), first)
