"""Andrews' squeezing mechanism: seven planar bodies in absolute coordinates.

Source: Hairer & Wanner, *Solving Ordinary Differential Equations II* (1991), §VII.7,
after Schiehlen (ed.), *Multibody Systems Handbook* (1990); problem "andrews" of the
Bari IVP test set (Mazzia & Magherini), whose problem description gives the data.
Haug, Negrut & Iancu 1997 §4.3 integrate the same mechanism in this form — 21
Cartesian coordinates, 20 constraints, one degree of freedom.

Hairer & Wanner write the mechanism in seven *relative* angles q = (β, Θ, γ, Φ, δ, Ω,
ε); here every body has its own planar coordinates [x_i, y_i, φ_i] (Haug 1989 ch. 3-6),
with the centroid as reference point and the absolute angles

    φ1 = β,  φ2 = β + Θ,  φ3 = γ,  φ4 = Φ + δ,  φ5 = δ,  φ6 = Ω + ε,  φ7 = ε.

Geometry (from Hairer & Wanner's constraints g1-g6 and mass matrix; O the origin,
A = (xa, ya), B = (xb, yb), C = (xc, yc) fixed, e(φ) = (cos φ, sin φ)):

* body 1 turns about O; the joint P with body 2 is at rr e(β), the centroid at ra e(β);
* body 2 runs from P to the joint E = P − d e(φ2), centroid at P − da e(φ2);
* body 3 turns about B; E = B + ss (sin γ, −cos γ); the spring's end
  D = B + sd (cos γ, sin γ) + sc (sin γ, −cos γ); centroid at distance (sa² + sb²)^½
  from B;
* body 5 turns about A; the joint G with body 4 is at A + zt e(δ);
* body 4 runs from G to E = G + e (sin φ4, −cos φ4), centroid at distance e − ea from G;
* body 7 turns about A; the joint H with body 6 is at A + u (sin ε, −cos ε);
* body 6 runs from H to E = H + zf e(φ6), centroid at distance zf − fa from H.

The directions of the centroids of bodies 3, 5 and 7 from their fixed pivots are not
given by the problem (only their distances enter its mass matrix); with no gravity
they do not change the motion, and we put them at the body-frame offsets (sb, −sa),
(ta, tb), (ua, ub).  Joints: ten revolutes (O, P, B, E between bodies 2-3, 2-4 and 2-6,
A for bodies 5 and 7, G, H); the spring c0 = 4530 N/m, l0 = 0.07785 m between D and C
is a TSDA (Haug 1989 ch. 6) without damping; the driving torque mom = 0.033 N·m acts
on body 1.  The initial positions are computed from the problem's (consistent) initial
angles; the mechanism starts at rest.
"""

import math

import sympy as sp

from mbdgen.model import GROUND, Mechanism, forces, planar

m = (0.04325, 0.00365, 0.02373, 0.00706, 0.07050, 0.00706, 0.05498)
i = (2.194e-6, 4.410e-7, 5.255e-6, 5.667e-7, 1.169e-5, 5.667e-7, 1.912e-5)
xa, ya = -0.06934, -0.00227
xb, yb = -0.03635, 0.03273
xc, yc = 0.014, 0.072
d, da, e, ea = 28e-3, 115e-4, 2e-2, 1421e-5
rr, ra = 7e-3, 92e-5
ss, sa, sb, sc, sd = 35e-3, 1874e-5, 1043e-5, 18e-3, 2e-2
ta, tb = 2308e-5, 916e-5
u, ua, ub = 4e-2, 1228e-5, 449e-5
zf, zt, fa = 2e-2, 4e-2, 1421e-5
c0, l0 = 4530.0, 7785e-5
mom = sp.Symbol("mom")

#: Hairer & Wanner's consistent initial relative angles (β, Θ, γ, Φ, δ, Ω, ε).
ANGLES0 = (
    -0.0617138900142764496358948458001,
    0.0,
    0.455279819163070380255912382449,
    0.222668390165885884674473185609,
    0.487364979543842550225598953530,
    -0.222668390165885884674473185609,
    1.23054744454982119249735015568,
)


def absolute_angles(q: tuple) -> tuple[float, ...]:
    """(φ1, ..., φ7) from the relative angles (β, Θ, γ, Φ, δ, Ω, ε)."""
    beta, Theta, gamma, Phi, delta, Omega, eps = q
    return (beta, beta + Theta, gamma, Phi + delta, delta, Omega + eps, eps)


def _at(point: tuple[float, float], angle: float, local: tuple[float, float]) -> tuple:
    """Centroid r such that r + A(angle) local = point."""
    c, s = math.cos(angle), math.sin(angle)
    return (point[0] - (c * local[0] - s * local[1]), point[1] - (s * local[0] + c * local[1]))


# Body-fixed points (centroidal body frames).
O1, P1 = (-ra, 0.0), (rr - ra, 0.0)
P2, E2 = (da, 0.0), (da - d, 0.0)
B3, E3, D3 = (-sb, sa), (-sb, sa - ss), (sd - sb, sa - sc)
G4, E4 = (0.0, e - ea), (0.0, -ea)
A5, G5 = (-ta, -tb), (zt - ta, -tb)
H6, E6 = (fa - zf, 0.0), (fa, 0.0)
A7, H7 = (-ua, -ub), (-ua, -u - ub)


def initial_positions(q: tuple = ANGLES0) -> list[tuple[float, float, float]]:
    """[x_i, y_i, φ_i] of the seven bodies from the relative angles ``q``."""
    phi = absolute_angles(q)
    r1 = _at((0.0, 0.0), phi[0], O1)
    P = (rr * math.cos(phi[0]), rr * math.sin(phi[0]))
    r2 = _at(P, phi[1], P2)
    r3 = _at((xb, yb), phi[2], B3)
    r5 = _at((xa, ya), phi[4], A5)
    G = (xa + zt * math.cos(phi[4]), ya + zt * math.sin(phi[4]))
    r4 = _at(G, phi[3], G4)
    r7 = _at((xa, ya), phi[6], A7)
    H = (xa + u * math.sin(phi[6]), ya - u * math.cos(phi[6]))
    r6 = _at(H, phi[5], H6)
    return [(*r, p) for r, p in zip((r1, r2, r3, r4, r5, r6, r7), phi, strict=True)]


bodies = [
    planar.body(f"body{k + 1}", m[k], i[k], q0=q0) for k, q0 in enumerate(initial_positions())
]
b1, b2, b3, b4, b5, b6, b7 = bodies

model = Mechanism(
    name="andrews",
    description="Andrews' squeezing mechanism, Hairer & Wanner 1991 §VII.7 (planar bodies)",
    bodies=bodies,
    elements=[
        planar.revolute("O", GROUND, (0.0, 0.0), b1, O1),
        planar.revolute("P", b1, P1, b2, P2),
        planar.revolute("B", GROUND, (xb, yb), b3, B3),
        planar.revolute("E23", b2, E2, b3, E3),
        planar.revolute("E24", b2, E2, b4, E4),
        planar.revolute("E26", b2, E2, b6, E6),
        planar.revolute("A5", GROUND, (xa, ya), b5, A5),
        planar.revolute("G", b5, G5, b4, G4),
        planar.revolute("A7", GROUND, (xa, ya), b7, A7),
        planar.revolute("H", b7, H7, b6, H6),
        forces.tsda("spring", b3, D3, GROUND, (xc, yc), k=c0, c=0.0, l0=l0),
        forces.torque("drive", b1, mom),
    ],
    parameters={mom: 0.033},
)
