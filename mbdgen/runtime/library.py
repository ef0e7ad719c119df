"""Element kernels compiled once per installation, not once per model (issue 11, item 3).

An element type's kernels do not depend on the model that uses them: the model's own
data reach them through the index tables (``E<type>_IQ``, ...) they take as arguments.
A generated module inlines the small ones into its loop kernels (one Numba compile per
loop kernel is cheaper than one per element kernel), but Numba compiles ~1.5
statements per ms, so a spatial type's Jacobian blocks (400-1500 statements each) cost
seconds in every model that uses them: the flyball governor's four Newton-matrix
kernels took 35 s to compile, most of its first HHT step.

A long element kernel is therefore decorated ``@rt.library_kernel("<digest>")``: its
text, with the name ``kernel``, becomes a small module of its own in the library
folder next to Numba's cache (``library/k<digest>.py``), compiled with ``cache=True``
there and shared by every model whose kernel has the same text.  A new model built
from types used before links their machine code from the cache (Numba links a cached
function's LLVM bitcode into its caller; the caller's compile neither types nor lowers
the callee again).  The module's own definition is the source: the library file is
written from it on first use, and stays as long as Numba's cache folder does.
"""

from __future__ import annotations

import hashlib
import importlib.util
import linecache
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numba import njit
from numba.core import config

#: What the library module adds before the kernel's text: its imports and decorator.
HEADER = (
    '"""An element kernel of mbdgen\'s library (mbdgen.runtime.library); do not edit."""\n\n'
    "import math  # noqa: F401\n\nfrom numba import njit\n\n\n"
    '@njit(cache=True, error_model="numpy")\n'
)
#: Hex digits of the SHA-256 of a library module's text that name it.
DIGEST_LENGTH = 24
_DEF = re.compile(r"^def \w+\(")
_LOCK = threading.Lock()
#: digest → the library kernel (a Numba dispatcher), once loaded in this process.
_LOADED: dict[str, Any] = {}


def library_text(lines: list[str]) -> str:
    """The library module of the kernel whose source is ``lines`` (its decorators, its
    ``def`` line, its body): :data:`HEADER`, then the ``def`` renamed ``kernel`` and the
    body, without trailing blank lines."""
    start = next(i for i, line in enumerate(lines) if _DEF.match(line))
    body = [line.rstrip() for line in lines[start:]]
    while body and not body[-1]:
        body.pop()
    body[0] = _DEF.sub("def kernel(", body[0], count=1)
    return HEADER + "\n".join(body) + "\n"


def digest(text: str) -> str:
    """The name of the library module ``text``."""
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_LENGTH]


def library_dir() -> Path:
    """The library folder: next to Numba's cache, which keeps its machine code."""
    base = config.CACHE_DIR or os.path.join(tempfile.gettempdir(), "mbdgen-numba")
    return Path(base) / "library"


def _source_lines(func: Callable[..., Any]) -> list[str]:
    """The lines of ``func``'s definition, from its first decorator to the last
    indented line (generated code: a function ends at the next line in column 0).
    Faster than :func:`inspect.getsource`, which tokenizes: 0.7 s for the flyball
    governor's 99 element kernels."""
    code = func.__code__
    lines = linecache.getlines(code.co_filename)
    start = code.co_firstlineno - 1  # the first decorator's line, or the def's
    end = start
    while end < len(lines) and not _DEF.match(lines[end]):
        end += 1
    end += 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t"):
        end += 1
    return [line.rstrip("\n") for line in lines[start:end]]


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` at once (two processes may write the same file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _load(name: str, func: Callable[..., Any]) -> Any:
    path = library_dir() / f"k{name}.py"
    # an existing file is read back and checked (~20 µs each): one edited or damaged
    # by hand is written again from this module's text
    if not path.is_file() or digest(path.read_text(encoding="utf-8")) != name:
        text = library_text(_source_lines(func))
        if digest(text) != name:  # not the text the compiler wrote: this module's own
            return None
        _write(path, text)
    module_name = f"mbdgen_library_k{name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # Numba's cache imports it by name when loading
    spec.loader.exec_module(module)
    return module.kernel


def library_kernel(name: str) -> Callable[[Callable[..., Any]], Any]:
    """Decorator of a long element kernel: the library's kernel whose module text has
    the digest ``name`` (:func:`library_text` of the decorated function's source), or,
    where that cannot be had (the folder is not writable, the text differs), the
    function compiled here as before.  Without JIT, the function itself."""

    def decorate(func: Callable[..., Any]) -> Any:
        if config.DISABLE_JIT:
            return func
        with _LOCK:
            kernel = _LOADED.get(name)
            if kernel is None:
                try:
                    kernel = _load(name, func)
                except (OSError, SyntaxError, ImportError):
                    kernel = None
                if kernel is None:
                    return njit(cache=True, error_model="numpy")(func)
                _LOADED[name] = kernel
        return kernel

    return decorate
