"""`mbdgen sweep --outputs FILE`: user functions of a run's Result as columns, from
the CLI, on threads and on Dask (where they travel by value), and their errors."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

import mbdgen
from mbdgen.cli import main
from mbdgen.errors import MbdgenError
from mbdgen.sweeps import load_sweep, read_outputs

OUTPUTS = '''
import numpy as np


def x_span(result):
    """Stroke of the slider's mass point."""
    return float(np.ptp(result.coordinate("x")))


def last_theta(result):
    return float(result.q[-1, 0])


def _helper(result):  # private: not an output
    return 0.0
'''

ARGS = ["sweep", "models/slider_crank.py", "--t-end", "0.02", "--alpha", "5", "--beta", "5"]


def test_cli_outputs_file_threads_and_dask(slider_crank, tmp_path, dask_client):
    file = tmp_path / "outs.py"
    file.write_text(OUTPUTS)
    assert sorted(read_outputs(file)) == ["last_theta", "x_span"]
    runner = CliRunner()
    spec = ["-p", "m=0.5:2:3", "--outputs", str(file)]
    res = runner.invoke(main, [*ARGS, *spec, "-o", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    address = dask_client.scheduler.address
    res = runner.invoke(main, [*ARGS, *spec, "-o", str(tmp_path / "b"), "--scheduler", address])
    assert res.exit_code == 0, res.output
    a, b = load_sweep(tmp_path / "a").table, load_sweep(tmp_path / "b").table
    assert np.array_equal(a["output.x_span"], b["output.x_span"])
    assert "output._helper" not in a
    # each value is the function of simulate()'s result with that set, exactly
    for _, row in a.iterrows():
        lone = mbdgen.simulate(slider_crank, params={"m": row["m"]}, t_end=0.02, alpha=5.0,
                               beta=5.0)  # fmt: skip
        assert row["output.x_span"] == float(np.ptp(lone.coordinate("x")))
        assert row["output.last_theta"] == row["final.q.theta"] == lone.q[-1, 0]
    # resuming needs the outputs again (their code is not stored)
    res = runner.invoke(main, [*ARGS, "--resume", "-o", str(tmp_path / "a")])
    assert res.exit_code == 1 and "give --outputs FILE again" in res.output
    res = runner.invoke(
        main, [*ARGS, "--resume", "--outputs", str(file), "-o", str(tmp_path / "a")]
    )
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("x = 1\n", "defines no function"),
        ("def f(a, b):\n    return 0.0\n", "must take one argument"),
        ("import no_such_module_xyz\n", "ModuleNotFoundError"),
    ],
)
def test_bad_outputs_files_are_one_line_errors(tmp_path, text, words):
    file = tmp_path / "bad.py"
    file.write_text(text)
    res = CliRunner().invoke(main, [*ARGS, "-p", "m=1,2", "--outputs", str(file), "-o",
                                    str(tmp_path / "s")])  # fmt: skip
    assert res.exit_code == 1 and res.output.count("\n") == 1 and words in res.output
    assert not (tmp_path / "s").exists()


def test_a_failing_output_names_itself_and_the_run(slider_crank, tmp_path):
    def boom(result):
        if result.q[0, 0] > 0.9:
            raise ValueError("no amplitude")
        return 0.0

    plan = {"q0.theta": [0.8, 0.95, 0.85, 0.9]}
    with pytest.raises(MbdgenError, match=r"output 'boom' failed on run 1: ValueError: no amp"):
        mbdgen.sweep(slider_crank, plan, path=tmp_path / "s", workers=2, batch_size=1,
                     outputs={"boom": boom}, assemble=["theta"], t_end=0.01)  # fmt: skip
    kept = load_sweep(tmp_path / "s")  # the batches that finished are on disk
    assert 1 in kept.missing and (kept.table["status"] == "finished").all()


def test_cli_check_levels_apply_to_every_run_and_resume(tmp_path):
    """--phi-tol (like --energy-tol, --h-min, --h-max) reaches every run's simulate():
    below the published q0's ‖Φ(q0)‖ ≈ 4e-5 with --strict each set is refused with
    simulate()'s message; a --resume that leaves it out keeps the stored level."""
    out = str(tmp_path / "c")
    runner = CliRunner()
    res = runner.invoke(main, [*ARGS, "-p", "m=1,2", "--phi-tol", "1e-14", "--strict", "-o", out])
    assert res.exit_code == 0 and "2 error" in res.output, res.output
    table = load_sweep(out).table
    assert table["message"].str.contains("phi_tol = 1e-14", regex=False).all()
    res = runner.invoke(main, [*ARGS, "--resume", "-o", out])
    assert res.exit_code == 0 and "2 runs" in res.output, res.output
    res = runner.invoke(main, [*ARGS, "--resume", "--phi-tol", "1", "-o", out])
    assert res.exit_code == 1 and "options differ" in res.output
