"""On-disk cache of printed element kernels: a library element type is derived once
per installation, not once per model (DESIGN "Scale: element kernels").

An element type's kernels do not depend on the model that uses it: they are
functions of the type's local symbols only (:mod:`mbdgen.symbolic.elements`).  What
a model needs of a type beyond its instance tables is stored here, so a second model
with the same type does no SymPy work for it (no :func:`derive_blocks`, no CSE):

* the printed element kernels (CSE'd statements as text, names without the
  model-specific ``_e<index>`` prefix) and which ABI kernels they serve;
* the local sparsity patterns of the blocks, the number of constraint rows and of
  reaction rows (what the global tables are built from).

**Key.**  One JSON file per type, named by the SHA-256 of its *identity*:
``Element.type_key`` (family, role, slot kinds, ground and point-mass slots, names
of the local parameters, the ``srepr`` of any user expression), which local parameters
are bound to user states, and the builder (module, name, the ``srepr`` of its bound
arguments).  The files live in a folder named after the mbdgen version and a digest
of every source that shapes them (:func:`source_digest`: the SymPy and SymEngine
versions, the kernel ABI, ``mbdgen/model``, ``mbdgen/symbolic``, ``mbdgen/codegen``), so a new
version or an edited element invalidates every entry; the entry repeats the
identity, version and digest and is used only if all match and its checksum holds.

**Safety.**  Only types whose builder is a function of mbdgen's element library
(``mbdgen.model.*``) are cached, and only if every function in their bound user
expressions is SymPy's own: a model file that defines its own element family or a
SymPy ``Function`` subclass is derived every time (its code is not in the digest).
Writes are atomic (temporary file + ``os.replace``), so processes filling the cache
at once can only replace a complete entry by an identical complete one; an entry that
cannot be read, parsed or checked is ignored and rewritten.  JSON, not pickle:
loading an entry cannot run code.

``MBDGEN_NO_ELEMENT_CACHE=1`` (or ``mbdgen compile --no-cache``) disables it;
``MBDGEN_ELEMENT_CACHE_DIR`` moves it (default ``$XDG_CACHE_HOME/mbdgen/elements``,
i.e. ``~/.cache/mbdgen/elements``, beside Numba's cache of :mod:`mbdgen._numba_cache`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import symengine
import sympy as sp

from mbdgen import __version__
from mbdgen.codegen.abi import abi_hash
from mbdgen.codegen.emit import KernelCode, Statement
from mbdgen.fileio import atomic_write
from mbdgen.model.elements import Element

#: Bump when the stored form changes.
FORMAT = 1
_PACKAGE = Path(__file__).resolve().parent.parent
#: Modules whose builders are library code (covered by :func:`source_digest`).
_LIBRARY = ("mbdgen.model.",)


def enabled() -> bool:
    """False when ``MBDGEN_NO_ELEMENT_CACHE`` is set to anything but ``""``/``0``."""
    return os.environ.get("MBDGEN_NO_ELEMENT_CACHE", "") in ("", "0")


def cache_root() -> Path:
    """The cache's folder (``MBDGEN_ELEMENT_CACHE_DIR`` or ``~/.cache/mbdgen/elements``)."""
    explicit = os.environ.get("MBDGEN_ELEMENT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mbdgen" / "elements"


@functools.lru_cache(maxsize=1)
def _digest_of_sources() -> str:
    engines = f"sympy {sp.__version__}; symengine {symengine.__version__}"
    h = hashlib.sha256(f"format {FORMAT}; {engines}; abi {abi_hash()}".encode())
    for sub in ("model", "symbolic", "codegen"):
        for f in sorted((_PACKAGE / sub).glob("*.py")):
            h.update(f"{sub}/{f.name}".encode())
            h.update(f.read_bytes().replace(b"\r\n", b"\n"))
    return h.hexdigest()[:16]


def source_digest() -> str:
    """Digest of what shapes a stored entry besides the type: the SymPy and SymEngine
    versions, the kernel ABI and the sources of the front end, the derivation and the
    code generator."""
    return _digest_of_sources()


def _canonical(value: Any) -> str | None:
    """A deterministic text of a builder's bound argument (None: not cacheable)."""
    if isinstance(value, sp.Basic):
        for f in value.atoms(sp.Function):
            if not type(f).__module__.startswith("sympy."):
                return None
        return sp.srepr(value)
    if isinstance(value, (tuple, list)):
        parts = [_canonical(v) for v in value]
        return None if any(p is None for p in parts) else "(" + ",".join(parts) + ")"  # type: ignore[arg-type]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return repr(value)
    return None


def type_identity(e: Element, state_params: tuple[int, ...]) -> str | None:
    """What identifies the kernels of ``e``'s type, or None when they may not be cached
    (a builder outside mbdgen's library, or a user ``Function`` class)."""
    build = e.build
    args: tuple = ()
    keywords: dict = {}
    if isinstance(build, functools.partial):
        args, keywords = build.args, dict(build.keywords)
        build = build.func
    module = getattr(build, "__module__", "") or ""
    if not module.startswith(_LIBRARY) or not hasattr(build, "__qualname__"):
        return None
    bound = _canonical((args, tuple(sorted(keywords.items()))))
    if bound is None:
        return None
    return json.dumps(
        {
            "type_key": repr(e.type_key),
            "state_params": list(state_params),
            "build": f"{module}.{build.__qualname__}",
            "bound": bound,
        },
        sort_keys=True,
    )


@dataclass(frozen=True)
class CachedType:
    """What a model needs of one element type besides its instance tables.

    ``kernels`` are named without the model's ``_e<index>`` prefix (``_phi``,
    ``_dynamics`` ...); ``used`` maps an ABI kernel name to such a suffix.
    """

    name: str
    m: int
    n_reactions: int
    patterns: dict[str, tuple[tuple[int, int], ...]]
    kernels: tuple[KernelCode, ...]
    used: dict[str, str]

    def to_json(self) -> dict:
        def st(rows: tuple[Statement, ...]) -> list:
            return [[s.target, s.value, s.op] for s in rows]

        return {
            "name": self.name,
            "m": self.m,
            "n_reactions": self.n_reactions,
            "patterns": {k: [list(e) for e in v] for k, v in sorted(self.patterns.items())},
            "kernels": [
                {
                    "name": k.name,
                    "args": list(k.args),
                    "doc": k.doc,
                    "zero_fill": list(k.zero_fill),
                    "temporaries": st(k.temporaries),
                    "assignments": st(k.assignments),
                    "prologue": st(k.prologue),
                    "decorator": k.decorator,
                }
                for k in self.kernels
            ],
            "used": dict(sorted(self.used.items())),
        }

    @classmethod
    def from_json(cls, d: dict) -> CachedType:
        def st(rows: list) -> tuple[Statement, ...]:
            out = []
            for target, value, op in rows:
                if not (isinstance(target, str) and isinstance(value, str) and op in ("=", "+=")):
                    raise ValueError("bad statement")
                out.append(Statement(target, value, op))
            return tuple(out)

        kernels = tuple(
            KernelCode(
                name=str(k["name"]),
                args=tuple(str(a) for a in k["args"]),
                doc=str(k["doc"]),
                zero_fill=tuple(str(a) for a in k["zero_fill"]),
                temporaries=st(k["temporaries"]),
                assignments=st(k["assignments"]),
                prologue=st(k["prologue"]),
                decorator=str(k["decorator"]),
            )
            for k in d["kernels"]
        )
        return cls(
            name=str(d["name"]),
            m=int(d["m"]),
            n_reactions=int(d["n_reactions"]),
            patterns={
                str(k): tuple((int(i), int(j)) for i, j in v) for k, v in d["patterns"].items()
            },
            kernels=kernels,
            used={str(k): str(v) for k, v in d["used"].items()},
        )


def _checksum(payload: dict) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


class ElementCache:
    """The entries of one mbdgen version and source digest under ``root``."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else cache_root()

    @property
    def folder(self) -> Path:
        return self.root / f"mbdgen-{__version__}-{source_digest()}"

    def path(self, identity: str) -> Path:
        return self.folder / f"{hashlib.sha256(identity.encode()).hexdigest()[:32]}.json"

    def lookup(self, e: Element, state_params: tuple[int, ...]) -> tuple[str | None, Any]:
        """(identity, entry) of ``e``'s type: identity None when it may not be cached,
        entry None on a miss."""
        identity = type_identity(e, state_params)
        return identity, (self.load(identity) if identity is not None else None)

    def load(self, identity: str) -> CachedType | None:
        """The entry of ``identity``, or None if absent, unreadable, damaged or stale."""
        try:
            doc = json.loads(self.path(identity).read_text(encoding="utf-8"))
            payload = doc["payload"]
            if (
                doc.get("checksum") != _checksum(payload)
                or payload.get("format") != FORMAT
                or payload.get("mbdgen") != __version__
                or payload.get("digest") != source_digest()
                or payload.get("identity") != identity
            ):
                return None
            return CachedType.from_json(payload["type"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def store(self, identity: str, entry: CachedType) -> bool:
        """Write the entry atomically; False (and nothing written) if the folder is not
        writable — the cache only saves time, a failure to fill it is not an error."""
        payload = {
            "format": FORMAT,
            "mbdgen": __version__,
            "digest": source_digest(),
            "identity": identity,
            "type": entry.to_json(),
        }
        doc = {"checksum": _checksum(payload), "payload": payload}
        text = json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=True) + "\n"
        path = self.path(identity)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(path) as fh:
                fh.write(text.encode("utf-8"))
        except OSError:
            return False
        return True


def default_cache(use: bool | None = None) -> ElementCache | None:
    """The installation's cache, or None when ``use`` is False or, with ``use=None``,
    when ``MBDGEN_NO_ELEMENT_CACHE`` disables it."""
    if use is False or (use is None and not enabled()):
        return None
    return ElementCache()
