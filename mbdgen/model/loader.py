"""Load a user's model file (``models/foo.py``) into a :class:`~mbdgen.model.Model`."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path

from mbdgen.codegen.stamp import source_hash
from mbdgen.errors import ModelError
from mbdgen.model.core import Model
from mbdgen.model.elements import Mechanism

__all__ = ["load_model", "source_hash"]


def load_model(path: str | Path) -> Model | Mechanism:
    """Execute a model file and return the :class:`Model` it defines.

    The file must define a module-level ``model`` (a :class:`Model`) or a function
    ``build_model()`` returning one.  Errors name the file and line.
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
    try:
        spec.loader.exec_module(module)
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
