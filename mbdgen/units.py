"""Names and units of the multipliers λ and of the coordinates, for labels and files.

A generated element module says which element owns each constraint row
(``ELEMENT_NAMES``, ``ELEMENT_ROWS``), its role (``ELEMENT_ROLES``: body, joint, driver,
force) and its type (``ELEMENT_TYPE_NAMES`` through ``ELEMENT_TYPES``: the family, such
as ``revolute``, followed by the slot tags).  The library's families are fixed, so
what each of their rows measures is known here (:data:`ROW_DIMENSIONS`, from the
formulas in :mod:`mbdgen.model.planar` and :mod:`mbdgen.model.spatial`).

The unit of λ_i follows from its row.  The equations of motion are
M q̈ + Φ_qᵀλ = Q, so λ_i ∂Φ_i/∂q_j is a generalized force on q_j, i.e. an energy per
unit of q_j: λ_i times the unit of Φ_i is an energy, [λ_i] = J / [Φ_i]:

* a row in m (point coincidence, a point on a line, a gear's rolled arc R φ, a
  translation driver) has λ in N;
* a row in rad (an angle) or dimensionless (a dot product of body-fixed directions,
  which are pure numbers whatever their length; the rotational driver's sin(θ − f))
  has λ in N·m (J per unit of a dimensionless quantity);
* the Euler-parameter normalization pᵀp − 1 of a spatial body is dimensionless too:
  its λ is in N·m, but it is no joint's reaction (it holds p on the unit sphere);
* a squared distance dᵀd − ℓ² (m²: the distance constraint, the revolute–spherical
  joint's second row, the distance driver) has λ in N/m (the link's force is 2λℓ).

This assumes the model is in SI units (m, kg, s), as the plots do.  A
generalized-coordinate model (``Model`` with its own Φ) or a family this table does
not know has rows of unknown unit: they are labelled "unit unknown", never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType

#: What a row measures → (unit of Φ_i, unit of λ_i), for labels (Unicode).
DIMENSIONS = {
    "length": ("m", "N"),
    "angle": ("rad", "N·m"),
    "direction": ("1", "N·m"),
    "normalization": ("1", "N·m"),
    "squared length": ("m²", "N/m"),
}
#: The same units in ASCII (UDUNITS syntax), for HDF5 ``units`` attributes.
ASCII = {"N·m": "N m", "m²": "m^2", "m/s²": "m/s^2", "rad/s²": "rad/s^2", "1/s²": "1/s^2"}

_L, _A, _D, _N, _S = "length", "angle", "direction", "normalization", "squared length"
#: Per element family, what each of its constraint rows measures (in row order).
ROW_DIMENSIONS: dict[str, tuple[str, ...]] = {
    # planar (Haug 1989, ch. 3)
    "revolute_planar": (_L, _L),
    "absolute_x": (_L,),
    "absolute_y": (_L,),
    "absolute_angle": (_A,),
    "translational_planar": (_L, _A),
    "point_on_line": (_L,),
    "revolute_translational": (_L,),
    "distance_planar": (_S,),
    "weld": (_L, _L, _A),
    "gear": (_L,),
    "gear_internal": (_L,),
    "rack_pinion": (_L,),
    "x_driver": (_L,),
    "y_driver": (_L,),
    "angle_driver": (_A,),
    "rotation_driver": (_A,),
    "translation_driver": (_L,),
    "distance_driver": (_S,),
    # spatial (Haug 1989, ch. 9)
    "spatial_body": (_N,),
    "spherical": (_L, _L, _L),
    "dot1": (_D,),
    "dot2": (_L,),
    "distance_spatial": (_S,),
    "universal": (_L, _L, _L, _D),
    "revolute_spatial": (_L, _L, _L, _D, _D),
    "cylindrical": (_D, _D, _L, _L),
    "translational_spatial": (_D, _D, _L, _L, _D),
    "fixed": (_L, _L, _L, _D, _D, _D),
    "parallel": (_D, _D),
    "revolute_spherical": (_L, _S),
    "rotational_driver": (_D,),
    "translational_driver": (_L,),
}
#: Families whose name is shared by a planar and a spatial element of other rows.
_BY_KIND = ("revolute", "translational", "distance")
_TAGS = re.compile(r"_(?:g|pm?|sm?)+$")


def element_family(type_name: str) -> tuple[str, str]:
    """(family, slot tags) of an element type name: ``revolute_gs`` → (revolute, gs)."""
    m = _TAGS.search(type_name)
    return (type_name[: m.start()], m.group()[1:]) if m else (type_name, "")


@dataclass(frozen=True)
class Multiplier:
    """The constraint row of one multiplier λ_i: its name (``CONSTRAINT_NAMES``), the
    element that owns it, that element's role and family, and what the row measures
    (None: not known)."""

    name: str
    element: str = ""
    role: str = ""
    family: str = ""
    dimension: str | None = None

    @property
    def unit(self) -> str:
        """Unit of λ_i (see the module docstring), "" where the row's is not known."""
        return DIMENSIONS[self.dimension][1] if self.dimension else ""

    @property
    def kind(self) -> str:
        """What the row is, for a label: "revolute joint, Φ in m", "Euler-parameter
        normalization pᵀp − 1 of body crank"; "" for a generalized-coordinate model."""
        if self.dimension == _N:
            return f"Euler-parameter normalization pᵀp − 1 of body {self.element}"
        if not self.family:
            return ""
        what = f"{self.family} {self.role}".strip()
        if not self.dimension:
            return what
        phi = DIMENSIONS[self.dimension][0]
        return f"{what}, Φ dimensionless" if phi == "1" else f"{what}, Φ in {phi}"

    def label(self) -> str:
        """``λ pivot[0] [N] (revolute joint, Φ in m)``; "unit unknown" where it is."""
        unit = f"[{self.unit}]" if self.unit else "(unit unknown)"
        return f"λ {self.name} {unit}" + (f" ({self.kind})" if self.kind else "")


def multipliers(module: ModuleType) -> tuple[Multiplier, ...]:
    """A :class:`Multiplier` per constraint row of ``module``, from its element tables;
    rows of a module without them (a generalized-coordinate model) have only a name."""
    m = int(module.N_CONSTRAINTS)
    names = tuple(getattr(module, "CONSTRAINT_NAMES", ()) or ())
    if len(names) != m:
        names = tuple(f"phi[{i}]" for i in range(m))
    rows = [Multiplier(name) for name in names]
    try:
        elements = module.ELEMENT_NAMES
        types = module.ELEMENT_TYPE_NAMES
        of_type = module.ELEMENT_TYPES
        spans = module.ELEMENT_ROWS
        roles = module.ELEMENT_ROLES
    except AttributeError:
        return tuple(rows)
    for e, name in enumerate(elements):
        first, count = (int(v) for v in spans[e])
        family, tags = element_family(str(types[int(of_type[e])]))
        key = family
        if family in _BY_KIND:
            key = f"{family}_{'spatial' if 's' in tags else 'planar'}"
        dims: tuple[str | None, ...] = ROW_DIMENSIONS.get(key, ())
        if len(dims) != count:  # a family this table does not know: say nothing
            dims = (None,) * count
        for k in range(count):
            rows[first + k] = Multiplier(
                names[first + k], str(name), str(roles[e]), family, dims[k]
            )
    return tuple(rows)


def ascii_unit(unit: str) -> str:
    """``unit`` in ASCII (UDUNITS syntax: ``N m``, ``m/s^2``) for file attributes."""
    return ASCII.get(unit, unit)


#: Units of a body's coordinates by their name suffix (``<body>_<suffix>``).
_COORDINATE_UNITS = {"x": "m", "y": "m", "z": "m", "phi": "rad"}
_COORDINATE_UNITS.update({f"e{i}": "1" for i in range(4)})


def coordinate_units(coordinates: tuple[str, ...], bodies: dict) -> list[str]:
    """The unit of each coordinate of a mechanism's body (x, y, z in m, a planar angle
    in rad, Euler parameters dimensionless "1"), from ``info["bodies"]`` (``{body:
    [offset, size]}``) and the coordinates' names; "" for the coordinates of no body
    (a generalized-coordinate model, whose units mbdgen does not know)."""
    units = [""] * len(coordinates)
    for body, (offset, size) in (bodies or {}).items():
        for i in range(int(offset), int(offset) + int(size)):
            if i < len(coordinates) and coordinates[i].startswith(f"{body}_"):
                units[i] = _COORDINATE_UNITS.get(coordinates[i][len(body) + 1 :], "")
    return units


def rate_unit(unit: str, order: int) -> str:
    """The unit of the ``order``-th time derivative of a quantity in ``unit``."""
    if not unit or order == 0:
        return unit
    per = "/s" if order == 1 else "/s²"
    return f"1{per}" if unit == "1" else f"{unit}{per}"


def label_result(result: object, module: ModuleType) -> None:
    """Give ``result`` (a :class:`~mbdgen.results.Result`) the names, units and kinds of
    ``module``'s multipliers (its ``constraint_names``, ``constraint_units``,
    ``constraint_kinds``)."""
    labels = getattr(module, "_mbdgen_labels", None)
    if labels is None:  # a generated module does not change: worked out once
        names = tuple(getattr(module, "CONSTRAINT_NAMES", ()) or ())
        rows = multipliers(module) if len(names) == int(module.N_CONSTRAINTS) else ()
        labels = (names, tuple(r.unit for r in rows), tuple(r.kind for r in rows))
        module._mbdgen_labels = labels  # type: ignore[attr-defined]
    result.constraint_names = labels[0]  # type: ignore[attr-defined]
    result.constraint_units = labels[1]  # type: ignore[attr-defined]
    result.constraint_kinds = labels[2]  # type: ignore[attr-defined]
