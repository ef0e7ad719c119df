"""Test-only model that exercises every derivative block (not a published example).

A body (x, y, th) hangs from a pivot that moves as A sin(w t) (rheonomic
constraints, Φ_t ≠ 0, Φ_tt ≠ 0); its rotary inertia depends on th ((M a)_q ≠ 0)
and it feels velocity-dependent forces (Q_q̇ ≠ 0) and a position-dependent torque
(Q_q ≠ 0), so each kernel of the ABI has non-zero entries.
"""

import sympy as sp

from mbdgen.model import Model, speeds, t

x, y, th = sp.symbols("x y th")
xd, yd, thd = speeds([x, y, th])
m, J0, J1, l, g, c, k, A, w = sp.symbols("m J0 J1 l g c k A w")

model = Model(
    name="rheonomic",
    description="moving-pivot pendulum with configuration-dependent inertia (tests only)",
    coordinates=[x, y, th],
    parameters={m: 1.3, J0: 0.4, J1: 0.1, l: 0.8, g: 9.81, c: 0.2, k: 0.5, A: 0.1, w: 3.0},
    mass=sp.Matrix([[m, 0, 0], [0, m, 0], [0, 0, J0 + J1 * sp.cos(th) ** 2]]),
    force=[-c * xd + k * sp.sin(th) * yd, -m * g - c * yd * x, -c * thd * sp.cos(th) + k * xd**2],
    constraints=[x - A * sp.sin(w * t) - l * sp.cos(th), y - l * sp.sin(th) + A * t**2 / 10],
    q0=[0.8, 0.0, 0.0],
    qd0=[0.3, 0.0, 0.0],
)
