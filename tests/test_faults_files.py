"""Result files that are not what they claim, files mbdgen writes and cannot read back,
and full disks (issue 46, cases 1, 2, 6, 7, 8).

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

import shutil

import h5py
import numpy as np
import pytest
from conftest import GENERATED, cli, one_line_error

import mbdgen
from mbdgen.compiler import import_generated
from mbdgen.errors import ResultFileError


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


# -- case 6: data outside the file ------------------------------------------------------


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


# -- case 7: arrays of another type or shape than the file's own names say ------------


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
