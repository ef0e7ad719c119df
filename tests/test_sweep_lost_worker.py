"""A Dask worker lost in the middle of a sweep (issue 13, faults).

A worker process is killed (SIGKILL, from inside a run's output function, so the
moment is known) while a batch runs on it:

* once: the scheduler runs the batch again on a live worker, and the sweep's
  dataset equals the in-process sweep of the same plan (exact: same driver, same
  entry point, see tests/test_sweep.py);
* every time the batch runs: after the scheduler's ``allowed-failures`` the batch
  is lost; the sweep finishes every other batch, raises one ``SweepIncomplete``
  naming the lost runs, keeps every finished batch on disk, and ``resume=True``
  runs exactly the missing runs to the same dataset as an uninterrupted sweep.

The session's LocalCluster (tests/conftest.py: 2 single-threaded worker processes,
``allowed-failures`` = 1, so a task survives one worker death, not two) serves both.
"""

from __future__ import annotations

import os
import signal
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import mbdgen
from mbdgen.sweeps import SweepIncomplete, load_sweep, sample

OPTIONS = dict(method="abm", order=4, h=1e-3, t_end=0.05, alpha=5.0, beta=5.0, start="ramp")
ASSEMBLE = ["theta"]
TIMING = ["counter.wall_time_s", "counter.setup_time_s"]


def _plan() -> pd.DataFrame:
    return sample({"m": (0.5, 2.0), "L": (0.45, 0.6), "q0.theta": (0.9, 1.1)}, 6, seed=5)


def _theta2(result) -> float:
    return float(result.q[-1, 0] ** 2)


def _die_once(marker: str, result) -> float:
    """Kill this worker process the first time any run gets here."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return _theta2(result)
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")  # pragma: no cover


def _die_on(theta0: float, marker: str, result) -> float:
    """Kill this worker process whenever the run that starts at θ0 = theta0 gets here
    (assembly holds θ0, so q[0, 0] is exactly the plan's value)."""
    if result.q[0, 0] == theta0:
        Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return _theta2(result)


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    keep = [c for c in b.columns if c not in TIMING]
    pd.testing.assert_frame_equal(a[keep].reset_index(drop=True), b[keep].reset_index(drop=True))


def test_a_killed_worker_s_batch_runs_again(slider_crank, tmp_path, dask_client):
    plan = _plan()
    marker = str(tmp_path / "died")
    common = dict(batch_size=1, assemble=ASSEMBLE, **OPTIONS)
    remote = mbdgen.sweep(
        slider_crank, plan, path=tmp_path / "d", client=dask_client,
        outputs={"theta2": partial(_die_once, marker)}, **common,
    )  # fmt: skip
    assert os.path.exists(marker)  # a worker did die in the middle of the sweep
    local = mbdgen.sweep(slider_crank, plan, workers=2, outputs={"theta2": _theta2}, **common)
    assert not remote.missing and (remote.table["status"] == "finished").all()
    _same(remote.table, local.table)


def test_a_batch_that_kills_every_worker_is_lost_and_resumed(slider_crank, tmp_path, dask_client):
    plan = _plan()
    killer = 3
    marker = str(tmp_path / "died")
    path = tmp_path / "s"
    common = dict(batch_size=1, assemble=ASSEMBLE, trajectories=True, **OPTIONS)
    die = partial(_die_on, float(plan.loc[killer, "q0.theta"]), marker)
    with pytest.raises(SweepIncomplete) as info:
        mbdgen.sweep(slider_crank, plan, path=path, client=dask_client,
                     outputs={"theta2": die}, **common)  # fmt: skip
    err = info.value
    assert os.path.exists(marker) and killer in err.lost
    message = str(err)
    assert "\n" not in message and "KilledWorker" in message and "--resume" in message
    assert f"{len(err.lost)} of {len(plan)} runs lost" in message
    # every other batch finished and is on disk, the lost runs have no row
    partial_sweep = load_sweep(path)
    assert sorted(partial_sweep.missing) == sorted(err.lost)
    assert len(partial_sweep.table) == len(plan) - len(err.lost) == err.done
    assert (partial_sweep.table["status"] == "finished").all()
    assert not (path / "runs.parquet").exists()
    # resume (here in-process; the output no longer kills) runs only the lost runs
    before = {f.name for f in (path / "batches").glob("*.parquet")}
    resumed = mbdgen.sweep(slider_crank, path=path, resume=True, workers=2,
                           outputs={"theta2": _theta2}, **common)  # fmt: skip
    after = {f.name for f in (path / "batches").glob("*.parquet")}
    assert before < after and (path / "runs.parquet").exists()
    new_rows = pd.concat([pd.read_parquet(path / "batches" / f) for f in after - before])
    assert sorted(new_rows["run"]) == sorted(err.lost)
    whole = mbdgen.sweep(slider_crank, plan, workers=2, outputs={"theta2": _theta2}, **common)
    _same(resumed.table.drop(columns=["trajectory_file", "trajectory_group"]), whole.table)
    for i in range(len(plan)):
        a, b = resumed.trajectory(i), whole.trajectory(i)
        assert all(np.array_equal(a[k], b[k]) for k in a)


def test_cli_reports_lost_runs_on_one_line(tmp_path, monkeypatch):
    """`mbdgen sweep` turns SweepIncomplete into one line and exit status 1."""
    from click.testing import CliRunner

    import mbdgen.sweeps
    from mbdgen.cli import main

    def lost_sweep(*args, **kwargs):
        raise SweepIncomplete(
            "sweep incomplete: 1 of 3 runs lost (runs 2: KilledWorker)", 2, 3, [2]
        )

    monkeypatch.setattr(mbdgen.sweeps, "sweep", lost_sweep)
    args = ["sweep", "models/slider_crank.py", "-p", "m=0.5:2:3", "-o", str(tmp_path / "x")]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1
    assert res.output == "error: sweep incomplete: 1 of 3 runs lost (runs 2: KilledWorker)\n"


def test_a_worker_without_the_shared_path_imports_the_sent_text(
    slider_crank, tmp_path, monkeypatch
):
    """A Dask worker imports the module from the client's path when it sees the same
    file there, and otherwise from the text the client sent (no shared file system,
    or an out-of-date copy): it always runs the client's module.  (Import only: the
    copy's kernels would JIT on first call, which a worker pays once.)"""
    import sys

    from mbdgen.runtime import module_name
    from mbdgen.sweeps import _worker_module

    # the copy takes the module's canonical name in sys.modules: give it back after
    name = module_name(slider_crank.__file__)
    monkeypatch.setitem(sys.modules, name, sys.modules[name])
    path = Path(slider_crank.__file__)
    text = path.read_text(encoding="utf-8")
    assert _worker_module(str(path), text) is slider_crank
    elsewhere = tmp_path / "not-shared" / path.name  # a path this "worker" does not see
    received = _worker_module(str(elsewhere), text)
    assert Path(received.__file__).read_text(encoding="utf-8") == text
    assert received.BODY_HASH == slider_crank.BODY_HASH and not elsewhere.exists()
    stale = tmp_path / path.name  # an old copy at the shared path: not used
    stale.write_text(text.replace("Slider-crank", "Slider crank"), encoding="utf-8")
    assert stale.read_text(encoding="utf-8") != text
    assert Path(_worker_module(str(stale), text).__file__) == Path(received.__file__)
