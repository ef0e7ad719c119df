"""An independent reference for models/pi_pendulum.py: the same closed loop as a
minimal-coordinate ODE in (φ, φ̇, X), integrated by SciPy.

    (J + m l²) φ̈ = −m g l cos φ + u,   u = −kp (φ − φ_ref) − kd φ̇ − ki X,
    Ẋ = φ − φ_ref

(torque balance about the pivot; Haug 1989, Example 7.2.1 with the motor torque).  It
shares nothing with the generated kernels but the parameter values, which it reads by
name from the module, so it checks the model, the derivation and the runtime together.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType

import numpy as np
from scipy.integrate import solve_ivp


def closed_loop(
    module: ModuleType,
    t_eval: np.ndarray,
    params: Mapping[str, float] | None = None,
    rtol: float = 1e-12,
    atol: float = 1e-12,
    x0: float | None = None,
) -> dict[str, np.ndarray]:
    """φ, φ̇, X and the Cartesian q = [x, y, φ] of the PI pendulum at ``t_eval``, from
    the model's initial state (X(0) = ``x0`` if given); DOP853 at ``rtol``, ``atol``.
    ``params`` overrides parameters by name, as :func:`mbdgen.simulate` does."""
    value = dict(zip(module.PARAMETER_NAMES, map(float, module.P_DEFAULT), strict=True))
    value.update(params or {})
    m, J, g = value["bar_m"], value["bar_J"], -value["g_y"]
    l = -value["pivot_sjx"]  # the pivot sits at (−l, 0) in the bar's frame
    kp, kd, ki, ref = value["kp"], value["kd"], value["ki"], value["phi_ref"]
    inertia = J + m * l * l

    def rate(_t: float, y: np.ndarray) -> list[float]:
        phi, phid, x = y
        u = -kp * (phi - ref) - kd * phid - ki * x
        return [phid, (-m * g * l * np.cos(phi) + u) / inertia, phi - ref]

    y0 = [float(module.Q0[2]), float(module.QD0[2]), float(module.X0[0] if x0 is None else x0)]
    t_eval = np.asarray(t_eval, dtype=float)
    sol = solve_ivp(
        rate, (0.0, float(t_eval[-1])), y0, method="DOP853", t_eval=t_eval, rtol=rtol, atol=atol
    )
    assert sol.success, sol.message
    phi, phid, x = sol.y
    q = np.stack([l * np.cos(phi), l * np.sin(phi), phi], axis=1)
    return {"t": sol.t, "phi": phi, "phid": phid, "x": x, "q": q}
