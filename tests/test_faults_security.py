"""Shared machines: another local user can neither run code as you nor make mbdgen write
through a link.

- the folders mbdgen keeps under the shared temporary folder (the background
  specializer's, a Dask worker's copy of a generated module, the benchmarks') are
  private: created 0700, and one that is a link, belongs to someone else or is open to
  other users is refused with one line naming it, never used;
- the background specializer gets its argument types through a pipe, never from a
  file: a pickle planted in its folder is not loaded;
- logs and locks are opened without following a link planted in their place, and so
  are the locks of Numba's cache index;
- the README and the tutorial say that a model file, an ``--outputs`` file and
  ``animate --model`` are run as Python.

Tests run as root here: "another user" is simulated by a patched ``os.getuid``.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from types import SimpleNamespace

import numba
import pytest
from conftest import ROOT

from mbdgen import MbdgenError, specialize

SIGNATURE = (numba.types.float64, numba.types.int64)


@pytest.fixture
def tmp(tmp_path, monkeypatch):
    """A shared temporary folder like /tmp (world-writable, sticky) as ``gettempdir()``."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    monkeypatch.setattr(specialize, "_REFUSED", set(), raising=False)
    return shared


def _folder(tmp: Path) -> Path:
    return tmp / f"mbdgen-specialize-{os.getuid()}"


class Payload:
    """A pickle that, when loaded, writes ``marker``: what an attacker would plant."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


# -- a private folder, or none ---------------------------------------------------------


def test_the_specializer_creates_its_folder_private(tmp):
    folder = specialize.specialize_dir()
    assert folder == _folder(tmp)
    assert folder.stat().st_mode & 0o777 == 0o700


def test_an_own_folder_readable_by_others_is_made_private(tmp):
    """A folder an older mbdgen created (0755: nobody else could write into it)."""
    _folder(tmp).mkdir(mode=0o755)
    _folder(tmp).chmod(0o755)
    assert specialize.specialize_dir().stat().st_mode & 0o777 == 0o700


def _refused(match: str) -> str:
    with pytest.raises(MbdgenError, match=match) as info:
        specialize.specialize_dir()
    message = str(info.value)
    assert "\n" not in message
    return message


def test_a_world_writable_folder_is_refused(tmp):
    """Another user who creates the folder first (mode 0777) could swap its files."""
    folder = _folder(tmp)
    folder.mkdir()
    folder.chmod(0o777)
    message = _refused("writable by other users")
    assert str(folder) in message and "0777" in message


def test_a_folder_of_another_user_is_refused(tmp, monkeypatch):
    folder = tmp / "mbdgen-specialize-4242"
    folder.mkdir(mode=0o700)  # owned by this (root) process: "another user" to uid 4242
    monkeypatch.setattr(os, "getuid", lambda: 4242)
    message = _refused("belongs to another user")
    assert str(folder) in message


def test_a_link_in_place_of_the_folder_is_refused(tmp, tmp_path):
    elsewhere = tmp_path / "attacker"
    elsewhere.mkdir(mode=0o700)
    _folder(tmp).symlink_to(elsewhere)
    assert str(_folder(tmp)) in _refused("is a symbolic link")


def test_a_run_goes_on_without_a_background_compile_and_says_why_once(tmp, monkeypatch):
    """The run is not stopped by a refused folder: it stays on the shared routine (the
    same bits), with one warning naming the folder, and starts no process."""
    _folder(tmp).mkdir()
    _folder(tmp).chmod(0o777)
    monkeypatch.setenv(specialize.POLICY_ENV, "background")
    monkeypatch.setattr(specialize.subprocess, "Popen", lambda *a, **k: pytest.fail("started"))
    module = SimpleNamespace(__file__=str(tmp / "m.py"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert specialize.start(module, "abm_chunk", SIGNATURE) is None
        assert specialize.start(module, "energy_rows", SIGNATURE) is None
    assert len(caught) == 1
    assert str(_folder(tmp)) in str(caught[0].message)
    assert "\n" not in str(caught[0].message)


# -- nothing of the folder is unpickled ------------------------------------------------


def test_a_planted_signature_file_is_never_loaded(tmp, tmp_path, monkeypatch):
    """Another user swaps the background process's input between its write and its
    read (here: every ``.sig`` file in the folder and any file argument, just before
    the process starts).  The process never loads a pickle from a file, so the planted
    code does not run."""
    marker = tmp_path / "marker"
    planted = pickle.dumps(Payload(marker))
    real_popen = subprocess.Popen

    def swapping_popen(argv, **kwargs):
        folder = specialize.specialize_dir()
        targets = {*folder.glob("*.sig"), *(Path(a) for a in argv if a.endswith(".sig"))}
        for target in targets:
            target.write_bytes(planted)
        return real_popen(argv, **kwargs)

    monkeypatch.setenv(specialize.POLICY_ENV, "background")
    monkeypatch.setattr(specialize.subprocess, "Popen", swapping_popen)
    module = SimpleNamespace(__file__=str(tmp_path / "no_such_module.py"))
    proc = specialize.start(module, "abm_chunk", SIGNATURE)
    assert proc is not None
    proc.wait(120)
    assert not marker.exists(), "the planted pickle ran"
    assert not list(specialize.specialize_dir().glob("*.sig"))


def test_the_background_process_takes_its_signature_only_from_a_pipe(tmp_path):
    """``python -m mbdgen.specialize`` with a file as its input refuses it unread."""
    marker = tmp_path / "marker"
    planted = tmp_path / "planted"
    planted.write_bytes(pickle.dumps(Payload(marker)))
    argv = [sys.executable, "-m", "mbdgen.specialize", str(tmp_path / "m.py"), "abm_chunk"]
    with planted.open("rb") as stdin:
        done = subprocess.run(
            [*argv, str(tmp_path / "m.lock")],
            stdin=stdin, capture_output=True, text=True, cwd=ROOT, timeout=120,
        )  # fmt: skip
    assert done.returncode != 0
    assert "pipe" in done.stderr
    assert not marker.exists()


# -- logs and locks do not follow links ------------------------------------------------


class _WritingPopen:
    """A stand-in for the background process: writes a line to its log and ends."""

    def __init__(self, argv, stdout=None, stdin=None, **kwargs):
        os.write(stdout.fileno(), b"output of the background compile\n")
        self.stdin = open(os.devnull, "wb") if stdin is subprocess.PIPE else None  # noqa: SIM115

    def poll(self):
        return 0

    def wait(self, timeout=None):
        return 0


def test_a_link_planted_as_the_log_is_not_followed(tmp, tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("the victim's file\n")
    module = SimpleNamespace(__file__=str(tmp / "m.py"))
    key = specialize._key(module, "abm_chunk", SIGNATURE)
    log = specialize.specialize_dir() / f"m-abm_chunk-{key[2]}.log"
    log.symlink_to(victim)
    monkeypatch.setenv(specialize.POLICY_ENV, "background")
    monkeypatch.setattr(specialize.subprocess, "Popen", _WritingPopen)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        specialize.start(module, "abm_chunk", SIGNATURE)
    assert victim.read_text() == "the victim's file\n"
    assert [str(log) in str(w.message) for w in caught] == [True]


def test_a_link_planted_as_the_kernel_helpers_log_is_not_followed(tmp, tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("the victim's file\n")
    path = str(tmp / "m.py")
    specialize.kernel_log_path(path).symlink_to(victim)
    module = SimpleNamespace(__file__=path, a=None, b=None)
    monkeypatch.setenv(specialize.POLICY_ENV, "background")
    monkeypatch.setattr(specialize.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(specialize, "load_cached", lambda dispatcher, signature: False)
    monkeypatch.setattr(specialize.subprocess, "Popen", _WritingPopen)
    monkeypatch.setattr(specialize, "_HELPERS", {})
    monkeypatch.setattr(specialize, "_CHECKED", set())
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert not specialize.start_kernels(module, ["a", "b"], {"a": None, "b": None})
    assert victim.read_text() == "the victim's file\n"


def test_a_link_planted_as_a_kernel_lock_is_not_followed(tmp, tmp_path, monkeypatch):
    """The lock is opened for writing: through a link it truncated the file linked to."""
    victim = tmp_path / "victim"
    victim.write_text("the victim's file\n")
    path = str(tmp / "m.py")
    signature = SimpleNamespace(args=("float64",))
    module = SimpleNamespace(__file__=path, force_q=SimpleNamespace(overloads={("float64",): 0}))
    specialize.kernel_lock_path(path, "force_q", signature).symlink_to(victim)
    monkeypatch.setitem(specialize._HELPERS, path, object())
    with pytest.raises(MbdgenError, match="symbolic link"):
        with specialize.kernel_claimed(module, "force_q", signature):
            pass
    assert victim.read_text() == "the victim's file\n"


def test_a_link_planted_as_a_numba_index_lock_is_not_followed(tmp_path):
    from mbdgen import _numba_cache

    index = tmp_path / "f-1.py312.nbi"
    victim = tmp_path / "created-through-the-link"
    Path(f"{index}.lock").symlink_to(victim)
    with _numba_cache._index_locked(str(index), exclusive=True):
        pass
    assert not victim.exists()


# -- the other folders under the shared temporary folder -------------------------------


def test_a_workers_copy_of_a_module_is_kept_in_a_private_folder(tmp, tmp_path, monkeypatch):
    """A Dask worker without the client's file writes the module's text under the
    temporary folder and imports it: that folder must be its own."""
    import mbdgen.compiler
    from mbdgen import sweeps

    monkeypatch.setattr(mbdgen.compiler, "import_generated", lambda path: Path(path))
    local = sweeps._worker_module(str(tmp_path / "elsewhere" / "pendulum.py"), "# text\n")
    top = tmp / local.relative_to(tmp).parts[0]
    assert top.stat().st_mode & 0o777 == 0o700 and top.stat().st_uid == os.getuid()
    assert local.read_text() == "# text\n"
    monkeypatch.setattr(os, "getuid", lambda: 4242)  # the folder of "another user"
    (tmp / "mbdgen-sweep-4242").mkdir(mode=0o777)
    (tmp / "mbdgen-sweep-4242").chmod(0o777)
    with pytest.raises(MbdgenError, match="mbdgen-sweep-4242"):
        sweeps._worker_module(str(tmp_path / "elsewhere" / "pendulum.py"), "# text\n")


def test_the_chain_benchmarks_folder_is_private(tmp, monkeypatch):
    from mbdgen import bench_chain

    monkeypatch.setenv("USER", "someone")
    folder = bench_chain.bench_dir()
    assert folder.parent == tmp / "mbdgen-bench-someone"
    assert folder.parent.stat().st_mode & 0o777 == 0o700
    folder.parent.chmod(0o777)
    with pytest.raises(MbdgenError, match="mbdgen-bench-someone"):
        bench_chain.bench_dir()


def test_the_kernel_library_is_never_under_the_shared_temporary_folder(tmp, monkeypatch):
    """Its modules are imported: without a Numba cache folder set it is still the one
    of mbdgen._numba_cache (under the user's cache), not a folder under /tmp."""
    from numba.core import config

    from mbdgen import _numba_cache
    from mbdgen.runtime import library

    monkeypatch.setattr(config, "CACHE_DIR", "")
    assert library.library_dir() == Path(_numba_cache.CACHE_DIR) / "library"


# -- the documents say that model files are Python -------------------------------------


@pytest.mark.parametrize("document", ["README.md", "docs/tutorial.md"])
def test_the_documents_say_that_model_files_run_as_python(document):
    text = " ".join((ROOT / document).read_text().split())
    assert "executed as Python" in text
    for what in ("model file", "--outputs", "animate --model"):
        assert what in text, what
