"""Result files that are not what they claim, files mbdgen writes and cannot read back,
and full disks.

- an ``.h5`` whose datasets live outside the file (HDF5 external storage, external
  links, virtual datasets) is refused: its bytes could be any local file;
- every array is checked for dtype and shape against the file's own names at load,
  so ``show``, ``plot`` and ``animate`` never meet an array of another shape;
- what each command writes with ``-o`` is read back by ``mbdgen.load`` or the command
  that reads it;
- a full disk ends in ``cannot write '…': No space left on device``, exit 1, no
  temporary file left, and the computed rows still handed to the caller.

The runs are the committed pendulum's, 0.1 s of RK4 (a few seconds in all).
"""

from __future__ import annotations

import errno
import os
import shutil
import sys

import h5py
import numpy as np
import pytest
from conftest import GENERATED, MODELS, TEST_GENERATED, TEST_MODELS, cli, one_line_error

import mbdgen
from mbdgen import fileio
from mbdgen.compiler import import_generated
from mbdgen.errors import OutputError, ResultFileError


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A pendulum result saved as ``.h5`` (and ``.npz``) in a folder of its own."""
    module = import_generated(GENERATED / "pendulum.py")
    result = mbdgen.simulate(module, "rk4", None, 0.01, 0.1)
    folder = tmp_path_factory.mktemp("saved")
    result.save(folder / "r.h5")
    result.save(folder / "r.npz")
    return folder


def _commands_refuse(path, needle: str) -> None:
    """``mbdgen.load``, ``show``, ``plot`` and ``animate`` refuse ``path`` in one line
    containing ``needle`` (exit 1)."""
    with pytest.raises(ResultFileError, match=needle):
        mbdgen.load(path)
    for args in (
        ("show", path),
        ("plot", path, "-o", path.with_suffix(".png")),
        ("animate", path, "-o", path.with_suffix(".gif")),
    ):
        code, output = cli(*args)
        line = one_line_error(output, only=True)
        assert code == 1 and needle in line and str(path) in line, (args, output)
    assert not path.with_suffix(".png").exists() and not path.with_suffix(".gif").exists()


# -- data outside the file -------------------------------------------------------------


def _external_storage(f, name):
    n = f[name].shape[0]
    del f[name]
    f.create_dataset(
        name, shape=(n,), dtype="f8", external=[("/etc/hostname", 0, h5py.h5f.UNLIMITED)]
    )


def _external_link(f, name):
    del f[name]
    f[name] = h5py.ExternalLink("/etc/hostname", "/" + name)


def _virtual(f, name):
    shape = f[name].shape
    del f[name]
    layout = h5py.VirtualLayout(shape=shape, dtype="f8")
    layout[:] = h5py.VirtualSource("/etc/hostname", name, shape=shape)
    f.create_virtual_dataset(name, layout)


def _soft_link(f, name):
    del f[name]
    f[name] = h5py.SoftLink("/phi_norm")


@pytest.mark.parametrize(
    "change, name, needle",
    [
        (_external_storage, "t", "in HDF5 external storage"),
        (_external_link, "q", "external link"),
        (_virtual, "t", "virtual dataset"),
        (_soft_link, "phid_norm", "soft link"),
    ],
)
def test_an_h5_whose_data_live_outside_the_file_is_refused(saved, tmp_path, change, name, needle):
    path = tmp_path / "hostile.h5"
    shutil.copy(saved / "r.h5", path)
    with h5py.File(path, "a") as f:
        change(f, name)
    _commands_refuse(path, needle)


# -- arrays of another type or shape than the file's own names say ---------------------


def _h5_replace(name, value):
    def change(f):
        del f[name]
        f.create_dataset(name, data=value)

    return change


def _strings(n):
    return np.array([f"row {i}" for i in range(n)], dtype=h5py.string_dtype())


@pytest.mark.parametrize(
    "name, make, needle",
    [
        ("q", lambda n: _strings(n), "'q' array holds"),  # 1-D variable-length strings
        ("q", lambda n: np.zeros(n), "'q' array has shape"),  # 1-D floats
        ("q", lambda n: np.zeros((n, 2)), "'q' array has shape"),  # a column short
        ("lam", lambda n: np.zeros((n, 5)), "'lam' array has shape"),
        ("qd", lambda n: np.zeros((n, 3), dtype=complex), "'qd' array holds"),
        ("t", lambda n: np.zeros((n, 1)), "'t' array has shape"),
        ("phi_norm", lambda n: np.zeros(n + 1), "'phi_norm' array has shape"),
        ("energy", lambda n: np.zeros((n, 3)), "'energy' array has shape"),
        ("step_history", lambda n: np.zeros(4), "'step_history' array has shape"),
    ],
)
def test_an_array_of_another_type_or_shape_is_refused_at_load(saved, tmp_path, name, make, needle):
    rows = mbdgen.load(saved / "r.h5").t.shape[0]
    path = tmp_path / "odd.h5"
    shutil.copy(saved / "r.h5", path)
    with h5py.File(path, "a") as f:
        _h5_replace(name, make(rows))(f)
    _commands_refuse(path, needle)
    # the same arrays in an .npz
    with np.load(saved / "r.npz", allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    value = make(rows)
    arrays[name] = value.astype(str) if value.dtype == object else value
    npz = tmp_path / "odd.npz"
    np.savez(npz, **arrays)
    _commands_refuse(npz, needle)


def test_metadata_of_another_type_is_refused_at_load(saved, tmp_path):
    import json

    with np.load(saved / "r.npz", allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    meta = json.loads(str(arrays["meta"]))
    meta["coordinates"] = "xyz"  # a string where a list of names belongs
    arrays["meta"] = np.array(json.dumps(meta))
    path = tmp_path / "odd.npz"
    np.savez(path, **arrays)
    _commands_refuse(path, "coordinates")


# -- every file mbdgen writes, it reads back -------------------------------------------


def _read_back(path) -> None:
    """The file ``path`` that a command wrote is read by what reads that kind."""
    if path.suffix in (".npz", ".h5"):
        result = mbdgen.load(path)
        assert len(result) > 1 and result.q.shape[1] == len(result.coordinates)
        code, output = cli("show", path)
        assert code == 0, output
        code, output = cli("plot", path, "-o", path.with_suffix(".png"))
        assert code == 0 and path.with_suffix(".png").stat().st_size > 0, output
    elif path.suffix == ".csv":
        code, output = cli("show", path)
        assert code == 0 and "rows:" in output, output
    else:
        from PIL import Image

        with Image.open(path) as picture:
            picture.verify()


@pytest.mark.parametrize("suffix", [".npz", ".h5", ".csv"])
def test_what_simulate_kinematics_and_inverse_write_is_read_back(tmp_path, suffix):

    driven = ("--out-dir", TEST_GENERATED, "--t-end", "0.5", "--steps", "10")
    commands = {
        "simulate": (
            "simulate", MODELS / "pendulum.py", "--out-dir", GENERATED, "--method", "rk4",
            "--h", "0.01", "--t-end", "0.1", "--no-progress",
        ),
        "kinematics": ("kinematics", TEST_MODELS / "driven_pendulum.py", *driven),
        "inverse": ("inverse", TEST_MODELS / "driven_pendulum.py", *driven),
    }  # fmt: skip
    for name, args in commands.items():
        out = tmp_path / f"{name}{suffix}"
        code, output = cli(*args, "-o", out)
        assert code == 0, output
        _read_back(out)
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_what_plot_and_animate_write_is_read_back(saved, tmp_path):
    module = import_generated(GENERATED / "iftomm_a01_pendulum.py")  # bodies to draw
    bodies = mbdgen.simulate(module, "rk4", None, 0.01, 0.2).save(tmp_path / "bodies.h5")
    for args, out in (
        (("plot", saved / "r.npz", "-o"), tmp_path / "r.png"),
        (("plot", saved / "r.h5", "-o"), tmp_path / "r.svg"),
        (("animate", bodies, "--fps", "5", "-o"), tmp_path / "r.gif"),
    ):
        code, output = cli(*args, out)
        assert code == 0, output
        if out.suffix != ".svg":
            _read_back(out)
        else:
            assert out.read_text(encoding="utf-8").lstrip().startswith("<?xml")


def test_an_inverse_result_loads_as_what_it_is(tmp_path):

    from mbdgen.analysis.inverse import inverse_dynamics

    module = mbdgen.compile(TEST_MODELS / "driven_pendulum.py", TEST_GENERATED)
    r = inverse_dynamics(module, 0.5, steps=10)
    for suffix in (".npz", ".h5"):
        back = mbdgen.load(r.save(tmp_path / f"inverse{suffix}"))
        np.testing.assert_array_equal(back.lam, r.lam)
        np.testing.assert_array_equal(back.q, r.kinematics.q)
        assert back.constraint_names == r.constraint_names
        assert back.info["analysis"] == "inverse_dynamics"
        assert "inverse_dynamics" in back.summary()


@pytest.mark.parametrize("command", ["kinematics", "inverse"])
def test_an_unwritable_output_of_kinematics_or_inverse_fails_before_the_run(tmp_path, command):

    out = tmp_path / "r.txt"
    code, output = cli(
        command, TEST_MODELS / "driven_pendulum.py", "--out-dir", TEST_GENERATED, "-o", out
    )
    line = one_line_error(output, only=True)
    assert code == 1 and "use a file name ending in .npz or .h5" in line
    assert "inverse dynamics at" not in output and "kinematic analysis" not in output


# -- a full disk -----------------------------------------------------------------------


class _FullDisk:
    """A file object that takes ``room`` bytes, then fails as a full disk does."""

    def __init__(self, fh, room: int) -> None:
        self._fh, self._room = fh, room

    def write(self, data) -> int:
        size = len(data) if isinstance(data, str) else memoryview(data).nbytes
        if size > self._room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room -= size
        return self._fh.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._fh.close()

    def __getattr__(self, name):
        return getattr(self._fh, name)


class _Disk:
    """``room``: the bytes each file opened by ``mbdgen.fileio.atomic_write`` may take
    before it fails with ENOSPC (None: no limit)."""

    room: int | None = None


@pytest.fixture
def disk(monkeypatch):
    real, state = os.fdopen, _Disk()

    def fdopen(*args, **kwargs):
        fh = real(*args, **kwargs)
        return fh if state.room is None else _FullDisk(fh, state.room)

    monkeypatch.setattr(fileio.os, "fdopen", fdopen)
    return state


def _full_disk_error(args, path) -> None:
    """``mbdgen ARGS`` ends in one line naming ``path`` and the full disk, exit 1, and
    leaves no temporary file beside it."""
    code, output = cli(*args)
    line = one_line_error(output, only=True)
    assert code == 1, output
    assert line == f"error: cannot write {str(path)!r}: No space left on device", output
    assert not [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_full_disk_is_one_line_naming_the_file_for_every_writer(disk, saved, tmp_path):

    bodies = import_generated(GENERATED / "iftomm_a01_pendulum.py")
    animated = mbdgen.simulate(bodies, "rk4", None, 0.01, 0.5).save(tmp_path / "bodies.npz")
    old = tmp_path / "old.h5"
    shutil.copy(saved / "r.h5", old)
    disk.room = 2000
    run = ("simulate", MODELS / "pendulum.py", "--out-dir", GENERATED, "--method", "rk4",
           "--h", "0.001", "--t-end", "1", "--no-progress")  # fmt: skip
    driven = (TEST_MODELS / "driven_pendulum.py", "--out-dir", TEST_GENERATED, "--steps", "200")
    for suffix in (".npz", ".h5", ".csv"):
        out = tmp_path / f"a{suffix}"
        _full_disk_error((*run, "-o", out), out)
        _full_disk_error(("kinematics", *driven, "-o", out), out)
        _full_disk_error(("inverse", *driven, "-o", out), out)
        assert not out.exists()
    _full_disk_error((*run, "-o", old), old)
    assert old.read_bytes() == (saved / "r.h5").read_bytes()  # the old file, untouched
    _full_disk_error((*run, "--plot", tmp_path / "a.png"), tmp_path / "a.png")
    _full_disk_error(("plot", saved / "r.npz", "-o", tmp_path / "p.svg"), tmp_path / "p.svg")
    _full_disk_error(("animate", animated, "-o", tmp_path / "a.gif"), tmp_path / "a.gif")


def test_a_result_that_cannot_be_saved_stays_with_the_caller(disk, tmp_path):
    module = import_generated(GENERATED / "pendulum.py")
    result = mbdgen.simulate(module, "rk4", None, 0.001, 1.0)
    disk.room = 2000
    for suffix in (".npz", ".h5", ".csv"):
        with pytest.raises(OutputError, match="No space left on device") as info:
            result.save(tmp_path / f"a{suffix}")
        assert str(tmp_path / f"a{suffix}") in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    disk.room = None  # space again: the same rows are saved whole
    back = mbdgen.load(result.save(tmp_path / "a.h5"))
    assert len(back) == len(result) == 1001
    np.testing.assert_array_equal(back.q, result.q)


def test_a_sweep_on_a_full_disk_names_the_file(disk, tmp_path):
    out = tmp_path / "sweep"
    disk.room = 100
    code, output = cli(
        "sweep", MODELS / "pendulum.py", "--out-dir", GENERATED, "--t-end", "0.05",
        "-p", "m=0.5:2:2", "-o", out, "--no-progress",
    )  # fmt: skip
    line = one_line_error(output, only=True)
    assert code == 1 and "No space left on device" in line, output
    assert line.startswith(f"error: cannot write {str(out)!r}"[:-1] + "/"), output
    leftovers = [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def test_a_real_full_tmpfs(tmp_path):
    """Once for real (root only): a 200 kB tmpfs and a 10 s pendulum run to .h5."""
    import subprocess

    full = tmp_path / "full"
    full.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(full)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        for name in ("a.h5", "a.npz", "a.csv"):
            proc = subprocess.run(
                [sys.executable, "-m", "mbdgen.cli", "simulate", str(MODELS / "pendulum.py"),
                 "--out-dir", str(GENERATED), "--t-end", "10", "--no-progress",
                 "-o", str(full / name)],
                capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert proc.returncode == 1, proc.stderr
            warning, error = proc.stderr.splitlines()  # warned before the run, then failed
            assert warning.startswith(f"warning: the result may not fit in {str(full)!r}: ")
            assert error == f"error: cannot write {str(full / name)!r}: No space left on device"
            assert list(full.iterdir()) == []
    finally:
        subprocess.run(["umount", str(full)], check=False)
