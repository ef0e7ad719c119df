"""Sweeps (mbdgen.sweeps): run i equals a lone simulate() bit for bit, on threads and
on a Dask LocalCluster; failures are rows, not crashes; an interrupted sweep resumes
to the same dataset.

Every comparison is exact (np.array_equal, DataFrame equality): a sweep run is the
same driver, stepper and entry point as simulate(), so any difference is a bug.
The timing counters (wall and setup time) are the only columns left out.
"""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import mbdgen
from mbdgen.cli import main
from mbdgen.errors import MbdgenError
from mbdgen.sweeps import SweepInterrupted, grid, load_sweep, plan_from_specs, sample

#: A short slider-crank run (ABM 4, Baumgarte) assembled per set, θ0 held.
OPTIONS = dict(method="abm", order=4, h=1e-3, t_end=0.05, alpha=5.0, beta=5.0, start="ramp")
ASSEMBLE = ["theta"]
TIMING = ["counter.wall_time_s", "counter.setup_time_s"]


def _plan() -> pd.DataFrame:
    plan = sample({"m": (0.5, 2.0), "L": (0.45, 0.6), "q0.theta": (0.9, 1.1)}, 6, seed=3)
    plan["J1"], plan["J2"], plan["g"] = 0.045, 33 / 4800, 10.0
    plan.loc[2, ["m", "J1", "J2"]] = 0.0  # no inertia at all: assembly refuses the set
    plan.loc[4, "g"] = 1e12  # the explicit method blows up: NaN within a few steps
    return plan


#: Set → (status, words of its message) of the sets that do not finish.
BROKEN = {2: ("error", "singular"), 4: ("failed", "blew up")}


def _lone(module, row):
    params = {k: row[k] for k in ("m", "L", "J1", "J2", "g")}
    q0 = np.array(module.Q0, dtype=float)
    q0[0] = row["q0.theta"]
    return mbdgen.simulate(module, params=params, q0=q0, assemble=ASSEMBLE, **OPTIONS)


def _final_theta(result) -> float:
    return float(result.q[-1, 0] ** 2)


def _same_as_lone(module, result, plan):
    """Every finished run of ``result`` equals simulate() of its set, bit for bit."""
    for i, row in plan.iterrows():
        rec = result.table.set_index("run").loc[i]
        if i in BROKEN:
            status, words = BROKEN[i]
            assert rec["status"] == status and words in rec["message"]
            with pytest.raises(MbdgenError) as lone_error:
                _lone(module, row)
            assert str(lone_error.value) == rec["message"]
            assert np.isnan(rec["final.q.x"]) and np.isnan(rec["output.theta2"])
            continue
        assert rec["status"] == "finished", rec["message"]
        lone = _lone(module, row)
        arrays = result.trajectory(i)
        for key in ("t", "q", "qd", "qdd", "lam", "phi_norm"):
            assert np.array_equal(arrays[key], getattr(lone, key)), key
        assert rec["final.q.x"] == lone.q[-1, 2]
        assert rec["max.q.phi"] == lone.q[:, 1].max()
        assert rec["output.theta2"] == _final_theta(lone)
        assert rec["counter.steps"] == lone.counters["steps"]


def test_threads_equal_simulate_and_failures_are_rows(slider_crank, tmp_path):
    plan = _plan()
    result = mbdgen.sweep(
        slider_crank, plan, path=tmp_path / "s", trajectories=True, workers=2, batch_size=2,
        outputs={"theta2": _final_theta}, assemble=ASSEMBLE, **OPTIONS,
    )  # fmt: skip
    assert len(result.table) == len(plan) and not result.missing
    _same_as_lone(slider_crank, result, plan)
    # the on-disk dataset: one table, readable with pandas alone, equal to what sweep returned
    whole = pd.read_parquet(tmp_path / "s" / "runs.parquet")
    pd.testing.assert_frame_equal(whole, result.table)
    assert whole.columns[0] == "run" and list(whole["m"]) == list(plan["m"])
    memory = mbdgen.sweep(
        slider_crank, plan, workers=2, batch_size=4, outputs={"theta2": _final_theta},
        assemble=ASSEMBLE, **OPTIONS,
    )  # fmt: skip
    keep = [c for c in result.table.columns if c not in TIMING and not c.startswith("traj")]
    pd.testing.assert_frame_equal(memory.table[keep], result.table[keep])


def test_interrupted_sweep_resumes_to_the_same_dataset(slider_crank, tmp_path):
    plan = _plan()
    calls, lock = [0], threading.Lock()

    def interrupt_at_third(result) -> float:
        with lock:
            calls[0] += 1
            if calls[0] == 3:
                raise KeyboardInterrupt  # as Ctrl-C between runs
        return _final_theta(result)

    path = tmp_path / "cut"
    common = dict(workers=2, batch_size=1, assemble=ASSEMBLE, trajectories=True, **OPTIONS)
    with pytest.raises(SweepInterrupted, match="--resume"):
        mbdgen.sweep(
            slider_crank, plan, path=path, outputs={"theta2": interrupt_at_third}, **common
        )
    partial = load_sweep(path)
    assert partial.missing and len(partial.table) < len(plan)
    assert not (path / "runs.parquet").exists()
    with pytest.raises(MbdgenError, match="already holds a sweep"):
        mbdgen.sweep(slider_crank, plan, path=path, outputs={"theta2": _final_theta}, **common)
    resumed = mbdgen.sweep(
        slider_crank, path=path, resume=True, outputs={"theta2": _final_theta}, **common
    )
    whole = mbdgen.sweep(
        slider_crank, plan, path=tmp_path / "whole", outputs={"theta2": _final_theta}, **common
    )
    keep = [c for c in whole.table.columns if c not in TIMING and not c.startswith("traj")]
    pd.testing.assert_frame_equal(resumed.table[keep], whole.table[keep])
    for i in range(len(plan)):
        if BROKEN.get(i, ("",))[0] == "error":
            continue  # refused before its first step: no trajectory
        a, b = resumed.trajectory(i), whole.trajectory(i)
        assert all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)  # run 4 ends in NaN
    with pytest.raises(MbdgenError, match="options differ|differ from this call"):
        mbdgen.sweep(slider_crank, path=path, resume=True, **{**common, "alpha": 1.0})


def test_plans():
    g = grid({"k": [1.0, 2.0], "c": [3.0, 4.0, 5.0]})
    assert list(g["k"]) == [1, 1, 1, 2, 2, 2] and list(g["c"]) == [3, 4, 5, 3, 4, 5]
    a = sample({"m": (1.0, 2.0)}, 5, seed=7)
    pd.testing.assert_frame_equal(a, sample({"m": (1.0, 2.0)}, 5, seed=7))
    assert ((a["m"] >= 1) & (a["m"] < 2)).all()
    log = sample({"k": (1.0, 1e4)}, 200, seed=1, dist="loguniform")
    assert (log["k"] > 1).all() and np.median(np.log10(log["k"])) == pytest.approx(2, abs=0.5)
    p = plan_from_specs(["k=100:1000:10", "c=0.5"])
    assert len(p) == 10 and p["k"].iloc[-1] == 1000.0 and (p["c"] == 0.5).all()
    r = plan_from_specs(["k=1:2", "c=0.5"], random=4, seed=0)
    assert len(r) == 4 and (r["c"] == 0.5).all()
    with pytest.raises(MbdgenError, match="range for --random"):
        plan_from_specs(["k=1:2"])


def test_cli_grid_resume_and_errors(tmp_path):
    runner = CliRunner()
    out = tmp_path / "cli"
    args = ["sweep", "models/slider_crank.py", "--t-end", "0.02", "--alpha", "5", "--beta", "5"]
    res = runner.invoke(main, [*args, "-p", "m=0.5:2:3", "-p", "L=0.5,0.55", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "6 runs (6 finished)" in res.output
    table = load_sweep(out).table
    assert list(table["m"]) == [0.5, 0.5, 1.25, 1.25, 2.0, 2.0]
    res = runner.invoke(main, [*args, "--resume", "-o", str(out)])
    assert res.exit_code == 0 and "6 runs" in res.output
    # options left out on --resume are the stored sweep's; a changed one is refused
    res = runner.invoke(main, ["sweep", "models/slider_crank.py", "--resume", "-o", str(out)])
    assert res.exit_code == 0 and "6 runs" in res.output, res.output
    res = runner.invoke(main, [*args, "--h", "2e-3", "--resume", "-o", str(out)])
    assert res.exit_code == 1 and "options differ" in res.output
    res = runner.invoke(main, [*args, "-p", "mass=1:2:2", "-o", str(tmp_path / "x")])
    assert res.exit_code == 1
    assert res.output.count("\n") == 1 and "names nothing in model" in res.output
    assert not (tmp_path / "x").exists()
    table_file = tmp_path / "sets.csv"
    pd.DataFrame({"m": [1.0, 1.5], "qd0.theta": [0.0, 1.0]}).to_csv(table_file, index=False)
    res = runner.invoke(main, [*args, "--table", str(table_file), "-o", str(tmp_path / "t")])
    assert res.exit_code == 0, res.output


def test_dask_equals_threads_and_streams(slider_crank, tmp_path, dask_client):
    plan = _plan()
    seen: list[int] = []
    common = dict(trajectories=True, batch_size=2, outputs={"theta2": _final_theta},
                  assemble=ASSEMBLE, **OPTIONS)  # fmt: skip
    remote = mbdgen.sweep(
        slider_crank, plan, path=tmp_path / "d", client=dask_client,
        progress=lambda done, total: seen.append(done), **common,
    )  # fmt: skip
    local = mbdgen.sweep(slider_crank, plan, path=tmp_path / "l", workers=2, **common)
    # batches are numbered as they arrive, so trajectory files may differ: the arrays
    # themselves are compared below
    keep = [c for c in local.table.columns if c not in TIMING and not c.startswith("traj")]
    pd.testing.assert_frame_equal(remote.table[keep], local.table[keep])
    _same_as_lone(slider_crank, remote, plan)
    # results came back batch by batch (3 batches), each written as it arrived
    assert seen == [2, 4, 6]
    assert len(list((tmp_path / "d" / "batches").glob("*.parquet"))) == 3


def test_entry_points_release_the_gil(slider_crank):
    """Threads of a sweep run jitted chunks in parallel only if every entry point is
    compiled with nogil=True (the template's decorator; see mbdgen.sweeps)."""
    from mbdgen.codegen.abi import ENTRY_POINTS

    for e in ENTRY_POINTS:
        assert getattr(slider_crank, e.name).targetoptions.get("nogil") is True, e.name


def test_cli_scheduler_address(tmp_path, dask_client):
    """--scheduler ADDRESS is the only change from a laptop sweep to a cluster sweep."""
    args = ["sweep", "models/slider_crank.py", "--t-end", "0.02", "-p", "m=0.5:2:3"]
    res = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    address = dask_client.scheduler.address
    res = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "b"), "--scheduler", address])
    assert res.exit_code == 0, res.output
    a, b = load_sweep(tmp_path / "a").table, load_sweep(tmp_path / "b").table
    keep = [c for c in a.columns if c not in TIMING]
    pd.testing.assert_frame_equal(a[keep], b[keep])


def test_cli_unreachable_scheduler_is_one_line(tmp_path):
    """A scheduler that does not answer within --scheduler-timeout is named in one line
    (no traceback), and nothing is written."""
    import socket

    with socket.socket() as sock:  # a local port that nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = ["sweep", "models/slider_crank.py", "--t-end", "0.02", "-p", "m=0.5:2:3"]
    out = tmp_path / "never"
    res = CliRunner().invoke(
        main,
        [*args, "-o", str(out), "--scheduler", f"tcp://127.0.0.1:{port}",
         "--scheduler-timeout", "1"],
    )  # fmt: skip
    assert res.exit_code == 1
    assert res.output.count("\n") == 1 and "cannot reach the Dask scheduler" in res.output
    assert not out.exists()


def test_sweep_bench_smoke():
    """`mbdgen bench --sweep N` end to end on a tiny problem (ratios are not checked:
    8 short runs measure start-up, not throughput)."""
    from mbdgen.bench import sweep_bench, sweep_report

    numbers = sweep_bench(runs=8, t_end=0.05, repeats=1)
    assert numbers["runs"] == 8 and numbers["steps_per_run"] == 50
    assert all(numbers[k] > 0 for k in ("serial_s", "threads_s", "dask_s"))
    text = sweep_report(numbers)
    assert "serial / threads" in text and "Dask overhead per run" in text
    # the Exudyn column: numbers where the `bench` extra is installed, else a note
    exudyn = numbers["exudyn"]
    if exudyn["installed"]:
        assert exudyn["wall_s"] > 0 and "Exudyn / mbdgen threads" in text
    else:
        assert "Exudyn ParameterVariation: not installed" in text


def test_prepared_bench_smoke():
    """The prepared-run lines of `mbdgen bench --sweep` (numbers not checked here)."""
    from mbdgen.bench import PREPARED_METHODS, prepared_bench, prepared_report

    rows = prepared_bench(calls=3, rounds=1, steps=2)
    assert [r["method"] for r in rows] == list(PREPARED_METHODS)
    assert all(r["prepared_beyond_us"] > 0 and r["simulate_beyond_us"] > 0 for r in rows)
    assert "prepared run beyond its loop <= 20 µs" in prepared_report(rows)
