"""What a generated module is stamped with, computable without SymPy (fast warm start).

A generated module carries, besides the model's source hash and the compiler hash:

``DEPENDENCIES``
    the files the model read while it was loaded (data files, helper modules), each
    with its SHA-256, as ``{path relative to the model's folder: hash}``; a change to
    any of them makes the module stale, like a change to the model file itself.
``BODY_HASH``
    the SHA-256 of the module's own text without that line; a module whose text does
    not match was edited by hand or damaged, and is refused rather than used or
    silently overwritten.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Mapping
from pathlib import Path

from mbdgen import __version__
from mbdgen.codegen.abi import abi_hash

_PACKAGE = Path(__file__).resolve().parent.parent
TEMPLATE_DIR = _PACKAGE / "templates"


def compiler_hash() -> str:
    """Digest of everything that shapes generated text besides the model itself.

    The mbdgen version, the kernel ABI, the templates and the sources of the front
    end, the derivation and the code generator.  Stamped into each module so that a
    module made by another compiler is detected as stale.
    """
    h = hashlib.sha256(__version__.encode())
    h.update(abi_hash().encode())
    files = sorted(TEMPLATE_DIR.glob("*.j2"))
    for sub in ("model", "symbolic", "codegen"):
        files += sorted((_PACKAGE / sub).glob("*.py"))
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes().replace(b"\r\n", b"\n"))
    return h.hexdigest()[:16]


def source_hash(path: str | Path) -> str:
    """SHA-256 of a file's bytes: the key for stale detection (model and dependencies)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


_STAMP = re.compile(
    r'^(MBDGEN_VERSION|SOURCE_FILE|SOURCE_HASH|COMPILER_HASH|BODY_HASH) = "([^"]*)"$', re.MULTILINE
)
_DEPENDENCIES = re.compile(r"^DEPENDENCIES = (\{.*\})$", re.MULTILINE)
#: The line ``BODY_HASH = "..."`` with its newline: what :func:`body_hash` leaves out.
_BODY_LINE = re.compile(r'^BODY_HASH = "[^"\n]*"\n', re.MULTILINE)
#: What the templates write in place of the body hash; :func:`seal` fills it in.
BODY_HASH_PLACEHOLDER = "0" * 64


def read_stamp(path: str | Path) -> dict[str, str]:
    """The stamp fields of a generated module, read from its text (no import).

    Empty when the file is missing or unreadable, or when it is not a generated
    module: one that lacks the mbdgen version, source hash or compiler hash.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    return stamp_of(text)


def stamp_of(text: str) -> dict[str, str]:
    """The stamp fields of the module text ``text`` (see :func:`read_stamp`)."""
    stamp = dict(_STAMP.findall(text))
    if not {"MBDGEN_VERSION", "SOURCE_HASH", "COMPILER_HASH"} <= stamp.keys():
        return {}
    return stamp


def read_dependencies(text: str) -> dict[str, str] | None:
    """The ``DEPENDENCIES`` mapping of a module's text, or None if it has none."""
    found = _DEPENDENCIES.search(text)
    if found is None:
        return None
    try:
        deps = ast.literal_eval(found.group(1))
    except (ValueError, SyntaxError):
        return None
    if not isinstance(deps, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in deps.items()
    ):
        return None
    return deps


def body_hash(text: str) -> str:
    """SHA-256 of a module's text without its ``BODY_HASH`` line (line ends as LF)."""
    body = _BODY_LINE.sub("", text.replace("\r\n", "\n"), count=1)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def seal(text: str) -> str:
    """``text`` with its body-hash placeholder replaced by :func:`body_hash` of it."""
    line = f'BODY_HASH = "{BODY_HASH_PLACEHOLDER}"\n'
    if text.count(line) != 1:
        raise ValueError("generated text must have exactly one BODY_HASH placeholder line")
    return text.replace(line, f'BODY_HASH = "{body_hash(text)}"\n')


def dependencies_literal(dependencies: Mapping[str, str]) -> str:
    """A one-line Python literal of ``dependencies``, sorted by path (deterministic)."""
    return (
        "{" + ", ".join(f"{py_str(k)}: {py_str(v)}" for k, v in sorted(dependencies.items())) + "}"
    )


def py_str(value: object) -> str:
    """A Python string literal of ``str(value)`` (a template filter).

    ``repr`` escapes what cannot appear raw and keeps every other character (also
    outside the Basic Multilingual Plane) as it is; double quotes where the text
    allows, as before.  JSON (``tojson``) is not Python: it writes 😀 as the pair
    ``\\ud83d\\ude00``, which a Python literal reads as two lone surrogates.
    """
    text = str(value)
    literal = repr(text)
    if '"' not in text and "'" not in text:
        literal = '"' + literal[1:-1] + '"'
    return literal
