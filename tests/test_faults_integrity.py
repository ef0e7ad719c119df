"""Nothing lost, nothing silent: the compiler's files, as a user meets them.

- the model file is never overwritten by its own generated module, nor is any file
  that is not a generated module;
- a module is stale when anything the model read changed (a JSON file, a helper
  module), and a module edited by hand or damaged is refused, not used;
- NaN and infinite defaults, initial values and ``-p`` values are rejected up front;
- names outside the Basic Multilingual Plane (😀) survive into the module and print.

None of these tests runs an integrator: they compile, check stamps and call kernels.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner
from conftest import MODELS

import mbdgen
from mbdgen.cli import main


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _copy_pendulum(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "pendulum.py"
    shutil.copy(MODELS / "pendulum.py", model)
    return model


def _one_line_error(res) -> str:
    assert res.exit_code == 1, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]


# -- item 11: names outside the Basic Multilingual Plane -----------------------------


def test_non_bmp_names_survive_into_the_module_and_print(tmp_path):
    model = _copy_pendulum(tmp_path / "emoji")
    text = model.read_text(encoding="utf-8")
    text = text.replace(
        'description="Simple pendulum, Haug 1989 Example 7.2.1",',
        'description="pendulum 😀 \\"quoted\\" \'too\'",\n'
        '    constraint_names=["x 😀", "y 😀", "x again 😀"],',
    )
    # a redundant row, so that `info` and `assemble` print the constraint names
    text = text.replace(
        "constraints=[x1 - l * sp.cos(phi1), y1 - l * sp.sin(phi1)],",
        "constraints=[x1 - l * sp.cos(phi1), y1 - l * sp.sin(phi1), 2 * (x1 - l * sp.cos(phi1))],",
    )
    model.write_text(text, encoding="utf-8")
    out = tmp_path / "gen"
    module = mbdgen.compile(model, out)
    assert module.CONSTRAINT_NAMES == ("x 😀", "y 😀", "x again 😀")
    assert module.DESCRIPTION == "pendulum 😀 \"quoted\" 'too'"
    assert "😀" in (out / "pendulum.py").read_text(encoding="utf-8")

    res = _cli("info", model, "--out-dir", out)
    assert res.exit_code == 0, res.output
    assert "model pendulum: pendulum 😀" in res.output
    assert "redundant at q0: x again 😀" in res.output
    res = _cli("assemble", model, "--out-dir", out)
    assert res.exit_code == 0, res.output
    assert "x again 😀" in res.output
