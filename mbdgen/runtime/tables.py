"""Compact, deterministic text encoding of a generated module's data tables.

An element-path module carries per-instance data (index tables, names, defaults,
initial values) whose size grows with the number of bodies; its *code* does not.
The data is stored as one base64 text of zlib-compressed raw arrays, decoded at
import, so the module stays a single plain file (DESIGN rule 4) whose code size is
independent of the model size.  No timestamps or pickles: the same arrays give the
same text, and decoding executes nothing.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping

import numpy as np

_DTYPES = {"int64": np.int64, "float64": np.float64, "uint8": np.uint8}


def encode(arrays: Mapping[str, np.ndarray], width: int = 88) -> list[str]:
    """Arrays → lines of base64 text (``width`` characters each)."""
    header = []
    chunks = []
    for name in sorted(arrays):
        arr = np.ascontiguousarray(arrays[name])
        dtype = str(arr.dtype)
        if dtype not in _DTYPES:
            raise TypeError(f"table {name!r}: unsupported dtype {dtype}")
        header.append([name, dtype, list(arr.shape)])
        chunks.append(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())
    head = json.dumps(header, separators=(",", ":")).encode()
    blob = len(head).to_bytes(8, "little") + head + b"".join(chunks)
    text = base64.b64encode(zlib.compress(blob, 9)).decode("ascii")
    return [text[i : i + width] for i in range(0, len(text), width)] or [""]


def decode(text: str) -> dict[str, np.ndarray]:
    """Inverse of :func:`encode` (takes the joined text)."""
    blob = zlib.decompress(base64.b64decode(text))
    size = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + size])
    out: dict[str, np.ndarray] = {}
    offset = 8 + size
    for name, dtype, shape in header:
        dt = np.dtype(_DTYPES[dtype]).newbyteorder("<")
        count = int(np.prod(shape)) if shape else 1
        arr = np.frombuffer(blob, dtype=dt, count=count, offset=offset).reshape(shape)
        out[name] = arr.astype(_DTYPES[dtype])  # native byte order, writable copy
        offset += count * dt.itemsize
    return out


def pack_names(names: tuple[str, ...] | list[str]) -> np.ndarray:
    """Names → uint8 array (newline-separated UTF-8)."""
    return np.frombuffer("\n".join(names).encode(), dtype=np.uint8).copy()


def unpack_names(arr: np.ndarray) -> tuple[str, ...]:
    """Inverse of :func:`pack_names`."""
    text = bytes(arr.astype(np.uint8)).decode()
    return tuple(text.split("\n")) if text else ()
