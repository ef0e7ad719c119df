"""What the CLI says about compiling: the notice when Numba compiles and only then,
its progress lines, and the summary's true compile time.

A timer would also fire on a slow warm start, and timing from the loaded entry point
leaves the compilation out: the notice listens to Numba's ``numba:compile`` events,
which a load from the on-disk cache does not send.
"""

from __future__ import annotations

import io
import subprocess
import sys
import time

from conftest import MODELS
from numba.core import event

from mbdgen import cli


def _watch(monkeypatch, period=0.05):
    monkeypatch.setattr(cli, "COMPILE_PROGRESS_S", period)
    out = io.StringIO()
    return cli._CompileWatch("m's kernels and the abm integrator", stream=out), out


def test_no_compilation_says_nothing_and_reports_a_load(monkeypatch):
    watch, out = _watch(monkeypatch)
    with watch:
        time.sleep(0.1)
    assert out.getvalue() == ""
    assert not watch.compiled
    assert watch.summary(0.02) == "+0.02 s loading the compiled code"


def test_a_compilation_is_said_once_with_progress_and_its_time(monkeypatch):
    watch, out = _watch(monkeypatch)
    with watch:
        with event.trigger_event("numba:compile", data={}):
            with event.trigger_event("numba:compile", data={}):  # nested: one compile
                time.sleep(0.3)
        with event.trigger_event("numba:compile", data={}):
            time.sleep(0.05)
    lines = out.getvalue().splitlines()
    assert (
        lines[0]
        == "compiling m's kernels and the abm integrator (Numba; cached for the next run) ..."
    )
    assert sum(line.startswith("compiling") for line in lines) == 1
    assert any("still compiling" in line for line in lines[1:]), lines
    assert watch.compiled and 0.3 <= watch.seconds < 1.0
    assert watch.summary(0.0).endswith("s compiling, cached for the next run")


def test_first_and_second_run_on_the_cli(tmp_path):
    (tmp_path / "pendulum.py").write_text((MODELS / "pendulum.py").read_text())
    command = [sys.executable, "-m", "mbdgen.cli", "simulate", str(tmp_path / "pendulum.py"),
               "--out-dir", str(tmp_path / "gen"), "--t-end", "0.1", "--no-progress"]  # fmt: skip
    first = subprocess.run(command, capture_output=True, text=True, timeout=600)
    second = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    # a new module's kernels compile on its first run, and load from the cache after
    assert "(Numba; cached for the next run)" in first.stderr
    assert "s compiling, cached for the next run)" in first.stdout
    assert "Numba" not in second.stderr
    assert "s loading the compiled code)" in second.stdout


class _Dispatcher:
    """Stands for a Numba dispatcher in an event: its ``py_func``'s module tells an
    integrator (mbdgen's own code) from the model's kernels."""

    def __init__(self, module):
        def py_func():
            pass

        py_func.__module__ = module
        self.py_func = py_func


def test_the_integrators_compile_is_estimated_and_counted_down(monkeypatch):
    monkeypatch.setattr(cli, "COMPILE_PROGRESS_S", 0.05)
    out = io.StringIO()
    watch = cli._CompileWatch("m's kernels and the hht integrator", stream=out, estimate_s=30)
    with watch:
        kernel = {"dispatcher": _Dispatcher("pendulum")}
        with event.trigger_event("numba:compile", data=kernel):
            time.sleep(0.15)
        routine = {"dispatcher": _Dispatcher("mbdgen.runtime.shared")}
        with event.trigger_event("numba:compile", data=routine):
            time.sleep(0.15)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("compiling m's kernels and the hht integrator (Numba;")
    said = [line for line in lines if "takes about 30 s to compile" in line]
    assert len(said) == 1 and "mbdgen warmup" in said[0]
    # before the integrator began: no countdown; after: what is left of the estimate
    before = lines[1 : lines.index(said[0])]
    assert before and all("integrator" not in line for line in before), lines
    after = lines[lines.index(said[0]) + 1 :]
    assert any("the integrator about 30 s more" in line for line in after), lines


def test_no_estimate_where_the_installation_is_warm(monkeypatch):
    monkeypatch.setattr(cli, "COMPILE_PROGRESS_S", 0.05)
    out = io.StringIO()
    watch = cli._CompileWatch("m's kernels and the hht integrator", stream=out)
    with watch:
        with event.trigger_event("numba:compile", data={"dispatcher": _Dispatcher("pendulum")}):
            time.sleep(0.12)
    assert "integrator" not in "".join(out.getvalue().splitlines()[1:])


def test_on_a_terminal_the_progress_is_one_line_rewritten(monkeypatch):
    monkeypatch.setattr(cli, "COMPILE_PROGRESS_S", 0.03)

    class _Tty(io.StringIO):
        def isatty(self):
            return True

    out = _Tty()
    with cli._CompileWatch("m's kernels and the abm integrator", stream=out):
        with event.trigger_event("numba:compile", data={}):
            time.sleep(0.2)
    text = out.getvalue()
    assert text.count("\r  ... still compiling") >= 2
    assert text.endswith("\n") and text.count("\n") == 2  # the notice, then the closed line


def test_info_says_it_compiles_only_when_it_does(tmp_path):
    (tmp_path / "pendulum.py").write_text((MODELS / "pendulum.py").read_text())
    command = [sys.executable, "-m", "mbdgen.cli", "info", str(tmp_path / "pendulum.py"),
               "--out-dir", str(tmp_path / "gen")]  # fmt: skip
    first = subprocess.run(command, capture_output=True, text=True, timeout=600)
    second = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "compiling pendulum's Φ and Φ_q (Numba; cached for the next run) ..." in first.stderr
    assert "Numba" not in second.stderr
