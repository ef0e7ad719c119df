"""The sweep bench's problem in Exudyn, run with Exudyn's own ``ParameterVariation``.

The issue asks to compare an mbdgen sweep with Exudyn's parameter variation "on the
same sweep where it installs".  This module builds the slider-crank of the bench
(Wu, Chiou & Lin 2000, Eqs. 35-37; Welch et al. 2007, Eqs. 71-76; see
``models/slider_crank.py``) from Exudyn's planar library and runs
``exudyn.processing.ParameterVariation`` over the bench's parameter table with
``multiprocessing`` (Exudyn's way to use several cores: a ``Pool`` of processes).

The model, body by body, so that each generalized coordinate of the mbdgen model is
one Exudyn coordinate:

* crank: ``ObjectRigidBody2D`` with its centre at the pivot (0, 0) and inertia J1
  (the model's crank carries J1 about the pivot and no weight); a revolute joint to
  the ground fixes its centre, so its mass only loads the pivot (set to m);
* rod: ``ObjectRigidBody2D`` of mass m and inertia J2 at (x, y), angle φ, weight
  −m g; a revolute joint at its local (−L1, 0) to the crank's tip (r, 0);
* slider end: a massless ``ObjectMassPoint2D`` pinned to the rod's point
  (L − L1, 0) by a revolute joint, its y held at 0 by a ``CoordinateConstraint``
  (the model has no slider mass; Exudyn's ``ObjectJointPrismatic2D`` with the rod's
  end as marker 1 did not converge in Newton's first step, so the slider is a point).

Each set starts from rest at the assembled position with θ0 held, computed in
closed form (sin φ = −r sin θ / L, the branch with cos φ > 0), the same
configuration mbdgen's assembly converges to.  Exudyn integrates with its default
implicit solver (generalized-α, index 3, its default ρ∞ = 0.9 and Newton
settings) at the bench's fixed step h.

Exudyn is optional (the ``bench`` extra): without it :func:`exudyn_sweep` returns
None and the bench prints "not installed".
"""

from __future__ import annotations

import math
import time
from typing import Any

#: Plans rebuilt in each Pool process, keyed by (runs, seed): ParameterVariation
#: pickles its function data with every task, so only (runs, seed) travels.
_PLANS: dict[tuple[int, int], list[dict[str, float]]] = {}


def available() -> bool:
    """Whether Exudyn imports here."""
    try:
        import exudyn  # noqa: F401
    except ImportError:
        return False
    return True


def version() -> str | None:
    try:
        import exudyn
    except ImportError:
        return None
    return str(exudyn.__version__)


def initial_state(p: dict[str, float], theta: float) -> tuple[float, float, float]:
    """φ, x, y of the slider-crank at crank angle θ (Φ(q) = 0, slider end on y = 0)."""
    phi = -math.asin(p["r"] * math.sin(theta) / p["L"])
    x = p["r"] * math.cos(theta) + p["L1"] * math.cos(phi)
    y = p["r"] * math.sin(theta) + p["L1"] * math.sin(phi)
    return phi, x, y


def simulate_one(
    p: dict[str, float],
    theta0: float,
    h: float,
    t_end: float,
    rho_inf: float = 0.9,
    newton_tol: float | None = None,
) -> list[float]:
    """One Exudyn run of the slider-crank with parameters ``p``, from rest, by Exudyn's
    generalized-α (index 3) with spectral radius ``rho_inf``; returns the final
    [θ, φ, x, y].  ``newton_tol``: Exudyn's relative and absolute Newton tolerances
    (None: its defaults, 1e-8 and 1e-10, with modified Newton)."""
    import exudyn as exu
    from exudyn.itemInterface import (
        CoordinateConstraint,
        LoadForceVector,
        MarkerBodyPosition,
        MarkerNodeCoordinate,
        MarkerNodePosition,
        NodePoint2D,
        NodePointGround,
        NodeRigidBody2D,
        ObjectGround,
        ObjectJointRevolute2D,
        ObjectMassPoint2D,
        ObjectRigidBody2D,
    )

    sc = exu.SystemContainer()
    mbs = sc.AddSystem()
    ground = mbs.AddObject(ObjectGround())
    phi0, x0, y0 = initial_state(p, theta0)
    crank_node = mbs.AddNode(NodeRigidBody2D(referenceCoordinates=[0.0, 0.0, theta0]))
    crank = mbs.AddObject(ObjectRigidBody2D(mass=p["m"], inertia=p["J1"], nodeNumber=crank_node))
    rod_node = mbs.AddNode(NodeRigidBody2D(referenceCoordinates=[x0, y0, phi0]))
    rod = mbs.AddObject(ObjectRigidBody2D(mass=p["m"], inertia=p["J2"], nodeNumber=rod_node))
    m_ground = mbs.AddMarker(MarkerBodyPosition(bodyNumber=ground, localPosition=[0, 0, 0]))
    m_pivot = mbs.AddMarker(MarkerBodyPosition(bodyNumber=crank, localPosition=[0.0, 0.0, 0.0]))
    m_tip = mbs.AddMarker(MarkerBodyPosition(bodyNumber=crank, localPosition=[p["r"], 0.0, 0.0]))
    m_rod = mbs.AddMarker(MarkerBodyPosition(bodyNumber=rod, localPosition=[-p["L1"], 0.0, 0.0]))
    end = [p["L"] - p["L1"], 0.0, 0.0]
    m_end = mbs.AddMarker(MarkerBodyPosition(bodyNumber=rod, localPosition=end))
    m_com = mbs.AddMarker(MarkerBodyPosition(bodyNumber=rod, localPosition=[0.0, 0.0, 0.0]))
    mbs.AddObject(ObjectJointRevolute2D(markerNumbers=[m_ground, m_pivot]))
    mbs.AddObject(ObjectJointRevolute2D(markerNumbers=[m_tip, m_rod]))
    # the slider: a massless point pinned to the rod's end, its y held at 0
    slider_node = mbs.AddNode(NodePoint2D(referenceCoordinates=[x0 + end[0] * math.cos(phi0), 0.0]))
    mbs.AddObject(ObjectMassPoint2D(mass=0.0, nodeNumber=slider_node))
    m_slider = mbs.AddMarker(MarkerNodePosition(nodeNumber=slider_node))
    mbs.AddObject(ObjectJointRevolute2D(markerNumbers=[m_end, m_slider]))
    ground_node = mbs.AddNode(NodePointGround())
    m_fixed = mbs.AddMarker(MarkerNodeCoordinate(nodeNumber=ground_node, coordinate=0))
    m_slider_y = mbs.AddMarker(MarkerNodeCoordinate(nodeNumber=slider_node, coordinate=1))
    mbs.AddObject(CoordinateConstraint(markerNumbers=[m_fixed, m_slider_y]))
    mbs.AddLoad(LoadForceVector(markerNumber=m_com, loadVector=[0.0, -p["m"] * p["g"], 0.0]))
    mbs.Assemble()
    s = exu.SimulationSettings()
    s.timeIntegration.numberOfSteps = int(round(t_end / h))
    s.timeIntegration.endTime = t_end
    # Exudyn's default ρ∞ = 0.9: with ρ∞ = 1 (no numerical damping) the index-3
    # solution's Newton iteration stalls after about 6 s (λ oscillates)
    s.timeIntegration.generalizedAlpha.spectralRadius = rho_inf
    if newton_tol is not None:
        s.timeIntegration.newton.relativeTolerance = newton_tol
        s.timeIntegration.newton.absoluteTolerance = newton_tol
    s.timeIntegration.verboseMode = 0
    s.solutionSettings.writeSolutionToFile = False
    s.solutionSettings.sensorsWritePeriod = t_end
    s.displayComputationTime = False
    s.displayStatistics = False
    exu.SolveDynamic(mbs, s, showHints=False, showCausingItems=False)
    u = mbs.systemData.GetODE2Coordinates()
    ref = [0.0, 0.0, theta0, x0, y0, phi0]
    q = [u[i] + ref[i] for i in range(6)]
    return [q[2], q[5], q[3], q[4]]


def _plan(runs: int, seed: int) -> list[dict[str, float]]:
    key = (runs, seed)
    if key not in _PLANS:
        from mbdgen.bench import sweep_plan

        _PLANS[key] = sweep_plan(runs, seed).to_dict("records")
    return _PLANS[key]


def parameter_function(parameter_set: dict[str, Any]) -> list[float]:
    """ParameterVariation's callback: run set ``parameter_set['run']`` of the plan."""
    data = parameter_set["functionData"]
    row = _plan(data["runs"], data["seed"])[int(parameter_set["run"])]
    p = {**data["defaults"], **{k: v for k, v in row.items() if k != "run"}}
    return simulate_one(p, data["theta0"], data["h"], data["t_end"])


def exudyn_sweep(
    runs: int, seed: int, t_end: float, h: float, workers: int, defaults: dict[str, float],
    theta0: float,
) -> dict[str, Any] | None:  # fmt: skip
    """Wall time of ParameterVariation over the bench's plan on ``workers`` processes
    and the final [θ, φ, x, y] of every run (None without Exudyn)."""
    if not available():
        return None
    import numpy as np
    from exudyn.processing import ParameterVariation

    data = {"runs": runs, "seed": seed, "t_end": t_end, "h": h, "defaults": defaults,
            "theta0": theta0}  # fmt: skip
    start = time.perf_counter()
    _, values = ParameterVariation(
        parameter_function, {"run": list(range(runs))}, useMultiProcessing=workers > 1,
        numberOfThreads=workers, showProgress=False, parameterFunctionData=data,
    )  # fmt: skip
    wall = time.perf_counter() - start
    return {"wall_s": wall, "final_q": np.asarray(values, dtype=np.float64)}
