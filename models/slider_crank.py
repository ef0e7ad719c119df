"""Slider-crank mechanism in generalized coordinates q = [θ, φ, x, y].

Source: Wu, Chiou & Lin 2000, Eqs. 35-37 (Table 3, Figs. 5-7), and Welch, Hong,
Trapp & Choi 2007, Eqs. 71-76 (Table 2), who give the parameters L = 0.5 m,
L1 = 0.3 m, r = 0.3 m, g = 10 m/s², m = 1 kg, J1 = 0.045 kg·m², J2 = 33/4800 kg·m².
θ is the crank angle, φ the connecting-rod angle and (x, y) the position the rod's
mass is lumped at; the third constraint keeps the slider end on the line y = 0.

Φ = [r cos θ + L1 cos φ − x,  r sin θ + L1 sin φ − y,  (L − L1) sin φ + y]
(Wu writes the first two as r cos θ − (x − l1 cos φ), the same function.)

The initial values of Eq. 75 are printed to four digits, so Φ(q0) ≈ 2e-5, not 0.
"""

import sympy as sp

from mbdgen.model import Model

theta, phi, x, y = sp.symbols("theta phi x y")
J1, J2, m, r, L, L1, g = sp.symbols("J1 J2 m r L L1 g")

model = Model(
    name="slider_crank",
    description="Slider-crank, Wu, Chiou & Lin 2000 Eqs. 35-37; Welch et al. 2007 Eqs. 71-76",
    coordinates=[theta, phi, x, y],
    parameters={
        J1: 0.045,
        J2: 33 / 4800,
        m: 1.0,
        r: 0.3,
        L: 0.5,
        L1: 0.3,
        g: 10.0,
    },
    mass=sp.diag(J1, J2, m, m),
    force=[0, 0, 0, -m * g],
    potential=m * g * y,
    constraints=[
        r * sp.cos(theta) + L1 * sp.cos(phi) - x,
        r * sp.sin(theta) + L1 * sp.sin(phi) - y,
        (L - L1) * sp.sin(phi) + y,
    ],
    q0=[0.9851, -0.5236, 0.4256, 0.1000],
    qd0=[0.0, 0.0, 0.0, 0.0],
)
