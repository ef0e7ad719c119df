"""Body geometry of a run: attachment points in body frames, and their global positions.

A generated element-path module carries its drawing geometry in the metadata block
(``GEOMETRY_*`` tables, written by :mod:`mbdgen.codegen.geometry`); :func:`describe`
evaluates it with the run's parameters into a small JSON-able dict that a
:class:`~mbdgen.results.Result` keeps in ``info["geometry"]``, so a saved result can
be drawn without its module.  :func:`world` maps body-frame points to global ones:

* planar body, q_i = [x, y, φ]:  r^P = r + A(φ) s'^P (Haug 1989, Eq. 3.2.1);
* spatial body, q_i = [r, e0..e3]: r^P = r + A(p) s'^P with
  A = 2[(e0² − ½) I + e eᵀ + e0 ẽ] (Haug 1989, Eq. 9.3.16);
* point mass, q_i = [x, y] or [x, y, z]: r^P = r + s'^P (no orientation).

NumPy only (no SymPy, no matplotlib): called at the end of every simulation.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

#: Version of the ``info["geometry"]`` layout.
GEOMETRY_VERSION = 1
#: Body kind by coordinate count, for modules generated before ``BODY_KINDS`` existed.
_KINDS = {3: "planar", 7: "spatial"}


def _body_kinds(module: Any) -> list[str]:
    """``planar``, ``spatial``, ``planar_point`` or ``spatial_point`` for every body."""
    kinds = getattr(module, "BODY_KINDS", None)
    if kinds is not None:
        return [str(k) for k in kinds]
    return [_KINDS[int(s)] for s in module.BODY_SIZES]


def has_geometry(module: Any) -> bool:
    """True when ``module`` (a generated module) carries drawing geometry."""
    return hasattr(module, "GEOMETRY_POINT_CONST") and hasattr(module, "BODY_OFFSETS")


class _Layout(NamedTuple):
    """What :func:`describe` reads from a module, whatever the parameters (computed once
    per module object: a run's end builds the geometry of every result)."""

    bodies: tuple[tuple[str, str, int], ...]  # (name, kind, offset)
    points: tuple[tuple[str, str, int, bool], ...]  # (element, role, body, planar)
    const: np.ndarray  # (P, 3) the constant part of the points
    terms: np.ndarray  # (T, 3) rows: point, axis, parameter
    coef: np.ndarray  # (T,) coefficient of each term
    flat: np.ndarray | None  # (T,) entry of each term in the raveled points, where no two share one


def _layout(module: Any) -> _Layout:
    layout = getattr(module, "_mbdgen_geometry_layout", None)
    if layout is not None:
        return layout
    kinds = _body_kinds(module)
    flat = [k.startswith("planar") for k in kinds]
    everywhere_flat = all(flat)
    names, roles = module.ELEMENT_NAMES, module.ELEMENT_ROLES
    layout = _Layout(
        bodies=tuple(
            (str(name), kind, int(off))
            for name, kind, off in zip(module.BODY_NAMES, kinds, module.BODY_OFFSETS, strict=True)
        ),
        points=tuple(
            (names[e], roles[e], int(b), flat[b] if b >= 0 else everywhere_flat)
            for e, b in zip(module.GEOMETRY_POINT_ELEMENT, module.GEOMETRY_POINT_BODY, strict=True)
        ),
        const=np.array(module.GEOMETRY_POINT_CONST, dtype=np.float64).reshape(-1, 3),
        terms=np.asarray(module.GEOMETRY_POINT_TERMS, dtype=np.int64).reshape(-1, 3),
        coef=np.asarray(module.GEOMETRY_POINT_COEF, dtype=np.float64),
        flat=None,
    )
    entry = layout.terms[:, 0] * 3 + layout.terms[:, 1]
    if np.unique(entry).size == entry.size:
        layout = layout._replace(flat=entry)
    module._mbdgen_geometry_layout = layout
    return layout


def local_points(module: Any, p: np.ndarray) -> np.ndarray:
    """(P, 3) body-frame coordinates of every attachment point for parameters ``p``."""
    layout = _layout(module)
    pts = layout.const.copy()
    terms = layout.terms
    values = layout.coef * np.asarray(p, dtype=np.float64)[terms[:, 2]]
    if layout.flat is not None:  # one term per entry: NumPy's buffered add is exact
        pts.ravel()[layout.flat] += values  # (np.add.at costs ~10 µs a run)
    else:  # unbuffered, so that terms adding to the same entry all count, in order
        np.add.at(pts, (terms[:, 0], terms[:, 1]), values)
    return pts


def describe(module: Any, p: np.ndarray) -> dict[str, Any] | None:
    """The geometry of ``module`` evaluated at parameters ``p``, or None without one.

    ``{"version", "bodies": [{"name", "kind", "offset"}], "points": [{"element",
    "role", "body", "local"}]}``; ``body`` is an index into ``bodies`` or −1 (ground,
    ``local`` then in the global frame); planar points have ``local = [x, y]``.
    """
    if not has_geometry(module):
        return None
    layout = _layout(module)
    bodies = [{"name": name, "kind": kind, "offset": off} for name, kind, off in layout.bodies]
    points = [
        {"element": element, "role": role, "body": body, "local": local[:2] if planar else local}
        for (element, role, body, planar), local in zip(
            layout.points, local_points(module, p).tolist(), strict=True
        )
    ]
    return {"version": GEOMETRY_VERSION, "bodies": bodies, "points": points}


def rotation(e: np.ndarray) -> np.ndarray:
    """(N, 3, 3) rotation matrices A(p) of Euler parameters ``e`` (N, 4), Haug Eq. 9.3.16.

    The parameters are normalized first, so a drifted pᵀp ≠ 1 still draws a rotation.
    """
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    e0, v = e[:, 0], e[:, 1:]
    A = 2.0 * np.einsum("ni,nj->nij", v, v)
    A += (2.0 * e0**2 - 1.0)[:, None, None] * np.eye(3)
    tilde = np.zeros_like(A)
    tilde[:, 0, 1], tilde[:, 0, 2] = -v[:, 2], v[:, 1]
    tilde[:, 1, 0], tilde[:, 1, 2] = v[:, 2], -v[:, 0]
    tilde[:, 2, 0], tilde[:, 2, 1] = -v[:, 1], v[:, 0]
    return A + 2.0 * e0[:, None, None] * tilde


def frames(body: dict[str, Any], q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Origin (N, 3) and rotation (N, 3, 3) of ``body`` over the rows of ``q`` (N, n)."""
    off = body["offset"]
    n = q.shape[0]
    if body["kind"].endswith("_point"):  # a point mass: position only, no orientation
        dim = 2 if body["kind"] == "planar_point" else 3
        r = np.zeros((n, 3))
        r[:, :dim] = q[:, off : off + dim]
        return r, np.broadcast_to(np.eye(3), (n, 3, 3)).copy()
    if body["kind"] == "planar":
        r = np.zeros((n, 3))
        r[:, :2] = q[:, off : off + 2]
        c, s = np.cos(q[:, off + 2]), np.sin(q[:, off + 2])
        A = np.zeros((n, 3, 3))
        A[:, 0, 0], A[:, 0, 1], A[:, 1, 0], A[:, 1, 1] = c, -s, s, c
        A[:, 2, 2] = 1.0
        return r, A
    return q[:, off : off + 3].copy(), rotation(q[:, off + 3 : off + 7])


def world(body: dict[str, Any], q: np.ndarray, local: np.ndarray) -> np.ndarray:
    """(N, 3) global positions of body-frame point ``local`` (2 or 3 entries) over ``q``."""
    s = np.zeros(3)
    s[: len(local)] = local
    r, A = frames(body, q)
    return r + A @ s
