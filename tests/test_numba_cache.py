"""Numba's disk cache written by several processes at once (mbdgen._numba_cache).

Numba 0.68's save of a function's cache entry reads the index, picks a free data file
number and writes the index and the data without a lock: two processes that save two
signatures of one function at the same moment can both pick the same number, lose one
entry and leave the index naming the other's machine code (numba/numba#4807).  The
pytest workers of this suite compiling the shared integrators for two workspace types
are that case.  mbdgen locks the index around a save and a load and treats an entry
holding another signature's code as a miss.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from numba.core.typing.templates import Signature

from mbdgen import _numba_cache

FUNCTION = textwrap.dedent(
    """\
    import numba


    @numba.njit(cache=True)
    def f(x):
        return x + 1
    """
)

# A process that saves one signature of f into the cache at an agreed instant, with
# Numba's index write slowed down so that the processes' saves overlap for certain:
# without the lock each one reads the index before any other has written it.
SAVER = textwrap.dedent(
    """\
    import sys, time
    import numpy as np
    import mbdgen._numba_cache
    from numba.core import caching

    folder, start, kind = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    sys.path.insert(0, folder)
    import racy

    write_index = caching.IndexDataCacheFile._save_index

    def slow_index_write(self, overloads):
        time.sleep(0.4)
        write_index(self, overloads)

    caching.IndexDataCacheFile._save_index = slow_index_write
    arg = {"i": 1, "f": 1.5, "c": 1j, "a": np.ones(2)}[kind]
    cache = racy.f._cache
    racy.f._cache = caching.NullCache()  # compile only; the save comes below
    racy.f(arg)
    cres = next(iter(racy.f.overloads.values()))
    while time.time() < start:
        time.sleep(0.005)
    cache.save_overload(cres.signature, cres)
    """
)


def _entries(module) -> dict:
    """The index of ``module.f``'s cache: key's argument types → those of the code
    its data file holds."""
    cache_file = module.f._cache._cache_file
    out = {}
    for key, name in cache_file._load_index().items():
        payload = cache_file._load_data(name)
        held = next(item for item in payload if isinstance(item, Signature))
        out[str(tuple(getattr(key[0], "args", key[0])))] = str(tuple(held.args))
    return out


def _fresh(folder: Path):
    sys.modules.pop("racy", None)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module("racy")
    finally:
        sys.path.remove(str(folder))


def test_simultaneous_saves_of_four_signatures_keep_all_four(tmp_path):
    """Four processes save four signatures of one function within the same 0.4 s
    window: the index names all four, each with its own code."""
    (tmp_path / "racy.py").write_text(FUNCTION)
    (tmp_path / "saver.py").write_text(SAVER)
    start = time.time() + 4.0  # after the four interpreters have imported Numba
    procs = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "saver.py"), str(tmp_path), str(start), kind]
        )  # fmt: skip
        for kind in "ifca"
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    entries = _entries(_fresh(tmp_path))
    assert len(entries) == 4, entries
    assert all(key == held for key, held in entries.items()), entries


def test_an_entry_holding_another_signature_s_code_is_a_miss(tmp_path):
    """An index whose entries name each other's data files (what the race leaves):
    the load is a miss, the function compiles again for its argument types and the
    entry is written over with the right code."""
    (tmp_path / "racy.py").write_text(FUNCTION)
    module = _fresh(tmp_path)
    assert module.f(1) == 2 and module.f(1.5) == 2.5
    cache_file = module.f._cache._cache_file
    index = cache_file._load_index()
    (k1, n1), (k2, n2) = index.items()
    cache_file._save_index({k1: n2, k2: n1})  # each key names the other's code

    module = _fresh(tmp_path)
    out = module.f(1)
    assert out == 2 and isinstance(out, int)  # the float64 code would return 2.0
    assert module.f.stats.cache_hits.get((module.f.typeof_pyval(1),), 0) == 0
    out = module.f(2.5)
    assert out == 3.5 and isinstance(out, float)
    entries = _entries(_fresh(tmp_path))
    assert len(entries) == 2 and all(key == held for key, held in entries.items()), entries
    assert _numba_cache._holds(k1, (b"", "no signature")) is True  # nothing to check


def test_an_index_entry_whose_function_is_gone_does_not_fail_the_save(tmp_path, monkeypatch):
    """An index entry compiled for a function-typed argument holds a weak reference to
    that function; unpickled in another process with nothing keeping the function, it
    cannot be pickled again (numba's _PickleableWeakRef: "underlying object has
    vanished"), and the next save into that index failed the call that had compiled
    (tests/test_genalpha.py, once, in a full run).  The entry is dropped instead."""
    import gc

    from numba import njit
    from numba.core import caching, serialize, types

    import mbdgen._numba_cache  # noqa: F401  (installs the wrappers)

    def gone() -> types.Dispatcher:
        @njit
        def f(x):
            return x

        f(1.0)
        return types.Dispatcher(f)

    dead = gone()
    gc.collect()
    with pytest.raises(ReferenceError):
        serialize.dumps(dead)
    index = caching.IndexDataCacheFile(str(tmp_path), "t", ("stamp", 1))
    monkeypatch.setattr(index, "_load_index", lambda: {(dead,): "t.1.nbc"})
    index.save(("new",), b"data")
    monkeypatch.undo()
    assert index._load_index() == {("new",): "t.1.nbc"}  # the dropped entry's file reused
