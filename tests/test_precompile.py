"""``mbdgen compile --precompile METHODS``: JIT in a detached background process."""

from __future__ import annotations

import subprocess

import pytest
from click.testing import CliRunner

from mbdgen import precompile
from mbdgen.cli import main
from mbdgen.errors import MbdgenError
from tests.conftest import GENERATED, MODELS


def test_parse_methods_names_the_unknown_one():
    assert precompile.parse_methods("abm, hht") == ("abm", "hht")
    with pytest.raises(MbdgenError, match="unknown method nope"):
        precompile.parse_methods("abm,nope")


def test_cli_starts_a_detached_process(monkeypatch):
    started = {}

    class FakePopen:
        pid = 4242

        def __init__(self, args, **keywords):
            started.update(args=args, **keywords)

    monkeypatch.setattr(subprocess, "Popen", FakePopen)
    model = str(MODELS / "pendulum.py")
    result = CliRunner().invoke(
        main, ["compile", model, "-o", str(GENERATED), "--precompile", "abm,hht"]
    )
    assert result.exit_code == 0, result.output
    assert "up to date" in result.output
    assert "precompiling abm, hht in the background (process 4242)" in result.output
    assert started["args"][-3:] == [model, str(GENERATED), "abm,hht"]
    assert started["start_new_session"] is True
    assert started["stdout"] is subprocess.DEVNULL


def test_cli_unknown_method_is_one_line():
    result = CliRunner().invoke(
        main, ["compile", str(MODELS / "pendulum.py"), "-o", str(GENERATED), "--precompile", "x"]
    )
    assert result.exit_code != 0
    assert "unknown method x" in result.output
    assert "Traceback" not in result.output


def test_run_records_each_method(pendulum):
    done = precompile.run(str(MODELS / "pendulum.py"), str(GENERATED), ("abm",))
    assert done == {"abm": "ok"}
