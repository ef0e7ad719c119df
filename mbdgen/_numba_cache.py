"""Point Numba's on-disk cache at a directory keyed by the runtime's own source.

Numba invalidates a cached function when *its* file changes, but not when a
function it calls (the generic integrators of :mod:`mbdgen.runtime`) changes.
The generated modules' entry points inline those integrators, so a cache
directory named after a digest of the runtime sources and the Numba version makes
an edited or upgraded runtime start from a clean cache instead of reusing stale
machine code.  A user-set ``NUMBA_CACHE_DIR`` is respected as the parent folder.

It also makes the cache safe for processes that write it at the same time (pytest
workers, a sweep's process or Dask workers on one machine, the background compiles of
:mod:`mbdgen.specialize`): see :func:`_make_index_safe`; and a damaged entry (a disk
error, a file cut short by a full disk or a killed copy) a miss that is compiled again
and written over, instead of an error in every later run: see :func:`_make_loads_tolerant`.

This module must run before any ``@njit(cache=True)`` of mbdgen is decorated.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numba
from numba.core import caching, config
from numba.core.typing.templates import Signature

from mbdgen.errors import MbdgenError
from mbdgen.private_dir import open_no_follow

_RUNTIME = Path(__file__).resolve().parent / "runtime"


def runtime_digest() -> str:
    """Digest of the runtime sources and the Numba version (12 hex digits)."""
    h = hashlib.sha256(numba.__version__.encode())
    for path in sorted(_RUNTIME.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def _configure() -> str:
    parent = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "mbdgen",
        "numba",
    )
    path = os.path.join(parent, f"runtime-{runtime_digest()}")
    config.CACHE_DIR = path
    return path


CACHE_DIR = _configure()


# -- one function's cache written by several processes ---------------------------------
#
# Numba keeps a function's compiled signatures in one index file (key → data file
# name) and one data file per signature.  Its save reads the index, picks the first
# free number, writes the index and then the data, each by an atomic rename, but with
# no lock around the whole: two processes that save two signatures of one function at
# the same moment both pick number N, and the index can end up naming N for the one
# signature while N holds the other's machine code (numba/numba#4807).  A later process
# that loads the first signature then calls code compiled for other argument types: a
# crash, a hang or wrong numbers.  /tmp reproductions on Numba 0.68.1 (four processes
# saving four signatures of one small function at one instant): 3 of 30 rounds left
# such an index.  The test suite's shared integrators, compiled for several workspace
# types by two pytest workers at once, are exactly that case.


@contextlib.contextmanager
def _index_locked(index_path: str, exclusive: bool) -> Iterator[None]:
    """An advisory lock on ``<index>.lock`` (exclusive for a save, shared for a load);
    none where the folder cannot hold one (read-only, no ``fcntl``) or where a link
    stands in its place (not followed: it could point at any file of the user's)."""
    try:
        import fcntl

        handle = open_no_follow(index_path + ".lock", 0o666)
    except (ImportError, OSError, MbdgenError):
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except OSError:
            pass
        yield


def _holds(key: Any, payload: Any) -> bool:
    """Whether a loaded cache entry is the code of the signature it was looked up by:
    the payload of a compile result carries its Signature (else nothing to check)."""
    wanted = key[0] if isinstance(key, tuple) and key else None
    args = getattr(wanted, "args", wanted)
    if not isinstance(args, tuple) or not isinstance(payload, tuple):
        return True
    for item in payload:
        if isinstance(item, Signature):
            return tuple(item.args) == args
    return True


def _live_entries(overloads: dict[Any, Any]) -> tuple[dict[Any, Any], list[Any]]:
    """The entries of an index whose weakly typed arguments (``types.WeakType``: jitted
    functions passed as arguments) still exist, and those objects: held by the caller
    until the index is written, so that none expires in between."""
    from numba.core import types

    keep: list[Any] = []

    def alive(item: Any) -> bool:
        if isinstance(item, types.WeakType):
            obj = item._wr()
            if obj is None:
                return False
            keep.append(obj)
            return True
        if isinstance(item, tuple | list):
            return all(alive(part) for part in item)
        args = getattr(item, "args", None)  # a Signature
        return alive(tuple(args)) if isinstance(args, tuple) else True

    return {k: v for k, v in overloads.items() if alive(k)}, keep


def _make_index_safe() -> None:
    """Wrap Numba's ``IndexDataCacheFile.save`` and ``.load`` (once per process): a save
    holds the index's exclusive lock from reading the index to writing the data, a load
    its shared lock from reading the index to reading the data, so that the index and
    the data files always agree; and a loaded entry whose code is another signature's
    (a cache written before this lock, or by a process without it) is a miss, compiled
    again and saved over the wrong entry.  It applies to every Numba cache in the
    process, which is what a user's own ``cache=True`` functions need as well.

    Looked at first: Numba has no option for it (issue 4807 is open); giving each
    process its own cache folder would compile everything once per process, which is
    what the cache is for; a lock around mbdgen's own calls would miss the saves Numba
    makes for the kernels a jitted loop calls."""
    cls = caching.IndexDataCacheFile
    if getattr(cls, "_mbdgen_safe", False):
        return
    save, load = cls.save, cls.load

    def locked_save(self: Any, key: Any, data: Any) -> None:
        with _index_locked(self._index_path, exclusive=True):
            try:
                save(self, key, data)
            except ReferenceError:
                # An entry of the index was compiled for another process's jitted
                # function (a function-typed argument): unpickled here, its type holds a
                # weak reference to a copy that nothing keeps, so the index cannot be
                # pickled again and the save failed the call that compiled.  Drop such
                # entries (their files become unused) and save.
                loaded, own = self._load_index, self.__dict__.get("_load_index")
                entries, keep = _live_entries(loaded())
                self._load_index = lambda: entries
                try:
                    save(self, key, data)
                    del keep
                finally:
                    if own is None:
                        del self._load_index
                    else:
                        self._load_index = own

    def checked_load(self: Any, key: Any) -> Any:
        with _index_locked(self._index_path, exclusive=False):
            payload = load(self, key)
        return payload if payload is None or _holds(key, payload) else None

    cls.save, cls.load = locked_save, checked_load
    cls._mbdgen_safe = True


_make_index_safe()


# -- a damaged entry is a miss -----------------------------------------------------------
#
# Numba reads an index with pickle.load and a data file with pickle.loads and lets any
# error through: random bytes in an index or a data file cut short ended every run that
# used the function in "UnpicklingError" or "MemoryError (internal error)", until the
# user found and deleted the cache folder by hand.


class DamagedCacheWarning(UserWarning):
    """An entry of Numba's cache could not be read; its function is compiled again."""


_REPORTED: set[str] = set()
_REPORTED_LOCK = threading.Lock()


def _report_damaged(path: str, exc: BaseException) -> None:
    """Say once per process and file that ``path`` was damaged and is compiled again."""
    with _REPORTED_LOCK:
        if path in _REPORTED:
            return
        _REPORTED.add(path)
    cause = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
    warnings.warn(
        f"the compiled-code cache entry {path} was damaged ({cause}); "
        "compiled again and written over it",
        DamagedCacheWarning,
        stacklevel=2,
    )


def _make_loads_tolerant() -> None:
    """Wrap Numba's reads of a cache entry (once per process) so that one that cannot
    be read is a miss: an index that does not unpickle to a dict is empty (a load
    compiles the function, and its save, which reads the index too, writes a new index
    over the damaged one); a data file that does not unpickle, or whose code cannot be
    rebuilt, is missing (the save writes the new code over that file).  Numba writes
    both by an atomic rename, so a reader never sees a half-written replacement.

    Caught where the entry is read, not around a run: any exception but an OSError
    (a file removed under the index, which Numba already treats as a miss) and
    mbdgen's own errors (a refused folder) means the bytes are not an entry."""
    index_cls, cache_cls = caching.IndexDataCacheFile, caching.Cache
    if getattr(index_cls, "_mbdgen_tolerant", False):
        return
    load_index, load_data = index_cls._load_index, index_cls._load_data
    load_overload = cache_cls.load_overload

    def tolerant_load_index(self: Any) -> dict[Any, Any]:
        try:
            overloads = load_index(self)
        except (OSError, MbdgenError):
            raise
        except Exception as exc:
            _report_damaged(self._index_path, exc)
            return {}
        if not isinstance(overloads, dict):
            _report_damaged(self._index_path, TypeError("not an index"))
            return {}
        return overloads

    def tolerant_load_data(self: Any, name: str) -> Any:
        try:
            return load_data(self, name)
        except (OSError, MbdgenError):
            raise
        except Exception as exc:
            _report_damaged(self._data_path(name), exc)
            return None

    def tolerant_load_overload(self: Any, sig: Any, target_context: Any) -> Any:
        try:
            return load_overload(self, sig, target_context)
        except (OSError, MbdgenError):
            raise
        except Exception as exc:  # a payload that unpickled but is no compiled code
            _report_damaged(self._cache_file._index_path, exc)
            return None

    index_cls._load_index, index_cls._load_data = tolerant_load_index, tolerant_load_data
    cache_cls.load_overload = tolerant_load_overload
    index_cls._mbdgen_tolerant = True


_make_loads_tolerant()
