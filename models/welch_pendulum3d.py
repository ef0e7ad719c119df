"""Three-link spatial pendulum of Welch, Hong, Trapp & Choi 2007, §VI (Eq. 79, Figs. 4-7).

Source: Welch et al. 2007, §VI "three-dimensional, three-link pendulum": three uniform
links of square cross-section whose side is one tenth of the link length, lengths
1.0, 2.0 and 2.5 m.  Link 1 is attached to the ground by a spherical joint, link 2 to
link 1 by a spherical joint, and link 3 to link 2 by a pin (revolute) joint whose axis
is perpendicular to links 2 and 3 — 3 + 3 + 5 = 11 constraints, as the paper says
(this Euler-parameter formulation adds one normalization row per body, 14 in all).
The links start vertical, hanging down along −z, at rest, under

    g = −10 [1/2, √2/2, 1/2]ᵀ m/s²   (Eq. 79).

Choices the paper leaves open (documented here):

* density 7800 kg/m³ (steel).  The motion does not depend on it: with one density
  every mass and inertia scales alike and gravity is the only load.
* the ground pivot is the origin; each body frame is parallel to the global frame at
  t = 0 (p = [1, 0, 0, 0]), its origin at the link's centroid;
* the pin's axis is the x axis (the paper only says "perpendicular to links two and
  three"; with the links along z any horizontal direction qualifies).

Each link is a uniform prism: m = ρ L a², J' = diag(m (L² + a²)/12, m (L² + a²)/12,
m a²/6) about its centroid (Haug 1989, §11.1 mass properties).
"""

import math

from mbdgen.model import GROUND, Mechanism, spatial

DENSITY = 7800.0
LENGTHS = (1.0, 2.0, 2.5)

links = []
tip = 0.0
for k, L in enumerate(LENGTHS, start=1):
    m, J = spatial.prism_inertia(L, L / 10, DENSITY, (0.0, 0.0, 1.0))
    links.append(spatial.body(f"link{k}", m, J, q0=(0.0, 0.0, tip - L / 2, 1.0, 0.0, 0.0, 0.0)))
    tip -= L
link1, link2, link3 = links
half = [L / 2 for L in LENGTHS]

model = Mechanism(
    name="welch_pendulum3d",
    description="Three-link spatial pendulum, Welch et al. 2007 §VI (Eq. 79)",
    bodies=links,
    elements=[
        spatial.spherical("ground_link1", GROUND, (0.0, 0.0, 0.0), link1, (0.0, 0.0, half[0])),
        spatial.spherical("link1_link2", link1, (0.0, 0.0, -half[0]), link2, (0.0, 0.0, half[1])),
        spatial.revolute(
            "link2_link3",
            link2,
            (0.0, 0.0, -half[1]),
            link3,
            (0.0, 0.0, half[2]),
            h_i=(1.0, 0.0, 0.0),
            h_j=(1.0, 0.0, 0.0),
        ),
        spatial.gravity(links, (-5.0, -5.0 * math.sqrt(2.0), -5.0)),
    ],
)
