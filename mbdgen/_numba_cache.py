"""Point Numba's on-disk cache at a directory keyed by the runtime's own source.

Numba invalidates a cached function when *its* file changes, but not when a
function it calls (the generic integrators of :mod:`mbdgen.runtime`) changes.
The generated modules' entry points inline those integrators, so a cache
directory named after a digest of the runtime sources and the Numba version makes
an edited or upgraded runtime start from a clean cache instead of reusing stale
machine code.  A user-set ``NUMBA_CACHE_DIR`` is respected as the parent folder.

This module must run before any ``@njit(cache=True)`` of mbdgen is decorated.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numba
from numba.core import config

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
