"""The pendulum of tests/models/implicit_pendulum.py with its actuator lag alone, in the
implicit form τ_m Ṫ + T − u = 0 (Negrut et al. 2007, Eq. 8a)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from implicit_pendulum import mechanism  # noqa: E402

sys.path.pop(0)

model = mechanism("implicit", sensors=False, name="lag_pendulum_implicit")
