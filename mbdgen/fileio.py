"""Atomic file writes: a file is replaced only by a complete new one.

Used for results (:meth:`mbdgen.results.Result.save`) and generated modules
(:func:`mbdgen.compiler.generate`): the new content goes to a temporary file in the
destination's folder (``mkstemp``, so concurrent writers never share one), is
flushed to disk and renamed over the destination.  An exception or an interrupt on
the way removes the temporary file and leaves the destination as it was; an error of
the file system (a full disk) becomes a :class:`~mbdgen.errors.WriteError` naming the
destination.  HDF5 files are built in memory and written the same way
(:func:`atomic_hdf5`): HDF5 writing into a Python file object that fails part-way
crashed the interpreter.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from mbdgen import interrupts
from mbdgen.errors import WriteError


def blocking_file(folder: str | Path) -> Path | None:
    """The existing file (not a folder) that stands where ``folder`` or one of its
    parents should be, or None: such a path can never be created."""
    folder = Path(folder)
    for ancestor in (folder, *folder.parents):
        if ancestor.exists():
            return None if ancestor.is_dir() else ancestor
    return None


def _file_mode(path: Path) -> int:
    """The mode a plain ``open(path, "w")`` would give: the old file's, else 0o666 & ~umask
    (``mkstemp`` creates 0o600)."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def _write_error(exc: OSError, path: Path) -> WriteError:
    if isinstance(exc, WriteError):
        return exc
    return WriteError(exc.errno, exc.strerror or str(exc), str(path))


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; on success rename it over ``path``.

    On any exception, KeyboardInterrupt included, the temporary file is removed and
    ``path`` is left as it was.  The data are flushed to disk before the rename.  An
    :class:`OSError` on the way (no space left, a quota, an I/O error) is raised as a
    :class:`~mbdgen.errors.WriteError` (an ``OSError`` too) naming ``path``.
    """
    path = Path(path)
    try:
        with interrupts.deferred():  # no Ctrl-C between creating the file and owning it
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise _write_error(exc, path) from exc
    try:
        os.fchmod(fd, _file_mode(path))
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _write_error(exc, path) from exc
        raise


@contextlib.contextmanager
def atomic_hdf5(path: str | Path, **options: Any) -> Iterator[Any]:
    """An ``h5py.File`` (``options``: its keyword arguments) built in memory and written
    to ``path`` by :func:`atomic_write` once it is closed and complete.

    HDF5 never writes to the disk itself, so a full disk is one ``WriteError`` from a
    plain write: through h5py's file-object driver it was a cascade of exceptions
    inside HDF5's own clean-up and a segmentation fault.
    """
    import h5py

    buffer = io.BytesIO()
    with h5py.File(buffer, "w", **options) as f:
        yield f
    with atomic_write(path) as fh:
        fh.write(buffer.getbuffer())
