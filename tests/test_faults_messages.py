"""A newcomer's mistakes end in one line naming the cause, before anything is
compiled or run.

Each test reproduces the case as the user met it: a CLI call and its error line
(no traceback, no "internal error"), or the library call and its MbdgenError.
"""

from __future__ import annotations

import shutil
import socket
import time

import pytest
from conftest import GENERATED, MODELS, cli, one_line_error

import mbdgen
from mbdgen import compiler, diagnose, simulation
from mbdgen.compiler import import_generated
from mbdgen.errors import MbdgenError
from mbdgen.methods import METHODS

TSDA = MODELS / "slider_crank_tsda.py"


_cli = cli


def _one_line_error(output: str) -> str:
    return one_line_error(output, only=True)


def _free_port() -> int:
    """A local port that nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def no_compile(monkeypatch):
    """Generating or importing a module fails the test: the check must come first."""

    def refuse(*args, **kwargs):
        raise AssertionError("compiled before the check")

    monkeypatch.setattr(compiler, "compile", refuse)
    monkeypatch.setattr(compiler, "generate", refuse)


# -- 11: --scheduler ADDRESS -----------------------------------------------------------

SWEEP = ["sweep", MODELS / "pendulum.py", "--t-end", "0.02", "-p", "m=0.5:2:2"]


@pytest.mark.parametrize(
    "address, words",
    [
        ("127.0.0.1:notaport", "the port must be a number 1-65535"),
        ("127.0.0.1:0", "the port must be a number 1-65535"),
        ("127.0.0.1:70000", "the port must be a number 1-65535"),
        ("127.0.0.1", "no port"),
        ("tcp://", "no host"),
    ],
)
def test_a_malformed_scheduler_address_is_named(tmp_path, no_compile, address, words):
    """A bad --scheduler is refused on one line naming it, before the model
    is compiled (it was `ValueError: invalid literal for int() ... (internal error)`)."""
    code, output = _cli(*SWEEP, "-o", tmp_path / "s", "--scheduler", address)
    line = _one_line_error(output)
    assert code == 1
    assert f"--scheduler {address!r}" in line and words in line, line
    assert not (tmp_path / "s").exists()


def test_a_refused_scheduler_connection_fails_at_once(tmp_path, no_compile):
    """Nobody listening at the address fails at once (it waited the whole
    --scheduler-timeout, 10 s) with a line that says the connection was refused."""
    address = f"tcp://127.0.0.1:{_free_port()}"
    start = time.perf_counter()
    code, output = _cli(*SWEEP, "-o", tmp_path / "s", "--scheduler", address)
    elapsed = time.perf_counter() - start
    line = _one_line_error(output)
    assert code == 1 and elapsed < 5.0, (elapsed, line)
    assert "cannot reach the Dask scheduler" in line and address in line, line
    assert "refused" in line, line
    assert not (tmp_path / "s").exists()


# -- 12: tolerances the arithmetic cannot deliver --------------------------------------

ERROR_CONTROLLED = sorted(name for name, spec in METHODS.items() if spec.error_controlled)


@pytest.mark.parametrize("method", ERROR_CONTROLLED)
def test_a_tolerance_below_the_arithmetic_is_refused_up_front(method, monkeypatch):
    """Rtol below what float64 can deliver is refused before the model is
    even resolved, naming the smallest usable rtol, for every error-controlled method."""

    def refuse(model):
        raise AssertionError("resolved the model before the check")

    monkeypatch.setattr(simulation, "resolve_model", refuse)
    with pytest.raises(MbdgenError) as info:
        mbdgen.simulate("unused.py", method=method, h=0.01, t_end=0.1, rtol=1e-300, atol=1e-300)
    text = str(info.value)
    assert "rtol = 1e-300" in text and f"{simulation.RTOL_MIN:.2g}" in text, text
    assert method in text


@pytest.mark.parametrize("command", [["simulate"], ["sweep", "-p", "m=1:2:2"]])
def test_a_tolerance_below_the_arithmetic_on_the_cli(no_compile, command, tmp_path):
    """As met: `radau5 --rtol 1e-300 --atol 1e-300` is one line before the
    compile, not a run that ends with "tighten rtol and atol"."""
    output_option = ["-o", tmp_path / "s"] if command[0] == "sweep" else []
    code, output = _cli(
        command[0], MODELS / "pendulum.py", *command[1:], *output_option, "--method",
        "radau5", "--rtol", "1e-300", "--atol", "1e-300", "--t-end", "0.1", "--h", "0.01",
    )  # fmt: skip
    line = _one_line_error(output)
    assert code == 1 and "rtol = 1e-300" in line and "tighten" not in line, line


def test_the_smallest_usable_rtol_is_accepted(monkeypatch):
    """The floor refuses only what cannot work: rtol = RTOL_MIN passes the check."""
    reached = []

    def stop(model):
        reached.append(model)
        raise MbdgenError("past the option checks")

    monkeypatch.setattr(simulation, "resolve_model", stop)
    with pytest.raises(MbdgenError, match="past the option checks"):
        mbdgen.simulate("unused.py", method="radau5", h=0.01, t_end=0.1,
                        rtol=simulation.RTOL_MIN, atol=1e-300)  # fmt: skip
    assert reached


def test_the_step_floor_advice_is_not_to_tighten():
    """An error control that cut the step to its floor without passing is
    not helped by tighter tolerances; the advice says to loosen them (or h_min)."""
    remedy = diagnose._remedy("radau", error_controlled=True)
    assert "tighten" not in remedy and "loosen rtol and atol" in remedy, remedy
    assert "h_min" in remedy


# -- 15: parameter names checked before compiling ----------------------------------------


def test_a_misspelled_parameter_suggests_the_nearest():
    """An unknown parameter names the nearest ones instead of all 21."""
    module = import_generated(GENERATED / "slider_crank_tsda.py")
    with pytest.raises(MbdgenError) as info:
        mbdgen.simulate(module, params={"sprng_k": 100.0}, t_end=0.01)
    text = str(info.value)
    assert "'sprng_k'" in text and "did you mean spring_k?" in text, text
    assert "crank_m" not in text, text


def test_a_parameter_with_nothing_close_lists_them_all():
    module = import_generated(GENERATED / "slider_crank_tsda.py")
    with pytest.raises(MbdgenError) as info:
        mbdgen.simulate(module, params={"zzz": 1.0}, t_end=0.01)
    text = str(info.value)
    assert "did you mean" not in text and all(n in text for n in module.PARAMETER_NAMES)


def test_an_unknown_parameter_is_refused_before_the_integrator_is_built(monkeypatch):
    """Simulate() checks the names before it picks, specializes or JITs
    anything (the message came after the JIT, 36 s)."""
    module = import_generated(GENERATED / "slider_crank_tsda.py")

    def refuse(*args, **kwargs):
        raise AssertionError("built kernels before the check")

    monkeypatch.setattr(simulation, "evaluation_kernel", refuse)
    with pytest.raises(MbdgenError, match="did you mean spring_k"):
        mbdgen.simulate(module, params={"sprng_k": 100.0}, t_end=0.01)


@pytest.fixture
def stale_tsda(tmp_path, monkeypatch):
    """The slider-crank model copied where its module is not generated yet, and
    generating it fails the test."""
    model = tmp_path / TSDA.name
    shutil.copy(TSDA, model)

    def refuse(*args, **kwargs):
        raise AssertionError("generated the module before the check")

    monkeypatch.setattr(compiler, "generate", refuse)
    return model


def test_an_unknown_parameter_on_the_cli_before_the_compile(stale_tsda, tmp_path):
    """As met: `simulate MODEL -p sprng_k=100` is one line before the model is
    compiled, with the nearest name."""
    code, output = _cli(
        "simulate", stale_tsda, "--out-dir", tmp_path / "gen", "--t-end", "0.01",
        "-p", "sprng_k=100",
    )  # fmt: skip
    line = _one_line_error(output)
    assert code == 1 and "did you mean spring_k?" in line and "crank_m" not in line, line


def test_an_unknown_sweep_parameter_before_the_compile(stale_tsda, tmp_path):
    """For sweeps: a misspelled -p NAME of `mbdgen sweep` the same way."""
    code, output = _cli(
        "sweep", stale_tsda, "--out-dir", tmp_path / "gen", "--t-end", "0.01",
        "-p", "sprng_k=50:100:2", "-o", tmp_path / "s",
    )  # fmt: skip
    line = _one_line_error(output)
    assert code == 1 and "did you mean spring_k?" in line and "crank_m" not in line, line
    assert not (tmp_path / "s").exists()


def test_an_unknown_sweep_column_suggests_the_nearest():
    """Sweep() itself (a table's column) names the nearest parameter."""
    from mbdgen.sweeps import sweep

    module = import_generated(GENERATED / "slider_crank_tsda.py")
    with pytest.raises(MbdgenError, match="did you mean spring_k"):
        sweep(module, {"sprng_k": [1.0, 2.0]}, t_end=0.01)
