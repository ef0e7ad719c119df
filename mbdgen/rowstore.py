"""Output rows kept on disk: a long run's arrays as mapped files, so that its memory
stays flat however many rows it records.

A run's output arrays (:class:`mbdgen.steppers.Outputs`, the variable-step output
grid, energy and power) have sizes known before its first step, so each is a file of
exactly that size, its blocks reserved up front (``posix_fallocate``: a disk too full
for the run fails before the first step, naming the folder and the size), mapped into
memory and handed to the jitted integrators as ordinary arrays.  The integrators'
code is the same whether their arrays are in memory or on disk, so a streamed run's
numbers are the in-memory run's, bit for bit.

The files are unlinked as soon as they are created: they have no name, so nothing is
left behind by a crash, a ``kill -9`` or a full disk, and no other user can open
them.  :meth:`RowStore.release` drops the pages already written from the process's
memory between chunks (they stay in the file and the page cache, which the kernel
writes back and reclaims), so the resident memory of a run that records 1e7 rows is
that of one that records 1e4.

The result is written where the user asked by :meth:`mbdgen.results.Result.save`,
block by block from these arrays into a preallocated HDF5 file.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mbdgen import interrupts
from mbdgen.errors import WriteError

#: Rows per block where a whole-run array is read or written in pieces (post-processing,
#: saving): 64 Ki rows of 20 numbers are 10 MB.
BLOCK_ROWS = 1 << 16


def bytes_text(nbytes: float) -> str:
    """``256 kB``, ``2.56 GB``: three digits, decimal units."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{nbytes:.0f} B"


class RowStore:
    """Zero-filled float64 arrays backed by unlinked files in ``folder`` (see the
    module docstring).  ``destination`` is the file the rows are for, named in the
    message when the folder has no room."""

    def __init__(
        self,
        folder: str | Path,
        destination: str | Path | None = None,
        expected: float | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.destination = str(destination if destination is not None else self.folder)
        self.expected = expected  # bytes the run may take at most, for the message
        self._maps: list[mmap.mmap] = []
        self.nbytes = 0

    def __repr__(self) -> str:
        return f"RowStore({str(self.folder)!r}, {len(self._maps)} arrays, {self.nbytes} bytes)"

    def zeros(self, shape: int | tuple[int, ...]) -> np.ndarray:
        """A C-contiguous float64 array of ``shape``, zero-filled, on disk."""
        shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
        nbytes = 8 * int(np.prod(shape, dtype=np.int64))
        if nbytes == 0:
            return np.zeros(shape)
        try:
            with interrupts.deferred():  # no Ctrl-C between creating the file and unlinking it
                fd, name = tempfile.mkstemp(dir=self.folder, prefix=".mbdgen-rows.", suffix=".tmp")
                os.unlink(name)  # nameless from now on: nothing left behind, nothing to open
        except OSError as exc:
            raise WriteError(exc.errno, exc.strerror or str(exc), self.destination) from None
        try:
            reserve(fd, nbytes)
            mapped = mmap.mmap(fd, nbytes)
        except OSError as exc:
            needed = (
                f"up to {bytes_text(self.expected)}"
                if self.expected is not None and self.expected >= self.nbytes + nbytes
                else f"at least {bytes_text(self.nbytes + nbytes)}"
            )
            free = (free_bytes(self.folder) or 0) + self.nbytes  # ours is given back
            raise WriteError(
                exc.errno,
                f"{exc.strerror or exc} (the run keeps its output rows in {str(self.folder)!r} "
                f"while it goes, {needed}; {bytes_text(free)} free there)",
                self.destination,
            ) from None
        finally:
            os.close(fd)
        self._maps.append(mapped)
        self.nbytes += nbytes
        return np.ndarray(shape, dtype=np.float64, buffer=mapped)

    def release(self) -> None:
        """Drop the mapped pages from this process's resident memory; their contents
        stay in the files (a shared mapping's dirty pages are written back, not lost)."""
        advice = getattr(mmap, "MADV_DONTNEED", None)
        if advice is None:  # pragma: no cover - platforms without madvise
            return
        for mapped in self._maps:
            if not mapped.closed:
                mapped.madvise(advice)


def free_bytes(folder: Path) -> int | None:
    """Bytes an unprivileged user may still write in ``folder``'s file system (None
    where the file system does not say)."""
    try:
        stat = os.statvfs(folder)
    except (OSError, AttributeError):  # AttributeError: no statvfs (Windows)
        return None
    return stat.f_bavail * stat.f_frsize


def reserve(fd: int, nbytes: int, keep_size: bool = False) -> None:
    """Give the file ``nbytes`` of disk blocks now: a full disk is an ``OSError`` here,
    not a ``SIGBUS`` when a mapped page is first written back, nor a failing write
    inside HDF5.  ``keep_size``: the blocks lie beyond the end of the (empty) file,
    which keeps its size 0 (Linux ``fallocate(FALLOC_FL_KEEP_SIZE)``, for a file that
    a library must find empty), and are given back by :func:`trim`."""
    if keep_size:
        fallocate = _libc_fallocate()
        if fallocate is not None:
            if fallocate(fd, _FALLOC_FL_KEEP_SIZE, 0, nbytes) == 0:
                return
            code = ctypes.get_errno()
            if code not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise OSError(code, os.strerror(code))
            # a file system without fallocate (NFS, older ZFS): the free space, checked
            free = free_bytes(Path(f"/proc/self/fd/{fd}").resolve().parent)
            if free is not None and free < nbytes:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return
        # no fallocate(2): reserve and give the blocks back; the room was there a
        # moment ago, which is as much as a check can say
        reserve(fd, nbytes)
        os.ftruncate(fd, 0)
        return
    if hasattr(os, "posix_fallocate"):
        os.posix_fallocate(fd, 0, nbytes)
    else:  # pragma: no cover - macOS: a sparse file; writing zeros reserves it
        os.ftruncate(fd, nbytes)
        block = bytes(min(nbytes, 1 << 20))
        for start in range(0, nbytes, len(block)):
            os.pwrite(fd, block[: nbytes - start], start)


def trim(fd: int) -> None:
    """Give back the blocks :func:`reserve` kept beyond the file's end (a truncation
    that shrinks the file frees them; one to the same size may not)."""
    size = os.fstat(fd).st_size
    os.ftruncate(fd, size + 1)
    os.ftruncate(fd, size)


_FALLOC_FL_KEEP_SIZE = 1


def _libc_fallocate() -> Any:
    """``fallocate(2)`` from the C library, or None where there is none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fallocate = libc.fallocate
    except (OSError, AttributeError):
        return None
    fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    fallocate.restype = ctypes.c_int
    return fallocate


def blocks(rows: int, size: int | None = None) -> range:
    """Start rows of the blocks of ``size`` rows (default :data:`BLOCK_ROWS`) that
    cover ``rows`` rows."""
    return range(0, rows, size or BLOCK_ROWS)


def argmax(
    a: np.ndarray,
    key: Callable[[np.ndarray], np.ndarray] | None = None,
    store: RowStore | None = None,
) -> int:
    """``np.argmax(key(a))`` (the first largest, the first NaN where there is one),
    taken in blocks so that no temporary of ``a``'s length is made; ``store``'s pages
    are released after each."""
    best, where = None, 0
    for start in blocks(len(a)):
        part = a[start : start + BLOCK_ROWS]
        part = part if key is None else key(part)
        i = int(np.argmax(part))
        value = part[i]
        if best is None or (not np.isnan(best) and (value > best or np.isnan(value))):
            best, where = value, start + i
        if store is not None:
            store.release()
    return where


def first_above(
    a: np.ndarray,
    bound: float,
    key: Callable[[np.ndarray], np.ndarray] | None = None,
    store: RowStore | None = None,
) -> int:
    """The first index where ``key(a)`` > ``bound``, as ``np.argmax(key(a) > bound)``
    gives it (0 where there is none), in blocks."""
    for start in blocks(len(a)):
        part = a[start : start + BLOCK_ROWS]
        above = (part if key is None else key(part)) > bound
        if store is not None:
            store.release()
        if above.any():
            return start + int(np.argmax(above))
    return 0


def all_finite(a: np.ndarray, store: RowStore | None = None) -> bool:
    """``np.isfinite(a).all()``, in blocks."""
    for start in blocks(len(a)):
        finite = bool(np.isfinite(a[start : start + BLOCK_ROWS]).all())
        if store is not None:
            store.release()
        if not finite:
            return False
    return True
