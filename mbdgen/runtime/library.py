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
there and shared by every model whose kernel has the same text.  The module's own
definition is the source: the library file is written from it on first use, and stays
as long as Numba's cache folder does.

A loop kernel calls a library kernel by a symbol, not by linking it (:class:`LibraryKernel`).
Numba links a called function's LLVM module into its caller's and optimizes and emits
machine code for the whole again: a flyball governor's ``gamma_q``, two loops over two
library kernels, spent 0.5 s of its 0.85 s compile there, and each of the model's
twenty loop kernels as much again for the same callees.  Instead the call is to the
external symbol ``mbdgen_library_<digest>_<types>``, the address of the library
kernel's compiled code for those argument types, which this module gives LLVM
(``llvmlite.binding.add_symbol``) when the call is typed, and again before a cached
caller is loaded in a later process (Numba runs a cached function's ``reload_init``
callables before it links its code: :class:`_Symbol`).  A call that cannot be
inlined costs its arguments (Numba passes each array as its seven to nine fields), so
a library kernel loops over the instances of its type itself: one call per type and
evaluation, not one per instance.
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

import llvmlite.binding as llvm
from numba import njit, types
from numba.core import cgutils, config
from numba.core.extending import models, register_model, typeof_impl
from numba.core.imputils import lower_builtin
from numba.core.typing import signature

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
_SYMBOL_LOCK = threading.RLock()
#: digest → the library kernel (a :class:`LibraryKernel`), once loaded in this process.
_LOADED: dict[str, Any] = {}
#: symbol → the compile result whose address LLVM was given under it.
_SYMBOLS: dict[str, Any] = {}


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
    """The library folder: next to Numba's cache, which keeps its machine code (under
    the user's cache folder, never the shared temporary one: its modules are
    imported)."""
    from mbdgen import _numba_cache

    return Path(config.CACHE_DIR or _numba_cache.CACHE_DIR) / "library"


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


def symbol(name: str, argtys: tuple[Any, ...]) -> str:
    """The LLVM symbol of library kernel ``name`` compiled for ``argtys``."""
    key = hashlib.sha256(str(argtys).encode()).hexdigest()[:16]
    return f"mbdgen_library_{name}_{key}"


def _register(name: str, argtys: tuple[Any, ...]) -> Any:
    """Compile (or load from the cache) library kernel ``name`` for ``argtys`` and give
    LLVM its address under :func:`symbol`; its compile result."""
    sym = symbol(name, argtys)
    with _SYMBOL_LOCK:  # taken under Numba's compiler lock (typing, cache loads)
        cres = _SYMBOLS.get(sym)
        if cres is not None:
            return cres
        kernel = _LOADED.get(name)
        if kernel is None:  # cannot be: a caller's module loads its library kernels on import
            raise RuntimeError(f"library kernel {name} is not loaded in this process")
        dispatcher = kernel.dispatcher
        dispatcher.compile(argtys)
        cres = dispatcher.overloads[argtys]
        llvm.add_symbol(sym, cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name))
        _SYMBOLS[sym] = cres
        return cres


class _Symbol:
    """A cached caller's ``reload_init`` entry: gives LLVM the symbol of library kernel
    ``name`` for ``argtys`` before Numba links the caller's cached code.  Pickled into
    Numba's cache with the caller, so by reference to this class."""

    __slots__ = ("name", "argtys")

    def __init__(self, name: str, argtys: tuple[Any, ...]) -> None:
        self.name = name
        self.argtys = argtys

    def __call__(self) -> None:
        _register(self.name, self.argtys)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Symbol, (self.name, self.argtys))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Symbol) and (self.name, self.argtys) == (other.name, other.argtys)

    def __hash__(self) -> int:
        return hash((self.name, self.argtys))


class LibraryKernel:
    """A library kernel as a generated module holds it.  From Python, its dispatcher
    (calls and attributes are the dispatcher's); in jitted code, a call of the
    compiled kernel by its symbol (:func:`symbol`), which the caller's compile neither
    links nor optimizes again."""

    def __init__(self, name: str, dispatcher: Any) -> None:
        self.name = name
        self.dispatcher = dispatcher
        lower_builtin(self, types.VarArg(types.Any))(_lower_call(name))

    def __call__(self, *args: Any) -> Any:
        return self.dispatcher(*args)

    def __getattr__(self, attr: str) -> Any:
        if attr in ("name", "dispatcher"):  # not set yet (unpickling)
            raise AttributeError(attr)
        return getattr(self.dispatcher, attr)

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled with the globals of a loop kernel that is a first-class argument
        # (Numba's cache index of a routine that takes kernels)
        return (_unpickle_kernel, (self.name, self.dispatcher))


def _unpickle_kernel(name: str, dispatcher: Any) -> LibraryKernel:
    """The library kernel ``name`` of this process, else ``dispatcher`` as one."""
    return _LOADED.get(name) or LibraryKernel(name, dispatcher)


class LibraryKernelType(types.Callable, types.Dummy):
    """Numba's type of a :class:`LibraryKernel`."""

    def __init__(self, kernel: LibraryKernel) -> None:
        self.kernel = kernel
        super().__init__(name=f"library_kernel({kernel.name})")

    def get_call_type(self, context: Any, args: tuple[Any, ...], kws: dict[str, Any]) -> Any:
        if kws:
            return None
        argtys = tuple(types.unliteral(a) for a in args)
        cres = _register(self.kernel.name, argtys)
        return signature(cres.signature.return_type, *argtys)

    def get_call_signatures(self) -> tuple[list[Any], bool]:
        return [], True

    def get_impl_key(self, sig: Any) -> Any:
        return self.kernel


register_model(LibraryKernelType)(models.OpaqueModel)


@typeof_impl.register(LibraryKernel)
def _typeof_library_kernel(val: LibraryKernel, c: Any) -> LibraryKernelType:
    return LibraryKernelType(val)


def _lower_call(name: str) -> Callable[..., Any]:
    """The lowering of a call of library kernel ``name``: Numba's calling convention,
    to the external symbol of the kernel compiled for the call's argument types.  The
    caller's library records the symbol for a later process (:class:`_Symbol`)."""

    def lower(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        argtys = tuple(sig.args)
        context.active_code_library._reload_init.add(_Symbol(name, argtys))
        fnty = context.call_conv.get_function_type(sig.return_type, argtys)
        fn = cgutils.get_or_insert_function(builder.module, fnty, symbol(name, argtys))
        status, res = context.call_conv.call_function(builder, fn, sig.return_type, argtys, args)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return res

    return lower


def library_kernel(name: str) -> Callable[[Callable[..., Any]], Any]:
    """Decorator of a long element kernel: the library's kernel whose module text has
    the digest ``name`` (:func:`library_text` of the decorated function's source), as a
    :class:`LibraryKernel`.  Where the library folder cannot be written, the same text
    compiled here, called the same way; where the text differs from the digest (an
    edited module), the function compiled here and linked into its callers, as before
    the library.  Without JIT, the function itself."""

    def decorate(func: Callable[..., Any]) -> Any:
        if config.DISABLE_JIT:
            return func
        with _LOCK:
            kernel = _LOADED.get(name)
            if kernel is None:
                try:
                    dispatcher = _load(name, func)
                except (OSError, SyntaxError, ImportError):
                    dispatcher = None
                if dispatcher is None:
                    dispatcher = _local(name, func)
                if dispatcher is None:
                    return njit(cache=True, error_model="numpy")(func)
                kernel = _LOADED[name] = LibraryKernel(name, dispatcher)
        return kernel

    return decorate


def _local(name: str, func: Callable[..., Any]) -> Any:
    """``func`` compiled in its own module when its text is the library text ``name``
    (the library folder could not be used), else None."""
    if digest(library_text(_source_lines(func))) != name:
        return None
    return njit(cache=True, error_model="numpy")(func)


# -- a cached caller passes its symbols on to the functions that call it -------------
#
# A caller inherits the ``reload_init`` of every library it links (Numba copies
# ``_reload_init`` when it finalizes the caller), so an entry point that calls a loop
# kernel that calls a library kernel records the library kernel's symbol too.  But a
# function loaded from Numba's cache gets a new library whose ``_reload_init`` is empty:
# Numba runs the cached ``reload_init`` and keeps it on the compile result only.  An
# entry point compiled in a process that had *loaded* its loop kernel from the cache
# therefore recorded no symbol, and a later process that loaded that entry point before
# anything had typed a call of the library kernel called address 0: a segmentation
# fault (found with the slider-crank with a spring, whose ``force_q`` calls a library
# kernel, after a background compile had written its ``index3_chunk``; in CI, two
# pytest workers sharing one cache make the same order).  Giving the rebuilt library
# the compile result's ``reload_init`` makes a cached callee pass it on like a fresh
# one.  Changing this file changes the runtime's digest, and with it Numba's cache
# folder (mbdgen._numba_cache): entry points written without their symbols are left
# behind.


def _rebuild_keeping_reload_init(rebuild: Callable[..., Any]) -> Callable[..., Any]:
    def rebuild_keeping(cls: Any, target_context: Any, *payload: Any) -> Any:
        result = rebuild(cls, target_context, *payload)
        # (libdata, fndesc, env, signature, objectmode, lifted, typeann, reload_init,
        # referenced_envs): Numba 0.59-0.68
        reload_init = payload[7] if len(payload) == 9 else None
        if reload_init:
            result.library._reload_init.update(reload_init)
        return result

    rebuild_keeping._mbdgen = True  # type: ignore[attr-defined]
    return rebuild_keeping


def _install_rebuild() -> bool:
    from numba.core.compiler import CompileResult

    current = CompileResult.__dict__.get("_rebuild")
    if not isinstance(current, classmethod) or getattr(current.__func__, "_mbdgen", False):
        return False
    CompileResult._rebuild = classmethod(_rebuild_keeping_reload_init(current.__func__))
    return True


_install_rebuild()
