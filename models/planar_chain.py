"""Planar N-link pendulum chain (compile-time benchmarks of element kernels).

N uniform slender links (length 1 m, mass 1 kg, J = m L²/12) hinged end to end by
revolute joints (Haug 1989, Eq. 3.3.10), the first to the ground at the origin, under
gravity g = 9.81 m/s² along −y; all links start horizontal at rest.  Built with
:func:`mbdgen.model.planar.chain`; every link shares the parameters ``link_m``,
``link_J``, ``link_half``, ``link_mhalf`` and ``link_off``, so the model has three
element types (body, revolute, gravity) whatever N is.

N comes from the file name, not the environment (the compiled module's staleness
check hashes the file): this file has N = 8; a copy named ``planar_chain_64.py`` or
``planar_chain_512.py`` builds the 64- or 512-link chain under its own name.
"""

from pathlib import Path

from mbdgen.model import Mechanism, planar

NAME = Path(__file__).stem
_suffix = NAME.rsplit("_", 1)[-1]
N = int(_suffix) if _suffix.isdigit() else 8


def build_model() -> Mechanism:
    bodies, elements = planar.chain(N, link_length=1.0, mass=1.0, g=(0.0, -9.81))
    return Mechanism(
        name=NAME,
        description=f"planar {N}-link pendulum chain (revolute joints, gravity)",
        bodies=bodies,
        elements=elements,
    )
