"""Analyses of the integration methods and of compiled models.

:mod:`mbdgen.analysis.stability` holds the linear stability analyses of the Adams
family (Wu, Chiou & Lin 2000) and of the constraint treatments compared by Welch,
Hong, Trapp & Choi (2007), computed from the coefficient tables of
:mod:`mbdgen.methods`.  The model analyses of Haug (1989) work on a generated
module's kernels: :mod:`~mbdgen.analysis.assembly` (consistent initial conditions,
§7.2), :mod:`~mbdgen.analysis.kinematics` (kinematically driven systems, ch. 4-5),
:mod:`~mbdgen.analysis.inverse` (inverse dynamics, §6.6, §7.1) and
:mod:`~mbdgen.analysis.equilibrium` (minimum potential energy, §7.5, and dynamic
settling).
"""

from typing import TYPE_CHECKING, Any

from mbdgen.analysis.assembly import Assembly, assemble, redundant_rows
from mbdgen.analysis.equilibrium import Equilibrium, equilibrium
from mbdgen.analysis.kinematics import SingularConfigurationError, kinematics

if TYPE_CHECKING:
    from mbdgen.analysis.inverse import InverseDynamics, constraint_labels, inverse_dynamics

#: Inverse dynamics is imported on first use (PEP 562): the everyday ``mbdgen
#: simulate`` needs only the assembly.  (The other submodules share names with their
#: functions, ``equilibrium`` and ``kinematics``, so they stay eager: a lazily
#: imported submodule would shadow its function on the package.)
_INVERSE = ("InverseDynamics", "constraint_labels", "inverse_dynamics")


def __getattr__(name: str) -> Any:
    if name in _INVERSE:
        from mbdgen.analysis import inverse

        return getattr(inverse, name)
    raise AttributeError(f"module 'mbdgen.analysis' has no attribute {name!r}")


__all__ = [
    "Assembly",
    "Equilibrium",
    "InverseDynamics",
    "SingularConfigurationError",
    "assemble",
    "constraint_labels",
    "equilibrium",
    "inverse_dynamics",
    "kinematics",
    "redundant_rows",
]
