"""Load a user's model file (``models/foo.py``) into a :class:`~mbdgen.model.Model`.

Loading also records the model's *inputs* besides its own file: the files it read
(a JSON geometry, a table) and the modules of the user's it imported.  Their hashes
go into the generated module's stamp (``DEPENDENCIES``), so a change to any of them
makes the module stale, as a change to the model file does.  Files of the standard
library, of installed packages and of mbdgen itself are not inputs: the compiler
hash and the installation cover them.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import site
import sys
import sysconfig
import traceback
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from mbdgen.codegen.stamp import source_hash
from mbdgen.errors import ModelError
from mbdgen.model.core import Model
from mbdgen.model.mechanism import Mechanism

if TYPE_CHECKING:
    from importlib.abc import Loader

__all__ = ["load_model", "load_model_with_inputs", "source_hash"]


def load_model(path: str | Path) -> Model | Mechanism:
    """Execute a model file and return the :class:`Model` it defines.

    The file must define a module-level ``model`` (a :class:`Model`) or a function
    ``build_model()`` returning one.  Errors name the file and line.
    """
    return load_model_with_inputs(path)[0]


def load_model_with_inputs(path: str | Path) -> tuple[Model | Mechanism, dict[str, str]]:
    """:func:`load_model`, and the model's inputs besides its own file.

    The inputs map each file the model read while it was executed (``open`` and
    everything built on it: ``json.load``, ``numpy.loadtxt``, ``Path.read_text``)
    and the source of each module of the user's it uses (imported during the load,
    or already imported and referenced from the model's globals) to its SHA-256;
    paths are relative to the model's folder where possible, with ``/``.  Modules of
    the user's that the load imported are removed from ``sys.modules`` afterwards,
    so the next load executes their current text.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"model file {str(path)!r} does not exist")
    if path.suffix != ".py":
        raise ModelError(f"model file {str(path)!r} must be a Python file (.py)")
    mod_name = f"_mbdgen_model_{path.stem}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - defensive
        raise ModelError(f"cannot import model file {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    modules_before = set(sys.modules)
    try:
        with _recording_reads() as reads:
            model = _execute(path, mod_name, spec.loader, module)
        inputs = _inputs(path, reads, module, modules_before)
    finally:
        for name in set(sys.modules) - modules_before:
            if _is_user_file(getattr(sys.modules.get(name), "__file__", None)):
                sys.modules.pop(name, None)
    return model, inputs


def _execute(path: Path, mod_name: str, loader: Loader, module: ModuleType) -> Model | Mechanism:
    try:
        loader.exec_module(module)
    except ModelError as exc:
        raise ModelError(f"{path}: {exc}") from None
    except SyntaxError as exc:
        raise ModelError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    except SystemExit as exc:
        raise ModelError(
            f"{path}: the model file called sys.exit({exc.code!r}) while being loaded; "
            "a model file must define `model`, not end the program"
        ) from None
    except Exception as exc:
        line = _user_line(exc, path)
        raise ModelError(f"{path}{line}: {type(exc).__name__}: {exc}") from None
    finally:
        sys.modules.pop(mod_name, None)
    model = getattr(module, "model", None)
    if model is None and callable(getattr(module, "build_model", None)):
        try:
            model = module.build_model()
        except ModelError as exc:
            raise ModelError(f"{path}: {exc}") from None
        except Exception as exc:
            line = _user_line(exc, path)
            raise ModelError(f"{path}{line}: {type(exc).__name__}: {exc}") from None
    if not isinstance(model, Model | Mechanism):
        raise ModelError(
            f"{path} defines no model: assign a mbdgen.model.Model or Mechanism to a "
            "module-level "
            "variable named 'model' (or define build_model())"
        )
    return model


def _user_line(exc: BaseException, path: Path) -> str:
    """':LINE' of the deepest traceback frame inside the model file, if any."""
    line = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename).resolve() == path.resolve():
            line = f":{frame.lineno}"
    return line


# -- inputs -------------------------------------------------------------------------

#: The files opened for reading in this context while a model loads; None otherwise.
_reads: ContextVar[set[str] | None] = ContextVar("mbdgen_model_reads", default=None)
_hook_installed = False


def _audit(event: str, args: tuple) -> None:
    """Audit hook (installed once per process): note files opened for reading."""
    if event != "open":
        return
    reads = _reads.get()
    if reads is None:
        return
    try:
        file, mode, flags = args
        if file is None or isinstance(file, int):
            return
        if mode is not None:
            readable = "r" in mode
        else:
            readable = (flags & 3) != os.O_WRONLY and not flags & getattr(os, "O_TRUNC", 0)
        if readable:
            reads.add(os.path.abspath(os.fsdecode(file)))
    except Exception:  # noqa: BLE001 - an audit hook must never break the audited call
        return


@contextlib.contextmanager
def _recording_reads() -> Iterator[set[str]]:
    global _hook_installed
    if not _hook_installed:
        sys.addaudithook(_audit)
        _hook_installed = True
    reads: set[str] = set()
    token = _reads.set(reads)
    try:
        yield reads
    finally:
        _reads.reset(token)


@functools.cache
def _excluded_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = [paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    roots += site.getsitepackages() if hasattr(site, "getsitepackages") else []
    roots += [site.getusersitepackages(), str(Path(__file__).resolve().parent.parent)]
    if os.name == "posix":
        roots += ["/dev", "/proc", "/sys"]
    return tuple(os.path.realpath(r) for r in roots if r)


def _is_user_file(file: object) -> bool:
    """Whether ``file`` is an existing file of the user's (not Python's, a package's,
    mbdgen's or a bytecode cache)."""
    if not isinstance(file, str) or file.endswith((".pyc", ".pyo")):
        return False
    real = os.path.realpath(file)
    if not os.path.isfile(real):
        return False
    return not any(real == r or real.startswith(r + os.sep) for r in _excluded_roots())


def _module_files(namespace: dict, seen: set[str]) -> Iterator[str]:
    """Source files of the user's modules that ``namespace`` refers to, transitively
    (a module, or a function or class defined in one)."""
    for value in list(namespace.values()):
        if isinstance(value, ModuleType):
            mod: object = value
        else:
            mod = sys.modules.get(getattr(value, "__module__", None) or "")
        file = getattr(mod, "__file__", None)
        if not isinstance(file, str) or file in seen or not _is_user_file(file):
            continue
        seen.add(file)
        yield file
        yield from _module_files(getattr(mod, "__dict__", {}), seen)


def _inputs(
    path: Path, reads: set[str], module: ModuleType, modules_before: set[str]
) -> dict[str, str]:
    files = set(reads)
    seen: set[str] = set()
    for name in set(sys.modules) - modules_before:
        file = getattr(sys.modules.get(name), "__file__", None)
        if _is_user_file(file):
            files.add(file)  # type: ignore[arg-type]
            files.update(_module_files(sys.modules[name].__dict__, seen))
    files.update(_module_files(module.__dict__, seen))
    model_file = os.path.realpath(path)
    folder = os.path.dirname(model_file)
    inputs: dict[str, str] = {}
    for file in files:
        real = os.path.realpath(file)
        if real == model_file or not _is_user_file(real):
            continue
        try:
            key = Path(os.path.relpath(real, folder)).as_posix()
        except ValueError:  # another drive (Windows)
            key = Path(real).as_posix()
        inputs[key] = source_hash(real)
    return inputs
