"""What a generated module is stamped with, computable without SymPy (fast warm start)."""

from __future__ import annotations

import hashlib
import re
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
    """SHA-256 of the model file's bytes: the key for stale detection."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


_STAMP = re.compile(r'^(SOURCE_HASH|COMPILER_HASH|MBDGEN_VERSION) = "([^"]*)"$', re.MULTILINE)


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
