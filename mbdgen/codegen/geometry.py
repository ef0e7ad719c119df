"""Drawing geometry of a mechanism, for the generated module's metadata block.

Every joint, driver and force element that names body-fixed points (its
:class:`~mbdgen.model.elements.Contribution` ``points``: s'ᵖ of Haug 1989, Eq. 3.2.1
planar, Eq. 9.2.x spatial) contributes one *attachment point* per slot: the body it
is fixed to (−1 for the ground, whose frame is the global frame) and its body-frame
coordinates.  Those coordinates are usually parameters (``pivot_six``) or simple
multiples of them (a chain's ∓L/2), and parameters are runtime values (DESIGN rule 3),
so each coordinate is stored in affine form, c + Σ aₖ p[iₖ], and evaluated with the
run's parameter vector (:func:`mbdgen.geometry.points`).  A coordinate that is not
affine in the parameters is stored as its value at the defaults (flagged in
``GEOMETRY_POINT_FIXED``).

Tables (all in the compressed data block, one row per attachment point P):

``GEOMETRY_POINT_ELEMENT`` (P,) index into ``ELEMENT_NAMES``;
``GEOMETRY_POINT_BODY`` (P,) index into ``BODY_NAMES``, −1 for the ground;
``GEOMETRY_POINT_CONST`` (P, 3) the constant part (planar points have z = 0);
``GEOMETRY_POINT_TERMS`` (K, 3) (point, component, parameter index) of each linear term;
``GEOMETRY_POINT_COEF`` (K,) its coefficient;
``GEOMETRY_POINT_FIXED`` (P,) 1 where a component was frozen at the defaults;
``ELEMENT_ROLES`` the role of every element (body, joint, driver, force).
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from mbdgen.model.elements import Body, element_type
from mbdgen.model.mechanism import Mechanism
from mbdgen.runtime.tables import pack_names


def _affine(
    expr: sp.Expr, pindex: dict[sp.Symbol, int], defaults: dict[sp.Symbol, float]
) -> tuple[float, list[tuple[int, float]], bool]:
    """(constant, [(parameter index, coefficient)], frozen) of one point coordinate."""
    expr = sp.sympify(expr)
    free = sorted(expr.free_symbols, key=lambda s: s.name)
    if all(s in pindex for s in free):
        coefs = [sp.diff(expr, s) for s in free]
        if all(c.is_number for c in coefs):
            const = sp.sympify(expr.xreplace({s: sp.S.Zero for s in free}))
            if const.is_number:
                terms = [(pindex[s], float(c)) for s, c in zip(free, coefs, strict=True) if c != 0]
                return float(const), terms, False
    value = expr.xreplace({s: sp.Float(defaults.get(s, 0.0)) for s in free})
    try:
        return float(value), [], True
    except TypeError:
        return 0.0, [], True


def geometry_tables(mech: Mechanism) -> dict[str, np.ndarray]:
    """The ``GEOMETRY_*`` and ``ELEMENT_ROLES`` tables of ``mech`` (see the module doc).

    The affine form is found once per element type, over its local parameters
    (DESIGN "Scale: element kernels"), and mapped to each instance's global ones.
    """
    pindex = {s: i for i, s in enumerate(mech.parameter_symbols)}
    defaults = dict(mech.parameters)
    body_index = {b: i for i, b in enumerate(mech.bodies)}
    forms: dict[tuple, list] = {}
    elements, bodies, consts, fixed = [], [], [], []
    terms: list[tuple[int, int, int]] = []
    coefs: list[float] = []
    for ei, e in enumerate(mech.elements):
        et = element_type(e)
        points = et.contribution.points
        if e.role == "body" or points is None:
            continue
        form = forms.get(e.type_key)
        if form is None:
            local = {s: k for k, s in enumerate(et.p)}
            form = forms[e.type_key] = [
                None if pt is None else [_affine(ex, local, {}) for ex in sp.Matrix(pt)]
                for pt in points
            ]
        glob = [s for _, s in e.params]
        for slot_body, point, comps in zip(e.bodies, points, form, strict=False):
            if comps is None:
                continue
            k = len(elements)
            row, frozen = [0.0, 0.0, 0.0], False
            for comp, (c, lin, fz) in enumerate(comps):
                if fz or any(glob[j] not in pindex for j, _ in lin):  # e.g. a user state
                    ex = sp.Matrix(point)[comp].xreplace(dict(zip(et.p, glob, strict=True)))
                    c, lin, fz = _affine(ex, pindex, defaults)
                else:
                    lin = [(pindex[glob[j]], a) for j, a in lin]
                row[comp] = c
                frozen |= fz
                for i, a in lin:
                    terms.append((k, comp, i))
                    coefs.append(a)
            elements.append(ei)
            bodies.append(body_index[slot_body] if isinstance(slot_body, Body) else -1)
            consts.append(row)
            fixed.append(int(frozen))
    return {
        "GEOMETRY_POINT_ELEMENT": np.array(elements, dtype=np.int64),
        "GEOMETRY_POINT_BODY": np.array(bodies, dtype=np.int64),
        "GEOMETRY_POINT_CONST": np.array(consts, dtype=np.float64).reshape(len(consts), 3),
        "GEOMETRY_POINT_TERMS": np.array(terms, dtype=np.int64).reshape(len(terms), 3),
        "GEOMETRY_POINT_COEF": np.array(coefs, dtype=np.float64),
        "GEOMETRY_POINT_FIXED": np.array(fixed, dtype=np.int64),
        "ELEMENT_ROLES": pack_names([e.role for e in mech.elements]),
    }
