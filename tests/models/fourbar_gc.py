"""Test-only model: a crank-driven planar four-bar linkage in its three link angles.

Ground pivots A = (0, 0) and D = (r0, 0); crank AB of length r1 at angle th1, coupler
BC of length r2 at angle th2, rocker DC of length r3 at angle th3.  The loop closure
A + r1 e(th1) + r2 e(th2) = D + r3 e(th3), with e(θ) = (cos θ, sin θ), gives two
constraints, and the driver th1 = th10 + w t a third (rheonomic) one, so the linkage
is kinematically determined (Haug 1989 §5.1).  The defaults (r1, r2, r3, r0) = (1, 3,
2.5, 3) make a Grashof crank-rocker whose crank turns fully; (2, 1.5, 2, 3) is a
non-Grashof linkage whose crank locks where coupler and rocker are aligned.

Mass and force are placeholders (only kinematic analysis uses this model).
"""

import sympy as sp

from mbdgen.model import Model, t

th1, th2, th3 = sp.symbols("th1 th2 th3")
r1, r2, r3, r0, w, th10 = sp.symbols("r1 r2 r3 r0 w th10")

model = Model(
    name="fourbar_gc",
    description="crank-driven four-bar linkage in link angles (tests only)",
    coordinates=[th1, th2, th3],
    parameters={r1: 1.0, r2: 3.0, r3: 2.5, r0: 3.0, w: 2.0, th10: 0.0},
    mass=sp.eye(3),
    force=[0, 0, 0],
    constraints=[
        r1 * sp.cos(th1) + r2 * sp.cos(th2) - r0 - r3 * sp.cos(th3),
        r1 * sp.sin(th1) + r2 * sp.sin(th2) - r3 * sp.sin(th3),
        th1 - th10 - w * t,
    ],
    q0=[0.0, 1.0, 2.0],
    qd0=[0.0, 0.0, 0.0],
)
