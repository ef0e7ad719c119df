"""A long run's rows streamed to disk (``simulate(stream_to=...)``, ``mbdgen simulate
-o FILE.h5 --stream``; :mod:`mbdgen.rowstore`).

- the same numbers as a run in memory, bit for bit, for every integrator family and
  across the blocks the post-processing and the save work in;
- memory that does not grow with the number of rows (measured in a child process);
- a folder without room fails before the first step, naming the file, the folder
  and the sizes; a save without room ends in one line and leaves no file behind;
- Ctrl-C or SIGTERM keeps the rows computed, in a file ``mbdgen.load`` reads;
- the HDF5 file is the layout of an in-memory save, in contiguous datasets that
  ``mbdgen.load`` maps instead of reading.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from conftest import GENERATED, MODELS, ROOT, cli, one_line_error, run_python

import mbdgen
from mbdgen import results, rowstore, simulation
from mbdgen.errors import OutputError, WriteError

ARRAYS = ("t", "q", "qd", "qdd", "lam", "phi_norm", "phid_norm", "states", "state_rates")
DERIVED = ("energy", "power", "reactions")


def _same(a, b) -> None:
    """Every array of two results has the same bits, counters and warnings alike."""
    for name in ARRAYS + DERIVED:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.shape == y.shape and np.array_equal(x, y, equal_nan=True), name
    assert a.info["warnings"] == b.info["warnings"]
    volatile = ("wall_time_s", "setup_time_s")
    assert {k: v for k, v in a.counters.items() if k not in volatile} == {
        k: v for k, v in b.counters.items() if k not in volatile
    }


def _leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize(
    "method, options",
    [
        ("abm", {"alpha": 5.0, "beta": 5.0}),
        ("abm", {"constraints": "gcp"}),
        ("rk4", {}),
        ("welch2", {}),
        ("vabm", {}),
        ("dop853", {}),
        ("hht", {}),
        ("genalpha", {}),
        ("hht_adaptive", {}),
        ("genalpha_adaptive", {}),
        ("radau5", {}),
        ("newmark_gcp", {}),
    ],
)
def test_every_family_streams_the_bits_it_computes_in_memory(
    slider_crank, slider_crank_q0, tmp_path, method, options
):
    run = dict(method=method, h=1e-3, t_end=0.3, q0=slider_crank_q0, **options)
    in_memory = mbdgen.simulate(slider_crank, **run)
    streamed = mbdgen.simulate(slider_crank, **run, stream_to=tmp_path)
    assert in_memory._store is None and streamed._store is not None
    _same(in_memory, streamed)
    streamed.save(tmp_path / "s.h5")
    _same(in_memory, mbdgen.load(tmp_path / "s.h5"))
    assert _leftovers(tmp_path) == []  # the row files have no name


def test_user_states_stream_too(pi_pendulum, tmp_path):
    run = dict(method="hht_adaptive", h=1e-2, t_end=1.0)
    _same(
        mbdgen.simulate(pi_pendulum, **run), mbdgen.simulate(pi_pendulum, **run, stream_to=tmp_path)
    )


def test_blocks_give_the_numbers_of_one_pass(pendulum, tmp_path, monkeypatch):
    """Post-processing, checks and the save go in blocks of BLOCK_ROWS rows on disk: made
    small here, so that 2001 rows take 63 blocks (and a block starts at an odd row)."""
    monkeypatch.setattr(rowstore, "BLOCK_ROWS", 32)
    # a step large enough that the energy check and the constraint check both warn
    run = dict(method="heun", h=2e-2, t_end=40.0)
    with pytest.warns(simulation.ConstraintWarning):
        in_memory = mbdgen.simulate(pendulum, **run)
    with pytest.warns(simulation.ConstraintWarning):
        streamed = mbdgen.simulate(pendulum, **run, stream_to=tmp_path)
    assert len(in_memory) == 2001 and len(in_memory.info["warnings"]) == 2
    _same(in_memory, streamed)
    for a, b in zip(
        simulation.energy_balance(in_memory), simulation.energy_balance(streamed), strict=True
    ):
        assert np.array_equal(a, b)
    streamed.save(tmp_path / "s.h5")
    _same(in_memory, mbdgen.load(tmp_path / "s.h5"))
    hht = dict(method="hht_adaptive", h=1e-2, t_end=5.0)  # output rows projected in blocks
    _same(mbdgen.simulate(pendulum, **hht), mbdgen.simulate(pendulum, **hht, stream_to=tmp_path))


def test_block_helpers_are_numpys():
    a = np.array([1.0, -7.0, 3.0, np.nan, 7.0, np.inf, -np.inf] * 5)
    for size in (1, 2, 3, 64):
        chunks = rowstore.BLOCK_ROWS
        try:
            rowstore.BLOCK_ROWS = size
            assert rowstore.argmax(a) == np.argmax(a)
            assert rowstore.argmax(a[:3], np.abs) == np.argmax(np.abs(a[:3]))
            assert rowstore.argmax(a, simulation._nan_as_inf) == 3
            assert rowstore.first_above(a, 5.0) == int(np.argmax(a > 5.0))
            assert rowstore.first_above(a, 1e300, simulation._nan_as_inf) == 3
            assert rowstore.first_above(a[:3], 9.0) == 0
            assert not rowstore.all_finite(a) and rowstore.all_finite(a[:3])
        finally:
            rowstore.BLOCK_ROWS = chunks


def test_memory_stays_flat_however_many_rows(tmp_path):
    """The peak resident memory of a streamed run and its save, in a child process: 2e6
    rows (270 MB of output) take what 2e4 rows take, within 25 MB (measured: 20 MB and 15
    MB above the process's size before the run; in memory, 569 MB and 21 MB)."""
    code = (
        "import resource, sys, mbdgen\n"
        "from mbdgen.compiler import import_generated\n"
        f"m = import_generated({str(GENERATED / 'pendulum.py')!r})\n"
        "mbdgen.simulate(m, 'abm', h=1e-4, t_end=1e-2)\n"  # kernels loaded before the peak counts
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "r = mbdgen.simulate(m, 'abm', h=1e-4, t_end=float(sys.argv[1]), stream_to=sys.argv[2])\n"
        "r.save(sys.argv[2] + '/r.h5')\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base, len(r))\n"
    )
    grown = {}
    for t_end in (2.0, 200.0):
        out = subprocess.run(
            [sys.executable, "-c", code, str(t_end), str(tmp_path)],
            capture_output=True, text=True, timeout=600, cwd=ROOT,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        kib, rows = map(int, out.stdout.split())
        grown[rows] = kib
    assert set(grown) == {20_001, 2_000_001}
    assert grown[2_000_001] - grown[20_001] < 25 * 1024, grown
    assert (tmp_path / "r.h5").stat().st_size > 250e6


def test_a_folder_without_room_fails_before_the_first_step(pendulum, tmp_path, monkeypatch):
    def full(fd, nbytes, keep_size=False):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(rowstore, "reserve", full)
    steps = []
    with pytest.raises(WriteError) as info:
        mbdgen.simulate(
            pendulum,
            h=1e-3,
            t_end=1.0,
            stream_to=tmp_path / "a.h5",
            progress=lambda t, e: steps.append(t),
        )
    text = str(info.value)
    assert text.startswith(f"cannot write {str(tmp_path / 'a.h5')!r}: No space left on device")
    assert f"keeps its output rows in {str(tmp_path)!r} while it goes, up to " in text
    assert text.endswith(" free there)")
    assert steps == [] and _leftovers(tmp_path) == []
    code, output = cli("simulate", MODELS / "pendulum.py", "--out-dir", GENERATED, "--t-end", "1",
                       "--no-progress", "-o", tmp_path / "a.h5", "--stream")  # fmt: skip
    assert code == 1 and one_line_error(output, only=True).startswith(
        f"error: cannot write {str(tmp_path / 'a.h5')!r}: No space left on device ("
    )
    assert list(tmp_path.iterdir()) == []


def test_stream_to_is_a_folder_or_a_files_folder_created_as_needed(pendulum, tmp_path):
    for given, folder in (
        (tmp_path, tmp_path),  # an existing folder
        (tmp_path / "new" / "rows", tmp_path / "new" / "rows"),  # no suffix: a folder
        (tmp_path / "other" / "run.h5", tmp_path / "other"),  # a file: its folder
    ):
        result = mbdgen.simulate(pendulum, h=1e-3, t_end=0.1, stream_to=given)
        assert result._store.folder == folder and folder.is_dir() and list(folder.iterdir()) == []
    (tmp_path / "a_file").write_text("")
    with pytest.raises(OutputError, match="'.*a_file' is a file, not a folder"):
        mbdgen.simulate(pendulum, h=1e-3, t_end=0.1, stream_to=tmp_path / "a_file" / "rows")


def test_a_save_without_room_leaves_nothing_and_keeps_the_rows(pendulum, tmp_path, monkeypatch):
    result = mbdgen.simulate(pendulum, h=1e-3, t_end=1.0, stream_to=tmp_path)
    real = rowstore.reserve

    def full(fd, nbytes, keep_size=False):
        if keep_size:  # the HDF5 file's reservation, not the rows'
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd, nbytes)

    monkeypatch.setattr(rowstore, "reserve", full)
    (tmp_path / "a.h5").write_bytes(b"old")
    with pytest.raises(OutputError, match=r"cannot write '.*a\.h5': No space left on device$"):
        result.save(tmp_path / "a.h5")
    assert (tmp_path / "a.h5").read_bytes() == b"old" and _leftovers(tmp_path) == []
    assert len(result) == 1001 and np.isfinite(result.q).all()  # the rows are still there


def test_a_real_full_tmpfs_stops_before_the_first_step(tmp_path):
    """Once for real (root only): a 200 kB tmpfs, a 10 s pendulum run streamed to .h5;
    and one with room for the rows but not for the file."""
    full = tmp_path / "full"
    full.mkdir()
    args = [sys.executable, "-m", "mbdgen.cli", "simulate", str(MODELS / "pendulum.py"),
            "--out-dir", str(GENERATED), "--t-end", "10", "--no-progress", "--stream",
            "-o", str(full / "a.h5")]  # fmt: skip
    for size, before in (("200k", True), ("3m", False)):
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(full)], capture_output=True
        )
        if mounted.returncode != 0:
            pytest.skip("cannot mount a tmpfs here (not root)")
        try:
            proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 1, proc.stderr
            line = f"error: cannot write {str(full / 'a.h5')!r}: No space left on device"
            if before:  # while reserving the rows: nothing ran
                assert proc.stderr.startswith(line + " (the run keeps its output rows in ")
                assert proc.stdout == ""
            else:  # the run finished; its file did not fit
                assert proc.stderr == line + "\n" and proc.stdout.startswith(
                    "pendulum: 10000 steps"
                )
            assert list(full.iterdir()) == []
        finally:
            subprocess.run(["umount", str(full)], check=False)


def test_sigterm_keeps_a_streamed_runs_rows(tmp_path):
    """A streamed CLI run stopped by SIGTERM: exit 143 and its rows so far in the file."""
    out = tmp_path / "run.h5"
    mbdgen.simulate(mbdgen.compile(MODELS / "pendulum.py", GENERATED), h=1e-4, t_end=1e-3)
    args = [MODELS / "pendulum.py", "--out-dir", GENERATED, "--h", "1e-4", "--t-end", "1000",
            "-o", out, "--stream", "--progress"]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "mbdgen.cli", "simulate", *map(str, args)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    line = ""
    while "pendulum t" not in line:  # the progress bar's label: stepping begins
        char = proc.stderr.read(1)
        assert char, "the run ended before it started stepping"
        line += char
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    stderr = proc.communicate(timeout=300)[1]
    assert proc.returncode == 143, stderr
    assert "error: terminated (SIGTERM) at t = " in stderr and "Traceback" not in stderr
    saved = mbdgen.load(out)
    assert 1 < len(saved) < 10_000_001 and saved.info["status"] == "terminated"
    assert "  status: terminated (SIGTERM) at t = " in saved.summary()  # said once
    assert re.search(rf"saved {len(saved)} output row\(s\) \(\d+ steps, t = 0 to ", stderr)
    assert _leftovers(tmp_path) == []


def test_the_file_is_an_in_memory_saves_layout_and_is_mapped_on_load(
    slider_crank, slider_crank_q0, tmp_path, monkeypatch
):
    run = dict(method="hht", h=1e-3, t_end=0.5, q0=slider_crank_q0)
    mbdgen.simulate(slider_crank, **run).save(tmp_path / "memory.h5")
    mbdgen.simulate(slider_crank, **run, stream_to=tmp_path).save(tmp_path / "streamed.h5")
    with h5py.File(tmp_path / "memory.h5") as a, h5py.File(tmp_path / "streamed.h5") as b:
        assert list(a) == list(b) and set(a.attrs) == set(b.attrs)
        assert {g: dict(a[g].attrs) for g in ("counters", "parameters")}.keys() == {
            g: dict(b[g].attrs) for g in ("counters", "parameters")
        }.keys()
        for name, ds in b.items():
            if isinstance(ds, h5py.Dataset) and name != "meta":
                assert ds.chunks is None and ds.compression is None, name
                assert {k: str(v) for k, v in ds.attrs.items()} == {
                    k: str(v) for k, v in a[name].attrs.items()
                }
                assert np.array_equal(ds[()], a[name][()], equal_nan=True), name
    monkeypatch.setattr(results, "MAP_BYTES", 1)
    loaded = mbdgen.load(tmp_path / "streamed.h5")
    assert isinstance(loaded.q, np.memmap) and isinstance(loaded.energy, np.memmap)
    assert not isinstance(mbdgen.load(tmp_path / "memory.h5").q, np.memmap)  # compressed
    code, output = cli("show", tmp_path / "streamed.h5")
    assert code == 0 and "rows: 501" in output


def test_the_cli_streams_what_would_not_fit_and_refuses_other_formats(tmp_path, monkeypatch):
    monkeypatch.setattr(simulation, "_available_bytes", lambda: 1_000_000)  # 1 MB free
    args = ("simulate", MODELS / "pendulum.py", "--out-dir", GENERATED, "--t-end", "10",
            "--no-progress")  # fmt: skip
    code, output = cli(*args, "-o", tmp_path / "a.h5")
    assert code == 0, output
    assert re.search(
        r"note: the output rows \(up to [\d.]+ MB\) stay on disk beside .*a\.h5", output
    )
    assert "warning" not in output and len(mbdgen.load(tmp_path / "a.h5")) == 10001
    code, output = cli(*args, "-o", tmp_path / "b.h5", "--no-stream")
    assert code == 0 and "stay on disk" not in output
    assert "warning: the output will take about" in output and "--stream" in output
    for name in ("c.npz", "c.csv", None):
        code, output = cli(*args, *(("-o", tmp_path / name) if name else ()), "--stream")
        assert code == 1 and "--stream keeps the rows on disk" in one_line_error(output, only=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.h5", "b.h5"]


def test_a_result_streamed_by_another_process_can_be_used_there():
    """The module docstring's promise, from a user's script: simulate, save, load."""
    out = run_python(
        "import tempfile, mbdgen\n"
        "from mbdgen.compiler import import_generated\n"
        f"m = import_generated({str(GENERATED / 'pendulum.py')!r})\n"
        "with tempfile.TemporaryDirectory() as d:\n"
        "    r = mbdgen.simulate(m, 'hht', h=1e-3, t_end=1.0, stream_to=d)\n"
        "    r.save(d + '/r.h5')\n"
        "    s = mbdgen.load(d + '/r.h5')\n"
        "    print(len(s), r.q[-1, 2] == s.q[-1, 2])\n"
    )
    assert out.split() == ["1001", "True"]


def test_a_long_line_is_drawn_as_its_envelope():
    """Per bin the smallest and largest value in their order: the extremes, the order
    in time and a gap (NaN) survive; a short line is drawn as it is."""
    from mbdgen.plot import envelope

    t = np.arange(100_003.0)
    y = np.sin(t / 1000.0)
    y[5_000], y[7_000], y[60_001] = 7.0, np.nan, -3.0
    te, ye = envelope(t, y, 400)
    assert len(te) <= 410 and np.all(np.diff(te) > 0) and te[-1] == t[-1]
    assert np.nanmax(ye) == 7.0 and np.nanmin(ye) == -3.0 and np.isnan(ye).sum() == 1
    assert set(te[ye == 7.0]) == {5_000.0} and set(te[ye == -3.0]) == {60_001.0}
    assert all(np.interp(te[~np.isnan(ye)], t, np.nan_to_num(y)) == ye[~np.isnan(ye)])
    short_t, short_y = envelope(t[:300], y[:300], 400)
    assert np.array_equal(short_t, t[:300]) and np.array_equal(short_y, y[:300])


def test_a_file_that_may_not_fit_is_said_before_the_run(tmp_path, monkeypatch):
    """A file written from memory is written after the run: where its rows would take
    more than the folder's free space, a warning comes before the first step."""
    monkeypatch.setattr(rowstore, "free_bytes", lambda folder: 1000)
    args = ("simulate", MODELS / "pendulum.py", "--out-dir", GENERATED, "--t-end", "0.1",
            "--no-progress", "-o")  # fmt: skip
    code, output = cli(*args, tmp_path / "a.npz")
    assert code == 0 and output.startswith(
        f"warning: the result may not fit in {str(tmp_path)!r}: its rows take up to "
    ), output
    assert "1 kB are free there" in output and "--stream reserves the space" in output
    monkeypatch.setattr(rowstore, "free_bytes", lambda folder: 10**12)
    code, output = cli(*args, tmp_path / "b.npz")
    assert code == 0 and "may not fit" not in output


def test_a_file_system_without_fallocate_checks_the_free_space(pendulum, tmp_path, monkeypatch):
    """NFS or an older ZFS answer fallocate(2) with EOPNOTSUPP: the save then checks
    the free space instead of failing, and a folder without room is still one line."""
    import ctypes

    def unsupported(fd, mode, offset, length):
        ctypes.set_errno(errno.EOPNOTSUPP)
        return -1

    result = mbdgen.simulate(pendulum, h=1e-3, t_end=0.5, stream_to=tmp_path)
    monkeypatch.setattr(rowstore, "_libc_fallocate", lambda: unsupported)
    result.save(tmp_path / "a.h5")
    assert len(mbdgen.load(tmp_path / "a.h5")) == 501
    monkeypatch.setattr(rowstore, "free_bytes", lambda folder: 10)
    with pytest.raises(OutputError, match="No space left on device$"):
        result.save(tmp_path / "b.h5")
    assert not (tmp_path / "b.h5").exists() and _leftovers(tmp_path) == []
